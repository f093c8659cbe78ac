/*
** parse.c -- the IR text form (reader). The writer is print.c.
**
** Grammar (whitespace is free except that an instruction's operands, its
** location and the `{` of its first block stay on the op's line; `;` starts
** a comment that runs to the end of the line):
**
**   module  := { struct | func }
**   struct  := 'struct' NAME '{' [ field { ',' field } ] '}'
**   field   := NAME ':' type '@' INT                      byte offset
**   func    := ('kernel' | 'func') '@' NAME '(' [ vdef { ',' vdef } ] ')'
**              [ '->' type { ',' type } ] [ 'chunk' STRING ] '{' body '}'
**   body    := [ '^(' [ vdef { ',' vdef } ] ')' ':' ] { inst }
**   inst    := [ vdef { ',' vdef } '=' ] OP operands [ '!' INT ':' INT ]
**              [ '{' body '}' { ('else' | 'do') '{' body '}' } ]
**   vdef    := '%' ID ':' type
**   operands:= 'const' LIT                     LIT: int, true/false, float
**                                             (%.17g, hex, inf, -inf, nan)
**            | 'call' '@' NAME '(' [ %v { ',' %v } ] ')'
**            | ('print' | 'trap') STRING { ',' %v }
**            | 'for' %lo ',' %hi ',' %step [ 'iter' '(' %v { ',' %v } ')' ]
**            | 'while' [ 'iter' '(' %v { ',' %v } ')' ]
**            | [ %v { ',' %v } ] [ ',' INT ]  trailing INT = imm
**                                             (extract/insert index, shape
**                                             dim, tid dimension)
**   type    := bool | void | rng | i8..i64 | u8..u64 | f16 | f32 | f64
**            | vecN<s> | matRC<s> | quat<s> | transform<s>   (s = suffix:
**              h f d b ub s us i ui l ul, e.g. vec3f mat33d quatf vec2ub)
**            | 'vec' N '<' type '>' | 'mat' '<' R ',' C ',' type '>'
**            | 'quat' '<' type '>' | 'transform' '<' type '>'
**            | 'array' '<' type ',' N '>' | 'struct.' NAME
**   NAME    := [A-Za-z0-9_.]+ | STRING          ID := [A-Za-z0-9_.]+
**
** Value names are local to a function and must be unique in it; a value must
** be defined (textually) before its uses. Callees may be defined later.
** Errors are "line:col: message".
*/
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <math.h>

#include "ir/ir.h"

typedef struct pname {
  const char *s;
  size_t n;
  wf_val v;
} pname;

typedef struct fixup {
  wf_inst *in;
  char *name;
  const char *pos;
} fixup;

typedef struct pstate {
  const char *src, *p;
  wf_module *m;
  wf_types *T;
  wf_func *fn;
  pname *names; /* values of the current function */
  int nnames, capnames;
  fixup *fix; /* calls to resolve at the end */
  int nfix, capfix;
  const wf_type **structs; /* declared in this text */
  int nstructs, capstructs;
  char *err;
  size_t errsize;
  int failed;
} pstate;

/* Records the first error as "line:col: message" at position `at`. */
__attribute__((format(printf, 3, 4))) static int perr(pstate *P, const char *at, const char *fmt,
                                                      ...) {
  if (P->failed) return 0;
  P->failed = 1;
  int line = 1, col = 1;
  for (const char *q = P->src; q < at && *q; q++) {
    if (*q == '\n')
      line++, col = 1;
    else
      col++;
  }
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (P->errsize) snprintf(P->err, P->errsize, "%d:%d: %s", line, col, msg);
  return 0;
}

/* Grows *arr (elements of size sz) so that one more fits. */
static int grow(void **arr, int *cap, int n, size_t sz) {
  if (n < *cap) return 1;
  int nc = *cap ? *cap * 2 : 16;
  void *na = realloc(*arr, (size_t)nc * sz);
  if (!na) return 0;
  *arr = na;
  *cap = nc;
  return 1;
}

