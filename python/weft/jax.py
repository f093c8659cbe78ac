"""weft kernels inside JAX programs, as XLA FFI custom calls.

    k = rt.jax_kernel("saxpy")            # a Lua kernel (global name)
    y, = jax.jit(k)(x, 2.0)               # outputs come back as a list
    f = rt.jax_callable("step", num_outputs=2)   # a Lua function launching kernels
    weft.register_ffi_callback("name", pyfunc)   # pyfunc(inputs, outputs, attrs, ctx)

The semantics are Warp's (warp.jax_experimental.ffi): a kernel's inputs come
first and its last num_outputs parameters are outputs (in_out_argnames move
inputs among the outputs, aliased to their input buffers); scalar arguments
are static Python values; launch dims default to the shape of the first
input array, output shapes to the launch dims; vector and matrix elements
are trailing dimensions on the JAX side; vmap_method is "broadcast_all",
"sequential" or "expand_dims" (leading batch dimensions are folded into the
first launch dimension).

jax_kernel calls run in C: the target "weft_kernel" (src/interop/xla_ffi.c)
reads XLA's call frame and launches the compiled entry without Python or the
GIL: on the cpu, on the Runtime's thread pool; on CUDA (when JAX's default
backend is a GPU), the kernel's PTX queued on XLA's stream of the device the
call runs on. Callables and callbacks are Python functions behind a ctypes
trampoline, as in Warp, on the cpu platform.
"""
import ctypes
import functools
import itertools
import threading

import numpy as np

from . import _lib
from ._core import LuaRef, WeftError

__all__ = ["jax_kernel", "jax_callable", "register_ffi_callback"]

VMAP_METHODS = ("broadcast_all", "sequential", "expand_dims")

# weft scalar -> (NumPy dtype, XLA element type)
_SCALARS = {
    "bool": (np.bool_, 1), "int8": (np.int8, 2), "int16": (np.int16, 3), "int32": (np.int32, 4),
    "int64": (np.int64, 5), "uint8": (np.uint8, 6), "uint16": (np.uint16, 7),
    "uint32": (np.uint32, 8), "uint64": (np.uint64, 9), "float16": (np.float16, 10),
    "float32": (np.float32, 11), "float64": (np.float64, 12),
}
_XLA_TO_NP = {code: np.dtype(t) for t, code in _SCALARS.values()}
_SRC_ARG, _SRC_RET, _SRC_SCALAR = 0, 1, 2
_ZERO, _READONLY = 1, 2


class _Fns:
    """The builtins of src/interop/xla_ffi.c."""

    def __init__(self):
        f = _lib.lib.wf_xla_functions
        f.restype = ctypes.py_object
        for fn in f():
            setattr(self, fn.__name__, fn)


_X = _Fns()
_lock = threading.Lock()  # target registration and the registries below
_targets_done = False
_cuda_target = None  # True/False once registration was tried
_callbacks = {}  # name -> ctypes trampoline (kept alive while XLA may call it)
_names = itertools.count()


def _jax():
    import jax
    return jax


def _register_targets():
    """Register "weft_kernel" with XLA once per process: the C handler for
    the cpu platform, and its CUDA counterpart when jaxlib allows it."""
    global _targets_done, _cuda_target
    with _lock:
        if _targets_done:
            return
        jax = _jax()
        cpu, cuda = _X.targets()
        jax.ffi.register_ffi_target("weft_kernel", cpu, platform="cpu")
        try:
            jax.ffi.register_ffi_target("weft_kernel", cuda, platform="CUDA")
            _cuda_target = True
        except Exception:  # a CPU-only jaxlib may refuse the platform
            _cuda_target = False
        _targets_done = True


class _State:
    """A Runtime's XLA context (its C launch state and plans); closed with
    the Runtime."""

    def __init__(self, rt):
        rt.exec('require "weft.xla"', "=weft.jax")
        self.ctx = _X.ctx_new()

    def close(self):
        if self.ctx:
            _X.ctx_close(self.ctx)
            self.ctx = 0


