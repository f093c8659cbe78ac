#!/usr/bin/env bash
# cmake --install into a temporary prefix, then build examples/embed.c
# against it both ways the README shows (pkg-config, and CMake's
# find_package(weft)) and run each.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export WEFT_CACHE_DIR="$tmp/cache"
cmake --install "$BUILD" --prefix "$tmp/prefix" > "$tmp/install.log" || fail "install: $(tail "$tmp/install.log")"
for f in include/weft.h lib/libweft.so lib/pkgconfig/weft.pc lib/cmake/weft/weftConfig.cmake \
         share/lua/5.1/weft/init.lua bin/weft; do
  [ -e "$tmp/prefix/$f" ] || fail "not installed: $f"
done

# pkg-config (the README's command, with the prefix's pkgconfig dir)
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cc -o "$tmp/embed_pc" "$ROOT/examples/embed.c" $(pkg-config --cflags --libs weft) \
  -Wl,-rpath,"$tmp/prefix/lib" || fail "pkg-config build"
"$tmp/embed_pc" "$ROOT/examples/embed_sim.lua" | grep -q "embed: ok" || fail "pkg-config run"

# CMake
mkdir -p "$tmp/host"
cp "$ROOT/examples/embed.c" "$tmp/host/"
cat > "$tmp/host/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(host C)
find_package(weft 0.1 REQUIRED)
add_executable(embed embed.c)
target_link_libraries(embed PRIVATE weft::weft)
CM
cmake -S "$tmp/host" -B "$tmp/host/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/cmake.log" \
  || fail "cmake configure: $(tail "$tmp/cmake.log")"
cmake --build "$tmp/host/build" > "$tmp/build.log" || fail "cmake build: $(tail "$tmp/build.log")"
"$tmp/host/build/embed" "$ROOT/examples/embed_sim.lua" | grep -q "embed: ok" || fail "cmake run"
echo "install.sh: ok"
