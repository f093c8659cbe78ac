/*
** cpu.h -- the CPU backend. Takes: IR functions (and ir/abi.h). Gives:
** native kernels from LLVM's ORC JIT, cached on disk, that the runtime
** launches (src/runtime/wf_launch.h). Internals shared by its files:
**   emit.c   IR -> LLVM IR: the instructions of a kernel body; cost estimate
**   entry.c  the thread loop, the exported entry, argument layout, and
**            wf_llvm_emit, which builds the module
**   simd.c   SIMD across threads (marks the thread loop for the vectorizer)
**   priv.c   privatized atomics (per-chunk private accumulation)
**   jit.c    target machine, O3, object code, ORC LLJIT, disk cache
**   rtlib.c  C helpers called by kernels (bounds errors, traps, print) and
**            the symbol table handed to the JIT
*/
#ifndef WF_CPU_H
#define WF_CPU_H

#include <llvm-c/Core.h>

#include "ir/abi.h"
#include "ir/ir.h"
#include "util/util.h"

/* Offsets into the headers generated code reads: from the compiler, not
** from comments (ir/abi.h asserts the layout; these, the load widths). */
#define WF_HDR_SHAPE ((int64_t)offsetof(wf_array, shape))
#define WF_HDR_STRIDES ((int64_t)offsetof(wf_array, strides))
#define WF_CTX_DIMS ((int64_t)offsetof(wf_launch_ctx, dims))
#define WF_CTX_ERROR ((int64_t)offsetof(wf_launch_ctx, error))
_Static_assert(offsetof(wf_array, data) == 0, "the data pointer loads from the header itself");
_Static_assert(sizeof(((wf_array *)0)->shape[0]) == 8 && sizeof(((wf_array *)0)->strides[0]) == 8,
               "shape and strides load as i64");
_Static_assert(sizeof(((wf_launch_ctx *)0)->dims[0]) == 8, "dims load as i64");
_Static_assert(sizeof(((wf_launch_ctx *)0)->error) == 4, "error loads as i32");

/* Bump when the generated code changes: part of the disk cache key. */
#define WF_CPU_CODEGEN_VERSION 7

typedef struct wf_cpu_opts {
  int debug;  /* every bounds check, division checks, error polling */
  int checks; /* bounds checks but those wf_pass_bounds covers (mode "release") */
  int ndim;   /* launch dimensionality the code is made for (1-4) */
  int simd;   /* vectorize across threads where safe (emit.c; WEFT_SIMD=off: 0) */
  int poll;   /* poll the interrupt flag at loop back-edges (WEFT_POLL=off: 0) */
  int nnames; /* parameter names for messages (may be 0) */
  const char *const *names;
  const char *symbol; /* name of the exported kernel function */
  const char *cpu;    /* "target-cpu" / "target-features" attributes */
  const char *features;
} wf_cpu_opts;

/* Build an LLVM module holding the kernel function `symbol` (ABI of
** ir/abi.h) for fn. NULL on error, with the message in err. */
WF_INTERNAL LLVMModuleRef wf_llvm_emit(LLVMContextRef C, wf_func *fn, const wf_cpu_opts *o,
                                       char *err, size_t errsize);

/* Byte offsets of the parameters in the argument block (offsets has
** fn->nparams entries); returns the block's total size. */
WF_INTERNAL int64_t wf_cpu_arg_layout(const wf_func *fn, int64_t *offsets);

/* Estimated instructions per thread (loops count 16 iterations). */
WF_INTERNAL int64_t wf_cpu_cost(const wf_func *fn);