def _state(rt):
    st = rt.__dict__.get("_xla")
    if st is None:
        with rt._lock:
            st = rt.__dict__.get("_xla")
            if st is None:
                st = rt._xla = _State(rt)
    return st


class _Param:
    """One kernel parameter as weft._interop.ffi_params describes it."""
    __slots__ = ("name", "kind", "type", "scalar", "count", "trail", "ndim", "size", "id",
                 "in_out")

    def __init__(self, line):
        f = line.split()
        self.name, self.kind, self.type, self.scalar = f[0], f[1], f[2], f[3]
        self.count, ntrail, t0, t1, self.ndim, self.size, self.id = (int(x) for x in f[4:11])
        self.trail = (t0, t1)[:ntrail]
        self.in_out = False


def _as_dims(d, what):
    if isinstance(d, (int, np.integer)):
        return (int(d),)
    try:
        t = tuple(int(x) for x in d)
    except TypeError:
        raise TypeError("%s must be an int or a sequence of ints, got %r" % (what, d)) from None
    if not 1 <= len(t) <= 4:
        raise ValueError("%s must have 1 to 4 entries, got %d" % (what, len(t)))
    return t


def _manual_type(arrays):
    """Inside shard_map: the type of the input that varies over the most
    mesh axes (the outputs of an FFI call vary as its inputs do); None
    elsewhere."""
    jax = _jax()
    best, most = None, 0
    for x in arrays:
        t = jax.typeof(x)
        m = getattr(t, "manual_axis_type", None)
        n = len(getattr(m, "varying", ()) or ())
        if n > most:
            best, most = t, n
    return best


def _out_type(shape, dtype, like):
    """The result type of an FFI call: shape and dtype, varying like `like`."""
    jax = _jax()
    if like is None:
        return jax.ShapeDtypeStruct(tuple(shape), dtype)
    from jax.sharding import NamedSharding, PartitionSpec
    spec = PartitionSpec(*([None] * len(shape)))
    return like.update(shape=tuple(shape), dtype=np.dtype(dtype),
                       sharding=NamedSharding(like.sharding.mesh, spec))


def _cuda_device():
    """The device whose architecture a plan is compiled for: None (the cpu)
    unless JAX's default backend is a GPU, then 0 (the CUDA target loads the
    PTX on whichever device XLA runs the call)."""
    return 0 if _jax().default_backend() == "gpu" else None


def _check_vmap(m, where):
    if m not in VMAP_METHODS:
        raise ValueError("%s: vmap_method must be one of %s, got %r"
                         % (where, ", ".join(VMAP_METHODS), m))


def _lua_function(rt, name, where, kind):
    if not isinstance(name, str):
        raise TypeError("%s: expected the name of a Lua global (a str), got %s"
                        % (where, type(name).__name__))
    v = rt[name]
    if not isinstance(v, LuaRef):
        raise ValueError("%s: no %s named '%s'" % (where, kind, name))
    return v


