/*
** entry.c -- the kernel's LLVM functions around its emitted body.
**
** Takes an IR kernel and the options of wf_cpu_opts; gives the LLVM module
** (wf_llvm_emit): each variant of the body wrapped in the thread loop, and
** the exported entry that unpacks the argument block (wf_cpu_arg_layout)
** and picks a variant. The body's instructions are emitted by emit.c,
** the SIMD marking is simd.c's, the private accumulation priv.c's.
**
** One IR kernel becomes three LLVM functions:
**
**   void <symbol>(ptr args, i64 begin, i64 end, ptr ctx)      exported
**       reads the parameters out of the argument block (ir/abi.h),
**       checks whether the arrays are distinct with compact innermost
**       strides, and calls one of:
**   internal void body.c(data0, shape0.., strides0.., x, .., begin, end, ctx)
**       array data pointers `noalias`, innermost strides = element size:
**       the thread loop vectorizes (saxpy becomes packed loads/stores)
**   internal void body.g(...)      the same body without those assumptions
**
** (debug builds of a kernel and kernels without arrays emit only one body.)
** O3 inlines the bodies into the entry; the inliner turns the noalias
** parameters into scoped alias metadata.
**
** Thread loop (body functions). The code is made for a launch of `ndim`
** dims; the last dimension is the innermost loop, so for 1-D launches the
** loop over threads is a plain counted i32 loop the vectorizer understands:
**
**   for t in [begin, end) by rows:          (only when ndim > 1)
**     row = t / d[n-1], j0 = t % d[n-1]      tids 0..n-2 from row
**     for j in [j0, j0 + min(d[n-1]-j0, end-t)):     tid n-1 = j
**       <kernel body>                        RET -> next thread
*/
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>

#include "cpu/cpu.h"
#include "geom/native.h"

typedef wf_cpu_emitter E;

/* The chunk name as Lua shows it: "@file" / "=name" lose their prefix; the
** front end already passes short_src ("file.lua", [string "..."]). */
static void chunk_display(const char *src, char *out, size_t n) {
  if (!src || !*src)
    snprintf(out, n, "?");
  else if (*src == '@' || *src == '=')
    snprintf(out, n, "%s", src + 1);
  else
    snprintf(out, n, "%s", src);
}

/* ---------------------------------------------------------------------
** functions: the body (thread loop) and the entry
** --------------------------------------------------------------------- */

/* Flattened body parameter types: arrays as data, shape[nd], strides[nd]. */
static int body_params(E *e, LLVMTypeRef *pt) {
  int n = 0;
  for (int i = 0; i < e->fn->nparams; i++) {
    const wf_type *t = wf_vtype(e->fn, e->fn->params[i]);
    if (t->kind == WF_T_ARRAY) {
      pt[n++] = e->ptr;
      for (int k = 0; k < 2 * t->ndim; k++)
        pt[n++] = e->i64;
    } else {
      pt[n++] = wf_cpu_ltype(e, t);
    }
  }
  pt[n++] = e->i64; /* begin */
  pt[n++] = e->i64; /* end */
  pt[n++] = e->ptr; /* ctx */
  return n;
}

static int count_body_params(const wf_func *fn) {
  int n = 3;
  for (int i = 0; i < fn->nparams; i++) {
    const wf_type *t = wf_vtype(fn, fn->params[i]);
    n += t->kind == WF_T_ARRAY ? 1 + 2 * t->ndim : 1;
  }
  return n;
}

static void set_target_attrs(E *e, LLVMValueRef f) {
  if (e->o->cpu && *e->o->cpu)
    LLVMAddAttributeAtIndex(
        f, LLVMAttributeFunctionIndex,
        LLVMCreateStringAttribute(e->C, "target-cpu", 10, e->o->cpu, (unsigned)strlen(e->o->cpu)));
  if (e->o->features && *e->o->features)
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(e->C, "target-features", 15, e->o->features,
                                                      (unsigned)strlen(e->o->features)));
  wf_cpu_add_fn_attr(e, f, "nounwind");
}

/* Emits the pure computation of a thread-invariant value (wf_pass_bounds
** proved it: parameters, constants, pure ops) ahead of the thread loop. */
static void emit_invariant(E *e, wf_val v, int depth) {
  if (v < 0 || e->v[v] || depth > 40) return;
  wf_inst *d = e->fn->vals[v].def;
  if (!d || d->nblocks) return;
  for (int a = 0; a < d->nargs; a++)
    emit_invariant(e, d->args[a], depth + 1);
  wf_cpu_emit_inst(e, d);
}

