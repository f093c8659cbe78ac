"""Runtime, Array and the conversion of Python values to and from Lua."""
import ctypes
import numbers
import threading
import weakref

from . import _lib as L
from ._lib import lib


class WeftError(RuntimeError):
    """An error raised by the weft runtime (a Lua error or a failed call)."""


_TYPESTR = {
    "bool": "|b1", "int8": "|i1", "uint8": "|u1", "int16": "<i2", "uint16": "<u2",
    "int32": "<i4", "uint32": "<u4", "int64": "<i8", "uint64": "<u8",
    "float16": "<f2", "float32": "<f4", "float64": "<f8",
}
_SCALAR_BYTES = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4,
                 "uint32": 4, "int64": 8, "uint64": 8, "float16": 2, "float32": 4,
                 "float64": 8}

_runtimes = weakref.WeakSet()


def _close_all():
    """atexit: close runtimes while Python is fully alive, so the deleters
    of imported tensors (NumPy's takes the GIL) run in a sane interpreter."""
    for rt in list(_runtimes):
        rt.close()


_CapsuleType = L.CapsuleType


def _is_capsule(obj):
    return type(obj) is _CapsuleType


def capsule_of(obj, where):
    """A DLPack capsule for obj (a capsule, or anything with __dlpack__, or
    with the NumPy array protocols)."""
    if _is_capsule(obj):
        return obj
    f = getattr(obj, "__dlpack__", None)
    if f is None:
        if hasattr(obj, "__array_interface__") or hasattr(obj, "__array__"):
            import numpy
            obj = numpy.asarray(obj)
            f = obj.__dlpack__
        else:
            raise TypeError("%s: cannot share a %s: it has no __dlpack__ or array interface "
                            "(expected a weft.Array, NumPy array, torch tensor or JAX array)"
                            % (where, type(obj).__name__))
    try:
        try:
            return f(max_version=(1, 0))
        except TypeError:
            return f()  # producers that predate the keyword arguments
    except (RuntimeError, BufferError, ValueError) as e:
        if getattr(obj, "requires_grad", False) and hasattr(obj, "detach"):
            return capsule_of(obj.detach(), where)
        raise BufferError("%s: cannot share this %s without a copy: %s"
                          % (where, type(obj).__name__, e)) from None


class LuaRef:
    """A Lua value with no Python form (a table, a function, a vec3...),
    held by reference; it can be passed back to Lua."""
    __slots__ = ("_rt", "_ref", "type_name", "__weakref__")

    def __repr__(self):
        return "<weft.LuaRef %s>" % self.type_name

    def __del__(self):
        rt = getattr(self, "_rt", None)
        if rt is not None and rt._W is not None:
            rt._pending.append(self._ref)


