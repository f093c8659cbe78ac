/*
** bindings.h -- the Lua C module "weft.core" (luaopen_weft_core): the Lua
** C functions over the compiler, one file per part, all named wf_bind_*.
**
** Takes: the parts below (front, ad, cpu, cuda, ir, runtime). Gives: the
** core table that lua/weft/ drives (compile, ir, adjoint, cpu_compile,
** cuda_ptx, host_info, ...).
**
**   core.c   luaopen_weft_core; the "weft.module" userdata (an IR module
**            owned by Lua, with its types)
**   front.c  compile, ir, writes, front_setup, builtin_ops   wf_bind_front
**   ad.c     adjoint, jvp, ...                               wf_bind_ad
**   cuda.c   cuda_source, cuda_ptx, ...                      wf_bind_cuda
**   cpu.c    cpu_compile, llvm_ir, cpu_stats                 wf_bind_cpu
**   info.c   host_info                                       wf_bind_info
**
** Lua C functions here may raise Lua errors (they are called through the
** Lua C API, not the FFI) but must free what they allocated first.
*/
#ifndef WF_BINDINGS_H
#define WF_BINDINGS_H

#include <lauxlib.h>
#include <lua.h>

#include "ir/ir.h"
#include "runtime/wf_rt.h"

/* Each part adds its functions to the core table at index t. */
WF_INTERNAL void wf_bind_front(lua_State *L, int t);
WF_INTERNAL void wf_bind_cpu(lua_State *L, int t);
WF_INTERNAL void wf_bind_cuda(lua_State *L, int t);
WF_INTERNAL void wf_bind_ad(lua_State *L, int t);
WF_INTERNAL void wf_bind_info(lua_State *L, int t);

/* A compiled IR module held by Lua (userdata "weft.module"). The module
** owns its types; __gc frees it. */
typedef struct wf_modud {
  wf_module *mod;
} wf_modud;
#define WF_MODULE_MT "weft.module"
/* Push a new module userdata holding no module yet (set ->mod; if an
** error comes first, __gc finds NULL). */
WF_INTERNAL wf_modud *wf_bind_newmodule(lua_State *L);
/* The module of the userdata at idx; raises if it is not one or freed. */
WF_INTERNAL wf_module *wf_bind_checkmodule(lua_State *L, int idx);

WEFT_API int luaopen_weft_core(lua_State *L);

#endif
