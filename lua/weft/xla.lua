-- weft.xla: the Lua half of weft's XLA FFI targets (python/weft/jax.py,
-- src/interop/xla_ffi.c). Loaded on demand; it adds two helpers to
-- weft._interop, which the Python package calls by name:
--
--   ffi_params(k) -> one line per parameter of kernel k:
--       "name kind type scalar count ntrail t0 t1 ndim size id"
--     kind: array, scalar, struct (no JAX form) or generic (typed by the
--     call); count: scalars per element; ntrail, t0, t1: the element's
--     trailing dimensions on the JAX side (vec3: 1 3 0; mat22: 2 2 2).
--   ffi_plan(k, specs, ndim, adjoint, device) -> fn, cost, size, lines
--     compiles k (or its adjoint "adj_<name>": the primal parameters, then
--     one adjoint array per array parameter) for launch ndim in the current
--     weft.config.mode. specs names the types of generic parameters, one
--     token per parameter: "-" (typed), "A:float32:2" (an array),
--     "S:float32" (a scalar). fn is the entry's address; each line
--     "offset written id elsize" describes an entry parameter. The compiled
--     code lives as long as the Lua state (XLA executables may call it at
--     any time), so plans are made once per signature by the caller.
--     device (a cuda ordinal; nil: the cpu) -> 0, 0, size, lines, ptx,
--     entry, slot: PTX for that device's architecture, which the CUDA
--     target loads on each device it runs on; offsets are into the
--     scalars' kernelParams block of `size` bytes; slot: the entry takes
--     the error slot last (release and debug modes).
--   ffi_fparams(f) -> the parameter names of Lua function f, space-separated
--     (jax_callable: its last num_outputs parameters receive the outputs).
local weft = require "weft"
local P = require "weft.internal"

local I = weft._interop
local core = P.core
local fmt = string.format
local keep = {} -- compile results of the plans: their code stays in the JIT

-- The scalar type and trailing JAX dimensions of an element type.
local function layout(t)
  local k = t.kind
  if k == "bool" or k == "int" or k == "float" then return t, 0, 0, 0 end
  if k == "vec" or k == "quat" or k == "transform" then return t.scalar, 1, t.n, 0 end
  if k == "mat" then return t.scalar, 2, t.rows, t.cols end
  return nil
end

local function describe(name, t)
  if t == nil then return fmt("%s generic - - 0 0 0 0 0 0 0", name) end
  local elem, ndim = t, 0
  if t.kind == "array" then elem, ndim = t.dtype, t.ndim end
  local s, ntrail, t0, t1 = layout(elem)
  if not s then return fmt("%s struct %s - 0 0 0 0 %d %d %d", name, elem.name, ndim, elem.size, elem.id) end
  return fmt("%s %s %s %s %d %d %d %d %d %d %d", name, t.kind == "array" and "array" or "scalar",
             elem.name, s.name, elem.size / s.size, ntrail, t0, t1, ndim, elem.size, elem.id)
end

local function check_kernel(k, where)
  if type(k) ~= "table" or type(k.params) ~= "table" or not k._module then
    error(fmt("%s: expected a kernel (made by weft.kernel), got %s", where, type(k)), 0)
  end
end

function I.ffi_params(k)
  check_kernel(k, "weft.jax_kernel")
  local lines = {}
  for i, p in ipairs(k.params) do lines[i] = describe(p.name, p.type) end
  return table.concat(lines, "\n")
end

-- The type a spec token names (generic parameters).
local function spec_type(tok, pname)
  local kind, s, nd = tok:match("^(%u):([%w_%(%),]+):?(%d*)$")
  local t = s and weft.type_from_name(s)
  if not t then error(fmt("weft.jax_kernel: bad type '%s' for parameter '%s'", tok, pname), 0) end
  if kind == "A" then return weft.array(t, tonumber(nd) or 1) end
  return t
end

-- The CUDA form of a plan: PTX of mod (entry `name`, nil: the first)
-- and each parameter's offset into the scalars' block, each aligned to
-- its type (arrays pass their header: offset 0).
local function cuda_plan(k, mod, name, mode, device, types, nparams)
  local arch = weft.cuda_device_info(device).arch:gsub("^sm_", "compute_")
  local ok, image, entries = pcall(core.cuda_ptx, mod, arch, P.mode_opts(mode, {
    names = P.param_names(k), fast_compile = weft.config.cuda_fast_compile }))
  if not ok then error(image, 0) end
  local entry = entries[1]
  if name then
    entry = "weft_" .. name:gsub("[^%w_]", "_")
    local found = false
    for _, e in ipairs(entries) do found = found or e == entry end
    if not found then error(fmt("weft.jax_kernel: no CUDA entry '%s' for '%s'", entry, k.name), 0) end
  end
  local ffi = require "ffi"
  local offs, size = {}, 0
  for j = 1, nparams do
    local t = types[j]
    if t and t.kind ~= "array" then
      local ct = ffi.typeof(t.ffiname)
      local al = ffi.alignof(ct)
      size = math.ceil(size / al) * al
      offs[j] = size
      size = size + ffi.sizeof(ct)
    else
      offs[j] = 0
    end
  end
  return image, entry, offs, math.max(size, 8)
end

function I.ffi_plan(k, specs, ndim, adjoint, device)
  check_kernel(k, "weft.jax_kernel")
  local types, i = {}, 0
  for tok in specs:gmatch("%S+") do
    i = i + 1
    local p = k.params[i]
    if not p then error("weft.jax_kernel: too many parameter types", 0) end
    types[i] = p.type or spec_type(tok, p.name)
  end
  if i ~= #k.params then error("weft.jax_kernel: too few parameter types", 0) end
  local mode = P.mode_index()
  local mod = k:_module(types)
  local opts = P.mode_opts(mode, { ndim = ndim, names = P.param_names(k) })
  local writes, name
  if adjoint then
    local dmod
    dmod, name = P.derived_module("adj", k, mod, types, mode == 2)
    opts.name = name
    mod, writes = dmod, core.writes(dmod, name)
  else
    writes = core.writes(mod)
  end
  local res, ptx, entry
  if device then
    res = { fn = 0, cost = 0 }
    ptx, entry, res.offsets, res.size = cuda_plan(k, mod, name, mode, device, types, #types * 2)
  else
    res = core.cpu_compile(mod, opts)
    keep[#keep + 1] = res
  end
  local lines = {}
  local function add(j, t)
    local e = t.kind == "array" and t.dtype or t
    lines[#lines + 1] = fmt("%d %d %d %d", res.offsets[j], writes[j] and 1 or 0, e.id, e.size)
  end
  for j, t in ipairs(types) do add(j, t) end
  if adjoint then
    local n = #types
    for _, t in ipairs(types) do
      if t.kind == "array" then
        n = n + 1
        add(n, t)
      end
    end
  end
  local ffi = require "ffi"
  return tonumber(ffi.cast("uintptr_t", res.fn)), res.cost, res.size, table.concat(lines, "\n"),
    ptx, entry, device and mode > 0
end

-- The parameter names of Lua function f, space-separated (jax_callable).
function I.ffi_fparams(f)
  if type(f) ~= "function" then
    error(fmt("weft.jax_callable: expected a Lua function, got %s", type(f)), 0)
  end
  local names = {}
  for i = 1, debug.getinfo(f, "u").nparams or 255 do
    local n = debug.getlocal(f, i)
    if not n then break end
    names[i] = n
  end
  return table.concat(names, " ")
end

return I
