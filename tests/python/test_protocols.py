"""weft.asarray and the array interfaces: __array_interface__ (strides,
read-only data, byte orders, masks), __dlpack__ producers, and
__cuda_array_interface__ v2/v3 (streams, masks) under the emulated device;
rt.launch and rt[...] = x take the same objects."""
import gc
import os
import sys

import numpy as np
import pytest

import weft

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class Host:
    """A producer known only by __array_interface__."""

    def __init__(self, a, **extra):
        self.a = a
        self.__array_interface__ = dict(a.__array_interface__, **extra)


FILL = """
fill = weft.kernel{ x = weft.array(weft.float32, 2), function(x)
  local i, j = weft.tid()
  x[i][j] = weft.float32(i * 10 + j)
end }
"""


def test_array_interface_is_viewed_without_a_copy(rt):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = weft.asarray(Host(x), runtime=rt)
    assert a._ptr == x.ctypes.data and a.shape == (3, 4) and a.dtype == "float32"
    x[1, 2] = 99
    assert a.numpy()[1, 2] == 99


def test_array_interface_strides_and_dtypes(rt):
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = weft.asarray(Host(x.T), runtime=rt)  # a transposed view: strides kept
    assert t.shape == (4, 3) and t.strides == (8, 32)
    assert t.numpy().tolist() == x.T.tolist()
    s = weft.asarray(Host(x[:, ::2]), runtime=rt)
    assert s.numpy().tolist() == x[:, ::2].tolist()
    for dt in (np.int8, np.uint16, np.int32, np.int64, np.float16, np.bool_):
        y = np.ones(3, dtype=dt)
        assert weft.asarray(Host(y), runtime=rt).numpy().tolist() == y.tolist()
    # '=' and '|' are the native order too
    z = np.arange(3, dtype=np.int32)
    assert weft.asarray(Host(z, typestr="=i4"), runtime=rt).numpy().tolist() == [0, 1, 2]


def test_array_interface_refusals(rt):
    x = np.arange(6, dtype=np.float32)
    with pytest.raises(BufferError, match=r"weft.asarray: __array_interface__ typestr '>f4' is "
                       r"big-endian data, .* byte-swap it first \(e.g. x.astype\('<f4'\)\)"):
        weft.asarray(Host(x.astype(">f4")), runtime=rt)
    with pytest.raises(BufferError, match="has a mask: masked arrays are not supported"):
        weft.asarray(Host(x, mask=Host(np.ones(6, np.bool_))), runtime=rt)
    with pytest.raises(TypeError, match="typestr '<c8': weft has no such element type"):
        weft.asarray(Host(np.zeros(2, np.complex64)), runtime=rt)
    with pytest.raises(BufferError, match=r"strides \(6,\) \(bytes\) are not multiples of the "
                       "element size 4"):
        weft.asarray(Host(x, strides=(6,), shape=(2,)), runtime=rt)
    with pytest.raises(TypeError, match="weft.asarray: cannot view a object: it has no __dlpack__"):
        weft.asarray(object(), runtime=rt)


def test_read_only_memory_is_never_written(rt):
    x = np.zeros((2, 3), dtype=np.float32)
    x.flags.writeable = False
    a = weft.asarray(Host(x), runtime=rt)
    assert a.readonly
    rt.exec(FILL)
    with pytest.raises(weft.WeftError, match="writes input 'x', but the array passed is read-only"):
        rt.launch("fill", (2, 3), inputs=[Host(x)])
    rt["ro"] = Host(x)
    with pytest.raises(weft.WeftError, match="read-only"):
        rt.exec("weft.copy(ro, weft.ones({2, 3}))")
    assert not x.any()


