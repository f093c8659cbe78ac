-- Bounds checks by mode (weft issue 10, item 17): "release" (the default)
-- checks every array access, doing the checks the compiler can prove once
-- per launch (tid indices against the launch dims) or once per loop (unit
-- step loop counters); "fast" checks nothing; "debug" checks every access.
local weft, internal = require "weft", require "weft.internal" -- internal: the parts' private table

local f32, i32 = weft.float32, weft.int32
local A = weft.array

-- The line of the first source line of this file containing `pat`.
local function line_of(pat)
  local n = 0
  for l in io.lines("spec/bounds_spec.lua") do
    n = n + 1
    if l:find(pat, 1, true) then return n end
  end
  error("no line with " .. pat)
end

-- The error of launching k (must fail), in the current mode.
local function launch_error(k, dim, ins, outs)
  local ok, err = pcall(weft.launch, k, dim, ins, outs and { outputs = outs } or nil)
  assert.is_false(ok, "the launch should fail")
  return tostring(err)
end

local function oob(line, i, axis, size, arr, kname)
  return string.format("spec/bounds_spec.lua:%d: index %d out of bounds for axis %d with size %d in array '%s' of kernel '%s'",
                       line, i, axis, size, arr, kname)
end

-- The number of out-of-bounds calls in the LLVM IR of k in the current mode.
local function oob_calls(k)
  local _, n = k:source("llvm"):gsub("call void @wf_cpu_rt_oob", "")
  return n
end

-- The number of per-access checks (`%inb = icmp ult index, extent`) in the
-- LLVM IR of k before optimization, in the current mode.
local function access_checks(k)
  local ir = internal.core.llvm_ir(k:_module(), internal.mode_opts(internal.mode_index(),
                                { optimize = false, names = internal.param_names(k) }))
  local _, n = ir:gsub("%%inb%d* = icmp ult", "")
  return n
end

