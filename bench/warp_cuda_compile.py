# warp_cuda_compile.py: NVIDIA Warp's CUDA compile of a small kernel, the
# baseline of bench/cuda_compile.lua. Warp generates CUDA C for the module
# and runs NVRTC to PTX for sm_80 (wp.compile_aot_module with use_ptx, which
# works without a GPU); each run writes to a fresh directory, so every run
# compiles. The first compile of the process (NVRTC loading, Warp's own
# setup) is not counted, as in the weft rows. Prints:
#   <kernel> <median ms> <runs>
# for the same saxpy and loop kernels as bench/cuda_compile.lua.
# Usage: python bench/warp_cuda_compile.py [runs]
import os
import statistics
import sys
import tempfile
import time
import types

import warp as wp

wp.config.quiet = True
wp.init()

SOURCES = {
    "saxpy": '''
import warp as wp
@wp.kernel
def saxpy(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32), a: wp.float32):
    i = wp.tid()
    y[i] = a * x[i] + y[i]
''',
    "loop": '''
import warp as wp
@wp.kernel
def loop(x: wp.array(dtype=wp.float32), n: wp.int32):
    i = wp.tid()
    acc = float(0.0)
    for k in range(1, n + 1):
        acc = acc + wp.sin(x[i] * float(k))
    x[i] = acc
''',
}


def module_of(name, src, tag):
    # a new Python module (and so a new Warp module) per run: nothing is reused
    path = os.path.join(tempfile.mkdtemp(), "wfbench_%s_%s.py" % (name, tag))
    with open(path, "w") as f:
        f.write(src)
    mod = types.ModuleType(os.path.basename(path)[:-3])
    mod.__file__ = path
    sys.modules[mod.__name__] = mod
    exec(compile(src, path, "exec"), mod.__dict__)
    return mod


def compile_once(name, tag):
    mod = module_of(name, SOURCES[name], tag)
    out = tempfile.mkdtemp()
    t0 = time.perf_counter()
    wp.compile_aot_module(mod, arch=80, module_dir=out, use_ptx=True)
    return time.perf_counter() - t0


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    compile_once("saxpy", "warmup")
    for name in ("saxpy", "loop"):
        ts = [compile_once(name, str(r)) for r in range(runs)]
        print("%s %.3f %d" % (name, statistics.median(ts) * 1e3, runs))


main()
