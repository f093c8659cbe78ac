/*
** emit.c -- IR -> CUDA C.
**
** One pass over each kernel function of the module (after wf_ir_optimize:
** calls are inlined). The output has four parts:
**
**   1. device prelude   (skipped when WF_HOST_SHIM is defined: the host
**                        shim header supplies the same names for g++)
**   2. portable prelude wf_arr, wf_dims, helpers for Lua's % and //,
**                        atomics-free math, the RNG (same code on both sides)
**   3. types            one struct per aggregate type used (fields f0..fN in
**                        the C layout of wf_type; static_assert on the size)
**   4. kernels          extern "C" __global__ entries with a grid-stride loop
**
** Every SSA value becomes a C local `v<N>`; structured regions become C
** control flow: IF results are declared before the `if` and assigned by the
** yields; FOR/WHILE carry their loop values in `c<N>_<k>` locals. `#line`
** directives map each instruction back to its Lua line, so NVRTC messages
** and device printf positions point at the kernel source.
**
** Interrupts: unlike the CPU backend (src/cpu/emit.c), loops here do not
** poll weft_interrupt's flag; the device path has no host-mapped memory to
** read it from. A CUDA kernel that never ends keeps its device busy; the
** host's interrupt stops the script at the next Lua instruction or CPU
** launch after the kernel returns (a synchronize waits for it).
*/
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/wf_cuda.h"
#include "geom/native.h"

#include "util/sbuf.h"
typedef wf_sbuf sbuf;

/* A C string literal for s (escapes quotes, backslashes, controls). */
static void sb_cstr(sbuf *b, const char *s) {
  wf_sb_puts(b, "\"");
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      wf_sb_printf(b, "\\%c", c);
    else if (c == '\n')
      wf_sb_puts(b, "\\n");
    else if (c == '\t')
      wf_sb_puts(b, "\\t");
    else if (c < 32 || c >= 127)
      wf_sb_printf(b, "\\%03o", c);
    else
      wf_sb_putn(b, (const char *)&c, 1);
  }
  wf_sb_puts(b, "\"");
}

/* ---- emitter state ---------------------------------------------------- */
typedef struct agg_name {
  const wf_type *t;
  char name[80];
} agg_name;

typedef struct emitter {
  wf_module *m;
  sbuf types;      /* struct definitions, in dependency order */
  sbuf body;       /* kernels */
  agg_name **aggs; /* each allocated apart: names stay put */
  int naggs, capaggs;
  int nloops; /* numbering of loop-carried locals */
  int uses_half;
  int indent;
  int last_line;
  const char *chunk; /* chunk name for #line (without '@') */
  const wf_func *fn;
  /* debug mode: bounds and division checks report into the error slot */
  int debug;
  int checks; /* release mode: the bounds checks wf_pass_bounds left, and its CHECKs */
  int nnames;
  const char *const *names; /* parameter names of the forward kernel */
  int16_t *aname;           /* per value: root array param index, -1 unknown */
  int8_t *adepth;           /* per value: dimensions peeled off the root */
  char *err;
  size_t errsize;
  int failed;
} emitter;

