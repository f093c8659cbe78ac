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
        from .protocols import interface_capsule  # __cuda_array_interface__, __array_interface__
        cap = interface_capsule(obj, where)
        if cap is not None:
            return cap
        if hasattr(obj, "__array__"):
            import numpy
            obj = numpy.asarray(obj)
            f = obj.__dlpack__
        else:
            raise TypeError("%s: cannot share a %s: it has no __dlpack__ or array interface "
                            "(expected a weft.Array, NumPy array, torch tensor, JAX array, or "
                            "an object with __cuda_array_interface__ or __array_interface__)"
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
        self._ctx = 0  # the C context of the fast paths (src/interop/pyapi.c)
        self._pending = []  # registry references dropped by __del__
        self._lock = threading.RLock()
        self._descs = {}  # dtype name or id -> description (see _desc)
        self._foreign = weakref.WeakKeyDictionary()  # see _from_other
        self._tapes = []  # the weft.Tapes recording, innermost last (weft/tape.py)
        W = L.weft_open()
        if not W:
            raise WeftError("weft: cannot open a runtime (the reason was printed to stderr)")
        self._W = W
        try:
            self._ctx = _F.ctx_new(W, WeftError, Array, _LuaArray, _converters,
                                   _launch_fallback)
            for name in L.SCALARS:
                self._desc(name)
        except BaseException:
            self.close()
            raise
        _runtimes.add(self)

    # ---- lifetime ---------------------------------------------------------
    def close(self):
        """Close the Lua state. Tensors exported earlier stay valid."""
        with self._lock:
            W, self._W = self._W, None
            ctx, self._ctx = self._ctx, 0
            self._pending = []
            xla = self.__dict__.pop("_xla", None)  # weft.jax: no XLA launch after this
            if xla is not None:
                xla.close()
            if ctx:
                _F.ctx_free(ctx)
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
        if not isinstance(code, str):
            raise TypeError("weft.Runtime.exec: code must be a str, got %s" % type(code).__name__)
        if chunkname is not None and not isinstance(chunkname, str):
            raise TypeError("weft.Runtime.exec: chunkname must be a str or None, got %s"
                            % type(chunkname).__name__)
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
        its first result (nresults = 1), a tuple (nresults > 1) or None.
        While a weft.Tape records, arrays reach Lua as the tape's arrays
        (with their gradients), so the launches and products the function
        makes are differentiable."""
        with self._lock:
            W = self._state()
            if self._tapes:  # a recording weft.Tape: one Lua array per tensor, as in launch
                args = self._tapes[-1]._args(args)
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
        JAX arrays or numbers as arguments (arrays shared without copies:
        a tensor passed here is viewed for the time of the launch)."""
        # The lock: a long launch releases the GIL (src/runtime/launch.c), and no
        # other thread may enter this runtime's Lua state meanwhile.
        with self._lock:
            ctx = self._ctx
            if not ctx:
                raise WeftError("weft: the runtime is closed")
            if self._pending:
                self._state()
            if self._tapes:  # a recording weft.Tape: one Lua array per tensor
                tape = self._tapes[-1]
                inputs, outputs = tape._args(inputs), tape._args(outputs)
            try:
                st = _F.launch(ctx, self, kernel, dim, inputs, outputs)
            except TypeError:
                _launch_arg_types(kernel, inputs, outputs)  # a clearer message, if it applies
                raise
            if st:
                raise self._error()

    # ---- conversions ---------------------------------------------------------
    def _helper(self, name, *args, nresults=1):
        return self.call("weft._interop." + name, *args, nresults=nresults)

    def _to_arg(self, v, a, keep, where):
        """Fill Arg a for Python value v; keep holds what must outlive the call."""
        if isinstance(v, Array):
            if v._rt is self:
                a.type = L.ARRAY
                a.i = v._lua()
                return
            a.type = L.ARRAY
            a.i = self._from_other(v, where)._lua()
            return
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
        else:  # anything with an array protocol: imported, then given to Lua
            arr = self._import(capsule_of(v, where), None, where)
            keep.append(arr)
            a.type, a.i = L.ARRAY, arr._lua()

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

    def _from_other(self, v, where):
        """An Array of this runtime viewing v, an Array of another runtime
        (weft.from_torch(t) without runtime= makes one of the default
        runtime), with v's gradient, so that a gradient computed here lands
        in v.grad. One per v while v lives, so that a tape sees one array."""
        with self._lock:
            ent = self._foreign.get(v)
            if ent is None:
                local = self._import(v.__dlpack__(max_version=(1, 0)), v.dtype, where)
                ent = self._foreign[v] = [local, None]
            local = ent[0]
            if v.requires_grad:
                g = v.grad
                gp = None if g is None else g._ptr
                if gp != ent[1]:
                    local.grad = None if g is None else self._import(
                        g.__dlpack__(max_version=(1, 0)), g.dtype, where + " (grad)")
                    ent[1] = gp
            elif ent[1] is not None:
                local.grad, ent[1] = None, None
            return local

    def import_dlpack(self, obj, dtype=None, where="weft.from_dlpack"):
        """A weft Array viewing obj (anything with __dlpack__, or a capsule)."""
        cap = obj if type(obj) is _CapsuleType else capsule_of(obj, where)
        return self._import(cap, dtype, where)

    def _import(self, cap, dtype, where):
        """An Array owning the tensor of DLPack capsule cap: a C-owned header,
        no Lua object until Lua needs one."""
        ctx = self._ctx
        if not ctx:
            raise WeftError("weft: the runtime is closed")
        d = None
        if dtype is not None:
            if not isinstance(dtype, str):
                dtype = getattr(dtype, "name", None) or str(dtype)
            d = self._descs.get(dtype) or self._desc(dtype)
        a = _new(Array)
        a._h = _F.import_(ctx, cap, d, where)
        a._rt = self
        a._ref = 0
        a._dt = d
        a._i = None
        return a

    def _desc(self, key):
        """The description of a dtype (a name or a type id) that the C fast
        paths read: (id, name, scalar index, ntrail, t0, t1, DLPack code,
        bits); scalar index -1 for structs, which have no DLPack form."""
        d = self._descs.get(key)
        if d is None:
            scalar, code, bits, _size, ntrail, t0, t1, tid, name = self._helper(
                "typeinfo", key, nresults=9)
            idx = L.SCALARS.index(scalar) if scalar else -1
            d = (int(tid), name, idx, int(ntrail), int(t0), int(t1), int(code), int(bits))
            self._descs[d[0]] = self._descs[name] = self._descs[key] = d
        return d


def _launch_arg_types(kernel, inputs, outputs):
    """Runtime.launch's argument types, checked after the fast path refused
    them (so that the common case pays nothing for the check)."""
    if not isinstance(kernel, str):
        raise TypeError("weft.Runtime.launch: kernel must be the name of a global (a str), "
                        "got %s" % type(kernel).__name__) from None
    for what, seq in (("inputs", inputs), ("outputs", outputs)):
        if seq is not None and not isinstance(seq, (list, tuple)):
            raise TypeError("weft.Runtime.launch: %s must be a list or a tuple, got %s"
                            % (what, type(seq).__name__)) from None


def _launch_fallback(v, rt, kernel, index, nin):
    """What the C launch cannot convert by itself: a capsule for anything
    with an array protocol, a plain value for numbers, (ref,) for a LuaRef.
    Registers a fast converter for torch tensors and NumPy arrays."""
    where = "weft.Runtime.launch(%r) %s %d" % (kernel, "input" if index < nin else "output",
                                               index if index < nin else index - nin)
    _register_converters(v)
    if isinstance(v, Array):
        return rt._from_other(v, where)  # another runtime's, with its gradient
    if isinstance(v, LuaRef):
        if v._rt is not rt:
            raise ValueError("%s: a LuaRef belongs to another runtime" % where)
        return (v._ref,)
    if isinstance(v, numbers.Number) and not hasattr(v, "__dlpack__"):
        if isinstance(v, bool):
            return bool(v)
        if isinstance(v, numbers.Integral):
            return int(v)
        if isinstance(v, numbers.Real):
            return float(v)
    if isinstance(v, (str, bytes)):
        raise TypeError("%s: a kernel cannot take a %s" % (where, type(v).__name__))
    return capsule_of(v, where)


def _register_converters(v):
    """Teach the C launch the fast DLPack export of torch and NumPy (their
    C-level exports, several times cheaper than calling __dlpack__)."""
    t = type(v)
    if t in _converters:
        return
    mod = getattr(t, "__module__", "")
    if mod == "torch" and t.__name__ == "Tensor":
        from torch.utils.dlpack import to_dlpack
        _converters[t] = to_dlpack
    elif mod == "numpy" and t.__name__ == "ndarray":
        _converters[t] = t.__dlpack__


_converters = {}  # type -> f(x) -> DLPack capsule, read by the C launch
_new = object.__new__


def _drop_dlpack(argv, n):
    """Delete the DLPack tensors of args that were never handed to weft."""
    for k in range(n):
        if argv[k].type in (L.DLPACK, L.DLPACK_VERSIONED) and argv[k].p:
            L.dlpack_delete(argv[k].p, int(argv[k].type == L.DLPACK_VERSIONED))
            argv[k].type = L.NIL


class Array:
    """A weft array held by a Runtime (a zero-copy handle).

    shape counts elements (10 vec3 -> (10,)); the DLPack, NumPy, torch and
    JAX views spell vector/matrix elements as trailing dimensions.

    An array imported from Python (from_torch, from_numpy, ...) is a header
    owned by C (_h: a capsule whose C destructor frees the header, which
    holds the producer's tensor through a buffer reference). Lua gets its
    own array only when Lua code needs it by name (rt["x"] = a,
    rt.call(f, a)); from then on the object is a _LuaArray, _ref names the
    Lua array and _h is its header's address. Arrays made by Lua are
    _LuaArrays from the start.
    """
    __slots__ = ("_rt", "_h", "_ref", "_dt", "_i", "__weakref__")

    def __init__(self, *args, **kwargs):
        raise TypeError("weft.Array is made by a Runtime (rt['x'], weft.from_dlpack, "
                        "weft.from_numpy, ...)")

    @classmethod
    def _from_result(cls, rt, r):
        a = _new(_LuaArray)
        a._rt, a._h, a._ref, a._i = rt, r.handle, r.i, None
        a._dt = rt._descs.get(r.s.decode()) or rt._desc(r.s.decode())
        return a

    # ---- the header ----------------------------------------------------------
    def _header(self):
        """The header pointer, checking that a Lua-held one is still alive."""
        if self._ref and self._rt._W is None:
            raise WeftError("weft: the runtime is closed")
        return self._h

    def _info(self):
        """(data, shape, strides, device, elsize, dtype id, flags), read once:
        all but the flags stay fixed for the array's life."""
        i = self._i
        if i is None:
            i = self._i = _F.info(self._header())
        return i

    def _desc(self):
        d = self._dt
        if d is None:
            d = self._dt = self._rt._desc(self._info()[5])
        return d

    def _flags(self):
        return _F.flags(self._header())

    def _lua(self):
        """The registry reference of the Lua array, made on first need."""
        ref = self._ref
        if ref:
            return ref
        rt = self._rt
        with rt._lock:
            if not rt._ctx:
                raise WeftError("weft: the runtime is closed")
            r = _F.adopt(rt._ctx, self._h)
            if r is None:
                raise rt._error()
        self._ref, self._h = r  # the C-owned header dies with its capsule
        self.__class__ = _LuaArray
        return self._ref

    # ---- properties --------------------------------------------------------
    @property
    def runtime(self):
        return self._rt

    @property
    def _ptr(self):
        return self._info()[0]

    @property
    def shape(self):
        return self._info()[1]

    @property
    def dtype(self):
        """The element type's name ("float32", "vec3f", ...)."""
        return self._desc()[1]

    @property
    def ndim(self):
        return len(self._info()[1])

    @property
    def size(self):
        n = 1
        for s in self._info()[1]:
            n *= s
        return n

    @property
    def strides(self):
        """Strides in bytes, one per element dimension."""
        return self._info()[2]

    @property
    def _device(self):
        return self._info()[3]

    @property
    def device(self):
        d = self._info()[3]
        return "cpu" if d < 0 else "cuda:%d" % d

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
        if not self._ref and not self._flags() & L.ARRAY_REQUIRES_GRAD:
            return None  # nothing in Lua can have given it one
        return self._rt._helper("grad", self)

    @grad.setter
    def grad(self, g):
        self._rt._helper("set_grad", self, g)

    def __len__(self):
        return self._info()[1][0]

    def __repr__(self):
        return "weft.Array(shape=%s, dtype=%s, device=%s)" % (self.shape, self.dtype, self.device)

    # ---- DLPack --------------------------------------------------------------
    def __dlpack_device__(self):
        d = self._info()[3]
        return (1, 0) if d < 0 else (2, d)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule viewing this array (versioned when the consumer
        passes max_version >= (1, 0)); copy=True exports a copy."""
        versioned = max_version is not None and max_version[0] >= 1
        h = self._header()
        d = self._dt or self._desc()
        if d[2] < 0:
            raise TypeError("weft: arrays of %s (a struct) have no DLPack or array-interface form"
                            % d[1])
        dev = (self._i or self._info())[3]
        if copy is None and dl_device is None and dev < 0:
            return _F.export(h, versioned, d)  # the common case: no copy, host memory
        rt = self._rt
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
            a.type, a.i = L.ARRAY, src._lua()
            p = L.weft_export_value(W, ctypes.byref(a), int(versioned), int(bool(copy)))
            if not p:
                raise rt._error()
        if forced and versioned:
            ctypes.cast(p, ctypes.POINTER(ctypes.c_uint64))[3] |= 2  # flags: IS_COPIED
        return L.make_capsule(p, versioned)

    # ---- array interfaces ----------------------------------------------------
    def _interface(self):
        d = self._desc()
        if d[2] < 0:
            raise TypeError("weft: arrays of %s (a struct) have no DLPack or array-interface form"
                            % d[1])
        scalar = L.SCALARS[d[2]]
        trail = (d[4], d[5])[:d[3]]
        sb = _SCALAR_BYTES[scalar]
        data, shape, strides = self._info()[:3]
        shape = shape + trail
        inner, tstrides = sb, []
        for n in reversed(trail):
            tstrides.insert(0, inner)
            inner *= n
        strides = strides + tuple(tstrides)
        compact, c = True, sb
        for n, s in zip(reversed(shape), reversed(strides)):
            if n != 1 and s != c:
                compact = False
            c *= n
        return {
            "shape": shape,
            "typestr": _TYPESTR[scalar],
            "data": (data, self.readonly),
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


class _LuaArray(Array):
    """An Array that Lua holds: dropping it releases the registry reference
    (later, on the runtime's next call: a finalizer must not enter Lua)."""
    __slots__ = ()

    def __del__(self):
        try:
            rt = self._rt
            if rt._W is not None:
                rt._pending.append(self._ref)
        except Exception:  # interpreter shutdown
            pass


def _sync(self):
    """weft.synchronize() when the runtime has it (CUDA)."""
    try:
        self.call("weft.synchronize", nresults=0)
    except WeftError:
        pass


Runtime._sync = _sync
_F = L.fast
