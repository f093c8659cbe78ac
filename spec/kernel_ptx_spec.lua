-- k:ptx(arch): one PTX module with the forward and adjoint entries.
local weft, internal = require "weft", require "weft.internal" -- internal: the parts' private table

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

  it("compiles at the configured fast-compile level; full optimization is one option away", function()
    local k3 = weft.kernel{
      x = weft.array(weft.float32), n = weft.int32,
      function(x, n)
        local i = weft.tid()
        local acc = 0.0
        for j = 1, n do acc = acc + weft.sin(x[i] * weft.float32(j)) end
        x[i] = acc
      end,
    }
    assert.equal("min", weft.config.cuda_fast_compile)
    local fast = k3:ptx("sm_80", nil, { adjoint = false })
    local full = k3:ptx("sm_80", nil, { adjoint = false, fast_compile = "0" })
    local full2 = k3:ptx("sm_80", nil, { adjoint = false, fast_compile = false })
    assert.equal(full, full2)
    -- both are complete modules; NVVM's full pipeline gives different code
    for _, p in ipairs { fast, full } do assert.same({ "weft_k3" }, entries(p)) end
    assert.are_not.equal(fast, full)
    local old = weft.config.cuda_fast_compile
    weft.config.cuda_fast_compile = "0"
    local ok, via_config = pcall(k3.ptx, k3, "sm_80", nil, { adjoint = false })
    weft.config.cuda_fast_compile = old
    assert.is_true(ok)
    assert.equal(full, via_config)
  end)

  it("release mode's bounds checks compile with NVRTC and assemble with ptxas", function()
    -- tid ranges, offsets, 2-D views, loops up and down, atomics, a computed
    -- index: the launch checks, the range checks and the per-access ones
    local kb = weft.kernel{
      x = weft.array(weft.float32), m = weft.array(weft.float32, 2), h = weft.array(weft.int32),
      n = weft.int64,
      function(x, m, h, n)
        local i, j = weft.tid()
        local row = m[i]
        row[j] = x[i + 1] + x[i - 1 + 1]
        local acc = 0.0
        for k = 0, #x - 1 do acc = acc + x[k] end
        for k = #x - 2, 0, -1 do acc = acc + x[k + 1] end
        for k = weft.int64(0), n do acc = acc + x[weft.int32(k)] end
        weft.atomic_add(h, weft.int32(acc) % 7, 1)
        m[j][i] = acc
      end,
    }
    local src = internal.core.cuda_source(kb:_module(), { checks = true, names = internal.param_names(kb) })
    assert.matches("wf_range(wf_e, 1LL, wf_d.dim[0] - 1 + 1LL", src, 1, true)
    assert.matches("if (wf_oob(wf_e, ", src, 1, true)
    for _, arch in ipairs { "sm_75", "sm_90" } do
      local ptx = internal.core.cuda_ptx(kb:_module(), arch:gsub("sm_", "compute_"),
                                      { checks = true, names = internal.param_names(kb) })
      assert.same({ "weft_kb" }, entries(ptx))
      assert.is_true(internal.core.cuda_assemble(ptx, arch) > 0)
    end
  end)

  it("names bad arguments", function()
    assert.has_error(function() k:ptx(80) end, 'k:ptx: arch must be a string such as "sm_80", got number')
    assert.has_error(function() k:ptx("sm_80", 5) end, "k:ptx: argtypes must be a table of types, got number")
    assert.has_error(function() k:ptx("sm_80", nil, true) end, "k:ptx: opts must be a table, got boolean")
  end)

  it("rejects a bad fast-compile level with the accepted ones", function()
    assert.has_error(function() k:ptx("sm_80", nil, { fast_compile = "fastest" }) end,
      "weft: bad fast-compile level 'fastest' (expected 0, min, mid or max)")
    local ok, err = pcall(k.ptx, k, "sm_80", nil, { fast_compile = {} })
    assert.is_false(ok)
    assert.matches('fast_compile must be "min", "mid", "max" or "0", got a table', err, 1, true)
  end)
end)
