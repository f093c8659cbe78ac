# warp_cpu.py: NVIDIA Warp (warp-lang) on the CPU, the reference rows of
# bench/bench.lua: the same saxpy (n = 2^24 float32) and n-body (n = 4096
# vec3) kernels as weft's, launched on device "cpu". Kernels compile on
# first use (cached in ~/.cache/warp); only warm launches followed by
# wp.synchronize() are timed. Prints one line per benchmark:
#   <name> <median seconds>
# Usage: python bench/warp_cpu.py [runs_saxpy] [runs_nbody]
import statistics
import sys
import time

import numpy as np
import warp as wp

wp.config.quiet = True
wp.init()


@wp.kernel
def saxpy(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32), a: wp.float32):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


@wp.kernel
def nbody(pos: wp.array(dtype=wp.vec3), acc: wp.array(dtype=wp.vec3), n: wp.int32):
    i = wp.tid()
    p = pos[i]
    a = wp.vec3(0.0, 0.0, 0.0)
    for j in range(n):
        d = pos[j] - p
        r2 = wp.dot(d, d) + 0.01
        inv = 1.0 / (r2 * wp.sqrt(r2))
        a = a + d * inv
    acc[i] = a


def median_time(runs, launch):
    launch()  # compile and warm up
    wp.synchronize()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        launch()
        wp.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    runs_saxpy = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    runs_nbody = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    dev = "cpu"
    n = 1 << 24
    x = wp.full(n, 1.0, dtype=wp.float32, device=dev)
    y = wp.ones(n, dtype=wp.float32, device=dev)
    t = median_time(runs_saxpy, lambda: wp.launch(saxpy, dim=n, inputs=[x, y, 1.0001], device=dev))
    print("saxpy %.9f" % t, flush=True)

    m = 4096
    i = np.arange(m)
    p = np.stack([i % 16, (i // 16) % 16, i // 256], axis=1).astype(np.float32)
    pos = wp.array(p, dtype=wp.vec3, device=dev)
    acc = wp.zeros(m, dtype=wp.vec3, device=dev)
    t = median_time(runs_nbody, lambda: wp.launch(nbody, dim=m, inputs=[pos, acc, m], device=dev))
    print("nbody %.9f" % t, flush=True)


if __name__ == "__main__":
    main()
