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
