#!/usr/bin/env bash
# The examples run and print what they promise.
set -euo pipefail
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
out=$("$BUILD/embed")
echo "$out"
echo "$out" | grep -q "embed: 1000 particles, 240 frames; .* max |kernel - C| = "
echo "$out" | grep -qx "embed: ok"
out=$("$BUILD/weft" examples/hello.lua)
echo "$out"
echo "$out" | grep -q "y\[0\] = 7, y\[999999\] = 7"
echo "$out" | grep -q "|(3,4,0)| = 5, |(1,2,2)| = 3"
# the fountains are in mid-air (most particles off the floor), as a PNG
out=$("$BUILD/weft" examples/particles.lua "$tmp/p.png" 400)
echo "$out"
echo "$out" | grep -qE "20000 particles, 400 steps, 1[0-9]{4} in the air, [1-9][0-9]{4} lit pixels .*\(480x320\)"
# png FILE H W: a PNG whose image data is H rows of W RGB pixels
png() {
  python3 -c 'import sys, zlib; b = open(sys.argv[1], "rb").read(); assert b[:8] == b"\x89PNG\r\n\x1a\n"
i = b.index(b"IDAT"); n = int.from_bytes(b[i - 4:i], "big")
assert len(zlib.decompress(b[i + 4:i + 4 + n])) == int(sys.argv[2]) * (1 + 3 * int(sys.argv[3]))' "$@"
}
png "$tmp/p.png" 320 480
# a DEM pile through a hash grid, and sphere tracing a volume SDF
out=$("$BUILD/weft" examples/dem.lua "$tmp/dem.png" 400)
echo "$out"
echo "$out" | grep -qE "dem: 4000 spheres, 400 steps, mean height 0\.[0-9]+, [1-9][0-9]* lit pixels"
png "$tmp/dem.png" 256 256
out=$("$BUILD/weft" examples/sdf_trace.lua "$tmp/sdf.png")
echo "$out"
echo "$out" | grep -qE "sdf_trace: torus SDF, 64\^3 voxels, 160x120 pixels, [1-9][0-9]{3} hit the surface"
png "$tmp/sdf.png" 120 160
# ray casting a mesh through its BVH into a normal-shaded image
out=$("$BUILD/weft" examples/raycast.lua "$tmp/ray.png" 160 120)
echo "$out"
echo "$out" | grep -qE "raycast: 15360 triangles, 160x120 pixels, [1-9][0-9]{3} hit the mesh"
png "$tmp/ray.png" 120 160
# the same script with or without a GPU (here: on the cpu)
out=$("$BUILD/weft" examples/devices.lua)
echo "$out"
echo "$out" | grep -qx "devices: ok"
# gradient descent from Lua and through torch.optim
"$BUILD/weft" examples/rosenbrock.lua | tail -n 3
PY="${WEFT_VENV:-$BUILD/venv}/bin/python"
# scripts/install-deps puts torch in the venv: without it this fails
out=$(WEFT_LIB="$BUILD/libweft.so" "$PY" examples/torch_adam.py)
echo "$out"
echo "$out" | grep -q "torch_adam: ok"
# the same through paddle.optimizer (paddlepaddle: PY_TEST_PKGS)
if "$PY" -c "import paddle" 2>/dev/null; then
  out=$(WEFT_LIB="$BUILD/libweft.so" "$PY" examples/paddle_adam.py 2>/dev/null)
  echo "$out"
  echo "$out" | grep -q "paddle_adam: ok"
else
  echo "paddle_adam: skipped (paddlepaddle is not in the venv: make deps)"
fi
# a weft kernel under shard_map over 4 CPU devices, halos through ppermute
out=$(WEFT_LIB="$BUILD/libweft.so" "$PY" examples/jax_shard_map.py)
echo "$out"
echo "$out" | grep -q "devices: 4 (cpu)"
echo "$out" | grep -q "sharded vs one device: max |diff| = 0$"
echo ok
