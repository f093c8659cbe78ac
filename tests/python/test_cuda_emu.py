"""CUDA interop on the emulated device (run through scripts/cuda-emu; skipped
otherwise): DLPack export of cuda:0 arrays (kDLCUDA, legacy and versioned)
read back through the driver, import of a hand-built kDLCUDA capsule whose
deleter runs once, __cuda_array_interface__ both ways, and Runtime.launch on
device arrays. The emulator's counters must show no misuse."""
import ctypes
import gc
import os

import pytest

import weft
from weft import _lib as L

EMU = os.environ.get("WEFT_CUDA_EMU_LIB")
pytestmark = pytest.mark.skipif(not EMU or not os.environ.get("WEFT_LIBCUDA"),
                                reason="not under scripts/cuda-emu")


class Counts(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in
                ("allocs_live", "bytes_live", "leaks", "misuse", "launches", "host_compiles",
                 "faults")]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


class Emu:
    """The driver entry points the tests use, on this thread's context."""

    def __init__(self):
        self.lib = ctypes.CDLL(EMU)
        self.lib.cuInit(0)
        self.ctx = ctypes.c_void_p()
        assert self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), 0) == 0

    def _cur(self):
        self.lib.cuCtxSetCurrent(self.ctx)

    def counts(self):
        c = Counts()
        self.lib.wf_cuemu_stats(ctypes.byref(c))
        return c

    def read(self, ptr, n, ctype=ctypes.c_float):
        self._cur()
        buf = (ctype * n)()
        r = self.lib.cuMemcpyDtoH_v2(buf, ctypes.c_uint64(ptr), ctypes.c_size_t(ctypes.sizeof(buf)))
        assert r == 0, r
        return list(buf)

    def alloc(self, values):
        self._cur()
        p = ctypes.c_uint64()
        buf = (ctypes.c_float * len(values))(*values)
        assert self.lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(ctypes.sizeof(buf))) == 0
        assert self.lib.cuMemcpyHtoD_v2(p, buf, ctypes.c_size_t(ctypes.sizeof(buf))) == 0
        return p.value

    def free(self, ptr):
        self._cur()
        assert self.lib.cuMemFree_v2(ctypes.c_uint64(ptr)) == 0

    def close(self):
        self.lib.cuDevicePrimaryCtxRelease_v2(0)


SAXPY = """
k = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32), a = weft.float32,
  function(x, y, a) local i = weft.tid(); y[i] = a * x[i] + y[i] end }
x = weft.array({1, 2, 3, 4}, weft.float32, { device = "cuda:0" })
y = weft.full(4, 10, weft.float32, { device = "cuda:0" })
"""


@pytest.fixture
def emu():
    e = Emu()
    c0 = e.counts()
    yield e
    gc.collect()
    c1 = e.counts()
    e.close()
    assert c1.misuse == c0.misuse, ctypes.CDLL(EMU).wf_cuemu_last


def _managed(cap, versioned):
    name = b"dltensor_versioned" if versioned else b"dltensor"
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    p = get(cap, name)
    T = DLManagedTensorVersioned if versioned else DLManagedTensor
    return ctypes.cast(p, ctypes.POINTER(T)).contents


def _cuda_capsule(ptr, n, deleted):
    """A legacy kDLCUDA capsule of n floats at ptr; its deleter appends."""
    shape = (ctypes.c_int64 * 1)(n)
    m = DLManagedTensor()
    m.dl_tensor = DLTensor(ptr, DLDevice(2, 0), 1, DLDataType(2, 32, 1), shape, None, 0)
    m.deleter = DELETER(lambda p: deleted.append(p))
    keep = (m, shape)  # alive until the deleter ran
    return L.make_capsule(ctypes.addressof(m), False), keep


def test_dlpack_export_is_kdlcuda(rt, emu):
    rt.exec(SAXPY + "weft.launch(k, 4, { x, y, 2 }, { device = 'cuda:0' })")
    y = rt["y"]
    assert y.device == "cuda:0"
    assert y.__dlpack_device__() == (2, 0)
    for versioned in (False, True):
        cap = y.__dlpack__(max_version=(1, 0) if versioned else None)
        t = _managed(cap, versioned).dl_tensor
        assert (t.device.device_type, t.device.device_id) == (2, 0)
        assert t.ndim == 1 and t.shape[0] == 4 and (t.dtype.code, t.dtype.bits) == (2, 32)
        # the export synchronized: the launch's results are there
        assert emu.read(t.data + t.byte_offset, 4) == [12, 14, 16, 18]
        del cap  # the capsule's destructor deletes the unused tensor


def test_dlpack_import_of_a_hand_built_kdlcuda_tensor(rt, emu):
    rt.exec(SAXPY)
    ptr = emu.alloc([1, 1, 1, 1])
    deleted = []
    cap, keep = _cuda_capsule(ptr, 4, deleted)
    rt["z"] = cap
    del cap
    rt.exec("assert(z.device == 'cuda:0'); weft.launch(k, 4, { x, z, 3 }, { device = 'cuda:0' })")
    assert rt["z"].numpy().tolist() == [4, 7, 10, 13]
    rt.exec("z = nil; collectgarbage(); collectgarbage()")
    gc.collect()
    rt.exec("collectgarbage()")
    assert len(deleted) == 1
    emu.free(ptr)
    del keep


def test_runtime_launch_takes_a_kdlcuda_capsule(rt, emu):
    rt.exec(SAXPY + "weft.set_device('cuda:0')")
    ptr = emu.alloc([1, 2, 3, 4])
    deleted = []
    cap, keep = _cuda_capsule(ptr, 4, deleted)
    rt.launch("k", 4, inputs=[rt["x"], cap, 2.0])  # viewed for the launch only
    rt.exec("weft.synchronize()")
    assert emu.read(ptr, 4) == [3, 6, 9, 12]
    del cap
    gc.collect()
    assert len(deleted) == 1
    emu.free(ptr)
    del keep


def test_cuda_array_interface_export(rt, emu):
    rt.exec(SAXPY + "weft.launch(k, 4, { x, y, 1 }, { device = 'cuda:0' })")
    y = rt["y"]
    d = y.__cuda_array_interface__
    assert d["shape"] == (4,) and d["typestr"] == "<f4" and d["version"] == 3
    assert d["strides"] is None and d["stream"] is None
    ptr, readonly = d["data"]
    assert readonly is False
    assert emu.read(ptr, 4) == [11, 12, 13, 14]
    with pytest.raises(AttributeError):
        y.__array_interface__


class Interface:
    """A producer known only by __cuda_array_interface__ (as Numba's)."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (ptr, False),
                                         "version": 3, "strides": None, "stream": None}


def test_cuda_array_interface_import(rt, emu):
    asarray = getattr(weft, "asarray", None)
    if asarray is None:
        pytest.skip("weft.asarray (the __cuda_array_interface__ import) is not in the package yet")
    ptr = emu.alloc([5, 6, 7])
    src = Interface(ptr, 3)
    a = asarray(src)
    assert a.device == "cuda:0"
    assert a.numpy().tolist() == [5, 6, 7]
    del a
    gc.collect()
    emu.free(ptr)


def test_runtime_launch_on_device_arrays(rt, emu):
    rt.exec(SAXPY + "weft.set_device('cuda:0')")  # launches go to the current device
    x, y = rt["x"], rt["y"]
    n0 = emu.counts().launches
    rt.launch("k", 4, inputs=[x, y, 0.5])
    rt.launch("k", 4, inputs=[x, y, 0.5])
    assert y.numpy().tolist() == [11, 12, 13, 14]
    assert emu.counts().launches - n0 == 2
