/*
** print.c -- the IR text form (writer). The grammar is in parse.c.
**
** Values are renumbered %0, %1, ... in textual order (function params, then
** each instruction's results before the params of its blocks), so a printed
** module parses back and prints identically, and expected texts in tests do
** not depend on how a pass allocated values. Message helpers
** (wf_ir_snprint_inst) print raw value indices instead.
*/
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdarg.h>

#include "ir/ir.h"

#include "util/sbuf.h"
typedef wf_sbuf sbuf;

/* Printing context: the numbering (NULL: raw indices). */
typedef struct pctx {
  sbuf *s;
  const wf_func *fn;
  int32_t *num;
  int32_t next;
} pctx;

static void number_block(pctx *c, const wf_block *bl);

static void number_val(pctx *c, wf_val v) {
  if (v >= 0 && v < c->fn->nvals && c->num[v] < 0) c->num[v] = c->next++;
}

/* Assigns print numbers in the order the printer emits definitions. */
static void number_block(pctx *c, const wf_block *bl) {
  if (!bl) return;
  for (int i = 0; i < bl->nparams; i++)
    number_val(c, bl->params[i]);
  for (const wf_inst *in = bl->first; in; in = in->next) {
    for (int k = 0; k < in->nres; k++)
      number_val(c, in->res[k]);
    for (int k = 0; k < in->nblocks; k++)
      number_block(c, in->blocks[k]);
  }
}

static void put_val(pctx *c, wf_val v) {
  if (v < 0 || v >= c->fn->nvals)
    wf_sb_printf(c->s, "%%!%d", (int)v);
  else if (!c->num)
    wf_sb_printf(c->s, "%%%d", (int)v);
  else if (c->num[v] < 0)
    wf_sb_printf(c->s, "%%!%d", (int)v); /* defined nowhere */
  else
    wf_sb_printf(c->s, "%%%d", (int)c->num[v]);
}

static void put_type(sbuf *s, const wf_type *t) {
  char buf[320];
  wf_t_snprint(t, buf, sizeof buf);
  wf_sb_puts(s, buf);
}

static void put_typed(pctx *c, wf_val v) {
  put_val(c, v);
  wf_sb_puts(c->s, ":");
  put_type(c->s, v >= 0 && v < c->fn->nvals ? c->fn->vals[v].type : NULL);
}

/* Shortest %.*g text that reads back as the same double; always has a '.',
** an exponent, or is inf/nan, so it reads as a float literal. */
static void put_double(sbuf *s, double d) {
  char buf[64];
  if (isnan(d)) {
    wf_sb_puts(s, "nan");
    return;
  }
  if (isinf(d)) {
    wf_sb_puts(s, d < 0 ? "-inf" : "inf");
    return;
  }
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, sizeof buf, "%.*g", p, d);
    if (strtod(buf, NULL) == d) break;
  }
  if (!strpbrk(buf, ".e")) strcat(buf, ".0");
  wf_sb_puts(s, buf);
}

/* C-style quoted string; non-printable bytes as 3-digit octal escapes. */
static void put_str(sbuf *s, const char *t) {
  wf_sb_puts(s, "\"");
  for (const unsigned char *p = (const unsigned char *)(t ? t : ""); *p; p++) {
    switch (*p) {
    case '\\': wf_sb_puts(s, "\\\\"); break;
    case '"': wf_sb_puts(s, "\\\""); break;
    case '\n': wf_sb_puts(s, "\\n"); break;
    case '\t': wf_sb_puts(s, "\\t"); break;
    case '\r': wf_sb_puts(s, "\\r"); break;
    default:
      if (*p < 32 || *p >= 127)
        wf_sb_printf(s, "\\%03o", *p);
      else
        wf_sb_putn(s, (const char *)p, 1);
    }
  }
  wf_sb_puts(s, "\"");
}

/* A function or struct name: bare when it is an identifier, else quoted. */
static void put_name(sbuf *s, const char *nm) {
  int bare = nm && *nm;
  for (const char *p = nm; bare && *p; p++)
    bare = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '_' || *p == '.';
  if (bare)
    wf_sb_puts(s, nm);
  else
    put_str(s, nm);
}

/* Ops whose imm is part of the text (trailing integer operand). */
static int uses_imm(wf_op op) {
  return op == WF_OP_EXTRACT || op == WF_OP_INSERT || op == WF_OP_SHAPE || op == WF_OP_TID ||
         op == WF_OP_PARAM;
}

static void put_args(pctx *c, const wf_inst *in, int from, int to) {
  for (int k = from; k < to; k++) {
    if (k > from) wf_sb_puts(c->s, ", ");
    put_val(c, in->args[k]);
  }
}

static void put_const(pctx *c, const wf_inst *in) {
  const wf_type *t = in->nres > 0 && in->res[0] >= 0 && in->res[0] < c->fn->nvals
                         ? c->fn->vals[in->res[0]].type
                         : NULL;
  if (t && t->kind == WF_T_FLOAT)
    put_double(c->s, in->fimm);
  else if (t && t->kind == WF_T_BOOL)
    wf_sb_puts(c->s, in->imm ? "true" : "false");
  else
    wf_sb_printf(c->s, "%lld", (long long)in->imm);
}

