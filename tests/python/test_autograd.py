"""Gradients from Python without Lua tape code: weft.Tape, the torch
wrapper weft.torch.kernel_function, and arrays of another Runtime
(weft.from_torch without runtime=) keeping their gradients."""
import numpy as np
import pytest

import weft
from conftest import has_tape

torch = pytest.importorskip("torch")

LUA = """
sq = weft.kernel{ x = weft.array(weft.float32), l = weft.array(weft.float32),
  function(x, l) local i = weft.tid(); weft.atomic_add(l, 0, x[i] * x[i]) end }
function run(x, l)
  local tape = weft.Tape()
  tape:record(function() weft.launch(sq, x.shape[1], {x}, {outputs = {l}}) end)
  tape:backward(l)
end
f64 = weft.kernel{ x = weft.array(weft.float64), w = weft.array(weft.float64),
  a = weft.float64, y = weft.array(weft.float64), z = weft.array(weft.float64),
  function(x, w, a, y, z)
    local i = weft.tid()
    y[i] = weft.sin(x[i]) * a + x[i] * w[i]
    z[i] = x[i] * x[i] * w[i]
  end }
lin = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),
  function(x, y) local i = weft.tid(); y[i] = 3.0 * x[i] end }
"""


@pytest.fixture
def krt(rt):
    if not has_tape(rt):
        pytest.skip("no kernel compiler or tape in this build")
    rt.exec(LUA)
    return rt


def test_from_torch_default_runtime_keeps_gradient(krt):
    # the arrays belong to the default runtime; the tape runs in krt
    p = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    loss = torch.zeros(1, requires_grad=True)
    a, b = weft.from_torch(p), weft.from_torch(loss)
    assert a.runtime is not krt
    krt.call("run", a, b, nresults=0)
    assert loss.item() == 14.0
    assert p.grad.tolist() == [2.0, 4.0, 6.0]


def test_tape_records_launches(krt):
    p = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    loss = torch.zeros(1, requires_grad=True)
    tape = weft.Tape(krt)
    with tape:
        krt.launch("sq", 3, inputs=[p], outputs=[loss])
    krt.launch("sq", 3, inputs=[p], outputs=[loss])  # not recorded
    assert tape.launches == 1
    tape.backward(loss)
    assert loss.item() == 28.0
    assert p.grad.tolist() == [2.0, 4.0, 6.0]
    assert tape.gradients[p].numpy().tolist() == [2.0, 4.0, 6.0]
    tape.zero()
    assert p.grad.tolist() == [0.0, 0.0, 0.0]


def test_tape_chains_kernels_and_numpy(krt):
    x = np.array([1.0, 2.0], dtype=np.float32)
    xa = weft.from_numpy(x, runtime=krt)
    xa.requires_grad = True
    y = torch.zeros(2, requires_grad=True)
    loss = torch.zeros(1)
    tape = weft.Tape(krt)
    with tape:
        krt.launch("lin", 2, inputs=[xa], outputs=[y])
        krt.launch("sq", 2, inputs=[y], outputs=[loss])
    tape.backward(loss)  # d/dx sum (3x)^2 = 18 x
    assert xa.grad.numpy().tolist() == [18.0, 36.0]
    tape.reset()
    assert tape.launches == 0
    # seeds instead of a loss
    with tape:
        krt.launch("lin", 2, inputs=[xa], outputs=[y])
    tape.backward(grads={y: torch.tensor([1.0, 10.0])})
    assert xa.grad.numpy().tolist() == [3.0, 30.0]


def test_tape_records_only_inside_with(krt):
    tape = weft.Tape(krt)
    with pytest.raises(ZeroDivisionError):
        with tape:
            1 / 0
    krt.launch("lin", 2, inputs=[torch.ones(2)], outputs=[torch.zeros(2)])
    assert tape.launches == 0
    with pytest.raises(TypeError, match="give a loss or grads"):
        tape.backward()


