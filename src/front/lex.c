/*
** lex.c -- lexer for the Lua kernel subset. It reads the whole Lua token
** set (so unsupported syntax gets a clear message from the parser rather
** than a confusing lexical error) and keeps line and column positions.
*/
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "front/front.h"

static const char *const kwnames[] = {"and",   "break", "do",       "else", "elseif", "end",
                                      "false", "for",   "function", "goto", "if",     "in",
                                      "local", "nil",   "not",      "or",   "repeat", "return",
                                      "then",  "true",  "until",    "while"};

/* Printable token name for "expected X near Y" messages. */
const char *wf_tok_name(int tok) {
  static const char *const sym[] = {"==", "~=", "<=", ">=", "..", "...", "//", "<<", ">>", "::"};
  if (tok == TK_EOF) return "<eof>";
  if (tok == TK_NAME) return "<name>";
  if (tok == TK_NUMBER) return "<number>";
  if (tok == TK_STRING) return "<string>";
  if (tok >= TK_AND && tok <= TK_WHILE) return kwnames[tok - TK_AND];
  if (tok >= TK_EQ && tok <= TK_DBCOLON) return sym[tok - TK_EQ];
  return NULL; /* single character: the caller prints it */
}

void wf_lex_init(wf_lex *X, wf_fctx *C, const wf_src *src, size_t pos, int line) {
  memset(X, 0, sizeof *X);
  X->C = C;
  X->src = src;
  X->pos = pos;
  X->line = line;
  X->linestart = pos;
}

static int cur(wf_lex *X) {
  return X->pos < X->src->len ? (unsigned char)X->src->text[X->pos] : -1;
}
static int at(wf_lex *X, size_t k) {
  return X->pos + k < X->src->len ? (unsigned char)X->src->text[X->pos + k] : -1;
}

/* Consume a newline (\n, \r, \r\n, \n\r) and count the line. */
static void newline(wf_lex *X) {
  int c = cur(X);
  X->pos++;
  if ((cur(X) == '\n' || cur(X) == '\r') && cur(X) != c) X->pos++;
  X->line++;
  X->linestart = X->pos;
}

static int colof(wf_lex *X) {
  return (int)(X->pos - X->linestart) + 1;
}

/* Long bracket level at pos ('[' followed by '='* and '['), or -1. */
static int longlevel(wf_lex *X) {
  size_t k = 1;
  int lvl = 0;
  while (at(X, k) == '=')
    k++, lvl++;
  return at(X, k) == '[' ? lvl : -1;
}

/* Skip/read a long bracket string of the given level; pos is at '['. */
static const char *longstring(wf_lex *X, int lvl, size_t *outlen, int sline, int scol) {
  X->pos += (size_t)lvl + 2;
  if (cur(X) == '\r' || cur(X) == '\n') newline(X);
  size_t start = X->pos;
  for (;;) {
    int c = cur(X);
    if (c < 0) wf_front_error(X->C, X->src, sline, scol, "unfinished long string or comment");
    if (c == ']') {
      size_t k = 1;
      int l = 0;
      while (at(X, k) == '=')
        k++, l++;
      if (l == lvl && at(X, k) == ']') {
        size_t end = X->pos;
        X->pos += k + 1;
        if (outlen) *outlen = end - start;
        return X->src->text + start;
      }
      X->pos++;
    } else if (c == '\n' || c == '\r') {
      newline(X);
    } else {
      X->pos++;
    }
  }
}

/* A quoted string with Lua escapes. */
static void shortstring(wf_lex *X, wf_token *t) {
  int q = cur(X);
  X->pos++;
  size_t cap = 64, n = 0;
  char *buf = wf_front_alloc(X->C, cap);
  for (;;) {
    int c = cur(X);
    if (c < 0 || c == '\n' || c == '\r')
      wf_front_error(X->C, X->src, t->line, t->col, "unfinished string");
    X->pos++;
    if (c == q) break;
    if (c == '\\') {
      int e = cur(X);
      X->pos++;
      switch (e) {
      case 'n': c = '\n'; break;
      case 't': c = '\t'; break;
      case 'r': c = '\r'; break;
      case 'a': c = '\a'; break;
      case 'b': c = '\b'; break;
      case 'f': c = '\f'; break;
      case 'v': c = '\v'; break;
      case '\\': c = '\\'; break;
      case '"': c = '"'; break;
      case '\'': c = '\''; break;
      case '\n':
        c = '\n';
        X->line++;
        X->linestart = X->pos;
        break;
      default:
        if (e >= '0' && e <= '9') {
          int v = e - '0', k = 1;
          while (k < 3 && cur(X) >= '0' && cur(X) <= '9')
            v = v * 10 + (cur(X) - '0'), X->pos++, k++;
          c = v & 255;
        } else {
          wf_front_error(X->C, X->src, X->line, colof(X) - 1, "invalid escape sequence '\\%c'", e);
        }
      }
    }
    if (n + 2 > cap) {
      char *nb = wf_front_alloc(X->C, cap * 2);
      memcpy(nb, buf, n);
      buf = nb;
      cap *= 2;
    }
    buf[n++] = (char)c;
  }
  buf[n] = 0;
  t->str = buf;
  t->slen = n;
}

