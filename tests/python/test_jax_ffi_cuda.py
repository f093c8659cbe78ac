"""The CUDA target of weft's XLA FFI handler (src/interop/xla_ffi.c) on the
emulated device: run through scripts/cuda-emu, skipped otherwise. The
CPU-only jaxlib never calls a CUDA target, so these tests call the handler
as XLA would: a hand-made call frame (xla_ffi.h's ABI) holding device
buffers from the driver, an API table whose stream and device-ordinal
getters answer a stream of ours, then a stream sync and the results read
back. Also: the handler only queues (no host sync), and its errors."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

import jax.numpy as jnp

import weft
from weft import jax as wj

EMU = os.environ.get("WEFT_CUDA_EMU_LIB")
pytestmark = pytest.mark.skipif(not EMU or not os.environ.get("WEFT_LIBCUDA"),
                                reason="not under scripts/cuda-emu")

KERNELS = """
scale = weft.kernel{ x = weft.array(weft.float32), s = weft.float32, y = weft.array(weft.float32),
  function(x, s, y) local i = weft.tid(); y[i] = x[i] * s end }
vnorm = weft.kernel{ v = weft.array(weft.vec3), n = weft.array(weft.float32),
  w = weft.array(weft.vec3),
  function(v, n, w) local i = weft.tid(); n[i] = weft.length(v[i]); w[i] = v[i] * 2.0 end }
shift = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),
  function(x, y) local i = weft.tid(); y[i] = x[i + 1] end }
energy = weft.kernel{ x = weft.array(weft.float32), k = weft.float32, e = weft.array(weft.float32),
  function(x, k, e) local i = weft.tid(); e[i] = k * x[i] * x[i] + math.sin(x[i]) end }
