/*
** test_pool.c -- the launch thread pool (src/runtime/pool.c) on its own:
** jobs run every index once, from workers spinning after a job, asleep,
** or woken ahead by wf_pool_wake; an idle pool sleeps (its workers do not
** keep spinning after a job or a wake).
*/
#include <stdint.h>
#include <time.h>

#include "runtime/wf_launch.h"
#include "wtest.h"

#define N 20000

static int32_t hits[N];

/* the smallest chunk but the one at the end, and the largest */
static int64_t small = N, large = 0;

/* hits[i] += 1 over [begin, end), a little work per index */
static void body(void *job, int64_t begin, int64_t end) {
  (void)job;
  for (int64_t i = begin; i < end; i++)
    __atomic_fetch_add(&hits[i], 1, __ATOMIC_RELAXED);
  int64_t n = end - begin, s = __atomic_load_n(&small, __ATOMIC_RELAXED);
  while (end < N && n < s &&
         !__atomic_compare_exchange_n(&small, &s, n, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  int64_t l = __atomic_load_n(&large, __ATOMIC_RELAXED);
  while (n > l &&
         !__atomic_compare_exchange_n(&large, &l, n, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

static int all_ran(int times) {
  for (int i = 0; i < N; i++)
    if (hits[i] != times) return 0;
  return 1;
}

static double seconds(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pause_ms(int ms) {
  struct timespec t = {0, ms * 1000000L};
  nanosleep(&t, NULL);
}

int main(void) {
  wf_pool *p = wf_pool_new(3);
  CHECK(p != NULL);
  if (!p) WTEST_DONE();
  CHECK_INT(wf_pool_size(p), 3);
  CHECK(wf_pool_new(1) == NULL);
  wf_pool_wake(NULL); /* no pool: nothing to wake */

  /* back to back: the workers are spinning from the last job */
  int times = 0;
  for (int r = 0; r < 5; r++)
    wf_pool_run(p, N, 1, body, NULL, NULL), times++;
  CHECK(all_ran(times));
  /* asleep (past their spin), then woken by the job */
  pause_ms(20);
  wf_pool_run(p, N, 1, body, NULL, NULL), times++;
  CHECK(all_ran(times));
  /* woken ahead of the job, while asleep and while spinning */
  pause_ms(20);
  wf_pool_wake(p);
  wf_pool_run(p, N, 1, body, NULL, NULL), times++;
  wf_pool_wake(p);
  wf_pool_wake(p);
  /* chunks of N / 48 at most, shrinking towards the end, but to no fewer
  ** than grain indices */
  small = N, large = 0;
  wf_pool_run(p, N, 7, body, NULL, NULL), times++;
  CHECK(all_ran(times));
  CHECK(small >= 7 && small < N / 48);
  CHECK(large <= (N + 47) / 48);
  /* a wake without a job runs nothing, and the next job runs once */
  wf_pool_wake(p);
  pause_ms(5);
  CHECK(all_ran(times));
  wf_pool_run(p, N, 1, body, NULL, NULL), times++;
  CHECK(all_ran(times));

  /* idle after a job and a wake: the workers spin for some microseconds,
  ** then sleep; spinning on they would take ~2 x 100 ms of CPU here */
  wf_pool_run(p, N, 1, body, NULL, NULL), times++;
  wf_pool_wake(p);
  double c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
  pause_ms(100);
  double idle = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
  CHECK(idle < 0.03);
  if (idle >= 0.03) fprintf(stderr, "idle pool used %.1f ms of CPU in 100 ms\n", idle * 1e3);
  CHECK(all_ran(times));

  wf_pool_free(p);
  WTEST_DONE();
}
