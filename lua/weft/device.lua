-- Devices: weft.init, weft.devices, weft.get_device / set_device,
-- weft.is_cuda_available, weft.synchronize, graph capture (CPU and CUDA), the
-- CUDA launch path used by weft.launch for opts.device = "cuda:N"
-- (P.launch_device).
--
-- Everything CUDA goes through src/cuda (libcuda is loaded with dlopen on
-- first use). Without a driver, weft.devices() is { "cpu" } and every use
-- of a cuda device raises "CUDA is not available: libcuda.so.1 could not be
-- loaded (no NVIDIA driver)" with the function and device named.
local bit = require "bit"
local ffi = require "ffi"
local cdef = require "weft.cdef"

local fmt = string.format

cdef.declare [[
int wf_geom_kind(wf_rt *rt, uint64_t id);
]]


return function(weft, P)
  local C, rt, core = cdef.C, P.rt, P.core
  -- errors point at the first caller outside weft's Lua files
  local raise = P.raise
  local function check(status)
    if status ~= 0 then raise(ffi.string(C.wf_rt_errmsg(rt))) end
  end

  local function count() return tonumber(C.wf_device_count(rt)) end

  -- "cpu" -> -1, "cuda" / "cuda:N" / N -> N, and the name; raises on
  -- anything else (the parser of lua/weft/array.lua).
  local function parse(fname, d) return P.parse_device(fname, d) end

  function weft.init()
    count()
    return weft
  end

  function weft.is_cuda_available() return C.wf_cuda_available(rt) ~= 0 end

  function weft.devices()
    local out = { "cpu" }
    for i = 0, count() - 1 do out[#out + 1] = "cuda:" .. i end
    return out
  end

  function weft.get_device() return P.default_device or "cpu" end

  function weft.set_device(d)
    local _, name = parse("weft.set_device", d)
    P.default_device = name
  end

  -- Properties of cuda:N: name, arch ("sm_86"), memory (bytes).
  function weft.cuda_device_info(d)
    local n = parse("weft.cuda_device_info", d or "cuda:0")
    if n < 0 then raise("weft.cuda_device_info: not a CUDA device") end
    local name = ffi.new("char[256]")
    local maj, min, mem = ffi.new("int[1]"), ffi.new("int[1]"), ffi.new("size_t[1]")
    check(C.wf_cuda_device_info(rt, n, name, 256, maj, min, mem))
    return { name = ffi.string(name), arch = fmt("sm_%d%d", maj[0], min[0]),
             memory = tonumber(mem[0]) }
  end

  -- Release mode's error slots, one per device (WF_CUDA_ERRSLOT = 512
  -- bytes: int32 flag, then the message): zeroed once, written by the first
  -- thread that fails a bounds check. Reading one waits for the device, so
  -- launches do not read it: a failed check (the access did not happen)
  -- is raised by the next weft.synchronize (or stream synchronize) after
  -- it, as CUDA reports asynchronous errors.
  local release_slots, release_pending = {}, {}
  local function release_error(n)
    if not release_pending[n] then return end
    release_pending[n] = nil
    local s = release_slots[n]
    local host = s:to("cpu")
    local p = ffi.cast("const char *", host.h.data)
    if ffi.cast("const int32_t *", p)[0] == 0 then return end
    local msg = ffi.string(p + 4)
    s:zero_()
    error(msg, 0) -- positioned at the kernel's line
  end

  -- Waits for the work queued on every CUDA device (the CPU backend runs
  -- launches synchronously).
  function weft.synchronize()
    for i = 0, count() - 1 do check(C.wf_cuda_synchronize(rt, i)) end
    for i = 0, count() - 1 do release_error(i) end
  end

  ---------------------------------------------------------------------------
  -- streams and events (CUDA; Warp's names)
  ---------------------------------------------------------------------------
  -- weft.Stream(device) is a new stream; each device also has its own
  -- default stream (the Stream object weft.get_stream returns until
  -- weft.set_stream picks another). Launches on a device go to its
  -- current stream unless opts.stream names one; captures and graph
  -- launches use the current stream. Copies are synchronous (ordered after
  -- the work queued on every stream of the device).
  -- weft.Event(device [, { enable_timing = true }]); stream:record_event,
  -- stream:wait_event, stream:wait_stream; weft.synchronize_stream,
  -- weft.synchronize_event, weft.get_event_elapsed_time (milliseconds).
  local Stream, Event = {}, {}
  Stream.__index, Event.__index = Stream, Event

  -- The device index of d (default: the current device), which must be
  -- a CUDA device.
  local function cuda_index(fname, d)
    local n, name = parse(fname, d)
    if n < 0 then raise(fmt("%s: streams and events are for CUDA devices, got '%s'", fname, name)) end
    return n, name
  end

  local defaults, current = {}, {} -- per device index: its own stream, the current one
  local function default_stream(n)
    local st = defaults[n]
    if not st then
      st = setmetatable({ device = "cuda:" .. n, _n = n, handle = nil }, Stream)
      defaults[n] = st
    end
    return st
  end

  function weft.Stream(device)
    local n, name = cuda_index("weft.Stream", device)
    local h = ffi.new("void *[1]")
    check(C.wf_cuda_stream_new(rt, n, h))
    return setmetatable({ device = name, _n = n, handle = ffi.gc(h[0], C.wf_cuda_stream_release) },
                        Stream)
  end
  function weft.is_stream(v) return getmetatable(v) == Stream end

  -- Argument checks: v must be a Stream / an Event.
  local function expect(mt, what)
    return function(fname, v)
      if getmetatable(v) ~= mt then raise("%s: expected a %s, got %s", fname, what, type(v)) end
      return v
    end
  end
  local check_stream, check_event = expect(Stream, "weft.Stream"), expect(Event, "weft.Event")

  function weft.Event(device, opts)
    local n, name = cuda_index("weft.Event", device)
    if opts ~= nil and type(opts) ~= "table" then
      raise(fmt("weft.Event: opts must be a table, got %s", type(opts)))
    end
    local timing = opts and opts.enable_timing and 1 or 0
    local h = ffi.new("void *[1]")
    check(C.wf_cuda_event_new(rt, n, timing, h))
    return setmetatable({ device = name, _n = n, enable_timing = timing == 1,
                          handle = ffi.gc(h[0], C.wf_cuda_event_release) }, Event)
  end
  function weft.is_event(v) return getmetatable(v) == Event end

  -- The current stream of a device (default: the current device).
  function weft.get_stream(device)
    local n = cuda_index("weft.get_stream", device)
    return current[n] or default_stream(n)
  end

  -- Makes st the current stream of its device.
  function weft.set_stream(st)
    check_stream("weft.set_stream", st)
    check(C.wf_cuda_set_stream(rt, st._n, st.handle))
    current[st._n] = st.handle and st or nil
  end

  -- Runs fn with st as the current stream of its device and that device as
  -- the current one, then restores both (also when fn raises); returns fn's
  -- results.
  function weft.ScopedStream(st, fn)
    check_stream("weft.ScopedStream", st)
    if type(fn) ~= "function" then raise("weft.ScopedStream: expected a function") end
    local prev, prev_dev = current[st._n] or default_stream(st._n), P.default_device
    weft.set_stream(st)
    P.default_device = st.device -- and its device is the current one, as in Warp
    local function finish(ok, ...)
      weft.set_stream(prev)
      P.default_device = prev_dev
      if not ok then error((...), 0) end
      return ...
    end
    return finish(pcall(fn))
  end

  function Stream:synchronize()
    if self.handle then
      check(C.wf_cuda_stream_synchronize(rt, self.handle))
    else
      check(C.wf_cuda_synchronize(rt, self._n))
    end
    release_error(self._n)
  end
  function weft.synchronize_stream(st)
    check_stream("weft.synchronize_stream", st)
    return st:synchronize()
  end

  -- Records e (a new event when nil) at this point of the stream; returns it.
  function Stream:record_event(e)
    if e == nil then
      e = weft.Event(self.device)
    else
      check_event("stream:record_event", e)
    end
    check(C.wf_cuda_event_record(rt, e.handle, self.handle))
    return e
  end

  -- Work queued on this stream after this call waits for e.
  function Stream:wait_event(e)
    check_event("stream:wait_event", e)
    check(C.wf_cuda_stream_wait_event(rt, self.handle, e.handle))
  end

  -- Work queued on this stream after this call waits for the work queued
  -- on other so far.
  function Stream:wait_stream(other)
    check_stream("stream:wait_stream", other)
    self:wait_event(other:record_event())
  end

  function Stream:__tostring()
    return fmt("weft.Stream (%s%s)", self.device, self.handle and "" or ", default")
  end

  -- On the current stream of the event's device.
  function weft.record_event(e)
    check_event("weft.record_event", e)
    return weft.get_stream(e.device):record_event(e)
  end
  function weft.wait_event(e)
    check_event("weft.wait_event", e)
    weft.get_stream(e.device):wait_event(e)
  end

  function weft.synchronize_event(e)
    check_event("weft.synchronize_event", e)
    check(C.wf_cuda_event_synchronize(rt, e.handle))
  end

  -- Milliseconds from a to b; waits for b first unless synchronize is
  -- false (Warp's default: the driver refuses a pending event).
  function weft.get_event_elapsed_time(a, b, synchronize)
    check_event("weft.get_event_elapsed_time", a)
    check_event("weft.get_event_elapsed_time", b)
    if synchronize ~= false then check(C.wf_cuda_event_synchronize(rt, b.handle)) end
    local ms = ffi.new("float[1]")
    check(C.wf_cuda_event_elapsed(rt, a.handle, b.handle, ms))
    return tonumber(ms[0])
  end

  function Event:__tostring()
    return fmt("weft.Event (%s)", self.device)
  end

  ---------------------------------------------------------------------------
  -- graph capture
  ---------------------------------------------------------------------------
  -- CUDA: the driver's stream capture (capture_end returns a CUgraph made
  -- executable). CPU: between capture_begin("cpu") and capture_end(),
  -- weft.launch records each launch instead of running it: the arguments
  -- are checked and the kernel compiled at once (a launch over an empty
  -- grid of the same rank does both), so errors surface at the launch that
  -- caused them, as with CUDA; capture_launch(g) replays the list in order.
  -- Arrays are recorded by reference (a replay sees their current
  -- contents, as a CUDA graph sees device memory), scalars by value.
  -- weft.launch hands launches to P.capture_cpu.record while it is set
  -- (a hook like the tape's), so local copies of weft.launch record too.
  -- g.launches (cpu graphs): the recorded launches { k, dim, inputs, opts }.
  local capturing = nil -- device index being captured (-1: the cpu)
  -- CUDA captures: the kernels launched (load_kernel's record -> kernel,
  -- one entry however often it is launched), kept by the graph; a replay
  -- checks that their captured values did not change since (the graph
  -- holds the code of those values)
  local captured = nil
  local Graph = {}
  Graph.__index = Graph
  weft.Graph = Graph

  local function copy(t)
    if type(t) ~= "table" then return t end
    local c = {}
    for k, v in pairs(t) do c[k] = v end
    return c
  end

  -- The empty grid of each rank, for the check launches.
  local zero_dims = { { 0 }, { 0, 0 }, { 0, 0, 0 }, { 0, 0, 0, 0 } }

  -- weft.launch while the cpu captures: check, compile, record. cap.busy
  -- lets the check launch through the hook. A record holds the launch's
  -- own copies of its lists (the caller may change them afterwards); the
  -- check launch packs the arguments into the code's block as a replay
  -- will, so a replay allocates nothing.
  local function recorder(cap, list)
    return function(k, dim, inputs, opts)
      local empty = 0
      if type(dim) == "table" then
        dim = copy(dim)
        empty = zero_dims[#dim] or dim -- a bad rank: the check launch says so
      end
      local o = copy(opts)
      if o then o.outputs, o.adj_inputs, o.adj_outputs = copy(o.outputs), copy(o.adj_inputs), copy(o.adj_outputs) end
      local tape = P.tape_active
      P.tape_active = nil -- the check launch is not a recorded step
      cap.busy = true
      local ok, err = pcall(weft.launch, k, empty, inputs, o)
      cap.busy = false
      P.tape_active = tape
      if not ok then error(err, 0) end -- positioned at the user's call already
      list[#list + 1] = { k = k, dim = dim, inputs = copy(inputs), opts = o }
    end
  end

  function weft.capture_begin(d)
    local n = parse("weft.capture_begin", d)
    if capturing then
      raise(fmt("weft.capture_begin: %s is already capturing",
                capturing < 0 and "the cpu" or "cuda:" .. capturing))
    end
    if n < 0 then
      local cap = { list = {}, busy = false }
      cap.record = recorder(cap, cap.list)
      P.capture_cpu = cap
      capturing = -1
      return
    end
    -- a capture may not allocate (the driver refuses and drops it): the
    -- error slot its launches write is made first
    if not release_slots[n] then
      release_slots[n] = weft.zeros(512, weft.uint8, { device = "cuda:" .. n })
    end
    check(C.wf_cuda_capture_begin(rt, n))
    capturing, captured = n, {}
  end

  function weft.capture_end()
    if not capturing then raise("weft.capture_end: no capture in progress") end
    local n = capturing
    capturing = nil
    if n < 0 then
      local cap = P.capture_cpu
      P.capture_cpu = nil
      return setmetatable({ device = -1, launches = cap.list }, Graph)
    end
    local g = ffi.new("void *[1]")
    check(C.wf_cuda_capture_end(rt, n, g))
    local h = ffi.gc(g[0], function(p) C.wf_cuda_graph_free(rt, p) end)
    local kernels = captured
    captured = nil
    return setmetatable({ handle = h, device = n, kernels = kernels }, Graph)
  end

  function weft.capture_launch(g)
    if getmetatable(g) ~= Graph then raise("weft.capture_launch: expected a graph from weft.capture_end") end
    if g.device < 0 then
      if capturing then raise("weft.capture_launch: cannot replay a cpu graph while capturing") end
      local launch = weft.launch
      for _, l in ipairs(g.launches) do
        local ok, err = pcall(launch, l.k, l.dim, l.inputs, l.opts)
        if not ok then -- positioned at the capture_launch call, as a launch is
          local msg = tostring(err)
          local c = debug.getinfo(2, "Sl")
          local at = c and c.currentline > 0 and c.short_src .. ":" .. c.currentline .. ":"
          if at and msg:sub(1, #at) ~= at then error(msg, 2) end
          error(msg, 0)
        end
      end
      return
    end
    for ker, k in pairs(g.kernels or {}) do
      if not ker.guard() then
        raise(fmt("weft.capture_launch: kernel '%s' reads names whose values changed since the "
                  .. "graph was captured; the graph would run the old code (capture it again)",
                  k.name))
      end
    end
    check(C.wf_cuda_graph_launch(rt, g.device, g.handle))
  end

  function Graph:__tostring()
    return self.device < 0 and fmt("weft.Graph (cpu, %d launches)", #self.launches)
      or fmt("weft.Graph (cuda:%d)", self.device)
  end

  ---------------------------------------------------------------------------
  -- launches on cuda:N
  ---------------------------------------------------------------------------
  -- Per kernel and device: the loaded module and its entry function.
  local loaded = setmetatable({}, { __mode = "k" })

  -- PTX for the device's architecture (compute_XX): NVRTC skips ptxas and
  -- the driver JIT-compiles it at load (caching the result itself). One
  -- module per mode (number m of P.mode_index): release and debug
  -- modules have bounds checks and the error slot.
  -- kind nil: the forward entry; "adj" / "jvp": the derived entry, from the
  -- module autodiff appends it to (lua/weft/tape.lua).
  local function load_kernel(k, n, mode, kind)
    local per = loaded[k]
    if not per then
      per = {}
      loaded[k] = per
    end
    local key = (kind or "") .. n .. ":" .. mode
    -- guard: false once a value the kernel captured changed (kernel.lua)
    if per[key] and per[key].guard() then return per[key] end
    for _, p in ipairs(k.params) do
      if not p.type then
        raise(fmt("weft.launch: kernel '%s': generic parameter '%s' is not supported on CUDA yet; "
                  .. "give it a type", k.name, p.name))
      end
    end
    local ent = k:_entry()
    local mod, want = ent.module, nil
    if kind then
      local ok, m, name = pcall(P.derived_module, kind, k, mod, nil, mode == 2)
      if not ok then error(m, 0) end
      mod, want = m, "weft_" .. name:gsub("[^%w_]", "_")
    end
    local arch = weft.cuda_device_info(n).arch:gsub("^sm_", "compute_")
    local ok, image, entries = pcall(core.cuda_ptx, mod, arch, P.mode_opts(mode, {
      names = P.param_names(k), fast_compile = weft.config.cuda_fast_compile }))
    if not ok then error(image, 0) end
    local entry = entries[1]
    if want then
      entry = nil
      for _, e in ipairs(entries) do
        if e == want then entry = e end
      end
      if not entry then
        raise(fmt("weft: kernel '%s': no CUDA entry '%s' in its module", k.name, want))
      end
    end
    local m = ffi.new("void *[1]")
    check(C.wf_cuda_module_load(rt, n, image, #image + 1, m))
    -- unloaded when the record goes (a collected kernel, a recompile)
    local mh = ffi.gc(m[0], C.wf_cuda_module_release)
    local f = ffi.new("void *[1]")
    check(C.wf_cuda_module_function(rt, mh, entry, f))
    -- writes: the forward kernel's written array parameters (derived
    -- launches check theirs in lua/weft/tape.lua)
    per[key] = { module = mh, fn = f[0], image = image, writes = not kind and core.writes(mod),
                 guard = ent.guard, geom = mode > 0 and core.geom_params(ent.module) or {} }
    return per[key]
  end

  P.cuda_load_kernel = load_kernel -- k:compile{ device = "cuda:0" } (kernel.lua)

  -- Debug mode: the error slot of device n (WF_CUDA_ERRSLOT = 512 bytes:
  -- int32 flag, then the message), zeroed before each launch.
  local slots = {}
  local function error_slot(n)
    local s = slots[n]
    if not s then
      s = weft.zeros(512, weft.uint8, { device = "cuda:" .. n })
      slots[n] = s
    end
    s:zero_()
    return s
  end

  -- After a debug launch: the first failing thread's message, or nil.
  local function slot_message(s)
    local host = s:to("cpu")
    local p = ffi.cast("const char *", host.h.data)
    if ffi.cast("const int32_t *", p)[0] == 0 then return nil end
    return ffi.string(p + 4)
  end

  -- The kernelParams of a loaded kernel (P.cuda_args: one pointer per
  -- parameter, arrays passing their header, which the kernel reads the
  -- first 72 bytes of; then the derived kernel's adjoint/tangent arrays;
  -- then, in release and debug mode, the error slot's address) and their
  -- packer (P.packer), made at its first launch and reused by every
  -- launch after it: the driver copies the values when it queues one.
  local function kernel_args(ker, k, n, kind, nextra, mode)
    local types = {}
    for i, p in ipairs(k.params) do types[i] = p.type end
    -- a derived kernel's extras: one per array, or struct holding arrays
    local xtypes = {}
    for _, t in ipairs(kind and types or {}) do
      if t.kind == "array" or t.arrays then xtypes[#xtypes + 1] = t end
    end
    local a = P.cuda_args(types, nextra, mode > 0, xtypes)
    a.pack = P.packer{ k = k, types = types, addrs = a.addrs, nextra = nextra, device = n,
                       extra_types = xtypes,
                       writes = ker.writes or nil,
                       where = kind and fmt("weft: %s launch of '%s'", kind == "adj" and "adjoint" or "tangent",
                                            k.name) }
    ker.args = a
    return a
  end

  local launch_dims = ffi.new("int64_t[4]")
  local NOEXTRA = {}

  -- Release and debug mode: the id arguments of kernel k's parameters (or
  -- their struct fields) that reach a native query unchanged
  -- (core.geom_params) must be live objects of the query's kind on
  -- cuda:n, as the CPU's kernels check per query (src/cpu/rtlib.c, whose
  -- messages these are). A device would read through a bad id; ids read
  -- from arrays go unchecked on CUDA.
  local kind_names = { "weft.Mesh", "weft.Bvh", "weft.HashGrid", "weft.Volume" }
  -- (a static host may leave the registry out: then nothing is checked)
  local geom_kind = pcall(function() return C.wf_geom_kind end) and C.wf_geom_kind
  local function check_ids(k, n, ker, ins, outs, nin)
    for _, use in ipairs(geom_kind and ker.geom or {}) do
      local i = use.param
      local v = i <= nin and ins[i] or outs[i - nin]
      for f in (use.path or ""):gmatch("[^.]+") do v = v[f] end -- an id a struct holds
      local id = ffi.cast("uint64_t", v)
      local rk = geom_kind(rt, id)
      local kd, on = bit.band(rk, 255), bit.rshift(rk, 8) -- on: device ordinal + 1, 0 the cpu
      local want, why = kind_names[use.kind] or "object", nil
      if rk == 0 then
        why = fmt("id %s is not a live %s (freed, or not an id)", tostring(id):sub(1, -4), want)
      elseif kd ~= use.kind then
        why = fmt("id %s is a %s, not a %s", tostring(id):sub(1, -4), kind_names[kd] or "object", want)
      elseif on ~= n + 1 then
        why = fmt("id %s is a %s on %s, but this launch runs on cuda:%d", tostring(id):sub(1, -4), want,
                  on == 0 and "the cpu" or "cuda:" .. (on - 1), n)
      end
      if why then
        local chunk = use.chunk:gsub("^[@=]", "")
        -- at the launch's line too, as a CPU launch reports the query's failure
        raise(fmt("%s:%d: weft.%s: %s, in kernel '%s'", chunk, use.line, use.name, why, k.name))
      end
    end
  end

  -- Launch k (kind nil) or its derived kernel on cuda:n with block_dim
  -- threads per block (nil: the runtime's choice), on stream (a stream
  -- handle; nil: the device's current stream). The arguments are ins[i]
  -- for i <= nin, then outs[i - nin]; extra: a derived kernel's arrays.
  local function launch_on(k, n, kind, dim, ins, outs, nin, extra, block_dim, stream)
    local mode = P.mode_index()
    local debug = mode == 2
    local ker = load_kernel(k, n, mode, kind)
    if captured and capturing == n then captured[ker] = k end
    local nd = 1
    if type(dim) == "table" then
      nd = #dim
      for i = 1, nd do launch_dims[i - 1] = dim[i] end
    else
      launch_dims[0] = dim
    end
    local a = ker.args or kernel_args(ker, k, n, kind, #extra, mode)
    a.pack(ins, outs, nin, extra)
    if next(ker.geom) then check_ids(k, n, ker, ins, outs, nin) end
    local slot
    if mode > 0 then -- the error slot's device pointer, passed last
      -- captured debug launches report as release ones do (at the next
      -- synchronize): a capture cannot zero or read the slot per launch
      if debug and capturing ~= n then
        slot = error_slot(n)
      else
        local s = release_slots[n]
        if not s then
          s = weft.zeros(512, weft.uint8, { device = "cuda:" .. n })
          release_slots[n] = s
        end
        release_pending[n] = true
      end
      a.slot[0] = (slot or release_slots[n]).h.data
    end
    check(C.wf_cuda_launch(rt, n, ker.fn, nd, launch_dims, a.n, a.ptrs, block_dim or 0,
                           weft.config.verify_cuda and 1 or 0, stream))
    if slot then
      local msg = slot_message(slot)
      if msg then error(msg, 0) end -- positioned at the kernel's line
    end
  end

  function P.launch_device(k, dim, inputs, opts)
    local st = opts.stream
    if st ~= nil and getmetatable(st) ~= Stream then
      raise(fmt("weft.launch: kernel '%s': opts.stream must be a weft.Stream, got %s", k.name,
                type(st)))
    end
    local n = st and opts.device == nil and st._n or parse("weft.launch", opts.device)
    if st and st._n ~= n then
      raise(fmt("weft.launch: kernel '%s': opts.stream is on %s, but the launch runs on %s", k.name,
                st.device, P.device_name(n)))
    end
    if n < 0 then return weft.launch(k, dim, inputs, { outputs = opts.outputs }) end
    local ins, outs = inputs or NOEXTRA, opts.outputs or NOEXTRA
    -- the CPU launch's checks (launch.lua), at the caller's line
    if type(ins) ~= "table" or type(outs) ~= "table" then
      local what, v = type(ins) ~= "table" and "inputs" or "opts.outputs", type(ins) ~= "table" and ins or outs
      raise(fmt("weft.launch: kernel '%s': %s must be a table, got %s", k.name, what, P.describe(v)))
    end
    local bd = opts.block_dim
    if bd ~= nil and (type(bd) ~= "number" or bd < 1 or bd ~= math.floor(bd)) then
      raise(fmt("weft.launch: kernel '%s': opts.block_dim must be a positive integer, got %s", k.name,
                type(bd) == "number" and tostring(bd) or P.describe(bd)))
    end
    if #ins + #outs ~= #k.params then
      raise(fmt("weft.launch: kernel '%s' takes %d arguments (inputs then outputs), got %d", k.name,
                #k.params, #ins + #outs))
    end
    launch_on(k, n, nil, dim, ins, outs, #ins, NOEXTRA, opts.block_dim, st and st.handle)
  end

  -- The derived kernel (kind "adj" or "jvp") of k on cuda:n: args are the
  -- primal arguments, extra one adjoint/tangent array per array parameter
  -- (a header with a null data pointer for none).
  function P.launch_device_derived(kind, k, n, dim, args, extra)
    launch_on(k, n, kind, dim, args, args, #args, extra)
  end
end
