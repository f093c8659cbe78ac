-- lua/weft/cdef.lua against the C it mirrors: a C file generated from the
-- cdef (spec/helpers/cdef_check.lua) includes the real headers and asserts,
-- for the C compiler to judge, that every function has the cdef's
-- prototype and every struct the cdef's fields, offsets and size.
local ffi = require "ffi"
local check = dofile("spec/helpers/cdef_check.lua")

local ROOT = (os.getenv("PWD") or "."):gsub("/$", "")
if not check.readall(ROOT .. "/lua/weft/cdef.lua") then ROOT = "." end

-- Structs declared only for Lua, with no C counterpart.
local LUA_ONLY = {
  weft_Array = "the Lua-visible wrapper of wf_array (the metatype in lua/weft/array.lua)",
}

-- C functions marked WF_FFI that the Lua layer does not declare: only the
-- Python package (ctypes) calls them. Found by name in python/weft/*.py.
local function python_text()
  local p = io.popen("cat '" .. ROOT .. "'/python/weft/*.py 2>/dev/null")
  local s = p:read("*a")
  p:close()
  return s
end

-- LuaJIT's layout of the cdef'd structs (weft.cdef declared them here).
local function layout(name, field)
  if field then return ffi.offsetof("struct " .. name, field) end
  return ffi.sizeof("struct " .. name)
end

local abi = check.header_abi(ROOT)
local decls, lua_abi = check.capture(ROOT .. "/lua/weft/cdef.lua", abi)
local FIRST = check.first_line(decls, ROOT .. "/lua/weft/cdef.lua")

-- Compile the checks of `text` against the headers under root; ok, error
-- lines, counts.
local function run(text, root)
  local src, counts = check.generate(text, { root = root or ROOT, lua_only = LUA_ONLY, layout = layout,
                                             cdef_path = "lua/weft/cdef.lua", first_line = FIRST })
  local ok, out = check.compile(src, root or ROOT)
  return ok, check.errors(out), counts, out
end

-- A copy of include/ and src/ headers under a temporary root with `edit`
-- applied to one header: the other side of the check changed.
local copies = {}
local function headers_with(rel, from, to)
  local tmp = os.tmpname()
  os.remove(tmp)
  copies[#copies + 1] = tmp
  assert(os.execute(string.format("mkdir -p '%s' && cd '%s' && cp --parents include/*.h src/*/*.h '%s'",
                                  tmp, ROOT, tmp)) == 0)
  local path = tmp .. "/" .. rel
  local text = assert(check.readall(path))
  local s, n = text:gsub(from, to, 1)
  assert(n == 1, "the edit found nothing to change in " .. rel .. ": " .. from)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
  return tmp
end

