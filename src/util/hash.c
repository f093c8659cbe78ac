/* hash.c -- the cache-key hash of hash.h. */
#include <stdio.h>
#include <string.h>

#include "util/hash.h"

void wf_hash_init(wf_hash128 *h) {
  h->a = 0xcbf29ce484222325ULL;
  h->b = 0x84222325cbf29ce4ULL;
}

void wf_hash_bytes(wf_hash128 *h, const void *p, size_t n) {
  const unsigned char *s = p;
  uint64_t a = h->a, b = h->b;
  for (size_t i = 0; i < n; i++) {
    a = (a ^ s[i]) * 0x100000001b3ULL;
    b = (b ^ s[i]) * 0xff51afd7ed558ccdULL;
    b ^= b >> 31;
  }
  h->a = a, h->b = b;
}

void wf_hash_str(wf_hash128 *h, const char *s) {
  uint64_t n = s ? strlen(s) : (uint64_t)-1;
  wf_hash_bytes(h, &n, sizeof n);
  if (s) wf_hash_bytes(h, s, (size_t)n);
}

/* splitmix64's finalizer: every input bit reaches every output bit. */
static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void wf_hash_hex(wf_hash128 *h, char out[33]) {
  h->a = mix64(h->a);
  h->b = mix64(h->b ^ h->a);
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)h->a, (unsigned long long)h->b);
}
