/*
** pool.c -- the persistent thread pool of CPU launches.
**
** nthreads - 1 workers sleep on a generation counter (a futex word). A job
** is published by filling in the job fields and bumping the generation;
** every worker, and the caller, then claim chunks of the index range from
** an atomic counter until it runs dry, so uneven chunks balance themselves;
** the last chunks are smaller, so the threads run out of work together.
** The caller returns once the `busy` count of workers in the job reaches 0.
**
**   caller:  fill job, next = 0, busy = nworkers, gen++ -> [wake sleepers]
**            claim chunks ... ; wait busy == 0 (spin, then futex)
**   worker:  wait gen != seen (spin, then futex); claim chunks ...;
**            busy-- -> [wake the caller if it sleeps]
**
** Both sides spin briefly before sleeping, so back-to-back launches do not
** pay a futex wake-up. A sleeper announces itself (sleepers / waiting)
** before re-checking the word it waits on; the other side bumps the word
** before reading the announcement (both sequentially consistent), so a
** wake-up is never lost.
**
** A caller that knows a job is coming (a mesh refit, before it checks the
** points) can wake the workers ahead of it (wf_pool_wake): a sleeper woken
** without a job spins again, and a spinner bumped (poke) spins anew, then
** either sleeps again, so the job finds them spinning instead of paying a
** wake-up (tens of microseconds under a hypervisor) after it is
** published. It is a hint: a wake that misses a worker on its way to
** sleep changes nothing.
*/
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/wf_launch.h"

#define SPIN_ITERS 4000 /* ~ tens of microseconds of pause instructions */

struct wf_pool {
  int nworkers;
  pthread_t *threads;
  /* the current job (written by the caller before gen is bumped) */
  wf_pool_fn fn;
  void *job;
  int64_t total, chunk, grain, tail; /* tail: 4 per thread (work) */
  const int32_t *stop;
  int quit;
  _Atomic int64_t next;
  /* synchronisation words */
  _Atomic uint32_t gen;     /* futex: bumped per job (and at shutdown) */
  _Atomic int32_t sleepers; /* workers inside futex_wait(gen) */
  _Atomic uint32_t busy;    /* futex: workers still in the current job */
  _Atomic int32_t waiting;  /* the caller is inside futex_wait(busy) */
  _Atomic uint32_t poke;    /* bumped by wf_pool_wake: spinners spin anew */
};

