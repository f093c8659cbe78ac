-- Numeric for loops at the limits of their types (weft issue 10's
-- siblings): Lua's counts with inclusive bounds, any step sign, bounds at
-- the type's limits, on the CPU, in the CUDA C run on the host (the shim)
-- and through NVRTC and ptxas. A loop that cannot end is an error at its
-- line, never a hang: a step of zero known at run time, a float counter
-- that stops changing (i + step == i).
local ffi = require "ffi"
local weft, internal = require "weft", require "weft.internal"
local shim = dofile("tests/cuda/shim.lua")

local core = internal.core
local have_nvrtc = core.cuda_nvrtc_version and core.cuda_nvrtc_version() ~= nil
local have_shim = shim.available()
local A = weft.array
local I64 = weft.int64

-- The C type and the 64-bit type that prints a value of each loop type.
local CT = {
  { weft.int8, "int8_t", "int64_t", "int8" }, { weft.uint8, "uint8_t", "uint64_t", "uint8" },
  { weft.int16, "int16_t", "int64_t", "int16" }, { weft.uint16, "uint16_t", "uint64_t", "uint16" },
  { weft.int32, "int32_t", "int64_t", "int32" }, { weft.uint32, "uint32_t", "uint64_t", "uint32" },
  { weft.int64, "int64_t", "int64_t", "int64" }, { weft.uint64, "uint64_t", "uint64_t", "uint64" },
}

-- Rows { lo, hi, step, count, first, last } per type: Lua's loop counts
-- (first and last are lo when the body never runs).
local ROWS = {
  int8 = {
    { -128, 127, 1, 256, -128, 127 }, { 127, -128, -1, 256, 127, -128 },
    { 120, 127, 5, 2, 120, 125 }, { -120, -128, -3, 3, -120, -126 },
    { 127, 127, 127, 1, 127, 127 }, { -128, 127, 127, 3, -128, 126 },
  },
  uint8 = {
    { 250, 255, 2, 3, 250, 254 }, { 0, 255, 1, 256, 0, 255 }, { 255, 255, 255, 1, 255, 255 },
    { 5, 4, 1, 0, 5, 5 },
  },
  int16 = { { 32766, 32767, 1, 2, 32766, 32767 }, { -32767, -32768, -1, 2, -32767, -32768 } },
  uint16 = { { 65534, 65535, 1, 2, 65534, 65535 } },
  int32 = {
    { 2147483646, 2147483647, 1, 2, 2147483646, 2147483647 },
    { -2147483647, -2147483648, -1, 2, -2147483647, -2147483648 },
    { 2147483640, 2147483647, 3, 3, 2147483640, 2147483646 },
    { -2147483641, -2147483648, -4, 2, -2147483641, -2147483645 },
    { 2147483647, 2147483647, 2147483647, 1, 2147483647, 2147483647 },
    { -2147483648, 2147483647, 2147483647, 3, -2147483648, 2147483646 },
    { 2147483647, -2147483648, -2147483648, 2, 2147483647, -1 },
    { 5, 4, 1, 0, 5, 5 }, { 4, 5, -1, 0, 4, 4 }, { -3, 3, 2, 4, -3, 3 },
  },
  uint32 = {
    { 4294967294, 4294967295, 1, 2, 4294967294, 4294967295 },
    { 0, 4294967295, 1431655765, 4, 0, 4294967295 },
    { 4294967295, 4294967295, 4294967295, 1, 4294967295, 4294967295 },
  },
  int64 = {
    { 9223372036854775806LL, 9223372036854775807LL, 1, 2, 9223372036854775806LL,
      9223372036854775807LL },
    { -9223372036854775807LL, -9223372036854775807LL - 1, -1, 2, -9223372036854775807LL,
      -9223372036854775807LL - 1 },
    { 9223372036854775800LL, 9223372036854775807LL, 4, 2, 9223372036854775800LL,
      9223372036854775804LL },
    { 2147483646, 2147483649, 1, 4, 2147483646, 2147483649 },
  },
  uint64 = {
    { 18446744073709551614ULL, 18446744073709551615ULL, 1, 2, 18446744073709551614ULL,
      18446744073709551615ULL },
    { 18446744073709551610ULL, 18446744073709551615ULL, 3, 2, 18446744073709551610ULL,
      18446744073709551613ULL },
  },
}

