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
** Debug mode checks an id argument against the live host objects first
** (wf_cpu_rt_geom_check), and an element index against its object; a bad
** one fails the launch and the id is replaced by 0, the null object, which
** the query code reads nothing through.
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

/* Debug mode: the id (an i64 value) if it is a live object of the row's
** kind, else 0 after the launch was failed with the position. */
static LLVMValueRef checked_id(wf_cpu_emitter *e, const wf_inst *in, const wf_nativeinfo *ni,
                               LLVMValueRef id) {
  char where[320];
  if (in->loc.line > 0)
    snprintf(where, sizeof where, "%s:%d", e->chunk, (int)in->loc.line);
  else
    snprintf(where, sizeof where, "%s", e->chunk);
  /* an element index (second argument, int32) is checked too */
  LLVMValueRef index = ni->args[1] == 'i' && in->nargs > 1 ? e->v[in->args[1]] : wf_cpu_ci32(e, 0);
  LLVMTypeRef pt[6] = {e->ptr, e->ptr, e->i64, e->i32, e->i32, e->i32};
  LLVMValueRef a[6] = {e->ctx,
                       LLVMBuildGlobalStringPtr(e->B, where, "where"),
                       id,
                       wf_cpu_ci32(e, ni->kind),
                       wf_cpu_ci32(e, in->imm),
                       index};
  LLVMValueRef ok = wf_cpu_call_ext(e, "wf_cpu_rt_geom_check", e->i32, pt, 6, a);
  LLVMValueRef good = LLVMBuildICmp(e->B, LLVMIntNE, ok, wf_cpu_ci32(e, 0), "");
  return LLVMBuildSelect(e->B, good, id, wf_cpu_ci64(e, 0), "");
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
    if (j == 0 && ni->kind && e->o->debug) v = checked_id(e, in, ni, v);
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
