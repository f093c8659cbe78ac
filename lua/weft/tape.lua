-- weft.Tape: reverse-mode autodiff over recorded launches, adjoint launches,
-- Jacobians and gradient checks.
--
--   local tape = weft.Tape()
--   tape:record(function() weft.launch(k, n, {x}, {outputs = {y}}) end)
--   tape:backward(loss)                       -- loss: a 1-element array
--   tape:backward{ grads = { [y] = seed } }   -- seed arrays (Jacobian rows)
--   x.grad  ==  tape.gradients[x]
--   tape:zero()  tape:reset()
--
-- Gradients flow through arrays that have a gradient (requires_grad, or a
-- .grad assigned); other arrays get "no gradient" and are skipped by the
-- adjoint kernel. Gradients ACCUMULATE over backward calls (zero them with
-- tape:zero()). As in Warp, gradients with respect to scalar kernel
-- arguments are not computed, and a store clears the adjoint of the element
-- it overwrites (after backward, the .grad of an array that a recorded
-- kernel wrote holds the gradient of its values before that kernel: 0 where
-- they were overwritten). This holds for adjoint launches with explicit
-- adjoint arrays too (Warp leaves those as they were).
--
-- Recording. While a tape records, weft.launch reports each launch through
--   P.tape_hook(k, dim, inputs, outputs, opts [, module that ran])
-- and the active tape is P.tape_active (nil when none). A library call
-- (weft.matmul, lua/weft/linalg.lua) appends its own entry: k = { name,
-- params }, inputs, outputs, uses = { read params, written params } and
-- backward = its adjoint step, run in place of an adjoint launch.
--
-- Forward mode.
--   weft.jvp(k, dim, inputs, tangents, outputs, out_tangents)
-- runs "jvp_<name>" (core.jvp): the kernel itself plus the tangents of its
-- outputs for the given input tangents (J v in one launch). Not recorded
-- by tapes.
--
-- Overwritten reads: the adjoint replays the forward pass after it ran, so
-- a kernel that writes (store or atomic) an array element it read earlier
-- at the same index, when the adjoint needs the value it read, cannot be
-- differentiated: building its adjoint raises "chunk:line: autodiff:
-- kernel 'k' overwrites an element of array 'x' that it read earlier at
-- line N; ..." in every mode (src/ad/check.c). Linear updates such as
-- y[i] = y[i] * 2 + x[i] need no value and are fine; a read after a store
-- of the same element replays the stored value. Across launches likewise:
-- tape:backward refuses a recorded launch whose adjoint needs the values
-- of an array that a later recorded launch writes (it names both), arrays
-- held by struct arguments included ('p.x').
--
-- Adjoint launches.
--   P.launch_adjoint(k, dim, inputs, outputs, adj_inputs, adj_outputs)
-- runs the adjoint kernel "adj_<name>" (appended to the kernel's IR module
-- by core.adjoint). Its parameters are the primal ones followed by one
-- adjoint array per array parameter; adj_inputs[i] / adj_outputs[i] is the
-- adjoint of inputs[i] / outputs[i] (nil or false: no gradient). A missing
-- adjoint is passed as a header with data NULL and shape[0] = 0.
local ffi = require "ffi"
local cdef = require "weft.cdef"

local fmt = string.format

