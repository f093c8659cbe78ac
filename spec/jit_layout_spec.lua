-- JIT memory layout: the JIT maps a kernel object's code and its read-only
-- data (constant pools) separately, so they can land far apart when a large
-- reservation sits between the free gaps, as the emulated CUDA device's
-- 64 GB heap (or a CUDA driver's address range) does. Kernel code compiled
-- for the small code model then read its constants through a 32-bit
-- PC-relative offset that wrapped to another address: wrong numbers, or a
-- fault inside the device heap (issue: the intermittent cuda-emu crash).
-- A child process shapes its address space so the split happens every time:
-- a 12 GB reservation with one free page at its top, every free gap above
-- it filled, so the code takes that page and the data goes below.
local run_child = dofile("spec/helpers/run_child.lua")

local child = [[
local ffi = require "ffi"
local weft = require "weft"
ffi.cdef [=[
void *mmap(void *addr, size_t len, int prot, int flags, int fd, long off);
int munmap(void *addr, size_t len);
]=]
local PAGE, GB = 4096, 2 ^ 30
local flags = 0x02 + 0x20 + 0x4000 -- MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE
local NOREPLACE = 0x100000 -- MAP_FIXED_NOREPLACE
local function maps()
  local t = {}
  for line in io.lines("/proc/self/maps") do
    local lo, hi = line:match("^(%x+)-(%x+)")
    t[#t + 1] = { tonumber(lo, 16), tonumber(hi, 16), line:find("[stack]", 1, true) }
  end
  return t
end
-- the JIT exists and has compiled once before the address space is shaped
local warm = weft.kernel{ y = weft.array(weft.float32), function(y) y[weft.tid()] = 1.0 end }
weft.launch(warm, 1, { weft.zeros(1, weft.float32) })
-- One try: a 12 GB reservation with one free page at its top, every
-- free gap above it filled; then a kernel whose vector loop reads its two
-- constants (scale a, offset 7.654321) from a constant pool. Returns
-- y[0], y[63] and whether the kernel's code took that page.
local function try(a)
  local size = 12 * GB
  local big = ffi.C.mmap(nil, size, 0, flags, -1, 0)
  local top = tonumber(ffi.cast("uintptr_t", big)) + size
  local stack = math.huge
  for _, m in ipairs(maps()) do
    if m[3] then stack = m[1] end
  end
  local prev
  for _, m in ipairs(maps()) do
    if prev and prev >= top and m[1] > prev and m[1] < stack - GB then
      ffi.C.mmap(ffi.cast("void *", prev), m[1] - prev, 0, flags + NOREPLACE, -1, 0)
    end
    prev = m[2]
  end
  ffi.C.munmap(ffi.cast("void *", top - PAGE), PAGE)
  local k = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32), function(x, y)
    local i = weft.tid()
    y[i] = x[i] * a + 7.654321
  end }
  local n = 64
  local x, y = weft.full(n, 2.0, weft.float32), weft.zeros(n, weft.float32)
  weft.launch(k, n, { x, y })
  local placed = false
  for _, m in ipairs(maps()) do
    if m[1] == top - PAGE then placed = true end
  end
  return y[0], y[n - 1], placed
end
-- (something else may take the page first, rarely: try again)
local y0, y1, placed
for t = 1, 3 do
  y0, y1, placed = try(1.2345678 + t)
  if placed then
    print(string.format("value %.4f %.4f placed true (expected %.4f)", y0, y1,
                        2 * (1.2345678 + t) + 7.654321))
    break
  end
end
if not placed then print("value - - placed false") end
]]

describe("JIT memory layout", function()
  it("a kernel's constants read right when its code and data are mapped GBs apart", function()
    local out = run_child(child)
    if out:find("placed false", 1, true) then
      return pending("this address space could not be shaped so the code and data split")
    end
    -- before the fix: a segmentation fault (no line) or wrong values
    local a, b, want = out:match("value (%S+) (%S+) placed true %(expected (%S+)%)")
    assert.is_not_nil(want, out)
    assert.are.equal(want .. " " .. want, a .. " " .. b)
  end)
end)
