#!/bin/sh
# tests/gpu/run.sh [BUILD_DIR] -- the CUDA suite on a real GPU, one command.
# Skips cleanly (exit 0, "SKIP ...") when no driver or no CUDA device is found.
# With a device: the C tests of the CUDA backend, spec/cuda_spec.lua (which
# then checks the device), and every spec under LuaJIT with
# WEFT_TEST_DEVICE=cuda:0 so device-aware specs run their GPU cases, and
# examples/devices.lua. make test runs the same GPU sections on the emulated
# device (scripts/cuda-emu; scripts/run-tests, step cuda-emu).
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-build}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
cd "$ROOT"
export WEFT_LIB="$BUILD/libweft.so"
export LUA_PATH="$ROOT/lua/?.lua;$ROOT/lua/?/init.lua;;"
if [ ! -f "$WEFT_LIB" ]; then
  echo "SKIP: $WEFT_LIB not built (make build BUILD=...)"; exit 0
fi
n=$(luajit -e 'local w = require "weft"; io.write(#w.devices() - 1)' 2>/dev/null || echo 0)
if [ "$n" = "0" ]; then
  why=$(luajit -e 'local w = require "weft"; local ok, e = pcall(w.set_device, "cuda:0"); io.write(ok and "no device" or e)' 2>/dev/null || true)
  echo "SKIP: no CUDA device (${why:-weft did not load})"
  exit 0
fi
luajit -e 'local w = require "weft"; local i = w.cuda_device_info(0); print(("GPU: %s (%s, %.1f GiB)"):format(i.name, i.arch, i.memory / 2^30))'
for t in "$BUILD"/test_cuda_*; do "$t"; done
WEFT_TEST_DEVICE=cuda:0 luajit /usr/bin/busted spec/cuda_spec.lua
WEFT_TEST_DEVICE=cuda:0 luajit /usr/bin/busted spec/
luajit examples/devices.lua