/* The operand part of an instruction line (after the op name). */
static void put_operands(pctx *c, const wf_inst *in) {
  sbuf *s = c->s;
  switch (in->op) {
  case WF_OP_CONST:
    wf_sb_puts(s, " ");
    put_const(c, in);
    return;
  case WF_OP_CALL: {
    const wf_module *m = c->fn->mod;
    wf_sb_puts(s, " @");
    if (m && in->imm >= 0 && in->imm < m->nfuncs)
      put_name(s, m->funcs[in->imm]->name);
    else
      wf_sb_printf(s, "#%lld", (long long)in->imm);
    wf_sb_puts(s, "(");
    put_args(c, in, 0, in->nargs);
    wf_sb_puts(s, ")");
    return;
  }
  case WF_OP_PRINT:
  case WF_OP_TRAP:
    wf_sb_puts(s, " ");
    put_str(s, in->str);
    if (in->nargs) wf_sb_puts(s, ", ");
    put_args(c, in, 0, in->nargs);
    if (in->op == WF_OP_TRAP && in->imm) wf_sb_puts(s, " debug");
    return;
  case WF_OP_FOR:
  case WF_OP_WHILE: {
    int fixed = in->op == WF_OP_FOR ? (in->nargs < 3 ? in->nargs : 3) : 0;
    if (fixed) wf_sb_puts(s, " ");
    put_args(c, in, 0, fixed);
    if (in->nargs > fixed) {
      wf_sb_puts(s, " iter(");
      put_args(c, in, fixed, in->nargs);
      wf_sb_puts(s, ")");
    }
    return;
  }
  default:
    if (in->nargs) wf_sb_puts(s, " ");
    put_args(c, in, 0, in->nargs);
    if (uses_imm(in->op) || in->imm != 0)
      wf_sb_printf(s, "%s%lld", in->nargs ? ", " : " ", (long long)in->imm);
    return;
  }
}

/* One instruction line without nested blocks (and without newline). */
static void put_inst_head(pctx *c, const wf_inst *in) {
  for (int k = 0; k < in->nres; k++) {
    if (k) wf_sb_puts(c->s, ", ");
    put_typed(c, in->res[k]);
  }
  if (in->nres) wf_sb_puts(c->s, " = ");
  wf_sb_puts(c->s, (unsigned)in->op < WF_OP__COUNT ? wf_op_name(in->op) : "?");
  put_operands(c, in);
  if (in->loc.line || in->loc.col)
    wf_sb_printf(c->s, " !%d:%d", (int)in->loc.line, (int)in->loc.col);
}

static void indent(sbuf *s, int depth) {
  for (int i = 0; i < depth; i++)
    wf_sb_puts(s, "  ");
}

static void put_block(pctx *c, const wf_block *bl, int depth);

static void put_inst(pctx *c, const wf_inst *in, int depth) {
  indent(c->s, depth);
  put_inst_head(c, in);
  for (int k = 0; k < in->nblocks; k++) {
    if (k) wf_sb_puts(c->s, in->op == WF_OP_WHILE ? " do" : " else");
    wf_sb_puts(c->s, " {\n");
    put_block(c, in->blocks[k], depth);
    indent(c->s, depth);
    wf_sb_puts(c->s, "}");
  }
  wf_sb_puts(c->s, "\n");
}

/* Block params line (at the owner's depth), then the body one level in. */
static void put_block(pctx *c, const wf_block *bl, int depth) {
  if (!bl) return;
  if (bl->nparams) {
    indent(c->s, depth);
    wf_sb_puts(c->s, "^(");
    for (int i = 0; i < bl->nparams; i++) {
      if (i) wf_sb_puts(c->s, ", ");
      put_typed(c, bl->params[i]);
    }
    wf_sb_puts(c->s, "):\n");
  }
  for (const wf_inst *in = bl->first; in; in = in->next)
    put_inst(c, in, depth + 1);
}

static void put_func(sbuf *s, const wf_func *fn) {
  pctx c = {s, fn, NULL, 0};
  c.num = malloc(sizeof(int32_t) * (size_t)(fn->nvals > 0 ? fn->nvals : 1));
  if (!c.num) {
    s->oom = 1;
    return;
  }
  for (int i = 0; i < fn->nvals; i++)
    c.num[i] = -1;
  for (int i = 0; i < fn->nparams; i++)
    number_val(&c, fn->params[i]);
  number_block(&c, fn->body);
  wf_sb_puts(s, fn->is_kernel ? "kernel @" : "func @");
  put_name(s, fn->name);
  wf_sb_puts(s, "(");
  for (int i = 0; i < fn->nparams; i++) {
    if (i) wf_sb_puts(s, ", ");
    put_typed(&c, fn->params[i]);
  }
  wf_sb_puts(s, ")");
  for (int i = 0; i < fn->nret; i++) {
    wf_sb_puts(s, i ? ", " : " -> ");
    put_type(s, fn->rettypes[i]);
  }
  if (fn->chunk) {
    wf_sb_puts(s, " chunk ");
    put_str(s, fn->chunk);
  }
  wf_sb_puts(s, " {\n");
  put_block(&c, fn->body, 0);
  wf_sb_puts(s, "}\n");
  free(c.num);
}

