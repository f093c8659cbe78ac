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

-- package.path with relative entries made absolute (some cases run the
-- scripts from another directory).
local cwd = assert(io.popen("pwd")):read("*l")
local abs_path = package.path:gsub("[^;]+", function(e)
  return e:sub(1, 1) == "/" and e or cwd .. "/" .. e:gsub("^%./", "")
end)

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
]]):format(abs_path, c)
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

-- Runs the script of constant c with the cache in dir (under `timeout`: a
-- cache entry must never make a process hang); returns the counters, the
-- value and what the process wrote to stderr.
local function run(dir, c)
  local f = script_file(c)
  local err = os.tmpname()
  local p = assert(io.popen(("WEFT_CACHE_DIR='%s' timeout 60 luajit %s 2>%s"):format(dir, f, err)))
  local out = p:read("*a")
  p:close()
  local h = assert(io.open(err))
  local stderr = h:read("*a")
  h:close()
  os.remove(err)
  local compiles, hits, writes, value = out:match("^(%d+) (%d+) (%d+) (%S+)")
  assert(compiles, "subprocess failed: " .. out .. stderr)
  return tonumber(compiles), tonumber(hits), tonumber(writes), tonumber(value), stderr
end

local function has_nvrtc()
  local info = weft.info and weft.info()
  return info and tostring(info.nvrtc):match("^%d") ~= nil
end

local function slurp(path)
  local h = assert(io.open(path, "rb"))
  local s = h:read("*a")
  h:close()
  return s
end

local function spit(path, s)
  local h = assert(io.open(path, "wb"))
  h:write(s)
  h:close()
end

-- The offset of an ELF object's .text section inside a cache entry (56
-- header bytes precede the object): read from the section headers.
local function text_section(entry)
  local obj = entry:sub(57)
  local function u16(o) return obj:byte(o + 1) + 256 * obj:byte(o + 2) end
  local function u64(o)
    local v = 0
    for i = 8, 1, -1 do v = v * 256 + obj:byte(o + i) end
    return v
  end
  local shoff, shentsize, shnum, shstrndx = u64(0x28), u16(0x3a), u16(0x3c), u16(0x3e)
  local strtab = u64(shoff + shstrndx * shentsize + 0x18)
  for i = 0, shnum - 1 do
    local sh = shoff + i * shentsize
    local name = obj:match("^[^%z]*", strtab + obj:byte(sh + 1) + 256 * obj:byte(sh + 2) + 1)
    if name == ".text" or name:match("^%.text%.") then
      local off, size = u64(sh + 0x18), u64(sh + 0x20)
      if size > 0 then return 56 + off, size end
    end
  end
  error("no .text section in the cache entry")
end

