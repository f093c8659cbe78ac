-- Front end of the kernel compiler: Lua kernel source -> typed IR, checked
-- through the IR text and (when the CPU backend is present) by running the
-- kernels against plain Lua references.
local weft, internal = require "weft", require "weft.internal" -- internal: the parts' private table

local f32, i32 = weft.float32, weft.int32
local A = weft.array

local function run(k, n, inputs)
  weft.launch(k, n, inputs)
end

local function close(a, b, tol)
  tol = tol or 1e-5
  return math.abs(a - b) <= tol * math.max(1, math.abs(b))
end

local function assert_close_list(got, want, tol)
  assert.are.equal(#want, #got)
  for i = 1, #want do
    if not close(got[i], want[i], tol) then
      error(string.format("item %d: got %s, want %s", i, tostring(got[i]), tostring(want[i])), 2)
    end
  end
end

describe("kernel front end: IR", function()
  it("lowers saxpy to loads, arithmetic and a store", function()
    local saxpy = weft.kernel{ x = A(f32), y = A(f32), a = f32,
      function(x, y, a)
        local i = weft.tid()
        y[i] = a * x[i] + y[i]
      end }
    local ir = saxpy:ir()
    assert.truthy(ir:find("kernel @saxpy", 1, true))
    assert.truthy(ir:find("tid 0", 1, true))
    assert.truthy(ir:find("load %0", 1, true))
    assert.truthy(ir:find("mul %2", 1, true))
    assert.truthy(ir:find("store %1", 1, true))
  end)

  it("names kernels after the local they are assigned to, or by line", function()
    local my_kernel = weft.kernel{ function() end }
    assert.are.equal("my_kernel", my_kernel.name)
    local ks = { weft.kernel{ function() end } }
    assert.truthy(ks[1].name:match("^kernel_%d+$"))
  end)

  it("records parameters in order, generic ones without a type", function()
    local k = weft.kernel{ b = f32, function(a, b, c) end }
    assert.are.same({ "a", "b", "c" }, { k.params[1].name, k.params[2].name, k.params[3].name })
    assert.is_nil(k.params[1].type)
    assert.are.equal(f32, k.params[2].type)
    assert.is_true(k.generic)
  end)

  it("compiles each signature once (cached module)", function()
    local k = weft.kernel{ x = A(f32), function(x) x[0] = 1 end }
    local m1 = k:_module()
    local m2 = k:_module()
    assert.are.equal(m1, m2)
    local g = weft.kernel{ function(x) x[0] = 1 end }
    local a = g:_module({ A(f32) })
    local b = g:_module({ A(weft.float64) })
    assert.are_not.equal(a, b)
    assert.are.equal(a, g:_module({ A(f32) }))
    assert.truthy(core_ir_has(g, { A(weft.float64) }, "array<f64,1>"))
  end)

  it("number literals adapt to the other operand's type", function()
    local k = weft.kernel{ x = A(weft.float64), n = weft.int64, function(x, n)
      x[n + 1] = x[0] * 2 + 1
    end }
    local ir = k:ir()
    assert.truthy(ir:find("f64 = const 2.0", 1, true))
    assert.truthy(ir:find("i64 = const 1", 1, true))
  end)

  it("inlines weft.func calls", function()
    local sq = weft.func(function(v) return v * v end)
    local k = weft.kernel{ x = A(f32), function(x) x[0] = sq(x[0]) end }
    local ir = k:ir()
    assert.is_nil(ir:match("kernel @k[^}]*call"))
  end)

  it("short-circuit and/or become if regions; c and a or b a select", function()
    local k = weft.kernel{ x = A(f32), n = i32, function(x, n)
      local i = weft.tid()
      if i < n and x[i] > 0 then x[i] = 0 end
      x[0] = (n > 2) and 1.0 or 2.0
    end }
    local ir = k:ir()
    assert.truthy(ir:find("select", 1, true))
    assert.truthy(ir:find(" = if ", 1, true))
  end)

  it("prints IR with WEFT_DUMP-like text through core.ir", function()
    local k = weft.kernel{ x = A(f32), function(x) x[0] = 1 end }
    assert.are.equal(internal.core.ir(k:_module()), k:ir())
  end)

  it("errors for kernels without types for generic parameters", function()
    local k = weft.kernel{ function(x) x[0] = 1 end }
    local ok, err = pcall(function() return k:ir() end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("generic", 1, true))
  end)

  it("stripped bytecode has no source: a clear error", function()
    local fn = load(string.dump(function() end, true))
    local k = weft.kernel{ fn }
    local ok, err = pcall(function() return k:ir() end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("source", 1, true))
  end)

  it("compiles kernels from string chunks", function()
    local chunk = assert(load([[
      local weft = ...
      return weft.kernel{ x = weft.array(weft.float32), function(x)
        x[0] = 42
      end }
    ]], "=(mychunk)"))
    local ok = pcall(chunk, weft)
    -- "=" chunks carry no text: compiling must fail cleanly
    if ok then
      local k = chunk(weft)
      local ok2, err = pcall(function() return k:ir() end)
      assert.is_false(ok2)
      assert.truthy(tostring(err):find("no source", 1, true))
    end
    local chunk2 = assert(load("local weft = ...\nreturn weft.kernel{ x = weft.array(weft.float32), function(x)\n  x[0] = 42\nend }"))
    local k2 = chunk2(weft)
    assert.truthy(k2:ir():find("store", 1, true))
  end)
end)

-- helper used above: IR text of a signature contains s
function core_ir_has(k, types, s)
  return internal.core.ir(k:_module(types)):find(s, 1, true) ~= nil
end

describe("kernel front end: values", function()

  it("arithmetic on floats and ints (idiv truncates, % is Lua's)", function()
    local k = weft.kernel{ a = A(i32), b = A(i32), fo = A(f32), io = A(i32), function(a, b, fo, io)
      local i = weft.tid()
      local x, y = a[i], b[i]
      io[i * 4 + 0] = weft.idiv(x, y)
      io[i * 4 + 1] = x % y
      io[i * 4 + 2] = x * y - 3
      io[i * 4 + 3] = -x + weft.floordiv(x, y)
      local fx = weft.float32(x)
      fo[i * 2 + 0] = fx / 4 + fx ^ 2
      fo[i * 2 + 1] = fx % 3.0
    end }
    local av, bv = { 7, -7, 9, -9, 5 }, { 2, 2, -4, -4, 5 }
    local a, b = weft.array(av, i32), weft.array(bv, i32)
    local fo, io = weft.zeros(10, f32), weft.zeros(20, i32)
    run(k, 5, { a, b, fo, io })
    local wi, wf = {}, {}
    for n = 1, 5 do
      local x, y = av[n], bv[n]
      local q = x / y
      q = q >= 0 and math.floor(q) or math.ceil(q)
      wi[#wi + 1] = q
      wi[#wi + 1] = x % y
      wi[#wi + 1] = x * y - 3
      wi[#wi + 1] = -x + math.floor(x / y)
      wf[#wf + 1] = x / 4 + x ^ 2
      wf[#wf + 1] = x % 3.0
    end
    assert.are.same(wi, io:totable())
    assert_close_list(fo:totable(), wf)
  end)

  it("if/elseif/else, and/or, not, comparisons", function()
    local k = weft.kernel{ x = A(f32), o = A(i32), function(x, o)
      local i = weft.tid()
      local v = x[i]
      local r = 0
      if v < 0 then r = -1 elseif v == 0 then r = 0 elseif v <= 2 then r = 2 else r = 3 end
      if not (v > 1 and v ~= 5) or v >= 10 then r = r + 10 end
      o[i] = r + ((v > 0) and 100 or 200)
    end }
    local xs = { -3, 0, 1.5, 2, 5, 12, 7 }
    local o = weft.zeros(#xs, i32)
    run(k, #xs, { weft.array(xs, f32), o })
    local want = {}
    for n, v in ipairs(xs) do
      local r
      if v < 0 then r = -1 elseif v == 0 then r = 0 elseif v <= 2 then r = 2 else r = 3 end
      if not (v > 1 and v ~= 5) or v >= 10 then r = r + 10 end
      want[n] = r + ((v > 0) and 100 or 200)
    end
    assert.are.same(want, o:totable())
  end)

  it("numeric for (step, negative step), while, repeat, break", function()
    local k = weft.kernel{ n = A(i32), o = A(i32), function(n, o)
      local i = weft.tid()
      local m = n[i]
      local s1 = 0
      for j = 1, m do s1 = s1 + j end
      local s2 = 0
      for j = m, 1, -2 do s2 = s2 + j end
      local s3, c = 0, 0
      while c < m do c = c + 1; s3 = s3 + c * c end
      local s4 = 0
      repeat local t = s4; s4 = s4 + 3 until t + 3 >= m
      local s5 = 0
      for j = 0, 100 do
        if j * j > m then break end
        s5 = s5 + 1
      end
      local s6 = 0
      while true do
        s6 = s6 + 1
        if s6 >= m then break end
      end
      o[i * 6 + 0], o[i * 6 + 1], o[i * 6 + 2] = s1, s2, s3
      o[i * 6 + 3], o[i * 6 + 4], o[i * 6 + 5] = s4, s5, s6
    end }
    local ns = { 0, 1, 5, 10, 17 }
    local o = weft.zeros(#ns * 6, i32)
    run(k, #ns, { weft.array(ns, i32), o })
    local want = {}
    for _, m in ipairs(ns) do
      local s1 = 0
      for j = 1, m do s1 = s1 + j end
      local s2 = 0
      for j = m, 1, -2 do s2 = s2 + j end
      local s3, c = 0, 0
      while c < m do c = c + 1; s3 = s3 + c * c end
      local s4 = 0
      repeat local t = s4; s4 = s4 + 3 until t + 3 >= m
      local s5 = 0
      for j = 0, 100 do
        if j * j > m then break end
        s5 = s5 + 1
      end
      local s6 = 0
      while true do
        s6 = s6 + 1
        if s6 >= m then break end
      end
      for _, v in ipairs { s1, s2, s3, s4, s5, s6 } do want[#want + 1] = v end
    end
    assert.are.same(want, o:totable())
  end)

  it("early return in kernels and returns in funcs", function()
    local sgn = weft.func(function(x)
      if x > 0 then return 1 end
      if x < 0 then return -1 end
      return 0
    end)
    local firstbig = weft.func{ a = A(i32), t = i32, function(a, t)
      for j = 0, #a - 1 do
        if a[j] > t then return j end
      end
      return -1
    end }
    local k = weft.kernel{ x = A(i32), o = A(i32), function(x, o)
      local i = weft.tid()
      o[i] = sgn(x[i]) + 10 * firstbig(x, x[i])
      if x[i] == 3 then return end
      o[i] = o[i] + 1000
    end }
    local xs = { 3, -2, 0, 7, 1 }
    local o = weft.zeros(#xs, i32)
    run(k, #xs, { weft.array(xs, i32), o })
    local want = {}
    for n, v in ipairs(xs) do
      local s = v > 0 and 1 or (v < 0 and -1 or 0)
      local fb = -1
      for j = 1, #xs do
        if xs[j] > v then fb = j - 1; break end
      end
      want[n] = s + 10 * fb + (v == 3 and 0 or 1000)
    end
    assert.are.same(want, o:totable())
  end)

  it("multiple results, generic and overloaded funcs, upvalue constants", function()
    local divmod = weft.func(function(a, b) return weft.idiv(a, b), a % b end)
    local twice = weft.func{ x = f32, function(x) return 2 * x end }
    twice:overload{ x = i32, function(x) return x + x + 1 end }
    local OFFSET = 5
    local SCALE = weft.constant(3)
    local k = weft.kernel{ o = A(i32), f = A(f32), function(o, f)
      local q, r = divmod(17, 5)
      o[0], o[1] = q, r
      o[2] = twice(4)
      f[0] = twice(1.5)
      o[3] = OFFSET * SCALE
    end }
    local o, f = weft.zeros(4, i32), weft.zeros(1, f32)
    run(k, 1, { o, f })
    assert.are.same({ 3, 2, 9, 15 }, o:totable())
    assert.are.same({ 3 }, f:totable())
  end)

  it("vectors, matrices and quaternions", function()
    local k = weft.kernel{ o = A(f32), function(o)
      local a = weft.vec3(1, 2, 3)
      local b = weft.vec3(4, 5, 6)
      local c = weft.cross(a, b)
      o[0], o[1], o[2] = c.x, c.y, c[2]
      o[3] = weft.dot(a, b)
      o[4] = weft.length(weft.vec3(3, 4, 0))
      local n = weft.normalize(weft.vec3(0, 0, 5))
      o[5] = n.z
      local m = weft.mat33(1, 2, 3, 4, 5, 6, 7, 8, 10)
      local mv = m * a
      o[6], o[7], o[8] = mv.x, mv.y, mv.z
      o[9] = weft.determinant(m)
      local mi = weft.inverse(m) * m
      o[10], o[11] = mi[0][0], mi[0][1]
      local s = (a + b) * 2.0 - b / 2
      o[12] = s.y
      local q = weft.quat_from_axis_angle(weft.vec3(0, 0, 1), math.pi / 2)
      local r = weft.quat_rotate(q, weft.vec3(1, 0, 0))
      o[13], o[14] = r.x, r.y
      local v = weft.vec3()
      v.y = 7
      v[2] = 8
      o[15] = v.x + v.y + v.z
      local t = weft.transpose(m)
      o[16] = t[0][2]
      local qq = q * weft.quat_inverse(q)
      o[17] = qq.w
      o[18] = (a == weft.vec3(1, 2, 3)) and 1.0 or 0.0
      local tf = weft.transform(weft.vec3(1, 1, 1), q)
      local tp = weft.transform_point(tf, weft.vec3(1, 0, 0))
      o[19] = tp.y
    end }
    local o = weft.zeros(20, f32)
    run(k, 1, { o })
    local r = o:totable()
    assert_close_list(r, { -3, 6, -3, 32, 5, 1, 14, 32, 53, -3, 1, 0, 11.5, 0, 1, 15, 7, 1, 1, 2 }, 1e-4)
  end)

  it("2-d arrays, views, shape and #", function()
    local rowsum = weft.func(function(row)
      local s = 0.0
      for j = 0, row.shape[0] - 1 do s = s + row[j] end
      return s
    end)
    local k = weft.kernel{ m = A(f32, 2), o = A(f32), function(m, o)
      local i = weft.tid()
      o[i] = rowsum(m[i]) + m[i][0] * 0 + weft.float32(#m * 100 + m.shape[1] * 1000)
    end }
    local m = weft.array({ { 1, 2, 3 }, { 4, 5, 6 } }, f32)
    local o = weft.zeros(2, f32)
    run(k, 2, { m, o })
    assert.are.same({ 6 + 200 + 3000, 15 + 200 + 3000 }, o:totable())
  end)

  it("math builtins and math.* aliases", function()
    local k = weft.kernel{ x = A(f32), o = A(f32), function(x, o)
      local i = weft.tid()
      local v = x[i]
      local b = i * 12
      o[b + 0] = math.sqrt(v) + weft.exp(v * 0.1)
      o[b + 1] = math.sin(v) + weft.cos(v)
      o[b + 2] = weft.atan2(v, 2.0) + math.atan(v)
      o[b + 3] = math.floor(v * 1.5) + weft.ceil(v * 1.5)
      o[b + 4] = weft.round(v * 1.5 - 0.25)
      o[b + 5] = weft.min(v, 2.0) + math.max(v, 3.0)
      o[b + 6] = weft.clamp(v, 1.0, 2.5)
      o[b + 7] = weft.abs(-v) + weft.sign(v - 2)
      o[b + 8] = weft.pow(v, 1.5) + math.log(v + 1)
      o[b + 9] = weft.tanh(v * 0.1) + math.pi
      o[b + 10] = weft.select(v > 2, 10.0, 20.0)
      o[b + 11] = math.huge > v and 1.0 or 0.0
    end }
    local xs = { 0.5, 1, 2.25, 4 }
    local o = weft.zeros(#xs * 12, f32)
    run(k, #xs, { weft.array(xs, f32), o })
    local function round(x) return x >= 0 and math.floor(x + 0.5) or math.ceil(x - 0.5) end
    local want = {}
    for _, v in ipairs(xs) do
      for _, w in ipairs {
        math.sqrt(v) + math.exp(v * 0.1), math.sin(v) + math.cos(v), math.atan2(v, 2) + math.atan(v),
        math.floor(v * 1.5) + math.ceil(v * 1.5), round(v * 1.5 - 0.25), math.min(v, 2) + math.max(v, 3),
        math.min(math.max(v, 1), 2.5), v + (v > 2 and 1 or (v < 2 and -1 or 0)),
        v ^ 1.5 + math.log(v + 1), math.tanh(v * 0.1) + math.pi, v > 2 and 20 or 10, 1,
      } do want[#want + 1] = w end
    end
    assert_close_list(o:totable(), want, 1e-5)
  end)

  it("casts, bit operations and integer types", function()
    local k = weft.kernel{ x = A(weft.int64), o = A(weft.int64), function(x, o)
      local i = weft.tid()
      local v = x[i]
      local v32 = weft.int32(v)
      o[i * 5 + 0] = weft.int64(bit.band(v32, 6))
      o[i * 5 + 1] = weft.int64(bit.bor(v32, 8) + bit.bxor(v32, 3))
      o[i * 5 + 2] = weft.int64(bit.lshift(v32, 2) + bit.rshift(v32, 1))
      o[i * 5 + 3] = v * 3000000000
      o[i * 5 + 4] = weft.int64(weft.float32(v) * 2.5)
    end }
    local xs = { 1, 5, 12 }
    local o = weft.zeros(15, weft.int64)
    run(k, 3, { weft.array(xs, weft.int64), o })
    local want = {}
    for _, v in ipairs(xs) do
      for _, w in ipairs { bit.band(v, 6), bit.bor(v, 8) + bit.bxor(v, 3),
                           bit.lshift(v, 2) + bit.rshift(v, 1), v * 3000000000,
                           (v * 2.5 >= 0) and math.floor(v * 2.5) or math.ceil(v * 2.5) } do
        want[#want + 1] = w
      end
    end
    local got = o:totable()
    for n = 1, #want do got[n] = tonumber(got[n]) end
    assert.are.same(want, got)
  end)

  it("atomics return the old value and accumulate", function()
    local k = weft.kernel{ s = A(f32), c = A(i32), function(s, c)
      local i = weft.tid()
      weft.atomic_add(s, 0, 1.5)
      weft.atomic_max(c, 0, i)
      weft.atomic_min(c, 1, i)
      local old = weft.atomic_add(c, 2, 1)
    end }
    local s, c = weft.zeros(1, f32), weft.array({ 0, 1000, 0 }, i32)
    run(k, 100, { s, c })
    assert.are.same({ 150 }, s:totable())
    assert.are.same({ 99, 0, 100 }, c:totable())
  end)

  it("random numbers: deterministic per seed, in range", function()
    local k = weft.kernel{ o = A(f32), seed = i32, function(o, seed)
      local i = weft.tid()
      local st = weft.rand_init(seed, i)
      local a = weft.randf(st)
      local b = weft.randf(st, 5.0, 6.0)
      o[i * 2] = a
      o[i * 2 + 1] = b
    end }
    local o1, o2 = weft.zeros(64, f32), weft.zeros(64, f32)
    run(k, 32, { o1, 7 })
    run(k, 32, { o2, 7 })
    local r1 = o1:totable()
    assert.are.same(r1, o2:totable())
    local distinct = {}
    for n = 1, 64, 2 do
      assert.is_true(r1[n] >= 0 and r1[n] < 1)
      assert.is_true(r1[n + 1] >= 5 and r1[n + 1] < 6)
      distinct[r1[n]] = true
    end
    local nd = 0
    for _ in pairs(distinct) do nd = nd + 1 end
    assert.is_true(nd > 16)
  end)

  it("generic kernels specialize per argument type", function()
    local k = weft.kernel{ function(x, y)
      local i = weft.tid()
      y[i] = x[i] * 2
    end }
    local a, b = weft.array({ 1, 2 }, f32), weft.zeros(2, f32)
    run(k, 2, { a, b })
    assert.are.same({ 2, 4 }, b:totable())
    local c, d = weft.array({ 3, 4 }, weft.float64), weft.zeros(2, weft.float64)
    run(k, 2, { c, d })
    assert.are.same({ 6, 8 }, d:totable())
  end)
end)
