-- Front end: a local holding an untyped number (`local v = 0`) stays
-- untyped when it is assigned untyped numbers (`v = v + 0.5`, `v = 2`) and
-- when an `if` merges untyped numbers into it (a weak conditional, like
-- `c and 1 or 0`), so it takes the type of the context that uses it. A loop
-- must carry such a local as a typed value: assigned inside a loop it was
-- declared outside of, it keeps its default type (int32, or float32), and a
-- mismatch later is a positioned error that says so.
local weft = require "weft"

local A = weft.array
local i32, f32, f64 = weft.int32, weft.float32, weft.float64

local H = dofile("spec/helpers/front.lua")
local f32of, compile_error = H.f32of, H.compile_error
local line_of = H.line_finder("spec/front_untyped_locals_spec.lua") -- the line holding a marker

local xs = { 3, -1.5, 0, 0.7, 2.5, -4 }

describe("assigning untyped numbers to an untyped local", function()
  it("keeps it untyped: acc = acc + 0.1 computes in float64 with a float64 operand", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local acc = 0
      acc = acc + 0.1
      acc = acc + 0.2
      y[i] = acc * x[i]
    end }
    local y = weft.zeros(#xs, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do
      assert.are.equal((0 + 0.1 + 0.2) * x, y[j - 1]) -- exact: doubles throughout
    end
    assert.is_nil(k:ir():find("f32", 1, true))
  end)

  it("v = 2 after local v = 0 stores 2.0 into a float64 array", function()
    local k = weft.kernel{ y = A(f64), function(y)
      local i = weft.tid()
      local v = 0
      v = 2
      y[i] = v
    end }
    local y = weft.full(3, -7, f64)
    weft.launch(k, 3, { y })
    assert.are.same({ 2, 2, 2 }, y:totable())
    assert.is_nil(k:ir():find("i32 = const 2", 1, true))
  end)

  it("adapts to float32 and int32 uses of the same local", function()
    local k = weft.kernel{ a = A(f32), b = A(i32), function(a, b)
      local i = weft.tid()
      local v = 1
      v = v * 3
      local w = 0.5
      w = w + 0.1
      a[i] = w
      b[i] = v
    end }
    local a, b = weft.zeros(2, f32), weft.zeros(2, i32)
    weft.launch(k, 2, { a, b })
    assert.are.same({ f32of(0.5 + 0.1), f32of(0.5 + 0.1) }, a:totable())
    assert.are.same({ 3, 3 }, b:totable())
  end)

  it("keeps a weak conditional assigned to it weak", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local v = 0
      v = (x[i] > 0) and 0.1 or 0.2
      v = v * 3
      y[i] = v
    end }
    local y = weft.zeros(#xs, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do assert.are.equal(((x > 0) and 0.1 or 0.2) * 3, y[j - 1]) end
  end)

  it("swaps untyped locals (multiple assignment) and they still adapt", function()
    local k = weft.kernel{ y = A(f64), function(y)
      local a, b = 0.25, 2
      a, b = b, a
      y[0], y[1] = a, b
    end }
    local y = weft.zeros(2, f64)
    weft.launch(k, 1, { y })
    assert.are.same({ 2, 0.25 }, y:totable())
  end)

  it("a typed value still gives the local its type", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local v = 0
      v = x[i]
      v = v + 1
      y[i] = v
    end }
    local y = weft.zeros(#xs, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do assert.are.equal(x + 1, y[j - 1]) end
  end)
end)

