"""weft.matmul and weft.batched_matmul from Python (Warp's wp.matmul):

    weft.matmul(a, b, c, d, alpha=1.0, beta=0.0)    # d = alpha a @ b + beta c
    weft.batched_matmul(a, b, c, d, alpha, beta)    # 3-D arrays, batch first

a, b, c, d: weft Arrays, NumPy arrays, torch tensors, JAX arrays (anything
with an array protocol), viewed without copies; float32 or float64, of one
dtype and device. The product runs in weft's Lua layer (lua/weft/linalg.lua:
CBLAS on the cpu, cuBLAS on CUDA). Inside `with weft.Tape(...)` it is
recorded, and tape.backward adds its gradients to those of a, b and c
(a torch tensor's .grad when it requires grad).

The runtime: runtime= if given, else that of the tape recording in this
thread, else the runtime of the first weft.Array argument, else the
default one (weft.runtime()).
"""
from ._core import Array
from . import tape as _tape


def _runtime_for(args, runtime):
    if runtime is not None:
        return runtime
    t = _tape.recording()  # first: it records arrays of other runtimes too
    if t is not None:
        return t.runtime
    for x in args:
        if isinstance(x, Array) and x._rt._W is not None:
            return x._rt
    from . import runtime as default
    return default()


def _product(fname, a, b, c, d, alpha, beta, runtime):
    rt = _runtime_for((a, b, c, d), runtime)
    rt.call(fname, a, b, c, d, alpha, beta, nresults=0)
    return d


def matmul(a, b, c, d, alpha=1.0, beta=0.0, runtime=None):
    """d = alpha * a @ b + beta * c for 2-D arrays (a m x k, b k x n, c and
    d m x n); c may be d. Returns d."""
    return _product("weft.matmul", a, b, c, d, alpha, beta, runtime)


def batched_matmul(a, b, c, d, alpha=1.0, beta=0.0, runtime=None):
    """matmul over the first dimension of 3-D arrays. Returns d."""
    return _product("weft.batched_matmul", a, b, c, d, alpha, beta, runtime)