/* Release mode: the CHECKs every thread would run alike (launch ranges of
** tid indices, loop ranges made of parameters) run once per chunk in the
** entry, before a body is called (the bodies' thread loops stay free of
** them, so they vectorize as in fast mode); emit_inst skips them. */
static void hoisted_checks(E *e, const LLVMValueRef *dims, int nd) {
  for (wf_inst *in = e->fn->body->first; in; in = in->next) {
    if (in->op != WF_OP_CHECK || !(in->imm & (WF_CHECK_LAUNCH | WF_CHECK_HOIST))) continue;
    int launch = (in->imm & WF_CHECK_LAUNCH) != 0, ok = 1;
    for (int a = 0; a < (launch ? 1 : in->nargs); a++) {
      if (!launch) emit_invariant(e, in->args[a], 0);
      ok = ok && e->v[in->args[a]];
    }
    if (!ok) { /* wf_pass_bounds proved them computable: a bug if not */
      wf_cpu_efail(e, in, "internal error: a hoisted bounds check needs values of the thread");
      continue;
    }
    wf_cpu_range_check(e, in, dims, nd);
  }
}

/* The entry's part of release mode: e->v holds the parameters; a failed
** check returns from the entry with the message set. */
static void entry_checks(E *e, LLVMValueRef F) {
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(e->B);
  e->exit_bb = LLVMAppendBasicBlockInContext(e->C, F, "check.exit");
  LLVMPositionBuilderAtEnd(e->B, e->exit_bb);
  LLVMBuildRetVoid(e->B);
  LLVMPositionBuilderAtEnd(e->B, cur);
  e->ctx = LLVMGetParam(F, 3);
  int nd = e->o->ndim < 1 ? 1 : e->o->ndim > 4 ? 4 : e->o->ndim;
  LLVMValueRef dims[WF_MAXDIM];
  for (int d = 0; d < nd; d++) {
    dims[d] = LLVMBuildLoad2(e->B, e->i64,
                             wf_cpu_gep8(e, e->ctx, wf_cpu_ci64(e, WF_CTX_DIMS + 8 * d)), "dim");
    LLVMSetAlignment(dims[d], 8);
  }
  hoisted_checks(e, dims, nd);
}

/* The arrays held by a struct type, nested structs' too. */
static int count_held(const wf_type *t) {
  int n = 0;
  for (int i = 0; t->kind == WF_T_STRUCT && i < t->nfields; i++)
    n += t->fields[i].type->kind == WF_T_ARRAY ? 1 : count_held(t->fields[i].type);
  return n;
}

/* Struct value v of type t with the innermost stride of every array it
** holds set to the element size: the contiguous variant's view of it
** (emit_entry checked those strides). */
static LLVMValueRef contig_struct(E *e, const wf_type *t, LLVMValueRef v) {
  for (int i = 0; i < t->nfields; i++) {
    const wf_type *ft = t->fields[i].type;
    if (ft->kind != WF_T_ARRAY && !count_held(ft)) continue;
    LLVMValueRef x = LLVMBuildExtractValue(e->B, v, (unsigned)i, "");
    if (ft->kind == WF_T_ARRAY) {
      LLVMValueRef st = LLVMBuildExtractValue(e->B, x, 2, "");
      st = LLVMBuildInsertValue(e->B, st, wf_cpu_ci64(e, ft->elem->size), (unsigned)ft->ndim - 1,
                                "");
      x = LLVMBuildInsertValue(e->B, x, st, 2, "");
    } else {
      x = contig_struct(e, ft, x);
    }
    v = LLVMBuildInsertValue(e->B, v, x, (unsigned)i, "");
  }
  return v;
}

/* Appends to datas (from *na on) the data pointers of the arrays struct
** value v of type t holds, and ands into *fast that each has compact
** innermost strides and differs from every data pointer before it. */
static void held_checks(E *e, const wf_type *t, LLVMValueRef v, LLVMValueRef *datas, int *na,
                        LLVMValueRef *fast) {
  LLVMBuilderRef B = e->B;
  for (int i = 0; i < t->nfields; i++) {
    const wf_type *ft = t->fields[i].type;
    if (ft->kind != WF_T_ARRAY && !count_held(ft)) continue;
    LLVMValueRef x = LLVMBuildExtractValue(B, v, (unsigned)i, "");
    if (ft->kind != WF_T_ARRAY) {
      held_checks(e, ft, x, datas, na, fast);
      continue;
    }
    LLVMValueRef data = wf_cpu_arr_get(e, x, 0, -1);
    LLVMValueRef inner = wf_cpu_arr_get(e, x, 2, ft->ndim - 1);
    *fast = LLVMBuildAnd(
        B, *fast, LLVMBuildICmp(B, LLVMIntEQ, inner, wf_cpu_ci64(e, ft->elem->size), ""), "");
    for (int q = 0; q < *na; q++)
      *fast = LLVMBuildAnd(B, *fast, LLVMBuildICmp(B, LLVMIntNE, data, datas[q], ""), "");
    datas[(*na)++] = data;
  }
}

