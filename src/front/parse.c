/*
** parse.c -- recursive-descent parser for the kernel subset of Lua.
**
** It parses one function expression (the kernel or weft.func body) found at
** the function's linedefined, and builds the AST of front.h. Syntax that is
** valid Lua but not part of the kernel subset (goto, varargs, closures,
** generic for, '..', method calls...) is rejected here or in lowering with
** a positioned message.
*/
#include <string.h>

#include "front/front.h"

typedef struct P {
  wf_fctx *C;
  wf_lex X;
} P;

#define TOK (p->X.t.tok)

/* "near 'tok'" text for syntax errors. */
static const char *neartok(P *p, char *buf, size_t n) {
  const wf_token *t = &p->X.t;
  const char *s = wf_tok_name(t->tok);
  if (t->tok == TK_NAME || t->tok == TK_STRING) snprintf(buf, n, "'%.40s'", t->str);
  else if (t->tok == TK_NUMBER) snprintf(buf, n, "'%g'", t->num);
  else if (s) snprintf(buf, n, "'%s'", s);
  else snprintf(buf, n, "'%c'", t->tok);
  return buf;
}

static void synerr(P *p, const char *what) __attribute__((noreturn));
static void synerr(P *p, const char *what) {
  char b[64];
  wf_front_error(p->C, p->X.src, p->X.t.line, p->X.t.col, "%s near %s", what, neartok(p, b, sizeof b));
}

static void unsupported(P *p, const char *what) __attribute__((noreturn));
static void unsupported(P *p, const char *what) {
  wf_front_error(p->C, p->X.src, p->X.t.line, p->X.t.col, "%s", what);
}

static void next(P *p) { wf_lex_next(&p->X); }

static void check(P *p, int tok) {
  if (TOK != tok) {
    char b[48];
    const char *s = wf_tok_name(tok);
    if (s) snprintf(b, sizeof b, "'%s' expected", s);
    else snprintf(b, sizeof b, "'%c' expected", tok);
    synerr(p, b);
  }
}

static void expect(P *p, int tok) {
  check(p, tok);
  next(p);
}

/* Expect the token closing `what` opened at line. */
static void match(P *p, int what, int who, int line) {
  if (TOK == what) {
    next(p);
    return;
  }
  if (line == p->X.t.line) expect(p, what);
  char b[96];
  snprintf(b, sizeof b, "'%s' expected (to close '%s' at line %d)", wf_tok_name(what),
           wf_tok_name(who), line);
  synerr(p, b);
}

static const char *checkname(P *p) {
  check(p, TK_NAME);
  const char *s = p->X.t.str;
  next(p);
  return s;
}

static wf_expr *newexpr(P *p, wf_ek k, int line, int col) {
  wf_expr *e = wf_front_alloc(p->C, sizeof *e);
  e->kind = k;
  e->line = line;
  e->col = col;
  return e;
}

static wf_stmt *newstmt(P *p, wf_sk k, int line, int col) {
  wf_stmt *s = wf_front_alloc(p->C, sizeof *s);
  s->kind = k;
  s->line = line;
  s->col = col;
  return s;
}

/* Growable pointer vector in the arena. */
typedef struct vec {
  void **v;
  int n, cap;
} vec;
static void vpush(P *p, vec *v, void *x) {
  if (v->n == v->cap) {
    int nc = v->cap ? v->cap * 2 : 4;
    void **nv = wf_front_alloc(p->C, sizeof(void *) * (size_t)nc);
    if (v->n) memcpy(nv, v->v, sizeof(void *) * (size_t)v->n);
    v->v = nv;
    v->cap = nc;
  }
  v->v[v->n++] = x;
}

static wf_expr *expr(P *p);
static wf_expr *subexpr(P *p, int limit);
static void block(P *p, wf_block_ast *b);

static int block_follow(int tok) {
  return tok == TK_ELSE || tok == TK_ELSEIF || tok == TK_END || tok == TK_UNTIL || tok == TK_EOF;
}

static int exprlist(P *p, wf_expr ***out) {
  vec v = {0};
  vpush(p, &v, expr(p));
  while (TOK == ',') {
    next(p);
    vpush(p, &v, expr(p));
  }
  *out = (wf_expr **)v.v;
  return v.n;
}

