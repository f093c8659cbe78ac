-- Random (but seeded, so repeatable) bad arguments to the public Lua
-- functions: every call must either work or raise a message of weft's own,
-- never a Lua internal error ("attempt to index ...", "bad argument ...")
-- from inside weft's files, and never crash the process.
local weft = require "weft"

describe("the public Lua functions under random arguments", function()
  local k = weft.kernel{ x = weft.array(weft.float32), a = weft.float32,
    function(x, a) local i = weft.tid(); x[i] = x[i] * a end }
  local vals = { 0, -1, 1.5, 1e300, -2 ^ 63, "x", "cuda:0", "cpu", "sm_80", {}, { 1, 2 }, { -1 },
                 { 1, 2, 3, 4, 5 }, true, false, weft.zeros(3), weft.zeros({ 2, 2 }, weft.float64),
                 weft.float32, weft.vec3(1, 2, 3), print, function() end, 0 / 0, k }
  local fns = {
    zeros = weft.zeros, empty = weft.empty, ones = weft.ones, full = weft.full, array = weft.array,
    zeros_like = weft.zeros_like, empty_like = weft.empty_like, clone = weft.clone, copy = weft.copy,
    launch = weft.launch,
    backward = function(...) return weft.Tape():backward(...) end,
    record = function(...) return weft.Tape():record(...) end,
    jacobian = weft.jacobian, jacobian_fd = weft.jacobian_fd, jvp = weft.jvp,
    capture_begin = weft.capture_begin, capture_launch = weft.capture_launch,
    set_device = weft.set_device, Stream = weft.Stream, Event = weft.Event,
    set_stream = weft.set_stream, synchronize_stream = weft.synchronize_stream,
    reshape = function(...) return weft.zeros(6):reshape(...) end,
    transpose = function(...) return weft.zeros({ 2, 3 }):transpose(...) end,
    ptx = function(...) return k:ptx(...) end, source = function(...) return k:source(...) end,
    kernel = weft.kernel, func = weft.func, struct = weft.struct, vector = weft.vector,
    matrix = weft.matrix,
    index = function(a, b) local x = weft.zeros({ 2, 2 }); return x[a][b] end,
    setindex = function(a, b) local x = weft.zeros(3); x[a] = b end,
    to = function(...) return weft.zeros(3):to(...) end,
    fill = function(...) return weft.zeros(3, weft.vec3):fill_(...) end,
  }
  local names = {}
  for name in pairs(fns) do names[#names + 1] = name end
  table.sort(names) -- a fixed order: the same calls on every run

  it("raise weft's own messages", function()
    local internal, calls = {}, 0
    for seed = 1, 8 do
      math.randomseed(seed)
      for _, name in ipairs(names) do
        for _ = 1, 60 do
          local args, na = {}, math.random(0, 4)
          for i = 1, na do args[i] = vals[math.random(#vals)] end
          local d = {}
          for i = 1, na do d[i] = type(args[i]) == "table" and "{#" .. #args[i] .. "}" or tostring(args[i]) end
          local call = name .. "(" .. table.concat(d, ", ") .. ")"
          local ok, err = pcall(fns[name], unpack(args, 1, na))
          pcall(weft.capture_end)
          weft.config.mode = "release"
          calls = calls + 1
          local okt, text = pcall(tostring, err) -- results must print too
          if not okt then internal[#internal + 1] = call .. " (printing its result): " .. tostring(text) end
          err = okt and text or ""
          if not ok and (err:find("attempt to") or err:find("bad argument") or err:find("lua/weft/", 1, true)) then
            internal[#internal + 1] = call .. ": " .. err
          end
        end
      end
    end
    assert.are.equal(8 * #names * 60, calls)
    assert.are.same({}, internal)
  end)
end)
