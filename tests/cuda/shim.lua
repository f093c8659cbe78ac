-- tests/cuda/shim.lua -- run a weft kernel's emitted CUDA C on the host.
--
--   local shim = dofile("tests/cuda/shim.lua")
--   shim.available()                     -> true if g++ can build the shim
--   shim.run(weft, k, dim, args [, opts]) -> runs k over dim on the host:
--       arrays in args (compact, on the cpu) are written to files, a C++
--       driver (tests/cuda/shim.h + the CUDA C + a generated main) loads
--       them, launches through WF_SHIM_LAUNCH and writes them back; the
--       arrays in args are updated in place. Returns the program's stdout
--       and the debug error message (or nil).
--   opts.adjoint  run the adjoint entry: args are the primal arguments then
--                 one adjoint array per array parameter (false: no gradient,
--                 passed as the null header a CPU adjoint launch passes)
--   opts.jvp      run the forward-mode (tangent) entry, arguments as for
--                 opts.adjoint with tangents in place of adjoints
--   opts.debug    emit with bounds/division checks; the error slot's
--                 message is returned (nil when no thread failed)
--   opts.checks   emit release mode's bounds checks (the error slot, as
--                 for opts.debug)
--   opts.types    argument types, for kernels with generic parameters
-- Scalars and aggregates are passed as the bytes of their C layout.
local ffi = require "ffi"

local M = {}
local root = os.getenv("WEFT_SOURCE_DIR") or "."

function M.available()
  return os.execute("g++ --version > /dev/null 2>&1") == 0
end

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == 0 or ok == true
end

