-- Cell order (src/cpu/entry.c, wf_cpu_rt_hgrid_order): a CPU kernel whose
-- hash_grid_query runs at p[weft.tid()], over as many threads as the grid
-- holds points and with p the grid's build array, runs its threads in the
-- grid's cell order. Each thread runs once with its own tid; the order is
-- seen here through an atomic counter on one thread.
local weft = require "weft"

local H = require "helpers.points"
local function random_points(n, seed) return H.random_points(n, 1, 0, seed or 7) end
local brute_counts = H.brute_counts

-- counts neighbours of q[tid] and writes, at the k-th thread to run, its tid
local seq_k = weft.kernel{
  id = weft.uint64, q = weft.array(weft.vec3), p = weft.array(weft.vec3), r = weft.float32,
  n = weft.array(weft.int32), ctr = weft.array(weft.int32), seq = weft.array(weft.int32),
  function(id, q, p, r, n, ctr, seq)
    local t = weft.tid()
    local c = 0
    for j in weft.hash_grid_query(id, q[t], r) do
      if weft.length_sq(p[j] - q[t]) <= r * r then c = c + 1 end
    end
    n[t] = c
    local k = weft.atomic_add(ctr, 0, 1)
    seq[k] = t
  end,
}

local ids_k = weft.kernel{
  id = weft.uint64, out = weft.array(weft.int32),
  function(id, out) out[weft.tid()] = weft.hash_grid_point_id(id, weft.tid()) end,
}

local N, R = 3000, 0.06
local pts = random_points(N)
local want = brute_counts(pts, R)

-- run seq_k over `threads` threads with query positions q (default: the
-- build array); the counts and the order the threads ran in, 0-based
local function run(g, p, threads, q)
  local n = weft.zeros(threads, weft.int32)
  local ctr, seq = weft.zeros(1, weft.int32), weft.full(threads, -1, weft.int32)
  weft.launch(seq_k, threads, { g.id, q or p, p, R, n, ctr, seq })
  assert(ctr:totable()[1] == threads)
  return n:totable(), seq:totable()
end

local function cell_ids(g)
  local out = weft.zeros(N, weft.int32)
  weft.launch(ids_k, N, { g.id, out })
  return out:totable()
end

local function identity(n)
  local t = {}
  for i = 1, n do t[i] = i - 1 end
  return t
end