/* Record the first error, with the instruction's position if known. */
static void fail(emitter *E, const wf_inst *in, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(emitter *E, const wf_inst *in, const char *fmt, ...) {
  if (E->failed) return;
  E->failed = 1;
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (in && in->loc.line > 0 && E->chunk)
    snprintf(E->err, E->errsize, "%s:%d: cuda: %s", E->chunk, (int)in->loc.line, msg);
  else
    snprintf(E->err, E->errsize, "cuda: %s", msg);
}

static void ind(emitter *E) {
  for (int i = 0; i < E->indent; i++)
    wf_sb_puts(&E->body, "  ");
}

/* ---- types ------------------------------------------------------------ */
static int is_half(const wf_type *t) {
  return t->kind == WF_T_FLOAT && t->bits == 16;
}
static int is_sint(const wf_type *t) {
  return t->kind == WF_T_INT && t->is_signed;
}

static const char *int_ctype(int bits, int is_signed) {
  switch (bits) {
  case 8: return is_signed ? "signed char" : "unsigned char";
  case 16: return is_signed ? "short" : "unsigned short";
  case 32: return is_signed ? "int" : "unsigned int";
  default: return is_signed ? "long long" : "unsigned long long";
  }
}

static const char *ctype(emitter *E, const wf_type *t);

/* Define the struct for aggregate t (components first) and name it. */
static const char *agg_ctype(emitter *E, const wf_type *t) {
  for (int i = 0; i < E->naggs; i++)
    if (E->aggs[i]->t == t) return E->aggs[i]->name;
  int n = wf_t_arity(t);
  /* a struct may have any number of fields */
  const char *fbuf[64], **fields = n <= 64 ? fbuf : malloc(sizeof *fields * (size_t)n);
  if (!fields) {
    E->types.oom = 1;
    return "int";
  }
  for (int i = 0; i < n; i++)
    fields[i] = ctype(E, wf_t_component(E->m->types, t, i));
  if (E->naggs == E->capaggs) {
    int nc = E->capaggs ? E->capaggs * 2 : 16;
    agg_name **na = realloc(E->aggs, sizeof *na * (size_t)nc);
    if (!na) {
      E->types.oom = 1;
      if (fields != fbuf) free(fields);
      return "int";
    }
    E->aggs = na;
    E->capaggs = nc;
  }
  agg_name *a = malloc(sizeof *a);
  if (!a) {
    E->types.oom = 1;
    if (fields != fbuf) free(fields);
    return "int";
  }
  E->aggs[E->naggs++] = a;
  a->t = t;
  char base[48]; /* leaves room in a->name for the prefix and the counter */
  size_t k = 0;
  for (const char *s = t->name ? t->name : "agg"; *s && k < sizeof base - 1; s++)
    base[k++] = ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9'))
                    ? *s
                    : '_';
  base[k] = 0;
  snprintf(a->name, sizeof a->name, "wf_%s%s_%d", t->kind == WF_T_STRUCT ? "s_" : "", base,
           E->naggs);
  const char *name = a->name;
  sbuf *b = &E->types;
  wf_sb_printf(b, "struct %s { /* %s */\n", name, t->name ? t->name : "");
  uint32_t pos = 0;
  for (int i = 0; i < n; i++) {
    const wf_type *ft = wf_t_component(E->m->types, t, i);
    uint32_t al = ft->align ? ft->align : 1;
    pos = (pos + al - 1) / al * al;
    if (t->kind == WF_T_STRUCT && t->fields[i].offset > pos) {
      wf_sb_printf(b, "  char pad%d[%u];\n", i, t->fields[i].offset - pos);
      pos = t->fields[i].offset;
    }
    wf_sb_printf(b, "  %s f%d;\n", fields[i], i);
    pos += ft->size;
  }
  wf_sb_puts(b, "};\n");
  wf_sb_printf(b, "static_assert(sizeof(%s) == %u, \"layout of %s\");\n", name, t->size,
               t->name ? t->name : "");
  if (fields != fbuf) free(fields);
  return name;
}

static const char *ctype(emitter *E, const wf_type *t) {
  switch (t->kind) {
  case WF_T_VOID: return "void";
  case WF_T_BOOL: return "bool";
  case WF_T_INT: return int_ctype(t->bits, t->is_signed);
  case WF_T_FLOAT:
    if (t->bits == 16) {
      E->uses_half = 1;
      return "wf_half";
    }
    return t->bits == 32 ? "float" : "double";
  case WF_T_RNG: return "unsigned int";
  case WF_T_ARRAY: return "wf_arr";
  default: return agg_ctype(E, t);
  }
}

/* ---- values ----------------------------------------------------------- */
static const wf_type *vt(emitter *E, wf_val v) {
  return E->fn->vals[v].type;
}

/* `T vN = ` : the start of a result's declaration. */
static void decl(emitter *E, wf_val r) {
  ind(E);
  wf_sb_printf(&E->body, "%s v%d = ", ctype(E, vt(E, r)), (int)r);
}

/* A float scalar operand as float (half widened), for math on halves. */
static void fl(emitter *E, wf_val v) {
  if (is_half(vt(E, v)))
    wf_sb_printf(&E->body, "wf_h2f(v%d)", (int)v);
  else
    wf_sb_printf(&E->body, "v%d", (int)v);
}

/* Emit a float constant exactly (hex float; inf/nan via builtins). */
static void emit_fconst(emitter *E, const wf_type *t, double x) {
  sbuf *b = &E->body;
  const char *wrap = t->bits == 16 ? "wf_d2h(" : "";
  wf_sb_puts(b, wrap);
  if (isnan(x))
    wf_sb_puts(b, t->bits == 32 ? "WF_NANF" : "WF_NAN");
  else if (isinf(x))
    wf_sb_printf(b, "%s%s", x < 0 ? "-" : "", t->bits == 32 ? "WF_INFF" : "WF_INF");
  else if (t->bits == 32)
    wf_sb_printf(b, "%af", (double)(float)x);
  else
    wf_sb_printf(b, "%a", x);
  if (*wrap) wf_sb_puts(b, ")");
}

static void emit_iconst(emitter *E, const wf_type *t, int64_t v) {
  sbuf *b = &E->body;
  if (t->kind == WF_T_BOOL) {
    wf_sb_puts(b, v ? "true" : "false");
    return;
  }
  if (t->bits == 64 && !t->is_signed)
    wf_sb_printf(b, "%" PRIu64 "ULL", (uint64_t)v);
  else if (t->bits == 64 && v == INT64_MIN)
    wf_sb_puts(b, "(-9223372036854775807LL - 1)");
  else if (t->bits == 64)
    wf_sb_printf(b, "%" PRId64 "LL", v);
  else if (!t->is_signed)
    wf_sb_printf(b, "(%s)%" PRIu64 "u", ctype(E, t), (uint64_t)v & 0xffffffffu);
  else if (v == INT32_MIN)
    wf_sb_puts(b, "(-2147483647 - 1)");
  else
    wf_sb_printf(b, "(%s)%" PRId64, ctype(E, t), v);
}

/* ---- instructions ------------------------------------------------------ */
/* The CUDA function of an op (ir.h's cuda column), "f"-suffixed by the
** caller for float32 unless it is one of the prelude's wf_ helpers. */
static const char *math_name(wf_op op) {
  return wf_opinfo_tab[op].cuda;
}

static const char *binop_sym(wf_op op) {
  switch (op) {
  case WF_OP_ADD: return "+";
  case WF_OP_SUB: return "-";
  case WF_OP_MUL: return "*";
  case WF_OP_DIV: return "/";
  case WF_OP_EQ: return "==";
  case WF_OP_NE: return "!=";
  case WF_OP_LT: return "<";
  case WF_OP_LE: return "<=";
  case WF_OP_GT: return ">";
  case WF_OP_GE: return ">=";
  case WF_OP_BAND: return "&";
  case WF_OP_BOR: return "|";
  case WF_OP_BXOR: return "^";
  default: return NULL;
  }
}

/* Float math (f32: sqrtf...; f64: sqrt...; f16: through float). The
** wf_ helpers are overloaded for float and double, so need no suffix. */
static void emit_fmath(emitter *E, const wf_inst *in) {
  const wf_type *t = vt(E, in->res[0]);
  const char *nm = math_name(in->op);
  int helper = strncmp(nm, "wf_", 3) == 0;
  sbuf *b = &E->body;
  decl(E, in->res[0]);
  if (is_half(t)) wf_sb_puts(b, "wf_f2h(");
  wf_sb_printf(b, "%s%s(", nm, !helper && t->bits != 64 ? "f" : "");
  for (int i = 0; i < in->nargs; i++) {
    if (i) wf_sb_puts(b, ", ");
    fl(E, in->args[i]);
  }
  wf_sb_puts(b, is_half(t) ? "));\n" : ");\n");
}

/* Integer arithmetic that wraps like LLVM's add/sub/mul (no signed
** overflow UB in C): compute in the unsigned type of the same width. */
static void emit_iarith(emitter *E, const wf_inst *in, const char *sym) {
  const wf_type *t = vt(E, in->res[0]);
  const char *ty = ctype(E, t);
  decl(E, in->res[0]);
  if (is_sint(t) && t->bits >= 32) {
    const char *u = int_ctype(t->bits, 0);
    wf_sb_printf(&E->body, "(%s)((%s)v%d %s (%s)v%d);\n", ty, u, (int)in->args[0], sym, u,
                 (int)in->args[1]);
  } else {
    wf_sb_printf(&E->body, "(%s)(v%d %s v%d);\n", ty, (int)in->args[0], sym, (int)in->args[1]);
  }
}

/* The address of element (indices...) of array args[0], typed T*. */
static void emit_addr(emitter *E, const wf_inst *in, int nidx, const wf_type *elem) {
  sbuf *b = &E->body;
  int a = (int)in->args[0];
  wf_sb_printf(b, "((%s *)(v%d.data", ctype(E, elem), a);
  for (int k = 0; k < nidx; k++)
    wf_sb_printf(b, " + (long long)v%d * v%d.strides[%d]", (int)in->args[1 + k], a, k);
  wf_sb_puts(b, "))");
}

/* The smallest / largest value of an integer type as C literals. */
static void int_limits(const wf_type *t, char *lo, char *hi, size_t n) {
  if (!t->is_signed) {
    snprintf(lo, n, "(%s)0", int_ctype(t->bits, 0));
    snprintf(hi, n, "(%s)%lluULL", int_ctype(t->bits, 0),
             t->bits == 64 ? ~0ULL : (1ULL << t->bits) - 1);
  } else if (t->bits == 64) {
    snprintf(lo, n, "(-9223372036854775807LL - 1)");
    snprintf(hi, n, "9223372036854775807LL");
  } else {
    snprintf(lo, n, "(%s)(%lld)", int_ctype(t->bits, 1), -(1LL << (t->bits - 1)));
    snprintf(hi, n, "(%s)%lld", int_ctype(t->bits, 1), (1LL << (t->bits - 1)) - 1);
  }
}

/* Scalar conversion of expression x (type st) to rt, as the CPU backend:
** float -> int saturates (NaN -> 0), x -> bool is x != 0, halves go
** through float. */
static void cast_expr(emitter *E, const wf_type *rt, const wf_type *st, const char *x) {
  sbuf *b = &E->body;
  const char *rty = ctype(E, rt);
  if (st->kind == WF_T_RNG) st = wf_t_int(E->m->types, 32, 0);
  if (rt->kind == WF_T_RNG) rt = wf_t_int(E->m->types, 32, 0);
  if (rt == st)
    wf_sb_printf(b, "%s", x);
  else if (rt->kind == WF_T_BOOL)
    is_half(st) ? wf_sb_printf(b, "(wf_h2f(%s) != 0.0f)", x) : wf_sb_printf(b, "(%s != 0)", x);
  else if (is_half(rt) && st->kind == WF_T_FLOAT && st->bits == 64)
    wf_sb_printf(b, "wf_d2h(%s)", x);
  else if (is_half(rt))
    wf_sb_printf(b, "wf_f2h((float)%s)", x);
  else if (st->kind == WF_T_FLOAT && rt->kind == WF_T_INT) {
    char lo[64], hi[64];
    int_limits(rt, lo, hi, sizeof lo);
    double dlo = rt->is_signed ? -ldexp(1.0, rt->bits - 1) : -1.0;
    double dhi = ldexp(1.0, rt->is_signed ? rt->bits - 1 : rt->bits);
    wf_sb_printf(b, "wf_fptoi<%s>(%s%s%s, %a, %a, %s, %s)", rty, is_half(st) ? "wf_h2f(" : "", x,
                 is_half(st) ? ")" : "", dlo, dhi, lo, hi);
  } else if (is_half(st))
    wf_sb_printf(b, "(%s)wf_h2f(%s)", rty, x);
  else
    wf_sb_printf(b, "(%s)%s", rty, x);
}

/* Aggregates convert component by component (paths like .f0.f2). */
static void cast_agg(emitter *E, const wf_type *rt, const wf_type *st, int r, int a, char *path,
                     size_t plen) {
  if (wf_t_is_scalar(rt) || rt->kind == WF_T_RNG) {
    char x[160];
    snprintf(x, sizeof x, "v%d%s", a, path);
    ind(E);
    wf_sb_printf(&E->body, "v%d%s = ", r, path);
    cast_expr(E, rt, st, x);
    wf_sb_puts(&E->body, ";\n");
    return;
  }
  int n = wf_t_arity(rt);
  for (int i = 0; i < n && plen < 100; i++) {
    int w = snprintf(path + plen, 128 - plen, ".f%d", i);
    cast_agg(E, wf_t_component(E->m->types, rt, i), wf_t_component(E->m->types, st, i), r, a, path,
             plen + (size_t)w);
    path[plen] = 0;
  }
}

/* ---- debug checks ------------------------------------------------------ */
/* "chunk:line" of an instruction as a C string literal (the position the
** CPU backend's messages give). */
static void where_lit(emitter *E, const wf_inst *in) {
  char buf[320];
  if (in && in->loc.line > 0 && E->chunk)
    snprintf(buf, sizeof buf, "%s:%d", E->chunk, (int)in->loc.line);
  else
    snprintf(buf, sizeof buf, "%s", E->chunk ? E->chunk : "?");
  sb_cstr(&E->body, buf);
}

/* The parameter name of the array a value was taken from ("?" unknown). */
static const char *arr_name(emitter *E, wf_val v) {
  int p = E->aname ? E->aname[v] : -1;
  if (p >= 0 && p < E->nnames && E->names && E->names[p]) return E->names[p];
  return "?";
}

/* ", axis, \"array\", \"kernel\")) return;" closing a wf_oob/wf_range call;
** an array taken from a struct parameter is named by its path (m.state.x). */
static void oob_tail(emitter *E, wf_val arr, int axis) {
  sbuf *b = &E->body;
  char path[256];
  const char *nm = E->aname && E->aname[arr] < 0
                       ? wf_ir_value_path(E->fn, arr, E->names, E->nnames, path, sizeof path)
                       : NULL;
  wf_sb_printf(b, ", %d, ", (E->aname ? E->adepth[arr] : 0) + axis);
  sb_cstr(b, nm ? nm : arr_name(E, arr));
  wf_sb_puts(b, ", ");
  sb_cstr(b, E->fn && E->fn->name ? E->fn->name : "?");
  wf_sb_puts(b, ")) return;\n");
}

/* Index idx on axis k of array arr must be in [0, shape[k]), else the
** thread records the message (as the CPU backend words it) and ends.
** Debug mode checks every index; release mode those no CHECK of
** wf_pass_bounds covers (bit k of the access's imm). */
static void check_index(emitter *E, const wf_inst *in, wf_val arr, wf_val idx, int k) {
  if (!E->debug && (!E->checks || ((in->imm >> k) & 1))) return;
  sbuf *b = &E->body;
  ind(E);
  wf_sb_printf(b, "if (wf_oob(wf_e, (long long)v%d, v%d.shape[%d], ", (int)idx, (int)arr, k);
  where_lit(E, in);
  oob_tail(E, arr, k);
}

/* Release mode: a CHECK of wf_pass_bounds, a whole range of indices at
** once (see ir.h): the launch's tid range, or a unit-step loop's range
** when the loop runs. The same condition for every thread of a launch
** check, so the branch does not diverge. */
static void check_range(emitter *E, const wf_inst *in) {
  if (E->debug || !E->checks || in->nargs < 2) return;
  sbuf *b = &E->body;
  wf_val arr = in->args[0];
  int axis = wf_check_axis(in->imm), down = (in->imm & WF_CHECK_DOWN) != 0;
  long long off = (long long)wf_check_offset(in->imm);
  ind(E);
  if (in->imm & WF_CHECK_LAUNCH) {
    const wf_inst *t = E->fn->vals[in->args[1]].def;
    int d = t && t->op == WF_OP_TID && t->imm >= 0 && t->imm < 4 ? (int)t->imm : 0;
    wf_sb_printf(b, "if (wf_range(wf_e, %lldLL, wf_d.dim[%d] - 1 + %lldLL, 0, 1, v%d.shape[%d], ",
                 off, d, off, (int)arr, axis);
  } else {
    if (in->nargs < 3) return;
    const wf_type *it = vt(E, in->args[1]);
    int narrow = it && it->kind == WF_T_INT && it->bits < 64;
    wf_sb_printf(b, "if ((long long)v%d %s (long long)v%d && ", (int)in->args[1],
                 down ? ">=" : "<=", (int)in->args[2]);
    wf_sb_printf(b,
                 "wf_range(wf_e, (long long)v%d + %lldLL, (long long)v%d + %lldLL, %d, %d, "
                 "v%d.shape[%d], ",
                 (int)in->args[1], off, (int)in->args[2], off, down, narrow, (int)arr, axis);
  }
  where_lit(E, in);
  oob_tail(E, arr, axis);
}

/* Debug: every index of a LOAD/STORE/ATOMIC (args[1..nidx]). */
static void check_indices(emitter *E, const wf_inst *in, int nidx) {
  for (int k = 0; k < nidx; k++)
    check_index(E, in, in->args[0], in->args[1 + k], k);
}

/* Debug: an error message at this instruction, then the thread ends. */
static void fail_here(emitter *E, const wf_inst *in, const char *msg) {
  ind(E);
  wf_sb_puts(&E->body, "{ wf_fail(wf_e, ");
  where_lit(E, in);
  wf_sb_puts(&E->body, ", ");
  sb_cstr(&E->body, msg);
  wf_sb_puts(&E->body, "); return; }\n");
}

/* Debug and release: integer division and remainder by zero are errors
** (fast mode gives 0, as on the CPU). */
static void check_divisor(emitter *E, const wf_inst *in) {
  if (!E->debug && !E->checks) return;
  ind(E);
  wf_sb_printf(&E->body, "if (v%d == 0)\n", (int)in->args[1]);
  E->indent++;
  fail_here(E, in, "integer division by zero");
  E->indent--;
}

static void emit_cast(emitter *E, const wf_inst *in) {
  const wf_type *rt = vt(E, in->res[0]), *st = vt(E, in->args[0]);
  int a = (int)in->args[0];
  if (rt != st && !(wf_t_is_scalar(rt) || rt->kind == WF_T_RNG)) {
    if (wf_t_arity(rt) == 0 || wf_t_arity(rt) != wf_t_arity(st) || rt->kind != st->kind) {
      fail(E, in, "cannot convert %s to %s", st->name ? st->name : "?", rt->name ? rt->name : "?");
      return;
    }
    ind(E);
    wf_sb_printf(&E->body, "%s v%d;\n", ctype(E, rt), (int)in->res[0]);
    char path[128] = "";
    cast_agg(E, rt, st, (int)in->res[0], a, path, 0);
    return;
  }
  char x[32];
  snprintf(x, sizeof x, "v%d", a);
  decl(E, in->res[0]);
  cast_expr(E, rt, st, x);
  wf_sb_puts(&E->body, ";\n");
}

/* Equality of two values of one type: aggregates compare every scalar. */
static void eq_expr(emitter *E, const wf_type *t, int a, int c, char *path, size_t plen) {
  if (wf_t_is_scalar(t) || t->kind == WF_T_RNG) {
    if (is_half(t))
      wf_sb_printf(&E->body, "(wf_h2f(v%d%s) == wf_h2f(v%d%s))", a, path, c, path);
    else
      wf_sb_printf(&E->body, "(v%d%s == v%d%s)", a, path, c, path);
    return;
  }
  int n = wf_t_arity(t);
  wf_sb_puts(&E->body, "(true");
  for (int i = 0; i < n && plen < 100; i++) {
    int w = snprintf(path + plen, 128 - plen, ".f%d", i);
    wf_sb_puts(&E->body, " && ");
    eq_expr(E, wf_t_component(E->m->types, t, i), a, c, path, plen + (size_t)w);
    path[plen] = 0;
  }
  wf_sb_puts(&E->body, ")");
}

/* One value for a printf conversion, formatted as the CPU backend's
** print does (rtlib.c): integer conversions of floats truncate, float
** conversions of integers convert, %s prints what Lua's tostring would. */
static void print_value(emitter *E, sbuf *fmt, sbuf *args, const char *spec, size_t speclen,
                        char conv, wf_val v) {
  const wf_type *t = vt(E, v);
  char x[64];
  if (is_half(t))
    snprintf(x, sizeof x, "(double)wf_h2f(v%d)", (int)v);
  else if (t->kind == WF_T_FLOAT)
    snprintf(x, sizeof x, "(double)v%d", (int)v);
  else if (t->kind == WF_T_INT && !t->is_signed)
    snprintf(x, sizeof x, "(unsigned long long)v%d", (int)v);
  else
    snprintf(x, sizeof x, "(long long)v%d", (int)v);
  int isf = t->kind == WF_T_FLOAT, isu = t->kind == WF_T_INT && !t->is_signed;
  if (conv == 's' || conv == 'v') {
    /* keep flags and width; the value's own text format */
    size_t k = 0;
    while (k < speclen && spec[k] != '.')
      k++;
    wf_sb_putn(fmt, spec, k);
    if (t->kind == WF_T_BOOL) {
      wf_sb_puts(fmt, "s");
      wf_sb_printf(args, ", v%d ? \"true\" : \"false\"", (int)v);
    } else {
      wf_sb_puts(fmt, isf ? ".14g" : isu ? "llu" : "lld");
      wf_sb_printf(args, ", %s", x);
    }
  } else if (strchr("feEgGaA", conv)) {
    wf_sb_putn(fmt, spec, speclen);
    wf_sb_putn(fmt, &conv, 1);
    wf_sb_printf(args, ", (double)%s", x);
  } else if (conv == 'c') {
    wf_sb_putn(fmt, spec, speclen);
    wf_sb_puts(fmt, "c");
    wf_sb_printf(args, ", (int)%s", x);
  } else {
    wf_sb_putn(fmt, spec, speclen);
    wf_sb_printf(fmt, "ll%c", conv);
    wf_sb_printf(args, ", (long long)%s", x);
  }
}

/* A native builtin (src/geom/native.h): wf_nat_<name>(res, &args...) from
** src/geom/query.h, which the module carries (put_preludes); every value is
** a C local, passed by address. An iterator's state is a local block. */
static void emit_native(emitter *E, const wf_inst *in) {
  if (in->imm < 0 || in->imm >= WF_NAT__COUNT) {
    fail(E, in, "bad native row %lld", (long long)in->imm);
    return;
  }
  const wf_nativeinfo *ni = &wf_native_tab[in->imm];
  sbuf *b = &E->body;
  int r = in->nres ? (int)in->res[0] : -1;
  ind(E);
  if (ni->state)
    wf_sb_printf(b, "unsigned long long wf_qs%d[%d];\n", r, (ni->state + 7) / 8);
  else if (r >= 0)
    wf_sb_printf(b, "%s v%d;\n", ctype(E, vt(E, r)), r);
  ind(E);
  wf_sb_printf(b, "wf_nat_%s(", ni->name);
  if (ni->state) wf_sb_printf(b, "wf_qs%d, ", r);
  if (r >= 0 && !ni->state)
    wf_sb_printf(b, "&v%d", r);
  else
    wf_sb_puts(b, "0");
  for (int k = 0; k < in->nargs; k++)
    wf_sb_printf(b, ", &v%d", (int)in->args[k]);
  wf_sb_puts(b, ");\n");
  if (ni->state) {
    decl(E, r);
    wf_sb_printf(b, "(unsigned long long)wf_qs%d;\n", r);
  }
}

static void emit_print(emitter *E, const wf_inst *in) {
  sbuf fmt = {0}, args = {0};
  int next = 0;
  const char *p = in->str ? in->str : "";
  wf_sb_puts(&fmt, "");
  while (*p) {
    const char *q = strchr(p, '%');
    if (!q) {
      wf_sb_puts(&fmt, p);
      break;
    }
    wf_sb_putn(&fmt, p, (size_t)(q - p));
    if (q[1] == '%') {
      wf_sb_puts(&fmt, "%%");
      p = q + 2;
      continue;
    }
    const char *r = q + 1;
    while (*r && strchr("-+ #0", *r))
      r++;
    while (*r >= '0' && *r <= '9')
      r++;
    if (*r == '.') {
      r++;
      while (*r >= '0' && *r <= '9')
        r++;
    }
    size_t speclen = (size_t)(r - q);
    while (*r && strchr("hlLqjzt", *r))
      r++;
    char conv = *r;
    if (!conv || !strchr("diouxXcfeEgGaAsv", conv)) { /* not a conversion: literal text */
      for (const char *c = q; c < r + (conv ? 1 : 0); c++)
        wf_sb_puts(&fmt, *c == '%' ? "%%" : (char[2]){*c, 0});
      p = conv ? r + 1 : r;
      continue;
    }
    if (next < in->nargs) print_value(E, &fmt, &args, q, speclen, conv, in->args[next++]);
    p = r + 1;
  }
  int extras = next < in->nargs;
  for (; next < in->nargs; next++) { /* extra values: tab-separated, like Lua's print */
    if (fmt.len > 0 && fmt.p[fmt.len - 1] != '\n') wf_sb_puts(&fmt, "\t");
    print_value(E, &fmt, &args, "%", 1, 's', in->args[next]);
  }
  /* the format is printed exactly (print's ends with a newline, printf's
  ** as written); values beyond it end their line */
  if (extras) wf_sb_puts(&fmt, "\n");
  ind(E);
  wf_sb_puts(&E->body, "printf(");
  sb_cstr(&E->body, fmt.p ? fmt.p : "");
  if (args.p) wf_sb_puts(&E->body, args.p);
  wf_sb_puts(&E->body, ");\n");
  if (fmt.oom || args.oom) E->body.oom = 1;
  free(fmt.p);
  free(args.p);
}

static void emit_block(emitter *E, const wf_block *bl, const wf_val *targets, int ntargets,
                       const char *carry);

/* #line before an instruction whose Lua line differs from the last one. */
static void emit_line(emitter *E, const wf_inst *in) {
  if (in->loc.line <= 0 || in->loc.line == E->last_line || !E->chunk) return;
  E->last_line = in->loc.line;
  wf_sb_printf(&E->body, "#line %d ", (int)in->loc.line);
  sb_cstr(&E->body, E->chunk);
  wf_sb_puts(&E->body, "\n");
}

/* Assign yielded values to the region's targets. */
static void emit_assign(emitter *E, const wf_val *targets, int n, const wf_val *vals,
                        const char *prefix) {
  for (int i = 0; i < n; i++) {
    ind(E);
    if (prefix)
      wf_sb_printf(&E->body, "%s%d = v%d;\n", prefix, i, (int)vals[i]);
    else
      wf_sb_printf(&E->body, "v%d = v%d;\n", (int)targets[i], (int)vals[i]);
  }
}

static void emit_if(emitter *E, const wf_inst *in) {
  for (int i = 0; i < in->nres; i++) {
    ind(E);
    wf_sb_printf(&E->body, "%s v%d = {};\n", ctype(E, vt(E, in->res[i])), (int)in->res[i]);
  }
  ind(E);
  wf_sb_printf(&E->body, "if (v%d) {\n", (int)in->args[0]);
  E->indent++;
  emit_block(E, in->blocks[0], in->res, in->nres, NULL);
  E->indent--;
  if (in->nblocks > 1 && in->blocks[1] && in->blocks[1]->first) {
    ind(E);
    wf_sb_puts(&E->body, "} else {\n");
    E->indent++;
    emit_block(E, in->blocks[1], in->res, in->nres, NULL);
    E->indent--;
  }
  ind(E);
  wf_sb_puts(&E->body, "}\n");
}

/* An error at in's line that ends the thread: release and debug code
** report through the error slot; fast code has none and traps (with the
** position in the message). */
static void fail_or_trap(emitter *E, const wf_inst *in, const char *msg) {
  if (E->debug || E->checks) {
    fail_here(E, in, msg);
    return;
  }
  char buf[448];
  if (in && in->loc.line > 0 && E->chunk)
    snprintf(buf, sizeof buf, "%s:%d: %s", E->chunk, (int)in->loc.line, msg);
  else
    snprintf(buf, sizeof buf, "%s", msg);
  ind(E);
  wf_sb_puts(&E->body, "wf_trap(");
  sb_cstr(&E->body, buf);
  wf_sb_puts(&E->body, ");\n");
}

/* Is v a constant other than zero? */
static int nonzero_const(emitter *E, wf_val v) {
  const wf_inst *d = E->fn->vals[v].def;
  if (!d || d->op != WF_OP_CONST) return 0;
  return vt(E, v)->kind == WF_T_FLOAT ? d->fimm != 0 : d->imm != 0;
}

/* Lua's inclusive numeric for; the step's sign picks the test. Carried
** values live in c<id>_k; the body's params are copies made per
** iteration. Integer loops never step past the type's limit: e<id> is
** the counter after the last iteration (last + step, wrapping; last = lo
** + (hi - lo) / step * step in unsigned arithmetic), and the loop leaves
** when the increment reaches it. A float counter that stops changing
** (i + step == i) is an error instead of a hang, as on the CPU. */
static void emit_for(emitter *E, const wf_inst *in) {
  sbuf *b = &E->body;
  int id = E->nloops++;
  const wf_block *body = in->blocks[0];
  const wf_type *it = vt(E, in->args[0]);
  const char *ity = ctype(E, it);
  int isfloat = it->kind == WF_T_FLOAT, half = is_half(it);
  int ncar = in->nargs - 3;
  char prefix[32];
  snprintf(prefix, sizeof prefix, "c%d_", id);
  for (int k = 0; k < ncar; k++) {
    ind(E);
    wf_sb_printf(b, "%s c%d_%d = v%d;\n", ctype(E, vt(E, in->args[3 + k])), id, k,
                 (int)in->args[3 + k]);
  }
  ind(E);
  wf_sb_printf(b, "{\n");
  E->indent++;
  ind(E);
  wf_sb_printf(b, "%s i%d = v%d; const %s h%d = v%d, s%d = v%d;\n", ity, id, (int)in->args[0], ity,
               id, (int)in->args[1], id, (int)in->args[2]);
  /* F(x): a float loop's value as float (halves widened) */
  const char *fo = half ? "wf_h2f(" : "(", *fc = ")";
  if (!nonzero_const(E, in->args[2])) {
    ind(E);
    if (isfloat)
      wf_sb_printf(b, "if (%ss%d%s == 0)\n", fo, id, fc);
    else
      wf_sb_printf(b, "if (s%d == 0)\n", id);
    E->indent++;
    fail_or_trap(E, in, "for loop step is zero");
    E->indent--;
  }
  ind(E);
  if (isfloat) {
    wf_sb_printf(b, "while (%ss%d%s > 0 ? %si%d%s <= %sh%d%s : %si%d%s >= %sh%d%s) {\n", fo, id, fc,
                 fo, id, fc, fo, id, fc, fo, id, fc, fo, id, fc);
  } else {
    const char *u = it->bits <= 32 ? "unsigned int" : "unsigned long long";
    wf_sb_printf(b, "const %s m%d = s%d > 0 ? (%s)s%d : (%s)0 - (%s)s%d;\n", u, id, id, u, id, u, u,
                 id);
    ind(E);
    wf_sb_printf(b, "const %s q%d = (s%d > 0 ? (%s)h%d - (%s)i%d : (%s)i%d - (%s)h%d) / m%d;\n", u,
                 id, id, u, id, u, id, u, id, u, id, id);
    ind(E);
    wf_sb_printf(b,
                 "const %s e%d = (%s)((s%d > 0 ? (%s)i%d + q%d * m%d : (%s)i%d - q%d * m%d) + "
                 "(%s)s%d);\n",
                 ity, id, ity, id, u, id, id, id, u, id, id, id, u, id);
    ind(E);
    wf_sb_printf(
        b,
        "for (bool g%d = s%d > 0 ? i%d <= h%d : i%d >= h%d; g%d; g%d = (i%d = (%s)((%s)i%d + "
        "(%s)s%d)) != e%d) {\n",
        id, id, id, id, id, id, id, id, id, ity, u, id, u, id, id);
  }
  E->indent++;
  if (body->nparams > 0) {
    ind(E);
    wf_sb_printf(b, "%s v%d = i%d;\n", ity, (int)body->params[0], id);
  }
  for (int k = 0; k < ncar && k + 1 < body->nparams; k++) {
    ind(E);
    wf_sb_printf(b, "%s v%d = c%d_%d;\n", ctype(E, vt(E, body->params[k + 1])),
                 (int)body->params[k + 1], id, k);
  }
  emit_block(E, body, NULL, ncar, prefix);
  if (isfloat) {
    ind(E);
    if (half)
      wf_sb_printf(b, "%s n%d = wf_f2h(wf_h2f(i%d) + wf_h2f(s%d));\n", ity, id, id, id);
    else
      wf_sb_printf(b, "%s n%d = i%d + s%d;\n", ity, id, id, id);
    ind(E);
    wf_sb_printf(b, "if (%sn%d%s == %si%d%s)\n", fo, id, fc, fo, id, fc);
    E->indent++;
    char msg[128];
    snprintf(msg, sizeof msg,
             "for loop counter stops changing: float%d counter + step == counter (use an integer "
             "loop)",
             it->bits);
    fail_or_trap(E, in, msg);
    E->indent--;
    ind(E);
    wf_sb_printf(b, "i%d = n%d;\n", id, id);
  }
  E->indent--;
  ind(E);
  wf_sb_puts(b, "}\n");
  E->indent--;
  ind(E);
  wf_sb_puts(b, "}\n");
  for (int k = 0; k < in->nres; k++) {
    ind(E);
    wf_sb_printf(b, "%s v%d = c%d_%d;\n", ctype(E, vt(E, in->res[k])), (int)in->res[k], id, k);
  }
}

/* while: before-region computes the condition and the values passed on;
** they land in the results, then the after-region (body) runs on them. */
static void emit_while(emitter *E, const wf_inst *in) {
  int id = E->nloops++;
  const wf_block *before = in->blocks[0], *after = in->blocks[1];
  char prefix[32];
  snprintf(prefix, sizeof prefix, "c%d_", id);
  for (int k = 0; k < in->nargs; k++) {
    ind(E);
    wf_sb_printf(&E->body, "%s c%d_%d = v%d;\n", ctype(E, vt(E, in->args[k])), id, k,
                 (int)in->args[k]);
  }
  for (int k = 0; k < in->nres; k++) {
    ind(E);
    wf_sb_printf(&E->body, "%s v%d = {};\n", ctype(E, vt(E, in->res[k])), (int)in->res[k]);
  }
  ind(E);
  wf_sb_puts(&E->body, "for (;;) {\n");
  E->indent++;
  ind(E);
  wf_sb_puts(&E->body, "{\n");
  E->indent++;
  for (int k = 0; k < before->nparams; k++) {
    ind(E);
    wf_sb_printf(&E->body, "%s v%d = c%d_%d;\n", ctype(E, vt(E, before->params[k])),
                 (int)before->params[k], id, k);
  }
  emit_block(E, before, in->res, in->nres, NULL);
  E->indent--;
  ind(E);
  wf_sb_puts(&E->body, "}\n");
  ind(E);
  wf_sb_puts(&E->body, "{\n");
  E->indent++;
  for (int k = 0; k < after->nparams && k < in->nres; k++) {
    ind(E);
    wf_sb_printf(&E->body, "%s v%d = v%d;\n", ctype(E, vt(E, after->params[k])),
                 (int)after->params[k], (int)in->res[k]);
  }
  emit_block(E, after, NULL, in->nargs, prefix);
  E->indent--;
  ind(E);
  wf_sb_puts(&E->body, "}\n");
  E->indent--;
  ind(E);
  wf_sb_puts(&E->body, "}\n");
}

/* One atomic per scalar component (as the CPU backend and Warp do):
** `res.path = wf_atomic_op(&wf_p->path, v.path)`. */
static void atomic_leaf(emitter *E, const wf_inst *in, const char *fn, const wf_type *t, int r,
                        int v, char *path, size_t plen) {
  if (wf_t_is_scalar(t)) {
    if (t->kind == WF_T_BOOL) {
      fail(E, in, "%s on %s elements is not supported on CUDA", wf_op_name(in->op), t->name);
      return;
    }
    ind(E);
    if (r >= 0) wf_sb_printf(&E->body, "v%d%s = ", r, path);
    if (t->kind == WF_T_INT && t->bits < 32) /* CAS on the aligned 32-bit word */
      wf_sb_printf(&E->body, "wf_atomic_narrow(&wf_p->v%s, v%d%s, %d);\n", path, v, path,
                   in->op == WF_OP_ATOMIC_ADD   ? 0
                   : in->op == WF_OP_ATOMIC_MIN ? 1
                                                : 2);
    else if (in->op == WF_OP_ATOMIC_CAS) /* v: (compare, new) */
      wf_sb_printf(&E->body, "%s(&wf_p->v, v%d.f0, v%d.f1);\n", fn, v, v);
    else
      wf_sb_printf(&E->body, "%s(&wf_p->v%s, v%d%s);\n", fn, path, v, path);
    return;
  }
  int n = wf_t_arity(t);
  for (int i = 0; i < n && plen < 100; i++) {
    int w = snprintf(path + plen, 128 - plen, ".f%d", i);
    atomic_leaf(E, in, fn, wf_t_component(E->m->types, t, i), r, v, path, plen + (size_t)w);
    path[plen] = 0;
  }
}

static void emit_atomic(emitter *E, const wf_inst *in) {
  const wf_type *at = vt(E, in->args[0]);
  int nidx = in->nargs - 2;
  const wf_type *et = at->elem;
  if (nidx != at->ndim) {
    fail(E, in, "%s with %d indices on a %d-D array", wf_op_name(in->op), nidx, at->ndim);
    return;
  }
  char fn[32]; /* wf_ and the op's name: wf_atomic_add, wf_atomic_cas, ... */
  snprintf(fn, sizeof fn, "wf_%s", wf_op_name(in->op));
  int r = in->nres > 0 ? (int)in->res[0] : -1;
  if (r >= 0) {
    ind(E);
    wf_sb_printf(&E->body, "%s v%d;\n", ctype(E, et), r);
  }
  check_indices(E, in, nidx);
  /* a one-field wrapper so scalars and aggregates share the path syntax */
  ind(E);
  wf_sb_printf(&E->body, "{ struct wf_w { %s v; } *wf_p = (struct wf_w *)", ctype(E, et));
  emit_addr(E, in, nidx, et);
  wf_sb_puts(&E->body, ";\n");
  E->indent++;
  char path[128] = "";
  atomic_leaf(E, in, fn, et, r, (int)in->args[in->nargs - 1], path, 0);
  E->indent--;
  ind(E);
  wf_sb_puts(&E->body, "}\n");
}

static void emit_inst(emitter *E, const wf_inst *in, const wf_val *targets, int ntargets,
                      const char *carry);

static void emit_block(emitter *E, const wf_block *bl, const wf_val *targets, int ntargets,
                       const char *carry) {
  for (const wf_inst *in = bl->first; in && !E->failed; in = in->next)
    emit_inst(E, in, targets, ntargets, carry);
}

/* targets: the values a YIELD/COND assigns (IF and WHILE results); carry:
** in loop bodies, the prefix of the carried locals a YIELD assigns. */
static void emit_inst(emitter *E, const wf_inst *in, const wf_val *targets, int ntargets,
                      const char *carry) {
  sbuf *b = &E->body;
  const wf_type *t = in->nres > 0 ? vt(E, in->res[0]) : NULL;
  int a0 = in->nargs > 0 ? (int)in->args[0] : -1, a1 = in->nargs > 1 ? (int)in->args[1] : -1;
  emit_line(E, in);
  switch (in->op) {
  case WF_OP_CONST:
    decl(E, in->res[0]);
    if (t->kind == WF_T_FLOAT)
      emit_fconst(E, t, in->fimm);
    else if (t->kind == WF_T_INT || t->kind == WF_T_BOOL || t->kind == WF_T_RNG)
      emit_iconst(E, t->kind == WF_T_RNG ? wf_t_int(E->m->types, 32, 0) : t, in->imm);
    else
      wf_sb_puts(b, "{}");
    wf_sb_puts(b, ";\n");
    break;
  case WF_OP_PARAM: fail(E, in, "unexpected param instruction"); break;
  case WF_OP_UNDEF:
    ind(E);
    wf_sb_printf(b, "%s v%d = {};\n", ctype(E, t), (int)in->res[0]);
    break;
  case WF_OP_ADD:
  case WF_OP_SUB:
  case WF_OP_MUL:
    if (t->kind == WF_T_INT) {
      emit_iarith(E, in, binop_sym(in->op));
      break;
    }
    /* fall through */
  case WF_OP_DIV:
    if (t->kind == WF_T_INT && in->op == WF_OP_DIV) check_divisor(E, in);
    decl(E, in->res[0]);
    if (is_half(t)) {
      wf_sb_printf(b, "wf_f2h(wf_h2f(v%d) %s wf_h2f(v%d));\n", a0, binop_sym(in->op), a1);
    } else if (t->kind == WF_T_INT && in->op == WF_OP_DIV) {
      wf_sb_printf(b, "wf_idiv(v%d, v%d);\n", a0, a1);
    } else
      wf_sb_printf(b, "v%d %s v%d;\n", a0, binop_sym(in->op), a1);
    break;
  case WF_OP_MOD:
  case WF_OP_FLOORDIV:
    if (t->kind == WF_T_INT) {
      check_divisor(E, in);
      decl(E, in->res[0]);
      wf_sb_printf(b, "%s(v%d, v%d);\n", in->op == WF_OP_MOD ? "wf_imod" : "wf_ifloordiv", a0, a1);
    } else
      emit_fmath(E, in);
    break;
  case WF_OP_NEG:
    decl(E, in->res[0]);
    if (is_half(t))
      wf_sb_printf(b, "wf_f2h(-wf_h2f(v%d));\n", a0);
    else if (is_sint(t) && t->bits >= 32)
      wf_sb_printf(b, "(%s)(0 - (%s)v%d);\n", ctype(E, t), int_ctype(t->bits, 0), a0);
    else
      wf_sb_printf(b, "(%s)(-v%d);\n", ctype(E, t), a0);
    break;
  case WF_OP_MIN:
  case WF_OP_MAX:
  case WF_OP_ABS:
    if (t->kind == WF_T_INT) {
      decl(E, in->res[0]);
      if (in->op == WF_OP_MIN) wf_sb_printf(b, "v%d < v%d ? v%d : v%d;\n", a0, a1, a0, a1);
      if (in->op == WF_OP_MAX) wf_sb_printf(b, "v%d > v%d ? v%d : v%d;\n", a0, a1, a0, a1);
      if (in->op == WF_OP_ABS) wf_sb_printf(b, "wf_iabs(v%d);\n", a0);
      break;
    }
    emit_fmath(E, in);
    break;
  case WF_OP_EQ:
  case WF_OP_NE:
  case WF_OP_LT:
  case WF_OP_LE:
  case WF_OP_GT:
  case WF_OP_GE:
    if (!wf_t_is_scalar(vt(E, in->args[0])) && vt(E, in->args[0])->kind != WF_T_RNG) {
      if (in->op != WF_OP_EQ && in->op != WF_OP_NE) {
        fail(E, in, "cannot order values of type %s", vt(E, in->args[0])->name);
        break;
      }
      char path[128] = "";
      decl(E, in->res[0]);
      wf_sb_puts(b, in->op == WF_OP_NE ? "!" : "");
      eq_expr(E, vt(E, in->args[0]), a0, a1, path, 0);
      wf_sb_puts(b, ";\n");
      break;
    }
    decl(E, in->res[0]);
    fl(E, in->args[0]);
    wf_sb_printf(b, " %s ", binop_sym(in->op));
    fl(E, in->args[1]);
    wf_sb_puts(b, ";\n");
    break;
  case WF_OP_NOT:
    decl(E, in->res[0]);
    wf_sb_printf(b, "!v%d;\n", a0);
    break;
  case WF_OP_BAND:
  case WF_OP_BOR:
  case WF_OP_BXOR:
    decl(E, in->res[0]);
    wf_sb_printf(b, "(%s)(v%d %s v%d);\n", ctype(E, t), a0, binop_sym(in->op), a1);
    break;
  case WF_OP_BNOT:
    decl(E, in->res[0]);
    if (t->kind == WF_T_BOOL)
      wf_sb_printf(b, "!v%d;\n", a0);
    else
      wf_sb_printf(b, "(%s)~v%d;\n", ctype(E, t), a0);
    break;
  case WF_OP_SHL:
    decl(E, in->res[0]);
    wf_sb_printf(b, "(%s)((%s)v%d << ((int)v%d & %d));\n", ctype(E, t),
                 int_ctype(t->bits < 32 ? 32 : t->bits, 0), a0, a1, t->bits - 1);
    break;
  case WF_OP_SHR:
    decl(E, in->res[0]);
    wf_sb_printf(b, "(%s)(v%d >> ((int)v%d & %d));\n", ctype(E, t), a0, a1, t->bits - 1);
    break;
  case WF_OP_SELECT:
    if (E->aname && t->kind == WF_T_ARRAY) {
      int a2 = (int)in->args[2],
          same = E->aname[a1] == E->aname[a2] && E->adepth[a1] == E->adepth[a2];
      E->aname[in->res[0]] = same ? E->aname[a1] : -1;
      E->adepth[in->res[0]] = E->adepth[a1];
    }
    decl(E, in->res[0]);
    wf_sb_printf(b, "v%d ? v%d : v%d;\n", a0, a1, (int)in->args[2]);
    break;
  case WF_OP_CAST: emit_cast(E, in); break;
  case WF_OP_AGG:
    ind(E);
    wf_sb_printf(b, "%s v%d;\n", ctype(E, t), (int)in->res[0]);
    for (int i = 0; i < in->nargs; i++) {
      ind(E);
      wf_sb_printf(b, "v%d.f%d = v%d;\n", (int)in->res[0], i, (int)in->args[i]);
    }
    break;
  case WF_OP_EXTRACT:
    decl(E, in->res[0]);
    wf_sb_printf(b, "v%d.f%d;\n", a0, (int)in->imm);
    break;
  case WF_OP_INSERT:
    decl(E, in->res[0]);
    wf_sb_printf(b, "v%d;\n", a0);
    ind(E);
    wf_sb_printf(b, "v%d.f%d = v%d;\n", (int)in->res[0], (int)in->imm, a1);
    break;
  case WF_OP_EXTRACTD:
  case WF_OP_INSERTD: {
    /* a local array indexed directly (the components are one type, packed:
    ** see the static_assert on the struct's size); out of range (unchecked
    ** in release mode outside named locals) reads component 0 */
    char ix[96];
    snprintf(ix, sizeof ix, "(unsigned long long)(long long)v%d < %dull ? (long long)v%d : 0", a1,
             wf_t_arity(vt(E, a0)), a1);
    decl(E, in->res[0]);
    if (in->op == WF_OP_EXTRACTD) {
      wf_sb_printf(b, "(&v%d.f0)[%s];\n", a0, ix);
      break;
    }
    wf_sb_printf(b, "v%d;\n", a0);
    ind(E);
    wf_sb_printf(b, "(&v%d.f0)[%s] = v%d;\n", (int)in->res[0], ix, (int)in->args[2]);
    break;
  }
  case WF_OP_SHAPE:
    decl(E, in->res[0]);
    wf_sb_printf(b, "(int)v%d.shape[%d];\n", a0, (int)in->imm);
    break;
  case WF_OP_VIEW:
    check_index(E, in, in->args[0], in->args[1], 0);
    if (E->aname) {
      E->aname[in->res[0]] = E->aname[a0];
      E->adepth[in->res[0]] = (int8_t)(E->adepth[a0] + 1);
    }
    decl(E, in->res[0]);
    wf_sb_printf(b, "wf_view(v%d, (long long)v%d);\n", a0, a1);
    break;
  case WF_OP_LOAD: {
    const wf_type *at = vt(E, in->args[0]);
    if (in->nargs - 1 != at->ndim) {
      fail(E, in, "load with %d indices on a %d-D array", in->nargs - 1, at->ndim);
      break;
    }
    check_indices(E, in, in->nargs - 1);
    decl(E, in->res[0]);
    wf_sb_puts(b, "*");
    emit_addr(E, in, in->nargs - 1, t);
    wf_sb_puts(b, ";\n");
    break;
  }
  case WF_OP_STORE: {
    const wf_type *at = vt(E, in->args[0]);
    int nidx = in->nargs - 2;
    if (nidx != at->ndim) {
      fail(E, in, "store with %d indices on a %d-D array", nidx, at->ndim);
      break;
    }
    check_indices(E, in, nidx);
    ind(E);
    wf_sb_puts(b, "*");
    emit_addr(E, in, nidx, vt(E, in->args[in->nargs - 1]));
    wf_sb_printf(b, " = v%d;\n", (int)in->args[in->nargs - 1]);
    break;
  }
  case WF_OP_ATOMIC_ADD:
  case WF_OP_ATOMIC_MIN:
  case WF_OP_ATOMIC_MAX:
  case WF_OP_ATOMIC_EXCH:
  case WF_OP_ATOMIC_CAS:
  case WF_OP_ATOMIC_AND:
  case WF_OP_ATOMIC_OR:
  case WF_OP_ATOMIC_XOR: emit_atomic(E, in); break;
  case WF_OP_TID:
    decl(E, in->res[0]);
    /* axis 0 needs no modulo: wf_i < n = dim[0] * div[0] */
    if (in->imm == 0)
      wf_sb_printf(b, "(%s)(wf_i / wf_d.div[0]);\n", ctype(E, t));
    else
      wf_sb_printf(b, "(%s)((wf_i / wf_d.div[%d]) %% wf_d.dim[%d]);\n", ctype(E, t), (int)in->imm,
                   (int)in->imm);
    break;
  case WF_OP_RNG_INIT:
    decl(E, in->res[0]);
    wf_sb_printf(b, "wf_rng_init((unsigned int)v%d, (unsigned int)v%d);\n", a0, a1);
    break;
  case WF_OP_RANDF:
  case WF_OP_RANDI:
    ind(E);
    wf_sb_printf(b, "unsigned int v%d = v%d;\n", (int)in->res[1], a0);
    decl(E, in->res[0]);
    wf_sb_printf(b, "%s(&v%d);\n", in->op == WF_OP_RANDF ? "wf_randf" : "wf_randi",
                 (int)in->res[1]);
    break;
  case WF_OP_PRINT: emit_print(E, in); break;
  case WF_OP_TRAP:
    if (in->imm && !E->debug) break; /* a debug-only check */
    fail_or_trap(E, in, in->str ? in->str : "trap");
    break;
  case WF_OP_CHECK: check_range(E, in); break;
  case WF_OP_CALL:
    fail(E, in, "call to function %d was not inlined (run wf_ir_optimize first)", (int)in->imm);
    break;
  case WF_OP_NATIVE: emit_native(E, in); break;
  case WF_OP_IF: emit_if(E, in); break;
  case WF_OP_FOR: emit_for(E, in); break;
  case WF_OP_WHILE: emit_while(E, in); break;
  case WF_OP_YIELD:
    if (carry)
      emit_assign(E, targets, in->nargs, in->args, carry);
    else
      emit_assign(E, targets, in->nargs < ntargets ? in->nargs : ntargets, in->args, NULL);
    break;
  case WF_OP_COND:
    emit_assign(E, targets, in->nargs - 1 < ntargets ? in->nargs - 1 : ntargets, in->args + 1,
                NULL);
    ind(E);
    wf_sb_printf(b, "if (!v%d) break;\n", a0);
    break;
  case WF_OP_RET:
    if (in->nargs > 0) fail(E, in, "kernels return no values");
    if (in->next || in->parent != E->fn->body) {
      ind(E);
      wf_sb_puts(b, "continue;\n");
    }
    break;
  case WF_OP_BIT_COUNT: {
    /* the bits of the value's own width, as unsigned */
    const wf_type *at = vt(E, in->args[0]);
    decl(E, in->res[0]);
    wf_sb_printf(b, "%s((%s)(%s)v%d);\n", at->bits == 64 ? "__popcll" : "__popc",
                 at->bits == 64 ? "unsigned long long" : "unsigned", int_ctype(at->bits, 0), a0);
    break;
  }
  default:
    if (wf_opinfo_tab[in->op].ty == WF_TY_FLOAT && math_name(in->op)) {
      /* the scalar float functions (WF_MATHDEF rows; the verifier keeps
      ** their operands float) */
      emit_fmath(E, in);
      break;
    }
    fail(E, in, "op %s is not supported by the CUDA backend", wf_op_name(in->op));
    break;
  }
}

/* "weft_" + the name with non-identifier characters replaced: the prefix
** keeps kernels called `half` or `float2` clear of CUDA's own names. */
void wf_cuda_entry_name(const char *fname, char *buf, size_t n) {
  size_t k = 0;
  if (n == 0) return;
  for (const char *p = "weft_"; *p && k + 1 < n; p++)
    buf[k++] = *p;
  for (const char *s = fname ? fname : ""; *s && k + 1 < n; s++) {
    char c = *s;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    buf[k++] = ok ? c : '_';
  }
  buf[k] = 0;
}

/* Chunk name as Lua prints it ("@spec/x.lua" -> "spec/x.lua"). */
static const char *chunk_display(const char *chunk) {
  if (!chunk || !*chunk) return NULL;
  if (*chunk == '@' || *chunk == '=') return chunk + 1;
  return chunk;
}

/* Debug mode: the parameter names of kernel fn for messages. An adjoint
** kernel "adj_<k>" takes k's parameters then one adjoint per array
** parameter of k, named "adj_<name>" (kept in store, freed by the caller). */
static int kernel_names(emitter *E, const wf_func *fn, const char **out, char (*store)[72]) {
  const char *const *fw = E->names;
  int nfw = E->nnames;
  for (int i = 0; i < fn->nparams; i++)
    out[i] = i < nfw ? fw[i] : NULL;
  if (strncmp(fn->name, "adj_", 4) != 0) return fn->nparams;
  int p = wf_module_find(E->m, fn->name + 4);
  if (p < 0) return fn->nparams;
  const wf_func *pf = E->m->funcs[p];
  int k = pf->nparams;
  for (int i = 0; i < pf->nparams && k < fn->nparams && k < 64; i++) {
    if (vt(E, fn->params[i])->kind != WF_T_ARRAY) continue;
    snprintf(store[k], 72, "adj_%s", i < nfw && fw[i] ? fw[i] : "?");
    out[k] = store[k];
    k++;
  }
  return fn->nparams;
}

static void emit_kernel(emitter *E, wf_func *fn, const char *entry) {
  E->fn = fn;
  E->chunk = chunk_display(fn->chunk);
  E->last_line = -1;
  sbuf *b = &E->body;
  const char *const *saved_names = E->names;
  int saved_n = E->nnames;
  const char *pnames[64];
  char store[64][72];
  if (E->debug || E->checks) {
    E->aname = malloc(sizeof *E->aname * (size_t)(fn->nvals > 0 ? fn->nvals : 1));
    E->adepth = calloc((size_t)(fn->nvals > 0 ? fn->nvals : 1), sizeof *E->adepth);
    if (!E->aname || !E->adepth) {
      b->oom = 1;
      goto done;
    }
    for (int i = 0; i < fn->nvals; i++)
      E->aname[i] = -1;
    for (int i = 0; i < fn->nparams; i++)
      if (vt(E, fn->params[i])->kind == WF_T_ARRAY) E->aname[fn->params[i]] = (int16_t)i;
    if (fn->nparams <= 64) {
      E->nnames = kernel_names(E, fn, pnames, store);
      E->names = pnames;
    }
  }
  wf_sb_printf(b, "\nextern \"C\" __global__ void %s(wf_dims wf_d", entry);
  for (int i = 0; i < fn->nparams; i++)
    wf_sb_printf(b, ", %s v%d", ctype(E, vt(E, fn->params[i])), (int)fn->params[i]);
  /* debug: the error slot the host reads after the launch, last */
  wf_sb_puts(b, E->debug || E->checks ? ", wf_err *wf_e) {\n" : ") {\n");
  wf_sb_puts(
      b,
      "  for (long long wf_i = (long long)blockIdx.x * blockDim.x + threadIdx.x; wf_i < wf_d.n;\n"
      "       wf_i += (long long)blockDim.x * gridDim.x) {\n");
  /* debug: stop once any thread failed (as the CPU backend's threads do) */
  if (E->debug) wf_sb_puts(b, "    if (*(volatile int *)&wf_e->flag) return;\n");
  E->indent = 2;
  emit_block(E, fn->body, NULL, 0, NULL);
  wf_sb_puts(b, "  }\n}\n");
done:
  free(E->aname);
  free(E->adepth);
  E->aname = NULL;
  E->adepth = NULL;
  E->names = saved_names;
  E->nnames = saved_n;
}

/* ---- preludes ----------------------------------------------------------- */
/* The helpers a module needs come from src/cuda/prelude.cuh (embedded at
** build time as wf_cuda_prelude; its header comment gives the format),
** chosen by the names the code uses: fewer lines for NVRTC to parse, a
** smaller cold compile. Device pieces are skipped under WF_HOST_SHIM:
** tests/cuda/shim.h defines them for g++. */
#include "prelude_cuh.h"
#include "query_h.h"
#include "geomfn_h.h"
#include "hashgrid_h.h"
#include "volume_h.h"

typedef enum piece_kind { PIECE_DEVICE, PIECE_HALF, PIECE_PORTABLE, PIECE_FILE } piece_kind;

typedef struct piece {
  piece_kind kind;
  const char *names; /* '|'-separated, nnames bytes; 0 bytes = always */
  size_t nnames;
  const char *text; /* the lines after the marker, up to the next one */
  size_t len;
} piece;

#define MARK "//@"

/* The start of the next marker line at or after p (p starts a line), or
** the end of the text. */
static const char *next_mark(const char *p) {
  if (strncmp(p, MARK, sizeof MARK - 1) == 0) return p;
  const char *q = strstr(p, "\n" MARK);
  return q ? q + 1 : p + strlen(p);
}

/* The length of the word at w (up to a space or the end of the line). */
static size_t word_len(const char *w) {
  return strcspn(w, " \n");
}

/* Parses the piece whose marker is the next at or after *at and moves *at
** to the marker after it: 1, or 0 at the end of the text, or -1 for a
** marker this emitter does not know. */
static int read_piece(const char **at, piece *pc) {
  static const char *const kinds[] = {"device", "half", "portable"};
  const char *m = next_mark(*at);
  if (!*m) return 0;
  const char *eol = strchr(m, '\n');
  if (!eol) eol = m + strlen(m);
  const char *w = m + sizeof MARK - 1;
  while (*w == ' ')
    w++;
  size_t n = word_len(w);
  int k = -1;
  if (n == 4 && strncmp(w, "file", 4) == 0) {
    k = PIECE_FILE;
    w += n;
  } else if (n == 5 && strncmp(w, "piece", 5) == 0) {
    for (w += n; *w == ' '; w++) {
    }
    n = word_len(w);
    for (int i = 0; i < 3; i++)
      if (strlen(kinds[i]) == n && strncmp(kinds[i], w, n) == 0) k = i;
    w += n;
  }
  if (k < 0) return -1;
  while (*w == ' ')
    w++;
  pc->kind = (piece_kind)k;
  pc->names = w;
  pc->nnames = (size_t)(eol - w);
  pc->text = *eol ? eol + 1 : eol;
  *at = next_mark(pc->text);
  pc->len = (size_t)(*at - pc->text);
  return 1;
}

/* Does code use any of the piece's names? */
static int used(const char *code, const piece *pc) {
  if (pc->nnames == 0) return 1;
  char name[64];
  for (const char *t = pc->names, *end = t + pc->nnames; t < end;) {
    size_t n = strcspn(t, "|");
    if (n > (size_t)(end - t)) n = (size_t)(end - t);
    snprintf(name, sizeof name, "%.*s", (int)n, t);
    if (n && strstr(code, name)) return 1;
    t += n + 1;
  }
  return 0;
}

/* The preludes the code needs, device pieces grouped under one guard.
** -1 if the embedded prelude has a marker this emitter does not know. */
static int put_preludes(sbuf *all, const char *code, int uses_half) {
  int open = 0, r;
  piece pc;
  for (const char *at = wf_cuda_prelude; (r = read_piece(&at, &pc)) > 0;) {
    if (pc.kind == PIECE_FILE || (pc.kind == PIECE_HALF && !uses_half) || !used(code, &pc))
      continue;
    int device = pc.kind != PIECE_PORTABLE;
    if (device && !open) wf_sb_puts(all, "#ifndef WF_HOST_SHIM\n");
    if (!device && open) wf_sb_puts(all, "#endif\n");
    open = device;
    wf_sb_putn(all, pc.text, pc.len);
  }
  if (open) wf_sb_puts(all, "#endif\n");
  /* the geometry queries, when a native builtin is called */
  if (strstr(code, "wf_nat_")) {
    wf_sb_puts(all, wf_geom_geomfn_src); /* what the next two share */
    wf_sb_puts(all, wf_geom_volume_src); /* query.h includes these two */
    wf_sb_puts(all, wf_geom_hashgrid_src);
    wf_sb_puts(all, wf_geom_query_src);
  }
  return r;
}

int wf_cuda_emit(wf_module *m, wf_cuda_src *out, char *err, size_t errsize) {
  return wf_cuda_emit_opts(m, NULL, out, err, errsize);
}

int wf_cuda_emit_opts(wf_module *m, const wf_cuda_opts *o, wf_cuda_src *out, char *err,
                      size_t errsize) {
  memset(out, 0, sizeof *out);
  emitter E;
  memset(&E, 0, sizeof E);
  E.m = m;
  if (o) {
    E.debug = o->debug;
    E.checks = o->checks;
    E.nnames = o->nnames;
    E.names = o->names;
  }
  E.err = err;
  E.errsize = errsize;
  if (errsize) err[0] = 0;
  int nk = 0;
  for (int i = 0; i < m->nfuncs; i++)
    nk += m->funcs[i]->is_kernel != 0;
  out->entries = calloc((size_t)(nk ? nk : 1), sizeof(char *));
  if (!out->entries) {
    snprintf(err, errsize, "cuda: out of memory");
    return -1;
  }
  for (int i = 0; i < m->nfuncs && !E.failed; i++) {
    wf_func *fn = m->funcs[i];
    if (!fn->is_kernel) continue;
    char entry[128];
    wf_cuda_entry_name(fn->name, entry, sizeof entry);
    for (int k = 0; k < out->nentries; k++)
      if (strcmp(out->entries[k], entry) == 0) {
        size_t l = strlen(entry);
        snprintf(entry + l, sizeof entry - l, "_%d", i);
      }
    out->entries[out->nentries] = malloc(strlen(entry) + 1);
    if (!out->entries[out->nentries]) {
      E.body.oom = 1;
      break;
    }
    strcpy(out->entries[out->nentries++], entry);
    emit_kernel(&E, fn, entry);
  }
  sbuf all = {0};
  wf_sb_puts(&all, "/* generated by weft: CUDA C for NVRTC */\n");
  if (put_preludes(&all, E.body.p ? E.body.p : "", E.uses_half) < 0 && !E.failed) {
    snprintf(err, errsize, "cuda: src/cuda/prelude.cuh has an unknown //@ marker");
    E.failed = 1;
  }
  if (E.types.p) wf_sb_puts(&all, E.types.p);
  if (E.body.p) wf_sb_puts(&all, E.body.p);
  int oom = all.oom || E.types.oom || E.body.oom;
  free(E.types.p);
  free(E.body.p);
  for (int i = 0; i < E.naggs; i++)
    free(E.aggs[i]);
  free(E.aggs);
  if (E.failed || oom) {
    if (oom && !E.failed) snprintf(err, errsize, "cuda: out of memory emitting CUDA C");
    free(all.p);
    wf_cuda_src_free(out);
    return -1;
  }
  out->text = all.p;
  out->len = all.len;
  out->uses_half = E.uses_half;
  return 0;
}

void wf_cuda_src_free(wf_cuda_src *s) {
  if (!s) return;
  for (int i = 0; i < s->nentries; i++)
    free(s->entries[i]);
  free(s->entries);
  free(s->text);
  memset(s, 0, sizeof *s);
}
