-- tests/diff/gen.lua: random Lua functions of two float64 numbers for the
-- differential test (tests/diff/run.lua): the same text is run by plain
-- LuaJIT and, as a weft.func, by a weft kernel, and the results compared.
--
-- gen(seed) returns the text of a chunk `return function(a, b) ... return
-- r, s, a end`. The functions use what Lua programmers write: arithmetic
-- (+ - * / % ^, unary minus) with literals of every kind, comparisons in
-- `c and x or y`, `and`/`or` on numbers, LuaJIT's math functions,
-- if/else, numeric for loops with integer and fractional bounds, bounded
-- while loops, `goto continue`, and assignments to the parameters. Loops
-- are bounded (at most a few dozen turns), so a hang is a bug. Locals
-- start from a or b, so they are float64 in the kernel; an integer loop's
-- counter is converted with weft.float64 (a host function too), since a
-- kernel does not mix int32 and float64 implicitly.
local M = {}

-- A small deterministic generator (LCG), independent of math.random.
local function rng(seed)
  local state = seed % 2147483647
  if state <= 0 then state = state + 2147483646 end
  return function(n) -- 1..n
    state = (state * 48271) % 2147483647
    return state % n + 1
  end
end

local LITS = { "0", "1", "2", "3", "-1", "0.5", "0.25", "1.5", "-2.5", "0.1", "0.3", "1e-3",
               "1e10", "7", "10", "0.75", "9007199254740992", "2147483647", "3e9", "-0.0",
               "math.pi", "math.huge", "1/3" }
local UNARY = { "math.floor", "math.ceil", "math.abs", "math.sqrt", "math.sin", "math.cos",
                "math.exp", "math.log", "math.log10", "math.tanh", "math.atan", "math.rad",
                "math.deg", "math.sinh", "math.asin", "math.acos", "math.tan", "math.cosh" }
local BINARY = { "math.max", "math.min", "math.fmod", "math.atan2", "math.pow", "math.log",
                 "math.max3", "math.min3", "math.ldexp" }
local CMP = { "<", "<=", ">", ">=", "==", "~=" }
local ARITH = { "+", "-", "*", "/", "%", "^", "+", "*", "-" }

