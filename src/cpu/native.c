/*
** native.c -- CPU code for WF_OP_NATIVE: a call of a native builtin
** (src/geom/native.h), the C function wf_nat_<name> that rtlib.c hands to
** the JIT. Its C ABI passes every value by address in its C layout:
**
**   void wf_nat_<name>([void *state,] void *res, const void *arg0, ...)
**
** so each argument goes into a slot (an alloca in the entry block, which
** LLVM keeps in registers or on the stack frame, never growing it in a
** loop) and the result comes back through one. Iterator begin rows get
** their state block there too; the handle is its address.
**
** Debug and release mode check an id argument against the live host
** objects first (wf_cpu_rt_geom_check), and an element index against its
** object; a bad one fails the launch and the body returns before the query
** reads anything (check_id). Fast mode checks nothing: a stale or made-up
** id is read through there.
*/
#include "cpu/cpu.h"
#include "geom/native.h"

/* An alloca of count values of type t in the entry block of the body, so
** that a loop around its use does not grow the stack (emit.c's print
** slots use it too). */
LLVMValueRef wf_cpu_entry_alloca(wf_cpu_emitter *e, LLVMTypeRef t, LLVMValueRef count,
                                 const char *name) {
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(e->B);
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(e->F);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first)
    LLVMPositionBuilderBefore(e->B, first);
  else
    LLVMPositionBuilderAtEnd(e->B, entry);
  LLVMValueRef a = LLVMBuildArrayAlloca(e->B, t, count, name);
  LLVMPositionBuilderAtEnd(e->B, cur);
  return a;
}

/* n bytes, 16-byte aligned, in the entry block. */
static LLVMValueRef slot(wf_cpu_emitter *e, uint32_t n, const char *name) {
  LLVMValueRef a = wf_cpu_entry_alloca(e, e->i8, wf_cpu_ci32(e, n ? n : 1), name);
  LLVMSetAlignment(a, 16);
  return a;
}

/* An i64 slot in the body's entry block, set to 0 there: it lives for one
** chunk of threads (the body's call), in a register once LLVM promotes it. */
static LLVMValueRef chunk_slot(wf_cpu_emitter *e, const char *name) {
  LLVMValueRef a = wf_cpu_entry_alloca(e, e->i64, wf_cpu_ci32(e, 1), name);
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(e->B);
  LLVMValueRef next = LLVMGetNextInstruction(a);
  if (next)
    LLVMPositionBuilderBefore(e->B, next);
  else
    LLVMPositionBuilderAtEnd(e->B, LLVMGetInstructionParent(a));
  LLVMBuildStore(e->B, wf_cpu_ci64(e, 0), a);
  LLVMPositionBuilderAtEnd(e->B, cur);
  return a;
}

/* Builds, in the body's entry block ahead of the thread loop, the index
** limit of a thread-invariant id (wf_cpu_rt_geom_limit: 0 if it is bad;
** nothing fails there, as the query may never run). */
static LLVMValueRef entry_limit(wf_cpu_emitter *e, const wf_nativeinfo *ni, int row,
                                LLVMValueRef id) {
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(e->B), entry = LLVMGetEntryBasicBlock(e->F);
  LLVMValueRef term = LLVMGetBasicBlockTerminator(entry);
  if (term)
    LLVMPositionBuilderBefore(e->B, term);
  else
    LLVMPositionBuilderAtEnd(e->B, entry);
  LLVMTypeRef pt[4] = {e->ptr, e->i64, e->i32, e->i32};
  LLVMValueRef a[4] = {e->ctx, id, wf_cpu_ci32(e, ni->kind), wf_cpu_ci32(e, row)};
  LLVMValueRef lim = wf_cpu_call_ext(e, "wf_cpu_rt_geom_limit", e->i64, pt, 4, a);
  LLVMPositionBuilderAtEnd(e->B, cur);
  return lim;
}

