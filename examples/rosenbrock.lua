-- Gradient descent on the Rosenbrock function with weft's reverse mode.
--
--   f(x, y) = (1 - x)^2 + 100 (y - x^2)^2      minimum 0 at (1, 1)
--
-- Many starting points are optimized at once: one thread per point. Each
-- step records the loss kernel on a tape, runs backward (the adjoint kernel
-- accumulates d loss / d point into points.grad) and applies an Adam update
-- in a second kernel. Run: weft examples/rosenbrock.lua  (or luajit with
-- lua/ on package.path).
local weft = require "weft"

local vec2d, f64 = weft.vec2d, weft.float64

local rosenbrock = weft.func(function(p)
  local a = 1.0 - p.x
  local b = p.y - p.x * p.x
  return a * a + 100.0 * b * b
end)

local loss_kernel = weft.kernel{ points = weft.array(vec2d), loss = weft.array(f64),
  function(points, loss)
    local i = weft.tid()
    weft.atomic_add(loss, 0, rosenbrock(points[i]))
  end }

-- Adam (beta1 = 0.9, beta2 = 0.999); t is the 1-based step.
local adam = weft.kernel{ g = weft.array(vec2d), lr = f64, t = f64,
  p = weft.array(vec2d), m = weft.array(vec2d), v = weft.array(vec2d),
  function(g, lr, t, p, m, v)
    local i = weft.tid()
    local gi = g[i]
    local mi = m[i] * 0.9 + gi * 0.1
    local vi = v[i] * 0.999 + weft.vec2d(gi.x * gi.x, gi.y * gi.y) * 0.001
    m[i], v[i] = mi, vi
    local c1 = 1.0 - weft.pow(0.9, t)
    local c2 = 1.0 - weft.pow(0.999, t)
    local step = weft.vec2d(mi.x / c1 / (weft.sqrt(vi.x / c2) + 1e-8),
                            mi.y / c1 / (weft.sqrt(vi.y / c2) + 1e-8))
    p[i] = p[i] - step * lr
  end }

local n = tonumber(arg and arg[1]) or 256
local steps = tonumber(arg and arg[2]) or 20000

-- starting points spread over [-2, 2] x [-1, 3]
local start = {}
local seed = 1
local function rnd()
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed / 2147483648
end
for i = 1, n do start[i] = { -2 + 4 * rnd(), -1 + 4 * rnd() } end

local points = weft.array(start, vec2d, { requires_grad = true })
local m, v = weft.zeros(n, vec2d), weft.zeros(n, vec2d)
local loss = weft.zeros(1, f64, { requires_grad = true })

local tape = weft.Tape()
local t0 = os.clock()
for step = 1, steps do
  loss:zero_()
  tape:reset()
  tape:record(function() weft.launch(loss_kernel, n, { points }, { outputs = { loss } }) end)
  tape:backward(loss)
  local lr = 0.05 * math.exp(-5 * step / steps)
  weft.launch(adam, n, { points.grad, lr, step }, { outputs = { points, m, v } })
  if step == 1 or step % 5000 == 0 then
    print(string.format("step %5d  mean loss %.3e", step, loss:totable()[1] / n))
  end
end

local pts = points:totable()
local worst = 0
for _, p in ipairs(pts) do
  worst = math.max(worst, math.abs(p[1] - 1), math.abs(p[2] - 1))
end
print(string.format("%d points, %d steps, %.2f s: largest distance to (1, 1) per coordinate %.2e",
                    n, steps, os.clock() - t0, worst))
local far = 0
for _, p in ipairs(pts) do
  if math.abs(p[1] - 1) > 1e-2 or math.abs(p[2] - 1) > 1e-2 then far = far + 1 end
end
print(string.format("%d of %d points farther than 1e-2 from (1, 1)", far, n))
assert(worst < 1e-2, "did not converge")
return worst
