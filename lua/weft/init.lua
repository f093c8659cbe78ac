-- weft: data-parallel kernels written in Lua, compiled to native code.
-- This file assembles the module from its parts; each part is a function
-- taking the weft table and filling in its piece of the API.
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
weft._C = cdef.C
weft._libpath = cdef.libpath

-- One runtime per LuaJIT state, freed when the module table is collected.
local rt = cdef.C.wf_rt_new()
if rt == nil then error("weft: cannot create the runtime (out of memory)", 0) end
weft._rt = ffi.gc(rt, cdef.C.wf_rt_free)

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
weft._core = core

-- Raise the runtime's last message as a Lua error at the caller's level.
function weft._check(status, level)
  if status ~= 0 then
    error(ffi.string(cdef.C.wf_rt_errmsg(weft._rt)), (level or 1) + 1)
  end
end

for _, part in ipairs { "types", "array", "builtins", "kernel", "launch", "tape", "device", "interop", "info" } do
  require("weft." .. part)(weft)
end

return weft
