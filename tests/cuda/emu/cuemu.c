/*
** cuemu.c -- an emulated CUDA device: the Driver API entry points weft
** resolves (and a few neighbours) plus an NVRTC pass-through, in one host
** library. scripts/cuda-emu points WEFT_LIBCUDA and WEFT_NVRTC at it, so
** weft's real src/runtime/device_cuda.c and src/cuda/nvrtc.c run against it.
**
**   NVRTC      every call goes to the real libnvrtc; the PTX handed back
**              is the real PTX followed by the CUDA C source as "//|"
**              comment lines (so it survives weft's disk cache).
**   modules    cuModuleLoadData takes that PTX: the .entry parameter lists
**              come from the PTX, the code from the source, built for the
**              host with tests/cuda/shim.h (c++ -shared, cached by content
**              hash) and dlopened. A trampoline per entry runs grid x block
**              threads one after another and reports the host signature,
**              which must match the PTX's (count, size, alignment).
**   memory     device memory is one reserved region, PROT_NONE unless a
**              kernel or a copy of the emulator is running: a host read of
**              a device pointer faults, and the SIGSEGV handler says so.
**              A kernel's fault (any address: a wild pointer, a stale id)
**              ends that kernel with CUDA_ERROR_ILLEGAL_ADDRESS, sticky on
**              the context, as on a GPU; the process goes on.
**              Allocations are tracked: copies out of bounds, double
**              frees, frees of unknown pointers and leaks at context
**              destroy are reported ("weft-cuda-emu: ..." on stderr).
**   streams    a worker thread per stream runs its queue in order; an op
**              waits for its dependencies (legacy default stream, events).
**              Synchronous copies wait for the blocking streams first.
**   graphs     capture records the ops of a stream; launch replays them.
**              Unsafe calls during a global capture fail (as on a GPU).
**   faults     WEFT_CUDA_EMU_FAIL_ALLOC / _LAUNCH / _MODULE = N fail the
**              Nth call counted from when the variable got its value.
**   diagnosis  WEFT_CUDA_EMU_DELAY_MS: kernels start late (missing waits
**              show); _SYNC=1: every op is done when its call returns (no
**              kernel keeps the heap open while host code runs); _CONTINUE=1:
**              a host read of device memory is reported (with the faulting
**              frames and mapping), then memory stays open and the run goes on.
**
** It is a test device: process-global state is its nature (one driver per
** process), kept in one struct G behind one mutex.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#ifndef WEFT_EMU_SHIM
#define WEFT_EMU_SHIM "tests/cuda/shim.h"
#endif
#ifndef WEFT_EMU_CXX
#define WEFT_EMU_CXX "c++"
#endif
#ifndef WEFT_CUDA_HOME
#define WEFT_CUDA_HOME "/usr/local/cuda"
#endif

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
  E_OK = 0,
  E_INVALID_VALUE = 1,
  E_OUT_OF_MEMORY = 2,
  E_NOT_INITIALIZED = 3,
  E_DEINITIALIZED = 4,
  E_NO_DEVICE = 100,
  E_INVALID_DEVICE = 101,
  E_INVALID_IMAGE = 200,
  E_INVALID_CONTEXT = 201,
  E_INVALID_PTX = 218,
  E_INVALID_HANDLE = 400,
  E_ILLEGAL_STATE = 401,
  E_NOT_FOUND = 500,
  E_NOT_READY = 600,
  E_ILLEGAL_ADDRESS = 700,
  E_LAUNCH_OUT_OF_RESOURCES = 701,
  E_LAUNCH_FAILED = 719,
  E_NOT_SUPPORTED = 801,
  E_CAPTURE_UNSUPPORTED = 900,
  E_CAPTURE_INVALIDATED = 901,
  E_UNKNOWN = 999
};

static const struct {
  int code;
  const char *name, *msg;
} errtab[] = {
    {E_OK, "CUDA_SUCCESS", "no error"},
    {E_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {E_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {E_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {E_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {E_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {E_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {E_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {E_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {E_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {E_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {E_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation is not permitted now"},
    {E_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {E_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {E_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {E_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {E_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {E_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {E_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {E_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {E_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* ---- objects ------------------------------------------------------------ */
enum { M_CTX = 0x43545831, M_STREAM, M_EVENT, M_MODULE, M_FUNC, M_GRAPH, M_EXEC };

typedef struct emu_ctx emu_ctx;
typedef struct emu_stream emu_stream;
typedef struct emu_module emu_module;

typedef struct emu_param {
  unsigned size, align, kind; /* kind (host side): 0 value, 1 wf_arr, 2 pointer */
} emu_param;

typedef struct emu_func {
  uint32_t magic;
  emu_module *mod;
  char name[128];
  int nparams;
  emu_param *params;
  int (*run)(void *const *, const unsigned *, char *, unsigned long);
} emu_func;

struct emu_module {
  uint32_t magic;
  emu_ctx *ctx;
  void *dl;
  int nfuncs;
  emu_func *funcs;
  emu_module *next;
};

typedef struct emu_event {
  uint32_t magic;
  emu_ctx *ctx;
  unsigned flags;
  emu_stream *st;         /* stream of the last record, NULL if never recorded */
  uint64_t idx;           /* that record's position in st (complete when done >= idx) */
  uint64_t gen;           /* records made; the op of record gen sets t_ns */
  int64_t t_ns;           /* time of the last completed record */
  uint64_t t_gen;         /* which record t_ns belongs to */
  struct emu_event *next; /* in the context */
} emu_event;

enum { OP_KERNEL, OP_COPY, OP_SET, OP_EVREC, OP_NOP };

typedef struct emu_dep {
  emu_stream *st;
  uint64_t n;
} emu_dep;

/* A kernel op's parameter values: each at a 16-aligned offset, 4 KB in all
** (the Driver API's limit) plus the padding. */
#define BLOB_SIZE(nparams) (4096 + 16 * (size_t)(nparams))

typedef struct emu_op {
  int kind;
  struct emu_op *next;
  int ndeps;
  emu_dep *deps;
  /* kernel */
  emu_func *fn;
  unsigned dims[6];
  char *blob;  /* parameter values, nparams slots of 16-aligned bytes */
  void **ptrs; /* into blob */
  /* copy / set */
  char *dst;
  const char *src;
  size_t n, pitch, width, height;
  unsigned value, elsize;
  long delay_ms; /* kernels: WEFT_CUDA_EMU_DELAY_MS when launched */
  /* event record */
  emu_event *ev;
  uint64_t gen;
} emu_op;

typedef struct emu_graph {
  uint32_t magic;
  emu_op *head, *tail;
} emu_graph;

struct emu_stream {
  uint32_t magic;
  emu_ctx *ctx;
  unsigned flags; /* 1: non-blocking */
  int legacy;
  pthread_t th;
  int started, quit, dead;
  pthread_cond_t cv;
  emu_op *head, *tail;
  uint64_t enq, done;
  int capturing, cap_mode, cap_invalid;
  emu_graph *cap;
  emu_stream *next; /* in the context */
};

struct emu_ctx {
  uint32_t magic;
  int dev, refs;
  int sticky; /* a failed kernel poisons the context, as on a GPU */
  emu_stream *legacy, *streams;
  emu_module *modules;
  emu_event *events;
};

typedef struct emu_alloc {
  uintptr_t base;
  size_t size, span; /* asked for; reserved (pages + a guard page) */
  int dev;
  struct emu_alloc *next;
} emu_alloc;

typedef struct emu_prog {
  void *prog;
  char *src;
  char *ptx;
  size_t ptxsize;
  struct emu_prog *next;
} emu_prog;

typedef struct emu_fault {
  char seen[32];
  long count;
} emu_fault;

/* What tests read through wf_cuemu_stats (keep in step with the specs). */
typedef struct wf_cuemu_stats {
  int64_t allocs_live, bytes_live, leaks, misuse, launches, host_compiles, faults;
} wf_cuemu_counts;

#define HEAP_SIZE (64ULL << 30)
#define PAGE 4096
#define QUARANTINE 256

static struct {
  pthread_mutex_t mu;
  pthread_cond_t done_cv;
  int inited, ndev;
  size_t memlimit;
  emu_ctx *ctx[8];
  /* device heap */
  char *heap;
  size_t top;
  emu_alloc *live, *quarantine, *freeblk;
  int nquar;
  pthread_mutex_t pmu; /* protection changes */
  int active;
  int cont; /* WEFT_CUDA_EMU_CONTINUE=1: report a host read, then leave memory open */
  /* pinned host memory */
  emu_alloc *pinned;
  /* graph capture */
  int ncap_global;
  /* nvrtc pass-through */
  void *nvrtc;
  emu_prog *progs;
  /* faults */
  emu_fault f_alloc, f_launch, f_module;
  /* diagnostics */
  wf_cuemu_counts st;
  char last[1024];
  struct sigaction old_segv;
} G = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, .pmu = PTHREAD_MUTEX_INITIALIZER};

static __thread emu_ctx *tls_ctx;
static __thread int tls_in_kernel;
static __thread sigjmp_buf tls_fault; /* run_op's, for a kernel's fault */

/* ---- diagnostics -------------------------------------------------------- */
/* A misuse the emulator caught: stderr, the last message, the counter. */
__attribute__((format(printf, 1, 2))) static void misuse(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(G.last, sizeof G.last, fmt, ap);
  va_end(ap);
  __atomic_fetch_add(&G.st.misuse, 1, __ATOMIC_RELAXED);
  fprintf(stderr, "weft-cuda-emu: %s\n", G.last);
}

static const char *errname(int r) {
  for (size_t i = 0; i < sizeof errtab / sizeof errtab[0]; i++)
    if (errtab[i].code == r) return errtab[i].name;
  return NULL;
}

/* ---- faults ------------------------------------------------------------- */
/* Fail the Nth call since the variable got its current value (once). */
static int fault(emu_fault *f, const char *var) {
  const char *v = getenv(var);
  if (!v || !*v) {
    f->seen[0] = 0;
    return 0;
  }
  if (strncmp(v, f->seen, sizeof f->seen) != 0) {
    snprintf(f->seen, sizeof f->seen, "%s", v);
    f->count = 0;
  }
  long n = atol(v);
  if (n <= 0 || ++f->count != n) return 0;
  G.st.faults++;
  fprintf(stderr, "weft-cuda-emu: injected fault (%s=%s)\n", var, v);
  return 1;
}