/* ---- lexical helpers ---- */
static void skip_ws(pstate *P) {
  for (;;) {
    while (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r')
      P->p++;
    if (*P->p != ';') return;
    while (*P->p && *P->p != '\n')
      P->p++;
  }
}

/* Skips blanks on the current line only (operands end at the newline). */
static void skip_hs(pstate *P) {
  while (*P->p == ' ' || *P->p == '\t' || *P->p == '\r')
    P->p++;
  if (*P->p == ';')
    while (*P->p && *P->p != '\n')
      P->p++;
}

static int is_idch(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}

static int accept(pstate *P, char c) {
  skip_ws(P);
  if (*P->p != c) return 0;
  P->p++;
  return 1;
}

static int expect(pstate *P, char c) {
  if (accept(P, c)) return 1;
  if (*P->p) return perr(P, P->p, "expected '%c'", c);
  return perr(P, P->p, "expected '%c' before end of input", c);
}

/* An identifier at p (no skipping); returns its length, 0 if none. */
static size_t ident_len(const char *p) {
  size_t n = 0;
  while (is_idch(p[n]))
    n++;
  return n;
}

/* Accepts keyword kw when it is a whole identifier at the cursor. */
static int accept_kw(pstate *P, const char *kw) {
  skip_ws(P);
  size_t n = ident_len(P->p);
  if (n != strlen(kw) || memcmp(P->p, kw, n) != 0) return 0;
  P->p += n;
  return 1;
}

/* Like accept_kw, but only at the cursor (stays on the current line). */
static int accept_word(pstate *P, const char *kw) {
  size_t n = ident_len(P->p);
  if (n != strlen(kw) || memcmp(P->p, kw, n) != 0) return 0;
  P->p += n;
  return 1;
}

static int parse_int(pstate *P, long long *out) {
  skip_ws(P);
  char *end;
  errno = 0;
  long long v = strtoll(P->p, &end, 10);
  if (end == P->p || errno) return perr(P, P->p, "expected an integer");
  *out = v;
  P->p = end;
  return 1;
}

/* A parsed size as an int; out of int's range gives -1, which every type
** constructor rejects (a plain cast would wrap 2^32 + 1 to 1). */
static int size_arg(long long v) {
  return v < INT_MIN || v > INT_MAX ? -1 : (int)v;
}

/* A C-escaped quoted string, decoded into a malloc'd buffer. */
static char *parse_string(pstate *P) {
  skip_ws(P);
  if (*P->p != '"') {
    perr(P, P->p, "expected a string");
    return NULL;
  }
  const char *start = P->p++;
  char *out = malloc(strlen(P->p) + 1);
  size_t n = 0;
  if (!out) {
    perr(P, start, "out of memory");
    return NULL;
  }
  while (*P->p != '"') {
    char c = *P->p;
    if (!c || c == '\n') {
      free(out);
      perr(P, start, "unterminated string");
      return NULL;
    }
    P->p++;
    if (c == '\\') {
      c = *P->p++;
      switch (c) {
      case 'n': c = '\n'; break;
      case 't': c = '\t'; break;
      case 'r': c = '\r'; break;
      case '\\':
      case '"':
      case '\'': break;
      default:
        if (c >= '0' && c <= '7') {
          int v = c - '0';
          for (int k = 0; k < 2 && *P->p >= '0' && *P->p <= '7'; k++)
            v = v * 8 + (*P->p++ - '0');
          c = (char)v;
        } else {
          free(out);
          perr(P, P->p - 2, "bad escape '\\%c' in string", c ? c : '0');
          return NULL;
        }
      }
    }
    out[n++] = c;
  }
  P->p++;
  out[n] = 0;
  return out;
}

/* A function/struct/field name: identifier or quoted string (malloc'd). */
static char *parse_name(pstate *P, const char *what) {
  skip_ws(P);
  if (*P->p == '"') return parse_string(P);
  size_t n = ident_len(P->p);
  if (!n) {
    perr(P, P->p, "expected %s", what);
    return NULL;
  }
  char *s = malloc(n + 1);
  if (!s) {
    perr(P, P->p, "out of memory");
    return NULL;
  }
  memcpy(s, P->p, n);
  s[n] = 0;
  P->p += n;
  return s;
}

/* ---- types ---- */
static const wf_type *parse_type(pstate *P);

/* Scalar type from a Warp suffix (f, d, h, b, ub, s, us, i, ui, l, ul). */
static const wf_type *suffix_scalar(wf_types *T, const char *s, size_t n) {
  static const struct {
    const char *sx;
    int kind, bits, sgn;
  } tab[] = {{"h", 1, 16, 0},  {"f", 1, 32, 0}, {"d", 1, 64, 0},  {"b", 0, 8, 1},
             {"ub", 0, 8, 0},  {"s", 0, 16, 1}, {"us", 0, 16, 0}, {"i", 0, 32, 1},
             {"ui", 0, 32, 0}, {"l", 0, 64, 1}, {"ul", 0, 64, 0}};
  for (size_t k = 0; k < sizeof tab / sizeof tab[0]; k++)
    if (strlen(tab[k].sx) == n && memcmp(tab[k].sx, s, n) == 0)
      return tab[k].kind ? wf_t_float(T, tab[k].bits) : wf_t_int(T, tab[k].bits, tab[k].sgn);
  return NULL;
}

/* '<' type '>' after a generic vec/quat/transform name. */
static const wf_type *angle_scalar(pstate *P) {
  if (!expect(P, '<')) return NULL;
  const wf_type *s = parse_type(P);
  if (!s || !expect(P, '>')) return NULL;
  return s;
}

static const wf_type *lookup_struct(pstate *P, const char *name) {
  for (int i = P->nstructs - 1; i >= 0; i--)
    if (strcmp(P->structs[i]->name, name) == 0) return P->structs[i];
  return wf_t_find_struct(P->T, name);
}

/* Types spelled by one identifier, possibly followed by <...>. */
static const wf_type *parse_type(pstate *P) {
  skip_ws(P);
  const char *at = P->p;
  wf_types *T = P->T;
  size_t n = ident_len(at);
  char id[128];
  if (!n || n >= sizeof id) {
    perr(P, at, "expected a type");
    return NULL;
  }
  memcpy(id, at, n);
  id[n] = 0;
  P->p += n;
  const wf_type *t = NULL;
  int a = 0, used = 0;
  if (!strcmp(id, "bool")) return wf_t_bool(T);
  if (!strcmp(id, "void")) return wf_t_void(T);
  if (!strcmp(id, "rng")) return wf_t_rng(T);
  if (!strncmp(id, "struct.", 7)) {
    t = lookup_struct(P, id + 7);
    if (!t) perr(P, at, "unknown struct '%s'", id + 7);
    return t;
  }
  if ((id[0] == 'i' || id[0] == 'u') && sscanf(id + 1, "%d%n", &a, &used) == 1 && !id[1 + used])
    t = wf_t_int(T, a, id[0] == 'i');
  else if (id[0] == 'f' && sscanf(id + 1, "%d%n", &a, &used) == 1 && !id[1 + used])
    t = wf_t_float(T, a);
  else if (!strcmp(id, "array")) {
    long long nd;
    if (!expect(P, '<')) return NULL;
    const wf_type *e = parse_type(P);
    if (!e || !expect(P, ',') || !parse_int(P, &nd) || !expect(P, '>')) return NULL;
    t = wf_t_array(T, e, size_arg(nd));
  } else if (!strncmp(id, "vec", 3) && sscanf(id + 3, "%d%n", &a, &used) == 1 && id[3] != '-') {
    const char *sx = id + 3 + used;
    const wf_type *s = *sx ? suffix_scalar(T, sx, strlen(sx)) : angle_scalar(P);
    if (s) t = wf_t_vec(T, a, s);
  } else if (!strcmp(id, "mat")) {
    long long r, c;
    if (!expect(P, '<') || !parse_int(P, &r) || !expect(P, ',') || !parse_int(P, &c) ||
        !expect(P, ','))
      return NULL;
    const wf_type *s = parse_type(P);
    if (!s || !expect(P, '>')) return NULL;
    t = wf_t_mat(T, size_arg(r), size_arg(c), s);
  } else if (!strncmp(id, "mat", 3) && id[3] >= '1' && id[3] <= '9' && id[4] >= '1' &&
             id[4] <= '9') {
    const wf_type *s = suffix_scalar(T, id + 5, strlen(id + 5));
    if (s) t = wf_t_mat(T, id[3] - '0', id[4] - '0', s);
  } else if (!strncmp(id, "quat", 4)) {
    const wf_type *s = id[4] ? suffix_scalar(T, id + 4, strlen(id + 4)) : angle_scalar(P);
    if (s) t = wf_t_quat(T, s);
  } else if (!strncmp(id, "transform", 9)) {
    const wf_type *s = id[9] ? suffix_scalar(T, id + 9, strlen(id + 9)) : angle_scalar(P);
    if (s) t = wf_t_transform(T, s);
  }
  if (!t) perr(P, at, "unknown type '%s'", id);
  return t;
}

/* ---- values ---- */
static int bind(pstate *P, const char *s, size_t n, wf_val v) {
  for (int i = 0; i < P->nnames; i++)
    if (P->names[i].n == n && memcmp(P->names[i].s, s, n) == 0)
      return perr(P, s - 1, "redefinition of %%%.*s", (int)n, s);
  if (!grow((void **)&P->names, &P->capnames, P->nnames, sizeof(pname)))
    return perr(P, s, "out of memory");
  P->names[P->nnames++] = (pname){s, n, v};
  return 1;
}

/* '%' ID ':' type -- returns the name (pointing into the source). */
static int parse_vdef(pstate *P, const char **name, size_t *len, const wf_type **t) {
  skip_ws(P);
  if (*P->p != '%') return perr(P, P->p, "expected a value name (%%...)");
  *name = ++P->p;
  *len = ident_len(P->p);
  if (!*len) return perr(P, P->p, "expected a value name after '%%'");
  P->p += *len;
  if (!expect(P, ':')) return 0;
  *t = parse_type(P);
  return *t != NULL;
}

/* A use: '%' ID naming an earlier definition. */
static int parse_use(pstate *P, wf_val *v) {
  skip_ws(P);
  if (*P->p != '%') return perr(P, P->p, "expected a value (%%...)");
  const char *s = ++P->p;
  size_t n = ident_len(s);
  if (!n) return perr(P, s, "expected a value name after '%%'");
  P->p += n;
  for (int i = P->nnames - 1; i >= 0; i--)
    if (P->names[i].n == n && memcmp(P->names[i].s, s, n) == 0) {
      *v = P->names[i].v;
      return 1;
    }
  return perr(P, s - 1, "undefined value %%%.*s", (int)n, s);
}

/* Growable list of wf_val used while reading operands. */
typedef struct vlist {
  wf_val *v;
  int n, cap;
} vlist;

static int vpush(pstate *P, vlist *l, wf_val v) {
  if (!grow((void **)&l->v, &l->cap, l->n, sizeof(wf_val))) return perr(P, P->p, "out of memory");
  l->v[l->n++] = v;
  return 1;
}

/* %a, %b, ... up to a non-'%' (the list may be empty). */
static int parse_uses(pstate *P, vlist *l, int inline_only) {
  if (inline_only)
    skip_hs(P);
  else
    skip_ws(P);
  if (*P->p != '%') return 1;
  for (;;) {
    wf_val v = WF_NOVAL;
    if (!parse_use(P, &v) || !vpush(P, l, v)) return 0;
    if (inline_only)
      skip_hs(P);
    else
      skip_ws(P);
    if (*P->p != ',') return 1;
    const char *q = P->p + 1;
    while (*q == ' ' || *q == '\t')
      q++;
    if (*q != '%') return 1; /* ", 2": a trailing imm */
    P->p++;
  }
}

/* ---- instructions and blocks ---- */
static int parse_body(pstate *P, wf_block *bl, int allow_params);

static wf_op find_op(const char *s, size_t n) {
  for (int k = 0; k < WF_OP__COUNT; k++)
    if (strlen(wf_opinfo_tab[k].name) == n && memcmp(wf_opinfo_tab[k].name, s, n) == 0)
      return (wf_op)k;
  return WF_OP__COUNT;
}

/* The literal of `const`, read according to the result type. */
static int parse_const(pstate *P, wf_inst *in, const wf_type *t) {
  skip_hs(P);
  const char *at = P->p;
  if (t && t->kind == WF_T_FLOAT) {
    char *end;
    in->fimm = strtod(at, &end);
    if (end == at) return perr(P, at, "expected a float literal");
    P->p = end;
    return 1;
  }
  if (t && t->kind == WF_T_BOOL) {
    if (accept_kw(P, "true"))
      in->imm = 1;
    else if (accept_kw(P, "false"))
      in->imm = 0;
    else
      return perr(P, at, "expected true or false");
    return 1;
  }
  long long v;
  if (!parse_int(P, &v)) return 0;
  in->imm = v;
  return 1;
}

/* Reads the operands of op into args (and imm/str/callee fixup into the
** pending fields); the inst is created afterwards with the final counts. */
typedef struct pending {
  vlist args;
  int64_t imm;
  int has_imm;
  char *str, *callee;
  const char *callee_pos;
} pending;

static int parse_operands(pstate *P, wf_op op, pending *pd) {
  skip_hs(P);
  switch (op) {
  case WF_OP_CALL:
    if (*P->p != '@') return perr(P, P->p, "expected '@function' after call");
    P->p++;
    pd->callee_pos = P->p;
    if (!(pd->callee = parse_name(P, "a function name"))) return 0;
    if (!expect(P, '(') || !parse_uses(P, &pd->args, 0)) return 0;
    return expect(P, ')');
  case WF_OP_PRINT:
  case WF_OP_TRAP:
    if (!(pd->str = parse_string(P))) return 0;
    skip_hs(P);
    if (op == WF_OP_TRAP && accept_word(P, "debug")) { /* a debug-only check */
      pd->imm = 1;
      pd->has_imm = 1;
      return 1;
    }
    if (*P->p != ',') return 1;
    P->p++;
    return parse_uses(P, &pd->args, 1);
  case WF_OP_FOR:
  case WF_OP_WHILE:
    if (op == WF_OP_FOR && !parse_uses(P, &pd->args, 1)) return 0;
    skip_hs(P);
    if (!strncmp(P->p, "iter", 4) && !is_idch(P->p[4])) {
      P->p += 4;
      if (!expect(P, '(') || !parse_uses(P, &pd->args, 0)) return 0;
      return expect(P, ')');
    }
    return 1;
  default:
    if (!parse_uses(P, &pd->args, 1)) return 0;
    skip_hs(P);
    int comma = pd->args.n && *P->p == ',';
    if (comma) P->p++, skip_hs(P);
    if ((*P->p >= '0' && *P->p <= '9') || *P->p == '-') {
      long long v;
      if (!parse_int(P, &v)) return 0;
      pd->imm = v;
      pd->has_imm = 1;
    } else if (comma) {
      return perr(P, P->p, "expected a value or an integer after ','");
    }
    return 1;
  }
}

/* '!' line ':' col on the instruction's line. */
static int parse_loc(pstate *P, wf_loc *loc) {
  skip_hs(P);
  if (*P->p != '!') return 1;
  P->p++;
  long long l, c;
  if (!parse_int(P, &l) || !expect(P, ':') || !parse_int(P, &c)) return 0;
  loc->line = (int32_t)l;
  loc->col = (int32_t)c;
  return 1;
}

/* '{' body '}' { ('else'|'do') '{' body '}' } -- the blocks of a region. */
static int parse_regions(pstate *P, wf_block ***blocks, int *nblocks) {
  int cap = 0;
  *blocks = NULL;
  *nblocks = 0;
  skip_hs(P);
  if (*P->p != '{') return 1;
  for (;;) {
    if (!expect(P, '{')) return 0;
    wf_block *bl = wf_b_newblock(P->fn, 0, NULL);
    if (!bl || !grow((void **)blocks, &cap, *nblocks, sizeof(wf_block *)))
      return perr(P, P->p, "out of memory");
    (*blocks)[(*nblocks)++] = bl;
    if (!parse_body(P, bl, 1) || !expect(P, '}')) return 0;
    skip_hs(P);
    if (!accept_word(P, "else") && !accept_word(P, "do")) return 1;
  }
}

static int parse_inst(pstate *P, wf_block *bl) {
  const char *at = P->p;
  const wf_type **rt = NULL;
  const char **rn = NULL;
  size_t *rl = NULL;
  int nres = 0, cap = 0, ok = 0;
  pending pd = {0};
  wf_block **blocks = NULL;
  int nblocks = 0;
  if (*P->p == '%') { /* results */
    for (;;) {
      const char *nm;
      size_t len;
      const wf_type *t;
      if (!parse_vdef(P, &nm, &len, &t)) goto done;
      if (!grow((void **)&rt, &cap, nres, sizeof(*rt)) ||
          !(rn = realloc(rn, (size_t)cap * sizeof(*rn))) ||
          !(rl = realloc(rl, (size_t)cap * sizeof(*rl)))) {
        perr(P, at, "out of memory");
        goto done;
      }
      rt[nres] = t, rn[nres] = nm, rl[nres] = len, nres++;
      if (!accept(P, ',')) break;
    }
    if (!expect(P, '=')) goto done;
    skip_ws(P);
  }
  const char *opat = P->p;
  size_t n = ident_len(P->p);
  wf_op op = find_op(P->p, n);
  if (op == WF_OP__COUNT) {
    if (n)
      perr(P, opat, "unknown op '%.*s'", (int)n, opat);
    else
      perr(P, opat, "expected an instruction");
    goto done;
  }
  P->p += n;
  wf_inst *in = NULL;
  if (op == WF_OP_CONST) {
    if (nres != 1) {
      perr(P, opat, "const needs one result");
      goto done;
    }
    in = wf_inst_new(P->fn, op, 0, NULL, 1, rt, 0);
    if (!in || !parse_const(P, in, rt[0])) goto oom_or_done;
  } else {
    if (!parse_operands(P, op, &pd)) goto done;
    in = wf_inst_new(P->fn, op, pd.args.n, pd.args.v, nres, rt, 0);
    if (!in) goto oom_or_done;
    in->imm = pd.imm;
    if (pd.str) in->str = wf_ir_strdup(P->m, pd.str);
    if (pd.callee) {
      if (!grow((void **)&P->fix, &P->capfix, P->nfix, sizeof(fixup))) goto oom_or_done;
      P->fix[P->nfix++] = (fixup){in, pd.callee, pd.callee_pos};
      pd.callee = NULL;
    }
  }
  if (!parse_loc(P, &in->loc)) goto done;
  for (int k = 0; k < nres; k++)
    if (!bind(P, rn[k], rl[k], in->res[k])) goto done;
  wf_block_append(bl, in);
  if (!parse_regions(P, &blocks, &nblocks)) goto done;
  skip_hs(P);
  if (*P->p && *P->p != '\n' && *P->p != '}') {
    perr(P, P->p, "unexpected '%c' after the instruction", *P->p);
    goto done;
  }
  if (nblocks) {
    in->blocks = wf_ir_alloc(P->m, sizeof(wf_block *) * (size_t)nblocks);
    if (!in->blocks) goto oom_or_done;
    in->nblocks = nblocks;
    for (int k = 0; k < nblocks; k++)
      wf_inst_set_block(in, k, blocks[k]);
  }
  ok = 1;
  goto done;
oom_or_done:
  perr(P, at, "out of memory");
done:
  free(rt);
  free(rn);
  free(rl);
  free(pd.args.v);
  free(pd.str);
  free(pd.callee);
  free(blocks);
  return ok;
}

/* Optional '^(' params '):' then instructions up to '}'. */
static int parse_body(pstate *P, wf_block *bl, int allow_params) {
  skip_ws(P);
  if (*P->p == '^') {
    if (!allow_params) return perr(P, P->p, "a function body has no block parameters");
    P->p++;
    if (!expect(P, '(')) return 0;
    skip_ws(P);
    if (*P->p != ')') {
      for (;;) {
        const char *nm;
        size_t len;
        const wf_type *t;
        if (!parse_vdef(P, &nm, &len, &t)) return 0;
        wf_val v = wf_b_newval(P->fn, t);
        wf_val *np = wf_ir_alloc(P->m, sizeof(wf_val) * (size_t)(bl->nparams + 1));
        if (v < 0 || !np) return perr(P, nm, "out of memory");
        memcpy(np, bl->params, sizeof(wf_val) * (size_t)bl->nparams);
        np[bl->nparams] = v;
        P->fn->vals[v].block = bl;
        P->fn->vals[v].index = bl->nparams;
        bl->params = np;
        bl->nparams++;
        if (!bind(P, nm, len, v)) return 0;
        if (!accept(P, ',')) break;
      }
    }
    if (!expect(P, ')') || !expect(P, ':')) return 0;
  }
  for (;;) {
    skip_ws(P);
    if (*P->p == '}' || !*P->p) return 1;
    if (!parse_inst(P, bl)) return 0;
  }
}

/* ---- top level ---- */
static int parse_func(pstate *P, int is_kernel) {
  skip_ws(P);
  if (*P->p != '@')
    return perr(P, P->p, "expected '@name' after %s", is_kernel ? "kernel" : "func");
  P->p++;
  const char *at = P->p;
  char *name = parse_name(P, "a function name");
  const char **pn = NULL;
  size_t *pl = NULL;
  const wf_type **pt = NULL, **rt = NULL;
  int np = 0, nr = 0, cpn = 0, ok = 0;
  char *chunk = NULL;
  if (!name || !expect(P, '(')) goto done;
  if (wf_module_find(P->m, name) >= 0) {
    perr(P, at, "redefinition of function @%s", name);
    goto done;
  }
  skip_ws(P);
  if (*P->p != ')') {
    for (;;) {
      const char *nm;
      size_t len;
      const wf_type *t;
      if (!parse_vdef(P, &nm, &len, &t)) goto done;
      if (np == cpn) {
        cpn = cpn ? cpn * 2 : 8;
        pn = realloc(pn, sizeof(*pn) * (size_t)cpn);
        pl = realloc(pl, sizeof(*pl) * (size_t)cpn);
        pt = realloc(pt, sizeof(*pt) * (size_t)cpn);
        if (!pn || !pl || !pt) {
          perr(P, nm, "out of memory");
          goto done;
        }
      }
      pn[np] = nm, pl[np] = len, pt[np] = t, np++;
      if (!accept(P, ',')) break;
    }
  }
  if (!expect(P, ')')) goto done;
  skip_ws(P);
  if (P->p[0] == '-' && P->p[1] == '>') {
    P->p += 2;
    int cr = 0;
    for (;;) {
      const wf_type *t = parse_type(P);
      if (!t) goto done;
      if (!grow((void **)&rt, &cr, nr, sizeof(*rt))) {
        perr(P, P->p, "out of memory");
        goto done;
      }
      rt[nr++] = t;
      if (!accept(P, ',')) break;
    }
  }
  if (accept_kw(P, "chunk") && !(chunk = parse_string(P))) goto done;
  if (!expect(P, '{')) goto done;
  P->fn = wf_func_new(P->m, name, is_kernel, np, pt, nr, rt);
  if (!P->fn) {
    perr(P, at, "out of memory");
    goto done;
  }
  if (chunk) P->fn->chunk = wf_ir_strdup(P->m, chunk);
  P->nnames = 0;
  for (int i = 0; i < np; i++)
    if (!bind(P, pn[i], pl[i], P->fn->params[i])) goto done;
  ok = parse_body(P, P->fn->body, 0) && expect(P, '}');
done:
  free(name);
  free(pn);
  free(pl);
  free(pt);
  free(rt);
  free(chunk);
  return ok;
}

static int parse_struct(pstate *P) {
  const char *at = (skip_ws(P), P->p);
  char *name = parse_name(P, "a struct name");
  wf_field *f = NULL;
  int nf = 0, cf = 0, ok = 0;
  if (!name || !expect(P, '{')) goto done;
  skip_ws(P);
  while (*P->p != '}') {
    if (!grow((void **)&f, &cf, nf, sizeof(*f))) {
      perr(P, P->p, "out of memory");
      goto done;
    }
    long long off;
    f[nf].name = parse_name(P, "a field name");
    if (!f[nf].name) goto done;
    nf++;
    if (!expect(P, ':') || !(f[nf - 1].type = parse_type(P)) || !expect(P, '@') ||
        !parse_int(P, &off))
      goto done;
    f[nf - 1].offset = (uint32_t)off;
    if (!accept(P, ',')) break;
    skip_ws(P);
  }
  if (!expect(P, '}')) goto done;
  const wf_type *t = wf_t_struct(P->T, name, nf, f);
  if (!t) {
    perr(P, at, "bad struct '%s'", name);
    goto done;
  }
  if (!grow((void **)&P->structs, &P->capstructs, P->nstructs, sizeof(*P->structs))) {
    perr(P, at, "out of memory");
    goto done;
  }
  P->structs[P->nstructs++] = t;
  ok = 1;
done:
  for (int i = 0; i < nf; i++)
    free((void *)f[i].name);
  free(f);
  free(name);
  return ok;
}

/* Resolves `call @name` once every function is known. */
static int resolve_calls(pstate *P) {
  for (int i = 0; i < P->nfix; i++) {
    int k = wf_module_find(P->m, P->fix[i].name);
    if (k < 0) return perr(P, P->fix[i].pos, "unknown function @%s", P->fix[i].name);
    P->fix[i].in->imm = k;
  }
  return 1;
}

wf_module *wf_ir_parse(const char *text, wf_types *T, char *err, size_t errsize) {
  pstate P = {0};
  P.src = P.p = text ? text : "";
  P.err = err;
  P.errsize = errsize;
  if (errsize) err[0] = 0;
  P.m = wf_module_new(T);
  if (!P.m) {
    if (errsize) snprintf(err, errsize, "1:1: out of memory");
    return NULL;
  }
  P.T = P.m->types;
  int ok = 1;
  for (;;) {
    skip_ws(&P);
    if (!*P.p) break;
    const char *at = P.p;
    if (accept_kw(&P, "struct"))
      ok = parse_struct(&P);
    else if (accept_kw(&P, "kernel"))
      ok = parse_func(&P, 1);
    else if (accept_kw(&P, "func"))
      ok = parse_func(&P, 0);
    else
      ok = perr(&P, at, "expected 'kernel', 'func' or 'struct'");
    if (!ok) break;
  }
  if (ok) ok = resolve_calls(&P);
  for (int i = 0; i < P.nfix; i++)
    free(P.fix[i].name);
  free(P.fix);
  free(P.names);
  free(P.structs);
  if (!ok) {
    wf_module_free(P.m);
    return NULL;
  }
  return P.m;
}
