/*
** prelude.cuh -- the helpers weft's generated CUDA C builds on.
**
** src/cuda/emit.c copies pieces of this file in front of the kernels it
** emits: only the pieces whose names the kernels use, in this file's order
** (a smaller cold NVRTC compile). CMake embeds the file into the library at
** build time (cmake/embed.cmake), so it is never read at run time.
**
** A line "//@ piece KIND [NAME|NAME...]" starts a piece; it runs to the
** next "//@" line. KIND is
**   device    CUDA-only code: the emitter puts it under #ifndef
**             WF_HOST_SHIM (tests/cuda/shim.h defines the same names when
**             the emitted code is built by g++ on the host)
**   half      device code needed only by kernels that use float16
**   portable  code for NVRTC and for g++ through the shim alike
**   file      this file's own structure: never emitted
** NAMEs are substrings of the kernel code that make the piece wanted (none:
** always). Text before the first "//@" line (this comment) is not emitted.
** A piece may use the pieces above it.
**
** The whole file is valid CUDA C (NVRTC compiles it on its own).
*/
#ifndef WF_HOST_SHIM
//@ piece device
#define WF_FN static __device__ __forceinline__
/* the failure reports: out of line, so that a kernel with hundreds of
** checks does not inline hundreds of message builders (an 8x8 float64
** matrix product with 257 checks took NVRTC 20 s so, 1 s out of line) */
#define WF_COLD static __device__ __noinline__
#define WF_INFF __int_as_float(0x7f800000)
#define WF_NANF __int_as_float(0x7fffffff)
#define WF_INF __longlong_as_double(0x7ff0000000000000LL)
#define WF_NAN __longlong_as_double(0x7fffffffffffffffLL)
//@ piece half
struct __align__(2) wf_half { unsigned short x; };
WF_FN float wf_h2f(wf_half h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.x)); return f; }
WF_FN wf_half wf_f2h(float f) { wf_half h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(f)); return h; }
WF_FN wf_half wf_d2h(double d) { wf_half h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.x) : "d"(d)); return h; }
//@ piece device wf_trap(
WF_FN void wf_trap(const char *msg) { printf("weft: kernel trap: %s\n", msg); __trap(); }
//@ piece device wf_claim(|wf_e)
WF_FN bool wf_claim(int *flag) { return atomicCAS(flag, 0, 1) == 0; }
//@ piece device wf_atomic_narrow(
WF_FN unsigned int wf_cas32(unsigned int *p, unsigned int c, unsigned int v) {
  return atomicCAS(p, c, v); }
//@ piece device wf_atomic_add(|wf_atomic_min(|wf_atomic_max(
WF_FN float wf_atomic_add(float *p, float v) { return atomicAdd(p, v); }
WF_FN double wf_atomic_add(double *p, double v) { return atomicAdd(p, v); }
WF_FN int wf_atomic_add(int *p, int v) { return atomicAdd(p, v); }
WF_FN unsigned int wf_atomic_add(unsigned int *p, unsigned int v) { return atomicAdd(p, v); }
WF_FN unsigned long long wf_atomic_add(unsigned long long *p, unsigned long long v) { return atomicAdd(p, v); }
WF_FN long long wf_atomic_add(long long *p, long long v) {
  return (long long)atomicAdd((unsigned long long *)p, (unsigned long long)v); }
WF_FN int wf_atomic_min(int *p, int v) { return atomicMin(p, v); }
WF_FN int wf_atomic_max(int *p, int v) { return atomicMax(p, v); }
WF_FN unsigned int wf_atomic_min(unsigned int *p, unsigned int v) { return atomicMin(p, v); }
WF_FN unsigned int wf_atomic_max(unsigned int *p, unsigned int v) { return atomicMax(p, v); }
WF_FN long long wf_atomic_min(long long *p, long long v) { return atomicMin(p, v); }
WF_FN long long wf_atomic_max(long long *p, long long v) { return atomicMax(p, v); }
WF_FN unsigned long long wf_atomic_min(unsigned long long *p, unsigned long long v) { return atomicMin(p, v); }
WF_FN unsigned long long wf_atomic_max(unsigned long long *p, unsigned long long v) { return atomicMax(p, v); }
/* float min/max: compare-and-swap on the bits until no smaller/larger */
WF_FN float wf_atomic_min(float *p, float v) {
  int *ip = (int *)p; int old = *ip, assumed;
  do { assumed = old; if (!(v < __int_as_float(assumed))) break;
       old = atomicCAS(ip, assumed, __float_as_int(v)); } while (old != assumed);
  return __int_as_float(old); }
