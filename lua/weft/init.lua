-- weft: data-parallel kernels written in Lua, compiled to native code.
-- This file assembles the module from its parts; each part is a function
-- taking the public module table and the private one, and filling in its
-- piece of the API.
--
-- The private table P is how the parts talk to each other (the runtime
-- handle, the compiler module, error helpers, the tape and capture hooks,
-- the launch paths); the public module holds only the API. P lives as long
-- as this copy of the module; tests and tools reach it with
-- require "weft.internal" after require "weft". The one private field left
-- on the module is weft._interop, the table the C API (src/interop/capi.c)
-- and the Python package call by name.
local ffi = require "ffi"
local cdef = require "weft.cdef"

local weft = {
  version = "0.1.0",
  -- cuda_fast_compile: NVRTC's --Ofast-compile level for CUDA kernels
  -- ("min", "mid", "max", or "0" for NVVM's full optimization)
  -- mode: "release" (bounds-checked, the checks the compiler can prove
  -- are done once per launch or loop), "fast" (no checks), "debug" (every
  -- check, division checks); the default comes from WEFT_MODE
  config = { mode = "release", verify_cuda = false, cuda_fast_compile = "min" },
}
do
  local m = os.getenv("WEFT_MODE")
  if m and m ~= "" then weft.config.mode = m end
end

local P = { C = cdef.C, libpath = cdef.libpath }

-- One runtime per LuaJIT state, freed when the module is collected.
local rt = cdef.C.wf_rt_new()
if rt == nil then error("weft: cannot create the runtime (out of memory)", 0) end
P.rt = ffi.gc(rt, cdef.C.wf_rt_free)

-- The compiler and other Lua C functions live in the same library. Opened
-- once per LuaJIT state (kept in the registry across module reloads).
local reg = debug.getregistry()
local core = reg["weft.core"]
if not core then
  local loader = package.preload["weft.core"]
  if not loader and cdef.libpath then
    loader = assert(package.loadlib(cdef.libpath, "luaopen_weft_core"))
  end
  if not loader then error("weft: cannot find luaopen_weft_core in libweft", 0) end
  core = loader("weft.core")
  reg["weft.core"] = core
end
P.core = core

-- A weft_State (src/interop/state.c) leaves its interrupt request here;
-- kernels of this runtime poll it.
local intr = reg["weft.intr"]
if intr ~= nil then cdef.C.wf_rt_attach_intr(P.rt, intr) end

-- Raise the runtime's last message as a Lua error at the caller's level.
function P.check(status, level)
  if status ~= 0 then
    error(ffi.string(cdef.C.wf_rt_errmsg(P.rt)), (level or 1) + 1)
  end
end

-- Parts not yet written against P publish their helpers as weft._name:
-- each is copied to P.name after its part loads (later parts may still
-- read weft._name while loading), and all leave the module at the end.
local function adopt()
  for key, v in pairs(weft) do
    if type(key) == "string" and key:sub(1, 1) == "_" and key ~= "_interop" then P[key:sub(2)] = v end
  end
end

for _, part in ipairs { "types", "array", "builtins", "kernel", "stdlib", "marshal", "launch", "tape",
                        "device", "interop", "info", "volume", "hashgrid", "geom", "linalg" } do
  require("weft." .. part)(weft, P)
  adopt()
end
for key in pairs(weft) do
  if type(key) == "string" and key:sub(1, 1) == "_" and key ~= "_interop" then weft[key] = nil end
end

-- A strict module: reading a name weft does not have is an error with a
-- suggestion ("weft has no field 'flaot32' (did you mean weft.float32?)"),
-- not a nil that would silently make a kernel parameter generic. Only
-- names absent from the table reach __index, so every name a part or a
-- later addition defines reads as usual. The kernel compiler reads fields
-- from C (lua_getfield): there a missing name stays nil, and the front
-- end reports it at the kernel's line.
do
  -- edit distance with transpositions (flaot -> float is one edit)
  local function distance(a, b)
    local la, lb = #a, #b
    if math.abs(la - lb) > 2 then return 3 end
    local d = {}
    for i = 0, la do d[i] = { [0] = i } end
    for j = 1, lb do d[0][j] = j end
    for i = 1, la do
      local ca = a:byte(i)
      for j = 1, lb do
        local cb = b:byte(j)
        local v = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (ca == cb and 0 or 1))
        if i > 1 and j > 1 and ca == b:byte(j - 1) and a:byte(i - 1) == cb then
          v = math.min(v, d[i - 2][j - 2] + 1)
        end
        d[i][j] = v
      end
    end
    return d[la][lb]
  end

  local function missing(t, key)
    if type(key) ~= "string" then return nil end
    local info = debug.getinfo(2, "S")
    if info and info.what == "C" then return nil end
    local best, bd = nil, #key <= 4 and 1 or 2 -- the farthest a suggestion may be
    for name in pairs(t) do
      if type(name) == "string" and name:sub(1, 1) ~= "_" then
        local d = distance(key:lower(), name:lower())
        if d < bd or (d == bd and best and name < best) or (d <= bd and not best) then
          best, bd = name, d
        end
      end
    end
    error(string.format("weft has no field '%s'%s", key,
                        best and string.format(" (did you mean weft.%s?)", best) or ""), 2)
  end
  setmetatable(weft, { __index = missing })
end

package.loaded["weft.internal"] = P
return weft
