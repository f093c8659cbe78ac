/*
** priv.c -- privatized atomics for the CPU emitter.
**
** Takes an IR kernel and finds the array parameters it only updates with
** atomic_add (wf_cpu_priv_scan); gives the entry's call of the private
** body variant, with wf_cpu_rt_priv_begin / wf_cpu_rt_priv_end of
** rtlib.c around it (wf_cpu_emit_priv_call). Why and when is below.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

typedef wf_cpu_emitter E;

/* ---------------------------------------------------------------------
** privatized atomics: an array parameter that the kernel only updates
** with atomic_add (result unused) and otherwise only asks for its shape
** -- the adjoint arrays of reverse mode -- can be accumulated by each
** chunk of threads in a zeroed private copy with plain adds, then folded
** into the shared array once (rtlib.c decides per launch). Atomic float
** adds are compare-and-swap loops on x86, and contended ones cost tens of
** nanoseconds; the n-body adjoint does four per pair of bodies.
** --------------------------------------------------------------------- */

/* Number of float leaves of t, all of one width (stored in *bits), packed
** without padding; -1 otherwise. */
static int float_leaves(wf_types *T, const wf_type *t, int *bits) {
  if (t->kind == WF_T_FLOAT) {
    if (t->bits != 32 && t->bits != 64) return -1;
    if (*bits && *bits != t->bits) return -1;
    *bits = t->bits;
    return 1;
  }
  if (t->kind != WF_T_VEC && t->kind != WF_T_QUAT && t->kind != WF_T_MAT &&
      t->kind != WF_T_TRANSFORM)
    return -1;
  int n = 0, a = wf_t_arity(t);
  for (int i = 0; i < a; i++) {
    int c = float_leaves(T, wf_t_component(T, t, i), bits);
    if (c < 0) return -1;
    n += c;
  }
  return (int64_t)n * (*bits / 8) == t->size ? n : -1;
}

typedef struct pscan {
  wf_types *T;
  const wf_func *fn;
  int32_t *uses; /* per value */
  int8_t *priv;  /* per param: 1 candidate, 0 not */
  int8_t *hit;   /* per param: has an atomic_add */
  int64_t work;  /* estimated private adds per thread */
} pscan;

static void count_uses(const wf_block *bl, int32_t *uses) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    for (int a = 0; a < in->nargs; a++)
      if (in->args[a] >= 0) uses[in->args[a]]++;
    for (int b = 0; b < in->nblocks; b++)
      count_uses(in->blocks[b], uses);
  }
}

static int param_index(const wf_func *fn, wf_val v) {
  for (int i = 0; i < fn->nparams; i++)
    if (fn->params[i] == v) return i;
  return -1;
}

static void scan_block(pscan *ps, const wf_block *bl, int64_t mult) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    for (int a = 0; a < in->nargs; a++) {
      int p = in->args[a] >= 0 ? param_index(ps->fn, in->args[a]) : -1;
      if (p < 0 || !ps->priv[p]) continue;
      if (a == 0 && in->op == WF_OP_SHAPE) continue;
      if (a == 0 && in->op == WF_OP_ATOMIC_ADD && (in->nres == 0 || ps->uses[in->res[0]] == 0)) {
        int bits = 0;
        int n = float_leaves(ps->T, wf_vtype(ps->fn, in->args[0])->elem, &bits);
        if (ps->work < ((int64_t)1 << 40)) ps->work += mult * (n > 0 ? n : 1);
        ps->hit[p] = 1;
        continue;
      }
      ps->priv[p] = 0; /* read, written, viewed or passed on */
    }
    /* 16 per loop level, saturating (deep nests would overflow int64) */
    int64_t m = (in->op == WF_OP_FOR || in->op == WF_OP_WHILE) && mult < ((int64_t)1 << 40)
                    ? mult * 16
                    : mult;
    for (int b = 0; b < in->nblocks; b++)
      scan_block(ps, in->blocks[b], m);
  }
}

/* Fills priv[] (per parameter) and bits[] (float width of the private
** ones); returns how many there are, with the per-thread work in *work. */
int wf_cpu_priv_scan(E *e, int8_t *priv, int32_t *bits, int64_t *work) {
  const wf_func *fn = e->fn;
  int n = 0;
  *work = 0;
  for (int i = 0; i < fn->nparams; i++) {
    const wf_type *t = wf_vtype(fn, fn->params[i]);
    int b = 0;
    priv[i] = t->kind == WF_T_ARRAY && float_leaves(e->T, t->elem, &b) > 0;
    bits[i] = b;
  }
  if (!fn->body) return 0;
  pscan ps = {e->T,
              fn,
              calloc((size_t)(fn->nvals > 0 ? fn->nvals : 1), sizeof(int32_t)),
              priv,
              calloc((size_t)fn->nparams + 1, 1),
              0};
  if (!ps.uses || !ps.hit) {
    free(ps.uses), free(ps.hit);
    return 0;
  }
  count_uses(fn->body, ps.uses);
  scan_block(&ps, fn->body, 1);
  free(ps.uses);
  /* keep only parameters that are actually updated */
  for (int i = 0; i < fn->nparams; i++)
    priv[i] = priv[i] && ps.hit[i];
  free(ps.hit);
  *work = ps.work;
  for (int i = 0; i < fn->nparams; i++)
    n += priv[i];
  return ps.work > 0 ? n : 0;
}

