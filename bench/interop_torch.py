"""Per-call cost of moving torch tensors in and out of weft, beside NVIDIA
Warp's same operations (CPU tensors), in the same run.

    WEFT_LIB=build/libweft.so build/venv/bin/python bench/interop_torch.py [iterations]

Prints microseconds per call and weft's speedup over Warp for: from_torch,
passing a torch tensor straight to a launch, and to_torch. Target: weft's
from_torch >= 5x faster than Warp's.
"""
import os
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


def per_call(f, n=N):
    """Best of 3 runs of n calls, in microseconds per call."""
    f()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def bench_weft(t):
    rt = weft.runtime()
    out = {"from_torch": per_call(lambda: weft.from_torch(t))}
    a = weft.from_torch(t)
    out["to_torch"] = per_call(lambda: weft.to_torch(a))
    try:
        rt.exec("""
          inc = weft.kernel{ x = weft.array(weft.float32),
            function(x) local i = weft.tid(); x[i] = x[i] + 1.0 end }
        """)
        rt.launch("inc", 1, inputs=[t])
        out["launch(torch tensor)"] = per_call(lambda: rt.launch("inc", 1, inputs=[t]))
        out["launch(weft array)"] = per_call(lambda: rt.launch("inc", 1, inputs=[a]))
    except weft.WeftError as e:
        print("weft: launch not measured:", str(e).splitlines()[0])
    return out


def bench_warp(t):
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

    out = {"from_torch": per_call(lambda: wp.from_torch(t))}
    w = wp.from_torch(t)
    out["to_torch"] = per_call(lambda: wp.to_torch(w))
    wp.launch(inc, dim=1, inputs=[t], device="cpu")
    out["launch(torch tensor)"] = per_call(lambda: wp.launch(inc, dim=1, inputs=[t], device="cpu"))
    out["launch(weft array)"] = per_call(lambda: wp.launch(inc, dim=1, inputs=[w], device="cpu"))
    return out


def main():
    t = torch.zeros(1024, dtype=torch.float32)
    print("libweft: %s; %d calls per measurement" % (weft.library_path, N))
    ws = bench_weft(t)
    wp = bench_warp(t)
    print("%-24s %12s %12s %10s" % ("operation", "weft us", "warp us", "speedup"))
    for k in ("from_torch", "to_torch", "launch(torch tensor)", "launch(weft array)"):
        a, b = ws.get(k), wp.get(k)
        ratio = "%.1fx" % (b / a) if a and b else "-"
        print("%-24s %12s %12s %10s" % (k if k != "launch(weft array)" else "launch(own array)",
                                         "%.2f" % a if a else "-", "%.2f" % b if b else "-",
                                         ratio))
    if ws.get("from_torch") and wp.get("from_torch"):
        r = wp["from_torch"] / ws["from_torch"]
        print("from_torch target (>= 5x faster than warp): %s (%.1fx)"
              % ("met" if r >= 5 else "NOT met", r))


if __name__ == "__main__":
    main()
