/*
** verify.c -- the IR verifier: structure, types and scoping.
**
** Scoping in structured SSA: a value is usable after its definition in the
** same block and in every block nested below that point. The walk keeps an
** "in scope" flag per value: set at the definition, cleared when the
** defining block is left. Results of a region instruction come into scope
** after the instruction (they are not visible inside its own blocks).
**
** Messages: "in @f: `<inst as printed, raw value numbers>`: <problem>".
*/
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>

#include "geom/native.h"
#include "ir/ir.h"

typedef struct vstate {
  wf_module *m;
  wf_func *fn;
  char *inscope; /* per value */
  char *seen;    /* per value: defined once */
  char *err;
  size_t errsize;
  int failed;
} vstate;

/* Records the first error, naming the function and the instruction. */
__attribute__((format(printf, 3, 4))) static int fail(vstate *V, const wf_inst *in, const char *fmt,
                                                      ...) {
  if (V->failed) return 0;
  V->failed = 1;
  char msg[256], ins[256] = "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (in) wf_ir_snprint_inst(V->fn, in, ins, sizeof ins);
  if (!V->errsize) return 0;
  if (in)
    snprintf(V->err, V->errsize, "in @%s: `%s`: %s", V->fn->name, ins, msg);
  else
    snprintf(V->err, V->errsize, "in @%s: %s", V->fn->name, msg);
  return 0;
}

static const char *tn(const wf_type *t, char *buf) {
  wf_t_snprint(t, buf, 128);
  return buf;
}

static int valid(vstate *V, wf_val v) {
  return v >= 0 && v < V->fn->nvals;
}

static const wf_type *ty(vstate *V, wf_val v) {
  return valid(V, v) ? V->fn->vals[v].type : NULL;
}

/* Operand k must have type t. */
static int arg_is(vstate *V, const wf_inst *in, int k, const wf_type *t) {
  char a[128], b[128];
  if (ty(V, in->args[k]) != t)
    return fail(V, in, "operand %d has type %s, expected %s", k + 1, tn(ty(V, in->args[k]), a),
                tn(t, b));
  return 1;
}

static int res_is(vstate *V, const wf_inst *in, int k, const wf_type *t) {
  char a[128], b[128];
  if (ty(V, in->res[k]) != t)
    return fail(V, in, "result %d has type %s, expected %s", k + 1, tn(ty(V, in->res[k]), a),
                tn(t, b));
  return 1;
}

/* Values passed by a terminator must match the expected types. */
static int values_match(vstate *V, const wf_inst *term, int from, int n, const wf_type *const *ts,
                        const char *what) {
  char a[128], b[128];
  if (term->nargs - from != n)
    return fail(V, term, "passes %d values, %s expects %d", term->nargs - from, what, n);
  for (int k = 0; k < n; k++)
    if (ty(V, term->args[from + k]) != ts[k])
      return fail(V, term, "value %d has type %s, %s expects %s", k + 1,
                  tn(ty(V, term->args[from + k]), a), what, tn(ts[k], b));
  return 1;
}

/* Types of a list of values (into a malloc'd array). */
static const wf_type **types_of(vstate *V, const wf_val *vs, int n) {
  const wf_type **t = malloc(sizeof(*t) * (size_t)(n > 0 ? n : 1));
  for (int k = 0; t && k < n; k++)
    t[k] = ty(V, vs[k]);
  return t;
}

/* ---- per-op rules ---- */
static int is_num(const wf_type *t) {
  return wf_t_is_int(t) || wf_t_is_float(t);
}

/* All operands have the result's type, and the result is of an allowed kind. */
static int same_as_result(vstate *V, const wf_inst *in, int (*kind_ok)(const wf_type *),
                          const char *kinds) {
  char a[128];
  const wf_type *rt = ty(V, in->res[0]);
  if (!kind_ok(rt)) return fail(V, in, "result type %s is not %s", tn(rt, a), kinds);
  for (int k = 0; k < in->nargs; k++)
    if (!arg_is(V, in, k, rt)) return 0;
  return 1;
}

