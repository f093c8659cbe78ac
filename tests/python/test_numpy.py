"""NumPy interop: zero copy both ways, vector arrays, layouts, lifetimes."""
import ctypes
import gc
import weakref

import numpy as np
import pytest

import weft
from conftest import lua_collect


def test_numpy_view_of_weft_array_is_zero_copy(rt):
    rt.exec("x = weft.zeros({4}, weft.vec3); x[1] = weft.vec3(1, 2, 3)")
    x = rt["x"]
    assert x.shape == (4,) and x.dtype == "vec3f" and x.device == "cpu"
    v = x.numpy()
    assert v.shape == (4, 3) and v.dtype == np.float32
    assert v.__array_interface__["data"][0] == x._ptr
    assert v[1].tolist() == [1, 2, 3]
    v[2, 0] = 7  # numpy -> weft
    rt.exec("assert(x[2].x == 7)")
    rt.exec("x[3] = weft.vec3(4, 5, 6)")  # weft -> numpy
    assert v[3].tolist() == [4, 5, 6]


def test_array_interface(rt):
    rt.exec("m = weft.zeros({2, 5}, weft.mat33d)")
    m = rt["m"]
    ai = m.__array_interface__
    assert ai["shape"] == (2, 5, 3, 3) and ai["typestr"] == "<f8" and ai["version"] == 3
    assert ai["data"] == (m._ptr, False) and ai["strides"] is None
    arr = np.asarray(m)
    assert arr.shape == (2, 5, 3, 3) and arr.__array_interface__["data"][0] == m._ptr
    with pytest.raises(AttributeError, match="cpu array has no __cuda_array_interface__"):
        m.__cuda_array_interface__


def test_from_numpy_zero_copy_both_ways(rt):
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    rt["y"] = a
    rt.exec("assert(y.dtype == weft.float32 and y[1][2] == 5); y[0][0] = -1")
    assert a[0, 0] == -1
    a[3, 2] = 100
    rt.exec("assert(y[3][2] == 100)")
    w = weft.from_numpy(a, dtype="vec3", runtime=rt)
    assert w.shape == (4,) and w.dtype == "vec3f" and w._ptr == a.ctypes.data
    rt["w"] = w
    rt.exec("assert(w[1].z == 5)")


@pytest.mark.parametrize("dt,name", [(np.int8, "int8"), (np.uint8, "uint8"), (np.int16, "int16"),
                                     (np.int32, "int32"), (np.int64, "int64"),
                                     (np.uint64, "uint64"), (np.float16, "float16"),
                                     (np.float64, "float64"), (np.bool_, "bool")])
def test_dtypes_round_trip(rt, dt, name):
    a = np.ones(3, dtype=dt)
    w = weft.from_numpy(a, runtime=rt)
    assert w.dtype == name
    back = w.numpy()
    assert back.dtype == dt and back.ctypes.data == a.ctypes.data


def test_strided_and_reversed_layouts(rt):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    rt["s"] = base[:, ::2]
    rt.exec("assert(s.shape[2] == 3 and s[1][2] == 10 and s.strides[2] == 8)")
    r = weft.from_numpy(np.arange(10, dtype=np.float64)[::-1], runtime=rt)
    assert r.strides == (-8,)
    assert r.numpy().tolist() == list(range(9, -1, -1))
    t = weft.from_numpy(base.T, runtime=rt)
    assert t.shape == (6, 4) and t.numpy()[5, 3] == 23


def test_read_only_numpy_arrays_stay_read_only(rt):
    a = np.zeros(4, dtype=np.float32)
    a.flags.writeable = False
    w = weft.from_numpy(a, runtime=rt)
    assert w.readonly
    back = np.from_dlpack(w)  # versioned export carries READ_ONLY
    assert not back.flags.writeable
    assert w.__array_interface__["data"][1] is True


