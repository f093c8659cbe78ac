-- spec/helpers/ptx_collect.lua -- collects every IR module the spec suite
-- compiles, for spec/zz_ptx_suite_spec.lua (which runs last and compiles
-- each one to PTX for sm_75/80/90).
--
-- Installing it: busted's helper option (`helper = "spec/helpers/ptx_collect.lua"`
-- in .busted) or spec/aa_ptx_collect_spec.lua, which sorts before the other
-- specs, requires this file. It sets debug.getregistry()["weft.module_hook"],
-- which lua/weft/kernel.lua calls each time it compiles a kernel for a
-- signature. The registry outlives busted's per-file insulation (each spec
-- file gets a fresh copy of the Lua layer), so modules from every file land
-- in one list:
--
--   registry["weft.ptx_suite"] = { { name =, where = "chunk:line", sig =,
--                                    module = <weft.module> }, ... }
--
-- Installing twice keeps the first list. The hook never raises: a failure
-- here must not change the outcome of the spec that compiled the kernel.
local reg = debug.getregistry()
local M = {}

local LIST = "weft.ptx_suite"

-- "chunk:line" of the kernel's Lua function (chunk as Lua shows it).
local function where(k)
  local ok, info = pcall(debug.getinfo, k.fn, "S")
  if not ok or not info then return "?" end
  local src = info.source or "?"
  if src:sub(1, 1) == "@" or src:sub(1, 1) == "=" then src = src:sub(2) end
  return src .. ":" .. tostring(info.linedefined)
end

function M.install()
  if reg[LIST] then return reg[LIST] end
  local list = {}
  reg[LIST] = list
  reg["weft.module_hook"] = function(k, module, sig)
    pcall(function()
      list[#list + 1] = { name = tostring(k.name), where = where(k), sig = sig or "",
                          module = module }
    end)
  end
  return list
end

-- The collected list, or nil when the collector was not installed.
function M.list() return reg[LIST] end

M.install()
return M