local function readall(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local function writeall(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- The C parameter types of entry in the emitted source (after wf_dims).
local function param_ctypes(src, entry)
  local sig = src:match('extern "C" __global__ void ' .. entry .. "%((.-)%)")
  local out = {}
  for p in sig:gmatch("[^,]+") do
    local ty = p:match("^%s*(.-)%s*[%w_]+%s*$")
    out[#out + 1] = ty
  end
  table.remove(out, 1) -- wf_dims
  return out
end

-- A C initializer list of the bytes at p.
local function bytes(p, n)
  local b = ffi.cast("const uint8_t *", p)
  local t = {}
  for i = 0, n - 1 do t[#t + 1] = tostring(b[i]) end
  return "{" .. table.concat(t, ",") .. "}"
end

-- The module of k (with its adjoint entry when asked) and the entry to run.
local function module_entry(weft, k, opts)
  local core = require("weft.internal").core
  local m = k:_module(opts.types)
  local want = "weft_" .. tostring(k.name):gsub("[^%w_]", "_")
  local kind = opts.adjoint and "adj" or opts.jvp and "jvp" or nil
  if kind then -- the module a CUDA launch of the derived kernel compiles
    local dm, name = require("weft.internal").derived_module(kind, k, m, opts.types, false)
    m, want = dm, "weft_" .. name:gsub("[^%w_]", "_")
  end
  local names = {}
  for i, p in ipairs(k.params) do names[i] = p.name end
  local src, entries = core.cuda_source(m, { debug = opts.debug, checks = opts.checks,
                                            names = names })
  for _, e in ipairs(entries) do
    if e == want then return src, e end
  end
  error("shim: no entry " .. want .. " in the module")
end

function M.run(weft, k, dim, args, opts)
  opts = opts or {}
  local src, entry = module_entry(weft, k, opts)
  local ctypes = param_ctypes(src, entry)
  local dir = os.tmpname()
  os.remove(dir)
  assert(sh("mkdir -p " .. dir))
  local main = { "int main() {" }
  local launch_args = {}
  local slot = opts.debug or opts.checks -- the kernel takes the error slot last
  local nargs = #ctypes - (slot and 1 or 0)
  -- the kernel's own arguments, checked and packed as a CUDA launch packs
  -- them (lua/weft/marshal.lua): scalars pass the bytes it stores
  local internal = require("weft.internal")
  local np, types = #k.params, {}
  for i = 1, np do types[i] = (opts.types and opts.types[i]) or k.params[i].type end
  local cargs = internal.cuda_args(types, 0, false)
  internal.packer{ k = k, types = types, addrs = cargs.addrs }(args, args, np)
  for i = 1, nargs do
    local v = args[i]
    if v == false or v == nil then -- a null adjoint header
      main[#main + 1] = string.format("  wf_arr A%d; memset(&A%d, 0, sizeof A%d);", i, i, i)
      launch_args[#launch_args + 1] = "A" .. i
    elseif weft.is_array(v) then
      local h = v.h
      local nbytes = tonumber(h.size) * h.elsize
      writeall(dir .. "/a" .. i .. ".bin", ffi.string(h.data, nbytes))
      main[#main + 1] = string.format(
        '  alignas(64) static char b%d[%d + 1]; { FILE *f = fopen("%s/a%d.bin", "rb"); if (fread(b%d, 1, %d, f) != %d) return 2; fclose(f); }',
        i, nbytes, dir, i, i, nbytes, nbytes)
      main[#main + 1] = string.format("  wf_arr A%d; A%d.data = b%d;", i, i, i)
      for d = 0, 3 do
        main[#main + 1] = string.format("  A%d.shape[%d] = %d; A%d.strides[%d] = %d;", i, d,
                                        d < h.ndim and tonumber(h.shape[d]) or 1, i, d,
                                        d < h.ndim and tonumber(h.strides[d]) or 0)
      end
      launch_args[#launch_args + 1] = "A" .. i
    else
      local n = ffi.sizeof(types[i].ffiname)
      main[#main + 1] = string.format(
        "  static const unsigned char s%db[] = %s; %s S%d; static_assert(sizeof S%d == %d, \"arg %d\"); memcpy(&S%d, s%db, %d);",
        i, bytes(cargs.ptrs[i - 1], n), ctypes[i], i, i, n, i, i, i, n)
      launch_args[#launch_args + 1] = "S" .. i
    end
  end
  if slot then
    main[#main + 1] = "  static wf_err E; memset(&E, 0, sizeof E);"
    launch_args[#launch_args + 1] = "&E"
  end
  local d = type(dim) == "table" and dim or { dim }
  local dl = {}
  for i = 1, 4 do dl[i] = tostring(d[i] or 1) end
  main[#main + 1] = string.format("  long long dims[4] = {%s};", table.concat(dl, ", "))
  main[#main + 1] = string.format("  WF_SHIM_LAUNCH(%s, %d, dims, %s);", entry, #d,
                                  table.concat(launch_args, ", "))
  if slot then
    main[#main + 1] = string.format(
      '  { FILE *f = fopen("%s/err.txt", "wb"); if (E.flag) fputs(E.msg, f); fclose(f); }', dir)
  end
  for i = 1, nargs do
    local v = args[i]
    if v and weft.is_array(v) then
      local nbytes = tonumber(v.h.size) * v.h.elsize
      main[#main + 1] = string.format(
        '  { FILE *f = fopen("%s/a%d.bin", "wb"); fwrite(b%d, 1, %d, f); fclose(f); }', dir, i, i, nbytes)
    end
  end
  main[#main + 1] = "  return 0;\n}\n"
  writeall(dir .. "/k.cpp", src .. "\n" .. table.concat(main, "\n"))
  local cmd = string.format("g++ -std=c++17 -O1 -w -include %s/tests/cuda/shim.h %s/k.cpp -o %s/k 2> %s/cc.log",
                            root, dir, dir, dir)
  if not sh(cmd) then
    local log = readall(dir .. "/cc.log")
    sh("rm -rf " .. dir)
    error("shim: g++ failed:\n" .. log)
  end
  assert(sh(string.format("%s/k > %s/out.txt", dir, dir)), "shim: the program failed")
  local out = readall(dir .. "/out.txt")
  local err
  if slot then
    err = readall(dir .. "/err.txt")
    if err == "" then err = nil end
  end
  for i = 1, nargs do
    local v = args[i]
    if v and weft.is_array(v) then
      local s = readall(dir .. "/a" .. i .. ".bin")
      ffi.copy(v.h.data, s, #s)
    end
  end
  sh("rm -rf " .. dir)
  return out, err
end

return M