class Runtime:
    """A weft runtime: a LuaJIT state with the weft module loaded."""

    def __init__(self):
        self._W = None
        self._pending = []  # registry references dropped by __del__
        self._lock = threading.RLock()
        W = L.weft_open()
        if not W:
            raise WeftError("weft: cannot open a runtime (the reason was printed to stderr)")
        self._W = W
        self._res = L.Arg()  # the result slot of the fast paths
        _runtimes.add(self)

    # ---- lifetime ---------------------------------------------------------
    def close(self):
        """Close the Lua state. Tensors exported earlier stay valid."""
        with self._lock:
            W, self._W = self._W, None
            self._pending = []
            if W:
                L.weft_close(W)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _state(self):
        W = self._W
        if W is None:
            raise WeftError("weft: the runtime is closed")
        pending = self._pending
        while pending:
            L.weft_unref(W, pending.pop())
        return W

    def _error(self, where=None):
        msg = L.weft_errmsg(self._W).decode("utf-8", "replace")
        short = msg.split("\nstack traceback:")[0]
        err = WeftError(short)
        err.lua_traceback = msg
        return err

    # ---- running Lua -------------------------------------------------------
    def exec(self, code, chunkname=None):
        """Run a chunk of Lua code. Errors name it as Lua does for strings
        ([string "..."]:line:) unless chunkname is given; kernels defined in
        it can be compiled (their source text stays reachable)."""
        self.call("weft._interop.exec", code, chunkname, nresults=0)

    def dofile(self, path):
        """Run a Lua file."""
        with self._lock:
            if L.weft_dofile(self._state(), str(path).encode()):
                raise self._error()

    def __getitem__(self, name):
        with self._lock:
            r = L.Arg()
            if L.weft_get(self._state(), name.encode(), ctypes.byref(r)):
                raise self._error()
            return self._from_arg(r)

    def __setitem__(self, name, value):
        """rt["x"] = value: numbers, strings, weft Arrays, and anything with
        __dlpack__ (imported without a copy)."""
        with self._lock:
            W = self._state()
            keep = []
            a = L.Arg()
            self._to_arg(value, a, keep, "weft.Runtime[%r] = value" % name)
            if L.weft_set(W, name.encode(), ctypes.byref(a)):
                raise self._error()

    def call(self, func, *args, nresults=1):
        """Call the Lua function at a global path ("f", "mod.f"). Returns
        its first result (nresults = 1), a tuple (nresults > 1) or None."""
        with self._lock:
            W = self._state()
            keep = []
            n = len(args)
            argv = (L.Arg * max(n, 1))()
            try:
                for k, v in enumerate(args):
                    self._to_arg(v, argv[k], keep, "weft.Runtime.call(%r)" % func)
            except BaseException:
                _drop_dlpack(argv, n)
                raise
            res = (L.Arg * max(nresults, 1))()
            if L.weft_call(W, func.encode(), n, argv, nresults, res):
                raise self._error()
            out = tuple(self._from_arg(res[k]) for k in range(nresults))
        if nresults == 1:
            return out[0]
        return out if nresults else None

    def launch(self, kernel, dim, inputs=(), outputs=()):
        """weft.launch of the kernel at a global path over dim (an int or a
        tuple of up to 4), with weft Arrays, NumPy arrays, torch tensors,
        JAX arrays or numbers as arguments (arrays shared without copies)."""
        dims = (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
        with self._lock:
            W = self._state()
            keep = []
            nin, nout = len(inputs), len(outputs)
            argv = (L.Arg * max(nin + nout, 1))()
            try:
                for k, v in enumerate(inputs):
                    self._to_arg(v, argv[k], keep, "weft.Runtime.launch(%r) input %d" % (kernel, k))
                for k, v in enumerate(outputs):
                    self._to_arg(v, argv[nin + k], keep,
                                 "weft.Runtime.launch(%r) output %d" % (kernel, k))
            except BaseException:
                _drop_dlpack(argv, nin + nout)
                raise
            dimv = (ctypes.c_int64 * 4)(*dims)
            outp = ctypes.byref(argv, nin * ctypes.sizeof(L.Arg))
            if L.weft_launch_io(W, kernel.encode(), len(dims), dimv, nin, argv, nout,
                                ctypes.cast(outp, ctypes.POINTER(L.Arg))):
                raise self._error()

    # ---- conversions ---------------------------------------------------------
    def _helper(self, name, *args, nresults=1):
        return self.call("weft._interop." + name, *args, nresults=nresults)

    def _to_arg(self, v, a, keep, where):
        """Fill Arg a for Python value v; keep holds what must outlive the call."""
        if isinstance(v, Array):
            if v._rt is self:
                a.type = L.ARRAY
                a.i = v._ref
                return
            v = v.__dlpack__(max_version=(1, 0))  # another runtime: share through DLPack
        elif isinstance(v, LuaRef):
            if v._rt is not self:
                raise ValueError("%s: a LuaRef belongs to another runtime" % where)
            a.type = L.REF
            a.i = v._ref
            return
        if v is None:
            a.type = L.NIL
        elif isinstance(v, bool):
            a.type, a.i = L.BOOL, int(v)
        elif isinstance(v, numbers.Integral) and not hasattr(v, "__dlpack__"):
            a.type, a.i = L.INT, int(v)
        elif isinstance(v, numbers.Real) and not hasattr(v, "__dlpack__"):
            a.type, a.d = L.DOUBLE, float(v)
        elif isinstance(v, str):
            b = v.encode()
            keep.append(b)
            a.type, a.s = L.STRING, b
        else:
            self._capsule_arg(capsule_of(v, where), a, where)

    def _capsule_arg(self, cap, a, where, dtype=None):
        """Consume a DLPack capsule into Arg a (the tensor passes to weft)."""
        kind = ctypes.c_int()
        p = L.capsule_take(cap, ctypes.byref(kind))
        if not p:
            k = kind.value
            raise ValueError("%s: %s" % (where, "the DLPack capsule was already consumed"
                                         if k == -1 else "not a DLPack capsule"))
        a.type = L.DLPACK_VERSIONED if kind.value == 1 else L.DLPACK
        a.p = p
        if dtype is not None:
            a.s = dtype.encode()

    def _from_arg(self, r):
        t = r.type
        if t == L.DOUBLE:
            return r.d
        if t == L.ARRAY:
            return Array._from_result(self, r)
        if t == L.NIL:
            return None
        if t == L.BOOL:
            return bool(r.i)
        if t == L.INT:
            return r.i
        if t == L.STRING:
            return r.s.decode("utf-8", "replace")
        ref = LuaRef.__new__(LuaRef)
        ref._rt, ref._ref, ref.type_name = self, r.i, (r.s or b"?").decode()
        return ref

    def import_dlpack(self, obj, dtype=None, where="weft.from_dlpack"):
        """A weft Array viewing obj (anything with __dlpack__, or a capsule)."""
        if dtype is not None:
            if not isinstance(dtype, str):
                dtype = getattr(dtype, "name", None) or str(dtype)
            dtype = dtype.encode()
        cap = obj if type(obj) is _CapsuleType else capsule_of(obj, where)
        with self._lock:
            W = self._W
            if W is None or self._pending:
                W = self._state()
            res = self._res
            st = L.py_import(W, cap, dtype, res)
            if st:
                if st == -1:
                    raise ValueError("%s: the DLPack capsule was already consumed" % where)
                if st == -2:
                    raise ValueError("%s: not a DLPack capsule" % where)
                raise self._error()
            return Array._from_result(self, res)


def _drop_dlpack(argv, n):
    """Delete the DLPack tensors of args that were never handed to weft."""
    for k in range(n):
        if argv[k].type in (L.DLPACK, L.DLPACK_VERSIONED) and argv[k].p:
            L.dlpack_delete(argv[k].p, int(argv[k].type == L.DLPACK_VERSIONED))
            argv[k].type = L.NIL


_typeinfo_cache = {}


def _typeinfo(rt, dtype):
    """(scalar name, trailing dims, DLPack code, bits) of a weft dtype name."""
    info = _typeinfo_cache.get(dtype)
    if info is None:
        r = rt._helper("typeinfo", dtype, nresults=7)
        if r[0] is None:
            raise TypeError("weft: arrays of %s (a struct) have no DLPack or array-interface form"
                            % dtype)
        ntrail = int(r[4])
        info = (r[0], tuple(int(x) for x in r[5:5 + ntrail]), int(r[1]), int(r[2]), ntrail,
                int(r[5]), int(r[6]))
        _typeinfo_cache[dtype] = info
    return info


class Array:
    """A weft array held by a Runtime (a zero-copy handle on a Lua array).

    shape counts elements (10 vec3 -> (10,)); the DLPack, NumPy, torch and
    JAX views spell vector/matrix elements as trailing dimensions.
    """
    __slots__ = ("_rt", "_ref", "_ptr", "_h", "shape", "dtype", "_device", "_strides",
                 "_elsize", "__weakref__")

    def __init__(self, *args, **kwargs):
        raise TypeError("weft.Array is made by a Runtime (rt['x'], weft.from_dlpack, "
                        "weft.from_numpy, ...)")

    @classmethod
    def _from_result(cls, rt, r):
        a = cls.__new__(cls)
        nd = r.ndim
        a._rt, a._ref, a._ptr, a._h = rt, r.i, r.p or 0, r.handle
        a.shape = tuple(r.shape[:nd])
        a._strides = tuple(r.strides[:nd])
        a.dtype = r.s.decode()
        a._device, a._elsize = r.device, int(r.d)
        return a

    def _flags(self):
        """The header's flags, read in place (the array is alive while we
        hold its reference and the runtime is open)."""
        if self._rt._W is None:
            raise WeftError("weft: the runtime is closed")
        return ctypes.c_int32.from_address(self._h + L.ARRAY_FLAGS_OFFSET).value

    def __del__(self):
        rt = getattr(self, "_rt", None)
        if rt is not None and rt._W is not None:
            rt._pending.append(self._ref)

    # ---- properties --------------------------------------------------------
    @property
    def runtime(self):
        return self._rt

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def strides(self):
        """Strides in bytes, one per element dimension."""
        return self._strides

    @property
    def device(self):
        return "cpu" if self._device < 0 else "cuda:%d" % self._device

    @property
    def readonly(self):
        return bool(self._flags() & L.ARRAY_READONLY)

    @property
    def requires_grad(self):
        return bool(self._flags() & L.ARRAY_REQUIRES_GRAD)

    @requires_grad.setter
    def requires_grad(self, on):
        self._rt._helper("set", self, "requires_grad", bool(on))

    @property
    def grad(self):
        """The gradient array (None unless requires_grad)."""
        return self._rt._helper("grad", self)

    @grad.setter
    def grad(self, g):
        self._rt._helper("set_grad", self, g)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return "weft.Array(shape=%s, dtype=%s, device=%s)" % (self.shape, self.dtype, self.device)

    # ---- DLPack --------------------------------------------------------------
    def __dlpack_device__(self):
        return (1, 0) if self._device < 0 else (2, self._device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule viewing this array (versioned when the consumer
        passes max_version >= (1, 0)); copy=True exports a copy."""
        versioned = max_version is not None and max_version[0] >= 1
        rt = self._rt
        if rt._W is None:
            raise WeftError("weft: the runtime is closed")
        if copy is None and dl_device is None and self._device < 0:
            # the common case in one C call: no copy, host memory
            info = _typeinfo(rt, self.dtype)
            try:
                return L.py_export(self._h, versioned, info[2], info[3], info[4], info[5],
                                   info[6], 0)
            except ValueError:
                raise BufferError("weft: cannot export this array through DLPack") from None
        src = self
        forced = False
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            if copy is False:
                raise BufferError("weft: cannot export a %s array to device %s without a copy"
                                  % (self.device, tuple(dl_device)))
            if tuple(dl_device)[0] != 1:
                raise BufferError("weft: cannot export to device %s" % (tuple(dl_device),))
            src, copy, forced = rt._helper("to_cpu", self), False, True
        if src._device >= 0 and stream != -1:
            rt._sync()
        with rt._lock:
            W = rt._state()
            a = L.Arg()
            a.type, a.i = L.ARRAY, src._ref
            p = L.weft_export_value(W, ctypes.byref(a), int(versioned), int(bool(copy)))
            if not p:
                raise rt._error()
        if forced and versioned:
            ctypes.cast(p, ctypes.POINTER(ctypes.c_uint64))[3] |= 2  # flags: IS_COPIED
        return L.make_capsule(p, versioned)

    # ---- array interfaces ----------------------------------------------------
    def _interface(self):
        scalar, trail = _typeinfo(self._rt, self.dtype)[:2]
        sb = _SCALAR_BYTES[scalar]
        shape = self.shape + trail
        inner, tstrides = sb, []
        for n in reversed(trail):
            tstrides.insert(0, inner)
            inner *= n
        strides = self._strides + tuple(tstrides)
        compact, c = True, sb
        for n, s in zip(reversed(shape), reversed(strides)):
            if n != 1 and s != c:
                compact = False
            c *= n
        return {
            "shape": shape,
            "typestr": _TYPESTR[scalar],
            "data": (self._ptr, self.readonly),
            "strides": None if compact else strides,
            "version": 3,
        }

    @property
    def __array_interface__(self):
        if self._device >= 0:
            raise AttributeError("weft: a %s array has no __array_interface__ "
                                 "(use __cuda_array_interface__ or .numpy())" % self.device)
        return self._interface()

    @property
    def __cuda_array_interface__(self):
        if self._device < 0:
            raise AttributeError("weft: a cpu array has no __cuda_array_interface__")
        self._rt._sync()  # weft's pending work is done: no stream to wait on
        d = self._interface()
        d["stream"] = None
        return d

    def numpy(self):
        """A NumPy array: a zero-copy view on the CPU, a copy from a GPU."""
        import numpy
        src = self if self._device < 0 else self._rt._helper("to_cpu", self)
        return numpy.from_dlpack(src)

    def to(self, device):
        """A copy on another device (or self)."""
        return self._rt.call("weft._interop.to", self, device)


def _sync(self):
    """weft.synchronize() when the runtime has it (CUDA)."""
    try:
        self.call("weft.synchronize", nresults=0)
    except WeftError:
        pass


Runtime._sync = _sync