/* An alloca of n pointers in the entry block of F. */
static LLVMValueRef entry_alloca(E *e, LLVMValueRef F, int n, const char *name) {
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(e->B);
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(F);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first)
    LLVMPositionBuilderBefore(e->B, first);
  else
    LLVMPositionBuilderAtEnd(e->B, entry);
  LLVMValueRef a = LLVMBuildAlloca(e->B, LLVMArrayType(e->ptr, (unsigned)(n > 0 ? n : 1)), name);
  LLVMPositionBuilderAtEnd(e->B, cur);
  return a;
}

/* The compact, distinct-arrays path when some arrays are privatized:
**   if (wf_cpu_rt_priv_begin(ctx, end - begin, work, np, hdrs, data, &blk))
**     { body.p(... data[k] in place of the private arrays ...);
**       wf_cpu_rt_priv_end(ctx, np, hdrs, data, bits, blk); }
**   else body.c(...)                                               */
void wf_cpu_emit_priv_call(E *e, LLVMValueRef F, LLVMValueRef fc, LLVMValueRef fp,
                           LLVMValueRef *cargs, int n, LLVMValueRef *hdrs, const int *dataidx,
                           const int32_t *bits, int64_t work) {
  LLVMBuilderRef B = e->B;
  wf_func *fn = e->fn;
  int np = 0;
  int32_t pbits[256];
  int pidx[256];
  for (int i = 0; i < fn->nparams && np < 256; i++)
    if (e->priv[i]) pidx[np] = i, pbits[np++] = bits[i];
  LLVMValueRef harr = entry_alloca(e, F, np, "priv.hdrs");
  LLVMValueRef darr = entry_alloca(e, F, np, "priv.data");
  LLVMValueRef blk = entry_alloca(e, F, 1, "priv.block");
  for (int k = 0; k < np; k++) {
    LLVMValueRef idx[2] = {wf_cpu_ci64(e, 0), wf_cpu_ci64(e, k)};
    LLVMBuildStore(B, hdrs[pidx[k]],
                   LLVMBuildInBoundsGEP2(B, LLVMArrayType(e->ptr, (unsigned)np), harr, idx, 2, ""));
  }
  LLVMValueRef begin = LLVMGetParam(F, 1), end = LLVMGetParam(F, 2), ctx = LLVMGetParam(F, 3);
  LLVMTypeRef pt[7] = {e->ptr, e->i64, e->i64, e->i32, e->ptr, e->ptr, e->ptr};
  LLVMValueRef a[7] = {
      ctx, LLVMBuildSub(B, end, begin, ""), wf_cpu_ci64(e, work), wf_cpu_ci32(e, np), harr, darr,
      blk};
  LLVMValueRef m = wf_cpu_call_ext(e, "wf_cpu_rt_priv_begin", e->i32, pt, 7, a);
  LLVMBasicBlockRef pb = LLVMAppendBasicBlockInContext(e->C, F, "private");
  LLVMBasicBlockRef ab = LLVMAppendBasicBlockInContext(e->C, F, "atomic");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntNE, m, wf_cpu_ci32(e, 0), ""), pb, ab);
  LLVMTypeRef bt = LLVMGlobalGetValueType(fc);
  LLVMPositionBuilderAtEnd(B, ab);
  LLVMBuildCall2(B, bt, fc, cargs, (unsigned)n, "");
  LLVMBuildRetVoid(B);
  LLVMPositionBuilderAtEnd(B, pb);
  LLVMValueRef *pargs = malloc(sizeof(*pargs) * (size_t)(n > 0 ? n : 1));
  if (!pargs) {
    wf_cpu_efail(e, NULL, "out of memory");
    LLVMBuildRetVoid(B);
    return;
  }
  memcpy(pargs, cargs, sizeof(*pargs) * (size_t)n);
  for (int k = 0; k < np; k++) {
    LLVMValueRef idx[2] = {wf_cpu_ci64(e, 0), wf_cpu_ci64(e, k)};
    LLVMValueRef d = LLVMBuildLoad2(
        B, e->ptr, LLVMBuildInBoundsGEP2(B, LLVMArrayType(e->ptr, (unsigned)np), darr, idx, 2, ""),
        "priv");
    pargs[dataidx[pidx[k]]] = d;
  }
  LLVMBuildCall2(B, bt, fp, pargs, (unsigned)n, "");
  free(pargs);
  LLVMValueRef bv[256];
  for (int k = 0; k < np; k++)
    bv[k] = wf_cpu_ci32(e, pbits[k]);
  LLVMValueRef bconst = LLVMConstArray(e->i32, bv, (unsigned)np);
  LLVMValueRef g = LLVMAddGlobal(e->M, LLVMTypeOf(bconst), "priv.bits");
  LLVMSetInitializer(g, bconst);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  LLVMTypeRef et[6] = {e->ptr, e->i32, e->ptr, e->ptr, e->ptr, e->ptr};
  LLVMValueRef ea[6] = {ctx, wf_cpu_ci32(e, np), harr, darr, g, LLVMBuildLoad2(B, e->ptr, blk, "")};
  wf_cpu_call_ext(e, "wf_cpu_rt_priv_end", e->vd, et, 6, ea);
  LLVMBuildRetVoid(B);
}
