-- weft.interop: DLPack in and out, and weft._interop, the Lua half of the
-- host C API (src/interop/capi.c) and of the Python package (python/weft).
--
--   weft.to_dlpack(a [, versioned [, copy]])  -> DLManagedTensor[Versioned]*
--       (void* cdata; whoever receives it calls its deleter once)
--   weft.from_dlpack(ptr, versioned [, dtype]) -> array viewing the tensor
--       (takes ownership of ptr, a cdata pointer or a light userdata; dtype
--       "vec3" etc. folds the trailing dimensions into elements)
--
-- Vector and matrix elements cross the boundary as trailing dimensions of
-- their scalar type (an array of 10 vec3 is a 10x3 float32 tensor).
local ffi = require "ffi"
local bit = require "bit"

local IS_COPIED = 2
local FLAG_READONLY = 4

return function(weft, P)
  local C, rt = P.C, P.rt
  local describe = P.describe or tostring

  -- Raise at the first caller outside lua/weft/; with none (a call from the
  -- C API or Python) the message carries no position.
  local here = debug.getinfo(1, "S").source
  local dir = here:match("^(@.*[/\\])interop%.lua$") or here
  local function raise(msg, ...)
    msg = string.format(msg, ...)
    local lvl = 2
    while true do
      local info = debug.getinfo(lvl, "S")
      if not info then error(msg, 0) end
      if info.what ~= "C" and info.source:sub(1, #dir) ~= dir then error(msg, lvl) end
      lvl = lvl + 1
    end
  end
  local ArrayCT = ffi.typeof("weft_Array")
  local voidp = ffi.typeof("void *")
  local voidpp = ffi.typeof("void *[1]")
  local voidpp_ptr = ffi.typeof("void **")
  local trail_ct = ffi.typeof("int64_t[2]")
  local charpp = ffi.typeof("const char *[1]")
  -- scratch slots (one Lua state runs one call at a time)
  local scalar_slot, trail_slot = charpp(), trail_ct()
  local NOTRAIL = {}

  -- The runtime's last message without its "weft: fn: " prefix.
  local function errmsg() return (ffi.string(C.wf_rt_errmsg(rt)):gsub("^weft: [%w_]+: ", "")) end

  -- DLPack (code, bits) of a scalar type.
  local function scalar_code(s)
    if s.kind == "float" then return 2, s.bits end
    if s.kind == "bool" then return 6, 8 end
    return s.signed and 0 or 1, s.bits
  end

  -- An element type as its scalar type and trailing dimensions; nil for
  -- structs, which have no DLPack form.
  local function layout(t)
    local k = t.kind
    if k == "bool" or k == "int" or k == "float" then return t, {} end
    if k == "vec" or k == "quat" or k == "transform" then return t.scalar, { t.n } end
    if k == "mat" then return t.scalar, { t.rows, t.cols } end
    return nil
  end

  local function finalize(a) C.wf_array_release(a.h) end

  function weft.to_dlpack(a, versioned, copy)
    if not weft.is_array(a) then raise("weft.to_dlpack: expected an array, got %s", describe(a)) end
    local t = weft.types[a.h.dtype]
    local s, trail = layout(t)
    if not s then
      raise("weft.to_dlpack: arrays of %s (a struct) have no DLPack form", t.name)
    end
    local flags = 0
    if copy then
      a = weft.clone(a, { requires_grad = false })
      flags = IS_COPIED
    end
    local code, bits = scalar_code(s)
    local out = voidpp()
    local st = C.wf_dlpack_export(rt, a.h, versioned and 1 or 0, code, bits, #trail,
      trail_ct(trail[1] or 0, trail[2] or 0), flags, out)
    if st ~= 0 then raise("weft.to_dlpack: %s", errmsg()) end
    return out[0]
  end

  function weft.from_dlpack(ptr, versioned, dtype)
    local tp = type(ptr)
    if tp ~= "userdata" and tp ~= "cdata" then
      raise("weft.from_dlpack: expected a DLManagedTensor pointer, got %s", describe(ptr))
    end
    local p = ffi.cast(voidp, ptr)
    local vflag = versioned and 1 or 0
    local t, s, trail = nil, nil, NOTRAIL
    if dtype ~= nil then
      t = weft.type_from_name(dtype)
      if t then s, trail = layout(t) end
      if not s then
        C.wf_dlpack_delete(p, vflag)
        raise("weft.from_dlpack: dtype %s cannot view a DLPack tensor", tostring(dtype))
      end
    end
    local a = ArrayCT()
    local scalar = scalar_slot
    trail_slot[0], trail_slot[1] = trail[1] or 0, trail[2] or 0
    if C.wf_dlpack_import(rt, p, vflag, #trail, trail_slot, a.h, scalar) ~= 0 then
      raise("weft.from_dlpack: %s", errmsg())
    end
    ffi.gc(a, finalize)
    local sname = ffi.string(scalar[0])
    if t then
      if s.name ~= sname then
        C.wf_array_release(a.h)
        raise("weft.from_dlpack: the tensor holds %s values, %s needs %s", sname, t.name, s.name)
      end
    else
      t = weft.type_from_name(sname)
    end
    a.h.dtype = t.id
    return a
  end

  -- The Lua side of the C API. Every function may raise: the C side calls
  -- them under a protected call.
  local I = {}
  weft._interop = I

  function I.wrap(ptr, dtype, shape, device, strides)
    local a = P.wrap(ffi.cast(voidp, ptr), dtype, shape, device)
    if strides then
      for d = 1, #strides do a.h.strides[d - 1] = strides[d] end
    end
    return a
  end

  -- The array and its type's name (the fast path of src/interop/pyapi.c).
  function I.import(ptr, versioned, dtype)
    local a = weft.from_dlpack(ptr, versioned, dtype)
    return a, weft.types[a.h.dtype].name
  end

  -- Export v and store the tensor pointer in the C slot (a light userdata).
  function I.export(v, versioned, copy, slot)
    if not weft.is_array(v) then
      raise("weft: only arrays can be exported through DLPack, got %s", describe(v))
    end
    ffi.cast(voidpp_ptr, slot)[0] = weft.to_dlpack(v, versioned, copy)
  end

  -- What the C side returns for a non-primitive value: kind, name, number.
  function I.describe(v)
    if weft.is_array(v) then return "array", weft.types[v.h.dtype].name, nil end
    if type(v) == "cdata" and (ffi.istype("int64_t", v) or ffi.istype("uint64_t", v)) then
      return "int", nil, tonumber(v)
    end
    local t = weft.dtype_of and weft.dtype_of(v)
    return "other", t and t.name or type(v), nil
  end

  -- weft.launch(k, dim, inputs [, {outputs = ...}]) with the first nin
  -- arguments as inputs; dim is a number or a table of 1 to 4 numbers.
  function I.launch(k, dim, nin, ...)
    local launch = weft.launch
    if not launch then
      raise("weft_launch: weft.launch is not available (the kernel compiler is not built in)")
    end
    if type(dim) == "table" and #dim == 1 then dim = dim[1] end
    local n = select("#", ...)
    if n == nin then return launch(k, dim, { ... }) end
    local args, outputs = { ... }, {}
    for i = nin + 1, n do
      outputs[i - nin] = args[i]
      args[i] = nil
    end
    return launch(k, dim, args, { outputs = outputs })
  end

  -- Scratch arrays of the Python fast launch (src/interop/pyapi.c): C
  -- copies borrowed headers into them for the time of one launch. They own
  -- no memory (no finalizer) and are cleared after the launch.
  local reg = debug.getregistry()
  local scratch = {}
  reg["weft.interop.scratch"] = scratch
  function I.scratch(k)
    local a = ArrayCT()
    scratch[k] = a
    return a
  end

  -- A Lua array sharing the buffer of a C-owned header (pyapi.c's adopt):
  -- it takes its own buffer reference.
  local wf_array_ptr = ffi.typeof("wf_array *")
  local HEADER_SIZE = ffi.sizeof("wf_array")
  function I.adopt(p)
    local a = ArrayCT()
    ffi.copy(a.h, ffi.cast(wf_array_ptr, p), HEADER_SIZE)
    C.wf_buffer_retain(a.h.buf)
    return ffi.gc(a, finalize)
  end

  -- The type id of a type name (the fast paths keep ids of scalar types).
  function I.type_id(name)
    local t = weft.type_from_name(name)
    if not t then raise("weft: unknown dtype '%s'", tostring(name)) end
    return t.id
  end

  -- Element layout of a type (a name or an id) for the Python package:
  -- scalar name, DLPack code and bits, element size, trailing dimensions,
  -- id and name (structs: false for the scalar, which they lack).
  function I.typeinfo(name)
    local t
    if type(name) == "number" then t = weft.types[name] else t = weft.type_from_name(name) end
    if not t or t.kind == "array" then raise("weft: unknown dtype '%s'", tostring(name)) end
    local s, trail = layout(t)
    if not s then return false, 0, 0, t.size, 0, 0, 0, t.id, t.name end
    local code, bits = scalar_code(s)
    return s.name, code, bits, t.size, #trail, trail[1] or 0, trail[2] or 0, t.id, t.name
  end

  function I.id(...) return ... end

  -- Run a chunk of code. Its chunk name is the code itself unless one is
  -- given; a named chunk's text is registered for its kernels
  -- (weft.loadstring).
  function I.exec(code, chunkname)
    local f, err = weft.loadstring(code, chunkname)
    if not f then error(err, 0) end
    return f()
  end

  -- a[k] and a[k] = v for members the Python package reads and sets.
  function I.get(v, k) return v[k] end
  function I.set(v, k, x) v[k] = x end

  function I.grad(a) return a.grad end

  function I.to_cpu(a) return a:to("cpu") end
  function I.to(a, device) return a:to(device) end

  -- Give a an existing gradient array (shared with a foreign framework).
  function I.set_grad(a, g)
    a.grad = g
    a.requires_grad = g ~= nil
  end

  function I.set_readonly(a, on)
    a.h.flags = on and bit.bor(a.h.flags, FLAG_READONLY) or bit.band(a.h.flags, bit.bnot(FLAG_READONLY))
  end
end
