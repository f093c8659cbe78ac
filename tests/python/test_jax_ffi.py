"""weft kernels inside JAX: rt.jax_kernel, rt.jax_callable and
weft.register_ffi_callback as XLA FFI targets (python/weft/jax.py,
src/interop/xla_ffi.c), under jit, vmap, grad and shard_map."""
import ctypes
import os
import resource
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import weft

KERNELS = """
scale = weft.kernel{ x = weft.array(weft.float32), s = weft.float32, y = weft.array(weft.float32),
  function(x, s, y) local i = weft.tid(); y[i] = x[i] * s end }
sincos = weft.kernel{ a = weft.array(weft.float32), s = weft.array(weft.float32),
  c = weft.array(weft.float32),
  function(a, s, c) local i = weft.tid(); s[i] = math.sin(a[i]); c[i] = math.cos(a[i]) end }
axpy_inplace = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),
  n = weft.array(weft.int32),
  function(x, y, n) local i = weft.tid(); y[i] = y[i] + 2.0 * x[i]; n[i] = i end }
fill = weft.kernel{ v = weft.float32, out = weft.array(weft.float32),
  function(v, out) local i = weft.tid(); out[i] = v + weft.float32(i) end }
matmul = weft.kernel{ a = weft.array(weft.float32, 2), b = weft.array(weft.float32, 2),
  c = weft.array(weft.float32, 2),
  function(a, b, c)
    local i, j = weft.tid()
    local s = 0.0
    for k = 0, a.shape[1] - 1 do s = s + a[i][k] * b[k][j] end
    c[i][j] = s
  end }
vnorm = weft.kernel{ v = weft.array(weft.vec3), n = weft.array(weft.float32),
  w = weft.array(weft.vec3),
  function(v, n, w) local i = weft.tid(); n[i] = weft.length(v[i]); w[i] = v[i] * 2.0 end }
energy = weft.kernel{ x = weft.array(weft.float32), k = weft.float32, e = weft.array(weft.float32),
  function(x, k, e) local i = weft.tid(); e[i] = k * x[i] * x[i] + math.sin(x[i]) end }
writes_input = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),
  function(x, y) local i = weft.tid(); x[i] = 0.0; y[i] = 1.0 end }
offset_by = weft.kernel{ x = weft.array(weft.float32), d = weft.float32, y = weft.array(weft.float32),
  function(x, d, y) local i = weft.tid(); y[i] = x[i] + d end }
generic_scale = weft.kernel{ function(x, s, y) local i = weft.tid(); y[i] = x[i] * s end }
function two_steps(x, s, y, z)
  weft.launch(scale, x.shape[1], {x, s}, {outputs = {y}})
  weft.launch(offset_by, y.shape[1], {y, 1.0}, {outputs = {z}})
end
function failing(x, y)
  error("the step diverged at t = 3")
end
"""


@pytest.fixture(scope="module")
def krt():
    r = weft.Runtime()
    r.exec(KERNELS)
    yield r
    r.close()


def test_jit_eager_and_static_scalar(krt):
    k = krt.jax_kernel("scale")
    x = jnp.arange(8, dtype=jnp.float32)
    (y,) = k(x, 3.0)
    assert np.array_equal(np.asarray(y), np.arange(8) * 3.0)
    f = jax.jit(lambda x, s: k(x, s)[0], static_argnames="s")
    assert np.array_equal(np.asarray(f(x, s=0.5)), np.arange(8) * 0.5)
    assert np.array_equal(np.asarray(f(x + 1, s=0.5)), (np.arange(8) + 1) * 0.5)


