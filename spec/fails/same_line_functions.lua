-- expect: 4: several functions on this line could be this kernel or weft.func and weft cannot tell which; define it on a line of its own
local weft = require "weft"
-- `1` and `1.0` compile to the same Lua bytecode but not the same kernel
local h = function(x) x[0] = 1 end; return weft.kernel{ x = weft.array(weft.float32), function(x) x[0] = 1.0 end }