def test_dlpack_protocol_arguments(rt):
    rt.exec("x = weft.full(3, 2.0)")
    x = rt["x"]
    assert x.__dlpack_device__() == (1, 0)
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    assert name(x.__dlpack__()) == b"dltensor"
    assert name(x.__dlpack__(max_version=(1, 0))) == b"dltensor_versioned"
    assert name(x.__dlpack__(max_version=(0, 8))) == b"dltensor"
    c = np.from_dlpack(x, copy=True)
    assert c.ctypes.data != x._ptr and c.tolist() == [2, 2, 2]
    v = np.from_dlpack(x)
    assert v.ctypes.data == x._ptr
    with pytest.raises(BufferError, match="without a copy"):
        x.__dlpack__(dl_device=(2, 0), copy=False)


def test_consumer_keeps_memory_alive_after_lua_drops_it(rt):
    rt.exec("x = weft.full(1000, 3.0)")
    v = rt["x"].numpy()
    rt["x"] = None
    lua_collect(rt)
    rt.exec("for i = 1, 20 do local t = weft.full(1000, 9.0) end; collectgarbage()")
    assert v.sum() == 3000.0
    rt.close()
    assert v[999] == 3.0  # even after the runtime is gone


def test_numpy_memory_is_released_when_both_sides_drop_it(rt):
    a = np.arange(5, dtype=np.float32)
    ref = weakref.ref(a)
    rt["y"] = a
    del a
    gc.collect()
    assert ref() is not None  # Lua holds it through DLPack
    rt.exec("assert(y[4] == 4)")
    rt["y"] = None
    lua_collect(rt)
    assert ref() is None  # the producer's deleter ran


def test_unconsumed_capsule_releases_memory(rt):
    a = np.arange(5, dtype=np.float32)
    ref = weakref.ref(a)
    w = weft.from_numpy(a, runtime=rt)
    del a
    caps = [w.__dlpack__(), w.__dlpack__(max_version=(1, 0))]
    del w
    lua_collect(rt)
    assert ref() is not None  # the capsules hold it
    del caps
    gc.collect()
    assert ref() is None


def test_bad_inputs_raise_clear_errors(rt):
    with pytest.raises(TypeError, match="cannot share a object: it has no __dlpack__"):
        weft.from_dlpack(object(), runtime=rt)
    with pytest.raises(TypeError, match="expected a numpy.ndarray, got list"):
        weft.from_numpy([1, 2], runtime=rt)
    with pytest.raises(weft.WeftError, match="dtype complex64 is not supported"):
        weft.from_numpy(np.zeros(3, dtype=np.complex64), runtime=rt)
    with pytest.raises(weft.WeftError, match="dimension 1 has size 2, the element type needs 3"):
        weft.from_numpy(np.zeros((4, 2), np.float32), dtype="vec3", runtime=rt)
    with pytest.raises(weft.WeftError, match="the tensor holds float64 values, vec3f needs float32"):
        weft.from_numpy(np.zeros((4, 3)), dtype="vec3", runtime=rt)
    with pytest.raises(weft.WeftError, match="5 dimensions"):
        weft.from_numpy(np.zeros((1, 1, 1, 1, 2), np.float32), runtime=rt)
    with pytest.raises(weft.WeftError, match="components are not contiguous"):
        weft.from_numpy(np.zeros((3, 6), np.float32)[:, ::2], dtype="vec3", runtime=rt)
    cap = np.zeros(3, np.float32).__dlpack__()
    weft.from_dlpack(cap, runtime=rt)
    with pytest.raises(ValueError, match="already consumed"):
        weft.from_dlpack(cap, runtime=rt)
    with pytest.raises(TypeError, match="weft.Array is made by a Runtime"):
        weft.Array()


_DOUBLE = """
k = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32), function(x, y)
  local i = weft.tid()
  y[i] = x[i] * 2.0
end }
"""