/* A numeric literal: decimal with optional fraction/exponent, or hex. */
static void number(wf_lex *X, wf_token *t) {
  const char *s = X->src->text + X->pos;
  size_t k = 0;
  int isint = 1;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    k = 2;
    while (isxdigit((unsigned char)at(X, k)))
      k++;
  } else {
    while (isdigit((unsigned char)at(X, k)) || at(X, k) == '.') {
      if (at(X, k) == '.') isint = 0;
      k++;
    }
    if (at(X, k) == 'e' || at(X, k) == 'E') {
      isint = 0;
      k++;
      if (at(X, k) == '+' || at(X, k) == '-') k++;
      while (isdigit((unsigned char)at(X, k)))
        k++;
    }
  }
  /* a trailing letter (e.g. LuaJIT's 1ULL) is not part of the subset */
  if (isalnum((unsigned char)at(X, k)) || at(X, k) == '_')
    wf_front_error(X->C, X->src, t->line, t->col, "malformed number");
  char tmp[128];
  if (k >= sizeof tmp) wf_front_error(X->C, X->src, t->line, t->col, "malformed number");
  memcpy(tmp, s, k);
  tmp[k] = 0;
  char *end;
  double v = (tmp[0] == '0' && (tmp[1] == 'x' || tmp[1] == 'X')) ? (double)strtoull(tmp, &end, 16)
                                                                 : strtod(tmp, &end);
  if (*end) wf_front_error(X->C, X->src, t->line, t->col, "malformed number '%s'", tmp);
  X->pos += k;
  t->num = v;
  t->isint = isint;
}

/* Read one token into t. */
static void scan(wf_lex *X, wf_token *t) {
  memset(t, 0, sizeof *t);
  for (;;) {
    int c = cur(X);
    t->line = X->line;
    t->col = colof(X);
    switch (c) {
    case -1: t->tok = TK_EOF; return;
    case '\n':
    case '\r': newline(X); continue;
    case ' ':
    case '\t':
    case '\f':
    case '\v': X->pos++; continue;
    case '-':
      if (at(X, 1) != '-') {
        X->pos++;
        t->tok = '-';
        return;
      }
      X->pos += 2;
      if (cur(X) == '[' && longlevel(X) >= 0) {
        longstring(X, longlevel(X), NULL, t->line, t->col);
      } else {
        while (cur(X) >= 0 && cur(X) != '\n' && cur(X) != '\r')
          X->pos++;
      }
      continue;
    case '[': {
      int l = longlevel(X);
      if (l >= 0) {
        t->tok = TK_STRING;
        const char *s = longstring(X, l, &t->slen, t->line, t->col);
        t->str = wf_front_strdup(X->C, s, t->slen);
        return;
      }
      X->pos++;
      t->tok = '[';
      return;
    }
    case '=':
      X->pos++;
      if (cur(X) == '=') {
        X->pos++;
        t->tok = TK_EQ;
      } else
        t->tok = '=';
      return;
    case '<':
      X->pos++;
      if (cur(X) == '=') {
        X->pos++;
        t->tok = TK_LE;
      } else if (cur(X) == '<') {
        X->pos++;
        t->tok = TK_SHL;
      } else
        t->tok = '<';
      return;
    case '>':
      X->pos++;
      if (cur(X) == '=') {
        X->pos++;
        t->tok = TK_GE;
      } else if (cur(X) == '>') {
        X->pos++;
        t->tok = TK_SHR;
      } else
        t->tok = '>';
      return;
    case '~':
      X->pos++;
      if (cur(X) == '=') {
        X->pos++;
        t->tok = TK_NE;
      } else
        t->tok = '~';
      return;
    case '/':
      X->pos++;
      if (cur(X) == '/') {
        X->pos++;
        t->tok = TK_IDIV;
      } else
        t->tok = '/';
      return;
    case ':':
      X->pos++;
      if (cur(X) == ':') {
        X->pos++;
        t->tok = TK_DBCOLON;
      } else
        t->tok = ':';
      return;
    case '"':
    case '\'':
      t->tok = TK_STRING;
      shortstring(X, t);
      return;
    case '.':
      if (at(X, 1) == '.') {
        X->pos += 2;
        if (cur(X) == '.') {
          X->pos++;
          t->tok = TK_DOTS;
        } else
          t->tok = TK_CONCAT;
        return;
      }
      if (!isdigit((unsigned char)at(X, 1))) {
        X->pos++;
        t->tok = '.';
        return;
      }
      t->tok = TK_NUMBER;
      number(X, t);
      return;
    default:
      if (isdigit(c)) {
        t->tok = TK_NUMBER;
        number(X, t);
        return;
      }
      if (isalpha(c) || c == '_') {
        size_t s = X->pos;
        while (isalnum(cur(X)) || cur(X) == '_')
          X->pos++;
        size_t n = X->pos - s;
        for (size_t k = 0; k < sizeof kwnames / sizeof kwnames[0]; k++)
          if (strlen(kwnames[k]) == n && !memcmp(kwnames[k], X->src->text + s, n)) {
            t->tok = TK_AND + (int)k;
            return;
          }
        t->tok = TK_NAME;
        t->str = wf_front_strdup(X->C, X->src->text + s, n);
        t->slen = n;
        return;
      }
      X->pos++;
      t->tok = c;
      return;
    }
  }
}

void wf_lex_next(wf_lex *X) {
  if (X->has_ahead) {
    X->t = X->ahead;
    X->has_ahead = 0;
  } else {
    scan(X, &X->t);
  }
}

int wf_lex_peek(wf_lex *X) {
  if (!X->has_ahead) {
    scan(X, &X->ahead);
    X->has_ahead = 1;
  }
  return X->ahead.tok;
}
