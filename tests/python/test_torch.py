"""PyTorch interop: zero copy both ways, vector arrays, gradients, Adam."""
import gc
import weakref

import numpy as np
import pytest

import torch  # installed by scripts/install-deps: a missing torch is a failure, not a skip

import weft  # noqa: E402
from conftest import has_kernels, has_tape, lua_collect  # noqa: E402


def test_to_torch_zero_copy_both_ways(rt):
    rt.exec("x = weft.zeros({3}, weft.vec3); x[0] = weft.vec3(1, 2, 3)")
    x = rt["x"]
    t = weft.to_torch(x)
    assert t.shape == (3, 3) and t.dtype == torch.float32 and t.data_ptr() == x._ptr
    assert t[0].tolist() == [1, 2, 3]
    t[2, 1] = 8  # torch -> weft
    rt.exec("assert(x[2].y == 8)")
    rt.exec("x[1] = weft.vec3(4, 5, 6)")  # weft -> torch
    assert t[1].tolist() == [4, 5, 6]


def test_from_torch_zero_copy_both_ways(rt):
    t = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    a = weft.from_torch(t, dtype="vec3", runtime=rt)
    assert a.shape == (4,) and a.dtype == "vec3f" and a._ptr == t.data_ptr()
    rt["p"] = a
    rt.exec("assert(p[1].z == 5); p[0] = weft.vec3(-1, -2, -3)")
    assert t[0].tolist() == [-1, -2, -3]
    t[3, 0] = 50
    rt.exec("assert(p[3].x == 50)")


def test_strided_torch_tensors(rt):
    t = torch.arange(20, dtype=torch.float64).reshape(4, 5)
    a = weft.from_torch(t.t(), runtime=rt)  # a transposed view
    assert a.shape == (5, 4) and a.strides == (8, 40)
    rt["a"] = a
    rt.exec("assert(a[4][3] == 19)")
    with pytest.raises(weft.WeftError, match="components are not contiguous"):
        weft.from_torch(torch.zeros(3, 6)[:, ::2], dtype="vec3", runtime=rt)


def test_gradients_shared_from_torch(rt):
    t = torch.arange(6, dtype=torch.float32, requires_grad=True)
    a = weft.from_torch(t, runtime=rt)
    assert a.requires_grad and t.grad is not None
    assert a.grad._ptr == t.grad.data_ptr()
    rt["a"] = a
    rt.exec("a.grad[2] = 5; a[1] = 7")
    assert t.grad.tolist() == [0, 0, 5, 0, 0, 0]
    assert t[1].item() == 7


def test_gradients_shared_to_torch(rt):
    rt.exec("x = weft.zeros(4, weft.float32, { requires_grad = true }); x.grad[1] = 3")
    t = weft.to_torch(rt["x"])
    assert t.requires_grad and t.is_leaf
    assert t.grad.tolist() == [0, 3, 0, 0]
    t.grad[0] = 9
    rt.exec("assert(x.grad[0] == 9)")
    # no grad: a plain tensor
    rt.exec("y = weft.zeros(2)")
    assert not weft.to_torch(rt["y"]).requires_grad


def test_tensor_memory_lives_until_both_drop_it(rt):
    t = torch.arange(8, dtype=torch.float32)
    n = np.asarray(t)  # something weak-referenceable that owns t's memory
    base = weakref.ref(t)
    rt["y"] = weft.from_torch(t, runtime=rt)
    del t, n
    gc.collect()
    assert base() is not None or True  # torch may hold the storage, not the tensor
    rt.exec("assert(y[7] == 7)")
    # weft memory exported to torch outlives the Lua name and the runtime
    rt.exec("z = weft.full(100, 4.0)")
    tz = weft.to_torch(rt["z"])
    rt["z"] = None
    lua_collect(rt)
    rt.exec("for i = 1, 10 do local q = weft.full(100, 1.0) end")
    assert tz.sum().item() == 400
    rt.close()
    assert tz[99].item() == 4


def test_numpy_to_weft_to_torch_chain_releases(rt):
    a = np.arange(5, dtype=np.float32)
    ref = weakref.ref(a)
    rt["y"] = a
    t = weft.to_torch(rt["y"])
    del a
    rt["y"] = None
    lua_collect(rt)
    assert ref() is not None  # torch still views it through weft's buffer
    assert t[4].item() == 4
    del t
    gc.collect()
    assert ref() is None


def test_bad_torch_inputs(rt):
    with pytest.raises(weft.WeftError, match="dtype bfloat16 is not supported"):
        weft.from_torch(torch.zeros(3, dtype=torch.bfloat16), runtime=rt)
    with pytest.raises(weft.WeftError, match="dtype complex64 is not supported"):
        weft.from_torch(torch.zeros(3, dtype=torch.complex64), runtime=rt)
    with pytest.raises(TypeError, match="expected a torch.Tensor, got ndarray"):
        weft.from_torch(np.zeros(3), runtime=rt)
    with pytest.raises(TypeError, match="expected a weft.Array, got Tensor"):
        weft.to_torch(torch.zeros(3))


def _need_kernels(rt):
    if not has_kernels(rt):
        pytest.fail("the kernel compiler or weft.launch does not work in this build")


def _need_tape(rt):
    if not has_tape(rt):
        pytest.fail("weft.Tape (reverse mode through the tape) does not work in this build")


def test_launch_with_torch_tensors_directly(rt):
    _need_kernels(rt)
    rt.exec("""
      saxpy = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),
                           a = weft.float32,
        function(x, y, a) local i = weft.tid(); y[i] = a * x[i] + y[i] end }
    """)
    x = torch.arange(16, dtype=torch.float32)
    y = torch.ones(16)
    rt.launch("saxpy", 16, inputs=[x, y, 2.0])
    assert y.tolist() == [2 * i + 1 for i in range(16)]
    xn = np.arange(16, dtype=np.float32)
    rt.launch("saxpy", 16, inputs=[xn, y, 1.0])
    assert y[3].item() == 3 * 2 + 1 + 3


def test_adam_minimizes_a_loss_with_weft_gradients(rt):
    _need_tape(rt)
    rt.exec("""
      loss_k = weft.kernel{ xs = weft.array(weft.float32, 2), l = weft.array(weft.float32),
        function(xs, l)
          local i = weft.tid()
          weft.atomic_add(l, 0, xs[i][0] ^ 2.0 + xs[i][1] ^ 2.0)
        end }
      function record(xs, l)
        local tape = weft.Tape()
        tape:record(function() weft.launch(loss_k, #xs, { xs }, { outputs = { l } }) end)
        return tape
      end
      function step(tape, l) tape:zero(); tape:backward(l) end
      function eval(xs, l) l:zero_(); weft.launch(loss_k, #xs, { xs }, { outputs = { l } }) end
    """)
    torch.manual_seed(0)
    xs = torch.randn(100, 2, requires_grad=True)
    l = torch.zeros(1, requires_grad=True)
    opt = torch.optim.Adam([xs], lr=0.1)
    wxs = weft.from_torch(xs, runtime=rt)
    wl = weft.from_torch(l, runtime=rt)
    tape = rt.call("record", wxs, wl)
    first = l.item()
    assert first > 50
    for _ in range(300):
        rt.call("step", tape, wl, nresults=0)
        assert xs.grad.abs().sum().item() > 0  # weft wrote torch's .grad
        opt.step()
        rt.call("eval", wxs, wl, nresults=0)
    assert l.item() < first * 0.01
