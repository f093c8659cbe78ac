-- Memory: arrays are freed once unreachable. Allocates and drops over 10 GB
-- of arrays and checks that the resident set stays flat.
local weft = require "weft"

-- Resident set size in MB, from /proc/self/statm (pages).
local function rss_mb()
  local f = assert(io.open("/proc/self/statm"))
  local _, res = f:read("*n", "*n")
  f:close()
  return res * 4096 / 2 ^ 20
end

describe("array memory", function()
  it("64 x 32 MB arrays dropped in a loop keep RSS flat (explicit collect)", function()
    -- 2 GB in all: a leak of one array in six passes the 300 MB bound
    -- (400 arrays took 20 s of CPU, mostly the kernel's page faults)
    collectgarbage()
    local before = rss_mb()
    local peak = before
    for i = 1, 64 do
      local a = weft.empty(8 * 2 ^ 20, weft.float32) -- 32 MB
      a:fill_(i)                                      -- touch every page
      assert.are.equal(i, a[8 * 2 ^ 20 - 1])
      a = nil
      collectgarbage()
      peak = math.max(peak, rss_mb())
    end
    assert.is_true(peak - before < 300, string.format("RSS grew by %.0f MB", peak - before))
  end)

  it("without explicit collection, allocation pressure frees dropped arrays", function()
    collectgarbage()
    local before = rss_mb()
    local peak = before
    for i = 1, 100 do
      local a = weft.zeros({ 1024, 8192 }, weft.float32) -- 32 MB, touched by zeros
      a[1023][8191] = i
      peak = math.max(peak, rss_mb())
    end
    assert.is_true(peak - before < 700, string.format("RSS grew by %.0f MB", peak - before))
  end)

  it("views keep the buffer until the last reference drops", function()
    -- garbage of earlier tests may be freed while this one allocates, so
    -- RSS is compared while the views live and after they drop
    for _ = 1, 3 do collectgarbage() end
    local before = rss_mb()
    -- the parent arrays live only in this function's frame: a local of
    -- the test's own frame could keep the last one reachable from a stale
    -- stack slot after its loop ends (96 of 128 MB released, seen once)
    local function view_of_new(i)
      local a = weft.zeros({ 2, 4 * 2 ^ 20 }, weft.float32) -- 32 MB
      a:fill_(i) -- touch every page: zeroed pages need not be resident
      return a[1]
    end
    local views = {}
    for i = 1, 4 do views[i] = view_of_new(i) end
    for _ = 1, 3 do collectgarbage() end
    local with_views = rss_mb()
    for i = 1, 4 do assert.are.equal(i, views[i][0]) end
    views = nil
    for _ = 1, 3 do collectgarbage() end
    local after = rss_mb()
    assert.is_true(with_views - after > 100,
                   string.format("only %.0f MB released when the views dropped", with_views - after))
    assert.is_true(after - before < 50, "views did not release their buffers")
  end)

  it("arrays of 4 to 32 MB go back to the system when dropped", function()
    -- glibc's malloc serves these from its heap once a large free raised
    -- its mmap threshold, and a heap block need not be returned; weft maps
    -- them on their own
    local big = weft.empty(30 * 2 ^ 18, weft.float32) -- 30 MB, then freed
    big = nil -- luacheck: ignore
    for _ = 1, 3 do collectgarbage() end
    local before = rss_mb()
    local small = {} -- live small blocks after each big one: no heap top to trim
    local function fill_and_drop()
      local arrs = {}
      for i = 1, 6 do
        arrs[i] = weft.empty(5 * 2 ^ 20, weft.float32) -- 20 MB
        arrs[i]:fill_(i)
        small[i] = weft.empty(256, weft.float32)
      end
      return rss_mb()
    end
    local with = fill_and_drop()
    for _ = 1, 3 do collectgarbage() end
    local after = rss_mb()
    assert.is_true(with - before > 100, string.format("only %.0f MB resident", with - before))
    assert.is_true(after - before < 20,
                   string.format("%.0f MB still resident after the arrays dropped", after - before))
    assert.are.equal(6, #small)
  end)

  it("arrays of 4 MB and more start on 2 MB boundaries (huge pages)", function()
    local ffi = require "ffi"
    for _, n in ipairs { 2 ^ 20, 3 * 2 ^ 20 + 17, 10 ^ 7 } do
      local a = weft.empty(n, weft.float32)
      assert.are.equal(0, tonumber(ffi.cast("uintptr_t", a.h.data) % (2 * 2 ^ 20)))
      a:fill_(2) -- the whole block is there to write
      assert.are.same({ 2, 2 }, { a[0], a[n - 1] })
    end
    -- smaller ones stay on the heap, 64-byte aligned
    assert.are.equal(0, tonumber(ffi.cast("uintptr_t", weft.empty(1000, weft.float32).h.data) % 64))
  end)

  it("an allocation the system refuses is an error at the caller's line", function()
    local ok, err = pcall(function() return weft.empty(2 ^ 44, weft.float32) end) -- 64 TB
    assert.is_false(ok)
    assert.matches("memory_spec.lua:%d+: weft.empty: out of memory allocating 70368744177664 bytes on cpu", err)
    local a = weft.empty(2 ^ 20, weft.float32) -- and the next one works
    a:fill_(3)
    assert.are.equal(3, a[2 ^ 20 - 1])
  end)
end)

describe("geometry memory", function()
  it("meshes dropped in a loop are collected: what they hold counts as allocation pressure", function()
    -- a 200k-face torus: about 17 MB of tree and triangles per mesh, which
    -- the collector does not see behind the mesh object (this loop grew
    -- RSS by about 700 MB before meshes counted it)
    local pts, idx = require("helpers.meshes").torus(1, 0.4, 500, 200)
    local P, I = weft.array(pts, weft.vec3), weft.array(idx, weft.int32)
    pts, idx = nil, nil
    for _ = 1, 3 do collectgarbage() end
    local before, peak = rss_mb(), 0
    for _ = 1, 40 do
      local m = weft.Mesh{ points = P, indices = I }
      assert.is_true(m.id ~= 0)
      peak = math.max(peak, rss_mb())
    end
    assert.is_true(peak - before < 450, string.format("RSS grew by %.0f MB over 40 meshes", peak - before))
  end)
end)
