/*
** state.h -- weft_State internals shared by the C API files
** (state.c: open/close/run; interop/capi.c: arrays and DLPack).
*/
#ifndef WF_STATE_H
#define WF_STATE_H

#include <lua.h>

#include "runtime/wf_rt.h"

struct weft_State {
  lua_State *L;
  char *msg;        /* last error message (malloc'd), NULL = none */
  wf_intr intr;     /* weft_interrupt's request; the runtime polls it */
  size_t mem_used;  /* bytes of the Lua heap (counted when limited) */
  size_t mem_limit; /* weft_Options.memory_limit, 0 = none */
  int sandbox_exit; /* weft_Options.sandbox_exit */
};

/* Set W's message (printf style) and return status. */
WF_INTERNAL int wf_state_seterr(weft_State *W, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Take the Lua error value on top of L as W's message (pops it). */
WF_INTERNAL int wf_state_takeerr(weft_State *W, int status);
/* Protected call of the function below nargs arguments with a traceback;
** on failure the message goes to W. Returns a WEFT_* status. */
WF_INTERNAL int wf_state_pcall(weft_State *W, int nargs, int nres);

#endif
