/*
** arena.h -- a bump allocator: a list of chunks freed at once.
**
** Every allocation is zeroed and aligned for any type (max_align_t). Large
** requests get a chunk of their own, linked behind the current one so its
** free space is not wasted. An IR module (src/ir) and one front-end compile
** (src/front) each own one arena.
*/
#ifndef WF_ARENA_H
#define WF_ARENA_H

#include <stddef.h>

#include "util/util.h"

typedef struct wf_arena wf_arena;

WF_INTERNAL wf_arena *wf_arena_new(void);    /* NULL when out of memory */
WF_INTERNAL void wf_arena_free(wf_arena *a); /* NULL is ignored */
/* n zeroed bytes (n = 0 gives a distinct non-NULL block); NULL on OOM. */
WF_INTERNAL void *wf_arena_alloc(wf_arena *a, size_t n);

#endif
