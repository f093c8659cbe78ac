#!/usr/bin/env bash
# Volume, hash grid and mesh builtins inline into CPU kernels: with the bitcode
# of src/geom/inline_bc.c linked in (a build with clang of the JIT's LLVM
# version), the kernels' optimized IR calls neither volume_cell_f nor the
# hash grid iterator; without it the builtins are calls into libweft.
set -euo pipefail
W="$BUILD/weft"
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if [ ! -f "$BUILD/gen/geom.bc" ]; then echo "geom_inline: skipped (no bitcode in this build)"; exit 0; fi

cat > "$tmp/k.lua" <<'LUA'
local weft = require "weft"
local a = weft.zeros({ 9, 9, 9 })
local v = weft.Volume.from_dense(a)
local g = weft.HashGrid(4, 4, 4)
local p = weft.zeros(8, weft.vec3)
g:build(p, 0.5)
local m = weft.Mesh{ points = weft.array({ { 0, 0, 0 }, { 1, 0, 0 }, { 0, 1, 0 } }, weft.vec3),
  indices = weft.array({ 0, 1, 2 }, weft.int32) }
local k = weft.kernel{ id = weft.uint64, gid = weft.uint64, mid = weft.uint64, p = weft.array(weft.vec3),
  out = weft.array(weft.float32),
  function(id, gid, mid, p, out)
    local i = weft.tid()
    local c = 0
    for j in weft.hash_grid_query(gid, p[i], 0.5) do c = c + j end
    local r = weft.mesh_query_ray(mid, p[i], weft.vec3(0, 0, 1), 10.0)
    local q = weft.mesh_query_point_no_sign(mid, p[i], 10.0)
    out[i] = weft.volume_sample_f(id, p[i], 1) + weft.float32(c) + r.t + q.u
  end }
local out = weft.zeros(8)
weft.launch(k, 8, { v.id, g.id, m.id, p, out })

LUA
WEFT_CACHE_DIR="$tmp/cache" WEFT_DUMP=llvm "$W" "$tmp/k.lua" > "$tmp/out.txt" 2> "$tmp/ir.txt" ||
  fail "kernel: $(cat "$tmp/ir.txt" | tail -5)"
grep -q "LLVM IR of kernel" "$tmp/ir.txt" || fail "no IR dump"
if grep -E "call .*@wf_nat_(volume_cell_f|hash_grid_[a-z_]+|mesh_query_[a-z_]+)\(" \
  "$tmp/ir.txt"; then fail "volume, hash grid or mesh builtins are still calls"; fi
echo "geom_inline: ok"
