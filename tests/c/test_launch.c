/*
** test_launch.c -- wf_cpu_launch in src/runtime without the CPU backend:
** kernels written in C against the ABI of src/ir/abi.h run over their
** grid; the host's hooks around long launches belong to one runtime's
** weft_State (its wf_intr), not to the process.
*/
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "runtime/rt.h"
#include "runtime/wf_launch.h"
#include "wtest.h"

#define N 5000

typedef struct args {
  int32_t *out;
  int64_t fail_at; /* -1: none */
} args;

/* out[t] += t + 1 for each linear index; fails at fail_at. */
static void kernel(const void *a, int64_t begin, int64_t end, wf_launch_ctx *ctx) {
  const args *A = a;
  for (int64_t t = begin; t < end; t++) {
    if (t == A->fail_at) {
      int32_t zero = 0;
      if (__atomic_compare_exchange_n(&ctx->error, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        snprintf(ctx->msg, sizeof ctx->msg, "k.lua:3: failed at %lld", (long long)t);
      return;
    }
    A->out[t] += (int32_t)(t + 1);
  }
}

typedef struct hooks {
  int unblocks, reblocks;
  void *token_seen;
} hooks;
/* The hooks take no argument: the test's one counter. */
static hooks H;
static int token_value;
static void *unblock(void) {
  H.unblocks++;
  return &token_value;
}
static void reblock(void *token) {
  H.reblocks++;
  H.token_seen = token;
}

static int all_ran(const int32_t *out, int times) {
  for (int i = 0; i < N; i++)
    if (out[i] != times * (i + 1)) return 0;
  return 1;
}

int main(void) {
  static int32_t out[N];
  wf_rt *rt1 = wf_rt_new(), *rt2 = wf_rt_new();
  CHECK(rt1 && rt2);
  if (!rt1 || !rt2) WTEST_DONE();
  wf_rt_set_num_threads(rt1, 4);
  wf_rt_set_num_threads(rt2, 4);
  args A = {out, -1};
  int64_t n = N;

  /* a long launch on the pool: every index once, no hooks set yet */
  CHECK_INT(wf_cpu_launch(rt1, (void *)kernel, 1, &n, &A, 100000), WEFT_OK);
  CHECK(all_ran(out, 1));
  CHECK_INT(H.unblocks, 0);

  /* hooks on rt1's interrupt request: rt1's long launches call them */
  wf_intr *in = wf_rt_intr(rt1);
  in->unblock = unblock;
  in->reblock = reblock;
  CHECK_INT(wf_cpu_launch(rt1, (void *)kernel, 1, &n, &A, 100000), WEFT_OK);
  CHECK(all_ran(out, 2));
  CHECK_INT(H.unblocks, 1);
  CHECK_INT(H.reblocks, 1);
  CHECK(H.token_seen == &token_value);
  /* a short one does not */
  CHECK_INT(wf_cpu_launch(rt1, (void *)kernel, 1, &n, &A, 1), WEFT_OK);
  CHECK(all_ran(out, 3));
  CHECK_INT(H.unblocks, 1);
  /* nor does another runtime: the hooks are not the process's */
  CHECK_INT(wf_cpu_launch(rt2, (void *)kernel, 1, &n, &A, 100000), WEFT_OK);
  CHECK(all_ran(out, 4));
  CHECK_INT(H.unblocks, 1);
  CHECK_INT(H.reblocks, 1);

  /* a 2-D grid covers d0 * d1 indices */
  memset(out, 0, sizeof out);
  int64_t dims[2] = {50, 100};
  CHECK_INT(wf_cpu_launch(rt2, (void *)kernel, 2, dims, &A, 100000), WEFT_OK);
  CHECK(all_ran(out, 1));

  /* a failing kernel's message becomes the runtime's */
  A.fail_at = 1234;
  CHECK_INT(wf_cpu_launch(rt2, (void *)kernel, 1, &n, &A, 1), WEFT_ERRRUN);
  CHECK_STR(wf_rt_errmsg(rt2), "k.lua:3: failed at 1234");
  /* bad grids are argument errors */
  int64_t neg = -1;
  CHECK_INT(wf_cpu_launch(rt2, (void *)kernel, 1, &neg, &A, 1), WEFT_ERRARG);
  CHECK_INT(wf_cpu_launch(rt2, (void *)kernel, 5, dims, &A, 1), WEFT_ERRARG);
  /* a pending interrupt stops the launch before it starts */
  A.fail_at = -1;
  memset(out, 0, sizeof out);
  __atomic_store_n(&wf_rt_intr(rt2)->pending, 1, __ATOMIC_RELEASE);
  CHECK_INT(wf_cpu_launch(rt2, (void *)kernel, 1, &n, &A, 100000), WEFT_ERRINTR);
  CHECK_STR(wf_rt_errmsg(rt2), "interrupted");
  CHECK_INT(out[0], 0);
  CHECK_INT(wf_cpu_launch(rt2, (void *)kernel, 1, &n, &A, 100000), WEFT_OK);

  wf_rt_free(rt1);
  wf_rt_free(rt2);
  WTEST_DONE();
}
