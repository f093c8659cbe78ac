-- The Warp port: expands tests/warp/cases.lua into concrete cases (types,
-- expressions, inputs), runs each as a weft kernel, and compares with
-- Warp's outputs recorded in tests/warp/ref.lua (written by gen_ref.py).
--
--   luajit tests/warp/harness.lua          -- run, print the match rate
--   luajit tests/warp/harness.lua --json   -- the cases, for gen_ref.py
local M = {}

local ROWS = 3 -- inputs per case

-- the number of scalars of a type name, and whether it is an integer
local SIZES = { vec2 = 2, vec3 = 3, vec4 = 4, mat22 = 4, mat33 = 9, mat44 = 16, quat = 4,
                transform = 7, spatial_vector = 6, spatial_matrix = 36 }
local function scalars(tn)
  local base = tn:match("^(%a+%d*)[fhd]$") or tn:match("^(spatial_%a+)[fhd]$")
  return SIZES[base] or 1
end

-- A small deterministic generator: multiples of 1/16 in [lo, hi], exact
-- in every float type; never 0 (division cases).
local function gen(seed)
  local s = seed
  return function(lo, hi)
    s = (s * 1103515245 + 12345) % 2147483648
    local steps = math.floor((hi - lo) * 16)
    local v = lo + (s % (steps + 1)) / 16
    if v == 0 then v = 1 / 16 end
    return v
  end
end

local function subst(s, sfx)
  local bits = ({ h = "16", f = "32", d = "64" })[sfx]
  return (s:gsub("{s}", sfx):gsub("{b}", bits))
end

-- the concrete cases: { id, from, args = {type names}, out, lua, py, inputs = {{arg values}} }
function M.cases()
  local out = {}
  local defs = dofile((M.dir or "tests/warp") .. "/cases.lua")
  for n, c in ipairs(defs) do
    for sfx in (c.dtypes or "fd"):gmatch(".") do
      local r = gen(n * 7919 + (sfx == "d" and 3 or 0))
      local args = {}
      for i, a in ipairs(c[2]) do args[i] = subst(a, sfx) end
      local lo, hi = (c.range or { -2, 2 })[1], (c.range or { -2, 2 })[2]
      local inputs = {}
      for row = 1, ROWS do
        inputs[row] = {}
        for i, a in ipairs(args) do
          local k = scalars(a)
          if k == 1 then inputs[row][i] = r(lo, hi)
          else
            local v = {}
            for j = 1, k do v[j] = r(lo, hi) end
            local dim = tonumber(a:match("^mat(%d)%d"))
            if dim then -- a matrix: its rows
              local m = {}
              for ri = 1, dim do m[ri] = { unpack(v, (ri - 1) * dim + 1, ri * dim) } end
              v = m
            end
            inputs[row][i] = v
          end
        end
      end
      out[#out + 1] = { id = string.format("%03d%s", n, sfx), from = c[1], args = args, out = subst(c[3], sfx),
        py = subst(c.py or c[4], sfx), lua = subst(c.lua or c[4], sfx), inputs = inputs,
        pre_py = subst(c.ppre or c.pre or "", sfx),
        pre_lua = subst(c.lpre or (c.pre and "local " .. c.pre) or "", sfx) }
    end
  end
  return out
end

local NAMES = "abcdefgh"

