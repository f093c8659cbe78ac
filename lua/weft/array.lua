-- weft.array: arrays as FFI cdata.
--
-- An array is a cdata `weft_Array` (one wf_array header, see
-- src/runtime/wf_rt.h) with a metatype. Its memory is a refcounted
-- wf_buffer; the header holds one reference, released by an ffi.gc
-- finalizer (wf_array_release, which clears the pointer so it runs once).
-- Row views (a[i] of an n-D array) take their own buffer reference, so a
-- view keeps its parent's memory alive.
--
-- Zero-copy wrapping: weft.array(ptr, dtype, { shape = ..., copy = false })
-- views memory that weft does not own. Lifetime rule: that memory must stay
-- valid for as long as the array (or any view of it) is reachable. When ptr
-- is itself the cdata that owns the memory (ffi.new("float[?]", n)), the
-- array keeps that cdata alive; a pointer derived from it (ffi.cast, p + k)
-- cannot be tracked, and the caller must keep the owner alive.
--
-- Gradients live in a weak-keyed side table (a.grad, a.grad = g).
local ffi = require "ffi"
local bit = require "bit"

local floor = math.floor
local fmt = string.format

local FLAG_REQUIRES_GRAD, FLAG_BORROWED, FLAG_READONLY, FLAG_VIEW = 1, 2, 4, 8
local DEVICE_CPU = -1
local GC_BYTES = 256 * 2 ^ 20 -- allocations between forced collections

