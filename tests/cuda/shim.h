/*
** shim.h -- compile weft's emitted CUDA C as host C++ (g++ -include shim.h).
**
** The emitted source skips its device prelude when WF_HOST_SHIM is
** defined; this header supplies the same names for the host:
**   - __global__/__device__ vanish; threadIdx/blockIdx/blockDim/gridDim are
**     plain globals that WF_SHIM_LAUNCH sets while it loops over the grid
**     (a small grid, so the kernels' grid-stride loops take several turns)
**   - atomics are host atomics (__atomic builtins, CAS loops for floats);
**     wf_cas32 and wf_claim (narrow atomics, the debug error slot) too
**   - wf_half is _Float16 with the emitter's conversion functions
**   - wf_trap throws wf_shim_trap, which WF_SHIM_LAUNCH catches and reports
**   - CUDA math functions C lacks (erfinv, erfcinv and their f forms)
** Tests compile <shim.h> + <emitted .cu> + a driver that calls
** WF_SHIM_LAUNCH(kernel, ndim, dims, args...) and prints the results.
*/
#ifndef WF_SHIM_H
#define WF_SHIM_H
#define WF_HOST_SHIM 1

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WF_FN static inline
#define WF_COLD static __attribute__((noinline, cold))
#define __global__
#define __device__
#define __forceinline__ inline

struct wf_shim_dim3 {
  unsigned int x, y, z;
};
/* the emulated device (tests/cuda/emu) runs streams on threads: thread_local */
#ifndef WF_SHIM_TLS
#define WF_SHIM_TLS
#endif
static WF_SHIM_TLS wf_shim_dim3 threadIdx, blockIdx, blockDim, gridDim;

