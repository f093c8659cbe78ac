"""A jitted weft jax_kernel (y = 3x) against plain jnp and NVIDIA Warp's
FFI jax_kernel, on JAX's cpu platform, in the same run.

    WEFT_LIB=build/libweft.so build/venv/bin/python bench/jax_ffi.py [rounds]

For n = 1024 (per-call overhead) and n = 2^20 (bandwidth), every round
times a batch of jitted calls of each side back to back (each call waits
for its result), so all see the same machine load; the table gives the
median microseconds per call over the rounds and the per-round ratios.
Targets (issue 15): at n = 1024 weft within 1.5x of jnp; at n = 2^20 weft
no slower than jnp (weft's launch runs on every core, jnp's on one).
"""
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import weft  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
SIZES = ((1024, 4000), (1 << 20, 200))  # n, calls per round


def per_call(f, x, calls):
    """Microseconds per jitted call (each waits for its result)."""
    t0 = time.perf_counter()
    for _ in range(calls):
        f(x).block_until_ready()
    return (time.perf_counter() - t0) / calls * 1e6


def sides():
    rt = weft.runtime()
    rt.exec("""
      triple = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),
        function(x, y) local i = weft.tid(); y[i] = 3.0 * x[i] end }
    """)
    k = rt.jax_kernel("triple")
    out = {"jnp": jax.jit(lambda x: 3.0 * x), "weft": jax.jit(lambda x: k(x)[0])}
    try:
        import warp as wp
        wp_jax_kernel = wp.jax_kernel  # the FFI version (warp.jax_experimental.ffi before 1.10)
    except (ImportError, AttributeError):
        print("warp: not installed (pip install warp-lang); no Warp column")
        return out
    wp.config.quiet = True
    wp.init()

    @wp.kernel
    def wp_triple(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = 3.0 * x[i]

    wk = wp_jax_kernel(wp_triple)
    out["warp"] = jax.jit(lambda x: wk(x)[0])
    return out


def main():
    fs = sides()
    print("libweft: %s; jax %s; %d rounds (medians), us per jitted call"
          % (weft.library_path, jax.__version__, ROUNDS))
    print("%-9s %10s %10s %10s %12s %12s" % ("n", "jnp", "weft", "warp", "weft/jnp",
                                              "warp/weft"))
    for n, calls in SIZES:
        x = jnp.asarray(np.random.default_rng(0).random(n, dtype=np.float32))
        want = np.asarray(fs["jnp"](x))
        for name, f in fs.items():
            assert np.allclose(np.asarray(f(x)), want), name
            per_call(f, x, calls // 4)  # warm up (malloc's thresholds settle after a few frees)
        times = {name: [] for name in fs}
        r_jnp, r_warp = [], []
        for _ in range(ROUNDS):
            for name, f in fs.items():
                times[name].append(per_call(f, x, calls))
            r_jnp.append(times["weft"][-1] / times["jnp"][-1])
            if "warp" in fs:
                r_warp.append(times["warp"][-1] / times["weft"][-1])
        med = {name: statistics.median(t) for name, t in times.items()}
        print("%-9d %10.1f %10.1f %10s %11.2fx %12s" % (
            n, med["jnp"], med["weft"], "%.1f" % med["warp"] if "warp" in med else "-",
            statistics.median(r_jnp),
            "%.1fx" % statistics.median(r_warp) if r_warp else "-"))
        target = 1.5 if n == 1024 else 1.0
        print("  target weft/jnp <= %.1f: %s" % (
            target, "met" if statistics.median(r_jnp) <= target else "NOT met"))


if __name__ == "__main__":
    main()
