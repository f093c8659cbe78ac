-- weft.types: the type system shared by arrays, kernels and the C side.
--
-- Every weft type is a Lua table with metatable weft.Type. The fields are a
-- contract read by other parts (and by C through the registry id):
--
--   name    canonical name ("float32", "vec3f", "mat33d", "vector(5,float32)")
--   kind    "bool" | "int" | "float" | "vec" | "mat" | "quat" | "transform"
--           | "struct" | "array"
--   bits, signed              scalars (bool: bits = 8)
--   scalar                    vec/mat/quat/transform: the scalar type
--   n | rows, cols            vec/quat length (spatial_vector: 6) | matrix
--   fields                    struct: ordered { name=, type=, offset= }
--   dtype, ndim               array types (weft.array(dtype [, ndim]))
--   size, align               bytes, C layout (vec3f: 12 and 4)
--   id                        registry id: weft.types[id] == t; wf_array.dtype
--   ctype, cdecl, cname       ffi ctype of one element, its C declaration
--                             text, the C name to declare values with
--
-- float16 is stored as its uint16 bits; the host converts with round to
-- nearest even. Composite host values are cdata of t.ctype with a metatype
-- (x y z w fields, 0-based [i], arithmetic, tostring).
--
-- This file gives the type descriptors: the registry, the scalars, the
-- layouts of the composite families and structs, the lookups and the array
-- types. The host behaviour of composite values (their metatypes,
-- constructors and load/store) is in lua/weft/metatypes.lua.
--
-- Each require builds fresh anonymous ctypes: LuaJIT allows one metatype per
-- ctype, and busted reloads the module between spec files.
local ffi = require "ffi"

local floor, huge = math.floor, math.huge

-- Types are declared by name (ffi.cdef of a typedef with a serial number)
-- and pointer and array types are made from those names: under busted,
-- ffi.typeof("$ *", ct) was seen to return the ctype of an earlier call
-- (bool * for every type), so no type here is built with "$" parameters.
local function typeof(s) return ffi.typeof(s) end
local fmt = string.format

