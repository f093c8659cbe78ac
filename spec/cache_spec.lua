-- The kernel cache: in memory per signature, and on disk under
-- WEFT_CACHE_DIR so that a second process compiles nothing. Each case runs
-- fresh LuaJIT processes (the disk cache is read when a state first
-- compiles a kernel) and reads their counters from stdout.
local weft = require "weft"

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  assert(os.execute("mkdir -p " .. p) == 0 or true)
  return p
end

-- A script printing "compiles disk_hits disk_writes value" after one launch
-- of a kernel whose constant is `c` (a different c is a different kernel).
local function script(c)
  return ([[
package.path = %q
local weft = require "weft"
local k = weft.kernel{
  x = weft.array(weft.float32),
  function(x)
    local i = weft.tid()
    x[i] = weft.float32(i) * %s
  end,
}
local x = weft.zeros(8)
weft.launch(k, 8, { x })
local s = weft.stats()
io.write(string.format("%%d %%d %%d %%g\n", s.compiles, s.disk_hits, s.disk_writes, x[3]))
]]):format(package.path, c)
end

-- The script of constant c lives at one path for the whole spec: the chunk
-- name is part of a kernel's identity (its messages name it).
local scripts = tmpdir()
local function script_file(c)
  local f = scripts .. "/k" .. c:gsub("%.", "_") .. ".lua"
  local h = assert(io.open(f, "w"))
  h:write(script(c))
  h:close()
  return f
end

local function run(dir, c)
  local f = script_file(c)
  local p = assert(io.popen(("WEFT_CACHE_DIR=%s luajit %s 2>&1"):format(dir, f)))
  local out = p:read("*a")
  p:close()
  local compiles, hits, writes, value = out:match("^(%d+) (%d+) (%d+) (%S+)")
  assert(compiles, "subprocess failed: " .. out)
  return tonumber(compiles), tonumber(hits), tonumber(writes), tonumber(value)
end

local function files(dir)
  local p = assert(io.popen("ls " .. dir .. " 2>/dev/null"))
  local t = {}
  for l in p:lines() do t[#t + 1] = l end
  p:close()
  return t
end

describe("the kernel cache", function()
  it("lets a second process compile nothing", function()
    local dir = tmpdir()
    local c, h, w, v = run(dir, "2.5")
    assert.same({ 1, 0, 1, 7.5 }, { c, h, w, v })
    c, h, w, v = run(dir, "2.5")
    assert.same({ 0, 1, 0, 7.5 }, { c, h, w, v })
    -- a different kernel misses, and is then cached too
    c, h, w, v = run(dir, "3.0")
    assert.same({ 1, 0, 1, 9 }, { c, h, w, v })
    assert.equal(2, #files(dir))
    for _, f in ipairs(files(dir)) do assert.matches("^%x+%.o$", f) end
    os.execute("rm -rf " .. dir)
  end)

  it("is disabled by WEFT_CACHE_DIR=off", function()
    local c, h, w, v = run("off", "4.0")
    assert.same({ 1, 0, 0, 12 }, { c, h, w, v })
    c, h = run("off", "4.0")
    assert.same({ 1, 0 }, { c, h })
  end)

  it("recovers from a damaged cache file", function()
    local dir = tmpdir()
    run(dir, "5.0")
    local name = files(dir)[1]
    local f = assert(io.open(dir .. "/" .. name, "wb"))
    f:write("WEFTOBJ1 not an object")
    f:close()
    local c, h, _, v = run(dir, "5.0")
    assert.same({ 1, 0, 15 }, { c, h, v })
    c, h, _, v = run(dir, "5.0")
    assert.same({ 0, 1, 15 }, { c, h, v })
    os.execute("rm -rf " .. dir)
  end)

  it("is safe when processes fill it at the same time", function()
    local dir = tmpdir()
    local f = script_file("6.0")
    local cmd = {}
    for i = 1, 4 do
      cmd[#cmd + 1] = ("WEFT_CACHE_DIR=%s luajit %s > %s.%d 2>&1 &"):format(dir, f, f, i)
    end
    os.execute(table.concat(cmd, " ") .. " wait")
    for i = 1, 4 do
      local o = assert(io.open(f .. "." .. i)):read("*a")
      assert.matches("^%d+ %d+ %d+ 18\n$", o)
      os.remove(f .. "." .. i)
    end
    -- one complete entry, no temporary files left behind
    assert.equal(1, #files(dir))
    local c, hits = run(dir, "6.0")
    assert.same({ 0, 1 }, { c, hits })
    os.execute("rm -rf " .. dir)
  end)

  it("reuses code in memory for the same signature", function()
    local k = weft.kernel{
      x = weft.array(weft.float32),
      function(x)
        local i = weft.tid()
        x[i] = 1.0
      end,
    }
    local before = weft.stats()
    local x = weft.zeros(4)
    for _ = 1, 10 do weft.launch(k, 4, { x }) end
    local after = weft.stats()
    assert.equal(1, (after.compiles - before.compiles) + (after.disk_hits - before.disk_hits))
    assert.equal(1, weft.stats(k).compiles + weft.stats(k).disk_hits)
    -- another ndim or the debug mode is another compiled variant
    weft.launch(k, { 2, 2 }, { x })
    weft.config.mode = "debug"
    weft.launch(k, 4, { x })
    weft.config.mode = "release"
    assert.equal(3, weft.stats(k).compiles + weft.stats(k).disk_hits)
  end)

  teardown(function() os.execute("rm -rf " .. scripts) end)
end)