class JaxKernel:
    """rt.jax_kernel(...): call it with the kernel's inputs (JAX arrays and
    static scalars); returns the list of outputs."""

    def __init__(self, rt, name, num_outputs=1, launch_dims=None, output_dims=None,
                 in_out_argnames=(), vmap_method="broadcast_all"):
        self.where = "weft.jax_kernel('%s')" % name
        _check_vmap(vmap_method, self.where)
        self.rt, self.name = rt, name
        self.kernel = _lua_function(rt, name, self.where, "kernel")
        _register_targets()
        st = _state(rt)
        params = [_Param(x) for x in rt.call("weft._interop.ffi_params", self.kernel).split("\n")
                  if x]
        in_out = list(in_out_argnames or ())
        if len(set(in_out)) != len(in_out):
            raise ValueError("%s: in_out_argnames has duplicates" % self.where)
        if not isinstance(num_outputs, int) or num_outputs < 1:
            raise ValueError("%s: num_outputs must be at least 1" % self.where)
        if num_outputs > len(params):
            raise ValueError("%s: the kernel has %d parameters, fewer than num_outputs = %d"
                             % (self.where, len(params), num_outputs))
        if num_outputs < len(in_out):
            raise ValueError("%s: num_outputs counts the in_out_argnames too" % self.where)
        self.num_outputs = num_outputs
        self.num_inputs = len(params) - num_outputs + len(in_out)
        names = [p.name for p in params]
        for n in in_out:
            if n not in names:
                raise ValueError("%s: in_out_argnames: the kernel has no parameter '%s'"
                                 % (self.where, n))
            if names.index(n) >= self.num_inputs:
                raise ValueError("%s: in_out argument '%s' must come before the outputs"
                                 % (self.where, n))
        for i, p in enumerate(params):
            p.in_out = p.name in in_out
            if p.kind == "struct":
                raise TypeError("%s: parameter '%s' is of struct type %s, which has no JAX form"
                                % (self.where, p.name, p.type))
            if (i >= self.num_inputs or p.in_out) and p.kind == "scalar":
                raise TypeError("%s: output '%s' must be an array, it is a %s"
                                % (self.where, p.name, p.type))
        self.params = params
        self.inputs = params[:self.num_inputs]
        self.outputs = params[self.num_inputs:]
        self.launch_dims, self.output_dims = launch_dims, output_dims
        self.vmap_method = vmap_method
        # in-out arrays: the FFI results that alias their input buffers
        self.aliases, k, arrays = {}, 0, 0
        for p in self.inputs:
            if p.kind == "scalar":
                continue
            if p.in_out:
                self.aliases[arrays] = k
                k += 1
            arrays += 1
        self._st = st
        self._plans = {}  # (specs, launch ndim, mode, adjoint) -> plan index in st.ctx

    # ---- tracing ------------------------------------------------------------
    def _bind(self, args, launch_dims, output_dims):
        """Check the call's arguments: (the array arguments, a type spec per
        parameter, the static scalars as (param, values), the launch dims or
        None (the first array's shape), the launch ndim, the result types)."""
        jax = _jax()
        if len(args) != self.num_inputs:
            raise TypeError("%s takes %d input%s (%s), got %d" % (
                self.where, self.num_inputs, "" if self.num_inputs == 1 else "s",
                ", ".join(p.name for p in self.inputs), len(args)))
        arrays, specs, blob, shapes, first = [], [], [], {}, None
        scalar_dtype, floats = None, []
        for p, x in zip(self.inputs, args):
            generic = p.kind == "generic"
            array = p.kind == "array" or (generic and hasattr(x, "shape") and hasattr(x, "dtype")
                                          and not isinstance(x, (int, float, bool)))
            if array:
                dt = np.dtype(getattr(x, "dtype", None) or np.asarray(x).dtype)
                shape = tuple(x.shape)
                if generic:
                    sname = next((n for n, (t, _) in _SCALARS.items() if np.dtype(t) == dt), None)
                    if sname is None:
                        raise TypeError("%s: argument '%s' holds %s, which weft has no type for"
                                        % (self.where, p.name, dt))
                    if not 1 <= len(shape) <= 4:
                        raise TypeError("%s: argument '%s' must have 1 to 4 dimensions, got %d"
                                        % (self.where, p.name, len(shape)))
                    specs.append("A:%s:%d" % (sname, len(shape)))
                    ndim, trail = len(shape), ()
                else:
                    want = np.dtype(_SCALARS[p.scalar][0])
                    if dt != want:
                        raise TypeError("%s: argument '%s' must hold %s, got %s"
                                        % (self.where, p.name, want, dt))
                    ndim, trail = p.ndim, p.trail
                    if len(shape) != ndim + len(trail) or tuple(shape[ndim:]) != tuple(trail):
                        want_s = "(%s)" % ", ".join(["n"] * ndim + [str(t) for t in trail])
                        raise TypeError("%s: argument '%s' must have shape %s (%s), got %s"
                                        % (self.where, p.name, want_s, p.type, shape))
                    specs.append("-")
                if first is None:
                    first = (p, ndim)
                    scalar_dtype = dt
                shapes[p.name] = (shape, dt)
                arrays.append(x)
                continue
            if isinstance(x, jax.core.Tracer):
                raise ValueError("%s: scalar argument '%s' must be a static value, not traced "
                                 "(make it static: jax.jit(..., static_argnames=...))"
                                 % (self.where, p.name))
            if generic and not isinstance(x, (bool, int)):
                floats.append((len(specs), len(blob), p, x))  # typed after the loop
                specs.append(None)
                blob.append(None)
                continue
            if generic:
                sname = "bool" if isinstance(x, bool) else "int32"
                specs.append("S:" + sname)
                count = 1
            else:
                sname, count = p.scalar, p.count
                specs.append("-")
            try:
                v = np.asarray(x, dtype=_SCALARS[sname][0]).ravel()
            except (TypeError, ValueError) as e:
                raise TypeError("%s: argument '%s' must be %s: %s" % (self.where, p.name,
                                                                     p.type, e)) from None
            if v.size != count:
                raise TypeError("%s: argument '%s' must be %s (%d value%s), got %d" % (
                    self.where, p.name, p.type, count, "" if count == 1 else "s", v.size))
            blob.append((p, v))
        self._type_floats(floats, shapes, specs, blob)
        # launch dims
        if launch_dims is None:
            if first is None:
                raise ValueError("%s: the kernel has no input array: pass launch_dims"
                                 % self.where)
            launch = None
            ndim = first[1]
            launch_shape = shapes[first[0].name][0][:ndim]
        else:
            launch = _as_dims(launch_dims, self.where + ": launch_dims")
            ndim, launch_shape = len(launch), launch
        # outputs
        manual = _manual_type(arrays)
        out_types = [_out_type(*shapes[p.name], manual) for p in self.inputs if p.in_out]
        for p in self.outputs:
            if isinstance(output_dims, dict):
                if p.name not in output_dims:
                    raise ValueError("%s: output_dims has no entry for output '%s'"
                                     % (self.where, p.name))
                dims = _as_dims(output_dims[p.name], "%s: output_dims['%s']" % (self.where,
                                                                                p.name))
            elif output_dims is not None:
                dims = _as_dims(output_dims, self.where + ": output_dims")
            else:
                dims = tuple(launch_shape)
            if p.kind == "generic":
                dt = scalar_dtype if scalar_dtype is not None else np.dtype(np.float32)
                sname = next(n for n, (t, _) in _SCALARS.items() if np.dtype(t) == dt)
                specs.append("A:%s:%d" % (sname, len(dims)))
                shape = dims
            else:
                dt = np.dtype(_SCALARS[p.scalar][0])
                shape = dims if len(dims) == p.ndim + len(p.trail) and p.trail and \
                    tuple(dims[p.ndim:]) == tuple(p.trail) else dims + tuple(p.trail)
                if len(shape) != p.ndim + len(p.trail):
                    raise ValueError("%s: output '%s' is %s, output dims %s do not fit"
                                     % (self.where, p.name, p.type, dims))
                specs.append("-")
            out_types.append(_out_type(shape, dt, manual))
        return arrays, specs, blob, launch, ndim, out_types

    def _type_floats(self, floats, shapes, specs, blob):
        """A Python float given for a generic parameter is a float of the
        type the float arguments share (arrays, typed scalars and typed
        outputs), float32 when they have none or disagree: as weft.launch
        types a number (lua/weft/launch.lua, number_type), and as a number
        literal in a kernel takes the other operand's type. (Warp makes it
        float32 whatever the arrays hold.)"""
        if not floats:
            return
        seen = {dt for _, dt in shapes.values() if dt.kind == "f"}
        seen |= {np.dtype(_SCALARS[p.scalar][0]) for p in self.inputs + self.outputs
                 if p.kind != "generic" and p.scalar in _SCALARS
                 and np.dtype(_SCALARS[p.scalar][0]).kind == "f"}
        ft = seen.pop() if len(seen) == 1 else np.dtype(np.float32)
        for si, bi, p, x in floats:
            try:
                v = np.asarray(x, dtype=ft).ravel()
            except (TypeError, ValueError) as e:
                raise TypeError("%s: argument '%s' must be a number: %s"
                                % (self.where, p.name, e)) from None
            if v.size != 1:
                raise TypeError("%s: argument '%s' must be a number (1 value), got %d"
                                % (self.where, p.name, v.size))
            specs[si] = "S:" + ft.name
            blob[bi] = (p, v)

    def _plan(self, specs, ndim, adjoint, device=None):
        """The plan index for these parameter types and launch ndim in the
        current mode: for JAX's cpu platform (device None), or for its
        CUDA platform (PTX for the architecture of cuda:`device`, loaded by
        the target on whichever device XLA runs the call)."""
        rt = self.rt
        mode = rt["weft.config.mode"]
        nt = rt["weft.config.num_threads"]  # XLA launches follow it as of the last trace
        _X.ctx_threads(self._st.ctx, int(nt) if isinstance(nt, (int, float)) and nt >= 1 else 0)
        key = (" ".join(specs), ndim, mode, adjoint, device)
        pid = self._plans.get(key)
        if pid is not None:
            return pid
        fn, cost, size, lines, ptx, name, slot = rt.call(
            "weft._interop.ffi_plan", self.kernel, key[0], ndim, adjoint, device, nresults=7)
        entry = [tuple(int(x) for x in ln.split()) for ln in lines.split("\n") if ln]
        if isinstance(ptx, bytes):
            ptx = ptx.decode()
        cuda = None if device is None else (ptx, name, 1 if slot else 0)
        pid = self._make_plan(fn, cost, size, specs, entry, ndim, adjoint, cuda)
        self._plans[key] = pid
        return pid

    def _make_plan(self, fn, cost, size, specs, entry, ndim, adjoint, cuda=None):
        """The parameter tuples of src/interop/xla_ffi.c's ctx_plan."""
        nparams = len(self.params)
        n_arr_in = sum(1 for p, s in zip(self.inputs, specs) if p.kind == "array" or
                       s.startswith("A:"))
        rows, first = [], -1
        scalar_off = 0
        arr_in = arr_out = 0
        in_out_k = 0
        extras = []  # (param, source, index, flags) of adjoint arrays
        for j, p in enumerate(self.params):
            off, written, tid, elsize = entry[j]
            spec = specs[j]
            is_arr = p.kind == "array" or spec.startswith("A:")
            ndim_p = p.ndim if p.kind == "array" else int(spec.split(":")[2]) if is_arr else 0
            trail = p.trail if p.kind == "array" else ()
            if is_arr:
                xla = _SCALARS[p.scalar if p.kind == "array" else spec.split(":")[1]][1]
            else:
                xla = 0
            if not is_arr:
                nbytes = elsize
                rows.append((p.name, off, _SRC_SCALAR, scalar_off, nbytes, tid, elsize, 0, 0, 0,
                             0, 0, 0))
                scalar_off += nbytes
                continue
            is_input = j < self.num_inputs
            if adjoint:
                if written:
                    raise NotImplementedError(
                        "%s: the adjoint of this kernel writes '%s' itself; jax.grad cannot "
                        "run it" % (self.where, p.name))
                if is_input:
                    src, idx, flags = _SRC_ARG, arr_in, _READONLY
                    extras.append((p, _SRC_RET, self.num_outputs + arr_in, _ZERO))
                    arr_in += 1
                else:
                    src, idx, flags = _SRC_ARG, n_arr_in + arr_out, _READONLY
                    extras.append((p, _SRC_RET, arr_out, 0))
                    arr_out += 1
            elif is_input and not p.in_out:
                if written:
                    raise ValueError(
                        "%s: the kernel writes input '%s'; JAX arrays are immutable: name it "
                        "in in_out_argnames" % (self.where, p.name))
                src, idx, flags = _SRC_ARG, arr_in, _READONLY
                arr_in += 1
            elif p.in_out:
                src, idx, flags = _SRC_RET, in_out_k, 0
                in_out_k += 1
                arr_in += 1
            else:
                src, idx, flags = _SRC_RET, in_out_k + arr_out, 0
                arr_out += 1
            if first < 0 and is_input:
                first = j
            rows.append((p.name, off, src, idx, 0, tid, elsize, ndim_p, xla, len(trail),
                         (trail + (0, 0))[0], (trail + (0, 0))[1], flags))
        for k, (p, src, idx, flags) in enumerate(extras):
            base = rows[[q.name for q in self.params].index(p.name)]
            off, _w, tid, elsize = entry[nparams + k]
            rows.append(("adj_" + p.name, off) + (src, idx) + base[4:12] + (flags,))
        nargs = n_arr_in + (2 * self.num_outputs if adjoint else 0)
        nrets = self.num_outputs + (n_arr_in if adjoint else 0)
        if first >= 0 and rows[first][7] != ndim:
            first = -1  # launch dims then always come with the call
        return _X.ctx_plan(self._st.ctx, int(fn), int(cost), ndim, first, int(size), nargs, nrets,
                           self.name, tuple(rows), cuda)

    def _attrs(self, pid, blob, launch):
        sc = np.concatenate([v.view(np.uint8) for _, v in blob]) if blob else \
            np.zeros(0, np.uint8)
        return dict(weft_ctx=np.int64(self._st.ctx), weft_plan=np.int64(pid),
                    dims=np.asarray(launch or (), dtype=np.int64), scalars=sc)

    def __call__(self, *args, output_dims=None, launch_dims=None, vmap_method=None):
        return self._forward(args, output_dims, launch_dims, vmap_method)

    def _forward(self, args, output_dims=None, launch_dims=None, vmap_method=None):
        jax = _jax()
        if vmap_method is None:
            vmap_method = self.vmap_method
        _check_vmap(vmap_method, self.where)
        if launch_dims is None:
            launch_dims = self.launch_dims
        if output_dims is None:
            output_dims = self.output_dims
        arrays, specs, blob, launch, ndim, out_types = self._bind(args, launch_dims, output_dims)
        pid = self._plan(specs, ndim, False, _cuda_device())
        call = jax.ffi.ffi_call("weft_kernel", out_types, vmap_method=vmap_method,
                                input_output_aliases=self.aliases or None)
        return list(call(*arrays, **self._attrs(pid, blob, launch)))

    # ---- reverse mode ---------------------------------------------------------
    def _backward(self, args, outs, cots):
        """The gradients of the array inputs: weft's adjoint kernel, given
        the inputs, the outputs and the outputs' cotangents."""
        jax = _jax()
        arrays, specs, blob, launch, ndim, _ = self._bind(args, self.launch_dims,
                                                           self.output_dims)
        pid = self._plan(specs, ndim, True, _cuda_device())
        n_in, n_out = len(arrays), self.num_outputs
        manual = _manual_type(list(arrays) + list(outs) + list(cots))
        out_types = [_out_type(o.shape, o.dtype, manual) for o in outs] + \
            [_out_type(a.shape, a.dtype, manual) for a in arrays]
        aliases = {n_in + n_out + j: j for j in range(n_out)}
        call = jax.ffi.ffi_call("weft_kernel", out_types, vmap_method=self.vmap_method,
                                input_output_aliases=aliases)
        res = call(*arrays, *outs, *cots, **self._attrs(pid, blob, launch))
        return list(res[n_out:])


