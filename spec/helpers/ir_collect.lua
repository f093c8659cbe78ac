-- spec/helpers/ir_collect.lua -- writes the IR text of every module the
-- spec suite compiles to a directory, for spec/suite/ir_suite.lua (run as
-- its own busted invocation by scripts/run-tests) to parse back, verify and
-- compile to PTX.
--
-- Installed before any spec file runs by busted's helper option (.busted,
-- task "default"), so no spec has to sort first. It is active only when
-- WEFT_IR_SUITE_DIR names a directory (scripts/run-tests sets
-- $BUILD/ir-suite and empties it first); otherwise it does nothing.
--
-- It sets debug.getregistry()["weft.module_hook"], which lua/weft/kernel.lua
-- calls each time it compiles a kernel for a signature. The registry
-- outlives busted's per-file insulation, so one hook serves every file.
-- Each distinct IR text is written once, to <hash>.ir:
--
--   ; kernel 'name' (chunk:line) [signature]
--   <the text core.ir prints>
--
-- The hook never raises: a failure here must not change the outcome of the
-- spec that compiled the kernel. It is written to collect-errors.txt in
-- the directory instead, and the suite check fails on that file.
local reg = debug.getregistry()
local M = {}

local STATE = "weft.ir_collect"
M.ERRORS = "collect-errors.txt" -- in the directory: what the hook failed on

-- "chunk:line" of the kernel's Lua function (chunk as Lua shows it).
local function where(k)
  local ok, info = pcall(debug.getinfo, k.fn, "S")
  if not ok or not info then return "?" end
  return tostring(info.short_src) .. ":" .. tostring(info.linedefined)
end

-- A 64-bit FNV-1a of s as 16 hex digits (two 32-bit lanes with different
-- offsets): the file name of a module, so reruns and parallel writers agree.
local function hash(s)
  local tobit, bxor, shl = bit.tobit, bit.bxor, bit.lshift
  local h1, h2 = tobit(0x811c9dc5), tobit(0x050c5d1f)
  for i = 1, #s do
    local c = s:byte(i)
    -- times the FNV prime 2^24 + 403, exact in doubles, wrapped to 32 bits
    h1 = bxor(h1, c)
    h1 = tobit(shl(h1, 24) + h1 * 403)
    h2 = bxor(h2, c + 0x5b)
    h2 = tobit(shl(h2, 24) + h2 * 403)
  end
  return bit.tohex(h1) .. bit.tohex(h2)
end
M.hash = hash

-- The label line of a module file (also how the suite names a kernel).
function M.label(name, at, sig)
  sig = tostring(sig or "")
  local s = string.format("kernel '%s' (%s)%s", tostring(name), at, sig ~= "" and " [" .. sig .. "]" or "")
  return (s:gsub("[\r\n]", " "))
end

-- The module text and label of a file's contents: label, text (nil, nil if
-- the first line is not a label).
function M.split(contents)
  local label, text = contents:match("^; ([^\n]*)\n(.*)$")
  return label, text
end

-- The weft core (the Lua C functions of libweft): one per LuaJIT state,
-- kept in the registry by lua/weft/init.lua across busted's reloads.
local function core()
  local c = reg["weft.core"]
  if c then return c end
  local internal = package.loaded["weft.internal"]
  return type(internal) == "table" and internal.core or nil
end

function M.install(dir)
  dir = dir or os.getenv("WEFT_IR_SUITE_DIR")
  if not dir or dir == "" then return nil end
  local st = reg[STATE]
  if st then return st end
  os.execute("mkdir -p '" .. dir:gsub("'", "'\\''") .. "'")
  -- a name no other process uses, for the files written aside
  local tn = os.tmpname()
  os.remove(tn)
  st = { dir = dir, seen = {}, written = 0, failed = 0, tag = tn:match("[^/]+$") }
  reg[STATE] = st
  reg["weft.module_hook"] = function(k, module, sig)
    local ok, err = pcall(function()
      local text = core().ir(module)
      if st.seen[text] then return end
      st.seen[text] = true
      -- written aside and renamed: scripts/run-tests runs two spec
      -- processes, which may write the same module at once
      local path = dir .. "/" .. hash(text) .. ".ir"
      local tmp = path .. "." .. st.tag .. ".tmp"
      local f = assert(io.open(tmp, "wb"))
      f:write("; ", M.label(k.name, where(k), sig), "\n", text)
      f:close()
      assert(os.rename(tmp, path))
      st.written = st.written + 1
    end)
    if not ok then
      -- told to the suite check, which fails on it (here nothing may raise)
      st.failed = st.failed + 1
      pcall(function()
        local f = io.open(dir .. "/" .. M.ERRORS, "ab")
        f:write(M.label(k.name, where(k), sig), ": ", tostring(err), "\n")
        f:close()
      end)
    end
  end
  return st
end

M.install()
return M
