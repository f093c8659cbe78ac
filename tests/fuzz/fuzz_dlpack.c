/*
** fuzz_dlpack.c -- libFuzzer harness for DLPack import (src/interop/dlpack.c
** through the public weft_set / weft_get).
**
** The input bytes describe one DLManagedTensor or DLManagedTensorVersioned:
** version, flags, device, ndim (-128..127), dtype (code, bits, lanes), shape
** and strides (small values, 0, -1, huge and extreme ones; either may be
** NULL), byte_offset (0 up to 2^64-1), and the data: a heap buffer of the
** input's size, NULL, or a wild address. An optional element type ("vec3",
** ...) asks for trailing dimensions. The tensor is imported as global x.
**
** Invariants (each broken one aborts with a line on stderr):
**   - the deleter runs exactly once: at once when the import fails, else
**     when the array is dropped (and never after the harness freed it);
**   - an accepted array has 1 to 4 dimensions, sizes >= 0, an element
**     count that does not overflow int64, a byte_offset below 2^63 that
**     does not wrap the data pointer, and no NULL data behind a nonzero
**     size;
**   - when the tensor honestly lies inside its heap buffer (checked here
**     with 128-bit arithmetic from the DLPack fields alone), every element
**     weft's header addresses lies in it too: the harness reads each one
**     (ASan sees a read outside), and Lua's a:totable() reads them again.
**
** Build: CC=clang-16 CXX=clang++-16 cmake -S . -B build-fuzz -DWEFT_FUZZ=ON
**        cmake --build build-fuzz --target fuzz_dlpack
** Run:   build-fuzz/fuzz_dlpack -max_len=512 NEWDIR tests/fuzz/dlpack/corpus
**        (make fuzz FUZZ_SECONDS=3600 runs every harness that long; replay
**        one input with build-fuzz/fuzz_dlpack FILE; WEFT_FUZZ_VERBOSE=1
**        prints the tensor and weft's answer). tests/fuzz/extract-seeds.lua
**        writes the seed tensors; tests/fuzz/dlpack/crashes holds crash
**        reproducers (replayed by scripts/run-fuzz).
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interop/dlpack.h"
#include "weft.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- reading the input ------------------------------------------------ */

typedef struct reader {
  const uint8_t *p;
  size_t n;
} reader;

static uint64_t take(reader *r, int bytes) { /* little-endian; zeros past the end */
  uint64_t v = 0;
  for (int k = 0; k < bytes; k++) {
    uint64_t b = 0;
    if (r->n) b = *r->p++, r->n--;
    v |= b << (8 * k);
  }
  return v;
}

/* An int64 field: mostly small, sometimes extreme. */
static int64_t take_dim(reader *r) {
  uint8_t sel = (uint8_t)take(r, 1);
  switch (sel >> 4) {
  case 0: return -1;
  case 1: return INT64_MAX;
  case 2: return INT64_MIN;
  case 3: return (int64_t)1 << 62;
  case 4: return (int64_t)take(r, 8);
  case 5: return (int64_t)take(r, 4);
  case 6: return -(int64_t)(sel & 15);
  default: return sel & 15; /* 0..15 */
  }
}

static uint64_t take_offset(reader *r) {
  uint8_t sel = (uint8_t)take(r, 1);
  switch (sel >> 5) {
  case 0: return 0;
  case 1: return (uint64_t)1 << 63;
  case 2: return UINT64_MAX;
  case 3: return take(r, 8);
  case 4: return UINT64_MAX - (sel & 31);
  default: return sel & 31;
  }
}

/* ---- the producer ----------------------------------------------------- */

typedef struct producer {
  DLManagedTensorVersioned v;
  DLManagedTensor legacy;
  int deleted;
} producer;

static void del_versioned(DLManagedTensorVersioned *m) {
  ((producer *)m->manager_ctx)->deleted++;
}
static void del_legacy(DLManagedTensor *m) {
  ((producer *)m->manager_ctx)->deleted++;
}

static void finding(const char *fmt, long long a, long long b) {
  fprintf(stderr, "fuzz_dlpack: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n");
  abort();
}

static const char *const eltypes[] = {NULL,   NULL,    NULL,   "float32", "vec3",
                                      "vec2", "mat22", "vec4", "quat",    "nope"};
#define NELTYPES (int)(sizeof eltypes / sizeof eltypes[0])

/* ---- the state -------------------------------------------------------- */

