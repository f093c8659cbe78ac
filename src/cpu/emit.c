/*
** emit.c -- weft IR -> LLVM IR (LLVM-C API, opaque pointers).
**
** The per-instruction emission: types, scalar and memory operations,
** random numbers, printing and structured control flow. The functions
** around it are built elsewhere: the thread loop, the exported entry and
** wf_llvm_emit in entry.c; SIMD across threads in simd.c; privatized
** atomics in priv.c. Their shared declarations are in cpu.h.
**
** Values. Scalars map to i1/iN/half/float/double; vectors and quaternions
** to [n x T]; matrices to [rows x [cols x T]]; transforms to {[3 x T],
** [4 x T]}; structs to literal structs; rng to i32; arrays (params and
** views) to {ptr data, [nd x i64] shape, [nd x i64] strides (bytes)}.
** In memory every element uses the C layout of wf_type (bool = 1 byte).
**
** Structured control flow: IF -> two blocks and phis at the merge; FOR ->
** header with phis (induction, carried), inclusive Lua bounds test chosen
** by the sign of the step; WHILE -> the "before" block with phis, the
** "after" block bound to the COND values. A failing check (debug) calls a
** helper, then branches to the function's exit; emission continues in a
** fresh block, so every region keeps a live insertion point.
**
** Random numbers (the CUDA emitter reproduces this bit for bit). All
** arithmetic is on uint32 with wrap-around; this is the PCG-RXS-M-XS hash
** (Jarzynski and Olano, "Hash Functions for GPU Rendering", 2020):
**   pcg(x):  b = x * 747796405 + 2891336453
**            c = ((b >> ((b >> 28) + 4)) ^ b) * 277803737
**            return (c >> 22) ^ c
**   RNG_INIT(seed, offset) = pcg(uint32(seed) + pcg(uint32(offset)))
**   RANDI(s): s' = pcg(s); value = int32(s')              -> value, s'
**   RANDF(s): s' = pcg(s); value = float(s' >> 8) * 2^-24 -> value in [0,1), s'
*/
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/DebugInfo.h>

#include "cpu/cpu.h"

typedef wf_cpu_emitter E;

/* The helpers entry.c, simd.c and priv.c call (declared in cpu.h with the
** wf_cpu_ prefix) keep their short names in this file. */
#define efail wf_cpu_efail
#define ltype wf_cpu_ltype
#define arr_ltype wf_cpu_arr_ltype
#define ci32 wf_cpu_ci32
#define ci64 wf_cpu_ci64
#define gep8 wf_cpu_gep8
#define add_fn_attr wf_cpu_add_fn_attr
#define call_ext wf_cpu_call_ext
#define header_value wf_cpu_header_value
#define arr_get wf_cpu_arr_get
#define mload wf_cpu_mload
#define range_check wf_cpu_range_check
#define emit_inst wf_cpu_emit_inst
#define emit_block wf_cpu_emit_block
#define begin_check wf_cpu_begin_check
#define end_check wf_cpu_end_check

/* Record the first error; emission goes on with placeholder values. */
void efail(E *e, const wf_inst *in, const char *fmt, ...) {
  if (e->failed) return;
  e->failed = 1;
  int n = 0;
  if (in && in->loc.line > 0)
    n = snprintf(e->err, e->errsize, "%s:%d: ", e->chunk, (int)in->loc.line);
  if (n < 0 || (size_t)n >= e->errsize) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->err + n, e->errsize - (size_t)n, fmt, ap);
  va_end(ap);
}

/* ---------------------------------------------------------------------
** types
** --------------------------------------------------------------------- */
LLVMTypeRef arr_ltype(E *e, int nd) {
  LLVMTypeRef f[3] = {e->ptr, LLVMArrayType(e->i64, (unsigned)nd),
                      LLVMArrayType(e->i64, (unsigned)nd)};
  return LLVMStructTypeInContext(e->C, f, 3, 0);
}

LLVMTypeRef ltype(E *e, const wf_type *t) {
  if (!t) return e->i32;
  switch (t->kind) {
  case WF_T_VOID: return e->vd;
  case WF_T_BOOL: return e->i1;
  case WF_T_INT: return LLVMIntTypeInContext(e->C, t->bits);
  case WF_T_FLOAT: return t->bits == 16 ? e->f16 : t->bits == 32 ? e->f32 : e->f64;
  case WF_T_RNG: return e->i32;
  case WF_T_VEC:
  case WF_T_QUAT: return LLVMArrayType(ltype(e, t->elem), (unsigned)wf_t_arity(t));
  case WF_T_MAT: return LLVMArrayType(LLVMArrayType(ltype(e, t->elem), t->cols), t->rows);
  case WF_T_TRANSFORM: {
    LLVMTypeRef s = ltype(e, t->elem);
    LLVMTypeRef f[2] = {LLVMArrayType(s, 3), LLVMArrayType(s, 4)};
    return LLVMStructTypeInContext(e->C, f, 2, 0);
  }
  case WF_T_STRUCT: {
    LLVMTypeRef buf[64], *f = t->nfields <= 64 ? buf : malloc(sizeof(*f) * (size_t)t->nfields);
    if (!f) return e->i32;
    for (int i = 0; i < t->nfields; i++)
      f[i] = ltype(e, t->fields[i].type);
    LLVMTypeRef r = LLVMStructTypeInContext(e->C, f, (unsigned)t->nfields, 0);
    if (f != buf) free(f);
    return r;
  }
  case WF_T_ARRAY: return arr_ltype(e, t->ndim);
  }
  return e->i32;
}

LLVMValueRef ci32(E *e, int64_t v) {
  return LLVMConstInt(e->i32, (unsigned long long)v, 1);
}
LLVMValueRef ci64(E *e, int64_t v) {
  return LLVMConstInt(e->i64, (unsigned long long)v, 1);
}

/* Byte offset from a pointer. */
LLVMValueRef gep8(E *e, LLVMValueRef p, LLVMValueRef off) {
  return LLVMBuildInBoundsGEP2(e->B, e->i8, p, &off, 1, "");
}

/* ---------------------------------------------------------------------
** calls: intrinsics, libm, runtime helpers
** --------------------------------------------------------------------- */
static LLVMValueRef intr(E *e, const char *name, LLVMTypeRef *ovl, int novl, LLVMValueRef *args,
                         int nargs) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->M, id, ovl, (size_t)novl);
  LLVMTypeRef ft = LLVMIntrinsicGetType(e->C, id, ovl, (size_t)novl);
  return LLVMBuildCall2(e->B, ft, f, args, (unsigned)nargs, "");
}

static LLVMValueRef intr1(E *e, const char *name, LLVMValueRef a) {
  LLVMTypeRef t = LLVMTypeOf(a);
  return intr(e, name, &t, 1, &a, 1);
}

static LLVMValueRef intr2(E *e, const char *name, LLVMValueRef a, LLVMValueRef b) {
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef args[2] = {a, b};
  return intr(e, name, &t, 1, args, 2);
}

void add_fn_attr(E *e, LLVMValueRef f, const char *name) {
  unsigned k = LLVMGetEnumAttributeKindForName(name, strlen(name));
  if (k)
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(e->C, k, 0));
}

LLVMValueRef call_ext(E *e, const char *name, LLVMTypeRef ret, LLVMTypeRef *pt, int n,
                      LLVMValueRef *args) {
  LLVMTypeRef ft = LLVMFunctionType(ret, pt, (unsigned)n, 0);
  LLVMValueRef f = LLVMGetNamedFunction(e->M, name);
  if (!f) {
    f = LLVMAddFunction(e->M, name, ft);
    add_fn_attr(e, f, "nounwind");
  }
  return LLVMBuildCall2(e->B, ft, f, args, (unsigned)n, "");
}

/* A libm function of one or two float arguments; half computes in float. */
static LLVMValueRef libm(E *e, const char *base, const wf_type *t, LLVMValueRef a, LLVMValueRef b) {
  int bits = t->bits;
  LLVMTypeRef ct = bits == 64 ? e->f64 : e->f32;
  if (bits == 16) {
    a = LLVMBuildFPExt(e->B, a, e->f32, "");
    if (b) b = LLVMBuildFPExt(e->B, b, e->f32, "");
  }
  char name[32];
  snprintf(name, sizeof name, "%s%s", base, bits == 64 ? "" : "f");
  LLVMTypeRef pt[2] = {ct, ct};
  LLVMValueRef args[2] = {a, b};
  LLVMValueRef r = call_ext(e, name, ct, pt, b ? 2 : 1, args);
  return bits == 16 ? LLVMBuildFPTrunc(e->B, r, e->f16, "") : r;
}

/* A scalar float function of ir.h's table: its LLVM intrinsic if it has
** one, else its libm function (which rtlib.c lists for the JIT). */
static LLVMValueRef math_fn(E *e, wf_op op, const wf_type *t, LLVMValueRef a, LLVMValueRef b) {
  const wf_opinfo *oi = &wf_opinfo_tab[op];
  if (op == WF_OP_POW && !LLVMIsAConstantFP(b)) {
    /* LLVM rewrites pow(2^n, x) as exp2(n * x) even without fast-math,
    ** which rounds n * x first (2^53 ^ 1.7 is 11 ulp off): a call LLVM
    ** must not treat as the libm pow. A constant exponent keeps the
    ** intrinsic, whose rewrites (x * x, sqrt) are exact. */
    LLVMValueRef r = libm(e, oi->libm, t, a, b);
    LLVMValueRef call = t->bits == 16 ? LLVMGetOperand(r, 0) : r;
    unsigned k = LLVMGetEnumAttributeKindForName("nobuiltin", 9);
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(e->C, k, 0));
    return r;
  }
  if (oi->llvm) return b ? intr2(e, oi->llvm, a, b) : intr1(e, oi->llvm, a);
  return libm(e, oi->libm, t, a, b);
}

/* Lua's math.max and math.min: a > b ? a : b (a < b ? a : b), so a NaN
** operand gives the other one when it is first and itself when it is
** second, as LuaJIT's interpreter. InstCombine folds max(max(a, C), C)
** to max(a, C) as if NaN could not occur, so an operand that is itself a
** select goes through llvm.arithmetic.fence, which it cannot see through
** (and which costs no instruction). */
static LLVMValueRef minmax(E *e, int ismax, LLVMValueRef a, LLVMValueRef b) {
  if (LLVMIsASelectInst(a)) a = intr1(e, "llvm.arithmetic.fence", a);
  if (LLVMIsASelectInst(b)) b = intr1(e, "llvm.arithmetic.fence", b);
  LLVMValueRef c = LLVMBuildFCmp(e->B, ismax ? LLVMRealOGT : LLVMRealOLT, a, b, "");
  return LLVMBuildSelect(e->B, c, a, b, "");
}

/* "chunk:line" of an instruction, as a constant string. */
static LLVMValueRef where_str(E *e, const wf_inst *in) {
  char buf[320];
  if (in && in->loc.line > 0)
    snprintf(buf, sizeof buf, "%s:%d", e->chunk, (int)in->loc.line);
  else
    snprintf(buf, sizeof buf, "%s", e->chunk);
  return LLVMBuildGlobalStringPtr(e->B, buf, "where");
}

