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
  if (t->tok == TK_NAME || t->tok == TK_STRING)
    snprintf(buf, n, "'%.40s'", t->str);
  else if (t->tok == TK_NUMBER)
    snprintf(buf, n, "'%g'", t->num);
  else if (s)
    snprintf(buf, n, "'%s'", s);
  else
    snprintf(buf, n, "'%c'", t->tok);
  return buf;
}

static void synerr(P *p, const char *what) __attribute__((noreturn));
static void synerr(P *p, const char *what) {
  char b[64];
  wf_front_error(p->C, p->X.src, p->X.t.line, p->X.t.col, "%s near %s", what,
                 neartok(p, b, sizeof b));
}

static void unsupported(P *p, const char *what) __attribute__((noreturn));
static void unsupported(P *p, const char *what) {
  wf_front_error(p->C, p->X.src, p->X.t.line, p->X.t.col, "%s", what);
}

static void next(P *p) {
  wf_lex_next(&p->X);
}

static void check(P *p, int tok) {
  if (TOK != tok) {
    char b[48];
    const char *s = wf_tok_name(tok);
    if (s)
      snprintf(b, sizeof b, "'%s' expected", s);
    else
      snprintf(b, sizeof b, "'%c' expected", tok);
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
    if (TOK == ',' || TOK == ';')
      next(p);
    else
      break;
  }
  match(p, '}', '{', line);
  e->nfields = v.n;
  e->fields = wf_front_alloc(p->C, sizeof(wf_tfield) * (size_t)(v.n ? v.n : 1));
  for (int i = 0; i < v.n; i++)
    e->fields[i] = *(wf_tfield *)v.v[i];
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
    case '(':
    case TK_STRING:
    case '{': {
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
  case '+':
  case '-': *right = 6; return 6;
  case '*':
  case '/':
  case '%': *right = 7; return 7;
  case '^': *right = 9; return 10;
  case TK_CONCAT: *right = 4; return 5;
  case TK_EQ:
  case TK_NE:
  case '<':
  case TK_LE:
  case '>':
  case TK_GE: *right = 3; return 3;
  case TK_AND: *right = 2; return 2;
  case TK_OR: *right = 1; return 1;
  case TK_IDIV:
  case TK_SHL:
  case TK_SHR:
  case '&':
  case '|':
  case '~': *right = 7; return 7;
  default: return -1;
  }
}
#define UNARY_PRIO 8