static weft_State *the_state(void) {
  static weft_State *W; /* libFuzzer's entry points take no context */
  if (!W) {
    W = weft_open();
    if (!W) finding("weft_open failed%lld%lld", 0, 0);
  }
  return W;
}

static int verbose; /* WEFT_FUZZ_VERBOSE=1: each import's status */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *v = getenv("WEFT_FUZZ_VERBOSE");
  verbose = v && v[0] == '1';
  setenv("WEFT_CACHE_DIR", "off", 1);
  the_state();
  return 0;
}

/* Does the tensor, by its DLPack fields alone, lie inside [0, len) of its
** buffer? Returns 1 and *nelem when it does (128-bit arithmetic). */
static int honest(const DLTensor *t, size_t len, __int128 *nelem) {
  if (t->ndim < 0 || t->ndim > 64 || (t->ndim > 0 && !t->shape)) return 0;
  if (t->dtype.bits == 0 || t->dtype.bits % 8 || t->dtype.lanes != 1) return 0;
  __int128 sb = t->dtype.bits / 8, lo = 0, hi = 0, n = 1, compact = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    __int128 s = t->shape[d];
    if (s < 0) return 0;
    n *= s;
    if (n > ((__int128)1 << 40)) return 0;
  }
  *nelem = n;
  if (n == 0) return t->byte_offset <= len;
  for (int d = t->ndim - 1; d >= 0; d--) {
    __int128 st = t->strides ? (__int128)t->strides[d] : compact;
    __int128 ext = (t->shape[d] - 1) * st * sb;
    if (ext < 0)
      lo += ext;
    else
      hi += ext;
    compact *= t->shape[d];
  }
  __int128 off = t->byte_offset;
  return off + lo >= 0 && off + hi + sb <= (__int128)len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  weft_State *W = the_state();
  reader r = {data, size};
  uint8_t mode = (uint8_t)take(&r, 1);
  int versioned = mode & 1, null_shape = (mode & 6) == 6, with_strides = (mode >> 3) & 1;
  int datamode = (mode >> 4) & 3; /* 0, 1: heap buffer; 2: NULL; 3: wild */
  const char *eltype = eltypes[((mode >> 6) + take(&r, 1)) % NELTYPES];
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.ndim = (int8_t)take(&r, 1);
  if (t.ndim > 6 && (mode & 0x80)) t.ndim %= 6; /* mostly plausible ranks */
  t.dtype.code = (uint8_t)(take(&r, 1) % 8);
  uint8_t bsel = (uint8_t)take(&r, 1);
  t.dtype.bits = bsel < 224 ? (uint8_t)(8 << (bsel % 4)) : bsel;
  t.dtype.lanes = (uint16_t)(take(&r, 1) < 240 ? 1 : take(&r, 2));
  uint8_t dsel = (uint8_t)take(&r, 1);
  t.device.device_type = dsel < 200 ? 1 : dsel % 20;
  t.device.device_id = (int8_t)take(&r, 1) % 4;
  t.byte_offset = take_offset(&r);
  int nalloc = t.ndim > 0 ? t.ndim : 0;
  int64_t *shape = malloc(sizeof(int64_t) * (size_t)(nalloc ? nalloc : 1));
  int64_t *strides = malloc(sizeof(int64_t) * (size_t)(nalloc ? nalloc : 1));
  for (int k = 0; k < nalloc; k++)
    shape[k] = k < 6 ? take_dim(&r) : 1;
  for (int k = 0; k < nalloc; k++)
    strides[k] = k < 6 ? take_dim(&r) : 1;
  t.shape = null_shape ? NULL : shape;
  t.strides = with_strides ? strides : NULL;
  size_t len = (size_t)take(&r, 1) * 4;
  uint8_t *buf = malloc(len ? len : 1);
  for (size_t k = 0; k < len; k++)
    buf[k] = r.n ? (uint8_t)take(&r, 1) : (uint8_t)k;
  t.data = datamode < 2 ? (void *)buf : datamode == 2 ? NULL : (void *)(uintptr_t)0x10000;

  producer *p = calloc(1, sizeof *p);
  p->v.version.major = (uint32_t)(take(&r, 1) % 3);
  p->v.version.minor = 1;
  p->v.flags = take(&r, 1) & 3;
  p->v.manager_ctx = p;
  p->v.deleter = del_versioned;
  p->v.dl_tensor = t;
  p->legacy.dl_tensor = t;
  p->legacy.manager_ctx = p;
  p->legacy.deleter = del_legacy;

  weft_Arg a;
  memset(&a, 0, sizeof a);
  a.type = versioned ? WEFT_ARG_DLPACK_VERSIONED : WEFT_ARG_DLPACK;
  a.p = versioned ? (void *)&p->v : (void *)&p->legacy;
  a.s = eltype;
  if (verbose) {
    fprintf(stderr,
            "fuzz_dlpack: %s ndim %d dtype %d/%d/%d device %d:%d data %s len %zu "
            "byte_offset %llu element %s\n",
            versioned ? "versioned" : "legacy", (int)t.ndim, t.dtype.code, t.dtype.bits,
            t.dtype.lanes, t.device.device_type, t.device.device_id,
            datamode < 2    ? "heap"
            : datamode == 2 ? "NULL"
                            : "wild",
            len, (unsigned long long)t.byte_offset, eltype ? eltype : "-");
    for (int k = 0; k < nalloc && k < 8; k++)
      fprintf(stderr, "  shape[%d] %lld stride %s%lld\n", k, (long long)shape[k],
              t.strides ? "" : "(unused) ", (long long)strides[k]);
  }
  int rc = weft_set(W, "x", &a);
  if (verbose) fprintf(stderr, "fuzz_dlpack: status %d: %s\n", rc, rc ? weft_errmsg(W) : "ok");
  if (rc != WEFT_OK) {
    if (p->deleted != 1)
      finding("a failed import ran the deleter %lld times (status %lld)", p->deleted, rc);
    goto done;
  }
  weft_Arg out;
  if (weft_get(W, "x", &out) != WEFT_OK || out.type != WEFT_ARG_ARRAY)
    finding("an accepted tensor did not come back as an array (type %lld)%lld", out.type, 0);
  /* the header weft made */
  if (out.ndim < 1 || out.ndim > 4) finding("an array of %lld dimensions%lld", out.ndim, 0);
  __int128 n = 1;
  for (int d = 0; d < out.ndim; d++) {
    if (out.shape[d] < 0) finding("dimension %lld has size %lld", d, out.shape[d]);
    n *= out.shape[d];
    if (n > INT64_MAX) finding("the element count overflows (dimension %lld)%lld", d, 0);
  }
  if (n > 0 && !out.p) finding("NULL data behind %lld elements%lld", (long long)n, 0);
  if (t.byte_offset > (uint64_t)INT64_MAX)
    finding("byte_offset %llu accepted (beyond int64)%lld", (long long)t.byte_offset, 0);
  if ((uintptr_t)t.data + t.byte_offset < (uintptr_t)t.data && n > 0)
    finding("byte_offset %lld wraps the data pointer%lld", (long long)t.byte_offset, 0);
  __int128 cnt = 0;
  if (datamode < 2 && honest(&t, len, &cnt) && n > 0) {
    /* the elements weft's header addresses, read byte by byte: all of
    ** them, or (broadcast strides can make billions) the first 65536 and
    ** the last */
    size_t el = (size_t)out.d;
    volatile uint8_t sink = 0;
    int64_t idx[4] = {0, 0, 0, 0};
    for (long k = 0;; k++) {
      const uint8_t *e = out.p;
      for (int d = 0; d < out.ndim; d++)
        e += idx[d] * out.strides[d];
      if (e < buf || e + el > buf + len)
        finding("element at byte %lld lies outside the %lld-byte buffer", (long long)(e - buf),
                (long long)len);
      for (size_t b = 0; b < el; b++)
        sink ^= e[b];
      int d = out.ndim - 1;
      if (k == 65536) /* jump to the last element */
        for (d = 0; d < out.ndim; d++)
          idx[d] = out.shape[d] - 1;
      else
        while (d >= 0 && ++idx[d] == out.shape[d])
          idx[d--] = 0;
      if (d < 0 || k > 65536) break;
    }
    (void)sink;
    if (n <= 256 &&
        weft_dostring(W, "local ok = pcall(function() return x:totable() end)") != WEFT_OK)
      finding("x:totable() raised outside its pcall%lld%lld", 0, 0);
  }
  weft_unref(W, out.i);
  weft_dostring(W, "x = nil collectgarbage() collectgarbage()");
  if (p->deleted != 1) finding("a dropped array ran the deleter %lld times%lld", p->deleted, 0);
done:
  free(p);
  free(buf);
  free(shape);
  free(strides);
  return 0;
}