-- the kernel of a case (weft), or nil and the compile error
local function kernel(weft, c)
  local params, loads = {}, {}
  for i = 1, #c.args do
    local x = NAMES:sub(i, i)
    params[#params + 1] = string.format("%s_ = weft.array(weft.%s)", x:upper(), c.args[i])
    loads[#loads + 1] = string.format("local %s = %s_[i]", x, x:upper())
  end
  local names = {}
  for i = 1, #c.args do names[i] = NAMES:sub(i, i):upper() .. "_" end
  local src = string.format("local weft = ...\nlocal wp = weft\nreturn weft.kernel{ %s, OUT = weft.array(weft.%s),\n" ..
    "function(%s, OUT)\n  local i = weft.tid()\n  %s\n  %s\n  OUT[i] = %s\nend }\n", table.concat(params, ", "),
    c.out, table.concat(names, ", "), table.concat(loads, " "), c.pre_lua, c.lua)
  local chunk = assert(load(src)) -- the source is the chunk name: kernels read it
  return pcall(chunk, weft)
end

local function flatten(v, out)
  out = out or {}
  if type(v) == "table" then for _, x in ipairs(v) do flatten(x, out) end
  elseif type(v) == "boolean" then out[#out + 1] = v and 1 or 0
  else out[#out + 1] = tonumber(v) end
  return out
end

-- run a case: the flat list of outputs, or nil and the error
function M.run(weft, c)
  local ok, k = kernel(weft, c)
  if not ok then return nil, k end
  local arrays = {}
  for i, t in ipairs(c.args) do
    local col = {}
    for row = 1, #c.inputs do col[row] = c.inputs[row][i] end
    arrays[i] = weft.array(col, weft[t])
  end
  local y = weft.zeros(#c.inputs, weft[c.out])
  local ok2, err = pcall(weft.launch, k, #c.inputs, arrays, { outputs = { y } })
  if not ok2 then return nil, err end
  return flatten(y:totable())
end

-- agree within the type's precision: float32 2^-18 relative (a few ulp
-- through a chain of operations), float64 1e-12, NaN with NaN
function M.close(got, want, out)
  if #got ~= #want then return false end
  local rel = (out:match("d$") or out:match("64$")) and 1e-12 or 2 ^ -18
  for i = 1, #want do
    local a, b = got[i], want[i]
    if b == "nan" then
      if a == a then return false end
    else
      if b == "inf" then b = 1 / 0 elseif b == "-inf" then b = -1 / 0 end
      if not (a == b or math.abs(a - b) <= rel * math.max(math.abs(b), 1)) then return false end
    end
  end
  return true
end

-- run every case against ref: results { id = { ok, got, err } }, counts
function M.check(weft, ref)
  local res, n, ok, missing = {}, 0, 0, 0
  for _, c in ipairs(M.cases()) do
    local want = ref[c.id]
    if not want then missing = missing + 1
    else
      n = n + 1
      local got, err = M.run(weft, c)
      local good = got ~= nil and M.close(got, want, c.out)
      if good then ok = ok + 1 end
      res[#res + 1] = { case = c, ok = good, got = got, want = want, err = err }
    end
  end
  return res, n, ok, missing
end

-- JSON of the cases for gen_ref.py
local function json(v)
  local t = type(v)
  if t == "table" then
    if #v > 0 or next(v) == nil then
      local parts = {}
      for i, x in ipairs(v) do parts[i] = json(x) end
      return "[" .. table.concat(parts, ",") .. "]"
    end
    local parts = {}
    for k, x in pairs(v) do parts[#parts + 1] = json(k) .. ":" .. json(x) end
    return "{" .. table.concat(parts, ",") .. "}"
  elseif t == "string" then
    return '"' .. v:gsub('[%c"\\]', function(ch) return string.format("\\u%04x", ch:byte()) end) .. '"'
  else return string.format("%.17g", v) end
end
M.json = json

if arg and arg[0] and arg[0]:match("harness%.lua$") then
  M.dir = arg[0]:match("^(.*)/[^/]*$") or "."
  if arg[1] == "--json" then
    io.write(json(M.cases()), "\n")
  else
    local weft = require "weft"
    local res, n, ok, missing = M.check(weft, dofile(M.dir .. "/ref.lua"))
    for _, r in ipairs(res) do
      if not r.ok then
        print(string.format("MISMATCH %s %s: %s", r.case.id, r.case.lua, r.err and tostring(r.err):match("[^\n]*") or
          ("got " .. table.concat(r.got, " ") .. " want " .. table.concat(r.want, " "))))
      end
    end
    print(string.format("%d of %d cases match Warp (%.1f%%); %d without a reference", ok, n, 100 * ok / math.max(n, 1), missing))
  end
end
return M
