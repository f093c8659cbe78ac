-- driver.lua: the Lua side of tests/fuzz/fuzz_front.c and fuzz_gen.c, run
-- inside their weft_State.
--   fuzz_one(src, launch): src is a Lua chunk returning a kernel; it runs
--     sandboxed and the kernel goes through k:ir(), its adjoint and
--     tangent, k:source("cuda"), its LLVM IR (unoptimized) and, when launch
--     is true and it surely ends, a debug-mode launch over small arrays.
--   fuzz_gen(bytes, launch): bytes choose a kernel (mostly well typed, now
--     and then not) written as source, which goes through fuzz_one.
-- Both return nil, or a message when an invariant broke ("!" first: the
-- harness aborts; else it reports, and aborts with WEFT_FUZZ_STRICT=1).
local weft = require 'weft'
local internal = require 'weft.internal' -- the parts' private table
jit.off()
weft.config.mode = 'debug'
local function ro(t, name)
  return setmetatable({}, {
    __index = function(_, k)
      if type(k) == 'string' and k:sub(1, 1) == '_' then return nil end
      return t[k]
    end,
    __newindex = function() error(name .. ' is read-only in the fuzzer', 2) end,
    __metatable = false })
end
local W, M, B = ro(weft, 'weft'), ro(math, 'math'), ro(bit, 'bit')
local libs = { weft = W, math = M, bit = B }
local safe = { weft = W, math = M, bit = B, print = print, pairs = pairs,
  ipairs = ipairs, type = type, tostring = tostring, tonumber = tonumber,
  select = select, unpack = unpack, error = error, assert = assert,
  pcall = pcall, next = next,
  require = function(n) return libs[n] or error('no module ' .. tostring(n), 2) end }
local function budget() error('fuzz: instruction budget', 0) end
local function guarded(f, ...)
  debug.sethook(budget, '', 2000000)
  local r = { pcall(f, ...) }
  debug.sethook()
  return unpack(r)