/* Debug and release mode: the id (i64) must be a live object of the row's
** kind, and a mesh element reader's index (second argument, int32) in
** range, or the launch fails with the position and the body returns.
** An id the body receives as such (a parameter, a constant) is looked up
** once per chunk ahead of the thread loop, leaving a compare per call;
** any other id is looked up when it differs from the last one this call
** site found good (kept with its limit in slots LLVM promotes). */
static void check_id(wf_cpu_emitter *e, const wf_inst *in, const wf_nativeinfo *ni,
                     LLVMValueRef id) {
  LLVMBuilderRef B = e->B;
  int indexed = ni->kind == WF_GEOM_MESH && ni->args[1] == 'i' && in->nargs > 1;
  LLVMValueRef index = indexed ? e->v[in->args[1]] : wf_cpu_ci32(e, 0);
  LLVMValueRef hit, lim, cid = NULL, clim = NULL;
  if (LLVMIsAArgument(id) || LLVMIsConstant(id)) {
    lim = entry_limit(e, ni, (int)in->imm, id);
    hit = LLVMBuildICmp(B, LLVMIntNE, lim, wf_cpu_ci64(e, 0), "");
  } else {
    cid = chunk_slot(e, "geom.id"), clim = chunk_slot(e, "geom.lim");
    hit = LLVMBuildICmp(B, LLVMIntEQ, id, LLVMBuildLoad2(B, e->i64, cid, ""), "");
    lim = LLVMBuildLoad2(B, e->i64, clim, "");
  }
  if (indexed)
    hit = LLVMBuildAnd(
        B, hit, LLVMBuildICmp(B, LLVMIntULT, LLVMBuildSExt(B, index, e->i64, ""), lim, ""), "");
  LLVMBasicBlockRef cont = wf_cpu_begin_check(e, hit);
  char where[320];
  if (in->loc.line > 0)
    snprintf(where, sizeof where, "%s:%d", e->chunk, (int)in->loc.line);
  else
    snprintf(where, sizeof where, "%s", e->chunk);
  LLVMTypeRef pt[7] = {e->ptr, e->ptr, e->ptr, e->i64, e->i32, e->i32, e->i32};
  LLVMValueRef a[7] = {e->ctx,
                       LLVMBuildGlobalStringPtr(B, where, "where"),
                       LLVMBuildGlobalStringPtr(B, e->fn->name ? e->fn->name : "?", "kern"),
                       id,
                       wf_cpu_ci32(e, ni->kind),
                       wf_cpu_ci32(e, in->imm),
                       index};
  LLVMValueRef got = wf_cpu_call_ext(e, "wf_cpu_rt_geom_check", e->i64, pt, 7, a);
  if (!cid) {
    /* the entry's limit said no, so the check fails and the body returns:
    ** as the call never leads back into the thread loop, LLVM may keep the
    ** loop's loads of the object's fields hoisted out of it */
    wf_cpu_end_check(e, cont);
    return;
  }
  LLVMBasicBlockRef good =
      wf_cpu_begin_check(e, LLVMBuildICmp(B, LLVMIntNE, got, wf_cpu_ci64(e, 0), ""));
  wf_cpu_end_check(e, good);
  LLVMBuildStore(B, id, cid);
  LLVMBuildStore(B, got, clim);
  LLVMBuildBr(B, cont);
  LLVMPositionBuilderAtEnd(B, cont);
}

void wf_cpu_emit_native(wf_cpu_emitter *e, wf_inst *in) {
  if (in->imm < 0 || in->imm >= WF_NAT__COUNT || in->nargs > 14) {
    wf_cpu_efail(e, in, "internal error: bad native call %lld", (long long)in->imm);
    return;
  }
  const wf_nativeinfo *ni = &wf_native_tab[in->imm];
  wf_func *fn = e->fn;
  LLVMValueRef args[16];
  LLVMTypeRef pt[16];
  int k = 0;
  LLVMValueRef state = NULL, res = NULL;
  const wf_type *rt = in->nres ? wf_vtype(fn, in->res[0]) : NULL;
  if (ni->state) {
    state = slot(e, (uint32_t)ni->state, "nat.state");
    pt[k] = e->ptr, args[k++] = state;
  }
  if (rt && !state) res = slot(e, rt->size, "nat.res");
  pt[k] = e->ptr, args[k++] = res ? res : LLVMConstNull(e->ptr);
  for (int j = 0; j < in->nargs; j++) {
    const wf_type *at = wf_vtype(fn, in->args[j]);
    LLVMValueRef v = e->v[in->args[j]];
    if (j == 0 && ni->kind && (e->o->debug || e->o->checks)) check_id(e, in, ni, v);
    LLVMValueRef s = slot(e, at->size, "nat.arg");
    wf_cpu_mstore(e, in, at, s, v);
    pt[k] = e->ptr, args[k++] = s;
  }
  char name[96];
  snprintf(name, sizeof name, "wf_nat_%s", ni->name);
  wf_cpu_call_ext(e, name, e->vd, pt, k, args);
  if (!rt) return;
  e->v[in->res[0]] = state ? LLVMBuildPtrToInt(e->B, state, e->i64, "") : wf_cpu_mload(e, rt, res);
}
