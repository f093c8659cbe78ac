/*
** test_capi_fuzz.c -- the embedding API under random arguments: tagged
** values of every type (and invalid ones) with random shapes, strides,
** pointers and names, random grid dimensions, NULL arrays. Every call must
** return (no crash; `make test SANITIZE=1` also checks the memory), and a
** failing call must leave a message of weft's own: its first line names
** the problem, not a Lua internal ("attempt to call ...").
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/wf_launch.h"
#include "interop/dlpack.h"
#include "weft.h"
#include "wtest.h"

/* keep the CPU launch entry point (reached through ffi.C) in the binary */
__attribute__((used)) static int (*const keep_launch)(wf_rt *, void *, int, const int64_t *,
                                                      const void *, int64_t) = wf_cpu_launch;

static unsigned long long rs = 0x2545f4914f6cdd1dULL;
static unsigned long long rnd(void) { /* xorshift64: the same calls every run */
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return rs;
}

static const char *names[] = {NULL,      "",         "x",       "k",         "a",        "vec3",
                              "float32", "nope",     "k.bad",   "math.huge", "sim.step", "weft",
                              "print",   "bad type", "float64", "int8"};
#define NNAMES (int)(sizeof names / sizeof names[0])
static float buf[64];

static void rand_arg(weft_Arg *a) {
  memset(a, 0, sizeof *a);
  a->type = (int)(rnd() % 14) - 1; /* -1 and 12 are not types */
  if (a->type == WEFT_ARG_DLPACK || a->type == WEFT_ARG_DLPACK_VERSIONED) a->type = WEFT_ARG_NIL;
  a->ndim = (int)(rnd() % 7) - 1;
  a->device = (int)(rnd() % 4) - 2;
  a->i = (rnd() % 3 == 0) ? (int64_t)rnd() : (int64_t)(rnd() % 8) - 2;
  a->d = (double)(rnd() % 100) - 3.5;
  a->s = names[rnd() % NNAMES];
  a->p = (rnd() % 3) ? buf : NULL;
  for (int k = 0; k < 4; k++) {
    a->shape[k] = (rnd() % 4 == 0) ? (int64_t)(rnd() >> 1) : (int64_t)(rnd() % 6) - 1;
    a->strides[k] = (rnd() % 4 == 0) ? (int64_t)(rnd() % 64) : 0;
  }
}

/* The first line of a failing call's message must be weft's own. */
static void check_message(weft_State *W, int rc, int which) {
  if (rc == 0) return;
  const char *m = weft_errmsg(W);
  CHECK(m != NULL && m[0] != 0);
  if (!m) return;
  size_t n = strcspn(m, "\n");
  char first[512];
  snprintf(first, sizeof first, "%.*s", (int)(n < 511 ? n : 511), m);
  if (strstr(first, "attempt to") || strstr(first, "bad argument")) {
    fprintf(stderr, "call kind %d: internal message: %s\n", which, first);
    CHECK(0);
  }
}

int main(void) {
  CHECK(keep_launch != NULL); /* a use the linker keeps */
  weft_State *W = weft_open();
  CHECK(W != NULL);
  if (!W) WTEST_DONE();
  CHECK_INT(weft_dostring(W, "k = weft.kernel{ x = weft.array(weft.float32), a = weft.float32,\n"
                             "  function(x, a) local i = weft.tid(); x[i] = x[i] + a end }\n"
                             "a = weft.zeros(16)\n"
                             "function f(...) return select('#', ...), ... end\n"),
            0);
  int failed = 0;
  for (int it = 0; it < 5000; it++) {
    weft_Arg args[4], res[3];
    int64_t dims[4];
    int na = (int)(rnd() % 5);
    for (int i = 0; i < na; i++)
      rand_arg(&args[i]);
    int nd = (int)(rnd() % 6) - 1;
    for (int k = 0; k < 4; k++)
      dims[k] = (rnd() % 5 == 0) ? (int64_t)rnd() : (int64_t)(rnd() % 20) - 2;
    const char *name = names[rnd() % NNAMES];
    int which = (int)(rnd() % 7), rc = 0;
    switch (which) {
    case 0: rc = weft_launch(W, name, nd, (rnd() % 4) ? dims : NULL, na, na ? args : NULL); break;
    case 1: rc = weft_launch_io(W, name, nd, dims, na / 2, args, na - na / 2, args + na / 2); break;
    case 2: rc = weft_call(W, name, na, args, (int)(rnd() % 4), res); break;
    case 3:
      if (na) rc = weft_set(W, name, &args[0]);
      break;
    case 4: {
      weft_Arg o;
      rc = weft_get(W, name, &o);
      if (rc == 0 && (o.type == WEFT_ARG_REF || o.type == WEFT_ARG_ARRAY)) weft_unref(W, o.i);
      break;
    }
    case 5:
      if (na) {
        int versioned = (int)(rnd() % 2);
        void *m = weft_export_value(W, &args[0], versioned, (int)(rnd() % 2));
        if (m && versioned) ((DLManagedTensorVersioned *)m)->deleter(m);
        if (m && !versioned) ((DLManagedTensor *)m)->deleter(m);
        rc = m ? 0 : 1;
      }
      break;
    case 6:
      rc = weft_wrap(W, name, (rnd() % 3) ? buf : NULL, names[rnd() % NNAMES], nd, dims,
                     names[rnd() % NNAMES]);
      break;
    }
    failed += rc != 0;
    check_message(W, rc, which);
  }
  /* most random calls fail; some succeed (f, print, get/set of globals) */
  CHECK(failed > 1000 && failed < 5000);
  /* the state still works (the calls may have replaced any global, weft too) */
  CHECK_INT(weft_dostring(W, "local w = require 'weft'\n"
                             "local k = w.kernel{ x = w.array(w.float32), function(x)\n"
                             "  local i = w.tid(); x[i] = x[i] + 2.0 end }\n"
                             "local a = w.zeros(4); w.launch(k, 4, { a }); assert(a[3] == 2)"),
            0);
  weft_close(W);
  WTEST_DONE();
}
