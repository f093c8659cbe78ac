"""Paddle interop: from_paddle / to_paddle share memory both ways (same data
pointer), keep dtypes and shapes, and map gradients as for torch; a Paddle
optimizer steps on a weft tape's gradients (examples/paddle_adam.py trains
with Adam: tests/scripts/examples.sh runs it)."""
import numpy as np
import pytest

import weft

paddle = pytest.importorskip("paddle")

# l = sum(p[0] xs^2 + p[1] ys): dl/dp = (sum xs^2, sum ys)
LOSS = """
lin = weft.kernel{ p = weft.array(weft.float32), xs = weft.array(weft.float32),
  ys = weft.array(weft.float32), l = weft.array(weft.float32),
  function(p, xs, ys, l)
    local i = weft.tid()
    weft.atomic_add(l, 0, p[0] * xs[i] * xs[i] + p[1] * ys[i])
  end }
function grad(p, xs, ys, l)
  local tape = weft.Tape()
  tape:record(function() weft.launch(lin, #xs, { p, xs, ys }, { outputs = { l } }) end)
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
    want = [float((xs.numpy() ** 2).sum()), float(ys.numpy().sum())]
    np.testing.assert_allclose(p.grad.numpy(), want, rtol=1e-5)
    # Paddle's optimizers step on that gradient, zeroed in place between steps
    opt = paddle.optimizer.SGD(learning_rate=0.5, parameters=[p])
    opt.step()
    opt.clear_grad()
    np.testing.assert_allclose(p.numpy(), [0.5 - 0.5 * want[0], -0.25 - 0.5 * want[1]], rtol=1e-5)
    assert a.grad._ptr == p.grad.data_ptr() and not p.grad.numpy().any()


def test_gradients_to_paddle(rt):
    rt.exec("x = weft.zeros(4, weft.float32, { requires_grad = true }); x.grad[1] = 3")
    t = weft.to_paddle(rt["x"])
    assert not t.stop_gradient
    assert t.grad.numpy().tolist() == [0, 3, 0, 0]
    # Paddle's gradient tensor is now x.grad: writes show on both sides
    rt.exec("x.grad[2] = 5")
    assert t.grad.numpy().tolist() == [0, 3, 5, 0]
    assert weft.to_paddle(weft.asarray(np.zeros(2, np.float32), runtime=rt)).stop_gradient
