# warp_mesh.py: NVIDIA Warp (warp-lang) on the CPU, the reference rows of
# bench/mesh.lua on the same scene: a torus of NU x NV quads (2 triangles
# each), a W x H pinhole camera's rays, and a grid of closest-point queries.
# Warm runs followed by wp.synchronize() are timed. Prints
#   build|refit|rays|closest <median seconds>   and   hits <rays that hit>
# Usage: python bench/warp_mesh.py NU NV W H RUNS
import math
import statistics
import sys
import time

import numpy as np
import warp as wp

wp.config.quiet = True
wp.init()


def torus(nu, nv, R=1.0, r=0.4):
    i, j = np.meshgrid(np.arange(nu), np.arange(nv))
    u, v = 2 * math.pi * i / nu, 2 * math.pi * j / nv
    pts = np.stack([(R + r * np.cos(v)) * np.cos(u), (R + r * np.cos(v)) * np.sin(u), r * np.sin(v)], -1)
    pts = pts.reshape(-1, 3).astype(np.float32)
    a = (j % nv) * nu + i % nu
    b = (j % nv) * nu + (i + 1) % nu
    c = ((j + 1) % nv) * nu + (i + 1) % nu
    d = ((j + 1) % nv) * nu + i % nu
    idx = np.stack([a, b, c, a, c, d], -1).reshape(-1).astype(np.int32)
    return pts, idx


def camera(w, h):
    eye = np.array([0.0, -3.2, 2.2])
    fwd = -eye / np.linalg.norm(eye)
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    s = math.tan(math.radians(45.0) / 2)
    x, y = np.meshgrid(np.arange(w), np.arange(h))
    dx = (2 * (x + 0.5) / w - 1) * s
    dy = (1 - 2 * (y + 0.5) / h) * s
    d = fwd + dx[..., None] * right + dy[..., None] * up
    d /= np.linalg.norm(d, axis=-1, keepdims=True)
    return np.tile(eye, (w * h, 1)).astype(np.float32), d.reshape(-1, 3).astype(np.float32)


def grid_points():
    g = np.meshgrid(np.linspace(-1.6, 1.6, 50), np.linspace(-1.6, 1.6, 50), np.linspace(-0.6, 0.6, 40))
    return np.stack(g, -1).reshape(-1, 3).astype(np.float32)


@wp.kernel
def cast(mesh: wp.uint64, o: wp.array(dtype=wp.vec3), d: wp.array(dtype=wp.vec3), t: wp.array(dtype=float)):
    i = wp.tid()
    q = wp.mesh_query_ray(mesh, o[i], d[i], 1.0e6)
    if q.result:
        t[i] = q.t
    else:
        t[i] = -1.0


@wp.kernel
def closest(mesh: wp.uint64, p: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    q = wp.mesh_query_point_no_sign(mesh, p[i], 100.0)
    if q.result:
        out[i] = wp.length(wp.mesh_eval_position(mesh, q.face, q.u, q.v) - p[i])


def median_time(f, runs):
    """Median wall seconds; the median CPU seconds go to CPU[-1]."""
    f()
    ts, cs = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        f()
        wp.synchronize()
        ts.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
    CPU.append(statistics.median(cs))
    return statistics.median(ts)


CPU = []


def report(name, f, runs):
    print(name, median_time(f, runs))
    print(name + "_cpu", CPU[-1])


def main():
    nu, nv, w, h, runs = (int(a) for a in sys.argv[1:6])
    pts, idx = torus(nu, nv)
    P = wp.array(pts, dtype=wp.vec3, device="cpu")
    I = wp.array(idx, dtype=wp.int32, device="cpu")
    holder = {}

    def build():
        holder["m"] = wp.Mesh(points=P, indices=I)

    report("build", build, runs)
    m = holder["m"]
    report("refit", m.refit, runs)
    o, d = camera(w, h)
    O, D = wp.array(o, dtype=wp.vec3, device="cpu"), wp.array(d, dtype=wp.vec3, device="cpu")
    T = wp.zeros(w * h, dtype=float, device="cpu")
    report("rays", lambda: wp.launch(cast, dim=w * h, inputs=[m.id, O, D, T], device="cpu"), runs)
    print("hits", int((T.numpy() >= 0).sum()))
    Q = wp.array(grid_points(), dtype=wp.vec3, device="cpu")
    C = wp.zeros(Q.shape[0], dtype=float, device="cpu")
    report("closest", lambda: wp.launch(closest, dim=Q.shape[0], inputs=[m.id, Q, C], device="cpu"), runs)


main()
