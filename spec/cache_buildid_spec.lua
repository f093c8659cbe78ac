-- The disk kernel cache follows the library's own code: its keys hold
-- libweft's GNU build id (src/util/buildid.c), so a rebuild that changes
-- the emitter misses the entries an older build wrote, on the CPU and for
-- CUDA. Checked end to end: a copy of libweft.so whose build id differs
-- in one byte (the code is the same) must compile again into a cache the
-- original filled, and the original must still hit it.
local lib = os.getenv("WEFT_LIB")

local function readall(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local function writeall(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  return out
end

-- Cache entries under dir: CPU objects, CUDA images.
local function count(dir)
  local o = sh("find " .. dir .. " -maxdepth 1 -name '*.o' 2>/dev/null | wc -l")
  local c = sh("find " .. dir .. "/cuda -name '*.ptx' 2>/dev/null | wc -l")
  return tonumber(o), tonumber(c)
end

-- A child LuaJIT on library `path` with the cache in dir: one launch and
-- one PTX module (when NVRTC is there). Returns what it printed.
local CHILD = [[
package.path = 'lua/?.lua;lua/?/init.lua;' .. package.path
local weft = require "weft"
local k = weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid()
  x[i] = x[i] * 2.0 + 1.0
end }
local x = weft.ones(4)
weft.launch(k, 4, { x })
assert(x[3] == 3)
local core = require("weft.internal").core
if core.cuda_nvrtc_version and core.cuda_nvrtc_version() then k:ptx("sm_80") end
print("done")
]]

describe("the disk cache key", function()
  it("holds libweft's build id: a changed build misses, the same build hits", function()
    if not lib then return pending("WEFT_LIB is not set") end
    local id = sh("readelf -n '" .. lib .. "' 2>/dev/null"):match("Build ID: (%x+)")
    if not id then return pending("no readelf, or libweft has no GNU build id") end
    local bin = id:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
    local img = readall(lib)
    local at = img:find(bin, 1, true)
    assert.is_truthy(at)
    assert.is_nil(img:find(bin, at + 1, true)) -- one place: the note
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir .. "/cache"))
    -- the same code with another build id: one byte of the note flipped
    local flipped = string.char((img:byte(at) + 1) % 256)
    local other = dir .. "/libweft.so"
    writeall(other, img:sub(1, at - 1) .. flipped .. img:sub(at + 1))
    local script = dir .. "/child.lua"
    writeall(script, CHILD)
    local function run(path)
      local out = sh(("WEFT_LIB='%s' WEFT_CACHE_DIR='%s/cache' luajit '%s' 2>&1"):format(path, dir,
                                                                                   script))
      assert.matches("done", out, 1, true)
      return count(dir .. "/cache")
    end
    local o1, c1 = run(lib)
    assert.is_true(o1 >= 1)
    local o2, c2 = run(lib) -- the same build: every entry is found again
    assert.same({ o1, c1 }, { o2, c2 })
    local o3, c3 = run(other) -- another build: new entries
    assert.same({ 2 * o1, 2 * c1 }, { o3, c3 })
    local o4, c4 = run(other)
    assert.same({ o3, c3 }, { o4, c4 })
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