def test_generic_kernel_takes_its_types_from_the_call(krt):
    k = krt.jax_kernel("generic_scale")
    f = jax.jit(lambda x, s: k(x, s)[0], static_argnames="s")
    y = f(jnp.arange(4, dtype=jnp.float32), s=3.0)
    assert y.dtype == jnp.float32 and np.array_equal(np.asarray(y), 3.0 * np.arange(4))
    y = f(jnp.arange(4, dtype=jnp.int32), s=2)
    assert y.dtype == jnp.int32 and np.array_equal(np.asarray(y), 2 * np.arange(4))
    with pytest.raises(TypeError, match="enable_backward needs typed parameters; 'x' is generic"):
        krt.jax_kernel("generic_scale", enable_backward=True)


def test_generic_kernel_floats_take_the_arrays_float_type(krt):
    # a Python float is typed as weft.launch types a number: the float type
    # of the arrays (float16 here: float64 needs JAX's x64 mode)
    k = krt.jax_kernel("generic_scale")
    f = jax.jit(lambda x, s: k(x, s)[0], static_argnames="s")
    x = jnp.array([1.0, 3.0, -2.0], dtype=jnp.float16)
    y = f(x, s=0.1)
    want = np.array([1.0, 3.0, -2.0], np.float16) * np.float16(0.1)
    assert y.dtype == jnp.float16 and np.array_equal(np.asarray(y), want)
    y = f(jnp.array([3.0], dtype=jnp.float32), s=0.1)
    assert y.dtype == jnp.float32 and np.asarray(y)[0] == np.float32(0.1) * np.float32(3)


@pytest.mark.parametrize("method", ["broadcast_all", "sequential", "expand_dims"])
def test_vmap_methods(krt, method):
    k = krt.jax_kernel("offset_by", vmap_method=method)
    xs = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    ys = jax.jit(jax.vmap(lambda x: k(x, 10.0)[0]))(xs)
    assert np.array_equal(np.asarray(ys), np.asarray(xs) + 10)
    # explicit launch dims: the batch multiplies the first one
    ys = jax.jit(jax.vmap(lambda x: k(x, 1.0, launch_dims=4)[0]))(xs)
    assert np.array_equal(np.asarray(ys), np.asarray(xs) + 1)


def test_two_outputs_and_output_dims(krt):
    k = krt.jax_kernel("sincos", num_outputs=2)
    a = jnp.linspace(0, 3, 16, dtype=jnp.float32)
    s, c = jax.jit(k)(a)
    assert np.allclose(np.asarray(s), np.sin(np.asarray(a)), atol=1e-6)
    assert np.allclose(np.asarray(c), np.cos(np.asarray(a)), atol=1e-6)
    # outputs larger than the launch: only the launched part is written
    s, c = k(a, launch_dims=4, output_dims={"s": 4, "c": 4})
    assert s.shape == (4,) and np.allclose(np.asarray(s), np.sin(np.asarray(a[:4])), atol=1e-6)
    fill = krt.jax_kernel("fill")
    (out,) = jax.jit(lambda: fill(5.0, launch_dims=6))()
    assert np.array_equal(np.asarray(out), 5.0 + np.arange(6))


def test_in_out_argnames(krt):
    k = krt.jax_kernel("axpy_inplace", num_outputs=2, in_out_argnames=["y"])
    x = jnp.arange(5, dtype=jnp.float32)
    y = jnp.ones(5, dtype=jnp.float32)
    y2, n = jax.jit(k)(x, y)
    assert np.array_equal(np.asarray(y2), 1 + 2 * np.arange(5))
    assert np.array_equal(np.asarray(n), np.arange(5)) and n.dtype == jnp.int32
    assert np.array_equal(np.asarray(y), np.ones(5))  # the caller's array is untouched