end
local weft_src = '/weft/[%w_]+%.lua:%d+: '
-- WEFT_FUZZ_IGNORE="text1;text2": errors holding one of these texts are
-- known findings (see tests/fuzz/*/open), not reported again
local ignore = {}
for t in (os.getenv('WEFT_FUZZ_IGNORE') or ''):gmatch('[^;]+') do ignore[#ignore + 1] = t end
local function check(err)
  err = tostring(err)
  fuzz_last_err = err
  -- only the message's first line, without the chunk name (a string
  -- chunk's name is its own text, which may hold anything)
  local first = err:match('^[^\n]*')
  local msg = first:gsub('^%[string ".-"%]:%d+: ', '')
  for _, t in ipairs(ignore) do if msg:find(t, 1, true) then return nil end end
  if msg:find('IR verification failed', 1, true) then return '!' .. err end
  if msg:find('fuzz: instruction budget', 1, true) then return nil end
  if first:find(weft_src) and not first:find('^%[string') then return err end
  return nil
end
-- launch only kernels that surely end soon: no while loop, and every for
-- loop over constant bounds and step, with at most 1e5 iterations nested
-- (a bound computed at run time, from randi or an array, may be anything)
local function bounded(ir)
  if ir:find(' while ', 1, true) then return false end
  local consts = {}
  for id, v in ir:gmatch('%%(%d+):[%w<>,]+ = const ([^ \n]+)') do consts[id] = tonumber(v) end
  local work = 1
  for lo, hi, st in ir:gmatch(' for %%(%d+), %%(%d+), %%(%d+)') do
    local a, b, c = consts[lo], consts[hi], consts[st]
    if not (a and b and c) or c == 0 then return false end
    local n = math.floor((b - a) / c) + 1
    if n ~= n then return false end
    if n > 0 then work = work * n end
    if work > 1e5 then return false end
  end
  return true
end
local function arg_of(t)
  if t == nil then return weft.zeros(4, weft.float32) end
  if t.kind == 'array' then
    local shape = {}
    for d = 1, t.ndim or 1 do shape[d] = 3 end
    return weft.zeros(shape, t.dtype)
  end
  if t.kind == 'int' then return 1 end
  if t.kind == 'float' then return 1.5 end
  if t.kind == 'bool' then return true end
  if t.kind == 'struct' then return t{} end
  return t()
end
fuzz_stats = { loaded = 0, kernel = 0, ir = 0, llvm = 0, launched = 0, ran = 0 }
local stats = fuzz_stats
function fuzz_one(src, launch)
  fuzz_last_src = src
  local chunk = loadstring(src)
  if not chunk then return nil end
  stats.loaded = stats.loaded + 1
  setfenv(chunk, setmetatable({}, { __index = safe }))
  local ok, k = guarded(chunk)
  if not ok or not weft.is_kernel(k) then return nil end
  stats.kernel = stats.kernel + 1
  local argtypes = {}
  for i, p in ipairs(k.params) do argtypes[i] = p.type or weft.array(weft.float32) end
  local ok, ir = guarded(k.ir, k, argtypes)
  if not ok then return check(ir) end
  stats.ir = stats.ir + 1
  local m = k:_module(argtypes)
  for _, d in ipairs({ 'adj', 'jvp' }) do
    local ok, e = guarded(internal.derived_module, d, k, m, argtypes, false)
    if not ok then local c = check(e) if c then return c end end
  end
  local ok, e = guarded(k.source, k, 'cuda', argtypes)
  if not ok then local c = check(e) if c then return c end end
  -- LLVM IR without LLVM's O3 (the launches run that): weft's emitter is
  -- what is fuzzed, and O3 would cost most of the time
  ok, e = guarded(internal.core.llvm_ir, m, { optimize = false })
  if not ok then local c = check(e) if c then return c end
  else stats.llvm = stats.llvm + 1 end
  if not launch or not bounded(ir) then return nil end
  local args = {}
  for i, p in ipairs(k.params) do
    local ok, a = pcall(arg_of, p.type)
    if not ok then return nil end
    args[i] = a
  end
  stats.launched = stats.launched + 1
  weft.config.mode = 'debug' -- bounds checks, whatever the chunk set
  local ok, e = guarded(weft.launch, k, 2, args)
  if not ok then return check(e) end
  stats.ran = stats.ran + 1
  return nil
end

---------------------------------------------------------------------------
-- the kernel generator: every choice is one input byte (0 once they run
-- out, and choice 0 is always the simplest, so generation ends)
---------------------------------------------------------------------------
local fmt, concat = string.format, table.concat

local PTYPES = {
  { "weft.array(weft.float32)", "arr", "f32", 1 },
  { "weft.array(weft.float64)", "arr", "f64", 1 },
  { "weft.array(weft.int32)", "arr", "i32", 1 },
  { "weft.array(weft.vec3)", "arr", "vec3", 1 },
  { "weft.array(weft.float32, 2)", "arr", "f32", 2 },
  { "weft.float32", "f32" }, { "weft.int32", "i32" }, { "weft.float64", "f64" },
  { "weft.vec3", "vec3" }, { "weft.mat33", "mat33" }, { "weft.bool", "bool" },
  { nil, "arr", "f32", 1 }, -- generic: launched with a float32 array
}
local FLIT = { "0.5", "1.0", "-2.0", "0.0", "3.0", "1e30", "-1e-30", "3.0e38", "0.1",
  "123456.75", "-0.0", "2.5e-8", "(1/0)", "(0/0)", "math.pi", "math.huge" }
local FLIT64 = { "1e300", "-4.9e-324", "1.7976931348623157e308", unpack(FLIT) }
local ILIT = { "0", "1", "2", "-1", "3", "7", "2147483647", "-2147483648", "65536", "31", "32",
  "100", "-7" }
local F1 = { "weft.sqrt", "weft.sin", "weft.cos", "weft.exp", "weft.log", "weft.abs", "weft.floor",
  "weft.ceil", "weft.tanh", "math.sqrt", "weft.round", "weft.sign", "weft.asin", "weft.acos",
  "weft.atan", "weft.sinh", "weft.cosh", "weft.tan" }
local F2 = { "weft.min", "weft.max", "weft.atan2", "weft.pow" }
local ARITH = { "+", "-", "*", "/", "^", "%" }
local IARITH = { "+", "-", "*", "%" }
local CMP = { "<", "<=", ">", ">=", "==", "~=" }
local BITS = { "bit.band", "bit.bor", "bit.bxor", "bit.lshift", "bit.rshift", "bit.arshift" }
local CAST = { f32 = "weft.float32", f64 = "weft.float64", i32 = "weft.int32" }
local ALLT = { "f32", "f64", "i32", "bool", "vec3", "mat33", "quat" }

local function generator(bytes)
  local pos, nb = 0, #bytes
  local function b()
    pos = pos + 1
    return pos <= nb and bytes:byte(pos) or 0
  end
  local function pick(t) return t[b() % #t + 1] end

  local scope = {}      -- { name=, ty=, arr=, ndim=, param= }
  local has_rng = false -- a local random state 'rng' after the tid
  local nvars, out = 0, {}
  local function vars_of(ty)
    local r = {}
    for _, v in ipairs(scope) do if not v.arr and v.ty == ty then r[#r + 1] = v end end
    return r
  end
  local function arrays_of(ty)
    local r = {}
    for _, v in ipairs(scope) do if v.arr and (ty == nil or v.ty == ty) then r[#r + 1] = v end end
    return r
  end

  local expr
  local function index(d, a)
    local function one() return b() % 3 == 0 and expr("i32", d + 1) or "i" end
    if a.ndim == 2 then return fmt("%s[%s][%s]", a.name, one(), one()) end
    return fmt("%s[%s]", a.name, one())
  end
  local function var_or(ty, dflt)
    local vs = vars_of(ty)
    if #vs > 0 and b() % 2 == 0 then return pick(vs).name end
    return dflt
  end

  local gen = {}
  gen.f32 = function(d, ty)
    local c = d >= 4 and b() % 3 or b() % 19
    if c == 0 then return var_or(ty, pick(ty == "f64" and FLIT64 or FLIT)) end
    if c == 1 then return fmt("%s(%s)", CAST[ty], pick(ty == "f64" and FLIT64 or FLIT)) end
    if c == 2 then
      local as = arrays_of(ty)
      if #as > 0 then return index(d, pick(as)) end
      return var_or(ty, "1.5")
    end
    if c == 3 then return fmt("(%s %s %s)", expr(ty, d + 1), pick(ARITH), expr(ty, d + 1)) end
    if c == 4 then return fmt("(-%s)", expr(ty, d + 1)) end
    if c == 5 then return fmt("%s(%s)", pick(F1), expr(ty, d + 1)) end
    if c == 6 then return fmt("%s(%s, %s)", pick(F2), expr(ty, d + 1), expr(ty, d + 1)) end
    if c == 7 then
      return fmt("weft.clamp(%s, %s, %s)", expr(ty, d + 1), expr(ty, d + 1), expr(ty, d + 1))
    end
    if c == 8 and ty == "f32" then return fmt("weft.dot(%s, %s)", expr("vec3", d + 1), expr("vec3", d + 1)) end
    if c == 9 and ty == "f32" then
      return fmt("%s.%s", expr("vec3", d + 1), pick({ "x", "y", "z" }))
    end
    if c == 10 and ty == "f32" then return fmt("weft.length(%s)", expr("vec3", d + 1)) end
    if c == 11 and ty == "f32" then
      return fmt("%s[%d][%d]", expr("mat33", d + 1), b() % 3, b() % 3)
    end
    if c == 12 then return fmt("%s(%s)", CAST[ty], expr("i32", d + 1)) end
    if c == 13 then
      return fmt("(%s and %s or %s)", expr("bool", d + 1), expr(ty, d + 1), expr(ty, d + 1))
    end
    if c == 14 then
      return fmt("weft.select(%s, %s, %s)", expr("bool", d + 1), expr(ty, d + 1), expr(ty, d + 1))
    end
    if c == 15 and ty == "f32" then return fmt("weft.determinant(%s)", expr("mat33", d + 1)) end
    if c == 16 then return fmt("(%s %s %s)", expr(ty, d + 1), pick(ARITH), pick(ty == "f64" and FLIT64 or FLIT)) end
    if c == 17 and ty == "f32" and has_rng then return "weft.randf(rng)" end
    if c == 18 and ty == "f32" then return fmt("%s.%s", expr("quat", d + 1), pick({ "x", "w" })) end
    return var_or(ty, pick(ty == "f64" and FLIT64 or FLIT))
  end
  gen.f64 = gen.f32
  gen.i32 = function(d)
    local c = d >= 4 and b() % 3 or b() % 13
    if c == 0 then return var_or("i32", pick(ILIT)) end
    if c == 1 then return "i" end
    if c == 2 then
      local as = arrays_of("i32")
      if #as > 0 then return index(d, pick(as)) end
      return pick(ILIT)
    end
    if c == 3 then return fmt("(%s %s %s)", expr("i32", d + 1), pick(IARITH), expr("i32", d + 1)) end
    if c == 4 then return fmt("%s(%s, %s)", pick(BITS), expr("i32", d + 1), expr("i32", d + 1)) end
    if c == 5 then return fmt("weft.int32(%s)", expr(pick({ "f32", "f64" }), d + 1)) end
    if c == 6 then
      local as = arrays_of()
      if #as > 0 then
        local a = pick(as)
        return b() % 2 == 0 and ("#" .. a.name) or fmt("%s.shape[%d]", a.name, b() % (a.ndim + 1))
      end
      return "0"
    end
    if c == 7 then return fmt("weft.floordiv(%s, %s)", expr("i32", d + 1), expr("i32", d + 1)) end
    if c == 8 then
      return fmt("%s(%s, %s)", pick({ "weft.min", "weft.max" }), expr("i32", d + 1), expr("i32", d + 1))
    end
    if c == 9 then return fmt("(-%s)", expr("i32", d + 1)) end
    if c == 10 then return fmt("(%s and %s or %s)", expr("bool", d + 1), expr("i32", d + 1), pick(ILIT)) end
    if c == 11 and has_rng then return "weft.int32(weft.randi(rng))" end
    return fmt("(%s %s %s)", expr("i32", d + 1), pick(IARITH), pick(ILIT))
  end
  gen.bool = function(d)
    local c = d >= 4 and b() % 2 or b() % 7
    if c == 0 then return var_or("bool", pick({ "true", "false" })) end
    if c == 1 then
      local ty = pick({ "f32", "i32", "f64" })
      return fmt("(%s %s %s)", expr(ty, d + 1), pick(CMP), expr(ty, d + 1))
    end
    if c == 2 then return fmt("(not %s)", expr("bool", d + 1)) end
    if c == 3 then return fmt("(%s and %s)", expr("bool", d + 1), expr("bool", d + 1)) end
    if c == 4 then return fmt("(%s or %s)", expr("bool", d + 1), expr("bool", d + 1)) end
    if c == 5 then return fmt("(%s == %s)", expr("bool", d + 1), expr("bool", d + 1)) end
    return fmt("(%s < %s)", expr("i32", d + 1), pick(ILIT))
  end
  gen.vec3 = function(d)
    local c = d >= 4 and b() % 2 or b() % 13
    if c == 0 then return var_or("vec3", "weft.vec3()") end
    if c == 1 then
      return fmt("weft.vec3(%s, %s, %s)", expr("f32", d + 1), expr("f32", d + 1), expr("f32", d + 1))
    end
    if c == 2 then
      local as = arrays_of("vec3")
      if #as > 0 then return index(d, pick(as)) end
      return "weft.vec3(1.0, 2.0, 3.0)"
    end
    if c == 3 then return fmt("(%s %s %s)", expr("vec3", d + 1), pick({ "+", "-" }), expr("vec3", d + 1)) end
    if c == 4 then return fmt("(%s * %s)", expr("vec3", d + 1), expr("f32", d + 1)) end
    if c == 5 then return fmt("(%s * %s)", expr("f32", d + 1), expr("vec3", d + 1)) end
    if c == 6 then return fmt("weft.cross(%s, %s)", expr("vec3", d + 1), expr("vec3", d + 1)) end
    if c == 7 then return fmt("weft.normalize(%s)", expr("vec3", d + 1)) end
    if c == 8 then return fmt("(%s * %s)", expr("mat33", d + 1), expr("vec3", d + 1)) end
    if c == 9 then return fmt("(-%s)", expr("vec3", d + 1)) end
    if c == 10 then return fmt("%s[%d]", expr("mat33", d + 1), b() % 3) end
    if c == 11 then return fmt("weft.quat_rotate(%s, %s)", expr("quat", d + 1), expr("vec3", d + 1)) end
    return fmt("(%s / %s)", expr("vec3", d + 1), expr("f32", d + 1))
  end
  gen.quat = function(d)
    local c = d >= 4 and b() % 2 or b() % 7
    if c == 0 then return var_or("quat", "weft.quat_identity()") end
    if c == 1 then
      return fmt("weft.quat(%s, %s, %s, %s)", expr("f32", d + 1), pick(FLIT), pick(FLIT), expr("f32", d + 1))
    end
    if c == 2 then
      return fmt("weft.quat_from_axis_angle(%s, %s)", expr("vec3", d + 1), expr("f32", d + 1))
    end
    if c == 3 then return fmt("weft.quat_inverse(%s)", expr("quat", d + 1)) end
    if c == 4 then return fmt("(%s * %s)", expr("quat", d + 1), expr("quat", d + 1)) end
    if c == 5 then return fmt("weft.normalize(%s)", expr("quat", d + 1)) end
    return fmt("(%s + %s)", expr("quat", d + 1), expr("quat", d + 1))
  end
  gen.mat33 = function(d)
    local c = d >= 4 and b() % 2 or b() % 8
    if c == 0 then return var_or("mat33", "weft.mat33()") end
    if c == 1 then
      local t = {}
      for k = 1, 9 do t[k] = k % 4 == 1 and expr("f32", d + 2) or pick(FLIT) end
      return "weft.mat33(" .. concat(t, ", ") .. ")"
    end
    if c == 2 then return fmt("(%s * %s)", expr("mat33", d + 1), expr("mat33", d + 1)) end
    if c == 3 then return fmt("weft.transpose(%s)", expr("mat33", d + 1)) end
    if c == 4 then return fmt("weft.inverse(%s)", expr("mat33", d + 1)) end
    if c == 5 then return fmt("weft.outer(%s, %s)", expr("vec3", d + 1), expr("vec3", d + 1)) end
    if c == 6 then return fmt("weft.diag(%s)", expr("vec3", d + 1)) end
    return fmt("(%s + %s)", expr("mat33", d + 1), expr("mat33", d + 1))
  end

  -- one in 32 expressions asks for a random type: type errors on purpose
  function expr(ty, d)
    if b() % 32 == 31 then ty = pick(ALLT) end
    return gen[ty](d or 0, ty)
  end

  local function newvar(ty)
    nvars = nvars + 1
    local v = { name = "v" .. nvars, ty = ty }
    return v
  end

  local block
  local function stmt(ind, depth, inloop)
    local c = b() % 14
    if depth >= 3 and c >= 6 and c <= 8 then c = 0 end
    local pad = ("  "):rep(ind)
    if c == 0 or c == 1 then
      local ty = pick(ALLT)
      local v = newvar(ty)
      local line = fmt("%slocal %s = %s", pad, v.name, expr(ty))
      scope[#scope + 1] = v
      return line
    elseif c == 2 or c == 3 then
      local as = arrays_of()
      if #as == 0 then return pad .. "local _ = 0" end
      local a = pick(as)
      return fmt("%s%s = %s", pad, index(0, a), expr(a.ty, 1))
    elseif c == 4 then
      local vs = {}
      for _, v in ipairs(scope) do if not v.arr and not v.param then vs[#vs + 1] = v end end
      if #vs == 0 then return pad .. "local _ = 1" end
      local v = pick(vs)
      return fmt("%s%s = %s", pad, v.name, expr(v.ty, 1))
    elseif c == 5 then
      local fs = arrays_of("f32")
      if #fs == 0 then return pad .. "local _ = 2" end
      local a = pick(fs)
      local at = a.ndim == 2 and fmt("%s, i, %s", a.name, expr("i32", 2)) or fmt("%s, i", a.name)
      return fmt("%sweft.%s(%s, %s)", pad, pick({ "atomic_add", "atomic_min", "atomic_max" }), at,
        expr("f32", 1))
    elseif c == 6 then
      local s = fmt("%sif %s then\n%s", pad, expr("bool"), block(ind + 1, depth + 1, inloop))
      if b() % 2 == 1 then s = s .. fmt("\n%selse\n%s", pad, block(ind + 1, depth + 1, inloop)) end
      return s .. "\n" .. pad .. "end"
    elseif c == 7 then
      local j = newvar("i32")
      local lo, hi = pick(ILIT), b() % 4 == 0 and expr("i32", 2) or tostring(b() % 6)
      local step = b() % 3 == 0 and (", " .. pick({ "1", "2", "-1", "0", "3" })) or ""
      local mark = #scope
      scope[#scope + 1] = j
      local body = block(ind + 1, depth + 1, true)
      for k = #scope, mark + 1, -1 do scope[k] = nil end
      return fmt("%sfor %s = %s, %s%s do\n%s\n%send", pad, j.name, lo, hi, step, body, pad)
    elseif c == 8 then
      local n = newvar("i32")
      scope[#scope + 1] = n
      local body = block(ind + 1, depth + 1, true)
      return fmt("%slocal %s = 0\n%swhile %s < %d do\n%s  %s = %s + 1\n%s\n%send", pad, n.name, pad,
        n.name, b() % 5, pad, n.name, n.name, body, pad)
    elseif c == 9 then
      return fmt('%sprint("%%d %%f", %s, %s)', pad, expr("i32", 2), expr("f32", 2))
    elseif c == 10 and inloop then
      return pad .. "do break end"
    elseif c == 11 and b() % 4 == 0 then
      return pad .. "do return end"
    elseif c == 12 then
      return fmt("%slocal %s = h(%s, %s)", pad, newvar("f32").name, expr("f32", 1), expr("f32", 1))
    end
    local ty = pick(ALLT)
    local v = newvar(ty)
    local line = fmt("%slocal %s = %s", pad, v.name, expr(ty))
    scope[#scope + 1] = v
    return line
  end
  function block(ind, depth, inloop)
    local n = 1 + b() % (depth == 0 and 10 or 4)
    local mark, t = #scope, {}
    for k = 1, n do t[k] = stmt(ind, depth, inloop) end
    for k = #scope, mark + 1, -1 do scope[k] = nil end
    return concat(t, "\n")
  end

  -- the signature
  local np = 1 + b() % 5
  local decl, names = {}, {}
  for k = 1, np do
    local pt = pick(PTYPES)
    local name = "p" .. k
    names[k] = name
    if pt[1] then decl[#decl + 1] = fmt("%s = %s, ", name, pt[1]) end
    scope[#scope + 1] = { name = name, ty = pt[3] or pt[2], arr = pt[2] == "arr",
      ndim = pt[4], param = true }
  end
  scope[#scope + 1] = { name = "i", ty = "i32", param = true }
  local hbody = b() % 3 == 0 and "a * b + 1.0" or pick({ "weft.min(a, b)", "a", "a / b",
    "weft.sqrt(a * a + b * b)" })
  has_rng = b() % 3 == 0
  local rng = has_rng and fmt("  local rng = weft.rand_init(%s, i)\n", pick(ILIT)) or ""
  local body = rng .. block(1, 0, false)
  return concat({
    'local weft = require "weft"',
    fmt("local h = weft.func{ a = weft.float32, b = weft.float32, function(a, b) return %s end }", hbody),
    fmt("return weft.kernel{ %sfunction(%s)", concat(decl), concat(names, ", ")),
    "  local i = weft.tid()",
    body,
    "end }", "" }, "\n")
end

function fuzz_gen(bytes, launch)
  local src = generator(bytes)
  fuzz_last_src = src
  if os.getenv("WEFT_FUZZ_SHOW") == "1" then io.stderr:write(src, "\n") end
  return fuzz_one(src, launch)
end
