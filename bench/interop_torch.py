"""Per-call cost of moving torch tensors in and out of weft, beside NVIDIA
Warp's same operations (CPU tensors), in the same run.

    WEFT_LIB=build/libweft.so build/venv/bin/python bench/interop_torch.py [calls [rounds]]

For each operation, every round times `calls` calls of weft's version and
then of Warp's, back to back, so both see the same machine load; the table
gives the median over the rounds of each side's microseconds per call and
of the per-round ratio. Operations: from_torch, to_torch, passing a torch
tensor straight to a launch, and a launch with the library's own array.
Target: weft's from_torch >= 5x faster than Warp's (build libweft in
Release: a Debug build measures the C code unoptimized).
"""
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

try:
    import torch._dynamo  # noqa: F401  (see tests/python/conftest.py)
except Exception:
    pass
import torch  # noqa: E402

import weft  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 9


def per_call(f, n=N):
    """Microseconds per call of f over n calls."""
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t0) / n * 1e6


def weft_ops(t):
    rt = weft.runtime()
    a = weft.from_torch(t)
    ops = {"from_torch": lambda: weft.from_torch(t), "to_torch": lambda: weft.to_torch(a)}
    try:
        rt.exec("""
          inc = weft.kernel{ x = weft.array(weft.float32),
            function(x) local i = weft.tid(); x[i] = x[i] + 1.0 end }
        """)
        rt.launch("inc", 1, inputs=[t])
        ops["launch(torch tensor)"] = lambda: rt.launch("inc", 1, inputs=[t])
        ops["launch(own array)"] = lambda: rt.launch("inc", 1, inputs=[a])
    except weft.WeftError as e:
        print("weft: launch not measured:", str(e).splitlines()[0])
    return ops


def warp_ops(t):
    try:
        import warp as wp
    except ImportError:
        print("warp: not installed (pip install warp-lang); no baseline")
        return {}
    wp.config.quiet = True
    wp.init()

    @wp.kernel
    def inc(x: wp.array(dtype=float)):
        i = wp.tid()
        x[i] = x[i] + 1.0

    w = wp.from_torch(t)
    wp.launch(inc, dim=1, inputs=[t], device="cpu")
    return {
        "from_torch": lambda: wp.from_torch(t),
        "to_torch": lambda: wp.to_torch(w),
        "launch(torch tensor)": lambda: wp.launch(inc, dim=1, inputs=[t], device="cpu"),
        "launch(own array)": lambda: wp.launch(inc, dim=1, inputs=[w], device="cpu"),
    }


def main():
    t = torch.zeros(1024, dtype=torch.float32)
    print("libweft: %s; %d calls per measurement, %d rounds (medians)"
          % (weft.library_path, N, ROUNDS))
    ws, wp = weft_ops(t), warp_ops(t)
    print("%-24s %12s %12s %10s" % ("operation", "weft us", "warp us", "speedup"))
    results = {}
    for k in ("from_torch", "to_torch", "launch(torch tensor)", "launch(own array)"):
        if k not in ws:
            continue
        fa, fb = ws[k], wp.get(k)
        fa()
        if fb:
            fb()
        a, b, r = [], [], []
        for _ in range(ROUNDS):
            a.append(per_call(fa))
            if fb:
                b.append(per_call(fb))
                r.append(b[-1] / a[-1])
        ma = statistics.median(a)
        mb = statistics.median(b) if b else None
        mr = statistics.median(r) if r else None
        results[k] = mr
        print("%-24s %12.2f %12s %10s" % (k, ma, "%.2f" % mb if mb else "-",
                                           "%.1fx" % mr if mr else "-"))
    if results.get("from_torch"):
        r = results["from_torch"]
        print("from_torch target (>= 5x faster than warp): %s (%.1fx)"
              % ("met" if r >= 5 else "NOT met", r))


if __name__ == "__main__":
    main()