local function files(dir)
  local p = assert(io.popen("ls -A " .. dir .. " 2>/dev/null")) -- temp files are dot files
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
    spit(dir .. "/" .. name, "WEFTOBJ2 not an object")
    local c, h, _, v, err = run(dir, "5.0")
    assert.same({ 1, 0, 15 }, { c, h, v })
    assert.matches("weft: warning: damaged cache entry .*" .. name .. " %(truncated header", err)
    c, h, _, v, err = run(dir, "5.0")
    assert.same({ 0, 1, 15, "" }, { c, h, v, err })
    os.execute("rm -rf " .. dir)
  end)

  -- Each kind of damage: the entry is dropped with a warning naming why,
  -- the kernel is compiled again (right value, no crash, no hang), and the
  -- entry written back is good.
  local function damaged(c, why, damage)
    local dir = tmpdir()
    local c1, _, w1 = run(dir, c)
    assert.same({ 1, 1 }, { c1, w1 })
    local path = dir .. "/" .. files(dir)[1]
    damage(path, slurp(path))
    local n, h, w, v, err = run(dir, c)
    assert.same({ 1, 0, 1, 3 * tonumber(c) }, { n, h, w, v })
    assert.matches("weft: warning: damaged cache entry " .. path:gsub("%p", "%%%0") .. " %(" .. why, err)
    n, h, w, v, err = run(dir, c)
    assert.same({ 0, 1, 0, 3 * tonumber(c), "" }, { n, h, w, v, err })
    os.execute("rm -rf " .. dir)
  end

  it("recompiles an entry with 8 bits flipped in its object code", function()
    damaged("7.0", "checksum mismatch", function(path, s)
      local off = text_section(s) + 4 -- relocations and code: LLVM aborted or the code crashed
      spit(path, s:sub(1, off) .. string.char(bit.bxor(s:byte(off + 1), 0xff)) .. s:sub(off + 2))
    end)
  end)

  it("recompiles an entry with NOPs patched into .text", function()
    damaged("7.5", "checksum mismatch", function(path, s)
      local off, size = text_section(s)
      spit(path, s:sub(1, off) .. ("\144"):rep(size) .. s:sub(off + size + 1))
    end)
  end)

  it("recompiles a truncated entry", function()
    damaged("8.0", "size %d+ in the header, %d+ bytes in the file", function(path, s)
      spit(path, s:sub(1, #s - 100))
    end)
    damaged("8.5", "truncated header", function(path, s) spit(path, s:sub(1, 20)) end)
  end)

  it("recompiles an entry whose header lies about its key", function()
    damaged("9.0", "holds another key", function(path, s)
      spit(path, s:sub(1, 8) .. ("0"):rep(32) .. s:sub(41))
    end)
  end)

  it("does not hang on a FIFO in place of an entry", function()
    damaged("9.5", "not a regular file", function(path)
      os.remove(path)
      assert.equal(0, os.execute("mkfifo " .. path))
    end)
  end)

  it("recompiles a damaged CUDA entry", function()
    if not has_nvrtc() then return pending("no NVRTC") end
    local dir = tmpdir()
    local ptx = scripts .. "/ptx_cache.lua"
    spit(ptx, ([[
package.path = %q
local weft = require "weft"
local k = weft.kernel{ x = weft.array(weft.float32), function(x) x[weft.tid()] = 12.0 end }
io.write(#k:ptx("sm_80"), "\n")
]]):format(abs_path))
    local function go()
      local err = os.tmpname()
      local p = assert(io.popen(("WEFT_CACHE_DIR=%s timeout 60 luajit %s 2>%s"):format(dir, ptx, err)))
      local out = p:read("*a")
      p:close()
      local e = slurp(err)
      os.remove(err)
      return out, e
    end
    local out, err = go()
    assert.matches("^%d+\n$", out)
    assert.equal("", err)
    local entries = files(dir .. "/cuda")
    assert.equal(1, #entries)
    local path = dir .. "/cuda/" .. entries[1]
    local s = slurp(path)
    assert.equal("WEFTCU02", s:sub(1, 8))
    local off = 56 + math.floor((#s - 56) / 2)
    spit(path, s:sub(1, off) .. string.char(bit.bxor(s:byte(off + 1), 0xff)) .. s:sub(off + 2))
    local out2, err2 = go()
    assert.equal(out, out2)
    assert.matches("weft: warning: damaged cache entry .*%(checksum mismatch%)", err2)
    assert.equal(s, slurp(path)) -- written back whole
    os.remove(path)
    assert.equal(0, os.execute("mkfifo " .. path))
    out2, err2 = go()
    assert.equal(out, out2)
    assert.matches("%(not a regular file%)", err2)
    os.execute("rm -rf " .. dir)
  end)

  it("is disabled by WEFT_CACHE_DIR=0 and by an empty value, for CPU and CUDA", function()
    for _, off in ipairs({ "0", "" }) do
      local cwd = tmpdir()
      local f = script_file("10.0")
      local p = assert(io.popen(("cd %s && WEFT_CACHE_DIR='%s' timeout 60 luajit %s 2>&1"):format(cwd, off, f)))
      local out = p:read("*a")
      p:close()
      assert.matches("^1 0 0 30\n", out)
      -- the CUDA side: NVRTC's PTX is not cached into ./0/cuda or ./cuda
      if has_nvrtc() then
        local ptx = scripts .. "/ptx.lua"
        spit(ptx, ([[
package.path = %q
local weft = require "weft"
local k = weft.kernel{ x = weft.array(weft.float32), function(x) x[weft.tid()] = 11.0 end }
io.write(#k:ptx("sm_80") > 0 and "ok\n" or "empty\n")
]]):format(abs_path))
        p = assert(io.popen(("cd %s && WEFT_CACHE_DIR='%s' timeout 60 luajit %s 2>&1"):format(cwd, off, ptx)))
        out = p:read("*a")
        p:close()
        assert.equal("ok\n", out)
      end
      assert.same({}, files(cwd))
      os.execute("rm -rf " .. cwd)
    end
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