static void futex_wait(_Atomic uint32_t *addr, uint32_t val) {
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr, int n) {
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Claim and run chunks until the range is exhausted or a thread failed:
** p->chunk indices, or once fewer than p->tail chunks are left, the
** remainder over p->tail (at least grain). A thread that takes the last
** full chunk no longer runs on alone for a chunk's time while the others
** wait (a mean 45 of a mesh refit's 960 us on 2 threads): the chunks
** shrink towards the end instead. */
static void work(wf_pool *p) {
  int64_t b = atomic_load_explicit(&p->next, memory_order_relaxed);
  for (;;) {
    if (p->stop && __atomic_load_n(p->stop, __ATOMIC_RELAXED)) return;
    int64_t c;
    do {
      if (b >= p->total) return;
      c = (p->total - b) / p->tail;
      c = c >= p->chunk ? p->chunk : c > p->grain ? c : p->grain;
    } while (!atomic_compare_exchange_weak_explicit(&p->next, &b, b + c, memory_order_relaxed,
                                                    memory_order_relaxed));
    p->fn(p->job, b, b + c < p->total ? b + c : p->total);
    b = atomic_load_explicit(&p->next, memory_order_relaxed);
  }
}

/* Wait until gen moves past seen: spin first (anew when poked), then
** sleep on the futex; woken with gen unchanged (wf_pool_wake, or
** spuriously), spin again. */
static uint32_t wait_gen(wf_pool *p, uint32_t seen) {
  for (;;) {
    uint32_t k = atomic_load_explicit(&p->poke, memory_order_relaxed);
    for (int i = 0; i < SPIN_ITERS; i++) {
      uint32_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
      if (g != seen) return g;
      uint32_t kn = atomic_load_explicit(&p->poke, memory_order_relaxed);
      if (kn != k) k = kn, i = 0;
      cpu_relax();
    }
    atomic_fetch_add(&p->sleepers, 1);
    uint32_t g = atomic_load(&p->gen);
    if (g == seen) futex_wait(&p->gen, seen);
    atomic_fetch_sub(&p->sleepers, 1);
    g = atomic_load_explicit(&p->gen, memory_order_acquire);
    if (g != seen) return g;
  }
}

static void *worker_main(void *arg) {
  wf_pool *p = arg;
  uint32_t seen = 0;
  for (;;) {
    seen = wait_gen(p, seen);
    if (p->quit) return NULL;
    work(p);
    if (atomic_fetch_sub(&p->busy, 1) == 1 && atomic_load(&p->waiting)) futex_wake(&p->busy, 1);
  }
}

wf_pool *wf_pool_new(int nthreads) {
  if (nthreads < 2) return NULL;
  wf_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->threads = calloc((size_t)nthreads - 1, sizeof *p->threads);
  if (!p->threads) {
    free(p);
    return NULL;
  }
  for (int i = 0; i < nthreads - 1; i++) {
    if (pthread_create(&p->threads[i], NULL, worker_main, p) != 0) break;
    p->nworkers++;
  }
  if (p->nworkers == 0) {
    free(p->threads);
    free(p);
    return NULL;
  }
  return p;
}

int wf_pool_size(const wf_pool *p) {
  return p ? p->nworkers + 1 : 1;
}

/* Bump a word the workers watch (gen: a job or the quit request; poke:
** wf_pool_wake) and wake the sleepers. */
static void bump(wf_pool *p, _Atomic uint32_t *word) {
  atomic_fetch_add(word, 1);
  if (atomic_load(&p->sleepers) > 0) futex_wake(&p->gen, p->nworkers);
}

static void publish(wf_pool *p) {
  bump(p, &p->gen);
}

void wf_pool_wake(wf_pool *p) {
  if (p) bump(p, &p->poke);
}

void wf_pool_free(void *pool) {
  wf_pool *p = pool;
  if (!p) return;
  p->quit = 1;
  publish(p);
  for (int i = 0; i < p->nworkers; i++)
    pthread_join(p->threads[i], NULL);
  free(p->threads);
  free(p);
}

void wf_pool_run(wf_pool *p, int64_t total, int64_t grain, wf_pool_fn fn, void *job,
                 const int32_t *stop) {
  if (total <= 0) return;
  int nthreads = wf_pool_size(p);
  /* ~16 chunks per thread: a thread preempted mid-chunk delays the end of
  ** the launch by at most one small chunk */
  int64_t chunk = (total + nthreads * 16 - 1) / (nthreads * 16);
  if (chunk < grain) chunk = grain;
  if (chunk < 1) chunk = 1;
  if (!p || chunk >= total) {
    fn(job, 0, total);
    return;
  }
  p->fn = fn;
  p->job = job;
  p->total = total;
  p->chunk = chunk;
  p->grain = grain < 1 ? 1 : grain;
  p->tail = 4 * (int64_t)nthreads;
  p->stop = stop;
  atomic_store_explicit(&p->next, 0, memory_order_relaxed);
  atomic_store_explicit(&p->busy, (uint32_t)p->nworkers, memory_order_relaxed);
  publish(p);
  work(p);
  /* wait for the workers: spin, then sleep until the last one wakes us */
  for (int i = 0; i < SPIN_ITERS; i++) {
    if (atomic_load_explicit(&p->busy, memory_order_acquire) == 0) return;
    cpu_relax();
  }
  for (;;) {
    atomic_store(&p->waiting, 1);
    uint32_t b = atomic_load(&p->busy);
    if (b != 0) futex_wait(&p->busy, b);
    atomic_store(&p->waiting, 0);
    if (atomic_load_explicit(&p->busy, memory_order_acquire) == 0) return;
  }
}
