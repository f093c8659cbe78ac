-- expect: 4: cannot subtract float64 and int32
local weft = require "weft"
local diff = weft.func(function(a, b)
  return a - b
end)
local outer = weft.func(function(a, b)
  return diff(a, b) * 2.0
end)
return weft.kernel{ x = weft.array(weft.float64), n = weft.array(weft.int32), function(x, n)
  local i = weft.tid()
  x[i] = outer(x[i], n[i])
end }
-- called from: 7
-- called from: 11
