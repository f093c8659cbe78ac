-- Front end: conditionals of literals take the type of their context,
-- print shows bools as true/false, and nested loops lower correctly (and
-- once per probe, not twice per nesting level).
local weft = require "weft"

local A = weft.array
local i32, f32, f64 = weft.int32, weft.float32, weft.float64

local H = dofile("spec/helpers/front.lua")
local f32of, compile_error = H.f32of, H.compile_error
local line_of = H.line_finder("spec/front_fixes_spec.lua") -- the line holding a marker

describe("conditional literals (c and x or y)", function()
  local xs = { 3, -1.5, 0, 0.7 }

  it("store exactly into a float64 array", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      y[i] = (x[i] > 0) and 1 or 0
    end }
    local y = weft.full(#xs, -7, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    assert.are.same({ 1, 0, 0, 1 }, y:totable())
    -- no int32 select and no conversion: float64 constants
    local ir = k:ir()
    assert.is_nil(ir:find("i32 = select", 1, true))
    assert.is_nil(ir:find("cast", 1, true))
    assert.truthy(ir:find("f64 = select", 1, true))
  end)

  it("keep float64 precision through a local and arithmetic", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), z = A(f64), function(x, y, z)
      local i = weft.tid()
      local s = (x[i] > 0) and 0.1 or 0.2
      y[i] = s * x[i]
      z[i] = x[i] * ((x[i] > 0) and 0.1 or 0.2) + 1
    end }
    local y, z = weft.zeros(#xs, f64), weft.zeros(#xs, f64)
    weft.launch(k, #xs, { A(xs, f64), y, z })
    for j, x in ipairs(xs) do
      local s = (x > 0) and 0.1 or 0.2
      assert.are.equal(s * x, y[j - 1]) -- exact: 0.1 as a double
      assert.are.equal(x * s + 1, z[j - 1])
    end
  end)

  it("adapt to float32, int32 and uint8 stores", function()
    local k = weft.kernel{ x = A(f64), a = A(f32), b = A(i32), c = A(weft.uint8),
                           function(x, a, b, c)
      local i = weft.tid()
      local w = (x[i] > 0) and 3 or -2
      a[i] = (x[i] > 0) and 0.1 or 0.2
      b[i] = w
      c[i] = (x[i] > 0) and 200 or 7
    end }
    local a, b, c = weft.zeros(#xs, f32), weft.zeros(#xs, i32), weft.zeros(#xs, weft.uint8)
    weft.launch(k, #xs, { A(xs, f64), a, b, c })
    for j, x in ipairs(xs) do
      assert.are.equal(f32of((x > 0) and 0.1 or 0.2), a[j - 1])
      assert.are.equal((x > 0) and 3 or -2, b[j - 1])
      assert.are.equal((x > 0) and 200 or 7, c[j - 1])
    end
  end)

  it("fold arithmetic, negation and comparisons with literals leaf by leaf", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local c = x[i] > 0
      local w = (c and 1 or 2) * 0.1
      y[i * 4] = w
      y[i * 4 + 1] = -(c and 0.3 or 0.7) + 0.05
      local v = c and 0.1 or 0.2
      y[i * 4 + 2] = (v == 0.1) and 1 or 0
      y[i * 4 + 3] = 1 / (c and 3 or 7)
    end }
    local y = weft.zeros(#xs * 4, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do
      local c = x > 0
      local b = (j - 1) * 4
      assert.are.equal((c and 1 or 2) * 0.1, y[b])
      assert.are.equal(-(c and 0.3 or 0.7) + 0.05, y[b + 1])
      assert.are.equal(c and 1 or 0, y[b + 2])
      assert.are.equal(1 / (c and 3 or 7), y[b + 3])
    end
  end)

  it("nest, and work through weft.select, casts and typed weft.func parameters", function()
    local half = weft.func{ v = f64, function(v) return v * 0.5 end }
    local k = weft.kernel{ x = A(f64), y = A(f64), n = i32, function(x, y, n)
      local i = weft.tid()
      local c1, c2 = x[i] > 0, x[i] > 1
      y[i * 5] = c1 and (c2 and 0.1 or 0.2) or 0.3
      y[i * 5 + 1] = weft.select(c1, 0.2, 0.1) -- Warp order: if_false, if_true
      y[i * 5 + 2] = weft.float64(c1 and 0.1 or 0.2)
      y[i * 5 + 3] = weft.float64(weft.int32(c1 and 2.7 or -1.5))
      y[i * 5 + 4] = half(c2 and 0.1 or 0.7)
    end }
    local y = weft.zeros(#xs * 5, f64)
    weft.launch(k, #xs, { A(xs, f64), y, 0 })
    for j, x in ipairs(xs) do
      local c1, c2 = x > 0, x > 1
      local b = (j - 1) * 5
      assert.are.equal(c1 and (c2 and 0.1 or 0.2) or 0.3, y[b])
      assert.are.equal(c1 and 0.1 or 0.2, y[b + 1])
      assert.are.equal(c1 and 0.1 or 0.2, y[b + 2])
      assert.are.equal(c1 and 2 or -1, y[b + 3])
      assert.are.equal((c2 and 0.1 or 0.7) * 0.5, y[b + 4])
    end
  end)

  it("adapt when the branches must be evaluated lazily", function()
    -- a branch that reads memory is evaluated only when chosen (an if)
    local k = weft.kernel{ x = A(f64), y = A(f64), a = A(f32), b = A(i32), n = i32,
                           function(x, y, a, b, n)
      local i = weft.tid()
      local j = i + 1
      local v = (j < n) and (x[j] > 0 and 0.1 or 0.2) or 0.3
      y[i * 4] = v
      a[i * 3] = v
      b[i * 3] = (j < n) and (x[j] > 0 and 4 or 5) or 6
      y[i * 4 + 1] = (j < n) and (10 % 4) or 0.25 -- '%' is evaluated lazily too
      -- arithmetic and comparisons with literals keep adapting
      y[i * 4 + 2] = -v * 3
      a[i * 3 + 1] = -v * 3
      y[i * 4 + 3] = (v == 0.3) and 1 or 0
      b[i * 3 + 1] = (v < 0.15) and 1 or 0
      a[i * 3 + 2] = weft.float32(v)
      b[i * 3 + 2] = weft.int32(v * 20)
    end }
    local n = #xs
    local y, a, b = weft.zeros(n * 4, f64), weft.zeros(n * 3, f32), weft.zeros(n * 3, i32)
    weft.launch(k, n, { A(xs, f64), y, a, b, n })
    for i = 0, n - 1 do
      local j = i + 1
      local v = (j < n) and (xs[j + 1] > 0 and 0.1 or 0.2) or 0.3
      assert.are.equal(v, y[i * 4])
      assert.are.equal(f32of(v), a[i * 3])
      assert.are.equal((j < n) and (xs[j + 1] > 0 and 4 or 5) or 6, b[i * 3])
      assert.are.equal((j < n) and (10 % 4) or 0.25, y[i * 4 + 1])
      assert.are.equal(-v * 3, y[i * 4 + 2])
      assert.are.equal(f32of(-f32of(v) * 3), a[i * 3 + 1]) -- done in float32
      assert.are.equal((v == 0.3) and 1 or 0, y[i * 4 + 3])
      assert.are.equal((v < 0.15) and 1 or 0, b[i * 3 + 1])
      assert.are.equal(f32of(v), a[i * 3 + 2])
      assert.are.equal(math.floor(v * 20), b[i * 3 + 2])
    end
  end)

  it("are carried through loops and branches at the type they meet", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local s = (x[i] > 0) and 0.1 or 1
      for j = 1, 3 do
        s = s + x[i] * weft.float64(j)
      end
      local t = (x[i] > 0) and 0.5 or 0.25
      if x[i] > 1 then t = x[i] end
      y[i * 2], y[i * 2 + 1] = s, t
    end }
    local y = weft.zeros(#xs * 2, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do
      local s = (x > 0) and 0.1 or 1
      for m = 1, 3 do s = s + x * m end
      local t = (x > 0) and 0.5 or 0.25
      if x > 1 then t = x end
      assert.are.equal(s, y[(j - 1) * 2])
      assert.are.equal(t, y[(j - 1) * 2 + 1])
    end
  end)

  it("are differentiated as constants", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local s = (x[i] > 0) and 0.5 or 3
      y[i] = x[i] * s + ((x[i] > 1) and 1 or 0)
    end }
    local x = A({ 2, -1 }, f64, { requires_grad = true })
    local y = weft.zeros(2, f64, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 2, { x }, { outputs = { y } }) end)
    tape:backward{ grads = { [y] = weft.ones(2, f64) } }
    assert.are.same({ 2, -3 }, y:totable())
    assert.are.same({ 0.5, 3 }, x.grad:totable())
  end)

  it("keep their default types (int32, float32) where nothing asks for one", function()
    local k = weft.kernel{ x = A(f64), function(x)
      local i = weft.tid()
      local a = (x[i] > 0) and 1 or 0
      local b = (x[i] > 0) and 0.5 or 1
      print(a, b)
    end }
    local ir = k:ir()
    assert.truthy(ir:find("i32 = select", 1, true))
    assert.truthy(ir:find("f32 = select", 1, true))
  end)

  it("give clear errors at the line of the use", function()
    local k1 = weft.kernel{ x = A(f64), b = A(i32), function(x, b)
      local i = weft.tid()
      b[i] = (x[i] > 0) and 0.5 or 1 -- MARK-int-store
    end }
    local err = compile_error(k1)
    assert.truthy(err)
    assert.truthy(err:find("front_fixes_spec.lua:" .. line_of("MARK-int-store") ..
      ": cannot use the number 0.5 as int32", 1, true), err)

    local k2 = weft.kernel{ x = A(f64), b = A(weft.bool), function(x, b)
      local i = weft.tid()
      b[i] = (x[i] > 0) and 1 or 0 -- MARK-bool-store
    end }
    err = compile_error(k2)
    assert.truthy(err:find("front_fixes_spec.lua:" .. line_of("MARK-bool-store") ..
      ": cannot use a number as bool", 1, true), err)

    local k3 = weft.kernel{ x = A(f64), function(x)
      local i = weft.tid()
      if (x[i] > 0) and 1 or 0 then -- MARK-cond
        x[i] = 1
      end
    end }
    err = compile_error(k3)
    assert.truthy(err:find("front_fixes_spec.lua:" .. line_of("MARK-cond") ..
      ": if condition must be a bool, got a number", 1, true), err)

    local k4 = weft.kernel{ x = A(f64), function(x)
      local i = weft.tid()
      x[(x[i] > 0) and 1.5 or 0] = 1 -- MARK-index
    end }
    err = compile_error(k4)
    assert.truthy(err:find("front_fixes_spec.lua:" .. line_of("MARK-index") ..
      ": index must be an integer", 1, true), err)

    local k5 = weft.kernel{ x = A(f64), b = A(i32), n = i32, function(x, b, n)
      local i = weft.tid()
      b[i] = (i + 1 < n) and (x[i + 1] > 0 and 0.5 or 1) or 2 -- MARK-lazy-int
    end }
    err = compile_error(k5)
    assert.truthy(err:find("front_fixes_spec.lua:" .. line_of("MARK-lazy-int") ..
      ": cannot use a number that is not always an integer as int32", 1, true), err)
  end)
end)

describe("print in kernels", function()
  local run_child = dofile("spec/helpers/run_child.lua")

  it("shows bools as true and false, like Lua's print", function()
    local out = run_child([[
      local weft = require "weft"
      local P = weft.struct{ {"ok", weft.bool}, {"m", weft.float32} }
      local k = weft.kernel{ x = weft.array(weft.float32), function(x)
        local i = weft.tid()
        print("flags", i == 0, i ~= 0, x[i] > 1)
        print(not (i == 0))
        print("%d|%5.1f", i == 0, x[i])  -- an explicit %d still prints 1 or 0
        print(P{ ok = true, m = 2.5 })
      end }
      weft.launch(k, 1, { weft.array({ 1.5 }, weft.float32) })
      io.stdout:flush()
    ]])
    assert.are.equal(
      "flags\ttrue\tfalse\ttrue\n" ..
      "false\n" ..
      "1|  1.5\n" ..
      "[true, 2.5]\n", out)
  end)

  it("takes %s as Lua's tostring does: any value as print shows it, strings as they are", function()
    local out = run_child([[
      local weft = require "weft"
      local k = weft.kernel{ x = weft.array(weft.float32), function(x)
        local i = weft.tid()
        print("i=%s x=%s ok=%s v=%s s=%s 100%%", i, x[i], x[i] > 1.0, weft.vec3(1, 2, 3), "a%d")
      end }
      weft.launch(k, 1, { weft.array({ 1.5 }, weft.float32) })
      io.stdout:flush()
    ]])
    assert.are.equal("i=0 x=1.5 ok=true v=[1, 2, 3] s=a%d 100%\n", out)
    local bad = weft.kernel{ x = A(f32), function(x)
      print("%5s", x[weft.tid()]) -- MARK-pct-s
    end }
    local err = compile_error(bad)
    assert.truthy(err:find("front_fixes_spec.lua:" .. line_of("MARK-pct-s")
      .. ": print: '%s' takes no flags, width or precision here", 1, true), err)
    -- the CUDA C prints the same (run on the host)
    local k = weft.kernel{ x = A(f32), function(x)
      local i = weft.tid()
      print("x=%s ok=%s", x[i], x[i] > 1.0)
    end }
    local shim = dofile("tests/cuda/shim.lua")
    if shim.available() then
      assert.are.equal("x=1.5 ok=true\n", shim.run(weft, k, 1, { A({ 1.5 }, f32) }))
    end
  end)

  it("emits the same text for CUDA", function()
    local k = weft.kernel{ x = A(f32), function(x)
      local i = weft.tid()
      print("flags", i == 0, x[i])
    end }
    local src = k:source("cuda")
    local call = src:match('printf%("flags[^\n]*')
    assert.truthy(call, src)
    assert.truthy(call:find('"flags\\t%s\\t%g\\n"', 1, true), call)
    assert.truthy(call:find('? "true" : "false"', 1, true), call)
    -- the emitted CUDA C run on the host prints what the cpu backend does
    local shim = dofile("tests/cuda/shim.lua")
    if shim.available() then
      local out = shim.run(weft, k, 2, { A({ 1.5, -2 }, f32) })
      local lines = {}
      for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
      table.sort(lines) -- threads may print in any order
      assert.are.same({ "flags\tfalse\t-2", "flags\ttrue\t1.5" }, lines)
    end
  end)
end)

describe("nested loops", function()
  it("give the values of plain Lua at depth 6 with carried accumulators", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), c = A(i32), function(x, y, c)
      local i = weft.tid()
      local s = 0.0
      local n = 0
      for a = 1, 2 do
        local t = 0
        for b = 0, 2 do
          for d = 1, 2 do
            for e = 0, 1 do
              t = t + 1
              for f = 1, 3 do
                for g = 0, 1 do
                  s = s + x[i] * weft.float64(a + b * 2 + d * 3 + e * 5 + f * 7 + g * 11)
                  n = n + 1
                end
              end
            end
          end
        end
        s = s + weft.float64(t)
      end
      y[i] = s
      c[i] = n
    end }
    local xs = { 0.1, -2, 3.25 }
    local y, c = weft.zeros(#xs, f64), weft.zeros(#xs, i32)
    weft.launch(k, #xs, { A(xs, f64), y, c })
    for j, x in ipairs(xs) do
      local s, n = 0.0, 0
      for a = 1, 2 do
        local t = 0
        for b = 0, 2 do
          for d = 1, 2 do
            for e = 0, 1 do
              t = t + 1
              for f = 1, 3 do
                for g = 0, 1 do
                  s = s + x * (a + b * 2 + d * 3 + e * 5 + f * 7 + g * 11)
                  n = n + 1
                end
              end
            end
          end
        end
        s = s + t
      end
      assert.are.equal(s, y[j - 1])
      assert.are.equal(n, c[j - 1])
    end
  end)

  it("handle break, while, repeat and early return at depth 7", function()
    local inner = weft.func{ m = i32, function(m)
      local r = 0
      for a = 0, 3 do
        for b = 0, 3 do
          for d = 0, 3 do
            if a + b + d == m then return a * 100 + b * 10 + d end
            r = r + 1
          end
        end
      end
      return -r
    end }
    local k = weft.kernel{ x = A(i32), o = A(i32), function(x, o)
      local i = weft.tid()
      local m = x[i]
      local acc = 0
      for a = 1, 3 do
        local w = 0
        while w < a do
          w = w + 1
          local r = 0
          repeat
            r = r + 1
            for b = 1, 4 do
              if b > m then break end
              for d = 0, 1 do
                acc = acc + b + d
              end
            end
          until r >= 2
        end
      end
      o[i * 2] = acc
      o[i * 2 + 1] = inner(m)
    end }
    local function ref(m)
      local acc = 0
      for a = 1, 3 do
        local w = 0
        while w < a do
          w = w + 1
          local r = 0
          repeat
            r = r + 1
            for b = 1, 4 do
              if b > m then break end
              for d = 0, 1 do acc = acc + b + d end
            end
          until r >= 2
        end
      end
      local function inner(mm)
        local r = 0
        for a = 0, 3 do
          for b = 0, 3 do
            for d = 0, 3 do
              if a + b + d == mm then return a * 100 + b * 10 + d end
              r = r + 1
            end
          end
        end
        return -r
      end
      return { acc, inner(m) }
    end
    local ms = { 0, 2, 5, 9, 20 }
    local o = weft.zeros(#ms * 2, i32)
    weft.launch(k, #ms, { A(ms, i32), o })
    local want = {}
    for _, m in ipairs(ms) do
      for _, v in ipairs(ref(m)) do want[#want + 1] = v end
    end
    assert.are.same(want, o:totable())
  end)

  it("compile a depth-18 nest with literal accumulators at every level", function()
    -- each level starts a literal accumulator that the next level carries
    local src = { "return function(weft, A, f64)\n",
                  "return weft.kernel{ y = A(f64), function(y)\n",
                  "local i = weft.tid()\nlocal s0 = 0\n" }
    local D = 18 -- past 16 levels the cost estimate (16 per level) saturates
    for d = 1, D do
      src[#src + 1] = ("for j%d = 0, 1 do\nlocal s%d = 0\n"):format(d, d)
    end
    src[#src + 1] = ("s%d = s%d + y[i] + 1\n"):format(D, D)
    for d = D, 1, -1 do
      src[#src + 1] = ("s%d = s%d + s%d\nend\n"):format(d - 1, d - 1, d)
    end
    src[#src + 1] = "y[i] = s0\nend }\nend\n"
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(table.concat(src))
    f:close()
    local k = dofile(path)(weft, A, f64)
    local y = weft.full(2, 0.5, f64)
    weft.launch(k, 2, { y })
    os.remove(path)
    -- every innermost iteration adds 1.5; there are 2^18 of them
    assert.are.same({ 1.5 * 2 ^ D, 1.5 * 2 ^ D }, y:totable())
  end)

  it("carry a local that a body assigns from another carried local", function()
    -- a = b when both held one value before the loop: the probe sees no
    -- change of a, the real body does
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local a = x[i]
      local b = a
      for _ = 1, 3 do
        for _ = 1, 2 do
          a = b
          b = b + 1
        end
      end
      local c = x[i]
      local d = c
      for _ = 1, 3 do
        c = d
        d = d + 2
      end
      y[i * 4], y[i * 4 + 1], y[i * 4 + 2], y[i * 4 + 3] = a, b, c, d
    end }
    local y = weft.zeros(8, f64)
    weft.launch(k, 2, { A({ 10, -1 }, f64), y })
    assert.are.same({ 15, 16, 14, 16, 4, 5, 3, 5 }, y:totable())
  end)
end)
