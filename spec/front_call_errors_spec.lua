-- Where errors in called functions are reported. A builtin written as a
-- weft.func (lua/weft/stdlib.lua: step, nonzero, lerp, smoothstep,
-- degrees, radians, frac, isnan, isinf, isfinite) checks its argument
-- types and reports a wrong call at the user's call, naming the builtin as
-- the call wrote it; any other error in a builtin's body is reported there
-- too. An error in the user's own weft.func stays at its line and lists the
-- calls on the way to the kernel ("called from chunk:line").
local weft = require "weft"

-- The error compiling the kernel that src (a chunk taking weft) returns,
-- with the chunk's name replaced by "k".
local function compile_error(src)
  local chunk = assert(load(src))
  local name = debug.getinfo(chunk, "S").short_src
  local ok, err = pcall(function() return chunk(weft):ir() end)
  assert.is_false(ok, "compiled but should fail:\n" .. src)
  local at = 1
  local out = {}
  while true do
    local s, e = err:find(name, at, true)
    if not s then break end
    out[#out + 1] = err:sub(at, s - 1) .. "k"
    at = e + 1
  end
  out[#out + 1] = err:sub(at)
  return table.concat(out)
end

describe("stdlib builtins called with wrong argument types", function()
  -- { call, argument element types, message }
  local cases = {
    { "weft.step(a[0])", { "bool" }, "weft.step(bool): the argument must be an int or float scalar" },
    { "weft.nonzero(a[0])", { "vec3" }, "weft.nonzero(vec3f): the argument must be an int or float scalar" },
    { "weft.degrees(a[0])", { "int32" }, "weft.degrees(int32): the argument must be a float scalar "
      .. "or a vector, matrix, quaternion or transform of floats" },
    { "weft.radians(a[0])", { "uint8" }, "weft.radians(uint8): the argument must be a float scalar "
      .. "or a vector, matrix, quaternion or transform of floats" },
    { "weft.frac(a[0])", { "int64" }, "weft.frac(int64): the argument must be a float scalar "
      .. "or a vector, matrix, quaternion or transform of floats" },
    { "weft.isinf(a[0])", { "vec2i" }, "weft.isinf(vec2i): the argument must be a float scalar "
      .. "or a vector, matrix, quaternion or transform of floats" },
    { "weft.isfinite(a[0] > 0)", { "int32" }, "weft.isfinite(bool): the argument must be a float "
      .. "scalar or a vector, matrix, quaternion or transform of floats" },
    { "weft.lerp(a[0], b[0], 0.5)", { "vec3d", "vec4d" },
      "weft.lerp(vec3d, vec4d, float64): a and b must have the same type" },
    { "weft.lerp(a[0], b[0], c[0])", { "vec3", "vec3d", "float64" },
      "weft.lerp(vec3f, vec3d, float64): the arguments must share one float type" },
    { "weft.lerp(a[0], a[1], 1)", { "float64" },
      "weft.lerp(float64, float64, int32): t must be a float64 scalar; integer literals are "
      .. "int32 here (write 1.0, not 1)" },
    { "weft.lerp(a[0], a[1], a[2])", { "vec3d" },
      "weft.lerp(vec3d, vec3d, vec3d): t must be a float64 scalar" },
    { "weft.lerp(a[0], a[1], a[2])", { "int32" },
      "weft.lerp(int32, int32, int32): the arguments must share one float type" },
    { "weft.smoothstep(a[0], a[1], a[2])", { "vec3d" },
      "weft.smoothstep(vec3d, vec3d, vec3d): the arguments must be float scalars" },
    { "weft.smoothstep(a[0], a[1], a[2])", { "uint8" },
      "weft.smoothstep(uint8, uint8, uint8): the arguments must share one float type" },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " on " .. table.concat(c[2], ", "), function()
      local params, decls = {}, {}
      for i, t in ipairs(c[2]) do
        local p = string.char(96 + i)
        params[i] = p
        decls[i] = p .. " = weft.array(weft." .. t .. ")"
      end
      local src = "local weft = ...\nreturn weft.kernel{ " .. table.concat(decls, ", ") ..
        ", function(" .. table.concat(params, ", ") .. ")\n  local r = " .. c[1] .. "\nend }\n"
      local err = compile_error(src)
      assert.equal("k:3: " .. c[3] .. "\n  local r = " .. c[1] .. "\n            ^", err)
    end)
  end

  it("accept what Warp accepts (and weft's aggregates) unchanged", function()
    local k = weft.kernel{ a = weft.array(weft.float64), v = weft.array(weft.vec3d),
      m = weft.array(weft.mat22d), q = weft.array(weft.quatd), u = weft.array(weft.uint8),
      y = weft.array(weft.float64), b = weft.array(weft.bool), function(a, v, m, q, u, y, b)
        local x = a[0]
        y[0] = weft.step(x) + weft.nonzero(x) + weft.degrees(x) + weft.radians(x) + weft.frac(x) +
          weft.lerp(x, 2.0, 0.5) + weft.smoothstep(0.0, 1.0, x) + weft.float64(weft.step(u[0]))
        y[1] = weft.lerp(v[0], v[1], x).x + weft.degrees(m[0])[0][1] + weft.radians(v[0]).y +
          weft.frac(q[0]).w + weft.lerp(q[0], q[1], 0.25).z
        b[0] = weft.isnan(v[0]) or weft.isinf(m[0]) or weft.isfinite(q[0]) or weft.isnan(x)
      end }
    local y, b = weft.zeros(2, weft.float64), weft.zeros(1, weft.bool)
    weft.launch(k, 1, { weft.array({ 0.25 }, weft.float64), weft.zeros(2, weft.vec3d),
      weft.zeros(1, weft.mat22d), weft.zeros(2, weft.quatd), weft.zeros(1, weft.uint8) },
      { outputs = { y, b } })
    local r = y:totable()
    -- step(0.25) 0, nonzero 1, degrees, radians, frac 0.25, lerp 1.125, smoothstep 0.15625
    local want = 1 + 0.25 * 180 / math.pi + 0.25 * math.pi / 180 + 0.25 + 1.125 + 0.15625
    assert.is_true(math.abs(r[1] - want) < 1e-12, tostring(r[1]))
    assert.equal(0, r[2])
    assert.same({ true }, b:totable())
  end)

  it("are reported at the call with its source line and caret, in the user's weft.func too", function()
    local err = compile_error [[
local weft = ...
local mix = weft.func(function(a, b)
  return weft.lerp(a, b, 0.5)
end)
return weft.kernel{ x = weft.array(weft.float64), n = weft.array(weft.int32), function(x, n)
  x[0] = mix(x[0], n[0])
end }
]]
    assert.equal("k:3: weft.lerp(float64, int32, float64): the arguments must share one float type\n"
      .. "  return weft.lerp(a, b, 0.5)\n         ^\ncalled from k:6", err)
  end)
end)

describe("errors inside a builtin's body", function()
  -- a builtin that checks nothing: its body's error is reported at the
  -- outermost builtin call the user made (here in the user's weft.func),
  -- named as that call wrote it
  it("are reported at the user's call", function()
    local err = compile_error [[
local weft = ...
local sub = weft.func(function(a, b)
  return a - b
end)
sub._builtin = function() end
local twice = weft.func(function(a, b) return sub(a, b) * 2.0 end)
twice._builtin = function() end
local user = weft.func(function(a, b)
  return twice(a, b)
end)
return weft.kernel{ x = weft.array(weft.float64), n = weft.array(weft.int32), function(x, n)
  x[0] = user(x[0], n[0])
end }
]]
    assert.equal("k:9: twice: cannot subtract float64 and int32\n  return twice(a, b)\n"
      .. "         ^\ncalled from k:12", err)
  end)
end)

describe("errors inside the user's weft.func", function()
  it("stay at the function's line and list the calls to the kernel", function()
    local err = compile_error [[
local weft = ...
local diff = weft.func(function(a, b)
  return a - b
end)
local outer = weft.func(function(a, b) return diff(a, b) * 2.0 end)
return weft.kernel{ x = weft.array(weft.float64), n = weft.array(weft.int32), function(x, n)
  x[0] = outer(x[0], n[0])
end }
]]
    assert.equal("k:3: cannot subtract float64 and int32\n  return a - b\n           ^\n"
      .. "called from k:5\ncalled from k:7", err)
  end)

  it("list at most 8 calls, then how many more", function()
    local lines = { "local weft = ...", "local f1 = weft.func(function(a, b)", "  return a - b",
                    "end)" }
    for i = 2, 10 do
      lines[#lines + 1] = ("local f%d = weft.func(function(a, b) return f%d(a, b) end)"):format(i, i - 1)
    end
    lines[#lines + 1] = "return weft.kernel{ x = weft.array(weft.float64), n = weft.array(weft.int32), "
      .. "function(x, n)"
    lines[#lines + 1] = "  x[0] = f10(x[0], n[0])"
    lines[#lines + 1] = "end }"
    local err = compile_error(table.concat(lines, "\n"))
    local want = { "k:3: cannot subtract float64 and int32", "  return a - b", "           ^" }
    for l = 5, 12 do want[#want + 1] = "called from k:" .. l end
    want[#want + 1] = "(2 more calls)"
    assert.equal(table.concat(want, "\n"), err)
  end)

  it("leave the next compile's errors unaffected", function()
    local err = compile_error [[
local weft = ...
return weft.kernel{ x = weft.array(weft.float64), n = weft.array(weft.int32), function(x, n)
  x[0] = x[0] - n[0]
end }
]]
    assert.equal("k:3: cannot subtract float64 and int32\n  x[0] = x[0] - n[0]\n              ^", err)
  end)
end)
