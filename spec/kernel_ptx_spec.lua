-- k:ptx(arch): one PTX module with the forward and adjoint entries.
local weft = require "weft"

describe("k:ptx", function()
  local k = weft.kernel{
    x = weft.array(weft.float32), y = weft.array(weft.float32),
    function(x, y)
      local i = weft.tid()
      y[i] = weft.sin(x[i]) * 2.0
    end,
  }

  local function entries(ptx)
    local t = {}
    for e in ptx:gmatch("%.entry%s+([%w_]+)") do t[#t + 1] = e end
    table.sort(t)
    return t
  end

  it("holds the forward and the adjoint entry for each architecture", function()
    for _, arch in ipairs { "sm_75", "sm_80", "sm_90" } do
      local ptx = k:ptx(arch)
      assert.matches("%.target%s+" .. arch, ptx)
      assert.same({ "weft_adj_k", "weft_k" }, entries(ptx))
    end
  end)

  it("leaves the adjoint out on request, and launches still work after", function()
    local k2 = weft.kernel{
      x = weft.array(weft.float64),
      function(x) local i = weft.tid(); x[i] = x[i] * 3.0 end,
    }
    assert.same({ "weft_k2" }, entries(k2:ptx("sm_80", nil, { adjoint = false })))
    local x = weft.full(3, 2.0, weft.float64)
    weft.launch(k2, 3, { x })
    assert.same({ 6, 6, 6 }, x:totable())
  end)
end)
