-- Graph capture on the cpu: weft.capture_begin("cpu") / capture_end() /
-- capture_launch(g) record weft.launch calls and replay them in order;
-- CUDA capture without a driver fails cleanly.
local weft = require "weft"

-- every use of a cuda device without a driver names the function, the
-- device and the missing driver
local NODRIVER = "CUDA is not available: libcuda.so.1 could not be loaded (no NVIDIA driver)"

local axpy = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32), a = weft.float32,
  function(x, y, a)
    local i = weft.tid()
    y[i] = y[i] + a * x[i]
  end }

local affine2d = weft.kernel{ m = weft.array(weft.float32, 2), s = weft.float32,
  function(m, s)
    local i, j = weft.tid()
    m[i][j] = m[i][j] * s + weft.float32(j)
  end }

local square = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),
  function(x, y)
    local i = weft.tid()
    y[i] = x[i] * x[i]
  end }

-- End a capture a failed test may have left open.
local function reset()
  pcall(weft.capture_end)
  weft.config.mode = "release"
end

describe("cpu graph capture", function()
  after_each(reset)

  it("records launches without running them, then replays them in order", function()
    local x = weft.array({ 1, 2, 3 }, weft.float32)
    local y = weft.zeros(3)
    local m = weft.ones({ 2, 2 })
    weft.capture_begin("cpu")
    weft.launch(axpy, 3, { x, y, 2.0 })
    weft.launch(affine2d, { 2, 2 }, { m, 3.0 })
    weft.launch(axpy, 3, { x }, { outputs = { y, -1.0 } })
    local g = weft.capture_end()
    assert.are.same({ 0, 0, 0 }, y:totable()) -- nothing ran
    assert.are.same({ { 1, 1 }, { 1, 1 } }, m:totable())
    assert.are.equal(3, #g.launches)
    assert.are.equal("weft.Graph (cpu, 3 launches)", tostring(g))
    weft.capture_launch(g)
    assert.are.same({ 1, 2, 3 }, y:totable()) -- + 2x - x
    assert.are.same({ { 3, 4 }, { 3, 4 } }, m:totable())
    weft.capture_launch(g)
    assert.are.same({ 2, 4, 6 }, y:totable())
    assert.are.same({ { 9, 13 }, { 9, 13 } }, m:totable())
  end)

  it("sees the arrays' current contents at each replay; scalars are fixed", function()
    local x, y = weft.array({ 1, 1 }, weft.float32), weft.zeros(2)
    local a = 1.0
    local inputs = { x, y, a }
    weft.capture_begin()          -- the current device: the cpu
    weft.launch(axpy, 2, inputs)
    inputs[3] = 100.0             -- the recorded launch keeps its own copy
    local g = weft.capture_end()
    x:fill_(5)
    weft.capture_launch(g)
    assert.are.same({ 5, 5 }, y:totable())
  end)

  it("records launches made through a local copy of weft.launch taken before capture_begin", function()
    local launch = weft.launch
    local x, y = weft.array({ 3 }, weft.float32), weft.zeros(1)
    weft.capture_begin("cpu")
    launch(square, 1, { x, y })
    local g = weft.capture_end()
    assert.are.same({ 0 }, y:totable())
    assert.are.equal(1, #g.launches)
    launch(square, 1, { weft.array({ 1 }, weft.float32), y })
    assert.are.same({ 1 }, y:totable())
    weft.capture_launch(g)
    assert.are.same({ 9 }, y:totable())
  end)

  it("runs launches again after capture_end", function()
    local x, y = weft.array({ 2 }, weft.float32), weft.zeros(1)
    weft.capture_begin("cpu")
    weft.launch(square, 1, { x, y })
    weft.capture_end()
    assert.are.same({ 0 }, y:totable())
    weft.launch(square, 1, { x, y })
    assert.are.same({ 4 }, y:totable())
  end)

  it("reports argument errors at the launch that makes them, and keeps capturing", function()
    local x, y = weft.array({ 3 }, weft.float32), weft.zeros(1)
    weft.capture_begin("cpu")
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() weft.launch(axpy, 1, { x, y }) end)
    assert.is_false(ok)
    assert.matches("^spec/capture_spec%.lua:" .. line .. ": weft%.launch: kernel 'axpy' takes 3", err)
    local ok2, err2 = pcall(function() weft.launch(axpy, 1, { x, 2.0, y }) end)
    assert.is_false(ok2)
    assert.matches("expects", err2)
    weft.launch(square, 1, { x, y })
    local g = weft.capture_end()
    assert.are.equal(1, #g.launches)
    weft.capture_launch(g)
    assert.are.same({ 9 }, y:totable())
  end)

  it("raises kernel errors (debug mode) at the replay", function()
    local oob = weft.kernel{ x = weft.array(weft.float32), function(x)
      local i = weft.tid()
      x[i + 1] = 1.0
    end }
    local x = weft.zeros(4)
    weft.config.mode = "debug"
    weft.capture_begin("cpu")
    weft.launch(oob, 4, { x })
    local g = weft.capture_end()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() weft.capture_launch(g) end)
    assert.is_false(ok)
    assert.matches("index 4 out of bounds for axis 0 with size 4 in array 'x'", err, 1, true)
    -- the replay's line, then the kernel's line (as a direct launch reports)
    assert.matches("^spec/capture_spec%.lua:" .. line .. ": spec/capture_spec%.lua:" .. (line - 8)
                   .. ": index", err)
  end)

  it("replays into a tape, which differentiates the replayed launches", function()
    local x = weft.array({ 1, 2, 3 }, weft.float32, { requires_grad = true })
    local y = weft.zeros(3, weft.float32, { requires_grad = true })
    weft.capture_begin("cpu")
    weft.launch(square, 3, { x }, { outputs = { y } })
    local g = weft.capture_end()
    local tape = weft.Tape()
    tape:record(function() weft.capture_launch(g) end)
    tape:backward{ grads = { [y] = weft.ones(3) } }
    assert.are.same({ 1, 4, 9 }, y:totable())
    assert.are.same({ 2, 4, 6 }, x.grad:totable())
  end)

  it("refuses nested captures, ends without a capture, and foreign graphs", function()
    weft.capture_begin("cpu")
    assert.has_error(function() weft.capture_begin("cpu") end,
                     "weft.capture_begin: the cpu is already capturing")
    local g = weft.capture_end()
    assert.are.equal(0, #g.launches)
    weft.capture_launch(g) -- an empty graph replays nothing
    assert.has_error(function() weft.capture_end() end, "weft.capture_end: no capture in progress")
    assert.has_error(function() weft.capture_launch({}) end,
                     "weft.capture_launch: expected a graph from weft.capture_end")
    weft.capture_begin("cpu")
    assert.has_error(function() weft.capture_launch(g) end,
                     "weft.capture_launch: cannot replay a cpu graph while capturing")
    weft.capture_end()
  end)
end)

describe("cuda graph capture without a driver", function()
  after_each(reset)
  if weft.is_cuda_available() then
    pending("a CUDA device is present (tests/gpu/run.sh covers capture there)")
    return
  end
  it("raises NODRIVER and leaves no capture open", function()
    for _, d in ipairs { "cuda:0", "cuda:3" } do
      local ok, err = pcall(weft.capture_begin, d)
      assert.is_false(ok)
      assert.matches("spec/capture_spec.lua:%d+: weft.capture_begin: device '" .. d .. "': ", err)
      assert.matches(NODRIVER, err, 1, true)
    end
    assert.has_error(function() weft.capture_end() end, "weft.capture_end: no capture in progress")
    assert.has_error(function() weft.capture_begin("tpu") end)
  end)
  it("records no cuda launch in a cpu capture: the launch fails at once", function()
    local x, y = weft.array({ 1 }, weft.float32), weft.zeros(1)
    weft.capture_begin("cpu")
    local ok, err = pcall(weft.launch, axpy, 1, { x, y, 1.0 }, { device = "cuda:0" })
    assert.is_false(ok)
    assert.matches(NODRIVER, err, 1, true)
    assert.are.equal(0, #weft.capture_end().launches)
  end)
end)
