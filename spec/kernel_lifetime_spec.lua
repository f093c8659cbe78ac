-- Kernel lifetime: a kernel object that is no longer reachable is collected,
-- and the JIT code compiled for it is removed from the JIT (weft issue 10,
-- item 14: every launched kernel leaked about 15 KB and its code).
local weft = require "weft"

-- Resident set size in MB, from /proc/self/statm (pages).
local function rss_mb()
  local f = assert(io.open("/proc/self/statm"))
  local _, res = f:read("*n", "*n")
  f:close()
  return res * 4096 / 2 ^ 20
end

local function full_gc()
  collectgarbage()
  collectgarbage()
end

-- True when the object in the weak probe has been collected. LuaJIT
-- traces keep the closures and tables they were recorded with as
-- constants until they are flushed; inside the whole suite, loops of the
-- launch and tape code are already near their hot count, so a trace may be
-- recorded during the test and pin its kernel (seen once in a full run):
-- flush the traces first, so only weft's own references count.
local function collected(probe)
  jit.flush()
  full_gc()
  return next(probe) == nil
end

local A = weft.array(weft.float32)

describe("kernel lifetime", function()
  it("4,000 kernels defined, launched and dropped in a loop keep RSS bounded", function()
    local x = weft.zeros(16)
    full_gc()
    -- codes other spec files still hold (busted keeps their kernels alive)
    local live0 = weft.stats().code_live
    -- s takes 40 values, so the loop compiles (or loads from the disk cache)
    -- 40 different codes; once a kernel is dropped and collected its code
    -- leaves the JIT, and the next kernel with the same s loads it again
    local function make(s)
      return weft.kernel{ x = A, function(x)
        local j = weft.tid()
        x[j] = x[j] + s
      end }
    end
    local function round(from, to)
      for i = from, to do
        local k = make(i % 40)
        weft.launch(k, 16, { x })
        if i % 100 == 0 then full_gc() end
      end
    end
    round(1, 1000) -- warm up: compile the 40 codes, grow the heaps once
    full_gc()
    local before, s0 = rss_mb(), weft.stats()
    local peak = before
    for r = 1, 3 do
      round(1000 * r + 1, 1000 * (r + 1))
      full_gc()
      peak = math.max(peak, rss_mb())
    end
    -- 9,000 kernels at ~15 KB each plus their code were ~140 MB before
    -- kernels were collected: 3,000 would be ~45 MB
    assert.is_true(peak - before < 25, string.format("RSS grew by %.1f MB", peak - before))
    local s1 = weft.stats()
    -- the sum of (i % 40) over i = 1..4000, added to every element
    assert.are.equal(78000, x[3])
    -- the freed path ran: code left the JIT and was loaded again
    -- (each of the 40 codes is freed at least once per 100 kernels)
    assert.is_true(s1.code_freed - s0.code_freed > 1000,
                   string.format("only %d codes freed", s1.code_freed - s0.code_freed))
    assert.is_true(s1.disk_hits + s1.compiles - s0.disk_hits - s0.compiles > 1000)
    assert.is_true(s1.code_live - live0 <= 60,
                   string.format("%d codes live (%d before)", s1.code_live, live0))
  end)

  -- (each test makes its kernel in a function of its own: a dead local of
  -- the running function can still sit in a stack slot the GC scans)
  it("a launched kernel is collected once unreachable", function()
    local probe = setmetatable({}, { __mode = "k" })
    local function use()
      local k = weft.kernel{ x = A, function(x) x[weft.tid()] = 1.0 end }
      local x = weft.zeros(4)
      weft.launch(k, 4, { x })
      weft.config.mode = "debug" -- a second code for the same kernel
      local ok, err = pcall(weft.launch, k, 4, { x })
      weft.config.mode = "release"
      assert(ok, err)
      probe[k] = true
    end
    use()
    assert.is_true(collected(probe))
  end)

  it("generic kernels, adjoint launches, tapes and cpu graphs let go of kernels", function()
    local probe = setmetatable({}, { __mode = "k" })
    local function use()
      local k = weft.kernel{ function(x, y)
        local i = weft.tid()
        y[i] = x[i] * x[i]
      end }
      local x = weft.array({ 1, 2, 3 }, weft.float32, { requires_grad = true })
      local y = weft.zeros(3, weft.float32, { requires_grad = true })
      local tape = weft.Tape()
      tape:record(function() weft.launch(k, 3, { x }, { outputs = { y } }) end)
      tape:backward{ grads = { [y] = weft.ones(3) } }
      assert.are.same({ 2, 4, 6 }, x.grad:totable())
      weft.capture_begin("cpu")
      weft.launch(k, 3, { x }, { outputs = { y } })
      local g = weft.capture_end()
      weft.capture_launch(g)
      probe[k] = true
    end
    use()
    assert.is_true(collected(probe))
  end)

  it("kernels sharing one code keep it while any of them lives", function()
    local function make()
      return weft.kernel{ x = A, function(x)
        local i = weft.tid()
        x[i] = x[i] + 7.0
      end }
    end
    local x = weft.zeros(8)
    local ks = { make(), make() }
    weft.launch(ks[1], 8, { x })
    weft.launch(ks[2], 8, { x })
    full_gc()
    local live = weft.stats().code_live
    ks[1] = nil
    full_gc()
    assert.are.equal(live, weft.stats().code_live) -- ks[2] still holds the code
    weft.launch(ks[2], 8, { x })
    assert.are.equal(21, x[7])
    ks[2] = nil
    full_gc()
    assert.are.equal(live - 1, weft.stats().code_live)
    -- the same kernel again: its code comes back (disk cache or compile)
    local k3 = make()
    weft.launch(k3, 8, { x })
    assert.are.equal(28, x[7])
  end)
end)
