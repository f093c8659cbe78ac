/*
** device_cpu.c -- the host device: 64-byte-aligned allocation, memcpy and
** pattern fill.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime/rt.h"

static int cpu_count(wf_rt *rt) {
  (void)rt;
  return 1;
}

/* Blocks of at least this many bytes are mapped on their own and unmapped
** when freed. glibc's malloc raises its mmap threshold after each large
** free (up to 32 MB), after which big arrays come from the heap and their
** pages may never go back to the system; a dropped array must. */
#define CPU_MAP_MIN ((size_t)4 << 20)

/* The allocated size: whole cache lines, so vector loads past the last
** element stay inside the block. 0 when the size overflows. */
static size_t cpu_block_size(size_t nbytes) {
  size_t n = (nbytes + WF_ALIGN - 1) / WF_ALIGN * WF_ALIGN;
  if (n < nbytes) return 0;
  return n ? n : WF_ALIGN;
}

/* A mapped block starts on a 2 MB boundary and asks for transparent huge
** pages (honoured where the system's setting is madvise or always): the
** kernels that read big arrays at random (neighbour and mesh queries,
** gathers) then miss the TLB far less, and first touches fault 2 MB at a
** time. The slack around the aligned block goes back at once. */
#define CPU_HUGE ((size_t)2 << 20)

static void *cpu_map(size_t n) {
  const size_t len = (n + 4095) & ~(size_t)4095, total = len + CPU_HUGE;
  char *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  char *a = (char *)(((uintptr_t)p + CPU_HUGE - 1) & ~(uintptr_t)(CPU_HUGE - 1));
  if (a > p) munmap(p, (size_t)(a - p));
  if (p + total > a + len) munmap(a + len, (size_t)(p + total - (a + len)));
#ifdef MADV_HUGEPAGE
  madvise(a, len, MADV_HUGEPAGE);
#endif
  return a;
}

static void cpu_free_block(void *p, size_t n) {
  if (n >= CPU_MAP_MIN)
    munmap(p, n);
  else
    free(p);
}

/* Frees the block and the header; needs no runtime, so it may run after
** weft_close (a DLPack consumer holding the last reference). */
static void cpu_release(wf_buffer *b) {
  cpu_free_block(b->ptr, cpu_block_size(b->nbytes));
  free(b);
}

static int cpu_buffer_new(wf_rt *rt, int32_t dev, size_t nbytes, wf_buffer **out) {
  (void)dev;
  wf_buffer *b = malloc(sizeof *b);
  void *p = NULL;
  size_t n = cpu_block_size(nbytes);
  if (n >= CPU_MAP_MIN) /* 2 MB aligned, so WF_ALIGN aligned */
    p = cpu_map(n);
  else if (n && posix_memalign(&p, WF_ALIGN, n) != 0) {
    p = NULL;
  }
  if (!p || !b) {
    if (p) cpu_free_block(p, n);
    free(b);
    return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: out of memory allocating %zu bytes on cpu", nbytes);
  }
  b->refcount = 1;
  b->ptr = p;
  b->nbytes = nbytes;
  b->device = WF_DEVICE_CPU;
  b->flags = 0;
  b->release = cpu_release;
  b->ctx = NULL;
  *out = b;
  return WEFT_OK;
}

static int cpu_copy(wf_rt *rt, int32_t dst_dev, void *dst, int32_t src_dev, const void *src,
                    size_t nbytes) {
  (void)rt;
  (void)dst_dev;
  (void)src_dev;
  if (nbytes) memmove(dst, src, nbytes);
  return WEFT_OK;
}

/* Write the pattern once, then double the filled prefix with memcpy: log2
** steps of large copies instead of count small ones. */
static int cpu_fill(wf_rt *rt, int32_t dev, void *dst, size_t count, const void *value,
                    size_t elsize) {
  (void)rt;
  (void)dev;
  if (count == 0) return WEFT_OK;
  unsigned char *d = dst;
  const unsigned char *v = value;
  size_t total = count * elsize;
  int same = 1;
  for (size_t i = 1; i < elsize; i++)
    same &= v[i] == v[0];
  if (same) {
    memset(d, v[0], total);
    return WEFT_OK;
  }
  memcpy(d, v, elsize);
  size_t done = elsize;
  while (done < total) {
    size_t n = done <= total - done ? done : total - done;
    memcpy(d + done, d, n);
    done += n;
  }
  return WEFT_OK;
}

static const wf_device_ops cpu_ops = {
    "cpu", cpu_count, cpu_buffer_new, cpu_copy, cpu_fill,
};

const wf_device_ops *wf_device_cpu(void) {
  return &cpu_ops;
}