return function(weft, P)
  local C, rt = P.C, P.rt
  local raise, describe, is_type = P.raise, P.describe, weft.is_type
  local types = weft.types
  local fmtnum = P.fmtnum
  local ArrayCT = ffi.typeof("weft_Array")
  local charp = ffi.typeof("char *")
  local bufp_ct = ffi.typeof("wf_buffer *[1]")

  -- LuaJIT allows one metatype per ctype and per state, but busted loads
  -- this module again for each spec file: the metatype forwards to `impl`,
  -- kept in the registry, whose functions each load replaces.
  local reg = debug.getregistry()
  local impl = reg["weft.array.impl"]
  if not impl then
    impl = {}
    reg["weft.array.impl"] = impl
    ffi.metatype(ArrayCT, {
      __index = function(a, k) return impl.index(a, k) end,
      __newindex = function(a, k, v) return impl.newindex(a, k, v) end,
      __len = function(a) return impl.len(a) end,
      __tostring = function(a) return impl.tostring(a) end,
      __eq = function(a, b) return impl.eq(a, b) end,
    })
  end

  local grads = setmetatable({}, { __mode = "k" })   -- array -> grad array
  local anchors = setmetatable({}, { __mode = "k" }) -- array -> memory owner

  function weft.is_array(v) return ffi.istype(ArrayCT, v) end
  local is_array = weft.is_array

  -- Raise the runtime's message of a failed C call as fname's error.
  local function ccheck(fname, status)
    if status ~= 0 then
      local msg = ffi.string(C.wf_rt_errmsg(rt)):gsub("^weft: ", "")
      raise(fname .. ": " .. msg)
    end
  end

  -- Read-only memory (DLPack's READ_ONLY, NumPy's writeable=False, a
  -- read-only memmap) is never written: a write is this error instead.
  local function check_writable(fname, h)
    if bit.band(h.flags, FLAG_READONLY) ~= 0 then
      raise("%s: the array is read-only", fname)
    end
  end

  local function finalize(a) C.wf_array_release(a.h) end

  -- Collect now and then while arrays are being allocated: the Lua GC does
  -- not see the memory behind a small cdata header, and without this a
  -- loop that drops big arrays would grow without bound. Meshes and Bvh
  -- objects count theirs too (P.account, lua/weft/geom.lua).
  local pressure = 0
  local function account(nbytes)
    pressure = pressure + nbytes
    if pressure > GC_BYTES then
      pressure = 0
      collectgarbage()
    end
  end
  P.account = account

  ---------------------------------------------------------------------------
  -- argument parsing
  ---------------------------------------------------------------------------
  local function tointeger(v)
    if type(v) == "cdata" and (ffi.istype("int64_t", v) or ffi.istype("uint64_t", v)) then
      return tonumber(v)
    end
    return v
  end

  -- shape: an integer or a table of 1 to 4 integers >= 0
  local function parse_shape(fname, s)
    s = tointeger(s)
    if type(s) == "number" then s = { s } end
    if type(s) ~= "table" or is_type(s) then
      raise("%s: shape must be an integer or a table of 1 to 4 integers, got %s", fname, describe(s))
    end
    local n = #s
    if n == 0 or n > 4 then raise("%s: shape must have 1 to 4 dimensions, got %d", fname, n) end
    local out = {}
    for d = 1, n do
      local v = tointeger(s[d])
      if type(v) ~= "number" then
        raise("%s: shape dimension %d is %s, expected an integer", fname, d, describe(v))
      end
      if v ~= floor(v) then raise("%s: shape dimension %d is %s, expected an integer", fname, d, tostring(v)) end
      if v < 0 then raise("%s: shape dimension %d is %d, expected a size >= 0", fname, d, v) end
      if v >= 2 ^ 53 then raise("%s: shape dimension %d is %s, too large", fname, d, tostring(v)) end
      out[d] = v
    end
    return out
  end

  local function parse_dtype(fname, d, default)
    if d == nil then return default or weft.float32 end
    if is_type(d) then
      if d.kind == "array" then raise("%s: dtype %s is an array type, expected an element type", fname, d.name) end
      if d.arrays then raise("%s: dtype %s holds arrays; arrays of it are not supported", fname, d.name) end
      return d
    end
    if type(d) == "string" then
      local t = weft.type_from_name(d)
      if not t or t.kind == "array" then raise("%s: unknown dtype '%s'", fname, d) end
      return t
    end
    raise("%s: dtype must be a weft type or a type name, got %s", fname, describe(d))
  end

  local function device_name(dev)
    if dev == DEVICE_CPU then return "cpu" end
    return "cuda:" .. tonumber(dev)
  end
  P.device_name = device_name

  -- "cpu", "cuda", "cuda:N" (or the index: -1 cpu, N >= 0 cuda) -> index,
  -- name. The one device parser: device.lua uses it too (P.parse_device).
  local NODRIVER = "CUDA is not available: libcuda.so.1 could not be loaded (no NVIDIA driver)"
  local function parse_device(fname, d)
    if d == nil then d = P.default_device or "cpu" end
    if type(d) == "table" and d.name then d = d.name end
    local n
    if d == "cpu" or d == DEVICE_CPU then return DEVICE_CPU, "cpu" end
    if type(d) == "string" then
      if d == "cuda" then n = 0 else n = tonumber(d:match("^cuda:(%d+)$")) end
    elseif type(d) == "number" and d >= 0 and d == floor(d) then
      n = d
    end
    if not n then raise("%s: unknown device %s (expected \"cpu\" or \"cuda:N\")", fname,
        type(d) == "string" and ("'" .. d .. "'") or describe(d)) end
    local name = "cuda:" .. n
    local count = C.wf_device_count(rt)
    if count == 0 then raise("%s: device '%s': %s", fname, name, NODRIVER) end
    if n >= count then
      raise("%s: device '%s' is not available (%d CUDA device%s)", fname, name, count, count == 1 and "" or "s")
    end
    return n, name
  end
  P.parse_device = parse_device

  local EMPTY = {}
  local function parse_opts(fname, o, allowed)
    if o == nil then return EMPTY end
    if type(o) ~= "table" then raise("%s: opts must be a table, got %s", fname, describe(o)) end
    for k in pairs(o) do
      if not allowed[k] then raise("%s: unknown option '%s'", fname, tostring(k)) end
    end
    return o
  end
  local OPTS = { device = true, requires_grad = true, pinned = true }
  local ARRAY_OPTS = { device = true, requires_grad = true, copy = true, shape = true, pinned = true }

  local function shape_str(h)
    local parts = {}
    for d = 0, h.ndim - 1 do parts[d + 1] = tostring(tonumber(h.shape[d])) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end

  ---------------------------------------------------------------------------
  -- allocation
  ---------------------------------------------------------------------------
  -- Fill the header for a compact row-major layout.
  local function set_layout(h, shape, t, dev)
    local nd = #shape
    local size = 1
    for d = 1, nd do size = size * shape[d] end
    h.ndim = nd
    local stride = t.size
    for d = nd, 1, -1 do
      h.shape[d - 1] = shape[d]
      h.strides[d - 1] = stride
      stride = stride * shape[d]
    end
    h.size = size
    h.dtype = t.id
    h.device = dev
    h.elsize = t.size
    return size
  end

  -- A new array with undefined contents. pinned (cpu only): page-locked
  -- memory from the CUDA driver, for asynchronous copies; without a driver
  -- ordinary memory (a.pinned tells which).
  local function alloc(fname, shape, t, dev, pinned)
    if pinned and dev ~= DEVICE_CPU then
      raise("%s: pinned memory is host memory: the device must be 'cpu', got '%s'", fname,
            device_name(dev))
    end
    local a = ArrayCT()
    local h = a.h
    local size = set_layout(h, shape, t, dev)
    local nbytes = size * t.size
    if nbytes >= 2 ^ 53 then raise("%s: shape %s is too large", fname, shape_str(h)) end
    local bp = bufp_ct()
    if pinned and C.wf_cuda_available(rt) ~= 0 then
      ccheck(fname, C.wf_cuda_host_alloc(rt, nbytes, bp))
    else
      ccheck(fname, C.wf_buffer_new(rt, dev, nbytes, bp))
    end
    h.buf = bp[0]
    h.data = bp[0].ptr
    ffi.gc(a, finalize)
    account(nbytes)
    return a
  end

  -- An array viewing memory it does not own (no buffer).
  local function wrap(ptr, shape, t, dev, owner)
    local a = ArrayCT()
    local h = a.h
    set_layout(h, shape, t, dev)
    h.data = ffi.cast("void *", ptr)
    h.flags = FLAG_BORROWED
    ffi.gc(a, finalize)
    if owner ~= nil then anchors[a] = owner end
    return a
  end

  local function zero_value(t) return ffi.new("uint8_t[?]", t.size) end

  local function set_requires_grad(a, on)
    local h = a.h
    if on then
      h.flags = bit.bor(h.flags, FLAG_REQUIRES_GRAD)
      if grads[a] == nil then
        local g = alloc("weft: requires_grad", impl.shape(a), types[h.dtype], h.device)
        ccheck("weft: requires_grad", C.wf_array_fill(rt, g.h, zero_value(types[h.dtype])))
        grads[a] = g
      end
    else
      h.flags = bit.band(h.flags, bit.bnot(FLAG_REQUIRES_GRAD))
    end
  end

  -- Apply the requires_grad option to a new array.
  local function finish(a, opts)
    if opts.requires_grad then set_requires_grad(a, true) end
    return a
  end

  -- Encode v as one element of t in a scratch buffer (for fills).
  local function encode(fname, t, v)
    local buf = ffi.new(P.array_ctype(t), 1)
    local err = t.store(buf, 0, v)
    if err then raise("%s: value is %s", fname, err) end
    return buf
  end

  ---------------------------------------------------------------------------
  -- constructors
  ---------------------------------------------------------------------------
  function weft.empty(shape, dtype, opts)
    shape = parse_shape("weft.empty", shape)
    local t = parse_dtype("weft.empty", dtype)
    opts = parse_opts("weft.empty", opts, OPTS)
    return finish(alloc("weft.empty", shape, t, parse_device("weft.empty", opts.device), opts.pinned),
                  opts)
  end

  function weft.zeros(shape, dtype, opts)
    shape = parse_shape("weft.zeros", shape)
    local t = parse_dtype("weft.zeros", dtype)
    opts = parse_opts("weft.zeros", opts, OPTS)
    local a = alloc("weft.zeros", shape, t, parse_device("weft.zeros", opts.device), opts.pinned)
    ccheck("weft.zeros", C.wf_array_fill(rt, a.h, zero_value(t)))
    return finish(a, opts)
  end

  -- The value "one" of a type: 1, true, or every component 1.
  local function one_of(fname, t)
    if t.kind == "bool" then return true end
    if t.kind == "int" or t.kind == "float" then return 1 end
    if t.kind == "struct" then raise("%s: ones is not defined for struct %s", fname, t.name) end
    if t.kind == "transform" then return { 1, 1, 1, 1, 1, 1, 1 } end
    return t._make(1)
  end

  local function filled(fname, shape, t, value, opts)
    local buf = encode(fname, t, value)
    local a = alloc(fname, shape, t, parse_device(fname, opts.device), opts.pinned)
    ccheck(fname, C.wf_array_fill(rt, a.h, buf))
    return finish(a, opts)
  end

  function weft.ones(shape, dtype, opts)
    shape = parse_shape("weft.ones", shape)
    local t = parse_dtype("weft.ones", dtype)
    opts = parse_opts("weft.ones", opts, OPTS)
    return filled("weft.ones", shape, t, one_of("weft.ones", t), opts)
  end

  -- The dtype a fill value implies when none is given.
  local function dtype_of_value(v)
    if type(v) == "table" and not is_type(v) then
      if type(v[1]) == "table" then return weft.matrix(#v, #v[1], weft.float32) end
      if #v >= 1 then return weft.vector(#v, weft.float32) end
      return nil
    end
    return weft.dtype_of(v)
  end

  function weft.full(shape, value, dtype, opts)
    shape = parse_shape("weft.full", shape)
    local t = dtype ~= nil and parse_dtype("weft.full", dtype) or dtype_of_value(value)
    if not t or t.kind == "array" then raise("weft.full: cannot infer a dtype from %s (pass one)", describe(value)) end
    opts = parse_opts("weft.full", opts, OPTS)
    return filled("weft.full", shape, t, value, opts)
  end

  -- opts.pinned, else the source's when the copy stays on its device
  local function pinned_like(a, dev, opts)
    if opts.pinned ~= nil then return opts.pinned end
    return dev == a.h.device and a.h.buf ~= nil and bit.band(a.h.buf.flags, 1) ~= 0
  end

  function weft.empty_like(a, opts)
    if not is_array(a) then raise("weft.empty_like: expected an array, got %s", describe(a)) end
    opts = parse_opts("weft.empty_like", opts, OPTS)
    local dev = opts.device ~= nil and parse_device("weft.empty_like", opts.device) or a.h.device
    return finish(alloc("weft.empty_like", impl.shape(a), types[a.h.dtype], dev, pinned_like(a, dev, opts)),
                  opts)
  end

  function weft.zeros_like(a, opts)
    if not is_array(a) then raise("weft.zeros_like: expected an array, got %s", describe(a)) end
    opts = parse_opts("weft.zeros_like", opts, OPTS)
    local t = types[a.h.dtype]
    local dev = opts.device ~= nil and parse_device("weft.zeros_like", opts.device) or a.h.device
    local z = alloc("weft.zeros_like", impl.shape(a), t, dev, pinned_like(a, dev, opts))
    ccheck("weft.zeros_like", C.wf_array_fill(rt, z.h, zero_value(t)))
    return finish(z, opts)
  end

  -- Copy into a new array on dev; keeps requires_grad.
  local function clone_to(fname, a, dev, pinned)
    local c = alloc(fname, impl.shape(a), types[a.h.dtype], dev, pinned)
    ccheck(fname, C.wf_array_copy(rt, c.h, a.h))
    if bit.band(a.h.flags, FLAG_REQUIRES_GRAD) ~= 0 then set_requires_grad(c, true) end
    return c
  end

  function weft.clone(a, opts)
    if not is_array(a) then raise("weft.clone: expected an array, got %s", describe(a)) end
    opts = parse_opts("weft.clone", opts, OPTS)
    local dev = opts.device ~= nil and parse_device("weft.clone", opts.device) or a.h.device
    local c = clone_to("weft.clone", a, dev, pinned_like(a, dev, opts))
    if opts.requires_grad ~= nil then set_requires_grad(c, opts.requires_grad) end
    return c
  end

  function weft.copy(dst, src)
    if not is_array(dst) then raise("weft.copy: dst must be an array, got %s", describe(dst)) end
    if not is_array(src) then raise("weft.copy: src must be an array, got %s", describe(src)) end
    local dh, sh = dst.h, src.h
    if dh.dtype ~= sh.dtype then
      raise("weft.copy: dtypes differ (dst %s, src %s)", types[dh.dtype].name, types[sh.dtype].name)
    end
    local same = dh.ndim == sh.ndim
    for d = 0, dh.ndim - 1 do same = same and dh.shape[d] == sh.shape[d] end
    if not same then raise("weft.copy: shapes differ (dst %s, src %s)", shape_str(dh), shape_str(sh)) end
    check_writable("weft.copy: dst", dh)
    ccheck("weft.copy", C.wf_array_copy(rt, dh, sh))
    return dst
  end

  -- The shape of nested Lua data for element type t: follow the first items
  -- down; when the leaves are plain numbers, the innermost levels belong to
  -- the element (1 for vectors, quaternions and transforms, 2 for matrices).
  local function infer_shape(data, t)
    local shape, x = {}, data
    while type(x) == "table" and not is_type(x) and (x[1] ~= nil or next(x) == nil) do
      shape[#shape + 1] = #x
      if #x == 0 then break end
      x = x[1]
    end
    if type(x) ~= "cdata" and type(x) ~= "table" then
      local k = t.kind
      local inner = (k == "vec" or k == "quat" or k == "transform") and 1 or k == "mat" and 2 or 0
      if k == "transform" and #shape >= 2 and shape[#shape] == 3 and shape[#shape - 1] == 2 then
        inner = 2 -- {{px, py, pz}, {qx, qy, qz, qw}}
      end
      for _ = 1, inner do shape[#shape] = nil end
    end
    return shape
  end

  local function path_str(path, i)
    if #path == 0 then return tostring(i) end
    local parts = {}
    for k, p in ipairs(path) do parts[k] = "[" .. p .. "]" end
    return table.concat(parts) .. "[" .. i .. "]"
  end

  -- Store nested Lua data (of the given shape) into compact memory.
  local function fill_from_table(fname, p, t, data, shape)
    local k = 0
    local nd = #shape
    local store = t.store
    local path = {}
    local function rec(x, d)
      local n = shape[d]
      if type(x) ~= "table" or is_type(x) then
        raise("%s: element %s is %s, expected a table of %d items", fname,
          path_str({ unpack(path, 1, d - 2) }, path[d - 1] or 1), describe(x), n)
      end
      if #x ~= n then
        raise("%s: ragged data: %s has %d items, expected %d", fname,
          d == 1 and "the table" or "element " .. path_str({ unpack(path, 1, d - 2) }, path[d - 1]), #x, n)
      end
      if d == nd then
        for i = 1, n do
          local err = store(p, k, x[i])
          if err then raise("%s: element %s is %s", fname, path_str({ unpack(path, 1, d - 1) }, i), err) end
          k = k + 1
        end
      else
        for i = 1, n do
          path[d] = i
          rec(x[i], d + 1)
        end
        path[d] = nil
      end
    end
    rec(data, 1)
  end

  -- weft.array(dtype [, ndim]) -> array type; weft.array(data, dtype, opts)
  function weft.array(data, dtype, opts)
    if is_type(data) then return P.array_type(data, dtype) end
    if type(data) == "string" and weft.type_from_name(data) and (dtype == nil or type(dtype) == "number") then
      return P.array_type(weft.type_from_name(data), dtype)
    end
    opts = parse_opts("weft.array", opts, ARRAY_OPTS)
    local dev = parse_device("weft.array", opts.device)
    local result
    if is_array(data) then
      local t = parse_dtype("weft.array", dtype, types[data.h.dtype])
      if t.id == data.h.dtype then
        if opts.copy == false and dev == data.h.device then return data end
        result = clone_to("weft.array", data, dev, opts.pinned)
      else
        return weft.array(impl.totable(data), t, { device = opts.device, requires_grad = opts.requires_grad })
      end
    elseif type(data) == "cdata" then
      local t = parse_dtype("weft.array", dtype)
      local shape = opts.shape
      if shape == nil then
        local ok, n = pcall(ffi.sizeof, data)
        local ct = tostring(ffi.typeof(data))
        if not ok or not n or not ct:match("%]>$") then
          raise("weft.array: a cdata pointer needs opts.shape")
        end
        shape = floor(n / t.size)
      end
      shape = parse_shape("weft.array", shape)
      if opts.copy == false then
        if opts.pinned then raise("weft.array: copy = false wraps the memory as it is; pinned needs a copy") end
        result = wrap(data, shape, t, dev, data)
      else
        local src = wrap(data, shape, t, DEVICE_CPU, data)
        result = alloc("weft.array", shape, t, dev, opts.pinned)
        ccheck("weft.array", C.wf_array_copy(rt, result.h, src.h))
      end
    elseif type(data) == "table" then
      if opts.shape ~= nil then raise("weft.array: opts.shape is only for cdata pointers") end
      local t = dtype
      if t == nil then
        local x = data
        while type(x) == "table" and x[1] ~= nil do x = x[1] end
        t = type(x) == "boolean" and weft.bool or weft.dtype_of(x) or weft.float32
        if t.kind == "array" then t = weft.float32 end
      end
      t = parse_dtype("weft.array", t)
      local shape = infer_shape(data, t)
      shape = parse_shape("weft.array", shape)
      if opts.pinned and dev ~= DEVICE_CPU then alloc("weft.array", {}, t, dev, true) end -- raises
      local host = alloc("weft.array", shape, t, DEVICE_CPU, opts.pinned)
      fill_from_table("weft.array", ffi.cast(t.ptrct, host.h.data), t, data, shape)
      if dev == DEVICE_CPU then
        result = host
      else
        result = alloc("weft.array", shape, t, dev)
        ccheck("weft.array", C.wf_array_copy(rt, result.h, host.h))
      end
    else
      raise("weft.array: data must be a table, a cdata pointer or an array, got %s", describe(data))
    end
    return finish(result, opts)
  end

  -- Used by the C API (weft_wrap): a zero-copy array over host memory.
  function P.wrap(ptr, dtype_name, shape, device)
    local t = weft.type_from_name(dtype_name)
    if not t or t.kind == "array" then raise("weft_wrap: unknown dtype '%s'", tostring(dtype_name)) end
    shape = parse_shape("weft_wrap", shape)
    return wrap(ptr, shape, t, parse_device("weft_wrap", device))
  end

  ---------------------------------------------------------------------------
  -- members and methods
  ---------------------------------------------------------------------------
  -- a.shape is a plain 1-based Lua table (it goes back into weft.zeros
  -- and friends), while x.shape[0] is the first dimension inside kernels.
  -- Reading index 0 of the host table is that mix-up: an error saying so,
  -- where a plain table would give nil.
  local shape_mt = {
    __index = function(_, k)
      if k == 0 then
        raise("weft: a.shape[0]: on the host a.shape is a 1-based Lua table (a.shape[1] is the "
              .. "first dimension); inside kernels x.shape[0] is the first dimension")
      end
    end,
  }

  function impl.shape(a)
    local h = a.h
    local s = {}
    for d = 0, h.ndim - 1 do s[d + 1] = tonumber(h.shape[d]) end
    return setmetatable(s, shape_mt)
  end

  local members = {
    shape = impl.shape,
    ndim = function(a) return tonumber(a.h.ndim) end,
    size = function(a) return tonumber(a.h.size) end,
    dtype = function(a) return types[a.h.dtype] end,
    device = function(a) return device_name(a.h.device) end,
    grad = function(a) return grads[a] end,
    requires_grad = function(a) return bit.band(a.h.flags, FLAG_REQUIRES_GRAD) ~= 0 end,
    strides = function(a)
      local h, s = a.h, {}
      for d = 0, h.ndim - 1 do s[d + 1] = tonumber(h.strides[d]) end
      return s
    end,
    is_contiguous = function(a) return C.wf_array_is_contiguous(a.h) ~= 0 end,
    pinned = function(a) return a.h.buf ~= nil and bit.band(a.h.buf.flags, 1) ~= 0 end,
  }
  local methods = {}

  local function check_host(fname, h)
    if h.device ~= DEVICE_CPU then
      raise("%s: the array is on %s; copy it to the host first (a:to(\"cpu\"))", fname, device_name(h.device))
    end
    if h.data == nil and h.size > 0 then raise("%s: the array has been released", fname) end
  end

  local function bad_index(h, i)
    raise("weft: index %s out of bounds for dimension 0 of an array of shape %s", tostring(i), shape_str(h))
  end

  -- A view of a's memory: data at byte offset off, the given shape and
  -- byte strides (Lua lists). Shares (retains) a's buffer.
  local function make_view(a, off, shape, strides)
    local h = a.h
    local v = ArrayCT()
    local vh = v.h
    vh.data = ffi.cast(charp, h.data) + off
    local size = 1
    for d = 1, #shape do
      vh.shape[d - 1] = shape[d]
      vh.strides[d - 1] = strides[d]
      size = size * shape[d]
    end
    vh.ndim = #shape
    vh.size = size
    vh.dtype, vh.device, vh.elsize = h.dtype, h.device, h.elsize
    vh.flags = bit.bor(bit.band(h.flags, FLAG_BORROWED + FLAG_READONLY), FLAG_VIEW)
    vh.buf = h.buf
    C.wf_buffer_retain(h.buf)
    ffi.gc(v, finalize)
    local owner = anchors[a]
    anchors[v] = owner ~= nil and owner or (h.buf == nil and a or nil)
    return v
  end

  local function dims_of(h)
    local shape, strides = {}, {}
    for d = 0, h.ndim - 1 do
      shape[d + 1], strides[d + 1] = tonumber(h.shape[d]), tonumber(h.strides[d])
    end
    return shape, strides
  end

  -- a[i] of an n-D array: an (n-1)-D array sharing the memory.
  local function row_view(a, i)
    local shape, strides = dims_of(a.h)
    table.remove(shape, 1)
    local s0 = table.remove(strides, 1)
    return make_view(a, i * s0, shape, strides)
  end

  function impl.index(a, k)
    if type(k) == "number" then
      local h = a.h
      if k ~= floor(k) or k < 0 or k >= tonumber(h.shape[0]) then bad_index(h, k) end
      if h.ndim == 1 then
        check_host("a[i]", h)
        local t = types[h.dtype]
        return t.load(ffi.cast(t.ptrct, ffi.cast(charp, h.data) + k * h.strides[0]), 0)
      end
      return row_view(a, k)
    end
    local m = members[k]
    if m then return m(a) end
    local f = methods[k]
    if f then return f end
    raise("weft: array has no member '%s'", tostring(k))
  end

  -- Assign a Lua value (or an array) to row view v.
  local function assign_row(v, x)
    if is_array(x) then return weft.copy(v, x) end
    local h = v.h
    local t = types[h.dtype]
    local tmp = weft.array(x, t)
    local same = tmp.h.ndim == h.ndim
    for d = 0, h.ndim - 1 do same = same and tmp.h.shape[d] == h.shape[d] end
    if not same then raise("weft: a[i] = v: v has shape %s, expected %s", shape_str(tmp.h), shape_str(h)) end
    check_writable("weft: a[i] = v", h)
    ccheck("weft: a[i] = v", C.wf_array_copy(rt, h, tmp.h))
  end

  function impl.newindex(a, k, x)
    if type(k) == "number" then
      local h = a.h
      if k ~= floor(k) or k < 0 or k >= tonumber(h.shape[0]) then bad_index(h, k) end
      if h.ndim > 1 then return assign_row(row_view(a, k), x) end
      check_host("a[i] = v", h)
      check_writable("weft: a[i] = v", h)
      local t = types[h.dtype]
      local err = t.store(ffi.cast(t.ptrct, ffi.cast(charp, h.data) + k * h.strides[0]), 0, x)
      if err then raise("weft: a[%d] = v: v is %s", k, err) end
      return
    end
    if k == "grad" then
      if x ~= nil then
        if not is_array(x) then raise("weft: a.grad must be an array or nil, got %s", describe(x)) end
        if impl.shape_str(x) ~= impl.shape_str(a) then
          raise("weft: a.grad has shape %s, expected %s", impl.shape_str(x), impl.shape_str(a))
        end
      end
      grads[a] = x
    elseif k == "requires_grad" then
      set_requires_grad(a, x and true or false)
    else
      raise("weft: cannot set array member '%s'", tostring(k))
    end
  end

  function impl.shape_str(a) return shape_str(a.h) end
  function impl.len(a) return tonumber(a.h.shape[0]) end
  function impl.eq(a, b) return rawequal(a, b) end

  -- Nested Lua tables of the elements, walking the strides.
  local function totable_rec(h, t, base, d)
    local n, st = tonumber(h.shape[d]), h.strides[d]
    local r = {}
    if d == h.ndim - 1 then
      local load, conv, ptrct = t.load, t.totable, t.ptrct
      for i = 0, n - 1 do r[i + 1] = conv(load(ffi.cast(ptrct, base + i * st), 0)) end
    else
      for i = 0, n - 1 do r[i + 1] = totable_rec(h, t, base + i * st, d + 1) end
    end
    return r
  end

  function impl.totable(a)
    local h = a.h
    if h.device ~= DEVICE_CPU then return impl.totable(weft.clone(a, { device = "cpu" })) end
    check_host("a:totable", h)
    return totable_rec(h, types[h.dtype], ffi.cast(charp, h.data), 0)
  end
  methods.totable = impl.totable

  function methods.to(a, device)
    if not is_array(a) then raise("a:to: call it with ':' on an array") end
    local dev = parse_device("a:to", device)
    if dev == a.h.device then return a end
    return clone_to("a:to", a, dev)
  end

  -- {2, -1} for a list of numbers, else describe(v)
  local function list_str(v)
    if type(v) == "number" then return tostring(v) end
    if type(v) ~= "table" then return describe(v) end
    local parts = {}
    for i = 1, #v do parts[i] = tostring(v[i]) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end

  -- a:reshape(shape): the same elements in row-major order under another
  -- shape (one entry may be -1: inferred), sharing the memory; a must be
  -- contiguous (a:contiguous() makes a copy when it is not).
  function methods.reshape(a, shape)
    if not is_array(a) then raise("a:reshape: expected an array, got %s", describe(a)) end
    if type(shape) == "number" then shape = { shape } end
    if type(shape) ~= "table" or #shape < 1 or #shape > 4 then
      raise("a:reshape: shape must be an integer or a table of 1 to 4 integers, got %s", list_str(shape))
    end
    local h = a.h
    local n, known, infer = tonumber(h.size), 1, nil
    local s = {}
    for d = 1, #shape do
      local x = shape[d]
      if x == -1 and not infer then
        infer = d
      elseif type(x) ~= "number" or x < 0 or x ~= floor(x) then
        raise("a:reshape: dimension %d must be a non-negative integer (or one -1), got %s", d, list_str(x))
      else
        known = known * x
      end
      s[d] = x
    end
    if infer then
      if known == 0 or n % known ~= 0 then
        raise("a:reshape: cannot infer dimension %d: %d elements into shape %s", infer, n,
              list_str(shape))
      end
      s[infer] = n / known
      known = n
    end
    if known ~= n then
      raise("a:reshape: %d elements cannot take shape {%s}", n, table.concat(s, ", "))
    end
    if C.wf_array_is_contiguous(h) == 0 then
      raise("a:reshape: the array is not contiguous (a:contiguous() copies it)")
    end
    local strides, st = {}, tonumber(h.elsize)
    for d = #s, 1, -1 do
      strides[d] = st
      st = st * s[d]
    end
    return make_view(a, 0, s, strides)
  end

  function methods.flatten(a) return methods.reshape(a, { tonumber(a.h.size) }) end

  -- a:transpose([axes]): the axes permuted (default: reversed), a view.
  function methods.transpose(a, axes)
    if not is_array(a) then raise("a:transpose: expected an array, got %s", describe(a)) end
    local shape, strides = dims_of(a.h)
    local nd = #shape
    if axes == nil then
      axes = {}
      for d = 1, nd do axes[d] = nd - d end
    end
    if type(axes) ~= "table" or #axes ~= nd then
      raise("a:transpose: axes must list the %d axes (0-based), got %s", nd, list_str(axes))
    end
    local seen, ns, nst = {}, {}, {}
    for d = 1, nd do
      local x = axes[d]
      if type(x) ~= "number" or x ~= floor(x) or x < 0 or x >= nd or seen[x] then
        raise("a:transpose: axes must be a permutation of 0..%d, got %s", nd - 1, list_str(axes))
      end
      seen[x] = true
      ns[d], nst[d] = shape[x + 1], strides[x + 1]
    end
    return make_view(a, 0, ns, nst)
  end

  -- a itself when contiguous, else a contiguous copy.
  function methods.contiguous(a)
    if C.wf_array_is_contiguous(a.h) ~= 0 then return a end
    return weft.clone(a)
  end

  function methods.zero_(a)
    if not is_array(a) then raise("a:zero_: call it with ':' on an array") end
    check_writable("a:zero_", a.h)
    ccheck("a:zero_", C.wf_array_fill(rt, a.h, zero_value(types[a.h.dtype])))
    return a
  end

  function methods.fill_(a, v)
    if not is_array(a) then raise("a:fill_: call it with ':' on an array") end
    check_writable("a:fill_", a.h)
    local buf = encode("a:fill_", types[a.h.dtype], v)
    ccheck("a:fill_", C.wf_array_fill(rt, a.h, buf))
    return a
  end

  -- A pointer to the first element, typed by the element's ctype (float16:
  -- uint16_t bits). Valid while the array is reachable.
  function methods.ptr(a)
    if not is_array(a) then raise("a:ptr: call it with ':' on an array") end
    return ffi.cast(types[a.h.dtype].ptrct, a.h.data)
  end

  ---------------------------------------------------------------------------
  -- tostring
  ---------------------------------------------------------------------------
  local function elem_str(v, t)
    if t.kind == "bool" or t.kind == "int" or t.kind == "float" then return fmtnum(v, t) end
    if t.kind == "struct" then return tostring(v) end
    local function rec(x)
      if type(x) == "table" then
        local parts = {}
        for i, y in ipairs(x) do parts[i] = rec(y) end
        return "[" .. table.concat(parts, ", ") .. "]"
      end
      return fmtnum(x, t.scalar)
    end
    return rec(t.totable(v))
  end

  -- Large arrays show the first and last 3 items of each long dimension.
  local function str_rec(h, t, base, d, summarize)
    local n, st = tonumber(h.shape[d]), h.strides[d]
    local idx = {}
    if summarize and n > 6 then
      idx = { 0, 1, 2, false, n - 3, n - 2, n - 1 }
    else
      for i = 0, n - 1 do idx[i + 1] = i end
    end
    local parts = {}
    for k, i in ipairs(idx) do
      if i == false then
        parts[k] = "..."
      elseif d == h.ndim - 1 then
        parts[k] = elem_str(t.load(ffi.cast(t.ptrct, base + i * st), 0), t)
      else
        parts[k] = str_rec(h, t, base + i * st, d + 1, summarize)
      end
    end
    return "[" .. table.concat(parts, ", ") .. "]"
  end

  function impl.tostring(a)
    local h = a.h
    local t = types[h.dtype]
    local tname = t and t.name or ("#" .. tonumber(h.dtype))
    if h.data == nil and h.size > 0 then return "array(<released>, dtype=" .. tname .. ")" end
    local src = a
    if h.device ~= DEVICE_CPU then src = weft.clone(a, { device = "cpu" }) end
    local body = str_rec(src.h, t, ffi.cast(charp, src.h.data), 0, tonumber(h.size) > 1000)
    local dev = h.device ~= DEVICE_CPU and (", device=" .. device_name(h.device)) or ""
    return fmt("array(%s, dtype=%s%s)", body, tname, dev)
  end
end
