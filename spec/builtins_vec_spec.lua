-- Warp's vector, matrix, quaternion, transform and spatial builtins
-- (lua/weft/stdlib.lua, src/front/builtins.c): values are checked against
-- Warp in spec/warp_port_spec.lua; here the gradients (central differences
-- in float64), the CUDA C through NVRTC and ptxas, the same CUDA C run on
-- the host (tests/cuda/shim.h) and the errors.
local weft, internal = require "weft", require "weft.internal"
local shim = dofile("tests/cuda/shim.lua")
local core = internal.core
local have_nvrtc = core.cuda_nvrtc_version and core.cuda_nvrtc_version() ~= nil

-- the values every expression below may use, from 16 inputs per thread
local PRELUDE = [[
  local i = weft.tid()
  local b = 16 * i
  local v = V(x[b], x[b + 1], x[b + 2])
  local w = V(x[b + 3], x[b + 4], x[b + 5])
  local q = weft.normalize(Q(x[b + 6], x[b + 7], x[b + 8], x[b + 9]))
  local m = M(x[b] + 3.0, x[b + 10], x[b + 11], x[b + 12], x[b + 4] - 2.0, x[b + 13], x[b + 14], x[b + 15], x[b + 1] + 4.0)
  local t = TR(w, q)
  local s = SV(v, w)
  local h = x[b + 5]
]]

local EXPRS = {
  "weft.trace(m)", "weft.ddot(m, m * 2.0)", "weft.dot(weft.skew(v) * w, v + w)", "weft.norm_l1(v)",
  "weft.norm_l2(v)", "weft.norm_huber(v)", "weft.norm_huber(v, 0.5)", "weft.norm_pseudo_huber(v, 2.0)",
  "weft.dot(weft.smooth_normalize(v), w)", "weft.min(v) + weft.max(w)", "weft.dot(v * m, w)",
  "weft.dot(2.0 / v, w)", "weft.trace(weft.matrix_from_rows(v, w, v + w) * m)",
  "weft.trace(weft.matrix_from_cols(v, w, v) * m)", "weft.ddot(weft.quat_to_matrix(q), m)",
  "weft.dot(weft.quat_from_matrix(weft.quat_to_matrix(q)), Q(1.0, 2.0, 3.0, 4.0))",
  "weft.dot(weft.quat_rpy(v[0], v[1], v[2]), q)", "weft.dot(weft.quat_to_rpy(q), w)",
  "weft.dot(weft.quat_slerp(q, weft.normalize(Q(1.0, 2.0, 3.0, 4.0)), 0.3), Q(4.0, 3.0, 2.0, 1.0))",
  "weft.dot(weft.transform_point(weft.transform_multiply(t, weft.transform_inverse(TR(v, q))), w), v)",
  "weft.dot(weft.transform_point(weft.transform_to_matrix(t), v), w)",
  "weft.dot(weft.transform_vector(weft.transform_to_matrix(t), v), w)",
  "weft.spatial_dot(weft.spatial_cross(s, SV(w, v)), weft.spatial_cross_dual(s, SV(w, w + v)))",
  "weft.dot(weft.transform_twist(t, s), s) + weft.dot(weft.transform_wrench(t, s), SV(w, w))",
  "weft.dot(weft.velocity_at_point(s, w), v) + t[2] + t[6] * h",
  "weft.dot(weft.spatial_adjoint(m, m * h) * s, s)", "weft.dot(weft.cw_mul(v, w) + weft.cw_div(v, w), v)",
  "weft.dot(weft.get_diag(m), v) + weft.dot(Q(v, h), q)", "DEC(m)", "DEC2(m)",
}

-- the decompositions return several values: a scalar of all of them
local DEC = weft.func(function(m)
  local U, s, V = weft.svd3(m)
  local Q, R = weft.qr3(m)
  local E, d = weft.eig3(m + weft.transpose(m))
  return s[0] + 2.0 * s[1] + 3.0 * s[2] + U[0][1] + V[2][0] + Q[1][2] + R[0][2] + d[0] + 0.5 * d[2] + E[1][1]
end)

-- one kernel y[i] = expr for each expression, in float type sfx
local function kernel(expr, sfx)
  local src = "local weft, V, Q, M, TR, SV, DEC, M2 = ...\n" ..
    "local DEC2 = weft.func(function(m)\n" ..
    "  local U, s, V = weft.svd2(M2(m[0][0], m[0][1], m[1][0], m[1][1]))\n" ..
    "  return s[0] + 2.0 * s[1] + U[0][1] + V[1][0]\nend)\n" ..
    "return weft.kernel{ x = weft.array(weft.float" ..
    ({ f = 32, d = 64 })[sfx] .. "), y = weft.array(weft.float" .. ({ f = 32, d = 64 })[sfx] ..
    "), function(x, y)\n" .. PRELUDE .. "  y[i] = " .. expr .. "\nend }\n"
  return assert(load(src))(weft, weft["vec3" .. sfx], weft["quat" .. sfx], weft["mat33" .. sfx],
    weft["transform" .. sfx], weft["spatial_vector" .. sfx], DEC, weft["mat22" .. sfx])
end

local function inputs(n, t)
  local xs = {}
  for k = 1, 16 * n do xs[k] = 0.3 + 0.7 * math.sin(k * 1.7) end
  return weft.array(xs, t)
