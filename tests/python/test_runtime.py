"""weft.Runtime: Lua code, globals, calls, errors, lifetimes."""
import pytest

import weft


def test_exec_get_set(rt):
    rt.exec("n = 5; s = 'hi'; b = true; t = {1, 2}")
    assert rt["n"] == 5.0 and rt["s"] == "hi" and rt["b"] is True and rt["missing"] is None
    ref = rt["t"]
    assert isinstance(ref, weft.LuaRef) and ref.type_name == "table"
    rt["n2"] = 7
    rt["f"] = 2.5
    rt["name"] = "weft"
    rt.exec("assert(n2 == 7 and f == 2.5 and name == 'weft')")
    rt["t2"] = ref  # a reference goes back as the same table
    rt.exec("assert(t2 == t)")


def test_call(rt):
    rt.exec("function add(a, b) return a + b, a * b end\n"
            "lib = { mk = function(n) return weft.full(n, 1.5) end }")
    assert rt.call("add", 2, 3) == 5
    assert rt.call("add", 2, 3, nresults=2) == (5, 6)
    a = rt.call("lib.mk", 4)
    assert isinstance(a, weft.Array) and a.shape == (4,) and a.numpy().tolist() == [1.5] * 4
    rt.exec("function int64() return 2LL ^ 40 end")
    assert rt.call("int64") == 2 ** 40


def test_errors(rt):
    with pytest.raises(weft.WeftError, match=r"^\[string \"error\('boom'\)\"\]:1: boom$"):
        rt.exec("error('boom')")
    with pytest.raises(weft.WeftError, match=r"^myfile:2: .*near 'is'"):
        rt.exec("x = 1\nthis is not lua", "=myfile")
    with pytest.raises(weft.WeftError, match="no function named 'nope'"):
        rt.call("nope")
    with pytest.raises(weft.WeftError, match="'a' is not a table"):
        rt.call("a.b.c")
    with pytest.raises(TypeError, match="has no __dlpack__"):
        rt["x"] = object()
    with pytest.raises(weft.WeftError, match="cannot open"):
        rt.dofile("/nonexistent/file.lua")
    # bad argument types are named (they once reached loadstring inside Lua)
    with pytest.raises(TypeError, match="exec: code must be a str, got bytes"):
        rt.exec(b"x = 1")
    with pytest.raises(TypeError, match="exec: chunkname must be a str or None, got int"):
        rt.exec("x = 1", 5)
    with pytest.raises(weft.WeftError, match="'x' is a number, not a function"):
        rt.exec("x = 1")
        rt.call("x")


def test_dofile(rt, tmp_path):
    p = tmp_path / "k.lua"
    p.write_text("answer = 6 * 7\n")
    rt.dofile(p)
    assert rt["answer"] == 42


def test_arrays_across_runtimes(rt):
    other = weft.Runtime()
    try:
        other.exec("x = weft.full(3, 5.0)")
        rt["y"] = other["x"]  # shared through DLPack
        rt.exec("y[0] = 1")
        assert other["x"].numpy().tolist() == [1, 5, 5]
    finally:
        other.close()
    rt.exec("assert(y[1] == 5)")  # still alive after its runtime closed


def test_closed_runtime(rt):
    rt.exec("x = weft.zeros(2)")
    x = rt["x"]
    rt.close()
    with pytest.raises(weft.WeftError, match="runtime is closed"):
        rt.exec("return 1")
    with pytest.raises(weft.WeftError, match="runtime is closed"):
        x.__dlpack__()
    del x  # no crash


def test_default_runtime():
    a = weft.from_dlpack(__import__("numpy").ones(3, dtype="float32"))
    assert a.runtime is weft.runtime()


def test_exec_named_chunk_kernels(rt):
    # a chunk named like a host's file ("=level1/ai") keeps its text, so its
    # kernels compile; errors name the chunk
    rt.exec("k = weft.kernel{ x = weft.array(weft.float32), function(x)\n"
            "  x[weft.tid()] = 4.0 end }\n"
            "a = weft.zeros(3); weft.launch(k, 3, { a })", "=level1/ai")
    assert rt["a"].numpy().tolist() == [4.0] * 3
    with pytest.raises(weft.WeftError, match="level2/ai:2: "):
        rt.exec("k2 = weft.kernel{ x = weft.array(weft.float32), function(x)\n"
                "  x[weft.tid()] = weft.int32(1) end }\n"
                "weft.launch(k2, 1, { weft.zeros(1) })", "=level2/ai")