def test_launch_dims_2d_and_vectors(krt):
    mm = krt.jax_kernel("matmul")
    a = jnp.arange(6, dtype=jnp.float32).reshape(3, 2)
    b = jnp.arange(8, dtype=jnp.float32).reshape(2, 4)
    (c,) = jax.jit(lambda a, b: mm(a, b, launch_dims=(3, 4)))(a, b)
    assert np.allclose(np.asarray(c), np.asarray(a) @ np.asarray(b))
    vn = krt.jax_kernel("vnorm", num_outputs=2)
    v = jnp.arange(12, dtype=jnp.float32).reshape(4, 3)
    n, w = jax.jit(vn)(v)
    assert w.shape == (4, 3) and n.shape == (4,)
    assert np.allclose(np.asarray(n), np.linalg.norm(np.asarray(v), axis=1), rtol=1e-6)
    assert np.array_equal(np.asarray(w), 2 * np.asarray(v))


def test_bad_arguments_name_the_argument(krt):
    k = krt.jax_kernel("scale")
    with pytest.raises(TypeError, match="argument 'x' must hold float32, got int32"):
        k(jnp.arange(4, dtype=jnp.int32), 1.0)
    with pytest.raises(TypeError, match=r"argument 'x' must have shape \(n\)"):
        k(jnp.ones((2, 2), jnp.float32), 1.0)
    with pytest.raises(ValueError, match="scalar argument 's' must be a static value"):
        jax.jit(lambda x, s: k(x, s))(jnp.ones(4, jnp.float32), 2.0)
    with pytest.raises(TypeError, match="takes 2 inputs"):
        k(jnp.ones(4, jnp.float32))
    vn = krt.jax_kernel("vnorm", num_outputs=2)
    with pytest.raises(TypeError, match=r"argument 'v' must have shape \(n, 3\) \(vec3"):
        vn(jnp.ones((4, 2), jnp.float32))
    with pytest.raises(ValueError, match="writes input 'x'.*in_out_argnames"):
        krt.jax_kernel("writes_input")(jnp.ones(3, jnp.float32))
    with pytest.raises(ValueError, match="no kernel named 'nope'"):
        krt.jax_kernel("nope")


def test_grad_matches_jax(krt):
    k = krt.jax_kernel("energy", enable_backward=True)

    def loss_weft(x):
        return jnp.sum(k(x, 1.5)[0])

    def loss_jax(x):
        return jnp.sum(1.5 * x * x + jnp.sin(x))

    x = jnp.linspace(-2, 2, 33, dtype=jnp.float32)
    g = jax.jit(jax.grad(loss_weft))(x)
    assert np.allclose(np.asarray(g), np.asarray(jax.grad(loss_jax)(x)), rtol=1e-5, atol=1e-6)
    assert float(loss_weft(x)) == pytest.approx(float(loss_jax(x)), rel=1e-5)
    # a second call with other values (the cotangents are copies: no state kept)
    g2 = jax.grad(lambda x: 2 * loss_weft(x))(x)
    assert np.allclose(np.asarray(g2), 2 * np.asarray(g), rtol=1e-6)


def test_grad_two_outputs_and_two_inputs(krt):
    k = krt.jax_kernel("sincos", num_outputs=2, enable_backward=True)
    a = jnp.linspace(-1, 2, 9, dtype=jnp.float32)
    g = jax.grad(lambda a: jnp.sum(k(a)[0]) + 2 * jnp.sum(k(a)[1]))(a)
    assert np.allclose(np.asarray(g), np.cos(np.asarray(a)) - 2 * np.sin(np.asarray(a)),
                       atol=1e-6)
    mm = krt.jax_kernel("matmul", launch_dims=(3, 4), enable_backward=True)
    x = jnp.arange(6, dtype=jnp.float32).reshape(3, 2)
    y = jnp.arange(8, dtype=jnp.float32).reshape(2, 4) / 7
    ga, gb = jax.grad(lambda x, y: jnp.sum(mm(x, y)[0] ** 2), argnums=(0, 1))(x, y)
    wa, wb = jax.grad(lambda x, y: jnp.sum((x @ y) ** 2), argnums=(0, 1))(x, y)
    assert np.allclose(np.asarray(ga), np.asarray(wa), rtol=1e-5)
    assert np.allclose(np.asarray(gb), np.asarray(wb), rtol=1e-5)


