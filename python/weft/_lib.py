"""Finding and declaring libweft for ctypes.

The library is searched for in order: $WEFT_LIB, beside this package
(weft/libweft.so), then the build tree of a source checkout
(<checkout>/build/libweft.so). It is loaded with RTLD_LOCAL: made global, its
dependency libLLVM-16 would interpose on the LLVM inside other extensions
(importing triton, which torch.optim does, then crashes). WEFT_LIB is set to
the loaded path so the Lua layer (lua/weft/cdef.lua) binds the same file.

All functions are called through a PyDLL handle: the GIL stays held, and
the capsule helpers can use the Python C API. The one exception is inside a
CPU launch big enough for the thread pool, which lets go of the GIL while the
kernel runs (src/runtime/launch.c); every entry into a runtime's Lua state takes
Runtime._lock, so no other thread enters it meanwhile.

The hot paths (imports, exports, launches: `fast` below) are not ctypes
calls: libweft makes builtin functions of its own (src/interop/pyapi.c,
through the Python C API of this process), which take Python objects
directly and cost about as much as any builtin call.
"""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("WEFT_LIB")
    if env:
        yield env
    yield os.path.join(_HERE, "libweft.so")
    yield os.path.normpath(os.path.join(_HERE, "..", "..", "build", "libweft.so"))


def _load():
    tried = []
    for path in _candidates():
        if not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            lib = ctypes.PyDLL(path, mode=ctypes.RTLD_LOCAL)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        os.environ["WEFT_LIB"] = path  # the Lua layer loads this same file
        return lib, path
    raise ImportError("weft: cannot find libweft (set WEFT_LIB to its path); tried: "
                      + "; ".join(tried))


# An installed package ships the Lua layer beside itself.
if not os.environ.get("WEFT_LUA_DIR") and os.path.exists(os.path.join(_HERE, "lua", "weft", "init.lua")):
    os.environ["WEFT_LUA_DIR"] = os.path.join(_HERE, "lua")

lib, path = _load()

# weft_Arg types (include/weft.h)
NIL, BOOL, INT, FLOAT, DOUBLE, STRING, GLOBAL, REF, DATA, DLPACK, DLPACK_VERSIONED, ARRAY = range(12)
ARRAY_REQUIRES_GRAD = 1
ARRAY_READONLY = 4


class Arg(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("flags", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("i", ctypes.c_int64),
        ("d", ctypes.c_double),
        ("s", ctypes.c_char_p),
        ("p", ctypes.c_void_p),
        ("shape", ctypes.c_int64 * 4),
        ("strides", ctypes.c_int64 * 4),
        ("handle", ctypes.c_void_p),
    ]


_W = ctypes.c_void_p
_ArgP = ctypes.POINTER(Arg)


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


weft_open = _fn("weft_open", _W)
weft_close = _fn("weft_close", None, _W)
weft_errmsg = _fn("weft_errmsg", ctypes.c_char_p, _W)
weft_dostring = _fn("weft_dostring", ctypes.c_int, _W, ctypes.c_char_p)
weft_dofile = _fn("weft_dofile", ctypes.c_int, _W, ctypes.c_char_p)
weft_get = _fn("weft_get", ctypes.c_int, _W, ctypes.c_char_p, _ArgP)
weft_set = _fn("weft_set", ctypes.c_int, _W, ctypes.c_char_p, _ArgP)
weft_unref = _fn("weft_unref", None, _W, ctypes.c_int64)
weft_call = _fn("weft_call", ctypes.c_int, _W, ctypes.c_char_p, ctypes.c_int, _ArgP,
                ctypes.c_int, _ArgP)
weft_launch_io = _fn("weft_launch_io", ctypes.c_int, _W, ctypes.c_char_p, ctypes.c_int,
                     ctypes.POINTER(ctypes.c_int64), ctypes.c_int, _ArgP, ctypes.c_int, _ArgP)
weft_export_value = _fn("weft_export_value", ctypes.c_void_p, _W, _ArgP, ctypes.c_int,
                        ctypes.c_int)
dlpack_delete = _fn("wf_dlpack_delete", None, ctypes.c_void_p, ctypes.c_int)
_capsule_name = _fn("wf_dlpack_capsule_name", ctypes.c_void_p, ctypes.c_int)

# Static C strings owned by libweft: capsules keep the name pointer.
CAPSULE_NAMES = [_capsule_name(k) for k in range(4)]
CAPSULE_DESTRUCTOR = ctypes.cast(lib.wf_dlpack_capsule_destructor, ctypes.c_void_p).value

# A function object of our own: ctypes.pythonapi.PyCapsule_New is shared by
# the process, and jax.ffi.pycapsule sets other argtypes on it.
_PyCapsule_New = ctypes.pythonapi["PyCapsule_New"]
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]


def make_capsule(managed, versioned):
    """A DLPack capsule owning `managed`; its destructor is C (in libweft)."""
    try:
        return _PyCapsule_New(managed, CAPSULE_NAMES[1 if versioned else 0], CAPSULE_DESTRUCTOR)
    except BaseException:
        dlpack_delete(managed, 1 if versioned else 0)
        raise


# The PyCapsule type, from a throwaway capsule with no destructor.
CapsuleType = type(_PyCapsule_New(1, CAPSULE_NAMES[2], None))


class _Fast:
    """The fast paths: builtin functions written in C (src/interop/pyapi.c),
    called without ctypes. See pyapi.c for what each does."""

    def __init__(self):
        _functions = _fn("wf_py_functions", ctypes.py_object)
        for f in _functions():
            setattr(self, f.__name__, f)


fast = _Fast()

# The scalar types in the order of their indices in C (src/interop/interop.h).
SCALARS = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64")
