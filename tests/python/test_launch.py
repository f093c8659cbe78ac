"""Runtime.launch from Python (the C fast path, src/interop/pyapi.c): every
kind of argument, errors, and the memory of tensors viewed for a launch."""
import gc
import weakref

import numpy as np
import pytest

import weft
from conftest import has_kernels, lua_collect


@pytest.fixture
def krt(rt):
    if not has_kernels(rt):
        pytest.fail("the kernel compiler or weft.launch does not work in this build")
    rt.exec("""
      axpy = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),
                          a = weft.float32,
        function(x, y, a) local i = weft.tid(); y[i] = a * x[i] + y[i] end }
      shift = weft.kernel{ p = weft.array(weft.vec3), d = weft.vec3, on = weft.bool,
                           k = weft.int32,
        function(p, d, on, k)
          local i = weft.tid()
          if on then p[i] = p[i] + d * weft.float32(k) end
        end }
      grid = weft.kernel{ m = weft.array(weft.float64, 2),
        function(m) local i, j = weft.tid(); m[i][j] = weft.float64(10 * i + j) end }
    """)
    return rt


def test_every_kind_of_array_argument(krt):
    import torch
    y = np.zeros(4, np.float32)
    krt.launch("axpy", 4, inputs=[np.arange(4, dtype=np.float32), y, 2.0])  # numpy
    assert y.tolist() == [0, 2, 4, 6]
    krt.launch("axpy", 4, inputs=[torch.ones(4), y, 1])  # torch, an int for a float
    assert y.tolist() == [1, 3, 5, 7]
    w = weft.from_numpy(y, runtime=krt)  # a C-owned weft array
    krt.launch("axpy", 4, inputs=[w, w, 1.0])
    assert y.tolist() == [2, 6, 10, 14]
    krt.exec("ly = weft.full(4, 1.0)")
    ly = krt["ly"]  # an array Lua holds
    krt.launch("axpy", 4, inputs=[w, ly, 0.5])
    assert ly.numpy().tolist() == [2, 4, 6, 8]
    other = weft.Runtime()  # an array of another runtime
    try:
        other.exec("z = weft.full(4, 3.0)")
        krt.launch("axpy", 4, inputs=[other["z"], ly, 1.0])
    finally:
        other.close()
    assert ly.numpy().tolist() == [5, 7, 9, 11]


def test_vectors_bools_ints_and_lua_values(krt):
    p = np.zeros((3, 3), np.float32)
    pw = weft.from_numpy(p, dtype="vec3", runtime=krt)
    krt.exec("d = weft.vec3(1, 2, 3)")
    krt.launch("shift", 3, inputs=[pw, krt["d"], True, 2])
    assert p[2].tolist() == [2, 4, 6]
    krt.launch("shift", 3, inputs=[pw, krt["d"], False, 5])
    assert p[0].tolist() == [2, 4, 6]
    m = np.zeros((2, 3))
    krt.launch("grid", (2, 3), inputs=[m])
    assert m.tolist() == [[0, 1, 2], [10, 11, 12]]


def test_generic_kernel_numbers_take_the_arrays_float_type(krt):
    """A Python float (or int) for a generic parameter is a float of the
    type the float arguments share (lua/weft/launch.lua), as a literal in a
    kernel takes the other operand's type: float64 beside float64 tensors
    and arrays, float32 beside float32 ones."""
    import torch
    krt.exec("""
      gaxpy = weft.kernel{ function(x, a, y) local i = weft.tid(); y[i] = a * x[i] + y[i] end }
    """)
    x = torch.tensor([1.0, 3.0, -7.0], dtype=torch.float64)
    y = torch.tensor([0.5, 0.0, 2.0], dtype=torch.float64)
    krt.launch("gaxpy", 3, inputs=[x, 0.1], outputs=[y])
    # the double results exactly: 0.1 as a float32 would be off by 1e-9
    assert y.tolist() == [0.1 * 1 + 0.5, 0.1 * 3, 0.1 * -7 + 2]
    xn, yn = np.array([2.0, -4.0]), np.zeros(2)
    krt.launch("gaxpy", 2, inputs=[xn, 0.1], outputs=[yn])
    assert yn.dtype == np.float64 and yn.tolist() == [0.1 * 2, 0.1 * -4]
    krt.launch("gaxpy", 2, inputs=[xn, 3], outputs=[yn])  # an int: a float64 3
    assert yn.tolist() == [0.1 * 2 + 6, 0.1 * -4 - 12]
    xf, yf = np.array([3.0], np.float32), np.zeros(1, np.float32)
    krt.launch("gaxpy", 1, inputs=[xf, 0.1], outputs=[yf])
    assert yf[0] == np.float32(0.1) * np.float32(3)
    with pytest.raises(weft.WeftError, match="cannot multiply float32 and float64"):
        krt.launch("gaxpy", 1, inputs=[xn[:1], 0.1], outputs=[yf])  # disagreeing: float32


def test_outputs_follow_inputs(krt):
    y = np.ones(3, np.float32)
    krt.launch("axpy", 3, inputs=[np.ones(3, np.float32)], outputs=[y, 2.0])
    assert y.tolist() == [3, 3, 3]
    with pytest.raises(weft.WeftError, match="takes 3 arguments .inputs then outputs., got 2"):
        krt.launch("axpy", 3, inputs=[y], outputs=[y])