static int is_bool_or_int(const wf_type *t) {
  return wf_t_is_int(t) || (t && t->kind == WF_T_BOOL);
}
static int is_bool(const wf_type *t) {
  return t && t->kind == WF_T_BOOL;
}

/* array, ndim integer indices [, value of the element type]. */
static int check_access(vstate *V, const wf_inst *in, int has_value) {
  char a[128];
  const wf_type *at = in->nargs ? ty(V, in->args[0]) : NULL;
  if (!at || at->kind != WF_T_ARRAY)
    return fail(V, in, "operand 1 has type %s, expected an array", tn(at, a));
  int want = 1 + at->ndim + has_value;
  if (in->nargs != want)
    return fail(V, in, "has %d operands, expected %d (array, %d indices%s)", in->nargs, want,
                at->ndim, has_value ? ", value" : "");
  for (int k = 1; k <= at->ndim; k++)
    if (!wf_t_is_int(ty(V, in->args[k])))
      return fail(V, in, "index %d has type %s, expected an integer", k, tn(ty(V, in->args[k]), a));
  if (has_value && !arg_is(V, in, at->ndim + 1, at->elem)) return 0;
  if (in->nres && !res_is(V, in, 0, at->elem)) return 0;
  return 1;
}

static int check_call(vstate *V, const wf_inst *in) {
  if (in->imm < 0 || in->imm >= V->m->nfuncs)
    return fail(V, in, "calls function #%lld, which does not exist", (long long)in->imm);
  wf_func *cal = V->m->funcs[in->imm];
  if (cal->is_kernel) return fail(V, in, "calls kernel @%s", cal->name);
  if (in->nargs != cal->nparams)
    return fail(V, in, "passes %d arguments, @%s takes %d", in->nargs, cal->name, cal->nparams);
  for (int k = 0; k < in->nargs; k++)
    if (!arg_is(V, in, k, cal->vals[cal->params[k]].type)) return 0;
  if (in->nres != cal->nret)
    return fail(V, in, "has %d results, @%s returns %d", in->nres, cal->name, cal->nret);
  for (int k = 0; k < in->nres; k++)
    if (!res_is(V, in, k, cal->rettypes[k])) return 0;
  return 1;
}

static int check_block(vstate *V, wf_block *bl, const wf_inst *owner, int role);

/* Roles of a block: which terminator ends it and what it must pass. */
enum { R_FUNC, R_IF, R_FOR, R_BEFORE, R_AFTER };

static int check_if(vstate *V, wf_inst *in) {
  if (!arg_is(V, in, 0, wf_t_bool(V->m->types))) return 0;
  if (in->nblocks != 2) return fail(V, in, "has %d blocks, expected 2 (then, else)", in->nblocks);
  for (int k = 0; k < 2; k++) {
    if (!in->blocks[k]) return fail(V, in, "block %d is missing", k + 1);
    if (in->blocks[k]->nparams) return fail(V, in, "an if block has parameters");
    if (!check_block(V, in->blocks[k], in, R_IF)) return 0;
  }
  return 1;
}

