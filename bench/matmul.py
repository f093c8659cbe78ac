"""weft.matmul beside NumPy in the same run (issue 16's rows).

    WEFT_LIB=build/libweft.so build/venv/bin/python bench/matmul.py [rounds]

Rows (each round times weft, then NumPy, back to back, so both see the same
machine load; the table gives medians over the rounds):
  - 1024x1024 float32: weft.matmul(a, b, c, d) against NumPy's a @ b into
    a preallocated array (np.matmul(a, b, out=d)); target >= 0.9x NumPy;
  - 64x64 float32 batched x1000: weft.batched_matmul against np.matmul on
    the (1000, 64, 64) stacks; target >= 1x;
  - backward / forward of a taped 1024x1024 float32 product (gradients for
    a and b: two products of the same size); target <= 2.2.
Ratios are weft's speed over NumPy's (> 1: weft is faster).
"""
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import numpy as np  # noqa: E402

import weft  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
SETTLE = 0.3  # seconds between the two sides (see row)

rt = weft.Runtime()
rt.exec("""
  function fwd(a, b, c, d, n)
    for _ = 1, n do weft.matmul(a, b, c, d) end
  end
  function bfwd(a, b, c, d, n)
    for _ = 1, n do weft.batched_matmul(a, b, c, d) end
  end
  -- record one product with gradients for a and b, then time backward
  function taped(a, b, c, d)
    A, B, C, D = weft.clone(a, { requires_grad = true }), weft.clone(b, { requires_grad = true }),
                 weft.clone(c), weft.clone(d)
    SEED = weft.ones(D.shape)
    TAPE = weft.Tape()
    TAPE:record(function() weft.matmul(A, B, C, D) end)
  end
  function bwd(n)
    for _ = 1, n do TAPE:backward{ grads = { [D] = SEED } } end
  end
  function tfwd(n)
    for _ = 1, n do weft.matmul(A, B, C, D) end
  end
""")


def timed(f, n):
    t0 = time.perf_counter()
    f(n)
    return (time.perf_counter() - t0) / n


def row(name, weft_fn, np_fn, n, target):
    weft_fn(1)  # warm up (libraries loaded, threads started)
    np_fn(1)
    ws, ns = [], []
    for _ in range(ROUNDS):
        # Two OpenBLAS copies (weft's and NumPy's bundled one) each keep
        # their threads spinning for a while after a call; on 2 cores the
        # side timed next would share them with the other's spinners.
        time.sleep(SETTLE)
        ws.append(timed(weft_fn, n))
        time.sleep(SETTLE)
        ns.append(timed(np_fn, n))
    ratios = [b / a for a, b in zip(ws, ns)]
    print("%-28s weft %8.3f ms  numpy %8.3f ms  speed ratio %.2fx (target %s)"
          % (name, statistics.median(ws) * 1e3, statistics.median(ns) * 1e3,
             statistics.median(ratios), target))


rng = np.random.default_rng(0)
a = rng.standard_normal((1024, 1024)).astype(np.float32)
b = rng.standard_normal((1024, 1024)).astype(np.float32)
c = np.zeros((1024, 1024), np.float32)
d = np.zeros((1024, 1024), np.float32)
wa, wb, wc, wd = (weft.asarray(x, runtime=rt) for x in (a, b, c, d))
row("1024x1024 float32", lambda n: rt.call("fwd", wa, wb, wc, wd, n, nresults=0),
    lambda n: [np.matmul(a, b, out=d) for _ in range(n)], 5, ">= 0.9x")

x = rng.standard_normal((1000, 64, 64)).astype(np.float32)
y = rng.standard_normal((1000, 64, 64)).astype(np.float32)
z = np.zeros((1000, 64, 64), np.float32)
wx, wy, wz = (weft.asarray(v, runtime=rt) for v in (x, y, z))
row("64x64 batched x1000", lambda n: rt.call("bfwd", wx, wy, wz, wz, n, nresults=0),
    lambda n: [np.matmul(x, y, out=z) for _ in range(n)], 5, ">= 1x")

rt.call("taped", wa, wb, wc, wd, nresults=0)
rt.call("bwd", 1, nresults=0)
rt.call("tfwd", 1, nresults=0)
fw, bw = [], []
for _ in range(ROUNDS):
    fw.append(timed(lambda n: rt.call("tfwd", n, nresults=0), 5))
    bw.append(timed(lambda n: rt.call("bwd", n, nresults=0), 5))
print("%-28s forward %8.3f ms  backward %8.3f ms  backward/forward %.2f (target <= 2.2)"
      % ("taped 1024x1024 float32", statistics.median(fw) * 1e3, statistics.median(bw) * 1e3,
         statistics.median([q / p for p, q in zip(fw, bw)])))
rt.exec("lib = weft.blas_library()")
print("BLAS: %s; NumPy's: %s" % (rt["lib"], np.__version__))