return function(weft, P)
  local C, core = cdef.C, P.core
  local is_array = weft.is_array
  local raise = P.raise -- positioned at the first caller outside weft's files

  ---------------------------------------------------------------------------
  -- adjoint launches
  ---------------------------------------------------------------------------
  local dims = ffi.new("int64_t[4]")
  local codes = setmetatable({}, { __mode = "k" }) -- module -> { [ckey] = code }

  local function kname(k) return type(k) == "table" and k.name or tostring(k) end

  -- dim (an integer or 1 to 4 of them, each in 0 .. 2^31-1, as a forward
  -- launch takes) into dims; returns the count. what: "adjoint" / "tangent".
  local function read_dims(k, dim, what)
    local list = type(dim) == "number" and { dim } or dim
    if type(list) ~= "table" or #list < 1 or #list > 4 then
      raise("weft: %s launch of '%s': dim must be an integer or 1 to 4 integers", what, kname(k))
    end
    for i = 1, #list do
      local d = list[i]
      if type(d) ~= "number" or d ~= math.floor(d) or d < 0 or d > 2 ^ 31 - 1 then
        raise("weft: %s launch of '%s': dim%s must be an integer in 0 .. 2^31-1, got %s", what,
              kname(k), type(dim) == "table" and "[" .. i .. "]" or "", tostring(d))
      end
      dims[i - 1] = d
    end
    return #list
  end

  -- The transforms that append a derived kernel to a module: reverse mode
  -- (core.adjoint, "adj_<name>") and forward mode (core.jvp, "jvp_<name>").
  local transforms = { adj = "adjoint", jvp = "jvp" }

  -- The module holding k's derived kernel (kind "adj" or "jvp") and the
  -- kernel's name: the transform appends it to mod once, or, for reverse
  -- mode with custom gradients, to the front end's module before inlining
  -- (its weft.func calls still visible). check: run debug mode's overwrite
  -- check first (reverse mode). Also returns the per-kind cache table.
  local function mod_cache(mod)
    local per = codes[mod]
    if not per then
      per = {}
      codes[mod] = per
    end
    return per
  end

  -- The front end's module before inlining (custom gradients), compiled
  -- once per module mod. It reads the captured values again, so a taped
  -- launch makes it at once (P.tape_hook), while they are those that
  -- mod was compiled with.
  local function raw_module(k, mod, types)
    local per = mod_cache(mod)
    if not per.raw then
      local ok, res = pcall(core.compile, k._decl, types, { optimize = false })
      if not ok then error(res, 0) end
      per.raw = res
    end
    return per.raw
  end

  local function derived_module(kind, k, mod, types, check)
    local tf = core and core[transforms[kind]]
    if not tf then raise("weft: autodiff is not available in this build") end
    -- the cache belongs to the module the entry goes into: a custom
    -- gradient declared after a first transform switches to the raw module
    if kind == "adj" and P.custom_grads then mod = raw_module(k, mod, types) end
    local per = mod_cache(mod)
    local pk = per[kind]
    if not pk then
      pk = {}
      per[kind] = pk
    end
    check = check and kind == "adj"
    local name = pk.name
    if not name or (check and not pk.checked) then
      local ok, res = pcall(tf, mod, k.name, { debug = check, names = P.param_names(k) })
      if not ok then error(res, 0) end
      name = res
      pk.name, pk.checked = name, pk.checked or check
    end
    return mod, name, pk
  end
  P.derived_module = derived_module

  local what = { adj = "adjoint", jvp = "tangent" }

  -- Compiled derived kernel (kind "adj" or "jvp") of module mod:
  -- { fn, cost, buf, pack }, per launch ndim and mode. pack (P.packer)
  -- takes the primal arguments, then the derived arrays as extras.
  local function derived_code(kind, k, mod, types, ndim, mode)
    local dmod, name, pk = derived_module(kind, k, mod, types, mode == 2)
    local ckey = ndim + 4 * mode
    local c = pk[ckey]
    if c then return c end
    local res = core.cpu_compile(dmod, P.mode_opts(mode, { ndim = ndim, name = name,
                                                           names = P.param_names(k) }))
    local nextra, xtypes = 0, {}
    for _, t in ipairs(types) do
      if t.kind == "array" or t.arrays then
        nextra = nextra + 1
        xtypes[nextra] = t
      end
    end
    local buf = ffi.new("int64_t[?]", math.max(1, math.ceil(res.size / 8)))
    c = { fn = ffi.cast("void *", res.fn), code = res.code, cost = res.cost, buf = buf }
    c.pack = P.packer{ k = k, types = types, nextra = nextra, extra_types = xtypes,
                       addrs = P.block_addrs(buf, res.offsets, #types + nextra),
                       where = fmt("weft: %s launch of '%s'", what[kind], kname(k)) }
    pk[ckey] = c
    return c
  end

  -- A "no gradient" header for an array parameter.
  local function null_adjoint(a)
    local h = ffi.new("weft_Array")
    h.h.ndim = a.h.ndim
    h.h.dtype = a.h.dtype
    h.h.device = a.h.device
    h.h.elsize = a.h.elsize
    return h
  end

  -- Launch of the derived kernel: primal arguments, then one derived array
  -- (adjoint or tangent) per array parameter, from d_in / d_out.
  -- fmod (optional): the kernel's IR module to derive from (the one a taped
  -- forward launch ran, with the values it captured then); default: the
  -- module for the current values.
  local function launch_derived(kind, k, dim, inputs, outputs, d_in, d_out, device, fmod)
    inputs, outputs = inputs or {}, outputs or {}
    d_in, d_out = d_in or {}, d_out or {}
    local lists = { inputs = inputs, outputs = outputs, [what[kind] .. "s of the inputs"] = d_in,
                    [what[kind] .. "s of the outputs"] = d_out }
    for lname, l in pairs(lists) do
      if type(l) ~= "table" or is_array(l) then
        raise("weft: %s launch of '%s': the %s must be a table, got %s", what[kind], kname(k), lname,
              is_array(l) and "an array" or type(l))
      end
    end
    local nin, np = #inputs, #k.params
    if nin + #outputs ~= np then
      raise("weft: %s launch of '%s': the kernel takes %d arguments, got %d", what[kind],
            kname(k), np, nin + #outputs)
    end
    local types, args, adjs = P.launch_types(k, inputs, outputs, nin), {}, {}
    for i, p in ipairs(k.params) do
      local v = i <= nin and inputs[i] or outputs[i - nin]
      args[i] = v
      if not types[i] then
        raise("weft: %s launch of '%s': generic parameter '%s' cannot take %s", what[kind],
              kname(k), p.name, type(v))
      end
      if types[i].kind == "array" then
        if not is_array(v) then
          raise("weft: %s launch of '%s': '%s' expects %s, got %s", what[kind], kname(k), p.name,
                types[i].name, type(v))
        end
        local g = i <= nin and d_in[i] or d_out[i - nin]
        if g then
          if not is_array(g) or g.h.size ~= v.h.size or g.h.dtype ~= v.h.dtype then
            raise("weft: %s launch of '%s': the %s of '%s' must be an array of the same "
                  .. "type and shape", what[kind], kname(k), what[kind], p.name)
          end
        else
          g = null_adjoint(v)
        end
        adjs[#adjs + 1] = g
      elseif types[i].arrays then
        -- a struct holding arrays: its derived argument is a struct of the
        -- same type holding their adjoints (or tangents)
        local g = i <= nin and d_in[i] or d_out[i - nin]
        if g and not ffi.istype(types[i].ctype, g) then
          raise("weft: %s launch of '%s': the %s of '%s' must be a %s", what[kind], kname(k),
                what[kind], p.name, types[i].name)
        end
        adjs[#adjs + 1] = g or types[i]()
      end
    end
    -- read-only arrays that the derived kernel writes (an adjoint writes
    -- the adjoints of its inputs) are refused before anything runs
    local dmod, dname, pk = derived_module(kind, k, k:_module(types), types, false)
    local writes = pk.writes
    if not writes then
      writes = core.writes(dmod, dname)
      pk.writes = writes
    end
    local w = 0
    for i, p in ipairs(k.params) do
      if types[i].arrays then w = w + 1 end
      if types[i].kind == "array" then
        w = w + 1
        if writes[i] and bit.band(args[i].h.flags, 4) ~= 0 then
          raise("weft: %s launch of '%s' writes '%s', but the array passed is read-only",
                what[kind], kname(k), p.name)
        end
        if writes[np + w] and bit.band(adjs[w].h.flags, 4) ~= 0 then
          raise("weft: %s launch of '%s' writes the %s of '%s', but the array passed is read-only",
                what[kind], kname(k), what[kind], p.name)
        end
      end
    end
    -- the device: opts.device of the launch, else the arrays' own (all on
    -- one device); cuda:N runs the derived entry of the CUDA module
    local dev, first = device, nil
    local function on(a, pname)
      local d = a.h.device
      if dev == nil then dev, first = d, pname end
      if d ~= dev then
        raise("weft: %s launch of '%s': '%s' is on %s, but %s", what[kind], kname(k), pname,
              a.device, first and fmt("'%s' is on %s", first, P.device_name(dev))
                or "the launch runs on " .. P.device_name(dev))
      end
    end
    local j = 0
    for i, p in ipairs(k.params) do
      if types[i].kind == "array" then
        j = j + 1
        on(args[i], p.name)
        local g = adjs[j]
        if g.h.data ~= nil then on(g, what[kind] .. " of " .. p.name) end
      elseif types[i].arrays then
        j = j + 1
        for _, f in ipairs(types[i]._arrays_of(args[i])) do on(f.array, p.name .. "." .. f.path) end
        for _, f in ipairs(types[i]._arrays_of(adjs[j])) do
          on(f.array, what[kind] .. " of " .. p.name .. "." .. f.path)
        end
      end
    end
    -- the meshes' derivative buffers: the adjoints or tangents given for
    -- their points and velocities (geom.lua)
    if P.geom_derivs then P.geom_derivs(kind, k, types, args, adjs) end
    if dev and dev >= 0 then return P.launch_device_derived(kind, k, dev, dim, args, adjs) end
    local ndim = read_dims(k, dim, what[kind])
    local mod = fmod or k:_module(types)
    local c = derived_code(kind, k, mod, types, ndim, P.mode_index())
    c.pack(args, args, np, adjs)
    local total = 1
    for d = 0, ndim - 1 do total = total * tonumber(dims[d]) end
    if total == 0 then return end
    c.keep = adjs -- the "no gradient" headers live until the launch is done
    local status = C.wf_cpu_launch(P.rt, c.fn, ndim, dims, c.buf, c.cost)
    c.keep = nil
    if status ~= 0 then error(ffi.string(C.wf_rt_errmsg(P.rt)), 3) end
  end

  -- device (optional): -1 (the cpu) or N (cuda:N), from the launch's
  -- opts.device; otherwise the device of the arrays.
  function P.launch_adjoint(k, dim, inputs, outputs, adj_inputs, adj_outputs, device, fmod)
    return launch_derived("adj", k, dim, inputs, outputs, adj_inputs, adj_outputs, device, fmod)
  end

  ---------------------------------------------------------------------------
  -- custom gradients and replays of weft.func (Warp's func_grad, func_replay)
  ---------------------------------------------------------------------------
  -- f:grad(function(a1, ..., an, adj_r1, ..., adj_rm) return adj_a... end)
  --   compiled like a weft.func for each specialization of f; it receives
  --   f's arguments and the adjoints of f's results, and returns the
  --   adjoints of f's float arguments (scalars, vectors, matrices...), in
  --   order. Reverse mode then uses it instead of differentiating f's body;
  --   forward launches and forward mode still run f's body.
  -- f:replay(function(a1, ..., an) ... end)
  --   replaces f in the adjoint kernel's forward replay (needed when f has
  --   side effects such as stores or atomics, which must not run twice; a
  --   replay that reads back what f stored gives the adjoint f's results,
  --   such as Warp's reversible_increment). Without f:grad, reverse mode
  --   differentiates f's body (without redoing its side effects).
  -- The IR-level mechanism is in src/ad (ad.h: "f$grad", "f$replay"); the
  -- kernel compiler compiles these functions when it supports them
  -- (core.front_custom_grad).
  local Func = weft.Func
  local function companion(f, field, fn, method)
    if getmetatable(f) ~= Func then
      raise("weft.func:%s: call it on a weft.func (f:%s(function ... end))", method, method)
    end
    if type(fn) ~= "function" then
      raise("weft.func:%s: expected a function, got %s", method, type(fn))
    end
    if not (core and core.front_custom_grad) then
      raise("weft.func:%s: custom gradients need the kernel compiler's support, which this "
            .. "build lacks", method)
    end
    f[field] = fn
    f._v = (f._v or 0) + 1 -- kernels calling f compile again (kernel.lua: guards)
    P.custom_grads = true
    return f
  end
  if Func then
    function Func:grad(fn) return companion(self, "grad_fn", fn, "grad") end
    function Func:replay(fn) return companion(self, "replay_fn", fn, "replay") end
  end

  -- Forward mode: runs the kernel (outputs are written as by weft.launch)
  -- and its tangent kernel together. tangents[i] is the tangent (direction)
  -- of inputs[i] (nil/false: zero); out_tangents[j] receives the tangent
  -- of outputs[j] (nil/false: not wanted). Only array arguments carry
  -- tangents. Elements of out_tangents that the kernel never stores keep
  -- their values (zero them first, as outputs, when the kernel accumulates
  -- with atomic_add).
  function weft.jvp(k, dim, inputs, tangents, outputs, out_tangents)
    if type(k) ~= "table" or type(k.params) ~= "table" or not k._module then
      raise("weft.jvp: expected a kernel (made by weft.kernel), got %s", type(k))
    end
    return launch_derived("jvp", k, dim, inputs, outputs, tangents, out_tangents)
  end
  ---------------------------------------------------------------------------
  -- the tape
  ---------------------------------------------------------------------------
  local Tape = {}
  Tape.__index = Tape

  local function copy_list(t)
    local r = {}
    for i = 1, #(t or {}) do r[i] = t[i] end
    return r
  end

  -- mod: the IR module the launch ran (cpu launches), so backward
  -- differentiates the code that ran even if a captured value changed since.
  function P.tape_hook(k, dim, inputs, outputs, opts, mod)
    local tape = P.tape_active
    if not tape or (opts and opts.adjoint) then return end
    local d = type(dim) == "table" and copy_list(dim) or dim
    local types = P.launch_types(k, inputs or {}, outputs)
    -- the objects it may have queried need the module (a CUDA launch
    -- passes none: the one for these types, which backward uses too)
    local gmod = mod
    if not gmod and P.geom_versions then
      local ok, res = pcall(k._module, k, types)
      gmod = ok and res or nil
    end
    tape.launches[#tape.launches + 1] =
      { k = k, dim = d, inputs = copy_list(inputs), outputs = copy_list(outputs), mod = mod,
        geom = P.geom_versions and P.geom_versions(k, gmod, inputs, outputs) }
    if mod and P.custom_grads then
      pcall(raw_module, k, mod, types) -- a failure shows again at backward
    end
  end

  function weft.Tape()
    local tape = setmetatable({ launches = {} }, Tape)
    -- tape.gradients[a] is a.grad
    tape.gradients = setmetatable({}, {
      __index = function(_, a) return is_array(a) and a.grad or nil end,
      __newindex = function(_, a, g) a.grad = g end,
    })
    return tape
  end

  -- Runs fn, recording its launches; tapes may nest (the inner one records).
  function Tape:record(fn)
    if type(fn) ~= "function" then raise("tape:record: expected a function, got %s", type(fn)) end
    local prev = P.tape_active
    P.tape_active = self
    local ok, err = pcall(fn)
    P.tape_active = prev
    if not ok then error(err, 0) end
  end

  -- The adjoint argument of a: its gradient array, or for a struct
  -- holding arrays a struct of their gradients.
  local function grad_or_nil(a)
    if is_array(a) then return a.grad end
    local t = type(a) == "cdata" and weft.dtype_of(a)
    if t and t.arrays then return t._grads_of(a) end
    return nil
  end

  -- The argument of launch l for parameter p (1-based).
  local function arg_of(l, p)
    local nin = #l.inputs
    return p <= nin and l.inputs[p] or l.outputs[p - nin]
  end

  -- The parameters (1-based) whose element values launch l's adjoint reads
  -- and those its kernel writes (core.adjoint_uses), cached with the
  -- adjoint. nil when they cannot be had (the adjoint launch then raises
  -- its own error).
  -- Then the same for arrays struct parameters hold: lists of
  -- { param, "field.path" }.
  local function launch_uses(l)
    if l.uses then return l.uses[1], l.uses[2] end -- a recorded library call (linalg.lua)
    local k = l.k
    local ok, r, w, hr, hw = pcall(function()
      local types = P.launch_types(k, l.inputs, l.outputs)
      local dmod, _, pk = derived_module("adj", k, l.mod or k:_module(types), types, false)
      if not pk.uses then pk.uses = { core.adjoint_uses(dmod, k.name) } end
      return pk.uses[1], pk.uses[2], pk.uses[3], pk.uses[4]
    end)
    if ok then return r, w, hr, hw end
  end

  -- The array struct argument a holds at field path, or nil.
  local function held_array(a, path)
    local t = type(a) == "cdata" and not is_array(a) and weft.dtype_of(a)
    for _, f in ipairs(t and t.arrays and t._arrays_of(a) or {}) do
      if f.path == path then return f.array end
    end
  end

  -- The arrays launch l's reads (or writes) name, each with the name the
  -- kernel gives it: { array, name } pairs.
  local function used_arrays(l, params, held)
    local r = {}
    for _, p in ipairs(params or {}) do
      local a = arg_of(l, p)
      if is_array(a) then r[#r + 1] = { a, l.k.params[p].name } end
    end
    for _, h in ipairs(held or {}) do
      local a = held_array(arg_of(l, h[1]), h[2])
      if a then r[#r + 1] = { a, l.k.params[h[1]].name .. "." .. h[2] } end
    end
    return r
  end

  -- A launch's adjoint replays its reads after the whole tape ran, so an
  -- array whose values it needs must not be written by a later launch
  -- (x[i] = f(x[i]) stepped in place): that would be a wrong gradient,
  -- so backward refuses it before running any adjoint.
  local function check_overwrites(tape)
    local later = {} -- array -> the nearest later launch writing it
    for i = #tape.launches, 1, -1 do
      local l = tape.launches[i]
      local reads, writes, held_reads, held_writes = launch_uses(l)
      for _, u in ipairs(used_arrays(l, reads, held_reads)) do
        local j = later[u[1]]
        if j then
          raise("tape:backward: launch %d ('%s') needs the values of '%s' for its gradient, but "
                .. "launch %d ('%s') overwrote that array afterwards (write the later result to "
                .. "another array)", i, kname(l.k), u[2], j, kname(tape.launches[j].k))
        end
      end
      -- the geometry objects it may have queried (geom.lua): not refit
      -- or rebuilt since, their arrays not overwritten by a later launch
      for _, e in ipairs(l.geom or {}) do
        if e.o._version ~= e.v then
          raise("tape:backward: launch %d ('%s') queried %s, which was refit or rebuilt "
                .. "afterwards (its queries are replayed for the gradient)", i, kname(l.k), e.what)
        end
        for _, a in ipairs(P.geom_reads(e.o)) do
          local j = later[a]
          if j then
            raise("tape:backward: launch %d ('%s') needs the arrays of %s (its queries are "
                  .. "replayed for the gradient), but launch %d ('%s') overwrote one afterwards "
                  .. "(give the later step its own mesh or arrays)", i, kname(l.k), e.what, j,
                  kname(tape.launches[j].k))
          end
        end
      end
      for _, u in ipairs(used_arrays(l, writes, held_writes)) do later[u[1]] = i end
    end
  end

  -- Replays the recorded launches backwards with their adjoints.
  local function sweep(tape)
    check_overwrites(tape)
    for i = #tape.launches, 1, -1 do
      local l = tape.launches[i]
      if l.backward then -- a recorded library call (linalg.lua) brings its own step
        l.backward()
      else
        local ai, ao = {}, {}
        for j, a in ipairs(l.inputs) do ai[j] = grad_or_nil(a) or false end
        for j, a in ipairs(l.outputs) do ao[j] = grad_or_nil(a) or false end
        P.launch_adjoint(l.k, l.dim, l.inputs, l.outputs, ai, ao, nil, l.mod)
      end
    end
  end

  -- The gradient array of a (allocated when missing).
  local function ensure_grad(a)
    local g = a.grad
    if not g then
      a.requires_grad = true
      g = a.grad
    end
    return g
  end

  function Tape:backward(arg)
    if is_array(arg) then
      if arg.size ~= 1 then
        raise("tape:backward: the loss must have one element, got %d", arg.size)
      end
      ensure_grad(arg):fill_(1)
    elseif type(arg) == "table" and type(arg.grads) == "table" then
      for a, seed in pairs(arg.grads) do
        if not is_array(a) or not is_array(seed) then
          raise("tape:backward: grads maps arrays to seed arrays")
        end
        weft.copy(ensure_grad(a), seed)
      end
    else
      raise("tape:backward: expected a loss array or { grads = { [array] = seed } }")
    end
    sweep(self)
  end

  -- Arrays seen by the recorded launches.
  local function recorded_arrays(tape)
    local seen, list = {}, {}
    for _, l in ipairs(tape.launches) do
      for _, set in ipairs { l.inputs, l.outputs } do
        for _, a in ipairs(set) do
          local t = type(a) == "cdata" and not is_array(a) and weft.dtype_of(a)
          if t and t.arrays then
            for _, f in ipairs(t._arrays_of(a)) do
              if not seen[f.array] then
                seen[f.array] = true
                list[#list + 1] = f.array
              end
            end
          elseif is_array(a) and not seen[a] then
            seen[a] = true
            list[#list + 1] = a
          end
        end
      end
    end
    return list
  end

  function Tape:zero()
    for _, a in ipairs(recorded_arrays(self)) do
      local g = a.grad
      if g then g:zero_() end
    end
  end

  function Tape:reset()
    self:zero()
    self.launches = {}
  end

  ---------------------------------------------------------------------------
  -- Jacobians and gradient checks
  ---------------------------------------------------------------------------
  -- Flat list of the numbers of a (nested) Lua table, in order.
  local function flatten(t, out)
    out = out or {}
    if type(t) == "number" then
      out[#out + 1] = t
    elseif type(t) == "table" then
      if t[1] == nil and next(t) ~= nil then
        error("weft.jacobian: arrays of structs are not supported", 3)
      end
      for _, v in ipairs(t) do flatten(v, out) end
    end
    return out
  end

  -- A copy of template with its numbers replaced by flat[...] in order.
  local function unflatten(template, flat, pos)
    pos = pos or { 0 }
    if type(template) == "number" then
      pos[1] = pos[1] + 1
      return flat[pos[1]]
    end
    local r = {}
    for i, v in ipairs(template) do r[i] = unflatten(v, flat, pos) end
    return r
  end

  -- Set array a to the flat values.
  local function assign(a, template, flat)
    local src = weft.array(unflatten(template, flat), a.dtype)
    weft.copy(a, src)
  end

  local function pick(list, idx, role)
    if type(list) ~= "table" or is_array(list) then
      raise("weft.jacobian: %s must be a table of launch arguments, got %s", role,
            is_array(list) and "an array" or type(list))
    end
    if idx == nil then
      for i, a in ipairs(list) do
        if is_array(a) then return a, i end
      end
      raise("weft.jacobian: no array among the %s", role)
    end
    local a = list[idx]
    if not is_array(a) then raise("weft.jacobian: %s[%s] is not an array", role, tostring(idx)) end
    return a, idx
  end

  -- Copies of the arrays among the launch arguments, and their restoration
  -- (kernels may write their inputs).
  local function snapshot(inputs, outputs)
    local saved = {}
    for _, list in ipairs { inputs, outputs } do
      for _, a in ipairs(list) do
        if is_array(a) then saved[a] = weft.clone(a) end
      end
    end
    return saved
  end

  local function restore(saved)
    for a, c in pairs(saved) do weft.copy(a, c) end
  end

  local function matrix(rows, ncols)
    if #rows == 0 or ncols == 0 then return weft.zeros({ math.max(#rows, 1), math.max(ncols, 1) }, weft.float64) end
    return weft.array(rows, weft.float64)
  end

  -- J[i][j] = d outputs[of] (flat i) / d inputs[wrt] (flat j), by one
  -- adjoint launch per output component (the arrays' own .grad are not
  -- touched). wrt and of are 1-based positions in inputs and outputs
  -- (default: the first array of each). Returns a float64 array of shape
  -- {m, n}. The forward launch runs once; outputs are restored after.
  function weft.jacobian(k, dim, inputs, outputs, wrt, of)
    outputs = outputs or {}
    local x, xi = pick(inputs, wrt, "inputs")
    local y, yi = pick(outputs, of, "outputs")
    local saved = snapshot(inputs, outputs)
    weft.launch(k, dim, inputs, { outputs = outputs })
    local y0 = y:totable()
    local m, n = #flatten(y0), #flatten(x:totable())
    local gx, gy = weft.zeros_like(x), weft.zeros_like(y)
    -- the other arrays get scratch adjoints too: gradients also flow
    -- through elements a kernel stores and reads back
    local scratch = {}
    local function adj_of(a)
      if not is_array(a) then return false end
      local kd = a.dtype.kind
      if kd == "int" or kd == "bool" then return false end
      local g = weft.zeros_like(a)
      scratch[#scratch + 1] = g
      return g
    end
    local ai, ao = {}, {}
    for j = 1, #inputs do ai[j] = j == xi and gx or adj_of(inputs[j]) end
    for j = 1, #outputs do ao[j] = j == yi and gy or adj_of(outputs[j]) end
    local rows = {}
    for i = 1, m do
      gx:zero_()
      for _, g in ipairs(scratch) do g:zero_() end
      local e = {}
      for j = 1, m do e[j] = (j == i) and 1 or 0 end
      assign(gy, y0, e)
      P.launch_adjoint(k, dim, inputs, outputs, ai, ao)
      rows[i] = flatten(gx:totable())
    end
    restore(saved)
    return matrix(rows, n)
  end

  -- The same Jacobian by central differences (step eps, default 1e-6 for
  -- float64 and 1e-3 otherwise); outputs are restored before each launch.
  function weft.jacobian_fd(k, dim, inputs, outputs, wrt, of, eps)
    local x = pick(inputs, wrt, "inputs")
    local y = pick(outputs, of, "outputs")
    eps = eps or ((x.dtype.scalar or x.dtype) == weft.float64 and 1e-6 or 1e-3)
    local saved = snapshot(inputs, outputs)
    saved[x] = nil
    local function run()
      restore(saved)
      weft.launch(k, dim, inputs, { outputs = outputs })
      return flatten(y:totable())
    end
    local xt = x:totable()
    local x0 = flatten(xt)
    local cols = {}
    for j = 1, #x0 do
      local xp = { unpack(x0) }
      xp[j] = x0[j] + eps
      assign(x, xt, xp)
      local fp = run()
      xp[j] = x0[j] - eps
      assign(x, xt, xp)
      local fm = run()
      local col = {}
      for i = 1, #fp do col[i] = (fp[i] - fm[i]) / (2 * eps) end
      cols[j] = col
    end
    assign(x, xt, x0)
    restore(saved)
    local m = #flatten(y:totable())
    local rows = {}
    for i = 1, m do
      rows[i] = {}
      for j = 1, #x0 do rows[i][j] = cols[j][i] end
    end
    return matrix(rows, #x0)
  end

  -- Compares the adjoint Jacobians with central differences for every
  -- float array input against every float array output. Returns ok,
  -- worst relative error, and a message naming the worst entry.
  -- opts: eps (difference step), tol (default 1e-4; 1e-2 below float64).
  function weft.check_grad(k, dim, inputs, outputs, opts)
    opts = opts or {}
    local worst, where = 0, "no gradients compared"
    local low = false
    -- float arrays (scalars, vectors, matrices...); structs are skipped
    local function float_array(a)
      if not is_array(a) then return false end
      local kd = a.dtype.kind
      return kd ~= "int" and kd ~= "bool" and kd ~= "struct"
    end
    for wi, x in ipairs(inputs) do
      if float_array(x) then
        if (x.dtype.scalar or x.dtype) ~= weft.float64 then low = true end
        for oi, y in ipairs(outputs) do
          if float_array(y) then
            local J = weft.jacobian(k, dim, inputs, outputs, wi, oi):totable()
            local F = weft.jacobian_fd(k, dim, inputs, outputs, wi, oi, opts.eps):totable()
            for i = 1, #J do
              for j = 1, #J[i] do
                local a, b = J[i][j], F[i][j]
                local e = math.abs(a - b) / math.max(1, math.abs(b))
                if e > worst or e ~= e then
                  worst = e ~= e and math.huge or e
                  where = fmt("d %s[%d] / d %s[%d]: adjoint %.10g, differences %.10g",
                              k.params[#inputs + oi].name, i - 1, k.params[wi].name, j - 1, a, b)
                end
              end
            end
          end
        end
      end
    end
    local tol = opts.tol or (low and 1e-2 or 1e-4)
    return worst <= tol, worst, where
  end
end