def test_readonly_numpy_array_is_read_but_never_written(rt):
    rt.exec(_DOUBLE)
    x = np.arange(4, dtype=np.float32)
    x.flags.writeable = False
    y = np.zeros(4, np.float32)
    rt.launch("k", 4, inputs=[x], outputs=[y])  # a kernel that only reads x
    assert y.tolist() == [0, 2, 4, 6]
    with pytest.raises(weft.WeftError, match="kernel 'k' writes output 'y', but the array "
                                             "passed is read-only"):
        rt.launch("k", 4, inputs=[y], outputs=[x])
    assert x.tolist() == [0, 1, 2, 3]
    a = weft.from_dlpack(x)
    assert a.readonly
    rt["r"] = x
    with pytest.raises(weft.WeftError, match=r"a\[i\] = v: the array is read-only"):
        rt.exec("r[0] = 5")
    with pytest.raises(weft.WeftError, match="a:fill_: the array is read-only"):
        rt.exec("r:fill_(1)")
    with pytest.raises(weft.WeftError, match="weft.copy: dst: the array is read-only"):
        rt.exec("weft.copy(r, weft.ones(4))")
    assert x.tolist() == [0, 1, 2, 3]
    assert not rt["r"].numpy().flags.writeable


def test_readonly_memmap_is_read_but_never_written(rt, tmp_path):
    # writing into a mode="r" memmap was a SIGSEGV of the whole process
    rt.exec(_DOUBLE)
    path = tmp_path / "m.bin"
    np.arange(4, dtype=np.float32).tofile(path)
    m = np.memmap(path, dtype=np.float32, mode="r")
    y = np.zeros(4, np.float32)
    rt.launch("k", 4, inputs=[m], outputs=[y])
    assert y.tolist() == [0, 2, 4, 6]
    with pytest.raises(weft.WeftError, match="writes output 'y', but the array passed is "
                                             "read-only"):
        rt.launch("k", 4, inputs=[y], outputs=[m])
    rt["m"] = m
    with pytest.raises(weft.WeftError, match="read-only"):
        rt.exec("weft.launch(k, 4, {weft.zeros(4)}, {outputs = {m}})")
    assert np.fromfile(path, dtype=np.float32).tolist() == [0, 1, 2, 3]


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLMTV(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLMTV))
_DLMTV._fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                   ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER),
                   ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


def test_malformed_dlpack_capsules_are_rejected_and_deleted_once(rt):
    """Hand-built DLManagedTensorVersioned structs (each was a crash or
    silent aliasing): an error naming the fault, the deleter run once."""
    capsule_new = ctypes.pythonapi.PyCapsule_New
    capsule_new.restype = ctypes.py_object
    capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    deleted = []
    deleter = _DELETER(lambda m: deleted.append(1))
    data = (ctypes.c_float * 6)()
    shape = (ctypes.c_int64 * 2)(2, 3)
    huge = (ctypes.c_int64 * 2)(1 << 62, 1)
    negative = (ctypes.c_int64 * 2)(2, -3)
    cases = [
        (dict(shape=None), "shape is NULL for a tensor of 2 dimensions"),
        (dict(strides=huge), "stride 4611686018427387904 of dimension 0 overflows"),
        (dict(byte_offset=1 << 63), "byte_offset 9223372036854775808 is out of range"),
        (dict(data=None), "data is NULL for a tensor of 6 elements"),
        (dict(shape=negative), "dimension 1 has negative size -3"),
    ]
    for fields, message in cases:
        m = _DLMTV(major=1, deleter=deleter)
        t = m.dl_tensor
        t.data, t.ndim, t.shape = ctypes.cast(data, ctypes.c_void_p), 2, shape
        t.device.device_type = 1
        t.dtype.code, t.dtype.bits, t.dtype.lanes = 2, 32, 1
        for k, v in fields.items():
            setattr(t, k, v)
        cap = capsule_new(ctypes.addressof(m), b"dltensor_versioned", None)
        del deleted[:]
        with pytest.raises(weft.WeftError, match=message):
            rt.import_dlpack(cap)
        assert deleted == [1]
