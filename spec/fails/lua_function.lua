-- expect: 5: 'helper' is a Lua function, not a builtin or a weft.func; it cannot be called in a kernel
local weft = require "weft"
local function helper(v) return v end
return weft.kernel{ x = weft.array(weft.float32), function(x)
  x[0] = helper(1.0)
end }
