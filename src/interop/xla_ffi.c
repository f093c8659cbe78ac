/*
** xla_ffi.c -- weft kernels as XLA FFI custom calls (python/weft/jax.py).
**
** The handler `wf_xla_kernel` is registered with
** jax.ffi.register_ffi_target("weft_kernel", capsule, platform="cpu"). XLA
** calls it on its own threads, without the GIL; it never enters Python or
** Lua. Per call it reads the call frame (buffers, attributes), finds the
** plan, builds array headers on the stack, packs the argument block and
** runs the compiled entry on the thread pool of the context's own runtime.
** `wf_xla_kernel_cuda`, the CUDA platform's, asks XLA for the call's
** CUstream and device ordinal, loads the plan's PTX on that device at its
** first call there, and queues the launch on that stream (kernelParams:
** the headers of XLA's device buffers, the scalars, the error slot); it
** never waits for the device.
**
**   attributes of a call (made by jax.py)
**     weft_ctx   i64  the wf_xla_ctx of the weft.Runtime
**     weft_plan  i64  index of the plan in that context
**     dims       i64[] launch dims (empty: the shape of the first array)
**     scalars    u8[] the static scalar arguments, packed as the entry reads
**
**   wf_xla_ctx  lock, closed, rt (launches), plans[]
**   xla_plan    fn (cpu) or PTX, entry name and loaded modules (cuda),
**               cost, launch ndim, one xla_param per entry parameter: where
**               its value comes from (a call argument, a result buffer, or
**               bytes of `scalars`), its type and layout
**
** A plan is made once per kernel, signature, launch ndim and mode by the
** Lua layer (weft._interop.ffi_plan, which keeps the code alive as long as
** the Lua state) and handed over through ctx_plan below. Calls from several
** XLA threads at once (shard_map over devices) take the context's lock: one
** launch at a time, each on the whole pool. When the Runtime closes, the
** context is marked closed (under the lock, so no launch is running) and
** its plans and runtime are freed; the small context itself stays, since
** compiled XLA executables may still name it, and answers with an error.
**
** Vectors and matrices are trailing dimensions on the JAX side. Leading
** dimensions beyond the kernel's (vmap with "broadcast_all" or
** "expand_dims") are folded into the first one, and an explicit launch's
** first dim is multiplied by their product, as Warp does.
**
** Python callbacks (weft.register_ffi_callback, rt.jax_callable) are
** ctypes trampolines in jax.py; they use frame() and error() below to read
** the frame and to answer with an XLA error.
*/
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interop/pyc.h"
#include "cuda/wf_cuda.h"
#include "interop/xla_ffi.h"
#include "runtime/wf_cudadrv.h"
#include "runtime/wf_launch.h"
#include "runtime/wf_rt.h"

#define WF_XLA_SIZE(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
#define CTX_MAGIC 0x77667861u /* "wfxa": a context pointer we made */
#define MAXDEV 16             /* CUDA devices a context launches on */

enum { SRC_ARG, SRC_RET, SRC_SCALAR };
enum { PARAM_ZERO = 1, PARAM_READONLY = 2 };

/* Where entry parameter i comes from and what it must be. */
typedef struct xla_param {
  int32_t offset; /* in the argument block */
  int32_t src;    /* SRC_* */
  int32_t index;  /* buffer index, or byte offset into `scalars` */
  int32_t nbytes; /* scalars: bytes to copy */
  int32_t dtype, elsize, ndim, xla_dtype, ntrail, flags;
  int64_t trail[2];
  char name[40];
} xla_param;

typedef struct xla_plan {
  void *fn; /* cpu: the entry */
  /* cuda: the PTX image and entry name, loaded on each device at its
  ** first call there; slot: the error slot's address goes last */
  char *image;
  char entry[128];
  int32_t cuda, slot;
  void *mods[MAXDEV], *fns[MAXDEV];
  int64_t cost;
  int64_t size;  /* argument block bytes */
  int32_t ndim;  /* the launch ndim the entry was compiled for */
  int32_t first; /* parameter whose shape gives the launch dims, or -1 */
  int32_t nparams, nargs, nrets;
  char kernel[64];
  xla_param p[];
} xla_plan;

typedef struct wf_xla_ctx {
  uint32_t magic;
  int closed;
  pthread_mutex_t lock;
  wf_rt *rt;
  xla_plan **plans;
  int32_t nplans, cap;
  struct dev_slot {
    wf_buffer *dev, *host; /* the kernels' error slot, its page-locked mirror */
    void *copied;          /* an event recorded after the last copy to the mirror */
  } slots[MAXDEV];         /* cuda, release and debug plans: per device */
} wf_xla_ctx;

/* ---- errors and attributes ------------------------------------------- */

