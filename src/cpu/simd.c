/*
** simd.c -- SIMD across threads for the CPU emitter.
**
** Takes a finished contiguous body function (entry.c) and its thread loop;
** tells whether the loop may be widened across threads
** (wf_cpu_body_simd_safe), and if so drops its interrupt polls and marks
** it for LLVM's outer-loop vectorizer (wf_cpu_drop_polls,
** wf_cpu_mark_simd_loop). Why and when is below.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/DebugInfo.h>

#include "cpu/cpu.h"

typedef wf_cpu_emitter E;

/* ---------------------------------------------------------------------
** SIMD across threads. A 1-D thread loop whose body holds a loop (the
** n-body inner j loop) is an outer loop: LLVM's loop vectorizer only
** widens it through its VPlan native path (jit.c enables it), and only
** when the loop carries llvm.loop.vectorize.enable. That path checks the
** control flow (uniform inner trip counts, uniform branches) but neither
** memory dependences nor what the instructions are, so weft asks for it
** only where lanes cannot interfere and every instruction can be widened:
** the contiguous (noalias) body, no private accumulation, no debug
** checks, and the whitelist of wf_cpu_body_simd_safe. Each lane keeps the
** scalar order of operations, so results are bit-identical to the scalar
** body.
** --------------------------------------------------------------------- */

/* Does the block hold a FOR or WHILE loop (at any depth)? */
int wf_cpu_has_loop(const wf_block *bl) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    if (in->op == WF_OP_FOR || in->op == WF_OP_WHILE) return 1;
    for (int b = 0; b < in->nblocks; b++)
      if (wf_cpu_has_loop(in->blocks[b])) return 1;
  }
  return 0;
}

/* Intrinsics the vectorizer widens lane by lane (same rounding). */
static int simd_intrinsic_ok(const char *name) {
  static const char *const ok[] = {
      "llvm.sqrt.",     "llvm.fabs.", "llvm.floor.",     "llvm.ceil.",   "llvm.trunc.",
      "llvm.round.",    "llvm.rint.", "llvm.nearbyint.", "llvm.minnum.", "llvm.maxnum.",
      "llvm.copysign.", "llvm.smax.", "llvm.smin.",      "llvm.umax.",   "llvm.umin.",
      "llvm.abs.",      "llvm.sin.",  "llvm.cos.",       "llvm.exp.",    "llvm.exp2.",
      "llvm.log.",      "llvm.log2.", "llvm.log10.",     "llvm.pow.",    NULL};
  for (int i = 0; ok[i]; i++)
    if (!strncmp(name, ok[i], strlen(ok[i]))) return 1;
  return 0;
}

/* Whitelist of what the VPlan native path widens correctly: arithmetic,
** comparisons, casts, selects, aggregates, plain loads and stores, the
** intrinsics above, and branches. No allocas (lanes would share them), no
** atomics, no other calls (helpers, libm). Stores only outside inner
** loops: a store loop could become a memset/memcpy call, which the
** native path cannot widen. in_inner: I sits in a loop nested in the
** thread loop. */
/* Does v depend on the thread index j (through non-phi instructions)? */
static int depends_on(LLVMValueRef v, LLVMValueRef j, int depth) {
  if (v == j) return 1;
  if (depth > 24 || !LLVMIsAInstruction(v) || LLVMIsAPHINode(v)) return 0;
  int n = LLVMGetNumOperands(v);
  for (int i = 0; i < n; i++)
    if (depends_on(LLVMGetOperand(v, i), j, depth + 1)) return 1;
  return 0;
}