/* Continue emission in a fresh block after an unconditional jump away. */
static void fresh_block(E *e) {
  LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, e->F, "dead"));
}

/* if (!ok) { <fail code from cb>; goto exit } -- returns to the ok path.
** The failure is cold: !prof branch weights keep the ok path straight. */
LLVMBasicBlockRef begin_check(E *e, LLVMValueRef ok) {
  LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(e->C, e->F, "check.fail");
  LLVMBasicBlockRef good = LLVMAppendBasicBlockInContext(e->C, e->F, "check.ok");
  LLVMValueRef br = LLVMBuildCondBr(e->B, ok, good, bad);
  LLVMMetadataRef w[3] = {LLVMMDStringInContext2(e->C, "branch_weights", 14),
                          LLVMValueAsMetadata(LLVMConstInt(e->i32, 1 << 20, 0)),
                          LLVMValueAsMetadata(LLVMConstInt(e->i32, 1, 0))};
  LLVMSetMetadata(br, LLVMGetMDKindIDInContext(e->C, "prof", 4),
                  LLVMMetadataAsValue(e->C, LLVMMDNodeInContext2(e->C, w, 3)));
  LLVMPositionBuilderAtEnd(e->B, bad);
  return good;
}

void end_check(E *e, LLVMBasicBlockRef good) {
  LLVMBuildBr(e->B, e->exit_bb);
  LLVMPositionBuilderAtEnd(e->B, good);
}

static void emit_trap(E *e, const wf_inst *in, const char *msg) {
  LLVMTypeRef pt[3] = {e->ptr, e->ptr, e->ptr};
  LLVMValueRef args[3] = {e->ctx, where_str(e, in), LLVMBuildGlobalStringPtr(e->B, msg, "msg")};
  call_ext(e, "wf_cpu_rt_trap", e->vd, pt, 3, args);
}

/* ---------------------------------------------------------------------
** scalar operations
** --------------------------------------------------------------------- */
static LLVMValueRef cfloat(E *e, const wf_type *t, double v) {
  return LLVMConstReal(ltype(e, t), v);
}

static LLVMValueRef cint(E *e, const wf_type *t, int64_t v) {
  return LLVMConstInt(ltype(e, t), (unsigned long long)v, 1);
}

/* Integer division checks: in debug and release mode a zero divisor stops
** the launch with the position (a compare and a cold branch, gone for a
** constant divisor); in fast mode x / 0 and x % 0 give 0. Never a hardware
** trap or LLVM's undefined sdiv: INT_MIN / -1 wraps (Lua's rule) and the
** divisor used is never 0 or -1. Returns a divisor that is safe to use. */
static LLVMValueRef safe_divisor(E *e, const wf_inst *in, const wf_type *t, LLVMValueRef b) {
  LLVMValueRef zero = cint(e, t, 0), one = cint(e, t, 1);
  LLVMValueRef isz = LLVMBuildICmp(e->B, LLVMIntEQ, b, zero, "");
  if (e->o->debug || e->o->checks) {
    LLVMBasicBlockRef good = begin_check(e, LLVMBuildNot(e->B, isz, ""));
    emit_trap(e, in, "integer division by zero");
    end_check(e, good);
  }
  LLVMValueRef bad = isz;
  if (t->is_signed)
    bad = LLVMBuildOr(e->B, isz, LLVMBuildICmp(e->B, LLVMIntEQ, b, cint(e, t, -1), ""), "");
  return LLVMBuildSelect(e->B, bad, one, b, "");
}

static LLVMValueRef int_divmod(E *e, const wf_inst *in, const wf_type *t, LLVMValueRef a,
                               LLVMValueRef b) {
  LLVMValueRef zero = cint(e, t, 0);
  LLVMValueRef isz = LLVMBuildICmp(e->B, LLVMIntEQ, b, zero, "");
  LLVMValueRef bs = safe_divisor(e, in, t, b);
  LLVMValueRef r;
  if (!t->is_signed) {
    r = in->op == WF_OP_MOD ? LLVMBuildURem(e->B, a, bs, "") : LLVMBuildUDiv(e->B, a, bs, "");
    return LLVMBuildSelect(e->B, isz, zero, r, "");
  }
  LLVMValueRef m1 = LLVMBuildICmp(e->B, LLVMIntEQ, b, cint(e, t, -1), "");
  LLVMValueRef rem = LLVMBuildSRem(e->B, a, bs, ""); /* bs = 1 when b = -1: rem 0 */
  /* Lua floor semantics: adjust when the remainder's sign differs from b's */
  LLVMValueRef adj =
      LLVMBuildAnd(e->B, LLVMBuildICmp(e->B, LLVMIntNE, rem, zero, ""),
                   LLVMBuildICmp(e->B, LLVMIntSLT, LLVMBuildXor(e->B, rem, b, ""), zero, ""), "");
  if (in->op == WF_OP_MOD) {
    r = LLVMBuildSelect(e->B, adj, LLVMBuildAdd(e->B, rem, b, ""), rem, "");
  } else {
    LLVMValueRef q = LLVMBuildSDiv(e->B, a, bs, "");
    q = LLVMBuildSelect(e->B, m1, LLVMBuildSub(e->B, zero, a, ""), q, "");
    if (in->op == WF_OP_FLOORDIV)
      q = LLVMBuildSelect(e->B, adj, LLVMBuildSub(e->B, q, cint(e, t, 1), ""), q, "");
    r = q;
  }
  return LLVMBuildSelect(e->B, isz, zero, r, "");
}