static wf_xla_error *fail(const wf_xla_frame *f, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static wf_xla_error *fail(const wf_xla_frame *f, int code, const char *fmt, ...) {
  char msg[WF_MSGSIZE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  wf_xla_error_args a = {WF_XLA_SIZE(wf_xla_error_args, errc), NULL, msg, code};
  return f->api->error_create(&a);
}

/* The metadata query XLA makes at registration: answer the API version
** (and traits) and report 1; 0 for an ordinary call. */
static int answer_metadata(wf_xla_frame *f, uint32_t traits) {
  for (wf_xla_ext *e = f->extension_start; e; e = e->next) {
    if (e->type != WF_XLA_EXT_METADATA) continue;
    wf_xla_metadata *m = ((wf_xla_metadata_ext *)e)->metadata;
    m->api_version.major = WF_XLA_API_MAJOR;
    m->api_version.minor = WF_XLA_API_MINOR;
    m->traits = traits;
    return 1;
  }
  return 0;
}

/* The attribute called name, or -1 (names are sorted, and few). */
static int attr_index(const wf_xla_attrs *a, const char *name) {
  size_t n = strlen(name);
  for (int64_t i = 0; i < a->size; i++) {
    const wf_xla_span *s = a->names[i];
    if (s->len == n && memcmp(s->ptr, name, n) == 0) return (int)i;
  }
  return -1;
}

/* An integer scalar attribute; 0 if it is missing or not an integer. */
static int attr_int(const wf_xla_attrs *a, const char *name, int64_t *v) {
  int i = attr_index(a, name);
  if (i < 0 || a->types[i] != WF_XLA_ATTR_SCALAR) return 0;
  const wf_xla_scalar *s = a->ptrs[i];
  switch (s->dtype) {
  case WF_XLA_S64:
  case WF_XLA_U64: memcpy(v, s->value, 8); return 1;
  case WF_XLA_S32: *v = *(const int32_t *)s->value; return 1;
  default: return 0;
  }
}

/* An array attribute of element type dtype, or NULL. */
static const wf_xla_array *attr_array(const wf_xla_attrs *a, const char *name, int32_t dtype) {
  int i = attr_index(a, name);
  if (i < 0 || a->types[i] != WF_XLA_ATTR_ARRAY) return NULL;
  const wf_xla_array *r = a->ptrs[i];
  return r->dtype == dtype || r->size == 0 ? r : NULL;
}

/* ---- the kernel handler ------------------------------------------------ */

/* Fill header h for parameter p from buffer b (NULL message) or say why
** the buffer does not fit. *batch takes the product of the leading
** dimensions beyond the kernel's (vmap). */
static const char *fill_header(const xla_param *p, const wf_xla_buffer *b, int32_t device,
                               wf_array *h, int64_t *batch, char *msg, size_t cap) {
  if (b->dtype != p->xla_dtype) {
    snprintf(msg, cap, "array '%s' has XLA element type %d, the kernel expects %d", p->name,
             (int)b->dtype, (int)p->xla_dtype);
    return msg;
  }
  int64_t lead = b->rank - p->ntrail;
  if (lead < p->ndim) {
    snprintf(msg, cap, "array '%s' has %lld dimensions, the kernel expects %d", p->name,
             (long long)b->rank, p->ndim + p->ntrail);
    return msg;
  }
  for (int t = 0; t < p->ntrail; t++) {
    if (b->dims[lead + t] != p->trail[t]) {
      snprintf(msg, cap, "array '%s': trailing dimension %d is %lld, the element needs %lld",
               p->name, t, (long long)b->dims[lead + t], (long long)p->trail[t]);
      return msg;
    }
  }
  int64_t extra = lead - p->ndim, b0 = 1;
  for (int64_t d = 0; d < extra; d++)
    b0 *= b->dims[d];
  if (extra > 0 && *batch == 1) *batch = b0;
  memset(h, 0, sizeof *h);
  int64_t size = 1;
  for (int d = 0; d < p->ndim; d++) {
    h->shape[d] = b->dims[extra + d] * (d == 0 ? b0 : 1);
    size *= h->shape[d];
  }
  int64_t stride = p->elsize;
  for (int d = p->ndim - 1; d >= 0; d--) {
    h->strides[d] = stride;
    stride *= h->shape[d];
  }
  h->data = b->data;
  h->size = size;
  h->ndim = p->ndim;
  h->dtype = p->dtype;
  h->device = device;
  h->elsize = p->elsize;
  h->flags = WF_ARR_BORROWED | (p->flags & PARAM_READONLY ? WF_ARR_READONLY : 0);
  return NULL;
}

#define STACK_PARAMS 16
#define STACK_BLOCK 64 /* int64_t words */

/* The CUDA side of a call: the device XLA runs it on, its stream (a
** CUstream), the plan's function there and the error slot's address. */
typedef struct cuda_call {
  int32_t dev, copy; /* copy: the slot goes to its mirror after the launch */
  void *stream, *fn, *slot;
} cuda_call;

static void slot_free(struct dev_slot *s) {
  wf_buffer_release(s->dev);
  wf_buffer_release(s->host);
  wf_cuda_event_release(s->copied);
  memset(s, 0, sizeof *s);
}

/* Device d's error slot for a call on stream: made at the first call.
** A check that failed in an earlier call (the kernel wrote the slot) is
** reported by the first call after the slot's copy has landed, as
** weft.synchronize reports release mode's launches, and the slot is
** cleared on the stream. One copy at a time: the slot keeps its message
** until reported, so a later copy takes it. */
static wf_xla_error *slot_check(wf_xla_frame *f, wf_xla_ctx *c, cuda_call *cc) {
  struct dev_slot *s = &c->slots[cc->dev];
  int done = 1;
  if (!s->dev) {
    if (wf_buffer_new(c->rt, cc->dev, WF_CUDA_ERRSLOT, &s->dev) != WEFT_OK ||
        wf_cuda_host_alloc(c->rt, WF_CUDA_ERRSLOT, &s->host) != WEFT_OK ||
        wf_cuda_event_new(c->rt, cc->dev, 0, &s->copied) != WEFT_OK ||
        wf_cuda_memset_raw(c->rt, cc->dev, s->dev->ptr, WF_CUDA_ERRSLOT, cc->stream) != WEFT_OK)
      done = -1;
    else
      memset(s->host->ptr, 0, WF_CUDA_ERRSLOT);
  } else {
    done = wf_cuda_event_done(c->rt, s->copied);
  }
  if (done < 0) {
    wf_xla_error *e = fail(f, WF_XLA_INTERNAL, "%s", wf_rt_errmsg(c->rt));
    slot_free(s);
    return e;
  }
  cc->slot = s->dev->ptr;
  cc->copy = done;
  const char *h = s->host->ptr;
  if (!done || *(const int32_t *)h == 0) return NULL;
  char msg[WF_CUDA_ERRSLOT];
  snprintf(msg, sizeof msg, "%s", h + 4);
  memset(s->host->ptr, 0, WF_CUDA_ERRSLOT);
  if (wf_cuda_memset_raw(c->rt, cc->dev, s->dev->ptr, WF_CUDA_ERRSLOT, cc->stream) != WEFT_OK)
    return fail(f, WF_XLA_INTERNAL, "%s", wf_rt_errmsg(c->rt));
  return fail(f, WF_XLA_INTERNAL, "%s (a check failed in an earlier weft call on cuda:%d)", msg,
              (int)cc->dev);
}

/* Find them for plan pl, loading its module on the device at the first
** call there (the context's lock is held). */
static wf_xla_error *cuda_setup(wf_xla_frame *f, wf_xla_ctx *c, xla_plan *pl, cuda_call *cc) {
  const wf_xla_api *api = f->api;
  wf_xla_error *e;
  if (!api->stream_get)
    return fail(f, WF_XLA_FAILED_PRECONDITION, "weft: XLA gave the CUDA target no stream");
  wf_xla_stream_args sa = {sizeof sa, NULL, f->ctx, NULL};
  if ((e = api->stream_get(&sa)) != NULL) return e;
  cc->stream = sa.stream;
  cc->dev = 0; /* an API before 0.3 has one device per process */
  if (api->struct_size >= WF_XLA_SIZE(wf_xla_api, device_ordinal_get) && api->device_ordinal_get) {
    wf_xla_device_args da = {sizeof da, NULL, f->ctx, 0};
    if ((e = api->device_ordinal_get(&da)) != NULL) return e;
    cc->dev = da.device_ordinal;
  }
  int d = cc->dev;
  if (d < 0 || d >= MAXDEV)
    return fail(f, WF_XLA_INVALID_ARGUMENT,
                "weft: kernel '%s': XLA runs it on cuda:%d, weft launches on cuda:0 to cuda:%d",
                pl->kernel, d, MAXDEV - 1);
  if ((!pl->mods[d] &&
       wf_cuda_module_load(c->rt, d, pl->image, strlen(pl->image) + 1, &pl->mods[d]) != WEFT_OK) ||
      (!pl->fns[d] &&
       wf_cuda_module_function(c->rt, pl->mods[d], pl->entry, &pl->fns[d]) != WEFT_OK))
    return fail(f, WF_XLA_INTERNAL, "%s (kernel '%s')", wf_rt_errmsg(c->rt), pl->kernel);
  cc->fn = pl->fns[d];
  return pl->slot ? slot_check(f, c, cc) : NULL;
}

/* Run plan pl for frame f (the context's lock is held): on the context's
** thread pool, or queued on XLA's CUDA stream (kernelParams: each array's
** header, each scalar's bytes, then the error slot's address). */
static wf_xla_error *run_plan(wf_xla_frame *f, wf_xla_ctx *c, xla_plan *pl) {
  const wf_xla_attrs *at = &f->attrs;
  if (f->args.size != pl->nargs || f->rets.size != pl->nrets)
    return fail(f, WF_XLA_INVALID_ARGUMENT,
                "weft: kernel '%s' takes %d arrays and makes %d, the call has %lld and %lld",
                pl->kernel, pl->nargs, pl->nrets, (long long)f->args.size, (long long)f->rets.size);
  cuda_call cc = {WF_DEVICE_CPU, 0, NULL, NULL, NULL};
  wf_xla_error *err = pl->cuda ? cuda_setup(f, c, pl, &cc) : NULL;
  if (err) return err;
  const wf_xla_array *dims_at = attr_array(at, "dims", WF_XLA_S64);
  const wf_xla_array *sc = attr_array(at, "scalars", WF_XLA_U8);
  wf_array hstack[STACK_PARAMS];
  int64_t bstack[STACK_BLOCK];
  void *pstack[STACK_PARAMS + 1];
  int big = pl->nparams > STACK_PARAMS;
  wf_array *hs = big ? malloc(sizeof(wf_array) * pl->nparams) : hstack;
  void **ptrs = big ? malloc(sizeof(void *) * (size_t)(pl->nparams + 1)) : pstack;
  int64_t *block = pl->size <= (int64_t)sizeof bstack ? bstack : malloc((size_t)pl->size);
  char msg[256];
  int64_t batch = 1;
  if (!hs || !ptrs || !block) {
    err = fail(f, WF_XLA_INTERNAL, "weft: out of memory");
    goto done;
  }
  for (int i = 0; i < pl->nparams; i++) {
    const xla_param *p = &pl->p[i];
    char *at_off = (char *)block + p->offset;
    if (p->src == SRC_SCALAR) {
      if (!sc || (int64_t)sc->size < (int64_t)p->index + p->nbytes) {
        err = fail(f, WF_XLA_INVALID_ARGUMENT, "weft: kernel '%s': no value for scalar '%s'",
                   pl->kernel, p->name);
        goto done;
      }
      memcpy(at_off, (const char *)sc->data + p->index, (size_t)p->nbytes);
      ptrs[i] = at_off;
      continue;
    }
    const wf_xla_list *l = p->src == SRC_ARG ? &f->args : &f->rets;
    wf_array *hp = &hs[i];
    const char *bad = fill_header(p, l->ptrs[p->index], cc.dev, hp, &batch, msg, sizeof msg);
    if (bad) {
      err = fail(f, WF_XLA_INVALID_ARGUMENT, "weft: kernel '%s': %s", pl->kernel, bad);
      goto done;
    }
    if ((p->flags & PARAM_ZERO) && hp->size > 0 && hp->data) {
      size_t n = (size_t)(hp->size * p->elsize);
      if (!pl->cuda)
        memset(hp->data, 0, n);
      else if (wf_cuda_memset_raw(c->rt, cc.dev, hp->data, n, cc.stream) != WEFT_OK) {
        err = fail(f, WF_XLA_INTERNAL, "%s", wf_rt_errmsg(c->rt));
        goto done;
      }
    }
    if (!pl->cuda) memcpy(at_off, &hp, sizeof hp); /* the cpu entry reads header pointers */
    ptrs[i] = hp;
  }
  int64_t dims[WF_MAXDIM];
  if (dims_at && dims_at->size > 0) {
    if ((int64_t)dims_at->size != pl->ndim) {
      err = fail(f, WF_XLA_INVALID_ARGUMENT,
                 "weft: kernel '%s' was compiled for %d launch dims, "
                 "the call gives %lld",
                 pl->kernel, pl->ndim, (long long)dims_at->size);
      goto done;
    }
    memcpy(dims, dims_at->data, sizeof(int64_t) * (size_t)pl->ndim);
    dims[0] *= batch;
  } else if (pl->first >= 0) {
    memcpy(dims, hs[pl->first].shape, sizeof(int64_t) * (size_t)pl->ndim);
  } else {
    err = fail(f, WF_XLA_INVALID_ARGUMENT, "weft: kernel '%s': no launch dims", pl->kernel);
    goto done;
  }
  int st;
  if (pl->cuda) {
    ptrs[pl->nparams] = &cc.slot;
    st = wf_cuda_launch_raw(c->rt, cc.dev, cc.fn, pl->ndim, dims, pl->nparams + pl->slot, ptrs, 0,
                            cc.stream);
    struct dev_slot *s = &c->slots[cc.dev];
    if (st == WEFT_OK && pl->slot && cc.copy)
      st = wf_cuda_dtoh_raw(c->rt, cc.dev, s->host->ptr, s->dev->ptr, WF_CUDA_ERRSLOT, cc.stream,
                            s->copied);
  } else {
    st = wf_cpu_launch(c->rt, pl->fn, pl->ndim, dims, block, pl->cost);
  }
  if (st != WEFT_OK) err = fail(f, WF_XLA_INTERNAL, "%s", wf_rt_errmsg(c->rt));
done:
  if (hs != hstack) free(hs);
  if (ptrs != pstack) free(ptrs);
  if (block != bstack) free(block);
  return err;
}

/* Both targets: the frame's context and plan, under the context's lock.
** cuda: which target XLA called (the plan must be made for it). */
static wf_xla_error *handle(wf_xla_frame *f, int cuda) {
  if (answer_metadata(f, 0)) return NULL;
  const char *why = wf_xla_check_frame(f);
  if (why)
    return f->api && f->api->error_create ? fail(f, WF_XLA_FAILED_PRECONDITION, "%s", why) : NULL;
  int64_t cv = 0, id = -1;
  if (!attr_int(&f->attrs, "weft_ctx", &cv) || !attr_int(&f->attrs, "weft_plan", &id))
    return fail(f, WF_XLA_INVALID_ARGUMENT,
                "weft: a weft_kernel call needs the attributes "
                "weft_ctx and weft_plan (made by rt.jax_kernel)");
  wf_xla_ctx *c = (wf_xla_ctx *)(intptr_t)cv;
  if (!c || c->magic != CTX_MAGIC)
    return fail(f, WF_XLA_INVALID_ARGUMENT, "weft: weft_ctx is not a weft context");
  pthread_mutex_lock(&c->lock);
  wf_xla_error *err;
  if (c->closed)
    err = fail(f, WF_XLA_FAILED_PRECONDITION, "weft: the weft.Runtime of this kernel is closed");
  else if (id < 0 || id >= c->nplans)
    err = fail(f, WF_XLA_INVALID_ARGUMENT, "weft: no plan %lld", (long long)id);
  else if (c->plans[id]->cuda != cuda)
    err = fail(f, WF_XLA_INVALID_ARGUMENT,
               "weft: kernel '%s' was compiled for JAX's %s platform, XLA runs it on %s",
               c->plans[id]->kernel, cuda ? "cpu" : "CUDA", cuda ? "CUDA" : "the cpu");
  else
    err = run_plan(f, c, c->plans[id]);
  pthread_mutex_unlock(&c->lock);
  return err;
}

/* The target "weft_kernel" of JAX's cpu platform. */
static wf_xla_error *wf_xla_kernel(wf_xla_frame *f) {
  return handle(f, 0);
}

/* ... and of its CUDA platform: queued on XLA's stream, never waited for. */
static wf_xla_error *wf_xla_kernel_cuda(wf_xla_frame *f) {
  return handle(f, 1);
}

/* ---- Python builtins ----------------------------------------------------- */

static pyobj *none(void) {
  Py_IncRef(&_Py_NoneStruct);
  return &_Py_NoneStruct;
}

static int nargs_ok(pyssize n, pyssize want, const char *fn) {
  if (n == want) return 1;
  char msg[96];
  snprintf(msg, sizeof msg, "weft: %s takes %d arguments", fn, (int)want);
  PyErr_SetString(PyExc_TypeError, msg);
  return 0;
}

static int int_arg(pyobj *o, int64_t *v) {
  *v = PyLong_AsLongLong(o);
  return !(*v == -1 && PyErr_Occurred());
}

static wf_xla_ctx *ctx_arg(pyobj *o) {
  int64_t v;
  if (!int_arg(o, &v)) return NULL;
  wf_xla_ctx *c = (wf_xla_ctx *)(intptr_t)v;
  if (!c || c->magic != CTX_MAGIC) {
    PyErr_SetString(PyExc_ValueError, "weft: not an XLA context");
    return NULL;
  }
  return c;
}

/* ctx_new() -> ctx: a context with its own runtime (thread pool). */
static pyobj *py_ctx_new(pyobj *self, pyobj *const *a, pyssize n) {
  (void)self, (void)a;
  if (!nargs_ok(n, 0, "ctx_new")) return NULL;
  wf_xla_ctx *c = calloc(1, sizeof *c);
  if (!c) return PyErr_NoMemory();
  c->rt = wf_rt_new();
  if (!c->rt || pthread_mutex_init(&c->lock, NULL) != 0) {
    wf_rt_free(c->rt);
    free(c);
    return PyErr_NoMemory();
  }
  c->magic = CTX_MAGIC;
  return PyLong_FromVoidPtr(c);
}

static void free_plan(xla_plan *pl) {
  if (!pl) return;
  for (int d = 0; d < MAXDEV; d++)
    wf_cuda_module_release(pl->mods[d]);
  free(pl->image);
  free(pl);
}

/* ctx_close(ctx): no launch runs after this returns; plans are freed. */
static pyobj *py_ctx_close(pyobj *self, pyobj *const *a, pyssize n) {
  (void)self;
  wf_xla_ctx *c = nargs_ok(n, 1, "ctx_close") ? ctx_arg(a[0]) : NULL;
  if (!c) return NULL;
  pthread_mutex_lock(&c->lock);
  if (!c->closed) {
    c->closed = 1;
    for (int i = 0; i < c->nplans; i++)
      free_plan(c->plans[i]);
    free(c->plans);
    c->plans = NULL;
    c->nplans = c->cap = 0;
    for (int d = 0; d < MAXDEV; d++)
      slot_free(&c->slots[d]);
    wf_rt_free(c->rt);
    c->rt = NULL;
  }
  pthread_mutex_unlock(&c->lock);
  return none();
}

/* ctx_threads(ctx, n) -> the thread count of the context's launches after
** setting it to n (0: one per CPU; -1: only ask), as weft.config.num_threads
** sets it for weft.launch. */
static pyobj *py_ctx_threads(pyobj *self, pyobj *const *a, pyssize n) {
  (void)self;
  wf_xla_ctx *c = nargs_ok(n, 2, "ctx_threads") ? ctx_arg(a[0]) : NULL;
  int64_t nt;
  if (!c || !int_arg(a[1], &nt)) return NULL;
  if (nt > 4096) nt = 4096;
  pthread_mutex_lock(&c->lock);
  int now = 0;
  if (!c->closed) {
    if (nt >= 0) wf_rt_set_num_threads(c->rt, (int)nt); /* keeps the pool if unchanged */
    now = wf_rt_num_threads(c->rt);
  }
  pthread_mutex_unlock(&c->lock);
  return PyLong_FromLongLong(now);
}

/* Read one parameter tuple: (name, offset, src, index, nbytes, dtype,
** elsize, ndim, xla_dtype, ntrail, t0, t1, flags). */
static int read_param(pyobj *t, xla_param *p) {
  if (PyTuple_Size(t) != 13) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "weft: bad plan parameter");
    return 0;
  }
  const char *name = PyUnicode_AsUTF8(PyTuple_GetItem(t, 0));
  if (!name) return 0;
  snprintf(p->name, sizeof p->name, "%s", name);
  int64_t v[12];
  for (int k = 0; k < 12; k++)
    if (!int_arg(PyTuple_GetItem(t, k + 1), &v[k])) return 0;
  p->offset = (int32_t)v[0], p->src = (int32_t)v[1], p->index = (int32_t)v[2];
  p->nbytes = (int32_t)v[3], p->dtype = (int32_t)v[4], p->elsize = (int32_t)v[5];
  p->ndim = (int32_t)v[6], p->xla_dtype = (int32_t)v[7], p->ntrail = (int32_t)v[8];
  p->trail[0] = v[9], p->trail[1] = v[10], p->flags = (int32_t)v[11];
  if (p->offset < 0 || p->src < SRC_ARG || p->src > SRC_SCALAR || p->index < 0 || p->nbytes < 0 ||
      p->ndim < 0 || p->ndim > WF_MAXDIM || p->ntrail < 0 || p->ntrail > 2 ||
      (p->src != SRC_SCALAR && (p->ndim < 1 || p->elsize < 1))) {
    PyErr_SetString(PyExc_ValueError, "weft: bad plan parameter");
    return 0;
  }
  return 1;
}

