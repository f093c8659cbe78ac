-- weft.launch: run a kernel over a 1-4-D grid on the CPU thread pool.
--
-- Per kernel (in the kernel's own field k._launch, so the state dies with the
-- kernel: a weak-keyed table whose value points back at its key would keep
-- every kernel alive, as LuaJIT's weak tables are not ephemerons) the
-- launcher keeps:
--   variants   one per argument signature (generic kernels: per the types of
--              the generic arguments, looked up through nested tables keyed
--              by numbers, so a warm launch builds no strings)
--   variant    { types = {...}, module, code, guard } from k:_entry(types):
--              guard() is false once a value the kernel captured changed
--              (kernel.lua), and the launch then takes the new entry
--   code[key]  per launch ndim and mode: the compiled function (core.cpu_compile),
--              a preallocated argument block and its packer (P.packer,
--              lua/weft/marshal.lua), which checks every argument and
--              writes it into the block.
-- A warm launch therefore allocates nothing: it reads the dims into a
-- preallocated int64_t[4], runs the packer and calls wf_cpu_launch.
local ffi = require "ffi"
local cdef = require "weft.cdef"

local floor = math.floor
local fmt = string.format

return function(weft, P)
  local C, rt, core = cdef.C, P.rt, P.core
  local raise, describe = P.raise or error, P.describe or tostring
  local is_array = weft.is_array
  local config = weft.config

  -- The dims of the current launch (shared: launches do not nest).
  local dims = ffi.new("int64_t[4]")

  local function kname(k) return k.name or (k.fn and tostring(k.fn)) or "?" end

  ---------------------------------------------------------------------------
  -- variants and code
  ---------------------------------------------------------------------------
  -- The parameter names of kernel k, in order (for messages of compiled code).
  local function param_names(k)
    local names = {}
    for i, p in ipairs(k.params) do names[i] = p.name end
    return names
  end
  P.param_names = param_names

  local function kernel_state(k)
    if type(k) ~= "table" or type(k.params) ~= "table" or not k._module then
      raise("weft.launch: expected a kernel (made by weft.kernel), got %s", describe(k))
    end
    local generic = {}
    for i, p in ipairs(k.params) do
      if p.type == nil then generic[#generic + 1] = i end
    end
    local st = { k = k, nparams = #k.params, generic = generic, names = param_names(k),
                 variants = {}, compiles = 0, disk_hits = 0 }
    rawset(k, "_launch", st)
    return st
  end

  -- (code: the entry's, so a value going back to an earlier setting finds
  -- that setting's code again)
  local function new_variant(st, types)
    local k = st.k
    local e = k:_entry(types)
    local mod = e.module
    return { types = types, module = mod, code = e.code, guard = e.guard, writes = core.writes(mod) }
  end

  -- Variant v after a captured value changed (its guard failed): the
  -- module for the current values, updated in place.
  local function refresh(st, v)
    for key, val in pairs(new_variant(st, v.types)) do v[key] = val end
    return v
  end

  -- The type a generic parameter takes from its argument, and a number
  -- naming it (for the variant lookup).
  local function arg_type(v)
    if is_array and is_array(v) then
      local dt = weft.types[v.h.dtype]
      return weft.array(dt, v.h.ndim), v.h.dtype * 8 + v.h.ndim
    end
    local t = weft.dtype_of and weft.dtype_of(v)
    if not t then return nil end
    return t, -t.id
  end

  -- A number given for a generic parameter is a float of the type that
  -- the launch's other float arguments share (the float type of arrays,
  -- vectors and typed scalars, declared or given), as a number literal in
  -- a kernel takes the type of the other operand (x[i] * a works for a
  -- float64 x as x[i] * 2.5 does); float32 when they have none or do not
  -- agree. Warp types a Python float given for a typing.Any parameter as
  -- float32 whatever the arrays hold, and then refuses x[i] * a for a
  -- float64 x ("Input types must be the same"); weft follows its literals.
  -- The launch's arguments: ins[1 .. nin], then outs (nil: none).
  local function arg_of(ins, outs, nin, i)
    if i <= nin then return ins[i] end
    return outs and outs[i - nin]
  end
  local function number_type(k, ins, outs, nin)
    local ft
    for i, p in ipairs(k.params) do
      local v = arg_of(ins, outs, nin, i)
      local t = p.type or (type(v) ~= "number" and arg_type(v)) or nil
      local s = t and (t.kind == "array" and t.dtype or t)
      s = s and (s.scalar or s)
      if s and s.kind == "float" then
        if ft and ft ~= s then return weft.float32 end
        ft = s
      end
    end
    return ft or weft.float32
  end

  -- The parameter types of a launch of k with inputs ins (nin of them)
  -- and outputs outs: declared, or taken from the argument (nil where a
  -- generic parameter cannot take it). Derived launches and tapes
  -- (tape.lua) type a launch as the forward one does.
  function P.launch_types(k, ins, outs, nin)
    local types, nt = {}, nil
    nin = nin or #ins
    for i, p in ipairs(k.params) do
      local v = arg_of(ins, outs, nin, i)
      if p.type then
        types[i] = p.type
      elseif type(v) == "number" then
        nt = nt or number_type(k, ins, outs, nin)
        types[i] = nt
      else
        types[i] = (arg_type(v))
      end
    end
    return types
  end

  local function get_variant(st, ins, outs, nin)
    if #st.generic == 0 then
      local v = st.fixed
      if not v then
        local types = {}
        for i, p in ipairs(st.k.params) do types[i] = p.type end
        v = new_variant(st, types)
        st.fixed = v
      end
      return v
    end
    -- walk the tree of generic argument type numbers
    local node, nt = st.variants, nil
    for _, i in ipairs(st.generic) do
      local a = arg_of(ins, outs, nin, i)
      local t, key
      if type(a) == "number" then
        nt = nt or number_type(st.k, ins, outs, nin)
        t, key = nt, -nt.id
      else
        t, key = arg_type(a)
      end
      if not t then
        raise("weft.launch: kernel '%s': generic parameter '%s' cannot take %s", kname(st.k),
              st.k.params[i].name, describe(a))
      end
      local nx = node[key]
      if not nx then
        nx = {}
        node[key] = nx
      end
      node = nx
    end
    local v = node.variant
    if not v then
      v = new_variant(st, P.launch_types(st.k, ins, outs, nin))
      node.variant = v
    end
    return v
  end

  -- weft.config.mode -> its number in compile cache keys (ndim + 4 * mode).
  local modes = { fast = 0, release = 1, debug = 2 }
  local function bad_mode(mode)
    raise("weft.config.mode must be \"release\", \"fast\" or \"debug\" (default: $WEFT_MODE), got %s",
          type(mode) == "string" and fmt("%q", mode) or describe(mode))
  end
  -- The current mode's number (raises for an unknown mode).
  function P.mode_index()
    local mode = config.mode
    return modes[mode] or bad_mode(mode)
  end
  -- core.cpu_compile / core.cuda_ptx options of mode number m.
  function P.mode_opts(m, opts)
    opts.debug, opts.checks = m == 2, m == 1
    return opts
  end

  local function compile_code(st, v, ndim, mode)
    local res = core.cpu_compile(v.module, P.mode_opts(mode, { ndim = ndim, names = st.names }))
    if res.from_disk then st.disk_hits = st.disk_hits + 1 else st.compiles = st.compiles + 1 end
    local buf = ffi.new("int64_t[?]", math.max(1, math.ceil(res.size / 8)))
    local c = {
      fn = ffi.cast("void *", res.fn),
      code = res.code, -- keeps fn's code in the JIT (freed with this record)
      cost = res.cost,
      buf = buf,
      key = res.key,
      from_disk = res.from_disk,
    }
    c.pack = P.packer{ k = st.k, types = v.types, writes = v.writes,
                       addrs = P.block_addrs(buf, res.offsets, #v.types) }
    return c
  end

  -- k:compile (kernel.lua): compile now, into the caches a launch reads,
  -- the variant of the parameter types `types` and its code for ndim in
  -- mode number m. (A generic parameter's variant is found by the number
  -- arg_type gives its argument: an array type's dtype and ndim, a scalar
  -- type's id.)
  function P.precompile(k, types, ndim, m)
    local st = rawget(k, "_launch") or kernel_state(k)
    local v
    if #st.generic == 0 then
      v = st.fixed or new_variant(st, types)
      st.fixed = v
    else
      local node = st.variants
      for _, i in ipairs(st.generic) do
        local t = types[i]
        local key = t.kind == "array" and t.dtype.id * 8 + t.ndim or -t.id
        node[key] = node[key] or {}
        node = node[key]
      end
      v = node.variant or new_variant(st, types)
      node.variant = v
    end
    if not v.guard() then v = refresh(st, v) end
    local ckey = ndim + 4 * m
    if not v.code[ckey] then v.code[ckey] = compile_code(st, v, ndim, m) end
  end

  ---------------------------------------------------------------------------
  -- weft.launch
  ---------------------------------------------------------------------------
  local last_threads = nil
  local last_order = nil
  local empty = {}

  -- Reads dim into `dims`; returns ndim and the thread count.
  local function read_dims(k, dim)
    if type(dim) == "number" then
      if dim < 0 or dim ~= floor(dim) or dim > 2147483647 then
        raise("weft.launch: kernel '%s': dim must be a non-negative integer, got %s", kname(k), tostring(dim))
      end
      dims[0] = dim
      return 1, dim
    end
    if type(dim) ~= "table" then
      raise("weft.launch: kernel '%s': dim must be an integer or a table of 1 to 4 integers, got %s",
            kname(k), describe(dim))
    end
    local n = #dim
    if n < 1 or n > 4 then
      raise("weft.launch: kernel '%s': dim must have 1 to 4 entries, got %d", kname(k), n)
    end
    local total = 1
    for i = 1, n do
      local d = dim[i]
      if type(d) ~= "number" or d < 0 or d ~= floor(d) or d > 2147483647 then
        raise("weft.launch: kernel '%s': dim[%d] must be a non-negative integer, got %s", kname(k), i,
              type(d) == "number" and tostring(d) or describe(d))
      end
      dims[i - 1] = d
      total = total * d
    end
    return n, total
  end

  function weft.launch(k, dim, inputs, opts)
    local cap = P.capture_cpu -- set between capture_begin("cpu") and capture_end
    if cap and not cap.busy then return cap.record(k, dim, inputs, opts) end
    local cur = P.default_device -- weft.set_device: where launches naming none go
    if cur and cur ~= "cpu"
      and (opts == nil or type(opts) == "table" and opts.device == nil and opts.stream == nil) then
      local o = { device = cur }
      for key, v in pairs(opts or empty) do o[key] = v end
      opts = o
    end
    local st = type(k) == "table" and rawget(k, "_launch") or kernel_state(k)
    local ndim, total = read_dims(k, dim)
    local outs = empty
    if opts ~= nil then
      if type(opts) ~= "table" then
        raise("weft.launch: kernel '%s': opts must be a table, got %s", kname(k), describe(opts))
      end
      if opts.adjoint then
        local dev = opts.device ~= nil and P.parse_device("weft.launch", opts.device) or nil
        return P.launch_adjoint(k, dim, inputs, opts.outputs or empty, opts.adj_inputs or empty,
                                    opts.adj_outputs or empty, dev)
      end
      local dev = opts.device
      if (dev ~= nil and dev ~= "cpu") or opts.stream ~= nil then
        if P.tape_active then P.tape_hook(k, dim, inputs, opts.outputs, opts) end
        return P.launch_device(k, dim, inputs, opts)
      end
      outs = opts.outputs or empty
      if type(outs) ~= "table" then
        raise("weft.launch: kernel '%s': opts.outputs must be a table, got %s", kname(k), describe(outs))
      end
    end
    local ins = inputs or empty
    if type(ins) ~= "table" then
      raise("weft.launch: kernel '%s': inputs must be a table, got %s", kname(k), describe(ins))
    end
    local nin, nout = #ins, #outs
    if nin + nout ~= st.nparams then
      raise("weft.launch: kernel '%s' takes %d argument%s (inputs then outputs), got %d", kname(k),
            st.nparams, st.nparams == 1 and "" or "s", nin + nout)
    end
    local nt = config.num_threads
    if nt ~= last_threads then
      if nt ~= nil and (type(nt) ~= "number" or nt < 1 or nt ~= floor(nt)) then
        raise("weft.config.num_threads must be a positive integer, got %s", tostring(nt))
      end
      P.check(C.wf_rt_set_num_threads(rt, nt or 0), 2)
      last_threads = nt
    end
    local co = config.cell_order
    if co ~= last_order then
      if co ~= nil and type(co) ~= "boolean" then
        raise("weft.config.cell_order must be true, false or nil, got %s", describe(co))
      end
      C.wf_rt_set_cell_order(rt, co == false and 0 or 1)
      last_order = co
    end
    local v = st.fixed or get_variant(st, ins, outs, nin)
    if not v.guard() then v = refresh(st, v) end
    local mode = modes[config.mode] or bad_mode(config.mode)
    local ckey = ndim + 4 * mode
    local c = v.code[ckey]
    if not c then
      c = compile_code(st, v, ndim, mode)
      v.code[ckey] = c
    end
    c.pack(ins, outs, nin)
    if P.tape_active then P.tape_hook(k, dim, ins, outs, opts, v.module) end
    if total == 0 then return end
    local status = C.wf_cpu_launch(rt, c.fn, ndim, dims, c.buf, c.cost)
    if status ~= 0 then
      local msg = ffi.string(C.wf_rt_errmsg(rt))
      error(msg, 2)
    end
  end

  -- Counters of the CPU compiler: { compiles, disk_hits, disk_writes,
  -- memory_hits, cache_dir, cpu, triple }; with a kernel, its own
  -- { compiles, disk_hits, respecialized (front end runs again because a
  -- captured value changed) }.
  function weft.stats(k)
    if k ~= nil then
      local st = type(k) == "table" and rawget(k, "_launch")
      return { compiles = st and st.compiles or 0, disk_hits = st and st.disk_hits or 0,
               respecialized = type(k) == "table" and rawget(k, "_respecs") or 0 }
    end
    return core.cpu_stats()
  end
end