def test_jax_callable_launches_two_kernels(krt):
    f = krt.jax_callable("two_steps", num_outputs=2)
    x = jnp.arange(6, dtype=jnp.float32)
    y, z = jax.jit(lambda x: f(x, 3.0))(x)
    assert np.array_equal(np.asarray(y), 3 * np.arange(6))
    assert np.array_equal(np.asarray(z), 3 * np.arange(6) + 1)


def test_lua_error_in_callable_is_a_python_exception(krt):
    f = krt.jax_callable("failing")
    with pytest.raises(Exception, match="the step diverged at t = 3") as e:
        jax.block_until_ready(f(jnp.ones(3, jnp.float32)))
    assert "weft.jax_callable('failing')" in str(e.value)


def test_register_ffi_callback():
    seen = {}

    def twice(inputs, outputs, attrs, ctx):
        seen["attrs"] = attrs
        a = inputs[0].numpy()
        outputs[0].numpy()[...] = a * attrs["factor"]

    weft.register_ffi_callback("weft_test_twice", twice)
    x = jnp.arange(4, dtype=jnp.float32)
    call = jax.ffi.ffi_call("weft_test_twice", jax.ShapeDtypeStruct(x.shape, x.dtype))
    y = jax.jit(lambda x: call(x, factor=np.float32(2.5)))(x)
    assert np.array_equal(np.asarray(y), 2.5 * np.arange(4))
    assert seen["attrs"]["factor"] == 2.5

    def broken(inputs, outputs, attrs, ctx):
        raise ValueError("callback says no")

    weft.register_ffi_callback("weft_test_broken", broken)
    bad = jax.ffi.ffi_call("weft_test_broken", jax.ShapeDtypeStruct(x.shape, x.dtype))
    with pytest.raises(Exception, match="callback says no"):
        jax.block_until_ready(bad(x))


def test_weft_capsules_survive_jax_ffi_pycapsule(krt):
    # jax.ffi.pycapsule (called by Warp, or by a user) sets its own argtypes
    # on ctypes.pythonapi.PyCapsule_New: weft's exports must not use it
    keep = ctypes.CFUNCTYPE(None)(lambda: None)
    jax.ffi.pycapsule(ctypes.cast(keep, ctypes.c_void_p).value)
    krt.exec("cap_src = weft.full(3, 2.0)")
    a = krt["cap_src"]
    b = weft.from_dlpack(a.__dlpack__(copy=True), runtime=krt)
    assert b.numpy().tolist() == [2.0, 2.0, 2.0]


def test_debug_mode_bounds_error_is_an_exception():
    rt = weft.Runtime()
    try:
        rt.exec("weft.config.mode = 'debug'\n"
                "oob = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),\n"
                "  function(x, y) local i = weft.tid(); y[i] = x[i + 1] end }")
        k = rt.jax_kernel("oob")
        with pytest.raises(Exception, match="out of bounds"):
            jax.block_until_ready(k(jnp.ones(4, jnp.float32)))
    finally:
        rt.close()


def test_a_redefined_kernel_gets_its_own_plans():
    rt = weft.Runtime()
    try:
        rt.exec(KERNELS)
        x = jnp.ones(3, jnp.float32)
        assert float(rt.jax_kernel("offset_by")(x, 1.0)[0][0]) == 2.0
        rt.exec("offset_by = weft.kernel{ x = weft.array(weft.float32), d = weft.float32,\n"
                "  y = weft.array(weft.float32),\n"
                "  function(x, d, y) local i = weft.tid(); y[i] = x[i] - d end }")
        assert float(rt.jax_kernel("offset_by")(x, 1.0)[0][0]) == 0.0
    finally:
        rt.close()