end

describe("vector, quaternion, transform and spatial builtins", function()
  it("have gradients that match central differences in float64", function()
    for _, e in ipairs(EXPRS) do
      local k = kernel(e, "d")
      local x, y = inputs(2, weft.float64), weft.zeros(2, weft.float64)
      local ok, err, where = weft.check_grad(k, 2, { x }, { y })
      assert(ok, e .. ": " .. tostring(where) .. " (error " .. tostring(err) .. ")")
      local J = weft.jacobian(k, 2, { x }, { y }, 1, 1):totable()
      local any = false
      for _, row in ipairs(J) do for _, g in ipairs(row) do any = any or g ~= 0 end end
      assert(any, e .. ": the gradient is zero")
    end
  end)

  it("compile to CUDA C that NVRTC and ptxas take, forward and adjoint, float32 and float64", function()
    if not have_nvrtc then return pending("NVRTC is not available") end
    for _, sfx in ipairs { "f", "d" } do
      local k = kernel(table.concat(EXPRS, " +\n    "), sfx)
      local ptx = k:ptx("sm_80")
      assert.matches("%.entry%s+weft_adj_", ptx)
      assert.is_true(core.cuda_assemble(ptx, "sm_80") > 0)
    end
  end)

  it("run on the host through the CUDA shim with the CPU backend's results", function()
    if not shim.available() then return pending("g++ is not available") end
    local k = kernel(table.concat(EXPRS, " +\n    "), "d")
    local x = inputs(3, weft.float64)
    local yc, ys = weft.zeros(3, weft.float64), weft.zeros(3, weft.float64)
    weft.launch(k, 3, { x }, { outputs = { yc } })
    shim.run(weft, k, 3, { x, ys })
    local c, s = yc:totable(), ys:totable()
    for n = 1, 3 do
      assert(math.abs(c[n] - s[n]) <= 1e-12 * math.abs(c[n]), string.format("%.17g vs %.17g", c[n], s[n]))
    end
  end)

  it("take argmin and argmax past NaN, as Warp", function()
    local k = weft.kernel{ a = weft.array(weft.vec4), u = weft.array(weft.uint32), function(a, u)
      local i = weft.tid()
      u[2 * i] = weft.argmin(a[i])
      u[2 * i + 1] = weft.argmax(a[i])
    end }
    local nan = 0 / 0
    local a = weft.array({ { 3, 1, 1, 4 }, { nan, 2, -1, 7 }, { nan, nan, nan, nan }, { 5, nan, 9, 9 } }, weft.vec4)
    local u = weft.zeros(8, weft.uint32)
    weft.launch(k, 4, { a }, { outputs = { u } })
    assert.same({ 1, 3, 2, 3, 0, 0, 0, 2 }, u:totable())
  end)

  it("give #v as a constant and divide a scalar by a vector or matrix componentwise", function()
    local k = weft.kernel{ a = weft.array(weft.vec4d), y = weft.array(weft.float64), function(a, y)
      local v = a[0]
      local s = 0.0
      for j = 0, #v - 1 do s = s + v[j] end
      local m = 1.0 / weft.mat22d(v[0], v[1], v[2], v[3])
      y[0] = s
      y[1] = #v * 10.0 + m[1][1]
      y[2] = (weft.float64(2.0) / v)[2]
    end }
    local y = weft.zeros(3, weft.float64)
    weft.launch(k, 1, { weft.array({ { 1, 2, 4, 8 } }, weft.vec4d) }, { outputs = { y } })
    assert.same({ 15, 40.125, 0.5 }, y:totable())
  end)

  it("report wrong arguments at the user's call", function()
    for body, msg in pairs {
      ["y[0] = weft.trace(x[0])"] = "weft.trace(float64): the arguments must be matrices",
      ["y[0] = weft.matrix_from_rows(weft.vec3d(), weft.vec2d())[0][0]"] =
        "matrix_from_rows: the vectors must have one type: vec3d and vec2d",
      ["y[0] = weft.min(x[0])"] = "min of one argument expects a vector, got float64",
    } do
      local src = "local weft = ...\nreturn weft.kernel{ x = weft.array(weft.float64), " ..
        "y = weft.array(weft.float64), function(x, y)\n  " .. body .. "\nend }"
      local ok, err = pcall(function() return assert(load(src))(weft):ir() end)
      assert.is_false(ok)
      assert.equal(":3: " .. msg, err:match("^%[string [^\n]-%](:%d+: [^\n]*)"))
    end
  end)
  it("search a sorted array with lower_bound, as Warp's (end - 1 when all are below)", function()
    local k = weft.kernel{ a = weft.array(weft.float32), y = weft.array(weft.int32), function(a, y)
      local i = weft.tid()
      y[2 * i] = weft.lower_bound(a, weft.float32(i) * 0.5)
      y[2 * i + 1] = weft.lower_bound(a, 1, 4, weft.float32(i) * 0.5)
      weft.breakpoint()
    end }
    local a = weft.array({ 0, 0.5, 1, 1, 2, 2.5 }, weft.float32)
    local y = weft.zeros(14, weft.int32)
    weft.launch(k, 7, { a }, { outputs = { y } })
    assert.same({ 0, 1, 1, 1, 2, 2, 4, 3, 4, 3, 5, 3, 5, 3 }, y:totable())
  end)

end)