/* ---- the device heap ---------------------------------------------------- */
static int in_heap(uintptr_t p) {
  return G.heap && p >= (uintptr_t)G.heap && p < (uintptr_t)G.heap + HEAP_SIZE;
}

/* Device memory is readable only while the emulator uses it. */
static void dev_enter(void) {
  pthread_mutex_lock(&G.pmu);
  if (G.active++ == 0 && G.top) mprotect(G.heap, G.top, PROT_READ | PROT_WRITE);
  pthread_mutex_unlock(&G.pmu);
}
static void dev_leave(void) {
  pthread_mutex_lock(&G.pmu);
  if (--G.active == 0 && G.top && __atomic_load_n(&G.cont, __ATOMIC_RELAXED) != 2)
    mprotect(G.heap, G.top, PROT_NONE);
  pthread_mutex_unlock(&G.pmu);
}

static emu_alloc *find_in(emu_alloc *list, uintptr_t p) {
  for (emu_alloc *a = list; a; a = a->next)
    if (p >= a->base && p < a->base + (a->size ? a->size : 1)) return a;
  return NULL;
}

/* Is [p, p+n) inside one live device allocation or pinned block? */
static int range_ok(uintptr_t p, size_t n, int *pinned) {
  emu_alloc *a = find_in(G.live, p);
  if (pinned) *pinned = 0;
  if (!a && (a = find_in(G.pinned, p)) && pinned) *pinned = 1;
  return a && p + n <= a->base + a->size;
}

/* The /proc/self/maps line holding address pc, on fd 2 (what code
** faulted: a library, or anonymous memory such as JIT-compiled code). */
static void print_mapping(uintptr_t pc) {
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return;
  char buf[8192], line[512];
  size_t k = 0;
  ssize_t got;
  while ((got = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < got; i++) {
      if (buf[i] != '\n') {
        if (k + 1 < sizeof line) line[k++] = buf[i];
        continue;
      }
      line[k] = 0;
      char *end;
      uintptr_t lo = (uintptr_t)strtoull(line, &end, 16);
      uintptr_t hi = *end == '-' ? (uintptr_t)strtoull(end + 1, NULL, 16) : 0;
      if (pc >= lo && pc < hi) {
        (void)!write(2, "weft-cuda-emu: faulting code in: ", 33);
        (void)!write(2, line, k);
        (void)!write(2, "\n", 1);
      }
      k = 0;
    }
  }
  close(fd);
}

static void segv(int sig, siginfo_t *si, void *uc) {
  uintptr_t p = (uintptr_t)si->si_addr;
  if (in_heap(p)) {
    char msg[300];
    int n;
    if (tls_in_kernel)
      n = snprintf(msg, sizeof msg,
                   "weft-cuda-emu: a kernel accessed device address %#" PRIxPTR
                   " outside every allocation\n",
                   p);
    else
      n = snprintf(msg, sizeof msg,
                   "weft-cuda-emu: host code dereferenced device pointer %#" PRIxPTR
                   " (device memory is not host memory: copy it to the host first; %s thread)\n",
                   p, gettid() == getpid() ? "the main" : "another");
    if (n > 0) (void)!write(2, msg, (size_t)n);
    void *bt[48]; /* where: the frames of the faulting thread */
    backtrace_symbols_fd(bt, backtrace(bt, 48), 2);
    print_mapping((uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP]);
    if (G.cont == 1 && !tls_in_kernel) { /* diagnosis: go on, protection off */
      __atomic_store_n(&G.cont, 2, __ATOMIC_RELAXED);
      mprotect(G.heap, HEAP_SIZE, PROT_READ | PROT_WRITE);
      return;
    }
  }
  if (tls_in_kernel) { /* any address: back to run_op, which fails the kernel */
    if (!in_heap(p)) {
      char msg[200];
      int n = snprintf(msg, sizeof msg,
                       "weft-cuda-emu: a kernel accessed address %#" PRIxPTR
                       ", which is not device memory\n",
                       p);
      if (n > 0) (void)!write(2, msg, (size_t)n);
    }
    tls_in_kernel = 0;
    siglongjmp(tls_fault, 1);
  }
  sigaction(SIGSEGV, &G.old_segv, NULL); /* the fault repeats and ends the process */
  (void)sig;
  (void)uc;
}

/* ---- init --------------------------------------------------------------- */
static void *stream_main(void *arg);