/* Stores must go to an address made from the thread index: a store every
** thread makes to the same place is moved out of the loop by LICM, and the
** native path mishandles such values live after the outer loop (LLVM 16
** emits invalid IR). */
static int simd_inst_ok(LLVMValueRef I, int in_inner, LLVMValueRef j) {
  switch (LLVMGetInstructionOpcode(I)) {
  case LLVMAdd:
  case LLVMFAdd:
  case LLVMSub:
  case LLVMFSub:
  case LLVMMul:
  case LLVMFMul:
  case LLVMUDiv:
  case LLVMSDiv:
  case LLVMFDiv:
  case LLVMURem:
  case LLVMSRem:
  case LLVMFRem:
  case LLVMShl:
  case LLVMLShr:
  case LLVMAShr:
  case LLVMAnd:
  case LLVMOr:
  case LLVMXor:
  case LLVMFNeg:
  case LLVMTrunc:
  case LLVMZExt:
  case LLVMSExt:
  case LLVMFPToUI:
  case LLVMFPToSI:
  case LLVMUIToFP:
  case LLVMSIToFP:
  case LLVMFPTrunc:
  case LLVMFPExt:
  case LLVMBitCast:
  case LLVMICmp:
  case LLVMFCmp:
  case LLVMPHI:
  case LLVMSelect:
  case LLVMGetElementPtr:
  case LLVMExtractValue:
  case LLVMInsertValue:
  case LLVMBr:
  case LLVMRet: return 1;
  case LLVMLoad: return !LLVMGetVolatile(I) && LLVMGetOrdering(I) == LLVMAtomicOrderingNotAtomic;
  case LLVMStore:
    return !in_inner && !LLVMGetVolatile(I) && LLVMGetOrdering(I) == LLVMAtomicOrderingNotAtomic &&
           depends_on(LLVMGetOperand(I, 1), j, 0);
  case LLVMCall: {
    LLVMValueRef callee = LLVMGetCalledValue(I);
    size_t len = 0;
    const char *nm = callee && LLVMIsAFunction(callee) ? LLVMGetValueName2(callee, &len) : NULL;
    return nm && simd_intrinsic_ok(nm);
  }
  default: return 0;
  }
}

static int bb_index(LLVMBasicBlockRef *bbs, int n, LLVMBasicBlockRef bb) {
  for (int i = 0; i < n; i++)
    if (bbs[i] == bb) return i;
  return -1;
}

/* Marks the natural loop of the back edge tail -> head: head, and every
** block that reaches tail without passing through head (predecessors are
** the parents of the terminators using a block). */
static void mark_natural_loop(LLVMBasicBlockRef *bbs, int n, int head, int tail, int8_t *inner,
                              int *work) {
  int top = 0;
  inner[head] = 1;
  if (!inner[tail]) inner[tail] = 1, work[top++] = tail;
  while (top > 0) {
    int b = work[--top];
    for (LLVMUseRef u = LLVMGetFirstUse(LLVMBasicBlockAsValue(bbs[b])); u; u = LLVMGetNextUse(u)) {
      LLVMValueRef user = LLVMGetUser(u);
      if (!LLVMIsAInstruction(user) || !LLVMIsATerminatorInst(user)) continue;
      int p = bb_index(bbs, n, LLVMGetInstructionParent(user));
      if (p >= 0 && !inner[p]) inner[p] = 1, work[top++] = p;
    }
  }
}