/* A CUDA plan's (image, entry, slot) into pl: 0 with a Python error. */
static int cuda_plan(pyobj *t, xla_plan *pl) {
  int64_t slot = 0;
  const char *img = PyTuple_Size(t) == 3 ? PyUnicode_AsUTF8(PyTuple_GetItem(t, 0)) : NULL;
  const char *entry = img ? PyUnicode_AsUTF8(PyTuple_GetItem(t, 1)) : NULL;
  if (!entry || !int_arg(PyTuple_GetItem(t, 2), &slot)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "weft: bad CUDA plan");
    return 0;
  }
  size_t len = strlen(img);
  pl->image = malloc(len + 1);
  if (!pl->image) return PyErr_NoMemory(), 0;
  memcpy(pl->image, img, len + 1);
  snprintf(pl->entry, sizeof pl->entry, "%s", entry);
  pl->cuda = 1;
  pl->slot = slot != 0;
  return 1;
}

/* ctx_plan(ctx, fn, cost, ndim, first, size, nargs, nrets, kernel, params,
** cuda) -> plan index. cuda: None for a cpu plan, whose entry fn must stay
** valid while the context is open (the Lua layer keeps its code); else
** (PTX text, entry name, error slot 0/1) for the CUDA target (fn 0, the
** scalars' offsets are into their kernelParams block). */
static pyobj *py_ctx_plan(pyobj *self, pyobj *const *a, pyssize n) {
  (void)self;
  wf_xla_ctx *c = nargs_ok(n, 11, "ctx_plan") ? ctx_arg(a[0]) : NULL;
  if (!c) return NULL;
  int64_t v[7];
  for (int k = 0; k < 7; k++)
    if (!int_arg(a[k + 1], &v[k])) return NULL;
  const char *kname = PyUnicode_AsUTF8(a[8]);
  pyssize np = PyTuple_Size(a[9]);
  if (!kname || np < 0) return NULL;
  int cuda = a[10] != &_Py_NoneStruct;
  if ((v[0] == 0) != cuda || v[2] < 1 || v[2] > WF_MAXDIM || v[3] >= np || v[4] < 0 || v[5] < 0 ||
      v[6] < 0) {
    PyErr_SetString(PyExc_ValueError, "weft: bad plan");
    return NULL;
  }
  xla_plan *pl = calloc(1, sizeof *pl + sizeof(xla_param) * (size_t)np);
  if (!pl) return PyErr_NoMemory();
  pl->fn = (void *)(intptr_t)v[0];
  pl->cost = v[1], pl->ndim = (int32_t)v[2], pl->first = (int32_t)v[3];
  pl->size = v[4], pl->nargs = (int32_t)v[5], pl->nrets = (int32_t)v[6];
  pl->nparams = (int32_t)np;
  snprintf(pl->kernel, sizeof pl->kernel, "%s", kname);
  if (cuda && !cuda_plan(a[10], pl)) goto bad;
  for (pyssize i = 0; i < np; i++) {
    xla_param *p = &pl->p[i];
    int in_range;
    if (!read_param(PyTuple_GetItem(a[9], i), p)) goto bad;
    in_range = p->src == SRC_ARG   ? p->index < pl->nargs
               : p->src == SRC_RET ? p->index < pl->nrets
                                   : 1;
    if (!in_range || p->offset + (p->src == SRC_SCALAR ? p->nbytes : cuda ? 0 : 8) > pl->size) {
      PyErr_SetString(PyExc_ValueError, "weft: bad plan parameter");
      goto bad;
    }
  }
  pthread_mutex_lock(&c->lock);
  int32_t id = -1;
  if (!c->closed && c->cap < INT32_MAX / 2) {
    if (c->nplans == c->cap) {
      int32_t cap = c->cap ? c->cap * 2 : 8;
      xla_plan **np2 = realloc(c->plans, sizeof *np2 * (size_t)cap);
      if (np2) c->plans = np2, c->cap = cap;
    }
    if (c->nplans < c->cap) {
      id = c->nplans++;
      c->plans[id] = pl;
    }
  }
  int closed = c->closed;
  pthread_mutex_unlock(&c->lock);
  if (id >= 0) return PyLong_FromLongLong(id);
  if (closed)
    PyErr_SetString(PyExc_RuntimeError, "weft: the runtime is closed");
  else
    PyErr_NoMemory();
bad:
  free_plan(pl);
  return NULL;
}

