"""Paddle interop: from_paddle / to_paddle share memory both ways (same data
pointer), keep dtypes and shapes, and map gradients as for torch; a weft
tape's gradients drive paddle.optimizer.Adam."""
import numpy as np
import pytest

import weft

paddle = pytest.importorskip("paddle")

LOSS = """
loss_k = weft.kernel{ p = weft.array(weft.float32), xs = weft.array(weft.float32),
  ys = weft.array(weft.float32), l = weft.array(weft.float32),
  function(p, xs, ys, l)
    local i = weft.tid()
    local r = p[0] * xs[i] + p[1] - ys[i]
    weft.atomic_add(l, 0, r * r)
  end }
function grad(p, xs, ys, l)
  l:zero_()
  local tape = weft.Tape()
  tape:record(function() weft.launch(loss_k, #xs, { p, xs, ys }, { outputs = { l } }) end)
  tape:backward(l)
end
"""


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool"])
def test_zero_copy_both_ways(rt, dtype):
    t = paddle.to_tensor(np.arange(6).reshape(2, 3).astype(dtype))
    a = weft.from_paddle(t, runtime=rt)
    assert a._ptr == t.data_ptr()
    assert a.shape == (2, 3) and a.dtype == dtype
    back = weft.to_paddle(a)
    assert back.data_ptr() == a._ptr
    assert back.shape == [2, 3] and str(back.dtype).endswith(dtype)
    assert back.numpy().tolist() == t.numpy().tolist()
    if dtype == "float32":
        rt["a"] = a
        rt.exec("a[1][2] = 42")
        assert t.numpy()[1, 2] == 42 and back.numpy()[1, 2] == 42


def test_errors(rt):
    with pytest.raises(TypeError, match="weft.from_paddle: expected a paddle.Tensor, got list"):
        weft.from_paddle([1, 2], runtime=rt)
    with pytest.raises(TypeError, match="weft.to_paddle: expected a weft.Array, got Tensor"):
        weft.to_paddle(paddle.zeros([2]))


def test_gradients_from_paddle(rt):
    rt.exec(LOSS)
    xs = paddle.linspace(-1, 1, 16, dtype="float32")
    ys = 2 * xs + 1
    p = paddle.to_tensor([0.5, -0.25], stop_gradient=False)
    loss = paddle.zeros([1])
    loss.stop_gradient = False
    a = weft.from_paddle(p, runtime=rt)
    assert a.requires_grad and a.grad._ptr == p.grad.data_ptr()
    rt.call("grad", a, weft.from_paddle(xs, runtime=rt), weft.from_paddle(ys, runtime=rt),
            weft.from_paddle(loss, runtime=rt), nresults=0)
    # the same gradient from Paddle's own autograd
    q = paddle.to_tensor([0.5, -0.25], stop_gradient=False)
    ((q[0] * xs + q[1] - ys) ** 2).sum().backward()
    np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5)


def test_gradients_to_paddle(rt):
    rt.exec("x = weft.zeros(4, weft.float32, { requires_grad = true }); x.grad[1] = 3")
    t = weft.to_paddle(rt["x"])
    assert not t.stop_gradient
    assert t.grad.numpy().tolist() == [0, 3, 0, 0]
    # Paddle's gradient tensor is now x.grad: writes show on both sides
    rt.exec("x.grad[2] = 5")
    assert t.grad.numpy().tolist() == [0, 3, 5, 0]
    assert weft.to_paddle(weft.asarray(np.zeros(2, np.float32), runtime=rt)).stop_gradient


def test_adam_with_weft_gradients(rt):
    rt.exec(LOSS)
    paddle.seed(0)
    xs = paddle.linspace(-1, 1, 64, dtype="float32")
    ys = 3.0 * xs - 0.5
    p = paddle.create_parameter([2], "float32", default_initializer=paddle.nn.initializer.Constant(0.0))
    loss = paddle.zeros([1])
    opt = paddle.optimizer.Adam(learning_rate=0.05, parameters=[p])
    args = [weft.from_paddle(t, runtime=rt) for t in (p, xs, ys, loss)]
    for _ in range(300):
        opt.clear_grad()  # zeros p.grad in place: weft writes into it
        rt.call("grad", *args, nresults=0)
        opt.step()
    a, b = p.numpy().tolist()
    assert abs(a - 3) < 0.05 and abs(b + 0.5) < 0.05