function M.gen(seed)
  local R = rng(seed)
  local out = {}
  local function emit(ind, s) out[#out + 1] = string.rep("  ", ind) .. s end
  local vars = { "a", "b", "r", "s" }
  local loopvars = {} -- float counters in scope
  local nloop = 0

  local expr
  local function leaf()
    local k = R(10)
    if k <= 2 then return LITS[R(#LITS)] end
    if k == 3 and #loopvars > 0 then return loopvars[R(#loopvars)] end
    return vars[R(#vars)]
  end
  -- an expression that reads a variable (so a call's argument is float64)
  local function hasvar(e)
    for _, pat in ipairs { "%f[%w_][abrs]%f[^%w_]", "%f[%w_][kfm]%d+e?%f[^%w_]" } do
      if e:find(pat) then return true end
    end
    return false
  end
  local function varexpr(d)
    local e = expr(d)
    if not hasvar(e) then e = "(" .. vars[R(#vars)] .. " + " .. e .. ")" end
    return e
  end
  function expr(d)
    if d <= 0 then return leaf() end
    local k = R(14)
    if k <= 3 then return leaf() end
    if k <= 7 then return "(" .. expr(d - 1) .. " " .. ARITH[R(#ARITH)] .. " " .. expr(d - 1) .. ")" end
    if k == 8 then return "(- " .. expr(d - 1) .. ")" end
    if k == 9 then return UNARY[R(#UNARY)] .. "(" .. varexpr(d - 1) .. ")" end
    if k == 10 then
      local f = BINARY[R(#BINARY)]
      if f == "math.max3" or f == "math.min3" then
        return f:sub(1, 8) .. "(" .. varexpr(d - 1) .. ", " .. expr(d - 1) .. ", " .. expr(d - 1) .. ")"
      end
      if f == "math.ldexp" then return "math.ldexp(" .. varexpr(d - 1) .. ", " .. (R(9) - 5) .. ")" end
      return f .. "(" .. varexpr(d - 1) .. ", " .. expr(d - 1) .. ")"
    end
    if k == 11 or k == 12 then
      return "(" .. varexpr(d - 1) .. " " .. CMP[R(#CMP)] .. " " .. expr(d - 1) .. " and " ..
             expr(d - 1) .. " or " .. expr(d - 1) .. ")"
    end
    if k == 13 then return "(" .. varexpr(d - 1) .. " and " .. expr(d - 1) .. ")" end
    return "(" .. varexpr(d - 1) .. " or " .. expr(d - 1) .. ")"
  end

  local function cond(d)
    local c = varexpr(d) .. " " .. CMP[R(#CMP)] .. " " .. expr(d)
    if R(4) == 1 then c = c .. (R(2) == 1 and " and " or " or ") .. varexpr(d) .. " " .. CMP[R(#CMP)] .. " " .. expr(d) end
    return c
  end

  local FLOOPS = { { "0.3", "1.2", "0.1" }, { "0", "1", "0.1" }, { "0", "1", "0.25" },
                   { "1", "0", "-0.125" }, { "-1.5", "1.5", "0.5" }, { "0.1", "0.7", "0.2" },
                   { "3e9", "3e9 + 2", nil }, { "0", "2.5", nil } }
  local ILOOPS = { { "1", "4" }, { "0", "3" }, { "5", "1", "-2" }, { "2147483645", "2147483647" },
                   { "0", "2147483647", "1073741824" }, { "-2", "2" } }

  local stmts
  local function stmt(ind, d)
    local k = R(12)
    local targets = { "r", "s", "r", "s", "a", "b" }
    if k <= 5 or d <= 0 then
      emit(ind, targets[R(#targets)] .. " = " .. expr(3))
    elseif k <= 7 then
      emit(ind, "if " .. cond(2) .. " then")
      stmts(ind + 1, d - 1, R(2))
      if R(2) == 1 then
        emit(ind, "else")
        stmts(ind + 1, d - 1, R(2))
      end
      emit(ind, "end")
    elseif k <= 9 and nloop < 2 then
      nloop = nloop + 1
      local name = "k" .. nloop
      local float = R(2) == 1
      local bnd = float and FLOOPS[R(#FLOOPS)] or ILOOPS[R(#ILOOPS)]
      emit(ind, "for " .. name .. " = " .. bnd[1] .. ", " .. bnd[2] .. (bnd[3] and (", " .. bnd[3]) or "") .. " do")
      local cont = R(3) == 1
      if float then
        loopvars[#loopvars + 1] = name
      else
        emit(ind + 1, "local f" .. nloop .. " = weft.float64(" .. name .. ")")
        loopvars[#loopvars + 1] = "f" .. nloop
      end
      if cont then emit(ind + 1, "if " .. cond(1) .. " then goto continue end") end
      stmts(ind + 1, d - 1, R(2))
      if cont then emit(ind + 1, "::continue::") end
      loopvars[#loopvars] = nil
      emit(ind, "end")
    elseif k == 10 and nloop < 2 then
      nloop = nloop + 1
      local n = "n" .. nloop
      emit(ind, "local " .. n .. " = 0")
      emit(ind, "while " .. n .. " < " .. R(5) .. " do")
      emit(ind + 1, n .. " = " .. n .. " + 1")
      stmts(ind + 1, d - 1, R(2))
      if R(3) == 1 then emit(ind + 1, "if " .. cond(1) .. " then break end") end
      emit(ind, "end")
    elseif k == 11 then
      local m = "m" .. R(1000)
      local fn = R(2) == 1 and "math.frexp" or "math.modf"
      emit(ind, "local " .. m .. ", " .. m .. "e = " .. fn .. "(" .. varexpr(2) .. ")")
      emit(ind, "r = r + " .. m .. (fn == "math.frexp" and (" * weft.float64(" .. m .. "e)") or (" - " .. m .. "e")))
    else
      emit(ind, targets[R(#targets)] .. " = " .. expr(3))
    end
  end
  function stmts(ind, d, n)
    for _ = 1, n do stmt(ind, d) end
  end

  emit(0, "return function(a, b)")
  emit(1, "local r = a")
  emit(1, "local s = b")
  stmts(1, 2, R(4))
  emit(1, "return r, s, a")
  emit(0, "end")
  return table.concat(out, "\n") .. "\n"
end

-- Inputs each function runs on: (a, b) pairs.
M.inputs = {
  { 0.5, -1.25 }, { 3, 7 }, { -7.75, 0.1 }, { 0, -0.0 }, { 1e10, 2.5 }, { -3, -0.5 },
  { 0 / 0, 1 }, { 1 / 0, -2 },
}

return M