def jax_kernel(rt, name, num_outputs=1, launch_dims=None, output_dims=None, in_out_argnames=(),
               vmap_method="broadcast_all", enable_backward=False):
    """A JAX function running the Lua kernel `name` (see the module doc).
    enable_backward=True makes it a jax.custom_vjp whose backward pass is
    weft's adjoint kernel (gradients for array inputs; scalars are static)."""
    k = JaxKernel(rt, name, num_outputs, launch_dims, output_dims, in_out_argnames,
                  vmap_method)
    if not enable_backward:
        return k
    if in_out_argnames:
        raise NotImplementedError("%s: in_out_argnames and enable_backward do not go together"
                                  % k.where)
    generic = [p.name for p in k.params if p.kind == "generic"]
    if generic:
        raise TypeError("%s: enable_backward needs typed parameters; '%s' is generic"
                        % (k.where, generic[0]))
    jax = _jax()
    static = tuple(i for i, p in enumerate(k.inputs) if p.kind == "scalar")

    def split(args, nondiff):
        full, it = [], iter(args)
        nd = iter(nondiff)
        for i in range(k.num_inputs):
            full.append(next(nd) if i in static else next(it))
        return full

    @functools.partial(jax.custom_vjp, nondiff_argnums=static)
    def f(*args):
        return k._forward(args)

    def fwd(*args):
        outs = k._forward(args)
        return outs, (tuple(a for i, a in enumerate(args) if i not in static), tuple(outs))

    def bwd(*rest):
        nondiff, (arrays, outs), cots = rest[:len(static)], rest[len(static)], rest[-1]
        full = split(arrays, nondiff)
        return tuple(k._backward(full, outs, list(cots)))

    f.defvjp(fwd, bwd)

    @functools.wraps(f)
    def call(*args, **kw):
        if kw:
            raise TypeError("%s: with enable_backward, launch_dims, output_dims and vmap_method "
                            "are fixed by rt.jax_kernel" % k.where)
        return f(*args)

    call.kernel = k
    return call


