#!/usr/bin/env bash
# Ctrl-C in the weft command line: SIGINT stops an endless kernel or an
# interpreted Lua loop with "file:line: interrupted" and exit status 130
# (weft_interrupt); a second SIGINT ends a loop LuaJIT has compiled (the
# debug hook never runs there). The CLI keeps os.exit.
set -euo pipefail
W="$BUILD/weft"
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
export WEFT_CACHE_DIR="$tmp/cache"

# Start weft on a script in the background; wait until it printed "running".
start() {
  "$W" "$1" > "$tmp/out.txt" 2> "$tmp/err.txt" &
  pid=$!
  for _ in $(seq 200); do
    grep -q running "$tmp/out.txt" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || fail "$1 ended early: $(cat "$tmp/err.txt")"
    sleep 0.05
  done
  fail "$1 did not start"
}

# Wait for weft to end (at most 10 s); sets rc.
finish() {
  for _ in $(seq 200); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -0 "$pid" 2>/dev/null && fail "weft did not stop after SIGINT"
  rc=0
  wait "$pid" || rc=$?
  pid=
}

# an endless kernel: the launch line reports the interrupt
cat > "$tmp/kernel.lua" <<'LUA'
local k = weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid()
  while x[i] >= 0.0 do x[i] = x[i] + 1.0 end
end }
local x = weft.zeros(10000)
print("running")
io.stdout:flush()
weft.launch(k, 10000, { x })
print("not reached")
LUA
start "$tmp/kernel.lua"
sleep 0.2
kill -INT "$pid"
finish
[ "$rc" = 130 ] || fail "kernel: exit status $rc, expected 130"
grep -q "kernel.lua:8: interrupted" "$tmp/err.txt" || fail "kernel: message: $(cat "$tmp/err.txt")"
grep -q "not reached" "$tmp/out.txt" && fail "kernel: the script went on"

# an endless interpreted Lua loop: stopped by the debug hook at its line
cat > "$tmp/loop.lua" <<'LUA'
jit.off()
print("running")
io.stdout:flush()
local n = 0
while true do n = n + 1 end
LUA
start "$tmp/loop.lua"
kill -INT "$pid"
finish
[ "$rc" = 130 ] || fail "Lua loop: exit status $rc, expected 130"
grep -q "loop.lua:5: interrupted" "$tmp/err.txt" || fail "Lua loop: message: $(cat "$tmp/err.txt")"

# a loop compiled to machine code does not see the hook: the second
# SIGINT ends the process (killed by SIGINT: status 130 from the shell)
cat > "$tmp/jit.lua" <<'LUA'
print("running")
io.stdout:flush()
local n = 0
while true do n = n + 1 end
LUA
start "$tmp/jit.lua"
sleep 0.2
kill -INT "$pid"
sleep 0.3
kill -INT "$pid" 2>/dev/null || true
finish
[ "$rc" = 130 ] || fail "compiled loop: exit status $rc, expected 130"

# os.exit works in the CLI (hosts may sandbox it; the CLI does not)
rc=0
"$W" -e 'os.exit(3)' || rc=$?
[ "$rc" = 3 ] || fail "os.exit: exit status $rc, expected 3"
echo "interrupt.sh: ok"