/* Table constructor: { [k] = v, name = v, v ; ... } */
static wf_expr *table(P *p) {
  wf_expr *e = newexpr(p, E_TABLE, p->X.t.line, p->X.t.col);
  int line = p->X.t.line;
  expect(p, '{');
  vec v = {0};
  while (TOK != '}') {
    wf_tfield *f = wf_front_alloc(p->C, sizeof *f);
    if (TOK == TK_NAME && wf_lex_peek(&p->X) == '=') {
      f->name = p->X.t.str;
      next(p);
      next(p);
    } else if (TOK == '[') {
      next(p);
      f->key = expr(p);
      expect(p, ']');
      expect(p, '=');
    }
    f->value = expr(p);
    vpush(p, &v, f);
    if (TOK == ',' || TOK == ';') next(p);
    else break;
  }
  match(p, '}', '{', line);
  e->nfields = v.n;
  e->fields = wf_front_alloc(p->C, sizeof(wf_tfield) * (size_t)(v.n ? v.n : 1));
  for (int i = 0; i < v.n; i++) e->fields[i] = *(wf_tfield *)v.v[i];
  return e;
}

/* Call arguments: ( exprlist ) | table | string */
static void callargs(P *p, wf_expr *call) {
  if (TOK == TK_STRING) {
    wf_expr *s = newexpr(p, E_STR, p->X.t.line, p->X.t.col);
    s->name = p->X.t.str;
    next(p);
    call->nargs = 1;
    call->args = wf_front_alloc(p->C, sizeof(wf_expr *));
    call->args[0] = s;
  } else if (TOK == '{') {
    call->nargs = 1;
    call->args = wf_front_alloc(p->C, sizeof(wf_expr *));
    call->args[0] = table(p);
  } else {
    int line = p->X.t.line;
    expect(p, '(');
    if (TOK != ')') call->nargs = exprlist(p, &call->args);
    match(p, ')', '(', line);
  }
}

static wf_expr *primaryexp(P *p) {
  int line = p->X.t.line, col = p->X.t.col;
  if (TOK == TK_NAME) {
    wf_expr *e = newexpr(p, E_NAME, line, col);
    e->name = p->X.t.str;
    next(p);
    return e;
  }
  if (TOK == '(') {
    next(p);
    wf_expr *e = newexpr(p, E_PAREN, line, col);
    e->a = expr(p);
    match(p, ')', '(', line);
    return e;
  }
  synerr(p, "unexpected symbol");
}

static wf_expr *suffixedexp(P *p) {
  int pline = p->X.t.line, pcol = p->X.t.col;
  wf_expr *e = primaryexp(p);
  for (;;) {
    int line = p->X.t.line, col = p->X.t.col;
    switch (TOK) {
    case '.': {
      next(p);
      wf_expr *f = newexpr(p, E_FIELD, p->X.t.line, p->X.t.col);
      f->a = e;
      f->name = checkname(p);
      e = f;
      break;
    }
    case '[': {
      next(p);
      wf_expr *f = newexpr(p, E_INDEX, line, col);
      f->a = e;
      f->b = expr(p);
      expect(p, ']');
      e = f;
      break;
    }
    case ':': {
      next(p);
      wf_expr *f = newexpr(p, E_METHOD, line, col);
      f->a = e;
      f->name = checkname(p);
      callargs(p, f);
      e = f;
      break;
    }
    case '(': case TK_STRING: case '{': {
      wf_expr *f = newexpr(p, E_CALL, pline, pcol);
      f->a = e;
      callargs(p, f);
      e = f;
      break;
    }
    default: return e;
    }
  }
}

static wf_expr *simpleexp(P *p) {
  int line = p->X.t.line, col = p->X.t.col;
  wf_expr *e;
  switch (TOK) {
  case TK_NUMBER:
    e = newexpr(p, E_NUM, line, col);
    e->num = p->X.t.num;
    e->isint = p->X.t.isint;
    break;
  case TK_STRING:
    e = newexpr(p, E_STR, line, col);
    e->name = p->X.t.str;
    break;
  case TK_NIL: e = newexpr(p, E_NIL, line, col); break;
  case TK_TRUE: e = newexpr(p, E_TRUE, line, col); break;
  case TK_FALSE: e = newexpr(p, E_FALSE, line, col); break;
  case TK_DOTS: unsupported(p, "varargs ('...') are not supported in kernels");
  case '{': return table(p);
  case TK_FUNCTION:
    unsupported(p, "function definitions (closures) are not supported inside kernels");
  default: return suffixedexp(p);
  }
  next(p);
  return e;
}

