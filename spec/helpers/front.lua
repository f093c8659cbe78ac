-- spec/helpers/front.lua: small helpers of the front-end specs.
local ffi = require "ffi"
local M = {}

-- The float32 nearest to x, as a Lua number.
function M.f32of(x) return tonumber(ffi.new("float", x)) end

-- The error raised while compiling k (nil if it compiles).
function M.compile_error(k)
  local ok, err = pcall(function() return k:ir() end)
  if ok then return nil end
  return tostring(err)
end

-- A function giving the line of `file` that holds a marker (error messages
-- name it); lines that call line_of themselves are skipped.
function M.line_finder(file)
  return function(marker)
    local n = 0
    for l in io.lines(file) do
      n = n + 1
      if l:find(marker, 1, true) and not l:find("line_of", 1, true) then return n end
    end
  end
end

return M
