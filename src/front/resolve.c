/*
** resolve.c -- the Lua side of compiling: reading a function's source,
** converting weft type tables into IR types, resolving free names through
** upvalues and the environment, and calling weft.func objects (overload
** choice, specialization per argument types, recursion check).
**
** The front env table (registry[WF_FRONT_ENV_KEY], set by kernel.lua through
** core.front_setup) holds: builtins (Lua value -> builtin name), type_mt,
** func_mt, const_mt, kernel_mt.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/lower.h"

#define ERR(e, ...) wf_lo_err(F, (e)->line, (e)->col, __VA_ARGS__)

void wf_res_push(wf_fctx *C, int ref) {
  lua_rawgeti(C->L, C->keepidx, ref);
}

int wf_res_keep(wf_fctx *C) {
  lua_rawseti(C->L, C->keepidx, ++C->nkeep);
  return C->nkeep;
}

/* Raise a plain (position-less) error. */
static void plainerr(wf_fctx *C, const char *msg) __attribute__((noreturn));
static void plainerr(wf_fctx *C, const char *msg) {
  lua_pushstring(C->L, msg);
  lua_error(C->L);
  for (;;) {
  }
}

/* ---- source text ---- */

/* Push the text registered for the function at idx (kernel.lua keeps it
** per function from the declaration, and per chunk name: registry tables
** "weft.fnsrc" and "weft.sources"), or nothing and return 0. */
static int registered_src(lua_State *L, int idx, const char *source) {
  lua_getfield(L, LUA_REGISTRYINDEX, "weft.fnsrc");
  if (lua_istable(L, -1)) {
    lua_pushvalue(L, idx);
    lua_rawget(L, -2);
    lua_remove(L, -2);
    if (lua_isstring(L, -1)) return 1;
  }
  lua_pop(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, "weft.sources");
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, source);
    if (!lua_isstring(L, -1) && (source[0] == '=' || source[0] == '@')) {
      lua_pop(L, 1);
      lua_getfield(L, -1, source + 1);
    }
    lua_remove(L, -2);
    if (lua_isstring(L, -1)) return 1;
  }
  lua_pop(L, 1);
  return 0;
}

