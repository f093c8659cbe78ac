-- spec/helpers/run_child.lua: run a Lua script in a child LuaJIT (weft's
-- Lua files on its path, the same WEFT_LIB) and return what it printed,
-- stdout and stderr together. For output a kernel writes with print().
return function(code)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write("package.path = 'lua/?.lua;lua/?/init.lua;' .. package.path\n", code)
  f:close()
  local lib = os.getenv("WEFT_LIB")
  local cmd = (lib and ("WEFT_LIB='" .. lib .. "' ") or "") .. "luajit " .. path .. " 2>&1"
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  return out
end