# ---- Python callbacks ------------------------------------------------------------------
_TRAMPOLINE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


class FfiBuffer:
    """A buffer of an XLA FFI call: data (address), shape, dtype (NumPy),
    and __array_interface__, so weft (rt.launch, weft.from_numpy) and
    NumPy view it without a copy. Valid during the call only."""
    __slots__ = ("data", "shape", "dtype", "readonly")

    def __init__(self, data, shape, xla_dtype, readonly):
        self.data, self.shape, self.readonly = data, shape, readonly
        self.dtype = _XLA_TO_NP.get(xla_dtype)
        if self.dtype is None:
            raise TypeError("weft: XLA element type %d has no weft type" % xla_dtype)

    @property
    def __array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.data, self.readonly),
                "version": 3, "strides": None}

    def numpy(self):
        return np.asarray(self)

    def __repr__(self):
        return "weft.FfiBuffer(shape=%s, dtype=%s)" % (self.shape, self.dtype)


class FfiContext:
    """The execution context of a callback (stream: None on the cpu)."""
    __slots__ = ("stream",)

    def __init__(self):
        self.stream = None


def _trampoline(pyfunc):
    """A ctypes function XLA calls with a frame: it answers the metadata
    query, decodes the frame and runs pyfunc(inputs, outputs, attrs, ctx);
    an exception becomes an XLA error carrying its message."""
    def cb(frame):
        try:
            r = _X.frame(frame)
            if r is None:
                return None
            if isinstance(r, str):
                return _X.error(frame, r) or None
            ins, outs, attrs = r
            inputs = [FfiBuffer(d, s, t, True) for d, s, t in ins]
            outputs = [FfiBuffer(d, s, t, False) for d, s, t in outs]
            pyfunc(inputs, outputs, attrs, FfiContext())
            return None
        except BaseException as e:  # never unwind into XLA
            msg = str(e) or type(e).__name__
            try:
                return _X.error(frame, msg) or None
            except BaseException:
                return None
    return _TRAMPOLINE(cb)


