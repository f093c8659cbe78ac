-- The one argument marshaller: checks a launch's arguments against the
-- kernel's parameter types and stores them where the compiled entry reads
-- them. weft.launch on the cpu and on cuda:N, the adjoint and tangent
-- launches (tape:backward, weft.jvp, opts.adjoint) and graph capture all
-- pack their arguments with it.
--
--   local pack = P.packer{ k = kernel, types = {...}, addrs = {...},
--                          writes = {...}, device = -1, where = "...",
--                          nextra = 0 }
--   pack(ins, outs, nin, extra)
--
-- Argument i (1 .. #k.params) is ins[i] for i <= nin, else outs[i - nin].
-- It is checked against types[i] and stored at addrs[i] (a uint8_t *):
-- an array as its header's address (weft_Array *), bool as one byte,
-- float16 as its bits, other scalars and composites by value. An array
-- must be on `device` (-1: the cpu), and one the kernel writes (writes[i])
-- must not be read-only. extra[j] (j <= nextra: the adjoint or tangent
-- arrays of a derived kernel, checked by its caller) is stored as a header
-- address at addrs[#k.params + j], or by value when s.extra_types[j] is a
-- struct (the adjoint struct of a struct holding arrays). Messages start
-- with `where` (default
-- "weft.launch: kernel 'name'").
--
-- The packer is generated once per signature and layout (Lua source ->
-- loadstring), so a launch runs straight-line code and allocates nothing.
-- Layouts: a CPU entry reads one argument block (addrs from the offsets
-- core.cpu_compile gives); a CUDA entry takes one pointer per parameter
-- (cuLaunchKernel's kernelParams), which P.cuda_args lays out once per
-- loaded kernel: an array's slot is its kernelParams entry itself (the
-- header is the parameter's value), a scalar's lives in a block that its
-- entry points at. The driver copies the values when it queues the launch,
-- so the same buffers serve every launch, captured ones included.
local ffi = require "ffi"
local bit = require "bit"

local fmt = string.format

return function(weft, P)
  local raise, describe = P.raise or error, P.describe or tostring
  local fmtnum = P.fmtnum or tostring
  local is_array = weft.is_array

  local u8p = ffi.typeof("uint8_t *")
  local arrpp = ffi.typeof("weft_Array **")

  local function kname(k) return k.name or (k.fn and tostring(k.fn)) or "?" end

  -- The type name of a launch argument, for messages.
  local function typename(v)
    if is_array(v) then
      local dt = weft.types[v.h.dtype]
      local nm = dt and dt.name or "?"
      return v.h.ndim == 1 and fmt("array(%s)", nm) or fmt("array(%s,%d)", nm, v.h.ndim)
    end
    local t = weft.dtype_of and weft.dtype_of(v)
    if t and type(v) ~= "number" and type(v) ~= "boolean" then return t.name end
    return describe(v)
  end

  local function device_name(d) return d < 0 and "the cpu" or "cuda:" .. d end

  -- The error of argument i (value v) of the launch that m packs (m: the
  -- packer's { names, types, device, where }).
  local function bad_arg(m, i, v, nin)
    local name, where = m.names[i], m.where
    local role = i <= nin and "input" or "output"
    local t = m.types[i]
    if is_array(v) and v.h.device ~= m.device and t.kind == "array" then
      raise("%s: %s '%s' is on device %s, but the launch runs on %s", where, role, name,
            tostring(v.device), device_name(m.device))
    end
    if t.kind == "int" and type(v) == "number" then
      raise("%s: parameter '%s' expects %s, got %s (%s)", where, name, t.name, fmtnum(v),
            v % 1 ~= 0 and "not an integer" or "out of range for " .. t.name)
    end
    raise("%s: parameter '%s' expects %s, got %s", where, name, t.name, typename(v))
  end

  -- The error of a read-only array passed for a parameter the kernel
  -- writes (stores to or updates atomically).
  local function readonly_arg(m, i, nin)
    raise("%s writes %s '%s', but the array passed is read-only", m.where,
          i <= nin and "input" or "output", m.names[i])
  end

  -- The range of an integer type as Lua numbers (64-bit ends are rounded to
  -- doubles, which only matters beyond 2^53 where numbers are inexact anyway).
  local function int_range(t)
    if t.signed then return -2 ^ (t.bits - 1), 2 ^ (t.bits - 1) - 1 end
    return 0, 2 ^ t.bits - 1
  end

  -- Source lines checking argument i (in `v`) against type t and storing it
  -- through the pointer p<i> (of ctype env.p<i>t).
  local function pack_lines(out, i, t, env, written, device)
    local pn = "p" .. i
    local function add(...) out[#out + 1] = fmt(...) end
    if t.kind == "array" then
      env[pn .. "t"] = arrpp
      add("if not is_array(v) or v.h.dtype ~= %d or v.h.ndim ~= %d or v.h.device ~= %d then return bad(s, %d, v, nin) end",
          t.dtype.id, t.ndim, device, i)
      if written then add("if band(v.h.flags, 4) ~= 0 then return readonly(s, %d, nin) end", i) end
      add("%s[0] = v", pn)
    elseif t.kind == "bool" then
      env[pn .. "t"] = u8p
      add("if type(v) ~= 'boolean' then return bad(s, %d, v, nin) end", i)
      add("%s[0] = v and 1 or 0", pn)
    elseif t.kind == "int" then
      env[pn .. "t"] = ffi.typeof(t.ffiname .. " *")
      local lo, hi = int_range(t)
      add("if type(v) == 'number' then if v %% 1 ~= 0 or v < %.17g or v > %.17g then return bad(s, %d, v, nin) end "
          .. "elseif not (type(v) == 'cdata' and (istype(i64, v) or istype(u64, v))) then return bad(s, %d, v, nin) end",
          lo, hi, i, i)
      add("%s[0] = v", pn)
    elseif t.kind == "float" then
      add("if type(v) ~= 'number' then return bad(s, %d, v, nin) end", i)
      if t.bits == 16 then
        env[pn .. "t"] = ffi.typeof("uint16_t *")
        add("%s[0] = half(v)", pn)
      else
        env[pn .. "t"] = ffi.typeof(t.ffiname .. " *")
        add("%s[0] = v", pn)
      end
    else
      -- composites: a cdata of the type, copied by value
      env[pn .. "t"] = ffi.typeof(t.ffiname .. " *")
      env["ct" .. i] = t.ctype
      add("if not istype(ct%d, v) then return bad(s, %d, v, nin) end", i, i)
      if t.arrays then
        -- the arrays a struct holds must be on the launch's device
        env["wd" .. i] = t._wrong_device
        add("if wd%d(v, %d) then return bad_field(s, %d, v, nin) end", i, device, i)
      end
      add("%s[0] = v", pn)
    end
  end

  -- The error of a struct argument holding an array on another device.
  local function bad_field(m, i, v, nin)
    local t = m.types[i]
    local path, a = t._wrong_device(v, m.device)
    raise("%s: %s '%s': field '%s' is on device %s, but the launch runs on %s", m.where,
          i <= nin and "input" or "output", m.names[i], path, a and tostring(a.device) or "?",
          device_name(m.device))
  end

  -- LuaJIT allows 60 upvalues per function: beyond that the slot pointers
  -- live in the packer's environment instead.
  local MAX_UPVALUES = 48

  function P.packer(s)
    local k, types, addrs = s.k, s.types, s.addrs
    local np, nextra = #k.params, s.nextra or 0
    -- what messages need, without the kernel: code records that hold the
    -- packer sit in tables weakly keyed by the kernel or its module, and
    -- a value pointing back at its key would keep it alive
    local m = { names = {}, types = types, device = s.device or -1,
                where = s.where or fmt("weft.launch: kernel '%s'", kname(k)) }
    for i, p in ipairs(k.params) do m.names[i] = p.name end
    local device = m.device
    local writes = s.writes or {}
    local env = { is_array = is_array, bad = bad_arg, readonly = readonly_arg, bad_field = bad_field,
                  s = m, type = type,
                  istype = ffi.istype, i64 = ffi.typeof("int64_t"), u64 = ffi.typeof("uint64_t"),
                  half = P.half_from_number, band = bit.band, cast = ffi.cast }
    local body = { "return function(ins, outs, nin, extra)", "local v" }
    for i = 1, np do
      body[#body + 1] = fmt("if nin >= %d then v = ins[%d] else v = outs[%d - nin] end", i, i, i)
      pack_lines(body, i, types[i], env, writes[i], device)
    end
    local xtypes = s.extra_types or {}
    for j = 1, nextra do
      -- an array's header address, or a struct holding arrays by value
      local xt = xtypes[j]
      env["p" .. (np + j) .. "t"] = xt and xt.kind == "struct" and ffi.typeof(xt.ffiname .. " *") or arrpp
      body[#body + 1] = fmt("p%d[0] = extra[%d]", np + j, j)
    end
    body[#body + 1] = "end"
    local head = {}
    for i = 1, np + nextra do
      env["a" .. i] = ffi.cast(u8p, addrs[i])
      local init = fmt("cast(p%dt, a%d)", i, i)
      if np + nextra <= MAX_UPVALUES then
        head[#head + 1] = fmt("local p%d = %s", i, init)
      else
        head[#head + 1] = fmt("p%d = %s", i, init)
      end
    end
    local src = table.concat(head, "\n") .. "\n" .. table.concat(body, "\n")
    local f = assert(loadstring(src, "=weft argument packer"))
    setfenv(f, env)
    return f()
  end

  -- The slot addresses of a CPU argument block buf at byte offsets
  -- offsets[1 .. n].
  function P.block_addrs(buf, offsets, n)
    local base, addrs = ffi.cast(u8p, buf), {}
    for i = 1, n do addrs[i] = base + offsets[i] end
    return addrs
  end

  -- The kernelParams of a CUDA entry with parameter types `types` (then
  -- nextra arrays and, with `slot`, one pointer more for the error slot's
  -- address): { ptrs (void *[]), n (pointers used), addrs (the slots for
  -- P.packer), slot (void *[1], pointed at by the last entry) }. Kept by
  -- the caller for as long as the packer.
  function P.cuda_args(types, nextra, slot, xtypes)
    local np = #types
    local n = np + nextra + (slot and 1 or 0)
    local ptrs = ffi.new("void *[?]", math.max(n, 1))
    -- the scalars' block, each value aligned to its type; then the
    -- derived kernel's structs (xtypes[j]: a struct holding arrays, whose
    -- adjoint or tangent struct goes by value like the primal one)
    local offs, size = {}, 0
    local function place(i, t)
      local ct = ffi.typeof(t.ffiname)
      local al = ffi.alignof(ct)
      size = math.ceil(size / al) * al
      offs[i] = size
      size = size + ffi.sizeof(ct)
    end
    for i, t in ipairs(types) do
      if t.kind ~= "array" then place(i, t) end
    end
    for j = 1, nextra do
      local t = xtypes and xtypes[j]
      if t and t.kind == "struct" then place(np + j, t) end
    end
    local block = ffi.new("uint8_t[?]", size + 16)
    local base = ffi.cast(u8p, block)
    base = base + (16 - tonumber(ffi.cast("uintptr_t", base)) % 16) % 16
    local addrs = {}
    for i = 1, np do
      if offs[i] then
        addrs[i] = base + offs[i]
        ptrs[i - 1] = addrs[i]
      else
        addrs[i] = ffi.cast(u8p, ptrs + (i - 1))
      end
    end
    for j = 1, nextra do
      if offs[np + j] then
        addrs[np + j] = base + offs[np + j]
        ptrs[np + j - 1] = addrs[np + j]
      else
        addrs[np + j] = ffi.cast(u8p, ptrs + (np + j - 1))
      end
    end
    local box
    if slot then
      box = ffi.new("void *[1]")
      ptrs[n - 1] = box
    end
    return { ptrs = ptrs, n = n, addrs = addrs, block = block, slot = box }
  end
end
