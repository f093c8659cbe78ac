-- Benchmark: backward / forward time of an n-body potential energy kernel.
--
--   E = -1/2 sum_i sum_{j ~= i} m_i m_j / sqrt(|p_j - p_i|^2 + eps)
--
-- forward: the energy launch; backward: its adjoint launch (d E / d p and
-- d E / d m through tape:backward). Target (issue 4): ratio <= 3.
-- Usage: weft bench/ad_nbody.lua [n] [repeats]
local weft = require "weft"

local vec3, f32 = weft.vec3, weft.float32
local A = weft.array

local energy = weft.kernel{ pos = A(vec3), mass = A(f32), e = A(f32), function(pos, mass, e)
  local i = weft.tid()
  local pi = pos[i]
  local acc = 0.0
  for j = 0, #pos - 1 do
    if j ~= i then
      local d = pos[j] - pi
      acc = acc + mass[j] / weft.sqrt(weft.dot(d, d) + 0.01)
    end
  end
  weft.atomic_add(e, 0, -0.5 * mass[i] * acc)
end }

local n = tonumber(arg and arg[1]) or 4096
local reps = tonumber(arg and arg[2]) or 10

local ps, ms = {}, {}
local s = 3
local function r()
  s = (s * 1103515245 + 12345) % 2147483648
  return s / 2147483648
end
for i = 1, n do
  ps[i] = { r() * 10, r() * 10, r() * 10 }
  ms[i] = 0.5 + r()
end
local pos = weft.array(ps, vec3, { requires_grad = true })
local mass = weft.array(ms, f32, { requires_grad = true })
local e = weft.zeros(1, f32, { requires_grad = true })

local ffi = require "ffi"
pcall(ffi.cdef, "int clock_gettime(int, void *);")
local ts = ffi.new("int64_t[2]")
local function wall()
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts[0]) + tonumber(ts[1]) * 1e-9
end

-- warm up (compiles both kernels)
local tape = weft.Tape()
tape:record(function() weft.launch(energy, n, { pos, mass }, { outputs = { e } }) end)
tape:backward(e)

-- Median times of the forward and backward launches over `reps`
-- alternating runs (both see the same machine load).
local function median(t)
  table.sort(t)
  local m = #t
  return m % 2 == 1 and t[(m + 1) / 2] or (t[m / 2] + t[m / 2 + 1]) / 2
end
local tfs, tbs = {}, {}
for r = 1, reps do
  local t0 = wall()
  e:zero_()
  weft.launch(energy, n, { pos, mass }, { outputs = { e } })
  local t1 = wall()
  tape:zero()
  tape:backward(e)
  tfs[r], tbs[r] = t1 - t0, wall() - t1
end
local tf, tb = median(tfs), median(tbs)
print(string.format("n-body energy, n = %d: forward %.3f ms, backward %.3f ms (medians), backward/forward = %.2f (target <= 3)",
                    n, tf * 1e3, tb * 1e3, tb / tf))
