"""weft.Tape for Python: record rt.launch calls, then run their adjoints.

    tape = weft.Tape(rt)
    with tape:
        rt.launch("energy", n, inputs=[x], outputs=[loss])
    tape.backward(loss)          # x.grad (a torch tensor's .grad) holds dloss/dx
    tape.gradients[x]            # the gradient as a weft.Array

It drives the Lua tape (weft.Tape in lua/weft/tape.lua), which also
records what Lua functions called through rt.call launch, and their matrix
products (weft.matmul). While a tape records, rt.launch and rt.call hand it
every argument first: torch tensors, NumPy and JAX arrays become weft
Arrays once per tape (a tensor that requires grad gets its .grad as the
array's gradient, made as zeros if missing), so the launches recorded and
tape.backward see one array per tensor. As in Warp
and in Lua, gradients flow only through arrays that have one: give the
arrays in between requires_grad (torch.zeros(n, requires_grad=True), or
a.requires_grad = True on a weft.Array), and zero them with tape.zero().
"""
import threading

from ._core import Array, LuaRef, WeftError

_thread = threading.local()  # .stack: the tapes recording in this thread, innermost last


def recording():
    """The innermost weft.Tape recording in this thread, or None."""
    stack = getattr(_thread, "stack", None)
    return stack[-1] if stack else None

# The Lua side: a tape records while its weft.Tape():record call runs, so
# `with tape:` keeps that call suspended in a coroutine (LuaJIT yields
# across the pcall inside record) from __enter__ to __exit__.
_LUA = """
__weft_python_tape = {
  new = function() return weft.Tape() end,
  begin = function(tape)
    local co = coroutine.create(function() tape:record(coroutine.yield) end)
    local ok, err = coroutine.resume(co)
    if not ok then error(err, 0) end
    return co
  end,
  finish = function(co)
    local ok, err = coroutine.resume(co)
    if not ok then error(err, 0) end
  end,
  backward = function(tape, loss) tape:backward(loss) end,
  backward_grads = function(tape, ...)
    local grads = {}
    for i = 1, select("#", ...), 2 do
      local a, seed = select(i, ...)
      grads[a] = seed
    end
    tape:backward{ grads = grads }
  end,
  zero = function(tape) tape:zero() end,
  reset = function(tape) tape:reset() end,
  count = function(tape) return #tape.launches end,
}
"""


def _lua_helpers(rt):
    if not getattr(rt, "_tape_lua", False):
        rt.exec(_LUA, "=weft/tape.py")
        rt._tape_lua = True


class _Gradients:
    """tape.gradients[x]: the gradient of x (a weft.Array, or None)."""

    def __init__(self, tape):
        self._tape = tape

    def __getitem__(self, x):
        return self._tape._arg(x).grad


class Tape:
    """Records the launches of one Runtime (rt.launch) inside `with tape:`.
    runtime: the Runtime (weft.runtime(), the default one, when None)."""

    def __init__(self, runtime=None):
        if runtime is None:
            from . import runtime as default
            runtime = default()
        self.runtime = runtime
        _lua_helpers(runtime)
        self._ref = runtime.call("__weft_python_tape.new")
        self._co = None
        self._arrays = {}  # id(x) -> (x, its weft.Array): one array per tensor
        self.gradients = _Gradients(self)

    def _arg(self, v):
        """The weft Array (of this tape's runtime) standing for v; numbers,
        None and LuaRefs as they are."""
        rt = self.runtime
        if v is None or isinstance(v, (bool, int, float, str, LuaRef)):
            return v
        if isinstance(v, Array):
            if v._rt is not rt:
                v = rt._from_other(v, "weft.Tape")
            v._lua()  # a Lua array from now on: the tape keeps it by identity
            return v
        hit = self._arrays.get(id(v))
        if hit is not None:
            return hit[1]
        if type(v).__module__ == "torch" and type(v).__name__ in ("Tensor", "Parameter"):
            from . import from_torch
            a = from_torch(v, runtime=rt)
        elif hasattr(v, "dtype") and not hasattr(v, "__dlpack__") and \
                not hasattr(v, "__array_interface__"):
            return v  # a NumPy scalar and the like: a number
        else:
            a = rt.import_dlpack(v, None, "weft.Tape")
        a._lua()
        self._arrays[id(v)] = (v, a)
        return a

    def _args(self, seq):
        return [self._arg(v) for v in seq or ()]

    # ---- recording -----------------------------------------------------------
    def __enter__(self):
        if self._co is not None:
            raise WeftError("weft.Tape: this tape is already recording")
        rt = self.runtime
        self._co = rt.call("__weft_python_tape.begin", self._ref)
        rt._tapes.append(self)
        if not hasattr(_thread, "stack"):
            _thread.stack = []
        _thread.stack.append(self)
        return self

    def __exit__(self, *exc):
        rt = self.runtime
        if rt._tapes and rt._tapes[-1] is self:
            rt._tapes.pop()
        stack = getattr(_thread, "stack", None)
        if stack and self in stack:
            stack.remove(self)
        co, self._co = self._co, None
        if co is not None and rt._W is not None:
            rt.call("__weft_python_tape.finish", co, nresults=0)
        return False

    @property
    def launches(self):
        """The number of launches recorded."""
        return int(self.runtime.call("__weft_python_tape.count", self._ref))

    # ---- gradients -------------------------------------------------------------
    def backward(self, loss=None, grads=None):
        """Run the adjoints of the recorded launches, last first. loss: a
        one-element array (its gradient is set to 1); or grads: a dict
        {output: seed} of seed gradients. Gradients accumulate."""
        rt = self.runtime
        if (loss is None) == (grads is None):
            raise TypeError("weft.Tape.backward: give a loss or grads={output: seed}")
        if loss is not None:
            rt.call("__weft_python_tape.backward", self._ref, self._arg(loss), nresults=0)
            return
        flat = []
        for a, seed in grads.items():
            s = self._arg(seed)
            flat += [self._arg(a), s]
        rt.call("__weft_python_tape.backward_grads", self._ref, *flat, nresults=0)

    def zero(self):
        """Zero the gradients of every array the recorded launches used."""
        self.runtime.call("__weft_python_tape.zero", self._ref, nresults=0)

    def reset(self):
        """Zero the gradients and forget the recorded launches."""
        self.runtime.call("__weft_python_tape.reset", self._ref, nresults=0)
        self._arrays.clear()