describe("bounds checks in release mode", function()
  before_each(function() weft.config.mode = "release" end)
  after_each(function() weft.config.mode = "release" end)

  it("is the default mode", function()
    assert.equal("release", weft.config.mode)
  end)

  local store1 = weft.kernel{ x = A(f32), function(x)
    local i = weft.tid()
    x[i] = 1.0 -- store1
  end }

  it("raises when the launch dim is larger than the array, before any thread writes", function()
    local x = weft.zeros(8)
    assert.equal(oob(line_of("-- store1"), 8, 0, 8, "x", "store1"), launch_error(store1, 9, { x }))
    assert.same({ 0, 0, 0, 0, 0, 0, 0, 0 }, x:totable())
    -- a launch that fits runs
    weft.launch(store1, 8, { x })
    assert.same({ 1, 1, 1, 1, 1, 1, 1, 1 }, x:totable())
    -- a huge launch over a small array: one clean error
    assert.matches("index 8 out of bounds", launch_error(store1, 1000000, { x }), 1, true)
  end)

  it("reports reads past the end and negative indices at the access's line", function()
    local k = weft.kernel{ x = A(f32), y = A(f32), d = i32, function(x, y, d)
      local i = weft.tid()
      y[i] = x[i + d] -- read1
    end }
    local x, y = weft.zeros(4), weft.zeros(4)
    assert.equal(oob(line_of("-- read1"), 4, 0, 4, "x", "k"), launch_error(k, 4, { x, y, 1 }))
    assert.equal(oob(line_of("-- read1"), -2, 0, 4, "x", "k"), launch_error(k, 4, { x, y, -2 }))
    weft.launch(k, 4, { weft.array({ 1, 2, 3, 4 }, f32), y, 0 })
    assert.same({ 1, 2, 3, 4 }, y:totable())
  end)

  it("checks tid plus a constant once per launch", function()
    local k = weft.kernel{ x = A(f32), y = A(f32), function(x, y)
      local i = weft.tid()
      y[i] = x[i + 1] - x[i - 1 + 1] -- shifted
    end }
    local x = weft.array({ 1, 2, 4, 8, 16 }, f32)
    local y = weft.zeros(4)
    weft.launch(k, 4, { x, y })
    assert.same({ 1, 2, 4, 8 }, y:totable())
    assert.equal(oob(line_of("-- shifted"), 5, 0, 5, "x", "k"), launch_error(k, 5, { x, weft.zeros(5) }))
    -- no check is left in the thread loop
    assert.equal(0, access_checks(k))
  end)

  it("names the row and the element axis of 2-D arrays", function()
    local k = weft.kernel{ a = A(f32, 2), c = i32, function(a, c)
      local i, j = weft.tid()
      a[i][j + c] = 2.0 -- elem2d
    end }
    local a = weft.zeros({ 3, 4 })
    weft.launch(k, { 3, 4 }, { a, 0 })
    assert.equal(2, a[2][3])
    -- the launch has more rows than the array
    assert.equal(oob(line_of("-- elem2d"), 3, 0, 3, "a", "k"), launch_error(k, { 4, 4 }, { a, 0 }))
    -- a computed element index: checked per access
    assert.equal(oob(line_of("-- elem2d"), 4, 1, 4, "a", "k"), launch_error(k, { 3, 4 }, { a, 1 }))
    -- a row passed as a 2-D element access
    local k2 = weft.kernel{ a = A(f32, 2), r = i32, function(a, r)
      local j = weft.tid()
      local v = a[r][j] -- row2d
      a[0][j] = v
    end }
    assert.equal(oob(line_of("-- row2d"), 3, 0, 3, "a", "k2"), launch_error(k2, 4, { a, 3 }))
    assert.equal(oob(line_of("-- row2d"), 4, 1, 4, "a", "k2"), launch_error(k2, 5, { a, 0 }))
  end)

  it("checks 3-D and 4-D accesses and strided views", function()
    local k3 = weft.kernel{ a = A(f32, 3), function(a)
      local i, j, l = weft.tid()
      a[i][j][l] = 1.0 -- k3
    end }
    local a = weft.zeros({ 2, 3, 4 })
    weft.launch(k3, { 2, 3, 4 }, { a })
    assert.equal(1, a[1][2][3])
    assert.equal(oob(line_of("-- k3"), 4, 2, 4, "a", "k3"), launch_error(k3, { 2, 3, 5 }, { a }))
    local k4 = weft.kernel{ b = A(f32, 4), n = i32, function(b, n)
      local i = weft.tid()
      b[0][1][i][n] = 3.0 -- k4
    end }
    local b = weft.zeros({ 1, 2, 3, 2 })
    weft.launch(k4, 3, { b, 1 })
    assert.equal(3, b[0][1][2][1])
    assert.equal(oob(line_of("-- k4"), 2, 3, 2, "b", "k4"), launch_error(k4, 3, { b, 2 }))
    -- a transposed (strided) view: the extents of the view are checked
    local t = weft.zeros({ 3, 5 }):transpose()
    local k2 = weft.kernel{ m = A(f32, 2), function(m)
      local i = weft.tid()
      m[i][2] = 1.0 -- strided
    end }
    weft.launch(k2, 5, { t })
    assert.equal(oob(line_of("-- strided"), 5, 0, 5, "m", "k2"), launch_error(k2, 6, { t }))
  end)

  it("checks atomics", function()
    local k = weft.kernel{ h = A(i32), v = A(i32), function(h, v)
      local i = weft.tid()
      weft.atomic_add(h, v[i], 1) -- atomic
    end }
    local h = weft.zeros(3, i32)
    weft.launch(k, 4, { h, weft.array({ 0, 2, 2, 1 }, i32) })
    assert.same({ 1, 1, 2 }, h:totable())
    assert.equal(oob(line_of("-- atomic"), 3, 0, 3, "h", "k"),
                 launch_error(k, 4, { h, weft.array({ 0, 3, 2, 1 }, i32) }))
    assert.equal(oob(line_of("-- atomic"), -1, 0, 3, "h", "k"),
                 launch_error(k, 4, { h, weft.array({ 0, -1, 2, 1 }, i32) }))
  end)

  it("checks a loop counter's range once, before the loop", function()
    local k = weft.kernel{ x = A(f32), s = A(f32), n = i32, function(x, s, n)
      local i = weft.tid()
      local acc = 0.0
      for j = 0, n - 1 do
        acc = acc + x[j] -- loopread
      end
      s[i] = acc
    end }
    local x, s = weft.array({ 1, 2, 3, 4 }, f32), weft.zeros(2)
    weft.launch(k, 2, { x, s, 4 })
    assert.same({ 10, 10 }, s:totable())
    -- the counter runs past the end: the first index out of bounds
    assert.equal(oob(line_of("-- loopread"), 4, 0, 4, "x", "k"), launch_error(k, 2, { x, s, 9 }))
    -- the loop does not run: nothing to check
    weft.launch(k, 2, { x, s, 0 })
    assert.same({ 0, 0 }, s:totable())
    -- the check left the thread loop: once per launch (chunk), before it
    assert.equal(0, access_checks(k))
    -- counting down past 0 reports -1
    local down = weft.kernel{ x = A(f32), lo = i32, function(x, lo)
      for j = #x - 1, lo, -1 do
        x[j] = 5.0 -- loopdown
      end
    end }
    assert.equal(oob(line_of("-- loopdown"), -1, 0, 4, "x", "down"), launch_error(down, 1, { x, -3 }))
    assert.same({ 1, 2, 3, 4 }, x:totable()) -- checked before any iteration
    weft.launch(down, 1, { x, 0 })
    assert.same({ 5, 5, 5, 5 }, x:totable())
  end)

  it("checks the rows of a matrix-vector product once per launch", function()
    local mv = weft.kernel{ m = A(f32, 2), v = A(f32), y = A(f32), n = i32, function(m, v, y, n)
      local i = weft.tid()
      local row = m[i]
      local acc = 0.0
      for j = 0, n - 1 do
        acc = acc + row[j] * v[j] -- matvec
      end
      y[i] = acc
    end }
    local m = weft.array({ { 1, 2, 3 }, { 4, 5, 6 } }, f32)
    local v, y = weft.array({ 1, 1, 2 }, f32), weft.zeros(2)
    weft.launch(mv, 2, { m, v, y, 3 })
    assert.same({ 9, 21 }, y:totable())
    assert.equal(0, access_checks(mv))
    -- a row is as long as m's axis 1
    assert.equal(oob(line_of("-- matvec"), 3, 1, 3, "m", "mv"),
                 launch_error(mv, 2, { m, weft.zeros(4), y, 4 }))
    assert.equal(oob(line_of("-- matvec"), 3, 0, 3, "v", "mv"),
                 launch_error(mv, 2, { weft.zeros({ 2, 4 }), v, y, 4 }))
    -- more threads than rows
    assert.equal(oob(line_of("local row = m[i]"), 2, 0, 2, "m", "mv"),
                 launch_error(mv, 3, { m, v, weft.zeros(3), 3 }))
  end)

  it("checks loops nested in ifs and loops inside kernels, with offsets", function()
    local k = weft.kernel{ x = A(f32), y = A(f32), n = i32, function(x, y, n)
      local i = weft.tid()
      if i % 2 == 0 then
        for j = 1, n do
          y[i] = y[i] + x[j - 1] + x[j + 1] -- nested
        end
      end
    end }
    local x, y = weft.array({ 1, 1, 1, 1 }, f32), weft.zeros(2)
    weft.launch(k, 2, { x, y, 2 })
    assert.same({ 4, 0 }, y:totable())
    assert.equal(oob(line_of("-- nested"), 4, 0, 4, "x", "k"), launch_error(k, 2, { x, y, 3 }))
  end)

  it("keeps per-access checks where no proof applies (guarded, computed, while)", function()
    local k = weft.kernel{ x = A(f32), idx = A(i32), n = i32, function(x, idx, n)
      local i = weft.tid()
      if i < n then
        x[idx[i]] = 1.0 -- guarded
      end
    end }
    local x = weft.zeros(3)
    weft.launch(k, 8, { x, weft.array({ 2, 0, 0, 0, 0, 0, 0, 0 }, i32), 1 })
    assert.same({ 0, 0, 1 }, x:totable())
    assert.equal(oob(line_of("-- guarded"), 3, 0, 3, "x", "k"),
                 launch_error(k, 8, { x, weft.array({ 3, 0, 0, 0, 0, 0, 0, 0 }, i32), 1 }))
    assert.equal(oob(line_of("-- guarded"), 3, 0, 3, "idx", "k"),
                 launch_error(k, 8, { x, weft.array({ 0, 0, 0 }, i32), 5 }))
    local w = weft.kernel{ x = A(f32), function(x)
      local j = 0
      while j <= #x do
        x[j] = 7.0 -- whileloop
        j = j + 1
      end
    end }
    assert.equal(oob(line_of("-- whileloop"), 3, 0, 3, "x", "w"), launch_error(w, 1, { x }))
    assert.same({ 7, 7, 7 }, x:totable()) -- per access: the iterations before ran
  end)

  it("checks the adjoint launches", function()
    local k = weft.kernel{ x = A(weft.float64), y = A(weft.float64), function(x, y)
      local i = weft.tid()
      y[i] = x[i] * x[i] -- adjoint
    end }
    local x = weft.array({ 1, 2, 3 }, weft.float64, { requires_grad = true })
    local y = weft.zeros(4, weft.float64, { requires_grad = true })
    local ok, err = pcall(weft.launch, k, 4, { x }, { outputs = { y }, adjoint = true,
                          adj_inputs = { weft.zeros(3, weft.float64) },
                          adj_outputs = { weft.ones(4, weft.float64) } })
    assert.is_false(ok)
    assert.matches("index 3 out of bounds for axis 0 with size 3 in array 'x'", tostring(err), 1, true)
  end)

  it("takes no check out of the thread loop of saxpy: it vectorizes as in fast mode", function()
    local saxpy = weft.kernel{ x = A(f32), y = A(f32), a = f32, function(x, y, a)
      local i = weft.tid()
      y[i] = a * x[i] + y[i]
    end }
    local src = saxpy:source("llvm")
    assert.equal(0, access_checks(saxpy))
    assert.matches("<%d+ x float>", src)
    -- the launch checks sit before the thread loop, in every variant
    assert.is_true(oob_calls(saxpy) >= 2)
    weft.config.mode = "fast"
    local fast = saxpy:source("llvm")
    assert.equal(0, oob_calls(saxpy))
    local vr, vf = select(2, src:gsub("x float>", "")), select(2, fast:gsub("x float>", ""))
    assert.equal(vf, vr)
  end)
end)