static int check_for(vstate *V, wf_inst *in) {
  char a[128];
  if (in->nargs < 3)
    return fail(V, in, "has %d operands, expected lo, hi, step, inits...", in->nargs);
  const wf_type *it = ty(V, in->args[0]);
  if (!is_num(it)) return fail(V, in, "loop bounds have type %s, expected a number", tn(it, a));
  if (!arg_is(V, in, 1, it) || !arg_is(V, in, 2, it)) return 0;
  int nc = in->nargs - 3;
  if (in->nres != nc) return fail(V, in, "has %d results for %d carried values", in->nres, nc);
  for (int k = 0; k < nc; k++)
    if (!res_is(V, in, k, ty(V, in->args[3 + k]))) return 0;
  if (in->nblocks != 1 || !in->blocks[0]) return fail(V, in, "a for loop needs one body block");
  wf_block *b = in->blocks[0];
  if (b->nparams != 1 + nc)
    return fail(V, in, "body has %d parameters, expected %d (induction, carried)", b->nparams,
                1 + nc);
  if (ty(V, b->params[0]) != it)
    return fail(V, in, "induction variable has type %s, expected the type of lo",
                tn(ty(V, b->params[0]), a));
  for (int k = 0; k < nc; k++)
    if (ty(V, b->params[1 + k]) != ty(V, in->args[3 + k]))
      return fail(V, in, "body parameter %d has type %s, expected the carried value's type", 2 + k,
                  tn(ty(V, b->params[1 + k]), a));
  return check_block(V, b, in, R_FOR);
}

static int check_while(vstate *V, wf_inst *in) {
  char a[128];
  if (in->nblocks != 2 || !in->blocks[0] || !in->blocks[1])
    return fail(V, in, "a while loop needs two blocks (before, after)");
  wf_block *b0 = in->blocks[0], *b1 = in->blocks[1];
  if (b0->nparams != in->nargs)
    return fail(V, in, "before block has %d parameters for %d initial values", b0->nparams,
                in->nargs);
  for (int k = 0; k < in->nargs; k++)
    if (ty(V, b0->params[k]) != ty(V, in->args[k]))
      return fail(V, in, "before block parameter %d has type %s, expected the initial value's type",
                  k + 1, tn(ty(V, b0->params[k]), a));
  if (b1->nparams != in->nres)
    return fail(V, in, "after block has %d parameters for %d results", b1->nparams, in->nres);
  for (int k = 0; k < in->nres; k++)
    if (ty(V, b1->params[k]) != ty(V, in->res[k]))
      return fail(V, in, "after block parameter %d has type %s, expected the result's type", k + 1,
                  tn(ty(V, b1->params[k]), a));
  return check_block(V, b0, in, R_BEFORE) && check_block(V, b1, in, R_AFTER);
}

/* The terminator ending a block of the given role. */
static int check_term(vstate *V, const wf_inst *t, const wf_inst *owner, int role) {
  static const char *const want[] = {"ret", "yield", "yield", "condition", "yield"};
  wf_op wop = role == R_FUNC ? WF_OP_RET : role == R_BEFORE ? WF_OP_COND : WF_OP_YIELD;
  if (t->op != wop) return fail(V, t, "this block must end with %s", want[role]);
  int ok = 1;
  const wf_type **ts = NULL;
  switch (role) {
  case R_FUNC:
    if (V->fn->is_kernel && t->nargs) return fail(V, t, "a kernel returns no values");
    return values_match(V, t, 0, V->fn->nret, V->fn->rettypes, "the function");
  case R_IF:
    ts = types_of(V, owner->res, owner->nres);
    ok = ts && values_match(V, t, 0, owner->nres, ts, "the if");
    break;
  case R_FOR:
    ts = types_of(V, owner->args + 3, owner->nargs - 3);
    ok = ts && values_match(V, t, 0, owner->nargs - 3, ts, "the loop");
    break;
  case R_BEFORE:
    if (t->nargs < 1) return fail(V, t, "condition needs a bool operand");
    if (!arg_is(V, t, 0, wf_t_bool(V->m->types))) return 0;
    ts = types_of(V, owner->res, owner->nres);
    ok = ts && values_match(V, t, 1, owner->nres, ts, "the while");
    break;
  case R_AFTER:
    ts = types_of(V, owner->blocks[0]->params, owner->blocks[0]->nparams);
    ok = ts && values_match(V, t, 0, owner->blocks[0]->nparams, ts, "the loop");
    break;
  }
  free(ts);
  return ok;
}

