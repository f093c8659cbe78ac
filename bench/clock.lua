-- clock.lua: a monotonic clock in seconds (clock_gettime through the FFI).
local ffi = require "ffi"
pcall(ffi.cdef, [[
typedef struct weft_bench_timespec { long tv_sec; long tv_nsec; } weft_bench_timespec;
int clock_gettime(int clk, weft_bench_timespec *ts);
int nanosleep(const weft_bench_timespec *req, weft_bench_timespec *rem);
]])
local ts = ffi.new("weft_bench_timespec")
local M = {}
function M.now()
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
-- Sleep s seconds: lets another library's worker threads, which spin for a
-- while after their work (Embree's TBB, OpenBLAS), go idle before the next
-- timed section.
function M.sleep(s)
  local req = ffi.new("weft_bench_timespec")
  req.tv_sec, req.tv_nsec = math.floor(s), (s - math.floor(s)) * 1e9
  ffi.C.nanosleep(req, nil)
end
-- The median of a list of numbers.
function M.median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  local n = #s
  if n % 2 == 1 then return s[(n + 1) / 2] end
  return (s[n / 2] + s[n / 2 + 1]) / 2
end
return M
