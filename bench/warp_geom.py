# warp_geom.py: NVIDIA Warp (warp-lang) on the CPU, the reference rows of
# bench/hashgrid.lua and bench/volume.lua: HashGrid(128^3).build of N
# uniform points in the unit cube, counting neighbours within r for each of
# them (launched in hash_grid_point_id order as Warp's examples do, then in
# tid order: thread i queries point i, the points' random order), and N
# trilinear volume_sample_f on torus.nvdb at index-space points. Warm
# launches followed by wp.synchronize() are timed. Prints
#   <name> <median seconds>
# Usage: python bench/warp_geom.py hashgrid|volume N RUNS
import glob
import os
import sys

import numpy as np
import warp as wp
from warp_cpu import median_time  # warm launch, then the median of runs

wp.config.quiet = True
wp.init()


@wp.kernel
def count(grid: wp.uint64, pts: wp.array(dtype=wp.vec3), r: float, out: wp.array(dtype=wp.int32)):
    t = wp.tid()
    i = wp.hash_grid_point_id(grid, t)
    p = pts[i]
    c = int(0)
    for j in wp.hash_grid_query(grid, p, r):
        if wp.length_sq(pts[j] - p) <= r * r:
            c += 1
    out[i] = c


@wp.kernel
def count_tid(grid: wp.uint64, pts: wp.array(dtype=wp.vec3), r: float, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    p = pts[i]
    c = int(0)
    for j in wp.hash_grid_query(grid, p, r):
        if wp.length_sq(pts[j] - p) <= r * r:
            c += 1
    out[i] = c


@wp.kernel
def sample(vol: wp.uint64, pts: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.volume_sample_f(vol, pts[i], wp.Volume.LINEAR)


def main():
    what, n, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = np.random.default_rng(1)
    if what == "hashgrid":
        r = float(sys.argv[4]) if len(sys.argv) > 4 else 0.01
        pts = wp.array(rng.random((n, 3), dtype=np.float32), dtype=wp.vec3, device="cpu")
        grid = wp.HashGrid(128, 128, 128, device="cpu")
        print("build", median_time(runs, lambda: grid.build(pts, r)))
        out = wp.zeros(n, dtype=wp.int32, device="cpu")
        print("count", median_time(max(1, runs // 3), lambda: wp.launch(count, n, [grid.id, pts, r, out], device="cpu")))
        print("total", int(out.numpy().sum()))
        t = median_time(max(1, runs // 3), lambda: wp.launch(count_tid, n, [grid.id, pts, r, out], device="cpu"))
        print("count_tid", t)
    else:
        path = glob.glob(os.path.join(os.path.dirname(wp.__file__), "tests", "assets", "torus.nvdb"))[0]
        vol = wp.Volume.load_from_nvdb(open(path, "rb"), device="cpu")
        lo, hi = np.array(sys.argv[4:7], float), np.array(sys.argv[7:10], float)
        pts = wp.array((lo + rng.random((n, 3)) * (hi - lo)).astype(np.float32), dtype=wp.vec3, device="cpu")
        out = wp.zeros(n, dtype=float, device="cpu")
        print("sample", median_time(runs, lambda: wp.launch(sample, n, [vol.id, pts, out], device="cpu")))
        print("sum", float(out.numpy().astype(np.float64).sum()))


main()
