-- Warp's atomics beyond add, min and max: atomic_sub (atomic_add of -v in
-- the IR, so its gradient is the add's), atomic_exch, atomic_cas and the
-- bit operations atomic_and/or/xor (ops of src/ir/ir.h). Each on the CPU,
-- as CUDA C through NVRTC and ptxas, and run on the host through the CUDA
-- shim (tests/cuda/shim.h) with the same results.
local weft, internal = require "weft", require "weft.internal"
local shim = dofile("tests/cuda/shim.lua")
local core = internal.core
local have_nvrtc = core.cuda_nvrtc_version and core.cuda_nvrtc_version() ~= nil

local function all_atomics(a, f, u, v, o)
  local i = weft.tid()
  weft.atomic_sub(a, 0, i + 1)
  weft.atomic_and(a, 1, bit.bnot(bit.lshift(1, i)))
  weft.atomic_or(a, 2, bit.lshift(1, i))
  weft.atomic_xor(a, 3, bit.lshift(3, i))
  o[i] = weft.atomic_cas(a, 4, i, i + 1)
  weft.atomic_sub(f, 0, weft.float64(i) * 0.5)
  weft.atomic_exch(f, 1, weft.float64(i))
  weft.atomic_xor(u, 0, weft.uint64(i + 1))
  weft.atomic_sub(v, 0, weft.vec3(1.0, 2.0, 3.0))
  o[i + 8] = weft.int32(weft.atomic_cas(f, 2, weft.float64(0.0), weft.float64(7.0)))
end

local function arrays()
  return { weft.array({ 100, -1, 0, 0, 0 }, weft.int32), weft.zeros(3, weft.float64), weft.zeros(1, weft.uint64),
           weft.zeros(1, weft.vec3), weft.zeros(16, weft.int32) }
end

-- the state after 8 threads; o's compare-and-swap results depend on the
-- order the threads ran in, so only their multiset is fixed
local function check(a, f, u, v, o)
  assert.same({ 64, -256, 255, 257, 8 }, a:totable())
  assert.same({ -14, 7, 7 }, { f[0], f[2] == 7 and 7 or -1, f[2] })
  assert.equal(8, tonumber(u[0]))
  assert.same({ { -8, -16, -24 } }, v:totable())
  local r = o:totable()
  local seen, sevens = {}, 0
  for k = 1, 8 do seen[r[k]] = true end
  for k = 9, 16 do if r[k] == 7 then sevens = sevens + 1 end end
  for k = 0, 7 do assert.is_true(seen[k]) end -- each thread saw a distinct old value
  assert.equal(7, sevens) -- one thread swapped 0 for 7
  assert.is_true(f[1] >= 0 and f[1] <= 7 and f[1] % 1 == 0)
end

describe("atomic_sub, atomic_exch, atomic_cas, atomic_and/or/xor", function()
  local k = weft.kernel{ a = weft.array(weft.int32), f = weft.array(weft.float64), u = weft.array(weft.uint64),
                         v = weft.array(weft.vec3), o = weft.array(weft.int32), all_atomics }

  it("update the elements on the CPU", function()
    local a = arrays()
    weft.launch(k, 8, {}, { outputs = a })
    check(unpack(a))
  end)

  it("compile to CUDA C that NVRTC and ptxas take", function()
    if not have_nvrtc then return pending("NVRTC is not available") end
    local src = k:source("cuda")
    for _, fn in ipairs { "wf_atomic_exch(", "wf_atomic_cas(", "wf_atomic_and(", "wf_atomic_or(", "wf_atomic_xor(" } do
      assert.matches(fn, src, 1, true)
    end
    assert.is_true(core.cuda_assemble((k:ptx("sm_75")), "sm_75") > 0)
  end)

  it("run on the host through the CUDA shim with the same results", function()
    if not shim.available() then return pending("g++ is not available") end
    local a = arrays()
    shim.run(weft, k, 8, a)
    check(unpack(a))
  end)

  it("give atomic_sub the negated gradient of atomic_add", function()
    local ks = weft.kernel{ x = weft.array(weft.float64), y = weft.array(weft.float64), function(x, y)
      local i = weft.tid()
      weft.atomic_sub(y, 0, x[i] * x[i])
    end }
    local x = weft.array({ 1, 2, 3 }, weft.float64, { requires_grad = true })
    local y = weft.zeros(1, weft.float64, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(ks, 3, { x }, { outputs = { y } }) end)
    tape:backward(y)
    assert.same({ -14 }, y:totable())
    assert.same({ -2, -4, -6 }, x.grad:totable())
  end)

  it("refuse the types Warp refuses, at the call", function()
    for body, msg in pairs {
      ["weft.atomic_and(f, 0, 1.0)"] = "atomic_and needs an array of 32- or 64-bit integers " ..
        "(or vectors of them), got array<f32,1>",
      ["weft.atomic_cas(v, 0, weft.vec3(), weft.vec3())"] =
        "atomic_cas needs an array of 32- or 64-bit numbers, got array<vec3f,1>",
      ["weft.atomic_exch(h, 0, 1)"] = "atomic_exch needs an array of 32- or 64-bit numbers " ..
        "(or vectors of them), got array<i16,1>",
      ["weft.atomic_cas(f, 0, 1.0)"] = "atomic_cas expects (array, index..., compare, value), got 3 arguments",
    } do
      local src = "local weft = ...\nreturn weft.kernel{ f = weft.array(weft.float32), v = weft.array(weft.vec3), " ..
        "h = weft.array(weft.int16), function(f, v, h)\n  " .. body .. "\nend }"
      local ok, err = pcall(function() return assert(load(src))(weft):ir() end)
      assert.is_false(ok)
      assert.equal(":3: " .. msg, err:match("^%[string [^\n]-%](:%d+: [^\n]*)"))
    end
  end)
end)
