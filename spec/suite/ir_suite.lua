-- The suite-level checks on every kernel module the spec suite compiled.
-- scripts/run-tests runs this file as its own busted invocation
-- (`busted --run=suite`, see .busted) after the main spec run, in which
-- spec/helpers/ir_collect.lua (busted's helper) wrote the IR text of each
-- distinct module to $WEFT_IR_SUITE_DIR. To run it by hand:
--
--   export WEFT_IR_SUITE_DIR=$PWD/build-x/ir-suite; rm -rf $WEFT_IR_SUITE_DIR
--   luajit /usr/bin/busted spec/some_spec.lua    # or the whole suite
--   luajit /usr/bin/busted --run=suite
--
-- 1. Round trip: each text parses back (core.ir_parse), the parsed module
--    verifies, and it prints the same text.
-- 2. CUDA: each parsed module is emitted as CUDA C with its adjoint entry
--    (where autodiff applies), compiled to PTX for sm_75, sm_80 and sm_90
--    by NVRTC with the options a launch uses, and each PTX is assembled for
--    its architecture by ptxas.
--
-- Which modules NVRTC compiles: every module is emitted as CUDA C (with
-- its adjoint), but the suite holds ~1000 distinct modules, ~21 MB of CUDA
-- C (the geometry queries carry ~90 KB of query.h each), which took ~20
-- minutes of NVRTC and ptxas here. So `make test` compiles a cover: the
-- fewest modules (by a greedy, size-weighted choice) whose CUDA C holds
-- every distinct line shape of the whole suite's CUDA C, where a shape is
-- the line with generated names (v12), numbers and strings blanked, and a
-- kernel signature counts as its parameter types. Every construct the
-- emitter produced in the whole run thus reaches NVRTC and ptxas at least
-- once (~130 modules, ~18% of the text). WEFT_PTX_SUITE_ALL=1 (make
-- test-ptx-all) compiles every module for every architecture.
--
-- Speed:
--  * small modules are compiled in batches: each module's CUDA C in a
--    namespace of its own, its entries renamed apart (weft_b<N>_...), one
--    NVRTC program per batch and architecture; a module of more than
--    SMALL bytes is a batch alone (NVRTC's time grows faster than the
--    text: a batch of 16 modules that took 45 s of CPU one by one ran for
--    over 3 minutes);
--  * ptxas runs as a separate process on the PTX of one batch while NVRTC
--    compiles the next (two cores busy); without the ptxas program,
--    nvJitLink assembles in-process;
--  * identical modules (same IR text) are written once by the collector;
--    PTX comes from the disk cache (WEFT_CACHE_DIR) when it holds it.
-- A batch that fails is redone module by module (the module's own CUDA C,
-- as a launch compiles it, then nvJitLink), so every failure names its
-- kernel and the Lua position (#line maps NVRTC errors to the Lua line).
require "weft" -- loads libweft; weft.internal is the parts' private table
local internal = require "weft.internal"
local collect = dofile("spec/helpers/ir_collect.lua")

local core = internal.core
local have_nvrtc = core.cuda_nvrtc_version and core.cuda_nvrtc_version() ~= nil
-- WEFT_PTX_SUITE_ARCHS="80" (a comma list) narrows the check for quick
-- local runs; "none" skips it. CI runs the default: all three.
local ARCHS = {}
for a in (os.getenv("WEFT_PTX_SUITE_ARCHS") or "75,80,90"):gmatch("%d+") do ARCHS[#ARCHS + 1] = a end
local BATCH, SMALL, BATCH_BYTES = 16, 16384, 131072
-- Each batch of the cover is compiled for one architecture in turn (batch
-- 1 for sm_75, batch 2 for sm_80, ...). WEFT_PTX_SUITE_ALL=1 compiles
-- every module's batch for every architecture (make test-ptx-all).
local ALL = os.getenv("WEFT_PTX_SUITE_ALL") == "1"
local function archs_of(nb)
  if ALL then return ARCHS end
  return { ARCHS[(nb - 1) % #ARCHS + 1] }
end

-- Kernels the CUDA backend rejects on purpose, by message: each must fail
-- when emitted, with a positioned message ("chunk:line: cuda: ...").
local EXPECTED = {
  "elements is not supported on CUDA", -- atomics on bool arrays
}

local function expected(msg)
  for _, pat in ipairs(EXPECTED) do
    if tostring(msg):find(pat, 1, true) then return pat end
  end
  return nil
end

local function readall(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local function writeall(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- The ptxas program of the toolkit, or nil.
-- cuda_source options of release mode, as launches use them.
local RELEASE = { checks = true }

local function find_ptxas()
  for _, home in ipairs { os.getenv("CUDA_HOME") or "", "/usr/local/cuda" } do
    local p = home .. "/bin/ptxas"
    if home ~= "" and os.execute(p .. " --version > /dev/null 2>&1") == 0 then return p end
  end
  return nil
end

-- The collected modules: { { label =, file =, text = }, ... } sorted by
-- file name (a hash: a stable order), or nil and why.
local function load_modules(dir)
  if not dir or dir == "" then return nil, "WEFT_IR_SUITE_DIR is not set (see the head of this file)" end
  local p = io.popen("ls '" .. dir:gsub("'", "'\\''") .. "' 2>/dev/null")
  local names = {}
  for n in p:lines() do
    if n:match("%.ir$") then names[#names + 1] = n end
  end
  p:close()
  table.sort(names)
  local out = {}
  for _, n in ipairs(names) do
    local contents = readall(dir .. "/" .. n) or ""
    local lab, text = collect.split(contents)
    out[#out + 1] = { file = n, label = lab or ("module " .. n), text = text or contents }
  end
  return out
end

local function label(e) return e.label end

-- The line shapes of a module's CUDA C, added to set: each line with the
-- generated value names (v12), trailing numbers of type names (wf_vec3f_1),
-- numbers, hex floats and strings blanked; #line directives dropped; a
-- kernel signature as one shape per parameter type.
local function add_shapes(src, set)
  for l in src:gmatch("[^\n]+") do
    if l:find("__global__", 1, true) then
      for p in (l:match("%((.*)%)") or ""):gmatch("[^,]+") do
        set["param " .. p:gsub("%s*[%w_]+%s*$", ""):gsub("^%s+", "")] = true
      end
    elseif not l:match("^#line ") then
      l = l:gsub('"[^"]*"', '"S"'):gsub("0x[%x%.]+p[%-+]?%d+", "0")
      l = l:gsub("[%a_][%w_]*", function(w)
        if w:match("^v%d+$") then return "v" end
        return (w:gsub("_%d+$", "_N"))
      end)
      set[(l:gsub("%d+%.?%d*[eE]?[%-+]?%d*[fFuUlL]*", "0"):gsub("%s+", " "))] = true
    end
  end
end

-- The cover of items (see the head of this file), in the items' order: a
-- greedy choice by new shapes per byte of CUDA C (plus a fixed cost per
-- module for NVRTC's start and the prelude); ties go to the first module
-- in the (hash) order, so a run chooses the same modules as the last.
local function cover(items)
  local sets = {}
  for i, it in ipairs(items) do
    sets[i] = {}
    add_shapes(it.src, sets[i])
  end
  local covered, chosen = {}, {}
  while true do
    local best, score = nil, 0
    for i = 1, #items do
      if not chosen[i] then
        local n = 0
        for l in pairs(sets[i]) do
          if not covered[l] then n = n + 1 end
        end
        local sc = n / (#items[i].src + 20000)
        if sc > score then best, score = i, sc end
      end
    end
    if not best then break end
    chosen[best] = true
    for l in pairs(sets[best]) do covered[l] = true end
  end
  local out = {}
  for i, it in ipairs(items) do
    if chosen[i] then out[#out + 1] = it end
  end
  return out
end

-- The first line where a and b differ: "line N: <a> / <b>".
local function first_difference(a, b)
  local n = 1
  local ia, ib = 1, 1
  while true do
    local la = a:match("^[^\n]*", ia)
    local lb = b:match("^[^\n]*", ib)
    if la ~= lb or ia > #a or ib > #b then
      return string.format("line %d: %q became %q", n, la or "", lb or "")
    end
    ia, ib, n = ia + #la + 1, ib + #lb + 1, n + 1
  end
end

-- One CUDA C program holding the modules of a batch, each in a namespace
-- with its entries renamed apart. Returns the source and the entry names
-- to find in the PTX. The geometry headers a module carries (query.h,
-- volume.h, ...) have include guards: these are undefined before each
-- module, or the second module's namespace would lack their functions
-- (and every batch with two geometry modules failed and was redone module
-- by module, most of this step's time before).
local function batch_source(items, id)
  local parts, entries = {}, {}
  for n, it in ipairs(items) do
    local ns = "b" .. id .. "_" .. n
    local s = it.src
    for guard in s:gmatch("#ifndef ([%w_]+_H)\n#define %1\n") do
      parts[#parts + 1] = "#undef " .. guard .. "\n"
    end
    for _, e in ipairs(it.entries) do
      local renamed = "weft_" .. ns .. "_" .. e:gsub("^weft_", "")
      s = s:gsub("__global__ void " .. e .. "%(", "__global__ void " .. renamed .. "(")
      entries[#entries + 1] = renamed
    end
    parts[#parts + 1] = "namespace wf_" .. ns .. " {\n" .. s .. "\n}\n"
  end
  return table.concat(parts), entries
end

-- One module as a launch compiles it; nil on success, else a message.
local function check_module(src, arch)
  local ok, ptx = pcall(core.cuda_compile, src, "compute_" .. arch)
  if not ok then return tostring(ptx) end
  local ok2, err = pcall(core.cuda_assemble, ptx, "sm_" .. arch)
  if not ok2 then return "assembly: " .. tostring(err) end
  return nil
end

local mods, why = load_modules(os.getenv("WEFT_IR_SUITE_DIR"))
local parsed = {} -- the modules that came back through the text, for the CUDA check

describe("every kernel module of the suite", function()
  if not mods then
    pending(why)
    return
  end

  it("was collected by the spec run", function()
    local errs = readall(os.getenv("WEFT_IR_SUITE_DIR") .. "/" .. collect.ERRORS)
    assert(not errs, "spec/helpers/ir_collect.lua failed on kernels of the spec run:\n" .. tostring(errs))
    assert(#mods > 0, "no modules in WEFT_IR_SUITE_DIR: the spec run compiled no kernel, or "
           .. "spec/helpers/ir_collect.lua was not its busted helper")
  end)

  it("parses back from its IR text, verifies and prints the same text (" .. #mods .. " modules)", function()
    local failures = {}
    for _, e in ipairs(mods) do
      local ok, m = pcall(core.ir_parse, e.text)
      if not ok then
        failures[#failures + 1] = e.label .. ": " .. tostring(m)
      else
        local again = core.ir(m)
        if again ~= e.text then
          failures[#failures + 1] = e.label .. ": printed differently after parsing, "
                                    .. first_difference(e.text, again)
        else
          parsed[#parsed + 1] = { label = e.label, module = m }
        end
      end
    end
    if #failures > 0 then
      error(#failures .. " module(s) do not round-trip:\n" .. table.concat(failures, "\n"), 0)
    end
  end)
end)

describe("every kernel module of the suite on CUDA", function()
  if not mods then
    pending(why)
    return
  end
  if not have_nvrtc then
    pending("NVRTC not found")
    return
  end
  if #ARCHS == 0 then
    pending("WEFT_PTX_SUITE_ARCHS names no architecture")
    return
  end

  local result -- filled by the first test, read by the second

  local which = ALL and " (every module)" or " (a cover of the modules, batches in turn)"
  it("compiles to PTX for sm_" .. table.concat(ARCHS, ", sm_") .. which .. " and assembles", function()
    assert(#parsed > 0, "no module came back through the text (see the round-trip test)")
    local cpu0, wall0 = os.clock(), os.time()
    result = { failures = {}, rejected = {}, adjoints = 0, entries = 0 }
    local function failed(msg) result.failures[#result.failures + 1] = msg end

    -- emit: the forward module first (a failed adjoint may leave the module
    -- unusable), then with the adjoint entry when autodiff succeeds
    local items = {}
    for _, e in ipairs(parsed) do
      -- release mode (the default): the code with its bounds checks
      local ok, src, entries = pcall(core.cuda_source, e.module, RELEASE)
      if not ok then
        if expected(src) then
          result.rejected[#result.rejected + 1] = { label = label(e), msg = tostring(src) }
        else
          failed(label(e) .. ": " .. tostring(src))
        end
      else
        if pcall(core.adjoint, e.module) then
          local ok2, src2, entries2 = pcall(core.cuda_source, e.module, RELEASE)
          if ok2 then
            src, entries = src2, entries2
            result.adjoints = result.adjoints + 1
          else
            failed(label(e) .. " (with its adjoint): " .. tostring(src2))
          end
        end
        items[#items + 1] = { e = e, src = src, entries = entries }
        result.entries = result.entries + #entries
      end
    end

    -- compile batches; assemble each batch's PTX while the next compiles
    local emitted = #items
    if not ALL then items = cover(items) end
    local ptxas = find_ptxas()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir) == 0)
    local jobs, pending_jobs, waits = {}, {}, 0
    -- module by module, to name the culprits; a batch that fails while
    -- each of its modules compiles alone is the batching's fault (and
    -- costs this step its speed), so that fails too
    local function redo(job, cause)
      local culprits = 0
      for _, it in ipairs(job.batch) do
        local err = check_module(it.src, job.arch)
        if err then
          culprits = culprits + 1
          failed(string.format("%s sm_%s: %s", label(it.e), job.arch, err))
        end
      end
      if culprits == 0 then
        failed(string.format("batch %s failed while each of its modules compiles alone: %s", job.base:match("[^/]*$"),
                             tostring(cause):sub(1, 400)))
      end
    end
    local function finish(job)
      local rc
      repeat
        rc = readall(job.base .. ".rc")
        if not rc or not rc:find("\n") then
          os.execute("sleep 0.02")
          waits = waits + 1
        end
      until rc and rc:find("\n")
      if tonumber(rc) ~= 0 then redo(job, "ptxas: " .. (readall(job.base .. ".log") or "")) end
    end
    local nb = 0
    -- the batches: up to BATCH small modules and BATCH_BYTES, or one big one
    local batches, small, bytes = {}, {}, 0
    local function close()
      if #small > 0 then batches[#batches + 1] = small end
      small, bytes = {}, 0
    end
    for _, it in ipairs(items) do
      if #it.src > SMALL then
        batches[#batches + 1] = { it }
      else
        if #small == BATCH or bytes + #it.src > BATCH_BYTES then close() end
        small[#small + 1] = it
        bytes = bytes + #it.src
      end
    end
    close()
    for _, batch in ipairs(batches) do
      nb = nb + 1
      local src, entries = batch_source(batch, nb)
      for _, arch in ipairs(archs_of(nb)) do
        local job = { batch = batch, arch = arch, base = string.format("%s/b%d_%s", dir, nb, arch) }
        local c0 = os.clock()
        local ok, ptx = pcall(core.cuda_compile, src, "compute_" .. arch)
        job.cpu = os.clock() - c0
        local missing
        for _, e in ipairs(ok and entries or {}) do
          if not ptx:find(".entry " .. e .. "(", 1, true) then missing = e end
        end
        if not ok or missing then
          redo(job, ok and ("no entry " .. missing .. " in the PTX") or ptx)
        elseif ptxas then
          writeall(job.base .. ".ptx", ptx)
          os.execute(string.format("(%s -arch=sm_%s %s.ptx -o /dev/null > %s.log 2>&1; echo $? > %s.rc.tmp; mv %s.rc.tmp %s.rc) &",
                                   ptxas, arch, job.base, job.base, job.base, job.base, job.base))
          pending_jobs[#pending_jobs + 1] = job
          if #pending_jobs > 1 then finish(table.remove(pending_jobs, 1)) end
        else
          local ok2, err = pcall(core.cuda_assemble, ptx, "sm_" .. arch)
          if not ok2 then redo(job, err) end
        end
        jobs[#jobs + 1] = job
      end
    end
    for _, job in ipairs(pending_jobs) do finish(job) end
    os.execute("rm -rf " .. dir)
    if os.getenv("WEFT_PTX_SUITE_STATS") then -- what the check covered (no timing is asserted)
      table.sort(jobs, function(a, b) return a.cpu > b.cpu end)
      for k = 1, math.min(5, #jobs) do
        io.stderr:write(string.format("\nptx suite: NVRTC %.1f s CPU for %s (%d module(s)) sm_%s", jobs[k].cpu,
                                      label(jobs[k].batch[1].e), #jobs[k].batch, jobs[k].arch))
      end
      io.stderr:write(string.format("\nptx suite: %d modules emitted (%d with adjoints, %d entries), %d "
                                    .. "compiled (%s) in %d batches x %d archs, ptxas %s, %.1f s CPU in this "
                                    .. "process, ~%d s wall, ~%.1f s waiting for ptxas\n",
                                    emitted, result.adjoints, result.entries, #items,
                                    ALL and "all" or "the cover", nb, ALL and #ARCHS or 1,
                                    ptxas or "in-process", os.clock() - cpu0, os.time() - wall0,
                                    waits * 0.02))
    end
    if #result.failures > 0 then
      error(#result.failures .. " failure(s):\n" .. table.concat(result.failures, "\n"), 0)
    end
    assert.is_true(result.entries >= #items and #jobs == (ALL and nb * #ARCHS or nb))
  end)

  it("rejects only the listed kernels, each with a positioned message", function()
    assert.is_table(result, "the compile test did not run")
    for _, r in ipairs(result.rejected) do
      assert.matches("^[^:\n]+:%d+: cuda: ", r.msg, nil, false, r.label .. ": " .. r.msg)
    end
    assert.is_true(#result.rejected <= 4, "the list of rejected kernels grew: " .. #result.rejected)
  end)
end)
