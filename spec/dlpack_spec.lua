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

-- A read-only array: an export flagged READ_ONLY, imported back.
local function readonly(a)
  local m = versioned(weft.to_dlpack(a, true))
  m.flags = 1
  return weft.from_dlpack(m, true)
end

describe("read-only arrays", function()
  local copy = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),
    function(x, y)
      local i = weft.tid()
      y[i] = x[i] * 2.0
    end }
  local accumulate = weft.kernel{ x = weft.array(weft.float32), s = weft.array(weft.float32),
    function(x, s)
      weft.atomic_add(s, 0, x[weft.tid()])
    end }

  it("can be read by kernels", function()
    local x = readonly(weft.array({ 1, 2, 3 }, weft.float32))
    local y = weft.zeros(3)
    weft.launch(copy, 3, { x }, { outputs = { y } })
    assert.same({ 2, 4, 6 }, y:totable())
    local s = weft.zeros(1)
    weft.launch(accumulate, 3, { x }, { outputs = { s } })
    assert.equal(6, s[0])
  end)

  it("refuse kernels that store to them or update them atomically", function()
    local y = readonly(weft.zeros(3))
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(weft.launch, copy, 3, { weft.ones(3) }, { outputs = { y } })
    assert.is_false(ok)
    assert.equal(("spec/dlpack_spec.lua:%d: weft.launch: kernel 'copy' writes output 'y', but the "
                  .. "array passed is read-only"):format(line), err)
    assert.same({ 0, 0, 0 }, y:totable())
    assert.has_error(function() weft.launch(accumulate, 3, { weft.ones(3) }, { outputs = { y } }) end,
      "weft.launch: kernel 'accumulate' writes output 's', but the array passed is read-only")
    assert.equal(0, y[0])
  end)

  it("refuse a:fill_, a:zero_, weft.copy and a[i] = v, also through row views", function()
    local a = readonly(weft.array({ { 1, 2 }, { 3, 4 } }, weft.float32))
    assert.has_error(function() a:fill_(7) end, "a:fill_: the array is read-only")
    assert.has_error(function() a:zero_() end, "a:zero_: the array is read-only")
    assert.has_error(function() weft.copy(a, weft.zeros({ 2, 2 })) end,
      "weft.copy: dst: the array is read-only")
    assert.has_error(function() a[0] = { 5, 6 } end, "weft: a[i] = v: the array is read-only")
    assert.has_error(function() a[1][0] = 5 end, "weft: a[i] = v: the array is read-only")
    assert.same({ { 1, 2 }, { 3, 4 } }, a:totable())
    -- reading and copying out still work
    local b = weft.zeros({ 2, 2 })
    weft.copy(b, a)
    assert.equal(4, b[1][1])
    assert.equal(3, a[1][0])
  end)

  it("refuse an adjoint launch that writes their gradient", function()
    local x = weft.array({ 1, 2, 3 }, weft.float32)
    local y = weft.zeros(3)
    local gx = readonly(weft.zeros(3))
    assert.has_error(function()
      weft.launch(copy, 3, { x }, { outputs = { y }, adjoint = true, adj_inputs = { gx },
                                    adj_outputs = { weft.ones(3) } })
    end, "weft: adjoint launch of 'copy' writes the adjoint of 'x', but the array passed is read-only")
    -- a read-only primal input is fine: the adjoint only reads it
    local rx = readonly(x)
    local g = weft.zeros(3)
    weft.launch(copy, 3, { rx }, { outputs = { y }, adjoint = true, adj_inputs = { g },
                                   adj_outputs = { weft.ones(3) } })
    assert.same({ 2, 2, 2 }, g:totable())
  end)
end)

describe("weft.from_dlpack of malformed tensors", function()
  it("names what is wrong and calls the deleter once", function()
    local deleted = 0
    local del = ffi.cast("void (*)(struct spec_DLMTV *)", function() deleted = deleted + 1 end)
    local shape = ffi.new("int64_t[2]", 2, 3)
    local data = ffi.new("float[6]")
    local function tensor()
      local m = ffi.new("spec_DLMTV")
      m.major, m.deleter = 1, del
      local t = m.dl_tensor
      t.data, t.ndim, t.shape = data, 2, shape
      t.device.device_type, t.dtype.code, t.dtype.bits, t.dtype.lanes = 1, 2, 32, 1
      return m
    end
    local cases = {
      { function(t) t.shape = nil end, "shape is NULL for a tensor of 2 dimensions" },
      { function(t) t.byte_offset = 2ULL ^ 63 end, "byte_offset 9223372036854775808 is out of range" },
      { function(t) t.data = nil end, "data is NULL for a tensor of 6 elements" },
      { function(t) t.shape = ffi.new("int64_t[2]", 2, -1) end, "dimension 1 has negative size -1" },
      { function(t) t.strides = ffi.new("int64_t[2]", 2LL ^ 62, 1) end,
        "stride 4611686018427387904 of dimension 0 overflows 64 bits in bytes" },
    }
    for _, c in ipairs(cases) do
      local m = tensor()
      c[1](m.dl_tensor)
      deleted = 0
      assert.has_error(function() weft.from_dlpack(m, true) end, "weft.from_dlpack: " .. c[2])
      assert.equal(1, deleted)
    end
    del:free()
  end)
end)
