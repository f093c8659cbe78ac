-- Warp's random builtins (src/front/builtins.c): randn, randu, randi(state,
-- lo, hi) and the sample_* functions draw the same sequences as Warp 1.19
-- on the CPU (spec/helpers/warp_rand_ref.lua, from warp_rand_ref.py):
-- integers bit for bit, floats within an ulp (libm's sin, cos and acos
-- may round differently from Warp's). Their CUDA C goes through the suite.
local weft = require "weft"
local ref = dofile("spec/helpers/warp_rand_ref.lua")

describe("random builtins", function()
  it("draw Warp's sequences", function()
    local k = weft.kernel{ o = weft.array(weft.float32), u = weft.array(weft.uint32), n = weft.array(weft.int32), function(o, u, n)
        local i = weft.tid()
        local s = weft.rand_init(42, i)
        o[i*30+0] = weft.randn(s)
        local v2 = weft.sample_triangle(s); o[i*30+1] = v2[0]; o[i*30+2] = v2[1]
        v2 = weft.sample_unit_ring(s); o[i*30+3] = v2[0]; o[i*30+4] = v2[1]
        v2 = weft.sample_unit_disk(s); o[i*30+5] = v2[0]; o[i*30+6] = v2[1]
        local v3 = weft.sample_unit_sphere_surface(s); o[i*30+7] = v3[0]; o[i*30+8] = v3[1]; o[i*30+9] = v3[2]
        v3 = weft.sample_unit_sphere(s); o[i*30+10] = v3[0]; o[i*30+11] = v3[1]; o[i*30+12] = v3[2]
        v3 = weft.sample_unit_hemisphere_surface(s); o[i*30+13] = v3[0]; o[i*30+14] = v3[1]; o[i*30+15] = v3[2]
        v3 = weft.sample_unit_hemisphere(s); o[i*30+16] = v3[0]; o[i*30+17] = v3[1]; o[i*30+18] = v3[2]
        v2 = weft.sample_unit_square(s); o[i*30+19] = v2[0]; o[i*30+20] = v2[1]
        v3 = weft.sample_unit_cube(s); o[i*30+21] = v3[0]; o[i*30+22] = v3[2]
        o[i*30+25] = weft.randn(s)
        u[i*3+0] = weft.randu(s); u[i*3+1] = weft.randu(s, weft.uint32(5), weft.uint32(17)); u[i*3+2] = weft.randu(s)
        n[i*2+0] = weft.randi(s, -7, 30); n[i*2+1] = weft.randi(s)
    end }
    local o, u, n = weft.zeros(90), weft.zeros(9, weft.uint32), weft.zeros(6, weft.int32)
    weft.launch(k, 3, {}, {outputs={o, u, n}})
    local O, U, N = o:totable(), u:totable(), n:totable()
    assert.same(ref.u, U)
    assert.same(ref.n, N)
    local exact = 0
    for j = 1, 90 do
      assert(math.abs(O[j] - ref.o[j]) <= 2 ^ -23 * math.max(1, math.abs(ref.o[j])),
        string.format("%d: %.9g, Warp %.9g", j, O[j], ref.o[j]))
      if O[j] == ref.o[j] then exact = exact + 1 end
    end
    assert.is_true(exact >= 80)
  end)

  it("report a state that is not a local variable at the call", function()
    local ok, err = pcall(function()
      return weft.kernel{ o = weft.array(weft.float32), function(o)
        o[0] = weft.randn(weft.rand_init(1))
      end }:ir()
    end)
    assert.is_false(ok)
    assert.matches("builtins_rand_spec.lua:%d+: randn: the state must be a local variable", err)
  end)
  it("seed rand_init(seed) as Warp (pcg(seed)), and expose a state's bits as uint32", function()
    local k = weft.kernel{ u = weft.array(weft.uint32), function(u)
      u[0] = weft.uint32(weft.rand_init(42))
      u[1] = weft.uint32(weft.rand_init(42, 0))
      local s = weft.rand_init(-7)
      u[2] = weft.uint32(weft.randi(s))
    end }
    local u = weft.zeros(3, weft.uint32)
    weft.launch(k, 1, {}, { outputs = { u } })
    -- Warp 1.19 on the CPU: wp.uint32(wp.rand_init(42)), (42, 0), randi of rand_init(-7)
    assert.same({ 1223963391, 2041448361 }, { u[0], u[1] })
    assert.equal(ref.seed7, u[2])
  end)

  it("give noise, pnoise and curlnoise gradients that match central differences", function()
    for _, body in ipairs {
      "y[i] = weft.noise(s, x[i] * 1.7)",
      "y[i] = weft.noise(s, weft.vec2(x[i], x[i] * 0.5)) + weft.noise(s, weft.vec3(x[i], 0.25, x[i] * 2.0))",
      "y[i] = weft.noise(s, weft.vec4(x[i], 0.25, -x[i], 1.5)) + weft.pnoise(s, x[i] * 3.0, 4)",
      "y[i] = weft.pnoise(s, weft.vec3(x[i], 0.25, x[i] * 2.0), 3, 2, 5) + weft.curlnoise(s, weft.vec2(x[i], 0.3), 2, 2.0, 0.5)[1]",
      "y[i] = weft.curlnoise(s, weft.vec3(x[i], 0.3, x[i] * 0.7), 2, 2.0, 0.5)[1]",
      "y[i] = weft.curlnoise(s, weft.vec4(x[i], 0.3, 0.1, x[i] * 0.7), 2, 2.0, 0.5)[2]",
    } do
      local src = "local weft = ...\nreturn weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32), " ..
        "function(x, y)\n  local i = weft.tid()\n  local s = weft.rand_init(9)\n  " .. body .. "\nend }"
      local k = assert(load(src))(weft)
      local x, y = weft.array({ 0.13, 0.61, 1.37, -0.82 }, weft.float32), weft.zeros(4, weft.float32)
      local ok, err, where = weft.check_grad(k, 4, { x }, { y }, { eps = 1e-3, tol = 2e-2 })
      assert(ok, body .. ": " .. tostring(where) .. " (error " .. tostring(err) .. ")")
    end
  end)

  it("compile noise, pnoise, curlnoise and poisson to CUDA C that NVRTC and ptxas take", function()
    local internal = require "weft.internal"
    local core = internal.core
    if not (core.cuda_nvrtc_version and core.cuda_nvrtc_version()) then return pending("NVRTC is not available") end
    local k = weft.kernel{ x = weft.array(weft.vec4), y = weft.array(weft.float32), function(x, y)
      local i = weft.tid()
      local s = weft.rand_init(3, i)
      local p = x[i]
      y[i] = weft.noise(s, p[0]) + weft.noise(s, weft.vec2(p[0], p[1])) + weft.noise(s, weft.vec3(p[0], p[1], p[2])) +
        weft.noise(s, p) + weft.pnoise(s, p[0], 3) + weft.pnoise(s, weft.vec2(p[0], p[1]), 3, 4) +
        weft.pnoise(s, weft.vec3(p[0], p[1], p[2]), 3, 4, 5) + weft.curlnoise(s, weft.vec2(p[0], p[1]), 2, 2.0, 0.5)[0] +
        weft.float32(weft.poisson(s, 4.0 + p[0])) + weft.float32(weft.poisson(s, 40.0 + p[1])) +
        weft.curlnoise(s, weft.vec3(p[0], p[1], p[2]), 2, 2.0, 0.5)[2] + weft.curlnoise(s, p, 2, 2.0, 0.5)[1] +
        weft.pnoise(s, p, 2, 3, 4, 5)
    end }
    local ptx = k:ptx("sm_80")
    assert.matches("%.entry%s+weft_adj_", ptx)
    assert.is_true(core.cuda_assemble(ptx, "sm_80") > 0)
  end)

  it("draw poisson and sample_cdf as Warp, advancing the caller's state", function()
    local k = weft.kernel{ c = weft.array(weft.float32), u = weft.array(weft.uint32), y = weft.array(weft.int32),
      function(c, u, y)
        local i = weft.tid()
        local s = weft.rand_init(42, i)
        u[4 * i] = weft.poisson(s, 3.5)
        u[4 * i + 1] = weft.poisson(s, 25.0)
        u[4 * i + 2] = weft.poisson(s, 0.0)
        u[4 * i + 3] = weft.uint32(weft.randi(s)) -- the state after the draws
        y[i] = weft.sample_cdf(s, c)
      end }
    local u, y = weft.zeros(12, weft.uint32), weft.zeros(3, weft.int32)
    weft.launch(k, 3, { weft.array({ 0.1, 0.3, 0.7, 1.0 }, weft.float32) }, { outputs = { u, y } })
    assert.same(ref.poisson, u:totable())
    assert.same(ref.cdf, y:totable())
    local ok, err = pcall(function()
      return weft.kernel{ o = weft.array(weft.uint32), function(o)
        o[0] = weft.poisson(weft.rand_init(1), 2.0)
      end }:ir()
    end)
    assert.is_false(ok)
    assert.matches("builtins_rand_spec.lua:%d+: poisson: the state must be a local variable", err)
  end)

end)
