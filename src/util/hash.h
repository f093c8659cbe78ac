/*
** hash.h -- a 128-bit hash naming cache entries (CPU objects, CUDA images).
**
** Two 64-bit FNV-style lanes with different multipliers, each finished
** with a splitmix64 avalanche. Not cryptographic: a key only names a file,
** and a stale entry is also guarded by the codegen version in the key.
**
**   wf_hash128 h;  wf_hash_init(&h);
**   wf_hash_str(&h, "field"); wf_hash_bytes(&h, &x, sizeof x); ...
**   char key[33];  wf_hash_hex(&h, key);     32 hex digits
*/
#ifndef WF_HASH_H
#define WF_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

typedef struct wf_hash128 {
  uint64_t a, b;
} wf_hash128;

WF_INTERNAL void wf_hash_init(wf_hash128 *h);
WF_INTERNAL void wf_hash_bytes(wf_hash128 *h, const void *p, size_t n);
/* A field: its length goes first, so ("ab","c") and ("a","bc") differ;
** NULL differs from "". */
WF_INTERNAL void wf_hash_str(wf_hash128 *h, const char *s);
/* Finish (avalanche both lanes) and write 32 hex digits and a NUL. */
WF_INTERNAL void wf_hash_hex(wf_hash128 *h, char out[33]);

#endif