static int init_locked(void) {
  if (G.inited) return E_OK;
  const char *nd = getenv("WEFT_CUDA_EMU_DEVICES");
  G.ndev = nd && *nd ? atoi(nd) : 1;
  if (G.ndev < 0) G.ndev = 0;
  if (G.ndev > 8) G.ndev = 8;
  const char *mem = getenv("WEFT_CUDA_EMU_MEMORY_MB");
  G.memlimit = (size_t)(mem && *mem ? atol(mem) : 4096) << 20;
  const char *cont = getenv("WEFT_CUDA_EMU_CONTINUE");
  G.cont = cont && *cont == '1';
  G.heap = mmap(NULL, HEAP_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (G.heap == MAP_FAILED) {
    G.heap = NULL;
    return E_OUT_OF_MEMORY;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &G.old_segv);
  void *bt[2]; /* loads the unwinder now, not inside the handler */
  backtrace(bt, 2);
  G.inited = 1;
  return E_OK;
}

EXPORT CUresult cuInit(unsigned flags) {
  if (flags != 0) return E_INVALID_VALUE;
  pthread_mutex_lock(&G.mu);
  int r = init_locked();
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuDriverGetVersion(int *v) {
  if (!v) return E_INVALID_VALUE;
  *v = 13000;
  return E_OK;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char **s) {
  const char *n = errname(r);
  if (!s) return E_INVALID_VALUE;
  *s = n;
  return n ? E_OK : E_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult r, const char **s) {
  if (!s) return E_INVALID_VALUE;
  *s = NULL;
  for (size_t i = 0; i < sizeof errtab / sizeof errtab[0]; i++)
    if (errtab[i].code == r) *s = errtab[i].msg;
  return *s ? E_OK : E_INVALID_VALUE;
}

#define NEED_INIT()                                                                                \
  do {                                                                                             \
    if (!G.inited) return E_NOT_INITIALIZED;                                                       \
  } while (0)

/* ---- devices ------------------------------------------------------------ */
EXPORT CUresult cuDeviceGetCount(int *n) {
  NEED_INIT();
  if (!n) return E_INVALID_VALUE;
  *n = G.ndev;
  return E_OK;
}

EXPORT CUresult cuDeviceGet(int *d, int ord) {
  NEED_INIT();
  if (!d) return E_INVALID_VALUE;
  if (ord < 0 || ord >= G.ndev) return E_INVALID_DEVICE;
  *d = ord;
  return E_OK;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, int dev) {
  NEED_INIT();
  if (!name || len <= 0) return E_INVALID_VALUE;
  if (dev < 0 || dev >= G.ndev) return E_INVALID_DEVICE;
  snprintf(name, (size_t)len, "weft emulated CUDA device %d (tests/cuda/emu)", dev);
  return E_OK;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
  NEED_INIT();
  if (!v) return E_INVALID_VALUE;
  if (dev < 0 || dev >= G.ndev) return E_INVALID_DEVICE;
  switch (attr) {
  case 1: *v = 1024; break;       /* max threads per block */
  case 2: *v = 1024; break;       /* max block x */
  case 5: *v = 2147483647; break; /* max grid x */
  case 16: *v = 4; break;         /* multiprocessors */
  case 75: *v = 8; break;         /* compute capability major */
  case 76: *v = 6; break;         /* minor */
  case 41: *v = 1; break;         /* unified addressing */
  default: *v = 0; break;
  }
  return E_OK;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *b, int dev) {
  NEED_INIT();
  if (!b) return E_INVALID_VALUE;
  if (dev < 0 || dev >= G.ndev) return E_INVALID_DEVICE;
  *b = G.memlimit;
  return E_OK;
}

/* ---- streams: workers and queues ---------------------------------------- */
static emu_stream *stream_new(emu_ctx *c, unsigned flags, int legacy) {
  emu_stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->magic = M_STREAM;
  s->ctx = c;
  s->flags = flags;
  s->legacy = legacy;
  pthread_cond_init(&s->cv, NULL);
  if (pthread_create(&s->th, NULL, stream_main, s) != 0) {
    free(s);
    return NULL;
  }
  s->started = 1;
  s->next = c->streams;
  c->streams = s;
  return s;
}

static int deps_ok(const emu_op *o) {
  for (int i = 0; i < o->ndeps; i++)
    if (o->deps[i].st->done < o->deps[i].n) return 0;
  return 1;
}

static void add_dep(emu_op *o, emu_stream *s, uint64_t n) {
  emu_dep *d = realloc(o->deps, sizeof *d * (size_t)(o->ndeps + 1));
  if (!d) return; /* a lost dependency only loosens the order */
  o->deps = d;
  d[o->ndeps].st = s;
  d[o->ndeps].n = n;
  o->ndeps++;
}

static void op_free(emu_op *o) {
  free(o->deps);
  free(o->blob);
  free(o->ptrs);
  free(o);
}

static emu_op *op_clone(const emu_op *o) {
  emu_op *c = malloc(sizeof *c);
  if (!c) return NULL;
  *c = *o;
  c->next = NULL;
  c->deps = NULL;
  c->ndeps = 0;
  c->blob = NULL;
  c->ptrs = NULL;
  if (o->kind == OP_KERNEL) {
    int n = o->fn->nparams;
    c->blob = malloc(BLOB_SIZE(n));
    c->ptrs = malloc(sizeof(void *) * (size_t)(n + 1));
    if (!c->blob || !c->ptrs) {
      op_free(c);
      return NULL;
    }
    memcpy(c->blob, o->blob, BLOB_SIZE(n));
    for (int i = 0; i < n; i++)
      c->ptrs[i] = c->blob + ((char *)o->ptrs[i] - o->blob);
  }
  return c;
}

/* Queue o on s (lock held): legacy-stream ordering against the blocking
** streams, then in order. A capturing stream records instead. */
static void stream_wait(emu_stream *s);

static void enqueue(emu_stream *s, emu_op *o) {
  if (s->capturing) {
    o->next = NULL;
    if (s->cap->tail)
      s->cap->tail->next = o;
    else
      s->cap->head = o;
    s->cap->tail = o;
    return;
  }
  emu_ctx *c = s->ctx;
  if (s->legacy) {
    for (emu_stream *t = c->streams; t; t = t->next)
      if (t != s && !t->legacy && !(t->flags & 1) && t->done < t->enq) add_dep(o, t, t->enq);
  } else if (!(s->flags & 1) && c->legacy->done < c->legacy->enq) {
    add_dep(o, c->legacy, c->legacy->enq);
  }
  o->next = NULL;
  if (s->tail)
    s->tail->next = o;
  else
    s->head = o;
  s->tail = o;
  s->enq++;
  pthread_cond_signal(&s->cv);
  /* WEFT_CUDA_EMU_SYNC=1: each op is done before the call returns, so no
  ** device work is in flight while host code runs, and a host read of
  ** device memory always faults (otherwise a running kernel keeps the
  ** heap readable and hides it) */
  const char *sync = getenv("WEFT_CUDA_EMU_SYNC");
  if (sync && *sync == '1') stream_wait(s);
}

/* Wait (lock held) until every blocking stream of c ran what it has now:
** what a synchronous call on the legacy default stream does first. */
static void drain_blocking(emu_ctx *c) {
  for (emu_stream *t = c->streams; t; t = t->next) {
    if (t->flags & 1) continue;
    uint64_t n = t->enq;
    while (t->done < n)
      pthread_cond_wait(&G.done_cv, &G.mu);
  }
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void do_set(const emu_op *o) {
  for (size_t r = 0; r < o->height; r++) {
    char *row = o->dst + r * o->pitch;
    for (size_t i = 0; i < o->width; i++) {
      if (o->elsize == 1)
        row[i] = (char)o->value;
      else if (o->elsize == 2) {
        uint16_t v = (uint16_t)o->value;
        memcpy(row + 2 * i, &v, 2);
      } else {
        uint32_t v = o->value;
        memcpy(row + 4 * i, &v, 4);
      }
    }
  }
}

/* Run one op outside the lock; returns a CUresult. */
static int run_op(emu_op *o) {
  int r = E_OK;
  switch (o->kind) {
  case OP_KERNEL: {
    if (o->delay_ms > 0) sleep_ms(o->delay_ms);
    char err[512] = "";
    dev_enter();
    volatile int t = -1;
    if (!sigsetjmp(tls_fault, 1)) { /* 1 again after a fault (segv), t still -1 */
      tls_in_kernel = 1;
      t = o->fn->run(o->ptrs, o->dims, err, sizeof err);
    }
    tls_in_kernel = 0;
    dev_leave();
    if (t < 0) {
      fprintf(stderr, "weft-cuda-emu: kernel %s faulted: CUDA_ERROR_ILLEGAL_ADDRESS\n",
              o->fn->name);
      r = E_ILLEGAL_ADDRESS;
    } else if (t) {
      fprintf(stderr, "weft-cuda-emu: kernel %s trapped: %s\n", o->fn->name, err);
      r = E_LAUNCH_FAILED;
    }
    break;
  }
  case OP_COPY:
    dev_enter();
    memmove(o->dst, o->src, o->n);
    dev_leave();
    break;
  case OP_SET:
    dev_enter();
    do_set(o);
    dev_leave();
    break;
  default: break;
  }
  return r;
}

static void *stream_main(void *arg) {
  emu_stream *s = arg;
  pthread_mutex_lock(&G.mu);
  for (;;) {
    while (!s->head && !s->quit)
      pthread_cond_wait(&s->cv, &G.mu);
    if (!s->head) break;
    emu_op *o = s->head;
    while (!deps_ok(o))
      pthread_cond_wait(&G.done_cv, &G.mu);
    if (o->kind == OP_EVREC) {
      if (o->ev->gen == o->gen || o->ev->t_gen < o->gen) {
        o->ev->t_ns = now_ns();
        o->ev->t_gen = o->gen;
      }
    } else if (o->kind != OP_NOP && !s->ctx->sticky) {
      pthread_mutex_unlock(&G.mu);
      int r = run_op(o);
      pthread_mutex_lock(&G.mu);
      if (r && !s->ctx->sticky) s->ctx->sticky = r;
    }
    s->head = o->next;
    if (!s->head) s->tail = NULL;
    s->done++;
    pthread_cond_broadcast(&G.done_cv);
    op_free(o);
  }
  pthread_mutex_unlock(&G.mu);
  return NULL;
}

/* Wait (lock held) until s ran everything queued so far. */
static void stream_wait(emu_stream *s) {
  uint64_t n = s->enq;
  while (s->done < n)
    pthread_cond_wait(&G.done_cv, &G.mu);
}

/* Stop s's worker after its queue drains (lock held; drops it inside). */
static void stream_stop(emu_stream *s) {
  stream_wait(s);
  s->quit = 1;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&G.mu);
  if (s->started) pthread_join(s->th, NULL);
  pthread_mutex_lock(&G.mu);
  s->started = 0;
  s->dead = 1;
}

/* ---- contexts ----------------------------------------------------------- */
static void free_alloc_span(emu_alloc *a) {
  madvise((void *)a->base, a->span, MADV_DONTNEED);
}

static void module_free(emu_module *m);
static void graph_free_ops(emu_graph *g);

/* The last reference of a primary context: drain, report leaks, free. */
static void ctx_destroy(emu_ctx *c) {
  for (emu_stream *s = c->streams; s; s = s->next)
    if (!s->dead) {
      if (!s->legacy) {
        misuse("context of device %d destroyed with a stream still alive (leak)", c->dev);
        G.st.leaks++;
      }
      stream_stop(s);
    }
  for (emu_alloc **pa = &G.live; *pa;) {
    emu_alloc *a = *pa;
    if (a->dev != c->dev) {
      pa = &a->next;
      continue;
    }
    misuse("context of device %d destroyed with %zu bytes at %#" PRIxPTR " still allocated (leak)",
           c->dev, a->size, a->base);
    G.st.leaks++;
    G.st.allocs_live--;
    G.st.bytes_live -= (int64_t)a->size;
    *pa = a->next;
    free_alloc_span(a);
    free(a);
  }
  while (c->modules) {
    emu_module *m = c->modules;
    c->modules = m->next;
    misuse("context of device %d destroyed with a module still loaded (leak)", c->dev);
    G.st.leaks++;
    module_free(m);
  }
  while (c->events) {
    emu_event *e = c->events;
    c->events = e->next;
    misuse("context of device %d destroyed with an event still alive (leak)", c->dev);
    G.st.leaks++;
    e->magic = 0;
  }
  while (c->streams) {
    emu_stream *s = c->streams;
    c->streams = s->next;
    pthread_cond_destroy(&s->cv);
    s->magic = 0;
    free(s);
  }
  if (tls_ctx == c) tls_ctx = NULL;
  c->magic = 0;
  G.ctx[c->dev] = NULL;
  free(c);
}

EXPORT CUresult cuDevicePrimaryCtxRetain(void **out, int dev) {
  NEED_INIT();
  if (!out) return E_INVALID_VALUE;
  if (dev < 0 || dev >= G.ndev) return E_INVALID_DEVICE;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = G.ctx[dev];
  if (!c) {
    c = calloc(1, sizeof *c);
    if (!c || !(c->legacy = stream_new(c, 0, 1))) {
      free(c);
      pthread_mutex_unlock(&G.mu);
      return E_OUT_OF_MEMORY;
    }
    c->magic = M_CTX;
    c->dev = dev;
    G.ctx[dev] = c;
  }
  c->refs++;
  *out = c;
  pthread_mutex_unlock(&G.mu);
  return E_OK;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
  NEED_INIT();
  if (dev < 0 || dev >= G.ndev) return E_INVALID_DEVICE;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = G.ctx[dev];
  int r = E_OK;
  if (!c) {
    misuse("cuDevicePrimaryCtxRelease of device %d, whose primary context is not retained", dev);
    r = E_INVALID_CONTEXT;
  } else if (--c->refs == 0) {
    ctx_destroy(c);
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuCtxSetCurrent(void *ctx) {
  NEED_INIT();
  emu_ctx *c = ctx;
  if (c && c->magic != M_CTX) return E_INVALID_CONTEXT;
  tls_ctx = c;
  return E_OK;
}

EXPORT CUresult cuCtxGetCurrent(void **ctx) {
  NEED_INIT();
  if (!ctx) return E_INVALID_VALUE;
  *ctx = tls_ctx;
  return E_OK;
}

EXPORT CUresult cuCtxGetDevice(int *dev) {
  NEED_INIT();
  if (!tls_ctx) return E_INVALID_CONTEXT;
  *dev = tls_ctx->dev;
  return E_OK;
}

/* The calling thread's context (lock held), or NULL with *r set. */
static emu_ctx *cur_ctx(int *r, const char *fn) {
  if (!G.inited) {
    *r = E_NOT_INITIALIZED;
    return NULL;
  }
  emu_ctx *c = tls_ctx;
  if (!c || c->magic != M_CTX) {
    misuse("%s without a current context (cuCtxSetCurrent first)", fn);
    *r = E_INVALID_CONTEXT;
    return NULL;
  }
  return c;
}

/* Calls a global-mode capture forbids: they fail and spoil the capture. */
static int capture_forbids(const char *fn) {
  if (G.ncap_global == 0) return 0;
  misuse("%s while a stream captures a graph (global mode): the capture is invalidated", fn);
  for (int d = 0; d < G.ndev; d++)
    if (G.ctx[d])
      for (emu_stream *s = G.ctx[d]->streams; s; s = s->next)
        if (s->capturing) s->cap_invalid = 1;
  return 1;
}

EXPORT CUresult cuCtxSynchronize(void) {
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuCtxSynchronize");
  if (c && capture_forbids("cuCtxSynchronize")) r = E_CAPTURE_UNSUPPORTED;
  if (c && !r) {
    for (emu_stream *s = c->streams; s; s = s->next)
      stream_wait(s);
    r = c->sticky;
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

/* ---- memory ------------------------------------------------------------- */
EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total) {
  NEED_INIT();
  pthread_mutex_lock(&G.mu);
  if (total) *total = G.memlimit;
  if (free_b) *free_b = G.memlimit - (size_t)G.st.bytes_live;
  pthread_mutex_unlock(&G.mu);
  return E_OK;
}

/* A span of at least need bytes: a freed block out of quarantine, or new. */
static uintptr_t heap_take(size_t need) {
  for (emu_alloc **pa = &G.freeblk; *pa; pa = &(*pa)->next) {
    emu_alloc *f = *pa;
    if (f->span < need) continue;
    uintptr_t p = f->base;
    if (f->span == need) {
      *pa = f->next;
      free(f);
    } else {
      f->base += need;
      f->span -= need;
    }
    return p;
  }
  if (G.top + need > HEAP_SIZE) return 0;
  uintptr_t p = (uintptr_t)G.heap + G.top;
  pthread_mutex_lock(&G.pmu);
  G.top += need;
  if (G.active) mprotect((void *)p, need, PROT_READ | PROT_WRITE);
  pthread_mutex_unlock(&G.pmu);
  return p;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *out, size_t size) {
  int r = E_OK;
  if (!out) return E_INVALID_VALUE;
  *out = 0;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuMemAlloc");
  if (!c) goto done;
  if (capture_forbids("cuMemAlloc")) {
    r = E_CAPTURE_UNSUPPORTED;
    goto done;
  }
  if (size == 0) {
    r = E_INVALID_VALUE;
    goto done;
  }
  if (fault(&G.f_alloc, "WEFT_CUDA_EMU_FAIL_ALLOC") ||
      (size_t)G.st.bytes_live + size > G.memlimit) {
    r = E_OUT_OF_MEMORY;
    goto done;
  }
  emu_alloc *a = calloc(1, sizeof *a);
  size_t span = ((size + PAGE - 1) / PAGE + 1) * PAGE;
  uintptr_t p = a ? heap_take(span) : 0;
  if (!p) {
    free(a);
    r = E_OUT_OF_MEMORY;
    goto done;
  }
  a->base = p;
  a->size = size;
  a->span = span;
  a->dev = c->dev;
  a->next = G.live;
  G.live = a;
  G.st.allocs_live++;
  G.st.bytes_live += (int64_t)size;
  *out = p;
done:
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuMemFree");
  if (!c) goto done;
  if (capture_forbids("cuMemFree")) {
    r = E_CAPTURE_UNSUPPORTED;
    goto done;
  }
  if (p == 0) goto done;
  emu_alloc **pa = &G.live;
  while (*pa && (*pa)->base != p)
    pa = &(*pa)->next;
  if (!*pa) {
    emu_alloc *q = G.quarantine;
    while (q && q->base != p)
      q = q->next;
    if (q)
      misuse("cuMemFree of %#llx: double free (freed before)", p);
    else
      misuse("cuMemFree of %#llx: not the start of a device allocation", p);
    r = E_INVALID_VALUE;
    goto done;
  }
  /* the free waits for the device, as cuMemFree does */
  drain_blocking(c);
  emu_alloc *a = *pa;
  *pa = a->next;
  G.st.allocs_live--;
  G.st.bytes_live -= (int64_t)a->size;
  free_alloc_span(a);
  a->next = G.quarantine;
  G.quarantine = a;
  if (++G.nquar > QUARANTINE) { /* the oldest goes back to the free list */
    emu_alloc **pq = &G.quarantine;
    while ((*pq)->next)
      pq = &(*pq)->next;
    emu_alloc *old = *pq;
    *pq = NULL;
    G.nquar--;
    old->next = G.freeblk;
    G.freeblk = old;
  }
done:
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuMemAllocHost_v2(void **out, size_t size) {
  int r = E_OK;
  if (!out) return E_INVALID_VALUE;
  *out = NULL;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuMemAllocHost");
  if (c && capture_forbids("cuMemAllocHost")) r = E_CAPTURE_UNSUPPORTED;
  if (c && !r && size == 0) r = E_INVALID_VALUE;
  if (c && !r) {
    emu_alloc *a = calloc(1, sizeof *a);
    void *p = a ? aligned_alloc(PAGE, (size + PAGE - 1) / PAGE * PAGE) : NULL;
    if (!p) {
      free(a);
      r = E_OUT_OF_MEMORY;
    } else {
      a->base = (uintptr_t)p;
      a->size = size;
      a->dev = -1;
      a->next = G.pinned;
      G.pinned = a;
      *out = p;
    }
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuMemFreeHost(void *p) {
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuMemFreeHost");
  if (c && capture_forbids("cuMemFreeHost")) r = E_CAPTURE_UNSUPPORTED;
  if (c && !r) {
    emu_alloc **pa = &G.pinned;
    while (*pa && (*pa)->base != (uintptr_t)p)
      pa = &(*pa)->next;
    if (!*pa) {
      misuse("cuMemFreeHost of %p: not page-locked memory from cuMemAllocHost (or freed twice)", p);
      r = E_INVALID_VALUE;
    } else {
      drain_blocking(c);
      emu_alloc *a = *pa;
      *pa = a->next;
      free(p);
      free(a);
    }
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

/* Check one side of a copy (lock held): dev 1 = must be device memory
** (or pinned: unified addressing), 0 = must be host memory. */
static int check_side(const char *fn, const char *what, uintptr_t p, size_t n, int dev) {
  if (dev) {
    if (!range_ok(p, n, NULL)) {
      emu_alloc *a = find_in(G.live, p);
      if (a)
        misuse("%s: %s [%#" PRIxPTR ", +%zu) runs past the end of its allocation (%zu bytes at "
               "%#" PRIxPTR ")",
               fn, what, p, n, a->size, a->base);
      else
        misuse("%s: %s %#" PRIxPTR " is not in any device allocation", fn, what, p);
      return 0;
    }
  } else if (in_heap(p)) {
    misuse("%s: %s %#" PRIxPTR " is device memory, where host memory is expected", fn, what, p);
    return 0;
  }
  return 1;
}

/* Memory ops: kinds of copy and their sides. */
enum { K_HTOD, K_DTOH, K_DTOD, K_ANY };

static int copy_checks(const char *fn, int kind, uintptr_t dst, uintptr_t src, size_t n) {
  if (kind == K_ANY) { /* cuMemcpy: either side may be either */
    int dd = in_heap(dst), sd = in_heap(src);
    return check_side(fn, "destination", dst, n, dd) && check_side(fn, "source", src, n, sd);
  }
  return check_side(fn, "destination", dst, n, kind != K_DTOH) &&
         check_side(fn, "source", src, n, kind != K_HTOD);
}

static emu_stream *get_stream(emu_ctx *c, void *h, int *r);

/* A copy: synchronous (stream NULL and sync set) or queued on a stream. */
static CUresult memcpy_any(const char *fn, int kind, uintptr_t dst, uintptr_t src, size_t n,
                           void *hs, int sync) {
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, fn);
  if (!c) goto done;
  if (n == 0) goto done;
  if (!copy_checks(fn, kind, dst, src, n)) {
    r = E_INVALID_VALUE;
    goto done;
  }
  if (sync) {
    if (capture_forbids(fn)) {
      r = E_CAPTURE_UNSUPPORTED;
      goto done;
    }
    drain_blocking(c);
    if ((r = c->sticky) != 0) goto done;
    pthread_mutex_unlock(&G.mu);
    dev_enter();
    memmove((void *)dst, (const void *)src, n);
    dev_leave();
    return E_OK;
  }
  emu_stream *s = get_stream(c, hs, &r);
  if (!s) goto done;
  emu_op *o = calloc(1, sizeof *o);
  if (!o) {
    r = E_OUT_OF_MEMORY;
    goto done;
  }
  o->kind = OP_COPY;
  o->dst = (char *)dst;
  o->src = (const char *)src;
  o->n = n;
  enqueue(s, o);
done:
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) {
  return memcpy_any("cuMemcpyHtoD", K_HTOD, d, (uintptr_t)h, n, NULL, 1);
}
EXPORT CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) {
  return memcpy_any("cuMemcpyDtoH", K_DTOH, (uintptr_t)h, d, n, NULL, 1);
}
EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) {
  return memcpy_any("cuMemcpyDtoD", K_DTOD, d, s, n, NULL, 1);
}
EXPORT CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) {
  return memcpy_any("cuMemcpy", K_ANY, d, s, n, NULL, 1);
}
EXPORT CUresult cuMemcpyPeer(CUdeviceptr d, void *dc, CUdeviceptr s, void *sc, size_t n) {
  if (!dc || !sc || ((emu_ctx *)dc)->magic != M_CTX || ((emu_ctx *)sc)->magic != M_CTX)
    return E_INVALID_CONTEXT;
  return memcpy_any("cuMemcpyPeer", K_DTOD, d, s, n, NULL, 1);
}
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, void *s) {
  return memcpy_any("cuMemcpyHtoDAsync", K_HTOD, d, (uintptr_t)h, n, s, 0);
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, void *s) {
  return memcpy_any("cuMemcpyDtoHAsync", K_DTOH, (uintptr_t)h, d, n, s, 0);
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr src, size_t n, void *s) {
  return memcpy_any("cuMemcpyDtoDAsync", K_DTOD, d, src, n, s, 0);
}
EXPORT CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr src, size_t n, void *s) {
  return memcpy_any("cuMemcpyAsync", K_ANY, d, src, n, s, 0);
}

/* Memsets: 2-D (pitch, width elements, height rows), sync or queued. */
static CUresult memset_any(const char *fn, CUdeviceptr d, size_t pitch, unsigned v, unsigned elsize,
                           size_t w, size_t h, void *hs, int sync) {
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, fn);
  if (!c || w == 0 || h == 0) goto done;
  if (d % elsize || (h > 1 && (pitch % elsize || pitch < w * elsize))) {
    misuse("%s: misaligned address %#llx or pitch %zu for %u-byte values", fn, d, pitch, elsize);
    r = E_INVALID_VALUE;
    goto done;
  }
  size_t extent = (h - 1) * pitch + w * elsize;
  if (!check_side(fn, "destination", d, extent, 1)) {
    r = E_INVALID_VALUE;
    goto done;
  }
  emu_op *o = calloc(1, sizeof *o);
  if (!o) {
    r = E_OUT_OF_MEMORY;
    goto done;
  }
  o->kind = OP_SET;
  o->dst = (char *)(uintptr_t)d;
  o->pitch = pitch;
  o->width = w;
  o->height = h;
  o->value = v;
  o->elsize = elsize;
  if (sync) {
    if (capture_forbids(fn)) {
      op_free(o);
      r = E_CAPTURE_UNSUPPORTED;
      goto done;
    }
    drain_blocking(c);
    r = c->sticky;
    pthread_mutex_unlock(&G.mu);
    if (!r) run_op(o);
    op_free(o);
    return r;
  }
  emu_stream *s = get_stream(c, hs, &r);
  if (!s) {
    op_free(o);
    goto done;
  }
  enqueue(s, o);
done:
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
  return memset_any("cuMemsetD8", d, n, v, 1, n, 1, NULL, 1);
}
EXPORT CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) {
  return memset_any("cuMemsetD16", d, n * 2, v, 2, n, 1, NULL, 1);
}
EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n) {
  return memset_any("cuMemsetD32", d, n * 4, v, 4, n, 1, NULL, 1);
}
EXPORT CUresult cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h) {
  return memset_any("cuMemsetD2D8", d, pitch, v, 1, w, h, NULL, 1);
}
EXPORT CUresult cuMemsetD2D16_v2(CUdeviceptr d, size_t pitch, unsigned short v, size_t w,
                                 size_t h) {
  return memset_any("cuMemsetD2D16", d, pitch, v, 2, w, h, NULL, 1);
}
EXPORT CUresult cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned v, size_t w, size_t h) {
  return memset_any("cuMemsetD2D32", d, pitch, v, 4, w, h, NULL, 1);
}
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *s) {
  return memset_any("cuMemsetD8Async", d, n, v, 1, n, 1, s, 0);
}
EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, void *s) {
  return memset_any("cuMemsetD32Async", d, n * 4, v, 4, n, 1, s, 0);
}