/* Binary operator priorities (left, right), as in Lua 5.1. */
static int binprio(int tok, int *right) {
  switch (tok) {
  case '+': case '-': *right = 6; return 6;
  case '*': case '/': case '%': *right = 7; return 7;
  case '^': *right = 9; return 10;
  case TK_CONCAT: *right = 4; return 5;
  case TK_EQ: case TK_NE: case '<': case TK_LE: case '>': case TK_GE: *right = 3; return 3;
  case TK_AND: *right = 2; return 2;
  case TK_OR: *right = 1; return 1;
  case TK_IDIV: case TK_SHL: case TK_SHR: case '&': case '|': case '~': *right = 7; return 7;
  default: return -1;
  }
}
#define UNARY_PRIO 8

static void badop(P *p, int tok) __attribute__((noreturn));
static void badop(P *p, int tok) {
  switch (tok) {
  case TK_CONCAT: unsupported(p, "string concatenation ('..') is not supported in kernels");
  case TK_IDIV: unsupported(p, "operator '//' is not supported in kernels; use weft.floordiv(a, b)");
  case TK_SHL: unsupported(p, "operator '<<' is not supported in kernels; use bit.lshift(a, n)");
  case TK_SHR: unsupported(p, "operator '>>' is not supported in kernels; use bit.rshift(a, n)");
  case '&': unsupported(p, "operator '&' is not supported in kernels; use bit.band(a, b)");
  case '|': unsupported(p, "operator '|' is not supported in kernels; use bit.bor(a, b)");
  default: unsupported(p, "operator '~' is not supported in kernels; use bit.bxor or bit.bnot");
  }
}

static wf_expr *subexpr(P *p, int limit) {
  wf_expr *e;
  int line = p->X.t.line, col = p->X.t.col;
  if (TOK == TK_NOT || TOK == '-' || TOK == '#' || TOK == '~') {
    int op = TOK;
    if (op == '~') badop(p, op);
    next(p);
    e = newexpr(p, E_UN, line, col);
    e->op = op;
    e->a = subexpr(p, UNARY_PRIO);
  } else {
    e = simpleexp(p);
  }
  int right = 0, lp;
  while ((lp = binprio(TOK, &right)) > limit) {
    int op = TOK;
    int oline = p->X.t.line, ocol = p->X.t.col;
    if (op == TK_CONCAT || op == TK_IDIV || op == TK_SHL || op == TK_SHR || op == '&' ||
        op == '|' || op == '~')
      badop(p, op);
    next(p);
    wf_expr *r = subexpr(p, right);
    wf_expr *b = newexpr(p, op == TK_AND ? E_AND : op == TK_OR ? E_OR : E_BIN, oline, ocol);
    b->op = op;
    b->a = e;
    b->b = r;
    e = b;
  }
  return e;
}

static wf_expr *expr(P *p) { return subexpr(p, 0); }

static void funcbody_unsupported(P *p) __attribute__((noreturn));
static void funcbody_unsupported(P *p) {
  unsupported(p, "function definitions (closures) are not supported inside kernels");
}

static wf_stmt *ifstat(P *p, int line, int col) {
  wf_stmt *s = newstmt(p, S_IF, line, col);
  vec conds = {0}, blocks = {0};
  next(p); /* if */
  for (;;) {
    vpush(p, &conds, expr(p));
    expect(p, TK_THEN);
    wf_block_ast *b = wf_front_alloc(p->C, sizeof *b);
    block(p, b);
    vpush(p, &blocks, b);
    if (TOK == TK_ELSEIF) {
      next(p);
      continue;
    }
    break;
  }
  if (TOK == TK_ELSE) {
    next(p);
    wf_block_ast *b = wf_front_alloc(p->C, sizeof *b);
    block(p, b);
    vpush(p, &blocks, b);
    s->has_else = 1;
  }
  match(p, TK_END, TK_IF, line);
  s->nconds = conds.n;
  s->conds = (wf_expr **)conds.v;
  s->blocks = wf_front_alloc(p->C, sizeof(wf_block_ast) * (size_t)blocks.n);
  for (int i = 0; i < blocks.n; i++) s->blocks[i] = *(wf_block_ast *)blocks.v[i];
  return s;
}

