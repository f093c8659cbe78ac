-- Devices: weft.init, weft.devices, weft.get_device / set_device,
-- weft.is_cuda_available, weft.synchronize, graph capture (CPU and CUDA), the
-- CUDA launch path used by weft.launch for opts.device = "cuda:N"
-- (weft._launch_device).
--
-- Everything CUDA goes through src/cuda (libcuda is loaded with dlopen on
-- first use). Without a driver, weft.devices() is { "cpu" } and every use
-- of a cuda device raises "CUDA is not available: libcuda.so.1 could not be
-- loaded (no NVIDIA driver)" with the function and device named.
local ffi = require "ffi"
local cdef = require "weft.cdef"

local fmt = string.format


return function(weft)
  local C, rt, core = cdef.C, weft._rt, weft._core

  local function count() return tonumber(C.wf_device_count(rt)) end

  -- "cpu" -> -1, "cuda" / "cuda:N" / N -> N, and the name; raises on
  -- anything else (the parser of lua/weft/array.lua).
  local function parse(fname, d) return weft._parse_device(fname, d) end

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

  function weft.get_device() return weft._default_device or "cpu" end

  function weft.set_device(d)
    local _, name = parse("weft.set_device", d)
    weft._default_device = name
  end

  -- Properties of cuda:N: name, arch ("sm_86"), memory (bytes).
  function weft.cuda_device_info(d)
    local n = parse("weft.cuda_device_info", d or "cuda:0")
    if n < 0 then error("weft.cuda_device_info: not a CUDA device", 2) end
    local name = ffi.new("char[256]")
    local maj, min, mem = ffi.new("int[1]"), ffi.new("int[1]"), ffi.new("size_t[1]")
    weft._check(C.wf_cuda_device_info(rt, n, name, 256, maj, min, mem), 2)
    return { name = ffi.string(name), arch = fmt("sm_%d%d", maj[0], min[0]),
             memory = tonumber(mem[0]) }
  end

  -- Waits for the work queued on every CUDA device (the CPU backend runs
  -- launches synchronously).
  function weft.synchronize()
    for i = 0, count() - 1 do weft._check(C.wf_cuda_synchronize(rt, i), 2) end
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
  -- Launches made through a local copy of weft.launch taken before
  -- capture_begin are not recorded.
  -- g.launches (cpu graphs): the recorded launches { k, dim, inputs, opts }.
  local capturing = nil -- device index being captured (-1: the cpu)
  local Graph = {}
  Graph.__index = Graph
  weft.Graph = Graph

  local function copy(t)
    if type(t) ~= "table" then return t end
    local c = {}
    for k, v in pairs(t) do c[k] = v end
    return c
  end

  -- weft.launch while the cpu captures: check, compile, record.
  local function recorder(list, launch)
    return function(k, dim, inputs, opts)
      if type(dim) == "table" then dim = copy(dim) end
      local empty = 0
      if type(dim) == "table" then
        empty = {}
        for i = 1, #dim do empty[i] = 0 end
      end
      local o = copy(opts)
      if o then o.outputs, o.adj_inputs, o.adj_outputs = copy(o.outputs), copy(o.adj_inputs), copy(o.adj_outputs) end
      local tape = weft._tape_active
      weft._tape_active = nil -- the check launch is not a recorded step
      local ok, err = pcall(launch, k, empty, inputs, o)
      weft._tape_active = tape
      if not ok then error(err, 0) end -- positioned at the user's call already
      list[#list + 1] = { k = k, dim = dim, inputs = copy(inputs), opts = o }
    end
  end

  function weft.capture_begin(d)
    local n = parse("weft.capture_begin", d)
    if capturing then
      error(fmt("weft.capture_begin: %s is already capturing",
                capturing < 0 and "the cpu" or "cuda:" .. capturing), 2)
    end
    if n < 0 then
      local list, launch = {}, weft.launch
      weft._capture = { list = list, launch = launch }
      weft.launch = recorder(list, launch)
      capturing = -1
      return
    end
    weft._check(C.wf_cuda_capture_begin(rt, n), 2)
    capturing = n
  end

  function weft.capture_end()
    if not capturing then error("weft.capture_end: no capture in progress", 2) end
    local n = capturing
    capturing = nil
    if n < 0 then
      local cap = weft._capture
      weft._capture = nil
      weft.launch = cap.launch
      return setmetatable({ device = -1, launches = cap.list }, Graph)
    end
    local g = ffi.new("void *[1]")
    weft._check(C.wf_cuda_capture_end(rt, n, g), 2)
    local h = ffi.gc(g[0], function(p) C.wf_cuda_graph_free(rt, p) end)
    return setmetatable({ handle = h, device = n }, Graph)
  end

  function weft.capture_launch(g)
    if getmetatable(g) ~= Graph then error("weft.capture_launch: expected a graph from weft.capture_end", 2) end
    if g.device < 0 then
      if capturing then error("weft.capture_launch: cannot replay a cpu graph while capturing", 2) end
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
    weft._check(C.wf_cuda_graph_launch(rt, g.device, g.handle), 2)
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
  -- the driver JIT-compiles it at load (caching the result itself). Debug
  -- mode compiles a second module with bounds checks and the error slot.
  -- kind nil: the forward entry; "adj" / "jvp": the derived entry, from the
  -- module autodiff appends it to (lua/weft/tape.lua). lvl: the error level
  -- of the launch's caller, counted from here.
  local function load_kernel(k, n, debug, kind, lvl)
    local per = loaded[k]
    if not per then
      per = {}
      loaded[k] = per
    end
    local key = (kind or "") .. (debug and -1 - n or n)
    if per[key] then return per[key] end
    for _, p in ipairs(k.params) do
      if not p.type then
        error(fmt("weft.launch: kernel '%s': generic parameter '%s' is not supported on CUDA yet; "
                  .. "give it a type", k.name, p.name), lvl)
      end
    end
    local mod, want = k:_module(), nil
    if kind then
      local ok, m, name = pcall(weft._derived_module, kind, k, mod, nil, debug)
      if not ok then error(m, lvl) end
      mod, want = m, "weft_" .. name:gsub("[^%w_]", "_")
    end
    local arch = weft.cuda_device_info(n).arch:gsub("^sm_", "compute_")
    local names = {}
    for i, p in ipairs(k.params) do names[i] = p.name end
    local ok, image, entries = pcall(core.cuda_ptx, mod, arch, {
      debug = debug, names = names, fast_compile = weft.config.cuda_fast_compile })
    if not ok then error(image, lvl) end
    local entry = entries[1]
    if want then
      entry = nil
      for _, e in ipairs(entries) do
        if e == want then entry = e end
      end
      if not entry then
        error(fmt("weft: kernel '%s': no CUDA entry '%s' in its module", k.name, want), lvl)
      end
    end
    local m = ffi.new("void *[1]")
    weft._check(C.wf_cuda_module_load(rt, n, image, #image + 1, m), lvl)
    local f = ffi.new("void *[1]")
    weft._check(C.wf_cuda_module_function(rt, m[0], entry, f), lvl)
    per[key] = { module = m[0], fn = f[0], image = image }
    return per[key]
  end

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

  -- One pointer per kernel parameter: arrays pass their header (the
  -- kernel reads its first 72 bytes), scalars a boxed copy; then the
  -- headers of extra (a derived kernel's adjoint/tangent arrays), and one
  -- free slot for debug mode's error slot.
  local function marshal(k, n, args, extra, lvl)
    local np = #k.params
    local ptrs = ffi.new("void *[?]", np + #extra + 1)
    local keep = {}
    for i, p in ipairs(k.params) do
      local v = args[i]
      if weft.is_array and weft.is_array(v) then
        if v.h.device ~= n then
          error(fmt("weft.launch: kernel '%s': array '%s' is on %s, but the launch runs on cuda:%d",
                    k.name, p.name, tostring(v.device), n), lvl)
        end
        ptrs[i - 1] = ffi.cast("void *", v)
      else
        local t = p.type
        local box = ffi.new(weft._array_ctype(t), 1)
        local err = t.store(box, 0, v)
        if err then
          error(fmt("weft.launch: kernel '%s': '%s' is %s", k.name, p.name, err), lvl)
        end
        keep[#keep + 1] = box
        ptrs[i - 1] = box
      end
    end
    for j, g in ipairs(extra) do
      keep[#keep + 1] = g
      ptrs[np + j - 1] = ffi.cast("void *", g)
    end
    return ptrs, keep
  end

  -- Launch k (kind nil) or its derived kernel on cuda:n with block_dim
  -- threads per block (nil: the runtime's choice); lvl counts from here.
  local function launch_on(k, n, kind, dim, args, extra, lvl, block_dim)
    local debug = weft.config.mode == "debug"
    local ker = load_kernel(k, n, debug, kind, lvl + 1)
    local d = type(dim) == "table" and dim or { dim }
    local dims = ffi.new("int64_t[4]")
    for i = 1, #d do dims[i - 1] = d[i] end
    local ptrs, keep = marshal(k, n, args, extra, lvl + 1)
    local nargs, slot = #k.params + #extra, nil
    if debug then -- the error slot's device pointer, passed last
      slot = error_slot(n)
      local box = ffi.new("void *[1]", slot.h.data)
      keep[#keep + 1] = box
      ptrs[nargs] = box
      nargs = nargs + 1
    end
    weft._check(C.wf_cuda_launch(rt, n, ker.fn, #d, dims, nargs, ptrs, block_dim or 0,
                                 weft.config.verify_cuda and 1 or 0), lvl)
    if slot then
      local msg = slot_message(slot)
      if msg then error(msg, lvl) end
    end
    return keep
  end

  function weft._launch_device(k, dim, inputs, opts)
    local n = parse("weft.launch", opts.device)
    if n < 0 then return weft.launch(k, dim, inputs, { outputs = opts.outputs }) end
    local args = {}
    for _, v in ipairs(inputs or {}) do args[#args + 1] = v end
    for _, v in ipairs(opts.outputs or {}) do args[#args + 1] = v end
    if #args ~= #k.params then
      error(fmt("weft.launch: kernel '%s' takes %d arguments (inputs then outputs), got %d", k.name,
                #k.params, #args), 3)
    end
    return launch_on(k, n, nil, dim, args, {}, 4, opts.block_dim)
  end

  -- The derived kernel (kind "adj" or "jvp") of k on cuda:n: args are the
  -- primal arguments, extra one adjoint/tangent array per array parameter
  -- (a header with a null data pointer for none). lvl as for error().
  function weft._launch_device_derived(kind, k, n, dim, args, extra, lvl)
    return launch_on(k, n, kind, dim, args, extra, (lvl or 1) + 2)
  end
end
