-- NaNs with any payload read back as NaN. The LuaJIT here keeps the bits
-- of a NaN it loads from C memory, and some payloads then pass for other
-- Lua values (a float32 0xff9701b5 crashed the process; a float64
-- 0xffff000000000000 read as false): weft reads floats through their bits.
local weft = require "weft"
local ffi = require "ffi"

local function isnan(x) return type(x) == "number" and x ~= x end

describe("reading NaN payloads", function()
  it("scalars: a[i], totable and tostring give NaN", function()
    local a = weft.zeros(3, weft.float32)
    local u = ffi.cast("uint32_t *", a.h.data)
    u[0], u[1], u[2] = 0xff9701b5, 0x7fc00001, 0x7f800000
    assert.is_true(isnan(a[0]))
    assert.is_true(isnan(a[1]))
    assert.are.equal(math.huge, a[2])
    local t = a:totable()
    assert.is_true(isnan(t[1]) and isnan(t[2]))
    assert.are.equal("array([nan, nan, inf], dtype=float32)", tostring(a))
    local d = weft.zeros(3, weft.float64)
    local q = ffi.cast("uint64_t *", d.h.data)
    q[0], q[1], q[2] = 0xffff000000000000ULL, 0xfffae036a0000000ULL, 0xfff0000000000000ULL
    assert.is_true(isnan(d[0]))
    assert.is_true(isnan(d[1]))
    assert.are.equal(-math.huge, d[2])
    assert.are.equal("array([nan, nan, -inf], dtype=float64)", tostring(d))
  end)

  it("vector, matrix and struct components give NaN", function()
    local v = weft.zeros(2, weft.vec3d)
    ffi.cast("uint64_t *", v.h.data)[1] = 0xffff000000000000ULL
    assert.is_true(isnan(v:totable()[1][2]))
    assert.are.equal("vec3d(0, nan, 0)", tostring(v[0]))
    local m = weft.zeros(1, weft.mat22)
    ffi.cast("uint32_t *", m.h.data)[3] = 0xff9701b5
    assert.is_true(isnan(m:totable()[1][2][2]))
    local P = weft.struct{ { "pos", weft.vec3 }, { "mass", weft.float32 }, { "w", weft.float64 } }
    local s = weft.zeros(1, P)
    local base = ffi.cast("uint8_t *", s.h.data)
    ffi.cast("uint32_t *", base + ffi.offsetof(P.ctype, "mass"))[0] = 0xff9701b5
    ffi.cast("uint64_t *", base + ffi.offsetof(P.ctype, "w"))[0] = 0xffff000000000000ULL
    local r = s:totable()[1]
    assert.is_true(isnan(r.mass) and isnan(r.w))
    assert.matches("mass=nan, w=nan", tostring(s[0]), 1, true)
  end)

  it("a kernel's NaN results read back", function()
    local k = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float64),
      function(x, y)
        local i = weft.tid()
        x[i] = x[i] / x[i]  -- 0/0
        y[i] = weft.sqrt(y[i])
      end }
    local x, y = weft.zeros(2, weft.float32), weft.full(2, -1.0, weft.float64)
    weft.launch(k, 2, { x, y })
    assert.is_true(isnan(x[0]) and isnan(x[1]) and isnan(y[0]))
  end)
end)