/* ---------------------------------------------------------------------
** cell order: the threads of a kernel that queries a hash grid at the
** position p[tid()] run in the grid's cell order when the grid was built
** from p (wf_cpu_rt_hgrid_order decides per chunk). Threads carry no order
** (as on a GPU), so only the speed changes: neighbouring threads then
** query neighbouring cells and share the cache lines of cell starts,
** records and p, where in tid order nearly every read of a query of 1M
** uniform points misses.
** --------------------------------------------------------------------- */

static int param_index(const wf_func *fn, wf_val v) {
  for (int i = 0; i < fn->nparams; i++)
    if (fn->params[i] == v) return i;
  return -1;
}

/* The first hash_grid_query in bl (nested blocks too) whose id is a
** parameter and whose position is a load of a 1-D array parameter at
** tid 0: 1 with both parameters' values in *id and *arr. */
static int cell_order_query(const wf_func *fn, const wf_block *bl, wf_val *id, wf_val *arr) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    if (in->op == WF_OP_NATIVE && in->imm == WF_NAT_hash_grid_query && in->nargs >= 2 &&
        param_index(fn, in->args[0]) >= 0) {
      const wf_inst *ld = fn->vals[in->args[1]].def;
      const wf_inst *t =
          ld && ld->op == WF_OP_LOAD && ld->nargs == 2 ? fn->vals[ld->args[1]].def : NULL;
      const wf_type *at = ld ? wf_vtype(fn, ld->args[0]) : NULL;
      if (t && t->op == WF_OP_TID && t->imm == 0 && param_index(fn, ld->args[0]) >= 0 &&
          at->kind == WF_T_ARRAY && at->ndim == 1) {
        *id = in->args[0];
        *arr = ld->args[0];
        return 1;
      }
    }
    for (int b = 0; b < in->nblocks; b++)
      if (cell_order_query(fn, in->blocks[b], id, arr)) return 1;
  }
  return 0;
}

/* Ahead of the thread loop (the body's start block): the chunk's order,
** a pointer to the permutation or null. */
static LLVMValueRef cell_order_perm(E *e, wf_val id, wf_val arr, LLVMValueRef *data,
                                    LLVMValueRef *stride) {
  *data = wf_cpu_arr_get(e, e->v[arr], 0, -1);
  *stride = wf_cpu_arr_get(e, e->v[arr], 2, 0);
  LLVMTypeRef pt[4] = {e->ptr, e->i64, e->ptr, e->i64};
  LLVMValueRef a[4] = {e->ctx, e->v[id], *data, *stride};
  return wf_cpu_call_ext(e, "wf_cpu_rt_hgrid_order", e->ptr, pt, 4, a);
}

/* Threads this far ahead have their p[tid] prefetched (their cells'
** reads follow from it). */
#define CELL_ORDER_AHEAD 16

