"""weft.asarray and the array interfaces.

weft takes foreign memory as a DLPack tensor. Objects with __dlpack__ give
one themselves; for __cuda_array_interface__ (CuPy, Numba, PyTorch, ...;
versions 2 and 3) and __array_interface__ (NumPy-like host memory) this
module builds one from the description, holding a reference to the object
so that its memory lives as long as the weft array (the tensor's deleter,
in C, drops it: src/interop/iface.c).

What is kept and what is refused:
- strides (bytes) become element strides; strides that are not a multiple
  of the element size are refused;
- read-only data (data = (ptr, True)) gives a read-only weft array: kernels
  and copies refuse to write it (never written through silently);
- typestr byte orders: native ('<' here, or '=' or '|') only; data of the
  other byte order is refused with the fix (byte-swap it first);
- a mask (masked arrays) is refused;
- the stream of __cuda_array_interface__ v3: weft waits for that stream
  before using the memory (None: no wait; 0 is refused, as the protocol
  says); the memory is taken to be on the CUDA device the object names
  (x.device.id or x.device), else cuda:0.
"""
import ctypes
import numbers
import sys

from . import _lib

_tensor = _lib._fn("wf_iface_tensor", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                   ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_int64),
                   ctypes.POINTER(ctypes.c_int64), ctypes.c_int, ctypes.c_int, ctypes.c_uint64,
                   ctypes.py_object)

_NATIVE = "<" if sys.byteorder == "little" else ">"
_KINDS = {"f": (2, (2, 4, 8)), "i": (0, (1, 2, 4, 8)), "u": (1, (1, 2, 4, 8)), "b": (6, (1,))}
_DL_CPU, _DL_CUDA = 1, 2
_READ_ONLY = 1


def _dtype(typestr, where, proto):
    """(DLPack code, bits, itemsize) of a typestr such as '<f4'."""
    if not isinstance(typestr, str) or len(typestr) < 3:
        raise TypeError("%s: %s typestr must be a string like '<f4', got %r"
                        % (where, proto, typestr))
    order, kind, size = typestr[0], typestr[1], typestr[2:]
    if order not in "<>|=" or not size.isdigit():
        raise TypeError("%s: %s typestr %r is malformed (expected a byte order, a kind "
                        "and a size, like '<f4')" % (where, proto, typestr))
    size = int(size)
    known = _KINDS.get(kind)
    if known is None or size not in known[1]:
        raise TypeError("%s: %s typestr %r: weft has no such element type (it takes bool, "
                        "int8..int64, uint8..uint64, float16, float32, float64)"
                        % (where, proto, typestr))
    if order in "<>" and order != _NATIVE and size > 1:
        raise BufferError("%s: %s typestr %r is %s-endian data, and weft reads this "
                          "machine's byte order only: byte-swap it first (e.g. "
                          "x.astype(%r))" % (where, proto, typestr,
                                             "big" if order == ">" else "little",
                                             _NATIVE + kind + str(size)))
    return known[0], 8 * size, size


def _ints(v, what, where, proto):
    if not isinstance(v, (tuple, list)) or not all(isinstance(x, numbers.Integral) for x in v):
        raise TypeError("%s: %s %s must be a tuple of integers, got %r" % (where, proto, what, v))
    return [int(x) for x in v]


def _device_of(obj):
    d = getattr(obj, "device", None)
    d = getattr(d, "id", d)
    return int(d) if isinstance(d, numbers.Integral) and not isinstance(d, bool) else 0


def _sync_stream(stream, dev, where, runtime):
    """Wait for the producer's stream (v3 'stream': 1 legacy default, 2
    per-thread default, else a CUstream)."""
    if stream is None:
        return
    if not isinstance(stream, numbers.Integral) or isinstance(stream, bool):
        raise TypeError("%s: __cuda_array_interface__ stream must be an integer or None, got %r"
                        % (where, stream))
    if stream == 0:
        raise ValueError("%s: __cuda_array_interface__ stream 0 is not allowed (the protocol "
                         "says: None for no synchronization, 1 for the legacy default stream)"
                         % where)
    if runtime is None:
        from . import runtime as _default
        runtime = _default()
    runtime.exec(
        'local C = require("weft.cdef").C\n'
        'require("weft.cdef").declare("int wf_cuda_stream_sync_raw(wf_rt *rt, int32_t dev, '
        'void *stream);")\n'
        'local P = require "weft.internal"\n'
        'P.check(C.wf_cuda_stream_sync_raw(P.rt, %d, require("ffi").cast("void *", %dULL)))'
        % (dev, int(stream)), "=weft.asarray")


