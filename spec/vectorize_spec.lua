-- CPU code quality of the thread loop: lanes that read and write
-- consecutive elements use wide loads and stores, not gathers and
-- scatters (src/cpu/jit.c, "consecutive gathers and scatters": with the
-- VPlan native path on, LLVM 16 widens the thread loop of saxpy with
-- gathers; saxpy ran 4.4x slower than gcc -O3). Values are checked too,
-- including accesses whose lanes are not consecutive.
local weft = require "weft"
local A = weft.array

local function llvm_of(k, args)
  return k:source("llvm", args)
end

local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

describe("thread-loop vectorization", function()
  it("saxpy in float32 and float64 loads and stores whole vectors", function()
    for _, T in ipairs{ weft.float32, weft.float64 } do
      local k = weft.kernel{ x = A(T), y = A(T), a = T, function(x, y, a)
        local i = weft.tid()
        y[i] = a * x[i] + y[i]
      end }
      local n = 1000
      local x, y = weft.full(n, 2.0, T), weft.ones(n, T)
      local ir = llvm_of(k, { x, y, 3.0 })
      assert.is_true(count(ir, "load <%d+ x [fd]") >= 2, "no wide load in:\n" .. ir)
      assert.is_true(count(ir, "store <%d+ x [fd]") >= 1, "no wide store")
      assert.are.equal(0, count(ir, "call [^\n]*masked%.gather"), "gathers left:\n" .. ir)
      assert.are.equal(0, count(ir, "call [^\n]*masked%.scatter"), "scatters left")
      weft.launch(k, n, { x, y, 3.0 })
      local t = y:totable()
      for i = 1, n do assert.are.equal(7, t[i]) end
    end
  end)

  it("an offset index (x[i + 1]) is consecutive too, and gives the right values", function()
    local k = weft.kernel{ x = A(weft.int32), y = A(weft.int32), function(x, y)
      local i = weft.tid()
      y[i] = x[i + 1] * 2
    end }
    local n = 777
    local xs = {}
    for i = 1, n + 1 do xs[i] = i * 3 end
    local x, y = weft.array(xs, weft.int32), weft.zeros(n, weft.int32)
    weft.launch(k, n, { x, y })
    local t = y:totable()
    for i = 1, n do assert.are.equal(xs[i + 1] * 2, t[i]) end
  end)

  it("lanes that are not consecutive keep their per-lane addresses", function()
    -- reversed and strided reads: a wrong wide load would read the wrong
    -- elements
    local k = weft.kernel{ x = A(weft.float32), y = A(weft.float32), z = A(weft.float32),
      function(x, y, z)
        local i = weft.tid()
        local n = x.shape[0]
        y[i] = x[n - 1 - i]
        z[i] = x[(i * 2) % n]
      end }
    local n = 1001
    local xs = {}
    for i = 1, n do xs[i] = i end
    local x = weft.array(xs, weft.float32)
    local y, z = weft.zeros(n), weft.zeros(n)
    weft.launch(k, n, { x, y, z })
    local ty, tz = y:totable(), z:totable()
    for i = 0, n - 1 do
      assert.are.equal(xs[n - i], ty[i + 1])
      assert.are.equal(xs[(i * 2) % n + 1], tz[i + 1])
    end
  end)
end)
