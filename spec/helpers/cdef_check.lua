-- spec/helpers/cdef_check.lua -- checks lua/weft/cdef.lua against the C
-- declarations it mirrors, with the C compiler as the judge.
--
-- The text cdef.lua hands to ffi.cdef is captured by running the module
-- with a stand-in ffi (nothing is declared or loaded). Each declaration
-- becomes a check in one generated C file that includes the real headers
-- (include/weft.h and every header a section banner of the cdef names,
-- e.g. "/* ---- cuda (src/cuda/wf_cuda.h) ---- */"):
--
--   function   the C function's type must be compatible with the cdef's
--              prototype (__builtin_types_compatible_p on pointers to them)
--   struct     each field exists in C, has a compatible type and the offset
--              LuaJIT computed for it; the size is LuaJIT's
--   typedef    repeated verbatim (C11 allows an identical typedef again)
--
-- A #line before each check points compiler messages at the declaration's
-- line in cdef.lua. New declarations are checked as they appear; a form
-- the parser here does not know is an error, not a skipped line.
local M = {}

local CDEF = "lua/weft/cdef.lua"

local function readall(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end
M.readall = readall

-- The text cdef.lua passes to ffi.cdef and the module's ABI_VERSION.
-- `abi` is what the stand-in wf_abi_version returns (the header's
-- WEFT_ABI_VERSION): cdef.lua itself raises when its own differs.
function M.capture(path, abi)
  path = path or CDEF
  local texts = {}
  local fake_ffi = {
    cdef = function(t) texts[#texts + 1] = t end,
    typeof = function() error("not declared") end,
    load = function() error("stand-in ffi: no library") end,
    C = setmetatable({}, {
      __index = function(_, k)
        if k == "wf_abi_version" then return function() return abi end end
        error("stand-in ffi: " .. tostring(k))
      end,
    }),
  }
  local reg = {}
  local env = setmetatable({
    require = function(name)
      if name == "ffi" then return fake_ffi end
      return require(name)
    end,
    debug = setmetatable({ getregistry = function() return reg end }, { __index = debug }),
  }, { __index = _G })
  local chunk = assert(loadfile(path))
  setfenv(chunk, env)
  local mod = chunk()
  return table.concat(texts, "\n"), mod.ABI_VERSION
end

-- WEFT_ABI_VERSION of include/weft.h.
function M.header_abi(root)
  local h = readall((root or ".") .. "/include/weft.h") or ""
  return tonumber(h:match("#define%s+WEFT_ABI_VERSION%s+(%d+)"))
end

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- Statements of a C declaration text: { text =, pos = offset in decls },
-- split at ';' outside braces, comments blanked (offsets kept).
local function statements(decls)
  local s = decls:gsub("/%*.-%*/", function(c) return (c:gsub("[^\n]", " ")) end)
  s = s:gsub("//[^\n]*", function(c) return (c:gsub(".", " ")) end)
  local out, depth, start = {}, 0, 1
  for i = 1, #s do
    local c = s:sub(i, i)
    if c == "{" then
      depth = depth + 1
    elseif c == "}" then
      depth = depth - 1
    elseif c == ";" and depth == 0 then
      local t = s:sub(start, i - 1)
      local lead = #t:match("^%s*")
      if trim(t) ~= "" then out[#out + 1] = { text = trim(t), pos = start + lead } end
      start = i + 1
    end
  end
  if trim(s:sub(start)) ~= "" then
    out[#out + 1] = { text = trim(s:sub(start)), pos = start, err = "no ';' after the last declaration" }
  end
  return out
end

-- A declarator "TYPE NAME", "TYPE NAME[N]" or "RET (*NAME)(ARGS)" as
-- name, abstract type name (for casts and __typeof__ comparisons).
local function declarator(d)
  d = trim(d)
  local pre, name, post = d:match("^(.-%(%s*%*%s*)([%a_][%w_]*)(%s*%).*)$")
  if name then return name, pre .. post end
  pre, name, post = d:match("^(.-)([%a_][%w_]*)%s*(%[.*%])$")
  if name then return name, trim(pre) .. post end
  pre, name = d:match("^(.-[%s%*])([%a_][%w_]*)$")
  if name and trim(pre) ~= "" then return name, trim(pre) end
  return nil
end

-- The declarations of a cdef text: a list of
--   { kind = "func", name =, ret =, params =, pos = }
--   { kind = "struct", name =, alias =, fields = { {name =, type =} }, text =, pos = }
--   { kind = "typedef", text =, pos = }
--   { kind = "error", text =, msg =, pos = }
function M.parse(decls)
  local out = {}
  for _, st in ipairs(statements(decls)) do
    local t, d = st.text
    if st.err then
      d = { kind = "error", msg = st.err }
    elseif t:find("{", 1, true) then
      local tag, name, body, alias = t:match("^(typedef%s+)struct%s+([%a_][%w_]*)%s*(%b{})%s*([%a_][%w_]*)$")
      if not tag then
        name, body = t:match("^struct%s+([%a_][%w_]*)%s*(%b{})$")
      end
      if not name then
        d = { kind = "error", msg = "cannot read this struct declaration" }
      else
        d = { kind = "struct", name = name, alias = alias, fields = {} }
        local body_at = t:find(body, 1, true) -- the '{' in t
        for fat, f in body:sub(2, -2):gmatch("()([^;]+)") do
          if trim(f) ~= "" then
            local fname, ftype = declarator(f)
            if not fname or f:gsub("%b()", ""):find(",", 1, true) then
              d = { kind = "error", msg = "cannot read the field '" .. trim(f) .. "' of struct " .. name }
              break
            end
            d.fields[#d.fields + 1] = { name = fname, type = ftype, pos = st.pos + body_at + fat - 1 + #f:match("^%s*") }
          end
        end
      end
    elseif t:match("^typedef%s") then
      d = { kind = "typedef" }
    else
      local ret, name, params = t:match("^(.-)([%a_][%w_]*)%s*(%b())$")
      if ret and trim(ret) ~= "" then
        d = { kind = "func", name = name, ret = trim(ret), params = params }
      else
        d = { kind = "error", msg = "cannot read this declaration" }
      end
    end
    d.text, d.pos = t, st.pos
    out[#out + 1] = d
  end
  return out
end

-- Header paths named by the section banners of a cdef text.
function M.headers(decls)
  local out, seen = {}, {}
  for h in decls:gmatch("/%*%s*%-%-%-%-[^\n]-%(([%w_/%.]+%.h)%)") do
    if not seen[h] then
      seen[h] = true
      out[#out + 1] = h
    end
  end
  return out
end

-- 1-based line in `file_text` where `decls` starts, so positions in the
-- captured text map to lines of cdef.lua.
local function line_of(decls, pos, base)
  local _, n = decls:sub(1, pos - 1):gsub("\n", "")
  return base + n
end

-- The line of the file at `path` where `decls` starts (they are its long
-- string verbatim), or 1.
function M.first_line(decls, path)
  local at = (readall(path) or ""):find(decls, 1, true)
  if not at then return 1 end
  local _, n = (readall(path) or ""):sub(1, at - 1):gsub("\n", "")
  return n + 1
end

-- The C file checking `decls`. opts: root (the tree whose headers are
-- checked), cdef_path (as messages name it), first_line (of the
-- declarations in the cdef file; default: found in root/cdef_path),
-- lua_only = { [struct name] = reason } (structs with no C counterpart:
-- declared verbatim, so their field types must still exist in C),
-- layout(name, field) -> offset or size (LuaJIT's; nil skips).
function M.generate(decls, opts)
  local root = opts.root
  local path = opts.cdef_path or CDEF
  local base = opts.first_line or M.first_line(decls, root .. "/" .. path)
  local c = {
    "/* generated by spec/helpers/cdef_check.lua from " .. path .. " */",
    "#include <stddef.h>",
    string.format('#include "%s/include/weft.h"', root),
  }
  for _, h in ipairs(M.headers(decls)) do c[#c + 1] = string.format('#include "%s/%s"', root, h) end
  local function at_line(d) c[#c + 1] = string.format('#line %d "%s"', line_of(decls, d.pos, base), path) end
  local function str(s) return '"' .. s:gsub('[\\"]', "\\%0") .. '"' end
  local decls_list = M.parse(decls)
  local counts = { func = 0, struct = 0, field = 0, typedef = 0 }
  for _, d in ipairs(decls_list) do
    at_line(d)
    if d.kind == "error" then
      c[#c + 1] = "#error " .. str(d.msg .. ": " .. d.text:gsub("%s+", " "))
    elseif d.kind == "typedef" then
      c[#c + 1] = d.text .. ";"
      counts.typedef = counts.typedef + 1
    elseif d.kind == "func" then
      c[#c + 1] = string.format("_Static_assert(__builtin_types_compatible_p(__typeof__(&%s), %s (*)%s), %s);",
                                d.name, d.ret, d.params,
                                str(d.name .. ": the cdef prototype differs from the C declaration"))
      counts.func = counts.func + 1
    elseif d.kind == "struct" and opts.lua_only and opts.lua_only[d.name] then
      c[#c + 1] = d.text .. ";"
      counts.typedef = counts.typedef + 1
    elseif d.kind == "struct" then
      local S = "struct " .. d.name
      if d.alias then c[#c + 1] = string.format("typedef struct %s %s;", d.name, d.alias) end
      for _, f in ipairs(d.fields) do
        local what = d.name .. "." .. f.name
        at_line(f)
        c[#c + 1] = string.format("_Static_assert(__builtin_types_compatible_p(__typeof__(((%s *)0)->%s), %s), %s);",
                                  S, f.name, f.type, str(what .. ": the cdef field type differs from C"))
        local off = opts.layout and opts.layout(d.name, f.name)
        if off then
          at_line(f)
          c[#c + 1] = string.format("_Static_assert(offsetof(%s, %s) == %d, %s);", S, f.name, off,
                                    str(what .. ": at offset " .. off .. " in LuaJIT, elsewhere in C"))
        end
        counts.field = counts.field + 1
      end
      local size = opts.layout and opts.layout(d.name)
      if size then
        at_line(d)
        c[#c + 1] = string.format("_Static_assert(sizeof(%s) == %d, %s);", S, size,
                                  str(d.name .. ": " .. size .. " bytes in LuaJIT, another size in C"))
      end
      counts.struct = counts.struct + 1
    end
  end
  c[#c + 1] = ""
  return table.concat(c, "\n"), counts, decls_list
end

-- Compile C text with -fsyntax-only: ok, compiler output.
function M.compile(src, root)
  local base = os.tmpname()
  local cfile = base .. ".c"
  local f = assert(io.open(cfile, "wb"))
  f:write(src)
  f:close()
  local p = io.popen("pkg-config --cflags luajit 2>/dev/null")
  local lj = p:read("*a"):gsub("%s+$", "")
  p:close()
  if lj == "" then lj = "-I/usr/include/luajit-2.1" end
  local cc = os.getenv("CC") or "cc"
  local cmd = string.format("LC_ALL=C %s -std=gnu11 -fsyntax-only -Wall -Wextra -I'%s/include' -I'%s/src' %s '%s' 2>&1",
                            cc, root, root, lj, cfile)
  p = io.popen(cmd)
  local out = p:read("*a")
  local ok = p:close()
  os.remove(cfile)
  os.remove(base)
  -- io.popen's close gives true/false in LuaJIT 2.1 with 5.2 compat only;
  -- otherwise judge by the output (the compiler is silent on success)
  if ok == true or ok == nil then ok = out == "" end
  return ok and out == "", out
end

-- The error lines of compiler output (without the notes and source lines).
function M.errors(out)
  local t = {}
  for l in out:gmatch("[^\n]+") do
    if l:find("error", 1, true) then t[#t + 1] = l end
  end
  return t
end

-- Names of the WF_FFI functions a header declares.
function M.ffi_functions(header_text)
  local out = {}
  for name in header_text:gmatch("\nWF_FFI[^;(]-([%a_][%w_]*)%s*%(") do out[#out + 1] = name end
  return out
end

return M
