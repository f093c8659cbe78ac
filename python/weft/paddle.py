"""Paddle interop: weft.from_paddle(t) and weft.to_paddle(a), zero copy
(the same data pointer both ways) through DLPack, dtypes and shapes kept.

Gradients map as for torch: a tensor that takes gradients (stop_gradient
False) gives an Array whose .grad views t.grad (made as zeros when
missing), so a weft tape's backward writes Paddle's gradient in place;
to_paddle of an Array that requires grad gives a tensor with
stop_gradient False, and Paddle's t.grad (which Paddle allocates itself:
it copies what is assigned to it) becomes a.grad, holding a.grad's values. Clear gradients in place
between steps (optimizer.clear_grad(), whose default set_to_zero=True keeps
the memory): a gradient that Paddle drops and makes again is a new tensor
that the Array does not see.
"""
from . import _rt

_paddle = None


def _load():
    global _paddle
    if _paddle is None:
        import paddle
        _paddle = paddle
    return _paddle


def from_paddle(t, dtype=None, requires_grad=None, runtime=None):
    """A weft Array viewing Paddle tensor t (and t.grad when t takes
    gradients, or requires_grad=True)."""
    paddle = _load()
    if not isinstance(t, paddle.Tensor):
        raise TypeError("weft.from_paddle: expected a paddle.Tensor, got %s" % type(t).__name__)
    rt = _rt(runtime)
    a = rt.import_dlpack(t, dtype, "weft.from_paddle")
    if requires_grad is None:
        requires_grad = not t.stop_gradient
    if requires_grad:
        if t.grad is None:
            t.grad = paddle.zeros_like(t)
        a.grad = rt.import_dlpack(t.grad, dtype, "weft.from_paddle (grad)")
    return a


def to_paddle(a, requires_grad=None):
    """A Paddle tensor viewing weft Array a; if a requires grad, the tensor
    takes gradients and its .grad views a.grad."""
    from ._core import Array
    paddle = _load()
    if not isinstance(a, Array):
        raise TypeError("weft.to_paddle: expected a weft.Array, got %s" % type(a).__name__)
    t = paddle.utils.dlpack.from_dlpack(a.__dlpack__())
    if requires_grad is None:
        requires_grad = a.requires_grad
    if requires_grad:
        t.stop_gradient = False
        g = a.grad
        if g is not None:
            # Paddle copies a gradient assigned to t.grad into a tensor of
            # its own: that one (with a's values) becomes a.grad
            t.grad = paddle.utils.dlpack.from_dlpack(g.__dlpack__())
            a.grad = a.runtime.import_dlpack(t.grad, None, "weft.to_paddle (grad)")
    return t