/* ---- streams: API ------------------------------------------------------- */
/* The stream a handle names (lock held): NULL / 1 = the legacy default
** stream of c, 2 = per-thread (treated as legacy). */
static emu_stream *get_stream(emu_ctx *c, void *h, int *r) {
  if (h == NULL || h == (void *)1 || h == (void *)2) return c->legacy;
  emu_stream *s = h;
  if (s->magic != M_STREAM || s->dead) {
    misuse("stream handle %p is not a live stream", h);
    *r = E_INVALID_HANDLE;
    return NULL;
  }
  return s;
}

EXPORT CUresult cuStreamCreate(void **out, unsigned flags) {
  int r = E_OK;
  if (!out) return E_INVALID_VALUE;
  *out = NULL;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuStreamCreate");
  if (c && flags > 1) r = E_INVALID_VALUE;
  if (c && !r && !(*out = stream_new(c, flags, 0))) r = E_OUT_OF_MEMORY;
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuStreamDestroy_v2(void *h) {
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_stream *s = h;
  if (!h || s->magic != M_STREAM || s->dead || s->legacy) {
    misuse("cuStreamDestroy of %p: not a live stream (destroyed twice?)", h);
    r = E_INVALID_HANDLE;
  } else {
    if (s->capturing) {
      misuse("cuStreamDestroy of a stream that is capturing a graph");
      r = E_ILLEGAL_STATE;
    } else {
      stream_stop(s); /* its work still runs, as on a GPU */
    }
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuStreamSynchronize(void *h) {
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuStreamSynchronize");
  emu_stream *s = c ? get_stream(c, h, &r) : NULL;
  if (s && s->capturing) {
    capture_forbids("cuStreamSynchronize of the capturing stream");
    r = E_CAPTURE_UNSUPPORTED;
  } else if (s) {
    if (s->legacy) drain_blocking(c);
    stream_wait(s);
    r = c->sticky;
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuStreamQuery(void *h) {
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuStreamQuery");
  emu_stream *s = c ? get_stream(c, h, &r) : NULL;
  if (s) r = c->sticky ? c->sticky : s->done < s->enq ? E_NOT_READY : E_OK;
  pthread_mutex_unlock(&G.mu);
  return r;
}

/* ---- events ------------------------------------------------------------- */
static int event_ok(emu_event *e) {
  return e && e->magic == M_EVENT;
}

EXPORT CUresult cuEventCreate(void **out, unsigned flags) {
  int r = E_OK;
  if (!out) return E_INVALID_VALUE;
  *out = NULL;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuEventCreate");
  if (c) {
    emu_event *e = calloc(1, sizeof *e);
    if (!e) {
      r = E_OUT_OF_MEMORY;
    } else {
      e->magic = M_EVENT;
      e->ctx = c;
      e->flags = flags;
      e->next = c->events;
      c->events = e;
      *out = e;
    }
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuEventDestroy_v2(void *h) {
  emu_event *e = h;
  pthread_mutex_lock(&G.mu);
  int r = E_OK;
  if (!event_ok(e)) {
    misuse("cuEventDestroy of %p: not a live event (destroyed twice?)", h);
    r = E_INVALID_HANDLE;
  } else {
    /* a queued record still refers to it: wait for it first */
    if (e->st) stream_wait(e->st);
    for (emu_event **pe = &e->ctx->events; *pe; pe = &(*pe)->next)
      if (*pe == e) {
        *pe = e->next;
        break;
      }
    e->magic = 0; /* kept: see module_free */
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuEventRecord(void *h, void *hs) {
  emu_event *e = h;
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuEventRecord");
  emu_stream *s = c ? get_stream(c, hs, &r) : NULL;
  if (s && !event_ok(e)) {
    misuse("cuEventRecord of %p: not a live event", h);
    r = E_INVALID_HANDLE;
  } else if (s && s->capturing) {
    /* event nodes in graphs are not emulated: refuse loudly */
    misuse("cuEventRecord on a capturing stream is not emulated");
    s->cap_invalid = 1;
    r = E_CAPTURE_UNSUPPORTED;
  } else if (s) {
    emu_op *o = calloc(1, sizeof *o);
    if (!o) {
      r = E_OUT_OF_MEMORY;
    } else {
      o->kind = OP_EVREC;
      o->ev = e;
      o->gen = ++e->gen;
      enqueue(s, o);
      e->st = s;
      e->idx = s->enq;
    }
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuStreamWaitEvent(void *hs, void *h, unsigned flags) {
  emu_event *e = h;
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuStreamWaitEvent");
  emu_stream *s = c ? get_stream(c, hs, &r) : NULL;
  if (s && (!event_ok(e) || flags != 0)) {
    if (!event_ok(e)) misuse("cuStreamWaitEvent on %p: not a live event", h);
    r = event_ok(e) ? E_INVALID_VALUE : E_INVALID_HANDLE;
  } else if (s && s->capturing) {
    misuse("cuStreamWaitEvent on a capturing stream is not emulated");
    s->cap_invalid = 1;
    r = E_CAPTURE_UNSUPPORTED;
  } else if (s && e->st) { /* never recorded: nothing to wait for */
    emu_op *o = calloc(1, sizeof *o);
    if (!o) {
      r = E_OUT_OF_MEMORY;
    } else {
      o->kind = OP_NOP;
      add_dep(o, e->st, e->idx);
      enqueue(s, o);
    }
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuEventSynchronize(void *h) {
  emu_event *e = h;
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  if (!event_ok(e)) {
    misuse("cuEventSynchronize of %p: not a live event", h);
    r = E_INVALID_HANDLE;
  } else if (e->st) {
    while (e->st->done < e->idx)
      pthread_cond_wait(&G.done_cv, &G.mu);
    r = e->ctx->sticky;
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuEventQuery(void *h) {
  emu_event *e = h;
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  if (!event_ok(e))
    r = E_INVALID_HANDLE;
  else if (e->st && e->st->done < e->idx)
    r = E_NOT_READY;
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, void *ha, void *hb) {
  emu_event *a = ha, *b = hb;
  int r = E_OK;
  if (!ms) return E_INVALID_VALUE;
  pthread_mutex_lock(&G.mu);
  if (!event_ok(a) || !event_ok(b) || (a->flags & 2) || (b->flags & 2) || !a->st || !b->st)
    r = E_INVALID_HANDLE;
  else if (a->t_gen != a->gen || b->t_gen != b->gen)
    r = E_NOT_READY;
  else
    *ms = (float)((double)(b->t_ns - a->t_ns) / 1e6);
  pthread_mutex_unlock(&G.mu);
  return r;
}
EXPORT CUresult cuEventElapsedTime(float *ms, void *a, void *b) {
  return cuEventElapsedTime_v2(ms, a, b);
}

/* ---- modules: PTX, the source inside it, the host build ----------------- */
#define SRC_BEGIN "// weft-cuda-emu source begin\n"
#define SRC_LINE "//| "

/* The CUDA C the pass-through appended to the PTX (malloc'd), or NULL. */
static char *ptx_source(const char *ptx) {
  const char *p = strstr(ptx, SRC_BEGIN);
  if (!p) return NULL;
  p += strlen(SRC_BEGIN);
  size_t cap = strlen(p) + 1, k = 0;
  char *out = malloc(cap);
  if (!out) return NULL;
  while (*p) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    if (len >= 4 && memcmp(p, SRC_LINE, 4) == 0) {
      memcpy(out + k, p + 4, len - 4);
      k += len - 4;
      out[k++] = '\n';
    }
    p = eol ? eol + 1 : p + len;
  }
  out[k] = 0;
  return out;
}

/* Parse "name(" ... ")" parameter lists of every .entry. */
static int ptx_entries(const char *ptx, emu_module *m, char *why, size_t n) {
  const char *p = ptx;
  while ((p = strstr(p, ".entry "))) {
    p += 7;
    while (*p == ' ')
      p++;
    size_t len = strcspn(p, "( \n");
    emu_func *fs = realloc(m->funcs, sizeof *fs * (size_t)(m->nfuncs + 1));
    if (!fs) return -1;
    m->funcs = fs;
    emu_func *f = &fs[m->nfuncs++];
    memset(f, 0, sizeof *f);
    f->magic = M_FUNC;
    snprintf(f->name, sizeof f->name, "%.*s", (int)len, p);
    p += len;
    const char *close = strchr(p, ')');
    if (!close) {
      snprintf(why, n, "entry %s: unterminated parameter list", f->name);
      return -1;
    }
    while ((p = strstr(p, ".param")) && p < close) {
      p += 6;
      const char *eol = strpbrk(p, ",\n)");
      unsigned align = 0, base = 0, count = 1;
      int ptr = 0;
      while (p < eol) {
        while (*p == ' ' || *p == '\t')
          p++;
        if (p >= eol) break;
        size_t tl = strcspn(p, " \t,\n)");
        if (tl == 6 && memcmp(p, ".align", 6) == 0) {
          p += 6;
          align = (unsigned)strtoul(p, (char **)&p, 10);
          continue;
        }
        if (tl == 4 && memcmp(p, ".ptr", 4) == 0) ptr = 1;
        if (*p == '.' && tl >= 3 && strchr("bsuf", p[1]) && p[2] >= '0' && p[2] <= '9')
          base = (unsigned)atoi(p + 2) / 8;
        if (*p != '.') { /* the name, maybe with [count] */
          const char *br = memchr(p, '[', tl);
          if (br) count = (unsigned)atoi(br + 1);
        }
        p += tl;
      }
      emu_param *ps = realloc(f->params, sizeof *ps * (size_t)(f->nparams + 1));
      if (!ps) return -1;
      f->params = ps;
      /* .ptr .align N names the pointee's alignment, not the parameter's */
      ps[f->nparams].align = ptr || !align ? base : align;
      ps[f->nparams].size = base * count;
      ps[f->nparams].kind = 0;
      f->nparams++;
    }
    p = close;
  }
  if (m->nfuncs == 0) {
    snprintf(why, n, "no .entry in the PTX");
    return -1;
  }
  return 0;
}

/* 64-bit FNV-1a, twice with different seeds, as the cache key. */
static uint64_t fnv(const char *s, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ULL;
  }
  return h;
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = sz >= 0 ? malloc((size_t)sz + 1) : NULL;
  if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
    free(b);
    b = NULL;
  }
  fclose(f);
  if (b) {
    b[sz] = 0;
    if (n) *n = (size_t)sz;
  }
  return b;
}

/* The trampolines appended to a module: run an entry over the grid, and
** report its host signature (size, alignment, array/pointer/value). */
static const char tramp_head[] =
    "\n#include <type_traits>\n#include <utility>\n"
    "struct wf_emu_sig { unsigned n, size[256], align[256], kind[256]; };\n"
    "template <class T> static unsigned wf_emu_kind() {\n"
    "  return std::is_same<T, struct wf_arr>::value ? 1u : std::is_pointer<T>::value ? 2u : 0u; }\n"
    "template <class... A> static void wf_emu_sigof(void (*)(A...), wf_emu_sig *s) {\n"
    "  unsigned i = 0;\n"
    "  ((s->size[i] = sizeof(A), s->align[i] = alignof(A), s->kind[i] = wf_emu_kind<A>(), i++), "
    "...);\n"
    "  s->n = i; }\n"
    "template <class... A, std::size_t... I>\n"
    "static void wf_emu_call(void (*k)(A...), void *const *p, std::index_sequence<I...>) {\n"
    "  k(*(const typename std::decay<A>::type *)p[I]...); }\n"
    "template <class... A>\n"
    "static int wf_emu_grid(void (*k)(A...), void *const *p, const unsigned *g, char *err,\n"
    "                       unsigned long n) {\n"
    "  gridDim.x = g[0]; gridDim.y = g[1]; gridDim.z = g[2];\n"
    "  blockDim.x = g[3]; blockDim.y = g[4]; blockDim.z = g[5];\n"
    "  try {\n"
    "    for (unsigned bz = 0; bz < g[2]; bz++) for (unsigned by = 0; by < g[1]; by++)\n"
    "    for (unsigned bx = 0; bx < g[0]; bx++) for (unsigned tz = 0; tz < g[5]; tz++)\n"
    "    for (unsigned ty = 0; ty < g[4]; ty++) for (unsigned tx = 0; tx < g[3]; tx++) {\n"
    "      blockIdx.x = bx; blockIdx.y = by; blockIdx.z = bz;\n"
    "      threadIdx.x = tx; threadIdx.y = ty; threadIdx.z = tz;\n"
    "      wf_emu_call(k, p, std::index_sequence_for<A...>{});\n"
    "    }\n"
    "  } catch (wf_shim_trap &e) { snprintf(err, n, \"%s\", e.msg); return 1; }\n"
    "  return 0; }\n"
    "#define WF_EMU_ENTRY(k) \\\n"
    "  extern \"C\" int wf_emu_run_##k(void *const *p, const unsigned *g, char *e, "
    "unsigned long n) \\\n"
    "  { return wf_emu_grid(k, p, g, e, n); } \\\n"
    "  extern \"C\" void wf_emu_sig_##k(wf_emu_sig *s) { wf_emu_sigof(k, s); }\n";

typedef struct host_sig {
  unsigned n, size[256], align[256], kind[256];
} host_sig;

/* mkdir -p: a fresh build's $WEFT_CACHE_DIR may not exist yet (ctest
** runs the emulator before anything else made it). Errors show later,
** when the build cannot write its file. */
static void mkdir_p(char *path) {
  for (char *p = path + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(path, 0755);
      *p = '/';
    }
  mkdir(path, 0755);
}

/* The cache directory of host builds (created), in buf. */
static void cache_dir(char *buf, size_t n) {
  const char *d = getenv("WEFT_CUDA_EMU_CACHE");
  const char *w = getenv("WEFT_CACHE_DIR");
  if (d && *d)
    snprintf(buf, n, "%s", d);
  else if (w && *w && strcmp(w, "0") && strcmp(w, "off"))
    snprintf(buf, n, "%s/cuda-emu", w);
  else
    snprintf(buf, n, "/tmp/weft-cuda-emu-%d", (int)getuid());
  mkdir_p(buf);
}

/* Build (or find) the host .so of a module's source; dlopen it. */
static void *host_build(const char *src, const emu_module *m, char *why, size_t n) {
  size_t shn = 0;
  char *shim = slurp(WEFT_EMU_SHIM, &shn);
  if (!shim) {
    snprintf(why, n, "cannot read %s", WEFT_EMU_SHIM);
    return NULL;
  }
  const char *cxx = getenv("WEFT_CUDA_EMU_CXX");
  if (!cxx || !*cxx) cxx = WEFT_EMU_CXX;
  const char *flags = "-std=c++17 -O1 -fPIC -shared -w -DWF_SHIM_TLS=thread_local";
  uint64_t h1 = 14695981039346656037ULL, h2 = 0x9e3779b97f4a7c15ULL;
  const char *parts[] = {cxx, flags, shim, tramp_head, src};
  for (size_t i = 0; i < 5; i++) {
    h1 = fnv(parts[i], strlen(parts[i]) + 1, h1);
    h2 = fnv(parts[i], strlen(parts[i]) + 1, h2);
  }
  free(shim);
  char dir[512], so[700], cpp[760], tmp[760], log[760];
  cache_dir(dir, sizeof dir);
  snprintf(so, sizeof so, "%s/%016" PRIx64 "%016" PRIx64 ".so", dir, h1, h2);
  void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (dl) return dl;
  snprintf(cpp, sizeof cpp, "%s.%d.cpp", so, (int)getpid());
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", so, (int)getpid());
  snprintf(log, sizeof log, "%s.%d.log", so, (int)getpid());
  FILE *f = fopen(cpp, "w");
  if (!f) {
    snprintf(why, n, "cannot write %s: %s", cpp, strerror(errno));
    return NULL;
  }
  fputs(src, f);
  fputs(tramp_head, f);
  for (int i = 0; i < m->nfuncs; i++)
    fprintf(f, "WF_EMU_ENTRY(%s)\n", m->funcs[i].name);
  fclose(f);
  char cmd[3000];
  snprintf(cmd, sizeof cmd, "'%s' %s -include '%s' -x c++ '%s' -o '%s' 2>'%s'", cxx, flags,
           WEFT_EMU_SHIM, cpp, tmp, log);
  int rc = system(cmd);
  G.st.host_compiles++;
  if (rc != 0) {
    char *l = slurp(log, NULL);
    snprintf(why, n, "the host build of the module failed (%.300s):\n%.1500s", cmd, l ? l : "");
    free(l);
    unlink(tmp);
  } else {
    rename(tmp, so);
    unlink(cpp);
  }
  unlink(log);
  if (rc != 0) return NULL;
  dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!dl) snprintf(why, n, "dlopen %s: %s", so, dlerror());
  return dl;
}

/* Tie each entry to its trampoline; its host signature must be the PTX's. */
static int bind_funcs(emu_module *m, char *why, size_t n) {
  for (int i = 0; i < m->nfuncs; i++) {
    emu_func *f = &m->funcs[i];
    char sym[200];
    snprintf(sym, sizeof sym, "wf_emu_run_%s", f->name);
    void *run = dlsym(m->dl, sym);
    snprintf(sym, sizeof sym, "wf_emu_sig_%s", f->name);
    void *sigp = dlsym(m->dl, sym);
    if (!run || !sigp) {
      snprintf(why, n, "entry %s has no host build", f->name);
      return -1;
    }
    memcpy(&f->run, &run, sizeof run);
    void (*sigf)(host_sig *);
    memcpy(&sigf, &sigp, sizeof sigp);
    host_sig hs;
    memset(&hs, 0, sizeof hs);
    sigf(&hs);
    if ((int)hs.n != f->nparams) {
      snprintf(why, n, "entry %s: the PTX has %d parameters, the CUDA C %u", f->name, f->nparams,
               hs.n);
      return -1;
    }
    for (int k = 0; k < f->nparams; k++) {
      emu_param *p = &f->params[k];
      if (p->size != hs.size[k] || p->align != hs.align[k]) {
        snprintf(why, n,
                 "entry %s: parameter %d is %u bytes (align %u) in the PTX but %u (align %u) "
                 "in the CUDA C",
                 f->name, k, p->size, p->align, hs.size[k], hs.align[k]);
        return -1;
      }
      p->kind = hs.kind[k];
    }
  }
  return 0;
}

/* Handles are never reused: the structs stay (with a dead magic) so that
** a stale module, function, event or graph handle is caught, not followed. */
static void module_free(emu_module *m) {
  if (m->dl) dlclose(m->dl);
  m->dl = NULL;
  for (int i = 0; i < m->nfuncs; i++) {
    m->funcs[i].magic = 0;
    free(m->funcs[i].params);
    m->funcs[i].params = NULL;
  }
  m->magic = 0;
}

EXPORT CUresult cuModuleLoadData(void **out, const void *image) {
  int r = E_OK;
  if (!out || !image) return E_INVALID_VALUE;
  *out = NULL;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuModuleLoadData");
  int injected = c ? fault(&G.f_module, "WEFT_CUDA_EMU_FAIL_MODULE") : 0;
  pthread_mutex_unlock(&G.mu);
  if (!c) return r;
  if (injected) return E_INVALID_PTX;
  const char *ptx = image;
  if (memcmp(ptx,
             "\x7f"
             "ELF",
             4) == 0) {
    misuse("cuModuleLoadData: a CUBIN cannot run on the emulated device (load PTX)");
    return E_INVALID_IMAGE;
  }
  if (!strstr(ptx, ".version") || !strstr(ptx, ".target")) {
    misuse("cuModuleLoadData: the image is not PTX");
    return E_INVALID_IMAGE;
  }
  char why[2048] = "";
  char *src = ptx_source(ptx);
  emu_module *m = calloc(1, sizeof *m);
  if (!src || !m) {
    if (!src)
      snprintf(why, sizeof why,
               "the PTX carries no CUDA C: it was not made through the emulator's NVRTC "
               "(set WEFT_NVRTC as scripts/cuda-emu does)");
    r = m ? E_INVALID_PTX : E_OUT_OF_MEMORY;
    goto fail;
  }
  m->magic = M_MODULE;
  m->ctx = c;
  if (ptx_entries(ptx, m, why, sizeof why) != 0 || !(m->dl = host_build(src, m, why, sizeof why)) ||
      bind_funcs(m, why, sizeof why) != 0) {
    r = E_INVALID_PTX;
    goto fail;
  }
  for (int i = 0; i < m->nfuncs; i++)
    m->funcs[i].mod = m;
  free(src);
  pthread_mutex_lock(&G.mu);
  m->next = c->modules;
  c->modules = m;
  pthread_mutex_unlock(&G.mu);
  *out = m;
  return E_OK;
fail:
  if (why[0]) misuse("cuModuleLoadData: %s", why);
  free(src);
  if (m) { /* never handed out: nothing can hold it */
    module_free(m);
    free(m->funcs);
    free(m);
  }
  return r;
}

EXPORT CUresult cuModuleUnload(void *h) {
  emu_module *m = h;
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  if (!m || m->magic != M_MODULE) {
    misuse("cuModuleUnload of %p: not a loaded module (unloaded twice?)", h);
    r = E_INVALID_HANDLE;
  } else {
    /* its kernels may still be queued: wait for the context's streams */
    for (emu_stream *s = m->ctx->streams; s; s = s->next)
      stream_wait(s);
    for (emu_module **pm = &m->ctx->modules; *pm; pm = &(*pm)->next)
      if (*pm == m) {
        *pm = m->next;
        break;
      }
    module_free(m);
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuModuleGetFunction(void **out, void *h, const char *name) {
  emu_module *m = h;
  if (!out || !name) return E_INVALID_VALUE;
  *out = NULL;
  if (!m || m->magic != M_MODULE) return E_INVALID_HANDLE;
  for (int i = 0; i < m->nfuncs; i++)
    if (strcmp(m->funcs[i].name, name) == 0) {
      *out = &m->funcs[i];
      return E_OK;
    }
  return E_NOT_FOUND;
}

/* ---- launches ----------------------------------------------------------- */
/* Can the host read [p, p+n)? (process_vm_readv on ourselves fails with
** EFAULT where a plain read would fault.) */
static int readable(const void *p, size_t n) {
  char buf[256];
  while (n) {
    size_t k = n < sizeof buf ? n : sizeof buf;
    struct iovec l = {buf, k}, r = {(void *)p, k};
    ssize_t got = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
    if (got < 0) return errno != EFAULT;
    p = (const char *)p + k;
    n -= k;
  }
  return 1;
}

/* Where may a kernel read through the array or pointer at value v? */
static int check_target(const emu_func *f, int i, const char *what, uintptr_t p, size_t extent) {
  if (p == 0) return 1;
  int pinned = 0;
  if (range_ok(p, extent ? extent : 1, &pinned)) return 1;
  emu_alloc *a = find_in(G.live, p);
  if (a)
    misuse("kernel %s parameter %d: %s [%#" PRIxPTR ", +%zu) runs past its allocation (%zu bytes)",
           f->name, i, what, p, extent, a->size);
  else if (in_heap(p))
    misuse("kernel %s parameter %d: %s %#" PRIxPTR " is freed device memory", f->name, i, what, p);
  else
    misuse("kernel %s parameter %d: %s %#" PRIxPTR " is host memory, not device memory", f->name, i,
           what, p);
  return 0;
}

/* Check one parameter's value (lock held). */
static int check_param(const emu_func *f, int i, const char *v) {
  const emu_param *p = &f->params[i];
  if (p->kind == 2) {
    uint64_t ptr;
    memcpy(&ptr, v, 8);
    return check_target(f, i, "pointer", (uintptr_t)ptr, 1);
  }
  if (p->kind != 1) return 1;
  /* wf_arr { char *data; int64 shape[4]; int64 strides[4]; } (wf_cuda.h) */
  uint64_t data;
  int64_t shape[4], strides[4];
  memcpy(&data, v, 8);
  memcpy(shape, v + 8, 32);
  memcpy(strides, v + 40, 32);
  int64_t lo = 0, hi = 0;
  for (int k = 0; k < 4; k++) {
    if (shape[k] <= 0) return 1; /* empty: never read */
    int64_t e = (shape[k] - 1) * strides[k];
    if (e < 0)
      lo += e;
    else
      hi += e;
  }
  return check_target(f, i, "array data", (uintptr_t)(data + (uint64_t)lo), (size_t)(hi - lo + 1));
}

EXPORT CUresult cuLaunchKernel(void *hf, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shmem, void *hs, void **params,
                               void **extra) {
  emu_func *f = hf;
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuLaunchKernel");
  if (!c) goto done;
  if (!f || f->magic != M_FUNC) {
    misuse("cuLaunchKernel: %p is not a kernel function", hf);
    r = E_INVALID_HANDLE;
    goto done;
  }
  if (f->mod->ctx != c) {
    misuse("cuLaunchKernel: kernel %s belongs to device %d, the current context to %d", f->name,
           f->mod->ctx->dev, c->dev);
    r = E_INVALID_HANDLE;
    goto done;
  }
  if ((r = c->sticky) != 0) goto done;
  if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024 || gy > 65535 ||
      gz > 65535 || bz > 64 || shmem > 48 * 1024 || extra) {
    misuse("cuLaunchKernel %s: bad configuration grid (%u,%u,%u) block (%u,%u,%u) shared %u%s",
           f->name, gx, gy, gz, bx, by, bz, shmem, extra ? " extra" : "");
    r = E_INVALID_VALUE;
    goto done;
  }
  if (f->nparams && !params) {
    misuse("cuLaunchKernel %s: kernelParams is NULL, the entry takes %d parameters", f->name,
           f->nparams);
    r = E_INVALID_VALUE;
    goto done;
  }
  emu_stream *s = get_stream(c, hs, &r);
  if (!s) goto done;
  emu_op *o = calloc(1, sizeof *o);
  size_t bsz = BLOB_SIZE(f->nparams);
  if (o) {
    o->blob = calloc(1, bsz);
    o->ptrs = calloc((size_t)f->nparams + 1, sizeof(void *));
  }
  if (!o || !o->blob || !o->ptrs) {
    if (o) op_free(o);
    r = E_OUT_OF_MEMORY;
    goto done;
  }
  size_t off = 0;
  for (int i = 0; i < f->nparams; i++) {
    const emu_param *p = &f->params[i];
    const char *v = params[i];
    const char *bad = NULL;
    if (!v)
      bad = "is NULL";
    else if (in_heap((uintptr_t)v))
      bad = "points into device memory (kernelParams holds the address of each value)";
    else if ((uintptr_t)v % p->align)
      bad = "is misaligned for its type";
    else if (!readable(v, p->size))
      bad = "points at unreadable memory";
    else if ((off + 15) / 16 * 16 + p->size > bsz)
      bad = "makes the parameters larger than 4 KB";
    if (bad) {
      misuse("cuLaunchKernel %s: kernelParams[%d] (%u bytes, align %u) %s", f->name, i, p->size,
             p->align, bad);
      op_free(o);
      r = E_INVALID_VALUE;
      goto done;
    }
    off = (off + 15) / 16 * 16;
    memcpy(o->blob + off, v, p->size);
    o->ptrs[i] = o->blob + off;
    off += p->size;
    if (!check_param(f, i, o->ptrs[i])) {
      op_free(o);
      r = E_ILLEGAL_ADDRESS;
      goto done;
    }
  }
  if (fault(&G.f_launch, "WEFT_CUDA_EMU_FAIL_LAUNCH")) {
    op_free(o);
    r = E_LAUNCH_OUT_OF_RESOURCES;
    goto done;
  }
  o->kind = OP_KERNEL;
  o->fn = f;
  const char *delay = getenv("WEFT_CUDA_EMU_DELAY_MS"); /* late kernels show missing waits */
  o->delay_ms = delay ? atol(delay) : 0;
  unsigned dims[6] = {gx, gy, gz, bx, by, bz};
  memcpy(o->dims, dims, sizeof dims);
  G.st.launches++;
  enqueue(s, o);
done:
  pthread_mutex_unlock(&G.mu);
  return r;
}

/* ---- graphs ------------------------------------------------------------- */
static void graph_free_ops(emu_graph *g) {
  while (g->head) {
    emu_op *o = g->head;
    g->head = o->next;
    op_free(o);
  }
  g->tail = NULL;
}

EXPORT CUresult cuStreamBeginCapture_v2(void *hs, int mode) {
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuStreamBeginCapture");
  emu_stream *s = c ? get_stream(c, hs, &r) : NULL;
  if (s && (s->legacy || s->capturing)) {
    misuse("cuStreamBeginCapture on %s",
           s->legacy ? "the legacy default stream" : "a stream that is capturing already");
    r = s->legacy ? E_CAPTURE_UNSUPPORTED : E_ILLEGAL_STATE;
  } else if (s) {
    emu_graph *g = calloc(1, sizeof *g);
    if (!g) {
      r = E_OUT_OF_MEMORY;
    } else {
      g->magic = M_GRAPH;
      s->cap = g;
      s->capturing = 1;
      s->cap_mode = mode;
      s->cap_invalid = 0;
      if (mode == 0) G.ncap_global++;
    }
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuStreamEndCapture(void *hs, void **out) {
  int r = E_OK;
  if (!out) return E_INVALID_VALUE;
  *out = NULL;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuStreamEndCapture");
  emu_stream *s = c ? get_stream(c, hs, &r) : NULL;
  if (s && !s->capturing) {
    misuse("cuStreamEndCapture on a stream that is not capturing");
    r = E_ILLEGAL_STATE;
  } else if (s) {
    s->capturing = 0;
    if (s->cap_mode == 0) G.ncap_global--;
    if (s->cap_invalid) {
      graph_free_ops(s->cap);
      free(s->cap);
      r = E_CAPTURE_INVALIDATED;
    } else {
      *out = s->cap;
    }
    s->cap = NULL;
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuStreamIsCapturing(void *hs, int *status) {
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuStreamIsCapturing");
  emu_stream *s = c ? get_stream(c, hs, &r) : NULL;
  if (s) *status = !s->capturing ? 0 : s->cap_invalid ? 2 : 1;
  pthread_mutex_unlock(&G.mu);
  return r;
}

/* A copy of g's ops (lock held); NULL when out of memory. */
static int graph_copy(const emu_graph *g, emu_graph *out) {
  for (emu_op *o = g->head; o; o = o->next) {
    emu_op *c = op_clone(o);
    if (!c) {
      graph_free_ops(out);
      return -1;
    }
    if (out->tail)
      out->tail->next = c;
    else
      out->head = c;
    out->tail = c;
  }
  return 0;
}

EXPORT CUresult cuGraphInstantiateWithFlags(void **out, void *hg, unsigned long long flags) {
  emu_graph *g = hg;
  if (!out) return E_INVALID_VALUE;
  *out = NULL;
  pthread_mutex_lock(&G.mu);
  int r = E_OK;
  emu_graph *x = NULL;
  if (!g || g->magic != M_GRAPH) {
    misuse("cuGraphInstantiate of %p: not a graph", hg);
    r = E_INVALID_HANDLE;
  } else if (flags != 0) {
    r = E_INVALID_VALUE;
  } else if (!(x = calloc(1, sizeof *x)) || graph_copy(g, x) != 0) {
    free(x);
    r = E_OUT_OF_MEMORY;
  } else {
    x->magic = M_EXEC;
    *out = x;
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

EXPORT CUresult cuGraphLaunch(void *hx, void *hs) {
  emu_graph *x = hx;
  int r = E_OK;
  pthread_mutex_lock(&G.mu);
  emu_ctx *c = cur_ctx(&r, "cuGraphLaunch");
  emu_stream *s = c ? get_stream(c, hs, &r) : NULL;
  if (s && (!x || x->magic != M_EXEC)) {
    misuse("cuGraphLaunch of %p: not an executable graph", hx);
    r = E_INVALID_HANDLE;
  } else if (s && !(r = c->sticky)) {
    emu_graph tmp = {0, NULL, NULL};
    if (graph_copy(x, &tmp) != 0) {
      r = E_OUT_OF_MEMORY;
    } else {
      while (tmp.head) {
        emu_op *o = tmp.head;
        tmp.head = o->next;
        if (o->kind == OP_KERNEL) G.st.launches++;
        enqueue(s, o);
      }
    }
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}

static CUresult graph_destroy(void *h, uint32_t magic, const char *fn) {
  emu_graph *g = h;
  pthread_mutex_lock(&G.mu);
  int r = E_OK;
  if (!g || g->magic != magic) {
    misuse("%s of %p: not a live graph (destroyed twice?)", fn, h);
    r = E_INVALID_HANDLE;
  } else {
    graph_free_ops(g);
    g->magic = 0; /* kept: see module_free */
  }
  pthread_mutex_unlock(&G.mu);
  return r;
}
EXPORT CUresult cuGraphExecDestroy(void *h) {
  return graph_destroy(h, M_EXEC, "cuGraphExecDestroy");
}
EXPORT CUresult cuGraphDestroy(void *h) {
  return graph_destroy(h, M_GRAPH, "cuGraphDestroy");
}

/* ---- NVRTC pass-through ------------------------------------------------- */
typedef int (*nv_fn)();

/* The real libnvrtc's symbol name (NULL when it cannot be loaded). */
static void *real_nvrtc(const char *name) {
  pthread_mutex_lock(&G.mu);
  if (!G.nvrtc) {
    const char *e = getenv("WEFT_CUDA_EMU_NVRTC");
    if (e && *e) G.nvrtc = dlopen(e, RTLD_NOW | RTLD_LOCAL);
    if (!G.nvrtc) G.nvrtc = dlopen(WEFT_CUDA_HOME "/lib64/libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!G.nvrtc) G.nvrtc = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
  }
  void *lib = G.nvrtc;
  pthread_mutex_unlock(&G.mu);
  return lib ? dlsym(lib, name) : NULL;
}

#define REAL(type, name, ...)                                                                      \
  do {                                                                                             \
    void *p_ = real_nvrtc(#name);                                                                  \
    __typeof__(type) f_;                                                                           \
    if (!p_) return 7; /* NVRTC_ERROR_BUILTIN_OPERATION_FAILURE */                                 \
    memcpy(&f_, &p_, sizeof p_);                                                                   \
    return f_(__VA_ARGS__);                                                                        \
  } while (0)

EXPORT int nvrtcVersion(int *a, int *b) {
  REAL(int (*)(int *, int *), nvrtcVersion, a, b);
}
EXPORT const char *nvrtcGetErrorString(int r) {
  void *p = real_nvrtc("nvrtcGetErrorString");
  const char *(*f)(int);
  if (!p) return "NVRTC is not available";
  memcpy(&f, &p, sizeof p);
  return f(r);
}
EXPORT int nvrtcGetProgramLogSize(void *prog, size_t *n) {
  REAL(int (*)(void *, size_t *), nvrtcGetProgramLogSize, prog, n);
}
EXPORT int nvrtcGetProgramLog(void *prog, char *log) {
  REAL(int (*)(void *, char *), nvrtcGetProgramLog, prog, log);
}
EXPORT int nvrtcGetCUBINSize(void *prog, size_t *n) {
  REAL(int (*)(void *, size_t *), nvrtcGetCUBINSize, prog, n);
}
EXPORT int nvrtcGetCUBIN(void *prog, char *out) {
  REAL(int (*)(void *, char *), nvrtcGetCUBIN, prog, out);
}

static int real_create(void **prog, const char *src, const char *name, int nh,
                       const char *const *hs, const char *const *hn) {
  REAL(int (*)(void **, const char *, const char *, int, const char *const *, const char *const *),
       nvrtcCreateProgram, prog, src, name, nh, hs, hn);
}

EXPORT int nvrtcCreateProgram(void **prog, const char *src, const char *name, int nh,
                              const char *const *hs, const char *const *hn) {
  int r = real_create(prog, src, name, nh, hs, hn);
  if (r != 0) return r;
  emu_prog *e = calloc(1, sizeof *e);
  if (e && !(e->src = strdup(src))) {
    free(e);
    e = NULL;
  }
  if (!e) return 1; /* NVRTC_ERROR_OUT_OF_MEMORY (the program leaks: rare) */
  e->prog = *prog;
  pthread_mutex_lock(&G.mu);
  e->next = G.progs;
  G.progs = e;
  pthread_mutex_unlock(&G.mu);
  return 0;
}

static int real_destroy(void **prog) {
  REAL(int (*)(void **), nvrtcDestroyProgram, prog);
}

EXPORT int nvrtcDestroyProgram(void **prog) {
  pthread_mutex_lock(&G.mu);
  for (emu_prog **pe = &G.progs; prog && *pe; pe = &(*pe)->next)
    if ((*pe)->prog == *prog) {
      emu_prog *e = *pe;
      *pe = e->next;
      free(e->src);
      free(e->ptx);
      free(e);
      break;
    }
  pthread_mutex_unlock(&G.mu);
  return real_destroy(prog);
}

EXPORT int nvrtcCompileProgram(void *prog, int n, const char *const *opts) {
  REAL(int (*)(void *, int, const char *const *), nvrtcCompileProgram, prog, n, opts);
}

static int real_ptx_size(void *prog, size_t *n) {
  REAL(int (*)(void *, size_t *), nvrtcGetPTXSize, prog, n);
}
static int real_ptx(void *prog, char *out) {
  REAL(int (*)(void *, char *), nvrtcGetPTX, prog, out);
}

/* The PTX with the source appended, made once per program. */
static int augmented(void *prog, emu_prog **out) {
  pthread_mutex_lock(&G.mu);
  emu_prog *e = G.progs;
  while (e && e->prog != prog)
    e = e->next;
  pthread_mutex_unlock(&G.mu);
  *out = e;
  if (!e || e->ptx) return 0;
  size_t n = 0;
  int r = real_ptx_size(prog, &n);
  if (r) return r;
  char *ptx = malloc(n + 1);
  if (!ptx) return 1;
  if ((r = real_ptx(prog, ptx)) != 0) {
    free(ptx);
    return r;
  }
  ptx[n] = 0;
  size_t len = strlen(ptx), sl = strlen(e->src), lines = 1;
  for (const char *s = e->src; *s; s++)
    lines += *s == '\n';
  size_t cap = len + strlen(SRC_BEGIN) + sl + lines * 5 + 64;
  char *a = malloc(cap);
  if (!a) {
    free(ptx);
    return 1;
  }
  size_t k = (size_t)snprintf(a, cap, "%s\n%s", ptx, SRC_BEGIN);
  free(ptx);
  for (const char *s = e->src; *s;) {
    const char *eol = strchr(s, '\n');
    size_t l = eol ? (size_t)(eol - s) : strlen(s);
    memcpy(a + k, SRC_LINE, 4);
    memcpy(a + k + 4, s, l);
    k += 4 + l;
    a[k++] = '\n';
    s = eol ? eol + 1 : s + l;
  }
  a[k++] = 0;
  e->ptx = a;
  e->ptxsize = k;
  return 0;
}

EXPORT int nvrtcGetPTXSize(void *prog, size_t *n) {
  emu_prog *e;
  int r = augmented(prog, &e);
  if (r || !e) return r ? r : real_ptx_size(prog, n);
  *n = e->ptxsize;
  return 0;
}

EXPORT int nvrtcGetPTX(void *prog, char *out) {
  emu_prog *e;
  int r = augmented(prog, &e);
  if (r || !e) return r ? r : real_ptx(prog, out);
  memcpy(out, e->ptx, e->ptxsize);
  return 0;
}

/* ---- for tests ---------------------------------------------------------- */
/* Counters since load (the live ones are current); 1 = this is the emulator. */
EXPORT int wf_cuemu_stats(wf_cuemu_counts *out) {
  pthread_mutex_lock(&G.mu);
  *out = G.st;
  pthread_mutex_unlock(&G.mu);
  return 1;
}

/* The last misuse message ("" for none). */
EXPORT const char *wf_cuemu_last(void) {
  return G.last;
}