/* targets() -> (cpu capsule, cuda capsule): the handlers for
** jax.ffi.register_ffi_target (capsules without a name, as
** jax.ffi.pycapsule makes them). */
static pyobj *py_targets(pyobj *self, pyobj *const *a, pyssize n) {
  (void)self, (void)a;
  if (!nargs_ok(n, 0, "targets")) return NULL;
  pyobj *cpu = PyCapsule_New((void *)wf_xla_kernel, NULL, NULL);
  pyobj *cuda = cpu ? PyCapsule_New((void *)wf_xla_kernel_cuda, NULL, NULL) : NULL;
  pyobj *t = cuda ? PyTuple_New(2) : NULL;
  if (!t) {
    if (cpu) Py_DecRef(cpu);
    if (cuda) Py_DecRef(cuda);
    return NULL;
  }
  PyTuple_SetItem(t, 0, cpu);
  PyTuple_SetItem(t, 1, cuda);
  return t;
}

/* capsule(address) -> a capsule of the handler at address for
** register_ffi_target (jax.ffi.pycapsule would reset the argtypes of the
** process's shared ctypes.pythonapi.PyCapsule_New). */
static pyobj *py_capsule(pyobj *self, pyobj *const *a, pyssize n) {
  (void)self;
  int64_t v;
  if (!nargs_ok(n, 1, "capsule") || !int_arg(a[0], &v)) return NULL;
  if (!v) return PyErr_SetString(PyExc_ValueError, "weft: no handler"), NULL;
  return PyCapsule_New((void *)(intptr_t)v, NULL, NULL);
}

