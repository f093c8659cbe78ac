/* sbuf.c -- the growable string of sbuf.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/sbuf.h"

void wf_sb_putn(wf_sbuf *s, const char *t, size_t n) {
  if (s->oom) return;
  if (s->len + n + 1 > s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 256;
    while (nc < s->len + n + 1)
      nc *= 2;
    char *np = realloc(s->p, nc);
    if (!np) {
      s->oom = 1;
      return;
    }
    s->p = np;
    s->cap = nc;
  }
  memcpy(s->p + s->len, t, n);
  s->len += n;
  s->p[s->len] = 0;
}

void wf_sb_puts(wf_sbuf *s, const char *t) {
  wf_sb_putn(s, t, strlen(t));
}

/* Formats into a stack buffer first; only long output takes a second pass. */
void wf_sb_printf(wf_sbuf *s, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    wf_sb_putn(s, tmp, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    s->oom = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  wf_sb_putn(s, big, (size_t)n);
  free(big);
}