static void badop(P *p, int tok) __attribute__((noreturn));
static void badop(P *p, int tok) {
  switch (tok) {
  case TK_CONCAT: unsupported(p, "string concatenation ('..') is not supported in kernels");
  case TK_IDIV:
    unsupported(p, "operator '//' is not supported in kernels; use weft.floordiv(a, b)");
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

static wf_expr *expr(P *p) {
  return subexpr(p, 0);
}

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
  for (int i = 0; i < blocks.n; i++)
    s->blocks[i] = *(wf_block_ast *)blocks.v[i];
  return s;
}

/* for n1 [, n2 ...] in e1 [, e2 ...] do ... end: what may follow `in` is
** checked when lowering (front/native.c: only geometry queries). */
static wf_stmt *forin(P *p, int line, int col, const char *first, int firstcol) {
  wf_stmt *s = newstmt(p, S_FORIN, line, col);
  vec names = {0}, cols = {0};
  int *c0 = wf_front_alloc(p->C, sizeof(int));
  *c0 = firstcol;
  vpush(p, &names, (void *)first);
  vpush(p, &cols, c0);
  while (TOK == ',') {
    next(p);
    int *c = wf_front_alloc(p->C, sizeof(int));
    *c = p->X.t.col;
    vpush(p, &cols, c);
    vpush(p, &names, (void *)checkname(p));
  }
  expect(p, TK_IN);
  vec es = {0};
  vpush(p, &es, expr(p));
  while (TOK == ',') {
    next(p);
    vpush(p, &es, expr(p));
  }
  s->nnames = names.n;
  s->names = wf_front_alloc(p->C, sizeof(char *) * (size_t)names.n);
  s->namecols = wf_front_alloc(p->C, sizeof(int) * (size_t)names.n);
  for (int i = 0; i < names.n; i++) {
    s->names[i] = names.v[i];
    s->namecols[i] = *(int *)cols.v[i];
  }
  s->nexprs = es.n;
  s->exprs = wf_front_alloc(p->C, sizeof(wf_expr *) * (size_t)es.n);
  for (int i = 0; i < es.n; i++)
    s->exprs[i] = es.v[i];
  expect(p, TK_DO);
  block(p, &s->body);
  match(p, TK_END, TK_FOR, line);
  return s;
}

static wf_stmt *forstat(P *p, int line, int col) {
  next(p); /* for */
  int ncol = p->X.t.col;
  const char *name = checkname(p);
  if (TOK == ',' || TOK == TK_IN) return forin(p, line, col, name, ncol);
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
  for (int i = 0; i < names.n; i++)
    s->namecols[i] = *(int *)cols.v[i];
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
  case TK_DBCOLON: {
    next(p);
    wf_stmt *s = newstmt(p, S_LABEL, line, col);
    s->nnames = 1;
    s->names = wf_front_alloc(p->C, sizeof(char *));
    s->names[0] = checkname(p);
    expect(p, TK_DBCOLON);
    return s;
  }
  case TK_GOTO: {
    next(p);
    wf_stmt *s = newstmt(p, S_GOTO, line, col);
    s->nnames = 1;
    s->names = wf_front_alloc(p->C, sizeof(char *));
    s->names[0] = checkname(p);
    return s;
  }
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

/* goto and labels: kernels have Lua's `continue` idiom only, a goto to a
** label that ends the body of the innermost enclosing loop (for, for-in
** over a query, while or repeat)
** (LuaJIT has checked that the function's gotos are valid Lua). The label
** moves into the loop's contlabel; other labels and gotos are errors. */
static void check_gotos(P *p, wf_block_ast *b, const wf_stmt *loop) {
  for (int i = 0; i < b->n; i++) {
    wf_stmt *s = b->s[i];
    switch (s->kind) {
    case S_LABEL:
      wf_front_error(p->C, p->X.src, s->line, s->col,
                     "labels are only supported at the end of a loop's body, as "
                     "the target of 'goto continue'");
    case S_GOTO:
      if (!loop || !loop->contlabel || strcmp(loop->contlabel, s->names[0]))
        wf_front_error(p->C, p->X.src, s->line, s->col,
                       "only a goto to a label at the end of the enclosing loop's "
                       "body (Lua's 'goto continue') is supported in kernels");
      break;
    case S_IF:
      for (int k = 0; k < s->nconds + s->has_else; k++)
        check_gotos(p, &s->blocks[k], loop);
      break;
    case S_DO: check_gotos(p, &s->body, loop); break;
    case S_FORNUM:
    case S_WHILE:
    case S_REPEAT:
    case S_FORIN: {
      wf_block_ast *body = &s->body;
      while (body->n && body->s[body->n - 1]->kind == S_LABEL && !s->contlabel) {
        s->contlabel = body->s[body->n - 1]->names[0];
        body->n--;
      }
      check_gotos(p, body, s);
      break;
    }
    default: break;
    }
  }
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

/* ----------------------------------------------------------------------
** Finding the function in its source. Lua gives only the line it starts
** and the line it ends on, so several functions may start on that line.
** Every 'function' on the line is a candidate, followed to its 'end' with
** a token-level count of blocks; candidates whose parameter names or last
** line differ are dropped. When more than one is left, each candidate's
** text is compiled by Lua with the function's upvalues declared around it
** and its bytecode, constants and upvalue names are compared with the
** function's own (jit.util); the one that matches is it. Candidates that
** compile to the same bytecode but differ in their tokens (`1` and `1.0`)
** cannot be told apart: that is an error, never a guess.
** ---------------------------------------------------------------------- */
typedef struct cand {
  wf_lex at;            /* the lexer at the candidate's 'function' token */
  int endline, endcol;  /* its 'end' (endline 0: not closed) */
  size_t endoff, lpoff; /* byte offsets of its 'end' and its '(' */
  int n, is_method;     /* parameters, -1 when not a list of names */
  const char **names;
} cand;

/* Byte offset of the current token (the lexer's line start is that of
** the token: tokens but long strings do not span lines). */
static size_t tok_offset(P *p) {
  return p->X.linestart + (size_t)(p->X.t.col - 1);
}

/* Parameter names after 'function' [funcname] without raising (those
** before a '...', which Lua's own list leaves out too): -1 when the list
** is not names. */
static int scan_params(P *p, cand *c) {
  vec v = {0};
  c->is_method = 0;
  if (TOK == TK_NAME) {
    next(p);
    while (TOK == '.' || TOK == ':') {
      if (TOK == ':') c->is_method = 1;
      next(p);
      if (TOK != TK_NAME) return -1;
      next(p);
    }
  }
  if (TOK != '(') return -1;
  c->lpoff = tok_offset(p);
  next(p);
  if (c->is_method) vpush(p, &v, (void *)"self");
  while (TOK != ')') {
    if (TOK == TK_DOTS) break;
    if (TOK != TK_NAME) return -1;
    vpush(p, &v, (void *)p->X.t.str);
    next(p);
    if (TOK == ',')
      next(p);
    else if (TOK != ')')
      return -1;
  }
  c->names = (const char **)v.v;
  return v.n;
}

/* The candidates: every 'function' token on `line`, with where it ends.
** One pass over the tokens from the start of the line until every
** candidate is closed, keeping a stack of open blocks. */
static int find_candidates(P *p, int line, cand **out) {
  vec cs = {0};
  int *stack = NULL, depth = 0, cap = 0, open = 0;
  while (TOK != TK_EOF && (p->X.t.line == line || open > 0)) {
    int tok = TOK;
    if (tok == TK_FUNCTION || tok == TK_IF || tok == TK_DO || tok == TK_REPEAT) {
      int ci = -1;
      if (tok == TK_FUNCTION && p->X.t.line == line) {
        cand *c = wf_front_alloc(p->C, sizeof *c);
        c->at = p->X;
        ci = cs.n;
        vpush(p, &cs, c);
        open++;
      }
      if (depth == cap) {
        int nc = cap ? cap * 2 : 16;
        int *ns = wf_front_alloc(p->C, sizeof(int) * (size_t)nc);
        if (depth) memcpy(ns, stack, sizeof(int) * (size_t)depth);
        stack = ns;
        cap = nc;
      }
      stack[depth++] = ci;
    } else if ((tok == TK_END || tok == TK_UNTIL) && depth > 0) {
      int ci = stack[--depth];
      if (ci >= 0) {
        cand *c = cs.v[ci];
        c->endline = p->X.t.line;
        c->endcol = p->X.t.col;
        c->endoff = tok_offset(p);
        open--;
      }
    }
    next(p);
  }
  *out = wf_front_alloc(p->C, sizeof(cand) * (size_t)(cs.n ? cs.n : 1));
  for (int i = 0; i < cs.n; i++)
    (*out)[i] = *(cand *)cs.v[i];
  return cs.n;
}

/* Lua helper: (fn, text) -> true if `return <text>`, compiled with fn's
** upvalues declared as locals around it, gives fn's bytecode; nil when
** jit.util is not there. */
static const char match_helper[] =
    "local f, text = ...\n"
    "local ok, ju = pcall(require, 'jit.util')\n"
    "if not ok or type(ju) ~= 'table' then return nil end\n"
    "local names = {}\n"
    "for i = 1, 255 do\n"
    "  local n = debug.getupvalue(f, i)\n"
    "  if not n then break end\n"
    "  names[i] = n\n"
    "end\n"
    "local pre = #names > 0 and ('local ' .. table.concat(names, ', ') .. ' ') or ''\n"
    "local chunk = loadstring(pre .. 'return ' .. text, '=weft')\n"
    "if not chunk then return false end\n"
    "local okc, g = pcall(chunk)\n"
    "if not okc or type(g) ~= 'function' then return false end\n"
    "local a, b = ju.funcinfo(f), ju.funcinfo(g)\n"
    "for _, k in ipairs({ 'bytecodes', 'nconsts', 'gcconsts', 'upvalues', 'params',\n"
    "                     'stackslots', 'isvararg', 'children' }) do\n"
    "  if a[k] ~= b[k] then return false end\n"
    "end\n"
    "for pc = 0, (a.bytecodes or 0) - 1 do\n"
    "  if ju.funcbc(f, pc) ~= ju.funcbc(g, pc) then return false end\n"
    "end\n"
    "for i = 0, (a.nconsts or 0) - 1 do\n"
    "  local x, y = ju.funck(f, i), ju.funck(g, i)\n"
    "  if x ~= y and (x == x or y == y) then return false end\n"
    "end\n"
    "for i = 1, a.gcconsts or 0 do\n"
    "  local x, y = ju.funck(f, -i), ju.funck(g, -i)\n"
    "  if type(x) ~= type(y) or (type(x) == 'string' and x ~= y) then return false end\n"
    "end\n"
    "for i = 0, (a.upvalues or 0) - 1 do\n"
    "  if ju.funcuvname(f, i) ~= ju.funcuvname(g, i) then return false end\n"
    "end\n"
    "return true\n";

/* Does candidate c compile to the function at stack index fnidx?
** 1 yes, 0 no, -1 unknown (no jit.util, or the check failed). */
static int cand_matches(P *p, const cand *c, int fnidx) {
  lua_State *L = p->C->L;
  const wf_src *src = p->X.src;
  /* "function(" [self[, ]] then the text from after '(' to 'end' */
  size_t from = c->lpoff + 1, to = c->endoff + 3;
  if (to > src->len || from > to) return -1;
  const char *head = c->is_method ? (c->n > 1 ? "function(self, " : "function(self") : "function(";
  size_t hn = strlen(head);
  char *text = wf_front_alloc(p->C, hn + (to - from) + 1);
  memcpy(text, head, hn);
  memcpy(text + hn, src->text + from, to - from);
  text[hn + (to - from)] = 0;
  int top = lua_gettop(L);
  if (luaL_loadbuffer(L, match_helper, sizeof match_helper - 1, "=weft.find_function")) {
    lua_settop(L, top);
    return -1;
  }
  lua_pushvalue(L, fnidx);
  lua_pushstring(L, text);
  int r = -1;
  if (!lua_pcall(L, 2, 1, 0) && lua_isboolean(L, -1)) r = lua_toboolean(L, -1);
  lua_settop(L, top);
  return r;
}

/* Same tokens (kind, name, string, number as written) from a's 'function'
** to its 'end' as from b's. */
static int same_tokens(const cand *a, const cand *b) {
  wf_lex x = a->at, y = b->at;
  for (;;) {
    const wf_token *s = &x.t, *t = &y.t;
    if (s->tok != t->tok || s->isint != t->isint || memcmp(&s->num, &t->num, sizeof s->num))
      return 0;
    if ((s->tok == TK_NAME || s->tok == TK_STRING) &&
        (s->slen != t->slen || (s->str && t->str && memcmp(s->str, t->str, s->slen))))
      return 0;
    if (s->tok == TK_EOF) return 1;
    if (s->line == a->endline && s->col == a->endcol)
      return t->line == b->endline && t->col == b->endcol;
    wf_lex_next(&x);
    wf_lex_next(&y);
  }
}

wf_funcast *wf_parse_function(wf_fctx *C, const wf_src *src, int nparams, const char *const *pnames,
                              int fnidx) {
  P ps, *p = &ps;
  memset(p, 0, sizeof ps);
  p->C = C;
  int line = src->linedefined;
  wf_lex_init(&p->X, C, src, line_offset(src, line), line);
  next(p);
  cand *cs;
  int nc = find_candidates(p, line, &cs);
  /* those with the parameter names and the last line Lua reports */
  int nm = 0;
  for (int i = 0; i < nc; i++) {
    p->X = cs[i].at;
    next(p);
    cs[i].n = scan_params(p, &cs[i]);
    if (cs[i].n < 0 || !same_params(cs[i].n, cs[i].names, nparams, pnames)) continue;
    if (src->lastlinedefined > 0 && cs[i].endline != src->lastlinedefined) continue;
    cs[nm++] = cs[i];
  }
  if (nm == 0) wf_front_error(C, src, line, 1, "cannot find the function's source at this line");
  if (nm > 1 && fnidx) {
    /* the bytecode decides; unknown (-1) keeps a candidate */
    int k = 0;
    for (int i = 0; i < nm; i++)
      if (cand_matches(p, &cs[i], fnidx) != 0) cs[k++] = cs[i];
    if (k > 0) nm = k;
  }
  for (int i = 1; i < nm; i++)
    if (!same_tokens(&cs[0], &cs[i]))
      wf_front_error(C, src, cs[0].at.t.line, cs[0].at.t.col,
                     "several functions on this line could be this kernel or weft.func and "
                     "weft cannot tell which; define it on a line of its own");
  p->X = cs[0].at;
  int fline = p->X.t.line, fcol = p->X.t.col;
  next(p);
  const char **names;
  int is_method;
  int n = params(p, &names, &is_method);
  wf_funcast *f = wf_front_alloc(C, sizeof *f);
  f->line = fline;
  f->col = fcol;
  f->nparams = n;
  f->params = names;
  block(p, &f->body);
  check_gotos(p, &f->body, NULL);
  f->lastline = p->X.t.line;
  match(p, TK_END, TK_FUNCTION, fline);
  return f;
}