"""

NOT_READY = 600  # CUDA_ERROR_NOT_READY


class Driver:
    """Device memory and a stream of cuda:dev, straight from the emulator."""

    def __init__(self, dev=0):
        self.lib = ctypes.CDLL(EMU)
        self.lib.cuInit(0)
        self.ctx, self.dev = ctypes.c_void_p(), dev
        assert self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev) == 0
        self.lib.cuCtxSetCurrent(self.ctx)
        self.stream = ctypes.c_void_p()
        assert self.lib.cuStreamCreate(ctypes.byref(self.stream), 0) == 0
        self.ptrs = []

    def put(self, a):
        a = np.ascontiguousarray(a)
        self.lib.cuCtxSetCurrent(self.ctx)
        p = ctypes.c_uint64()
        assert self.lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(max(a.nbytes, 1))) == 0
        assert self.lib.cuMemcpyHtoD_v2(p, ctypes.c_void_p(a.ctypes.data),
                                        ctypes.c_size_t(a.nbytes)) == 0
        self.ptrs.append(p.value)
        return p.value

    def get(self, ptr, shape, dtype=np.float32):
        self.lib.cuCtxSetCurrent(self.ctx)
        out = np.empty(shape, dtype)
        assert self.lib.cuMemcpyDtoH_v2(ctypes.c_void_p(out.ctypes.data), ctypes.c_uint64(ptr),
                                        ctypes.c_size_t(out.nbytes)) == 0
        return out

    def sync(self):
        return self.lib.cuStreamSynchronize(self.stream)

    def query(self):
        return self.lib.cuStreamQuery(self.stream)

    def stats(self):
        c = (ctypes.c_int64 * 7)()  # allocs, bytes, leaks, misuse, launches, compiles, faults
        self.lib.wf_cuemu_stats(c)
        return list(c)

    def close(self):
        self.lib.cuCtxSetCurrent(self.ctx)
        for p in self.ptrs:
            self.lib.cuMemFree_v2(ctypes.c_uint64(p))
        self.lib.cuStreamDestroy_v2(self.stream)
        self.lib.cuDevicePrimaryCtxRelease_v2(self.dev)


# ---- xla_ffi.h's structs, as XLA lays them out ---------------------------------------
P, I32, I64, SZ = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_size_t


class Buffer(ctypes.Structure):
    _fields_ = [("size", SZ), ("ext", P), ("dtype", I32), ("data", P), ("rank", I64),
                ("dims", ctypes.POINTER(I64))]


class List(ctypes.Structure):
    _fields_ = [("size", SZ), ("ext", P), ("n", I64), ("types", ctypes.POINTER(I32)),
                ("ptrs", ctypes.POINTER(P))]


class Attrs(ctypes.Structure):
    _fields_ = List._fields_[:4] + [("names", ctypes.POINTER(P)), ("ptrs", ctypes.POINTER(P))]


class Span(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_char_p), ("len", SZ)]


class Scalar(ctypes.Structure):
    _fields_ = [("dtype", I32), ("value", P)]


class Array(ctypes.Structure):
    _fields_ = [("dtype", I32), ("size", SZ), ("data", P)]


class ErrArgs(ctypes.Structure):
    _fields_ = [("size", SZ), ("ext", P), ("message", ctypes.c_char_p), ("errc", I32)]


class StreamArgs(ctypes.Structure):
    _fields_ = [("size", SZ), ("ext", P), ("ctx", P), ("stream", P)]


class DeviceArgs(ctypes.Structure):
    _fields_ = [("size", SZ), ("ext", P), ("ctx", P), ("ordinal", I32)]


ERR_CREATE = ctypes.CFUNCTYPE(P, ctypes.POINTER(ErrArgs))
STREAM_GET = ctypes.CFUNCTYPE(P, ctypes.POINTER(StreamArgs))
DEVICE_GET = ctypes.CFUNCTYPE(P, ctypes.POINTER(DeviceArgs))


class Api(ctypes.Structure):
    _fields_ = [("size", SZ), ("ext", P), ("vsize", SZ), ("vext", P), ("major", ctypes.c_int),
                ("minor", ctypes.c_int), ("internal", P), ("error_create", ERR_CREATE),
                ("get_message", P), ("destroy", P), ("register", P), ("stream_get", STREAM_GET),
                ("unused", P * 12), ("device_get", DEVICE_GET)]


class Frame(ctypes.Structure):
    _fields_ = [("size", SZ), ("ext", P), ("api", ctypes.POINTER(Api)), ("ctx", P),
                ("stage", I32), ("args", List), ("rets", List), ("attrs", Attrs), ("future", P)]


XLA = {np.dtype(np.float32): 11, np.dtype(np.int32): 4, np.dtype(np.int64): 5,
       np.dtype(np.uint8): 6}


class Call:
    """One call of a target: frame, the objects it points at, and the
    errors the handler made (code, message)."""

    def __init__(self, drv, args, rets, attrs, ordinal=0, api_size=None):
        self.keep, self.errors = [], []
        api = Api(size=api_size or ctypes.sizeof(Api), vsize=24, major=0, minor=3)
        api.error_create = ERR_CREATE(self._error)
        api.stream_get = STREAM_GET(self._stream)
        api.device_get = DEVICE_GET(self._device)
        self.drv, self.ordinal = drv, ordinal
        self.frame = Frame(size=ctypes.sizeof(Frame), api=ctypes.pointer(api), ctx=0x5eed,
                           stage=3, args=self._list(args), rets=self._list(rets),
                           attrs=self._attrs(attrs))
        self.keep.append(api)

    def _error(self, a):
        self.errors.append((a.contents.errc, a.contents.message.decode()))
        return 4242

    def _stream(self, a):
        assert a.contents.ctx == 0x5eed
        a.contents.stream = self.drv.stream.value
        return None

    def _device(self, a):
        a.contents.ordinal = self.ordinal
        return None

    def _list(self, bufs):
        n = len(bufs)
        ptrs, types = (P * max(n, 1))(), (I32 * max(n, 1))()
        for i, (ptr, shape, dtype) in enumerate(bufs):
            dims = (I64 * max(len(shape), 1))(*shape)
            b = Buffer(ctypes.sizeof(Buffer), None, XLA[np.dtype(dtype)], ptr, len(shape), dims)
            self.keep += [dims, b]
            ptrs[i], types[i] = ctypes.addressof(b), 1
        self.keep += [ptrs, types]
        return List(ctypes.sizeof(List), None, n, types, ptrs)

    def _attrs(self, attrs):
        names = sorted(attrs)
        n = len(names)
        spans, types, ptrs = (P * n)(), (I32 * n)(), (P * n)()
        for i, name in enumerate(names):
            v = np.asarray(attrs[name])
            raw = name.encode()
            span = Span(raw, len(raw))
            data = np.ascontiguousarray(v).copy()
            if v.ndim == 0:
                val = Scalar(XLA[v.dtype], data.ctypes.data)
                types[i] = 3
            else:
                val = Array(XLA[v.dtype], v.size, data.ctypes.data)
                types[i] = 1
            self.keep += [raw, span, data, val]
            spans[i], ptrs[i] = ctypes.addressof(span), ctypes.addressof(val)
        self.keep += [spans, types, ptrs]
        return Attrs(ctypes.sizeof(Attrs), None, n, types, spans, ptrs)

    def run(self, handler):
        return handler(ctypes.byref(self.frame))


def _handlers():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    proto = ctypes.CFUNCTYPE(P, ctypes.POINTER(Frame))
    return [proto(get(c, None)) for c in wj._X.targets()]


@pytest.fixture(scope="module")
def krt():
    r = weft.Runtime()
    r.exec(KERNELS)
    yield r
    r.close()


@pytest.fixture
def drv():
    d = Driver()
    before = d.stats()
    yield d
    d.close()
    after = d.stats()
    assert after[3] == before[3] and after[6] == before[6], "the emulator saw misuse or faults"


def _plan(k, args, device=0, adjoint=False):
    """Plan index and attributes of k called with args (JAX arrays and
    static scalars), for the CUDA target (device 0) or the cpu (None)."""
    _arrays, specs, blob, launch, ndim, _types = k._bind(args, k.launch_dims, k.output_dims)
    pid = k._plan(specs, ndim, adjoint, device)
    return k._attrs(pid, blob, launch)


def test_scale_runs_on_xlas_stream_without_a_host_sync(krt, drv):
    _cpu, cuda = _handlers()
    k = krt.jax_kernel("scale")
    n = 1000
    x = np.arange(n, dtype=np.float32)
    attrs = _plan(k, (jnp.asarray(x), 2.5))
    xp, yp = drv.put(x), drv.put(np.zeros(n, np.float32))
    call = Call(drv, [(xp, (n,), np.float32)], [(yp, (n,), np.float32)], attrs)
    launches = drv.stats()[4]
    os.environ["WEFT_CUDA_EMU_DELAY_MS"] = "300"  # the kernel starts late
    try:
        assert call.run(cuda) is None, call.errors
        assert drv.query() == NOT_READY  # queued on XLA's stream, not waited for
    finally:
        del os.environ["WEFT_CUDA_EMU_DELAY_MS"]
    assert drv.sync() == 0 and drv.stats()[4] == launches + 1
    np.testing.assert_allclose(drv.get(yp, n), 2.5 * x)
    # a second call reuses the loaded module; vmap's batch folds into dim 0
    attrs2 = dict(attrs, scalars=np.float32(-1.0).reshape(1).view(np.uint8))
    call = Call(drv, [(xp, (4, n // 4), np.float32)], [(yp, (4, n // 4), np.float32)], attrs2)
    assert call.run(cuda) is None, call.errors
    assert drv.sync() == 0
    np.testing.assert_allclose(drv.get(yp, n), -x)


def test_vectors_and_two_outputs(krt, drv):
    _cpu, cuda = _handlers()
    k = krt.jax_kernel("vnorm", num_outputs=2)
    v = np.arange(30, dtype=np.float32).reshape(10, 3)
    attrs = _plan(k, (jnp.asarray(v),))
    vp, np_, wp = drv.put(v), drv.put(np.zeros(10, np.float32)), drv.put(np.zeros_like(v))
    call = Call(drv, [(vp, (10, 3), np.float32)],
                [(np_, (10,), np.float32), (wp, (10, 3), np.float32)], attrs)
    assert call.run(cuda) is None, call.errors
    assert drv.sync() == 0
    np.testing.assert_allclose(drv.get(np_, 10), np.linalg.norm(v, axis=1), rtol=1e-6)
    np.testing.assert_allclose(drv.get(wp, (10, 3)), 2 * v)


def test_adjoint_zeroes_its_gradients_on_the_stream(krt, drv):
    """The backward plan of enable_backward: inputs x, e, the cotangent of e;
    results e (aliased) and dx, which the handler zeroes on the stream."""
    _cpu, cuda = _handlers()
    k = krt.jax_kernel("energy", enable_backward=True).kernel
    x = np.linspace(-1, 1, 64).astype(np.float32)
    attrs = _plan(k, (jnp.asarray(x), 0.5), adjoint=True)
    e = 0.5 * x * x + np.sin(x)
    xp, ep, cot = drv.put(x), drv.put(e), drv.put(np.ones_like(x))
    dx = drv.put(np.full_like(x, 7.0))  # stale: the handler must zero it
    f32 = np.float32
    call = Call(drv, [(xp, (64,), f32), (ep, (64,), f32), (cot, (64,), f32)],
                [(cot, (64,), f32), (dx, (64,), f32)], attrs)
    assert call.run(cuda) is None, call.errors
    assert drv.sync() == 0
    np.testing.assert_allclose(drv.get(dx, 64), x + np.cos(x), rtol=1e-5, atol=1e-6)


def test_errors_come_back_as_xla_errors(krt, drv):
    cpu, cuda = _handlers()
    k = krt.jax_kernel("scale")
    attrs = _plan(k, (jnp.ones(8, jnp.float32), 2.0))
    xp, yp, ip = (drv.put(np.ones(8, np.float32)), drv.put(np.zeros(8, np.float32)),
                  drv.put(np.ones(8, np.int32)))
    f32 = np.float32

    def run(handler, args, **kw):
        call = Call(drv, args, [(yp, (8,), f32)], kw.pop("attrs", attrs), **kw)
        assert call.run(handler) == 4242 and len(call.errors) == 1
        return call.errors[0]

    # wrong dtype: the argument is named
    code, msg = run(cuda, [(ip, (8,), np.int32)])
    assert code == 3 and "kernel 'scale': array 'x' has XLA element type 4, " \
        "the kernel expects 11" in msg
    # wrong device: XLA runs the call on a device weft does not have
    code, msg = run(cuda, [(xp, (8,), f32)], ordinal=3)
    assert "device 'cuda:3' is not available (1 CUDA device)" in msg and "'scale'" in msg
    code, msg = run(cuda, [(xp, (8,), f32)], ordinal=-1)
    assert code == 3 and "XLA runs it on cuda:-1" in msg
    # a plan for the other platform
    cpu_attrs = _plan(k, (jnp.ones(8, jnp.float32), 2.0), device=None)
    code, msg = run(cuda, [(xp, (8,), f32)], attrs=cpu_attrs)
    assert "kernel 'scale' was compiled for JAX's cpu platform, XLA runs it on CUDA" in msg
    code, msg = run(cpu, [(xp, (8,), f32)])
    assert "kernel 'scale' was compiled for JAX's CUDA platform, XLA runs it on the cpu" in msg
    # an API before DeviceOrdinal_Get (0.3): device 0
    call = Call(drv, [(xp, (8,), f32)], [(yp, (8,), f32)], attrs, ordinal=5,
                api_size=Api.device_get.offset)
    assert call.run(cuda) is None and drv.sync() == 0
    np.testing.assert_allclose(drv.get(yp, 8), np.full(8, 2.0))


def test_closed_runtime_is_an_error(drv):
    _cpu, cuda = _handlers()
    rt = weft.Runtime()
    rt.exec(KERNELS)
    k = rt.jax_kernel("scale")
    attrs = _plan(k, (jnp.ones(8, jnp.float32), 2.0))
    xp, yp = drv.put(np.ones(8, np.float32)), drv.put(np.zeros(8, np.float32))
    args, rets = [(xp, (8,), np.float32)], [(yp, (8,), np.float32)]
    call = Call(drv, args, rets, attrs)
    assert call.run(cuda) is None and drv.sync() == 0
    rt.close()  # unloads the plans' modules and frees the error slot
    call = Call(drv, args, rets, attrs)
    assert call.run(cuda) == 4242
    assert call.errors == [(9, "weft: the weft.Runtime of this kernel is closed")]


def test_release_mode_check_is_reported_by_the_next_call(krt, drv):
    """A failed bounds check writes the error slot; the copy queued after
    the launch lands in page-locked memory and the next call reports it."""
    _cpu, cuda = _handlers()
    assert krt["weft.config.mode"] == "release"
    k = krt.jax_kernel("shift")
    n = 16
    attrs = _plan(k, (jnp.ones(n, jnp.float32),))
    xp, yp = drv.put(np.arange(n + 1, dtype=np.float32)), drv.put(np.zeros(n, np.float32))

    def call(m):  # launch dims n, but x has m elements
        c = Call(drv, [(xp, (m,), np.float32)], [(yp, (n,), np.float32)],
                 dict(attrs, dims=np.array([n], np.int64)))
        return c.run(cuda), c.errors

    assert call(n + 1) == (None, []) and drv.sync() == 0
    np.testing.assert_allclose(drv.get(yp, n), np.arange(1, n + 1))
    assert call(n) == (None, [])  # x[16] is out of bounds: queued, not known yet
    assert drv.sync() == 0
    r, errors = call(n + 1)
    assert r == 4242 and len(errors) == 1
    assert errors[0][1].endswith(": index 16 out of bounds for axis 0 with size 16 in array 'x' "
                                 "of kernel 'shift' (a check failed in an earlier weft call on "
                                 "cuda:0)"), errors
    assert call(n + 1) == (None, []) and drv.sync() == 0  # reported once, then cleared
    assert call(n + 1) == (None, [])


def test_calls_allocate_nothing_after_the_first(krt, drv):
    _cpu, cuda = _handlers()
    k = krt.jax_kernel("scale")
    attrs = _plan(k, (jnp.ones(64, jnp.float32), 2.0))
    xp, yp = drv.put(np.ones(64, np.float32)), drv.put(np.zeros(64, np.float32))
    call = Call(drv, [(xp, (64,), np.float32)], [(yp, (64,), np.float32)], attrs)
    assert call.run(cuda) is None and drv.sync() == 0
    before = drv.stats()
    for _ in range(500):
        assert call.run(cuda) is None
    assert drv.sync() == 0
    after = drv.stats()
    assert after[:2] == before[:2] and after[4] == before[4] + 500, (before, after)


@pytest.mark.parametrize("mode", ["fast", "debug"])
def test_other_modes(mode, drv):
    """fast: no error slot parameter; debug: every check, the slot last."""
    _cpu, cuda = _handlers()
    rt = weft.Runtime()
    try:
        rt.exec(KERNELS + "weft.config.mode = '%s'" % mode)
        k = rt.jax_kernel("scale")
        x = np.arange(8, dtype=np.float32)
        attrs = _plan(k, (jnp.asarray(x), 3.0))
        xp, yp = drv.put(x), drv.put(np.zeros(8, np.float32))
        call = Call(drv, [(xp, (8,), np.float32)], [(yp, (8,), np.float32)], attrs)
        assert call.run(cuda) is None, call.errors
        assert drv.sync() == 0
        np.testing.assert_allclose(drv.get(yp, 8), 3 * x)
    finally:
        rt.close()


TWO_DEVICES = """
import numpy as np, jax.numpy as jnp, weft
from test_jax_ffi_cuda import Call, Driver, KERNELS, _handlers, _plan
_cpu, cuda = _handlers()
rt = weft.Runtime()
rt.exec(KERNELS)
attrs = _plan(rt.jax_kernel("scale"), (jnp.ones(8, jnp.float32), 2.0))
for dev in (1, 0):  # the plan's module is loaded on each device at its first call
    d = Driver(dev)
    x = np.arange(8, dtype=np.float32) + dev
    xp, yp = d.put(x), d.put(np.zeros(8, np.float32))
    call = Call(d, [(xp, (8,), np.float32)], [(yp, (8,), np.float32)], attrs, ordinal=dev)
    assert call.run(cuda) is None, call.errors
    assert d.sync() == 0
    assert (d.get(yp, 8) == 2 * x).all(), d.get(yp, 8)
    stats = d.stats()
    assert stats[3] == 0 and stats[6] == 0, stats
    d.close()
rt.close()
print("two devices ok")
"""


def test_each_device_xla_names_runs_the_call():
    env = dict(os.environ, WEFT_CUDA_EMU_DEVICES="2",
               PYTHONPATH=os.pathsep.join([os.path.dirname(__file__)] + sys.path))
    r = subprocess.run([sys.executable, "-c", TWO_DEVICES], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "two devices ok" in r.stdout
    assert "weft-cuda-emu" not in r.stderr, r.stderr[-3000:]