/* ---- the LLVM emitter's internals (emit.c, entry.c, simd.c, priv.c) -- */
/* The state of one wf_llvm_emit call. */
typedef struct wf_cpu_emitter {
  LLVMContextRef C;
  LLVMModuleRef M;
  LLVMBuilderRef B;
  wf_func *fn;
  wf_types *T;
  const wf_cpu_opts *o;
  LLVMValueRef *v;      /* per IR value */
  int16_t *aname;       /* per IR value: root array param index, -1 unknown */
  int8_t *adepth;       /* per IR value: dims peeled off the root array */
  int32_t *web;         /* per IR value: its local array's slot web (local.c), or -1 */
  uint8_t *lflags;      /* per IR value: WF_CPU_BORROW, WF_CPU_WRITEBACK (local.c) */
  LLVMValueRef *slot;   /* per web: the slot in the body being emitted */
  LLVMValueRef slot_fn; /* the body the slots belong to */
  LLVMValueRef F;       /* the body function being emitted */
  LLVMValueRef ctx;     /* its wf_launch_ctx pointer */
  /* interrupt polling: the flag's address (NULL: no polling) and the
  ** block that reports "interrupted" and leaves (made on first use) */
  LLVMValueRef intr;
  LLVMBasicBlockRef intr_bb;
  int while_polls; /* polls at WHILE back-edges in the current body */
  LLVMValueRef tid[WF_MAXDIM];
  LLVMBasicBlockRef exit_bb, latch_bb;
  LLVMValueRef pline; /* the thread's pending print line (emit_print), or NULL */
  int contig;         /* emitting the noalias / compact-stride body */
  int privmode;       /* emitting body.p: atomic adds into priv[] params are plain */
  const int8_t *priv; /* per parameter: only updated by atomic_add (priv.c) */
  LLVMTypeRef i1, i8, i16, i32, i64, f16, f32, f64, ptr, vd;
  char chunk[256]; /* chunk name as Lua shows it */
  char *err;
  size_t errsize;
  int failed;
} wf_cpu_emitter;
/* emit.c: per-instruction emission and the helpers the others use. */
WF_INTERNAL void wf_cpu_efail(wf_cpu_emitter *e, const wf_inst *in, const char *fmt, ...);
WF_INTERNAL LLVMTypeRef wf_cpu_ltype(wf_cpu_emitter *e, const wf_type *t);
WF_INTERNAL LLVMTypeRef wf_cpu_arr_ltype(wf_cpu_emitter *e, int nd);
WF_INTERNAL LLVMValueRef wf_cpu_ci32(wf_cpu_emitter *e, int64_t v);
WF_INTERNAL LLVMValueRef wf_cpu_ci64(wf_cpu_emitter *e, int64_t v);
WF_INTERNAL LLVMValueRef wf_cpu_gep8(wf_cpu_emitter *e, LLVMValueRef p, LLVMValueRef off);
WF_INTERNAL void wf_cpu_add_fn_attr(wf_cpu_emitter *e, LLVMValueRef f, const char *name);
WF_INTERNAL LLVMValueRef wf_cpu_call_ext(wf_cpu_emitter *e, const char *name, LLVMTypeRef ret,
                                         LLVMTypeRef *pt, int n, LLVMValueRef *args);
WF_INTERNAL LLVMValueRef wf_cpu_header_value(wf_cpu_emitter *e, LLVMValueRef hdr, int nd);
WF_INTERNAL LLVMValueRef wf_cpu_arr_get(wf_cpu_emitter *e, LLVMValueRef a, unsigned field, int k);
WF_INTERNAL LLVMValueRef wf_cpu_mload(wf_cpu_emitter *e, const wf_type *t, LLVMValueRef p);
WF_INTERNAL void wf_cpu_mstore(wf_cpu_emitter *e, const wf_inst *in, const wf_type *t,
                               LLVMValueRef p, LLVMValueRef v);
/* native.c: a call of a native builtin (WF_OP_NATIVE, src/geom/native.h),
** and count values of type t allocated in the body's entry block. */
WF_INTERNAL void wf_cpu_emit_native(wf_cpu_emitter *e, wf_inst *in);
WF_INTERNAL LLVMValueRef wf_cpu_entry_alloca(wf_cpu_emitter *e, LLVMTypeRef t, LLVMValueRef count,
                                             const char *name);
WF_INTERNAL void wf_cpu_range_check(wf_cpu_emitter *e, const wf_inst *in, const LLVMValueRef *dims,
                                    int nd);
