-- The type system: names, layouts, host values, casts, float16, structs.
local ffi = require "ffi"
local weft, internal = require "weft", require "weft.internal" -- internal: the parts' private table

-- fn must fail with msg, located at the line where errat is called.
local function errat(fn, msg)
  local info = debug.getinfo(2, "Sl")
  local ok, err = pcall(fn)
  assert.is_false(ok, "no error raised")
  assert.are.equal(info.short_src .. ":" .. info.currentline .. ": " .. msg, err)
end

describe("weft types", function()
  it("have the canonical names, kinds and C layouts", function()
    local cases = {
      { weft.bool, "bool", "bool", 1, 1 },
      { weft.int8, "int8", "int", 1, 1 }, { weft.uint8, "uint8", "int", 1, 1 },
      { weft.int16, "int16", "int", 2, 2 }, { weft.uint16, "uint16", "int", 2, 2 },
      { weft.int32, "int32", "int", 4, 4 }, { weft.uint32, "uint32", "int", 4, 4 },
      { weft.int64, "int64", "int", 8, 8 }, { weft.uint64, "uint64", "int", 8, 8 },
      { weft.float16, "float16", "float", 2, 2 }, { weft.float32, "float32", "float", 4, 4 },
      { weft.float64, "float64", "float", 8, 8 },
      { weft.vec3f, "vec3f", "vec", 12, 4 }, { weft.vec2d, "vec2d", "vec", 16, 8 },
      { weft.vec4h, "vec4h", "vec", 8, 2 }, { weft.vec3i, "vec3i", "vec", 12, 4 },
      { weft.vec4ub, "vec4ub", "vec", 4, 1 }, { weft.mat33f, "mat33f", "mat", 36, 4 },
      { weft.mat44d, "mat44d", "mat", 128, 8 }, { weft.mat22h, "mat22h", "mat", 8, 2 },
      { weft.quatd, "quatd", "quat", 32, 8 }, { weft.transformf, "transformf", "transform", 28, 4 },
      { weft.transformd, "transformd", "transform", 56, 8 },
      { weft.spatial_vectorf, "spatial_vectorf", "vec", 24, 4 },
      { weft.spatial_matrixd, "spatial_matrixd", "mat", 288, 8 },
    }
    for _, c in ipairs(cases) do
      local t, name, kind, size, align = c[1], c[2], c[3], c[4], c[5]
      assert.is_true(weft.is_type(t), name)
      assert.are.equal(name, t.name)
      assert.are.equal(kind, t.kind)
      assert.are.equal(size, t.size, name)
      assert.are.equal(align, t.align, name)
      assert.are.equal(size, ffi.sizeof(t.ctype), name)
      assert.are.equal(t, weft.types[t.id])
      assert.are.equal(t, weft.type_from_name(name))
      assert.is_string(t.cdecl)
    end
  end)

  it("has the pinned aliases", function()
    assert.are.equal(weft.int32, weft.int)
    assert.are.equal(weft.float32, weft.float)
    assert.are.equal(weft.vec3f, weft.vec3)
    assert.are.equal(weft.mat33f, weft.mat33)
    assert.are.equal(weft.quatf, weft.quat)
    assert.are.equal(weft.transformf, weft.transform)
    assert.are.equal(weft.spatial_vectorf, weft.spatial_vector)
    assert.are.equal(weft.spatial_matrixf, weft.spatial_matrix)
    assert.are.equal(weft.vec3f, weft.type_from_name("vec3"))
    assert.is_nil(weft.type_from_name("vec5"))
  end)

  it("describes scalars and composites with their fields", function()
    assert.are.equal(8, weft.bool.bits)
    assert.is_true(weft.int16.signed)
    assert.is_false(weft.uint16.signed)
    assert.are.equal(16, weft.float16.bits)
    assert.are.equal(weft.float64, weft.vec2d.scalar)
    assert.are.equal(3, weft.vec3.n)
    assert.are.equal(6, weft.spatial_vectord.n)
    assert.are.equal(6, weft.spatial_matrixh.rows)
    assert.are.equal(6, weft.spatial_matrixh.cols)
    assert.are.equal(weft.float16, weft.quath.scalar)
    assert.are.equal("weft.vec3f", tostring(weft.vec3))
  end)

  it("interns custom vectors and matrices", function()
    local v5 = weft.vector(5, weft.float32)
    assert.are.equal("vector(5,float32)", v5.name)
    assert.are.equal(v5, weft.vector(5, weft.float32))
    assert.are.equal(v5, weft.type_from_name("vector(5,float32)"))
    assert.are.equal(20, v5.size)
    assert.are.equal(weft.vec3, weft.vector(3, weft.float32))
    assert.are.equal(weft.mat33d, weft.matrix(3, 3, weft.float64))
    local m23 = weft.matrix(2, 3, weft.float64)
    assert.are.equal("matrix(2,3,float64)", m23.name)
    assert.are.equal(m23, weft.matrix(2, 3, "float64"))
    assert.are.equal(48, m23.size)
    assert.are.equal(2, m23.rows)
    assert.are.equal(3, m23.cols)
  end)

  it("rejects bad custom type arguments", function()
    errat(function() weft.vector(0, weft.float32) end,
      "weft.vector: length must be an integer from 1 to 64, got 0")
    errat(function() weft.vector(3, weft.vec3) end,
      "weft.vector: argument 2 must be a scalar type (weft.float32, ...), got the type vec3f")
    errat(function() weft.matrix(2, 2.5, weft.float32) end,
      "weft.matrix: cols must be an integer from 1 to 64, got 2.5")
    errat(function() weft.vector(3, "flaot") end,
      "weft.vector: argument 2 must be a scalar type (weft.float32, ...), got 'flaot'")
  end)

  describe("scalar casts", function()
    it("follow C conversions", function()
      assert.are.equal(2, weft.int32(2.7))
      assert.are.equal(-2, weft.int32(-2.7))
      assert.are.equal(44, weft.uint8(300))
      assert.are.equal(255, weft.uint8(-1))
      assert.are.equal(-56, weft.int8(200))
      assert.are.equal(4294967295, weft.uint32(-1))
      assert.are.equal(1.5, weft.float32(1.5))
      assert.are_not.equal(0.1, weft.float32(0.1))
      assert.are.equal(tonumber(ffi.new("float", 0.1)), weft.float32(0.1))
      assert.are.equal(0.1, weft.float64(0.1))
      assert.is_true(weft.bool(1))
      assert.is_false(weft.bool(0))
      assert.are.equal(ffi.new("int64_t", 7), weft.int64(7.9))
      assert.are.equal("number", type(weft.float16(1)))
    end)
    it("reject non-numbers", function()
      errat(function() weft.float32("1") end,
        "weft.float32: expected a number, got a string")
      errat(function() weft.int32({}) end,
        "weft.int32: expected a number, got a table")
    end)
  end)

  describe("float16", function()
    local h = internal.half_from_number
    local f = internal.half_to_number
    it("converts exact values and specials", function()
      assert.are.equal(0x3c00, h(1))
      assert.are.equal(0xc000, h(-2))
      assert.are.equal(0x7bff, h(65504))
      assert.are.equal(0x7c00, h(65520))         -- halfway to 65536 rounds to inf
      assert.are.equal(0x7bff, h(65519))
      assert.are.equal(0x7c00, h(1e9))
      assert.are.equal(0xfc00, h(-math.huge))
      assert.are.equal(0x8000, h(-0.0))
      assert.are.equal(0x0001, h(2 ^ -24))      -- smallest subnormal
      assert.are.equal(0x0000, h(2 ^ -25))      -- halfway to 0: even
      assert.are.equal(0x0002, h(3 * 2 ^ -25))  -- 1.5 ulp: to even (2)
      assert.are.equal(0x0400, h(2 ^ -14))      -- smallest normal
      assert.are.equal(0x03ff, h(2 ^ -14 - 2 ^ -24))
      assert.is_true(h(0 / 0) >= 0x7c01)
      assert.are.equal(65504, f(0x7bff))
      assert.are.equal(2 ^ -24, f(1))
      assert.are.equal(math.huge, f(0x7c00))
      assert.are.equal(-math.huge, f(0xfc00))
      assert.is_true(f(0x7e00) ~= f(0x7e00))
    end)
    it("rounds to nearest even between neighbours", function()
      -- 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1)
      assert.are.equal(0x3c00, h(1 + 2 ^ -11))
      -- 1 + 3 * 2^-11 is halfway between 1+2^-10 and 1+2^-9: to even (0x3c02)
      assert.are.equal(0x3c02, h(1 + 3 * 2 ^ -11))
      assert.are.equal(0x3c01, h(1 + 2 ^ -11 + 2 ^ -20))
      -- 2047.5 -> halfway between 2047 and 2048 (spacing 1): even 2048
      assert.are.equal(2048, f(h(2047.5)))
      assert.are.equal(0.0999755859375, weft.float16(0.1))
    end)
    it("round-trips every finite half", function()
      for bits = 0, 0xffff do
        local e = math.floor(bits / 1024) % 32
        if e ~= 31 then
          local back = h(f(bits))
          assert(back == bits, string.format("0x%04x -> %s -> 0x%04x", bits, f(bits), back))
        end
      end
    end)
  end)

  describe("vectors", function()
    it("construct and expose components", function()
      local v = weft.vec3(1, 2, 3)
      assert.are.equal(1, v.x)
      assert.are.equal(2, v.y)
      assert.are.equal(3, v[2])
      assert.are.equal(3, #v)
      assert.are.equal("vec3f(1, 2, 3)", tostring(v))
      assert.are.equal(weft.vec3(0, 0, 0), weft.vec3())
      assert.are.equal(weft.vec3(5, 5, 5), weft.vec3(5))
      assert.are.equal(weft.vec3(1, 2, 3), weft.vec3 { 1, 2, 3 })
      v.x = 7
      v[1] = 8
      assert.are.equal(weft.vec3(7, 8, 3), v)
      assert.are.equal(weft.vec3, weft.dtype_of(v))
    end)
    it("do arithmetic", function()
      local a, b = weft.vec3(1, 2, 3), weft.vec3(4, 5, 6)
      assert.are.equal(weft.vec3(5, 7, 9), a + b)
      assert.are.equal(weft.vec3(3, 3, 3), b - a)
      assert.are.equal(weft.vec3(2, 4, 6), a * 2)
      assert.are.equal(weft.vec3(2, 4, 6), 2 * a)
      assert.are.equal(weft.vec3(0.5, 1, 1.5), a / 2)
      assert.are.equal(weft.vec3(-1, -2, -3), -a)
      assert.are_not.equal(a, b)
      assert.is_false(a == nil)
    end)
    it("convert components of half and int vectors", function()
      local h = weft.vec3h(0.1, 2, 65504)
      assert.are.equal(0.0999755859375, h.x)
      assert.are.equal(65504, h[2])
      assert.are.equal(6, ffi.sizeof(h))
      local i = weft.vec2i(2.9, -1)
      assert.are.equal(2, i.x)
      local ub = weft.vec4ub(1, 2, 3, 255)
      assert.are.equal(255, ub.w)
      assert.are.equal(weft.vec3h(1, 2, 3), weft.vec3h(weft.vec3(1, 2, 3)))
    end)
    it("spatial vectors and custom vectors have 0-based components", function()
      local s = weft.spatial_vector(1, 2, 3, 4, 5, 6)
      assert.are.equal(6, s[5])
      local v5 = weft.vector(5, weft.float64)(1, 2, 3, 4, 5)
      assert.are.equal(5, v5[4])
      assert.are.equal(1, v5.x)
    end)
    it("report errors", function()
      local v = weft.vec3()
      errat(function() return v[3] end, "weft.vec3f: index 3 out of range [0, 3)")
      errat(function() return v.q end, "weft.vec3f has no field 'q'")
      errat(function() weft.vec3(1, 2) end, "weft.vec3f: expected 3 components, got 2")
      errat(function() weft.vec3(1, "a", 3) end,
        "weft.vec3f: component 2 is a string, expected a number")
      errat(function() return v * v end,
        "weft.vec3f: '*' of two vectors is ambiguous (use weft.dot or weft.cw_mul)")
      errat(function() return v + weft.vec2() end,
        "weft.vec3f: cannot apply '+' to a vec3f and a vec2f")
    end)
  end)

  describe("matrices", function()
    it("construct from numbers, rows and tables; index m[i][j] row-major", function()
      local m = weft.mat33(1, 2, 3, 4, 5, 6, 7, 8, 9)
      assert.are.equal(2, m[0][1])
      assert.are.equal(4, m[1][0])
      local r = weft.mat33(weft.vec3(1, 2, 3), weft.vec3(4, 5, 6), weft.vec3(7, 8, 9))
      assert.are.equal(m, r)
      assert.are.equal(m, weft.mat33 { { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } })
      m[2][2] = 10
      assert.are.equal(10, m[2][2])
      assert.are.same({ { 1, 2 }, { 3, 4 } }, weft.mat22(1, 2, 3, 4):totable())
      assert.are.equal("mat22f([1, 2], [3, 4])", tostring(weft.mat22(1, 2, 3, 4)))
    end)
    it("multiply matrices and vectors", function()
      local m = weft.mat22(1, 2, 3, 4)
      assert.are.equal(weft.vec2(5, 11), m * weft.vec2(1, 2))
      assert.are.equal(weft.vec2(7, 10), weft.vec2(1, 2) * m)
      assert.are.equal(weft.mat22(7, 10, 15, 22), m * m)
      assert.are.equal(weft.mat22(2, 4, 6, 8), m * 2)
      assert.are.equal(weft.mat22(2, 4, 6, 8), m + m)
      local m23 = weft.matrix(2, 3, weft.float32)(1, 2, 3, 4, 5, 6)
      local v3 = weft.vec3(1, 1, 1)
      assert.are.equal(weft.vec2(6, 15), m23 * v3)
    end)
    it("half matrices convert through row proxies", function()
      local m = weft.mat22h(0.1, 2, 3, 4)
      assert.are.equal(0.0999755859375, m[0][0])
      m[1][1] = 0.5
      assert.are.equal(0.5, m[1][1])
    end)
    it("report errors", function()
      local m = weft.mat22()
      errat(function() return m[2] end, "weft.mat22f: row index 2 out of range [0, 2)")
      errat(function() weft.mat22(1, 2, 3) end,
        "weft.mat22f: expected 4 numbers or 2 row vectors, got 3 arguments")
    end)
  end)

  describe("quaternions and transforms", function()
    it("multiply quaternions (Hamilton product)", function()
      local i, j = weft.quat(1, 0, 0, 0), weft.quat(0, 1, 0, 0)
      assert.are.equal(weft.quat(0, 0, 1, 0), i * j)
      assert.are.equal(weft.quat(0, 0, -1, 0), j * i)
      assert.are.equal(1, weft.quat(0, 0, 0, 1).w)
    end)
    it("build transforms from p and q, p then q in memory", function()
      local t = weft.transform(weft.vec3(1, 2, 3), weft.quat(0, 0, 0, 1))
      assert.are.equal(2, t.p.y)
      assert.are.equal(1, t.q.w)
      assert.are.same({ 1, 2, 3, 0, 0, 0, 1 }, t:totable())
      local tt = ffi.new(internal.array_ctype(weft.transform), 1); tt[0] = t; local f = ffi.cast("float *", tt)
      assert.are.equal(3, f[2])
      assert.are.equal(1, f[6])
      assert.are.same({ 0, 0, 0, 0, 0, 0, 1 }, weft.transform():totable())
      assert.are.equal(t, weft.transform(1, 2, 3, 0, 0, 0, 1))
      assert.are.equal("transformf(p=vec3f(1, 2, 3), q=quatf(0, 0, 0, 1))", tostring(t))
    end)
  end)

  describe("structs", function()
    local P = weft.struct { { "pos", weft.vec3 }, { "mass", weft.float32 }, { "flag", weft.bool },
      { "h", weft.float16 }, name = "Particle" }
    it("lay out fields in order with C offsets", function()
      assert.are.equal("struct", P.kind)
      assert.are.equal("Particle", P.name)
      assert.are.equal("pos", P.fields[1].name)
      assert.are.equal(0, P.fields[1].offset)
      assert.are.equal(12, P.fields[2].offset)
      assert.are.equal(16, P.fields[3].offset)
      assert.are.equal(18, P.fields[4].offset)
      assert.are.equal(20, P.size)
      assert.are.equal(4, P.align)
      assert.are.equal(P, weft.type_from_name("Particle"))
    end)
    it("construct on the host and read and write fields", function()
      local p = P { pos = weft.vec3(1, 2, 3), mass = 2.0 }
      assert.are.equal(2, p.mass)
      assert.are.equal(3, p.pos.z)
      p.mass = 3.0
      p.h = 0.1
      p.pos = { 4, 5, 6 }
      assert.are.equal(3, p.mass)
      assert.are.equal(0.0999755859375, p.h)
      assert.are.equal(weft.vec3(4, 5, 6), p.pos)
      assert.are.same({ pos = { 4, 5, 6 }, mass = 3, flag = false, h = 0.0999755859375 }, P.totable(p))
      assert.are.equal(P, weft.dtype_of(p))
    end)
    it("report errors", function()
      errat(function() P { speed = 1 } end, "weft.Particle has no field 'speed'")
      errat(function() P { mass = "x" } end,
        "weft.Particle: field 'mass' is a string, expected a number for float32")
      errat(function() weft.struct { { "a", 3 } } end,
        "weft.struct: field 'a' has a number, expected a weft type")
      errat(function() weft.struct { { "a", weft.int }, { "a", weft.int } } end,
        "weft.struct: field 'a' appears twice")
      errat(function() weft.struct {} end, "weft.struct: a struct needs at least one field")
    end)
  end)

  it("dtype_of maps host values", function()
    assert.are.equal(weft.float32, weft.dtype_of(1.5))
    assert.are.equal(weft.bool, weft.dtype_of(true))
    assert.are.equal(weft.int64, weft.dtype_of(ffi.new("int64_t", 1)))
    assert.are.equal(weft.mat22d, weft.dtype_of(weft.mat22d()))
    assert.is_nil(weft.dtype_of("x"))
  end)
end)
