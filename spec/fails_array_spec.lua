-- Bad input to arrays: every case raises a clear error at the caller's line
-- and leaves the process healthy.
local weft, internal = require "weft", require "weft.internal" -- internal: the parts' private table

-- fn must fail with msg, located at the line where errat is called.
local function errat(fn, msg)
  local info = debug.getinfo(2, "Sl")
  local ok, err = pcall(fn)
  assert.is_false(ok, "no error raised")
  assert.are.equal(info.short_src .. ":" .. info.currentline .. ": " .. msg, err)
end

describe("array errors", function()
  it("bad shapes", function()
    errat(function() weft.zeros({}) end, "weft.zeros: shape must have 1 to 4 dimensions, got 0")
    errat(function() weft.zeros({ 1, 2, 3, 4, 5 }) end, "weft.zeros: shape must have 1 to 4 dimensions, got 5")
    errat(function() weft.empty({ 2, -1 }) end, "weft.empty: shape dimension 2 is -1, expected a size >= 0")
    errat(function() weft.ones(2.5) end, "weft.ones: shape dimension 1 is 2.5, expected an integer")
    errat(function() weft.zeros({ "3" }) end, "weft.zeros: shape dimension 1 is a string, expected an integer")
    errat(function() weft.zeros("3") end,
      "weft.zeros: shape must be an integer or a table of 1 to 4 integers, got a string")
    errat(function() weft.zeros({ 2 ^ 40, 2 ^ 20 }) end, "weft.zeros: shape {1099511627776, 1048576} is too large")
  end)

  it("unknown dtypes", function()
    errat(function() weft.zeros(3, "flaot32") end, "weft.zeros: unknown dtype 'flaot32'")
    errat(function() weft.full(3, 1, 42) end, "weft.full: dtype must be a weft type or a type name, got a number")
    errat(function() weft.zeros(3, weft.array(weft.float32)) end,
      "weft.zeros: dtype array(float32) is an array type, expected an element type")
    errat(function() weft.full(3, "x") end, "weft.full: cannot infer a dtype from a string (pass one)")
  end)

  it("bad options and devices", function()
    errat(function() weft.zeros(3, nil, { devcie = "cpu" }) end, "weft.zeros: unknown option 'devcie'")
    errat(function() weft.zeros(3, nil, 5) end, "weft.zeros: opts must be a table, got a number")
    errat(function() weft.zeros(3, nil, { device = "tpu" }) end,
      "weft.zeros: unknown device 'tpu' (expected \"cpu\" or \"cuda:N\")")
    if internal.C.wf_device_count(internal.rt) == 0 then
      errat(function() weft.zeros(3, nil, { device = "cuda:0" }) end,
        "weft.zeros: device 'cuda:0': CUDA is not available: libcuda.so.1 could not be loaded (no NVIDIA driver)")
      errat(function() weft.zeros(3):to("cuda:1") end,
        "a:to: device 'cuda:1': CUDA is not available: libcuda.so.1 could not be loaded (no NVIDIA driver)")
    end
  end)

  it("bad data in tables", function()
    errat(function() weft.array({ 1, 2, "x" }, weft.float32) end,
      "weft.array: element 3 is a string, expected a number for float32")
    errat(function() weft.array({ "1", "2" }, weft.int32) end,
      "weft.array: element 1 is a string, expected a number for int32")
    errat(function() weft.array({ { 1, 2 }, { 3, {} } }, weft.int32) end,
      "weft.array: element [2][2] is a table, expected a number for int32")
    errat(function() weft.array({ { 1, 2 }, { 3 } }) end,
      "weft.array: ragged data: element 2 has 1 items, expected 2")
    errat(function() weft.array({ { 1, 2, 3 }, { 1, 2 } }, weft.vec3) end,
      "weft.array: element 2 is a table of 2 values, expected 3 numbers for vec3f")
    errat(function() weft.array({ true, "no" }, weft.bool) end,
      "weft.array: element 2 is a string, expected a boolean or number for bool")
    errat(function() weft.array(5) end, "weft.array: data must be a table, a cdata pointer or an array, got a number")
  end)

  it("out-of-bounds and bad host indexing", function()
    local a = weft.zeros(3)
    errat(function() return a[3] end, "weft: index 3 out of bounds for dimension 0 of an array of shape {3}")
    errat(function() return a[-1] end, "weft: index -1 out of bounds for dimension 0 of an array of shape {3}")
    errat(function() a[5] = 1 end, "weft: index 5 out of bounds for dimension 0 of an array of shape {3}")
    errat(function() return a[0.5] end, "weft: index 0.5 out of bounds for dimension 0 of an array of shape {3}")
    local m = weft.zeros({ 2, 4 })
    errat(function() return m[2] end, "weft: index 2 out of bounds for dimension 0 of an array of shape {2, 4}")
    errat(function() a[0] = "x" end, "weft: a[0] = v: v is a string, expected a number for float32")
    errat(function() m[0] = { 1, 2 } end, "weft: a[i] = v: v has shape {2}, expected {4}")
    errat(function() return a.nope end, "weft: array has no member 'nope'")
    errat(function() a.shape = { 1 } end, "weft: cannot set array member 'shape'")
    errat(function() a.grad = weft.zeros(4) end, "weft: a.grad has shape {4}, expected {3}")
    errat(function() a:fill_("x") end, "a:fill_: value is a string, expected a number for float32")
  end)

  it("copy mismatches", function()
    errat(function() weft.copy(weft.zeros(3), weft.zeros(4)) end, "weft.copy: shapes differ (dst {3}, src {4})")
    errat(function() weft.copy(weft.zeros(3), weft.zeros(3, weft.int32)) end,
      "weft.copy: dtypes differ (dst float32, src int32)")
    errat(function() weft.copy(weft.zeros(3), {}) end, "weft.copy: src must be an array, got a table")
    errat(function() weft.clone(3) end, "weft.clone: expected an array, got a number")
  end)

  it("leaves the process healthy", function()
    for _ = 1, 100 do pcall(weft.array, { 1, "x" }) end
    assert.are.same({ 1, 2 }, weft.array({ 1, 2 }):totable())
  end)
end)
