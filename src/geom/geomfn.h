/*
** geomfn.h -- what the kernel-side geometry headers (volume.h, hashgrid.h)
** share: the fixed-width integer types (NVRTC has no stdint.h) and
** WF_GEOM_FN, the storage class of their functions (`static __device__
** inline` under CUDA). The cuda backend embeds this text once, ahead of
** theirs (src/cuda/emit.c), and their includes of it sit behind its guard.
*/
#ifndef WF_GEOM_GEOMFN_H
#define WF_GEOM_GEOMFN_H

#ifdef __CUDACC_RTC__
/* NVRTC has no stdint.h (identical typedefs may repeat in C++) */
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef unsigned long long uintptr_t;
#else
#include <math.h>
#include <stdint.h>
#endif

#ifndef WF_GEOM_FN
#if defined(__CUDACC__)
#define WF_GEOM_FN static __device__ inline
#else
#define WF_GEOM_FN static inline
#endif
#endif

#endif
