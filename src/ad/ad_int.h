/*
** ad_int.h -- internals shared by the autodiff transform (ad.c, with its
** loop reversal in loop.c and fuse.c) and the derivative rules (rules.c).
**
** All maps are indexed by PRIMAL value numbers (the primal function is never
** modified) and hold values of the adjoint function being built:
**
**   map[v]     the replayed copy of v visible at the current emission point
**   adj[v]     v's accumulated adjoint (WF_NOVAL = zero so far)
**   shadow[a]  for an array value a: its adjoint array (param or view)
**   present[a] for an array value a: bool "adjoint array given" (root's)
**   need[v]    the reverse sweep reads v (so replays must compute it)
*/
#ifndef WF_AD_INT_H
#define WF_AD_INT_H

#include <setjmp.h>
#include <stdint.h>

#include "ad/ad.h"

typedef struct wf_adctx {
  wf_module *m;
  wf_types *T;
  wf_func *pf; /* primal */
  wf_func *af; /* adjoint under construction */
  wf_builder b;
  int32_t np; /* primal value count */
  wf_val *map, *adj, *shadow, *present;
  uint8_t *need;
  int32_t *stamp_in, *stamp_seen; /* scratch for captured-value sets */
  int32_t stamp;
  /* memory facts of the primal (check.c: wf_ad_memfacts), per value */
  wf_val *fwd;           /* load: the stored value the replay uses instead */
  const wf_inst **stale; /* load/atomic result: the write that makes its replay wrong */
  wf_val *sv;            /* adjoint values replayed from stale ones ... */
  const wf_inst **si;    /* ... their primal instructions, */
  const wf_inst **sw;    /* the writes that make them stale */
  const wf_func **sf;    /* and the functions holding them */
  int nstale, capstale;
  const char *const *names; /* kernel parameter names for messages, or NULL */
  /* a weft.func body reversed inside the kernel's adjoint (reverse_call):
  ** its params take adjoints; stale notes go to the kernel's context */
  struct wf_adctx *root;
  int acc_params;
  void **allocs; /* scratch blocks freed when the transform ends */
  int nallocs, capallocs;
  char msg[1024];
  jmp_buf jb; /* errors unwind to wf_ad_kernel (never across FFI frames) */
} wf_adctx;

/* Custom gradients: a call of function f is kept (not inlined) for
** differentiation when the module holds "<f>$grad"; "<f>$replay", if
** present, replaces f in the adjoint's forward replay. */
#define WF_AD_GRAD_SUFFIX "$grad"
#define WF_AD_REPLAY_SUFFIX "$replay"

/* What a derivative rule reads from the forward pass (the replay must have
** computed it): all args, the result, only arg 0, or array + indices. */
/* Most indices of an array access (arrays have 1 to 4 dimensions). */
#define WF_AD_MAXIDX 4

#define WF_AD_RD_ARGS 1
#define WF_AD_RD_RES 2
#define WF_AD_RD_ARG0 4
#define WF_AD_RD_IDX 8
#define WF_AD_RD_ARG1 16 /* the index of EXTRACTD and INSERTD */

/* A rule emits the adjoint code of one instruction. g[k] is the adjoint of
** result k (never WF_NOVAL for value ops: the sweep skips those; memory
** rules with no result get NULL). */
typedef void (*wf_ad_rule_fn)(wf_adctx *A, const wf_inst *in, const wf_val *g);
/* A tangent rule (forward mode) returns the tangent of result 0 from the
** operands' tangents t[k] (WF_NOVAL = zero; it returns WF_NOVAL for a zero
** tangent). Memory rules also write the tangent arrays. */
typedef wf_val (*wf_ad_tan_fn)(wf_adctx *A, const wf_inst *in, const wf_val *t);
typedef struct wf_ad_rule {
  wf_ad_rule_fn fn;
  uint8_t reads;
  wf_ad_tan_fn tan;
} wf_ad_rule;

/* The rule of op, or NULL when op is not differentiable. */
WF_IR_INTERNAL const wf_ad_rule *wf_ad_rule_of(wf_op op);

