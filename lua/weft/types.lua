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
  local u32p, u8ptr = typeof("const uint32_t *"), typeof("uint8_t *")
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

  -- Number from a host value for a composite component, or raise.
  local function comp(v, tname, what)
    local x = tonum(v)
    if not x or type(x) ~= "number" then
      if x then return tonumber(x) end
      raise("weft.%s: %s is %s, expected a number", tname, what, describe(v))
    end
    return x
  end

  ---------------------------------------------------------------------------
  -- vectors and quaternions
  ---------------------------------------------------------------------------
  local NAMES = { "x", "y", "z", "w" }

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
    local nameidx = {}
    for i = 1, math.min(n, 4) do nameidx[NAMES[i]] = i - 1 end

    -- component access (half: convert bits)
    local get, set
    if ishalf then
      get = function(v, i) return half_to_number(v.v[i]) end
      set = function(v, i, x) v.v[i] = half_from_number(x) end
    else
      local load = loader(st.name)
      get = function(v, i) return load(v.v, i) end
      set = function(v, i, x) v.v[i] = x end
    end
    t._get, t._set = get, set

    local function new_from(...)
      local nargs = select("#", ...)
      local v = ct()
      if nargs == 0 then return v end
      local a1 = ...
      if nargs == 1 then
        if type(a1) == "table" and not is_type(a1) then
          if #a1 ~= n then raise("weft.%s: expected a table of %d numbers, got %d values", name, n, #a1) end
          for i = 1, n do set(v, i - 1, comp(a1[i], name, "component " .. i)) end
          return v
        elseif type(a1) == "cdata" and type_of_cdata(a1) then
          local o = type_of_cdata(a1)
          if o.n ~= n or not o._get then raise("weft.%s: cannot build from %s", name, describe(a1)) end
          for i = 0, n - 1 do set(v, i, o._get(a1, i)) end
          return v
        end
        local x = comp(a1, name, "argument 1")
        for i = 0, n - 1 do set(v, i, x) end -- broadcast one scalar
        return v
      end
      if nargs ~= n then raise("weft.%s: expected %d components, got %d", name, n, nargs) end
      for i = 1, n do set(v, i - 1, comp((select(i, ...)), name, "component " .. i)) end
      return v
    end
    t._make = new_from

    local function check_index(i)
      if type(i) ~= "number" or i ~= floor(i) or i < 0 or i >= n then
        raise("weft.%s: index %s out of range [0, %d)", name, tostring(i), n)
      end
    end
    local methods = {}
    local mt = {}
    mt.__index = function(v, k)
      if type(k) == "number" then
        check_index(k)
        return get(v, k)
      end
      local j = nameidx[k]
      if j then return get(v, j) end
      local m = methods[k]
      if m then return m end
      raise("weft.%s has no field '%s'", name, tostring(k))
    end
    mt.__newindex = function(v, k, x)
      local j
      if type(k) == "number" then
        check_index(k)
        j = k
      else
        j = nameidx[k]
        if not j then raise("weft.%s has no field '%s'", name, tostring(k)) end
      end
      set(v, j, comp(x, name, "component"))
    end
    local function same(a, b) return ffi.istype(ct, a) and ffi.istype(ct, b) end
    local function binop(opname, f)
      return function(a, b)
        local r = ct()
        if same(a, b) then
          for i = 0, n - 1 do set(r, i, f(get(a, i), get(b, i))) end
        elseif type(b) == "number" and ffi.istype(ct, a) then
          for i = 0, n - 1 do set(r, i, f(get(a, i), b)) end
        elseif type(a) == "number" and ffi.istype(ct, b) and opname ~= "/" then
          for i = 0, n - 1 do set(r, i, f(a, get(b, i))) end
        else
          raise("weft.%s: cannot apply '%s' to %s and %s", name, opname, describe(a), describe(b))
        end
        return r
      end
    end
    mt.__add = binop("+", function(x, y) return x + y end)
    mt.__sub = binop("-", function(x, y) return x - y end)
    local scale = binop("*", function(x, y) return x * y end)
    mt.__div = binop("/", function(x, y) return x / y end)
    mt.__unm = function(a)
      local r = ct()
      for i = 0, n - 1 do set(r, i, -get(a, i)) end
      return r
    end
    if kind == "quat" then
      -- Hamilton product; components (x, y, z, w) with w the real part.
      mt.__mul = function(a, b)
        if not same(a, b) then return scale(a, b) end
        local ax, ay, az, aw = get(a, 0), get(a, 1), get(a, 2), get(a, 3)
        local bx, by, bz, bw = get(b, 0), get(b, 1), get(b, 2), get(b, 3)
        return new_from(aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
          aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz)
      end
    else
      mt.__mul = function(a, b)
        if same(a, b) then
          raise("weft.%s: '*' of two vectors is ambiguous (use weft.dot or weft.cw_mul)", name)
        end
        -- vector * matrix is handled by the matrix's metamethod
        if type(b) == "cdata" and not ffi.istype(ct, b) then
          local o = type_of_cdata(b)
          if o and o._rmul then return o._rmul(a, b) end
        end
        return scale(a, b)
      end
    end
    mt.__eq = function(a, b)
      if not same(a, b) then return false end
      for i = 0, n - 1 do
        if get(a, i) ~= get(b, i) then return false end
      end
      return true
    end
    mt.__len = function() return n end
    mt.__tostring = function(v)
      local parts = {}
      for i = 0, n - 1 do parts[i + 1] = fmtnum(get(v, i), st) end
      return name .. "(" .. table.concat(parts, ", ") .. ")"
    end
    methods.totable = function(v)
      local r = {}
      for i = 0, n - 1 do r[i + 1] = get(v, i) end
      return r
    end
    ffi.metatype(ct, mt)

    t.load = function(p, i) return ct(p[i]) end
    t.store = function(p, i, v)
      if ffi.istype(ct, v) then
        p[i] = v
        return
      end
      if type(v) ~= "table" or is_type(v) then
        return fmt("%s, expected a %s or a table of %d numbers", describe(v), name, n)
      end
      if #v ~= n then return fmt("a table of %d values, expected %d numbers for %s", #v, n, name) end
      local e = p[i]
      for j = 1, n do
        local x = tonum(v[j])
        if not x then return fmt("a table whose item %d is %s, expected a number for %s", j, describe(v[j]), name) end
        set(e, j - 1, tonumber(x))
      end
    end
    t.totable = methods.totable
    return register(t)
  end

  ---------------------------------------------------------------------------
  -- matrices (row-major)
  ---------------------------------------------------------------------------
  local function make_mat(name, rows, cols, st, rowvec)
    local t = { name = name, kind = "mat", rows = rows, cols = cols, scalar = st }
    local ishalf = st == half
    local sc = st.cname
    t.cname = "weft_" .. name:gsub("[^%w]", "_")
    t.cdecl = fmt("typedef struct %s { %s m[%d][%d]; } %s;", t.cname, sc, rows, cols, t.cname)
    local ct
    ct, t.ffiname = newtype(name, fmt("struct { %s m[%d][%d]; }", sc, rows, cols))
    t.ctype = ct
    t.size, t.align = ffi.sizeof(ct), ffi.alignof(ct)
    t.ptrct = typeof(t.ffiname .. " *")
    local get, set
    if ishalf then
      get = function(m, i, j) return half_to_number(m.m[i][j]) end
      set = function(m, i, j, x) m.m[i][j] = half_from_number(x) end
    else
      local load = loader(st.name)
      get = function(m, i, j) return load(m.m[i], j) end
      set = function(m, i, j, x) m.m[i][j] = x end
    end
    t._mget, t._mset = get, set

    local function new_from(...)
      local nargs = select("#", ...)
      local m = ct()
      if nargs == 0 then return m end
      local a1 = ...
      if nargs == 1 and type(a1) == "table" and not is_type(a1) then
        if #a1 == rows and type(a1[1]) == "table" then
          for i = 1, rows do
            local r = a1[i]
            if type(r) ~= "table" or #r ~= cols then
              raise("weft.%s: row %d must be a table of %d numbers", name, i, cols)
            end
            for j = 1, cols do set(m, i - 1, j - 1, comp(r[j], name, "entry")) end
          end
        elseif #a1 == rows * cols then
          for k = 0, rows * cols - 1 do
            set(m, floor(k / cols), k % cols, comp(a1[k + 1], name, "entry " .. (k + 1)))
          end
        else
          raise("weft.%s: expected %d rows of %d numbers or %d numbers", name, rows, cols, rows * cols)
        end
        return m
      end
      if nargs == 1 and type(a1) ~= "cdata" then
        local x = comp(a1, name, "argument 1")
        for i = 0, rows - 1 do for j = 0, cols - 1 do set(m, i, j, x) end end
        return m
      end
      if nargs == rows and type(a1) == "cdata" then -- row vectors
        for i = 1, rows do
          local r = select(i, ...)
          if not (rowvec and ffi.istype(rowvec.ctype, r)) then
            raise("weft.%s: row %d is %s, expected a %s", name, i, describe(r), rowvec and rowvec.name or "vector")
          end
          for j = 0, cols - 1 do set(m, i - 1, j, rowvec._get(r, j)) end
        end
        return m
      end
      if nargs ~= rows * cols then
        raise("weft.%s: expected %d numbers or %d row vectors, got %d arguments", name, rows * cols, rows, nargs)
      end
      for k = 0, rows * cols - 1 do
        set(m, floor(k / cols), k % cols, comp((select(k + 1, ...)), name, "entry " .. (k + 1)))
      end
      return m
    end
    t._make = new_from

    -- Half matrices hand out a small proxy per row that converts on access;
    -- the others the row's storage itself (m[i][j] = x writes through).
    local rowproxy
    if ishalf then
      local pmt = {
        __index = function(p, j) return get(p._m, p._i, j) end,
        __newindex = function(p, j, x) set(p._m, p._i, j, comp(x, name, "entry")) end,
      }
      rowproxy = function(m, i) return setmetatable({ _m = m, _i = i }, pmt) end
    end
    local methods = {}
    local mt = {}
    mt.__index = function(m, k)
      if type(k) == "number" then
        if k ~= floor(k) or k < 0 or k >= rows then
          raise("weft.%s: row index %s out of range [0, %d)", name, tostring(k), rows)
        end
        if rowproxy then return rowproxy(m, k) end
        return m.m[k]
      end
      local f = methods[k]
      if f then return f end
      raise("weft.%s has no field '%s'", name, tostring(k))
    end
    local function same(a, b) return ffi.istype(ct, a) and ffi.istype(ct, b) end
    local function ewise(opname, f)
      return function(a, b)
        local r = ct()
        if same(a, b) then
          for i = 0, rows - 1 do for j = 0, cols - 1 do set(r, i, j, f(get(a, i, j), get(b, i, j))) end end
        elseif ffi.istype(ct, a) and type(b) == "number" then
          for i = 0, rows - 1 do for j = 0, cols - 1 do set(r, i, j, f(get(a, i, j), b)) end end
        elseif ffi.istype(ct, b) and type(a) == "number" and opname ~= "/" then
          for i = 0, rows - 1 do for j = 0, cols - 1 do set(r, i, j, f(a, get(b, i, j))) end end
        else
          raise("weft.%s: cannot apply '%s' to %s and %s", name, opname, describe(a), describe(b))
        end
        return r
      end
    end
    mt.__add = ewise("+", function(x, y) return x + y end)
    mt.__sub = ewise("-", function(x, y) return x - y end)
    mt.__div = ewise("/", function(x, y) return x / y end)
    local scale = ewise("*", function(x, y) return x * y end)
    mt.__unm = function(a) return scale(a, -1) end
    mt.__mul = function(a, b)
      if type(a) == "number" or type(b) == "number" then return scale(a, b) end
      local ta = type_of_cdata(a)
      local tb = type_of_cdata(b)
      if ta == t and tb and tb.kind == "mat" and tb.rows == cols and tb.scalar == st then
        local out = weft.matrix(rows, tb.cols, st)
        local r = out.ctype()
        for i = 0, rows - 1 do
          for j = 0, tb.cols - 1 do
            local s = 0
            for k = 0, cols - 1 do s = s + get(a, i, k) * tb._mget(b, k, j) end
            out._mset(r, i, j, s)
          end
        end
        return r
      elseif ta == t and tb and tb.kind == "vec" and tb.n == cols and tb.scalar == st then
        local out = weft.vector(rows, st)
        local r = out.ctype()
        for i = 0, rows - 1 do
          local s = 0
          for k = 0, cols - 1 do s = s + get(a, i, k) * tb._get(b, k) end
          out._set(r, i, s)
        end
        return r
      elseif tb == t and ta and ta.kind == "vec" and ta.n == rows and ta.scalar == st then
        local out = weft.vector(cols, st)
        local r = out.ctype()
        for j = 0, cols - 1 do
          local s = 0
          for k = 0, rows - 1 do s = s + ta._get(a, k) * get(b, k, j) end
          out._set(r, j, s)
        end
        return r
      end
      raise("weft.%s: cannot multiply %s by %s", name, describe(a), describe(b))
    end
    t._rmul = mt.__mul
    mt.__eq = function(a, b)
      if not same(a, b) then return false end
      for i = 0, rows - 1 do
        for j = 0, cols - 1 do
          if get(a, i, j) ~= get(b, i, j) then return false end
        end
      end
      return true
    end
    mt.__len = function() return rows end
    methods.totable = function(m)
      local r = {}
      for i = 0, rows - 1 do
        local row = {}
        for j = 0, cols - 1 do row[j + 1] = get(m, i, j) end
        r[i + 1] = row
      end
      return r
    end
    mt.__tostring = function(m)
      local rs = {}
      for i = 0, rows - 1 do
        local row = {}
        for j = 0, cols - 1 do row[j + 1] = fmtnum(get(m, i, j), st) end
        rs[i + 1] = "[" .. table.concat(row, ", ") .. "]"
      end
      return name .. "(" .. table.concat(rs, ", ") .. ")"
    end
    ffi.metatype(ct, mt)

    t.load = function(p, i) return ct(p[i]) end
    t.store = function(p, i, v)
      if ffi.istype(ct, v) then
        p[i] = v
        return
      end
      if type(v) ~= "table" or is_type(v) then
        return fmt("%s, expected a %s or a table of %d rows", describe(v), name, rows)
      end
      local e = p[i]
      if #v == rows and type(v[1]) == "table" then
        for r = 1, rows do
          local row = v[r]
          if type(row) ~= "table" or #row ~= cols then
            return fmt("a table whose row %d is not %d numbers, expected a %s", r, cols, name)
          end
          for c = 1, cols do
            local x = tonum(row[c])
            if not x then return fmt("a table holding %s, expected numbers for %s", describe(row[c]), name) end
            set(e, r - 1, c - 1, tonumber(x))
          end
        end
      elseif #v == rows * cols then
        for k = 1, rows * cols do
          local x = tonum(v[k])
          if not x then return fmt("a table holding %s, expected numbers for %s", describe(v[k]), name) end
          set(e, floor((k - 1) / cols), (k - 1) % cols, tonumber(x))
        end
      else
        return fmt("a table of %d values, expected %d rows of %d numbers for %s", #v, rows, cols, name)
      end
    end
    t.totable = methods.totable
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
    local function get(x, i)
      if i < 3 then return v3._get(x.p, i) end
      return q._get(x.q, i - 3)
    end
    local function set(x, i, val)
      if i < 3 then v3._set(x.p, i, val) else q._set(x.q, i - 3, val) end
    end
    t._get, t._set = get, set
    t._make = function(...)
      local nargs = select("#", ...)
      local x = ct()
      q._set(x.q, 3, 1) -- identity rotation by default
      if nargs == 0 then return x end
      local a1, a2 = ...
      if nargs == 2 then
        if ffi.istype(v3.ctype, a1) then x.p = a1
        elseif type(a1) == "table" then x.p = v3._make(a1)
        else raise("weft.%s: p is %s, expected a %s", name, describe(a1), v3.name) end
        if ffi.istype(q.ctype, a2) then x.q = a2
        elseif type(a2) == "table" then x.q = q._make(a2)
        else raise("weft.%s: q is %s, expected a %s", name, describe(a2), q.name) end
        return x
      end
      if nargs == 1 and type(a1) == "table" and #a1 == 7 then
        for i = 0, 6 do set(x, i, comp(a1[i + 1], name, "component " .. (i + 1))) end
        return x
      end
      if nargs == 7 then
        for i = 0, 6 do set(x, i, comp((select(i + 1, ...)), name, "component " .. (i + 1))) end
        return x
      end
      raise("weft.%s: expected (p, q) or 7 numbers, got %d arguments", name, nargs)
    end
    local methods = {}
    methods.totable = function(x)
      local r = {}
      for i = 0, 6 do r[i + 1] = get(x, i) end
      return r
    end
    local mt = {}
    mt.__index = function(x, k)
      if type(k) == "number" then
        if k ~= floor(k) or k < 0 or k > 6 then raise("weft.%s: index %s out of range [0, 7)", name, tostring(k)) end
        return get(x, k)
      end
      local f = methods[k]
      if f then return f end
      raise("weft.%s has no field '%s'", name, tostring(k))
    end
    mt.__eq = function(a, b)
      if not (ffi.istype(ct, a) and ffi.istype(ct, b)) then return false end
      for i = 0, 6 do
        if get(a, i) ~= get(b, i) then return false end
      end
      return true
    end
    mt.__tostring = function(x)
      return fmt("%s(p=%s, q=%s)", name, tostring(x.p), tostring(x.q))
    end
    ffi.metatype(ct, mt)
    t.load = function(p, i) return ct(p[i]) end
    t.store = function(p, i, v)
      if ffi.istype(ct, v) then
        p[i] = v
        return
      end
      if type(v) ~= "table" or is_type(v) then
        return fmt("%s, expected a %s or a table of 7 numbers", describe(v), name)
      end
      local e = p[i]
      local flat = v
      if #v == 2 and type(v[1]) == "table" then
        flat = { v[1][1], v[1][2], v[1][3], v[2][1], v[2][2], v[2][3], v[2][4] }
      elseif #v ~= 7 then
        return fmt("a table of %d values, expected 7 numbers for %s", #v, name)
      end
      for j = 1, 7 do
        local xj = tonum(flat[j])
        if not xj then return fmt("a table holding %s, expected numbers for %s", describe(flat[j]), name) end
        set(e, j - 1, tonumber(xj))
      end
    end
    t.totable = methods.totable
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
      if not is_type(ft) or ft.kind == "array" then
        raise("weft.struct: field '%s' has %s, expected a weft type", fname, describe(f[2]))
      end
      if seen[fname] then raise("weft.struct: field '%s' appears twice", fname) end
      seen[fname] = true
      -- half fields are stored under a hidden name and converted on access
      local cfield = ft == half and ("_h_" .. fname) or fname
      decl[#decl + 1] = ft.ffiname .. " " .. cfield .. ";"
      cdecl[#cdecl + 1] = fmt("%s %s;", ft.cname, fname)
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
    for _, f in ipairs(t.fields) do
      f.offset = ffi.offsetof(ct, f.cfield)
      byfield[f.name] = f
    end

    -- assign one field from a host value (composite fields take tables)
    local function setfield(s, f, v)
      local ft = f.type
      if ft == half then
        local x = tonum(v)
        if not x then raise("weft.%s: field '%s' is %s, expected a number", sname, f.name, describe(v)) end
        s[f.cfield] = half_from_number(tonumber(x))
        return
      end
      local tmp = ffi.cast(ft.ptrct, ffi.cast("char *", s) + f.offset)
      local err = ft.store(tmp, 0, v)
      if err then raise("weft.%s: field '%s' is %s", sname, f.name, err) end
    end
    t._setfield = setfield

    t._make = function(init)
      local s = ct()
      if init == nil then return s end
      if ffi.istype(ct, init) then return ct(init) end
      if type(init) ~= "table" then raise("weft.%s: expected a table of fields, got %s", sname, describe(init)) end
      for k, v in pairs(init) do
        local f = byfield[k]
        if not f then raise("weft.%s has no field '%s'", sname, tostring(k)) end
        setfield(s, f, v)
      end
      return s
    end
    local mt = {}
    mt.__index = function(s, k)
      local f = byfield[k]
      if f and f.type == half then return half_to_number(s[f.cfield]) end
      if k == "totable" then return t.totable end
      raise("weft.%s has no field '%s'", sname, tostring(k))
    end
    mt.__newindex = function(s, k, v)
      local f = byfield[k]
      if not f then raise("weft.%s has no field '%s'", sname, tostring(k)) end
      setfield(s, f, v)
    end
    local function fieldval(s, f)
      if f.type == half then return half_to_number(s[f.cfield]) end
      if f.type == S.float32 or f.type == S.float64 then -- through the bits (NaNs)
        return f.type.load(ffi.cast(f.type.ptrct, ffi.cast(u8ptr, s) + f.offset), 0)
      end
      return s[f.name]
    end
    mt.__tostring = function(s)
      local parts = {}
      for i, f in ipairs(t.fields) do
        local v = fieldval(s, f)
        parts[i] = f.name .. "=" .. (type(v) == "number" and fmtnum(v, f.type) or tostring(v))
      end
      return sname .. "{" .. table.concat(parts, ", ") .. "}"
    end
    ffi.metatype(ct, mt)
    t.totable = function(s)
      local r = {}
      for _, f in ipairs(t.fields) do r[f.name] = f.type.totable(fieldval(s, f)) end
      return r
    end
    t.load = function(p, i) return ct(p[i]) end
    t.store = function(p, i, v)
      if ffi.istype(ct, v) then
        p[i] = v
        return
      end
      if type(v) ~= "table" or is_type(v) then
        return fmt("%s, expected a %s or a table of its fields", describe(v), sname)
      end
      local e = p[i]
      for k, x in pairs(v) do
        local f = byfield[k]
        if not f then return fmt("a table with unknown field '%s' for %s", tostring(k), sname) end
        local ok, err = pcall(setfield, e, f, x)
        if not ok then return "a table whose " .. tostring(err):gsub("^.-weft%.[%w_]+: ", "") end
      end
    end
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