/* Op-specific operand and result rules for non-region, non-terminator ops. */
static int check_op(vstate *V, wf_inst *in) {
  char a[128];
  wf_types *T = V->m->types;
  const wf_type *rt = in->nres ? ty(V, in->res[0]) : NULL;
  switch ((wf_tyrule)wf_opinfo_tab[in->op].ty) {
  case WF_TY_NUM: return same_as_result(V, in, is_num, "a number");
  case WF_TY_FLOAT: return same_as_result(V, in, wf_t_is_float, "a float");
  case WF_TY_BOOL: return same_as_result(V, in, is_bool, "bool");
  case WF_TY_BITS: return same_as_result(V, in, is_bool_or_int, "bool or an integer");
  case WF_TY_CMP: {
    const wf_type *ot = ty(V, in->args[0]);
    if (!wf_t_is_scalar(ot)) return fail(V, in, "compares values of type %s", tn(ot, a));
    if (!arg_is(V, in, 1, ot)) return 0;
    return res_is(V, in, 0, wf_t_bool(T));
  }
  case WF_TY_OWN: break;
  }
  /* the ops whose rule is their own (WF_TY_OWN) */
  switch (in->op) {
  case WF_OP_CONST:
    if (!wf_t_is_scalar(rt)) return fail(V, in, "constant of non-scalar type %s", tn(rt, a));
    return 1;
  case WF_OP_PARAM:
  case WF_OP_UNDEF: return 1;
  case WF_OP_BIT_COUNT:
    if (!wf_t_is_int(ty(V, in->args[0])))
      return fail(V, in, "operand has type %s, expected an integer", tn(ty(V, in->args[0]), a));
    return res_is(V, in, 0, wf_t_int(T, 32, 1));
  case WF_OP_SHL:
  case WF_OP_SHR:
    if (!wf_t_is_int(rt)) return fail(V, in, "result type %s is not an integer", tn(rt, a));
    if (!arg_is(V, in, 0, rt)) return 0;
    if (!wf_t_is_int(ty(V, in->args[1])))
      return fail(V, in, "shift count has type %s", tn(ty(V, in->args[1]), a));
    return 1;
  case WF_OP_SELECT:
    return arg_is(V, in, 0, wf_t_bool(T)) && arg_is(V, in, 1, rt) && arg_is(V, in, 2, rt);
  case WF_OP_CAST: {
    /* scalars, or a random state's bits as a 32-bit integer */
    const wf_type *at = ty(V, in->args[0]);
    if (at && at->kind == WF_T_RNG && wf_t_is_int(rt) && rt->bits == 32) return 1;
    if (!wf_t_is_scalar(rt) || !wf_t_is_scalar(at))
      return fail(V, in, "cast between non-scalar types");
    return 1;
  }
  case WF_OP_AGG: {
    int n = wf_t_arity(rt);
    if (!n) return fail(V, in, "agg of non-aggregate type %s", tn(rt, a));
    if (in->nargs != n) return fail(V, in, "has %d components, %s has %d", in->nargs, tn(rt, a), n);
    for (int k = 0; k < n; k++)
      if (!arg_is(V, in, k, wf_t_component(T, rt, k))) return 0;
    return 1;
  }
  case WF_OP_EXTRACT:
  case WF_OP_INSERT: {
    const wf_type *at = ty(V, in->args[0]);
    int n = wf_t_arity(at);
    if (!n) return fail(V, in, "operand 1 has non-aggregate type %s", tn(at, a));
    if (in->imm < 0 || in->imm >= n)
      return fail(V, in, "index %lld out of range for %s (%d components)", (long long)in->imm,
                  tn(at, a), n);
    const wf_type *ct = wf_t_component(T, at, (int)in->imm);
    if (in->op == WF_OP_EXTRACT) return res_is(V, in, 0, ct);
    return res_is(V, in, 0, at) && arg_is(V, in, 1, ct);
  }
  case WF_OP_EXTRACTD:
  case WF_OP_INSERTD: {
    /* a local array's component: all components of one type */
    const wf_type *at = ty(V, in->args[0]);
    if (!at || (at->kind != WF_T_VEC && at->kind != WF_T_MAT && at->kind != WF_T_QUAT))
      return fail(V, in, "operand 1 has type %s, not a vector, quaternion or matrix", tn(at, a));
    if (!wf_t_is_int(ty(V, in->args[1]))) return fail(V, in, "the index must be an integer");
    const wf_type *ct = wf_t_component(T, at, 0);
    if (in->op == WF_OP_EXTRACTD) return res_is(V, in, 0, ct);
    return res_is(V, in, 0, at) && arg_is(V, in, 2, ct);
  }
  case WF_OP_SHAPE: {
    const wf_type *at = ty(V, in->args[0]);
    if (!at || at->kind != WF_T_ARRAY) return fail(V, in, "shape of a non-array");
    if (in->imm < 0 || in->imm >= at->ndim)
      return fail(V, in, "dimension %lld out of range (ndim %d)", (long long)in->imm, at->ndim);
    if (!wf_t_is_int(rt)) return fail(V, in, "result must be an integer");
    return 1;
  }
  case WF_OP_VIEW: {
    const wf_type *at = ty(V, in->args[0]);
    if (!at || at->kind != WF_T_ARRAY || at->ndim < 2)
      return fail(V, in, "view needs an array of 2 or more dimensions");
    if (!wf_t_is_int(ty(V, in->args[1]))) return fail(V, in, "index must be an integer");
    return res_is(V, in, 0, wf_t_array(T, at->elem, at->ndim - 1));
  }
  case WF_OP_LOAD: return check_access(V, in, 0);
  case WF_OP_STORE: return check_access(V, in, 1);
  case WF_OP_ATOMIC_ADD:
  case WF_OP_ATOMIC_MIN:
  case WF_OP_ATOMIC_MAX:
  case WF_OP_ATOMIC_EXCH: return check_access(V, in, 1);
  case WF_OP_ATOMIC_AND:
  case WF_OP_ATOMIC_OR:
  case WF_OP_ATOMIC_XOR: {
    /* bit operations: elements of integers (or vectors of them) */
    const wf_type *at = in->nargs ? ty(V, in->args[0]) : NULL;
    const wf_type *et = at && at->kind == WF_T_ARRAY ? at->elem : NULL;
    if (et && !wf_t_is_scalar(et) && et->kind != WF_T_STRUCT) et = et->elem;
    if (et && !wf_t_is_int(et)) return fail(V, in, "%s needs integer elements", wf_op_name(in->op));
    return check_access(V, in, 1);
  }
  case WF_OP_ATOMIC_CAS: {
    /* value: vector(2) of the element's scalar type (compare, new) */
    const wf_type *at = in->nargs ? ty(V, in->args[0]) : NULL;
    if (!at || at->kind != WF_T_ARRAY || !wf_t_is_scalar(at->elem))
      return fail(V, in, "atomic_cas needs an array of scalars");
    const wf_type *pt = wf_t_vec(T, 2, at->elem);
    if (in->nargs != at->ndim + 2 || !arg_is(V, in, at->ndim + 1, pt)) return 0;
    for (int k = 1; k <= at->ndim; k++)
      if (!wf_t_is_int(ty(V, in->args[k]))) return fail(V, in, "index %d is not an integer", k);
    return in->nres == 1 && res_is(V, in, 0, at->elem);
  }
  case WF_OP_TID:
    if (!wf_t_is_int(rt)) return fail(V, in, "result must be an integer");
    return 1;
  case WF_OP_RNG_INIT:
    if (!wf_t_is_int(ty(V, in->args[0])) || !wf_t_is_int(ty(V, in->args[1])))
      return fail(V, in, "seed and offset must be integers");
    return res_is(V, in, 0, wf_t_rng(T));
  case WF_OP_RANDF:
  case WF_OP_RANDI:
    if (!arg_is(V, in, 0, wf_t_rng(T)) || !res_is(V, in, 1, wf_t_rng(T))) return 0;
    if (in->op == WF_OP_RANDF ? !wf_t_is_float(rt) : !wf_t_is_int(rt))
      return fail(V, in, "result 1 has type %s", tn(rt, a));
    return 1;
  case WF_OP_PRINT:
    for (int k = 0; k < in->nargs; k++)
      if (!wf_t_is_scalar(ty(V, in->args[k])))
        return fail(V, in, "prints operand %d of non-scalar type", k + 1);
    /* fallthrough */
  case WF_OP_TRAP:
    if (!in->str) return fail(V, in, "has no string");
    return 1;
  case WF_OP_CHECK: {
    /* array, first [, last]: integer indices within the array's axes */
    char a[128];
    const wf_type *at = in->nargs ? ty(V, in->args[0]) : NULL;
    if (!at || at->kind != WF_T_ARRAY)
      return fail(V, in, "operand 1 has type %s, expected an array", tn(at, a));
    int launch = (in->imm & WF_CHECK_LAUNCH) != 0;
    if (in->nargs != (launch ? 2 : 3))
      return fail(V, in, "has %d operands, expected %d", in->nargs, launch ? 2 : 3);
    for (int k = 1; k < in->nargs; k++)
      if (!wf_t_is_int(ty(V, in->args[k])))
        return fail(V, in, "operand %d has type %s, expected an integer", k + 1,
                    tn(ty(V, in->args[k]), a));
    if (wf_check_axis(in->imm) >= at->ndim)
      return fail(V, in, "checks axis %d of an array of %d dimensions", wf_check_axis(in->imm),
                  at->ndim);
    return 1;
  }
  case WF_OP_CALL: return check_call(V, in);
  case WF_OP_NATIVE: {
    /* operand and result counts of its row (types: the front end) */
    if (in->imm < 0 || in->imm >= WF_NAT__COUNT)
      return fail(V, in, "names native row %lld of %d", (long long)in->imm, (int)WF_NAT__COUNT);
    const wf_nativeinfo *ni = &wf_native_tab[in->imm];
    int na = wf_native_nargs(ni), nr = ni->res[0] != 0;
    if (in->nargs != na || in->nres != nr)
      return fail(V, in, "native %s has %d operands and %d results, expected %d and %d", ni->name,
                  in->nargs, in->nres, na, nr);
    return 1;
  }
  case WF_OP_IF: return check_if(V, in);
  case WF_OP_FOR: return check_for(V, in);
  case WF_OP_WHILE: return check_while(V, in);
  default: return fail(V, in, "has no type rule (ty column of WF_IRDEF, or a case here)");
  }
}