def register_ffi_callback(name, pyfunc):
    """Register pyfunc(inputs, outputs, attrs, ctx) as the XLA FFI target
    `name` on the cpu platform; call it with jax.ffi.ffi_call(name, ...).
    inputs and outputs are FfiBuffers (views of XLA's buffers), attrs a
    dict of the call's attributes."""
    if not isinstance(name, str) or not name:
        raise TypeError("weft.register_ffi_callback: name must be a non-empty str")
    if not callable(pyfunc):
        raise TypeError("weft.register_ffi_callback: pyfunc must be callable")
    jax = _jax()
    tramp = _trampoline(pyfunc)
    addr = ctypes.cast(tramp, ctypes.c_void_p).value
    with _lock:
        _callbacks[name] = tramp  # XLA keeps the address: keep the function
    jax.ffi.register_ffi_target(name, _X.capsule(addr), platform="cpu")


class JaxCallable:
    """rt.jax_callable(...): a Lua function that launches kernels, called
    with JAX arrays and static scalars; its last num_outputs parameters
    receive the output arrays. Returns the list of outputs."""

    def __init__(self, rt, name, num_outputs=1, output_dims=None, vmap_method="broadcast_all",
                 dtypes=None):
        self.where = "weft.jax_callable('%s')" % name
        _check_vmap(vmap_method, self.where)
        self.rt, self.name = rt, name
        fn = _lua_function(rt, name, self.where, "function")
        _state(rt)
        names = rt.call("weft._interop.ffi_fparams", fn)
        self.names = names.split() if names else []
        if not isinstance(num_outputs, int) or num_outputs < 1:
            raise ValueError("%s: num_outputs must be at least 1" % self.where)
        if num_outputs > len(self.names):
            raise ValueError("%s: the function has %d parameters, fewer than num_outputs = %d"
                             % (self.where, len(self.names), num_outputs))
        self.fn = fn
        self.num_outputs = num_outputs
        self.num_inputs = len(self.names) - num_outputs
        self.output_dims, self.vmap_method = output_dims, vmap_method
        self.dtypes = dict(dtypes or {})
        self.target = "weft_callable_%d" % next(_names)
        register_ffi_callback(self.target, self._run)

    def _run(self, inputs, outputs, attrs, ctx):
        args, it = [], iter(inputs)
        for i in range(self.num_inputs):
            key = "a%d" % i
            args.append(attrs[key] if key in attrs else self._array(next(it), i))
        for j, b in enumerate(outputs):
            args.append(self._array(b, self.num_inputs + j))
        try:
            self.rt.call(self.name, *args, nresults=0)
        except WeftError as e:
            raise WeftError("%s: %s" % (self.where, e)) from None

    def _array(self, buf, i):
        from . import from_numpy
        a = np.asarray(buf)
        return from_numpy(a, dtype=self.dtypes.get(self.names[i]), runtime=self.rt)

    def __call__(self, *args, output_dims=None, vmap_method=None):
        jax = _jax()
        if len(args) != self.num_inputs:
            raise TypeError("%s takes %d input%s (%s), got %d" % (
                self.where, self.num_inputs, "" if self.num_inputs == 1 else "s",
                ", ".join(self.names[:self.num_inputs]), len(args)))
        vmap_method = vmap_method or self.vmap_method
        _check_vmap(vmap_method, self.where)
        if output_dims is None:
            output_dims = self.output_dims
        arrays, attrs, first = [], {}, None
        for i, x in enumerate(args):
            if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (int, float)):
                arrays.append(x)
                if first is None:
                    first = x
            elif isinstance(x, jax.core.Tracer):
                raise ValueError("%s: scalar argument '%s' must be a static value"
                                 % (self.where, self.names[i]))
            elif isinstance(x, (bool, int, float, np.number)):
                attrs["a%d" % i] = np.float64(x) if isinstance(x, (float, np.floating)) \
                    else np.int64(x)
            else:
                raise TypeError("%s: argument '%s' must be an array or a number, got %s"
                                % (self.where, self.names[i], type(x).__name__))
        out_types = []
        for name in self.names[self.num_inputs:]:
            d = output_dims.get(name) if isinstance(output_dims, dict) else output_dims
            if d is None and isinstance(output_dims, dict):
                raise ValueError("%s: output_dims has no entry for output '%s'"
                                 % (self.where, name))
            if isinstance(d, jax.ShapeDtypeStruct):
                out_types.append(d)
                continue
            if d is None and first is None:
                raise ValueError("%s: pass output_dims (the function has no input array)"
                                 % self.where)
            shape = tuple(first.shape) if d is None else _as_dims(d, self.where + ": output_dims")
            dt = first.dtype if first is not None else np.float32
            out_types.append(_out_type(shape, dt, _manual_type(arrays)))
        call = jax.ffi.ffi_call(self.target, out_types, vmap_method=vmap_method,
                                has_side_effect=False)
        return list(call(*arrays, **attrs))


def jax_callable(rt, name, num_outputs=1, output_dims=None, vmap_method="broadcast_all",
                 dtypes=None):
    """A JAX function calling the Lua function `name` (see JaxCallable).
    dtypes maps parameter names to weft element types ("vec3") that fold
    trailing dimensions."""
    return JaxCallable(rt, name, num_outputs, output_dims, vmap_method, dtypes)