static LLVMValueRef fcmp_or_icmp(E *e, const wf_type *t, wf_op op, LLVMValueRef a, LLVMValueRef b) {
  if (t->kind == WF_T_FLOAT) {
    static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                           LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
    return LLVMBuildFCmp(e->B, fp[op - WF_OP_EQ], a, b, "");
  }
  int sgn = t->kind == WF_T_INT && t->is_signed;
  static const LLVMIntPredicate sp[] = {LLVMIntEQ,  LLVMIntNE,  LLVMIntSLT,
                                        LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
  static const LLVMIntPredicate up[] = {LLVMIntEQ,  LLVMIntNE,  LLVMIntULT,
                                        LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
  return LLVMBuildICmp(e->B, (sgn ? sp : up)[op - WF_OP_EQ], a, b, "");
}

/* Comparison of any two values of one type; aggregates compare all their
** components (EQ: all equal, NE: any differs). */
static LLVMValueRef compare(E *e, const wf_inst *in, const wf_type *t, wf_op op, LLVMValueRef a,
                            LLVMValueRef b) {
  if (wf_t_is_scalar(t) || t->kind == WF_T_RNG) return fcmp_or_icmp(e, t, op, a, b);
  int n = wf_t_arity(t);
  if (n == 0 || (op != WF_OP_EQ && op != WF_OP_NE)) {
    efail(e, in, "cannot compare values of type %s", t->name ? t->name : "?");
    return LLVMConstInt(e->i1, 0, 0);
  }
  LLVMValueRef acc = LLVMConstInt(e->i1, 1, 0);
  for (int i = 0; i < n; i++) {
    const wf_type *ct = wf_t_component(e->T, t, i);
    LLVMValueRef x = LLVMBuildExtractValue(e->B, a, (unsigned)i, "");
    LLVMValueRef y = LLVMBuildExtractValue(e->B, b, (unsigned)i, "");
    acc = LLVMBuildAnd(e->B, acc, compare(e, in, ct, WF_OP_EQ, x, y), "");
  }
  return op == WF_OP_EQ ? acc : LLVMBuildNot(e->B, acc, "");
}

/* Conversion between scalar types (aggregates: component by component). */
static LLVMValueRef cast(E *e, const wf_inst *in, LLVMValueRef v, const wf_type *from,
                         const wf_type *to) {
  if (from == to) return v;
  if (from->kind == WF_T_RNG) from = wf_t_int(e->T, 32, 0);
  if (to->kind == WF_T_RNG) to = wf_t_int(e->T, 32, 0);
  if (from == to) return v;
  LLVMTypeRef lt = ltype(e, to);
  if (!wf_t_is_scalar(from) || !wf_t_is_scalar(to)) {
    int n = wf_t_arity(from);
    if (n == 0 || n != wf_t_arity(to) || from->kind != to->kind) {
      efail(e, in, "cannot convert %s to %s", from->name ? from->name : "?",
            to->name ? to->name : "?");
      return LLVMGetUndef(lt);
    }
    LLVMValueRef r = LLVMGetUndef(lt);
    for (int i = 0; i < n; i++) {
      LLVMValueRef c = cast(e, in, LLVMBuildExtractValue(e->B, v, (unsigned)i, ""),
                            wf_t_component(e->T, from, i), wf_t_component(e->T, to, i));
      r = LLVMBuildInsertValue(e->B, r, c, (unsigned)i, "");
    }
    return r;
  }
  LLVMBuilderRef B = e->B;
  if (to->kind == WF_T_BOOL) {
    if (from->kind == WF_T_FLOAT)
      return LLVMBuildFCmp(B, LLVMRealUNE, v, LLVMConstReal(LLVMTypeOf(v), 0), "");
    return LLVMBuildICmp(B, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
  }
  if (from->kind == WF_T_BOOL)
    return to->kind == WF_T_FLOAT ? LLVMBuildUIToFP(B, v, lt, "") : LLVMBuildZExt(B, v, lt, "");
  if (from->kind == WF_T_INT && to->kind == WF_T_INT) {
    if (to->bits < from->bits) return LLVMBuildTrunc(B, v, lt, "");
    if (to->bits == from->bits) return v;
    return from->is_signed ? LLVMBuildSExt(B, v, lt, "") : LLVMBuildZExt(B, v, lt, "");
  }
  if (from->kind == WF_T_INT)
    return from->is_signed ? LLVMBuildSIToFP(B, v, lt, "") : LLVMBuildUIToFP(B, v, lt, "");
  if (to->kind == WF_T_INT) {
    /* saturating: out-of-range floats clamp, NaN gives 0 (no poison) */
    LLVMTypeRef ov[2] = {lt, LLVMTypeOf(v)};
    return intr(e, to->is_signed ? "llvm.fptosi.sat" : "llvm.fptoui.sat", ov, 2, &v, 1);
  }
  if (to->bits > from->bits) return LLVMBuildFPExt(B, v, lt, "");
  return LLVMBuildFPTrunc(B, v, lt, "");
}

static LLVMValueRef unary(E *e, const wf_inst *in, const wf_type *t, LLVMValueRef a) {
  LLVMBuilderRef B = e->B;
  wf_op op = in->op;
  if (t->kind == WF_T_INT) {
    LLVMValueRef zero = cint(e, t, 0);
    switch (op) {
    case WF_OP_NEG: return LLVMBuildSub(B, zero, a, "");
    case WF_OP_ABS:
      if (!t->is_signed) return a;
      return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, a, zero, ""),
                             LLVMBuildSub(B, zero, a, ""), a, "");
    case WF_OP_BNOT: return LLVMBuildNot(B, a, "");
    default: break;
    }
    if (wf_op_flags(op) & WF_OPF_INTID) return a;
    efail(e, in, "operation '%s' is not defined on integers", wf_op_name(op));
    return a;
  }
  if (t->kind == WF_T_BOOL) {
    if (op == WF_OP_NOT || op == WF_OP_BNOT) return LLVMBuildNot(B, a, "");
    efail(e, in, "operation '%s' is not defined on bool", wf_op_name(op));
    return a;
  }
  if (t->kind != WF_T_FLOAT) {
    efail(e, in, "operation '%s' needs a scalar operand", wf_op_name(op));
    return a;
  }
  switch (op) {
  case WF_OP_NEG: return LLVMBuildFNeg(B, a, "");
  case WF_OP_ABS: return intr1(e, "llvm.fabs", a);
  default: break;
  }
  if (wf_opinfo_tab[op].libm) return math_fn(e, op, t, a, NULL);
  efail(e, in, "operation '%s' is not defined on floats", wf_op_name(op));
  return a;
}

static LLVMValueRef binary(E *e, const wf_inst *in, const wf_type *t, LLVMValueRef a,
                           LLVMValueRef b) {
  LLVMBuilderRef B = e->B;
  wf_op op = in->op;
  if (t->kind == WF_T_FLOAT) {
    switch (op) {
    case WF_OP_ADD: return LLVMBuildFAdd(B, a, b, "");
    case WF_OP_SUB: return LLVMBuildFSub(B, a, b, "");
    case WF_OP_MUL: return LLVMBuildFMul(B, a, b, "");
    case WF_OP_DIV: return LLVMBuildFDiv(B, a, b, "");
    case WF_OP_MOD: {
      /* LuaJIT's a % b = a - floor(a / b) * b */
      LLVMValueRef q = intr1(e, "llvm.floor", LLVMBuildFDiv(B, a, b, ""));
      return LLVMBuildFSub(B, a, LLVMBuildFMul(B, q, b, ""), "");
    }
    case WF_OP_FLOORDIV: return intr1(e, "llvm.floor", LLVMBuildFDiv(B, a, b, ""));
    case WF_OP_MIN: return minmax(e, 0, a, b);
    case WF_OP_MAX: return minmax(e, 1, a, b);
    default:
      if (wf_opinfo_tab[op].libm) return math_fn(e, op, t, a, b);
      break;
    }
  } else if (t->kind == WF_T_INT || t->kind == WF_T_RNG) {
    if (t->kind == WF_T_RNG) t = wf_t_int(e->T, 32, 0);
    int sg = t->is_signed;
    if (LLVMTypeOf(b) != LLVMTypeOf(a) && (op == WF_OP_SHL || op == WF_OP_SHR))
      b = LLVMBuildIntCast2(B, b, LLVMTypeOf(a), 0, "");
    switch (op) {
    case WF_OP_ADD: return LLVMBuildAdd(B, a, b, "");
    case WF_OP_SUB: return LLVMBuildSub(B, a, b, "");
    case WF_OP_MUL: return LLVMBuildMul(B, a, b, "");
    case WF_OP_DIV:
    case WF_OP_MOD:
    case WF_OP_FLOORDIV: return int_divmod(e, in, t, a, b);
    case WF_OP_MIN:
      return LLVMBuildSelect(B, LLVMBuildICmp(B, sg ? LLVMIntSLT : LLVMIntULT, a, b, ""), a, b, "");
    case WF_OP_MAX:
      return LLVMBuildSelect(B, LLVMBuildICmp(B, sg ? LLVMIntSGT : LLVMIntUGT, a, b, ""), a, b, "");
    case WF_OP_BAND: return LLVMBuildAnd(B, a, b, "");
    case WF_OP_BOR: return LLVMBuildOr(B, a, b, "");
    case WF_OP_BXOR: return LLVMBuildXor(B, a, b, "");
    case WF_OP_SHL:
    case WF_OP_SHR: {
      LLVMValueRef amt = LLVMBuildAnd(B, b, cint(e, t, t->bits - 1), "");
      if (op == WF_OP_SHL) return LLVMBuildShl(B, a, amt, "");
      return sg ? LLVMBuildAShr(B, a, amt, "") : LLVMBuildLShr(B, a, amt, "");
    }
    default: break;
    }
  } else if (t->kind == WF_T_BOOL) {
    switch (op) {
    case WF_OP_BAND: return LLVMBuildAnd(B, a, b, "");
    case WF_OP_BOR: return LLVMBuildOr(B, a, b, "");
    case WF_OP_BXOR: return LLVMBuildXor(B, a, b, "");
    default: break;
    }
  }
  efail(e, in, "operation '%s' is not defined on %s", wf_op_name(op),
        t->name ? t->name : "this type");
  return a;
}

/* ---------------------------------------------------------------------
** memory: C layout loads and stores, arrays, atomics
** --------------------------------------------------------------------- */
LLVMValueRef mload(E *e, const wf_type *t, LLVMValueRef p) {
  LLVMBuilderRef B = e->B;
  switch (t->kind) {
  case WF_T_BOOL: {
    LLVMValueRef l = LLVMBuildLoad2(B, e->i8, p, "");
    LLVMSetAlignment(l, 1);
    return LLVMBuildICmp(B, LLVMIntNE, l, LLVMConstInt(e->i8, 0, 0), "");
  }
  case WF_T_INT:
  case WF_T_FLOAT:
  case WF_T_RNG: {
    LLVMValueRef l = LLVMBuildLoad2(B, ltype(e, t), p, "");
    LLVMSetAlignment(l, t->align ? t->align : 1);
    return l;
  }
  case WF_T_ARRAY: /* a struct's array field: the header's first bytes, in place */
    return header_value(e, p, t->ndim);
  default: break;
  }
  int n = wf_t_arity(t);
  LLVMValueRef r = LLVMGetUndef(ltype(e, t));
  uint32_t off = 0;
  for (int i = 0; i < n; i++) {
    const wf_type *ct = wf_t_component(e->T, t, i);
    if (t->kind == WF_T_STRUCT) off = t->fields[i].offset;
    LLVMValueRef c = mload(e, ct, off ? gep8(e, p, ci64(e, off)) : p);
    r = LLVMBuildInsertValue(B, r, c, (unsigned)i, "");
    off += ct->size;
  }
  return r;
}

static void mstore(E *e, const wf_inst *in, const wf_type *t, LLVMValueRef p, LLVMValueRef v) {
  LLVMBuilderRef B = e->B;
  switch (t->kind) {
  case WF_T_BOOL: {
    LLVMValueRef s = LLVMBuildStore(B, LLVMBuildZExt(B, v, e->i8, ""), p);
    LLVMSetAlignment(s, 1);
    return;
  }
  case WF_T_INT:
  case WF_T_FLOAT:
  case WF_T_RNG: {
    LLVMValueRef s = LLVMBuildStore(B, v, p);
    LLVMSetAlignment(s, t->align ? t->align : 1);
    return;
  }
  case WF_T_ARRAY: efail(e, in, "cannot store an array into memory"); return;
  default: break;
  }
  int n = wf_t_arity(t);
  uint32_t off = 0;
  for (int i = 0; i < n; i++) {
    const wf_type *ct = wf_t_component(e->T, t, i);
    if (t->kind == WF_T_STRUCT) off = t->fields[i].offset;
    mstore(e, in, ct, off ? gep8(e, p, ci64(e, off)) : p,
           LLVMBuildExtractValue(B, v, (unsigned)i, ""));
    off += ct->size;
  }
}

/* For src/cpu/native.c: a value stored in its C layout. */
void wf_cpu_mstore(E *e, const wf_inst *in, const wf_type *t, LLVMValueRef p, LLVMValueRef v) {
  mstore(e, in, t, p, v);
}

/* The array value {data, shape, strides} of a wf_array header pointer. */
LLVMValueRef header_value(E *e, LLVMValueRef hdr, int nd) {
  LLVMBuilderRef B = e->B;
  LLVMValueRef r = LLVMGetUndef(arr_ltype(e, nd));
  LLVMValueRef data = LLVMBuildLoad2(B, e->ptr, hdr, "data");
  LLVMSetAlignment(data, 8);
  r = LLVMBuildInsertValue(B, r, data, 0, "");
  LLVMValueRef sh = LLVMGetUndef(LLVMArrayType(e->i64, (unsigned)nd));
  LLVMValueRef st = sh;
  for (int k = 0; k < nd; k++) {
    LLVMValueRef a =
        LLVMBuildLoad2(B, e->i64, gep8(e, hdr, ci64(e, WF_HDR_SHAPE + 8 * k)), "shape");
    LLVMValueRef s =
        LLVMBuildLoad2(B, e->i64, gep8(e, hdr, ci64(e, WF_HDR_STRIDES + 8 * k)), "stride");
    LLVMSetAlignment(a, 8);
    LLVMSetAlignment(s, 8);
    sh = LLVMBuildInsertValue(B, sh, a, (unsigned)k, "");
    st = LLVMBuildInsertValue(B, st, s, (unsigned)k, "");
  }
  r = LLVMBuildInsertValue(B, r, sh, 1, "");
  return LLVMBuildInsertValue(B, r, st, 2, "");
}

LLVMValueRef arr_get(E *e, LLVMValueRef a, unsigned field, int k) {
  LLVMValueRef x = LLVMBuildExtractValue(e->B, a, field, "");
  return k < 0 ? x : LLVMBuildExtractValue(e->B, x, (unsigned)k, "");
}

static const char *arr_name(E *e, wf_val v) {
  int p = e->aname[v];
  if (p >= 0 && p < e->o->nnames && e->o->names && e->o->names[p]) return e->o->names[p];
  return "?";
}

/* Index value as i64 (sign- or zero-extended by its type). */
static LLVMValueRef index64(E *e, const wf_inst *in, wf_val iv) {
  const wf_type *t = wf_vtype(e->fn, iv);
  LLVMValueRef x = e->v[iv];
  if (!t || t->kind != WF_T_INT) {
    efail(e, in, "array index must be an integer, got %s", t && t->name ? t->name : "?");
    return ci64(e, 0);
  }
  if (t->bits == 64) return x;
  return t->is_signed ? LLVMBuildSExt(e->B, x, e->i64, "") : LLVMBuildZExt(e->B, x, e->i64, "");
}

/* The name of array value v for messages: a parameter's name, or the path
** of a struct field ("s.state.x") when v was taken from a parameter. */
static const char *arr_path(E *e, wf_val v, char *buf, size_t n) {
  const char *p =
      e->aname[v] >= 0 ? NULL : wf_ir_value_path(e->fn, v, e->o->names, e->o->nnames, buf, n);
  return p ? p : arr_name(e, v);
}

/* The out-of-bounds message (index i on axis `axis` of the root array of
** arr, whose extent is size), then exit; in the current (cold) block. */
static void oob_fail(E *e, const wf_inst *in, wf_val arr, LLVMValueRef i, LLVMValueRef size,
                     int axis) {
  LLVMTypeRef pt[7] = {e->ptr, e->ptr, e->i64, e->i32, e->i64, e->ptr, e->ptr};
  char path[256];
  LLVMValueRef args[7] = {
      e->ctx,
      where_str(e, in),
      i,
      ci32(e, axis),
      size,
      LLVMBuildGlobalStringPtr(e->B, arr_path(e, arr, path, sizeof path), "arr"),
      LLVMBuildGlobalStringPtr(e->B, e->fn->name ? e->fn->name : "?", "kern")};
  call_ext(e, "wf_cpu_rt_oob", e->vd, pt, 7, args);
}

/* 0 <= i < size (one unsigned compare), else the out-of-bounds message and
** exit. Index k of the access `in` is skipped when a CHECK of
** wf_pass_bounds covers it (release mode; debug mode checks everything). */
static void bounds_check(E *e, const wf_inst *in, wf_val arr, LLVMValueRef i, LLVMValueRef size,
                         int axis, int k) {
  if (!e->o->debug && (!e->o->checks || ((in->imm >> k) & 1))) return;
  LLVMValueRef ok = LLVMBuildICmp(e->B, LLVMIntULT, i, size, "inb");
  LLVMBasicBlockRef good = begin_check(e, ok);
  oob_fail(e, in, arr, i, size, axis);
  end_check(e, good);
}

/* A CHECK of wf_pass_bounds (see ir.h): the whole range of indices of a
** launch (all threads) or of a unit-step loop, checked at once. dims: the
** launch dims (launch checks only). i32 indices must also stay below 2^31
** (the kernel computes tid + offset in 32 bits). */
void range_check(E *e, const wf_inst *in, const LLVMValueRef *dims, int nd) {
  LLVMBuilderRef B = e->B;
  wf_val arr = in->args[0];
  int axis = wf_check_axis(in->imm);
  int64_t off = wf_check_offset(in->imm);
  LLVMValueRef size = arr_get(e, e->v[arr], 1, axis), co = ci64(e, off);
  LLVMValueRef first, last, runs = NULL;
  int down = (in->imm & WF_CHECK_DOWN) != 0, narrow;
  if (in->imm & WF_CHECK_LAUNCH) {
    const wf_inst *t = e->fn->vals[in->args[1]].def;
    int d = t && t->op == WF_OP_TID ? (int)t->imm : 0;
    LLVMValueRef dim = d >= 0 && d < nd && dims ? dims[d] : ci64(e, 1);
    first = co;
    last = LLVMBuildAdd(B, LLVMBuildSub(B, dim, ci64(e, 1), ""), co, "");
    narrow = 1;
  } else {
    const wf_type *it = wf_vtype(e->fn, in->args[1]);
    first = LLVMBuildAdd(B, index64(e, in, in->args[1]), co, "");
    last = LLVMBuildAdd(B, index64(e, in, in->args[2]), co, "");
    runs = LLVMBuildICmp(B, down ? LLVMIntSGE : LLVMIntSLE, first, last, "runs");
    narrow = it && it->kind == WF_T_INT && it->bits < 64;
  }
  LLVMValueRef lo = down ? last : first, hi = down ? first : last;
  LLVMValueRef bad = LLVMBuildOr(B, LLVMBuildICmp(B, LLVMIntSLT, lo, ci64(e, 0), ""),
                                 LLVMBuildICmp(B, LLVMIntSGE, hi, size, ""), "");
  if (narrow)
    bad = LLVMBuildOr(B, bad, LLVMBuildICmp(B, LLVMIntSGT, hi, ci64(e, INT32_MAX), ""), "");
  if (runs) bad = LLVMBuildAnd(B, runs, bad, "");
  LLVMBasicBlockRef good = begin_check(e, LLVMBuildNot(B, bad, ""));
  /* the first index out of bounds in the order the threads / iterations
  ** would reach it: going up, first itself or the extent; going down,
  ** first itself or -1 */
  LLVMValueRef firstbad = LLVMBuildOr(B, LLVMBuildICmp(B, LLVMIntSLT, first, ci64(e, 0), ""),
                                      LLVMBuildICmp(B, LLVMIntSGE, first, size, ""), "");
  LLVMValueRef idx = LLVMBuildSelect(B, firstbad, first, down ? ci64(e, -1) : size, "");
  oob_fail(e, in, arr, idx, size, e->adepth[arr] + axis);
  end_check(e, good);
}

/* Address of element [idx...] of array value arr (args[0] of in). */
static LLVMValueRef elem_addr(E *e, const wf_inst *in, int nidx) {
  wf_val av = in->args[0];
  const wf_type *at = wf_vtype(e->fn, av);
  if (!at || at->kind != WF_T_ARRAY) {
    efail(e, in, "'%s' needs an array operand", wf_op_name(in->op));
    return LLVMConstNull(e->ptr);
  }
  if (nidx != at->ndim) {
    efail(e, in, "array of %d dimensions indexed with %d indices", at->ndim, nidx);
    return LLVMConstNull(e->ptr);
  }
  LLVMValueRef a = e->v[av];
  LLVMValueRef off = NULL;
  for (int k = 0; k < nidx; k++) {
    LLVMValueRef i = index64(e, in, in->args[1 + k]);
    bounds_check(e, in, av, i, arr_get(e, a, 1, k), e->adepth[av] + k, k);
    LLVMValueRef s = arr_get(e, a, 2, k);
    LLVMValueRef term = LLVMBuildNSWMul(e->B, i, s, "");
    off = off ? LLVMBuildNSWAdd(e->B, off, term, "") : term;
  }
  LLVMValueRef data = arr_get(e, a, 0, -1);
  return off ? gep8(e, data, off) : data;
}

static LLVMValueRef atomic_scalar(E *e, const wf_inst *in, const wf_type *t, LLVMValueRef p,
                                  LLVMValueRef v) {
  LLVMAtomicRMWBinOp op;
  int isf = t->kind == WF_T_FLOAT;
  if (t->kind != WF_T_FLOAT && t->kind != WF_T_INT) {
    efail(e, in, "atomics need numeric elements, got %s", t->name ? t->name : "?");
    return v;
  }
  switch (in->op) {
  case WF_OP_ATOMIC_ADD: op = isf ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd; break;
  case WF_OP_ATOMIC_MIN:
    op = isf            ? LLVMAtomicRMWBinOpFMin
         : t->is_signed ? LLVMAtomicRMWBinOpMin
                        : LLVMAtomicRMWBinOpUMin;
    break;
  case WF_OP_ATOMIC_EXCH: op = LLVMAtomicRMWBinOpXchg; break;
  case WF_OP_ATOMIC_AND: op = LLVMAtomicRMWBinOpAnd; break;
  case WF_OP_ATOMIC_OR: op = LLVMAtomicRMWBinOpOr; break;
  case WF_OP_ATOMIC_XOR: op = LLVMAtomicRMWBinOpXor; break;
  case WF_OP_ATOMIC_CAS: {
    /* v = (compare, new); floats compare and swap their bits */
    LLVMTypeRef it = LLVMIntTypeInContext(e->C, t->bits);
    LLVMValueRef cmp = LLVMBuildExtractValue(e->B, v, 0, "");
    LLVMValueRef nv = LLVMBuildExtractValue(e->B, v, 1, "");
    if (isf) {
      cmp = LLVMBuildBitCast(e->B, cmp, it, "");
      nv = LLVMBuildBitCast(e->B, nv, it, "");
    }
    LLVMValueRef x = LLVMBuildAtomicCmpXchg(e->B, p, cmp, nv, LLVMAtomicOrderingMonotonic,
                                            LLVMAtomicOrderingMonotonic, 0);
    LLVMSetAlignment(x, t->align);
    LLVMValueRef old = LLVMBuildExtractValue(e->B, x, 0, "");
    return isf ? LLVMBuildBitCast(e->B, old, ltype(e, t), "") : old;
  }
  default:
    op = isf            ? LLVMAtomicRMWBinOpFMax
         : t->is_signed ? LLVMAtomicRMWBinOpMax
                        : LLVMAtomicRMWBinOpUMax;
    break;
  }
  LLVMValueRef r = LLVMBuildAtomicRMW(e->B, op, p, v, LLVMAtomicOrderingMonotonic, 0);
  LLVMSetAlignment(r, t->align);
  return r;
}

/* Atomics on aggregates act on each scalar component (as in Warp). */
static LLVMValueRef atomic_any(E *e, const wf_inst *in, const wf_type *t, LLVMValueRef p,
                               LLVMValueRef v) {
  if (wf_t_is_scalar(t)) return atomic_scalar(e, in, t, p, v);
  int n = wf_t_arity(t);
  LLVMValueRef r = LLVMGetUndef(ltype(e, t));
  uint32_t off = 0;
  for (int i = 0; i < n; i++) {
    const wf_type *ct = wf_t_component(e->T, t, i);
    if (t->kind == WF_T_STRUCT) off = t->fields[i].offset;
    LLVMValueRef c = atomic_any(e, in, ct, off ? gep8(e, p, ci64(e, off)) : p,
                                LLVMBuildExtractValue(e->B, v, (unsigned)i, ""));
    r = LLVMBuildInsertValue(e->B, r, c, (unsigned)i, "");
    off += ct->size;
  }
  return r;
}

/* body.p: the parameter an atomic_add updates when it is a privatized
** one (the chunk owns a private copy of it), else -1. */
static int priv_target(E *e, const wf_inst *in) {
  if (in->op != WF_OP_ATOMIC_ADD || !e->priv) return -1;
  for (int i = 0; i < e->fn->nparams; i++)
    if (e->priv[i] && e->fn->params[i] == in->args[0]) return i;
  return -1;
}

/* A non-atomic `*p += v` on each float leaf (private copies only);
** returns the old value, like the atomic. */
static LLVMValueRef plain_add(E *e, const wf_type *t, LLVMValueRef p, LLVMValueRef v) {
  LLVMValueRef old = mload(e, t, p);
  if (wf_t_is_scalar(t)) {
    mstore(e, NULL, t, p, LLVMBuildFAdd(e->B, old, v, ""));
    return old;
  }
  int n = wf_t_arity(t);
  uint32_t off = 0;
  for (int i = 0; i < n; i++) {
    const wf_type *ct = wf_t_component(e->T, t, i);
    plain_add(e, ct, off ? gep8(e, p, ci64(e, off)) : p,
              LLVMBuildExtractValue(e->B, v, (unsigned)i, ""));
    off += ct->size;
  }
  return old;
}

static LLVMValueRef view(E *e, const wf_inst *in) {
  wf_val av = in->args[0];
  const wf_type *at = wf_vtype(e->fn, av);
  const wf_type *rt = wf_vtype(e->fn, in->res[0]);
  if (!at || at->kind != WF_T_ARRAY || at->ndim < 2 || !rt || rt->kind != WF_T_ARRAY) {
    efail(e, in, "view needs an array of 2 or more dimensions");
    return LLVMGetUndef(ltype(e, rt));
  }
  LLVMValueRef a = e->v[av];
  LLVMValueRef i = index64(e, in, in->args[1]);
  bounds_check(e, in, av, i, arr_get(e, a, 1, 0), e->adepth[av], 0);
  LLVMValueRef data =
      gep8(e, arr_get(e, a, 0, -1), LLVMBuildNSWMul(e->B, i, arr_get(e, a, 2, 0), ""));
  int nd = rt->ndim;
  LLVMValueRef r = LLVMGetUndef(arr_ltype(e, nd));
  r = LLVMBuildInsertValue(e->B, r, data, 0, "");
  LLVMValueRef sh = LLVMGetUndef(LLVMArrayType(e->i64, (unsigned)nd)), st = sh;
  for (int k = 0; k < nd; k++) {
    sh = LLVMBuildInsertValue(e->B, sh, arr_get(e, a, 1, k + 1), (unsigned)k, "");
    st = LLVMBuildInsertValue(e->B, st, arr_get(e, a, 2, k + 1), (unsigned)k, "");
  }
  r = LLVMBuildInsertValue(e->B, r, sh, 1, "");
  r = LLVMBuildInsertValue(e->B, r, st, 2, "");
  e->aname[in->res[0]] = e->aname[av];
  e->adepth[in->res[0]] = (int8_t)(e->adepth[av] + 1);
  return r;
}

/* ---------------------------------------------------------------------
** random numbers and printing
** --------------------------------------------------------------------- */
static LLVMValueRef pcg(E *e, LLVMValueRef x) {
  LLVMBuilderRef B = e->B;
  LLVMValueRef b = LLVMBuildAdd(B, LLVMBuildMul(B, x, ci32(e, 747796405), ""),
                                LLVMConstInt(e->i32, 2891336453u, 0), "");
  LLVMValueRef sh = LLVMBuildAdd(B, LLVMBuildLShr(B, b, ci32(e, 28), ""), ci32(e, 4), "");
  LLVMValueRef c =
      LLVMBuildMul(B, LLVMBuildXor(B, LLVMBuildLShr(B, b, sh, ""), b, ""), ci32(e, 277803737), "");
  return LLVMBuildXor(B, LLVMBuildLShr(B, c, ci32(e, 22), ""), c, "");
}

/* Any integer-ish value as i32 (seeds and offsets). */
static LLVMValueRef as_i32(E *e, wf_val v) {
  LLVMValueRef x = e->v[v];
  LLVMTypeRef t = LLVMTypeOf(x);
  if (t == e->i32) return x;
  if (LLVMGetTypeKind(t) == LLVMIntegerTypeKind) return LLVMBuildIntCast2(e->B, x, e->i32, 0, "");
  return LLVMBuildFPToSI(e->B, x, e->i32, "");
}

static void emit_print(E *e, const wf_inst *in) {
  int n = in->nargs;
  char kinds[256];
  if (n > 255) n = 255;
  LLVMValueRef slots = NULL;
  if (n > 0) slots = wf_cpu_entry_alloca(e, e->i64, ci32(e, n), "print.slots");
  for (int i = 0; i < n; i++) {
    const wf_type *t = wf_vtype(e->fn, in->args[i]);
    LLVMValueRef x = e->v[in->args[i]], s;
    if (t && t->kind == WF_T_FLOAT) {
      kinds[i] = 'f';
      s = LLVMBuildBitCast(e->B, t->bits == 64 ? x : LLVMBuildFPExt(e->B, x, e->f64, ""), e->i64,
                           "");
    } else if (t && t->kind == WF_T_BOOL) {
      kinds[i] = 'b';
      s = LLVMBuildZExt(e->B, x, e->i64, "");
    } else if (t && (t->kind == WF_T_INT || t->kind == WF_T_RNG)) {
      int sg = t->kind == WF_T_INT && t->is_signed;
      kinds[i] = sg ? 'i' : 'u';
      s = t->kind == WF_T_INT && t->bits == 64 ? x
          : sg                                 ? LLVMBuildSExt(e->B, x, e->i64, "")
                                               : LLVMBuildZExt(e->B, x, e->i64, "");
    } else {
      efail(e, in, "print takes scalar values, got %s", t && t->name ? t->name : "?");
      return;
    }
    LLVMValueRef idx = ci64(e, i);
    LLVMBuildStore(e->B, s, LLVMBuildInBoundsGEP2(e->B, e->i64, slots, &idx, 1, ""));
  }
  kinds[n] = '\0';
  if (!e->pline) {
    /* the thread's pending line: made empty in the entry block */
    e->pline = wf_cpu_entry_alloca(e, e->i8, ci32(e, WF_CPU_PLINE_BYTES), "print.line");
    LLVMSetAlignment(e->pline, 8);
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(e->B);
    LLVMPositionBuilderBefore(e->B, LLVMGetNextInstruction(e->pline));
    LLVMBuildStore(e->B, ci32(e, 0), e->pline);
    LLVMPositionBuilderAtEnd(e->B, cur);
  }
  LLVMTypeRef pt[5] = {e->ptr, e->ptr, e->i32, e->ptr, e->ptr};
  LLVMValueRef args[5] = {e->pline, LLVMBuildGlobalStringPtr(e->B, in->str ? in->str : "", "fmt"),
                          ci32(e, n), LLVMBuildGlobalStringPtr(e->B, kinds, "kinds"),
                          slots ? slots : LLVMConstNull(e->ptr)};
  call_ext(e, "wf_cpu_rt_print", e->vd, pt, 5, args);
}

void wf_cpu_print_flush(E *e) {
  LLVMTypeRef pt[1] = {e->ptr};
  call_ext(e, "wf_cpu_rt_print_flush", e->vd, pt, 1, &e->pline);
}

/* ---------------------------------------------------------------------
** phis of aggregates: SROA does not split first-class aggregates carried
** through phis, so every phi here is made per scalar leaf and the
** aggregate is rebuilt after the phis (instcombine folds the extracts).
** --------------------------------------------------------------------- */
static int is_agg_type(LLVMTypeRef t) {
  LLVMTypeKind k = LLVMGetTypeKind(t);
  return k == LLVMArrayTypeKind || k == LLVMStructTypeKind;
}

static unsigned agg_len(LLVMTypeRef t) {
  return LLVMGetTypeKind(t) == LLVMArrayTypeKind ? LLVMGetArrayLength(t)
                                                 : LLVMCountStructElementTypes(t);
}

static LLVMTypeRef agg_elem(LLVMTypeRef t, unsigned i) {
  return LLVMGetTypeKind(t) == LLVMArrayTypeKind ? LLVMGetElementType(t)
                                                 : LLVMStructGetTypeAtIndex(t, i);
}

static int leaf_count(LLVMTypeRef t) {
  if (!is_agg_type(t)) return 1;
  int n = 0;
  for (unsigned i = 0; i < agg_len(t); i++)
    n += leaf_count(agg_elem(t, i));
  return n;
}

/* The scalar leaves of v (extractvalues at the builder's position). */
static void flatten(E *e, LLVMValueRef v, LLVMValueRef *out, int *n) {
  LLVMTypeRef t = LLVMTypeOf(v);
  if (!is_agg_type(t)) {
    out[(*n)++] = v;
    return;
  }
  for (unsigned i = 0; i < agg_len(t); i++)
    flatten(e, LLVMBuildExtractValue(e->B, v, i, ""), out, n);
}

static void leaf_phis(E *e, LLVMTypeRef t, LLVMValueRef *out, int *n) {
  if (!is_agg_type(t)) {
    out[(*n)++] = LLVMBuildPhi(e->B, t, "");
    return;
  }
  for (unsigned i = 0; i < agg_len(t); i++)
    leaf_phis(e, agg_elem(t, i), out, n);
}

static LLVMValueRef rebuild(E *e, LLVMTypeRef t, LLVMValueRef *leaves, int *n) {
  if (!is_agg_type(t)) return leaves[(*n)++];
  LLVMValueRef r = LLVMGetUndef(t);
  for (unsigned i = 0; i < agg_len(t); i++)
    r = LLVMBuildInsertValue(e->B, r, rebuild(e, agg_elem(t, i), leaves, n), i, "");
  return r;
}

/* A set of values of given types carried into a join block by phis. */
typedef struct phiset {
  int nv, nleaves;
  LLVMTypeRef *types;
  LLVMValueRef *phis;    /* nleaves */
  LLVMValueRef *scratch; /* nleaves */
} phiset;

static int phiset_init(E *e, phiset *ps, int nv, LLVMTypeRef *types) {
  ps->nv = nv;
  ps->types = types;
  ps->nleaves = 0;
  for (int i = 0; i < nv; i++)
    ps->nleaves += leaf_count(types[i]);
  ps->phis = malloc(sizeof(LLVMValueRef) * (size_t)(ps->nleaves + 1));
  ps->scratch = malloc(sizeof(LLVMValueRef) * (size_t)(ps->nleaves + 1));
  if (!ps->phis || !ps->scratch) {
    free(ps->phis), free(ps->scratch);
    efail(e, NULL, "out of memory");
    return -1;
  }
  return 0;
}

static void phiset_free(phiset *ps) {
  free(ps->phis), free(ps->scratch);
}

/* Create the leaf phis at the builder (the top of the join block). */
static void phiset_phis(E *e, phiset *ps) {
  int n = 0;
  for (int i = 0; i < ps->nv; i++)
    leaf_phis(e, ps->types[i], ps->phis, &n);
}

/* The rebuilt values (after all phis of the block). */
static void phiset_values(E *e, phiset *ps, LLVMValueRef *out) {
  int n = 0;
  for (int i = 0; i < ps->nv; i++)
    out[i] = rebuild(e, ps->types[i], ps->phis, &n);
}

/* Branch from the current block into `target` carrying vals: the leaves
** are taken before the branch, then the phis are made at the top of
** target (the builder ends there) with their first incoming edge. */
static void phiset_enter(E *e, phiset *ps, LLVMValueRef *vals, LLVMBasicBlockRef target) {
  int n = 0;
  for (int i = 0; i < ps->nv; i++)
    flatten(e, vals[i], ps->scratch, &n);
  LLVMBasicBlockRef bb = LLVMGetInsertBlock(e->B);
  LLVMBuildBr(e->B, target);
  LLVMPositionBuilderAtEnd(e->B, target);
  phiset_phis(e, ps);
  for (int i = 0; i < n; i++)
    LLVMAddIncoming(ps->phis[i], &ps->scratch[i], &bb, 1);
}

/* Incoming values from the current block (call before its branch). */
static void phiset_incoming(E *e, phiset *ps, LLVMValueRef *vals) {
  int n = 0;
  for (int i = 0; i < ps->nv; i++)
    flatten(e, vals[i], ps->scratch, &n);
  LLVMBasicBlockRef bb = LLVMGetInsertBlock(e->B);
  for (int i = 0; i < n; i++)
    LLVMAddIncoming(ps->phis[i], &ps->scratch[i], &bb, 1);
}

/* ---------------------------------------------------------------------
** instructions and structured control flow
** --------------------------------------------------------------------- */
/* ---------------------------------------------------------------------
** local arrays: a web of versions found by local.c lives in one stack slot
** (e->v of its values is the slot's address), updated in place; other
** aggregates indexed dynamically go through a temporary slot.
** --------------------------------------------------------------------- */
static int homed(E *e, wf_val v) {
  return v >= 0 && e->web && e->web[v] >= 0;
}

/* A stack slot of type t in the entry block. */
static LLVMValueRef entry_alloca(E *e, LLVMTypeRef t) {
  return wf_cpu_entry_alloca(e, t, ci32(e, 1), "local");
}

/* The slots of the body being emitted (the first use in a body clears
** them). */
static LLVMValueRef *body_slots(E *e) {
  if (e->slot_fn != e->F) {
    memset(e->slot, 0, sizeof(LLVMValueRef) * (size_t)(e->fn->nvals > 0 ? e->fn->nvals : 1));
    e->slot_fn = e->F;
  }
  return e->slot;
}

/* The slot of homed value v's web (made on first use). */
static LLVMValueRef web_slot(E *e, wf_val v) {
  LLVMValueRef *slot = body_slots(e);
  int32_t w = e->web[v];
  if (!slot[w]) slot[w] = entry_alloca(e, ltype(e, wf_vtype(e->fn, v)));
  return slot[w];
}

/* The LLVM type carrying value v (a slot's address for a homed one). */
static LLVMTypeRef vltype(E *e, wf_val v) {
  return homed(e, v) ? e->ptr : ltype(e, wf_vtype(e->fn, v));
}

/* Operands that are taken as a slot's address when homed: the aggregate
** of an extract or insert, a loop's initial values. */
static int takes_slot(wf_op op, int i) {
  if (op == WF_OP_WHILE || op == WF_OP_FOR) return 1;
  int agg =
      op == WF_OP_EXTRACT || op == WF_OP_INSERT || op == WF_OP_EXTRACTD || op == WF_OP_INSERTD;
  return i == 0 && agg;
}

static LLVMValueRef argv(E *e, const wf_inst *in, int i) {
  if (i >= in->nargs || in->args[i] < 0) {
    efail(e, in, "'%s' is missing an operand", wf_op_name(in->op));
    return LLVMConstInt(e->i32, 0, 0);
  }
  LLVMValueRef v = e->v[in->args[i]];
  if (!v) {
    efail(e, in, "'%s' uses a value before its definition", wf_op_name(in->op));
    return LLVMGetUndef(ltype(e, wf_vtype(e->fn, in->args[i])));
  }
  if (homed(e, in->args[i]) && !takes_slot(in->op, i))
    return LLVMBuildLoad2(e->B, ltype(e, wf_vtype(e->fn, in->args[i])), v, "");
  return v;
}

static const wf_type *argt(E *e, const wf_inst *in, int i) {
  return i < in->nargs && in->args[i] >= 0 ? wf_vtype(e->fn, in->args[i]) : NULL;
}

/* Values a region block passes on (its terminator's operands from `skip`). */
static void term_values(E *e, const wf_inst *term, int skip, int n, LLVMValueRef *out,
                        const wf_inst *owner) {
  for (int i = 0; i < n; i++) {
    if (!term || skip + i >= term->nargs) {
      efail(e, owner, "'%s' region yields too few values", wf_op_name(owner->op));
      out[i] = LLVMGetUndef(ltype(e, wf_vtype(e->fn, owner->res[i < owner->nres ? i : 0])));
    } else {
      out[i] = e->v[term->args[skip + i]];
    }
  }
}

static void emit_if(E *e, wf_inst *in) {
  LLVMValueRef c = argv(e, in, 0);
  LLVMBasicBlockRef tb = LLVMAppendBasicBlockInContext(e->C, e->F, "then");
  LLVMBasicBlockRef eb = LLVMAppendBasicBlockInContext(e->C, e->F, "else");
  LLVMBasicBlockRef mb = LLVMAppendBasicBlockInContext(e->C, e->F, "endif");
  LLVMBuildCondBr(e->B, c, tb, eb);
  int n = in->nres;
  /* an if carries every local its branches change: any number */
  LLVMValueRef *tv = malloc(sizeof(LLVMValueRef) * 2 * (size_t)(n + 1)), *rv = tv + n + 1;
  LLVMTypeRef *ty = malloc(sizeof(LLVMTypeRef) * (size_t)(n + 1));
  if (!tv || !ty) {
    free(tv), free(ty);
    efail(e, in, "out of memory");
    return;
  }
  for (int i = 0; i < n; i++)
    ty[i] = vltype(e, in->res[i]);
  phiset ps;
  if (phiset_init(e, &ps, n, ty)) {
    free(tv), free(ty);
    return;
  }
  LLVMPositionBuilderAtEnd(e->B, mb);
  phiset_phis(e, &ps);
  LLVMPositionBuilderAtEnd(e->B, tb);
  wf_inst *tt = in->nblocks > 0 ? emit_block(e, in->blocks[0]) : NULL;
  term_values(e, tt, 0, n, tv, in);
  phiset_incoming(e, &ps, tv);
  LLVMBuildBr(e->B, mb);
  LLVMPositionBuilderAtEnd(e->B, eb);
  wf_inst *et = in->nblocks > 1 ? emit_block(e, in->blocks[1]) : NULL;
  term_values(e, et, 0, n, tv, in);
  phiset_incoming(e, &ps, tv);
  LLVMBuildBr(e->B, mb);
  LLVMPositionBuilderAtEnd(e->B, mb);
  phiset_values(e, &ps, rv);
  for (int i = 0; i < n; i++)
    e->v[in->res[i]] = rv[i];
  phiset_free(&ps);
  free(tv), free(ty);
}

/* At a loop back-edge: leave the kernel when weft_interrupt asked. One
** relaxed load of the flag and a branch marked unlikely, so the loop's
** hot path pays a load and a not-taken jump per iteration. */
static void poll_interrupt(E *e, int is_while) {
  if (!e->intr) return;
  e->while_polls += is_while;
  LLVMBasicBlockRef here = LLVMGetInsertBlock(e->B);
  if (!e->intr_bb) {
    e->intr_bb = LLVMAppendBasicBlockInContext(e->C, e->F, "interrupted");
    LLVMPositionBuilderAtEnd(e->B, e->intr_bb);
    LLVMTypeRef pt[1] = {e->ptr};
    LLVMValueRef a[1] = {e->ctx};
    call_ext(e, "wf_cpu_rt_interrupted", e->vd, pt, 1, a);
    LLVMBuildBr(e->B, e->exit_bb);
    LLVMPositionBuilderAtEnd(e->B, here);
  }
  LLVMValueRef f = LLVMBuildLoad2(e->B, e->i32, e->intr, "intr");
  LLVMSetAlignment(f, 4);
  LLVMSetOrdering(f, LLVMAtomicOrderingMonotonic);
  LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(e->C, e->F, "loop.latch");
  LLVMValueRef br =
      LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntNE, f, ci32(e, 0), ""), e->intr_bb, go);
  LLVMMetadataRef w[3] = {LLVMMDStringInContext2(e->C, "branch_weights", 14),
                          LLVMValueAsMetadata(ci32(e, 1)), LLVMValueAsMetadata(ci32(e, 1 << 20))};
  LLVMSetMetadata(br, LLVMGetMDKindIDInContext(e->C, "prof", 4),
                  LLVMMetadataAsValue(e->C, LLVMMDNodeInContext2(e->C, w, 3)));
  LLVMPositionBuilderAtEnd(e->B, go);
}

