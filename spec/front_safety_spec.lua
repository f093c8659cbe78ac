-- Front end safety (weft issue 10): long source lines, functions sharing
-- a line, out-of-range literals, overloads chosen by literals, the
-- largest vectors and matrices, assignments to non-values.
local weft = require "weft"

local A = weft.array
local i32, f32, f64 = weft.int32, weft.float32, weft.float64

local H = dofile("spec/helpers/front.lua")
local compile_error = H.compile_error

describe("long source lines", function()
  -- The declared name is read from the source line with a scan that is
  -- linear in the line's length: these lines are 100k characters long,
  -- and a backtracking pattern took minutes on them.
  local N = 100000

  local function load_kernel(src)
    return assert(loadstring(src))(weft)
  end

  it("find the name before a long comment", function()
    local k = load_kernel("local weft = ...\nlocal long_k = weft.kernel{ x = weft.array(weft.float32), "
      .. "function(x) x[0] = 1.0 end } -- " .. string.rep("a", N) .. "\nreturn long_k\n")
    assert.are.equal("long_k", k.name)
    assert.truthy(k:ir():find("store", 1, true))
  end)

  it("find a long name, and none among many calls", function()
    local name = string.rep("n", N)
    local k = load_kernel("local weft = ...\nlocal " .. name .. " = weft.kernel{ x = weft.array(weft.float32), "
      .. "function(x) x[0] = 1.0 end }\nreturn " .. name .. "\n")
    assert.are.equal(name, k.name)
    local calls = string.rep("kernel( ", N / 8)
    k = load_kernel("local weft = ...\nlocal t = { weft.kernel{ x = weft.array(weft.float32), "
      .. "function(x) x[0] = 1.0 end } } -- " .. calls .. "\nreturn t[1]\n")
    assert.are.equal("kernel_2", k.name)
  end)

  it("compile a kernel whose body is one long line", function()
    local body = string.rep(" + 1.0", N / 6)
    local k = load_kernel("local weft = ...\nreturn weft.kernel{ x = weft.array(weft.float64), "
      .. "function(x) x[0] = 0.0" .. body .. " end }\n")
    local x = weft.zeros(1, f64)
    weft.launch(k, 1, { x })
    assert.are.equal(math.floor(N / 6), x:totable()[1])
  end)

  it("stop a chain of 2000 fields or calls with a positioned error", function()
    for _, chain in ipairs({ string.rep(".x", 2000), string.rep("()", 2000) }) do
      local k = load_kernel("local weft = ...\nreturn weft.kernel{ x = weft.array(weft.float32), "
        .. "function(x)\n  local v = weft.vec3()\n  x[0] = v" .. chain .. "\nend }\n")
      local err = compile_error(k)
      assert.truthy(err:find('^%[string "local weft = [^\n]*%]:4: expression nested too deeply %(more than 1000 levels%)\n'), err)
    end
  end)
end)
