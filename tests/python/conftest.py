"""pytest setup: import weft from this checkout (python/), and give each test
a fresh Runtime."""
import gc
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

# lua/weft/cdef.lua loads libweft with ffi.load(path, true) (RTLD_GLOBAL),
# which makes libLLVM-16 global; triton (imported lazily by torch.optim)
# then crashes in its own LLVM. Import it first while cdef.lua does so.
try:
    import torch._dynamo  # noqa: F401
except Exception:
    pass

import weft  # noqa: E402


@pytest.fixture
def rt():
    r = weft.Runtime()
    yield r
    r.close()
    gc.collect()


def has_tape(rt):
    """Is the tape (weft.Tape) built in?"""
    rt.exec("_weft_has_tape = weft.Tape ~= nil")
    return rt["_weft_has_tape"] and has_kernels(rt)


def has_kernels(rt):
    """Are the kernel compiler and weft.launch built in?"""
    rt.exec("_weft_has_kernels = (weft.kernel and weft.launch) and true or false")
    ok = rt["_weft_has_kernels"]
    if ok:
        try:
            rt.exec("local k = weft.kernel{ x = weft.array(weft.float32), function(x) "
                    "local i = weft.tid(); x[i] = 1.0 end }; weft.launch(k, 1, {weft.zeros(1)})")
        except weft.WeftError:
            ok = False
    return ok


def lua_collect(rt):
    gc.collect()
    rt.exec("collectgarbage(); collectgarbage()")