/* The loop test of a for loop at i: i <= hi for a positive step, i >= hi
** otherwise (Lua's inclusive bounds; an unsigned loop counts up). */
static LLVMValueRef for_in_range(E *e, const wf_type *it, LLVMValueRef i, LLVMValueRef hi,
                                 LLVMValueRef step) {
  if (it && it->kind == WF_T_FLOAT) {
    LLVMValueRef up =
        LLVMBuildFCmp(e->B, LLVMRealOGT, step, LLVMConstReal(LLVMTypeOf(step), 0), "");
    return LLVMBuildSelect(e->B, up, LLVMBuildFCmp(e->B, LLVMRealOLE, i, hi, ""),
                           LLVMBuildFCmp(e->B, LLVMRealOGE, i, hi, ""), "");
  }
  if (it && it->kind == WF_T_INT && !it->is_signed)
    return LLVMBuildICmp(e->B, LLVMIntULE, i, hi, "");
  LLVMValueRef up = LLVMBuildICmp(e->B, LLVMIntSGT, step, LLVMConstInt(LLVMTypeOf(step), 0, 0), "");
  return LLVMBuildSelect(e->B, up, LLVMBuildICmp(e->B, LLVMIntSLE, i, hi, ""),
                         LLVMBuildICmp(e->B, LLVMIntSGE, i, hi, ""), "");
}