describe("lua/weft/cdef.lua", function()
  require "weft.cdef"
  teardown(function()
    for _, d in ipairs(copies) do os.execute("rm -rf '" .. d .. "'") end
  end)

  it("has the ABI version of include/weft.h", function()
    assert.is_number(abi)
    assert.are.equal(abi, lua_abi)
  end)

  it("declares every function and struct as the C headers do", function()
    local ok, errs, counts, out = run(decls)
    assert(ok, "cdef.lua and the C headers differ:\n" .. (#errs > 0 and table.concat(errs, "\n") or out))
    -- the checks ran on everything (a parser that saw nothing passes too)
    assert.is_true(FIRST > 1, "the declarations were not found in cdef.lua")
    assert.is_true(counts.func >= 40 and counts.struct >= 2 and counts.field >= 18)
    local funcs = 0
    for _, d in ipairs(check.parse(decls)) do
      if d.kind == "func" then funcs = funcs + 1 end
    end
    assert.are.equal(counts.func, funcs)
  end)

  -- WF_FFI functions of the mirrored headers under root that cdef.lua
  -- does not declare and python/weft does not call; and how many were seen.
  local function missing_ffi(root)
    local declared = {}
    for _, d in ipairs(check.parse(decls)) do
      if d.kind == "func" then declared[d.name] = true end
    end
    local py = python_text()
    local missing, seen = {}, 0
    for _, h in ipairs(check.headers(decls)) do
      local text = assert(check.readall(root .. "/" .. h), h)
      for _, name in ipairs(check.ffi_functions(text)) do
        seen = seen + 1
        if not declared[name] and not py:find(name, 1, true) then missing[#missing + 1] = h .. ": " .. name end
      end
    end
    return missing, seen
  end

  it("declares every WF_FFI function of the headers it mirrors (unless only Python calls it)", function()
    assert.is_true(#check.headers(decls) >= 4, "the cdef's section banners name no headers")
    local missing, seen = missing_ffi(ROOT)
    assert.is_true(seen >= 40)
    assert(#missing == 0, "WF_FFI functions cdef.lua does not declare:\n" .. table.concat(missing, "\n"))
  end)

  describe("fails when one side changes", function()
    -- the line of a declaration in cdef.lua, as the messages give it
    local file = check.readall(ROOT .. "/lua/weft/cdef.lua")
    local function line_of(pat)
      local at = assert(file:find(pat), pat)
      local _, n = file:sub(1, at):gsub("\n", "")
      return n + 1
    end

    it("a parameter type in cdef.lua", function()
      local text, n = decls:gsub("int wf_rt_set_num_threads%(wf_rt %*rt, int n%)",
                                 "int wf_rt_set_num_threads(wf_rt *rt, int64_t n)")
      assert.are.equal(1, n)
      local ok, errs = run(text)
      assert.is_false(ok)
      assert.matches("lua/weft/cdef.lua:" .. line_of("int wf_rt_set_num_threads%(") .. ":[^\n]*wf_rt_set_num_threads: "
                     .. "the cdef prototype differs", table.concat(errs, "\n"))
    end)

    it("a return type in a C header", function()
      local ok, errs = run(decls, headers_with("src/runtime/wf_rt.h", "WF_FFI int wf_device_count%(",
                                               "WF_FFI long wf_device_count("))
      assert.is_false(ok)
      assert.matches("lua/weft/cdef.lua:" .. line_of("int wf_device_count%(") .. ":[^\n]*wf_device_count: ",
                     table.concat(errs, "\n"))
    end)

    it("a function renamed in a C header", function()
      local ok, errs = run(decls, headers_with("src/runtime/wf_cudadrv.h", "wf_cuda_graph_free%(", "wf_cuda_graph_drop("))
      assert.is_false(ok)
      assert.matches("lua/weft/cdef.lua:" .. line_of("void wf_cuda_graph_free%(") .. ":[^\n]*wf_cuda_graph_free",
                     table.concat(errs, "\n"))
    end)

    it("a struct field's type in a C header", function()
      local ok, errs = run(decls, headers_with("src/ir/abi.h", "int32_t elsize;", "int64_t elsize;"))
      assert.is_false(ok)
      local all = table.concat(errs, "\n")
      assert.matches("wf_array.elsize: the cdef field type differs from C", all, 1, true)
      assert.matches("wf_array: 112 bytes in LuaJIT, another size in C", all, 1, true) -- and the layout
    end)

    it("a struct field added in cdef.lua", function()
      local text, n = decls:gsub("int32_t flags;\n  void %(%*release%)", "int32_t flags;\n  int32_t extra;\n  void (*release)")
      assert.are.equal(1, n)
      local ok, errs = run(text)
      assert.is_false(ok)
      assert.matches("no member named 'extra'", table.concat(errs, "\n"), 1, true)
    end)

    it("an FFI function added to a C header only", function()
      local root = headers_with("src/runtime/wf_cudadrv.h", "\nWF_FFI int wf_cuda_available%(",
                                "\nWF_FFI int wf_cuda_new_thing(wf_rt *rt);\nWF_FFI int wf_cuda_available(")
      assert.are.same({ "src/runtime/wf_cudadrv.h: wf_cuda_new_thing" }, (missing_ffi(root)))
    end)

    it("a declaration the checker cannot read", function()
      local ok, errs = run(decls .. "\nenum wf_new_thing { A, B };\n")
      assert.is_false(ok)
      assert.matches("cannot read", table.concat(errs, "\n"), 1, true)
    end)
  end)
end)
