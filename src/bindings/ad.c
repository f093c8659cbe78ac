/*
** ad.c -- core.adjoint and core.jvp: the Lua entries to src/ad.
**
**   name = core.adjoint(module [, kernel [, opts]])
**
** opts.names: the kernel's parameter names, for messages (a kernel whose
** adjoint would replay an overwritten element is an error naming the array;
** see check.c).
**
** kernel is a function index (0-based, as in the module) or a name; it
** defaults to the module's first kernel. Appends "adj_<name>" to the module
** in place (once; later calls return the same name), optimizes the module,
** and returns the adjoint's name.
**
**   name = core.jvp(module [, kernel [, opts]])
**
** the same for the forward-mode kernel "jvp_<name>" (see jvp.c). Errors are
** Lua errors "chunk:line: autodiff: ...". WEFT_DUMP listing "ad" prints
** the new kernel's IR.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ad/ad.h"
#include "bindings/bindings.h"
#include "util/dump.h"

#define WF_AD_MAXNAMES 64

/* The index of the kernel named by argument idx (or the first kernel). */
static int kernel_arg(lua_State *L, wf_module *m, int idx) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    int k = wf_module_find(m, lua_tostring(L, idx));
    if (k < 0) luaL_error(L, "autodiff: no function '%s' in the module", lua_tostring(L, idx));
    return k;
  }
  if (!lua_isnoneornil(L, idx)) {
    int k = (int)luaL_checkinteger(L, idx);
    if (k < 0 || k >= m->nfuncs) luaL_error(L, "autodiff: no function %d in the module", k);
    return k;
  }
  for (int k = 0; k < m->nfuncs; k++)
    if (m->funcs[k]->is_kernel && strncmp(m->funcs[k]->name, "adj_", 4) != 0 &&
        strncmp(m->funcs[k]->name, "jvp_", 4) != 0)
      return k;
  return luaL_error(L, "autodiff: the module holds no kernel");
}

/* opts.names: the kernel's parameter names (held by the table at opts),
** for messages. */
static void read_names(lua_State *L, const wf_func *fn, int opts, const char **names) {
  if (!lua_istable(L, opts)) return;
  lua_getfield(L, opts, "names");
  if (lua_istable(L, -1))
    for (int i = 0; i < fn->nparams && i < WF_AD_MAXNAMES; i++) {
      lua_rawgeti(L, -1, i + 1);
      if (lua_type(L, -1) == LUA_TSTRING) names[i] = lua_tostring(L, -1); /* held by the table */
      lua_pop(L, 1);
    }
  lua_pop(L, 1);
}

typedef int (*transform_fn)(wf_module *m, int k, const char *const *names, char *err, size_t n);

/* Appends prefix..name with fn, optimizes, dumps on WEFT_DUMP=ad. */
static int transform(lua_State *L, transform_fn fn, const char *prefix) {
  wf_module *m = wf_bind_checkmodule(L, 1);
  int k = kernel_arg(L, m, 2);
  const char *names[WF_AD_MAXNAMES] = {0};
  read_names(L, m->funcs[k], 3, names);
  char err[1024];
  if (fn(m, k, m->funcs[k]->nparams <= WF_AD_MAXNAMES ? names : NULL, err, sizeof err) != 0)
    return luaL_error(L, "%s", err);
  if (wf_ir_optimize(m, err, sizeof err) != 0) return luaL_error(L, "autodiff: %s", err);
  lua_pushfstring(L, "%s%s", prefix, m->funcs[k]->name);
  int a = wf_module_find(m, lua_tostring(L, -1));
  if (a >= 0 && wf_dump_wanted("ad")) wf_ir_print_func(m->funcs[a], stderr);
  return 1;
}

static int jvp_named(wf_module *m, int k, const char *const *names, char *err, size_t n) {
  (void)names;
  return wf_ad_jvp(m, k, err, n);
}

static int l_adjoint(lua_State *L) {
  return transform(L, wf_ad_kernel_named, "adj_");
}

static int l_jvp(lua_State *L) {
  return transform(L, jvp_named, "jvp_");
}

/* A Lua list of the 1-based indices i < n with flag[i] set. */
static void push_indices(lua_State *L, const uint8_t *flag, int n) {
  lua_createtable(L, 0, 0);
  int k = 0;
  for (int i = 0; i < n; i++)
    if (flag[i]) {
      lua_pushinteger(L, i + 1);
      lua_rawseti(L, -2, ++k);
    }
}

/* Appends { param (1-based), "path" } to the list at the stack index in
** ud, for the struct-held arrays of core.adjoint_uses. */
typedef struct held_list {
  lua_State *L;
  int list, want_write;
} held_list;
static void held_push(void *ud, int param, const char *path, int write) {
  held_list *h = ud;
  if (write != h->want_write) return;
  lua_State *L = h->L;
  lua_createtable(L, 2, 0);
  lua_pushinteger(L, param + 1);
  lua_rawseti(L, -2, 1);
  lua_pushstring(L, path);
  lua_rawseti(L, -2, 2);
  lua_rawseti(L, h->list, (int)lua_objlen(L, h->list) + 1);
}

/* reads, writes, held_reads, held_writes = core.adjoint_uses(module
** [, kernel]): after core.adjoint, the kernel's parameters (1-based) whose
** element values its adjoint reads (after optimization: what the gradient
** really depends on), and those the kernel itself writes; then the same
** for arrays held by struct parameters, as lists of { param, "field.path" }.
** The tape uses them to refuse a launch whose adjoint would read an array
** that a later launch overwrote. */
static int l_adjoint_uses(lua_State *L) {
  wf_module *m = wf_bind_checkmodule(L, 1);
  int k = kernel_arg(L, m, 2);
  const wf_func *pf = m->funcs[k];
  char name[256];
  snprintf(name, sizeof name, "adj_%s", pf->name);
  int a = wf_module_find(m, name);
  if (a < 0) return luaL_error(L, "autodiff: the module holds no adjoint of '%s'", pf->name);
  int n = pf->nparams;
  uint8_t *f = calloc((size_t)(3 * n + 1), 1);
  if (!f) return luaL_error(L, "autodiff: out of memory");
  /* reads: the adjoint's loads; writes: the primal's (f + 2n: ignored) */
  wf_ad_param_uses(m->funcs[a], n, f, f + 2 * n);
  wf_ad_param_uses(pf, n, f + 2 * n, f + n);
  push_indices(L, f, n);
  push_indices(L, f + n, n);
  free(f);
  for (int w = 0; w < 2; w++) {
    lua_newtable(L);
    held_list h = {L, lua_gettop(L), w};
    wf_ad_held_uses(w ? pf : m->funcs[a], n, held_push, &h);
  }
  return 4;
}

void wf_bind_ad(lua_State *L, int t) {
  lua_pushcfunction(L, l_adjoint_uses);
  lua_setfield(L, t, "adjoint_uses");
  lua_pushcfunction(L, l_adjoint);
  lua_setfield(L, t, "adjoint");
  lua_pushcfunction(L, l_jvp);
  lua_setfield(L, t, "jvp");
}
