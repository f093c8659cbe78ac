-- Arrays: constructors, members, element types, views, strides, copies,
-- zero-copy wrapping.
local ffi = require "ffi"
local weft, internal = require "weft", require "weft.internal" -- internal: the parts' private table

-- fn must fail with msg, located at the line where errat is called.
local function errat(fn, msg)
  local info = debug.getinfo(2, "Sl")
  local ok, err = pcall(fn)
  assert.is_false(ok, "no error raised")
  assert.are.equal(info.short_src .. ":" .. info.currentline .. ": " .. msg, err)
end

describe("weft arrays", function()
  describe("constructors", function()
    it("zeros: shape, dtype default float32, 64-byte alignment", function()
      local a = weft.zeros(5)
      assert.is_true(weft.is_array(a))
      assert.are.same({ 5 }, a.shape)
      assert.are.equal(1, a.ndim)
      assert.are.equal(5, a.size)
      assert.are.equal(5, #a)
      assert.are.equal(weft.float32, a.dtype)
      assert.are.equal("cpu", a.device)
      assert.is_false(a.requires_grad)
      assert.is_nil(a.grad)
      assert.are.same({ 0, 0, 0, 0, 0 }, a:totable())
      assert.are.equal(0, tonumber(ffi.cast("uintptr_t", a:ptr())) % 64)
      local b = weft.zeros({ 2, 3, 4, 5 }, weft.int16)
      assert.are.same({ 2, 3, 4, 5 }, b.shape)
      assert.are.same({ 120, 40, 10, 2 }, b.strides)
      assert.are.equal(120, b.size)
      assert.is_true(b.is_contiguous)
    end)

    it("empty, ones, full and the *_like constructors", function()
      local e = weft.empty({ 2, 2 }, "float64")
      assert.are.same({ 2, 2 }, e.shape)
      assert.are.equal(weft.float64, e.dtype)
      assert.are.same({ { 1, 1 }, { 1, 1 } }, weft.ones({ 2, 2 }, weft.int8):totable())
      assert.are.same({ true, true }, weft.ones(2, weft.bool):totable())
      assert.are.same({ { 1, 1, 1 } }, weft.ones(1, weft.vec3):totable())
      assert.are.same({ 2.5, 2.5, 2.5 }, weft.full(3, 2.5):totable())
      assert.are.equal(weft.float32, weft.full(3, 2.5).dtype)
      assert.are.same({ 7, 7 }, weft.full(2, 7, weft.int64):totable())
      local fv = weft.full(2, weft.vec2d(1, 2))
      assert.are.equal(weft.vec2d, fv.dtype)
      assert.are.same({ { 1, 2 }, { 1, 2 } }, fv:totable())
      assert.are.equal(weft.vec3, weft.full(1, { 1, 2, 3 }).dtype)
      local z = weft.zeros_like(fv)
      assert.are.same({ { 0, 0 }, { 0, 0 } }, z:totable())
      assert.are.equal(weft.vec2d, z.dtype)
      local el = weft.empty_like(weft.zeros({ 3, 2 }, weft.uint8))
      assert.are.same({ 3, 2 }, el.shape)
      assert.are.equal(weft.uint8, el.dtype)
    end)

    it("allows zero-size arrays like numpy", function()
      local a = weft.zeros(0)
      assert.are.equal(0, a.size)
      assert.are.same({}, a:totable())
      assert.are.equal("array([], dtype=float32)", tostring(a))
      local b = weft.zeros({ 2, 0 })
      assert.are.same({ {}, {} }, b:totable())
      assert.are.same({ 0 }, weft.clone(weft.zeros(0)).shape)
      local c = weft.array({})
      assert.are.same({ 0 }, c.shape)
    end)

    it("array from nested tables, infers shape and dtype", function()
      local a = weft.array({ { 1, 2, 3 }, { 4, 5, 6 } }, weft.int32)
      assert.are.same({ 2, 3 }, a.shape)
      assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, a:totable())
      assert.are.equal(weft.float32, weft.array({ 1, 2 }).dtype)
      assert.are.equal(weft.bool, weft.array({ true, false }).dtype)
      local v = weft.array({ weft.vec3(1, 2, 3), weft.vec3(4, 5, 6) })
      assert.are.equal(weft.vec3, v.dtype)
      assert.are.same({ 2 }, v.shape)
      local m = weft.array({ { { 1, 2 }, { 3, 4 } } }, weft.mat22)
      assert.are.same({ 1 }, m.shape)
      assert.are.same({ { { 1, 2 }, { 3, 4 } } }, m:totable())
      local c = weft.array(a)
      assert.are.same(a:totable(), c:totable())
      c[0][0] = 9
      assert.are.equal(1, a[0][0])
      local d = weft.array(a, weft.float64)
      assert.are.equal(weft.float64, d.dtype)
      assert.are.same(a:totable(), d:totable())
      assert.are.equal(a, weft.array(a, nil, { copy = false }))
    end)

    it("array(dtype [, ndim]) is an array type", function()
      local t = weft.array(weft.float32)
      assert.is_true(weft.is_type(t))
      assert.are.equal("array", t.kind)
      assert.are.equal(weft.float32, t.dtype)
      assert.are.equal(1, t.ndim)
      assert.are.equal("array(float32)", t.name)
      assert.are.equal(t, weft.array(weft.float32))
      local t2 = weft.array(weft.vec3, 2)
      assert.are.equal(2, t2.ndim)
      assert.are.equal("array(vec3f,2)", t2.name)
      assert.are.equal(t2, weft.types[t2.id])
      assert.are.equal(weft.array(weft.float32, 3), weft.dtype_of(weft.zeros({ 1, 1, 1 })))
    end)

    it("clone and copy", function()
      local a = weft.array({ 1, 2, 3 })
      local b = weft.clone(a)
      b[0] = 10
      assert.are.same({ 1, 2, 3 }, a:totable())
      local c = weft.zeros(3)
      assert.are.equal(c, weft.copy(c, a))
      assert.are.same({ 1, 2, 3 }, c:totable())
    end)
  end)

  describe("element types round-trip through a[i] and totable", function()
    local cases = {
      { weft.bool, { true, false, true } },
      { weft.int8, { -128, 0, 127 } }, { weft.uint8, { 0, 128, 255 } },
      { weft.int16, { -32768, 1, 32767 } }, { weft.uint16, { 0, 1, 65535 } },
      { weft.int32, { -2147483648, 5, 2147483647 } }, { weft.uint32, { 0, 7, 4294967295 } },
      { weft.int64, { -2 ^ 53, 3, 2 ^ 53 } }, { weft.uint64, { 0, 3, 2 ^ 53 } },
      { weft.float16, { -2, 0.5, 65504 } }, { weft.float32, { -1.5, 0.25, 2 ^ 100 } },
      { weft.float64, { -1e300, 0.1, math.pi } },
      { weft.vec2h, { { 1, 2 }, { 0.5, -1 } } }, { weft.vec3f, { { 1, 2, 3 } } },
      { weft.vec4d, { { 1, 2, 3, 0.1 } } }, { weft.vec3i, { { -1, 2, 3 } } },
      { weft.vec4ub, { { 0, 1, 2, 255 } } },
      { weft.mat22h, { { { 1, 2 }, { 3, 4 } } } }, { weft.mat33f, { { { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } } } },
      { weft.mat44d, { { { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 9, 10, 11, 12 }, { 13, 14, 15, 0.1 } } } },
      { weft.quath, { { 0, 0, 0, 1 } } }, { weft.quatf, { { 1, 2, 3, 4 } } }, { weft.quatd, { { 0.1, 0, 0, 1 } } },
      { weft.transformh, { { 1, 2, 3, 0, 0, 0, 1 } } }, { weft.transformf, { { 1, 2, 3, 0, 0, 0, 1 } } },
      { weft.transformd, { { 0.1, 2, 3, 0, 0, 0, 1 } } },
      { weft.spatial_vectorh, { { 1, 2, 3, 4, 5, 6 } } }, { weft.spatial_vectorf, { { 1, 2, 3, 4, 5, 6 } } },
      { weft.spatial_vectord, { { 1, 2, 3, 4, 5, 0.1 } } },
      { weft.vector(5, weft.float32), { { 1, 2, 3, 4, 5 } } },
      { weft.matrix(2, 3, weft.float64), { { { 1, 2, 3 }, { 4, 5, 6 } } } },
    }
    for _, sm in ipairs { "h", "f", "d" } do
      local rows = {}
      for i = 1, 6 do
        rows[i] = {}
        for j = 1, 6 do rows[i][j] = i * 10 + j end
      end
      cases[#cases + 1] = { weft["spatial_matrix" .. sm], { rows } }
    end
    for _, c in ipairs(cases) do
      local t, data = c[1], c[2]
      it(t.name, function()
        local a = weft.array(data, t)
        assert.are.equal(t, a.dtype)
        assert.are.same({ #data }, a.shape)
        assert.are.same(data, a:totable())
        for i = 0, #data - 1 do
          local v = a[i]
          if type(v) == "cdata" then
            assert.are.same(data[i + 1], v:totable())
            a[i] = v
          else
            assert.are.equal(data[i + 1], v)
            a[i] = v
          end
        end
        assert.are.same(data, a:totable())
        -- write through a[i] from a table, read back
        local b = weft.zeros(#data, t)
        for i = 0, #data - 1 do b[i] = data[i + 1] end
        assert.are.same(data, b:totable())
        assert.are.same(data, weft.array(b:totable(), t):totable())
        assert.is_string(tostring(a))
      end)
    end

    it("structs", function()
      local P = weft.struct { { "pos", weft.vec3 }, { "mass", weft.float32 }, { "h", weft.float16 } }
      local a = weft.zeros(2, P)
      a[1] = { pos = { 1, 2, 3 }, mass = 4, h = 0.5 }
      assert.are.same({ { pos = { 0, 0, 0 }, mass = 0, h = 0 }, { pos = { 1, 2, 3 }, mass = 4, h = 0.5 } },
        a:totable())
      local p = a[1]
      assert.are.equal(4, p.mass)
      assert.are.equal(0.5, p.h)
      a[0] = P { mass = 2 }
      assert.are.equal(2, a[0].mass)
      assert.are.same(a:totable(), weft.array(a:totable(), P):totable())
    end)

    it("values of a[i] are copies, not references", function()
      local a = weft.array({ { 1, 2, 3 } }, weft.vec3)
      local v = a[0]
      v.x = 100
      assert.are.equal(1, a[0].x)
    end)
  end)

  describe("views and strides", function()
    it("a[i] of an n-D array is a row view sharing memory", function()
      local a = weft.array({ { 1, 2, 3 }, { 4, 5, 6 } }, weft.float64)
      local r = a[1]
      assert.are.same({ 3 }, r.shape)
      assert.are.same({ 4, 5, 6 }, r:totable())
      r[0] = 40
      assert.are.equal(40, a[1][0])
      assert.are.same({ 8 }, r.strides)
      local b = weft.zeros({ 2, 3, 4 }, weft.int32)
      b[1][2][3] = 7
      assert.are.equal(7, b:totable()[2][3][4])
      assert.are.same({ 3, 4 }, b[1].shape)
      a[0] = { 7, 8, 9 }
      assert.are.same({ 7, 8, 9 }, a[0]:totable())
      a[0] = weft.array({ 1, 1, 1 }, weft.float64)
      assert.are.same({ 1, 1, 1 }, a[0]:totable())
    end)

    it("a view keeps its parent's memory alive", function()
      local r = weft.array({ { 1, 2 }, { 3, 4 } })[1]
      collectgarbage()
      collectgarbage()
      assert.are.same({ 3, 4 }, r:totable())
    end)

    it("copies and fills strided (transposed) layouts", function()
      -- a column-major 2x3 view of 6 floats: strides {4, 8}
      local mem = ffi.new("float[6]", { 1, 2, 3, 4, 5, 6 })
      local t = weft.array(mem, weft.float32, { shape = { 3, 2 }, copy = false })
      local h = t.h
      h.shape[0], h.shape[1] = 2, 3
      h.strides[0], h.strides[1] = 4, 8
      assert.is_false(t.is_contiguous)
      assert.are.same({ { 1, 3, 5 }, { 2, 4, 6 } }, t:totable())
      local c = weft.clone(t)
      assert.is_true(c.is_contiguous)
      assert.are.same({ { 1, 3, 5 }, { 2, 4, 6 } }, c:totable())
      t[0]:fill_(9)
      assert.are.same({ 9, 2, 9, 4, 9, 6 }, { mem[0], mem[1], mem[2], mem[3], mem[4], mem[5] })
      weft.copy(t, weft.array({ { 1, 1, 1 }, { 2, 2, 2 } }))
      assert.are.same({ 1, 2, 1, 2, 1, 2 }, { mem[0], mem[1], mem[2], mem[3], mem[4], mem[5] })
      assert.are.equal("array([[1, 1, 1], [2, 2, 2]], dtype=float32)", tostring(t))
    end)
  end)

  describe("methods", function()
    it("fill_ and zero_", function()
      local a = weft.zeros(3, weft.vec2)
      assert.are.equal(a, a:fill_(weft.vec2(1, 2)))
      assert.are.same({ { 1, 2 }, { 1, 2 }, { 1, 2 } }, a:totable())
      a:fill_({ 3, 4 })
      assert.are.same({ 3, 4 }, a[2]:totable())
      a:zero_()
      assert.are.same({ { 0, 0 }, { 0, 0 }, { 0, 0 } }, a:totable())
      local b = weft.zeros({ 2, 2 }, weft.uint8):fill_(300)
      assert.are.same({ { 44, 44 }, { 44, 44 } }, b:totable())
    end)

    it("to('cpu') on a host array is the array itself", function()
      local a = weft.zeros(2)
      assert.are.equal(a, a:to("cpu"))
    end)

    it("ptr is typed and points at the data", function()
      local a = weft.array({ 1, 2, 3 }, weft.int16)
      local p = a:ptr()
      assert.is_true(ffi.istype("int16_t *", p))
      p[1] = 20
      assert.are.equal(20, a[1])
    end)

    it("tostring", function()
      assert.are.equal("array([1, 2, 3], dtype=float32)", tostring(weft.array({ 1, 2, 3 })))
      assert.are.equal("array([1.5, -2], dtype=float64)", tostring(weft.array({ 1.5, -2 }, weft.float64)))
      assert.are.equal("array([[1, 2], [3, 4]], dtype=int32)", tostring(weft.array({ { 1, 2 }, { 3, 4 } }, "int32")))
      assert.are.equal("array([[1, 2, 3]], dtype=vec3f)", tostring(weft.array({ { 1, 2, 3 } }, weft.vec3)))
      assert.are.equal("array([true, false], dtype=bool)", tostring(weft.array({ true, false })))
      assert.are.equal("array([0.1], dtype=float32)", tostring(weft.array({ 0.1 })))
      local big = tostring(weft.zeros(2000))
      assert.are.equal("array([0, 0, 0, ..., 0, 0, 0], dtype=float32)", big)
    end)

    it("requires_grad allocates a zero grad of the same shape", function()
      local a = weft.ones({ 2, 3 }, weft.float32, { requires_grad = true })
      assert.is_true(a.requires_grad)
      local g = a.grad
      assert.is_true(weft.is_array(g))
      assert.are.same({ 2, 3 }, g.shape)
      assert.are.equal(weft.float32, g.dtype)
      assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, g:totable())
      assert.are.equal(g, a.grad)
      local other = weft.full({ 2, 3 }, 5)
      a.grad = other
      assert.are.equal(other, a.grad)
      local b = weft.zeros(4)
      b.requires_grad = true
      assert.are.same({ 4 }, b.grad.shape)
      assert.is_true(weft.clone(a).requires_grad)
      assert.is_false(weft.clone(a, { requires_grad = false }).requires_grad)
    end)
  end)

  describe("zero-copy wrapping of cdata memory", function()
    it("writes through the array land in the original memory", function()
      local mem = ffi.new("double[4]", { 1, 2, 3, 4 })
      local a = weft.array(mem, weft.float64, { copy = false })
      assert.are.same({ 4 }, a.shape)
      a[2] = 30
      assert.are.equal(30, mem[2])
      mem[0] = 10
      assert.are.equal(10, a[0])
      assert.are.equal(ffi.cast("double *", mem), a:ptr())
    end)

    it("a pointer needs opts.shape; copy = true (default) copies", function()
      local mem = ffi.new("int32_t[6]", { 1, 2, 3, 4, 5, 6 })
      local p = ffi.cast("int32_t *", mem)
      local a = weft.array(p, weft.int32, { shape = { 2, 3 } })
      assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, a:totable())
      a[0][0] = 100
      assert.are.equal(1, mem[0])
      local w = weft.array(p, weft.int32, { shape = { 2, 3 }, copy = false })
      w[1][2] = 60
      assert.are.equal(60, mem[5])
      errat(function() weft.array(p, weft.int32) end, "weft.array: a cdata pointer needs opts.shape")
    end)

    it("the array keeps the cdata that owns the memory alive", function()
      local a = weft.array(ffi.new("float[3]", { 1, 2, 3 }), weft.float32, { copy = false })
      collectgarbage()
      collectgarbage()
      ffi.new("float[3]", { 7, 7, 7 })
      assert.are.same({ 1, 2, 3 }, a:totable())
    end)

    it("_wrap (the C API's weft_wrap) views memory by type name", function()
      local mem = ffi.new("float[6]")
      local a = internal.wrap(ffi.cast("void *", mem), "vec3", { 2 }, "cpu")
      a[1] = weft.vec3(1, 2, 3)
      assert.are.equal(3, mem[5])
      errat(function() internal.wrap(mem, "nope", { 2 }, "cpu") end, "weft_wrap: unknown dtype 'nope'")
    end)
  end)
end)
