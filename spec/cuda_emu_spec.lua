-- The emulated CUDA device (tests/cuda/emu, run through scripts/cuda-emu):
-- weft's driver code against it, with the emulator's counters checked
-- (misuse, leaks), injected faults turned into clear errors that leave weft
-- working, stream ordering that a missing wait gets wrong, and the host
-- dereference of a device pointer caught. Pending without the emulator.
local weft = require "weft"
local ffi = require "ffi"

local emu_path = os.getenv("WEFT_CUDA_EMU_LIB")
local emu = emu_path and weft.is_cuda_available() and ffi.load(emu_path)

ffi.cdef [[
typedef struct wf_cuemu_counts {
  int64_t allocs_live, bytes_live, leaks, misuse, launches, host_compiles, faults;
} wf_cuemu_counts;
int wf_cuemu_stats(wf_cuemu_counts *out);
const char *wf_cuemu_last(void);
int setenv(const char *name, const char *value, int overwrite);
int unsetenv(const char *name);
]]

local function stats()
  local s = ffi.new("wf_cuemu_counts")
  emu.wf_cuemu_stats(s)
  return s
end

-- The error f raises, and the line it names.
local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

local here = "spec/cuda_emu_spec.lua:"

describe("the emulated CUDA device", function()
  if not emu then
    pending("not running under scripts/cuda-emu")
    return
  end
  local saxpy = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32), a = weft.float32,
    function(x, y, a)
      local i = weft.tid()
      y[i] = a * x[i] + y[i]
    end }
  local copyk = weft.kernel{ src = weft.array(weft.float32), dst = weft.array(weft.float32),
    function(src, dst)
      local i = weft.tid()
      dst[i] = src[i]
    end }
  local D = { device = "cuda:0" }

  it("is cuda:0 and says it is emulated", function()
    assert.are.same({ "cpu", "cuda:0" }, weft.devices())
    assert.matches("emulated", weft.cuda_device_info("cuda:0").name)
    assert.are.equal("sm_86", weft.cuda_device_info("cuda:0").arch)
    assert.matches("available %(cuda:0: weft emulated CUDA device 0", weft.info().cuda_driver)
  end)

  it("runs launches, copies and fills of every pattern without a misuse", function()
    local m0 = stats().misuse
    local x = weft.array({ 1, 2, 3, 4 }, weft.float32, D)
    local y = weft.full(4, 10, weft.float32, D)
    weft.launch(saxpy, 4, { x, y, 2 }, D)
    weft.synchronize()
    assert.are.same({ 12, 14, 16, 18 }, y:totable())
    -- fills: one byte, 16-bit, 32-bit and wider element patterns
    assert.are.same({ 0, 0, 0 }, weft.zeros(3, weft.int8, D):totable())
    assert.are.same({ 7, 7, 7 }, weft.full(3, 7, weft.int16, D):totable())
    assert.are.same({ 1.5, 1.5 }, weft.full(2, 1.5, weft.float64, D):totable())
    local v = weft.full(3, weft.vec3(1, 2, 3), weft.vec3, D):totable()
    assert.are.same({ { 1, 2, 3 }, { 1, 2, 3 }, { 1, 2, 3 } }, v)
    local h = weft.full(5, weft.vec3h(1, 2, 3), weft.vec3h, D):totable()
    assert.are.same({ 1, 2, 3 }, h[5])
    -- device to device, and a view
    local c = weft.clone(y)
    assert.are.same({ 12, 14, 16, 18 }, c:totable())
    local m = weft.array({ { 1, 2 }, { 3, 4 } }, weft.float32, D)
    assert.are.same({ 3, 4 }, m[1]:totable())
    assert.are.equal(m0, stats().misuse, ffi.string(emu.wf_cuemu_last()))
  end)

  it("launches on the current device when opts.device is not given", function()
    local x = weft.array({ 1, 2 }, weft.float32, D)
    local y = weft.zeros(2, weft.float32, D)
    weft.set_device("cuda:0")
    local ok, err = pcall(function()
      weft.launch(saxpy, 2, { x, y, 3 })
      weft.launch(saxpy, 2, { x, y, 1 }, { outputs = {} })
    end)
    weft.set_device("cpu")
    assert(ok, err)
    weft.synchronize()
    assert.are.same({ 4, 8 }, y:totable())
  end)

  it("ScopedStream makes its device current too, as Warp's does", function()
    local x = weft.array({ 1, 2 }, weft.float32, D)
    local y = weft.zeros(2, weft.float32, D)
    local s = weft.Stream("cuda:0")
    local inside = weft.ScopedStream(s, function()
      weft.launch(saxpy, 2, { x, y, 2 }) -- on cuda:0, on s
      return weft.get_device()
    end)
    assert.are.equal("cuda:0", inside)
    assert.are.equal("cpu", weft.get_device())
    s:synchronize()
    assert.are.same({ 2, 4 }, y:totable())
  end)

  it("times a stream with events; elapsed time waits for the end event", function()
    local x = weft.array({ 1, 2 }, weft.float32, D)
    local y = weft.zeros(2, weft.float32, D)
    local s = weft.Stream("cuda:0")
    local t0 = weft.Event("cuda:0", { enable_timing = true })
    local t1 = weft.Event("cuda:0", { enable_timing = true })
    weft.launch(saxpy, 2, { x, y, 1 }, { stream = s }) -- loaded before the timing
    s:synchronize()
    s:record_event(t0)
    ffi.C.setenv("WEFT_CUDA_EMU_DELAY_MS", "400", 1) -- long: the host may be slow to ask
    weft.launch(saxpy, 2, { x, y, 1 }, { stream = s })
    ffi.C.unsetenv("WEFT_CUDA_EMU_DELAY_MS")
    s:record_event(t1)
    local e = err_of(weft.get_event_elapsed_time, t0, t1, false) -- not waited for: refused
    assert.matches("CUDA_ERROR_NOT_READY", e, 1, true)
    local ms = weft.get_event_elapsed_time(t0, t1)
    assert.is_true(ms >= 390, tostring(ms))
    assert.is_true(weft.get_event_elapsed_time(t0, t1) == ms)
  end)

  it("frees what it allocates", function()
    collectgarbage()
    collectgarbage()
    local before = stats().allocs_live
    do
      local a = weft.zeros(1000, weft.float32, D)
      local b = weft.clone(a)
      assert.are.equal(before + 2, stats().allocs_live)
      a, b = nil, nil -- luacheck: ignore
    end
    collectgarbage()
    collectgarbage()
    assert.are.equal(before, stats().allocs_live)
  end)

  it("out of memory at an allocation: a clear error, nothing leaks, the next one works", function()
    local live = stats().allocs_live
    ffi.C.setenv("WEFT_CUDA_EMU_FAIL_ALLOC", "1", 1)
    local line = debug.getinfo(1, "l").currentline + 1
    local e = err_of(function() local a = weft.zeros(64, weft.float32, D); return a end)
    ffi.C.unsetenv("WEFT_CUDA_EMU_FAIL_ALLOC")
    assert.are.equal(here .. line .. ": weft.zeros: cannot allocate 256 bytes on cuda:0: "
                     .. "CUDA_ERROR_OUT_OF_MEMORY: out of memory", e)
    assert.are.equal(live, stats().allocs_live)
    local a = weft.full(4, 3, weft.float32, D)
    assert.are.same({ 3, 3, 3, 3 }, a:totable())
  end)

  it("a failing launch: a clear error at the launch, and the next launch works", function()
    local x = weft.array({ 1, 2 }, weft.float32, D)
    local y = weft.zeros(2, weft.float32, D)
    weft.launch(saxpy, 2, { x, y, 1 }, D) -- loaded
    ffi.C.setenv("WEFT_CUDA_EMU_FAIL_LAUNCH", "1", 1)
    local line = debug.getinfo(1, "l").currentline + 1
    local e = err_of(function() weft.launch(saxpy, 2, { x, y, 1 }, D) end)
    ffi.C.unsetenv("WEFT_CUDA_EMU_FAIL_LAUNCH")
    assert.are.equal(here .. line .. ": weft: CUDA kernel launch failed: "
                     .. "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested for launch", e)
    weft.launch(saxpy, 2, { x, y, 1 }, D)
    weft.synchronize()
    assert.are.same({ 2, 4 }, y:totable())
  end)

  it("a failing module load: a clear error, and the kernel loads at the next launch", function()
    local k = weft.kernel{ y = weft.array(weft.float32), function(y) y[weft.tid()] = 5.0 end }
    local y = weft.zeros(3, weft.float32, D)
    ffi.C.setenv("WEFT_CUDA_EMU_FAIL_MODULE", "1", 1)
    local line = debug.getinfo(1, "l").currentline + 1
    local e = err_of(function() weft.launch(k, 3, { y }, D) end)
    ffi.C.unsetenv("WEFT_CUDA_EMU_FAIL_MODULE")
    assert.are.equal(here .. line .. ": weft: CUDA module load failed: "
                     .. "CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed", e)
    weft.launch(k, 3, { y }, D)
    weft.synchronize()
    assert.are.same({ 5, 5, 5 }, y:totable())
  end)

  it("orders two streams only through an event: without the wait the data is stale", function()
    local n = 64
    local function run(wait)
      local src = weft.zeros(n, weft.float32, D)
      local dst = weft.zeros(n, weft.float32, D)
      local ones = weft.ones(n, weft.float32, D)
      local s1, s2 = weft.Stream("cuda:0"), weft.Stream("cuda:0")
      weft.launch(copyk, n, { src, dst }, { stream = s2 }) -- loaded before the race
      s2:synchronize()
      ffi.C.setenv("WEFT_CUDA_EMU_DELAY_MS", "600", 1) -- the kernel on s1 starts late (a loaded machine too)
      weft.launch(saxpy, n, { ones, src, 1 }, { stream = s1 }) -- src = 1
      if wait then s2:wait_stream(s1) end
      ffi.C.setenv("WEFT_CUDA_EMU_DELAY_MS", "0", 1)
      weft.launch(copyk, n, { src, dst }, { stream = s2 }) -- dst = src
      s1:synchronize()
      s2:synchronize()
      return dst:totable()
    end
    local ok, stale = pcall(run, false)
    ffi.C.unsetenv("WEFT_CUDA_EMU_DELAY_MS")
    assert(ok, stale)
    assert.are.equal(0, stale[1])
    assert.are.equal(1, run(true)[n])
  end)

  it("captures a kernel's first launch, and debug-mode launches, without allocating", function()
    local m0 = stats().misuse
    local k = weft.kernel{ y = weft.array(weft.float32), function(y)
      local i = weft.tid()
      y[i] = y[i] + 1.0
    end }
    local y = weft.zeros(3, weft.float32, D)
    weft.capture_begin("cuda:0")
    weft.launch(k, 3, { y }, D) -- compiles and loads inside the capture
    local g = weft.capture_end()
    weft.capture_launch(g)
    weft.capture_launch(g)
    weft.synchronize()
    assert.are.same({ 2, 2, 2 }, y:totable())
    weft.config.mode = "debug"
    local ok, err = pcall(function()
      weft.capture_begin("cuda:0")
      weft.launch(k, 4, { y }, D) -- out of bounds: reported at the synchronize after the replay
      local g2 = weft.capture_end()
      weft.capture_launch(g2)
      weft.synchronize()
    end)
    weft.config.mode = "release"
    assert.is_false(ok)
    assert.matches("index 3 out of bounds for axis 0 with size 3 in array 'y'", err, 1, true)
    assert.are.equal(m0, stats().misuse, ffi.string(emu.wf_cuemu_last()))
  end)

  it("a collection during a capture does not spoil it (frees wait for its end)", function()
    collectgarbage()
    collectgarbage()
    local live = stats().allocs_live
    local y = weft.zeros(3, weft.float32, D)
    local x = weft.ones(3, weft.float32, D)
    weft.launch(saxpy, 3, { x, y, 1 }, D)
    do -- luacheck: ignore
      local garbage = weft.zeros(100, weft.float32, D)
      local pinned = weft.zeros(100, weft.float32, { pinned = true })
      assert(pinned.pinned and garbage)
    end
    weft.capture_begin("cuda:0")
    collectgarbage()
    collectgarbage()
    weft.launch(saxpy, 3, { x, y, 1 }, D)
    local g = weft.capture_end()
    weft.capture_launch(g)
    weft.synchronize()
    assert.are.same({ 2, 2, 2 }, y:totable())
    collectgarbage()
    assert.are.equal(live + 2, stats().allocs_live) -- the garbage is gone after the capture
  end)

  it("saw no misuse in this process (every spec run before this one too)", function()
    assert.are.equal(0, tonumber(stats().misuse), ffi.string(emu.wf_cuemu_last()))
  end)

  -- The output of a child luajit running code (from a file: kernels need
  -- their source text).
  local function child(code)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(code)
    f:close()
    local p = io.popen("LUA_PATH='" .. package.path .. "' luajit " .. path .. " 2>&1")
    local out = p:read("*a")
    p:close()
    os.remove(path)
    return out
  end

  it("a trapping kernel spoils the device for the process, as on a GPU (in a child)", function()
    local out = child [[
      local weft = require "weft"
      local k = weft.kernel{ x = weft.array(weft.float32), s = weft.int32, function(x, s)
        for j = 0, 3, s do x[weft.tid()] = 1.0 end end }
      local x = weft.zeros(4, weft.float32, { device = "cuda:0" })
      weft.config.mode = "fast"
      weft.launch(k, 4, { x, 0 }, { device = "cuda:0" })
      local ok, e = pcall(weft.synchronize)
      print(ok, e)
      print(pcall(weft.zeros, 4, weft.float32, { device = "cuda:0" }))
    ]]
    assert.matches("kernel weft_k trapped: [^\n]+:3: for loop step is zero", out)
    assert.matches("false\t[^\n]+:7: weft: CUDA synchronize failed: CUDA_ERROR_LAUNCH_FAILED: "
                   .. "unspecified launch failure %(a kernel faulted or trapped; the device cannot be used "
                   .. "again in this process", out)
    assert.matches("false\t[^\n]*weft.zeros: CUDA fill failed: CUDA_ERROR_LAUNCH_FAILED", out)
  end)

  it("catches a host read of device memory (in a child process)", function()
    local code = [[
      local weft, ffi = require "weft", require "ffi"
      local a = weft.ones(4, weft.float32, { device = "cuda:0" })
      io.stderr:write("read ", ffi.cast("float *", a:ptr())[0], "\n")
    ]]
    local out = child(code)
    assert.matches("weft%-cuda%-emu: host code dereferenced device pointer", out)
    assert.is_nil(out:match("read 1"))
  end)
end)