def test_launch_and_setitem_take_interfaces(rt):
    rt.exec(FILL)
    x = np.zeros((3, 4), dtype=np.float32)
    rt.launch("fill", (3, 4), inputs=[Host(x)])
    assert x[2, 3] == 23
    y = np.zeros((4, 3), dtype=np.float32).T  # writes through a strided view
    rt.launch("fill", (3, 4), inputs=[Host(y)])
    assert y[2, 3] == 23 and y.base[3, 2] == 23
    h = Host(np.ones((2, 2), dtype=np.float32))
    rt["h"] = h
    del h
    gc.collect()  # the interface object is kept alive by the weft array
    rt.exec("assert(h[1][1] == 1 and h.shape[1] == 2)")


class Legacy:
    """A producer from before DLPack 1.0: __dlpack__ takes no keywords."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_asarray_of_legacy_and_versioned_dlpack(rt):
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    a = weft.asarray(Legacy(x), runtime=rt)  # retried without max_version
    assert a._ptr == x.ctypes.data and a.shape == (2, 3)
    v = weft.asarray(x.__dlpack__(max_version=(1, 0)), runtime=rt)  # a versioned capsule
    assert v._ptr == x.ctypes.data and v.numpy().tolist() == x.tolist()


def test_asarray_of_dlpack_producers_and_arrays(rt):
    x = np.arange(4, dtype=np.float32)
    a = weft.asarray(x, runtime=rt)
    assert a._ptr == x.ctypes.data
    assert weft.asarray(a, runtime=rt) is a
    assert weft.asarray([1.0, 2.0], runtime=rt).numpy().tolist() == [1, 2]
    torch = pytest.importorskip("torch")
    t = torch.arange(3, dtype=torch.float64)
    assert weft.asarray(t, runtime=rt)._ptr == t.data_ptr()


# ---- __cuda_array_interface__ under scripts/cuda-emu -------------------------
EMU = os.environ.get("WEFT_CUDA_EMU_LIB")
cuda = pytest.mark.skipif(not EMU or not os.environ.get("WEFT_LIBCUDA"),
                          reason="not under scripts/cuda-emu")


class Device:
    def __init__(self, ptr, shape, typestr="<f4", **extra):
        self.__cuda_array_interface__ = dict({"shape": shape, "typestr": typestr,
                                              "data": (ptr, False), "version": 3}, **extra)


@pytest.fixture
def emu():
    from test_cuda_emu import Emu
    e = Emu()
    yield e
    gc.collect()
    e.close()


@cuda
def test_cuda_interface_v2_and_v3(rt, emu):
    ptr = emu.alloc([1, 2, 3, 4, 5, 6])
    try:
        v2 = Device(ptr, (2, 3), version=2)
        a = weft.asarray(v2, runtime=rt)
        assert a.device == "cuda:0" and a._ptr == ptr
        assert a.numpy().tolist() == [[1, 2, 3], [4, 5, 6]]
        # v3 with a stream to wait for (1: the legacy default stream), strides
        t = weft.asarray(Device(ptr, (3, 2), strides=(4, 12), stream=1), runtime=rt)
        assert t.numpy().tolist() == [[1, 4], [2, 5], [3, 6]]
        ro = weft.asarray(Device(ptr, (6,), data=(ptr, True)), runtime=rt)
        assert ro.readonly
        with pytest.raises(ValueError, match="stream 0 is not allowed"):
            weft.asarray(Device(ptr, (6,), stream=0), runtime=rt)
        with pytest.raises(BufferError, match="__cuda_array_interface__ has a mask"):
            weft.asarray(Device(ptr, (6,), mask=Device(ptr, (6,), typestr="|b1")), runtime=rt)
        rt.exec("k = weft.kernel{ x = weft.array(weft.float32), function(x) "
                "local i = weft.tid(); x[i] = x[i] * 2.0 end } weft.set_device('cuda:0')")
        rt.launch("k", 6, inputs=[Device(ptr, (6,))])
        assert emu.read(ptr, 6) == [2, 4, 6, 8, 10, 12]
        rt["dv"] = Device(ptr, (2, 3), stream=2)  # the per-thread default stream
        rt.exec("assert(dv.device == 'cuda:0' and dv.shape[2] == 3)")
        rt.exec("dv = nil; collectgarbage()")
        del a, t, ro
        gc.collect()
    finally:
        emu.free(ptr)
