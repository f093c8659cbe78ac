-- expect: 3: varargs ('...') are not supported in kernels
local weft = require "weft"
return weft.kernel{ function(...)
end }