/* In the thread loop, at loop index j of a launch of n threads: the tid,
** perm[j] when perm is not null, else j. */
static LLVMValueRef cell_order_tid(E *e, LLVMValueRef perm, LLVMValueRef data, LLVMValueRef stride,
                                   LLVMValueRef j, LLVMValueRef n) {
  LLVMBuilderRef B = e->B;
  LLVMValueRef F = e->F;
  LLVMBasicBlockRef from = LLVMAppendBasicBlockInContext(e->C, F, "order.perm");
  LLVMBasicBlockRef plain = LLVMAppendBasicBlockInContext(e->C, F, "order.tid");
  LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(e->C, F, "order.go");
  LLVMBuildCondBr(B, LLVMBuildIsNull(B, perm, ""), plain, from);
  LLVMPositionBuilderAtEnd(B, from);
  LLVMValueRef jx = LLVMBuildSExt(B, j, e->i64, "");
  LLVMValueRef t =
      LLVMBuildLoad2(B, e->i32, LLVMBuildInBoundsGEP2(B, e->i32, perm, &jx, 1, ""), "perm.tid");
  LLVMSetAlignment(t, 4);
  LLVMValueRef ahead = LLVMBuildAdd(B, jx, wf_cpu_ci64(e, CELL_ORDER_AHEAD), "");
  ahead = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, ahead, n, ""), ahead, jx, "");
  LLVMValueRef ta =
      LLVMBuildLoad2(B, e->i32, LLVMBuildInBoundsGEP2(B, e->i32, perm, &ahead, 1, ""), "");
  LLVMSetAlignment(ta, 4);
  LLVMValueRef at =
      wf_cpu_gep8(e, data, LLVMBuildMul(B, LLVMBuildSExt(B, ta, e->i64, ""), stride, ""));
  const char *pf = "llvm.prefetch.p0";
  unsigned pid = LLVMLookupIntrinsicID(pf, strlen(pf));
  LLVMTypeRef ovl = e->ptr;
  LLVMValueRef pa[4] = {at, wf_cpu_ci32(e, 0), wf_cpu_ci32(e, 3), wf_cpu_ci32(e, 1)};
  LLVMBuildCall2(B, LLVMIntrinsicGetType(e->C, pid, &ovl, 1),
                 LLVMGetIntrinsicDeclaration(e->M, pid, &ovl, 1), pa, 4, "");
  LLVMBuildBr(B, go);
  LLVMPositionBuilderAtEnd(B, plain);
  LLVMBuildBr(B, go);
  LLVMPositionBuilderAtEnd(B, go);
  LLVMValueRef tid = LLVMBuildPhi(B, e->i32, "tid");
  LLVMValueRef vals[2] = {t, j};
  LLVMBasicBlockRef bbs[2] = {from, plain};
  LLVMAddIncoming(tid, vals, bbs, 2);
  return tid;
}