void wf_front_getsrc(wf_fctx *C, int idx, wf_src *src) {
  lua_State *L = C->L;
  lua_Debug ar;
  memset(&ar, 0, sizeof ar);
  lua_pushvalue(L, idx);
  if (!lua_getinfo(L, ">S", &ar)) plainerr(C, "weft: cannot inspect the kernel function");
  memset(src, 0, sizeof *src);
  src->chunk = wf_front_strdup(C, ar.short_src, strlen(ar.short_src));
  src->linedefined = ar.linedefined;
  src->lastlinedefined = ar.lastlinedefined;
  if (!strcmp(ar.what, "C"))
    plainerr(C, "weft: a C function cannot be compiled as a kernel or weft.func");
  const char *s = ar.source;
  if ((unsigned char)s[0] == 27 || (s[0] == '=' && ar.linedefined <= 0))
    plainerr(C, "weft: the function has no source text (stripped bytecode?); kernels and "
                "weft.func need their Lua source");
  if (ar.linedefined <= 0) plainerr(C, "weft: the main chunk cannot be compiled as a kernel");
  if (registered_src(L, idx, s)) {
    size_t n;
    const char *t = lua_tolstring(L, -1, &n);
    src->text = wf_front_strdup(C, t, n);
    src->len = n;
    lua_pop(L, 1);
  } else if (s[0] == '@') {
    FILE *f = fopen(s + 1, "rb");
    if (!f) {
      lua_pushfstring(L, "weft: cannot read the kernel's source file '%s'", s + 1);
      lua_error(L);
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
      size_t k = fread(buf + n, 1, cap - n, f);
      n += k;
      if (n < cap) break;
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    fclose(f);
    if (!buf) plainerr(C, "weft: out of memory reading the kernel source");
    src->text = wf_front_strdup(C, buf, n);
    src->len = n;
    free(buf);
  } else if (!strcmp(s, "=stdin")) {
    /* luajit's prompt, or a script piped into luajit (a file on stdin is
    ** read again: kernel.lua) */
    lua_pushfstring(L,
                    "weft: the function defined at stdin:%d has no source text: what luajit "
                    "reads from its prompt or a pipe is gone once loaded. Kernels are "
                    "compiled from their Lua source: put them in a file and run it (luajit "
                    "file.lua, dofile(\"file.lua\") at the prompt, or luajit < file.lua), type "
                    "them at weft's own prompt (the weft command keeps what you type), or "
                    "load them with weft.loadstring([[ ... ]], \"=name\")()",
                    ar.linedefined);
    lua_error(L);
  } else if (s[0] == '=' || (unsigned char)s[0] == 27) {
    lua_pushfstring(L,
                    "weft: the function defined at %s:%d has no source text: its chunk was "
                    "loaded from a buffer under the name '%s'. Kernels are compiled from "
                    "their Lua source: load the chunk with weft.load or weft.loadstring (C: "
                    "weft_dobuffer), or register its text first with "
                    "weft.register_source(\"%s\", text) (C: weft_register_source)",
                    ar.short_src, ar.linedefined, s, s);
    lua_error(L);
  } else {
    size_t n = strlen(s);
    src->text = wf_front_strdup(C, s, n);
    src->len = n;
  }
}

/* ---- types ---- */
static int getint(lua_State *L, int idx, const char *k, int dflt) {
  lua_getfield(L, idx, k);
  int v = lua_isnumber(L, -1) ? (int)lua_tointeger(L, -1) : dflt;
  lua_pop(L, 1);
  return v;
}

static int is_type_table(wf_fctx *C, int idx) {
  lua_State *L = C->L;
  if (!lua_istable(L, idx) || !lua_getmetatable(L, idx)) return 0;
  lua_getfield(L, C->envidx, "type_mt");
  int r = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return r;
}

const wf_type *wf_front_totype(wf_fctx *C, int idx) {
  lua_State *L = C->L;
  if (idx < 0) idx = lua_gettop(L) + idx + 1;
  if (!is_type_table(C, idx)) return NULL;
  wf_types *T = C->T;
  lua_getfield(L, idx, "kind");
  const char *kind = lua_tostring(L, -1);
  lua_pop(L, 1);
  if (!kind) return NULL;
  const wf_type *t = NULL, *st = NULL;
  if (!strcmp(kind, "vec") || !strcmp(kind, "mat") || !strcmp(kind, "quat") ||
      !strcmp(kind, "transform")) {
    lua_getfield(L, idx, "scalar");
    st = wf_front_totype(C, -1);
    lua_pop(L, 1);
    if (!st) return NULL;
  }
  if (!strcmp(kind, "bool"))
    t = wf_t_bool(T);
  else if (!strcmp(kind, "int")) {
    lua_getfield(L, idx, "signed");
    int sg = lua_toboolean(L, -1);
    lua_pop(L, 1);
    t = wf_t_int(T, getint(L, idx, "bits", 32), sg);
  } else if (!strcmp(kind, "float"))
    t = wf_t_float(T, getint(L, idx, "bits", 32));
  else if (!strcmp(kind, "vec")) {
    int n = getint(L, idx, "n", 3);
    if (n < 1 || n > WF_MAX_COMP) return NULL; /* the front end's limit (lower.h) */
    t = wf_t_vec(T, n, st);
  } else if (!strcmp(kind, "mat")) {
    int r = getint(L, idx, "rows", 3), c = getint(L, idx, "cols", 3);
    if (r < 1 || r > WF_MAX_COMP || c < 1 || c > WF_MAX_COMP) return NULL;
    t = wf_t_mat(T, r, c, st);
  } else if (!strcmp(kind, "quat"))
    t = wf_t_quat(T, st);
  else if (!strcmp(kind, "transform"))
    t = wf_t_transform(T, st);
  else if (!strcmp(kind, "array")) {
    lua_getfield(L, idx, "dtype");
    const wf_type *et = wf_front_totype(C, -1);
    lua_pop(L, 1);
    int nd = getint(L, idx, "ndim", 1);
    if (!et || nd < 1 || nd > 4) return NULL;
    t = wf_t_array(T, et, nd);
  } else if (!strcmp(kind, "struct")) {
    lua_getfield(L, idx, "name");
    const char *nm = lua_tostring(L, -1);
    char *name = wf_front_strdup(C, nm ? nm : "struct", strlen(nm ? nm : "struct"));
    lua_pop(L, 1);
    lua_getfield(L, idx, "fields");
    int fi = lua_gettop(L);
    int n = (int)lua_objlen(L, fi);
    wf_field *fs = wf_front_alloc(C, sizeof(wf_field) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
      lua_rawgeti(L, fi, i + 1);
      int f = lua_gettop(L);
      lua_getfield(L, f, "name");
      const char *fnm = lua_tostring(L, -1);
      fs[i].name = wf_front_strdup(C, fnm ? fnm : "?", strlen(fnm ? fnm : "?"));
      lua_pop(L, 1);
      fs[i].offset = (uint32_t)getint(L, f, "offset", 0);
      lua_getfield(L, f, "type");
      fs[i].type = wf_front_totype(C, -1);
      lua_pop(L, 2);
      if (!fs[i].type) {
        lua_pop(L, 1);
        return NULL;
      }
    }
    lua_pop(L, 1);
    t = wf_t_struct(T, name, n, fs);
  }
  if (!t) plainerr(C, "weft: out of memory (types)");
  lua_getfield(L, idx, "id");
  if (lua_isnumber(L, -1)) ((wf_type *)t)->lua_id = (int32_t)lua_tointeger(L, -1);
  lua_pop(L, 1);
  return t;
}

/* ---- names ---- */
static int has_mt(wf_fctx *C, int idx, const char *key) {
  lua_State *L = C->L;
  if (!lua_getmetatable(L, idx)) return 0;
  lua_getfield(L, C->envidx, key);
  int r = !lua_isnil(L, -1) && lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return r;
}

/* Build a constant of type t from the flat list of scalars at stack
** index ci (1-based position *k), depth first over the components. */
static wf_val const_from(wf_fstate *F, const wf_type *t, int ci, int *k, wf_expr *at) {
  lua_State *L = F->C->L;
  if (wf_t_is_scalar(t)) {
    lua_rawgeti(L, ci, (*k)++);
    if (!lua_isnumber(L, -1)) ERR(at, "weft.constant: the value has too few components");
    double v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    return wf_lo_const(F, t, v);
  }
  int n = wf_t_arity(t);
  wf_val c[64];
  if (n > 64) ERR(at, "weft.constant: %s has too many components", wf_lo_tname(F->C, t));
  for (int i = 0; i < n; i++)
    c[i] = const_from(F, wf_t_component(F->C->T, t, i), ci, k, at);
  return wf_b_agg(&F->b, t, n, c);
}

/* A weft.constant holding a typed host value: the Const table is below
** its "type" field on the stack; both are popped. */
static wf_rv typed_const(wf_fstate *F, const char *path, wf_expr *at) {
  lua_State *L = F->C->L;
  int ti = lua_gettop(L), ci = ti - 1;
  const wf_type *t = wf_front_totype(F->C, ti);
  if (!t) ERR(at, "'%s': the type of this weft.constant cannot be used in kernels", path);
  lua_getfield(L, ci, "comps");
  int k = 1;
  wf_val v = const_from(F, t, lua_gettop(L), &k, at);
  lua_pop(L, 3);
  return wf_lo_mkval(v, t);
}

/* Classify the Lua value on top of the stack (popped) found under `path`. */
static wf_rv classify(wf_fstate *F, const char *path, wf_expr *at) {
  wf_fctx *C = F->C;
  lua_State *L = C->L;
  wf_rv r;
  memset(&r, 0, sizeof r);
  int top = lua_gettop(L);
  switch (lua_type(L, top)) {
  case LUA_TNIL: lua_pop(L, 1); ERR(at, "undefined name '%s'", path);
  case LUA_TNUMBER: {
    double v = lua_tonumber(L, top);
    lua_pop(L, 1);
    r.kind = RV_LIT;
    r.num = v;
    r.isint = v == floor(v) && fabs(v) < 2147483648.0;
    return r;
  }
  case LUA_TBOOLEAN: {
    int b = lua_toboolean(L, top);
    lua_pop(L, 1);
    const wf_type *bt = wf_t_bool(C->T);
    return wf_lo_mkval(wf_b_consti(&F->b, bt, b), bt);
  }
  case LUA_TSTRING:
    lua_pop(L, 1);
    ERR(at, "'%s' is a string; strings cannot be used in kernels", path);
  default: break;
  }
  r.kind = RV_LUA;
  r.str = wf_front_strdup(C, path, strlen(path));
  /* builtin? */
  lua_getfield(L, C->envidx, "builtins");
  lua_pushvalue(L, top);
  lua_rawget(L, -2);
  if (lua_isstring(L, -1)) {
    const char *bn = lua_tostring(L, -1);
    r.lk = LV_BUILTIN;
    r.str = wf_front_strdup(C, bn, strlen(bn));
    lua_pop(L, 3);
    return r;
  }
  lua_pop(L, 2);
  if (is_type_table(C, top)) {
    r.lk = LV_TYPE;
    r.t = wf_front_totype(C, top);
    lua_pop(L, 1);
    if (!r.t) ERR(at, "'%s' is not a type usable in kernels", path);
    return r;
  }
  if (has_mt(C, top, "const_mt")) {
    lua_getfield(L, top, "type");
    if (!lua_isnil(L, -1)) return typed_const(F, path, at);
    lua_pop(L, 1);
    lua_getfield(L, top, "value");
    lua_remove(L, top);
    return classify(F, path, at);
  }
  if (has_mt(C, top, "func_mt")) {
    r.lk = LV_FUNC;
    r.ref = wf_res_keep(C);
    return r;
  }
  if (has_mt(C, top, "kernel_mt")) {
    lua_pop(L, 1);
    ERR(at, "'%s' is a kernel; kernels cannot be called from kernels (use weft.func)", path);
  }
  if (lua_istable(L, top)) {
    r.lk = LV_NS;
    r.ref = wf_res_keep(C);
    return r;
  }
  if (lua_isfunction(L, top)) {
    lua_getfield(L, C->envidx, "typefns");
    lua_pushvalue(L, top);
    lua_rawget(L, -2);
    int typefn = lua_isstring(L, -1);
    lua_pop(L, 2);
    if (typefn) {
      r.lk = LV_TYPEFN;
      r.ref = wf_res_keep(C);
      return r;
    }
    lua_pop(L, 1);
    ERR(at, "'%s' is a Lua function, not a builtin or a weft.func; it cannot be called in a kernel",
        path);
  }
  const char *tn = lua_typename(L, lua_type(L, top));
  if (!strcmp(tn, "cdata")) {
    /* a host value of a weft type (weft.vec3(...), a struct): a constant
    ** of its current contents, as weft.constant makes (env.capture) */
    lua_getfield(L, C->envidx, "capture");
    lua_pushvalue(L, top);
    int st = lua_isfunction(L, -2) ? lua_pcall(L, 1, 1, 0) : -1;
    if (st == 0 && has_mt(C, -1, "const_mt")) {
      lua_replace(L, top);
      return classify(F, path, at);
    }
    if (st > 0 && lua_isstring(L, -1)) { /* why it cannot be a constant */
      const char *m = lua_tostring(L, -1), *p = strstr(m, "weft.constant: ");
      char msg[200];
      snprintf(msg, sizeof msg, "%s", p ? p + 15 : m);
      lua_settop(L, top - 1);
      ERR(at, "'%s' cannot be used in a kernel: %s", path, msg);
    }
    lua_settop(L, top);
  }
  lua_pop(L, 1);
  ERR(at, "'%s' (a %s) cannot be used in a kernel", path, tn);
}

/* Records where a free name's value (on top of the stack, left there) was
** found, for kernel.lua's launch guard, which re-reads it at each launch:
** { kind, container, key, value } with kind "u" (container: the function,
** key: its upvalue number), "e" (the function's environment, key: the
** name) or "f" (a namespace table, key: the field). */
static void record_dep(wf_fctx *C, const char *kind, int cidx, int ikey, const char *skey) {
  lua_State *L = C->L;
  if (!C->depsidx) return;
  int vi = lua_gettop(L);
  lua_createtable(L, 4, 0);
  lua_pushstring(L, kind);
  lua_rawseti(L, -2, 1);
  lua_pushvalue(L, cidx);
  lua_rawseti(L, -2, 2);
  if (skey)
    lua_pushstring(L, skey);
  else
    lua_pushinteger(L, ikey);
  lua_rawseti(L, -2, 3);
  lua_pushvalue(L, vi);
  lua_rawseti(L, -2, 4);
  lua_rawseti(L, C->depsidx, ++C->ndeps);
}

wf_rv wf_res_name(wf_fstate *F, const char *name, wf_expr *at) {
  lua_State *L = F->C->L;
  wf_res_push(F->C, F->fnidx);
  int fi = lua_gettop(L);
  int found = 0;
  for (int i = 1;; i++) {
    const char *un = lua_getupvalue(L, fi, i);
    if (!un) break;
    if (!strcmp(un, name)) {
      found = 1;
      record_dep(F->C, "u", fi, i, NULL);
      break;
    }
    lua_pop(L, 1);
  }
  if (!found) {
    lua_getfenv(L, fi);
    lua_getfield(L, -1, name);
    record_dep(F->C, "e", lua_gettop(L) - 1, 0, name);
    lua_remove(L, -2);
  }
  lua_remove(L, fi);
  return classify(F, name, at);
}

wf_rv wf_res_calltypefn(wf_fstate *F, wf_rv fobj, wf_expr *call) {
  wf_fctx *C = F->C;
  lua_State *L = C->L;
  int base = lua_gettop(L);
  wf_res_push(C, fobj.ref);
  for (int i = 0; i < call->nargs; i++) {
    wf_expr *ae = call->args[i];
    wf_rv a = wf_lo_expr(F, ae);
    if (a.kind == RV_LIT) {
      lua_pushnumber(L, a.num);
      continue;
    }
    if (a.kind == RV_LUA && a.lk == LV_TYPE && a.t->lua_id > 0) {
      lua_getfield(L, C->envidx, "types");
      lua_rawgeti(L, -1, a.t->lua_id);
      lua_remove(L, -2);
      continue;
    }
    lua_settop(L, base);
    ERR(ae,
        "argument %d of '%s' must be a number literal or a type, known when the kernel "
        "compiles",
        i + 1, fobj.str);
  }
  if (lua_pcall(L, call->nargs, 1, 0) != 0) {
    /* the Lua layer's message, without the position it points at */
    const char *m = lua_tostring(L, -1);
    const char *p = m ? strstr(m, ": weft.") : NULL;
    char msg[256];
    snprintf(msg, sizeof msg, "%s", p ? p + 2 : m ? m : "error");
    lua_settop(L, base);
    ERR(call, "%s", msg);
  }
  const wf_type *t = is_type_table(C, -1) ? wf_front_totype(C, -1) : NULL;
  lua_settop(L, base);
  if (!t) ERR(call, "'%s' did not give a type usable in kernels", fobj.str);
  wf_rv r;
  memset(&r, 0, sizeof r);
  r.kind = RV_LUA;
  r.lk = LV_TYPE;
  r.t = t;
  r.str = fobj.str;
  return r;
}

wf_rv wf_res_field(wf_fstate *F, wf_rv ns, const char *name, wf_expr *at) {
  if (ns.lk != LV_NS) {
    if (ns.lk == LV_TYPE)
      ERR(at, "cannot access field '%s' of the type %s", name, wf_lo_tname(F->C, ns.t));
    ERR(at, "cannot access field '%s' of '%s'", name, ns.str);
  }
  lua_State *L = F->C->L;
  wf_res_push(F->C, ns.ref);
  lua_getfield(L, -1, name);
  record_dep(F->C, "f", lua_gettop(L) - 1, 0, name);
  lua_remove(L, -2);
  char path[256];
  snprintf(path, sizeof path, "%s.%s", ns.str ? ns.str : "?", name);
  return classify(F, path, at);
}

/* ---- weft.func calls ---- */

/* Parameter names of the Lua function at idx (pushes nothing). */
static int param_names(wf_fctx *C, int idx, const char ***out) {
  lua_State *L = C->L;
  const char *buf[64];
  int n = 0;
  lua_pushvalue(L, idx);
  for (; n < 64; n++) {
    const char *nm = lua_getlocal(L, NULL, n + 1);
    if (!nm) break;
    buf[n] = wf_front_strdup(C, nm, strlen(nm));
  }
  lua_pop(L, 1);
  const char **names = wf_front_alloc(C, sizeof(char *) * (size_t)(n ? n : 1));
  memcpy(names, buf, sizeof(char *) * (size_t)n);
  *out = names;
  return n;
}

/* How well the call argument a fits the declared type t: 0 not at all; a
** typed value: 3 exactly. An untyped number goes by its source text: 3
** the type it would get alone (int32 for `1`, float32 for `1.0`), 2
** another type of the same kind, 1 a conversion (`1` as a float, `1.0`
** as an int), 0 an integer literal out of an int type's range. */
static int arg_fits(wf_rv *a, const wf_type *t) {
  if (a->kind == RV_VAL) return a->t == t ? 3 : 0;
  if (wf_lo_isnum(a)) {
    int dflt = t->bits == 32 && (t->kind == WF_T_FLOAT || t->is_signed);
    if (t->kind == WF_T_FLOAT) return a->isint ? 1 : 2 + dflt;
    if (t->kind == WF_T_INT && wf_lo_num_integral(a)) {
      if (a->kind == RV_LIT) {
        double lo = t->is_signed ? -ldexp(1, t->bits - 1) : 0;
        double hi = ldexp(1, t->is_signed ? t->bits - 1 : t->bits);
        if (!(a->num >= lo && a->num < hi)) return 0;
      }
      return a->isint ? 2 + dflt : 1;
    }
  }
  return 0;
}

/* Note that F's call at `at` (of path) is being compiled, for the
** positions of errors in the callee (front.h: wf_callsite). */
static void push_site(wf_fstate *F, wf_expr *at, const char *path, int builtin) {
  wf_callsite *s = wf_front_alloc(F->C, sizeof *s);
  s->src = &F->src;
  s->line = at->line;
  s->col = at->col;
  s->path = path;
  s->builtin = builtin;
  s->up = F->C->site;
  F->C->site = s;
}

static wf_fspec *find_spec(wf_fctx *C, const void *fp, int n, const wf_type **types) {
  for (wf_fspec *s = C->specs; s; s = s->next) {
    if (s->fnptr != fp || s->nargs != n) continue;
    int same = 1;
    for (int i = 0; i < n && same; i++)
      same = s->argtypes[i] == types[i];
    if (same) return s;
  }
  return NULL;
}

/* Compile the weft.func decl (stack top-relative index di) for types;
** path is the callee as the call wrote it, builtin its _builtin mark. */
static wf_func *specialize(wf_fstate *F, int di, const char *fname, int n, const wf_type **ptypes,
                           const char **pnames, int *index, wf_expr *at, const char *path,
                           int builtin) {
  wf_fctx *C = F->C;
  lua_State *L = C->L;
  lua_getfield(L, di, "fn");
  int fi = lua_gettop(L);
  const void *fp = lua_topointer(L, fi);
  wf_fspec *sp = find_spec(C, fp, n, ptypes);
  if (sp) {
    lua_pop(L, 1);
    *index = sp->index;
    return C->mod->funcs[sp->index];
  }
  for (wf_fstate *p = F; p; p = p->parent)
    if (p->fnptr == fp)
      ERR(at, "recursive call to '%s': weft.func calls are inlined, so recursion is not supported",
          fname);
  if (C->depth > 64) ERR(at, "weft.func calls nested too deeply");
  wf_src src;
  wf_front_getsrc(C, fi, &src);
  /* a unique name per specialization */
  char name[128];
  snprintf(name, sizeof name, "%s", fname);
  for (int k = 2; wf_module_find(C->mod, name) >= 0; k++)
    snprintf(name, sizeof name, "%s_%d", fname, k);
  lua_pushvalue(L, fi);
  int ref = wf_res_keep(C);
  lua_pop(L, 1);
  C->depth++;
  /* the callee's state links to ours for the recursion check */
  wf_fstate *saved = C->cur;
  C->cur = F;
  push_site(F, at, path, builtin);
  wf_func *fn = wf_lo_function(C, ref, name, 0, n, ptypes, pnames, &src);
  C->site = C->site->up;
  C->cur = saved;
  C->depth--;
  /* the new function's fnptr is recorded through the spec list */
  wf_fspec *s = wf_front_alloc(C, sizeof *s);
  s->fnptr = fp;
  s->nargs = n;
  s->argtypes = wf_front_alloc(C, sizeof(wf_type *) * (size_t)(n ? n : 1));
  memcpy(s->argtypes, ptypes, sizeof(wf_type *) * (size_t)n);
  s->index = C->mod->nfuncs - 1;
  for (int i = 0; i < C->mod->nfuncs; i++)
    if (C->mod->funcs[i] == fn) s->index = i;
  s->next = C->specs;
  C->specs = s;
  *index = s->index;
  return fn;
}

/* Compile the Lua function at stack index fi as the module function
** `name` (parameters pt, names), a companion of the call at `at` of path
** (the positions of errors inside it name that call). */
static void compile_aux(wf_fstate *F, int fi, const char *name, int n, const wf_type *const *pt,
                        const char *const *names, const char *path, wf_expr *at) {
  wf_fctx *C = F->C;
  wf_src src;
  wf_front_getsrc(C, fi, &src);
  lua_pushvalue(C->L, fi);
  int ref = wf_res_keep(C);
  wf_fstate *saved = C->cur;
  C->cur = F;
  push_site(F, at, path, 0);
  wf_lo_function(C, ref, name, 0, n, pt, names, &src);
  C->site = C->site->up;
  C->cur = saved;
}

/* Custom gradient / replay of a weft.func (src/ad/ad.h): the Lua function
** in field `field` of the func object at oi (f:grad / f:replay), compiled
** once per specialization fn as "<fn>$grad" (params: fn's params, then one
** adjoint per result) or "<fn>$replay" (fn's params). */
static void companion_func(wf_fstate *F, int oi, const char *field, const wf_func *fn,
                           const char *suffix, wf_expr *at) {
  wf_fctx *C = F->C;
  lua_State *L = C->L;
  lua_getfield(L, oi, field);
  int gi = lua_gettop(L);
  char name[160];
  snprintf(name, sizeof name, "%s%s", fn->name, suffix);
  if (!lua_isfunction(L, gi) || wf_module_find(C->mod, name) >= 0) {
    lua_pop(L, 1);
    return;
  }
  int is_grad = strcmp(suffix, "$grad") == 0;
  int n = fn->nparams + (is_grad ? fn->nret : 0);
  const char **names;
  int np = param_names(C, gi, &names);
  if (np != n || n > 64)
    ERR(at, "the %s function of '%s' must take %d parameters (%s)", is_grad ? "grad" : "replay",
        fn->name, n, is_grad ? "its arguments, then the adjoint of each result" : "its arguments");
  const wf_type *pt[64];
  for (int i = 0; i < fn->nparams; i++)
    pt[i] = fn->vals[fn->params[i]].type;
  for (int j = 0; is_grad && j < fn->nret; j++)
    pt[fn->nparams + j] = fn->rettypes[j];
  compile_aux(F, gi, name, n, pt, names, fn->name, at);
  lua_pop(L, 1);
}

int wf_res_auxfunc(wf_fstate *F, int fi, const char *name, int n, const wf_type *const *pt,
                   const char *path, wf_expr *at) {
  if (wf_module_find(F->C->mod, name) >= 0) return 0;
  const char **names;
  if (param_names(F->C, fi, &names) != n) return -1;
  compile_aux(F, fi, name, n, pt, names, path, at);
  return 0;
}

/* The float type that float literals at a call's generic parameters take
** (DESIGN.md: number literals take the type of the other operand): the
** scalar type shared by the float values (scalars, vectors, matrices,
** quaternions, transforms) passed to its other generic parameters, so
** that weft.lerp(x, 1.0, 0.25) works for a float64 or float16 x. NULL when
** there are none or they disagree (the literals keep float32). Integer
** literals keep int32: at a generic parameter they may be a count or an
** index. */
static const wf_type *generic_float(const wf_rv *args, const wf_type *const *pt, int n) {
  const wf_type *f = NULL;
  for (int i = 0; i < n; i++) {
    if (pt[i] || args[i].kind != RV_VAL) continue;
    const wf_type *t = args[i].t;
    int agg = t->kind == WF_T_VEC || t->kind == WF_T_MAT || t->kind == WF_T_QUAT ||
              t->kind == WF_T_TRANSFORM;
    const wf_type *s = agg ? t->elem : t;
    if (s->kind != WF_T_FLOAT) continue;
    if (f && f != s) return NULL;
    f = s;
  }
  return f;
}

static const char *kind_name(const wf_type *t) {
  switch (t->kind) {
  case WF_T_BOOL: return "bool";
  case WF_T_INT: return "int";
  case WF_T_FLOAT: return "float";
  case WF_T_VEC: return "vec";
  case WF_T_MAT: return "mat";
  case WF_T_QUAT: return "quat";
  case WF_T_TRANSFORM: return "transform";
  case WF_T_STRUCT: return "struct";
  case WF_T_ARRAY: return "array";
  default: return "other";
  }
}

/* A builtin written as a weft.func (lua/weft/stdlib.lua) checks its
** argument types before its body is compiled, so that a wrong call is
** reported at the call and in the builtin's terms: the func object's
** _builtin(d1, ..., dn) gets a description of each argument ({ name,
** kind, scalar, float, literal = "int" | "float" | nil, rows and cols of
** a matrix }) and returns nil
** or what is wrong. Returns whether the func (at oi) is a builtin. */
static int check_builtin(wf_fstate *F, int oi, const char *path, int na, const wf_rv *args,
                         const wf_type *const *ptypes, wf_expr *call) {
  lua_State *L = F->C->L;
  lua_getfield(L, oi, "_builtin");
  if (!lua_isfunction(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  luaL_checkstack(L, na + 4, "weft: too many arguments");
  for (int i = 0; i < na; i++) {
    const wf_type *t = ptypes[i];
    const wf_type *st = wf_t_is_scalar(t) ? t : t->elem;
    int agg = t->kind == WF_T_VEC || t->kind == WF_T_MAT || t->kind == WF_T_QUAT ||
              t->kind == WF_T_TRANSFORM;
    if (!wf_t_is_scalar(t) && !agg) st = NULL;
    lua_createtable(L, 0, 5);
    lua_pushstring(L, wf_lo_tname(F->C, t));
    lua_setfield(L, -2, "name");
    lua_pushstring(L, kind_name(t));
    lua_setfield(L, -2, "kind");
    if (st) {
      lua_pushstring(L, wf_lo_tname(F->C, st));
      lua_setfield(L, -2, "scalar");
      lua_pushboolean(L, st->kind == WF_T_FLOAT);
      lua_setfield(L, -2, "float");
    }
    if (wf_lo_isnum(&args[i])) {
      lua_pushstring(L, args[i].isint ? "int" : "float");
      lua_setfield(L, -2, "literal");
    }
    if (t->kind == WF_T_MAT) { /* for checks of the shape (trace: square) */
      lua_pushinteger(L, t->rows);
      lua_setfield(L, -2, "rows");
      lua_pushinteger(L, t->cols);
      lua_setfield(L, -2, "cols");
    }
  }
  lua_call(L, na, 1);
  if (lua_isstring(L, -1)) {
    char buf[256] = "";
    size_t off = 0;
    for (int i = 0; i < na && off < sizeof buf - 40; i++)
      off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? ", " : "",
                              wf_lo_tname(F->C, ptypes[i]));
    const char *msg = wf_front_strdup(F->C, lua_tostring(L, -1), lua_objlen(L, -1));
    ERR(call, "%s(%s): %s", path, buf, msg);
  }
  lua_pop(L, 1);
  return 1;
}

/* The arguments of a call for a definition with parameters names[0..np):
** the na positional ones, then keyword values (kw: f{ y = 2 }, values
** kwv), then the definition's defaults (its decl's `defaults` table, at
** stack index di's field). 0 and a reason in why when they do not fit. */
static int complete_args(wf_fstate *F, int di, const char **names, int np, int na,
                         const wf_rv *args, wf_expr *call, wf_expr *kw, const wf_rv *kwv,
                         wf_rv *cand, wf_expr **cexp, char *why, size_t nwhy) {
  lua_State *L = F->C->L;
  if (na > np || np > 32) {
    snprintf(why, nwhy, "expects %d argument%s, got %d", np, np == 1 ? "" : "s", na);
    return 0;
  }
  int kwof[32];
  for (int i = 0; i < np; i++)
    kwof[i] = -1;
  for (int k = 0; kw && k < kw->nfields; k++) {
    int j = 0;
    while (j < np && strcmp(names[j], kw->fields[k].name) != 0)
      j++;
    if (j == np) {
      snprintf(why, nwhy, "has no parameter '%.40s'", kw->fields[k].name);
      return 0;
    }
    kwof[j] = k;
  }
  lua_getfield(L, di, "defaults");
  int dfi = lua_gettop(L);
  for (int i = 0; i < np; i++) {
    if (i < na) {
      cand[i] = args[i];
      cexp[i] = call->args[i];
    } else if (kwof[i] >= 0) {
      cand[i] = kwv[kwof[i]];
      cexp[i] = kw->fields[kwof[i]].value;
    } else {
      if (lua_istable(L, dfi)) lua_getfield(L, dfi, names[i]);
      if (!lua_istable(L, dfi) || lua_isnil(L, -1)) {
        if (!lua_istable(L, dfi) && !kw)
          snprintf(why, nwhy, "expects %d argument%s, got %d", np, np == 1 ? "" : "s", na);
        else
          snprintf(why, nwhy, "needs argument '%.40s' (it has no default)", names[i]);
        lua_settop(L, dfi - 1);
        return 0;
      }
      cand[i] = classify(F, names[i], call); /* the default, as a captured value */
      cexp[i] = call;
    }
  }
  lua_settop(L, dfi - 1);
  return 1;
}

/* A func whose decl has a by_dtype table (type name -> func) dispatches on
** a trailing type argument, which the chosen func does not take, as in
** weft.volume_sample(id, uvw, mode, weft.float32). 1 when it did (the
** result count in *nres), 0 for an ordinary call. */
static int by_dtype(wf_fstate *F, wf_rv fobj, wf_expr *call, int want, wf_rv *out, int *nres) {
  wf_fctx *C = F->C;
  lua_State *L = C->L;
  wf_res_push(C, fobj.ref);
  lua_getfield(L, -1, "by_dtype");
  int has = lua_istable(L, -1);
  lua_pop(L, 2);
  if (!has) return 0;
  wf_expr *te = call->args[call->nargs - 1];
  wf_rv last = wf_lo_expr(F, te);
  if (last.kind != RV_LUA || last.lk != LV_TYPE) return 0;
  const char *tn = wf_lo_tname(C, last.t);
  wf_res_push(C, fobj.ref);
  lua_getfield(L, -1, "by_dtype");
  lua_getfield(L, -1, tn);
  if (!has_mt(C, lua_gettop(L), "func_mt")) {
    lua_pop(L, 3);
    ERR(te, "'%s' has no variant for the type %s", fobj.str ? fobj.str : "func", tn);
  }
  wf_rv f = fobj;
  f.ref = wf_res_keep(C);
  lua_pop(L, 2);
  call->nargs--;
  *nres = wf_res_callfunc(F, f, call, want, out);
  call->nargs++;
  return 1;
}

int wf_res_callfunc(wf_fstate *F, wf_rv fobj, wf_expr *call, int want, wf_rv *out) {
  wf_fctx *C = F->C;
  lua_State *L = C->L;
  (void)want;
  int na = call->nargs;
  if (na > 1 && by_dtype(F, fobj, call, want, out, &na)) return na;
  /* a keyword call: f{ x = a, y = b }, one table constructor of names */
  wf_expr *kw = NULL;
  wf_rv kwv[32];
  if (na == 1 && call->args[0]->kind == E_TABLE) {
    kw = call->args[0];
    na = 0;
    if (kw->nfields > 32) ERR(call, "too many arguments");
    for (int k = 0; k < kw->nfields; k++) {
      wf_tfield *f = &kw->fields[k];
      if (!f->name) ERR(f->value ? f->value : kw, "a keyword call takes name = value pairs only");
      for (int j = 0; j < k; j++)
        if (!strcmp(kw->fields[j].name, f->name))
          ERR(f->value, "argument '%s' is given twice", f->name);
      kwv[k] = wf_lo_expr(F, f->value);
    }
  }
  if (na > 32) ERR(call, "too many arguments");
  wf_rv pargs[32], args[32];
  wf_expr *aexp[32];
  for (int i = 0; i < na; i++)
    pargs[i] = wf_lo_expr(F, call->args[i]);
  F->b.loc = (wf_loc){call->line, call->col};
  wf_res_push(C, fobj.ref);
  int oi = lua_gettop(L);
  lua_getfield(L, oi, "name");
  const char *nm = lua_tostring(L, -1);
  char fname[96];
  snprintf(fname, sizeof fname, "%s", nm ? nm : fobj.str ? fobj.str : "func");
  lua_pop(L, 1);
  lua_getfield(L, oi, "defs");
  int dsi = lua_gettop(L);
  int nd = lua_istable(L, dsi) ? (int)lua_objlen(L, dsi) : 0;
  int best = -1, bestscore = -1, tie = 0, nbest = 0;
  const wf_type *bestt[32];
  const char **bestnames = NULL;
  char why[128] = "";
  for (int d = 1; d <= nd; d++) {
    lua_rawgeti(L, dsi, d);
    int di = lua_gettop(L);
    lua_getfield(L, di, "fn");
    const char **names;
    int np = param_names(C, lua_gettop(L), &names);
    lua_pop(L, 1);
    wf_rv cand[32];
    wf_expr *cexp[32];
    if (!complete_args(F, di, names, np, na, pargs, call, kw, kwv, cand, cexp, why, sizeof why)) {
      lua_pop(L, 1);
      continue;
    }
    lua_getfield(L, di, "types");
    int ti = lua_gettop(L);
    int ok = 1, score = 0;
    const wf_type *pt[32];
    for (int i = 0; i < np && ok; i++) {
      pt[i] = NULL;
      if (lua_istable(L, ti)) {
        lua_getfield(L, ti, names[i]);
        if (!lua_isnil(L, -1)) {
          pt[i] = wf_front_totype(C, -1);
          if (!pt[i])
            ok = 0;
          else if (!arg_fits(&cand[i], pt[i]))
            ok = 0;
          else
            score += arg_fits(&cand[i], pt[i]);
        }
        lua_pop(L, 1);
      }
      /* a number default of a generic parameter is a float (an integer
      ** one needs a typed parameter): 3.0 reads back from Lua as 3 */
      if (!pt[i] && cexp[i] == call && cand[i].kind == RV_LIT) cand[i].isint = 0;
      if (!pt[i] && ok) {
        /* generic: any value */
        if (cand[i].kind != RV_VAL && !wf_lo_isnum(&cand[i])) ok = 0;
      }
    }
    lua_pop(L, 2);
    if (!ok) continue;
    if (score > bestscore) {
      best = d;
      bestscore = score;
      tie = 0;
      memcpy(bestt, pt, sizeof(wf_type *) * (size_t)np);
      memcpy(args, cand, sizeof(wf_rv) * (size_t)np);
      memcpy(aexp, cexp, sizeof(wf_expr *) * (size_t)np);
      nbest = np;
      bestnames = names;
    } else if (score == bestscore) {
      tie = 1;
    }
  }
  if (best < 0) {
    lua_settop(L, oi - 1);
    if (nd == 1 && why[0]) ERR(call, "'%s' %s", fname, why);
    char buf[256] = "";
    size_t off = 0;
    for (int i = 0; i < na && off < sizeof buf - 40; i++)
      off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? ", " : "",
                              pargs[i].kind == RV_VAL  ? wf_lo_tname(C, pargs[i].t)
                              : wf_lo_isnum(&pargs[i]) ? "number"
                                                       : "non-value");
    ERR(call, "no definition of '%s' matches the arguments (%s)", fname, buf);
  }
  if (tie) {
    lua_settop(L, oi - 1);
    ERR(call, "ambiguous call to '%s': several definitions match equally well", fname);
  }
  /* final parameter types and argument values */
  na = nbest;
  const wf_type *ptypes[32];
  wf_val vals[32];
  const wf_type *gf = generic_float(args, bestt, na);
  for (int i = 0; i < na; i++) {
    ptypes[i] = bestt[i];
    const wf_type *pt = bestt[i];
    if (!pt && gf && wf_lo_isnum(&args[i]) && !args[i].isint) pt = gf;
    vals[i] = wf_lo_value(F, &args[i], pt, aexp[i]);
    if (!ptypes[i]) ptypes[i] = wf_vtype(F->fn, vals[i]);
  }
  const char *path = fobj.str ? fobj.str : fname;
  int builtin = check_builtin(F, oi, path, na, args, ptypes, call);
  lua_rawgeti(L, dsi, best);
  int index;
  wf_func *fn =
      specialize(F, lua_gettop(L), fname, na, ptypes, bestnames, &index, call, path, builtin);
  companion_func(F, oi, "grad_fn", fn, "$grad", call);
  companion_func(F, oi, "replay_fn", fn, "$replay", call);
  lua_getfield(L, oi, "_rng_inout");
  int inout = lua_toboolean(L, -1);
  lua_settop(L, oi - 1);
  F->b.loc = (wf_loc){call->line, call->col};
  wf_inst *in = wf_b_inst(&F->b, WF_OP_CALL, na, vals, fn->nret, fn->rettypes, 0);
  in->imm = index;
  int nret = fn->nret;
  if (inout && nret > 0 && fn->rettypes[nret - 1]->kind == WF_T_RNG) {
    /* a stdlib function that draws random numbers (poisson): its last
    ** result is the advanced state, written back to the caller's state
    ** variable as weft.randf does */
    wf_expr *se = call->args[0];
    int vi = se->kind == E_NAME ? wf_lo_findvar(F, se->name) : -1;
    if (vi < 0 || F->vars[vi].t->kind != WF_T_RNG)
      ERR(se, "%s: the state must be a local variable (it is updated in place)", fname);
    F->vars[vi].v = in->res[--nret];
  }
  for (int i = 0; i < nret && i < WF_MAXRET; i++)
    out[i] = wf_lo_mkval(in->res[i], fn->rettypes[i]);
  return nret < WF_MAXRET ? nret : WF_MAXRET;
}
