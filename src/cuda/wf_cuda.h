/*
** wf_cuda.h -- the CUDA backend's internal interface.
**
**   emit.c    IR (after wf_ir_optimize) -> CUDA C text with #line directives
**   nvrtc.c   NVRTC and nvJitLink loaded with dlopen: CUDA C -> PTX/CUBIN,
**             disk cache, error lines mapped back to the Lua source
**
** Takes: the IR (after wf_ir_optimize). Gives: CUDA C text, PTX and CUBIN
** images. Running them (libcuda: devices, memory, modules, launches,
** graphs) is the runtime's: src/runtime/wf_cudadrv.h.
**
** Nothing here links against CUDA: every library is found at run time, so
** libweft loads on machines without a driver or toolkit.
**
** Kernel ABI of the emitted code (what a launch passes, in this order):
**
**   wf_dims d        { int64 n; int64 dim[4]; int64 div[4]; } (by value)
**                    n = product of the launch dims; div[k] = product of
**                    dim[k+1..3]; tid(k) = (i / div[k]) % dim[k] for the
**                    linear index i (row-major, as the CPU backend).
**   then each kernel parameter in order:
**     array          wf_arr { char *data; int64 shape[4]; int64 strides[4]; }
**                    by value: the first 72 bytes of a wf_array header, so
**                    the host passes a pointer to the header itself.
**     scalar/agg     by value in its C layout (wf_type size/align).
*/
#ifndef WF_CUDA_H
#define WF_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "util/util.h"

/* ======================================================================
** emitter
** ====================================================================== */
typedef struct wf_cuda_src {
  char *text; /* malloc'd CUDA C source */
  size_t len;
  int uses_half; /* has float16 values (wf_half, defined by the source itself) */
  int nentries;  /* kernel entry points, in module order */
  char **entries;
} wf_cuda_src;

/* Emit every kernel function of m. 0 on success; else writes err
** ("chunk:line: message" when the failing instruction has a location). */
WF_INTERNAL int wf_cuda_emit(wf_module *m, wf_cuda_src *out, char *err, size_t errsize);
/* Emission options. debug: bounds checks on every array access and
** integer division checks; a failing thread writes "chunk:line: message"
** into the error slot, an extra last kernel parameter `wf_err *` (512
** bytes: int flag, then the NUL-terminated message; the host zeroes it
** before the launch and reads it after). names: the forward kernel's
** parameter names, for those messages. */
typedef struct wf_cuda_opts {
  int debug;
  int nnames;
  const char *const *names;
  int checks; /* release mode: bounds checks but those wf_pass_bounds covers; the error slot too */
} wf_cuda_opts;
#define WF_CUDA_ERRSLOT 512
_Static_assert(WF_CUDA_ERRSLOT == 512, "struct wf_err of src/cuda/prelude.cuh is 512 bytes");
WF_INTERNAL int wf_cuda_emit_opts(wf_module *m, const wf_cuda_opts *o, wf_cuda_src *out, char *err,
                                  size_t errsize);
WF_INTERNAL void wf_cuda_src_free(wf_cuda_src *s);
/* The C identifier of a kernel's entry point (sanitized name). */
WF_INTERNAL void wf_cuda_entry_name(const char *fname, char *buf, size_t n);

/* ======================================================================
** NVRTC / nvJitLink
** ====================================================================== */
typedef struct wf_nvrtc wf_nvrtc; /* loaded library + cache settings */

/* Load libnvrtc (and nvJitLink lazily). NULL on failure with err set. */
WF_INTERNAL wf_nvrtc *wf_nvrtc_open(char *err, size_t errsize);
WF_INTERNAL void wf_nvrtc_close(wf_nvrtc *nv);
/* NVRTC version as major*1000 + minor*10 (e.g. 13000). */
WF_INTERNAL int wf_nvrtc_version(wf_nvrtc *nv);

typedef struct wf_cuda_image {
  char *data;  /* PTX text (NUL-terminated) or CUBIN bytes; malloc'd */
  size_t size; /* bytes (PTX: without the NUL) */
  int is_cubin;
  int from_cache;
} wf_cuda_image;

/* Compile CUDA C for arch: "compute_80" (PTX), "sm_80" (CUBIN), or the
** shorthand "80" (PTX for compute_80). name is the program name shown in
** messages. NVRTC errors are rewritten so "chunk(line): error" reads
** "chunk:line: error". Uses the disk cache unless WEFT_CACHE_DIR is "0"/"off"/"". */
/* fast is NVRTC's --Ofast-compile level ("min", "mid", "max"), or NULL or
** "0" for full optimization; ignored by NVRTC before 12.8. */
WF_INTERNAL int wf_nvrtc_compile(wf_nvrtc *nv, const char *src, const char *name, const char *arch,
                                 const char *fast, wf_cuda_image *out, char *err, size_t errsize);
WF_INTERNAL void wf_cuda_image_free(wf_cuda_image *img);
/* Assemble PTX for sm_XX with nvJitLink (a validity check without a GPU).
** 0 on success; else err holds the linker log. cubin_size (may be NULL)
** receives the size of the result. */
WF_INTERNAL int wf_nvrtc_assemble(wf_nvrtc *nv, const char *ptx, const char *sm_arch,
                                  size_t *cubin_size, char *err, size_t errsize);
/* The CUDA cache directory (<WEFT_CACHE_DIR or ~/.cache/weft>/cuda) into buf; 0 if
** caching is off. */
WF_INTERNAL int wf_cuda_cache_dir(char *buf, size_t n);
/* Rewrite NVRTC's "name(12): error: x" lines as "name:12: error: x". */
WF_INTERNAL void wf_nvrtc_map_log(const char *log, char *out, size_t n);

#endif
