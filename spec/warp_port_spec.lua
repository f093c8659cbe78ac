-- Warp's tests ported to weft (tests/warp/cases.lua): every case runs as a
-- weft kernel on the CPU and must match Warp 1.19's CPU output recorded in
-- tests/warp/ref.lua (build/venv/bin/python tests/warp/gen_ref.py rewrites
-- it). The CUDA C of these builtins is checked in builtins_vec_spec.lua,
-- with a few kernels that call them all, so these ~240 small modules stay
-- out of the suite's PTX step (ir_collect's hook is off while they run).
local weft = require "weft"
local H = dofile("tests/warp/harness.lua")

describe("Warp's tests, ported", function()
  it("match Warp's recorded CPU outputs, every case", function()
    local reg = debug.getregistry()
    local hook = reg["weft.module_hook"]
    reg["weft.module_hook"] = nil
    local ok, res, n, good, missing = pcall(H.check, weft, dofile("tests/warp/ref.lua"))
    reg["weft.module_hook"] = hook
    assert(ok, res)
    local bad = {}
    for _, r in ipairs(res) do
      if not r.ok then
        bad[#bad + 1] = string.format("%s %s: %s", r.case.id, r.case.lua, r.err and tostring(r.err):match("[^\n]*")
          or ("got " .. table.concat(r.got, " ") .. ", Warp " .. table.concat(r.want, " ")))
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
    assert.is_true(n >= 200)
    assert.equal(n, good)
    -- the one case Warp refuses: spatial_vector(w, v) of two vec3d
    -- (its codegen rejects the float64 overload); weft takes it
    assert.equal(1, missing)
  end)

  it("compare within the type's precision and tell NaN apart", function()
    assert.is_true(H.close({ 1, 0 / 0 }, { 1 + 2 ^ -20, "nan" }, "vec2f"))
    assert.is_false(H.close({ 1, 0 }, { 1, "nan" }, "vec2f"))
    assert.is_false(H.close({ 1 + 1e-9 }, { 1 }, "float64"))
    assert.is_false(H.close({ 1 }, { 1, 2 }, "float32"))
  end)
end)
