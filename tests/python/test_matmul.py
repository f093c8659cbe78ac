"""weft.matmul from Python: rt.call on NumPy arrays (strided views too) and
torch tensors without copies, and its errors as WeftError."""
import numpy as np
import pytest

import weft


def test_matmul_on_numpy_views(rt):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 4))
    b = rng.standard_normal((5, 6)).T  # 6 x 5, a transposed view: read as it is
    c = rng.standard_normal((4, 5))
    d = np.zeros((4, 5))
    rt.call("weft.matmul", a.T, b, c, d, 0.5, 2.0, nresults=0)
    np.testing.assert_allclose(d, 0.5 * a.T @ b + 2 * c, rtol=1e-12)
    x = rng.standard_normal((10, 3, 4)).astype(np.float32)
    y = rng.standard_normal((10, 4, 2)).astype(np.float32)
    z = np.empty((10, 3, 2), np.float32)
    rt.call("weft.batched_matmul", x, y, z, z, nresults=0)
    np.testing.assert_allclose(z, x @ y, rtol=1e-5, atol=1e-6)


def test_matmul_on_torch_and_errors(rt):
    torch = pytest.importorskip("torch")
    a = torch.ones(2, 3)
    d = torch.zeros(2, 2)
    rt.call("weft.matmul", a, torch.ones(3, 2), d, d, nresults=0)
    assert d.tolist() == [[3, 3], [3, 3]]
    with pytest.raises(weft.WeftError, match=r"weft.matmul: dtypes differ \(a float32, b float64\)"):
        rt.call("weft.matmul", a, torch.ones(3, 2, dtype=torch.float64), d, d, nresults=0)


def _torch_product(torch, a, b, c, alpha, beta, seed):
    """The gradients torch computes for alpha a @ b + beta c seeded with seed."""
    ta, tb, tc = (x.detach().clone().requires_grad_(True) for x in (a, b, c))
    (alpha * ta @ tb + beta * tc).backward(seed)
    return ta.grad, tb.grad, tc.grad


def test_matmul_on_a_tape_matches_torch(rt):
    # weft.matmul (and rt.call("weft.matmul")) inside `with weft.Tape` record
    # the product on the tensors' own arrays, so their .grad get gradients
    torch = pytest.importorskip("torch")
    from conftest import has_tape
    if not has_tape(rt):
        pytest.skip("no tape in this build")
    g = torch.Generator().manual_seed(1)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        for via_call in (False, True):
            a, b, c = (torch.randn(*s, generator=g, dtype=dtype).requires_grad_(True)
                       for s in ((4, 3), (3, 5), (4, 5)))
            d = torch.zeros(4, 5, dtype=dtype, requires_grad=True)
            seed = torch.randn(4, 5, generator=g, dtype=dtype)
            tape = weft.Tape(rt)
            with tape:
                if via_call:
                    rt.call("weft.matmul", a, b, c, d, 0.5, 2.0, nresults=0)
                else:
                    assert weft.matmul(a, b, c, d, alpha=0.5, beta=2.0) is d
            assert tape.launches == 1
            tape.backward(grads={d: seed})
            torch.testing.assert_close(d.detach(), 0.5 * a.detach() @ b.detach() + 2 * c.detach(),
                                       rtol=tol, atol=tol)
            for got, want in zip((a.grad, b.grad, c.grad),
                                 _torch_product(torch, a, b, c, 0.5, 2.0, seed)):
                torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_batched_matmul_then_a_kernel_on_a_tape(rt):
    # a product followed by a launch: loss = sum((a @ b + c)^2), through both
    torch = pytest.importorskip("torch")
    from conftest import has_tape
    if not has_tape(rt):
        pytest.skip("no tape in this build")
    rt.exec("""
    sumsq = weft.kernel{ d = weft.array(weft.float64, 3), l = weft.array(weft.float64),
      function(d, l) local i, j, k = weft.tid(); weft.atomic_add(l, 0, d[i][j][k] * d[i][j][k]) end }
    """)
    g = torch.Generator().manual_seed(2)
    a, b, c = (torch.randn(*s, generator=g, dtype=torch.float64).requires_grad_(True)
               for s in ((6, 2, 3), (6, 3, 4), (6, 2, 4)))
    d = torch.zeros(6, 2, 4, dtype=torch.float64, requires_grad=True)
    loss = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    tape = weft.Tape(rt)
    with tape:
        weft.batched_matmul(a, b, c, d, 1.0, 1.0)  # the runtime: the recording tape's
        rt.launch("sumsq", (6, 2, 4), inputs=[d], outputs=[loss])
    tape.backward(loss)
    # arrays of the default runtime (weft.from_torch without runtime=) on
    # a tape of rt: the product runs in rt, recorded, gradients in a.grad
    a2 = a.detach().clone().requires_grad_(True)
    d2 = torch.zeros(6, 2, 4, dtype=torch.float64, requires_grad=True)
    wd2 = weft.from_torch(d2)
    assert wd2.runtime is not rt
    tape2 = weft.Tape(rt)
    with tape2:
        weft.batched_matmul(weft.from_torch(a2), weft.from_torch(b.detach()), c.detach(), wd2,
                            1.0, 1.0)
    assert tape2.launches == 1
    tape2.backward(grads={wd2: torch.ones(6, 2, 4, dtype=torch.float64)})
    torch.testing.assert_close(a2.grad, torch.ones(6, 2, 4, dtype=torch.float64)
                               @ b.detach().transpose(1, 2))
    ta, tb, tc = (x.detach().clone().requires_grad_(True) for x in (a, b, c))
    want = ((ta @ tb + tc) ** 2).sum()
    want.backward()
    torch.testing.assert_close(loss.detach()[0], want.detach())
    for got, ref in ((a.grad, ta.grad), (b.grad, tb.grad), (c.grad, tc.grad)):
        torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)


def test_matmul_wrapper_errors(rt):
    a = np.ones((2, 3), np.float32)
    d = np.zeros((2, 2), np.float32)
    with pytest.raises(weft.WeftError, match=r"weft.matmul: a is \{2, 3\} and b is \{2, 2\}: the columns"):
        weft.matmul(a, np.ones((2, 2), np.float32), d, d, runtime=rt)
    weft.matmul(a, np.ones((3, 2), np.float32), d, d, runtime=rt)
    assert d.tolist() == [[3, 3], [3, 3]]
