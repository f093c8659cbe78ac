-- weft.to_dlpack / weft.from_dlpack from Lua: layouts, flags, sharing.
local ffi = require "ffi"
local weft = require "weft"
if not weft.to_dlpack then require("weft.interop")(weft) end

-- The DLPack structs, under spec-local names (the runtime declares none).
if not pcall(ffi.typeof, "spec_DLMTV") then
  ffi.cdef [[
    typedef struct { int32_t device_type, device_id; } spec_DLDevice;
    typedef struct { uint8_t code, bits; uint16_t lanes; } spec_DLDataType;
    typedef struct {
      void *data; spec_DLDevice device; int32_t ndim; spec_DLDataType dtype;
      int64_t *shape; int64_t *strides; uint64_t byte_offset;
    } spec_DLTensor;
    typedef struct spec_DLMT {
      spec_DLTensor dl_tensor; void *manager_ctx; void (*deleter)(struct spec_DLMT *);
    } spec_DLMT;
    typedef struct spec_DLMTV {
      uint32_t major, minor; void *manager_ctx; void (*deleter)(struct spec_DLMTV *);
      uint64_t flags; spec_DLTensor dl_tensor;
    } spec_DLMTV;
  ]]
end

local function versioned(p) return ffi.cast("spec_DLMTV *", p) end
local function legacy(p) return ffi.cast("spec_DLMT *", p) end

describe("weft.to_dlpack", function()
  it("exports a compact float32 array with element strides", function()
    local a = weft.zeros({ 3, 4 })
    local m = versioned(weft.to_dlpack(a, true))
    local t = m.dl_tensor
    assert.are.equal(1, m.major)
    assert.are.equal(2, t.ndim)
    assert.are.equal(3, tonumber(t.shape[0]))
    assert.are.equal(4, tonumber(t.shape[1]))
    assert.are.equal(4, tonumber(t.strides[0]))
    assert.are.equal(1, tonumber(t.strides[1]))
    assert.are.equal(2, t.dtype.code)
    assert.are.equal(32, t.dtype.bits)
    assert.are.equal(1, t.dtype.lanes)
    assert.are.equal(1, t.device.device_type)
    assert.are.equal(0, tonumber(t.byte_offset))
    assert.are.equal(0, tonumber(m.flags))
    assert.is_true(ffi.cast("void *", a:ptr()) == t.data)
    m.deleter(m)
  end)

  it("spells vector and matrix elements as trailing dimensions", function()
    local v = weft.zeros(5, weft.vec3d)
    local m = legacy(weft.to_dlpack(v, false))
    assert.are.equal(2, m.dl_tensor.ndim)
    assert.are.equal(3, tonumber(m.dl_tensor.shape[1]))
    assert.are.equal(64, m.dl_tensor.dtype.bits)
    m.deleter(m)
    local q = weft.zeros(2, weft.mat33)
    local mq = versioned(weft.to_dlpack(q, true))
    local t = mq.dl_tensor
    assert.are.equal(3, t.ndim)
    assert.are.same({ 2, 3, 3 }, { tonumber(t.shape[0]), tonumber(t.shape[1]), tonumber(t.shape[2]) })
    assert.are.same({ 9, 3, 1 }, { tonumber(t.strides[0]), tonumber(t.strides[1]), tonumber(t.strides[2]) })
    mq.deleter(mq)
  end)

  it("maps integer and bool scalars", function()
    for name, cb in pairs { int8 = { 0, 8 }, uint16 = { 1, 16 }, int64 = { 0, 64 }, bool = { 6, 8 },
                            float16 = { 2, 16 } } do
      local m = versioned(weft.to_dlpack(weft.zeros(2, weft[name]), true))
      assert.are.same(cb, { m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits }, name)
      m.deleter(m)
    end
  end)

  it("exports a copy with IS_COPIED", function()
    local a = weft.full(4, 2.5)
    local m = versioned(weft.to_dlpack(a, true, true))
    assert.are.equal(2, tonumber(m.flags))
    assert.is_false(ffi.cast("void *", a:ptr()) == m.dl_tensor.data)
    assert.are.equal(2.5, ffi.cast("float *", m.dl_tensor.data)[3])
    m.deleter(m)
  end)

  it("keeps the memory alive after the array is collected", function()
    local a = weft.full(4, 7.0)
    local m = versioned(weft.to_dlpack(a, true))
    a = nil
    collectgarbage()
    collectgarbage()
    assert.are.equal(7, ffi.cast("float *", m.dl_tensor.data)[2])
    m.deleter(m)
  end)

  it("rejects what is not an array", function()
    assert.has_error(function() weft.to_dlpack({}) end, "weft.to_dlpack: expected an array, got a table")
  end)
end)

describe("weft.from_dlpack", function()
  it("views an exported array without a copy", function()
    local a = weft.array({ 1, 2, 3, 4 }, weft.float32)
    local b = weft.from_dlpack(weft.to_dlpack(a, true), true)
    assert.are.equal(weft.float32, b.dtype)
    assert.are.same({ 4 }, b.shape)
    b[2] = 30
    assert.are.equal(30, a[2])
  end)

  it("folds trailing dimensions into vector elements", function()
    local a = weft.array({ 1, 2, 3, 4, 5, 6 }, weft.float32)
    local m = weft.to_dlpack(a, false)
    -- a 6-element tensor cannot be vec3 elements without a trailing 3
    assert.has_error(function() weft.from_dlpack(m, false, "vec3") end,
      "weft.from_dlpack: dimension 0 has size 6, the element type needs 3")
    local flat = weft.zeros({ 2, 3 })
    flat[1][2] = 9
    local v = weft.from_dlpack(weft.to_dlpack(flat, true), true, weft.vec3)
    assert.are.equal(weft.vec3, v.dtype)
    assert.are.same({ 2 }, v.shape)
    assert.are.equal(9, v[1].z)
  end)

  it("reports bad dtypes and still takes ownership", function()
    local a = weft.zeros({ 2, 3 })
    assert.has_error(function() weft.from_dlpack(weft.to_dlpack(a, true), true, "nope") end,
      "weft.from_dlpack: dtype nope cannot view a DLPack tensor")
    assert.has_error(function() weft.from_dlpack(weft.to_dlpack(a, true), true, "vec3d") end,
      "weft.from_dlpack: the tensor holds float32 values, vec3d needs float64")
  end)

  it("reads the read-only flag", function()
    local a = weft.zeros(3)
    local m = versioned(weft.to_dlpack(a, true))
    m.flags = 1
    local b = weft.from_dlpack(m, true)
    assert.are_not.equal(0, bit.band(b.h.flags, 4))
  end)
end)
