-- Front end safety (weft issue 10): long source lines, functions sharing
-- a line, out-of-range literals, overloads chosen by literals, the
-- largest vectors and matrices, assignments to non-values.
local weft = require "weft"

local A = weft.array
local i32, f32, f64 = weft.int32, weft.float32, weft.float64

local H = dofile("spec/helpers/front.lua")
local compile_error = H.compile_error

describe("long source lines", function()
  -- The declared name is read from the source line with a scan that is
  -- linear in the line's length: these lines are 100k characters long,
  -- and a backtracking pattern took minutes on them.
  local N = 100000

  local function load_kernel(src)
    return assert(loadstring(src))(weft)
  end

  it("find the name before a long comment", function()
    local k = load_kernel("local weft = ...\nlocal long_k = weft.kernel{ x = weft.array(weft.float32), "
      .. "function(x) x[0] = 1.0 end } -- " .. string.rep("a", N) .. "\nreturn long_k\n")
    assert.are.equal("long_k", k.name)
    assert.truthy(k:ir():find("store", 1, true))
  end)

  it("find a long name, and none among many calls", function()
    local name = string.rep("n", N)
    local k = load_kernel("local weft = ...\nlocal " .. name .. " = weft.kernel{ x = weft.array(weft.float32), "
      .. "function(x) x[0] = 1.0 end }\nreturn " .. name .. "\n")
    assert.are.equal(name, k.name)
    local calls = string.rep("kernel( ", N / 8)
    k = load_kernel("local weft = ...\nlocal t = { weft.kernel{ x = weft.array(weft.float32), "
      .. "function(x) x[0] = 1.0 end } } -- " .. calls .. "\nreturn t[1]\n")
    assert.are.equal("kernel_2", k.name)
  end)

  it("compile a kernel whose body is one long line", function()
    local body = string.rep(" + 1.0", N / 6)
    local k = load_kernel("local weft = ...\nreturn weft.kernel{ x = weft.array(weft.float64), "
      .. "function(x) x[0] = 0.0" .. body .. " end }\n")
    local x = weft.zeros(1, f64)
    weft.launch(k, 1, { x })
    assert.are.equal(math.floor(N / 6), x:totable()[1])
  end)

  it("show a window of a long line with the caret under the error", function()
    local k = load_kernel("local weft = ...\nreturn weft.kernel{ x = weft.array(weft.float32), "
      .. "function(x) x[0] = 0.0" .. string.rep(" + 1.0", N / 6) .. " + weft.vec3() end }\n")
    local err = compile_error(k)
    local src, caret = err:match("\n([^\n]*)\n([^\n]*)$")
    assert.truthy(#src <= 403 and src:sub(1, 3) == "...", src)
    assert.are.equal("^", caret:sub(-1))
    assert.are.equal("+ weft.vec3()", src:sub(#caret, #caret + 12))
  end)

  it("stop a chain of 2000 fields or calls with a positioned error", function()
    for _, chain in ipairs({ string.rep(".x", 2000), string.rep("()", 2000) }) do
      local k = load_kernel("local weft = ...\nreturn weft.kernel{ x = weft.array(weft.float32), "
        .. "function(x)\n  local v = weft.vec3()\n  x[0] = v" .. chain .. "\nend }\n")
      local err = compile_error(k)
      assert.truthy(err:find('^%[string "local weft = [^\n]*%]:4: expression nested too deeply %(more than 1000 levels%)\n'), err)
    end
  end)
end)

describe("the largest vectors and matrices", function()
  -- Vectors have up to 64 components and matrices up to 64 rows and 64
  -- columns; the front end's buffers were sized for 16 (a 17x17 product
  -- corrupted the stack, 64x64 float64 crashed).
  local function list(fmt, from, n)
    local t = {}
    for i = from, from + n - 1 do t[#t + 1] = fmt:format(i) end
    return table.concat(t, ", ")
  end
  local function kernel(body, ...)
    -- the types are upvalues of the kernel: the body's first line names them
    local names, rest = body:match("^%s*local ([%w_, ]+) = T%[1%][^\n]*\n(.*)$")
    if names then body = rest end
    local src = "local weft, " .. (names or "T") .. " = ...\nreturn weft.kernel{ x = weft.array(weft.float64), "
      .. "y = weft.array(weft.float64), function(x, y)\n" .. body .. "\nend }\n"
    return assert(loadstring(src))(weft, ...)
  end
  local function run(k, nx, ny)
    local x = weft.zeros(nx, f64)
    for i = 0, nx - 1 do x[i] = i + 1 end
    local y = weft.zeros(ny, f64)
    weft.launch(k, 1, { x, y })
    return y:totable()
  end

  it("64-element vectors: arithmetic, dot, dynamic components", function()
    local k = kernel(([==[
  local V = T[1]
  local v = V(%s)
  local w = v * 2.0 + v
  local s = V()
  for j = 0, 63 do s[j] = x[63 - j] end
  y[0] = weft.dot(v, v)
  y[1] = w[63]
  y[2] = s[0] + s[63]
  y[3] = weft.length_sq(s - v)]==]):format(list("x[%d]", 0, 64)), weft.vector(64, f64))
    local y = run(k, 64, 4)
    local dot, d2 = 0, 0
    for i = 1, 64 do dot = dot + i * i; d2 = d2 + (65 - i - i) ^ 2 end
    assert.are.same({ dot, 3 * 64, 64 + 1, d2 }, y)
  end)

  it("8x8, 4x16 and 16x4 products", function()
    local M8, M4x16, M16x4 = weft.matrix(8, 8, f64), weft.matrix(4, 16, f64), weft.matrix(16, 4, f64)
    local k = kernel(([==[
  local M8, M4x16, M16x4 = T[1], T[2], T[3]
  local a = M8(%s)
  local b = M8(%s)
  local c = a * b
  local p = M4x16(%s) * M16x4(%s)
  y[0] = c[0][0]
  y[1] = c[7][7]
  y[2] = c[3][5]
  y[3] = p[3][3]
  y[4] = weft.transpose(c)[5][3]]==]):format(list("x[%d]", 0, 64), list("x[%d]", 64, 64),
      list("x[%d]", 0, 64), list("x[%d]", 64, 64)), M8, M4x16, M16x4)
    local y = run(k, 128, 5)
    local function A(i, j) return i * 8 + j + 1 end
    local function B(i, j) return 64 + i * 8 + j + 1 end
    local function C(i, j)
      local s = 0
      for m = 0, 7 do s = s + A(i, m) * B(m, j) end
      return s
    end
    local p33 = 0
    for m = 0, 15 do p33 = p33 + (3 * 16 + m + 1) * (64 + m * 4 + 3 + 1) end
    assert.are.same({ C(0, 0), C(7, 7), C(3, 5), p33, C(3, 5) }, y)
  end)

  it("17x17 products", function()
    local M = weft.matrix(17, 17, f64)
    local k = kernel([==[
  local M = T[1]
  local a = M(1.0)
  a[0][0] = x[2]
  a[16][3] = x[4]
  local c = a * M(2.0)
  y[0] = c[0][0]
  y[1] = c[16][16]
  y[2] = c[5][5]]==], M)
    assert.are.same({ 3 * 2 + 16 * 2, 5 * 2 + 16 * 2, 17 * 2 }, run(k, 8, 3))
  end)

  it("64x1 times 1x64, outer, diag and transpose of 64-vectors", function()
    local M641, M164, V = weft.matrix(64, 1, f64), weft.matrix(1, 64, f64), weft.vector(64, f64)
    local k = kernel(([==[
  local M641, M164, V = T[1], T[2], T[3]
  local p = M641(%s)
  local q = M164(%s)
  local r = p * q
  local u = V(%s)
  local o = weft.outer(u, u)
  local d = weft.diag(u)
  y[0] = r[63][63]
  y[1] = r[5][7]
  y[2] = o[62][3]
  y[3] = d[63][63] + d[0][63]
  y[4] = weft.transpose(p)[0][40]
  y[5] = (q * p)[0][0]]==]):format(list("x[%d]", 0, 64), list("x[%d]", 64, 64), list("x[%d]", 0, 64)),
      M641, M164, V)
    local qp = 0
    for i = 1, 64 do qp = qp + i * (64 + i) end
    assert.are.same({ 64 * 128, 6 * 72, 63 * 4, 64, 41, qp }, run(k, 128, 6))
  end)

  it("64x64 float64 products", function()
    local V, M = weft.vector(64, f64), weft.matrix(64, 64, f64)
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local u = V()
      for j = 0, 63 do u[j] = x[j] end
      local a = weft.outer(u, u)
      local c = a * a
      y[0] = c[0][0]
      y[1] = c[63][63]
      -- constant operands: folded (the folder was quadratic in uses)
      local d = M(1.0)
      d[0][0] = x[2]
      local e = d * M(2.0)
      y[2] = e[0][0] + e[63][63]
    end }
    local s0, s63 = 0, 0
    for m = 1, 64 do s0 = s0 + m * m; s63 = s63 + 64 * m * m * 64 end
    assert.are.same({ s0, s63, (3 * 2 + 63 * 2) + 64 * 2 }, run(k, 64, 3))
  end)

  it("matrices built from more than 16 rows", function()
    local M = weft.matrix(20, 2, f64)
    local k = kernel(([==[
  local M = T[1]
  local m = M(%s)
  y[0] = m[19][1]
  y[1] = m[17][0]]==]):format(list("weft.vec2d(x[%d], 0.5)", 0, 20)), M)
    assert.are.same({ 0.5, 18 }, run(k, 20, 2))
  end)

  it("structs of 70 fields, on the CPU and in CUDA C", function()
    local fields = {}
    for i = 1, 70 do fields[i] = { "f" .. i, f64 } end
    local P = weft.struct(fields)
    local k = kernel(([==[
  local P = T[1]
  local p = P{ %s }
  local z = P{}
  z.f70 = p.f69
  y[0] = p.f1 + p.f70
  y[1] = z.f70]==]):format(list("f%d = x[0]", 1, 70)), P)
    assert.are.same({ 2, 1 }, run(k, 1, 2))
    local ka = weft.kernel{ a = A(P), function(a)
      local p = a[0]
      p.f70 = p.f1 + 1.0
      a[0] = p
    end }
    local arr = weft.zeros(2, P)
    weft.launch(ka, 1, { arr })
    assert.are.equal(1, arr:totable()[1].f70)
    -- the CUDA C struct of 70 fields (f0 .. f69)
    assert.truthy(ka:source("cuda"):find("double f69;", 1, true))
  end)

  it("ifs and loops that carry more than 64 locals", function()
    local decl, upd, sum = {}, {}, {}
    for i = 1, 100 do
      decl[i] = ("local a%d = x[%d]"):format(i, i % 4)
      upd[i] = ("a%d = a%d + 1.0"):format(i, i)
      sum[i] = "a" .. i
    end
    upd = table.concat(upd, "\n")
    local k = kernel(table.concat(decl, "\n") .. "\nif x[0] > 0 then\n" .. upd .. "\nend\n"
      .. "for j = 1, 2 do\n" .. upd .. "\nend\nlocal w = 0\nwhile w < 2 do\nw = w + 1\n" .. upd
      .. "\nend\ny[0] = " .. table.concat(sum, " + "))
    -- a_i = x[i % 4] + 5, x[k] = k + 1
    local want = 0
    for i = 1, 100 do want = want + (i % 4 + 1) + 5 end
    assert.are.same({ want }, run(k, 4, 1))
  end)
end)

describe("integer literals and conversions", function()
  local shim = dofile("tests/cuda/shim.lua")

  it("a literal out of its type's range is an error at its line", function()
    local k = weft.kernel{ x = A(i32), function(x)
      local r = x[0]
      x[1] = r + 2147483648 -- MARK-lit-range
    end }
    local err = compile_error(k)
    assert.truthy(err:find("front_safety_spec.lua:" .. H.line_finder("spec/front_safety_spec.lua")("MARK-lit-range")
      .. ": cannot use the number 2147483648 as int32 (out of range -2147483648..2147483647)", 1, true), err)
    local ku = weft.kernel{ x = A(weft.uint8), function(x) x[0] = x[1] + 256 end }
    assert.truthy(compile_error(ku):find("cannot use the number 256 as uint8 (out of range 0..255)", 1, true))
    local kn = weft.kernel{ x = A(weft.uint32), function(x) x[0] = x[1] - (-1) end }
    assert.truthy(compile_error(kn):find("cannot use the number -1 as uint32", 1, true))
    -- a finite float literal that would become inf
    local kf = weft.kernel{ x = A(weft.float16), function(x) x[0] = x[1] + 65520 end }
    assert.truthy(compile_error(kf):find("cannot use the number 65520 as float16 (out of range)", 1, true))
    -- the largest values that fit still work
    local ok = weft.kernel{ x = A(i32), y = A(weft.uint64), function(x, y)
      x[0] = x[0] + 2147483647
      x[1] = x[1] + -2147483648
      y[0] = y[0] + 18446744073709549568
    end }
    local x, y = weft.zeros(2, i32), weft.zeros(1, weft.uint64)
    weft.launch(ok, 1, { x, y })
    assert.are.same({ 2147483647, -2147483648 }, x:totable())
    assert.are.equal(18446744073709549568, tonumber(y:totable()[1]))
    local okf = weft.kernel{ x = A(f32), function(x)
      x[0] = 3.40282356e38
      x[1] = -math.huge
    end }
    local xf = weft.zeros(2, f32)
    weft.launch(okf, 1, { xf })
    assert.are.same({ 3.4028234663852886e38, -math.huge }, xf:totable())
  end)

  -- weft.int32(c) of a constant gives what the same conversion gives at
  -- run time: truncated, saturated at the type's limits, NaN -> 0.
  local cases = {
    { "int32", weft.int32, 1e10 }, { "int32", weft.int32, -1e10 }, { "int32", weft.int32, 0 / 0 },
    { "int32", weft.int32, -2.75 }, { "uint8", weft.uint8, 300.5 }, { "uint8", weft.uint8, -5 },
    { "int64", weft.int64, 1e19 }, { "int64", weft.int64, -1e300 }, { "uint64", weft.uint64, 1e20 },
    { "uint32", weft.uint32, 4294967295.5 }, { "int16", weft.int16, 1 / 0 },
  }
  for _, c in ipairs(cases) do
    local tname, T, v = c[1], c[2], c[3]
    it(("weft.%s(%s) of a constant agrees with the run-time conversion"):format(tname, tostring(v)), function()
      local num = ("%.17g"):format(v)
      if v ~= v then num = "0 / 0" elseif v == 1 / 0 then num = "1 / 0" end
      local src = ([==[local weft, T = ...
return weft.kernel{ x = weft.array(weft.float64), y = weft.array(T), function(x, y)
  y[0] = T(%s)
  y[1] = T(weft.float64(%s))
  y[2] = T(x[0])
end }]==]):format(num, num)
      local k = assert(loadstring(src))(weft, T)
      local x = weft.array({ v }, f64)
      local y = weft.zeros(3, T)
      weft.launch(k, 1, { x, y })
      local r = y:totable()
      assert.are.equal(tostring(r[3]), tostring(r[1]))
      assert.are.equal(tostring(r[3]), tostring(r[2]))
      if shim.available() then
        local yc = weft.zeros(3, T)
        shim.run(weft, k, 1, { weft.array({ v }, f64), yc })
        assert.are.same(r, yc:totable())
      end
    end)
  end

  it("for loops with bounds past int32 run as in Lua", function()
    local k = weft.kernel{ y = A(weft.int64), function(y)
      local n = 0
      for j = 2147483648, 0 do n = n + 1 end
      local m = 0
      for j = 2147483646, 2147483649 do m = m + 1 end
      local s = weft.int64(0)
      for j = -2147483649, -2147483650, -1 do s = s + j end
      y[0] = weft.int64(n)
      y[1] = weft.int64(m)
      y[2] = s
    end }
    local y = weft.zeros(3, weft.int64)
    weft.launch(k, 1, { y })
    assert.are.same({ 0, 4, -4294967299 }, { tonumber(y:totable()[1]), tonumber(y:totable()[2]),
      tonumber(y:totable()[3]) })
  end)
end)

describe("overloads and literals", function()
  it("1.0 picks the float overload and 1 the int one", function()
    local custom = weft.func{ x = i32, function(x) return 10 end }
    custom:overload{ x = f32, function(x) return 20 end }
    local wide = weft.func{ x = weft.int64, function(x) return 1 end }
    wide:overload{ x = i32, function(x) return 2 end }
    wide:overload{ x = f64, function(x) return 3 end }
    wide:overload{ x = f32, function(x) return 4 end }
    local k = weft.kernel{ y = A(i32), function(y)
      y[0] = custom(1.0)
      y[1] = custom(1)
      y[2] = custom(y[5])
      y[3] = wide(7)
      y[4] = wide(7.0)
      y[5] = wide(3000000000)
      y[6] = custom(-2.0e0)
    end }
    local y = weft.zeros(7, i32)
    weft.launch(k, 1, { y })
    assert.are.same({ 20, 10, 10, 2, 4, 1, 20 }, y:totable())
  end)
end)

describe("several functions on one line", function()
  -- Lua reports only the lines a function starts and ends on; the front
  -- end tells functions on one line apart by their bytecode.
  local function run(k)
    local x = weft.zeros(2, f32)
    weft.launch(k, 1, { x })
    return x:totable()[1]
  end

  it("compiles the kernel's function, not an earlier one", function()
    local h = function(x) x[0] = 42.0 end; local k = weft.kernel{ x = A(f32), function(x) x[0] = 1.0 end }
    assert.are.equal(1, run(k))
    local k2 = weft.kernel{ x = A(f32), function(x) x[0] = 2.0 end }; local h2 = function(x) x[0] = 43.0 end
    assert.are.equal(2, run(k2))
    assert.is_function(h); assert.is_function(h2)
  end)

  it("two kernels on one line get their own bodies", function()
    local k1, k2 = weft.kernel{ x = A(f32), function(x) x[0] = 3.0 end }, weft.kernel{ x = A(f32), function(x) x[0] = 4.0 end }
    assert.are.equal(3, run(k1))
    assert.are.equal(4, run(k2))
  end)

  it("functions differing only in the upvalues they read", function()
    local a, b = 5.0, 6.0
    local k1, k2 = weft.kernel{ x = A(f32), function(x) x[0] = a end }, weft.kernel{ x = A(f32), function(x) x[0] = b end }
    assert.are.equal(5, run(k1))
    assert.are.equal(6, run(k2))
  end)

  it("local function statements and varargs functions on the line", function()
    local function sq(x) return x * x end; local function cube(x) return x * x * x end; local va = function(...) return ... end
    local fsq, fcube = weft.func{ x = f32, sq }, weft.func{ x = f32, cube }
    local k = weft.kernel{ x = A(f32), function(x) x[0] = fsq(2.0) + fcube(3.0) end }
    assert.are.equal(4 + 27, run(k))
    local kv = weft.kernel{ x = A(f32), function(x) x[0] = 7.0 end }; local va2 = function(...) return ... end
    assert.are.equal(7, run(kv))
    assert.is_function(va); assert.is_function(va2)
  end)

  it("a 90k-character line of 3000 look-alikes before the kernel", function()
    local src = "local weft = ...\nlocal fs = {" .. string.rep(" function(x) x[0] = 42.0 end,", 3000)
      .. " }; return weft.kernel{ x = weft.array(weft.float32), function(x) x[0] = 9.0 end }\n"
    assert.are.equal(9, run(assert(loadstring(src))(weft)))
  end)

  it("identical functions on one line are the same kernel", function()
    local h = function(x) x[0] = 8.0 end; local k = weft.kernel{ x = A(f32), function(x) x[0] = 8.0 end }
    assert.are.equal(8, run(k))
    assert.is_function(h)
  end)
end)

describe("limits of the language", function()
  it("more than 64 parameters is an error, not a missing source", function()
    local names = {}
    for i = 1, 70 do names[i] = "p" .. i end
    local src = "local weft = ...\nlocal k = weft.kernel{ function(x, " .. table.concat(names, ", ")
      .. ") x[0] = p70 end }\nreturn k\n"
    local ok, err = pcall(assert(loadstring(src)), weft)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("weft.kernel: a function with more than 64 parameters cannot be compiled", 1, true), err)
  end)
end)