/* Counts, value definitions and operand scoping common to every inst. */
static int check_generic(vstate *V, wf_inst *in, wf_block *bl) {
  if ((unsigned)in->op >= WF_OP__COUNT) return fail(V, NULL, "instruction with bad op %d", in->op);
  const wf_opinfo *oi = &wf_opinfo_tab[in->op];
  if (in->parent != bl) return fail(V, in, "parent link does not name its block");
  if (oi->nargs >= 0 && in->nargs != oi->nargs)
    return fail(V, in, "has %d operands, expected %d", in->nargs, oi->nargs);
  if (oi->nres >= 0 && in->nres != oi->nres)
    return fail(V, in, "has %d results, expected %d", in->nres, oi->nres);
  if (!(oi->flags & WF_OPF_REGION) && in->nblocks)
    return fail(V, in, "only if, for and while own blocks");
  for (int k = 0; k < in->nargs; k++) {
    wf_val v = in->args[k];
    if (!valid(V, v)) return fail(V, in, "operand %d is not a value", k + 1);
    if (!V->inscope[v])
      return fail(V, in, "operand %d (%%%d) is not defined before this use", k + 1, (int)v);
  }
  for (int k = 0; k < in->nres; k++) {
    wf_val v = in->res[k];
    if (!valid(V, v) || !V->fn->vals[v].type) return fail(V, in, "result %d is not a value", k + 1);
    if (V->fn->vals[v].def != in || V->fn->vals[v].index != k)
      return fail(V, in, "result %d (%%%d) records another definition", k + 1, (int)v);
    if (V->seen[v]) return fail(V, in, "result %d (%%%d) is defined twice", k + 1, (int)v);
  }
  return 1;
}

