-- print in kernels: Lua's formatting (bools as true/false, %s like tostring).
local weft = require "weft"

local A = weft.array
local f32 = weft.float32

local H = dofile("spec/helpers/front.lua")
local compile_error = H.compile_error
local line_of = H.line_finder("spec/kernel_print_spec.lua") -- the line holding a marker

describe("print in kernels", function()
  local run_child = dofile("spec/helpers/run_child.lua")

  it("shows bools as true and false, like Lua's print", function()
    local out = run_child([[
      local weft = require "weft"
      local P = weft.struct{ {"ok", weft.bool}, {"m", weft.float32} }
      local k = weft.kernel{ x = weft.array(weft.float32), function(x)
        local i = weft.tid()
        print("flags", i == 0, i ~= 0, x[i] > 1)
        print(not (i == 0))
        print("%d|%5.1f", i == 0, x[i])  -- an explicit %d still prints 1 or 0
        print(P{ ok = true, m = 2.5 })
      end }
      weft.launch(k, 1, { weft.array({ 1.5 }, weft.float32) })
      io.stdout:flush()
    ]])
    assert.are.equal(
      "flags\ttrue\tfalse\ttrue\n" ..
      "false\n" ..
      "1|  1.5\n" ..
      "[true, 2.5]\n", out)
  end)

  it("takes %s as Lua's tostring does: any value as print shows it, strings as they are", function()
    local out = run_child([[
      local weft = require "weft"
      local k = weft.kernel{ x = weft.array(weft.float32), function(x)
        local i = weft.tid()
        print("i=%s x=%s ok=%s v=%s s=%s 100%%", i, x[i], x[i] > 1.0, weft.vec3(1, 2, 3), "a%d")
      end }
      weft.launch(k, 1, { weft.array({ 1.5 }, weft.float32) })
      io.stdout:flush()
    ]])
    assert.are.equal("i=0 x=1.5 ok=true v=[1, 2, 3] s=a%d 100%\n", out)
    local bad = weft.kernel{ x = A(f32), function(x)
      print("%5s", x[weft.tid()]) -- MARK-pct-s
    end }
    local err = compile_error(bad)
    assert.truthy(err:find("kernel_print_spec.lua:" .. line_of("MARK-pct-s")
      .. ": print: '%s' takes no flags, width or precision here", 1, true), err)
    -- the CUDA C prints the same (run on the host)
    local k = weft.kernel{ x = A(f32), function(x)
      local i = weft.tid()
      print("x=%s ok=%s", x[i], x[i] > 1.0)
    end }
    local shim = dofile("tests/cuda/shim.lua")
    if shim.available() then
      assert.are.equal("x=1.5 ok=true\n", shim.run(weft, k, 1, { A({ 1.5 }, f32) }))
    end
  end)

  it("emits the same text for CUDA", function()
    local k = weft.kernel{ x = A(f32), function(x)
      local i = weft.tid()
      print("flags", i == 0, x[i])
    end }
    local src = k:source("cuda")
    local call = src:match('printf%("flags[^\n]*')
    assert.truthy(call, src)
    assert.truthy(call:find('"flags\\t%s\\t%g\\n"', 1, true), call)
    assert.truthy(call:find('? "true" : "false"', 1, true), call)
    -- the emitted CUDA C run on the host prints what the cpu backend does
    local shim = dofile("tests/cuda/shim.lua")
    if shim.available() then
      local out = shim.run(weft, k, 2, { A({ 1.5, -2 }, f32) })
      local lines = {}
      for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
      table.sort(lines) -- threads may print in any order
      assert.are.same({ "flags\tfalse\t-2", "flags\ttrue\t1.5" }, lines)
    end
  end)
end)
