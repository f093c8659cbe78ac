-- Wrong arguments to a CUDA launch fail at the caller's line, as on the
-- CPU (runs under scripts/cuda-emu; pending without a CUDA device).
local weft = require "weft"

local S = weft.struct{ { "a", weft.array(weft.float32) }, { "s", weft.float32 } }
local k = weft.kernel{ n = weft.int32, out = weft.array(weft.float32), function(n, out)
  out[weft.tid()] = weft.float32(n)
end }
local ks = weft.kernel{ p = S, out = weft.array(weft.float32), function(p, out)
  out[weft.tid()] = p.a[weft.tid()] * p.s
end }

describe("CUDA launch arguments", function()
  it("are checked with the caller's file and line", function()
    if require("helpers.cuda").missing() then return end
    local d = { device = "cuda:0" }
    local out, host = weft.zeros(4, weft.float32, d), weft.zeros(4)
    local function fails(pat, line, f)
      local ok, err = pcall(f)
      assert.is_false(ok)
      assert.matches("cuda_launch_args_spec.lua:" .. line .. ": " .. pat, tostring(err), 1, true)
    end
    local this = debug.getinfo(1, "l").currentline
    fails("weft.launch: kernel 'k': parameter 'n' expects int32, got a string", this + 2,
      function() weft.launch(k, 4, { "x", out }, d) end)
    fails("weft.launch: kernel 'k': parameter 'n' expects int32, got 1.5 (not an integer)", this + 4,
      function() weft.launch(k, 4, { 1.5, out }, d) end)
    fails("weft.launch: kernel 'k': parameter 'out' expects array(float32), got array(int32)", this + 6,
      function() weft.launch(k, 4, { 1, weft.zeros(4, weft.int32, d) }, d) end)
    fails("weft.launch: kernel 'k': input 'out' is on device cpu, but the launch runs on cuda:0", this + 8,
      function() weft.launch(k, 4, { 1, host }, d) end)
    fails("weft.launch: kernel 'k' takes 2 arguments (inputs then outputs), got 1", this + 10,
      function() weft.launch(k, 4, { 1 }, d) end)
    fails("weft.launch: kernel 'k': opts.outputs must be a table, got a number", this + 12,
      function() weft.launch(k, 4, { 1, out }, { device = "cuda:0", outputs = 7 }) end)
    fails("weft.launch: kernel 'k': opts.block_dim must be a positive integer, got -3", this + 14,
      function() weft.launch(k, 4, { 1, out }, { device = "cuda:0", block_dim = -3 }) end)
    fails("weft.launch: kernel 'k': opts.block_dim must be a positive integer, got a string", this + 16,
      function() weft.launch(k, 4, { 1, out }, { device = "cuda:0", block_dim = "x" }) end)
    fails("weft.launch: kernel 'ks': input 'p': field 'a' is on device cpu, but the launch runs on cuda:0",
      this + 18, function() weft.launch(ks, 4, { S{ a = host, s = 2 }, out }, d) end)
    -- a good launch still runs
    weft.launch(k, 4, { 3, out }, { device = "cuda:0", block_dim = 2 })
    assert.equals(3, out:to("cpu")[3])
  end)
end)
