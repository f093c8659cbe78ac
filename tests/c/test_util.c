/*
** test_util.c -- the shared helpers of src/util: arena, growable string,
** hash, WEFT_DUMP parsing.
*/
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/arena.h"
#include "util/dump.h"
#include "util/hash.h"
#include "util/sbuf.h"
#include "wtest.h"

static int all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

static void test_arena(void) {
  wf_arena *a = wf_arena_new();
  CHECK(a != NULL);
  unsigned char *prev = NULL;
  for (int i = 0; i < 5000; i++) {
    size_t n = (size_t)(i % 97);
    unsigned char *p = wf_arena_alloc(a, n);
    CHECK(p != NULL);
    CHECK((uintptr_t)p % alignof(max_align_t) == 0);
    CHECK(all_zero(p, n));
    CHECK(p != prev); /* even n = 0 gets its own block */
    memset(p, 0xab, n);
    prev = p;
  }
  /* a large block gets a chunk of its own and is zeroed too */
  unsigned char *big = wf_arena_alloc(a, 1 << 20);
  CHECK(big != NULL && all_zero(big, 1 << 20));
  unsigned char *after = wf_arena_alloc(a, 8);
  CHECK(after != NULL && all_zero(after, 8));
  CHECK(wf_arena_alloc(a, SIZE_MAX) == NULL); /* no wrap-around */
  wf_arena_free(a);
  wf_arena_free(NULL);
}

static void test_sbuf(void) {
  wf_sbuf s = {0};
  wf_sb_puts(&s, "a");
  wf_sb_printf(&s, "%d-%s", 42, "x");
  char long_arg[2000];
  memset(long_arg, 'z', sizeof long_arg - 1);
  long_arg[sizeof long_arg - 1] = 0;
  wf_sb_printf(&s, "%s", long_arg); /* longer than the stack buffer */
  CHECK(!s.oom);
  CHECK_INT(s.len, 5 + 1999);
  CHECK(strncmp(s.p, "a42-xzzz", 8) == 0);
  CHECK_INT(strlen(s.p), s.len);
  free(s.p);
}

static void test_hash(void) {
  /* the CPU backend's cache keys from before util/hash.c: entries already
  ** on disk keep their names */
  wf_hash128 h;
  wf_hash_init(&h);
  wf_hash_str(&h, "weft");
  wf_hash_str(&h, NULL);
  wf_hash_str(&h, "");
  char key[33];
  wf_hash_hex(&h, key);
  CHECK_STR(key, "8703b8d62261cdfa75b2eb7edf282aa2");
  /* fields are delimited */
  char k1[33], k2[33];
  wf_hash_init(&h);
  wf_hash_str(&h, "ab");
  wf_hash_str(&h, "c");
  wf_hash_hex(&h, k1);
  wf_hash_init(&h);
  wf_hash_str(&h, "a");
  wf_hash_str(&h, "bc");
  wf_hash_hex(&h, k2);
  CHECK(strcmp(k1, k2) != 0);
}

static void test_dump(void) {
  CHECK_INT(wf_dump_in("ir,cuda", "ir"), 1);
  CHECK_INT(wf_dump_in("ir,cuda", "cuda"), 1);
  CHECK_INT(wf_dump_in("ir,cuda", "ad"), 0);
  CHECK_INT(wf_dump_in("load", "ad"), 0); /* whole items, not substrings */
  CHECK_INT(wf_dump_in("llvm_x", "llvm"), 0);
  CHECK_INT(wf_dump_in("time", "time"), 1);
  CHECK_INT(wf_dump_in("ad,", "ad"), 1);
  CHECK_INT(wf_dump_in(",ad", "ad"), 1);
  CHECK_INT(wf_dump_in("", "ad"), 0);
  CHECK_INT(wf_dump_in(NULL, "ad"), 0);
  CHECK_INT(wf_dump_in("ir", ""), 0);
}

int main(void) {
  test_arena();
  test_sbuf();
  test_hash();
  test_dump();
  WTEST_DONE();
}