WF_FN float wf_atomic_max(float *p, float v) {
  int *ip = (int *)p; int old = *ip, assumed;
  do { assumed = old; if (!(v > __int_as_float(assumed))) break;
       old = atomicCAS(ip, assumed, __float_as_int(v)); } while (old != assumed);
  return __int_as_float(old); }
WF_FN double wf_atomic_min(double *p, double v) {
  unsigned long long *ip = (unsigned long long *)p, old = *ip, assumed;
  do { assumed = old; if (!(v < __longlong_as_double((long long)assumed))) break;
       old = atomicCAS(ip, assumed, (unsigned long long)__double_as_longlong(v)); } while (old != assumed);
  return __longlong_as_double((long long)old); }
WF_FN double wf_atomic_max(double *p, double v) {
  unsigned long long *ip = (unsigned long long *)p, old = *ip, assumed;
  do { assumed = old; if (!(v > __longlong_as_double((long long)assumed))) break;
       old = atomicCAS(ip, assumed, (unsigned long long)__double_as_longlong(v)); } while (old != assumed);
  return __longlong_as_double((long long)old); }
//@ piece device wf_atomic_exch(|wf_atomic_cas(|wf_atomic_and(|wf_atomic_or(|wf_atomic_xor(
/* Warp's other atomics on 32- and 64-bit elements; signed 64-bit and
** float ones through the unsigned and integer forms CUDA has */
#define WF_ULL(p) ((unsigned long long *)(p))
WF_FN int wf_atomic_exch(int *p, int v) { return atomicExch(p, v); }
WF_FN unsigned int wf_atomic_exch(unsigned int *p, unsigned int v) { return atomicExch(p, v); }
WF_FN unsigned long long wf_atomic_exch(unsigned long long *p, unsigned long long v) { return atomicExch(p, v); }
WF_FN long long wf_atomic_exch(long long *p, long long v) { return (long long)atomicExch(WF_ULL(p), (unsigned long long)v); }
WF_FN float wf_atomic_exch(float *p, float v) { return atomicExch(p, v); }
WF_FN double wf_atomic_exch(double *p, double v) {
  return __longlong_as_double((long long)atomicExch(WF_ULL(p), (unsigned long long)__double_as_longlong(v))); }
WF_FN int wf_atomic_cas(int *p, int c, int v) { return atomicCAS(p, c, v); }
WF_FN unsigned int wf_atomic_cas(unsigned int *p, unsigned int c, unsigned int v) { return atomicCAS(p, c, v); }
WF_FN unsigned long long wf_atomic_cas(unsigned long long *p, unsigned long long c, unsigned long long v) {
  return atomicCAS(p, c, v); }
WF_FN long long wf_atomic_cas(long long *p, long long c, long long v) {
  return (long long)atomicCAS(WF_ULL(p), (unsigned long long)c, (unsigned long long)v); }
WF_FN float wf_atomic_cas(float *p, float c, float v) {
  return __int_as_float(atomicCAS((int *)p, __float_as_int(c), __float_as_int(v))); }
WF_FN double wf_atomic_cas(double *p, double c, double v) {
  return __longlong_as_double((long long)atomicCAS(WF_ULL(p), (unsigned long long)__double_as_longlong(c),
                                                   (unsigned long long)__double_as_longlong(v))); }
WF_FN int wf_atomic_and(int *p, int v) { return atomicAnd(p, v); }
WF_FN unsigned int wf_atomic_and(unsigned int *p, unsigned int v) { return atomicAnd(p, v); }
WF_FN unsigned long long wf_atomic_and(unsigned long long *p, unsigned long long v) { return atomicAnd(p, v); }
WF_FN long long wf_atomic_and(long long *p, long long v) { return (long long)atomicAnd(WF_ULL(p), (unsigned long long)v); }
WF_FN int wf_atomic_or(int *p, int v) { return atomicOr(p, v); }
WF_FN unsigned int wf_atomic_or(unsigned int *p, unsigned int v) { return atomicOr(p, v); }
WF_FN unsigned long long wf_atomic_or(unsigned long long *p, unsigned long long v) { return atomicOr(p, v); }
WF_FN long long wf_atomic_or(long long *p, long long v) { return (long long)atomicOr(WF_ULL(p), (unsigned long long)v); }
WF_FN int wf_atomic_xor(int *p, int v) { return atomicXor(p, v); }
WF_FN unsigned int wf_atomic_xor(unsigned int *p, unsigned int v) { return atomicXor(p, v); }
WF_FN unsigned long long wf_atomic_xor(unsigned long long *p, unsigned long long v) { return atomicXor(p, v); }
WF_FN long long wf_atomic_xor(long long *p, long long v) { return (long long)atomicXor(WF_ULL(p), (unsigned long long)v); }
//@ piece half wf_atomic_add(|wf_atomic_min(|wf_atomic_max(
WF_FN wf_half wf_atomic_add(wf_half *p, wf_half v) {
  wf_half o; asm volatile("atom.add.noftz.f16 %0, [%1], %2;" : "=h"(o.x) : "l"(p), "h"(v.x) : "memory");
  return o; }
