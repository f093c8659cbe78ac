-- weft.kernel, weft.func, weft.constant: declaring kernels and the Lua side
-- of compiling them (the compiler itself is P.core.compile, in C).
--
--   local k = weft.kernel{ x = weft.array(weft.float32), a = weft.float32,
--                          function(x, a) ... end }
--   k.fn  k.name  k.params ({name=, type=} in parameter order; type nil when
--   generic)  k:_module(argtypes)  k:ir([argtypes])  k:source(kind)
--
-- A parameter missing from the table is generic: its type comes from the
-- launch argument, and each signature is compiled once (cached in k).
--
--   local f = weft.func(function(x, y) return x * y end)          -- generic
--   local g = weft.func{ x = weft.float32, function(x) return 2 * x end }
--   g:overload{ x = weft.vec3, function(x) return 2.0 * x end }   -- by signature
--
-- weft.func calls are inlined into kernels; on the host a func object is
-- callable and runs its first definition as plain Lua.
return function(weft, P)
  local fmt = string.format

  local Kernel = { __name = "weft.Kernel" }
  Kernel.__index = Kernel
  local Func = { __name = "weft.Func" }
  Func.__index = Func
  local Const = { __name = "weft.Constant" }
  Const.__index = Const

  weft.Kernel, weft.Func = Kernel, Func

  -- The core module (P.core, looked up at each use: the Lua layer may
  -- be reloaded). The compiler's environment (this layer's metatables and
  -- builtins) is installed before each use, so kernels of an older copy of
  -- the layer still compile with their own.
  local front_env
  local function get_core()
    local c = P.core
    if c and c.front_setup then
      front_env = front_env or {
        builtins = P.builtins or {},
        native_diff = P.native_diff, -- gradients of the native queries (geom.lua)
        type_mt = getmetatable(weft.float32),
        func_mt = Func,
        const_mt = Const,
        kernel_mt = Kernel,
        -- type constructors a kernel may call with constants:
        -- weft.vector(64, weft.int32)() is a local array of 64 int32
        typefns = { [weft.vector] = "vector", [weft.matrix] = "matrix" },
        types = weft.types,
        -- a captured host value of a weft type (weft.vec3(...), a struct
        -- value): compiled as the constant of its contents (the guard
        -- watches those contents)
        capture = function(v)
          local t = weft.dtype_of and weft.dtype_of(v)
          if t and t.kind ~= "array" then return weft.constant(v) end
        end,
      }
      c.front_setup(front_env)
    end
    return c
  end

  ---------------------------------------------------------------------------
  -- source texts of chunks weft cannot read back itself
  ---------------------------------------------------------------------------
  -- The compiler parses a kernel from its chunk's text. A chunk loaded from
  -- a string carries it; a file is read again; but a chunk loaded from a
  -- buffer under a name ("=level1/ai", stdin, a REPL line) has none. Such
  -- texts are registered by chunk name (weft.register_source, weft.load,
  -- weft_dobuffer, weft_register_source), and each kernel or weft.func
  -- keeps the text of its chunk from its declaration on, so a later chunk
  -- of the same name (the next REPL entry) does not replace it. Both
  -- tables live in the registry: the compiler (src/front/resolve.c) reads
  -- them, and they outlast a reload of this layer.
  local reg = debug.getregistry()
  local sources = reg["weft.sources"] or {}            -- chunk name -> text
  reg["weft.sources"] = sources
  local fn_sources = reg["weft.fnsrc"] or setmetatable({}, { __mode = "k" }) -- function -> text
  reg["weft.fnsrc"] = fn_sources

  -- The registered text of a chunk (by its debug.getinfo source), also
  -- when it was registered without the leading '=' or '@'.
  -- A stock `luajit -e code` names its chunk "=(command line)" and leaves
  -- the code in the global arg table (at negative indices, after "-e"):
  -- with a single -e, that is the chunk's text.
  local function command_line_text()
    local a = rawget(_G, "arg")
    if type(a) ~= "table" then return nil end
    local found
    for i = -1, -64, -1 do
      if a[i] == nil then break end
      if a[i] == "-e" and type(a[i + 1]) == "string" then
        if found then return nil end -- several chunks: which one is unknown
        found = a[i + 1]
      end
    end
    return found
  end

  -- A stock `luajit < file.lua` names its chunk "=stdin"; when stdin is a
  -- regular file (lseek works, unlike on a pipe or a terminal), its text
  -- is read again from the start with pread, which leaves stdin's offset
  -- alone. Only when fn's first line in it declares a function: stdin may
  -- be a file that is not the chunk (luajit -i < file reads it by lines).
  local function stdin_text(fn)
    local ffi = require "ffi"
    require("weft.cdef").declare [[
    int64_t lseek(int fd, int64_t offset, int whence);
    intptr_t pread(int fd, void *buf, size_t count, int64_t offset);
    ]]
    local ok, text = pcall(function()
      if ffi.C.lseek(0, 0, 1) < 0 then return nil end
      local parts, off, buf = {}, 0, ffi.new("char[?]", 65536)
      while true do
        local n = tonumber(ffi.C.pread(0, buf, 65536, off))
        if n <= 0 then break end
        parts[#parts + 1] = ffi.string(buf, n)
        off = off + n
      end
      return table.concat(parts)
    end)
    if not ok or not text or text == "" then return nil end
    local line = fn and debug.getinfo(fn, "S").linedefined or 0
    local n = 0
    for l in (text .. "\n"):gmatch("([^\n]*)\n") do
      n = n + 1
      if n == line then return l:find("function", 1, true) and text or nil end
    end
    return nil
  end

  local function chunk_text(src, fn)
    local t = sources[src]
    if t == nil then
      local c = src:sub(1, 1)
      if c == "=" or c == "@" then t = sources[src:sub(2)] end
    end
    if t == nil and src == "=(command line)" then t = command_line_text() end
    if t == nil and src == "=stdin" and fn then t = stdin_text(fn) end
    return t
  end

  function weft.register_source(chunkname, text)
    if type(chunkname) ~= "string" then
      error("weft.register_source: expected a chunk name (string), got " .. type(chunkname), 2)
    end
    if type(text) ~= "string" then
      error("weft.register_source: expected the chunk's text (string), got " .. type(text), 2)
    end
    sources[chunkname] = text
  end

  -- loadstring and load that remember the text (for kernels in the chunk).
  function weft.loadstring(text, chunkname)
    if type(text) ~= "string" then
      error("weft.loadstring: expected a string, got " .. type(text), 2)
    end
    if chunkname ~= nil then weft.register_source(chunkname, text) end
    return loadstring(text, chunkname)
  end

  function weft.load(chunk, chunkname, mode, env)
    if type(chunk) == "function" then -- a reader: gather its pieces
      local parts = {}
      while true do
        local piece = chunk()
        if piece == nil or piece == "" then break end
        if type(piece) ~= "string" then
          error("weft.load: the reader returned a " .. type(piece) .. ", expected a string", 2)
        end
        parts[#parts + 1] = piece
      end
      chunk = table.concat(parts)
    elseif type(chunk) ~= "string" then
      error("weft.load: expected a string or a reader function, got " .. type(chunk), 2)
    end
    if chunkname == nil then chunkname = chunk end
    if chunkname ~= chunk then weft.register_source(chunkname, chunk) end
    return load(chunk, chunkname, mode, env)
  end

  -- Source lines, for finding the name a declaration is assigned to.
  local function source_line(fn, line)
    local info = debug.getinfo(fn, "S")
    local src = info.source
    local text = fn_sources[fn] or chunk_text(src, fn)
    if text then src = text end
    if text == nil and src:sub(1, 1) == "@" then
      local f = io.open(src:sub(2), "r")
      if not f then return nil end
      local n = 0
      for l in f:lines() do
        n = n + 1
        if n == line then
          f:close()
          return l
        end
      end
      f:close()
      return nil
    elseif text or src:sub(1, 1) ~= "=" then
      local n = 0
      for l in (src .. "\n"):gmatch("([^\n]*)\n") do
        n = n + 1
        if n == line then return l end
      end
    end
    return nil
  end

  -- The name in "name = weft.kernel{" where `what` starts at byte p of
  -- text, read backwards from p: a dotted path, '=', then the name. Each
  -- step scans a run of characters once, so a whole line costs linear
  -- time (a single backtracking pattern over the line was quadratic).
  local byte = string.byte
  local function isword(c)
    return c and (c == 95 or (c >= 48 and c <= 57) or (c >= 65 and c <= 90) or (c >= 97 and c <= 122))
  end
  local function isspace(c) return c == 32 or (c and c >= 9 and c <= 13) end
  local function name_before(text, p)
    local q = p - 1
    while q >= 1 and (isword(byte(text, q)) or byte(text, q) == 46) do q = q - 1 end
    while q >= 1 and isspace(byte(text, q)) do q = q - 1 end
    if byte(text, q) ~= 61 then return nil end -- '='
    q = q - 1
    while q >= 1 and isspace(byte(text, q)) do q = q - 1 end
    local e = q
    while q >= 1 and isword(byte(text, q)) do q = q - 1 end
    if q == e then return nil end
    return text:sub(q + 1, e)
  end

  -- "local saxpy = weft.kernel{" -> "saxpy" (looking a few lines up).
  local function declared_name(fn, what)
    local line = debug.getinfo(fn, "S").linedefined
    for l = line, math.max(1, line - 8), -1 do
      local text = source_line(fn, l)
      if not text then return nil end
      local init, found = 1, false
      while true do
        local s, e = text:find(what .. "%s*[{(]", init)
        if not s then break end
        found = true
        local name = name_before(text, s)
        if name then return name end
        init = e + 1
      end
      if found then return nil end
    end
    return nil
  end

  -- Parse weft.kernel{...} / weft.func{...} / weft.func(fn) into a decl.
  local function make_decl(kind, spec, level)
    level = level + 1
    local fn, types, name, defaults
    if type(spec) == "function" then
      fn, types = spec, {}
    elseif type(spec) == "table" and not weft.is_type(spec) then
      fn = spec[1]
      types = {}
      for k, v in pairs(spec) do
        if k ~= 1 then
          if k == "name" and type(v) == "string" then
            name = v
          elseif k == "defaults" and kind == "func" and type(v) == "table" and not weft.is_type(v) then
            defaults = v
          elseif type(k) ~= "string" then
            error(fmt("weft.%s: expected parameter = type pairs and one function", kind), level)
          elseif not weft.is_type(v) then
            error(fmt("weft.%s: the type given for '%s' is not a weft type", kind, k), level)
          else
            types[k] = v
          end
        end
      end
    end
    if type(fn) ~= "function" then
      error(fmt("weft.%s: expected a function (or a table with types and a function)", kind), level)
    end
    -- a builtin's Lua function is weft's own, not kernel source to compile
    local builtin = P.builtins and P.builtins[fn]
    if builtin then
      error(fmt("weft.%s: expected a function of your own, got the builtin '%s'", kind, builtin),
        level)
    end
    -- keep the text of a registered chunk with the function (see above)
    local src = debug.getinfo(fn, "S").source
    if fn_sources[fn] == nil then
      local text = chunk_text(src, fn)
      if text then fn_sources[fn] = text end
    end
    local params, known = {}, {}
    for i = 1, 64 do
      local pn = debug.getlocal(fn, i)
      if not pn then break end
      params[i] = { name = pn, type = types[pn] }
      known[pn] = true
    end
    if debug.getlocal(fn, 65) then
      error(fmt("weft.%s: a function with more than 64 parameters cannot be compiled", kind), level)
    end
    for k in pairs(types) do
      if not known[k] then
        error(fmt("weft.%s: '%s' is not a parameter of the function", kind, k), level)
      end
    end
    -- defaults = { y = 1.0 }: values for parameters a call leaves out
    -- (numbers, booleans, host values of weft types, weft.constant)
    for k, v in pairs(defaults or {}) do
      if not known[k] then
        error(fmt("weft.func: default for '%s', which is not a parameter of the function",
                  tostring(k)), level)
      end
      local tv = type(v)
      if not (tv == "number" or tv == "boolean" or (tv == "cdata" and not (weft.is_array and weft.is_array(v)))
              or (tv == "table" and getmetatable(v) == Const)) then
        error(fmt("weft.func: the default for '%s' must be a number, a boolean or a value of a "
                  .. "weft type, got %s", k, tv), level)
      end
    end
    local generic = false
    for _, p in ipairs(params) do
      if not p.type then generic = true end
    end
    name = name or declared_name(fn, kind == "kernel" and "kernel" or "func")
      or fmt("%s_%d", kind, debug.getinfo(fn, "S").linedefined)
    return { fn = fn, kind = kind, types = types, params = params, generic = generic, name = name,
             defaults = defaults }
  end

  ---------------------------------------------------------------------------
  -- kernels
  ---------------------------------------------------------------------------
  function weft.kernel(spec)
    local decl = make_decl("kernel", spec, 2)
    return setmetatable({
      fn = decl.fn, name = decl.name, params = decl.params, generic = decl.generic,
      _decl = decl, _cache = {},
    }, Kernel)
  end

  function weft.is_kernel(v) return getmetatable(v) == Kernel end

  -- Cache key of a signature: the type ids of the generic parameters.
  local function sigkey(k, argtypes)
    if not k.generic then return "" end
    local parts = {}
    for i, p in ipairs(k.params) do
      if not p.type then
        local t = argtypes and argtypes[i]
        if not t then
          P.raise(fmt("weft: kernel '%s': parameter '%s' is generic; its type comes from the "
                          .. "launch arguments", k.name, p.name))
        end
        parts[#parts + 1] = t.id or t.name
      end
    end
    return table.concat(parts, ",")
  end

  ---------------------------------------------------------------------------
  -- guards: a kernel sees the current values of the names it captured
  ---------------------------------------------------------------------------
  -- The front end folds the values of free names (upvalues, globals, fields
  -- of tables reached through them) into the code, in the kernel and in the
  -- weft.func it calls. core.compile lists where it found each value
  -- (resolve.c: record_dep), and the module comes with a guard: a function,
  -- generated once, that re-reads those places and returns false when one
  -- holds another value, so the next launch (or k:ir, k:ptx, ...) compiles
  -- again. Numbers, booleans, weft.constant and weft.func objects (and
  -- their definitions, through Func._v) and types held directly by a name
  -- are watched, with every table on the way to them; builtins and types
  -- reached through a module table (weft.vec3) are not.
  --
  -- Upvalues are read without the debug library: the guard's own upvalues
  -- are joined (debug.upvaluejoin) to the captured ones, so a guard is plain
  -- Lua that the JIT compiles into the launch (a few compares). The guard
  -- also returns a setter that is never called: it assigns those upvalues,
  -- so LuaJIT does not take them for immutable and fold their values.
  local always = function() return true end
  local ffi = require "ffi"
  pcall(ffi.cdef, "int memcmp(const void *a, const void *b, size_t n);")
  local memcmp = ffi.C.memcmp
  -- guard chunks by source: kernels of the same shape share the loadstring
  -- (the values are the chunk's arguments)
  local guard_chunks = setmetatable({}, { __mode = "v" })

  local function is_watched_leaf(d, builtins)
    local v, kind = d[4], d[1]
    local tv = type(v)
    if tv == "number" or tv == "boolean" then return true end
    if tv == "cdata" then return true end -- compared by contents (see compare)
    if tv ~= "table" then return false end
    local mt = getmetatable(v)
    if mt == Const or mt == Func then return true end
    return kind ~= "f" and weft.is_type(v) and not builtins[v]
  end

  -- The guard of a compile's deps list ({kind, container, key, value}).
  local function make_guard(deps)
    if not deps or #deps == 0 then return always end
    local builtins = P.builtins or {}
    local watched = {}
    for i, d in ipairs(deps) do
      if is_watched_leaf(d, builtins) then watched[i] = true end
    end
    -- the tables on the way to a watched field (fixpoint over the chain)
    local changed = true
    while changed do
      changed = false
      for i, d in ipairs(deps) do
        if watched[i] and d[1] == "f" then
          for j, e in ipairs(deps) do
            if not watched[j] and rawequal(e[4], d[2]) then
              watched[j], changed = true, true
            end
          end
        end
      end
    end
    local consts, terms, joins, seen = {}, {}, {}, {}
    local function const(v)
      consts[#consts + 1] = v
      return "c" .. #consts
    end
    local function compare(place, v)
      if v ~= v then return fmt("%s ~= %s", place, place) end -- NaN
      if v == 0 and type(v) == "number" then -- keep the sign of zero
        return fmt("(%s == 0 and 1 / %s %s 0)", place, place, 1 / v > 0 and ">" or "<")
      end
      if type(v) == "cdata" then
        -- a host value captured by value: its type and contents now
        -- against a copy taken at the compile (in place changes count)
        local ct = ffi.typeof(v)
        local snap = ffi.new(ct, v)
        local tcheck = fmt("%s(%s, %s)", const(ffi.istype), const(ct), place)
        local t = weft.dtype_of and weft.dtype_of(v)
        if t and (t.kind == "int" or t.kind == "float" or t.kind == "bool") then
          return fmt("(%s and %s == %s)", tcheck, place, const(snap))
        end
        return fmt("(%s and %s(%s, %s, %d) == 0)", tcheck, const(memcmp), place, const(snap),
                   ffi.sizeof(ct))
      end
      local t = fmt("%s == %s", place, const(v))
      if getmetatable(v) == Func then
        t = fmt("%s and %s._v == %d", t, place, v._v or 0)
      end
      return t
    end
    for i, d in ipairs(deps) do
      if watched[i] then
        local kind, c, key, v = d[1], d[2], d[3], d[4]
        local id
        if kind == "u" then id = debug.upvalueid(c, key) else id = c end
        seen[id] = seen[id] or {}
        if not seen[id][kind == "u" and 1 or key] then
          seen[id][kind == "u" and 1 or key] = true
          local place
          if kind == "u" then
            place = "u" .. (#joins + 1)
            joins[#joins + 1] = { c, key }
          else
            place = fmt("%s[%s]", const(c), const(key))
          end
          terms[#terms + 1] = compare(place, v)
        end
      end
    end
    if #terms == 0 then return always end
    local src = {}
    -- past LuaJIT's 60 upvalues a function may have, the constants go in
    -- one table (C[i]); the joined upvalues u1.. must stay upvalues
    local boxed = #consts + #joins > 50
    if boxed then
      for i, t in ipairs(terms) do terms[i] = t:gsub("%f[%w_]c(%d+)%f[^%w_]", "C[%1]") end
      src[#src + 1] = "local C = ..."
    elseif #consts > 0 then
      local names = {}
      for i = 1, #consts do names[i] = "c" .. i end
      src[#src + 1] = "local " .. table.concat(names, ", ") .. " = ..."
    end
    local unames = {}
    for i = 1, #joins do unames[i] = "u" .. i end
    if #joins > 0 then src[#src + 1] = "local " .. table.concat(unames, ", ") end
    src[#src + 1] = "return function() return " .. table.concat(terms, " and ") .. " end,"
    if #joins > 0 then
      src[#src + 1] = "function(x) " .. table.concat(unames, ", ") .. " = x end"
    else
      src[#src + 1] = "nil"
    end
    src = table.concat(src, "\n")
    local chunk = guard_chunks[src]
    if not chunk then
      chunk = assert(loadstring(src, "=weft guard"))
      guard_chunks[src] = chunk
    end
    local guard -- new closures, new upvalues
    if boxed then guard = chunk(consts) else guard = chunk(unpack(consts, 1, #consts)) end
    if #joins > 0 then
      local index = {}
      for i = 1, math.huge do
        local n = debug.getupvalue(guard, i)
        if not n then break end
        index[n] = i
      end
      for i, j in ipairs(joins) do debug.upvaluejoin(guard, index["u" .. i], j[1], j[2]) end
    end
    return guard
  end

  -- Compiled modules kept per signature: the current one first, then up to
  -- KEEP - 1 earlier ones, so a value that goes back and forth between a
  -- few settings reuses their code instead of compiling again.
  local KEEP = 4

  -- The entry of a signature: { module = IR module, guard = function,
  -- code = {} (the launcher's compiled code per ndim and mode) }, compiled
  -- again when the names it captured changed.
  function Kernel:_entry(argtypes)
    local key = sigkey(self, argtypes)
    local list = self._cache[key]
    if list then
      local e = list[1]
      if e.guard() then return e, key end
      for i = 2, #list do
        e = list[i]
        if e.guard() then
          table.remove(list, i)
          table.insert(list, 1, e)
          return e, key
        end
      end
    end
    local core = get_core()
    if not (core and core.compile) then error("weft: the kernel compiler is not available", 2) end
    local ok, res, deps = pcall(core.compile, self._decl, argtypes)
    if not ok then error(res, 0) end
    local e = { module = res, guard = make_guard(deps), code = {} }
    if not list then
      list = {}
      self._cache[key] = list
    else -- compiled again for new values (weft.stats(k).respecialized)
      rawset(self, "_respecs", (rawget(self, "_respecs") or 0) + 1)
    end
    table.insert(list, 1, e)
    list[KEEP + 1] = nil
    -- Tools that need every compiled module (the PTX check of the whole
    -- spec suite) register a hook in the registry.
    local hook = debug.getregistry()["weft.module_hook"]
    if hook then hook(self, res, key) end
    return e, key
  end

  -- The compiled IR module for a signature (compiled once per signature,
  -- and again when a captured value changed).
  function Kernel:_module(argtypes)
    local e, key = self:_entry(argtypes)
    return e.module, key
  end

  function Kernel:ir(argtypes)
    local m = self:_module(argtypes)
    return get_core().ir(m)
  end

  local source_fns = { llvm = "llvm_ir", cuda = "cuda_source", ir = "ir" }
  function Kernel:source(kind, argtypes)
    kind = kind or "ir"
    local fname = source_fns[kind]
    if not fname then error(fmt("weft: unknown source kind '%s' (ir, llvm or cuda)", tostring(kind)), 2) end
    local f = get_core()[fname]
    if not f then error(fmt("weft: the %s backend is not available in this build", kind), 2) end
    if kind == "ir" then return f((self:_module(argtypes))) end
    -- the code of the current weft.config.mode (its bounds checks)
    return f(self:_module(argtypes),
             P.mode_opts(P.mode_index(), { names = P.param_names(self) }))
  end

  -- One PTX module holding the forward entry and, unless opts.adjoint is
  -- false, the adjoint entry (appended to the IR module once, with the
  -- custom gradients and replays of the weft.func it calls). A kernel that
  -- autodiff refuses (say, one that replays an atomic counter) gets no
  -- adjoint entry unless opts.adjoint is true, which raises the error.
  -- opts.fast_compile overrides weft.config.cuda_fast_compile.
  function Kernel:ptx(arch, argtypes, opts)
    if arch ~= nil and type(arch) ~= "string" then
      error(fmt("k:ptx: arch must be a string such as \"sm_80\", got %s", type(arch)), 2)
    end
    if argtypes ~= nil and type(argtypes) ~= "table" then
      error(fmt("k:ptx: argtypes must be a table of types, got %s", type(argtypes)), 2)
    end
    if opts ~= nil and type(opts) ~= "table" then
      error(fmt("k:ptx: opts must be a table, got %s", type(opts)), 2)
    end
    local c = get_core()
    if not c.ptx then error("weft: PTX output is not available in this build", 2) end
    local m = self:_module(argtypes)
    if not (opts and opts.adjoint == false) then
      -- the module autodiff appends the adjoint to (custom gradients of
      -- weft.func included), as adjoint launches use it
      local ok, dm = pcall(P.derived_module, "adj", self, m, argtypes, false)
      if ok then
        m = dm
      elseif (opts and opts.adjoint) or not tostring(dm):find(": autodiff: ", 1, true) then
        error(dm, 2)
      end
    end
    local fast = weft.config.cuda_fast_compile
    if opts and opts.fast_compile ~= nil then fast = opts.fast_compile end
    local ok, ptx, entries, cached = pcall(c.ptx, m, arch, { fast_compile = fast })
    if not ok then error(ptx, 2) end
    return ptx, entries, cached
  end

  -- Compile now what the first launch would compile (so a game does not
  -- stall on the frame that first launches the kernel): the kernel for
  -- opts.device ("cpu" by default, or "cuda:N"), in the current
  -- weft.config.mode, for launches of opts.ndim dimensions (1 by default;
  -- a list compiles several). A generic parameter has no type until an
  -- argument gives it one: name it in opts.types ({ x = weft.array(...) }
  -- or a list by position), once per signature to compile; a launch with
  -- arguments of those types then finds the code. Returns k.
  function Kernel:compile(opts)
    if opts ~= nil and type(opts) ~= "table" then
      error(fmt("k:compile: opts must be a table, got %s", type(opts)), 2)
    end
    opts = opts or {}
    local given = opts.types or {}
    local types = {}
    for i, p in ipairs(self.params) do
      local t = p.type or given[p.name] or given[i]
      if t == nil then
        error(fmt("k:compile: kernel '%s': parameter '%s' is generic, so its type comes from "
                  .. "a launch argument; name it (k:compile{ types = { %s = weft.array(weft.float32) } })"
                  .. " or let the first launch compile it", self.name, p.name, p.name), 2)
      end
      if not weft.is_type(t) then
        error(fmt("k:compile: kernel '%s': the type given for '%s' is not a weft type", self.name,
                  p.name), 2)
      end
      types[i] = t
    end
    local dev = P.parse_device("k:compile", opts.device or "cpu")
    local m = P.mode_index()
    if dev >= 0 then
      if not P.cuda_load_kernel then error("k:compile: CUDA is not available in this build", 2) end
      P.cuda_load_kernel(self, dev, m)
      return self
    end
    local nds = opts.ndim or 1
    if type(nds) ~= "table" then nds = { nds } end
    for _, nd in ipairs(nds) do
      if type(nd) ~= "number" or nd < 1 or nd > 4 or nd ~= math.floor(nd) then
        error(fmt("k:compile: ndim must be 1 to 4 (or a list of those), got %s", tostring(nd)), 2)
      end
      P.precompile(self, types, nd, m)
    end
    return self
  end

  function Kernel:__tostring()
    return fmt("weft.kernel %s", self.name)
  end

  ---------------------------------------------------------------------------
  -- functions
  ---------------------------------------------------------------------------
  -- _v counts changes to the definitions (overload, grad, replay): kernels
  -- that call the func compile again when it moved on (see make_guard).
  function weft.func(spec)
    local decl = make_decl("func", spec, 2)
    return setmetatable({ name = decl.name, defs = { decl }, _v = 0 }, Func)
  end

  function weft.is_func(v) return getmetatable(v) == Func end

  -- Add a definition for another signature (chosen at each call site by
  -- the argument types; the most specific typed match wins).
  function Func:overload(spec)
    local decl = make_decl("func", spec, 2)
    self.defs[#self.defs + 1] = decl
    self._v = (self._v or 0) + 1
    return self
  end

  -- On the host, run the first definition as plain Lua, with its
  -- defaults for missing arguments; f{ x = 1, y = 2 } passes them by name.
  function Func:__call(...)
    local d = self.defs[1]
    local kw = select("#", ...) == 1 and ... or nil
    local named = type(kw) == "table" and getmetatable(kw) == nil and next(kw) ~= nil
    for k in pairs(named and kw or {}) do named = named and type(k) == "string" end
    if named then
      local args = {}
      for k in pairs(kw) do
        local known = false
        for _, p in ipairs(d.params) do known = known or p.name == k end
        if not known then P.raise(fmt("weft.func %s: no parameter '%s'", self.name, tostring(k))) end
      end
      for i, p in ipairs(d.params) do
        local v = kw[p.name]
        if v == nil and d.defaults then v = d.defaults[p.name] end
        args[i] = v
      end
      return d.fn(unpack(args, 1, #d.params))
    end
    if not d.defaults or select("#", ...) >= #d.params then return d.fn(...) end
    local args = { ... }
    for i = select("#", ...) + 1, #d.params do args[i] = d.defaults[d.params[i].name] end
    return d.fn(unpack(args, 1, #d.params))
  end

  function Func:__tostring()
    return fmt("weft.func %s", self.name)
  end

  ---------------------------------------------------------------------------
  -- constants
  ---------------------------------------------------------------------------
  -- The scalars of host value v of weft type t, depth first in the order
  -- of the IR's components (vector components, matrix rows, transform p
  -- then q, struct fields in order), appended to out.
  local function flatten(t, v, out)
    local k = t.kind
    if k == "bool" then
      out[#out + 1] = v and 1 or 0
    elseif k == "int" or k == "float" then
      out[#out + 1] = tonumber(v)
    elseif k == "struct" then
      for _, f in ipairs(t.fields) do flatten(f.type, v[f.name], out) end
    else
      local function walk(x)
        if type(x) == "table" then
          for _, y in ipairs(x) do walk(y) end
        else
          out[#out + 1] = tonumber(x)
        end
      end
      walk(t.totable(v))
    end
    return out
  end

  -- weft.constant(value): a number, a boolean, or a host value of a weft
  -- type (weft.vec3(0, 0, 1), a matrix, quaternion, transform, struct, or
  -- an int64 cdata). Kernels see it as a constant of that type.
  function weft.constant(value)
    local tv = type(value)
    if tv == "number" or tv == "boolean" or weft.is_type(value) then
      return setmetatable({ value = value }, Const)
    end
    local t = tv == "cdata" and weft.dtype_of(value)
    if not t or t.kind == "array" then
      error("weft.constant: expected a number, a boolean or a value of a weft type, got "
            .. (t and "an array" or tv), 2)
    end
    if t.arrays then
      error(fmt("weft.constant: a %s holds arrays, which cannot be constants (pass the struct to "
                .. "the kernel as a parameter)", t.name), 2)
    end
    return setmetatable({ value = value, type = t, comps = flatten(t, value, {}) }, Const)
  end

  function Const:__tostring()
    return "weft.constant(" .. tostring(self.value) .. ")"
  end
end
