-- The differential test (weft issue 12): generated float64 functions
-- (tests/diff/gen.lua) run by plain LuaJIT's interpreter and by weft on the
-- same inputs must give the same doubles. make test runs a bounded number
-- (WEFT_DIFF_N, default 40, from seed WEFT_DIFF_SEED, default 1); for
-- thousands, with hangs counted, run scripts/lua-diff COUNT.
-- A refusal (a construct weft does not take) is allowed but printed; a
-- different value is a failure that shows the function's text.
local run = dofile("tests/diff/run.lua")

local N = tonumber(os.getenv("WEFT_DIFF_N")) or 40
local FIRST = tonumber(os.getenv("WEFT_DIFF_SEED")) or 1

describe("differential test against LuaJIT", function()
  it(("gives LuaJIT's interpreter's values for %d generated functions"):format(N), function()
    local counts = { same = 0, different = 0, refused = 0, jitdiff = 0 }
    local bad = {}
    for seed = FIRST, FIRST + N - 1 do
      local status, detail, text = run.case(seed)
      counts[status] = counts[status] + 1
      if status == "different" then
        bad[#bad + 1] = ("seed %d: %s\n%s"):format(seed, detail, text)
      end
    end
    if counts.refused > 0 or counts.jitdiff > 0 then
      print(("\nlua_diff: %d same (%d where LuaJIT's JIT and interpreter disagree), %d refused"):format(
        counts.same + counts.jitdiff, counts.jitdiff, counts.refused))
    end
    assert.are.equal(0, #bad, table.concat(bad, "\n"))
    -- most functions must be taken, or the test tests little
    assert.is_true(counts.refused <= N / 5, counts.refused .. " of " .. N .. " refused")
  end)
end)