describe("bounds checks by mode", function()
  after_each(function() weft.config.mode = "release" end)

  local k = weft.kernel{ x = A(f32), d = i32, function(x, d)
    local i = weft.tid()
    x[i * d] = 1.0 -- computed
  end }

  it("fast mode leaves every check out", function()
    weft.config.mode = "fast"
    assert.equal(0, oob_calls(k))
    assert.equal(0, access_checks(k))
    assert.is_nil(k:source("llvm"):find("wf_cpu_rt_oob", 1, true))
    local x = weft.zeros(4)
    weft.launch(k, 4, { x, 1 }) -- in bounds: runs as usual
    assert.same({ 1, 1, 1, 1 }, x:totable())
  end)

  it("release mode checks a computed index per access, debug mode checks everything", function()
    weft.config.mode = "release"
    assert.is_true(access_checks(k) > 0)
    assert.equal(oob(line_of("-- computed"), 4, 0, 4, "x", "k"), launch_error(k, 4, { weft.zeros(4), 2 }))
    weft.config.mode = "debug"
    assert.equal(oob(line_of("-- computed"), 4, 0, 4, "x", "k"), launch_error(k, 4, { weft.zeros(4), 2 }))
    -- debug mode does not rely on the launch checks: each access has its own
    local t = weft.kernel{ x = A(f32), function(x) x[weft.tid()] = 1.0 end }
    assert.is_true(access_checks(t) > 0)
    weft.config.mode = "release"
    assert.equal(0, access_checks(t))
  end)

  it("compiles each mode apart (the mode is part of the cache key)", function()
    local k2 = weft.kernel{ x = A(f32), function(x)
      local i = weft.tid()
      x[i] = 2.0
    end }
    local x = weft.zeros(2)
    weft.config.mode = "fast"
    weft.launch(k2, 2, { x })
    weft.config.mode = "release"
    assert.matches("index 2 out of bounds", launch_error(k2, 3, { x }), 1, true)
    weft.config.mode = "debug"
    assert.matches("index 2 out of bounds", launch_error(k2, 3, { x }), 1, true)
    assert.equal(3, weft.stats(k2).compiles + weft.stats(k2).disk_hits)
    local keys = {}
    for _, m in ipairs { "fast", "release", "debug" } do
      weft.config.mode = m
      keys[#keys + 1] = internal.core.cpu_compile(k2:_module(),
        internal.mode_opts(internal.mode_index(), { ndim = 1 })).key
    end
    assert.are_not.equal(keys[1], keys[2])
    assert.are_not.equal(keys[2], keys[3])
    assert.are_not.equal(keys[1], keys[3])
  end)

  it("rejects an unknown mode by name", function()
    weft.config.mode = "quick"
    local ok, err = pcall(weft.launch, k, 1, { weft.zeros(1), 0 })
    weft.config.mode = "release"
    assert.is_false(ok)
    assert.matches('weft.config.mode must be "release", "fast" or "debug" (default: $WEFT_MODE), got "quick"',
                   err, 1, true)
  end)

  it("takes its default from WEFT_MODE", function()
    local lib = os.getenv("WEFT_LIB") or ""
    local cmd = "WEFT_MODE=fast WEFT_LIB='" .. lib .. "' luajit -e \"package.path='lua/?.lua;lua/?/init.lua;'"
                .. "..package.path; io.write(require('weft').config.mode)\""
    local p = assert(io.popen(cmd))
    local out = p:read("*a")
    p:close()
    assert.equal("fast", out)
  end)
end)

