-- Integer division and remainder by zero ("correct by default", weft
-- issue 12): weft.floordiv, weft.idiv, weft.fmod and % on integers stop
-- the launch with the kernel's line in release mode (the default) and in
-- debug mode, on the CPU and in CUDA C; fast mode gives 0 (x / 0, x % 0). INT_MIN / -1
-- wraps as in Lua 5.3 (math.mininteger // -1 == math.mininteger) in every
-- mode. Never a hardware trap or undefined behaviour.
local weft = require "weft"
local shim = dofile("tests/cuda/shim.lua")

local here = "spec/int_div_spec.lua:"

local function with_mode(mode, fn)
  local old = weft.config.mode
  weft.config.mode = mode
  local ok, err = pcall(fn)
  weft.config.mode = old
  if not ok then error(err, 0) end
end

local function kernel_of(dtype, f)
  return weft.kernel{ a = weft.array(dtype), b = weft.array(dtype), o = weft.array(dtype), f }
end

local ops = {
  { "floordiv", 27, function(a, b, o)
    local i = weft.tid()
    o[i] = weft.floordiv(a[i], b[i])
  end },
  { "idiv", 31, function(a, b, o)
    local i = weft.tid()
    o[i] = weft.idiv(a[i], b[i])
  end },
  { "%", 35, function(a, b, o)
    local i = weft.tid()
    o[i] = a[i] % b[i]
  end },
  { "fmod", 39, function(a, b, o)
    local i = weft.tid()
    o[i] = weft.fmod(a[i], b[i])
  end },
}

describe("integer division by zero", function()
  for _, dt in ipairs { weft.int32, weft.int64, weft.uint32 } do
    for _, op in ipairs(ops) do
      it("stops the launch at the line in release and debug mode: " .. op[1] .. " on "
         .. tostring(dt), function()
        local k = kernel_of(dt, op[3])
        for _, mode in ipairs { "release", "debug" } do
          with_mode(mode, function()
            local o = weft.zeros(2, dt)
            local ok, err = pcall(weft.launch, k, 2, { weft.array({ 7, 8 }, dt),
                                                       weft.array({ 2, 0 }, dt), o })
            assert.is_false(ok)
            assert.matches(here .. op[2] .. ": integer division by zero", tostring(err), 1, true)
          end)
        end
        with_mode("fast", function()
          local o = weft.zeros(2, dt)
          weft.launch(k, 2, { weft.array({ 7, 8 }, dt), weft.array({ 2, 0 }, dt), o })
          -- x / 0 = x % 0 = 0; fmod(x, 0) = x - idiv(x, 0) * 0 = x
          assert.equal(op[1] == "fmod" and 8 or 0, tonumber(o[1]))
          local want = { floordiv = 3, idiv = 3, ["%"] = 1, fmod = 1 }
          assert.equal(want[op[1]], tonumber(o[0]))
        end)
      end)
    end
  end

  it("wraps INT_MIN / -1 as Lua does, in every mode", function()
    for _, mode in ipairs { "release", "debug", "fast" } do
      with_mode(mode, function()
        for i, op in ipairs(ops) do
          local k = kernel_of(weft.int32, op[3])
          local o = weft.zeros(2, weft.int32)
          weft.launch(k, 2, { weft.array({ -2147483648, -7 }, weft.int32),
                              weft.array({ -1, -1 }, weft.int32), o })
          local q = i <= 2 and -2147483648 or 0
          assert.same({ q, i <= 2 and 7 or 0 }, o:totable(), op[1] .. " " .. mode)
        end
      end)
    end
  end)

  it("keeps nonzero divisors' values in release mode", function()
    local k = kernel_of(weft.int32, ops[1][3])
    local o = weft.zeros(4, weft.int32)
    weft.launch(k, 4, { weft.array({ 7, -7, 7, -7 }, weft.int32),
                        weft.array({ 2, 2, -2, -2 }, weft.int32), o })
    assert.same({ 3, -4, -4, 3 }, o:totable())
  end)

  it("is reported by CUDA C in release mode with the CPU's message", function()
    if not shim.available() then return pending("no g++") end
    local k = kernel_of(weft.int32, ops[3][3])
    local a, b = weft.array({ 7, 8 }, weft.int32), weft.array({ 2, 0 }, weft.int32)
    local _, msg = shim.run(weft, k, 2, { a, b, weft.zeros(2, weft.int32) }, { checks = true })
    assert.matches("^" .. here:gsub("%p", "%%%0") .. "35: integer division by zero$", msg)
    local ok, err = pcall(weft.launch, k, 2, { a, b, weft.zeros(2, weft.int32) })
    assert.is_false(ok)
    assert.equal(msg, tostring(err))
    b = weft.array({ 2, -3 }, weft.int32)
    local o = weft.zeros(2, weft.int32)
    _, msg = shim.run(weft, k, 2, { a, b, o }, { checks = true })
    assert.is_nil(msg)
    assert.same({ 1, -1 }, o:totable())
  end)
end)
