local weft = require "weft"
print("weft " .. weft.version)
