-- Views that share an array's memory: a:reshape, a:flatten, a:transpose,
-- a:contiguous; kernels read them through their strides.
local weft = require "weft"

describe("array views", function()
  local function seq(n) local t = {} for i = 1, n do t[i] = i end return t end

  it("reshape keeps the row-major order and shares the memory", function()
    local a = weft.array(seq(6), weft.float32)
    local b = a:reshape({ 2, 3 })
    assert.are.same({ 2, 3 }, b.shape)
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, b:totable())
    b[1][2] = 50
    assert.are.equal(50, a[5])
    assert.are.same({ 3, 2 }, a:reshape({ -1, 2 }).shape)
    assert.are.same({ 1, 2, 3, 1 }, a:reshape({ 1, 2, 3, 1 }).shape)
    assert.are.same({ 1, 2, 3, 4, 5, 50 }, b:flatten():totable())
    assert.are.same({ 6 }, a:reshape(6).shape)
  end)

  it("transpose permutes axes; kernels see the strides", function()
    local m = weft.array({ { 1, 2, 3 }, { 4, 5, 6 } }, weft.float64)
    local t = m:transpose()
    assert.are.same({ 3, 2 }, t.shape)
    assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, t:totable())
    assert.is_false(t.is_contiguous)
    local k = weft.kernel{ a = weft.array(weft.float64, 2), o = weft.array(weft.float64, 2),
      function(a, o)
        local i, j = weft.tid()
        o[i][j] = a[i][j] * 10.0 + weft.float64(i)
      end }
    local o = weft.zeros({ 3, 2 }, weft.float64)
    weft.launch(k, { 3, 2 }, { t, o })
    assert.are.same({ { 10, 40 }, { 21, 51 }, { 32, 62 } }, o:totable())
    local x = weft.zeros({ 2, 3, 4 }, weft.int32)
    assert.are.same({ 4, 2, 3 }, x:transpose({ 2, 0, 1 }).shape)
    -- contiguous copies a strided view, and returns a contiguous array itself
    local c = t:contiguous()
    assert.is_true(c.is_contiguous)
    assert.are.same({ 1, 4, 2, 5, 3, 6 }, c:flatten():totable())
    assert.are.equal(m, m:contiguous())
  end)

  it("views keep the memory alive after the array is dropped", function()
    local v = weft.array(seq(8), weft.int32):reshape({ 2, 4 }):transpose()
    collectgarbage()
    collectgarbage()
    assert.are.same({ { 1, 5 }, { 2, 6 }, { 3, 7 }, { 4, 8 } }, v:totable())
  end)

  it("rejects bad shapes and axes with the caller's line", function()
    local a = weft.array(seq(6), weft.float32)
    local function err(f, ...)
      local ok, e = pcall(f, ...)
      assert.is_false(ok)
      return e
    end
    local here = "spec/array_views_spec.lua:" .. (debug.getinfo(1, "l").currentline + 1) .. ": "
    local e = err(function() local r = a:reshape({ 4, 2 }); return r end)
    assert.are.equal(here .. "a:reshape: 6 elements cannot take shape {4, 2}", e)
    assert.matches("a:reshape: cannot infer dimension 2: 6 elements into shape {4, -1}", err(a.reshape, a, { 4, -1 }), 1, true)
    assert.matches("a:reshape: dimension 1 must be a non-negative integer (or one -1), got 1.5",
                   err(a.reshape, a, { 1.5, 4 }), 1, true)
    assert.matches("a:reshape: shape must be an integer or a table of 1 to 4 integers, got {1, 1, 1, 1, 6}",
                   err(a.reshape, a, { 1, 1, 1, 1, 6 }), 1, true)
    local t = a:reshape({ 2, 3 }):transpose()
    assert.matches("a:reshape: the array is not contiguous (a:contiguous() copies it)", err(t.reshape, t, { 6 }), 1, true)
    assert.matches("a:transpose: axes must be a permutation of 0..1, got {0, 0}", err(t.transpose, t, { 0, 0 }), 1, true)
    assert.matches("a:transpose: axes must list the 2 axes (0-based), got {0}", err(t.transpose, t, { 0 }), 1, true)
  end)
end)
