"""A weft kernel under jax.shard_map: a 2-D heat-diffusion stencil split by
rows over 4 CPU devices, with halo rows exchanged by jax.lax.ppermute.

    WEFT_LIB=build/libweft.so build/venv/bin/python examples/jax_shard_map.py

Each device holds a block of rows. Every step it sends its first row to
the device above and its last row to the device below, pads its block
with the rows it received (zeros at the domain's edges: a fixed boundary),
and runs the weft kernel on the padded block. The same program runs over
the GPUs or hosts of a cluster (jax.distributed.initialize() first): JAX
moves the halos, weft computes each block. The sharded result is checked
against the whole domain on one device.
"""
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as P  # noqa: E402

import weft  # noqa: E402

rt = weft.Runtime()
rt.exec("""
-- one explicit Euler step of u_t = laplacian(u) on the interior of a block
-- padded by one cell on every side
heat = weft.kernel{ u = weft.array(weft.float32, 2), alpha = weft.float32,
                    out = weft.array(weft.float32, 2),
  function(u, alpha, out)
    local i, j = weft.tid()
    local c = u[i + 1][j + 1]
    local lap = u[i][j + 1] + u[i + 2][j + 1] + u[i + 1][j] + u[i + 1][j + 2] - 4.0 * c
    out[i][j] = c + alpha * lap
  end }
""")
heat = rt.jax_kernel("heat")

N, STEPS, ALPHA = 256, 50, 0.2
ndev = len(jax.devices())
mesh = Mesh(np.array(jax.devices()), ("rows",))


def step(block, above, below):
    """One step of a block given the rows just above and below it."""
    padded = jnp.concatenate([above[None, :], block, below[None, :]], axis=0)
    padded = jnp.pad(padded, ((0, 0), (1, 1)))  # fixed zero columns
    return heat(padded, ALPHA, launch_dims=block.shape)[0]


def sharded_steps(block):
    down = [(k, k + 1) for k in range(ndev - 1)]  # my last row goes to the next device
    up = [(k + 1, k) for k in range(ndev - 1)]    # my first row goes to the previous one

    def body(_, b):
        above = jax.lax.ppermute(b[-1], "rows", down)  # the previous device's last row
        below = jax.lax.ppermute(b[0], "rows", up)     # the next device's first row
        return step(b, above, below)

    return jax.lax.fori_loop(0, STEPS, body, block)


def whole_steps(u):
    zero = jnp.zeros(u.shape[1], u.dtype)
    return jax.lax.fori_loop(0, STEPS, lambda _, b: step(b, zero, zero), u)


def main():
    x = np.linspace(-1, 1, N, dtype=np.float32)
    u0 = jnp.asarray(np.exp(-20 * (x[:, None] ** 2 + x[None, :] ** 2)), dtype=jnp.float32)
    run = jax.jit(jax.shard_map(sharded_steps, mesh=mesh, in_specs=P("rows"),
                                out_specs=P("rows")))
    u = run(u0)
    ref = jax.jit(whole_steps)(u0)
    print("devices: %d (%s); grid %dx%d, %d steps" % (ndev, jax.devices()[0].platform, N, N,
                                                      STEPS))
    print("peak %.4f -> %.4f, total heat %.3f -> %.3f; sharded vs one device: max |diff| = %g"
          % (float(u0.max()), float(u.max()), float(u0.sum()), float(u.sum()),
             float(jnp.abs(u - ref).max())))
    assert np.array_equal(np.asarray(u), np.asarray(ref))


if __name__ == "__main__":
    main()