-- Random kernels of the shapes the pass handles (tid and loop indices with
-- offsets, loops up and down, accesses under ifs, 2-D rows), random array
-- sizes, bounds and launch dims: release mode fails exactly when debug mode
-- does (on the same array), and otherwise computes the same values, as does
-- fast mode.
describe("bounds checks agree with debug mode on random kernels", function()
  after_each(function() weft.config.mode = "release" end)

  local seed = 20261125
  local function rnd(lo, hi)
    seed = (seed * 1103515245 + 12345) % 2147483648
    return lo + seed % (hi - lo + 1)
  end
  local function off(c)
    return c == 0 and "" or c > 0 and (" + " .. c) or (" - " .. -c)
  end

  -- One random kernel source (a function of weft returning the kernel) and
  -- whether it is 2-D.
  local function make()
    local c1, c2, c3 = rnd(-2, 2), rnd(-1, 1), rnd(-1, 1)
    local shape = rnd(1, 5)
    local body
    if shape == 1 then
      body = string.format("y[i%s] = x[i%s]", off(c1), off(c2))
    elseif shape == 2 then
      body = string.format([[local acc = 0.0
      for j = lo, hi do acc = acc + x[j%s] end
      y[i%s] = acc]], off(c1), off(c2))
    elseif shape == 3 then
      body = string.format([[local acc = 0.0
      for j = hi, lo, -1 do
        if j %% 2 == 0 then acc = acc + x[j%s] end
        acc = acc + x[j%s]
      end
      y[i] = acc]], off(c1), off(c3))
    elseif shape == 4 then
      body = string.format([[if i < hi then y[i%s] = x[i%s] end
      for j = lo, hi do
        if j > lo then y[i] = y[i] + x[j%s] end
      end]], off(c2), off(c1), off(c3))
    else
      return string.format([[local weft = ...
      return weft.kernel{ m = weft.array(weft.float32, 2), x = weft.array(weft.float32),
        lo = weft.int32, hi = weft.int32, function(m, x, lo, hi)
          local i, j = weft.tid()
          local row = m[i%s]
          local acc = 0.0
          for k = lo, hi do acc = acc + row[k%s] end
          row[j%s] = acc + x[j]
        end }]], off(c3), off(c1), off(c2)), true
    end
    return [[local weft = ...
    return weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),
      lo = weft.int32, hi = weft.int32, function(x, y, lo, hi)
        local i = weft.tid()
        ]] .. body .. "\n      end }", false
  end

  local function run(mode, k, two_d, dim, sizes, lo, hi)
    weft.config.mode = mode
    local a, b
    if two_d then
      a = weft.zeros({ sizes[1], sizes[2] })
      b = weft.zeros(sizes[3])
      for q = 0, sizes[3] - 1 do b[q] = q + 1 end
    else
      a, b = weft.zeros(sizes[1]), weft.zeros(sizes[2])
      for q = 0, sizes[1] - 1 do a[q] = q + 1 end
    end
    local ok, err = pcall(weft.launch, k, dim, { a, b, lo, hi })
    return ok, tostring(err), two_d and a:totable() or b:totable()
  end

  it("on 150 kernels", function()
    local fails, agree = 0, 0
    for case = 1, 150 do
      local src, two_d = make()
      local k = assert(load(src))(weft)
      local sizes = { rnd(1, 6), rnd(1, 6), rnd(1, 6) }
      local dim = two_d and { rnd(1, 4), rnd(1, 4) } or rnd(1, 7)
      local lo, hi = rnd(-2, 4), rnd(-1, 7)
      local okd, errd, outd = run("debug", k, two_d, dim, sizes, lo, hi)
      local okr, errr, outr = run("release", k, two_d, dim, sizes, lo, hi)
      local what = string.format("case %d: %s\ndim %s sizes %d %d %d lo %d hi %d\ndebug: %s\nrelease: %s",
                                 case, src, type(dim) == "table" and dim[1] .. "x" .. dim[2] or dim,
                                 sizes[1], sizes[2], sizes[3], lo, hi, errd, errr)
      assert.equal(okd, okr, what)
      if okd then
        assert.same(outd, outr, what)
        local okf, _, outf = run("fast", k, two_d, dim, sizes, lo, hi)
        assert.is_true(okf, what)
        assert.same(outd, outf, what)
        agree = agree + 1
      else
        assert.matches("out of bounds for axis %d+ with size %d+ in array '%w+' of kernel", errr)
        fails = fails + 1
      end
    end
    -- both outcomes are well represented
    assert.is_true(fails > 20 and agree > 20, fails .. " failing, " .. agree .. " running")
  end)
end)