/* A frame's buffers as a list of (data address, shape tuple, XLA type). */
static pyobj *buffer_list(const wf_xla_list *l) {
  pyobj *r = PyList_New(l->size);
  for (int64_t i = 0; r && i < l->size; i++) {
    const wf_xla_buffer *b = l->ptrs[i];
    pyobj *shape = PyTuple_New(b->rank), *t = PyTuple_New(3);
    for (int64_t d = 0; shape && d < b->rank; d++) {
      pyobj *x = PyLong_FromLongLong(b->dims[d]);
      if (!x || PyTuple_SetItem(shape, d, x) != 0) {
        Py_DecRef(shape);
        shape = NULL;
      }
    }
    pyobj *data = PyLong_FromVoidPtr(b->data), *dt = PyLong_FromLongLong(b->dtype);
    if (!shape || !t || !data || !dt) {
      pyobj *held[] = {shape, t, data, dt};
      for (int k = 0; k < 4; k++)
        if (held[k]) Py_DecRef(held[k]);
      Py_DecRef(r);
      return NULL;
    }
    PyTuple_SetItem(t, 0, data);
    PyTuple_SetItem(t, 1, shape);
    PyTuple_SetItem(t, 2, dt);
    PyList_SetItem(r, i, t);
  }
  return r;
}

