-- The one argument marshaller (lua/weft/marshal.lua): the packer that
-- weft.launch, the adjoint/tangent launches and CUDA launches share, the
-- kernelParams layout of CUDA launches, and launches and graph replays
-- that allocate nothing per launch.
local weft, internal = require "weft", require "weft.internal" -- internal: the parts' private table
local ffi = require "ffi"

local axpy = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32), a = weft.float32,
  function(x, y, a)
    local i = weft.tid()
    y[i] = y[i] + a * x[i]
  end }

-- Kilobytes allocated by fn (the collector stopped meanwhile), after a
-- first run that warms up the JIT (its traces count as allocations, and
-- inside the whole suite a few traces may still be recorded: a per-launch
-- allocation is at least 16 bytes, so the tests allow < 4 bytes a launch).
local function allocated(fn)
  fn()
  collectgarbage()
  collectgarbage("stop")
  local before = collectgarbage("count")
  fn()
  local after = collectgarbage("count")
  collectgarbage("restart")
  return after - before
end

describe("argument marshaller", function()
  after_each(function() pcall(weft.capture_end) end)

  it("warm cpu launches allocate nothing", function()
    local x, y = weft.ones(4), weft.zeros(4)
    local args = { x, y, 1.0 }
    weft.launch(axpy, 4, args)
    local kb = allocated(function()
      y:zero_()
      for _ = 1, 10000 do weft.launch(axpy, 4, args) end
    end)
    assert.is_true(kb * 1024 / 10000 < 4, string.format("%.1f KB for 10k launches", kb))
    assert.are.same({ 10000, 10000, 10000, 10000 }, y:totable())
  end)

  it("replaying a captured cpu graph 10k times allocates nothing per launch", function()
    local x, y = weft.ones(4), weft.zeros(4)
    weft.capture_begin("cpu")
    weft.launch(axpy, { 4 }, { x }, { outputs = { y, 2.0 } })
    local g = weft.capture_end()
    local kb = allocated(function()
      y:zero_()
      for _ = 1, 10000 do weft.capture_launch(g) end
    end)
    assert.is_true(kb * 1024 / 10000 < 4, string.format("%.1f KB for 10k replayed launches", kb))
    assert.are.same({ 20000, 20000, 20000, 20000 }, y:totable())
  end)

  it("capturing a cpu launch keeps only its record", function()
    local x, y = weft.ones(4), weft.zeros(4)
    local args, dim = { x, y, 1.0 }, { 4 }
    weft.launch(axpy, dim, args)
    local g
    local kb = allocated(function()
      weft.capture_begin("cpu")
      for _ = 1, 10000 do weft.launch(axpy, dim, args) end
      g = weft.capture_end()
    end)
    -- the record, its copy of the arguments and of the dims: ~250 bytes
    assert.is_true(kb * 1024 / 10000 < 400, string.format("%.0f bytes per captured launch", kb * 1024 / 10000))
    assert.are.equal(10000, #g.launches)
    weft.capture_launch(g)
    assert.are.same({ 10001, 10001, 10001, 10001 }, y:totable())
  end)

  it("lays out CUDA kernelParams once: arrays point at their header, scalars at their value", function()
    local k = weft.kernel{ x = weft.array(weft.float32), n = weft.int32, v = weft.vec3, b = weft.bool,
                           h = weft.float16, d = weft.float64, function(x, n, v, b, h, d) end } -- luacheck: no unused args
    local types = {}
    for i, p in ipairs(k.params) do types[i] = p.type end
    local a = internal.cuda_args(types, 1, true)
    -- no device here: pack for the cpu's arrays (device -1) into the CUDA layout
    local pack = internal.packer{ k = k, types = types, addrs = a.addrs, nextra = 1 }
    local x, g = weft.zeros(3), weft.zeros(3)
    local ins, extra = { x, 7, weft.vec3(1, 2, 3), true, 0.5, 2.25 }, { g }
    pack(ins, ins, 6, extra)
    assert.are.equal(8, a.n) -- 6 parameters, 1 extra array, the error slot
    local p = a.ptrs
    assert.is_true(ffi.cast("void *", x) == p[0])
    assert.are.equal(7, ffi.cast("int32_t *", p[1])[0])
    local v = ffi.cast("float *", p[2])
    assert.are.same({ 1, 2, 3 }, { v[0], v[1], v[2] })
    assert.are.equal(1, ffi.cast("uint8_t *", p[3])[0])
    assert.are.equal(0x3800, ffi.cast("uint16_t *", p[4])[0]) -- 0.5 in float16
    assert.are.equal(0, tonumber(ffi.cast("uintptr_t", p[5])) % 8) -- float64 aligned
    assert.are.equal(2.25, ffi.cast("double *", p[5])[0])
    assert.is_true(ffi.cast("void *", g) == p[6])
    assert.is_true(ffi.cast("void *", a.slot) == p[7])
    -- every launch packs into the same buffers
    local kb = allocated(function()
      for i = 1, 10000 do
        ins[2] = i
        pack(ins, ins, 6, extra)
      end
    end)
    assert.is_true(kb < 4, string.format("%.1f KB for 10k packs", kb))
    assert.are.equal(10000, ffi.cast("int32_t *", p[1])[0])
  end)

  it("checks arguments with the caller's prefix and device", function()
    local types = { weft.array(weft.float32), weft.array(weft.float32), weft.float32 }
    local a = internal.cuda_args(types, 0, false)
    local pack = internal.packer{ k = axpy, types = types, addrs = a.addrs, device = 0,
                                  writes = { false, true } }
    local x = weft.zeros(2)
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(pack, { x, x, 1.0 }, {}, 3)
    assert.is_false(ok)
    assert.are.equal("spec/marshal_spec.lua:" .. line .. ": weft.launch: kernel 'axpy': input 'x' is on "
                     .. "device cpu, but the launch runs on cuda:0", err)
    local b = internal.packer{ k = axpy, types = types, addrs = a.addrs, where = "weft: adjoint launch of 'axpy'" }
    assert.has_error(function() b({ x, x, "2" }, {}, 3) end,
                     "weft: adjoint launch of 'axpy': parameter 'a' expects float32, got a string")
    assert.has_error(function() b({ x, weft.zeros(2, weft.float64), 1.0 }, {}, 3) end,
                     "weft: adjoint launch of 'axpy': parameter 'y' expects array(float32), got array(float64)")
  end)

  it("adjoint launches check scalar and array types", function()
    local x, y = weft.ones(2), weft.zeros(2)
    local gx, gy = weft.zeros(2), weft.ones(2)
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(weft.launch, axpy, 2, { x, y, "a" }, { adjoint = true, adj_inputs = { gx, gy } })
    assert.is_false(ok)
    assert.are.equal("spec/marshal_spec.lua:" .. line .. ": weft: adjoint launch of 'axpy': parameter 'a' "
                     .. "expects float32, got a string", err)
    weft.launch(axpy, 2, { x, y, 3.0 }, { adjoint = true, adj_inputs = { gx, gy } })
    assert.are.same({ 3, 3 }, gx:totable())
  end)

  it("packs kernels with more parameters than a function has upvalues", function()
    local names, decl = {}, {}
    for i = 1, 60 do
      names[i] = "a" .. i
      decl[#decl + 1] = "a" .. i .. " = weft.float32, "
    end
    local src = "local weft = ...; return weft.kernel{ y = weft.array(weft.float32), " .. table.concat(decl)
      .. "function(y, " .. table.concat(names, ", ") .. ") y[weft.tid()] = a1 + a60 end }"
    local k = assert(loadstring(src))(weft)
    local y = weft.zeros(1)
    local args = { y }
    for i = 1, 60 do args[i + 1] = i end
    weft.launch(k, 1, args)
    assert.are.same({ 61 }, y:totable())
  end)
end)

describe("the module table", function()
  it("holds no private fields but weft._interop (the parts share require 'weft.internal')", function()
    local private = {}
    for key in pairs(weft) do
      if type(key) == "string" and key:sub(1, 1) == "_" then private[#private + 1] = key end
    end
    assert.are.same({ "_interop" }, private)
    assert.is_function(internal.launch_adjoint)
    assert.is_function(internal.raise) -- published by types.lua, moved by init.lua
    assert.is_table(internal.builtins)
  end)
end)