/* Integer loops: the counter's value after the last iteration, last +
** step (wrapping). last = lo + (hi - lo) / step * step, in unsigned
** arithmetic (the span fits: lo <= hi when the loop runs; down loops
** mirrored). The latch leaves when i + step == stop, so a loop ending at
** the type's limit stops instead of wrapping around, and a unit-step
** loop keeps the shape LLVM's vectorizers read (i.next != hi + 1). The
** step is not zero here (for_step_check). */
static LLVMValueRef for_int_stop(E *e, const wf_type *it, LLVMValueRef lo, LLVMValueRef hi,
                                 LLVMValueRef step) {
  LLVMBuilderRef B = e->B;
  if (it && !it->is_signed) {
    LLVMValueRef q = LLVMBuildUDiv(B, LLVMBuildSub(B, hi, lo, ""), step, "");
    return LLVMBuildAdd(B, LLVMBuildAdd(B, lo, LLVMBuildMul(B, q, step, ""), ""), step, "");
  }
  LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(step));
  LLVMValueRef up = LLVMBuildICmp(B, LLVMIntSGT, step, zero, "");
  LLVMValueRef mag = LLVMBuildSelect(B, up, step, LLVMBuildSub(B, zero, step, ""), "");
  LLVMValueRef span =
      LLVMBuildSelect(B, up, LLVMBuildSub(B, hi, lo, ""), LLVMBuildSub(B, lo, hi, ""), "");
  LLVMValueRef off = LLVMBuildMul(B, LLVMBuildUDiv(B, span, mag, ""), mag, "");
  LLVMValueRef last =
      LLVMBuildSelect(B, up, LLVMBuildAdd(B, lo, off, ""), LLVMBuildSub(B, lo, off, ""), "");
  return LLVMBuildAdd(B, last, step, "");
}