describe("cell order of hash grid kernels", function()
  local saved_threads, saved_order
  before_each(function()
    saved_threads, saved_order = weft.config.num_threads, weft.config.cell_order
    weft.config.num_threads = 1
  end)
  after_each(function()
    weft.config.num_threads, weft.config.cell_order = saved_threads, saved_order
  end)

  it("runs threads querying p[tid()] in the grid's cell order, each once", function()
    local p = weft.array(pts, weft.vec3)
    local g = weft.HashGrid(16, 16, 16)
    g:build(p, R)
    local n, seq = run(g, p, N)
    assert.are.same(want, n)
    local ids = cell_ids(g)
    assert.are.same(ids, seq)
    assert.are_not.same(identity(N), seq) -- random points: cell order is no identity
  end)

  it("keeps tid order with weft.config.cell_order = false", function()
    local p = weft.array(pts, weft.vec3)
    local g = weft.HashGrid(16, 16, 16)
    g:build(p, R)
    weft.config.cell_order = false
    local n, seq = run(g, p, N)
    assert.are.same(want, n)
    assert.are.same(identity(N), seq)
    weft.config.cell_order = true
    local _, seq2 = run(g, p, N)
    assert.are.same(cell_ids(g), seq2)
  end)

  it("rejects a cell_order that is not a boolean", function()
    weft.config.cell_order = "yes"
    local p = weft.array(pts, weft.vec3)
    local g = weft.HashGrid(16, 16, 16)
    g:build(p, R)
    local ok, err = pcall(run, g, p, N)
    assert.is_false(ok)
    assert.matches("weft.config.cell_order must be true, false or nil, got", err, 1, true)
  end)

  it("runs every thread once on the pool and counts the same", function()
    weft.config.num_threads = 2
    local big = random_points(40000, 3)
    local p = weft.array(big, weft.vec3)
    local g = weft.HashGrid(64, 64, 64)
    g:build(p, 0.02)
    local function go()
      local n = weft.zeros(#big, weft.int32)
      local ctr, seq = weft.zeros(1, weft.int32), weft.full(#big, -1, weft.int32)
      weft.launch(seq_k, #big, { g.id, p, p, 0.02, n, ctr, seq })
      return n:totable(), seq:totable()
    end
    local n, seq = go()
    local seen = {}
    for _, t in ipairs(seq) do
      assert(t >= 0 and t < #big and not seen[t], "a thread ran twice or not at all")
      seen[t] = true
    end
    weft.config.cell_order = false
    local n0 = go()
    assert.are.same(n0, n)
  end)

  it("keeps tid order when the launch is not over the grid's points", function()
    local p = weft.array(pts, weft.vec3)
    local g = weft.HashGrid(16, 16, 16)
    g:build(p, R)
    local _, seq = run(g, p, N - 1)
    assert.are.same(identity(N - 1), seq)
  end)

  it("keeps tid order for positions from another array than the build's", function()
    local p = weft.array(pts, weft.vec3)
    local g = weft.HashGrid(16, 16, 16)
    g:build(p, R)
    local q = weft.array(pts, weft.vec3) -- the same values, another buffer
    local n, seq = run(g, p, N, q)
    assert.are.same(want, n)
    assert.are.same(identity(N), seq)
    -- rebuilt from q, the order follows q
    g:build(q, R)
    local _, seq2 = run(g, p, N, q)
    assert.are.same(cell_ids(g), seq2)
    local _, seq3 = run(g, p, N)
    assert.are.same(identity(N), seq3)
  end)

  it("keeps tid order for a query at another position than p[tid()]", function()
    local other = weft.kernel{
      id = weft.uint64, p = weft.array(weft.vec3), r = weft.float32, ctr = weft.array(weft.int32),
      seq = weft.array(weft.int32),
      function(id, p, r, ctr, seq)
        local t = weft.tid()
        local c = 0
        for _ in weft.hash_grid_query(id, p[(t + 1) % 3000], r) do c = c + 1 end
        local k = weft.atomic_add(ctr, 0, 1)
        seq[k] = t + 0 * c
      end,
    }
    local p = weft.array(pts, weft.vec3)
    local g = weft.HashGrid(16, 16, 16)
    g:build(p, R)
    local ctr, seq = weft.zeros(1, weft.int32), weft.full(N, -1, weft.int32)
    weft.launch(other, N, { g.id, p, R, ctr, seq })
    assert.are.same(identity(N), seq:totable())
  end)

  it("keeps tid order for the null id and fails cleanly on a dead one", function()
    local p = weft.array(pts, weft.vec3)
    local saved = weft.config.mode
    weft.config.mode = "fast" -- where id 0 is a grid with no points
    local ok0, n, seq = pcall(run, { id = 0 }, p, N)
    weft.config.mode = saved
    assert.is_true(ok0, n)
    assert.are.same(identity(N), seq)
    assert.are.same(0, n[1])
    local ok, err = pcall(run, { id = 123456 }, p, N)
    assert.is_false(ok)
    assert.matches("is not a live weft.HashGrid", err, 1, true)
  end)

  it("orders a grid's threads in every mode and in a 2-D launch keeps tid order", function()
    local p = weft.array(pts, weft.vec3)
    local g = weft.HashGrid(16, 16, 16)
    g:build(p, R)
    local ids = cell_ids(g)
    local saved = weft.config.mode
    for _, mode in ipairs{ "fast", "debug" } do
      weft.config.mode = mode
      local n, seq = run(g, p, N)
      weft.config.mode = saved
      assert.are.same(want, n)
      assert.are.same(ids, seq)
    end
    local ctr, seq = weft.zeros(1, weft.int32), weft.full(N, -1, weft.int32)
    local n = weft.zeros(N, weft.int32)
    weft.launch(seq_k, { N, 1 }, { g.id, p, p, R, n, ctr, seq })
    assert.are.same(identity(N), seq:totable())
  end)
end)
