-- Findings of the fuzz harnesses (tests/fuzz) that are fixed in the Lua
-- layer: each test replays the input's shape and checks the message.
local weft = require "weft"

-- the line of this file holding a marker comment
local function line_of(marker)
  local n = 0
  for l in io.lines("spec/fuzz_findings_spec.lua") do
    n = n + 1
    if l:find(marker, 1, true) then return n end
  end
end

describe("a builtin passed as the kernel or func function", function()
  -- fuzz_front: weft.kernel{weft.quat_rotate} compiled builtins.lua's own
  -- closure and failed at builtins.lua:25 ("string concatenation ... is not
  -- supported in kernels"), a line of weft's, not the user's
  it("is refused by weft.kernel at the declaration", function()
    local ok, err = pcall(function()
      local k = weft.kernel{ weft.quat_rotate } -- @kernel_builtin
      return k
    end)
    assert.is_false(ok)
    assert.are.equal("spec/fuzz_findings_spec.lua:" .. line_of("@kernel_builtin")
      .. ": weft.kernel: expected a function of your own, got the builtin 'quat_rotate'", err)
  end)

  it("is refused by weft.func, with types or without", function()
    local ok, err = pcall(function()
      local f = weft.func(math.sqrt) -- @func_builtin
      return f
    end)
    assert.is_false(ok)
    assert.are.equal("spec/fuzz_findings_spec.lua:" .. line_of("@func_builtin")
      .. ": weft.func: expected a function of your own, got the builtin 'sqrt'", err)
    ok, err = pcall(function()
      local f = weft.func{ x = weft.float32, print } -- @func_print
      return f
    end)
    assert.is_false(ok)
    assert.are.equal("spec/fuzz_findings_spec.lua:" .. line_of("@func_print")
      .. ": weft.func: expected a function of your own, got the builtin 'print'", err)
  end)
end)