/* A step known only at run time may be zero: an error, as in Lua (the
** loop would never end). */
static void for_step_check(E *e, const wf_inst *in, LLVMValueRef step, int isfloat) {
  if (!isfloat && LLVMIsAConstantInt(step) && LLVMConstIntGetZExtValue(step) != 0) return;
  if (isfloat && LLVMIsAConstantFP(step) && !LLVMIsNull(step)) return;
  LLVMValueRef zero =
      isfloat ? LLVMConstReal(LLVMTypeOf(step), 0) : LLVMConstNull(LLVMTypeOf(step));
  LLVMValueRef ok = isfloat ? LLVMBuildFCmp(e->B, LLVMRealUNE, step, zero, "")
                            : LLVMBuildICmp(e->B, LLVMIntNE, step, zero, "");
  LLVMBasicBlockRef good = begin_check(e, ok);
  emit_trap(e, in, "for loop step is zero");
  end_check(e, good);
}

/* FOR, emitted rotated: the bounds test at entry, then a latch test that
** for integers is i + step != stop (for_int_stop), so the counter never
** passes the type's limit, and `for j = 0, n - 1` keeps the shape the loop
** vectorizer and the SIMD-across-threads path read (j.next != n). The
** body's phis hold the induction variable and the carried values; the
** results are phis in for.end (the inits when the body never runs). A
** float counter that stops changing (i + step == i: 2^24 + 1 in float32)
** is an error at the loop's line instead of a hang. */
static void emit_for(E *e, wf_inst *in) {
  if (in->nargs < 3 || in->nblocks < 1) {
    efail(e, in, "malformed for");
    return;
  }
  wf_block *body = in->blocks[0];
  int nc = in->nargs - 3; /* carried values */
  if (body->nparams != nc + 1 || in->nres != nc) {
    efail(e, in, "malformed for: %d carried values, %d block params, %d results", nc, body->nparams,
          in->nres);
    return;
  }
  const wf_type *it = argt(e, in, 0);
  int isfloat = it && it->kind == WF_T_FLOAT;
  LLVMValueRef lo = argv(e, in, 0), hi = argv(e, in, 1), step = argv(e, in, 2);
  /* vals: the induction variable, then the carried values; cur: the
  ** body's phis; ty: their types (ty + 1: the results') */
  LLVMValueRef *vals = malloc(sizeof(LLVMValueRef) * 2 * (size_t)(nc + 1)), *cur = vals + nc + 1;
  LLVMTypeRef *ty = malloc(sizeof(LLVMTypeRef) * (size_t)(nc + 1));
  if (!vals || !ty) {
    free(vals), free(ty);
    efail(e, in, "out of memory");
    return;
  }
  for_step_check(e, in, step, isfloat);
  ty[0] = LLVMTypeOf(lo);
  vals[0] = lo;
  for (int k = 0; k < nc; k++) {
    ty[k + 1] = vltype(e, in->res[k]);
    vals[k + 1] = argv(e, in, 3 + k);
  }
  LLVMValueRef go = for_in_range(e, it, lo, hi, step);
  LLVMValueRef stop = isfloat ? NULL : for_int_stop(e, it, lo, hi, step);
  phiset ps, rs;
  if (phiset_init(e, &ps, nc + 1, ty)) {
    free(vals), free(ty);
    return;
  }
  if (phiset_init(e, &rs, nc, ty + 1)) {
    phiset_free(&ps);
    free(vals), free(ty);
    return;
  }
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->B);
  LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(e->C, e->F, "for.body");
  LLVMBasicBlockRef xb = LLVMAppendBasicBlockInContext(e->C, e->F, "for.end");
  LLVMPositionBuilderAtEnd(e->B, bb);
  phiset_phis(e, &ps);
  LLVMPositionBuilderAtEnd(e->B, xb);
  phiset_phis(e, &rs);
  LLVMPositionBuilderAtEnd(e->B, pre);
  phiset_incoming(e, &ps, vals);
  phiset_incoming(e, &rs, vals + 1);
  LLVMBuildCondBr(e->B, go, bb, xb);
  LLVMPositionBuilderAtEnd(e->B, bb);
  phiset_values(e, &ps, cur);
  LLVMValueRef iphi = cur[0];
  e->v[body->params[0]] = iphi;
  for (int k = 0; k < nc; k++)
    e->v[body->params[k + 1]] = cur[k + 1];
  wf_inst *term = emit_block(e, body);
  term_values(e, term, 0, nc, vals + 1, in);
  if (isfloat) {
    vals[0] = LLVMBuildFAdd(e->B, iphi, step, "");
    LLVMBasicBlockRef good = begin_check(e, LLVMBuildFCmp(e->B, LLVMRealUNE, vals[0], iphi, ""));
    char msg[128];
    snprintf(msg, sizeof msg,
             "for loop counter stops changing: float%d counter + step == counter (use an integer "
             "loop)",
             it->bits);
    emit_trap(e, in, msg);
    end_check(e, good);
    go = for_in_range(e, it, vals[0], hi, step);
  } else {
    vals[0] = LLVMBuildAdd(e->B, iphi, step, "");
    go = LLVMBuildICmp(e->B, LLVMIntNE, vals[0], stop, "");
  }
  phiset_incoming(e, &rs, vals + 1);
  LLVMBasicBlockRef back = LLVMAppendBasicBlockInContext(e->C, e->F, "for.latch");
  LLVMBuildCondBr(e->B, go, back, xb);
  LLVMPositionBuilderAtEnd(e->B, back);
  poll_interrupt(e, 0);
  phiset_incoming(e, &ps, vals);
  LLVMBuildBr(e->B, bb);
  LLVMPositionBuilderAtEnd(e->B, xb);
  phiset_values(e, &rs, cur);
  for (int k = 0; k < nc; k++)
    e->v[in->res[k]] = cur[k];
  phiset_free(&ps);
  phiset_free(&rs);
  free(vals), free(ty);
}