def interface_capsule(obj, where, runtime=None):
    """A versioned DLPack capsule viewing what obj's __cuda_array_interface__
    or __array_interface__ describes (None if it has neither)."""
    cuda = True
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is None:
        cuda = False
        iface = getattr(obj, "__array_interface__", None)
        if iface is None:
            return None
    proto = "__cuda_array_interface__" if cuda else "__array_interface__"
    if not isinstance(iface, dict):
        raise TypeError("%s: %s must be a dict, got %s" % (where, proto, type(iface).__name__))
    if iface.get("mask") is not None:
        raise BufferError("%s: %s has a mask: masked arrays are not supported (pass the data "
                          "and the mask as two arrays)" % (where, proto))
    data = iface.get("data")
    if not cuda and not isinstance(data, tuple):
        # host data given as a buffer object (or None: obj's buffer): NumPy
        # reads it, offset and all, and describes it by pointer
        import numpy
        arr = numpy.asarray(obj)
        return interface_capsule(arr, where, runtime)
    if not isinstance(data, tuple) or len(data) != 2 or not isinstance(data[0], numbers.Integral):
        raise TypeError("%s: %s data must be a (pointer, read_only) tuple, got %r"
                        % (where, proto, data))
    ptr, readonly = int(data[0]), bool(data[1])
    code, bits, itemsize = _dtype(iface.get("typestr"), where, proto)
    shape = _ints(iface.get("shape"), "shape", where, proto)
    strides = iface.get("strides")
    if strides is not None:
        strides = _ints(strides, "strides", where, proto)
        if len(strides) != len(shape):
            raise ValueError("%s: %s has %d strides for %d dimensions"
                             % (where, proto, len(strides), len(shape)))
        if any(s % itemsize for s in strides):
            raise BufferError("%s: %s strides %r (bytes) are not multiples of the element "
                              "size %d: weft cannot view this layout (copy it first)"
                              % (where, proto, tuple(strides), itemsize))
        strides = [s // itemsize for s in strides]
    dev = _device_of(obj) if cuda else 0
    if cuda:
        _sync_stream(iface.get("stream"), dev, where, runtime)
    n = len(shape)
    sh = (ctypes.c_int64 * max(n, 1))(*shape)
    st = (ctypes.c_int64 * max(n, 1))(*strides) if strides is not None else None
    m = _tensor(ptr, _DL_CUDA if cuda else _DL_CPU, dev, n, sh, st, code, bits,
                _READ_ONLY if readonly else 0, obj)
    if not m:
        raise MemoryError("%s: out of memory" % where)
    return _lib.make_capsule(m, True)


def asarray(x, dtype=None, runtime=None):
    """A weft Array viewing x without a copy: a weft Array (returned as it
    is), a DLPack capsule, anything with __dlpack__ (legacy or versioned), or with
    __cuda_array_interface__ or __array_interface__ (see this module's
    notes for strides, read-only data, byte orders, masks and streams).
    Other sequences (lists, tuples) are copied through NumPy."""
    from . import _rt
    from ._core import Array, _is_capsule
    rt = _rt(runtime)
    if isinstance(x, Array) and dtype is None and (runtime is None or x._rt is rt):
        return x
    where = "weft.asarray"
    if hasattr(x, "__dlpack__") or isinstance(x, Array) or _is_capsule(x):
        return rt.import_dlpack(x, dtype, where)
    cap = interface_capsule(x, where, rt)
    if cap is None:
        if isinstance(x, (list, tuple, numbers.Number)):
            import numpy
            cap = numpy.asarray(x).__dlpack__(max_version=(1, 0))
        else:
            raise TypeError("%s: cannot view a %s: it has no __dlpack__, "
                            "__cuda_array_interface__ or __array_interface__"
                            % (where, type(x).__name__))
    return rt._import(cap, dtype, where)
