-- First contact (issue 18): kernels from chunks without a file (registered
-- text, weft.load, weft.loadstring), k:compile, the strict weft module and
-- host a.shape[0].
local weft = require "weft"

local KERNEL = [[
local weft = require "weft"
local scale = 3.0
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid()
  x[i] = weft.float32(i) * scale
end }
]]

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok)
  return tostring(e)
end

describe("kernels from chunks without a file", function()
  it("fail with a message saying how to give the text", function()
    local k = loadstring(KERNEL, "=pak/level1/ai")()
    local e = err_of(weft.launch, k, 4, { weft.zeros(4) })
    assert.truthy(e:find("pak/level1/ai:3 has no source text", 1, true), e)
    assert.truthy(e:find('weft.register_source("=pak/level1/ai", text)', 1, true), e)
  end)

  it("compile once the chunk's text is registered", function()
    weft.register_source("=pak/level2/ai", KERNEL)
    local k = loadstring(KERNEL, "=pak/level2/ai")()
    local x = weft.zeros(4)
    weft.launch(k, 4, { x })
    assert.equal(9, x[3])
    assert.equal("k", (k.name:gsub("^kernel_%d+$", "k"))) -- no name to read: a returned kernel
  end)

  it("also under the name without '='", function()
    weft.register_source("pak/level3/ai", KERNEL)
    local k = loadstring(KERNEL, "=pak/level3/ai")()
    local x = weft.zeros(2)
    weft.launch(k, 2, { x })
    assert.equal(3, x[1])
  end)

  it("keep their text when a later chunk takes the same name (a REPL)", function()
    local k = weft.loadstring(KERNEL, "=stdin")()
    weft.loadstring("local y = 1 + 1\nreturn y", "=stdin")()
    local x = weft.zeros(2)
    weft.launch(k, 2, { x })
    assert.equal(3, x[1])
  end)

  it("weft.load takes a string or a reader, and an environment", function()
    local parts, n = { KERNEL:sub(1, 40), KERNEL:sub(41) }, 0
    local k = weft.load(function() n = n + 1; return parts[n] end, "=reader")()
    local x = weft.zeros(2)
    weft.launch(k, 2, { x })
    assert.equal(3, x[1])
    local env = setmetatable({ answer = 42 }, { __index = _G })
    assert.equal(42, weft.load("return answer", "=env", "t", env)())
    assert.truthy(err_of(weft.register_source, 1, "x"):find("expected a chunk name", 1, true))
    assert.truthy(err_of(weft.load, 5):find("expected a string or a reader", 1, true))
  end)
end)

describe("k:compile", function()
  it("compiles before the first launch, which then compiles nothing", function()
    local k = weft.loadstring(KERNEL:gsub("scale = 3.0", "scale = 5.0"), "=compile1")()
    assert.equal(k, k:compile())
    local st = weft.stats(k)
    assert.equal(1, st.compiles + st.disk_hits)
    local x = weft.zeros(4)
    weft.launch(k, 4, { x })
    assert.equal(15, x[3])
    st = weft.stats(k)
    assert.equal(1, st.compiles + st.disk_hits)
  end)

  it("compiles generic kernels for the types it is given", function()
    local k = weft.kernel{ function(x) local i = weft.tid(); x[i] = x[i] + 1.0 end }
    local e = err_of(function() k:compile() end)
    assert.truthy(e:find("parameter 'x' is generic", 1, true), e)
    assert.truthy(e:find("first_contact_spec.lua:", 1, true), e)
    k:compile{ types = { x = weft.array(weft.float64) }, ndim = { 1, 2 } }
    local n = weft.stats(k).compiles + weft.stats(k).disk_hits
    assert.equal(2, n)
    local x = weft.zeros(3, weft.float64)
    weft.launch(k, 3, { x })
    assert.equal(n, weft.stats(k).compiles + weft.stats(k).disk_hits)
    assert.equal(1, x[2])
  end)

  it("checks its options", function()
    local k = weft.kernel{ x = weft.array(weft.float32), function(x) x[weft.tid()] = 1.0 end }
    assert.truthy(err_of(k.compile, k, 3):find("opts must be a table", 1, true))
    assert.truthy(err_of(k.compile, k, { ndim = 5 }):find("ndim must be 1 to 4", 1, true))
  end)
end)

describe("the weft module", function()
  it("raises on a name it does not have, with a suggestion", function()
    local e = err_of(function() return weft.flaot32 end)
    assert.truthy(e:find("first_contact_spec.lua:%d+: weft has no field 'flaot32' %(did you mean weft.float32%?%)"), e)
    e = err_of(function() return weft.no_such_thing_at_all end)
    assert.truthy(e:find("weft has no field 'no_such_thing_at_all'$"), e)
    -- a misspelt type no longer makes a parameter generic in silence
    e = err_of(function() return weft.kernel{ x = weft.arary(weft.float32), function(x) return x end } end)
    assert.truthy(e:find("did you mean weft.array?", 1, true), e)
  end)

  it("still reads every name it has, and names added later", function()
    assert.equal(weft.float32, weft.float)
    weft.added_later_by_a_part = 1
    assert.equal(1, weft.added_later_by_a_part)
    weft.added_later_by_a_part = nil
    assert.is_nil(rawget(weft, "flaot32"))
  end)

  it("reports a misspelt name inside a kernel at its line", function()
    local e = err_of(function()
      local k = weft.kernel{ x = weft.array(weft.float32), function(x)
        x[weft.tid()] = weft.flaot32(1)
      end }
      weft.launch(k, 1, { weft.zeros(1) })
    end)
    assert.truthy(e:find("first_contact_spec.lua:%d+: undefined name 'weft.flaot32'"), e)
  end)
end)

describe("host a.shape", function()
  it("is a 1-based table that round-trips", function()
    local a = weft.zeros{ 2, 3 }
    assert.same({ 2, 3 }, a.shape)
    assert.equal(2, a.shape[1])
    local b = weft.zeros(a.shape)
    assert.equal("2x3", table.concat(b.shape, "x"))
    assert.is_nil(a.shape[3])
  end)

  it("a.shape[0] explains the two conventions", function()
    local a = weft.zeros(5)
    local e = err_of(function() return a.shape[0] end)
    assert.truthy(e:find("first_contact_spec.lua:%d+: weft: a.shape%[0%]: on the host a.shape is a 1%-based Lua table"), e)
    assert.truthy(e:find("inside kernels x.shape[0] is the first dimension", 1, true), e)
  end)
end)

describe("k:compile on a CUDA device", function() -- under scripts/cuda-emu in make test
  if require("helpers.cuda").missing() then return end

  it("loads the module before the first launch", function()
    local k = weft.kernel{ x = weft.array(weft.float32), function(x)
      local i = weft.tid(); x[i] = weft.float32(i) * 2.0 end }
    assert.equal(k, k:compile{ device = "cuda:0" })
    local x = weft.zeros(4, weft.float32, { device = "cuda:0" })
    weft.launch(k, 4, { x }, { device = "cuda:0" })
    weft.synchronize()
    assert.equal(6, x:to("cpu")[3])
  end)

  it("says that generic kernels need a type there too", function()
    local k = weft.kernel{ function(x) x[weft.tid()] = 1.0 end }
    local ok, e = pcall(k.compile, k, { device = "cuda:0" })
    assert.is_false(ok)
    assert.truthy(tostring(e):find("parameter 'x' is generic", 1, true), e)
  end)
end)