/* One element of XLA type dtype at p as a Python number (None if the type
** is not one weft knows). */
static pyobj *number(int32_t dtype, const void *p) {
  switch (dtype) {
  case WF_XLA_PRED: return PyLong_FromLongLong(*(const uint8_t *)p != 0);
  case WF_XLA_S8: return PyLong_FromLongLong(*(const int8_t *)p);
  case WF_XLA_S16: return PyLong_FromLongLong(*(const int16_t *)p);
  case WF_XLA_S32: return PyLong_FromLongLong(*(const int32_t *)p);
  case WF_XLA_S64: return PyLong_FromLongLong(*(const int64_t *)p);
  case WF_XLA_U8: return PyLong_FromLongLong(*(const uint8_t *)p);
  case WF_XLA_U16: return PyLong_FromLongLong(*(const uint16_t *)p);
  case WF_XLA_U32: return PyLong_FromLongLong(*(const uint32_t *)p);
  case WF_XLA_U64: return PyLong_FromUnsignedLongLong(*(const uint64_t *)p);
  case WF_XLA_F32: return PyFloat_FromDouble(*(const float *)p);
  case WF_XLA_F64: return PyFloat_FromDouble(*(const double *)p);
  default: return none();
  }
}

static size_t xla_size(int32_t dtype) {
  switch (dtype) {
  case WF_XLA_PRED:
  case WF_XLA_S8:
  case WF_XLA_U8: return 1;
  case WF_XLA_S16:
  case WF_XLA_U16:
  case WF_XLA_F16: return 2;
  case WF_XLA_S32:
  case WF_XLA_U32:
  case WF_XLA_F32: return 4;
  default: return 8;
  }
}