/* The kernel body for one variant, wrapped in the thread loop. */
static LLVMValueRef emit_body(E *e, int contig, const char *name) {
  wf_func *fn = e->fn;
  int np = count_body_params(fn);
  LLVMTypeRef *pt = malloc(sizeof(*pt) * (size_t)np);
  if (!pt) {
    wf_cpu_efail(e, NULL, "out of memory");
    return NULL;
  }
  body_params(e, pt);
  LLVMTypeRef ft = LLVMFunctionType(e->vd, pt, (unsigned)np, 0);
  free(pt);
  LLVMValueRef F = LLVMAddFunction(e->M, name, ft);
  LLVMSetLinkage(F, LLVMInternalLinkage);
  set_target_attrs(e, F);
  e->F = F;
  e->contig = contig;
  for (int i = 0; i < fn->nvals; i++)
    e->v[i] = NULL;

  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->C, F, "entry");
  e->exit_bb = LLVMAppendBasicBlockInContext(e->C, F, "exit");
  LLVMPositionBuilderAtEnd(e->B, e->exit_bb);
  LLVMBuildRetVoid(e->B);
  LLVMPositionBuilderAtEnd(e->B, entry);

  /* parameters -> IR values */
  unsigned k = 0;
  unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
  for (int i = 0; i < fn->nparams; i++) {
    wf_val pv = fn->params[i];
    const wf_type *t = wf_vtype(fn, pv);
    if (t->kind == WF_T_ARRAY) {
      int nd = t->ndim;
      if (contig && noalias)
        LLVMAddAttributeAtIndex(F, k + 1, LLVMCreateEnumAttribute(e->C, noalias, 0));
      LLVMValueRef r = LLVMGetUndef(wf_cpu_arr_ltype(e, nd));
      r = LLVMBuildInsertValue(e->B, r, LLVMGetParam(F, k++), 0, "");
      LLVMValueRef sh = LLVMGetUndef(LLVMArrayType(e->i64, (unsigned)nd)), st = sh;
      for (int d = 0; d < nd; d++)
        sh = LLVMBuildInsertValue(e->B, sh, LLVMGetParam(F, k++), (unsigned)d, "");
      for (int d = 0; d < nd; d++) {
        LLVMValueRef s = LLVMGetParam(F, k++);
        if (contig && d == nd - 1) s = wf_cpu_ci64(e, t->elem->size);
        st = LLVMBuildInsertValue(e->B, st, s, (unsigned)d, "");
      }
      r = LLVMBuildInsertValue(e->B, r, sh, 1, "");
      e->v[pv] = LLVMBuildInsertValue(e->B, r, st, 2, "");
      e->aname[pv] = (int16_t)i;
      e->adepth[pv] = 0;
    } else {
      e->v[pv] = LLVMGetParam(F, k++);
      if (contig && count_held(t)) e->v[pv] = contig_struct(e, t, e->v[pv]);
    }
  }
  LLVMValueRef begin = LLVMGetParam(F, k), end = LLVMGetParam(F, k + 1);
  e->ctx = LLVMGetParam(F, k + 2);
  LLVMBuilderRef B = e->B;
  e->intr_bb = NULL;
  e->intr = NULL;
  e->while_polls = 0;
  if (e->o->poll) {
    e->intr = LLVMBuildLoad2(
        B, e->ptr, wf_cpu_gep8(e, e->ctx, wf_cpu_ci64(e, (int64_t)offsetof(wf_launch_ctx, intr))),
        "intr.p");
    LLVMSetAlignment(e->intr, 8);
  }
  int nd = e->o->ndim < 1 ? 1 : e->o->ndim > 4 ? 4 : e->o->ndim;
  LLVMValueRef dims[WF_MAXDIM];
  for (int d = 0; d < nd; d++) {
    dims[d] = LLVMBuildLoad2(B, e->i64, wf_cpu_gep8(e, e->ctx, wf_cpu_ci64(e, WF_CTX_DIMS + 8 * d)),
                             "dim");
    LLVMSetAlignment(dims[d], 8);
  }
  for (int d = 0; d < WF_MAXDIM; d++)
    e->tid[d] = NULL;

  LLVMBasicBlockRef start = LLVMAppendBasicBlockInContext(e->C, F, "start");
  LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, begin, end, ""), start, e->exit_bb);
  LLVMPositionBuilderAtEnd(B, start);
  LLVMValueRef perm = NULL, odata = NULL, ostride = NULL;
  wf_val oid, oarr;
  if (nd == 1 && cell_order_query(fn, fn->body, &oid, &oarr))
    perm = cell_order_perm(e, oid, oarr, &odata, &ostride);

  /* outer row loop (ndim > 1): t advances by the row piece just run */
  LLVMValueRef t = NULL, rown = NULL, j0, jend;
  LLVMBasicBlockRef row_bb = NULL;
  if (nd == 1) {
    j0 = LLVMBuildTrunc(B, begin, e->i32, "");
    jend = LLVMBuildTrunc(B, end, e->i32, "");
  } else {
    row_bb = LLVMAppendBasicBlockInContext(e->C, F, "row");
    LLVMBuildBr(B, row_bb);
    LLVMPositionBuilderAtEnd(B, row_bb);
    t = LLVMBuildPhi(B, e->i64, "t");
    LLVMValueRef dl = dims[nd - 1];
    LLVMValueRef row = LLVMBuildSDiv(B, t, dl, "row");
    LLVMValueRef jj = LLVMBuildSub(B, t, LLVMBuildMul(B, row, dl, ""), "j0");
    LLVMValueRef left = LLVMBuildSub(B, end, t, "");
    LLVMValueRef rest = LLVMBuildSub(B, dl, jj, "");
    rown = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, rest, left, ""), rest, left, "rown");
    j0 = LLVMBuildTrunc(B, jj, e->i32, "");
    jend = LLVMBuildTrunc(B, LLVMBuildAdd(B, jj, rown, ""), e->i32, "");
    /* tids 0..nd-2 from the row number, last of them fastest */
    LLVMValueRef rem = row;
    for (int d = nd - 2; d >= 0; d--) {
      if (d == 0) {
        e->tid[0] = LLVMBuildTrunc(B, rem, e->i32, "tid0");
      } else {
        LLVMValueRef q = LLVMBuildSDiv(B, rem, dims[d], "");
        e->tid[d] = LLVMBuildTrunc(B, LLVMBuildSub(B, rem, LLVMBuildMul(B, q, dims[d], ""), ""),
                                   e->i32, "");
        rem = q;
      }
    }
  }
  /* inner loop over the last dimension */
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(e->C, F, "thread");
  LLVMBasicBlockRef latch = LLVMAppendBasicBlockInContext(e->C, F, "thread.next");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->C, F, "thread.done");
  LLVMBuildBr(B, loop);
  LLVMPositionBuilderAtEnd(B, loop);
  LLVMValueRef j = LLVMBuildPhi(B, e->i32, "j");
  e->tid[nd - 1] = perm ? cell_order_tid(e, perm, odata, ostride, j, dims[0]) : j;
  e->latch_bb = latch;
  e->pline = NULL;
  wf_inst *term = wf_cpu_emit_block(e, fn->body);
  (void)term;
  LLVMBuildBr(B, latch);
  LLVMPositionBuilderAtEnd(B, latch);
  if (e->pline) wf_cpu_print_flush(e); /* the thread's unfinished print line */
  LLVMValueRef jn = LLVMBuildNSWAdd(B, j, wf_cpu_ci32(e, 1), "");
  LLVMValueRef more = LLVMBuildICmp(B, LLVMIntSLT, jn, jend, "");
  if (e->o->debug) {
    /* stop when another thread failed */
    LLVMValueRef ep = wf_cpu_gep8(e, e->ctx, wf_cpu_ci64(e, WF_CTX_ERROR));
    LLVMValueRef ev = LLVMBuildLoad2(B, e->i32, ep, "error");
    LLVMSetAlignment(ev, 4);
    LLVMSetOrdering(ev, LLVMAtomicOrderingMonotonic);
    more = LLVMBuildAnd(B, more, LLVMBuildICmp(B, LLVMIntEQ, ev, wf_cpu_ci32(e, 0), ""), "");
  }
  LLVMValueRef thread_br = LLVMBuildCondBr(B, more, loop, done);
  LLVMAddIncoming(j, &j0, &pre, 1);
  LLVMAddIncoming(j, &jn, &latch, 1);
  LLVMPositionBuilderAtEnd(B, done);
  if (nd == 1) {
    LLVMBuildBr(B, e->exit_bb);
  } else {
    LLVMValueRef tn = LLVMBuildAdd(B, t, rown, "");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, tn, end, ""), row_bb, e->exit_bb);
    LLVMAddIncoming(t, &begin, &start, 1);
    LLVMAddIncoming(t, &tn, &done, 1);
  }
  if (contig && !perm && !e->privmode && e->o->simd && !e->o->debug && nd == 1 &&
      wf_cpu_has_loop(fn->body) && !e->failed && !e->while_polls &&
      wf_cpu_body_simd_safe(F, loop, j, e->intr, e->intr_bb)) {
    wf_cpu_drop_polls(e);
    wf_cpu_mark_simd_loop(e, thread_br);
  }
  return F;
}