/* if (!ok) { <failure code emitted after this call>; wf_cpu_end_check } */
WF_INTERNAL LLVMBasicBlockRef wf_cpu_begin_check(wf_cpu_emitter *e, LLVMValueRef ok);
WF_INTERNAL void wf_cpu_end_check(wf_cpu_emitter *e, LLVMBasicBlockRef good);
WF_INTERNAL void wf_cpu_emit_inst(wf_cpu_emitter *e, wf_inst *in);
WF_INTERNAL wf_inst *wf_cpu_emit_block(wf_cpu_emitter *e, wf_block *bl);
/* local.c: per IR value, the web of a local array kept in one stack slot
** (the web's representative value), or -1; NULL when out of memory.
** flags (nvals) gets per value: */
#define WF_CPU_BORROW 1    /* a matrix row living in the matrix's slot */
#define WF_CPU_WRITEBACK 2 /* m' = m with such a row set: nothing to store */
WF_INTERNAL int32_t *wf_cpu_local_scan(const wf_func *fn, uint8_t *flags);
/* simd.c: SIMD across threads. */
WF_INTERNAL int wf_cpu_has_loop(const wf_block *bl);
WF_INTERNAL int wf_cpu_body_simd_safe(LLVMValueRef F, LLVMBasicBlockRef thread_bb, LLVMValueRef j,
                                      LLVMValueRef intr, LLVMBasicBlockRef intr_bb);
WF_INTERNAL void wf_cpu_drop_polls(wf_cpu_emitter *e);
WF_INTERNAL void wf_cpu_mark_simd_loop(wf_cpu_emitter *e, LLVMValueRef br);
/* priv.c: privatized atomics. */
WF_INTERNAL int wf_cpu_priv_scan(wf_cpu_emitter *e, int8_t *priv, int32_t *bits, int64_t *work);
WF_INTERNAL void wf_cpu_emit_priv_call(wf_cpu_emitter *e, LLVMValueRef F, LLVMValueRef fc,
                                       LLVMValueRef fp, LLVMValueRef *cargs, int n,
                                       LLVMValueRef *hdrs, const int *dataidx, const int32_t *bits,
                                       int64_t work);

/* ---- jit.c: the JIT of one Lua state (also usable from C tests) ----- */
typedef struct wf_jit wf_jit;
WF_INTERNAL wf_jit *wf_jit_new(char *err, size_t errsize); /* NULL + err on failure */
WF_INTERNAL void wf_jit_free(wf_jit *j);
/* Compile (or load from the disk cache) the kernel fn; returns its entry
** (wf_kernel_fn) or NULL + err. o->symbol/cpu/features are filled in. */
WF_INTERNAL void *wf_jit_compile(wf_jit *j, wf_func *fn, wf_cpu_opts *o, int *from_disk, char *err,
                                 size_t errsize);
WF_INTERNAL void wf_jit_stats(const wf_jit *j, int64_t *compiles, int64_t *disk_hits);
/* Drops one owner of j (wf_jit_new made the first); the last frees it. */
WF_INTERNAL void wf_jit_release(wf_jit *j);
/* The 32 hex digits naming fn's code (irtext: its module's IR text). */
WF_INTERNAL void wf_jit_key(wf_jit *j, wf_func *fn, const wf_cpu_opts *o, const char *irtext,
                            char key[33]);
/* A kernel's code in the JIT, counted by the references to it. */
typedef struct wf_jit_code wf_jit_code;
typedef struct wf_jit_kernel {
  void *fn;          /* the entry (wf_kernel_fn), valid while code is held */
  wf_jit_code *code; /* one reference to the code and one to the JIT */
  int from_disk;
  char key[33];
} wf_jit_kernel;
/* Compile fn (or find it in the JIT or on disk). 0 and *out, or -1 + err. */
WF_INTERNAL int wf_jit_kernel_get(wf_jit *j, wf_func *fn, wf_cpu_opts *o, const char *irtext,
                                  wf_jit_kernel *out, char *err, size_t errsize);