static void emit_while(E *e, wf_inst *in) {
  if (in->nblocks < 2) {
    efail(e, in, "malformed while");
    return;
  }
  wf_block *before = in->blocks[0], *after = in->blocks[1];
  int ni = in->nargs, nr = in->nres;
  if (before->nparams != ni || after->nparams != nr) {
    efail(e, in, "malformed while: block parameters do not match");
    return;
  }
  /* the values a loop carries (any number): vals and cur (ni), cv (nr) */
  LLVMValueRef *vals = malloc(sizeof(LLVMValueRef) * (size_t)(2 * ni + nr + 1));
  LLVMValueRef *cur = vals + ni, *cv = cur + ni;
  LLVMTypeRef *ty = malloc(sizeof(LLVMTypeRef) * (size_t)(ni + 1));
  if (!vals || !ty) {
    free(vals), free(ty);
    efail(e, in, "out of memory");
    return;
  }
  for (int k = 0; k < ni; k++) {
    ty[k] = vltype(e, before->params[k]);
    vals[k] = argv(e, in, k);
  }
  phiset ps;
  if (phiset_init(e, &ps, ni, ty)) {
    free(vals), free(ty);
    return;
  }
  LLVMBasicBlockRef hb = LLVMAppendBasicBlockInContext(e->C, e->F, "while.before");
  LLVMBasicBlockRef ab = LLVMAppendBasicBlockInContext(e->C, e->F, "while.after");
  LLVMBasicBlockRef xb = LLVMAppendBasicBlockInContext(e->C, e->F, "while.end");
  phiset_enter(e, &ps, vals, hb);
  phiset_values(e, &ps, cur);
  for (int k = 0; k < ni; k++)
    e->v[before->params[k]] = cur[k];
  wf_inst *ct = emit_block(e, before);
  if (!ct || ct->op != WF_OP_COND || ct->nargs != nr + 1) {
    efail(e, in, "while: the before region must end with a condition passing %d values", nr);
    phiset_free(&ps);
    free(vals), free(ty);
    return;
  }
  term_values(e, ct, 1, nr, cv, in);
  LLVMBuildCondBr(e->B, e->v[ct->args[0]], ab, xb);
  for (int k = 0; k < nr; k++) {
    e->v[after->params[k]] = cv[k];
    e->v[in->res[k]] = cv[k];
  }
  LLVMPositionBuilderAtEnd(e->B, ab);
  wf_inst *yt = emit_block(e, after);
  term_values(e, yt, 0, ni, vals, in);
  poll_interrupt(e, 1);
  phiset_incoming(e, &ps, vals);
  LLVMBuildBr(e->B, hb);
  phiset_free(&ps);
  free(vals), free(ty);
  LLVMPositionBuilderAtEnd(e->B, xb);
}

/* The dynamic index of EXTRACTD or INSERTD as i64, out of range taken
** as 0 (the front end checked it where the mode asks; unchecked, it reads
** component 0 as the select chains of small aggregates do). */
static LLVMValueRef dyn_index(E *e, const wf_inst *in) {
  const wf_type *kt = argt(e, in, 1);
  LLVMValueRef k = argv(e, in, 1);
  if (!kt || kt->kind != WF_T_INT) {
    efail(e, in, "'%s' needs an integer index", wf_op_name(in->op));
    return ci64(e, 0);
  }
  k = LLVMBuildIntCast2(e->B, k, e->i64, kt->is_signed, "");
  LLVMValueRef ok = LLVMBuildICmp(e->B, LLVMIntULT, k, ci64(e, wf_t_arity(argt(e, in, 0))), "");
  return LLVMBuildSelect(e->B, ok, k, ci64(e, 0), "");
}

/* Component k of operand 0 of an extract or insert through memory: the
** web's slot (the insert updates it in place and gives its address), or a
** temporary slot holding the SSA value. */
static LLVMValueRef component(E *e, const wf_inst *in, LLVMValueRef k) {
  const wf_type *at = argt(e, in, 0);
  int isins = in->op == WF_OP_INSERT || in->op == WF_OP_INSERTD;
  LLVMTypeRef lt = ltype(e, at), ct = ltype(e, wf_t_component(e->T, at, 0));
  LLVMValueRef slot = argv(e, in, 0);
  if (!homed(e, in->args[0])) {
    LLVMValueRef agg = slot;
    slot = entry_alloca(e, lt);
    LLVMBuildStore(e->B, agg, slot);
  }
  LLVMValueRef idx[2] = {ci64(e, 0), k};
  LLVMValueRef p = LLVMBuildInBoundsGEP2(e->B, lt, slot, idx, 2, "");
  /* the root of a row borrowing the matrix's memory: its address there */
  if (!isins && homed(e, in->res[0]) && (e->lflags[in->res[0]] & WF_CPU_BORROW)) return p;
  if (!isins) return LLVMBuildLoad2(e->B, ct, p, "");
  /* the write-back of a borrowed row: it is there already */
  if (!(e->lflags[in->res[0]] & WF_CPU_WRITEBACK))
    LLVMBuildStore(e->B, argv(e, in, in->nargs - 1), p);
  return homed(e, in->args[0]) ? slot : LLVMBuildLoad2(e->B, lt, slot, "");
}