/* Is every instruction of F (the contiguous body) in the whitelist of
** simd_inst_ok? Inner loops: the natural loops of the back edges found by
** a depth-first walk from the entry, except the thread loop's own. */
int wf_cpu_body_simd_safe(LLVMValueRef F, LLVMBasicBlockRef thread_bb, LLVMValueRef j,
                          LLVMValueRef intr, LLVMBasicBlockRef intr_bb) {
  int n = (int)LLVMCountBasicBlocks(F), ok = n > 0;
  size_t nn = (size_t)(n > 0 ? n : 1);
  LLVMBasicBlockRef *bbs = malloc(sizeof *bbs * nn);
  int8_t *inner = calloc(nn, 1), *state = calloc(nn, 1); /* 1 on the stack, 2 done */
  int *stack = malloc(sizeof(int) * nn), *next = calloc(nn, sizeof(int)),
      *work = malloc(sizeof(int) * nn);
  ok = ok && bbs && inner && state && stack && next && work;
  int top = 0;
  if (ok) {
    LLVMGetBasicBlocks(F, bbs);
    stack[top++] = 0;
    state[0] = 1;
  }
  while (ok && top > 0) {
    int b = stack[top - 1];
    LLVMValueRef t = LLVMGetBasicBlockTerminator(bbs[b]);
    unsigned ns = t ? LLVMGetNumSuccessors(t) : 0;
    if ((unsigned)next[b] >= ns) {
      state[b] = 2;
      top--;
      continue;
    }
    LLVMBasicBlockRef to = LLVMGetSuccessor(t, (unsigned)next[b]++);
    int s = bb_index(bbs, n, to);
    if (s < 0) {
      ok = 0;
    } else if (state[s] == 0) {
      state[s] = 1;
      stack[top++] = s;
    } else if (state[s] == 1 && to != thread_bb) {
      mark_natural_loop(bbs, n, s, b, inner, work);
    }
  }
  /* the interrupt polls (loads of intr, the block they branch to) are
  ** not checked: wf_cpu_drop_polls removes them from a body that passes */
  for (int b = 0; ok && b < n; b++)
    for (LLVMValueRef I = LLVMGetFirstInstruction(bbs[b]); I && ok && bbs[b] != intr_bb;
         I = LLVMGetNextInstruction(I))
      ok = (intr && LLVMIsALoadInst(I) && LLVMGetOperand(I, 0) == intr) ||
           simd_inst_ok(I, inner[b], j);
  free(bbs), free(inner), free(state), free(stack), free(next), free(work);
  return ok;
}

/* A body vectorized across threads keeps no interrupt polls (the native
** path cannot widen atomics); only FOR loops, whose trip counts are
** bounded, reach here, and the pool still checks between chunks. Each
** poll (load, compare, branch) becomes a plain branch to its latch. */
void wf_cpu_drop_polls(E *e) {
  LLVMUseRef u;
  while (e->intr && (u = LLVMGetFirstUse(e->intr)) != NULL) {
    LLVMValueRef ld = LLVMGetUser(u);
    LLVMValueRef cmp = LLVMGetUser(LLVMGetFirstUse(ld));
    LLVMValueRef br = LLVMGetUser(LLVMGetFirstUse(cmp));
    LLVMPositionBuilderBefore(e->B, br);
    LLVMBuildBr(e->B, LLVMGetSuccessor(br, 1));
    LLVMInstructionEraseFromParent(br);
    LLVMInstructionEraseFromParent(cmp);
    LLVMInstructionEraseFromParent(ld);
  }
  if (e->intr_bb) LLVMDeleteBasicBlock(e->intr_bb);
  e->intr_bb = NULL;
}

/* Marks the thread loop (its latch branch) for outer-loop vectorization:
** !llvm.loop !{self, !{"llvm.loop.vectorize.enable", i1 true}}. */
void wf_cpu_mark_simd_loop(E *e, LLVMValueRef br) {
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(e->C, NULL, 0);
  LLVMMetadataRef name = LLVMMDStringInContext2(e->C, "llvm.loop.vectorize.enable", 26);
  LLVMMetadataRef on = LLVMValueAsMetadata(LLVMConstInt(e->i1, 1, 0));
  LLVMMetadataRef hint_ops[2] = {name, on};
  LLVMMetadataRef hint = LLVMMDNodeInContext2(e->C, hint_ops, 2);
  LLVMMetadataRef loop_ops[2] = {tmp, hint};
  LLVMMetadataRef loop = LLVMMDNodeInContext2(e->C, loop_ops, 2);
  LLVMMetadataReplaceAllUsesWith(tmp, loop); /* frees tmp; loop now names itself */
  unsigned kind = LLVMGetMDKindIDInContext(e->C, "llvm.loop", 9);
  LLVMSetMetadata(br, kind, LLVMMetadataAsValue(e->C, loop));
}