/* Drops a wf_jit_kernel's references: the last to the code removes it
** from the JIT; the last to the JIT frees it. c may be NULL. */
WF_INTERNAL void wf_jit_code_release(wf_jit *j, wf_jit_code *c);
/* Counts a compile answered by the caller's own table (cpu_stats). */
WF_INTERNAL void wf_jit_mem_hit(wf_jit *j);
/* The LLVM IR of fn (before O3 unless optimize), malloc'd; NULL + err. */
WF_INTERNAL char *wf_jit_llvm_ir(wf_jit *j, wf_func *fn, wf_cpu_opts *o, int optimize, char *err,
                                 size_t errsize);
typedef struct wf_jit_info {
  int64_t compiles, disk_hits, disk_writes, mem_hits, code_live, code_freed;
  const char *cache_dir; /* NULL: no disk cache */
  const char *cpu, *triple;
} wf_jit_info;
WF_INTERNAL void wf_jit_info_get(const wf_jit *j, wf_jit_info *out);

/* ---- rtlib.c: helpers called from generated code -------------------- */
WF_INTERNAL void wf_cpu_rt_oob(wf_launch_ctx *ctx, const char *where, int64_t index, int32_t axis,
                               int64_t size, const char *array, const char *kernel);
WF_INTERNAL void wf_cpu_rt_trap(wf_launch_ctx *ctx, const char *where, const char *msg);
/* A thread found the interrupt flag set: stop the launch ("interrupted"). */
WF_INTERNAL void wf_cpu_rt_interrupted(wf_launch_ctx *ctx);
/* kinds: one letter per value: 'i' signed, 'u' unsigned, 'f' float (the
** slot holds a double's bits), 'b' bool.
** line: the kernel thread's pending text (WF_CPU_PLINE_BYTES on the body's
** stack, n in its first 4 bytes): print writes exactly its format, whole
** lines at once; text after the last newline waits there for the rest of
** its line or the thread's end (wf_cpu_rt_print_flush). */
#define WF_CPU_PLINE_BYTES 256
WF_INTERNAL void wf_cpu_rt_print(void *line, const char *fmt, int32_t n, const char *kinds,
                                 const int64_t *vals);
WF_INTERNAL void wf_cpu_rt_print_flush(void *line);
/* emit.c: at a thread's end, write its pending print text */
WF_INTERNAL void wf_cpu_print_flush(wf_cpu_emitter *e);

/* Private accumulation of atomic_add-only arrays (see rtlib.c). begin
** returns 1 when the chunk runs the private variant with the data
** pointers it wrote to data[] (then call end), 0 for the atomic one. */
WF_INTERNAL int32_t wf_cpu_rt_priv_begin(wf_launch_ctx *ctx, int64_t nthreads, int64_t work,
                                         int32_t n, wf_array *const *hdrs, void **data,
                                         void **block);
WF_INTERNAL void wf_cpu_rt_priv_end(wf_launch_ctx *ctx, int32_t n, wf_array *const *hdrs,
                                    void *const *data, const int32_t *bits, void *block);

/* Debug and release mode: is id a live host object of this kind (row:
** the native builtin asking; index: its element index, if any)? The
** row's index limit (INT64_MAX if none), or 0 after failing the launch. */
WF_INTERNAL int64_t wf_cpu_rt_geom_check(wf_launch_ctx *ctx, const char *where, const char *kernel,
                                         uint64_t id, int32_t kind, int32_t row, int32_t index);
WF_INTERNAL int64_t wf_cpu_rt_geom_limit(wf_launch_ctx *ctx, uint64_t id, int32_t kind,
                                         int32_t row);
/* The permutation a chunk of a kernel's threads runs in (a hash grid's
** point ids in cell order), or NULL for tid order. */
WF_INTERNAL const int32_t *wf_cpu_rt_hgrid_order(wf_launch_ctx *ctx, uint64_t id, const void *data,
                                                 int64_t stride);

typedef struct wf_cpu_sym {
  const char *name;
  void *addr;
} wf_cpu_sym;
/* The symbols generated code may call (helpers and libm), NULL-terminated. */
WF_INTERNAL const wf_cpu_sym *wf_cpu_symbols(void);

#endif