static wf_stmt *forstat(P *p, int line, int col) {
  next(p); /* for */
  int ncol = p->X.t.col;
  const char *name = checkname(p);
  if (TOK == ',' || TOK == TK_IN)
    wf_front_error(p->C, p->X.src, line, col,
                   "generic for ('for ... in') is not supported in kernels; use a numeric for");
  wf_stmt *s = newstmt(p, S_FORNUM, line, col);
  s->nnames = 1;
  s->names = wf_front_alloc(p->C, sizeof(char *));
  s->namecols = wf_front_alloc(p->C, sizeof(int));
  s->names[0] = name;
  s->namecols[0] = ncol;
  expect(p, '=');
  s->exprs = wf_front_alloc(p->C, sizeof(wf_expr *) * 3);
  s->exprs[0] = expr(p);
  expect(p, ',');
  s->exprs[1] = expr(p);
  s->nexprs = 2;
  if (TOK == ',') {
    next(p);
    s->exprs[2] = expr(p);
    s->nexprs = 3;
  }
  expect(p, TK_DO);
  block(p, &s->body);
  match(p, TK_END, TK_FOR, line);
  return s;
}

static wf_stmt *localstat(P *p, int line, int col) {
  next(p); /* local */
  if (TOK == TK_FUNCTION) funcbody_unsupported(p);
  wf_stmt *s = newstmt(p, S_LOCAL, line, col);
  vec names = {0}, cols = {0};
  do {
    if (names.n) next(p);
    int *c = wf_front_alloc(p->C, sizeof(int));
    *c = p->X.t.col;
    vpush(p, &cols, c);
    vpush(p, &names, (void *)checkname(p));
  } while (TOK == ',');
  s->nnames = names.n;
  s->names = (const char **)names.v;
  s->namecols = wf_front_alloc(p->C, sizeof(int) * (size_t)names.n);
  for (int i = 0; i < names.n; i++) s->namecols[i] = *(int *)cols.v[i];
  if (TOK == '=') {
    next(p);
    s->nexprs = exprlist(p, &s->exprs);
  }
  return s;
}

static wf_stmt *exprstat(P *p, int line, int col) {
  wf_expr *e = suffixedexp(p);
  if (TOK == '=' || TOK == ',') {
    wf_stmt *s = newstmt(p, S_ASSIGN, line, col);
    vec t = {0};
    vpush(p, &t, e);
    while (TOK == ',') {
      next(p);
      vpush(p, &t, suffixedexp(p));
    }
    for (int i = 0; i < t.n; i++) {
      wf_expr *x = t.v[i];
      if (x->kind != E_NAME && x->kind != E_INDEX && x->kind != E_FIELD)
        wf_front_error(p->C, p->X.src, x->line, x->col, "cannot assign to this expression");
    }
    expect(p, '=');
    s->ntargets = t.n;
    s->targets = (wf_expr **)t.v;
    s->nexprs = exprlist(p, &s->exprs);
    return s;
  }
  if (e->kind != E_CALL && e->kind != E_METHOD) synerr(p, "syntax error");
  wf_stmt *s = newstmt(p, S_CALL, line, col);
  s->nexprs = 1;
  s->exprs = wf_front_alloc(p->C, sizeof(wf_expr *));
  s->exprs[0] = e;
  return s;
}

