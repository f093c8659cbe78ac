"""Structs that hold arrays (Warp's Model/State), driven from Python: a
struct built in Lua goes to rt.launch as a LuaRef, its fields take NumPy
arrays (shared without copies) through a Lua call, and the struct keeps
them alive."""
import gc

import numpy as np

STATE = """
State = weft.struct{ {"x", weft.array(weft.float32)}, {"v", weft.array(weft.float32)},
                     {"n", weft.int32}, name = "PyState" }
step = weft.kernel{ s = State, dt = weft.float32, function(s, dt)
  local i = weft.tid()
  s.x[i] = s.x[i] + s.v[i] * dt
end }
function new_state(x, v) return State{ x = x, v = v, n = #x } end
function set_field(s, name, a) s[name] = a end
function field_size(s, name) return s[name].size end
"""


def test_struct_with_numpy_arrays(rt):
    rt.exec(STATE)
    x = np.zeros(4, np.float32)
    v = np.arange(4, dtype=np.float32)
    s = rt.call("new_state", x, v)
    rt.launch("step", 4, inputs=[s, 0.5])
    assert x.tolist() == [0, 0.5, 1, 1.5]  # written in place: no copy
    x2 = np.ones(4, np.float32)
    rt.call("set_field", s, "x", x2)
    del x2  # the struct's array keeps the memory alive
    gc.collect()
    rt.exec("collectgarbage(); collectgarbage()")
    rt.launch("step", 4, inputs=[s, 1.0])
    rt.launch("step", 4, inputs=[s, 1.0])
    assert rt.call("field_size", s, "x") == 4
    rt["s"] = s
    rt.exec("out = weft.clone(s.x)")
    assert rt["out"].numpy().tolist() == [1, 3, 5, 7]
