-- check_includes.lua -- the include arrows of src/ point one way:
--
--   util <- ir <- (front, ad) <- (cpu, cuda) <- runtime <- bindings <- (interop, cli)
--
-- (bindings: the Lua C module weft.core; interop's C API for hosts opens a
-- Lua state and preloads it.)
-- A file under src/F/ may include "G/x.h" only when G is F or a folder to
-- F's left; and runtime includes no cpu header (the CPU backend is reached
-- through the Lua bindings and the kernel ABI of ir/abi.h only). Headers
-- named without a folder must be weft.h (include/) or a generated header
-- listed in GENERATED. System headers (<...>) are not checked.
--
--   luajit tests/deps/check_includes.lua SRC_DIR     check a tree; exit 1 on
--                                                    a wrong arrow
--   luajit tests/deps/check_includes.lua --self-test check that a planted
--                                                    bad include fails
-- ctest runs both (CMakeLists.txt).

local RANK = { util = 0, geom = 0.5, ir = 1, front = 2, ad = 2, cpu = 3, cuda = 3, runtime = 4,
               bindings = 5, interop = 6, cli = 6 }
local FORBIDDEN = { runtime = { cpu = "the CPU backend: launches go through ir/abi.h" } }
local GENERATED = { ["prelude_cuh.h"] = true, ["query_h.h"] = true, ["hashgrid_h.h"] = true,
                    ["volume_h.h"] = true, ["geomfn_h.h"] = true, ["geom_bc.h"] = true } -- build-dir headers (cmake/embed.cmake)
local PUBLIC = { ["weft.h"] = true }
-- Known wrong arrows still to be fixed, "file:header" = why. Each must
-- still occur (a fixed one is an error until it leaves this list), so the
-- list only shrinks.
local PENDING = {
}

-- Files under dir/F/ for every folder F (one level, .c and .h).
local function files(dir)
  local out = {}
  local p = assert(io.popen("cd '" .. dir .. "' && ls -1 */*.c */*.h 2>/dev/null"))
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  return out
end

-- The problems of one file: "path:line: message" strings.
local function check_file(dir, rel, problems, pending_seen)
  local folder = rel:match("^([^/]+)/")
  local rank = RANK[folder]
  local f = assert(io.open(dir .. "/" .. rel, "r"))
  local n = 0
  for line in f:lines() do
    n = n + 1
    local inc = line:match('^%s*#%s*include%s+"([^"]+)"')
    if inc then
      local where = rel .. ":" .. n .. ": "
      local to = inc:match("^([^/]+)/")
      local pend = PENDING[rel .. ":" .. inc]
      if pend and pending_seen then
        pending_seen[rel .. ":" .. inc] = true
      elseif not rank then
        problems[#problems + 1] = where .. "folder '" .. folder .. "' has no place in the arrows"
      elseif not to then
        if not (PUBLIC[inc] or GENERATED[inc]) then
          problems[#problems + 1] = where .. '"' .. inc .. '" names no folder'
        end
      elseif RANK[to] == nil then
        problems[#problems + 1] = where .. "unknown folder in \"" .. inc .. '"'
      elseif to ~= folder and RANK[to] >= rank then
        problems[#problems + 1] = string.format('%s%s (%s) includes "%s": %s is not below %s',
                                                where, folder, rank, inc, to, folder)
      elseif FORBIDDEN[folder] and FORBIDDEN[folder][to] then
        problems[#problems + 1] = string.format('%s%s includes "%s": not %s',
                                                where, folder, inc, FORBIDDEN[folder][to])
      end
    end
  end
  f:close()
end

-- pending: honour PENDING (the real tree), else check every include.
local function check_tree(dir, pending)
  local problems, seen = {}, pending and {} or nil
  local list = files(dir)
  for _, rel in ipairs(list) do check_file(dir, rel, problems, seen) end
  if pending then
    for k, why in pairs(PENDING) do
      if not seen[k] then problems[#problems + 1] = k .. ": fixed? remove it from PENDING" end
    end
  end
  return problems, #list
end

local function self_test()
  local tmp = os.tmpname()
  os.remove(tmp)
  assert(os.execute("mkdir -p '" .. tmp .. "/ir' '" .. tmp .. "/runtime' '" .. tmp .. "/util'") == 0)
  local function put(rel, text)
    local f = assert(io.open(tmp .. "/" .. rel, "w"))
    f:write(text)
    f:close()
  end
  put("util/u.h", "#include <stdio.h>\n")
  put("ir/ir.h", '#include "util/u.h"\n#include "weft.h"\n')
  put("runtime/r.c", '#include "ir/ir.h"\n#include "runtime/r.h"\n')
  put("runtime/r.h", "\n")
  local ok, n = check_tree(tmp)
  local good = #ok == 0 and n == 4
  put("ir/bad.c", '#include "ir/ir.h"\n\n#include "runtime/r.h"\n')
  local bad = check_tree(tmp)
  local caught = #bad == 1 and bad[1]:find('^ir/bad.c:3: ir %(1%) includes "runtime/r.h"') ~= nil
  os.execute("rm -rf '" .. tmp .. "'")
  if not good then print("self-test: a clean tree was reported: " .. table.concat(ok, "; ")) end
  if not caught then print("self-test: the bad include was not reported as expected: " .. table.concat(bad, "; ")) end
  return good and caught
end

if arg[1] == "--self-test" then
  if self_test() then
    print("check_includes self-test: ok")
    os.exit(0)
  end
  os.exit(1)
end

local dir = arg[1] or "src"
local problems, n = check_tree(dir, true)
for _, p in ipairs(problems) do io.stderr:write(p, "\n") end
for k, why in pairs(PENDING) do print("pending: " .. k .. " (" .. why .. ")") end
if #problems > 0 then
  io.stderr:write(#problems, " include(s) against the arrows (tests/deps/check_includes.lua)\n")
  os.exit(1)
end
print(string.format("check_includes: %d files, arrows point one way", n))