/* An attribute as a Python value: numbers, tuples of numbers, str; None
** for dictionaries. */
static pyobj *attr_value(int32_t type, const void *v) {
  if (type == WF_XLA_ATTR_SCALAR) {
    const wf_xla_scalar *s = v;
    return number(s->dtype, s->value);
  }
  if (type == WF_XLA_ATTR_STRING) {
    const wf_xla_span *s = v;
    return PyUnicode_FromStringAndSize(s->ptr, (pyssize)s->len);
  }
  if (type != WF_XLA_ATTR_ARRAY) return none();
  const wf_xla_array *arr = v;
  pyobj *t = PyTuple_New((pyssize)arr->size);
  size_t es = xla_size(arr->dtype);
  for (size_t i = 0; t && i < arr->size; i++) {
    pyobj *x = number(arr->dtype, (const char *)arr->data + i * es);
    if (!x || PyTuple_SetItem(t, (pyssize)i, x) != 0) {
      Py_DecRef(t);
      t = NULL;
    }
  }
  return t;
}

static pyobj *attr_dict(const wf_xla_attrs *at) {
  pyobj *d = PyDict_New();
  for (int64_t i = 0; d && i < at->size; i++) {
    pyobj *k = PyUnicode_FromStringAndSize(at->names[i]->ptr, (pyssize)at->names[i]->len);
    pyobj *x = k ? attr_value(at->types[i], at->ptrs[i]) : NULL;
    int st = x ? PyDict_SetItem(d, k, x) : -1;
    if (k) Py_DecRef(k);
    if (x) Py_DecRef(x);
    if (st != 0) {
      Py_DecRef(d);
      d = NULL;
    }
  }
  return d;
}

