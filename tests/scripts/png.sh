#!/usr/bin/env bash
# examples/png.lua writes PNGs that a reader takes: with zlib and with
# stored deflate blocks (the path without zlib; several blocks), each
# checked by Python's zlib (chunk CRCs, the zlib stream's Adler-32, the
# pixels), and the Lua CRC-32 agrees with zlib's.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$ROOT"
luajit - "$tmp" <<'LUA'
local png = dofile("examples/png.lua")
local dir = arg[1]
assert(png.zlib, "zlib did not load")
-- a 300x200 gradient: 180,200 bytes of rows, 3 stored blocks
local w, h = 300, 200
local rows = {}
for y = 0, h - 1 do
  local r = { "\0" }
  for x = 0, w - 1 do r[#r + 1] = string.char(x % 256, y % 256, (x + y) % 256) end
  rows[#rows + 1] = table.concat(r)
end
local data = table.concat(rows)
png.write(dir .. "/z.png", w, h, data)
-- the stored blocks, the path without zlib
local out = assert(io.open(dir .. "/stored.zlib", "wb"))
out:write(png._zlib_stored(data))
out:close()
assert(png._crc32_lua("IEND") % 2 ^ 32 == 0xAE426082, "Lua CRC-32 of IEND")
assert(png._crc32_lua("123456789") % 2 ^ 32 == 0xCBF43926, "Lua CRC-32 check value")
print("png.lua: wrote " .. dir .. "/z.png")
LUA
python3 - "$tmp" <<'PY'
import struct, sys, zlib
d = sys.argv[1]
w, h = 300, 200
want = b"".join(b"\0" + bytes(v for x in range(w) for v in (x % 256, y % 256, (x + y) % 256))
                for y in range(h))
blob = open(d + "/z.png", "rb").read()
assert blob[:8] == b"\x89PNG\r\n\x1a\n"
pos, chunks = 8, []
while pos < len(blob):
    n, = struct.unpack(">I", blob[pos:pos + 4])
    kind, body = blob[pos + 4:pos + 8], blob[pos + 8:pos + 8 + n]
    crc, = struct.unpack(">I", blob[pos + 8 + n:pos + 12 + n])
    assert zlib.crc32(kind + body) == crc, kind
    chunks.append((kind, body))
    pos += 12 + n
assert [k for k, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]
assert struct.unpack(">IIBBBBB", chunks[0][1]) == (w, h, 8, 2, 0, 0, 0)
assert zlib.decompress(chunks[1][1]) == want
assert len(chunks[1][1]) < len(want), "zlib compressed"
assert zlib.decompress(open(d + "/stored.zlib", "rb").read()) == want  # stored blocks
print("png: zlib and stored deflate streams decode to the pixels written")
PY