WF_FN wf_half wf_atomic_min(wf_half *p, wf_half v) {
  unsigned short *ip = (unsigned short *)p, old = *ip, assumed;
  do { assumed = old; if (!(wf_h2f(v) < wf_h2f(wf_half{assumed}))) break;
       old = atomicCAS(ip, assumed, v.x); } while (old != assumed);
  return wf_half{old}; }
WF_FN wf_half wf_atomic_max(wf_half *p, wf_half v) {
  unsigned short *ip = (unsigned short *)p, old = *ip, assumed;
  do { assumed = old; if (!(wf_h2f(v) > wf_h2f(wf_half{assumed}))) break;
       old = atomicCAS(ip, assumed, v.x); } while (old != assumed);
  return wf_half{old}; }
//@ file
#endif /* WF_HOST_SHIM */
//@ piece portable
struct wf_arr { char *data; long long shape[4]; long long strides[4]; };
struct wf_dims { long long n; long long dim[4]; long long div[4]; };
/* the host passes these: a wf_array header's first WF_ARR_KERNEL_BYTES
** (src/ir/abi.h) and the wf_dims of src/runtime/device_cuda.c, which
** asserts the same sizes */
static_assert(sizeof(wf_arr) == 72, "wf_arr: the first 72 bytes of a wf_array header");
static_assert(sizeof(wf_dims) == 72, "wf_dims: as src/runtime/device_cuda.c builds it");
//@ piece portable wf_view(
/* a[i] of an n-D array: the (n-1)-D array at row i */
WF_FN wf_arr wf_view(wf_arr a, long long i) {
  wf_arr r; r.data = a.data + i * a.strides[0];
  for (int k = 0; k < 3; k++) { r.shape[k] = a.shape[k + 1]; r.strides[k] = a.strides[k + 1]; }
  r.shape[3] = 1; r.strides[3] = 0; return r; }
//@ piece portable wf_idiv(|wf_imod(|wf_ifloordiv(
/* integer division as the CPU backend: x / 0 = x % 0 = 0, MIN / -1 wraps;
** Lua semantics: a % b = a - floor(a / b) * b; // floors */
template <class T> WF_FN bool wf_neg1(T b) { return (T)-1 < (T)0 && b == (T)-1; }
template <class T> WF_FN T wf_idiv(T a, T b) {
  if (b == 0) return 0; if (wf_neg1(b)) return (T)(0 - (unsigned long long)a); return (T)(a / b); }
template <class T> WF_FN T wf_imod(T a, T b) {
  if (b == 0 || wf_neg1(b)) return 0; T r = (T)(a % b);
  if (r != 0 && ((r < (T)0) != (b < (T)0))) r = (T)(r + b); return r; }
template <class T> WF_FN T wf_ifloordiv(T a, T b) {
  if (b == 0) return 0; if (wf_neg1(b)) return (T)(0 - (unsigned long long)a);
  T q = (T)(a / b); if ((T)(a % b) != 0 && ((a < (T)0) != (b < (T)0))) q = (T)(q - 1); return q; }
//@ piece portable wf_fptoi<
/* float -> int saturates, NaN -> 0 (as llvm.fptosi.sat) */
template <class I, class F> WF_FN I wf_fptoi(F x, double lo, double hi, I ilo, I ihi) {
  if (x != x) return 0; if ((double)x <= lo) return ilo; if ((double)x >= hi) return ihi; return (I)x; }
//@ piece portable wf_fmin(|wf_fmax(
WF_FN float wf_fmin(float a, float b) { return a < b ? a : b; }
WF_FN double wf_fmin(double a, double b) { return a < b ? a : b; }
WF_FN float wf_fmax(float a, float b) { return a > b ? a : b; }
WF_FN double wf_fmax(double a, double b) { return a > b ? a : b; }
//@ piece portable wf_iabs(
template <class T> WF_FN T wf_iabs(T a) { return a < 0 ? (T)(0 - a) : a; }
//@ piece portable wf_fmod(|wf_ffloordiv(
WF_FN float wf_fmod(float a, float b) { return a - floorf(a / b) * b; }
WF_FN double wf_fmod(double a, double b) { return a - floor(a / b) * b; }
WF_FN float wf_ffloordiv(float a, float b) { return floorf(a / b); }
WF_FN double wf_ffloordiv(double a, double b) { return floor(a / b); }
//@ piece portable wf_rng_init(|wf_randi(|wf_randf(
/* RNG: PCG hash (as the CPU backend) */
WF_FN unsigned int wf_pcg(unsigned int s) {
  unsigned int b = s * 747796405u + 2891336453u;
  unsigned int c = ((b >> ((b >> 28u) + 4u)) ^ b) * 277803737u;
  return (c >> 22u) ^ c; }
