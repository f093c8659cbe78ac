-- weft.Volume on the host: from_dense, NanoVDB files (codecs none and zip,
-- several grids), host sampling, and the errors of bad files.
local weft = require "weft"

local TMP = os.tmpname()
local function tmp(suffix) return TMP .. suffix end
local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end
local function spit(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- a linear field f(x, y, z) = x + 10 y + 100 z on a 12 x 9 x 20 block
local NX, NY, NZ = 12, 9, 20
local function linear_volume(opts)
  local a = weft.zeros({ NX, NY, NZ }, weft.float32)
  local p = require("ffi").cast("float*", a.h.data)
  for x = 0, NX - 1 do
    for y = 0, NY - 1 do
      for z = 0, NZ - 1 do p[(x * NY + y) * NZ + z] = x + 10 * y + 100 * z end
    end
  end
  return weft.Volume.from_dense(a, opts or { voxel_size = 0.5, origin = { 1, 2, 3 }, background = -7 })
end

local function sample(v, pts, mode)
  local out, grad = v:sample(weft.array(pts, weft.vec3f), mode)
  return out:totable(), grad and grad:totable()
end

-- little-endian patching of a file's bytes
local function put_u32(s, at, x)
  local b = string.char(x % 256, math.floor(x / 256) % 256, math.floor(x / 65536) % 256,
                        math.floor(x / 16777216) % 256)
  return s:sub(1, at) .. b .. s:sub(at + 5)
end
local function put_u16(s, at, x)
  return s:sub(1, at) .. string.char(x % 256, math.floor(x / 256)) .. s:sub(at + 3)
end

describe("weft.Volume.from_dense", function()
  it("samples voxels, trilinear points and gradients of a linear field exactly", function()
    local v = linear_volume()
    local vals = sample(v, { { 0, 0, 0 }, { 3, 4, 5 }, { 11, 8, 19 } }, weft.Volume.CLOSEST)
    assert.same({ 0, 3 + 40 + 500, 11 + 80 + 1900 }, vals)
    local lin, grad = sample(v, { { 1.25, 2.5, 3.75 }, { 10.5, 0.25, 18.125 } }, weft.Volume.LINEAR)
    assert.near(1.25 + 25 + 375, lin[1], 1e-3)
    assert.near(10.5 + 2.5 + 1812.5, lin[2], 1e-3)
    for _, g in ipairs(grad) do
      assert.near(1, g[1], 1e-3)
      assert.near(10, g[2], 1e-3)
      assert.near(100, g[3], 1e-3)
    end
    -- closest rounds halves away from zero (as Warp does)
    assert.same({ 1 + 10 + 100 }, (sample(v, { { 0.5, 0.5, 0.5 } }, weft.Volume.CLOSEST)))
  end)

  it("gives the background outside the block", function()
    local v = linear_volume()
    local vals = sample(v, { { -1, 0, 0 }, { 12, 0, 0 }, { 0, 9, 0 }, { 5000, -9000, 1e6 } }, 0)
    assert.same({ -7, -7, -7, -7 }, vals)
  end)

  it("reports the grid's info and voxel size", function()
    local v = linear_volume { voxel_size = 0.25, origin = { -1, 0, 2 }, name = "lin" }
    local info = v:grid_info()
    assert.equal("lin", info.name)
    assert.equal("float", info.type_str)
    assert.same({ -1, 0, 2 }, info.translation)
    assert.same({ { 0.25, 0, 0 }, { 0, 0.25, 0 }, { 0, 0, 0.25 } }, info.transform_matrix)
    assert.same({ 0, 0, 0 }, info.bbox_min)
    assert.same({ NX - 1, NY - 1, NZ - 1 }, info.bbox_max)
    assert.equal(NX * NY * NZ, info.active_voxels)
    assert.same({ 0.25, 0.25, 0.25 }, { v:voxel_size() })
    assert.equal("uint64_t", tostring(require("ffi").typeof(v.id)):match("uint64_t"))
  end)

  it("holds vec3 and int32 fields", function()
    local a = weft.zeros({ 3, 4, 5 }, weft.vec3f)
    a[1][2][3] = weft.vec3(1, 2, 3)
    local v = weft.Volume.from_dense(a, { background = { 9, 8, 7 } })
    assert.same({ { 1, 2, 3 }, { 0, 0, 0 }, { 9, 8, 7 } }, (sample(v, { { 1, 2, 3 }, { 0, 0, 0 }, { 3, 0, 0 } }, 0)))
    local lin = sample(v, { { 1, 2, 3.5 } }, 1)
    assert.same({ { 0.5, 1, 1.5 } }, lin)
    local ia = weft.zeros({ 2, 2, 2 }, weft.int32)
    ia[1][1][1] = 42
    local iv = weft.Volume.from_dense(ia, { background = -1 })
    assert.same({ 42, 0, -1 }, (sample(iv, { { 1.4, 0.6, 1 }, { 0, 0, 0 }, { -1, 0, 0 } }, 0)))
    assert.equal("int32", iv:grid_info().type_str)
  end)

  it("rejects what it cannot hold", function()
    assert.has_error(function() weft.Volume.from_dense(weft.zeros({ 2, 2 })) end,
      "weft.Volume.from_dense: expected a 3-D array, got 2 dimensions")
    assert.has_error(function() weft.Volume.from_dense(weft.zeros({ 2, 2, 2 }, weft.float64)) end,
      "weft.Volume.from_dense: arrays of float64 are not supported (float32, int32 or vec3f)")
    assert.has_error(function() weft.Volume.from_dense(weft.zeros({ 2, 2, 2 }), { voxel_size = -1 }) end,
      "weft.Volume.from_dense: voxel_size must be a positive number")
  end)
end)

describe("NanoVDB files", function()
  it("round-trip through save_nvdb with codecs none and zip", function()
    local v = linear_volume()
    local pts = { { 1.25, 2.5, 3.75 }, { 0, 0, 0 }, { -3, 4, 4 }, { 11.9, 8.9, 19.9 } }
    local want = sample(v, pts, 1)
    for _, codec in ipairs { "none", "zip" } do
      v:save_nvdb(tmp(codec), codec)
      local w = weft.Volume.load_from_nvdb(tmp(codec))
      assert.same(want, (sample(w, pts, 1)))
      assert.same(v:grid_info(), w:grid_info())
      -- the bytes work as well as the path
      local u = weft.Volume.load_from_nvdb(slurp(tmp(codec)))
      assert.same(want, (sample(u, pts, 1)))
    end
    assert.is_true(#slurp(tmp("zip")) < #slurp(tmp("none")) / 10)
  end)

  it("pick one of several grids by index or by name", function()
    local a = linear_volume { name = "first", background = 1 }
    local b = linear_volume { name = "second", voxel_size = 2, background = 2 }
    a:save_nvdb(tmp("a"), "zip")
    b:save_nvdb(tmp("b"), "none")
    spit(tmp("ab"), slurp(tmp("a")) .. slurp(tmp("b")) .. slurp(tmp("a")))
    assert.equal("first", weft.Volume.load_from_nvdb(tmp("ab")):grid_info().name)
    assert.equal("second", weft.Volume.load_from_nvdb(tmp("ab"), { grid = 1 }):grid_info().name)
    assert.equal(2, (weft.Volume.load_from_nvdb(tmp("ab"), { grid = "second" }):voxel_size()))
    assert.equal("first", weft.Volume.load_from_nvdb(tmp("ab"), { grid = 2 }):grid_info().name)
    assert.has_error(function() weft.Volume.load_from_nvdb(tmp("ab"), { grid = 3 }) end,
      "weft.Volume.load_from_nvdb: grid index 3 is out of range (the file holds 3 grids)")
    assert.has_error(function() weft.Volume.load_from_nvdb(tmp("ab"), { grid = "third" }) end,
      "weft.Volume.load_from_nvdb: no grid named 'third' in the file (grids: 'first', 'second', 'first')")
  end)

  it("reject truncated, foreign and unsupported files with clear errors", function()
    local v = linear_volume()
    v:save_nvdb(tmp("n"), "none")
    v:save_nvdb(tmp("z"), "zip")
    local none, zip = slurp(tmp("n")), slurp(tmp("z"))
    local function load_err(bytes)
      local ok, err = pcall(weft.Volume.load_from_nvdb, bytes)
      assert.is_false(ok)
      return (tostring(err):gsub("^spec/volume_nvdb_spec%.lua:%d+: weft%.Volume%.load_from_nvdb: ", ""))
    end
    assert.matches("^truncated file: grid '' needs %d+ bytes$", load_err(none:sub(1, 5000)))
    assert.matches("^truncated file: grid '' ends inside its data$", load_err(zip:sub(1, #zip - 100)))
    assert.equal("truncated file: grid 0's metadata is cut", load_err(zip:sub(1, 100)))
    assert.equal("truncated file (9 bytes; a NanoVDB header has 16)", load_err("NanoVDB0\1"))
    assert.equal("unknown codec 7 (weft reads none and zip)", load_err(put_u16(zip, 14, 7)))
    assert.equal("unsupported codec blosc (weft reads none and zip)", load_err(put_u16(zip, 14, 2)))
    assert.equal("unsupported NanoVDB version 31.0 (weft reads 32.x)", load_err(put_u32(zip, 8, 31 * 2 ^ 21)))
    assert.equal("unsupported grid type 2 (Double); weft reads float, int32, Vec3f and index grids",
                 load_err(put_u32(zip, 16 + 32, 2)))
    -- the grid's own header disagrees with the metadata: its type is checked too
    assert.equal("unsupported grid type 7 (Vec3d); weft reads float, int32, Vec3f and index grids",
                 load_err(put_u32(none, 16 + 176 + 1 + 636, 7)))
    assert.matches("^corrupt zip data in grid ''", load_err(zip:sub(1, 250) .. ("x"):rep(#zip - 250)))
    spit(tmp("gif"), "GIF89a" .. ("\0"):rep(40))
    local ok, err = pcall(weft.Volume.load_from_nvdb, tmp("gif"))
    assert.is_false(ok)
    -- the position is the caller's line (the pcall above)
    assert.matches("^spec/volume_nvdb_spec%.lua:%d+: weft%.Volume%.load_from_nvdb: not a NanoVDB file %(bad magic%)$", err)
    ok, err = pcall(weft.Volume.load_from_nvdb, tmp("does-not-exist"))
    assert.is_false(ok)
    assert.matches("cannot open '.*does%-not%-exist'", err)
  end)

  it("reject a grid whose tree points outside itself", function()
    local v = linear_volume()
    v:save_nvdb(tmp("n"), "none")
    local none = slurp(tmp("n"))
    local grid = 16 + 176 + 1
    -- the root's only tile: its child offset (int64 at root + 64 + 8)
    local bad = put_u32(none, grid + 736 + 64 + 8, 12345)
    local ok, err = pcall(weft.Volume.load_from_nvdb, bad)
    assert.is_false(ok)
    assert.matches("corrupt grid: root tile 0's child offset is out of place", err)
    -- the number of leaves (u32 at tree + 32) beyond the buffer
    ok, err = pcall(weft.Volume.load_from_nvdb, put_u32(none, grid + 672 + 32, 100000))
    assert.is_false(ok)
    assert.matches("corrupt grid: 100000 leaf nodes do not fit in the grid", err)
  end)

  it("write only codecs none and zip", function()
    assert.has_error(function() linear_volume():save_nvdb(tmp("x"), "blosc") end,
      "Volume:save_nvdb: unknown codec 'blosc' (none or zip)")
  end)
end)

os.remove(TMP)
for _, s in ipairs { "none", "zip", "a", "b", "ab", "n", "z", "gif", "x" } do os.remove(tmp(s)) end
