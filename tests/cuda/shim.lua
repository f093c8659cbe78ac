-- tests/cuda/shim.lua -- run a weft kernel's emitted CUDA C on the host.
--
--   local shim = dofile("tests/cuda/shim.lua")
--   shim.available()                     -> true if g++ can build the shim
--   shim.run(weft, k, dim, args)         -> runs k over dim on the host:
--       arrays in args (compact, on the cpu) are written to files, a C++
--       driver (tests/cuda/shim.h + the CUDA C + a generated main) loads
--       them, launches through WF_SHIM_LAUNCH and writes them back; the
--       arrays in args are updated in place. Returns the program's stdout.
-- Scalars are written into the driver as literals of the kernel's C types.
local ffi = require "ffi"

local M = {}
local root = os.getenv("WEFT_SOURCE_DIR") or "."

function M.available()
  return os.execute("g++ --version > /dev/null 2>&1") == 0
end

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == 0 or ok == true
end

local function readall(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local function writeall(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- The C parameter types of entry in the emitted source (after wf_dims).
local function param_ctypes(src, entry)
  local sig = src:match('extern "C" __global__ void ' .. entry .. "%((.-)%)")
  local out = {}
  for p in sig:gmatch("[^,]+") do
    local ty = p:match("^%s*(.-)%s+[%w_]+%s*$")
    out[#out + 1] = ty
  end
  table.remove(out, 1) -- wf_dims
  return out
end

local function literal(ctype, v)
  if ctype == "bool" then return v and "true" or "false" end
  if ctype == "float" or ctype == "double" then
    return string.format("(%s)%.17g", ctype, v)
  end
  if ctype == "__half" then return string.format("(__half)%.17g", v) end
  return string.format("(%s)%dLL", ctype, v)
end

function M.run(weft, k, dim, args)
  local src, entries = weft._core.cuda_source(k:_module())
  local entry = entries[1]
  local ctypes = param_ctypes(src, entry)
  local dir = os.tmpname()
  os.remove(dir)
  assert(sh("mkdir -p " .. dir))
  local main = { "int main() {" }
  local launch_args = {}
  for i, v in ipairs(args) do
    if weft.is_array(v) then
      local h = v.h
      local nbytes = tonumber(h.size) * h.elsize
      writeall(dir .. "/a" .. i .. ".bin", ffi.string(h.data, nbytes))
      main[#main + 1] = string.format(
        '  static char b%d[%d + 1]; { FILE *f = fopen("%s/a%d.bin", "rb"); if (fread(b%d, 1, %d, f) != %d) return 2; fclose(f); }',
        i, nbytes, dir, i, i, nbytes, nbytes)
      main[#main + 1] = string.format("  wf_arr A%d; A%d.data = b%d;", i, i, i)
      for d = 0, 3 do
        main[#main + 1] = string.format("  A%d.shape[%d] = %d; A%d.strides[%d] = %d;", i, d,
                                        d < h.ndim and tonumber(h.shape[d]) or 1, i, d,
                                        d < h.ndim and tonumber(h.strides[d]) or 0)
      end
      launch_args[#launch_args + 1] = "A" .. i
    else
      launch_args[#launch_args + 1] = literal(ctypes[i], v)
    end
  end
  local d = type(dim) == "table" and dim or { dim }
  local dl = {}
  for i = 1, 4 do dl[i] = tostring(d[i] or 1) end
  main[#main + 1] = string.format("  long long dims[4] = {%s};", table.concat(dl, ", "))
  main[#main + 1] = string.format("  WF_SHIM_LAUNCH(%s, %d, dims, %s);", entry, #d,
                                  table.concat(launch_args, ", "))
  for i, v in ipairs(args) do
    if weft.is_array(v) then
      local nbytes = tonumber(v.h.size) * v.h.elsize
      main[#main + 1] = string.format(
        '  { FILE *f = fopen("%s/a%d.bin", "wb"); fwrite(b%d, 1, %d, f); fclose(f); }', dir, i, i, nbytes)
    end
  end
  main[#main + 1] = "  return 0;\n}\n"
  writeall(dir .. "/k.cpp", src .. "\n" .. table.concat(main, "\n"))
  local cmd = string.format("g++ -std=c++17 -O1 -w -include %s/tests/cuda/shim.h %s/k.cpp -o %s/k 2> %s/cc.log",
                            root, dir, dir, dir)
  if not sh(cmd) then
    error("shim: g++ failed:\n" .. readall(dir .. "/cc.log"))
  end
  assert(sh(string.format("%s/k > %s/out.txt", dir, dir)), "shim: the program failed")
  local out = readall(dir .. "/out.txt")
  for i, v in ipairs(args) do
    if weft.is_array(v) then
      local s = readall(dir .. "/a" .. i .. ".bin")
      ffi.copy(v.h.data, s, #s)
    end
  end
  sh("rm -rf " .. dir)
  return out
end

return M