/* ---- struct declarations: every struct reachable from the module ---- */
typedef struct tset {
  const wf_type **v;
  int n, cap;
} tset;

static void collect_type(sbuf *s, tset *ts, const wf_type *t);

/* Emits the declaration of t after those of the structs its fields use. */
static void decl_struct(sbuf *s, tset *ts, const wf_type *t) {
  for (int i = 0; i < ts->n; i++)
    if (ts->v[i] == t) return;
  if (ts->n == ts->cap) {
    int nc = ts->cap ? ts->cap * 2 : 8;
    const wf_type **nv = realloc(ts->v, (size_t)nc * sizeof(*nv));
    if (!nv) {
      s->oom = 1;
      return;
    }
    ts->v = nv;
    ts->cap = nc;
  }
  ts->v[ts->n++] = t;
  for (int i = 0; i < t->nfields; i++)
    collect_type(s, ts, t->fields[i].type);
  wf_sb_puts(s, "struct ");
  put_name(s, t->name);
  wf_sb_puts(s, " {");
  for (int i = 0; i < t->nfields; i++) {
    wf_sb_puts(s, i ? ", " : " ");
    put_name(s, t->fields[i].name);
    wf_sb_puts(s, ": ");
    put_type(s, t->fields[i].type);
    wf_sb_printf(s, " @%u", (unsigned)t->fields[i].offset);
  }
  wf_sb_puts(s, t->nfields ? " }\n" : "}\n");
}

static void collect_type(sbuf *s, tset *ts, const wf_type *t) {
  while (t && t->kind == WF_T_ARRAY)
    t = t->elem;
  if (t && t->kind == WF_T_STRUCT) decl_struct(s, ts, t);
}

static void collect_val(sbuf *s, tset *ts, const wf_func *fn, wf_val v) {
  if (v >= 0 && v < fn->nvals) collect_type(s, ts, fn->vals[v].type);
}

/* Only the values the text defines: a value a pass dropped keeps its slot
** in fn->vals, and its struct must not be declared (the parsed text would
** not declare it again, breaking the round trip). */
static void collect_block(sbuf *s, tset *ts, const wf_func *fn, const wf_block *bl) {
  if (!bl) return;
  for (int i = 0; i < bl->nparams; i++)
    collect_val(s, ts, fn, bl->params[i]);
  for (const wf_inst *in = bl->first; in; in = in->next) {
    for (int k = 0; k < in->nres; k++)
      collect_val(s, ts, fn, in->res[k]);
    for (int k = 0; k < in->nblocks; k++)
      collect_block(s, ts, fn, in->blocks[k]);
  }
}

static void collect_structs(sbuf *s, const wf_module *m) {
  tset ts = {0};
  for (int f = 0; f < m->nfuncs; f++) {
    const wf_func *fn = m->funcs[f];
    for (int i = 0; i < fn->nparams; i++)
      collect_val(s, &ts, fn, fn->params[i]);
    collect_block(s, &ts, fn, fn->body);
    for (int i = 0; i < fn->nret; i++)
      collect_type(s, &ts, fn->rettypes[i]);
  }
  if (ts.n) wf_sb_puts(s, "\n");
  free(ts.v);
}

static void put_module(sbuf *s, const wf_module *m) {
  collect_structs(s, m);
  for (int f = 0; f < m->nfuncs; f++) {
    if (f) wf_sb_puts(s, "\n");
    put_func(s, m->funcs[f]);
  }
}

char *wf_ir_to_string(const wf_module *m) {
  sbuf s = {0};
  put_module(&s, m);
  if (!s.p && !s.oom) wf_sb_puts(&s, "");
  if (s.oom) {
    free(s.p);
    return NULL;
  }
  return s.p;
}

void wf_ir_print(const wf_module *m, FILE *f) {
  char *t = wf_ir_to_string(m);
  if (t) fputs(t, f);
  free(t);
}

void wf_ir_print_func(const wf_func *fn, FILE *f) {
  sbuf s = {0};
  put_func(&s, fn);
  if (s.p) fputs(s.p, f);
  free(s.p);
}

int wf_ir_snprint_inst(const wf_func *fn, const wf_inst *in, char *buf, size_t n) {
  sbuf s = {0};
  pctx c = {&s, fn, NULL, 0};
  put_inst_head(&c, in);
  if (in->nblocks) wf_sb_puts(&s, " {...}");
  int len = (int)s.len;
  if (n) snprintf(buf, n, "%s", s.p ? s.p : "");
  free(s.p);
  return len;
}
