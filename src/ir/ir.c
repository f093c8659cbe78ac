/*
** ir.c -- op table, arena, modules, functions, the builder and editing.
**
** Memory: a module owns one arena. Instructions, blocks, their arrays,
** functions and strings live in the arena and are released all at once by
** wf_module_free. The per-function value table (fn->vals) grows with realloc
** and is freed with the module.
**
** Arena layout (a singly linked list of chunks, newest first):
**
**   arena -> [next|used|cap| data .............. ] -> [older chunk] -> NULL
**                              ^ bump pointer = data + used
**
** Requests bigger than a quarter of the default chunk get a chunk of their
** own (linked behind the head, so the head's free space is not wasted).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdalign.h>

#include "ir/ir.h"
#include "util/arena.h"

/* ---- the op table ---- */
const wf_opinfo wf_opinfo_tab[WF_OP__COUNT] = {
#define WF_OPINFO(e, s, na, nr, fl, ty, libm, llvm, cuda, fold)                                    \
  {s, na, nr, fl, ty, sizeof(#libm) > 1 ? #libm : NULL, llvm, cuda, fold},
    WF_IRDEF(WF_OPINFO)
#undef WF_OPINFO
};

/* Flags as compile-time constants, so the op-order invariants that passes,
** autodiff and backends rely on (ranges tested with <=) are checked here. */
enum {
#define WF_OPFL(e, s, na, nr, fl, ty, libm, llvm, cuda, fold)                                      \
  WF_OPFL_##e = (fl), WF_OPNA_##e = (na), WF_OPNR_##e = (nr), WF_OPTY_##e = (ty),
  WF_IRDEF(WF_OPFL)
#undef WF_OPFL
};
_Static_assert(WF_OP_CONST == 0, "CONST first");
_Static_assert(WF_OP_ADD + 1 == WF_OP_SUB && WF_OP_SUB + 1 == WF_OP_MUL &&
                   WF_OP_MUL + 1 == WF_OP_DIV && WF_OP_DIV + 1 == WF_OP_MOD,
               "binary arithmetic order");
_Static_assert(WF_OP_EQ + 1 == WF_OP_NE && WF_OP_NE + 1 == WF_OP_LT && WF_OP_LT + 1 == WF_OP_LE &&
                   WF_OP_LE + 1 == WF_OP_GT && WF_OP_GT + 1 == WF_OP_GE,
               "comparisons contiguous: EQ..GE");
_Static_assert((WF_OPFL_EQ & WF_OPFL_NE & WF_OPFL_LT & WF_OPFL_LE & WF_OPFL_GT & WF_OPFL_GE &
                WF_OPF_CMP) != 0,
               "EQ..GE are comparisons");
_Static_assert(WF_OPNA_EQ == 2 && WF_OPNA_GE == 2, "comparisons are binary");
_Static_assert(WF_OP_IF + 1 == WF_OP_FOR && WF_OP_FOR + 1 == WF_OP_WHILE,
               "region ops contiguous: IF..WHILE");
_Static_assert((WF_OPFL_IF & WF_OPFL_FOR & WF_OPFL_WHILE & WF_OPF_REGION) != 0,
               "IF..WHILE own regions");
_Static_assert(WF_OP_YIELD + 1 == WF_OP_COND && WF_OP_COND + 1 == WF_OP_RET &&
                   WF_OP_RET + 1 == WF_OP__COUNT,
               "terminators last: YIELD, COND, RET");
_Static_assert((WF_OPFL_YIELD & WF_OPFL_COND & WF_OPFL_RET & WF_OPF_TERM) != 0,
               "YIELD..RET are terminators");
_Static_assert(WF_OPNR_RANDF == 2 && WF_OPNR_RANDI == 2, "RANDF/RANDI: value, next state");
_Static_assert(WF_OPNR_CALL == -1 && WF_OPNA_CALL == -1, "CALL is variadic");
_Static_assert((WF_OPFL_CALL & WF_OPF_PURE) == 0, "CALL is never removed as pure");
_Static_assert(WF_OP__COUNT < 128, "ops fit in a byte");
/* The scalar float functions (WF_MATHDEF) are unary or binary: the
** emitters pass one or two operands to their libm or CUDA function. */
#define WF_MATH_ARITY(X, e, s, na, fl, libm, llvm, cuda, fold)                                     \
  _Static_assert(WF_OPNA_##e == 1 || WF_OPNA_##e == 2, #e ": one or two operands");
WF_MATHDEF(WF_MATH_ARITY, )
#undef WF_MATH_ARITY
/* CSE swaps the two operands of a WF_OPF_COMM op and removes duplicates
** of pure ones; DCE keeps a WF_OPF_WRITE op only because it is not pure. */
#define WF_FLAG_RULES(e, s, na, nr, fl, ty, libm, llvm, cuda, fold)                                \
  _Static_assert(!((fl)&WF_OPF_COMM) || ((na) == 2 && ((fl)&WF_OPF_PURE)),                         \
                 #e ": a commutative op is pure and binary");                                      \
  _Static_assert(!((fl)&WF_OPF_WRITE) || (((fl)&WF_OPF_MEM) && !((fl)&WF_OPF_PURE)),               \
                 #e ": a write has an effect");
WF_IRDEF(WF_FLAG_RULES)
#undef WF_FLAG_RULES

/* ---- module and functions ---- */
wf_module *wf_module_new(wf_types *T) {
  wf_module *m = calloc(1, sizeof(*m));
  if (!m) return NULL;
  m->arena = wf_arena_new();
  m->types = T ? T : wf_types_new();
  m->borrowed_types = T != NULL;
  if (!m->arena || !m->types) {
    wf_module_free(m);
    return NULL;
  }
  return m;
}

void wf_module_free(wf_module *m) {
  if (!m) return;
  for (int i = 0; i < m->nfuncs; i++)
    free(m->funcs[i]->vals);
  free(m->funcs);
  wf_arena_free(m->arena);
  if (!m->borrowed_types) wf_types_free(m->types);
  free(m);
}

void *wf_ir_alloc(wf_module *m, size_t n) {
  return wf_arena_alloc(m->arena, n);
}

const char *wf_ir_strdup(wf_module *m, const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = wf_ir_alloc(m, n);
  if (d) memcpy(d, s, n);
  return d;
}

/* A new block param or function param value (def == NULL). */
static wf_val newparam(wf_func *fn, const wf_type *t, wf_block *owner, int index) {
  wf_val v = wf_b_newval(fn, t);
  if (v >= 0) {
    fn->vals[v].block = owner;
    fn->vals[v].index = index;
  }
  return v;
}

wf_func *wf_func_new(wf_module *m, const char *name, int is_kernel, int nparams,
                     const wf_type *const *ptypes, int nret, const wf_type *const *rettypes) {
  if (m->nfuncs == m->capfuncs) {
    int nc = m->capfuncs ? m->capfuncs * 2 : 8;
    wf_func **nf = realloc(m->funcs, (size_t)nc * sizeof(*nf));
    if (!nf) return NULL;
    m->funcs = nf;
    m->capfuncs = nc;
  }
  wf_func *fn = wf_ir_alloc(m, sizeof(*fn));
  if (!fn) return NULL;
  fn->mod = m;
  fn->name = wf_ir_strdup(m, name ? name : "");
  fn->is_kernel = is_kernel;
  fn->nparams = nparams;
  fn->params = wf_ir_alloc(m, sizeof(wf_val) * (size_t)(nparams > 0 ? nparams : 1));
  fn->nret = nret;
  fn->rettypes = wf_ir_alloc(m, sizeof(*fn->rettypes) * (size_t)(nret > 0 ? nret : 1));
  fn->body = wf_ir_alloc(m, sizeof(wf_block));
  if (!fn->name || !fn->params || !fn->rettypes || !fn->body) return NULL;
  m->funcs[m->nfuncs++] = fn; /* before values: wf_module_free frees fn->vals */
  for (int i = 0; i < nret; i++)
    fn->rettypes[i] = rettypes[i];
  for (int i = 0; i < nparams; i++) {
    fn->params[i] = newparam(fn, ptypes[i], NULL, i);
    if (fn->params[i] < 0) return NULL;
  }
  return fn;
}

int wf_module_find(wf_module *m, const char *name) {
  for (int i = 0; i < m->nfuncs; i++)
    if (strcmp(m->funcs[i]->name, name) == 0) return i;
  return -1;
}

/* ---- builder ---- */
void wf_b_init(wf_builder *b, wf_func *fn, wf_block *block) {
  b->fn = fn;
  b->block = block;
  b->before = NULL;
  b->loc.line = b->loc.col = 0;
}

wf_val wf_b_newval(wf_func *fn, const wf_type *t) {
  if (fn->nvals == fn->capvals) {
    int32_t nc = fn->capvals ? fn->capvals * 2 : 64;
    wf_valinfo *nv = realloc(fn->vals, (size_t)nc * sizeof(*nv));
    if (!nv) return WF_NOVAL;
    fn->vals = nv;
    fn->capvals = nc;
  }
  wf_val v = fn->nvals++;
  fn->vals[v].type = t;
  fn->vals[v].def = NULL;
  fn->vals[v].block = NULL;
  fn->vals[v].index = 0;
  return v;
}

wf_block *wf_b_newblock(wf_func *fn, int nparams, const wf_type *const *ptypes) {
  wf_block *bl = wf_ir_alloc(fn->mod, sizeof(*bl));
  if (!bl) return NULL;
  bl->params = wf_ir_alloc(fn->mod, sizeof(wf_val) * (size_t)(nparams > 0 ? nparams : 1));
  if (!bl->params) return NULL;
  bl->nparams = nparams;
  for (int i = 0; i < nparams; i++)
    bl->params[i] = newparam(fn, ptypes[i], bl, i);
  return bl;
}

wf_inst *wf_inst_new(wf_func *fn, wf_op op, int nargs, const wf_val *args, int nres,
                     const wf_type *const *rtypes, int nblocks) {
  wf_module *m = fn->mod;
  wf_inst *in = wf_ir_alloc(m, sizeof(*in));
  if (!in) return NULL;
  in->op = op;
  in->nargs = nargs;
  in->args = wf_ir_alloc(m, sizeof(wf_val) * (size_t)(nargs > 0 ? nargs : 1));
  in->nres = nres;
  in->res = wf_ir_alloc(m, sizeof(wf_val) * (size_t)(nres > 0 ? nres : 1));
  in->nblocks = nblocks;
  in->blocks = wf_ir_alloc(m, sizeof(wf_block *) * (size_t)(nblocks > 0 ? nblocks : 1));
  if (!in->args || !in->res || !in->blocks) return NULL;
  for (int i = 0; i < nargs; i++)
    in->args[i] = args ? args[i] : WF_NOVAL;
  for (int i = 0; i < nres; i++) {
    in->res[i] = wf_b_newval(fn, rtypes ? rtypes[i] : NULL);
    if (in->res[i] < 0) return NULL;
    fn->vals[in->res[i]].def = in;
    fn->vals[in->res[i]].index = i;
  }
  return in;
}

wf_inst *wf_b_inst(wf_builder *b, wf_op op, int nargs, const wf_val *args, int nres,
                   const wf_type *const *rtypes, int nblocks) {
  wf_inst *in = wf_inst_new(b->fn, op, nargs, args, nres, rtypes, nblocks);
  if (!in) return NULL;
  in->loc = b->loc;
  if (b->before)
    wf_inst_insert_before(b->before, in);
  else if (b->block)
    wf_block_append(b->block, in);
  return in;
}

/* Result 0 of a freshly built inst, or WF_NOVAL when allocation failed. */
static wf_val res0(wf_inst *in) {
  return in && in->nres > 0 ? in->res[0] : WF_NOVAL;
}

wf_val wf_b_op1(wf_builder *b, wf_op op, const wf_type *rt, wf_val a) {
  return res0(wf_b_inst(b, op, 1, &a, 1, &rt, 0));
}

wf_val wf_b_op2(wf_builder *b, wf_op op, const wf_type *rt, wf_val a, wf_val c) {
  wf_val args[2] = {a, c};
  return res0(wf_b_inst(b, op, 2, args, 1, &rt, 0));
}

wf_val wf_b_op3(wf_builder *b, wf_op op, const wf_type *rt, wf_val a, wf_val c, wf_val d) {
  wf_val args[3] = {a, c, d};
  return res0(wf_b_inst(b, op, 3, args, 1, &rt, 0));
}

wf_val wf_b_consti(wf_builder *b, const wf_type *t, int64_t v) {
  wf_inst *in = wf_b_inst(b, WF_OP_CONST, 0, NULL, 1, &t, 0);
  if (!in) return WF_NOVAL;
  if (t && t->kind == WF_T_FLOAT)
    in->fimm = (double)v;
  else
    in->imm = t && t->kind == WF_T_BOOL ? (v != 0) : v;
  return in->res[0];
}

wf_val wf_b_constf(wf_builder *b, const wf_type *t, double v) {
  wf_inst *in = wf_b_inst(b, WF_OP_CONST, 0, NULL, 1, &t, 0);
  if (!in) return WF_NOVAL;
  if (t && t->kind == WF_T_FLOAT)
    in->fimm = v;
  else
    in->imm = t && t->kind == WF_T_BOOL ? (v != 0) : (int64_t)v;
  return in->res[0];
}

wf_val wf_b_extract(wf_builder *b, wf_val agg, int index) {
  const wf_type *rt = wf_t_component(b->fn->mod->types, wf_vtype(b->fn, agg), index);
  wf_inst *in = wf_b_inst(b, WF_OP_EXTRACT, 1, &agg, 1, &rt, 0);
  if (!in) return WF_NOVAL;
  in->imm = index;
  return in->res[0];
}

wf_val wf_b_insert(wf_builder *b, wf_val agg, int index, wf_val v) {
  const wf_type *rt = wf_vtype(b->fn, agg);
  wf_val args[2] = {agg, v};
  wf_inst *in = wf_b_inst(b, WF_OP_INSERT, 2, args, 1, &rt, 0);
  if (!in) return WF_NOVAL;
  in->imm = index;
  return in->res[0];
}

wf_val wf_b_extractd(wf_builder *b, wf_val agg, wf_val k) {
  const wf_type *rt = wf_t_component(b->fn->mod->types, wf_vtype(b->fn, agg), 0);
  wf_val args[2] = {agg, k};
  wf_inst *in = wf_b_inst(b, WF_OP_EXTRACTD, 2, args, 1, &rt, 0);
  return in ? in->res[0] : WF_NOVAL;
}

wf_val wf_b_insertd(wf_builder *b, wf_val agg, wf_val k, wf_val v) {
  const wf_type *rt = wf_vtype(b->fn, agg);
  wf_val args[3] = {agg, k, v};
  wf_inst *in = wf_b_inst(b, WF_OP_INSERTD, 3, args, 1, &rt, 0);
  return in ? in->res[0] : WF_NOVAL;
}

wf_val wf_b_agg(wf_builder *b, const wf_type *t, int n, const wf_val *comps) {
  return res0(wf_b_inst(b, WF_OP_AGG, n, comps, 1, &t, 0));
}

/* ---- editing ---- */
void wf_inst_unlink(wf_inst *i) {
  wf_block *bl = i->parent;
  if (i->prev)
    i->prev->next = i->next;
  else if (bl && bl->first == i)
    bl->first = i->next;
  if (i->next)
    i->next->prev = i->prev;
  else if (bl && bl->last == i)
    bl->last = i->prev;
  i->prev = i->next = NULL;
  i->parent = NULL;
}

void wf_inst_insert_before(wf_inst *pos, wf_inst *i) {
  wf_block *bl = pos->parent;
  i->parent = bl;
  i->next = pos;
  i->prev = pos->prev;
  if (pos->prev)
    pos->prev->next = i;
  else if (bl)
    bl->first = i;
  pos->prev = i;
}

void wf_block_append(wf_block *bl, wf_inst *i) {
  i->parent = bl;
  i->next = NULL;
  i->prev = bl->last;
  if (bl->last)
    bl->last->next = i;
  else
    bl->first = i;
  bl->last = i;
}

void wf_inst_set_block(wf_inst *in, int k, wf_block *bl) {
  in->blocks[k] = bl;
  if (bl) bl->parent = in;
}

/* Re-establishes parent links everywhere below bl (builders that fill
** inst->blocks[] directly leave block->parent unset). */
static void fix_block(wf_block *bl, wf_inst *owner) {
  bl->parent = owner;
  for (wf_inst *i = bl->first; i; i = i->next) {
    i->parent = bl;
    for (int k = 0; k < i->nblocks; k++)
      if (i->blocks[k]) fix_block(i->blocks[k], i);
  }
}

void wf_func_fix_parents(wf_func *fn) {
  if (fn->body) fix_block(fn->body, NULL);
}

static void replace_in_block(wf_block *bl, wf_val from, wf_val to) {
  for (wf_inst *i = bl->first; i; i = i->next) {
    for (int k = 0; k < i->nargs; k++)
      if (i->args[k] == from) i->args[k] = to;
    for (int k = 0; k < i->nblocks; k++)
      if (i->blocks[k]) replace_in_block(i->blocks[k], from, to);
  }
}

void wf_replace_uses(wf_func *fn, wf_val from, wf_val to) {
  if (fn->body) replace_in_block(fn->body, from, to);
}

const char *wf_ir_value_path(const wf_func *fn, wf_val v, const char *const *names, int nnames,
                             char *buf, size_t n) {
  if (v < 0 || v >= fn->nvals) return NULL;
  const wf_valinfo *vi = &fn->vals[v];
  if (!vi->def && !vi->block) { /* a parameter */
    int p = vi->index;
    return p >= 0 && p < nnames && names && names[p] ? names[p] : NULL;
  }
  const wf_inst *d = vi->def;
  if (!d || d->op != WF_OP_EXTRACT) return NULL;
  const wf_type *st = fn->vals[d->args[0]].type;
  if (!st || st->kind != WF_T_STRUCT || d->imm < 0 || d->imm >= st->nfields) return NULL;
  char up[256];
  const char *base = wf_ir_value_path(fn, d->args[0], names, nnames, up, sizeof up);
  if (!base) return NULL;
  snprintf(buf, n, "%s.%s", base, st->fields[d->imm].name);
  return buf;
}