def test_launch_errors(krt):
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"launch\('axpy'\) input 1: cannot share a object"):
        krt.launch("axpy", 4, inputs=[x, object(), 1.0])
    with pytest.raises(TypeError, match=r"launch\('axpy'\) output 0: a kernel cannot take a str"):
        krt.launch("axpy", 4, inputs=[x, x], outputs=["a"])
    with pytest.raises(weft.WeftError, match="parameter 'y' expects array\\(float32\\), got "
                                             "array\\(float64\\)"):
        krt.launch("axpy", 4, inputs=[x, np.zeros(4), 1.0])
    with pytest.raises(weft.WeftError, match="takes 3 arguments"):
        krt.launch("axpy", 4, inputs=[x, x])
    with pytest.raises(weft.WeftError, match="no kernel named 'nope'"):
        krt.launch("nope", 4, inputs=[x])
    with pytest.raises(weft.WeftError, match="dtype complex64 is not supported"):
        krt.launch("axpy", 4, inputs=[np.zeros(4, np.complex64), x, 1.0])
    with pytest.raises(TypeError, match="dim must be an int or a sequence"):
        krt.launch("axpy", (), inputs=[x, x, 1.0])
    krt.launch("axpy", 4, inputs=[x, x, 1.0])  # still usable after the errors
    krt.close()
    with pytest.raises(weft.WeftError, match="runtime is closed"):
        krt.launch("axpy", 4, inputs=[x, x, 1.0])


def test_tensors_requiring_grad_are_viewed(krt):
    import torch
    x = torch.ones(4, requires_grad=True)
    y = torch.zeros(4)
    krt.launch("axpy", 4, inputs=[x, y, 3.0])
    assert y.tolist() == [3, 3, 3, 3]


def test_a_launch_keeps_no_tensor(krt):
    a = np.arange(6, dtype=np.float32)
    y = np.zeros(6, np.float32)
    ref = weakref.ref(a)
    krt.launch("axpy", 6, inputs=[a, y, 1.0])
    assert y[5] == 5
    del a
    gc.collect()
    assert ref() is None  # the tensor taken for the launch was handed back


def test_imported_arrays_need_no_lua_and_outlive_the_runtime(rt):
    import torch
    t = torch.arange(5, dtype=torch.float32)
    a = weft.from_torch(t, runtime=rt)
    rt.close()
    assert a.shape == (5,) and a.dtype == "float32" and a.numpy().tolist() == [0, 1, 2, 3, 4]
    t2 = weft.to_torch(a)
    t2[0] = 9
    assert t[0].item() == 9


def test_imported_memory_released_when_the_array_dies(rt):
    n = np.arange(5, dtype=np.float32)
    ref = weakref.ref(n)
    w = weft.from_numpy(n, runtime=rt)
    del n
    gc.collect()
    assert ref() is not None and w.numpy()[4] == 4
    del w
    gc.collect()
    assert ref() is None  # the C-owned header handed the tensor back


def test_imported_array_given_to_lua(rt):
    n = np.arange(4, dtype=np.float32)
    ref = weakref.ref(n)
    w = weft.from_numpy(n, runtime=rt)
    rt["v"] = w  # Lua gets its own array now
    assert type(w).__name__ == "_LuaArray" and w.shape == (4,)
    rt.exec("v[1] = 42")
    assert w.numpy()[1] == 42
    del n, w
    gc.collect()
    assert ref() is not None  # Lua still holds it
    rt.exec("assert(v[1] == 42)")
    rt["v"] = None
    lua_collect(rt)
    rt.exec("return 1")  # the next call drops the dead references
    lua_collect(rt)
    assert ref() is None


def test_gradient_of_imported_array(rt):
    w = weft.from_numpy(np.zeros(3, np.float32), runtime=rt)
    assert w.grad is None and not w.requires_grad
    w.grad = weft.from_numpy(np.ones(3, np.float32), runtime=rt)
    assert w.requires_grad and w.grad.numpy().tolist() == [1, 1, 1]


def test_argument_types_are_named(krt):
    with pytest.raises(TypeError, match=r"kernel must be the name of a global \(a str\), got int"):
        krt.launch(5, 4, inputs=[np.zeros(4, np.float32), np.zeros(4, np.float32), 1.0])
    a = weft.from_dlpack(np.zeros(4, np.float32), runtime=krt)
    with pytest.raises(TypeError, match="inputs must be a list or a tuple, got Array"):
        krt.launch("axpy", 4, a)
    # a conversion that fails midway leaves nothing behind (its slot once
    # was freed uninitialized) and the next launch works
    with pytest.raises(TypeError):
        krt.launch("axpy", 4, inputs=[np.zeros(4, np.float32), object(), 1.0])
    x, y = np.ones(4, np.float32), np.zeros(4, np.float32)
    krt.launch("axpy", 4, inputs=[x, y, 2.0])
    assert y.tolist() == [2.0] * 4


def test_out_of_bounds_launch_raises_and_fast_mode_opts_out(krt):
    # release mode (the default) checks the launch dim against the arrays
    # once per launch: nothing is written, the error names the kernel, the
    # array, the index and the extent
    x, y = np.ones(5, np.float32), np.zeros(4, np.float32)
    with pytest.raises(weft.WeftError,
                       match=r"index 4 out of bounds for axis 0 with size 4 in array 'y' "
                             r"of kernel 'axpy'"):
        krt.launch("axpy", 5, inputs=[x, y, 1.0])
    assert y.tolist() == [0, 0, 0, 0]
    krt.launch("axpy", 4, inputs=[x, y, 1.0])
    assert y.tolist() == [1, 1, 1, 1]
    krt.exec('weft.config.mode = "fast"')
    try:
        krt.launch("axpy", 4, inputs=[x, y, 1.0])  # in bounds: runs unchecked
        assert y.tolist() == [2, 2, 2, 2]
    finally:
        krt.exec('weft.config.mode = "release"')