def test_kernel_function_matches_finite_differences(krt):
    import weft.torch as wt
    f = wt.kernel_function(krt, "f64", num_outputs=2)
    x = torch.tensor([0.3, -1.2, 2.0, 0.7], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([1.5, 0.5, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    y, z = f(x, w, 0.75)
    assert torch.allclose(y, torch.sin(x) * 0.75 + x * w)
    assert torch.allclose(z, x * x * w)
    assert torch.autograd.gradcheck(lambda x, w: f(x, w, 0.75), (x, w), eps=1e-6, atol=1e-7)
    (y.sum() + 2 * z.sum()).backward()
    assert torch.allclose(x.grad, torch.cos(x.detach()) * 0.75 + w.detach()
                          + 4 * x.detach() * w.detach())


def test_kernel_function_in_a_torch_graph(krt):
    import weft.torch as wt
    lin = wt.kernel_function(krt, "lin")
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    loss = (lin(x * 2) ** 2).sum()  # (6x)^2 -> 72 x
    loss.backward()
    assert x.grad.tolist() == [72.0, -144.0]


def test_kernel_function_errors(krt):
    import weft.torch as wt
    with pytest.raises(TypeError, match="name must be a str"):
        wt.kernel_function(krt, 3)
    f = wt.kernel_function(krt, "lin")
    with pytest.raises(TypeError, match="no tensor input"):
        f(1.0)


def test_numpy_and_jax_of_the_default_runtime_launch_elsewhere(krt):
    # weft.from_numpy / from_jax without runtime= make arrays of the default
    # runtime; launched in krt they are the same memory, written in place
    x = np.array([1.0, 2.0], dtype=np.float32)
    y = np.zeros(2, dtype=np.float32)
    xa, ya = weft.from_numpy(x), weft.from_numpy(y)
    assert xa.runtime is not krt
    krt.launch("lin", 2, inputs=[xa], outputs=[ya])
    assert y.tolist() == [3.0, 6.0]
    jnp = pytest.importorskip("jax.numpy")
    xj = weft.from_jax(jnp.array([2.0, 4.0], dtype=jnp.float32))
    krt.launch("lin", 2, inputs=[xj], outputs=[ya])
    assert y.tolist() == [6.0, 12.0]


ARRAYS = """
m2 = weft.kernel{ x = weft.array(weft.float64, 2), w = weft.array(weft.float64, 2),
  y = weft.array(weft.float64, 2),
  function(x, w, y) local i, j = weft.tid(); y[i][j] = weft.sin(x[i][j]) * w[i][j] + x[i][j] * x[i][j] end }
energy = weft.kernel{ p = weft.array(weft.vec3d), s = weft.float64, e = weft.array(weft.float64),
  function(p, s, e) local i = weft.tid(); e[i] = weft.dot(p[i], p[i]) * s + weft.length(p[i]) end }
crossed = weft.kernel{ p = weft.array(weft.vec3f), q = weft.array(weft.vec3f), o = weft.array(weft.vec3f),
  function(p, q, o) local i = weft.tid(); o[i] = weft.cross(p[i], q[i]) * 2.0 end }
apply = weft.kernel{ a = weft.array(weft.mat22d), v = weft.array(weft.vec2d), o = weft.array(weft.vec2d),
  function(a, v, o) local i = weft.tid(); o[i] = a[i] * v[i] end }
"""


def test_kernel_function_on_2d_arrays(krt):
    import weft.torch as wt
    krt.exec(ARRAYS)
    f = wt.kernel_function(krt, "m2")
    g = torch.Generator().manual_seed(3)
    x, w = (torch.randn(3, 4, generator=g, dtype=torch.float64).requires_grad_(True)
            for _ in range(2))
    torch.testing.assert_close(f(x, w), torch.sin(x) * w + x * x)
    assert torch.autograd.gradcheck(f, (x, w), eps=1e-6, atol=1e-7)


def test_kernel_function_on_vec3_arrays(krt):
    # (n, 3) tensors are arrays of n vec3: the launch runs over n, the
    # outputs are shaped in elements (n, plus 3 for a vec3 output)
    import weft.torch as wt
    krt.exec(ARRAYS)
    g = torch.Generator().manual_seed(4)
    p = torch.randn(5, 3, generator=g, dtype=torch.float64, requires_grad=True)
    energy = wt.kernel_function(krt, "energy")
    e = energy(p, 0.5)
    assert e.shape == (5,) and e.dtype == torch.float64
    torch.testing.assert_close(e, (p * p).sum(1) * 0.5 + p.norm(dim=1))
    assert torch.autograd.gradcheck(lambda p: energy(p, 0.5), (p,), eps=1e-6, atol=1e-7)
    crossed = wt.kernel_function(krt, "crossed")
    a, b = (torch.randn(6, 3, generator=g).requires_grad_(True) for _ in range(2))
    o = crossed(a, b)
    assert o.shape == (6, 3) and o.dtype == torch.float32
    (o * o).sum().backward()
    ta, tb = (x.detach().clone().requires_grad_(True) for x in (a, b))
    r = torch.linalg.cross(ta, tb) * 2
    (r * r).sum().backward()
    torch.testing.assert_close(o, r)
    torch.testing.assert_close(a.grad, ta.grad)
    torch.testing.assert_close(b.grad, tb.grad)


def test_kernel_function_on_matrix_arrays(krt):
    # (n, 2, 2) tensors are arrays of n mat22
    import weft.torch as wt
    krt.exec(ARRAYS)
    apply = wt.kernel_function(krt, "apply")
    g = torch.Generator().manual_seed(5)
    a = torch.randn(4, 2, 2, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(4, 2, generator=g, dtype=torch.float64, requires_grad=True)
    o = apply(a, v)
    assert o.shape == (4, 2)
    torch.testing.assert_close(o, (a @ v.unsqueeze(-1)).squeeze(-1))
    assert torch.autograd.gradcheck(apply, (a, v), eps=1e-6, atol=1e-7)


def test_kernel_function_signature_errors(krt):
    import weft.torch as wt
    krt.exec(ARRAYS)
    with pytest.raises(weft.WeftError, match=r"kernel_function\('nope'\): no kernel named 'nope'"):
        wt.kernel_function(krt, "nope")(torch.zeros(2))
    with pytest.raises(TypeError, match=r"the kernel has 3 parameters; 1 inputs and 1 outputs"):
        wt.kernel_function(krt, "m2")(torch.zeros(2, 2, dtype=torch.float64))