describe("if merging untyped numbers into an untyped local", function()
  it("gives 1.0/0.0 stored into a float64 array, with no int32 and no cast", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local v = 0
      if x[i] > 0 then v = 1 end
      y[i] = v
    end }
    local y = weft.full(#xs, -7, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do assert.are.equal(x > 0 and 1 or 0, y[j - 1]) end
    local ir = k:ir()
    assert.is_nil(ir:find("i32 = select", 1, true))
    assert.is_nil(ir:find("cast", 1, true))
  end)

  -- v for x, as the elseif chain of the next tests computes it
  local function chain(x)
    if x > 2 then return 0.1 elseif x > 0 then return 2 elseif x < -2 then return -3 end
    return 0.5
  end

  it("elseif/else chains into float64 (exact doubles)", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local v = 0.5
      if x[i] > 2 then v = 0.1 elseif x[i] > 0 then v = 2 elseif x[i] < -2 then v = -3 end
      y[i] = v
    end }
    local y = weft.zeros(#xs, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do assert.are.equal(chain(x), y[j - 1]) end
    assert.is_nil(k:ir():find("cast", 1, true))
  end)

  it("elseif/else chains into float32 give float32 values", function()
    local k = weft.kernel{ x = A(f64), y = A(f32), function(x, y)
      local i = weft.tid()
      local v = 0.5
      if x[i] > 2 then v = 0.1 elseif x[i] > 0 then v = 2 elseif x[i] < -2 then v = -3 else v = 0.5 end
      y[i] = v
    end }
    local y = weft.zeros(#xs, f32)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do assert.are.equal(f32of(chain(x)), y[j - 1]) end
    local ir = k:ir()
    assert.is_nil(ir:find("f64 = select", 1, true))
    assert.is_nil(ir:find("cast", 1, true))
  end)

  it("elseif/else chains into int32 give int32 values", function()
    local k = weft.kernel{ x = A(f64), y = A(i32), function(x, y)
      local i = weft.tid()
      local v = 0
      if x[i] > 2 then v = 10 elseif x[i] > 0 then v = 20 elseif x[i] < -2 then v = -30 else v = 7 end
      y[i] = v
    end }
    local y = weft.zeros(#xs, i32)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do
      local want = x > 2 and 10 or x > 0 and 20 or x < -2 and -30 or 7
      assert.are.equal(want, y[j - 1])
    end
    assert.is_nil(k:ir():find("f64 = select", 1, true))
  end)

  it("the merged local adapts in arithmetic with a float64 operand", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local v = 0
      if x[i] > 0 then v = 0.1 else v = v - 0.2 end
      y[i] = v * x[i] + 0.1
    end }
    local y = weft.zeros(#xs, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do
      local v = x > 0 and 0.1 or (0 - 0.2)
      assert.are.equal(v * x + 0.1, y[j - 1])
    end
  end)

  it("nested ifs and conditionals made inside a branch", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), b = A(i32), function(x, y, b)
      local i = weft.tid()
      local v = 1
      if x[i] > 0 then
        if x[i] > 2.6 then v = 0.25 end
        v = v + 1
      else
        v = (x[i] < -2) and 7 or 9 -- its condition lives in the branch
      end
      y[i] = v
      local n = 0
      if x[i] ~= 0 then n = (x[i] > 1) and 4 or 5 end
      b[i] = n * 2
    end }
    local y, b = weft.zeros(#xs, f64), weft.zeros(#xs, i32)
    weft.launch(k, #xs, { A(xs, f64), y, b })
    for j, x in ipairs(xs) do
      local v
      if x > 0 then v = (x > 2.6 and 0.25 or 1) + 1 else v = (x < -2) and 7 or 9 end
      assert.are.equal(v, y[j - 1])
      assert.are.equal(x ~= 0 and ((x > 1) and 4 or 5) * 2 or 0, b[j - 1])
    end
  end)

  it("a long run of ifs stays exact (large merges are carried as float64)", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), b = A(i32), function(x, y, b)
      local i = weft.tid()
      local v = 0
      if x[i] > -5 then v = v + 1 end
      if x[i] > -4 then v = v + 1 end
      if x[i] > -3 then v = v * 2 end
      if x[i] > -2 then v = v + 1 end
      if x[i] > -1 then v = v * 2 end
      if x[i] > 0 then v = v + 1 end
      if x[i] > 0.5 then v = v * 2 end
      if x[i] > 1 then v = v + 1 end
      if x[i] > 2 then v = v * 2 end
      if x[i] > 2.6 then v = v + 1 end
      if x[i] > 2.7 then v = v * 2 end
      if x[i] > 2.8 then v = v + 1 end
      b[i] = v
      if x[i] > 2.9 then v = v + 0.5 end
      y[i] = v
    end }
    local y, b = weft.zeros(#xs, f64), weft.zeros(#xs, i32)
    weft.launch(k, #xs, { A(xs, f64), y, b })
    local steps = { { -5, "+" }, { -4, "+" }, { -3, "*" }, { -2, "+" }, { -1, "*" }, { 0, "+" },
                    { 0.5, "*" }, { 1, "+" }, { 2, "*" }, { 2.6, "+" }, { 2.7, "*" },
                    { 2.8, "+" } }
    for j, x in ipairs(xs) do
      local v = 0
      for _, s in ipairs(steps) do
        if x > s[1] then v = s[2] == "+" and v + 1 or v * 2 end
      end
      local int = v
      if x > 2.9 then v = v + 0.5 end
      assert.are.equal(v, y[j - 1])
      assert.are.equal(int, b[j - 1])
    end
  end)

  it("a typed branch gives the local its type (the other branch's number adapts)", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local v = 0
      if x[i] > 0 then v = 0.5 else v = x[i] end
      y[i] = v
    end }
    local y = weft.zeros(#xs, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do assert.are.equal(x > 0 and 0.5 or x, y[j - 1]) end
  end)

  it("a merged number that is not always an integer cannot be stored as int32", function()
    local k = weft.kernel{ x = A(f64), b = A(i32), function(x, b)
      local i = weft.tid()
      local v = 0
      if x[i] > 0 then v = 0.5 end
      b[i] = v -- MARK-int-store
    end }
    local err = compile_error(k)
    assert.truthy(err)
    assert.truthy(err:find("front_untyped_locals_spec.lua:" .. line_of("MARK-int-store") .. ":", 1, true), err)
    assert.truthy(err:find("0.5", 1, true), err)
  end)

  it("a bool in one branch and a number in the other is a positioned error", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local v = 0
      if x[i] > 0 then v = true end -- MARK-bool-if
      y[i] = 1
    end }
    local err = compile_error(k)
    assert.truthy(err)
    assert.truthy(err:find("front_untyped_locals_spec.lua:" .. line_of("MARK-bool-if") .. ":", 1, true), err)
    assert.truthy(err:find("local 'v'", 1, true), err)
  end)
end)

describe("untyped locals and loops", function()
  it("a local declared outside a loop and counted in it is carried as int32: storing it into a float64 array is a positioned error naming the loop", function()
    local k = weft.kernel{ y = A(f64), function(y)
      local i = weft.tid()
      local n = 0
      for j = 0, 2 do n = n + 1 end -- MARK-loop
      y[i] = n -- MARK-loop-store
    end }
    local err = compile_error(k)
    assert.truthy(err)
    assert.truthy(err:find("front_untyped_locals_spec.lua:" .. line_of("MARK-loop-store") ..
                           ": expected float64, got int32", 1, true), err)
    assert.truthy(err:find("local 'n'", 1, true), err)
    assert.truthy(err:find("loop at line " .. line_of("MARK-loop") .. ",", 1, true), err)
    assert.truthy(err:find("local n = weft.float64(0)", 1, true), err)
  end)

  it("the same error in arithmetic after a while loop names the loop", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local s = 0.5
      while s < 4 do s = s * 2 end -- MARK-while
      y[i] = s * x[i] -- MARK-while-use
    end }
    local err = compile_error(k)
    assert.truthy(err)
    assert.truthy(err:find("front_untyped_locals_spec.lua:" .. line_of("MARK-while-use") ..
                           ": cannot multiply float32 and float64", 1, true), err)
    assert.truthy(err:find("loop at line " .. line_of("MARK-while") .. ",", 1, true), err)
    assert.truthy(err:find("local s = weft.float64(0.5)", 1, true), err)
  end)

  it("the counted local works where its default type fits, and with a typed declaration", function()
    local k = weft.kernel{ y = A(f64), b = A(i32), function(y, b)
      local i = weft.tid()
      local n = 0
      for j = 0, 2 do n = n + 1 end
      b[i] = n
      local m = weft.float64(0)
      for j = 0, 2 do m = m + 1 end
      y[i] = m
    end }
    local y, b = weft.zeros(2, f64), weft.zeros(2, i32)
    weft.launch(k, 2, { y, b })
    assert.are.same({ 3, 3 }, y:totable())
    assert.are.same({ 3, 3 }, b:totable())
  end)

  it("a local declared inside a loop body stays untyped there", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      for j = 0, 2 do
        local v = 0
        if x[i] > weft.float64(j) then v = 1 end
        v = v + 0.1
        y[i * 3 + j] = v
      end
    end }
    local y = weft.zeros(#xs * 3, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    for jx, x in ipairs(xs) do
      for j = 0, 2 do assert.are.equal((x > j and 1 or 0) + 0.1, y[(jx - 1) * 3 + j]) end
    end
  end)

  it("an untyped local accumulating a float64 value in a loop is float64", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local acc = 0
      for j = 1, 3 do acc = acc + x[i] * 0.1 end
      y[i] = acc
    end }
    local y = weft.zeros(#xs, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do assert.are.equal(0 + x * 0.1 + x * 0.1 + x * 0.1, y[j - 1]) end
  end)
end)
