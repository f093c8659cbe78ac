-- weft.func with default arguments and keyword calls (weft issue 12,
-- "Language"). A definition names defaults beside its types:
--   weft.func{ x = weft.float32, k = weft.float32, defaults = { k = 2.0 },
--              function(x, k) ... end }
-- A call may leave out trailing parameters that have defaults, or pass a
-- table of names: f{ x = a, k = b } (any order, defaults for the rest).
-- Both work in kernels and on the host.
local weft = require "weft"

local spring = weft.func{ x = weft.float32, k = weft.float32, rest = weft.float32,
  defaults = { k = 2.0, rest = 1.0 },
  function(x, k, rest) return k * (x - rest) end }

-- a generic parameter's float default takes the float type of the other arguments
local scale = weft.func{ defaults = { s = 3.0 }, function(v, s) return v * s end }

describe("weft.func defaults", function()
  it("fill the parameters a call leaves out, by position or by name", function()
    local k = weft.kernel{ x = weft.array(weft.float32), out = weft.array(weft.float32, 2),
      function(x, out)
        local i = weft.tid()
        out[i][0] = spring(x[i])
        out[i][1] = spring(x[i], 3.0)
        out[i][2] = spring(x[i], 3.0, 0.5)
        out[i][3] = spring{ x = x[i], rest = 2.0 }
        out[i][4] = spring{ rest = 0.0, x = x[i], k = 10.0 }
        out[i][5] = scale(x[i])
      end }
    local x = weft.array({ 3, 5 }, weft.float32)
    local out = weft.zeros({ 2, 6 })
    weft.launch(k, 2, { x, out })
    assert.same({ { 4, 6, 7.5, 2, 30, 9 }, { 8, 12, 13.5, 6, 50, 15 } }, out:totable())
  end)

  it("take host values of weft types", function()
    local offset = weft.func{ p = weft.vec3, d = weft.vec3, defaults = { d = weft.vec3(1, 2, 3) },
      function(p, d) return p + d end }
    local k = weft.kernel{ out = weft.array(weft.vec3), function(out)
      out[0] = offset(weft.vec3(1, 1, 1))
    end }
    local out = weft.zeros(1, weft.vec3)
    weft.launch(k, 1, { out })
    assert.same({ 2, 3, 4 }, out[0]:totable())
  end)

  it("work on the host too", function()
    assert.equal(4, spring(3))
    assert.equal(6, spring(3, 3))
    assert.equal(2, spring{ x = 3, rest = 2 })
    assert.has_error(function() spring{ x = 3, z = 1 } end, "weft.func spring: no parameter 'z'")
  end)

  it("are checked where they are declared", function()
    assert.has_error(function()
      weft.func{ defaults = { z = 1 }, function(x) return x end }
    end, "weft.func: default for 'z', which is not a parameter of the function")
    assert.has_error(function()
      weft.func{ defaults = { x = "a" }, function(x) return x end }
    end, "weft.func: the default for 'x' must be a number, a boolean or a value of a weft type, got string")
  end)
end)