/* ---- constants and the debug error slot's claim ---- */
#define WF_INFF __builtin_huge_valf()
#define WF_NANF __builtin_nanf("")
#define WF_INF __builtin_huge_val()
#define WF_NAN __builtin_nan("")
static inline bool wf_claim(int *flag) {
  int zero = 0;
  return __atomic_compare_exchange_n(flag, &zero, 1, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
static inline unsigned int wf_cas32(unsigned int *p, unsigned int c, unsigned int v) {
  __atomic_compare_exchange_n(p, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return c; /* the old value, as atomicCAS returns */
}

/* ---- half ---- */
typedef _Float16 wf_half;
static inline float wf_h2f(wf_half h) { return (float)h; }
static inline wf_half wf_f2h(float f) { return (wf_half)f; }
static inline wf_half wf_d2h(double d) { return (wf_half)d; }

/* ---- atomics: host atomics; float min/max as CAS loops on the value ---- */
template <class T> static inline T wf_atomic_add(T *p, T v) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &old, (T)(old + v), false, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
  }
  return old;
}
static inline float wf_atomic_add(float *p, float v) {
  float old, nv;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  do nv = old + v;
  while (!__atomic_compare_exchange(p, &old, &nv, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}
static inline double wf_atomic_add(double *p, double v) {
  double old, nv;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  do nv = old + v;
  while (!__atomic_compare_exchange(p, &old, &nv, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}
static inline wf_half wf_atomic_add(wf_half *p, wf_half v) {
  wf_half old = *p; /* the shim runs one thread at a time */
  *p = (wf_half)((float)old + (float)v);
  return old;
}
template <class T> static inline T wf_atomic_min(T *p, T v) {
  T old;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  while (v < old && !__atomic_compare_exchange(p, &old, &v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
template <class T> static inline T wf_atomic_max(T *p, T v) {
  T old;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  while (v > old && !__atomic_compare_exchange(p, &old, &v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}

template <class T> static inline T wf_atomic_exch(T *p, T v) {
  T old;
  __atomic_exchange(p, &v, &old, __ATOMIC_RELAXED);
  return old;
}
template <class T> static inline T wf_atomic_cas(T *p, T c, T v) {
  __atomic_compare_exchange(p, &c, &v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return c; /* the old value, as atomicCAS returns */
}
template <class T> static inline T wf_atomic_and(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }
template <class T> static inline T wf_atomic_or(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
template <class T> static inline T wf_atomic_xor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }

/* ---- CUDA math functions that C's libm lacks ----
** erfcinv(c) for 0 < c < 0.5 solves log(erfc(x)) = log(c) by Newton's
** method. log(erfc) is concave and decreasing, so from a start right of
** the root (sqrt(-log c), where erfc < c) the iterates decrease
** monotonically to it, and in log form the tail keeps its relative
** precision down to tiny subnormals. erfinv(y) for |y| <= 0.5 solves
** erf(x) = |y| the same way from the left (erf is concave on x >= 0, and
** the first step lands below the root). The rest maps onto these two
** through exact differences: erfinv(y) = erfcinv(1 - |y|) for |y| > 0.5,
** erfcinv(c) = erfinv(1 - c) for 0.5 <= c <= 1.5 (erfc near 1 cannot
** resolve a small x) and -erfcinv(2 - c) above. The float versions round
** the double result once, as the CPU backend does. */
#define WF_SHIM_2_SQRTPI 1.12837916709551257390 /* 2 / sqrt(pi) */
static inline double wf_shim_erfcinv_tail(double c) {
  double lc = log(c), x = sqrt(-lc);
  while (x > 0 && erfc(x) == 0) x *= 0.999; /* c near the smallest subnormal */
  for (int i = 0; i < 100; i++) {
    double e = erfc(x);
    double dx = (log(e) - lc) / (-WF_SHIM_2_SQRTPI * exp(-x * x) / e);
    if (!(dx == dx) || x - dx == x) break;
    x -= dx;
  }
  return x;
}
static inline double erfinv(double y) {
  double ay = fabs(y), x = 0;
  if (!(ay <= 1)) return WF_NAN;
  if (ay == 0) return y; /* keeps -0 */
  if (ay == 1) return copysign(WF_INF, y);
  if (ay > 0.5) return copysign(wf_shim_erfcinv_tail(1 - ay), y);
  for (int i = 0; i < 100; i++) {
    double dx = (erf(x) - ay) / (WF_SHIM_2_SQRTPI * exp(-x * x));
    if (x - dx == x) break;
    x -= dx;
  }
  return copysign(x, y);
}
static inline double erfcinv(double c) {
  if (!(c >= 0 && c <= 2)) return WF_NAN;
  if (c == 0) return WF_INF;
  if (c == 2) return -WF_INF;
  if (c < 0.5) return wf_shim_erfcinv_tail(c);
  if (c > 1.5) return -wf_shim_erfcinv_tail(2 - c);
  return erfinv(1 - c);
}
static inline float erfinvf(float y) { return (float)erfinv(y); }
static inline float erfcinvf(float c) { return (float)erfcinv(c); }

/* ---- traps ---- */
struct wf_shim_trap {
  const char *msg;
};
static inline void wf_trap(const char *msg) { throw wf_shim_trap{msg}; }

/* ---- launch: dims as wf_cuda_launch makes them, grid of blocks x threads ---- */
#define WF_SHIM_BLOCK 32
#define WF_SHIM_MAXGRID 3
#define WF_SHIM_LAUNCH(kernel, ndim, dims, ...)                                              \
  do {                                                                                       \
    wf_dims wd_;                                                                             \
    wd_.n = 1;                                                                               \
    for (int k_ = 0; k_ < 4; k_++) {                                                         \
      wd_.dim[k_] = k_ < (ndim) ? (dims)[k_] : 1;                                            \
      wd_.n *= wd_.dim[k_];                                                                  \
    }                                                                                        \
    long long acc_ = 1;                                                                      \
    for (int k_ = 3; k_ >= 0; k_--) {                                                        \
      wd_.div[k_] = acc_;                                                                    \
      acc_ *= wd_.dim[k_] ? wd_.dim[k_] : 1;                                                 \
    }                                                                                        \
    long long blocks_ = (wd_.n + WF_SHIM_BLOCK - 1) / WF_SHIM_BLOCK;                         \
    if (blocks_ > WF_SHIM_MAXGRID) blocks_ = WF_SHIM_MAXGRID;                                \
    blockDim.x = WF_SHIM_BLOCK;                                                              \
    gridDim.x = (unsigned)blocks_;                                                           \
    try {                                                                                    \
      for (unsigned b_ = 0; b_ < gridDim.x; b_++)                                            \
        for (unsigned t_ = 0; t_ < blockDim.x; t_++) {                                       \
          blockIdx.x = b_;                                                                   \
          threadIdx.x = t_;                                                                  \
          kernel(wd_, __VA_ARGS__);                                                          \
        }                                                                                    \
    } catch (wf_shim_trap & e_) {                                                            \
      printf("trap: %s\n", e_.msg);                                                          \
    }                                                                                        \
  } while (0)

#endif