def test_launches_follow_config_num_threads():
    from weft import jax as wj
    rt = weft.Runtime()
    try:
        rt.exec(KERNELS + "weft.config.num_threads = 1")
        k = rt.jax_kernel("offset_by")
        assert float(jax.jit(lambda x: k(x, 1.0)[0])(jnp.ones(3, jnp.float32))[0]) == 2.0
        assert wj._X.ctx_threads(k._st.ctx, -1) == 1
        rt.exec("weft.config.num_threads = nil")
        k(jnp.ones(5, jnp.float32), 1.0)  # a new trace
        assert wj._X.ctx_threads(k._st.ctx, -1) == os.cpu_count()
    finally:
        rt.close()


def test_closed_runtime_is_an_error_not_a_crash():
    rt = weft.Runtime()
    rt.exec(KERNELS)
    f = jax.jit(lambda x: rt.jax_kernel("offset_by")(x, 1.0)[0])
    x = jnp.ones(4, jnp.float32)
    assert float(f(x)[0]) == 2.0
    rt.close()
    with pytest.raises(Exception, match="is closed"):
        jax.block_until_ready(f(x))


def _rss_kb():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() // 1024


def test_ten_thousand_calls_keep_memory(krt):
    k = krt.jax_kernel("offset_by")
    f = jax.jit(lambda x: k(x, 1.0)[0])
    x = jnp.ones(256, jnp.float32)
    for _ in range(500):
        y = f(x)
    jax.block_until_ready(y)
    before = _rss_kb()
    for _ in range(10000):
        y = f(x)
    jax.block_until_ready(y)
    grown = _rss_kb() - before
    assert grown < 4096, "RSS grew by %d kB over 10,000 calls" % grown
    assert float(y[0]) == 2.0


SHARDED = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    sys.path.insert(0, %r)
    import numpy as np, jax, jax.numpy as jnp
    from jax.sharding import Mesh, PartitionSpec as P
    import weft
    rt = weft.Runtime()
    rt.exec('''energy = weft.kernel{ x = weft.array(weft.float32), k = weft.float32,
      e = weft.array(weft.float32),
      function(x, k, e) local i = weft.tid(); e[i] = k * x[i] * x[i] + math.sin(x[i]) end }''')
    k = rt.jax_kernel("energy")
    assert len(jax.devices()) == 4
    mesh = Mesh(np.array(jax.devices()), ("x",))
    x = jnp.linspace(-1, 1, 4096, dtype=jnp.float32)
    sharded = jax.jit(jax.shard_map(lambda s: k(s, 0.5)[0], mesh=mesh, in_specs=P("x"),
                                    out_specs=P("x")))
    whole = jax.jit(lambda s: k(s, 0.5)[0])
    for _ in range(20):  # the four shards run on XLA threads at once
        a = sharded(x)
    b = whole(x)
    assert np.array_equal(np.asarray(a), np.asarray(b))
    # results vary over the mesh axis as the inputs do (a loop carry keeps its type)
    loop = lambda s: jax.lax.fori_loop(0, 3, lambda _, v: k(v, 0.5)[0], s)
    c = jax.jit(jax.shard_map(loop, mesh=mesh, in_specs=P("x"), out_specs=P("x")))(x)
    assert np.array_equal(np.asarray(c), np.asarray(jax.jit(loop)(x)))
    print("sharded ok")
