"""JAX (CPU) interop: zero copy both ways, vector arrays."""
import numpy as np
import pytest

import jax  # installed by scripts/install-deps: a missing jax is a failure, not a skip
import jax.numpy as jnp  # noqa: E402

import weft  # noqa: E402
from conftest import lua_collect  # noqa: E402


def test_to_jax_zero_copy(rt):
    rt.exec("x = weft.zeros({4}, weft.vec3); x[1] = weft.vec3(1, 2, 3)")
    x = rt["x"]
    j = weft.to_jax(x)
    assert j.shape == (4, 3) and j.dtype == jnp.float32
    assert j.unsafe_buffer_pointer() == x._ptr  # weft allocations are 64-byte aligned
    assert j[1].tolist() == [1, 2, 3]
    rt.exec("x[0] = weft.vec3(9, 8, 7)")  # a weft write is seen by JAX
    assert j[0].tolist() == [9, 8, 7]


def test_from_jax_zero_copy(rt):
    ja = jnp.arange(12, dtype=jnp.float32).reshape(4, 3)
    w = weft.from_jax(ja, dtype="vec3", runtime=rt)
    assert w.shape == (4,) and w._ptr == ja.unsafe_buffer_pointer()
    rt["w"] = w
    rt.exec("assert(w[2].y == 7); w[0] = weft.vec3(42, 0, 0)")
    assert ja[0, 0].item() == 42


def test_jax_array_outlives_the_lua_name(rt):
    rt.exec("z = weft.full(64, 2.0, weft.float64)")
    j = weft.to_jax(rt["z"])
    rt["z"] = None
    lua_collect(rt)
    rt.close()
    assert float(jnp.sum(j)) == 128.0


def test_jax_results_feed_weft(rt):
    j = jnp.sin(jnp.linspace(0, 1, 8, dtype=jnp.float32))
    rt["s"] = j
    rt.exec("total = 0; for i = 0, 7 do total = total + s[i] end")
    assert rt["total"] == pytest.approx(float(jnp.sum(j)), rel=1e-6)
    assert np.allclose(weft.from_jax(j, runtime=rt).numpy(), np.asarray(j))
