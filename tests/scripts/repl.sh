#!/usr/bin/env bash
# The REPL on a terminal (a pty driven by python3): chunks over several
# lines (a loop, a kernel), =expr, errors without weft's own traceback
# frames, a kernel defined at the prompt and launched later, Ctrl-C
# stopping a running kernel (back to the prompt), and readline's history
# (up arrow) when libreadline is there, and Ctrl-C at a prompt dropping
# the input; WEFT_NO_READLINE=1 reads plain lines. Each step waits for the
# prompt that follows it.
set -euo pipefail
W="$BUILD/weft"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export WEFT_CACHE_DIR="$tmp/cache" HOME="$tmp"
cat > "$tmp/drive.py" <<'PY'
import os, pty, re, select, sys, time

NOISE = re.compile(rb"\x1b\[\?2004[hl]|\r")  # bracketed-paste mode, CR

def session(argv, steps, timeout=60):
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(argv[0], argv)
    out = b""
    def until(pat):
        nonlocal out
        end = time.time() + timeout
        while time.time() < end:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    d = os.read(fd, 4096)
                except OSError:
                    return False
                if not d:
                    return False
                out = NOISE.sub(b"", out + d)
                if pat.encode() in out:
                    return True
        return False
    for send, wait, delay in steps:
        if delay:
            time.sleep(delay)
        if send is not None:
            os.write(fd, send.encode())
        if wait and not until(wait):
            sys.exit("timeout waiting for %r after sending %r; got:\n%s" % (wait, send, out.decode(errors="replace")))
        if wait:
            out_mark = out.rfind(wait.encode())
            out, rest = out[:out_mark], out[out_mark:]
            yield out.decode(errors="replace").replace("\r", "")
            out = rest[len(wait):]
    os.write(fd, b"\x04")
    os.waitpid(pid, 0)

W, readline = sys.argv[1], sys.argv[2] == "1"
P = "\n> "  # the prompt at the start of a line
steps = [
    (None, P, 0),
    ("for i = 1, 3 do\n", ">> ", 0), ("print(i * 10)\n", ">> ", 0), ("end\n", P, 0),
    ("=1 + 2\n", P, 0),
    ("k = weft.kernel{ x = weft.array(weft.float32),\n", ">> ", 0),
    ("  function(x) local i = weft.tid()\n", ">> ", 0),
    ("    x[i] = weft.float32(i) * 2.0 end }\n", P, 0),
    ("a = weft.zeros(4)\n", P, 0),
    ("=1, 'two'\n", P, 0),
    ("weft.launch(k, 4, { a })\n", P, 0),
    ("=a[3]\n", P, 0),
    ("weft.launch(k, 4, { weft.zeros(4, weft.int32) })\n", P, 0),
    ("f = weft.kernel{ x = weft.array(weft.float32), function(x)\n", ">> ", 0),
    ("  local i = weft.tid(); while x[i] >= 0.0 do x[i] = x[i] + 1.0 end end }\n", P, 0),
    ("weft.launch(f, 4, { weft.zeros(4) })\n", None, 0), ("\x03", P, 1.0),
    ("print('after ' .. 'ctrl-c')\n", P, 0),
]
if readline:
    steps.append(("\x1b[A\n", P, 0))
# Ctrl-C at the prompt and in a continuation drops the input, the REPL goes on
steps += [("print('dro' .. 'pped')", None, 0), ("\x03", P, 0.3),
          ("for i = 1, 2 do\n", ">> ", 0), ("\x03", P, 0.3),
          ("=40 + 2\n", P, 0)]
outs = list(session([W], steps))
if readline and "readline" not in outs[0]:
    sys.exit("no readline in the banner (an ASan build reads plain lines: run with 0):\n" + outs[0])
joined = "\n".join(outs)
def expect(i, text):
    if text not in outs[i]:
        sys.exit("step %d: expected %r in:\n%s\n--- whole session:\n%s" % (i, text, outs[i], joined))
expect(3, "10\n20\n30")
expect(4, "3")
expect(9, "1\ttwo")
expect(11, "6")
expect(12, "stdin:1: weft.launch: kernel 'k': parameter 'x' expects array(float32)")
if "lua/weft/" in joined or "[C]: in function 'error'" in joined:
    sys.exit("weft's own frames in a message:\n" + joined)
expect(15, "stdin:1: interrupted")
expect(16, "after ctrl-c")
n = 17
if readline:
    expect(17, "after ctrl-c")
    n = 18
expect(n + 3, "42")
if "dropped" in joined.split("'pped')")[-1]:
    sys.exit("the dropped line ran:\n" + joined)
print("ok")
PY
# readline unless libreadline is missing or the build uses ASan
rl=1
case "$(ldconfig -p 2>/dev/null)" in *libreadline.so.8*) ;; *) rl=0 ;; esac
case "$(ldd "$W" 2>/dev/null)" in *libasan*) rl=0 ;; esac
python3 "$tmp/drive.py" "$W" "$rl"
WEFT_NO_READLINE=1 python3 "$tmp/drive.py" "$W" 0
echo "repl.sh: ok"
