"""Random (seeded) arguments to the Python API: every call returns or raises
a Python exception with weft's own message; nothing crashes the interpreter
(a launch with an unconvertible argument once freed an uninitialized slot)."""
import random

import numpy as np
import pytest
import torch

import weft

EXPECTED = (weft.WeftError, TypeError, ValueError, BufferError, AttributeError, KeyError,
            IndexError, OverflowError, RuntimeError)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_arguments(rt, seed):
    rt.exec("""
      k = weft.kernel{ x = weft.array(weft.float32), a = weft.float32,
        function(x, a) local i = weft.tid(); x[i] = x[i] * a end }
      a = weft.zeros(4)
      v = weft.zeros(3, weft.vec3)
    """)
    vals = [None, 0, -1, 1.5, 2 ** 63, -2 ** 70, float("nan"), "k", "a", "nope", "x.y", b"k", [],
            [1, 2], (3,), {}, object(), np.zeros(4, np.float32), np.zeros((2, 2)),
            np.zeros(3, np.int8), np.zeros(0), np.zeros(4, np.float32)[::2], torch.zeros(4),
            torch.zeros(2, 3).t(), torch.zeros(3, dtype=torch.bfloat16), rt["a"], rt["v"], True, 1j]
    funcs = {
        "launch": lambda *a: rt.launch(*a),
        "call": lambda *a: rt.call(*a),
        "exec": lambda *a: rt.exec(*a),
        "get": lambda a=None, *r: rt[a],
        "set": lambda a=None, b=None, *r: rt.__setitem__(a, b),
        "from_dlpack": lambda *a: weft.from_dlpack(*a),
        "from_torch": lambda *a: weft.from_torch(*a),
        "to_torch": lambda *a: weft.to_torch(*a),
        "numpy": lambda a=None, *r: a.numpy(),
        "dlpack": lambda a=None, *r: a.__dlpack__(),
    }
    names = sorted(funcs)
    rng = random.Random(seed)
    internal = []
    for _ in range(1500):
        name = rng.choice(names)
        args = [rng.choice(vals) for _ in range(rng.randint(0, 4))]
        try:
            funcs[name](*args)
        except EXPECTED as e:
            first = str(e).splitlines()[0] if str(e) else ""
            if "attempt to" in first or "lua/weft/" in first or "bad argument" in first:
                internal.append("%s: %s" % (name, first))
    assert internal == []
    # the runtime still works (the calls may have replaced k itself)
    rt.exec("""
      k2 = weft.kernel{ x = weft.array(weft.float32), a = weft.float32,
        function(x, a) local i = weft.tid(); x[i] = x[i] * a end }
    """)
    x = np.ones(4, np.float32)
    rt.launch("k2", 4, [x, 3.0])
    assert x.tolist() == [3.0] * 4
