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
from .tape import Tape
from .linalg import matmul, batched_matmul

__all__ = ["Runtime", "Array", "LuaRef", "WeftError", "runtime", "from_dlpack", "from_numpy",
           "from_torch", "to_torch", "from_jax", "to_jax", "library_path",
           "register_ffi_callback", "Tape", "asarray", "from_paddle", "to_paddle", "matmul",
           "batched_matmul"]

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
    if runtime_ is not None:
        return runtime_
    if _default is not None and _default._W is not None:
        return _default
    return runtime()


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


# torch, imported on first use, and the functions the hot paths call
_torch = _Tensor = _torch_to_dlpack = _torch_from_capsule = None


def _load_torch():
    global _torch, _Tensor, _torch_to_dlpack, _torch_from_capsule
    import torch
    from torch.utils import dlpack
    _torch_to_dlpack = dlpack.to_dlpack  # torch's C-level legacy export
    # torch's C-level import of a capsule (torch.from_dlpack adds ~1 us of
    # Python around it)
    _torch_from_capsule = getattr(torch._C, "_from_dlpack", dlpack.from_dlpack)
    _torch, _Tensor = torch, torch.Tensor


def from_torch(t, dtype=None, requires_grad=None, runtime=None):
    """A weft Array viewing torch tensor t. When t requires grad (or
    requires_grad=True), the array's gradient views t.grad (made as zeros if
    missing), so gradients weft computes land in t.grad."""
    if _Tensor is None:
        _load_torch()
    if not isinstance(t, _Tensor):
        raise TypeError("weft.from_torch: expected a torch.Tensor, got %s" % type(t).__name__)
    rt = runtime if runtime is not None else _default if _default is not None and \
        _default._ctx else _rt(None)
    rg = t.requires_grad
    if not rg and not requires_grad:  # the hot path: one torch call, one C call
        try:
            cap = _torch_to_dlpack(t)
        except (RuntimeError, BufferError, TypeError) as e:
            raise BufferError("weft.from_torch: cannot share this tensor: %s" % e) from None
        ctx = rt._ctx
        if dtype is None and ctx:  # Runtime._import, inlined
            a = _new(Array)
            a._h = _F.import_(ctx, cap, None, "weft.from_torch")
            a._rt = rt
            a._ref = 0
            a._dt = a._i = None
            return a
        return rt._import(cap, dtype, "weft.from_torch")
    a = rt._import(_to_dlpack(t.detach() if rg else t), dtype, "weft.from_torch")
    if requires_grad is None:
        requires_grad = rg
    if requires_grad:
        if t.grad is None:
            t.grad = _torch.zeros_like(t)
        a.grad = rt._import(_to_dlpack(t.grad), dtype, "weft.from_torch (grad)")
    return a


def _to_dlpack(t):
    """torch's C-level legacy export (the Python-level __dlpack__ costs ~8x
    more), with a clear error for what it refuses."""
    try:
        return _torch_to_dlpack(t)
    except (RuntimeError, BufferError, TypeError) as e:
        raise BufferError("weft.from_torch: cannot share this tensor: %s" % e) from None


def to_torch(a, requires_grad=None):
    """A torch tensor viewing weft Array a. If a requires grad, the tensor
    requires grad too and its .grad views a.grad."""
    if _Tensor is None:
        _load_torch()
    if not isinstance(a, Array):
        raise TypeError("weft.to_torch: expected a weft.Array, got %s" % type(a).__name__)
    h = a._header()
    d = a._dt or a._desc()
    if (a._i or a._info())[3] < 0 and d[2] >= 0:  # host memory: export in one C call
        t = _torch_from_capsule(_F.export(h, 0, d))
    else:
        t = _torch.from_dlpack(a)
    if requires_grad is None:
        requires_grad = _F.flags(h) & 1
    if requires_grad:
        t.requires_grad_(True)
        g = a.grad
        if g is not None:
            t.grad = _torch.from_dlpack(g)
    return t


def asarray(x, dtype=None, runtime=None):
    """A weft Array viewing x: anything with __dlpack__,
    __cuda_array_interface__ or __array_interface__ (see weft.protocols)."""
    from .protocols import asarray as _asarray
    return _asarray(x, dtype, runtime)


def from_paddle(t, dtype=None, requires_grad=None, runtime=None):
    """A weft Array viewing Paddle tensor t, and t.grad if t takes
    gradients (see weft.paddle)."""
    from .paddle import from_paddle as _from_paddle
    return _from_paddle(t, dtype, requires_grad, runtime)


def to_paddle(a, requires_grad=None):
    """A Paddle tensor viewing weft Array a (and a.grad): see weft.paddle."""
    from .paddle import to_paddle as _to_paddle
    return _to_paddle(a, requires_grad)


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


_F = _lib.fast
_new = object.__new__


# JAX's FFI (python/weft/jax.py, imported on first use: it imports jax)
def _jax_kernel(self, name, num_outputs=1, launch_dims=None, output_dims=None,
                in_out_argnames=(), vmap_method="broadcast_all", enable_backward=False):
    """A JAX function (jit, vmap, grad, shard_map) running the Lua kernel
    `name` as an XLA FFI call: see weft.jax."""
    from . import jax as _wj
    return _wj.jax_kernel(self, name, num_outputs, launch_dims, output_dims, in_out_argnames,
                          vmap_method, enable_backward)


def _jax_callable(self, name, num_outputs=1, output_dims=None, vmap_method="broadcast_all",
                  dtypes=None):
    """A JAX function calling the Lua function `name`, which launches
    kernels on the inputs and fills its output parameters: see weft.jax."""
    from . import jax as _wj
    return _wj.jax_callable(self, name, num_outputs, output_dims, vmap_method, dtypes)


def register_ffi_callback(name, pyfunc):
    """Register pyfunc(inputs, outputs, attrs, ctx) as the XLA FFI target
    `name` (cpu): see weft.jax."""
    from . import jax as _wj
    return _wj.register_ffi_callback(name, pyfunc)


Runtime.jax_kernel = _jax_kernel
Runtime.jax_callable = _jax_callable
