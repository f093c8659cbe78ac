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

# no script and no terminal: the script comes from stdin
[ "$(echo 'print(weft.version)' | "$W")" = "0.1.0" ] || fail "stdin"
# a REPL on a terminal (script(1) gives it one): expressions print their
# value, errors are reported and the session goes on
if command -v script >/dev/null; then
  out=$(printf '1 + 2\nx = = 1\nprint("still " .. "ok")\n' | script -q -c "$W" /dev/null 2>&1)
  echo "$out" | grep -q "^> 3" || fail "repl expression: $out"
  echo "$out" | grep -q "unexpected symbol" || fail "repl error: $out"
  echo "$out" | grep -q "still ok" || fail "repl goes on: $out"
fi
echo ok