static wf_stmt *statement(P *p) {
  int line = p->X.t.line, col = p->X.t.col;
  switch (TOK) {
  case TK_IF: return ifstat(p, line, col);
  case TK_WHILE: {
    next(p);
    wf_stmt *s = newstmt(p, S_WHILE, line, col);
    s->nconds = 1;
    s->conds = wf_front_alloc(p->C, sizeof(wf_expr *));
    s->conds[0] = expr(p);
    expect(p, TK_DO);
    block(p, &s->body);
    match(p, TK_END, TK_WHILE, line);
    return s;
  }
  case TK_DO: {
    next(p);
    wf_stmt *s = newstmt(p, S_DO, line, col);
    block(p, &s->body);
    match(p, TK_END, TK_DO, line);
    return s;
  }
  case TK_FOR: return forstat(p, line, col);
  case TK_REPEAT: {
    next(p);
    wf_stmt *s = newstmt(p, S_REPEAT, line, col);
    block(p, &s->body);
    match(p, TK_UNTIL, TK_REPEAT, line);
    s->nconds = 1;
    s->conds = wf_front_alloc(p->C, sizeof(wf_expr *));
    s->conds[0] = expr(p);
    return s;
  }
  case TK_FUNCTION: funcbody_unsupported(p);
  case TK_LOCAL: return localstat(p, line, col);
  case TK_DBCOLON: case TK_GOTO: unsupported(p, "goto and labels are not supported in kernels");
  case TK_RETURN: {
    next(p);
    wf_stmt *s = newstmt(p, S_RETURN, line, col);
    if (!block_follow(TOK) && TOK != ';') s->nexprs = exprlist(p, &s->exprs);
    if (TOK == ';') next(p);
    if (!block_follow(TOK)) synerr(p, "'end' expected");
    return s;
  }
  case TK_BREAK: {
    next(p);
    return newstmt(p, S_BREAK, line, col);
  }
  default: return exprstat(p, line, col);
  }
}

static void block(P *p, wf_block_ast *b) {
  vec v = {0};
  while (!block_follow(TOK)) {
    if (TOK == ';') {
      next(p);
      continue;
    }
    wf_stmt *s = statement(p);
    vpush(p, &v, s);
    if (s->kind == S_RETURN) break;
  }
  b->n = v.n;
  b->s = (wf_stmt **)v.v;
}

/* Parameter list after 'function' [funcname]; returns the count. */
static int params(P *p, const char ***out, int *is_method) {
  vec v = {0};
  *is_method = 0;
  if (TOK == TK_NAME) { /* function a.b.c:m( ... ) */
    next(p);
    while (TOK == '.' || TOK == ':') {
      if (TOK == ':') *is_method = 1;
      next(p);
      checkname(p);
    }
  }
  if (*is_method) vpush(p, &v, (void *)"self");
  expect(p, '(');
  if (TOK != ')') {
    do {
      if (v.n && TOK == ',') next(p);
      if (TOK == TK_DOTS) unsupported(p, "varargs ('...') are not supported in kernels");
      vpush(p, &v, (void *)checkname(p));
    } while (TOK == ',');
  }
  expect(p, ')');
  *out = (const char **)v.v;
  return v.n;
}

/* Byte offset of the start of line `line` (1-based) in src, or len. */
static size_t line_offset(const wf_src *src, int line) {
  size_t i = 0;
  int l = 1;
  while (l < line && i < src->len) {
    if (src->text[i] == '\n') l++;
    i++;
  }
  return i;
}

static int same_params(int n, const char **a, int m, const char *const *b) {
  if (!b) return 1;
  if (n != m) return 0;
  for (int i = 0; i < n; i++)
    if (strcmp(a[i], b[i])) return 0;
  return 1;
}

wf_funcast *wf_parse_function(wf_fctx *C, const wf_src *src, int nparams,
                              const char *const *pnames) {
  P ps, *p = &ps;
  memset(p, 0, sizeof ps);
  p->C = C;
  int line = src->linedefined;
  wf_lex_init(&p->X, C, src, line_offset(src, line), line);
  next(p);
  /* Find a 'function' token on the defining line whose parameters match. */
  for (;;) {
    while (TOK != TK_FUNCTION && TOK != TK_EOF && p->X.t.line == line) next(p);
    if (TOK != TK_FUNCTION || p->X.t.line != line)
      wf_front_error(C, src, line, 1, "cannot find the function's source at this line");
    wf_lex save = p->X;
    int fline = p->X.t.line, fcol = p->X.t.col;
    next(p);
    const char **names;
    int is_method;
    int n = params(p, &names, &is_method);
    if (!same_params(n, names, nparams, pnames)) {
      p->X = save;
      next(p);
      continue;
    }
    wf_funcast *f = wf_front_alloc(C, sizeof *f);
    f->line = fline;
    f->col = fcol;
    f->nparams = n;
    f->params = names;
    block(p, &f->body);
    f->lastline = p->X.t.line;
    match(p, TK_END, TK_FUNCTION, fline);
    return f;
  }
}
