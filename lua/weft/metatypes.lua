-- weft.metatypes: host values of the composite weft types.
--
-- Takes a type descriptor whose layout lua/weft/types.lua has fixed (name,
-- kind, n or rows and cols, scalar, ctype; a struct's fields and offsets)
-- and gives it its host behaviour: the ffi metatype of t.ctype (fields
-- x y z w, 0-based [i], arithmetic, ==, tostring), the constructor t._make,
-- component access (t._get/t._set, t._mget/t._mset, t._setfield), and the
-- element conversions arrays use (t.load, t.store, t.totable).
--
-- types.lua calls the returned function once per load with the helpers it
-- shares (errors, float16 bits, NaN-safe loads, number conversion) and
-- gets one function per family back: vec, mat, transform, struct.
local ffi = require "ffi"

local floor = math.floor
local fmt = string.format

return function(weft, h)
  local raise, describe, is_type, type_of_cdata = h.raise, h.describe, h.is_type, h.type_of_cdata
  local tonum, fmtnum, loader = h.tonum, h.fmtnum, h.loader
  local half_from_number, half_to_number = h.half_from_number, h.half_to_number
  local S, NAMES = h.S, h.NAMES
  local half = S.float16
  local u8ptr = ffi.typeof("uint8_t *")

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
  local function vec(t)
    local name, kind, n, st, ct = t.name, t.kind, t.n, t.scalar, t.ctype
    local ishalf = st == half
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
  end

  ---------------------------------------------------------------------------
  -- matrices (row-major)
  ---------------------------------------------------------------------------
  local function mat(t, rowvec)
    local name, rows, cols, st, ct = t.name, t.rows, t.cols, t.scalar, t.ctype
    local ishalf = st == half
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
  end

  ---------------------------------------------------------------------------
  -- transforms: p (vec3) then q (quat), 7 scalars
  ---------------------------------------------------------------------------
  local function transform(t, v3, q)
    local name, ct = t.name, t.ctype
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
  end

  ---------------------------------------------------------------------------
  -- structs
  ---------------------------------------------------------------------------
  -- Arrays held by struct fields. A field keeps the first 72 bytes of its
  -- array's header (types.lua); `keep` maps the address of such a slot to
  -- the array, so the array lives as long as the struct holding it and
  -- reads give the array object back. Structs with array fields are
  -- allocated with a finalizer that drops their slots' entries; a copy
  -- (P(s), nested assignment m.state = s) copies the entries too. A slot
  -- whose bytes no longer match its entry reads as nil.
  local keep = {}
  local uptr, voidpp = ffi.typeof("uintptr_t"), ffi.typeof("void **")
  local function addr(p) return tonumber(ffi.cast(uptr, p)) end
  local function slot_array(p)
    local a = keep[addr(p)]
    if a ~= nil and ffi.cast(voidpp, p)[0] == a.h.data and a.h.data ~= nil then return a end
    if a ~= nil and a.h.data == nil and ffi.cast(voidpp, p)[0] == nil then return a end
    return nil
  end
  -- Copy the kept arrays of the slots of type t from struct src to dst.
  local function copy_keep(t, dst, src)
    local d, sp = ffi.cast(u8ptr, dst), ffi.cast(u8ptr, src)
    for _, a in ipairs(t.arrays) do keep[addr(d + a.offset)] = slot_array(sp + a.offset) end
  end
  local function array_typename(v)
    local dt = weft.types[v.h.dtype]
    local nm = dt and dt.name or "?"
    return v.h.ndim == 1 and fmt("array(%s)", nm) or fmt("array(%s,%d)", nm, v.h.ndim)
  end

  local function struct(t, byfield)
    local sname, ct = t.name, t.ctype
    local arrays = t.arrays
    -- assign one field from a host value (composite fields take tables)
    local function setfield(s, f, v)
      local ft = f.type
      if ft.kind == "array" then
        local p = ffi.cast(u8ptr, s) + f.offset
        if v == nil then
          ffi.fill(p, 72)
          keep[addr(p)] = nil
          return
        end
        if not (weft.is_array and weft.is_array(v)) then
          raise("weft.%s: field '%s' expects %s, got %s", sname, f.name, ft.name, describe(v))
        end
        if v.h.dtype ~= ft.dtype.id or v.h.ndim ~= ft.ndim then
          raise("weft.%s: field '%s' expects %s, got %s", sname, f.name, ft.name, array_typename(v))
        end
        ffi.copy(p, v, 72)
        keep[addr(p)] = v
        return
      end
      if ft.arrays and ffi.istype(ft.ctype, v) then
        local p = ffi.cast(u8ptr, s) + f.offset
        ffi.copy(p, v, ft.size)
        copy_keep(ft, p, v)
        return
      end
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

    local new = ct
    if arrays then
      local function release(s)
        local b = ffi.cast(u8ptr, s)
        for _, a in ipairs(arrays) do keep[addr(b + a.offset)] = nil end
      end
      new = function(init)
        local s = ffi.gc(ct(), release)
        if init ~= nil then
          ffi.copy(s, init, t.size)
          copy_keep(t, s, init)
        end
        return s
      end
      -- The arrays s holds: { {path = "state.x", array = a}, ... } (set
      -- slots only), for the launch's device checks and the tape.
      t._arrays_of = function(s)
        local b, r = ffi.cast(u8ptr, s), {}
        for _, a in ipairs(arrays) do
          local x = slot_array(b + a.offset)
          if x then r[#r + 1] = { path = a.path, array = x, type = a.type } end
        end
        return r
      end
      -- A struct like s whose slots hold the gradients (a.grad) of the
      -- arrays s holds, and nothing where an array has none: the adjoint
      -- argument of s for an adjoint launch.
      t._grads_of = function(s)
        local g = new()
        local b, gb = ffi.cast(u8ptr, s), ffi.cast(u8ptr, g)
        for _, a in ipairs(arrays) do
          local x = slot_array(b + a.offset)
          local gr = x and x.grad
          if gr then
            ffi.copy(gb + a.offset, gr, 72)
            keep[addr(gb + a.offset)] = gr
          end
        end
        return g
      end
      -- nil, or the path of a slot set to an array not on `device`
      -- (-1: the cpu) and that array
      t._wrong_device = function(s, device)
        local b = ffi.cast(u8ptr, s)
        for _, a in ipairs(arrays) do
          local p = b + a.offset
          if ffi.cast(voidpp, p)[0] ~= nil then
            local x = slot_array(p)
            if not x or x.h.device ~= device then return a.path, x end
          end
        end
      end
    end

    t._make = function(init)
      if init == nil then return new() end
      if ffi.istype(ct, init) then return new(init) end
      local s = new()
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
      if f and f.type.kind == "array" then return slot_array(ffi.cast(u8ptr, s) + f.offset) end
      if f and f.type.arrays then return s[f.cfield] end
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
      if f.type.kind == "array" then return slot_array(ffi.cast(u8ptr, s) + f.offset) end
      if f.type.arrays then return s[f.cfield] end
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
      for _, f in ipairs(t.fields) do
        local v = fieldval(s, f)
        if f.type.kind == "array" then r[f.name] = v else r[f.name] = f.type.totable(v) end
      end
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
  end

  return { vec = vec, mat = mat, transform = transform, struct = struct }
end
