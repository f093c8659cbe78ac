"""weft for Python: run Lua kernels on NumPy, PyTorch and JAX arrays without
copies, through DLPack.

    import weft
    rt = weft.Runtime()
    rt.exec("k = weft.kernel{ ... }")
    rt.launch("k", n, inputs=[torch_tensor, 2.0])
    a = weft.from_torch(t)        # a weft.Array viewing t (and t.grad)
    t2 = weft.to_torch(a)         # a torch tensor viewing a (and a.grad)

The module-level helpers use a default Runtime (weft.runtime()); each takes
runtime= to use another.
"""
import atexit

from . import _lib
from ._core import Array, LuaRef, Runtime, WeftError, capsule_of, _close_all

__all__ = ["Runtime", "Array", "LuaRef", "WeftError", "runtime", "from_dlpack", "from_numpy",
           "from_torch", "to_torch", "from_jax", "to_jax", "library_path"]

library_path = _lib.path
atexit.register(_close_all)

_default = None


def runtime():
    """The default Runtime (made on first use)."""
    global _default
    if _default is None or _default._W is None:
        _default = Runtime()
    return _default


def _rt(runtime_):
    return runtime_ if runtime_ is not None else runtime()


def from_dlpack(x, dtype=None, runtime=None):
    """A weft Array viewing x (anything with __dlpack__, or a DLPack capsule).
    dtype (e.g. "vec3") folds x's trailing dimensions into vector/matrix
    elements."""
    return _rt(runtime).import_dlpack(x, dtype, "weft.from_dlpack")


def from_numpy(arr, dtype=None, runtime=None):
    """A weft Array viewing a NumPy array (read-only if arr is)."""
    import numpy
    if not isinstance(arr, numpy.ndarray):
        raise TypeError("weft.from_numpy: expected a numpy.ndarray, got %s" % type(arr).__name__)
    return _rt(runtime).import_dlpack(arr, dtype, "weft.from_numpy")


def from_torch(t, dtype=None, requires_grad=None, runtime=None):
    """A weft Array viewing torch tensor t. When t requires grad (or
    requires_grad=True), the array's gradient views t.grad (made as zeros if
    missing), so gradients weft computes land in t.grad."""
    import torch
    if not isinstance(t, torch.Tensor):
        raise TypeError("weft.from_torch: expected a torch.Tensor, got %s" % type(t).__name__)
    rt = _rt(runtime)
    rg = t.requires_grad
    a = rt.import_dlpack(_to_dlpack(t.detach() if rg else t), dtype, "weft.from_torch")
    if requires_grad is None:
        requires_grad = rg
    if requires_grad:
        if t.grad is None:
            t.grad = torch.zeros_like(t)
        a.grad = rt.import_dlpack(_to_dlpack(t.grad), dtype, "weft.from_torch (grad)")
    return a


def _to_dlpack(t):
    """torch's C-level legacy export (the Python-level __dlpack__ costs ~8x
    more); falls back to the protocol for what it refuses."""
    from torch.utils.dlpack import to_dlpack
    try:
        return to_dlpack(t)
    except (RuntimeError, BufferError, TypeError) as e:
        raise BufferError("weft.from_torch: cannot share this tensor: %s" % e) from None


def to_torch(a, requires_grad=None):
    """A torch tensor viewing weft Array a. If a requires grad, the tensor
    requires grad too and its .grad views a.grad."""
    import torch
    if not isinstance(a, Array):
        raise TypeError("weft.to_torch: expected a weft.Array, got %s" % type(a).__name__)
    t = torch.from_dlpack(a)
    if requires_grad is None:
        requires_grad = a.requires_grad
    if requires_grad:
        t.requires_grad_(True)
        g = a.grad
        if g is not None:
            t.grad = torch.from_dlpack(g)
    return t


def from_jax(x, dtype=None, runtime=None):
    """A weft Array viewing a JAX array (JAX buffers are meant to be
    immutable: write to them only if nothing else reads them)."""
    return _rt(runtime).import_dlpack(x, dtype, "weft.from_jax")


def to_jax(a):
    """A JAX array viewing weft Array a (JAX copies if the memory is not
    aligned the way it wants)."""
    import jax.dlpack
    if not isinstance(a, Array):
        raise TypeError("weft.to_jax: expected a weft.Array, got %s" % type(a).__name__)
    return jax.dlpack.from_dlpack(a)
