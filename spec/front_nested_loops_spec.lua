-- Front end: nested loops lower correctly, once per probe, not twice per nesting level.
local weft = require "weft"

local A = weft.array
local i32, f64 = weft.int32, weft.float64

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
