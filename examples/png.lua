-- png.lua: write 8-bit RGB images as PNG files, for the examples.
--
--   local png = dofile(script_dir .. "/png.lua")
--   png.write(path, width, height, rows)
--
-- rows is a string or a cdata pointer (with its length) holding `height`
-- rows of 1 + 3 * width bytes each: a PNG filter byte (0) and the pixels'
-- R, G, B. The image data is compressed with the system's zlib
-- (libz.so.1, which libweft links for NanoVDB files) when it loads, else
-- written as stored (uncompressed) deflate blocks, which every PNG reader
-- takes too.
local ffi = require "ffi"
local bit = require "bit"

local M = {}

pcall(ffi.cdef, [[
unsigned long compressBound(unsigned long sourceLen);
int compress2(uint8_t *dest, unsigned long *destLen, const uint8_t *source,
              unsigned long sourceLen, int level);
unsigned long crc32(unsigned long crc, const uint8_t *buf, unsigned int len);
]])
local okz, z = pcall(ffi.load, "libz.so.1")
if not okz then z = nil end
M.zlib = z ~= nil

-- CRC-32 (the PNG chunk checksum) in Lua, for when zlib is missing.
local crc_table
local function crc32_lua(s)
  if not crc_table then
    crc_table = {}
    for n = 0, 255 do
      local c = n
      for _ = 1, 8 do
        if bit.band(c, 1) ~= 0 then
          c = bit.bxor(0xEDB88320, bit.rshift(c, 1))
        else
          c = bit.rshift(c, 1)
        end
      end
      crc_table[n] = c
    end
  end
  local c = 0xFFFFFFFF
  for i = 1, #s do
    c = bit.bxor(crc_table[bit.band(bit.bxor(c, s:byte(i)), 0xFF)], bit.rshift(c, 8))
  end
  return bit.bxor(c, 0xFFFFFFFF)
end

local function crc32(s)
  if z then return tonumber(z.crc32(0, s, #s)) end
  return crc32_lua(s) % 2 ^ 32
end

local function u32(v)
  v = v % 2 ^ 32
  return string.char(math.floor(v / 2 ^ 24) % 256, math.floor(v / 2 ^ 16) % 256,
                     math.floor(v / 2 ^ 8) % 256, v % 256)
end

local function chunk(kind, data)
  return u32(#data) .. kind .. data .. u32(crc32(kind .. data))
end

-- A zlib stream of stored deflate blocks (at most 65535 bytes each).
local function zlib_stored(data)
  local out = { "\120\1" }
  local a, b = 1, 0 -- Adler-32
  for i = 1, #data, 65535 do
    local block = data:sub(i, i + 65534)
    local final = i + 65535 > #data and 1 or 0
    local n = #block
    out[#out + 1] = string.char(final, n % 256, math.floor(n / 256), 255 - n % 256,
                                255 - math.floor(n / 256)) .. block
    for j = 1, n do
      a = (a + block:byte(j)) % 65521
      b = (b + a) % 65521
    end
  end
  if #data == 0 then out[#out + 1] = "\1\0\0\255\255" end
  out[#out + 1] = u32(b * 65536 + a)
  return table.concat(out)
end

local function zlib_compress(data)
  if not z then return zlib_stored(data) end
  local len = ffi.new("unsigned long[1]", z.compressBound(#data))
  local buf = ffi.new("uint8_t[?]", len[0])
  if z.compress2(buf, len, data, #data, 6) ~= 0 then return zlib_stored(data) end
  return ffi.string(buf, len[0])
end

-- The PNG file's bytes.
function M.encode(width, height, rows, nbytes)
  local data = type(rows) == "string" and rows or ffi.string(rows, nbytes)
  assert(#data == height * (1 + 3 * width), "png.encode: rows must hold height * (1 + 3 * width) bytes")
  return "\137PNG\r\n\26\n"
    .. chunk("IHDR", u32(width) .. u32(height) .. "\8\2\0\0\0") -- 8-bit RGB
    .. chunk("IDAT", zlib_compress(data))
    .. chunk("IEND", "")
end

function M.write(path, width, height, rows, nbytes)
  local f = assert(io.open(path, "wb"))
  f:write(M.encode(width, height, rows, nbytes))
  f:close()
end

-- For tests: the stored and the Lua CRC paths, whatever zlib does.
M._zlib_stored, M._crc32_lua = zlib_stored, crc32_lua

return M