int64_t wf_cpu_arg_layout(const wf_func *fn, int64_t *offsets) {
  int64_t off = 0;
  for (int i = 0; i < fn->nparams; i++) {
    const wf_type *t = wf_vtype(fn, fn->params[i]);
    int64_t size = t->kind == WF_T_ARRAY ? 8 : t->size;
    int64_t align = t->align > 8 ? t->align : 8;
    off = (off + align - 1) / align * align;
    offsets[i] = off;
    off += (size < 8 ? 8 : (size + 7) / 8 * 8);
  }
  return off < 8 ? 8 : off;
}

/* The exported entry: unpack arguments, pick the variant, call it. */
static void emit_entry(E *e, LLVMValueRef fc, LLVMValueRef fg, LLVMValueRef fp, const int32_t *bits,
                       int64_t work) {
  wf_func *fn = e->fn;
  LLVMTypeRef pt[4] = {e->ptr, e->i64, e->i64, e->ptr};
  LLVMValueRef F = LLVMAddFunction(e->M, e->o->symbol, LLVMFunctionType(e->vd, pt, 4, 0));
  set_target_attrs(e, F);
  e->F = F;
  LLVMBuilderRef B = e->B;
  LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(e->C, F, "entry"));
  LLVMValueRef args = LLVMGetParam(F, 0);
  int np = count_body_params(fn);
  LLVMValueRef *cargs = malloc(sizeof(*cargs) * (size_t)np);
  int nheld = 0;
  for (int i = 0; i < fn->nparams; i++)
    nheld += count_held(wf_vtype(fn, fn->params[i]));
  LLVMValueRef *datas = malloc(sizeof(*datas) * (size_t)(fn->nparams + nheld + 1));
  LLVMValueRef *hdrs = malloc(sizeof(*hdrs) * (size_t)(fn->nparams + 1));
  int *dataidx = malloc(sizeof(*dataidx) * (size_t)(fn->nparams + 1));
  int64_t *offs = malloc(sizeof(*offs) * (size_t)(fn->nparams + 1));
  if (!cargs || !datas || !offs || !hdrs || !dataidx) {
    free(cargs), free(datas), free(offs), free(hdrs), free(dataidx);
    wf_cpu_efail(e, NULL, "out of memory");
    return;
  }
  wf_cpu_arg_layout(fn, offs);
  int n = 0, na = 0;
  LLVMValueRef fast = LLVMConstInt(e->i1, 1, 0);
  for (int i = 0; i < fn->nvals; i++)
    e->v[i] = NULL; /* the parameters only, for entry_checks */
  for (int i = 0; i < fn->nparams; i++) {
    const wf_type *t = wf_vtype(fn, fn->params[i]);
    LLVMValueRef p = wf_cpu_gep8(e, args, wf_cpu_ci64(e, offs[i]));
    if (t->kind == WF_T_ARRAY) {
      LLVMValueRef hdr = LLVMBuildLoad2(B, e->ptr, p, "hdr");
      LLVMSetAlignment(hdr, 8);
      LLVMValueRef a = wf_cpu_header_value(e, hdr, t->ndim);
      LLVMValueRef data = wf_cpu_arr_get(e, a, 0, -1);
      e->v[fn->params[i]] = a;
      hdrs[i] = hdr;
      dataidx[i] = n;
      cargs[n++] = data;
      for (int d = 0; d < t->ndim; d++)
        cargs[n++] = wf_cpu_arr_get(e, a, 1, d);
      for (int d = 0; d < t->ndim; d++)
        cargs[n++] = wf_cpu_arr_get(e, a, 2, d);
      LLVMValueRef inner = wf_cpu_arr_get(e, a, 2, t->ndim - 1);
      fast = LLVMBuildAnd(
          B, fast, LLVMBuildICmp(B, LLVMIntEQ, inner, wf_cpu_ci64(e, t->elem->size), ""), "");
      for (int q = 0; q < na; q++)
        fast = LLVMBuildAnd(B, fast, LLVMBuildICmp(B, LLVMIntNE, data, datas[q], ""), "");
      datas[na++] = data;
    } else {
      hdrs[i] = NULL;
      dataidx[i] = -1;
      cargs[n] = wf_cpu_mload(e, t, p);
      e->v[fn->params[i]] = cargs[n++];
      if (count_held(t)) held_checks(e, t, e->v[fn->params[i]], datas, &na, &fast);
    }
  }
  if (e->o->checks && !e->o->debug) entry_checks(e, F);
  cargs[n++] = LLVMGetParam(F, 1);
  cargs[n++] = LLVMGetParam(F, 2);
  cargs[n++] = LLVMGetParam(F, 3);
  LLVMTypeRef bt = LLVMGlobalGetValueType(fg);
  if (fc) {
    LLVMBasicBlockRef cb = LLVMAppendBasicBlockInContext(e->C, F, "contig");
    LLVMBasicBlockRef gb = LLVMAppendBasicBlockInContext(e->C, F, "general");
    LLVMBuildCondBr(B, fast, cb, gb);
    LLVMPositionBuilderAtEnd(B, cb);
    if (fp) {
      wf_cpu_emit_priv_call(e, F, fc, fp, cargs, n, hdrs, dataidx, bits, work);
    } else {
      LLVMBuildCall2(B, bt, fc, cargs, (unsigned)n, "");
      LLVMBuildRetVoid(B);
    }
    LLVMPositionBuilderAtEnd(B, gb);
  }
  LLVMBuildCall2(B, bt, fg, cargs, (unsigned)n, "");
  LLVMBuildRetVoid(B);
  free(cargs), free(datas), free(offs), free(hdrs), free(dataidx);
}

