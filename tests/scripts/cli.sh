#!/usr/bin/env bash
# The weft command line: -v, -e, info, scripts with arguments, errors, stdin.
set -euo pipefail
W="$BUILD/weft"
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

[ "$("$W" -v)" = "weft 0.1.0" ] || fail "-v"
[ "$("$W" -e 'print(1 + 2)')" = "3" ] || fail "-e"
"$W" info | grep -q "^LLVM     16" || fail "info LLVM"
"$W" info | grep -q "^threads  [0-9]" || fail "info threads"
"$W" info | grep -q "^CUDA" || fail "info CUDA"
"$W" info | grep -qE "^NVRTC    ([0-9]+\.[0-9]+|not found)" || fail "info NVRTC"

cat > "$tmp/args.lua" <<'LUA'
local a, b = ...
print(arg[0], arg[1], arg[2], a, b, #arg)
LUA
out=$("$W" "$tmp/args.lua" x y)
[ "$out" = "$tmp/args.lua	x	y	x	y	2" ] || fail "script args: $out"

# errors: message, traceback, non-zero exit
printf 'local function f()\n  error("boom")\nend\nf()\n' > "$tmp/err.lua"
if "$W" "$tmp/err.lua" 2> "$tmp/err.txt"; then fail "error exit status"; fi
grep -q "err.lua:2: boom" "$tmp/err.txt" || fail "error message: $(cat "$tmp/err.txt")"
grep -q "stack traceback" "$tmp/err.txt" || fail "traceback"
if "$W" -e 'x = = 1' 2>/dev/null; then fail "syntax error exit"; fi
if "$W" /nonexistent.lua 2>/dev/null; then fail "missing file exit"; fi
if "$W" --bogus 2>/dev/null; then fail "bad option exit"; fi

# WEFT_DUMP prints each stage of a kernel on stderr: IR, adjoint, LLVM, CUDA C
cat > "$tmp/dump.lua" <<'LUA'
local k = weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid(); x[i] = x[i] * 2.0 end }
local x = weft.ones(4, weft.float32, { requires_grad = true })
local tape = weft.Tape()
tape:record(function() weft.launch(k, 4, { x }) end)
tape:backward{ grads = { [x] = weft.ones(4) } }
k:source("cuda")
LUA
WEFT_CACHE_DIR=off WEFT_DUMP=ir,ad,llvm,cuda "$W" "$tmp/dump.lua" 2> "$tmp/dump.txt" || fail "dump run"
grep -q "kernel @k(" "$tmp/dump.txt" || fail "WEFT_DUMP=ir"
grep -q "kernel @adj_k(" "$tmp/dump.txt" || fail "WEFT_DUMP=ad"
grep -q "^define " "$tmp/dump.txt" || fail "WEFT_DUMP=llvm"
grep -q '__global__ void weft_k' "$tmp/dump.txt" || fail "WEFT_DUMP=cuda"
[ -z "$(WEFT_CACHE_DIR=off "$W" "$tmp/dump.lua" 2>&1)" ] || fail "nothing on stderr without WEFT_DUMP"

# no script and no terminal: the script comes from stdin
[ "$(echo 'print(weft.version)' | "$W")" = "0.1.0" ] || fail "stdin"
# a REPL on a terminal (script(1) gives it one): expressions print their
# value, errors are reported and the session goes on
if command -v script >/dev/null; then
  out=$(printf '1 + 2\nx = = 1\nprint("still " .. "ok")\n' | WEFT_NO_READLINE=1 script -q -c "$W" /dev/null 2>&1)
  echo "$out" | grep -q "^> 3" || fail "repl expression: $out"
  echo "$out" | grep -q "unexpected symbol" || fail "repl error: $out"
  echo "$out" | grep -q "still ok" || fail "repl goes on: $out"
fi

# kernels from chunks without a file: -e, stdin, and the error naming the
# way out when a chunk's text is unknown
cat > "$tmp/k.lua" <<'LUA'
local k = weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid(); x[i] = weft.float32(i) * 2.0 end }
local x = weft.zeros(4)
weft.launch(k, 4, { x })
print(x[3])
LUA
[ "$("$W" -e "$(cat "$tmp/k.lua")")" = "6" ] || fail "kernel from -e"
[ "$("$W" < "$tmp/k.lua")" = "6" ] || fail "kernel from stdin"
[ "$("$W" - < "$tmp/k.lua")" = "6" ] || fail "kernel from stdin (-)"
if "$W" -e 'local f = loadstring("return weft.kernel{ x = weft.array(weft.float32), function(x) end }", "=pak/ai")
  weft.launch(f(), 1, { weft.zeros(1) })' 2> "$tmp/nosrc.txt"; then fail "no source: exit status"; fi
grep -q "weft.register_source(\"=pak/ai\", text)" "$tmp/nosrc.txt" || fail "no source: $(cat "$tmp/nosrc.txt")"
grep -q "lua/weft/" "$tmp/nosrc.txt" && fail "weft's own frames in: $(cat "$tmp/nosrc.txt")"
"$W" -e 'local text = "return weft.kernel{ x = weft.array(weft.float32), function(x) x[weft.tid()] = 5.0 end }"
  local k = weft.loadstring(text, "=pak/ai")()
  local x = weft.zeros(1); weft.launch(k, 1, { x }); assert(x[0] == 5)' || fail "weft.loadstring"

# a stock luajit -e: the kernel's text comes from the arg table
out=$(cd "$(dirname "$0")/../.." && WEFT_LIB="$BUILD/libweft.so" luajit -e '
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
local weft = require "weft"
local k = weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid(); x[i] = weft.float32(i) * 2.0 end }
local x = weft.zeros(4); weft.launch(k, 4, { x }); print(x[3])')
[ "$out" = "6" ] || fail "kernel from luajit -e: $out"

# a crash in a kernel (fast mode has no bounds checks) names WEFT_MODE=debug
cat > "$tmp/crash.lua" <<'LUA'
local k = weft.kernel{ x = weft.array(weft.float32), function(x)
  x[weft.tid() + 1000000000] = 1.0 end }
weft.launch(k, 1, { weft.zeros(1) })
LUA
rc=0
WEFT_MODE=fast "$W" "$tmp/crash.lua" 2> "$tmp/crash.txt" || rc=$?
[ "$rc" -ge 128 ] || fail "crash: exit status $rc"
grep -q "SIGSEGV: crashed.*WEFT_MODE=debug" "$tmp/crash.txt" || fail "crash hint: $(cat "$tmp/crash.txt")"
echo ok
