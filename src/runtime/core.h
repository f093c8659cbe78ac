/*
** core.h -- the Lua C module "weft.core" (luaopen_weft_core) and the
** registration hooks of the parts that add functions to it.
**
** Each part registers its functions into the core table at index `t`:
**   front (src/front):  compile, ir, ...        wf_front_register
**   cpu   (src/cpu):    cpu_compile, llvm_ir... wf_cpu_register
**   cuda  (src/cuda):   cuda_source, ptx, ...   wf_cuda_register
** Lua C functions here may raise Lua errors (they are called through the
** Lua C API, not the FFI) but must free what they allocated first.
*/
#ifndef WF_CORE_H
#define WF_CORE_H

#include <lua.h>
#include <lauxlib.h>

#include "runtime/wf_rt.h"
#include "ir/ir.h"

WF_INTERNAL void wf_front_register(lua_State *L, int t);
WF_INTERNAL void wf_cpu_register(lua_State *L, int t);
WF_INTERNAL void wf_cuda_register(lua_State *L, int t);
WF_INTERNAL void wf_ad_register(lua_State *L, int t);       /* src/ad */
WF_INTERNAL void wf_info_register(lua_State *L, int t); /* info.c */

/* A compiled IR module held by Lua (userdata "weft.module", made by the
** front end). The module owns its types. */
typedef struct wf_modud {
  wf_module *mod;
} wf_modud;
#define WF_MODULE_MT "weft.module"
WF_INTERNAL wf_module *wf_core_checkmodule(lua_State *L, int idx);

WEFT_API int luaopen_weft_core(lua_State *L);

#endif
