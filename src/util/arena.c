/* arena.c -- the bump allocator of arena.h. */
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/arena.h"

typedef struct wf_chunk {
  struct wf_chunk *next;
  size_t used, cap;
  alignas(max_align_t) unsigned char data[];
} wf_chunk;

struct wf_arena {
  wf_chunk *head;
};

#define WF_CHUNK_SIZE (64 * 1024)

static wf_chunk *chunk_new(size_t cap) {
  wf_chunk *c = malloc(sizeof(wf_chunk) + cap);
  if (!c) return NULL;
  c->next = NULL;
  c->used = 0;
  c->cap = cap;
  return c;
}

wf_arena *wf_arena_new(void) {
  return calloc(1, sizeof(wf_arena));
}

void wf_arena_free(wf_arena *a) {
  if (!a) return;
  for (wf_chunk *c = a->head, *nx; c; c = nx) {
    nx = c->next;
    free(c);
  }
  free(a);
}

void *wf_arena_alloc(wf_arena *a, size_t n) {
  const size_t al = alignof(max_align_t);
  if (n > SIZE_MAX - al) return NULL;
  n = (n + al - 1) / al * al;
  if (n == 0) n = al;
  wf_chunk *c = a->head;
  if (!c || c->cap - c->used < n) {
    if (n > WF_CHUNK_SIZE / 4) {
      /* a chunk of its own, behind the head, so the head's space stays used */
      wf_chunk *big = chunk_new(n);
      if (!big) return NULL;
      if (c) {
        big->next = c->next;
        c->next = big;
      } else {
        a->head = big;
      }
      big->used = n;
      memset(big->data, 0, n);
      return big->data;
    }
    c = chunk_new(WF_CHUNK_SIZE);
    if (!c) return NULL;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}
