-- extract-seeds.lua: write the seed inputs of the fuzz harnesses from the
-- tests that already exist, one file per input:
--   OUT/front/  each spec/fails/*.lua as it is, and each weft.kernel{...}
--               found in spec/*_spec.lua as a chunk returning it
--   OUT/ir/     each IR text case of tests/ir/*.ir (the part before the
--               "---- " line of each "==== " section)
--   OUT/dlpack/ a few tensors, good and bad, for fuzz_dlpack
-- Usage (from the source root): luajit tests/fuzz/extract-seeds.lua OUT
-- The corpus in tests/fuzz/<harness>/corpus started from these seeds; merge
-- new ones in with: build-fuzz/fuzz_front -merge=1 tests/fuzz/front/corpus OUT/front
local out = assert(arg[1], "usage: luajit tests/fuzz/extract-seeds.lua OUTDIR")

local function lines_of(cmd)
  local p = assert(io.popen(cmd))
  local t = {}
  for l in p:lines() do t[#t + 1] = l end
  p:close()
  return t
end

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local count = {}
local function put(kind, name, text)
  os.execute(("mkdir -p '%s/%s'"):format(out, kind))
  count[kind] = (count[kind] or 0) + 1
  local f = assert(io.open(("%s/%s/%s"):format(out, kind, name), "wb"))
  f:write(text)
  f:close()
end

-- The end of the balanced {...} or (...) that opens at position i, skipping
-- strings and comments well enough for the specs.
local function balanced(s, i)
  local open = s:sub(i, i)
  local close = open == "{" and "}" or ")"
  local depth, j = 0, i
  while j <= #s do
    local c = s:sub(j, j)
    if s:sub(j, j + 1) == "--" then
      local e = s:find("\n", j, true)
      if not e then return nil end
      j = e
    elseif c == '"' or c == "'" then
      local e = j + 1
      while e <= #s and s:sub(e, e) ~= c do
        if s:sub(e, e) == "\\" then e = e + 1 end
        e = e + 1
      end
      j = e
    elseif s:sub(j, j + 1) == "[[" then
      local e = s:find("]]", j + 2, true)
      if not e then return nil end
      j = e + 1
    elseif c == open then
      depth = depth + 1
    elseif c == close then
      depth = depth - 1
      if depth == 0 then return j end
    end
    j = j + 1
  end
  return nil
end

for _, path in ipairs(lines_of("ls spec/fails/*.lua")) do
  put("front", "fails_" .. path:match("([^/]+)%.lua$"), slurp(path))
end

-- the aliases the specs declare at their top
local header = 'local weft = require "weft"\n'
  .. "local A, i32, f32, f64 = weft.array, weft.int32, weft.float32, weft.float64\n"
  .. "return "
for _, path in ipairs(lines_of("ls spec/*_spec.lua")) do
  local s = slurp(path)
  local base = path:match("([^/]+)_spec%.lua$")
  local k, pos = 0, 1
  while true do
    local a, b = s:find("weft%.kernel%s*[{(]", pos)
    if not a then break end
    local e = balanced(s, b)
    if not e then break end
    k = k + 1
    put("front", ("%s_%03d"):format(base, k), header .. s:sub(a, e) .. "\n")
    pos = e + 1
  end
end

for _, path in ipairs(lines_of("ls tests/ir/*.ir")) do
  local s = slurp(path) .. "\n==== "
  local base = path:match("([^/]+)%.ir$")
  local k = 0
  for body in s:gmatch("==== [^\n]*\n(.-)\n==== ") do
    local ir = body:match("^(.-)\n%-%-%-%- ") or body
    k = k + 1
    put("ir", ("%s_%03d"):format(base, k), ir .. "\n")
  end
end

-- DLPack tensors in fuzz_dlpack's input layout (see that file): mode,
-- element type, ndim, dtype code, bits selector, lanes, device, device id,
-- byte_offset selector, shape and strides selectors (0x70 + n is n, 0x6n
-- is -n, 0x00 -1, 0x10 INT64_MAX, 0x20 INT64_MIN, 0x30 2^62), buffer size
-- / 4, buffer bytes, version major, flags.
local function tensor(t)
  local b = { t.mode or 0, t.el or 0, t.ndim or 1, t.code or 2, t.bits or 2, 0, 0, 0, t.off or 0 }
  for _, v in ipairs(t.shape or { 0x78 }) do b[#b + 1] = v end
  for _, v in ipairs(t.strides or { 0x71 }) do b[#b + 1] = v end
  local len = t.len or 8
  b[#b + 1] = len
  for k = 1, len * 4 do b[#b + 1] = (k * 37) % 256 end
  b[#b + 1] = t.major or 1
  b[#b + 1] = t.flags or 0
  local c = {}
  for k, v in ipairs(b) do c[k] = string.char(v) end
  return table.concat(c)
end
local tensors = {
  compact_f32 = {},
  versioned_readonly = { mode = 1, flags = 1 },
  strided_2d = { mode = 8, ndim = 2, shape = { 0x72, 0x73 }, strides = { 0x71, 0x72 } },
  negative_stride = { mode = 8, shape = { 0x74 }, strides = { 0x6f }, off = 0xbc },
  zero_d = { ndim = 0, shape = {}, strides = {} },
  vec3_trailing = { el = 4, ndim = 2, shape = { 0x72, 0x73 }, strides = { 0x73, 0x71 } },
  int8 = { code = 0, bits = 0 },
  float64_offset = { bits = 3, off = 0xa8, shape = { 0x72 } },
  null_shape = { mode = 6 },
  null_data = { mode = 0x20 },
  offset_2p63 = { off = 0x20 },
  negative_shape = { shape = { 0x63 } },
  huge_stride = { mode = 8, shape = { 0x72 }, strides = { 0x10 } },
  huge_shape = { shape = { 0x10 } },
  wild_data = { mode = 0x30, off = 0x40 },
  five_dims = { ndim = 5, shape = { 0x71, 0x71, 0x71, 0x71, 0x72 }, strides = {} },
}
for name, t in pairs(tensors) do put("dlpack", name, tensor(t)) end

for kind, n in pairs(count) do print(("%s: %d seeds"):format(kind, n)) end
