#!/usr/bin/env bash
# pip install . into a fresh venv (scikit-build-core builds libweft with
# CMake; the Lua layer ships inside the package), then run a kernel from a
# directory outside the checkout, with nothing pointing at the build tree.
# Kept fast: the venv gets no pip of its own (the system's pip installs
# into it with --python, where pip is 22.3 or newer), and pip's cache keeps
# scikit-build-core. libweft's build directory (build/pip/<tag>/libweft,
# python/CMakeLists.txt) survives between installs, so only the first
# install compiles it all (about 15 s of CPU); the script installs a
# second time to check that this one reuses it: 11 s before that
# directory was kept, 5 s with it (2 cores, under load).
# WEFT_PIP_BUILD_DIR: another build directory than build/pip/<tag>.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
conf=()
if [ -n "${WEFT_PIP_BUILD_DIR:-}" ]; then conf=(--config-settings="build-dir=$WEFT_PIP_BUILD_DIR"); fi
start=$(date +%s)
if python3 -m pip --help 2>/dev/null | grep -q -- "--python <python>"; then
  python3 -m venv --without-pip "$tmp/venv"
  pip=(python3 -m pip --python "$tmp/venv/bin/python")
else
  python3 -m venv "$tmp/venv"
  pip=("$tmp/venv/bin/pip")
fi
"${pip[@]}" install -q --disable-pip-version-check "${conf[@]}" "$ROOT" 2>&1 | tail -n 20
echo "pip install .: $(( $(date +%s) - start )) s"
# again: libweft's CMake cache is reused (no compiler detection, which a
# fresh build directory starts with), and only what changed is compiled
start=$(date +%s)
"${pip[@]}" install -v --disable-pip-version-check "${conf[@]}" "$ROOT" >"$tmp/again.log" 2>&1 ||
  { tail -n 30 "$tmp/again.log"; exit 1; }
if grep -q "The C compiler identification" "$tmp/again.log"; then
  echo "FAIL: the second pip install configured libweft's build from scratch"; exit 1
fi
echo "pip install . again: $(( $(date +%s) - start )) s," \
  "$(grep -c "Building C object" "$tmp/again.log" || true) C files compiled"
cd "$tmp"
unset WEFT_LIB WEFT_LUA_DIR PYTHONPATH
WEFT_CACHE_DIR="$tmp/cache" "$tmp/venv/bin/python" - <<'PY'
import os
import weft

site = os.path.dirname(weft.__file__)
assert weft.library_path == os.path.join(site, "libweft.so"), weft.library_path
assert os.path.exists(os.path.join(site, "lua", "weft", "init.lua"))
rt = weft.Runtime()
rt.exec("""
k = weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid(); x[i] = weft.float32(i) * 2.0 end }
y = weft.zeros(4); weft.launch(k, 4, {y}); s = y[3]
""")
assert rt["s"] == 6.0, rt["s"]
try:
    rt.exec("local k = weft.kernel{ function(x) local i = weft.tid(); x[i] = 1.0 .. 'a' end }\n"
            "weft.launch(k, 1, {weft.zeros(1)})", "=installed")
    raise SystemExit("FAIL: no error")
except weft.WeftError as e:
    assert str(e).startswith("installed:1:"), str(e)
print("pip install: weft %s from %s runs kernels" % (weft.__name__, site))
PY
