-- weft.printf: Warp's wp.printf. C's format printed exactly as written (no
-- newline added), checked at compile time against the values' types. On
-- the CPU each kernel thread keeps its unfinished line and writes whole
-- lines at once, so threads never interleave inside a line; the rest is
-- written at the thread's end. The format errors are in spec/fails/printf_*.
local weft, internal = require "weft", require "weft.internal"
local run_child = dofile("spec/helpers/run_child.lua")
local core = internal.core

describe("printf", function()
  it("prints its format exactly, no newline added, values converted as C's printf", function()
    local out = run_child([[
      local weft = require "weft"
      local k = weft.kernel{ x = weft.array(weft.float32), n = weft.array(weft.int64),
                             u = weft.array(weft.uint32), function(x, n, u)
        local i = weft.tid()
        weft.printf("<%d>", i)
        weft.printf("%6.2f|%-4s|%5s", x[i], "ab", "cd")
        weft.printf("|%lld|%u|%x|%d|%e|%%\n", n[i], u[i], i + 250, i == 0, weft.float64(x[i]))
        weft.printf("no newline")
      end }
      weft.launch(k, 1, { weft.array({ 3.14159 }, weft.float32), weft.array({ -9007199254740993LL }, weft.int64),
                          weft.array({ 4000000000 }, weft.uint32) })
      io.write("|host\n")
    ]])
    assert.equal("<0>  3.14|ab  |   cd|-9007199254740993|4000000000|fa|1|3.141590e+00|%\nno newline|host\n",
      out)
  end)

  it("keeps each thread's line whole: 300 threads, a line in four calls each", function()
    local out = run_child([[
      local weft = require "weft"
      local k = weft.kernel{ function()
        local i = weft.tid()
        weft.printf("line %d", i)
        weft.printf(" a=%d", i * 3)
        weft.printf(" b=%.1f", weft.float32(i) * 0.5)
        weft.printf(" end %d\n", i)
      end }
      weft.launch(k, 300, {})
    ]])
    local seen, n = {}, 0
    for l in out:gmatch("[^\n]*\n") do
      local i = tonumber(l:match("^line (%d+) "))
      assert.truthy(i, l)
      assert.equal(string.format("line %d a=%d b=%.1f end %d\n", i, i * 3, i * 0.5, i), l)
      assert.is_nil(seen[i])
      seen[i], n = true, n + 1
    end
    assert.equal(300, n)
  end)

  it("shares the thread's line with print", function()
    local out = run_child([[
      local weft = require "weft"
      local k = weft.kernel{ function()
        weft.printf("x=%d ", 7)
        print("then print", 2.5)
      end }
      weft.launch(k, 1, {})
    ]])
    assert.equal("x=7 then print\t2.5\n", out)
  end)

  it("emits CUDA's printf with the same format, through NVRTC and ptxas", function()
    local k = weft.kernel{ x = weft.array(weft.float32), n = weft.array(weft.int64), function(x, n)
      local i = weft.tid()
      weft.printf("[%d] %.3f %s", i, x[i], "lit%")
      weft.printf(" %lld\n", n[i])
    end }
    local src = k:source("cuda")
    assert.truthy(src:find('printf("[%lld] %.3f lit%%"', 1, true), src)
    assert.truthy(src:find('printf(" %lld\\n"', 1, true), src)
    if core.cuda_nvrtc_version and core.cuda_nvrtc_version() then
      assert.is_true(core.cuda_assemble((k:ptx("sm_80")), "sm_80") > 0)
    end
    local shim = dofile("tests/cuda/shim.lua")
    if shim.available() then
      assert.equal("[0] 1.500 lit% -3\n",
        shim.run(weft, k, 1, { weft.array({ 1.5 }, weft.float32), weft.array({ -3 }, weft.int64) }))
    end
  end)

  it("writes on the host as string.format does", function()
    local out = run_child([[
      local weft = require "weft"
      weft.printf("%d-%s", 4, "x")
      io.write("|\n")
    ]])
    assert.equal("4-x|\n", out)
  end)
end)
