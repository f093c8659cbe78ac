/*
** geom_registry.c -- the live geometry objects of a runtime, so that a
** kernel (release and debug mode: src/cpu/native.c) and a CUDA launch
** (lua/weft/device.lua) can tell a valid id from a stale or made-up one
** without reading through it.
**
** An open-addressing hash set of (id, kind), linear probing, tombstones
** for removals, grown at half load. Objects are added and removed on the
** host between launches; kernels only look up, from pool threads, under a
** read lock. Reference counted: the runtime and every object hold one.
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "geom/bvh.h"
#include "runtime/geom.h"
#include "runtime/rt.h"

#define TOMB 1 /* an id no object has (descriptors are aligned) */

typedef struct slot {
  uint64_t id; /* 0 empty, TOMB removed */
  int kind;
} slot;

struct wf_georeg {
  wf_geom_ids ids; /* first: what launches see (geom/native.h) */
  int64_t refs;    /* __atomic */
  pthread_rwlock_t lock;
  slot *slots;
  size_t cap, used;       /* used counts tombstones too */
  int nmesh;              /* live meshes (host and device) */
  wf_bvh_scratch scratch; /* the memory of the last mesh build, for the next
                          ** one while a mesh lives (under lock) */
};

static void reg_free(wf_georeg *g) {
  wf_bvh_scratch_free(&g->scratch);
  pthread_rwlock_destroy(&g->lock);
  free(g->slots);
  free(g);
}

void wf_georeg_retain(wf_georeg *g) {
  __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
}

void wf_georeg_release(void *p) {
  wf_georeg *g = p;
  if (g && __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) == 0) reg_free(g);
}

static int is_mesh(int kind) {
  return (kind & 0xff) == WF_GEOM_MESH;
}

void wf_georeg_scratch_lend(wf_georeg *g, wf_bvh_scratch *s) {
  pthread_rwlock_wrlock(&g->lock);
  *s = g->scratch;
  memset(&g->scratch, 0, sizeof g->scratch);
  pthread_rwlock_unlock(&g->lock);
}

void wf_georeg_scratch_keep(wf_georeg *g, wf_bvh_scratch *s) {
  pthread_rwlock_wrlock(&g->lock);
  for (int k = 0; k < WF_BVH_NSCRATCH; k++) {
    /* the larger block of each use (two builds may have overlapped) */
    if (g->nmesh > 0 && s->size[k] >= g->scratch.size[k]) {
      free(g->scratch.p[k]);
      g->scratch.p[k] = s->p[k], g->scratch.size[k] = s->size[k];
    } else {
      free(s->p[k]);
    }
    s->p[k] = NULL, s->size[k] = 0;
  }
  pthread_rwlock_unlock(&g->lock);
}

size_t wf_geom_scratch_bytes(wf_rt *rt) {
  wf_georeg *g = rt ? rt->geom : NULL;
  if (!g) return 0;
  pthread_rwlock_rdlock(&g->lock);
  size_t n = 0;
  for (int k = 0; k < WF_BVH_NSCRATCH; k++)
    n += g->scratch.size[k];
  pthread_rwlock_unlock(&g->lock);
  return n;
}

static int ids_kind(const wf_geom_ids *ids, unsigned long long id) {
  return wf_georeg_kind(ids, id);
}

wf_georeg *wf_georeg_of(wf_rt *rt) {
  if (rt->geom) return rt->geom;
  wf_georeg *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  if (pthread_rwlock_init(&g->lock, NULL)) {
    free(g);
    return NULL;
  }
  g->refs = 1;
  g->ids.kind = ids_kind;
  rt->geom = g;
  rt->geom_release = wf_georeg_release;
  return g;
}

static size_t hash(uint64_t id, size_t cap) {
  id ^= id >> 33;
  id *= 0xff51afd7ed558ccdULL;
  id ^= id >> 33;
  return (size_t)id & (cap - 1);
}

/* Insert into a table known to have room (no locking). */
static void put(slot *s, size_t cap, uint64_t id, int kind) {
  size_t i = hash(id, cap);
  while (s[i].id > TOMB)
    i = (i + 1) & (cap - 1);
  s[i].id = id;
  s[i].kind = kind;
}

int wf_georeg_add(wf_georeg *g, uint64_t id, int kind) {
  int rc = 0;
  pthread_rwlock_wrlock(&g->lock);
  if ((g->used + 1) * 2 > g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 64;
    slot *s = calloc(cap, sizeof *s);
    if (!s) {
      rc = -1;
    } else {
      size_t used = 0;
      for (size_t i = 0; i < g->cap; i++)
        if (g->slots[i].id > TOMB) put(s, cap, g->slots[i].id, g->slots[i].kind), used++;
      free(g->slots);
      g->slots = s;
      g->cap = cap;
      g->used = used;
    }
  }
  if (!rc) {
    put(g->slots, g->cap, id, kind);
    g->used++;
    g->nmesh += is_mesh(kind);
  }
  pthread_rwlock_unlock(&g->lock);
  return rc;
}

void wf_georeg_remove(wf_georeg *g, uint64_t id) {
  pthread_rwlock_wrlock(&g->lock);
  if (g->cap) {
    size_t i = hash(id, g->cap);
    while (g->slots[i].id && g->slots[i].id != id)
      i = (i + 1) & (g->cap - 1);
    if (g->slots[i].id == id) {
      g->slots[i].id = TOMB;
      /* the last mesh gone: no build to keep memory for */
      if (is_mesh(g->slots[i].kind) && --g->nmesh == 0) wf_bvh_scratch_free(&g->scratch);
    }
  }
  pthread_rwlock_unlock(&g->lock);
}

int wf_georeg_kind(const void *p, uint64_t id) {
  wf_georeg *g = (wf_georeg *)p;
  if (!g || id <= TOMB) return 0;
  int kind = 0;
  pthread_rwlock_rdlock(&g->lock);
  if (g->cap) {
    size_t i = hash(id, g->cap);
    while (g->slots[i].id && g->slots[i].id != id)
      i = (i + 1) & (g->cap - 1);
    if (g->slots[i].id == id) kind = g->slots[i].kind;
  }
  pthread_rwlock_unlock(&g->lock);
  return kind;
}

/* The FFI's view (lua/weft/device.lua checks a CUDA launch's id arguments):
** the registry kind of id in rt, 0 if it is no live object. */
int wf_geom_kind(wf_rt *rt, uint64_t id) {
  return rt ? wf_georeg_kind(rt->geom, id) : 0;
}