/* frame(address) -> None for the metadata query (answered), a str when
** the frame cannot be read, else (inputs, outputs, attrs). */
static pyobj *py_frame(pyobj *self, pyobj *const *a, pyssize n) {
  (void)self;
  int64_t v;
  if (!nargs_ok(n, 1, "frame") || !int_arg(a[0], &v)) return NULL;
  wf_xla_frame *f = (wf_xla_frame *)(intptr_t)v;
  if (!f) return PyErr_SetString(PyExc_ValueError, "weft: no frame"), NULL;
  if (answer_metadata(f, 0)) return none();
  const char *why = wf_xla_check_frame(f);
  if (why) return PyUnicode_FromStringAndSize(why, (pyssize)strlen(why));
  pyobj *ins = buffer_list(&f->args), *outs = ins ? buffer_list(&f->rets) : NULL;
  pyobj *at = outs ? attr_dict(&f->attrs) : NULL, *t = at ? PyTuple_New(3) : NULL;
  if (!t) {
    pyobj *held[] = {ins, outs, at};
    for (int k = 0; k < 3; k++)
      if (held[k]) Py_DecRef(held[k]);
    return NULL;
  }
  PyTuple_SetItem(t, 0, ins);
  PyTuple_SetItem(t, 1, outs);
  PyTuple_SetItem(t, 2, at);
  return t;
}

/* error(address, message) -> the address of a new XLA error (what a
** Python callback returns to fail the call), or 0 if the API is unusable. */
static pyobj *py_error(pyobj *self, pyobj *const *a, pyssize n) {
  (void)self;
  int64_t v;
  if (!nargs_ok(n, 2, "error") || !int_arg(a[0], &v)) return NULL;
  const char *msg = PyUnicode_AsUTF8(a[1]);
  if (!msg) return NULL;
  wf_xla_frame *f = (wf_xla_frame *)(intptr_t)v;
  if (!f || !f->api || wf_xla_check_frame(f)) return PyLong_FromLongLong(0);
  return PyLong_FromVoidPtr(fail(f, WF_XLA_INTERNAL, "%s", msg));
}

static wf_pymethod methods[] = {
    {"ctx_new", (void *)py_ctx_new, WF_METH_FASTCALL, NULL},
    {"ctx_close", (void *)py_ctx_close, WF_METH_FASTCALL, NULL},
    {"ctx_plan", (void *)py_ctx_plan, WF_METH_FASTCALL, NULL},
    {"ctx_threads", (void *)py_ctx_threads, WF_METH_FASTCALL, NULL},
    {"targets", (void *)py_targets, WF_METH_FASTCALL, NULL},
    {"capsule", (void *)py_capsule, WF_METH_FASTCALL, NULL},
    {"frame", (void *)py_frame, WF_METH_FASTCALL, NULL},
    {"error", (void *)py_error, WF_METH_FASTCALL, NULL},
};

void *wf_xla_functions(void) {
  return wf_py_method_tuple(methods, (int)(sizeof methods / sizeof methods[0]));
}
