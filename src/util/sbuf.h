/*
** sbuf.h -- a growable string for the text emitters (IR printer, CUDA C).
** Allocation failure sets `oom` and drops further output; the caller
** checks it once at the end instead of after every append.
*/
#ifndef WF_SBUF_H
#define WF_SBUF_H

#include <stddef.h>

#include "util/util.h"

typedef struct wf_sbuf {
  char *p; /* NUL-terminated text (NULL while empty); the caller frees it */
  size_t len, cap;
  int oom;
} wf_sbuf;

WF_INTERNAL void wf_sb_putn(wf_sbuf *s, const char *t, size_t n);
WF_INTERNAL void wf_sb_puts(wf_sbuf *s, const char *t);
WF_INTERNAL void wf_sb_printf(wf_sbuf *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