/* ---- helpers for rules (ad.c) ---- */
WF_IR_INTERNAL _Noreturn void wf_ad_fail(wf_adctx *A, const wf_inst *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
WF_IR_INTERNAL int wf_ad_difft(const wf_type *t);                     /* has float components */
WF_IR_INTERNAL wf_val wf_ad_primal(wf_adctx *A, wf_val v);            /* replayed copy of v */
WF_IR_INTERNAL void wf_ad_acc(wf_adctx *A, wf_val v, wf_val contrib); /* adj[v] += contrib */
WF_IR_INTERNAL wf_val wf_ad_zero(wf_adctx *A, const wf_type *t);
WF_IR_INTERNAL wf_val wf_ad_constf(wf_adctx *A, const wf_type *t, double x);
WF_IR_INTERNAL wf_val wf_ad_op1(wf_adctx *A, wf_op op, const wf_type *t, wf_val a);
WF_IR_INTERNAL wf_val wf_ad_op2(wf_adctx *A, wf_op op, const wf_type *t, wf_val a, wf_val b);
WF_IR_INTERNAL wf_val wf_ad_op3(wf_adctx *A, wf_op op, const wf_type *t, wf_val a, wf_val b,
                                wf_val c);
WF_IR_INTERNAL wf_inst *wf_ad_emit(wf_adctx *A, wf_op op, int nargs, const wf_val *args, int nres,
                                   const wf_type *const *rtypes, int nblocks);
WF_IR_INTERNAL wf_val wf_ad_extract(wf_adctx *A, wf_val agg, int i);
WF_IR_INTERNAL wf_val wf_ad_insert(wf_adctx *A, wf_val agg, int i, wf_val v);
WF_IR_INTERNAL wf_val wf_ad_extractd(wf_adctx *A, wf_val agg, wf_val k);
WF_IR_INTERNAL wf_val wf_ad_insertd(wf_adctx *A, wf_val agg, wf_val k, wf_val v);
/* malloc'd memory released with the context (also on errors). */
WF_IR_INTERNAL void *wf_ad_scratch(wf_adctx *A, size_t n);

/* Structured `if` emission: begin switches the builder into the then-block;
** else_ yields `yt` there and switches to the else-block; end yields `ye`
** and puts the builder after the if. */
typedef struct wf_ad_if {
  wf_inst *in;
  wf_block *saved_block;
  wf_inst *saved_before;
} wf_ad_if;
WF_IR_INTERNAL void wf_ad_if_begin(wf_adctx *A, wf_ad_if *s, wf_val cond, int nres,
                                   const wf_type *const *rtypes);
WF_IR_INTERNAL void wf_ad_if_else(wf_adctx *A, wf_ad_if *s, const wf_val *yt);
WF_IR_INTERNAL void wf_ad_if_end(wf_adctx *A, wf_ad_if *s, const wf_val *ye);

/* A new block, slot k of region instruction owner, with np params. */
WF_IR_INTERNAL wf_block *wf_ad_newblock(wf_adctx *A, wf_inst *owner, int k, int np,
                                        const wf_type *const *pt);
/* Does this instance of a differentiable op carry adjoints/tangents (float
** result, or for stores and atomic adds a float value)? */
WF_IR_INTERNAL int wf_ad_inst_diff(wf_adctx *A, const wf_inst *in);

/* ---- memory facts and the stale-replay check (check.c) ----
** The adjoint replays the forward pass after the forward launch, so a
** replayed load reads what the array holds at the END of the launch.
** wf_ad_memfacts fills A->fwd and A->stale for the primal: a load that an
** earlier store of the same element (same kernel array parameter,
** structurally equal indices) reaches, with no other write to that array
** between them (in its block or an enclosing if's), is replayed as the
** stored value (fwd). A load not forwarded that a write of the same
** element may follow (later in program order, or anywhere in a loop
** around both when the indices do not change in that loop) is stale, and
** so is the old value returned by an atomic (re-read by the replay).
** wf_ad_note_stale records each replayed copy of a stale value;
** wf_ad_check_stale fails if the finished adjoint uses any of them (a
** stale value only feeding dead code, such as the adjoint of a constant,
** is harmless). Aliasing that structural equality cannot see (x[j] with
** j == i at run time, other threads' elements) is not detected. */
WF_IR_INTERNAL void wf_ad_memfacts(wf_adctx *A);
WF_IR_INTERNAL void wf_ad_note_stale(wf_adctx *A, wf_val replayed, const wf_inst *primal);
WF_IR_INTERNAL void wf_ad_check_stale(wf_adctx *A);

/* Runs build_fn(A, name) on a fresh context for m->funcs[kernel_index],
** name = prefix + kernel name (nothing if the module holds it already).
** Errors raised by wf_ad_fail unwind here; the half-built function is
** dropped. 0, or -1 with the message in err. */
typedef void (*wf_ad_build_fn)(wf_adctx *A, const char *name);
WF_IR_INTERNAL int wf_ad_transform(wf_module *m, int kernel_index, const char *prefix,
                                   wf_ad_build_fn build_fn, const char *const *names, char *err,
                                   size_t n);

/* The adjoint array of a primal array value and its "given" flag. */
WF_IR_INTERNAL wf_val wf_ad_shadow(wf_adctx *A, const wf_inst *at, wf_val arr);
/* Does a parameter of type t get a derived parameter (arrays; structs
** holding arrays get a struct of the same type holding the adjoint or
** tangent arrays)? */
WF_IR_INTERNAL int wf_ad_has_shadow(const wf_type *t);
/* After replaying `in`: an EXTRACT of an array (or a struct holding
** arrays) from a struct with a shadow gets the same field of the shadow. */
WF_IR_INTERNAL void wf_ad_shadow_extract(wf_adctx *A, const wf_inst *in);
WF_IR_INTERNAL wf_val wf_ad_present(wf_adctx *A, const wf_inst *at, wf_val arr);

/* ---- the reverse sweep's helpers, shared with the loop reversal ----
** (defined in ad.c; used by loop.c and fuse.c) */
WF_IR_INTERNAL wf_val wf_ad_consti(wf_adctx *A, const wf_type *t, int64_t x);
WF_IR_INTERNAL const wf_type *wf_ad_i32t(wf_adctx *A);
WF_IR_INTERNAL const wf_type *wf_ad_boolt(wf_adctx *A);
WF_IR_INTERNAL const wf_type *wf_ad_ptype(wf_adctx *A, wf_val v); /* type of primal v */
/* Switch emission into block bl; returns the block to come back to. */
WF_IR_INTERNAL wf_block *wf_ad_enter(wf_adctx *A, wf_block *bl);
/* The replayed v if the replay computes it, else a zero placeholder. */
WF_IR_INTERNAL wf_val wf_ad_tmap(wf_adctx *A, wf_val v);
/* The adjoint of v as a concrete value (zero when nothing accumulated). */
WF_IR_INTERNAL wf_val wf_ad_adjz(wf_adctx *A, wf_val v);
/* n scratch values, all WF_NOVAL. */
WF_IR_INTERNAL wf_val *wf_ad_vals(wf_adctx *A, int n);
/* One backward pass of the need analysis over bl; whether anything changed. */
WF_IR_INTERNAL int wf_ad_need_block(wf_adctx *A, wf_block *bl);
/* The differentiable values defined outside region `in` and used inside
** (their adjoints made concrete at the current point). */
typedef struct wf_ad_capset {
  int n, cap;
  wf_val *v;
} wf_ad_capset;
WF_IR_INTERNAL wf_ad_capset wf_ad_captured(wf_adctx *A, const wf_inst *in);
/* Can any adjoint flow through region `in`? */
WF_IR_INTERNAL int wf_ad_region_active(wf_adctx *A, const wf_inst *in);
/* Replay bl at the current point (its params must be mapped). */
WF_IR_INTERNAL void wf_ad_replay_block(wf_adctx *A, wf_block *bl);
/* Replay bl with params pvals, seed its terminator's operands with seeds,
** and sweep it backwards. */
WF_IR_INTERNAL void wf_ad_reverse_region(wf_adctx *A, wf_block *bl, const wf_val *pvals,
                                         const wf_val *seeds);
/* Reverse of instruction `in` through module function fi's body, in
** place (ad.c: reverse_body): fi takes in's arguments (then, with
** with_res, in's results as they were), returns values of in's result
** types; the adjoints its params collect go to in's arguments. */
WF_IR_INTERNAL void wf_ad_reverse_func(wf_adctx *A, const wf_inst *in, int fi, int with_res);
/* Runs fn(A, B, in, arg) with B a context for module function fi nested
** in A's build: B emits at A's point (A's builder continues after it),
** B's errors become A's. */
typedef void (*wf_ad_nested_fn)(wf_adctx *A, wf_adctx *B, const wf_inst *in, void *arg);
WF_IR_INTERNAL void wf_ad_nested(wf_adctx *A, int fi, const wf_inst *in, wf_ad_nested_fn fn,
                                 void *arg);
/* Forward mode (jvp.c): the tangent of in's result through module function
** fi's body (fi takes in's arguments, then its result as it was). */
WF_IR_INTERNAL wf_val wf_ad_tangent_func(wf_adctx *A, const wf_inst *in, int fi);

/* ---- loop reversal (loop.c) and its fused form (fuse.c) ---- */
/* The reverse of a for / while loop at the current emission point. */
WF_IR_INTERNAL void wf_ad_rev_for(wf_adctx *A, wf_inst *in);
WF_IR_INTERNAL void wf_ad_rev_while(wf_adctx *A, wf_inst *in);
/* Indices of the differentiable entries of a value list; their count. */
WF_IR_INTERNAL int wf_ad_dslots(wf_adctx *A, int n, const wf_val *v, int *idx);
/* Tries the fused forward-order reversal of for loop `in` (captured
** adjoints cs); 1 when done, 0 when the caller must take the ordinary path. */
WF_IR_INTERNAL int wf_ad_try_fuse(wf_adctx *A, wf_inst *in, wf_ad_capset cs);

#endif