-- A kernel over rows: thread i runs `for j = L[i], H[i], S[i]`, counting
-- and keeping the first and last j. exits: the same loop with a break that
-- never fires (the front end's WHILE form instead of the FOR op).
local function counting_kernel(T, exits)
  if exits then
    return weft.kernel{ L = A(T), H = A(T), S = A(T), F = A(T), Z = A(T), C = A(I64),
      function(L, H, S, F, Z, C)
        local i = weft.tid()
        local n = weft.int64(0)
        local first, last = L[i], L[i]
        for j = L[i], H[i], S[i] do
          if n < 0 then break end
          if n == 0 then first = j end
          last = j
          n = n + 1
        end
        F[i], Z[i], C[i] = first, last, n
      end }
  end
  return weft.kernel{ L = A(T), H = A(T), S = A(T), F = A(T), Z = A(T), C = A(I64),
    function(L, H, S, F, Z, C)
      local i = weft.tid()
      local n = weft.int64(0)
      local first, last = L[i], L[i]
      for j = L[i], H[i], S[i] do
        if n == 0 then first = j end
        last = j
        n = n + 1
      end
      F[i], Z[i], C[i] = first, last, n
    end }
end

-- Arrays of the rows' columns (written through pointers: 64-bit values
-- are exact), outputs zeroed.
local function row_args(T, ct, rows)
  local n = #rows
  local args = {}
  for c = 1, 5 do args[c] = weft.zeros(n, T) end
  args[6] = weft.zeros(n, I64)
  for c = 1, 3 do
    local p = ffi.cast(ct .. " *", args[c]:ptr())
    for r = 1, n do p[r - 1] = rows[r][c] end
  end
  return args
end

-- The results as strings ("count first last" per row) and the expected.
local function results(args, ct, wide, rows)
  local got, want = {}, {}
  local pf, pz = ffi.cast(ct .. " *", args[4]:ptr()), ffi.cast(ct .. " *", args[5]:ptr())
  local pc = ffi.cast("int64_t *", args[6]:ptr())
  local function s(v) return tostring(ffi.new(wide, v)) end
  for r = 1, #rows do
    local w = rows[r]
    got[r] = ("%s..%s step %s: %s %s %s"):format(s(w[1]), s(w[2]), s(w[3]), s(pc[r - 1]),
                                                s(pf[r - 1]), s(pz[r - 1]))
    want[r] = ("%s..%s step %s: %s %s %s"):format(s(w[1]), s(w[2]), s(w[3]), s(w[4]), s(w[5]),
                                                 s(w[6]))
  end
  return got, want
end

