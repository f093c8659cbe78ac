#!/usr/bin/env bash
# Kernels given to a stock luajit on stdin: a file on stdin (luajit <
# file.lua) is read again for their text; a pipe or the prompt keeps none,
# and the error says what to do instead.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export WEFT_LIB="$BUILD/libweft.so" WEFT_CACHE_DIR="$tmp/cache"
export LUA_PATH="$ROOT/lua/?.lua;$ROOT/lua/?/init.lua;;"

cat > "$tmp/k.lua" <<'LUA'
weft = require "weft"
k = weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid(); x[i] = weft.float32(i) * 3.0 end }
x = weft.zeros(4); weft.launch(k, 4, { x }); print(x[3])
LUA

# a file on stdin, with and without "-"
out=$(luajit < "$tmp/k.lua" 2>&1) || true
[ "$out" = "9" ] || fail "luajit < file.lua: $out"
out=$(luajit - < "$tmp/k.lua" 2>&1) || true
[ "$out" = "9" ] || fail "luajit - < file.lua: $out"

# a pipe: the message names the line and the ways out
want='weft: the function defined at stdin:2 has no source text: what luajit reads from its prompt or a pipe is gone once loaded'
out=$(cat "$tmp/k.lua" | luajit - 2>&1) && fail "a pipe ran: $out"
grep -qF "$want" <<<"$out" || fail "pipe message: $out"
grep -qF 'weft.loadstring([[ ... ]], "=name")()' <<<"$out" || fail "pipe hint: $out"

# the prompt (luajit -i, fed line by line): each line is a chunk "=stdin"
out=$(cat "$tmp/k.lua" | luajit -i 2>&1) || true
grep -qF "weft: the function defined at stdin:1 has no source text: what luajit reads" <<<"$out" ||
  fail "prompt message: $out"

# a file whose text is not the chunk's (luajit -i < file reads it by
# lines): not taken for the kernel's text
out=$(luajit -i < "$tmp/k.lua" 2>&1) || true
grep -qF "weft: the function defined at stdin:1 has no source text" <<<"$out" ||
  fail "luajit -i < file: $out"
echo "stdin kernels: ok"