WF_FN unsigned int wf_rng_init(unsigned int seed, unsigned int offset) {
  return wf_pcg(seed + wf_pcg(offset)); }
WF_FN int wf_randi(unsigned int *s) { *s = wf_pcg(*s); return (int)*s; }
WF_FN float wf_randf(unsigned int *s) { *s = wf_pcg(*s); return (float)(*s >> 8) * (1.0f / 16777216.0f); }
//@ piece portable wf_atomic_narrow(
/* 8/16-bit integer atomics: compare-and-swap on the aligned 32-bit word
** holding the element (little-endian); op 0 add, 1 min, 2 max */
template <class T> WF_FN T wf_atomic_narrow(T *p, T v, int op) {
  unsigned int *w = (unsigned int *)((unsigned long long)p & ~3ULL);
  unsigned int sh = (unsigned int)((unsigned long long)p & 3ULL) * 8u;
  unsigned int mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << sh, old = *w, assumed;
  do { assumed = old; T cur = (T)((assumed & mask) >> sh);
       T nv = op == 0 ? (T)(cur + v) : op == 1 ? (v < cur ? v : cur) : (v > cur ? v : cur);
       unsigned int nw = (assumed & ~mask) | (((unsigned int)nv << sh) & mask);
       if (nw == assumed) return cur;
       old = wf_cas32(w, assumed, nw); } while (old != assumed);
  return (T)((old & mask) >> sh); }
//@ piece portable wf_e)
/* debug mode: the first failing thread writes its message here; the
** host reads the slot after the launch (512 bytes, zeroed before) */
struct wf_err { int flag; char msg[508]; };
static_assert(sizeof(wf_err) == 512, "wf_err: WF_CUDA_ERRSLOT bytes (src/cuda/wf_cuda.h)");
WF_FN void wf_put(wf_err *e, int *k, const char *s) { while (*s && *k < 507) e->msg[(*k)++] = *s++; }
WF_FN void wf_putll(wf_err *e, int *k, long long v) {
  char t[24]; int n = 0; unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
  do { t[n++] = (char)('0' + (int)(u % 10u)); u /= 10u; } while (u);
  if (v < 0) t[n++] = '-'; while (n && *k < 507) e->msg[(*k)++] = t[--n]; }
WF_COLD void wf_fail(wf_err *e, const char *where, const char *msg) {
  if (!wf_claim(&e->flag)) return; int k = 0;
  wf_put(e, &k, where); wf_put(e, &k, ": "); wf_put(e, &k, msg); e->msg[k] = 0; }
WF_COLD void wf_oob_report(wf_err *e, long long i, long long n, const char *where, int axis, const char *arr,
                           const char *kern) {
  if (!wf_claim(&e->flag)) return; int k = 0;
  wf_put(e, &k, where); wf_put(e, &k, ": index "); wf_putll(e, &k, i);
  wf_put(e, &k, " out of bounds for axis "); wf_putll(e, &k, axis);
  wf_put(e, &k, " with size "); wf_putll(e, &k, n); wf_put(e, &k, " in array '");
  wf_put(e, &k, arr); wf_put(e, &k, "' of kernel '"); wf_put(e, &k, kern);
  wf_put(e, &k, "'"); e->msg[k] = 0; }
WF_FN bool wf_oob(wf_err *e, long long i, long long n, const char *where, int axis, const char *arr, const char *kern) {
  if ((unsigned long long)i < (unsigned long long)n) return false;
  wf_oob_report(e, i, n, where, axis, arr, kern); return true; }
/* release mode's hoisted checks: indices first .. last (down: counting
** down; narrow: 32-bit indices) against n; reports the first index out
** of bounds in the order the threads or iterations reach it */
WF_FN bool wf_range(wf_err *e, long long first, long long last, int down, int narrow,
                    long long n, const char *where, int axis, const char *arr,
                    const char *kern) {
  long long lo = down ? last : first, hi = down ? first : last;
  if (lo >= 0 && hi < n && (!narrow || hi <= 2147483647LL)) return false;
  long long i = first < 0 || first >= n ? first : down ? -1 : n;
  return wf_oob(e, i, n, where, axis, arr, kern); }
