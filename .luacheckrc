-- luacheck settings for weft's Lua layer (run by `make lint`, part of `make test`).
std = "luajit"
max_line_length = 140