/* An environment switch set to "0" or "off" (for measurements). */
static int getenv_off(const char *name) {
  const char *v = getenv(name);
  return v && (!strcmp(v, "0") || !strcmp(v, "off"));
}

LLVMModuleRef wf_llvm_emit(LLVMContextRef C, wf_func *fn, const wf_cpu_opts *o, char *err,
                           size_t errsize) {
  E e;
  memset(&e, 0, sizeof e);
  e.C = C;
  e.fn = fn;
  e.T = fn->mod->types;
  e.o = o;
  e.err = err;
  e.errsize = errsize;
  chunk_display(fn->chunk, e.chunk, sizeof e.chunk);
  e.i1 = LLVMInt1TypeInContext(C);
  e.i8 = LLVMInt8TypeInContext(C);
  e.i16 = LLVMInt16TypeInContext(C);
  e.i32 = LLVMInt32TypeInContext(C);
  e.i64 = LLVMInt64TypeInContext(C);
  e.f16 = LLVMHalfTypeInContext(C);
  e.f32 = LLVMFloatTypeInContext(C);
  e.f64 = LLVMDoubleTypeInContext(C);
  e.ptr = LLVMPointerTypeInContext(C, 0);
  e.vd = LLVMVoidTypeInContext(C);
  for (int i = 0; i < fn->nparams; i++) {
    const wf_type *t = wf_vtype(fn, fn->params[i]);
    if (!t || t->kind == WF_T_VOID) {
      snprintf(err, errsize, "kernel '%s': parameter %d has no type", fn->name ? fn->name : "?",
               i + 1);
      return NULL;
    }
  }
  size_t nv = (size_t)(fn->nvals > 0 ? fn->nvals : 1);
  e.v = calloc(nv, sizeof *e.v);
  e.aname = malloc(nv * sizeof *e.aname);
  e.adepth = calloc(nv, sizeof *e.adepth);
  e.lflags = calloc(nv, 1);
  e.web = e.lflags ? wf_cpu_local_scan(fn, e.lflags) : NULL;
  e.slot = calloc(nv, sizeof *e.slot);
  if (!e.v || !e.aname || !e.adepth || !e.web || !e.slot) {
    free(e.v), free(e.aname), free(e.adepth), free(e.web), free(e.slot), free(e.lflags);
    snprintf(err, errsize, "out of memory");
    return NULL;
  }
  if (getenv_off("WEFT_LOCAL_SLOTS")) /* local arrays as SSA values (for measurements) */
    for (size_t i = 0; i < nv; i++)
      e.web[i] = -1, e.lflags[i] = 0;
  for (size_t i = 0; i < nv; i++)
    e.aname[i] = -1;
  e.M = LLVMModuleCreateWithNameInContext(fn->name ? fn->name : "kernel", C);
  e.B = LLVMCreateBuilderInContext(C);
  int has_arrays = 0, struct_arrays = 0;
  for (int i = 0; i < fn->nparams; i++) {
    has_arrays |= wf_vtype(fn, fn->params[i])->kind == WF_T_ARRAY;
    struct_arrays |= count_held(wf_vtype(fn, fn->params[i])) > 0;
  }
  /* Arrays inside structs join the contiguous variant's checks (compact
  ** rows, distinct data) but get no noalias mark (they are no parameter
  ** of their own) and no private accumulation (priv.c tracks parameters). */
  has_arrays |= struct_arrays;
  LLVMValueRef fc = NULL, fg, fp = NULL;
  int8_t pbuf[64];
  int32_t bbuf[64];
  int8_t *priv = fn->nparams <= 64 ? pbuf : malloc((size_t)fn->nparams);
  int32_t *bits = fn->nparams <= 64 ? bbuf : malloc(sizeof(int32_t) * (size_t)fn->nparams);
  int64_t work = 0;
  int npriv = 0;
  if (priv && bits && has_arrays && !struct_arrays && !o->debug && !getenv_off("WEFT_PRIVATIZE"))
    npriv = wf_cpu_priv_scan(&e, priv, bits, &work);
  if (has_arrays && !o->debug) fc = emit_body(&e, 1, "body.c");
  if (npriv > 0) {
    e.priv = priv;
    e.privmode = 1;
    fp = emit_body(&e, 1, "body.p");
    e.privmode = 0;
  }
  fg = emit_body(&e, 0, "body.g");
  if (fc && fg) {
    /* the general variant is the rare path (aliased or strided arrays):
    ** kept small and out of line, it halves the optimizer's and the code
    ** generator's work on a new kernel */
    wf_cpu_add_fn_attr(&e, fg, "noinline");
    wf_cpu_add_fn_attr(&e, fg, "optsize");
  }
  if (!e.failed) emit_entry(&e, fc, fg, fp, bits, work);
  if (priv != pbuf) free(priv);
  if (bits != bbuf) free(bits);
  LLVMDisposeBuilder(e.B);
  free(e.v), free(e.aname), free(e.adepth), free(e.web), free(e.slot), free(e.lflags);
  if (e.failed) {
    LLVMDisposeModule(e.M);
    return NULL;
  }
  char *msg = NULL;
  if (LLVMVerifyModule(e.M, LLVMReturnStatusAction, &msg)) {
    snprintf(err, errsize, "internal error: invalid LLVM IR for kernel '%s': %s",
             fn->name ? fn->name : "?", msg ? msg : "");
    LLVMDisposeMessage(msg);
    LLVMDisposeModule(e.M);
    return NULL;
  }
  LLVMDisposeMessage(msg);
  return e.M;
}