describe("for loops at the limits of their types", function()
  for _, exits in ipairs { false, true } do
    for _, e in ipairs(CT) do
      local T, ct, wide = e[1], e[2], e[3]
      local rows = ROWS[e[4]]
      local label = (exits and "with a break, " or "") .. ct
      if rows then
        it(label .. ": the CPU runs Lua's iterations", function()
          local k = counting_kernel(T, exits)
          local args = row_args(T, ct, rows)
          weft.launch(k, #rows, args)
          local got, want = results(args, ct, wide, rows)
          assert.same(want, got)
        end)
        it(label .. ": the CUDA C on the host runs the same", function()
          if not have_shim then return pending("no g++ for the CUDA shim") end
          local k = counting_kernel(T, exits)
          local args = row_args(T, ct, rows)
          local _, err = shim.run(weft, k, #rows, args, { checks = true })
          assert.is_nil(err)
          local got, want = results(args, ct, wide, rows)
          assert.same(want, got)
        end)
      end
    end
  end

  it("literal bounds at int32's limits (steps known to the compiler)", function()
    local k = weft.kernel{ C = A(I64), function(C)
      local a, b, c, d, e = weft.int64(0), weft.int64(0), weft.int64(0), weft.int64(0), weft.int64(0)
      for j = 2147483646, 2147483647 do a = a + weft.int64(j) end
      for j = -2147483647, -2147483648, -1 do b = b + weft.int64(j) end
      for _ = 2147483640, 2147483647, 3 do c = c + 1 end
      for j = weft.uint8(250), 255, 2 do d = d + weft.int64(j) end
      for _ = 2147483646, 2147483647 do
        if e > 5 then break end
        e = e + 1
      end
      C[0], C[1], C[2], C[3], C[4] = a, b, c, d, e
    end }
    local want = { "4294967293LL", "-4294967295LL", "3LL", "756LL", "2LL" }
    local function got(c)
      local p, t = ffi.cast("int64_t *", c:ptr()), {}
      for i = 0, 4 do t[i + 1] = tostring(p[i]) end
      return t
    end
    local c = weft.zeros(5, I64)
    weft.launch(k, 1, { c })
    assert.same(want, got(c))
    if have_shim then
      local c2 = weft.zeros(5, I64)
      shim.run(weft, k, 1, { c2 })
      assert.same(want, got(c2))
    end
  end)
end)

-- The line of the first `for` after the line of the call (kernels below
-- are written with their for loop on the next lines).
local function line_after(n)
  return debug.getinfo(2, "l").currentline + n
end

describe("for loops that cannot end", function()
  local F32 = A(weft.float32)
  local zl = line_after(3)
  local zero_step = weft.kernel{ y = F32, s = weft.int32, function(y, s)
    local n = 0.0
    for _ = 1, 10, s do n = n + 1.0 end
    y[0] = n
  end }
  local zbl = line_after(3)
  local zero_step_break = weft.kernel{ y = F32, s = weft.int32, function(y, s)
    local n = 0.0
    for _ = 1, 10, s do
      if n > 100.0 then break end
      n = n + 1.0
    end
    y[0] = n
  end }
  local fl = line_after(3)
  local f32_big = weft.kernel{ y = F32, function(y)
    local n = 0
    for _ = weft.float32(0), 3e9 do n = n + 1 end
    y[0] = weft.float32(n)
  end }
  local big = 2 ^ 31
  local ul = line_after(3)
  local f32_upvalue = weft.kernel{ y = F32, function(y)
    local n = 0
    for _ = weft.float32(0), big do n = n + 1 end
    y[0] = weft.float32(n)
  end }
  local fbl = line_after(3)
  local f32_break = weft.kernel{ y = F32, function(y)
    local n = 0.0
    for j = weft.float32(16777214), 16777300.0 do
      if j < 0.0 then break end
      n = n + 1.0
    end
    y[0] = n
  end }
  local hl = line_after(3)
  local f16_loop = weft.kernel{ y = F32, function(y)
    local n = 0.0
    for _ = weft.float16(0), 3000 do n = n + 1.0 end
    y[0] = n
  end }
  local STUCK = "for loop counter stops changing: float32 counter + step == counter " ..
                "(use an integer loop)"
  local cases = {
    { "a zero step known at run time", zero_step, zl, "for loop step is zero", { 0 } },
    { "a zero step in a loop with a break", zero_step_break, zbl, "for loop step is zero", { 0 } },
    { "a float32 loop to 3e9", f32_big, fl, STUCK, {} },
    { "a float32 loop to an upvalue of 2^31", f32_upvalue, ul, STUCK, {} },
    { "a float32 loop with a break past 2^24", f32_break, fbl, STUCK, {} },
    { "a float16 loop past 2048", f16_loop, hl, STUCK:gsub("float32", "float16"), {} },
  }

  for _, c in ipairs(cases) do
    local name, k, line, msg, scalars = c[1], c[2], c[3], c[4], c[5]
    local where = "loop_limits_spec.lua:" .. line .. ": " .. msg
    for _, mode in ipairs { "release", "fast", "debug" } do
      it(name .. " is an error at the loop's line (" .. mode .. ", CPU)", function()
        local y = weft.zeros(1)
        local args = { y }
        for _, s in ipairs(scalars) do args[#args + 1] = s end
        weft.config.mode = mode
        local ok, err = pcall(weft.launch, k, 1, args)
        weft.config.mode = "release"
        assert.is_false(ok)
        assert.matches(where, tostring(err), 1, true)
      end)
    end
    it(name .. " is an error at the loop's line (CUDA C on the host)", function()
      if not have_shim then return pending("no g++ for the CUDA shim") end
      local function args()
        local t = { weft.zeros(1) }
        for _, s in ipairs(scalars) do t[#t + 1] = s end
        return t
      end
      local _, err = shim.run(weft, k, 1, args(), { checks = true })
      assert.matches(where, tostring(err), 1, true)
      -- fast mode has no error slot: the thread traps with the position
      local out = shim.run(weft, k, 1, args())
      assert.matches("trap: [^\n]*" .. where:gsub("%p", "%%%0"), out)
    end)
  end

  it("compile with NVRTC and assemble with ptxas", function()
    if not have_nvrtc then return pending("NVRTC not found") end
    for _, c in ipairs(cases) do
      for _, checks in ipairs { true, false } do
        local ptx = core.cuda_ptx(c[2]:_module(), "compute_80",
                                  { checks = checks, names = internal.param_names(c[2]) })
        assert.is_true(core.cuda_assemble(ptx, "sm_80") > 0)
      end
    end
  end)

  it("float loops that advance still run as in Lua", function()
    local k = weft.kernel{ y = A(weft.float64), function(y)
      local s, n = 0.0, 0
      for x = 0.0, 1.0, 0.125 do s = s + x end
      for _ = 16777214.0, 16777215.0 do n = n + 1 end
      local d = weft.float64(0)
      for _ = weft.float64(9007199254740990), 9007199254740991 do d = d + 1.0 end
      local h = 0.0
    for x = weft.float16(0), 10, 0.5 do h = h + weft.float32(x) end
    y[0], y[1], y[2], y[3] = weft.float64(s), weft.float64(n), d, weft.float64(h)
    end }
    local y = weft.zeros(4, weft.float64)
    weft.launch(k, 1, { y })
    assert.same({ 4.5, 2, 2, 105 }, y:totable())
    if have_shim then
      local y2 = weft.zeros(4, weft.float64)
      shim.run(weft, k, 1, { y2 })
      assert.same({ 4.5, 2, 2, 105 }, y2:totable())
    end
  end)
end)

describe("for loops in PTX", function()
  it("compile with NVRTC and assemble with ptxas (release and fast)", function()
    if not have_nvrtc then return pending("NVRTC not found") end
    for _, T in ipairs { weft.int8, weft.uint32, weft.int64 } do
      for _, exits in ipairs { false, true } do
        local k = counting_kernel(T, exits)
        for _, checks in ipairs { true, false } do
          local ptx = core.cuda_ptx(k:_module(), "compute_80",
                                    { checks = checks, names = internal.param_names(k) })
          assert.matches(".entry ", ptx, 1, true)
          assert.is_true(core.cuda_assemble(ptx, "sm_80") > 0)
        end
      end
    end
  end)
end)