void emit_inst(E *e, wf_inst *in) {
  const wf_type *rt = in->nres > 0 ? wf_vtype(e->fn, in->res[0]) : NULL;
  LLVMValueRef r = NULL;
  LLVMBuilderRef B = e->B;
  switch (in->op) {
  case WF_OP_CONST:
    if (!rt) break;
    if (rt->kind == WF_T_FLOAT)
      r = cfloat(e, rt, in->fimm);
    else if (rt->kind == WF_T_BOOL)
      r = LLVMConstInt(e->i1, in->imm != 0, 0);
    else if (rt->kind == WF_T_INT || rt->kind == WF_T_RNG)
      r = cint(e, rt, in->imm);
    else
      r = LLVMConstNull(ltype(e, rt));
    break;
  case WF_OP_UNDEF: r = LLVMConstNull(ltype(e, rt)); break;
  case WF_OP_PARAM:
    if (in->imm >= 0 && in->imm < e->fn->nparams) r = e->v[e->fn->params[in->imm]];
    break;
  case WF_OP_ADD:
  case WF_OP_SUB:
  case WF_OP_MUL:
  case WF_OP_DIV:
  case WF_OP_MOD:
  case WF_OP_FLOORDIV:
  case WF_OP_MIN:
  case WF_OP_MAX:
  case WF_OP_BAND:
  case WF_OP_BOR:
  case WF_OP_BXOR:
  case WF_OP_SHL:
  case WF_OP_SHR: r = binary(e, in, argt(e, in, 0), argv(e, in, 0), argv(e, in, 1)); break;
  case WF_OP_NEG:
  case WF_OP_ABS:
  case WF_OP_NOT:
  case WF_OP_BNOT: r = unary(e, in, argt(e, in, 0), argv(e, in, 0)); break;
  case WF_OP_EQ:
  case WF_OP_NE:
  case WF_OP_LT:
  case WF_OP_LE:
  case WF_OP_GT:
  case WF_OP_GE: r = compare(e, in, argt(e, in, 0), in->op, argv(e, in, 0), argv(e, in, 1)); break;
  case WF_OP_SELECT:
    r = LLVMBuildSelect(B, argv(e, in, 0), argv(e, in, 1), argv(e, in, 2), "");
    if (argt(e, in, 1) && argt(e, in, 1)->kind == WF_T_ARRAY) {
      /* keep the name only when both sides name the same array */
      int same = e->aname[in->args[1]] == e->aname[in->args[2]] &&
                 e->adepth[in->args[1]] == e->adepth[in->args[2]];
      e->aname[in->res[0]] = same ? e->aname[in->args[1]] : -1;
      e->adepth[in->res[0]] = e->adepth[in->args[1]];
    }
    break;
  case WF_OP_CAST: r = cast(e, in, argv(e, in, 0), argt(e, in, 0), rt); break;
  case WF_OP_BIT_COUNT:
    r = LLVMBuildIntCast2(B, intr1(e, "llvm.ctpop", argv(e, in, 0)), ltype(e, rt), 0, "");
    break;
  case WF_OP_AGG: {
    int n = wf_t_arity(rt);
    if (n != in->nargs) {
      efail(e, in, "agg of %s takes %d components, got %d", rt && rt->name ? rt->name : "?", n,
            in->nargs);
      break;
    }
    r = LLVMGetUndef(ltype(e, rt));
    for (int i = 0; i < n; i++)
      r = LLVMBuildInsertValue(B, r, argv(e, in, i), (unsigned)i, "");
    break;
  }
  case WF_OP_EXTRACT:
  case WF_OP_INSERT: {
    const wf_type *at = argt(e, in, 0);
    if (in->imm < 0 || in->imm >= wf_t_arity(at)) {
      efail(e, in, "component %d out of range", (int)in->imm);
      break;
    }
    if (homed(e, in->args[0])) {
      r = component(e, in, ci64(e, in->imm));
      break;
    }
    if (in->op == WF_OP_EXTRACT)
      r = LLVMBuildExtractValue(B, argv(e, in, 0), (unsigned)in->imm, "");
    else
      r = LLVMBuildInsertValue(B, argv(e, in, 0), argv(e, in, 1), (unsigned)in->imm, "");
    break;
  }
  case WF_OP_EXTRACTD:
  case WF_OP_INSERTD: r = component(e, in, dyn_index(e, in)); break;
  case WF_OP_SHAPE: {
    const wf_type *at = argt(e, in, 0);
    if (!at || at->kind != WF_T_ARRAY || in->imm < 0 || in->imm >= at->ndim) {
      efail(e, in, "shape: dimension %d out of range", (int)in->imm);
      break;
    }
    LLVMValueRef s = arr_get(e, argv(e, in, 0), 1, (int)in->imm);
    r = LLVMTypeOf(s) == ltype(e, rt) ? s : LLVMBuildTrunc(B, s, ltype(e, rt), "");
    break;
  }
  case WF_OP_VIEW: r = view(e, in); break;
  case WF_OP_LOAD: {
    LLVMValueRef p = elem_addr(e, in, in->nargs - 1);
    r = mload(e, rt, p);
    break;
  }
  case WF_OP_STORE: {
    const wf_type *at = argt(e, in, 0);
    LLVMValueRef p = elem_addr(e, in, in->nargs - 2);
    if (at && at->kind == WF_T_ARRAY) mstore(e, in, at->elem, p, argv(e, in, in->nargs - 1));
    break;
  }
  case WF_OP_ATOMIC_ADD:
  case WF_OP_ATOMIC_MIN:
  case WF_OP_ATOMIC_MAX:
  case WF_OP_ATOMIC_EXCH:
  case WF_OP_ATOMIC_CAS:
  case WF_OP_ATOMIC_AND:
  case WF_OP_ATOMIC_OR:
  case WF_OP_ATOMIC_XOR: {
    const wf_type *at = argt(e, in, 0);
    LLVMValueRef p = elem_addr(e, in, in->nargs - 2);
    if (at && at->kind == WF_T_ARRAY && e->privmode && priv_target(e, in) >= 0)
      r = plain_add(e, at->elem, p, argv(e, in, in->nargs - 1));
    else if (at && at->kind == WF_T_ARRAY)
      r = atomic_any(e, in, at->elem, p, argv(e, in, in->nargs - 1));
    break;
  }
  case WF_OP_TID: {
    int d = (int)in->imm;
    r = d >= 0 && d < WF_MAXDIM && e->tid[d] ? e->tid[d] : ci32(e, 0);
    if (rt && LLVMTypeOf(r) != ltype(e, rt)) r = LLVMBuildSExt(B, r, ltype(e, rt), "");
    break;
  }
  case WF_OP_RNG_INIT:
    r = pcg(e, LLVMBuildAdd(B, as_i32(e, in->args[0]), pcg(e, as_i32(e, in->args[1])), ""));
    break;
  case WF_OP_RANDI:
  case WF_OP_RANDF: {
    LLVMValueRef s = pcg(e, argv(e, in, 0));
    LLVMValueRef val;
    if (in->op == WF_OP_RANDI) {
      val = s;
    } else {
      val = LLVMBuildFMul(B, LLVMBuildUIToFP(B, LLVMBuildLShr(B, s, ci32(e, 8), ""), e->f32, ""),
                          LLVMConstReal(e->f32, 1.0 / 16777216.0), "");
      if (rt && rt->kind == WF_T_FLOAT && rt->bits != 32)
        val = cast(e, in, val, wf_t_float(e->T, 32), rt);
    }
    if (in->nres > 0) e->v[in->res[0]] = val;
    if (in->nres > 1) e->v[in->res[1]] = s;
    return;
  }
  case WF_OP_PRINT: emit_print(e, in); return;
  case WF_OP_TRAP: {
    if (in->imm && !e->o->debug) return; /* a debug-only check */
    emit_trap(e, in, in->str ? in->str : "trap");
    LLVMBuildBr(B, e->exit_bb);
    fresh_block(e);
    return;
  }
  case WF_OP_CHECK:
    /* release mode only (debug checks every access); hoisted ones ran
    ** before the thread loop (emit_body) */
    if (e->o->checks && !e->o->debug && !(in->imm & (WF_CHECK_LAUNCH | WF_CHECK_HOIST)))
      range_check(e, in, NULL, 0);
    return;
  case WF_OP_CALL:
    efail(e, in, "internal error: call to function %d was not inlined", (int)in->imm);
    return;
  case WF_OP_NATIVE: wf_cpu_emit_native(e, in); return;
  case WF_OP_IF: emit_if(e, in); return;
  case WF_OP_FOR: emit_for(e, in); return;
  case WF_OP_WHILE: emit_while(e, in); return;
  case WF_OP_YIELD:
  case WF_OP_COND:
  case WF_OP_RET: return; /* handled by the owner */
  default:
    /* the scalar float functions (WF_MATHDEF rows) */
    if (!wf_opinfo_tab[in->op].libm) break;
    if (in->nargs == 1)
      r = unary(e, in, argt(e, in, 0), argv(e, in, 0));
    else
      r = binary(e, in, argt(e, in, 0), argv(e, in, 0), argv(e, in, 1));
    break;
  }
  if (in->nres > 0) {
    if (!r) {
      if (!e->failed) efail(e, in, "cannot compile operation '%s'", wf_op_name(in->op));
      r = LLVMGetUndef(ltype(e, rt));
    }
    if (homed(e, in->res[0]) && in->op != WF_OP_INSERT && in->op != WF_OP_INSERTD) {
      /* the root of a local array's web: into its slot, or (a borrowed
      ** row) r is its address in the matrix's slot */
      if (e->lflags[in->res[0]] & WF_CPU_BORROW) {
        body_slots(e)[e->web[in->res[0]]] = r;
      } else {
        LLVMValueRef slot = web_slot(e, in->res[0]);
        LLVMBuildStore(B, r, slot);
        r = slot;
      }
    }
    e->v[in->res[0]] = r;
  }
}

/* Emits a block's instructions; returns its terminator (not emitted). A
** RET anywhere ends the current thread: jump to the thread loop's latch. */
wf_inst *emit_block(E *e, wf_block *bl) {
  for (wf_inst *in = bl->first; in; in = in->next) {
    if (wf_op_flags(in->op) & WF_OPF_TERM) {
      if (in->op == WF_OP_RET) {
        LLVMBuildBr(e->B, e->latch_bb);
        fresh_block(e);
      }
      return in;
    }
    emit_inst(e, in);
  }
  return NULL;
}

static void count_cost(const wf_block *bl, int64_t mult, int64_t *acc) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    int64_t m = mult;
    /* 16 per loop level, saturating (deep nests would overflow int64) */
    if ((in->op == WF_OP_FOR || in->op == WF_OP_WHILE) && mult < ((int64_t)1 << 40)) m = mult * 16;
    if (in->op == WF_OP_PRINT) *acc += 2000 * mult;
    *acc += mult;
    for (int b = 0; b < in->nblocks; b++)
      count_cost(in->blocks[b], m, acc);
    if (*acc > ((int64_t)1 << 40)) return;
  }
}

int64_t wf_cpu_cost(const wf_func *fn) {
  int64_t acc = 0;
  if (fn->body) count_cost(fn->body, 1, &acc);
  return acc < 1 ? 1 : acc;
}