return function(weft)
  local Type = { __name = "weft.Type" }
  Type.__index = Type
  weft.Type = Type

  -- A new named ctype: `typedef <body> weft_<base>_<serial>;`. The serial
  -- keeps every type distinct (vec4f and quatf share a body) and lets this
  -- module load again (busted reloads it; LuaJIT allows one metatype per
  -- ctype and a typedef only once).
  local reg = debug.getregistry()
  local function newtype(base, body)
    local n = (reg["weft.types.serial"] or 0) + 1
    reg["weft.types.serial"] = n
    local nm = "weft_" .. base:gsub("[^%w]", "_") .. "_" .. n
    ffi.cdef("typedef " .. body .. " " .. nm .. ";")
    return ffi.typeof(nm), nm
  end

  local types = {}      -- id -> type
  local by_name = {}    -- name or alias -> type
  local by_ctid = {}    -- ffi ctype id -> type (composites)
  weft.types = types

  -- The composite type of a cdata (also through a reference: p.pos).
  local composites = {}
  local function type_of_cdata(v)
    local id = tonumber(ffi.typeof(v))
    local t = by_ctid[id]
    if t ~= nil then return t or nil end
    for _, c in ipairs(composites) do
      if ffi.istype(c.ctype, v) then
        by_ctid[id] = c
        return c
      end
    end
    by_ctid[id] = false
    return nil
  end

  function weft.is_type(v) return getmetatable(v) == Type end
  local is_type = weft.is_type

  ---------------------------------------------------------------------------
  -- errors at the user's level: skip the frames of lua/weft/*.lua
  ---------------------------------------------------------------------------
  local here = debug.getinfo(1, "S").source
  local dir = here:match("^(@.*[/\\])types%.lua$") or here

  local function user_level()
    local lvl = 3
    while true do
      local info = debug.getinfo(lvl, "S")
      if not info then return 0 end -- called from C (the embedding API): no position
      local src = info.source
      if info.what ~= "C" and src:sub(1, #dir) ~= dir then return lvl - 1 end
      lvl = lvl + 1
    end
  end
  -- Raise msg pointing at the first caller outside weft's Lua files.
  local function raise(msg, ...)
    if select("#", ...) > 0 then msg = fmt(msg, ...) end
    error(msg, user_level())
  end
  weft._raise = raise

  -- "a string", "a table", "nil", "a vec3f" for messages.
  local function describe(v)
    local tv = type(v)
    if tv == "nil" then return "nil" end
    if tv == "cdata" then
      local t = type_of_cdata(v)
      if t then return "a " .. t.name end
      return "a cdata<" .. tostring(ffi.typeof(v)):match("^ctype<(.*)>$") .. ">"
    end
    if tv == "table" and is_type(v) then return "the type " .. v.name end
    return (tv:match("^[aeiou]") and "an " or "a ") .. tv
  end
  weft._describe = describe

  local function register(t)
    t.id = #types + 1
    types[t.id] = t
    by_name[t.name] = t
    if t.ctype and t.kind ~= "bool" and t.kind ~= "int" and t.kind ~= "float" then
      by_ctid[tonumber(t.ctype)] = t
      if t.kind ~= "array" then composites[#composites + 1] = t end
    end
    return setmetatable(t, Type)
  end

  function Type.__tostring(t) return "weft." .. t.name end
  function Type.__call(t, ...) return t._make(...) end

  ---------------------------------------------------------------------------
  -- float16 <-> number (round to nearest even)
  ---------------------------------------------------------------------------
  -- Round a non-negative value to an integer, ties to even. Exact for the
  -- power-of-two scaled values below.
  local function rne(v)
    local r = floor(v)
    local d = v - r
    if d > 0.5 or (d == 0.5 and r % 2 == 1) then r = r + 1 end
    return r
  end

  local function half_from_number(x)
    if x ~= x then return 0x7e00 end
    local sign = 0
    if x < 0 or (x == 0 and 1 / x < 0) then sign, x = 0x8000, -x end
    if x >= 65520 then return sign + 0x7c00 end -- rounds past 65504: inf
    if x < 2 ^ -14 then return sign + rne(x * 2 ^ 24) end -- subnormal (0x400 = min normal)
    local m, e = math.frexp(x) -- x = m * 2^e, m in [0.5, 1)
    local mant = rne((m * 2 - 1) * 1024)
    local ex = e - 1 + 15
    if mant == 1024 then mant, ex = 0, ex + 1 end
    if ex >= 31 then return sign + 0x7c00 end
    return sign + ex * 1024 + mant
  end

  local function half_to_number(h)
    local sign = h >= 0x8000 and -1 or 1
    local ex = floor(h / 1024) % 32
    local mant = h % 1024
    if ex == 0 then return sign * mant * 2 ^ -24 end
    if ex == 31 then return mant == 0 and sign * huge or 0 / 0 end
    return sign * (1024 + mant) * 2 ^ (ex - 25)
  end
  -- Floats read from C memory. The LuaJIT here (Debian 12's 2.1) keeps the
  -- bits of a NaN it loads, and some NaN payloads then pass for other Lua
  -- values: float32 0xff9701b5 crashed the process, float64
  -- 0xffff000000000000 read as `false`. So floats are read through their
  -- bits first and every NaN comes back as the NaN of 0/0. p is a pointer
  -- to (or an array of) float/double.
  local u32p = typeof("const uint32_t *")
  local NAN = 0 / 0
  local HI = ffi.abi("le") and 1 or 0
  local function load_f32(p, i)
    local u = ffi.cast(u32p, p)[i]
    if u >= 0x80000000 then u = u - 0x80000000 end
    if u > 0x7f800000 then return NAN end
    return p[i]
  end
  local function load_f64(p, i)
    local q = ffi.cast(u32p, p)
    local hi = q[2 * i + HI]
    if hi >= 0x80000000 then hi = hi - 0x80000000 end
    if hi >= 0x7ff00000 and (hi > 0x7ff00000 or q[2 * i + 1 - HI] ~= 0) then return NAN end
    return p[i]
  end
  local function raw_load(p, i) return p[i] end
  -- The element reader for a scalar type name.
  local function loader(sname)
    return sname == "float32" and load_f32 or sname == "float64" and load_f64 or raw_load
  end

  -- The ctype of `count` elements of t (fill scratch buffers).
  function weft._array_ctype(t) return typeof(t.ffiname .. "[?]") end
  weft._half_from_number = half_from_number
  weft._half_to_number = half_to_number

  ---------------------------------------------------------------------------
  -- scalars
  ---------------------------------------------------------------------------
  local f32buf = ffi.new("float[1]")

  -- Convert a host value to a Lua number (or nil) for scalar stores.
  local function tonum(v)
    local tv = type(v)
    if tv == "number" then return v end
    if tv == "boolean" then return v and 1 or 0 end
    if tv == "cdata" and (ffi.istype("int64_t", v) or ffi.istype("uint64_t", v)) then return v end
    return nil
  end

  -- Per-type element access used by arrays: load(p, i) reads element i of a
  -- pointer of t.ptrct as a Lua value; store(p, i, v) writes one and returns
  -- nil, or a description of the problem ("a string, expected ...").
  local function scalar(name, kind, cname, bits, signed)
    local t = { name = name, kind = kind, bits = bits, signed = signed, cname = cname, cdecl = cname }
    t.ctype, t.ffiname = typeof(cname), cname
    t.size, t.align = ffi.sizeof(t.ctype), ffi.alignof(t.ctype)
    t.ptrct = typeof(cname .. " *")
    local expect = "expected a number for " .. name
    if kind == "bool" then
      expect = "expected a boolean or number for bool"
      t._make = function(v)
        if v == nil or v == false or v == 0 then return false end
        return true
      end
      t.load = function(p, i) return p[i] end
      t.store = function(p, i, v)
        if type(v) == "boolean" then p[i] = v
        elseif type(v) == "number" then p[i] = v ~= 0
        else return describe(v) .. ", " .. expect end
      end
    elseif name == "float16" then
      t._make = function(v)
        local x = tonum(v)
        if not x then raise("weft.float16: expected a number, got %s", describe(v)) end
        return half_to_number(half_from_number(tonumber(x)))
      end
      t.load = function(p, i) return half_to_number(p[i]) end
      t.store = function(p, i, v)
        local x = tonum(v)
        if not x then return describe(v) .. ", " .. expect end
        p[i] = half_from_number(tonumber(x))
      end
    else
      if name == "float32" then
        t._make = function(v)
          local x = tonum(v)
          if not x then raise("weft.float32: expected a number, got %s", describe(v)) end
          f32buf[0] = x
          return f32buf[0]
        end
      elseif name == "float64" then
        t._make = function(v)
          local x = tonum(v)
          if not x then raise("weft.float64: expected a number, got %s", describe(v)) end
          return tonumber(x)
        end
      elseif bits == 64 then
        local ct = t.ctype
        t._make = function(v)
          local x = tonum(v)
          if not x then raise("weft.%s: expected a number, got %s", name, describe(v)) end
          return ffi.cast(ct, x)
        end
      else
        local ct = t.ctype
        t._make = function(v)
          local x = tonum(v)
          if not x then raise("weft.%s: expected a number, got %s", name, describe(v)) end
          return tonumber(ffi.cast(ct, x))
        end
      end
      if bits == 64 and kind == "int" then
        -- Lua numbers on the host (exact up to 2^53); a:ptr() gives the bits.
        t.load = function(p, i) return tonumber(p[i]) end
      else
        t.load = loader(name)
      end
      if kind == "int" and bits < 64 then
        -- Through a cast so out-of-range values wrap like C (uint8 300 -> 44).
        local ct = t.ctype
        t.store = function(p, i, v)
          local x = tonum(v)
          if not x then return describe(v) .. ", " .. expect end
          p[i] = ffi.cast(ct, x)
        end
      else
        t.store = function(p, i, v)
          local x = tonum(v)
          if not x then return describe(v) .. ", " .. expect end
          p[i] = x
        end
      end
    end
    t.totable = function(v) return v end
    t.format = nil
    return register(t)
  end

  -- Scalars are registered first, in a fixed order: their ids are stable.
  local S = {}
  S.bool = scalar("bool", "bool", "bool", 8, false)
  S.int8 = scalar("int8", "int", "int8_t", 8, true)
  S.uint8 = scalar("uint8", "int", "uint8_t", 8, false)
  S.int16 = scalar("int16", "int", "int16_t", 16, true)
  S.uint16 = scalar("uint16", "int", "uint16_t", 16, false)
  S.int32 = scalar("int32", "int", "int32_t", 32, true)
  S.uint32 = scalar("uint32", "int", "uint32_t", 32, false)
  S.int64 = scalar("int64", "int", "int64_t", 64, true)
  S.uint64 = scalar("uint64", "int", "uint64_t", 64, false)
  S.float16 = scalar("float16", "float", "uint16_t", 16, true)
  S.float32 = scalar("float32", "float", "float", 32, true)
  S.float64 = scalar("float64", "float", "double", 64, true)
  for k, t in pairs(S) do weft[k] = t end
  weft.int, weft.float = S.int32, S.float32
  by_name.int, by_name.float = S.int32, S.float32
  by_name.half, by_name.double = S.float16, S.float64

  local function is_scalar(t) return t.kind == "bool" or t.kind == "int" or t.kind == "float" end

  -- Format a scalar for tostring: integers without a fraction, floats with
  -- as many digits as their precision holds.
  local function fmtnum(x, t)
    if type(x) == "boolean" then return tostring(x) end
    if type(x) == "cdata" then return (tostring(x):gsub("U?LL$", "")) end
    if x ~= x then return "nan" end
    if x == huge then return "inf" elseif x == -huge then return "-inf" end
    if x == floor(x) and x > -1e15 and x < 1e15 then return fmt("%d", x) end
    local digits = (t and t.bits == 64) and 16 or (t and t.bits == 16) and 5 or 7
    return fmt("%." .. digits .. "g", x)
  end
  weft._fmtnum = fmtnum

  ---------------------------------------------------------------------------
  -- composites: shared helpers
  ---------------------------------------------------------------------------
  local half = S.float16
  local suffix = { float16 = "h", float32 = "f", float64 = "d", int32 = "i", uint8 = "ub" }

  -- Read and write scalar j of the flat storage of a composite value.
  -- Half composites keep bits in a uint16 array named v (or m).
  local function resolve_scalar(st)
    if type(st) == "string" then
      local t = by_name[st]
      if not t then return nil end
      st = t
    end
    if is_type(st) and is_scalar(st) then return st end
    return nil
  end

  ---------------------------------------------------------------------------
  -- vectors and quaternions
  ---------------------------------------------------------------------------
  local NAMES = { "x", "y", "z", "w" }

  -- Host behaviour (metatypes, constructors, load/store) of the composite
  -- families comes from weft.metatypes; the functions below fix layouts.
  local host = require "weft.metatypes" (weft, {
    raise = raise, describe = describe, is_type = is_type, type_of_cdata = type_of_cdata,
    tonum = tonum, fmtnum = fmtnum, loader = loader,
    half_from_number = half_from_number, half_to_number = half_to_number,
    S = S, NAMES = NAMES,
  })

  local function make_vec(name, kind, n, st)
    local t = { name = name, kind = kind, n = n, scalar = st }
    local ishalf = st == half
    local sc = st.cname
    t.cname = "weft_" .. name:gsub("[^%w]", "_")
    t.cdecl = fmt("typedef struct %s { %s v[%d]; } %s;", t.cname, sc, n, t.cname)
    local ct
    if ishalf or n > 4 then
      ct, t.ffiname = newtype(name, fmt("struct { %s v[%d]; }", sc, n))
    else
      local names = table.concat(NAMES, ", ", 1, n)
      ct, t.ffiname = newtype(name, fmt("union { struct { %s %s; }; %s v[%d]; }", sc, names, sc, n))
    end
    t.ctype = ct
    t.size, t.align = ffi.sizeof(ct), ffi.alignof(ct)
    t.ptrct = typeof(t.ffiname .. " *")
    host.vec(t)
    return register(t)
  end

  ---------------------------------------------------------------------------
  -- matrices (row-major)
  ---------------------------------------------------------------------------
  local function make_mat(name, rows, cols, st, rowvec)
    local t = { name = name, kind = "mat", rows = rows, cols = cols, scalar = st }
    local sc = st.cname
    t.cname = "weft_" .. name:gsub("[^%w]", "_")
    t.cdecl = fmt("typedef struct %s { %s m[%d][%d]; } %s;", t.cname, sc, rows, cols, t.cname)
    local ct
    ct, t.ffiname = newtype(name, fmt("struct { %s m[%d][%d]; }", sc, rows, cols))
    t.ctype = ct
    t.size, t.align = ffi.sizeof(ct), ffi.alignof(ct)
    t.ptrct = typeof(t.ffiname .. " *")
    host.mat(t, rowvec)
    return register(t)
  end

  ---------------------------------------------------------------------------
  -- transforms: p (vec3) then q (quat), 7 scalars
  ---------------------------------------------------------------------------
  local function make_transform(name, st, v3, q)
    local t = { name = name, kind = "transform", scalar = st, n = 7 }
    t.cname = "weft_" .. name
    t.cdecl = fmt("typedef struct %s { %s p; %s q; } %s;", t.cname, v3.cname, q.cname, t.cname)
    local ct
    ct, t.ffiname = newtype(name, fmt("struct { %s p; %s q; }", v3.ffiname, q.ffiname))
    t.ctype = ct
    t.size, t.align = ffi.sizeof(ct), ffi.alignof(ct)
    t.ptrct = typeof(t.ffiname .. " *")
    host.transform(t, v3, q)
    return register(t)
  end

  ---------------------------------------------------------------------------
  -- the named families
  ---------------------------------------------------------------------------
  local vec_interned = {}   -- "n,scalar" -> type
  local mat_interned = {}   -- "r,c,scalar" -> type

  for _, sname in ipairs { "float16", "float32", "float64", "int32", "uint8" } do
    local st, sfx = S[sname], suffix[sname]
    for n = 2, 4 do
      local vt = make_vec("vec" .. n .. sfx, "vec", n, st)
      weft[vt.name] = vt
      vec_interned[n .. "," .. sname] = vt
    end
  end
  for _, sname in ipairs { "float16", "float32", "float64" } do
    local st, sfx = S[sname], suffix[sname]
    for n = 2, 4 do
      local mt = make_mat("mat" .. n .. n .. sfx, n, n, st, vec_interned[n .. "," .. sname])
      weft[mt.name] = mt
      mat_interned[n .. "," .. n .. "," .. sname] = mt
    end
    local q = make_vec("quat" .. sfx, "quat", 4, st)
    weft[q.name] = q
    local tr = make_transform("transform" .. sfx, st, vec_interned["3," .. sname], q)
    weft[tr.name] = tr
    local sv = make_vec("spatial_vector" .. sfx, "vec", 6, st)
    weft[sv.name] = sv
    local sm = make_mat("spatial_matrix" .. sfx, 6, 6, st, sv)
    weft[sm.name] = sm
  end
  -- unsuffixed names are float32
  for _, base in ipairs { "vec2", "vec3", "vec4", "mat22", "mat33", "mat44", "quat", "transform",
                          "spatial_vector", "spatial_matrix" } do
    weft[base] = weft[base .. "f"]
    by_name[base] = weft[base .. "f"]
  end

  local function scalar_arg(fname, dtype, argn)
    local st = resolve_scalar(dtype)
    if not st then
      raise("weft.%s: argument %d must be a scalar type (weft.float32, ...), got %s", fname, argn,
        type(dtype) == "string" and ("'" .. dtype .. "'") or describe(dtype))
    end
    return st
  end
  local function count_arg(fname, x, what)
    if type(x) ~= "number" or x ~= floor(x) or x < 1 or x > 64 then
      raise("weft.%s: %s must be an integer from 1 to 64, got %s", fname, what, tostring(x))
    end
    return x
  end

  -- weft.vector(length, dtype): interned, so the same arguments give the
  -- same table (vector(3, float32) is weft.vec3).
  function weft.vector(n, dtype)
    count_arg("vector", n, "length")
    local st = scalar_arg("vector", dtype or S.float32, 2)
    local key = n .. "," .. st.name
    local t = vec_interned[key]
    if not t then
      t = make_vec(fmt("vector(%d,%s)", n, st.name), "vec", n, st)
      vec_interned[key] = t
    end
    return t
  end

  function weft.matrix(rows, cols, dtype)
    count_arg("matrix", rows, "rows")
    count_arg("matrix", cols, "cols")
    local st = scalar_arg("matrix", dtype or S.float32, 3)
    local key = rows .. "," .. cols .. "," .. st.name
    local t = mat_interned[key]
    if not t then
      local rv = weft.vector(cols, st)
      t = make_mat(fmt("matrix(%d,%d,%s)", rows, cols, st.name), rows, cols, st, rv)
      mat_interned[key] = t
    end
    return t
  end

  ---------------------------------------------------------------------------
  -- structs
  ---------------------------------------------------------------------------
  local nstructs = 0
  local function c_ident(s) return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil end

  -- An array field holds the first 72 bytes of its array's header (data,
  -- shape, strides): the layout a CUDA kernel takes by value (struct wf_arr
  -- of src/cuda/prelude.cuh) and the CPU backend reads in place.
  local arrfield_ct, arrfield_name
  local function arrfield()
    if not arrfield_ct then
      arrfield_ct, arrfield_name = newtype("arrfield", "struct { void *data; int64_t shape[4]; int64_t strides[4]; }")
      assert(ffi.sizeof(arrfield_ct) == 72)
    end
    return arrfield_name
  end

  -- weft.struct{ {"pos", weft.vec3}, {"mass", weft.float32} [, name = "P"] }
  function weft.struct(spec)
    if type(spec) ~= "table" then raise("weft.struct: expected a table of {name, type} fields, got %s", describe(spec)) end
    if #spec == 0 then raise("weft.struct: a struct needs at least one field") end
    nstructs = nstructs + 1
    local sname = spec.name or ("struct" .. nstructs)
    if not c_ident(sname) then raise("weft.struct: name '%s' is not an identifier", tostring(sname)) end
    local t = { name = sname, kind = "struct", fields = {} }
    local decl, cdecl, seen = {}, {}, {}
    for i, f in ipairs(spec) do
      if type(f) ~= "table" or not c_ident(f[1]) then
        raise("weft.struct: field %d must be {\"name\", type}", i)
      end
      local fname, ft = f[1], f[2]
      if type(ft) == "string" then ft = by_name[ft] or ft end
      if not is_type(ft) then
        raise("weft.struct: field '%s' has %s, expected a weft type", fname, describe(f[2]))
      end
      if seen[fname] then raise("weft.struct: field '%s' appears twice", fname) end
      seen[fname] = true
      -- half fields are stored under a hidden name and converted on access
      local cfield = ft == half and ("_h_" .. fname) or fname
      -- so are arrays and structs holding them (metatypes.lua keeps the
      -- arrays alive through accesses by name)
      if ft.kind == "array" or ft.arrays then cfield = "_a_" .. fname end
      if ft.kind == "array" then
        decl[#decl + 1] = arrfield() .. " " .. cfield .. ";"
        cdecl[#cdecl + 1] = fmt("struct { void *data; int64_t shape[4]; int64_t strides[4]; } %s;", fname)
      else
        decl[#decl + 1] = ft.ffiname .. " " .. cfield .. ";"
        cdecl[#cdecl + 1] = fmt("%s %s;", ft.cname, fname)
      end
      t.fields[i] = { name = fname, type = ft, cfield = cfield }
    end
    local ct
    ct, t.ffiname = newtype(sname, "struct { " .. table.concat(decl, " ") .. " }")
    t.ctype = ct
    t.size, t.align = ffi.sizeof(ct), ffi.alignof(ct)
    t.ptrct = typeof(t.ffiname .. " *")
    t.cname = "weft_" .. sname
    t.cdecl = fmt("typedef struct %s { %s } %s;", t.cname, table.concat(cdecl, " "), t.cname)
    local byfield = {}
    -- t.arrays: every array slot, nested structs' too, in field order:
    -- { offset = bytes from the struct's start, type =, path = "state.x" }
    local arrays = {}
    for _, f in ipairs(t.fields) do
      f.offset = ffi.offsetof(ct, f.cfield)
      byfield[f.name] = f
      if f.type.kind == "array" then
        arrays[#arrays + 1] = { offset = f.offset, type = f.type, path = f.name }
      elseif f.type.arrays then
        for _, a in ipairs(f.type.arrays) do
          arrays[#arrays + 1] = { offset = f.offset + a.offset, type = a.type, path = f.name .. "." .. a.path }
        end
      end
    end
    if #arrays > 0 then t.arrays = arrays end

    host.struct(t, byfield)
    return register(t)
  end

  ---------------------------------------------------------------------------
  -- lookups
  ---------------------------------------------------------------------------
  -- The type named `name` ("float32", "vec3", "mat33d", "vector(5,float32)",
  -- a struct's name), or nil.
  function weft.type_from_name(name)
    if is_type(name) then return name end
    if type(name) ~= "string" then return nil end
    local t = by_name[name]
    if t then return t end
    local n, s = name:match("^vector%(%s*(%d+)%s*,%s*([%w_]+)%s*%)$")
    if n and resolve_scalar(s) then return weft.vector(tonumber(n), s) end
    local r, c
    r, c, s = name:match("^matrix%(%s*(%d+)%s*,%s*(%d+)%s*,%s*([%w_]+)%s*%)$")
    if r and resolve_scalar(s) then return weft.matrix(tonumber(r), tonumber(c), s) end
    return nil
  end

  -- The weft type of a host value: booleans are bool, numbers float32,
  -- int64/uint64 cdata int64/uint64, composite cdata their type, arrays
  -- their array type. nil if the value has no weft type.
  function weft.dtype_of(v)
    local tv = type(v)
    if tv == "number" then return S.float32 end
    if tv == "boolean" then return S.bool end
    if tv == "cdata" then
      if ffi.istype("int64_t", v) then return S.int64 end
      if ffi.istype("uint64_t", v) then return S.uint64 end
      local t = type_of_cdata(v)
      if t then return t end
      if weft.is_array and weft.is_array(v) then return weft.array(v.dtype, v.ndim) end
    end
    return nil
  end

  -- composite type of a cdata value, used by arrays
  function weft._type_of_cdata(v) return type_of_cdata(v) end

  ---------------------------------------------------------------------------
  -- array types (for kernel signatures); weft.array dispatches here when its
  -- first argument is a type
  ---------------------------------------------------------------------------
  local arr_interned = {}
  local wf_array_ct = ffi.typeof("wf_array")
  function weft._array_type(dtype, ndim)
    ndim = ndim or 1
    if type(ndim) ~= "number" or ndim ~= floor(ndim) or ndim < 1 or ndim > 4 then
      raise("weft.array: ndim must be an integer from 1 to 4, got %s", tostring(ndim))
    end
    if dtype.kind == "array" then raise("weft.array: arrays of arrays are not supported") end
    if dtype.arrays then
      raise("weft.array: %s holds arrays; arrays of it are not supported (pass the struct itself)", dtype.name)
    end
    local key = dtype.id .. "," .. ndim
    local t = arr_interned[key]
    if not t then
      local name = ndim == 1 and fmt("array(%s)", dtype.name) or fmt("array(%s,%d)", dtype.name, ndim)
      t = { name = name, kind = "array", dtype = dtype, ndim = ndim, ctype = wf_array_ct,
            cname = "wf_array", cdecl = "wf_array", ffiname = "wf_array",
            size = ffi.sizeof(wf_array_ct), align = ffi.alignof(wf_array_ct) }
      t._make = function() raise("weft.%s: an array type cannot build values (use weft.zeros)", name) end
      register(t)
      by_ctid[tonumber(wf_array_ct)] = nil
      arr_interned[key] = t
    end
    return t
  end
end
