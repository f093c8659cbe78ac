rockspec_format = "3.0"
package = "weft"
version = "scm-1"
source = { url = "git+https://example.invalid/weft.git" }
description = {
  summary = "Data-parallel kernels in Lua, compiled to native code and CUDA",
  detailed = [[
weft compiles kernels written as Lua functions to multithreaded native code
(LLVM) or CUDA, differentiates them, and shares arrays zero-copy with C hosts,
NumPy, PyTorch and JAX through DLPack.]],
  license = "MIT",
}
dependencies = { "lua == 5.1" } -- LuaJIT
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    WEFT_LUADIR = "$(LUADIR)",
    WEFT_LIBDIR = "$(LIBDIR)",
    WEFT_ROCK = "ON",
  },
}