static void define(vstate *V, wf_val v) {
  V->inscope[v] = 1;
  V->seen[v] = 1;
}

/* Walks a block: params and results come into scope, then leave it at the
** end of the block. */
static int check_block(vstate *V, wf_block *bl, const wf_inst *owner, int role) {
  for (int k = 0; k < bl->nparams; k++) {
    wf_val v = bl->params[k];
    if (!valid(V, v) || V->seen[v] || !V->fn->vals[v].type)
      return fail(V, owner, "block parameter %d is not a fresh value", k + 1);
    define(V, v);
  }
  if (!bl->last) {
    static const char *const want[] = {"ret", "yield", "yield", "condition", "yield"};
    if (owner) return fail(V, owner, "a block is empty (it must end with %s)", want[role]);
    return fail(V, NULL, "the body is empty (it must end with ret)");
  }
  int ok = 1;
  for (wf_inst *in = bl->first; in && ok; in = in->next) {
    int term = (wf_op_flags(in->op) & WF_OPF_TERM) != 0;
    ok = check_generic(V, in, bl);
    if (ok && term && in->next) ok = fail(V, in, "terminator in the middle of a block");
    if (ok && !term && !in->next) ok = fail(V, in, "the block does not end with a terminator");
    if (ok && term) ok = check_term(V, in, owner, role);
    if (ok && !term) ok = check_op(V, in);
    for (int k = 0; ok && k < in->nres; k++)
      define(V, in->res[k]);
  }
  for (int k = 0; k < bl->nparams; k++)
    V->inscope[bl->params[k]] = 0;
  for (wf_inst *in = bl->first; in; in = in->next)
    for (int k = 0; k < in->nres; k++)
      if (valid(V, in->res[k])) V->inscope[in->res[k]] = 0;
  return ok;
}