""")


def test_shard_map_over_four_cpu_devices():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
    r = subprocess.run([sys.executable, "-c", SHARDED % os.path.abspath(root)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "sharded ok" in r.stdout


# ---- the C handler against hand-made call frames (xla_ffi.h's ABI) ----------------
class _Ver(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("ext", ctypes.c_void_p), ("major", ctypes.c_int),
                ("minor", ctypes.c_int)]


class _ErrArgs(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("ext", ctypes.c_void_p), ("message", ctypes.c_char_p),
                ("errc", ctypes.c_int32)]


_ERR_CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_ErrArgs))


class _Api(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("ext", ctypes.c_void_p), ("version", _Ver),
                ("internal", ctypes.c_void_p), ("error_create", _ERR_CREATE)] + \
        [(n, ctypes.c_void_p) for n in ("get_message", "destroy", "register", "stream_get")]


class _List(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("ext", ctypes.c_void_p), ("n", ctypes.c_int64),
                ("types", ctypes.c_void_p), ("ptrs", ctypes.c_void_p)]


class _Attrs(ctypes.Structure):
    _fields_ = _List._fields_ + [("more", ctypes.c_void_p)]


class _Frame(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("ext", ctypes.c_void_p), ("api", ctypes.POINTER(_Api)),
                ("ctx", ctypes.c_void_p), ("stage", ctypes.c_int32), ("args", _List),
                ("rets", _List), ("attrs", _Attrs), ("future", ctypes.c_void_p)]


class _Meta(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("version", _Ver), ("traits", ctypes.c_uint32),
                ("state_type", ctypes.c_int64)]


class _MetaExt(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("type", ctypes.c_int32), ("next", ctypes.c_void_p),
                ("metadata", ctypes.POINTER(_Meta))]


def _handlers():
    from weft import jax as wj
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    proto = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_Frame))
    return [proto(get(c, None)) for c in wj._X.targets()]


def _frame(major=0, size=None):
    seen = []

    def create(a):
        seen.append((a.contents.errc, a.contents.message.decode()))
        return 4242

    cb = _ERR_CREATE(create)
    api = _Api(size=ctypes.sizeof(_Api), version=_Ver(24, None, major, 3), error_create=cb)
    f = _Frame(size=size or ctypes.sizeof(_Frame), api=ctypes.pointer(api), stage=3)
    return f, seen, (cb, api)


def test_handler_answers_metadata_and_checks_the_version():
    cpu, cuda = _handlers()
    f, seen, keep = _frame()
    meta = _Meta()
    ext = _MetaExt(size=ctypes.sizeof(_MetaExt), type=1, metadata=ctypes.pointer(meta))
    f.ext = ctypes.addressof(ext)
    assert cpu(ctypes.byref(f)) is None and (meta.version.major, meta.version.minor) == (0, 1)
    f.ext = None
    assert cpu(ctypes.byref(f)) == 4242  # no attributes: an error, not a crash
    assert "needs the attributes weft_ctx and weft_plan" in seen[-1][1]
    f, seen, keep = _frame(major=1)
    assert cpu(ctypes.byref(f)) == 4242 and "major version mismatch" in seen[-1][1]
    f, seen, keep = _frame(size=64)  # a frame older than the fields read
    assert cpu(ctypes.byref(f)) == 4242 and "older than API 0.1" in seen[-1][1]
    f, seen, keep = _frame()
    assert cuda(ctypes.byref(f)) == 4242 and "needs the attributes" in seen[-1][1]


def test_handler_refuses_buffers_that_do_not_fit_the_plan(krt):
    k = krt.jax_kernel("offset_by")
    k(jnp.ones(4, jnp.float32), 1.0)  # makes the plan
    pid = next(iter(k._plans.values()))
    call = jax.ffi.ffi_call("weft_kernel", jax.ShapeDtypeStruct((4,), jnp.float32))
    attrs = dict(weft_ctx=np.int64(k._st.ctx), dims=np.zeros(0, np.int64),
                 scalars=np.zeros(4, np.uint8))
    with pytest.raises(Exception, match="array 'x' has XLA element type 4, the kernel expects 11"):
        jax.block_until_ready(call(jnp.ones(4, jnp.int32), weft_plan=np.int64(pid), **attrs))
    with pytest.raises(Exception, match="no plan 999"):
        jax.block_until_ready(call(jnp.ones(4, jnp.float32), weft_plan=np.int64(999), **attrs))
    short = dict(attrs, scalars=np.zeros(2, np.uint8))
    with pytest.raises(Exception, match="no value for scalar 'd'"):
        jax.block_until_ready(call(jnp.ones(4, jnp.float32), weft_plan=np.int64(pid), **short))