static int check_func(vstate *V, wf_func *fn) {
  V->fn = fn;
  wf_func_fix_parents(fn);
  size_t n = (size_t)(fn->nvals > 0 ? fn->nvals : 1);
  V->inscope = calloc(n, 1);
  V->seen = calloc(n, 1);
  int ok = V->inscope && V->seen;
  if (!ok) fail(V, NULL, "out of memory");
  if (ok && fn->is_kernel && fn->nret) ok = fail(V, NULL, "a kernel returns no values");
  for (int i = 0; ok && i < fn->nparams; i++) {
    if (!valid(V, fn->params[i]) || V->fn->vals[fn->params[i]].def)
      ok = fail(V, NULL, "parameter %d is not a parameter value", i + 1);
    else
      define(V, fn->params[i]);
  }
  for (int i = 0; ok && i < V->m->nfuncs; i++)
    if (V->m->funcs[i] != fn && strcmp(V->m->funcs[i]->name, fn->name) == 0)
      ok = fail(V, NULL, "function name is defined twice");
  if (ok) ok = check_block(V, fn->body, NULL, R_FUNC);
  free(V->inscope);
  free(V->seen);
  V->inscope = V->seen = NULL;
  return ok;
}

int wf_ir_verify(wf_module *m, char *err, size_t errsize) {
  vstate V = {.m = m, .err = err, .errsize = errsize};
  if (errsize) err[0] = 0;
  for (int i = 0; i < m->nfuncs; i++)
    if (!check_func(&V, m->funcs[i])) return -1;
  return 0;
}
