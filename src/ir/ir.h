/*
** ir.h -- weft's typed SSA IR with structured control flow.
**
** Takes: util. Gives every stage above it the IR (types, modules, the op
** table, passes, printer, parser, verifier) and, in abi.h, the launch ABI
** the backends compile to and the runtime calls.
**
** A module holds functions (kernels and weft.func helpers). A function has
** typed parameters and one body block. A block is a list of instructions
** with block parameters (loop induction variables, loop-carried values) and
** ends with a terminator (yield, condition, ret). Control flow is structured,
** in the style of MLIR's scf dialect: `if`, `for` and `while` instructions own
** nested blocks and produce results. There are no gotos and no phis; a value
** defined in a block is visible in the blocks nested inside it.
**
**   %5:f32, %6:i32 = if %c {            blocks[0]: then, yields nres values
**       ...  yield %a, %b
**   } else {                            blocks[1]: else, yields nres values
**       ...  yield %x, %y
**   }
**   %9:f32 = for %lo, %hi, %step iter(%init) {      inclusive Lua for
**     ^(%i:i32, %acc:f32):              blocks[0] params: induction, carried
**       ...  yield %acc2                yields the next carried values
**   }                                   results: carried values at exit
**   %r:f32 = while iter(%init) {
**     ^(%x:f32):                        blocks[0]: "before" region
**       ... condition %c, %x            continue if %c, passing values on
**   } do {
**     ^(%x:f32):                        blocks[1]: "after" region (the body)
**       ... yield %x2                   back to blocks[0]
**   }                                   results: values passed by condition
**
** Lua `break`, early `return` and `repeat ... until` are lowered by the front
** end into these forms (flags carried through the loop).
**
** Aggregates (vectors, matrices, quaternions, transforms, structs) are SSA
** values; arithmetic on them is lowered by the front end into scalar ops
** plus WF_OP_AGG / WF_OP_EXTRACT / WF_OP_INSERT, so passes, autodiff and the
** backends only need rules for scalar primitives.
**
** Arrays are SSA values of array type (a pointer to a wf_array header at run
** time); WF_OP_VIEW peels a dimension, WF_OP_LOAD/STORE/ATOMIC access an
** element with ndim indices.
*/
#ifndef WF_IR_H
#define WF_IR_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#define WF_IR_INTERNAL __attribute__((visibility("hidden")))

/* ======================================================================
** types (interned per wf_types context: compare pointers for equality)
** ====================================================================== */
typedef enum wf_tkind {
  WF_T_VOID,
  WF_T_BOOL,
  WF_T_INT,       /* bits 8/16/32/64, is_signed */
  WF_T_FLOAT,     /* bits 16/32/64 */
  WF_T_VEC,       /* n components of scalar elem (spatial_vector: n = 6) */
  WF_T_MAT,       /* rows x cols of scalar elem, row-major; m[i] is row i */
  WF_T_QUAT,      /* x y z w of scalar elem */
  WF_T_TRANSFORM, /* p: vec3, q: quat (7 scalars: px py pz qx qy qz qw) */
  WF_T_STRUCT,    /* named fields */
  WF_T_ARRAY,     /* ndim, elem: any non-array type */
  WF_T_RNG        /* random state (uint32 counter) */
} wf_tkind;

typedef struct wf_type wf_type;
typedef struct wf_field {
  const char *name;
  const wf_type *type;
  uint32_t offset; /* byte offset in the C layout */
} wf_field;

struct wf_type {
  wf_tkind kind;
  uint8_t bits;           /* INT, FLOAT */
  uint8_t is_signed;      /* INT */
  uint8_t rows, cols;     /* VEC: rows = n, cols = 1; MAT: rows x cols */
  uint8_t ndim;           /* ARRAY */
  const wf_type *elem;    /* VEC/MAT/QUAT/TRANSFORM: scalar; ARRAY: element */
  const char *name;       /* display name: "f32", "vec3f", struct name */
  uint32_t size, align;   /* C layout (arrays: the 72-byte kernel header) */
  int nfields;            /* STRUCT */
  const wf_field *fields; /* STRUCT */
  int ncomp;              /* number of scalar components (VEC/MAT/QUAT/TRANSFORM) */
  int32_t lua_id;         /* type registry id on the Lua side, or -1 */
};

typedef struct wf_types wf_types; /* interning context; owns all types */

WF_IR_INTERNAL wf_types *wf_types_new(void);
WF_IR_INTERNAL void wf_types_free(wf_types *T);
WF_IR_INTERNAL const wf_type *wf_t_void(wf_types *T);
WF_IR_INTERNAL const wf_type *wf_t_bool(wf_types *T);
WF_IR_INTERNAL const wf_type *wf_t_int(wf_types *T, int bits, int is_signed);
WF_IR_INTERNAL const wf_type *wf_t_float(wf_types *T, int bits);
WF_IR_INTERNAL const wf_type *wf_t_vec(wf_types *T, int n, const wf_type *scalar);
WF_IR_INTERNAL const wf_type *wf_t_mat(wf_types *T, int rows, int cols, const wf_type *scalar);
WF_IR_INTERNAL const wf_type *wf_t_quat(wf_types *T, const wf_type *scalar);
WF_IR_INTERNAL const wf_type *wf_t_transform(wf_types *T, const wf_type *scalar);
WF_IR_INTERNAL const wf_type *wf_t_array(wf_types *T, const wf_type *elem, int ndim);
WF_IR_INTERNAL const wf_type *wf_t_rng(wf_types *T);
/* Structs are interned by name + field list; fields are copied. */
WF_IR_INTERNAL const wf_type *wf_t_struct(wf_types *T, const char *name, int nfields,
                                          const wf_field *fields);
WF_IR_INTERNAL int wf_t_is_scalar(const wf_type *t); /* bool, int, float */
WF_IR_INTERNAL int wf_t_is_float(const wf_type *t);
WF_IR_INTERNAL int wf_t_is_int(const wf_type *t);
/* Number of direct components of an aggregate for AGG/EXTRACT/INSERT:
** VEC n, MAT rows (each a row vector), QUAT 4, TRANSFORM 2 (p, q),
** STRUCT nfields. 0 for non-aggregates. */
WF_IR_INTERNAL int wf_t_arity(const wf_type *t);
/* Type of direct component i (see wf_t_arity). */
WF_IR_INTERNAL const wf_type *wf_t_component(wf_types *T, const wf_type *t, int i);
/* Print a type in IR text syntax: bool i32 u8 f32 vec3f mat33d quatf
** transformf array<f32,2> struct.Particle rng */
WF_IR_INTERNAL void wf_t_print(const wf_type *t, FILE *f);
WF_IR_INTERNAL int wf_t_snprint(const wf_type *t, char *buf, size_t n);

/* ======================================================================
** opcodes: the one table. Every fact a consumer needs about an op is a
** column of its row; the enum, the verifier's type rules, the folder,
** both emitters, the JIT's symbol table, the front end's builtin lookup
** and autodiff's completeness check all expand from it.
**
** Expanded rows have ten columns (WF_IRDEF(_) calls _ with them):
**   e     enum name (WF_OP_e)
**   s     text name in the IR; for WF_OPF_BUILTIN ops also the kernel
**         builtin's name (weft.s)
**   na nr operands and results (-1 = variadic)
**   fl    flags (WF_OPF_*)
**   ty    operand/result type rule (wf_tyrule), checked by verify.c
**   libm  C math function for float64 (+ "f": float32); empty if none
**   llvm  LLVM intrinsic the CPU backend calls instead of libm, or NULL
**   cuda  CUDA math function for float64 (+ "f": float32), or NULL
**   fold  double (*)(double) computing the op exactly (correctly
**         rounded, so folding never changes a result), or 0
** Two kinds of rows: P(...) for ops with their own semantics, and
** M(...) in WF_MATHDEF for scalar float functions (one operand type,
** float result, pure, callable as a builtin).
** Derivative rules live in src/ad/rules.c; a static check there fails the
** build when a WF_OPF_DIFF op has no rule.
** ====================================================================== */
#define WF_OPF_PURE 1     /* no side effects: CSE and DCE may touch it */
#define WF_OPF_DIFF 2     /* differentiable (float operands) */
#define WF_OPF_TERM 4     /* block terminator */
#define WF_OPF_REGION 8   /* owns blocks */
#define WF_OPF_MEM 16     /* reads or writes memory */
#define WF_OPF_CMP 32     /* comparison: result bool */
#define WF_OPF_BUILTIN 64 /* a kernel builtin named like the op (weft.sqrt) */
#define WF_OPF_INTID 128  /* the builtin is the identity on integers (floor) */
#define WF_OPF_COMM 256   /* commutative: CSE matches swapped operands (1) */
#define WF_OPF_WRITE 512  /* writes the array element it indexes (2) */
/* (1) for every operand type, NaN payloads aside. min and max are not:
**     min(NaN, 1) = 1 but min(1, NaN) = NaN; min(-0, 0) = 0, min(0, -0) = -0.
** (2) args: array, ndim indices, value (stores and atomics). */

/* Operand and result type rules (the ty column). */
typedef enum wf_tyrule {
  WF_TY_OWN,   /* checked by the op's own case in verify.c */
  WF_TY_NUM,   /* operands and result: one int or float type */
  WF_TY_FLOAT, /* operands and result: one float type */
  WF_TY_CMP,   /* operands: one scalar type; result bool */
  WF_TY_BOOL,  /* operands and result: bool */
  WF_TY_BITS   /* operands and result: one bool or int type */
} wf_tyrule;

/* (3) imm WF_SQRT_ZERO_AT_ZERO ("sqrt %x, 1"): its derivative is 0 at 0
**     instead of inf (length and normalize; the value is the same). */
#define WF_SQRT_ZERO_AT_ZERO 1

/* Scalar float functions: M(X, e, s, na, fl, libm, llvm, cuda, fold).
** Adding one (erf) takes this row, its derivative rule in src/ad/rules.c
** and, if wanted, a host-side fallback in lua/weft/builtins.lua. */
/* clang-format off */
#define WF_MATHDEF(M, X) \
  M(X, SQRT,    "sqrt",    1, WF_OPF_DIFF, sqrt,  "llvm.sqrt",  "sqrt",  sqrt) /* (3) */ \
  M(X, CBRT,    "cbrt",    1, WF_OPF_DIFF, cbrt,  NULL,         "cbrt",  0) \
  M(X, EXP,     "exp",     1, WF_OPF_DIFF, exp,   "llvm.exp",   "exp",   0) \
  M(X, EXP2,    "exp2",    1, WF_OPF_DIFF, exp2,  "llvm.exp2",  "exp2",  0) \
  M(X, EXPM1,   "expm1",   1, WF_OPF_DIFF, expm1, NULL,         "expm1", 0) \
  M(X, LOG,     "log",     1, WF_OPF_DIFF, log,   "llvm.log",   "log",   0) \
  M(X, LOG2,    "log2",    1, WF_OPF_DIFF, log2,  "llvm.log2",  "log2",  0) \
  M(X, LOG10,   "log10",   1, WF_OPF_DIFF, log10, "llvm.log10", "log10", 0) \
  M(X, LOG1P,   "log1p",   1, WF_OPF_DIFF, log1p, NULL,         "log1p", 0) \
  M(X, POW,     "pow",     2, WF_OPF_DIFF, pow,   "llvm.pow",   "pow",   0) \
  M(X, SIN,     "sin",     1, WF_OPF_DIFF, sin,   "llvm.sin",   "sin",   0) \
  M(X, COS,     "cos",     1, WF_OPF_DIFF, cos,   "llvm.cos",   "cos",   0) \
  M(X, TAN,     "tan",     1, WF_OPF_DIFF, tan,   NULL,         "tan",   0) \
  M(X, ASIN,    "asin",    1, WF_OPF_DIFF, asin,  NULL,         "asin",  0) \
  M(X, ACOS,    "acos",    1, WF_OPF_DIFF, acos,  NULL,         "acos",  0) \
  M(X, ATAN,    "atan",    1, WF_OPF_DIFF, atan,  NULL,         "atan",  0) \
  M(X, ATAN2,   "atan2",   2, WF_OPF_DIFF, atan2, NULL,         "atan2", 0) /* y, x */ \
  M(X, COPYSIGN, "copysign", 2, WF_OPF_DIFF, copysign, "llvm.copysign", "copysign", 0) /* |x|, y's sign bit */ \
  M(X, FMOD,    "fmod",    2, WF_OPF_DIFF, fmod,  NULL,         "fmod",  0) /* C's: sign of a, exact */ \
  M(X, SINH,    "sinh",    1, WF_OPF_DIFF, sinh,  NULL,         "sinh",  0) \
  M(X, COSH,    "cosh",    1, WF_OPF_DIFF, cosh,  NULL,         "cosh",  0) \
  M(X, TANH,    "tanh",    1, WF_OPF_DIFF, tanh,  NULL,         "tanh",  0) \
  M(X, ERF,     "erf",     1, WF_OPF_DIFF, erf,   NULL,         "erf",   0) \
  M(X, ERFC,    "erfc",    1, WF_OPF_DIFF, erfc,  NULL,         "erfc",  0) \
  M(X, ERFINV,  "erfinv",  1, WF_OPF_DIFF, wf_erfinv,  NULL,    "erfinv",  0) /* cpu/rtlib.c */ \
  M(X, ERFCINV, "erfcinv", 1, WF_OPF_DIFF, wf_erfcinv, NULL,    "erfcinv", 0) \
  M(X, FLOOR,   "floor",   1, WF_OPF_DIFF|WF_OPF_INTID, floor, "llvm.floor", "floor", floor) \
  M(X, CEIL,    "ceil",    1, WF_OPF_DIFF|WF_OPF_INTID, ceil,  "llvm.ceil",  "ceil",  ceil) \
  M(X, ROUND,   "round",   1, WF_OPF_DIFF|WF_OPF_INTID, round, "llvm.round", "round", round) /* half away from zero */ \
  M(X, TRUNC,   "trunc",   1, WF_OPF_DIFF|WF_OPF_INTID, trunc, "llvm.trunc", "trunc", trunc) \
  M(X, RINT,    "rint",    1, WF_OPF_DIFF|WF_OPF_INTID, rint,  "llvm.rint",  "rint",  rint) /* half to even */

#define WF_IRDEF(_) WF_IRDEF_HEAD(WF_OP_P_, _) WF_MATHDEF(WF_OP_M_, _) WF_IRDEF_TAIL(WF_OP_P_, _)
#define WF_OP_P_(_, e, s, na, nr, fl, ty, cuda) _(e, s, na, nr, fl, ty, , NULL, cuda, 0)
#define WF_OP_M_(_, e, s, na, fl, libm, llvm, cuda, fold) \
  _(e, s, na, 1, WF_OPF_PURE|WF_OPF_BUILTIN|(fl), WF_TY_FLOAT, libm, llvm, cuda, fold)

/* P(X, e, s, na, nr, fl, ty, cuda) */
#define WF_IRDEF_HEAD(P, X) \
  /* constants and parameters */ \
  P(X, CONST,    "const",    0, 1, WF_OPF_PURE, WF_TY_OWN, NULL)  /* imm/fimm by type */ \
  P(X, PARAM,    "param",    0, 1, WF_OPF_PURE, WF_TY_OWN, NULL)  /* imm = index; only in printing */ \
  P(X, UNDEF,    "undef",    0, 1, WF_OPF_PURE, WF_TY_OWN, NULL)  /* zero of its type */ \
  /* arithmetic on scalars of one type */ \
  P(X, ADD,      "add",      2, 1, WF_OPF_PURE|WF_OPF_DIFF|WF_OPF_COMM, WF_TY_NUM, NULL) \
  P(X, SUB,      "sub",      2, 1, WF_OPF_PURE|WF_OPF_DIFF, WF_TY_NUM, NULL) \
  P(X, MUL,      "mul",      2, 1, WF_OPF_PURE|WF_OPF_DIFF|WF_OPF_COMM, WF_TY_NUM, NULL) \
  P(X, DIV,      "div",      2, 1, WF_OPF_PURE|WF_OPF_DIFF, WF_TY_NUM, NULL) /* ints: trunc toward 0 */ \
  P(X, MOD,      "mod",      2, 1, WF_OPF_PURE|WF_OPF_DIFF, WF_TY_NUM, "wf_fmod") /* Lua %: sign of divisor */ \
  P(X, FLOORDIV, "floordiv", 2, 1, WF_OPF_PURE|WF_OPF_BUILTIN, WF_TY_NUM, "wf_ffloordiv") \
  P(X, NEG,      "neg",      1, 1, WF_OPF_PURE|WF_OPF_DIFF, WF_TY_NUM, NULL) \
  P(X, MIN,      "min",      2, 1, WF_OPF_PURE|WF_OPF_DIFF|WF_OPF_BUILTIN, WF_TY_NUM, "wf_fmin") \
  P(X, MAX,      "max",      2, 1, WF_OPF_PURE|WF_OPF_DIFF|WF_OPF_BUILTIN, WF_TY_NUM, "wf_fmax") \
  P(X, ABS,      "abs",      1, 1, WF_OPF_PURE|WF_OPF_DIFF|WF_OPF_BUILTIN, WF_TY_NUM, "fabs")
  /* then the scalar float functions (WF_MATHDEF) */

#define WF_IRDEF_TAIL(P, X) \
  /* comparisons: operands of one scalar type, result bool */ \
  P(X, EQ,       "eq",       2, 1, WF_OPF_PURE|WF_OPF_CMP|WF_OPF_COMM, WF_TY_CMP, NULL) \
  P(X, NE,       "ne",       2, 1, WF_OPF_PURE|WF_OPF_CMP|WF_OPF_COMM, WF_TY_CMP, NULL) \
  P(X, LT,       "lt",       2, 1, WF_OPF_PURE|WF_OPF_CMP, WF_TY_CMP, NULL) \
  P(X, LE,       "le",       2, 1, WF_OPF_PURE|WF_OPF_CMP, WF_TY_CMP, NULL) \
  P(X, GT,       "gt",       2, 1, WF_OPF_PURE|WF_OPF_CMP, WF_TY_CMP, NULL) \
  P(X, GE,       "ge",       2, 1, WF_OPF_PURE|WF_OPF_CMP, WF_TY_CMP, NULL) \
  /* logic and bits: bool or integer operands */ \
  P(X, NOT,      "not",      1, 1, WF_OPF_PURE, WF_TY_BOOL, NULL) \
  P(X, BAND,     "band",     2, 1, WF_OPF_PURE|WF_OPF_COMM, WF_TY_BITS, NULL) \
  P(X, BOR,      "bor",      2, 1, WF_OPF_PURE|WF_OPF_COMM, WF_TY_BITS, NULL) \
  P(X, BXOR,     "bxor",     2, 1, WF_OPF_PURE|WF_OPF_COMM, WF_TY_BITS, NULL) \
  P(X, BNOT,     "bnot",     1, 1, WF_OPF_PURE, WF_TY_BITS, NULL) \
  P(X, BIT_COUNT, "bit_count", 1, 1, WF_OPF_PURE|WF_OPF_BUILTIN, WF_TY_OWN, NULL) /* int -> i32: set bits */ \
  P(X, SHL,      "shl",      2, 1, WF_OPF_PURE, WF_TY_OWN, NULL) \
  P(X, SHR,      "shr",      2, 1, WF_OPF_PURE, WF_TY_OWN, NULL) /* logical for unsigned, arithmetic for signed */ \
  P(X, SELECT,   "select",   3, 1, WF_OPF_PURE|WF_OPF_DIFF, WF_TY_OWN, NULL) /* cond, a, b (any type) */ \
  P(X, CAST,     "cast",     1, 1, WF_OPF_PURE|WF_OPF_DIFF, WF_TY_OWN, NULL) /* scalar conversion to the result type */ \
  /* aggregates */ \
  P(X, AGG,      "agg",     -1, 1, WF_OPF_PURE|WF_OPF_DIFF, WF_TY_OWN, NULL) /* build from wf_t_arity components */ \
  P(X, EXTRACT,  "extract",  1, 1, WF_OPF_PURE|WF_OPF_DIFF, WF_TY_OWN, NULL) /* imm = component index */ \
  P(X, INSERT,   "insert",   2, 1, WF_OPF_PURE|WF_OPF_DIFF, WF_TY_OWN, NULL) /* agg, value; imm = index */ \
  P(X, EXTRACTD, "extractd", 2, 1, WF_OPF_PURE|WF_OPF_DIFF, WF_TY_OWN, NULL) /* agg, index (int; checked before): local arrays */ \
  P(X, INSERTD,  "insertd",  3, 1, WF_OPF_PURE|WF_OPF_DIFF, WF_TY_OWN, NULL) /* agg, index, value */ \
  /* arrays: args = array, ndim int indices (i32 or i64) [, value] */ \
  P(X, SHAPE,    "shape",    1, 1, WF_OPF_PURE, WF_TY_OWN, NULL) /* imm = dim; result i32 */ \
  P(X, VIEW,     "view",     2, 1, WF_OPF_PURE, WF_TY_OWN, NULL) /* array, index: peel dim 0 */ \
  P(X, LOAD,     "load",    -1, 1, WF_OPF_MEM|WF_OPF_DIFF, WF_TY_OWN, NULL) \
  P(X, STORE,    "store",   -1, 0, WF_OPF_MEM|WF_OPF_DIFF|WF_OPF_WRITE, WF_TY_OWN, NULL) \
  P(X, ATOMIC_ADD, "atomic_add", -1, 1, WF_OPF_MEM|WF_OPF_DIFF|WF_OPF_WRITE, WF_TY_OWN, NULL) /* returns old value */ \
  P(X, ATOMIC_MIN, "atomic_min", -1, 1, WF_OPF_MEM|WF_OPF_DIFF|WF_OPF_WRITE, WF_TY_OWN, NULL) \
  P(X, ATOMIC_MAX, "atomic_max", -1, 1, WF_OPF_MEM|WF_OPF_DIFF|WF_OPF_WRITE, WF_TY_OWN, NULL) \
  /* Warp's other atomics, on scalars of 32 or 64 bits (or their vectors) */ \
  P(X, ATOMIC_EXCH, "atomic_exch", -1, 1, WF_OPF_MEM|WF_OPF_WRITE, WF_TY_OWN, NULL) \
  P(X, ATOMIC_CAS, "atomic_cas", -1, 1, WF_OPF_MEM|WF_OPF_WRITE, WF_TY_OWN, NULL) /* value: vector(2) of (compare, new); scalars */ \
  P(X, ATOMIC_AND, "atomic_and", -1, 1, WF_OPF_MEM|WF_OPF_WRITE, WF_TY_OWN, NULL) /* integers */ \
  P(X, ATOMIC_OR,  "atomic_or",  -1, 1, WF_OPF_MEM|WF_OPF_WRITE, WF_TY_OWN, NULL) \
  P(X, ATOMIC_XOR, "atomic_xor", -1, 1, WF_OPF_MEM|WF_OPF_WRITE, WF_TY_OWN, NULL) \
  /* threads, randomness, printing */ \
  P(X, TID,      "tid",      0, 1, WF_OPF_PURE, WF_TY_OWN, NULL) /* imm = dimension; result i32 */ \
  P(X, RNG_INIT, "rng_init", 2, 1, WF_OPF_PURE, WF_TY_OWN, NULL) /* seed, offset (i32) -> rng */ \
  P(X, RANDF,    "randf",    1, 2, WF_OPF_PURE, WF_TY_OWN, NULL) /* rng -> f32 in [0,1), next rng */ \
  P(X, RANDI,    "randi",    1, 2, WF_OPF_PURE, WF_TY_OWN, NULL) /* rng -> i32, next rng */ \
  P(X, PRINT,    "print",   -1, 0, WF_OPF_MEM, WF_TY_OWN, NULL) /* str = format, args scalars */ \
  P(X, TRAP,     "trap",     0, 0, WF_OPF_MEM, WF_TY_OWN, NULL) /* str = message; imm 1 ("trap ... debug"): only debug builds run it */ \
  P(X, CHECK,    "check",   -1, 0, WF_OPF_MEM, WF_TY_OWN, NULL) /* array, first[, last]: a hoisted bounds check (pass_bounds.c) */ \
  /* calls (removed by the inline pass before the backends run) */ \
  P(X, CALL,     "call",    -1, -1, 0, WF_TY_OWN, NULL)            /* imm = callee index in module */ \
  /* native builtins written in C (geometry queries): imm = row of src/geom/native.h */ \
  P(X, NATIVE,   "native",  -1, -1, WF_OPF_MEM|WF_OPF_DIFF, WF_TY_OWN, NULL) \
  /* structured control flow */ \
  P(X, IF,       "if",       1, -1, WF_OPF_REGION, WF_TY_OWN, NULL) /* cond; blocks then, else */ \
  P(X, FOR,      "for",     -1, -1, WF_OPF_REGION, WF_TY_OWN, NULL) /* lo, hi, step, inits...; blocks body */ \
  P(X, WHILE,    "while",   -1, -1, WF_OPF_REGION, WF_TY_OWN, NULL) /* inits...; blocks before, after */ \
  /* terminators */ \
  P(X, YIELD,    "yield",   -1, 0, WF_OPF_TERM, WF_TY_OWN, NULL) \
  P(X, COND,     "condition", -1, 0, WF_OPF_TERM, WF_TY_OWN, NULL) /* cond, values... */ \
  P(X, RET,      "ret",     -1, 0, WF_OPF_TERM, WF_TY_OWN, NULL)
/* clang-format on */

typedef enum wf_op {
#define WF_OPENUM(e, s, na, nr, fl, ty, libm, llvm, cuda, fold) WF_OP_##e,
  WF_IRDEF(WF_OPENUM)
#undef WF_OPENUM
      WF_OP__COUNT
} wf_op;

typedef struct wf_opinfo {
  const char *name;
  int8_t nargs, nres; /* -1: variadic */
  uint16_t flags;
  uint8_t ty;             /* wf_tyrule */
  const char *libm;       /* float64 name ("erf"; float32 adds "f"), or NULL */
  const char *llvm;       /* LLVM intrinsic ("llvm.sqrt"), or NULL */
  const char *cuda;       /* CUDA function (float32 adds "f" unless "wf_..."), or NULL */
  double (*fold)(double); /* exact evaluation for constant folding, or NULL */
} wf_opinfo;
WF_IR_INTERNAL extern const wf_opinfo wf_opinfo_tab[WF_OP__COUNT];
/* Name of an op; "?" for a value outside the table (a corrupt instruction
** must still print in an error message). */
static inline const char *wf_op_name(int op) {
  return (op >= 0 && op < WF_OP__COUNT) ? wf_opinfo_tab[op].name : "?";
}
#define wf_op_flags(op) (wf_opinfo_tab[(op)].flags)
/* Arithmetic on scalars of one type (the NUM and FLOAT type rules): the
** ops whose integer instances carry no derivative. */
static inline int wf_op_is_arith(int op) {
  int ty = wf_opinfo_tab[op].ty;
  return ty == WF_TY_NUM || ty == WF_TY_FLOAT;
}

/* ======================================================================
** values, instructions, blocks, functions, modules
** ====================================================================== */
typedef int32_t wf_val; /* index into fn->vals; -1 = none */
#define WF_NOVAL (-1)

typedef struct wf_loc {
  int32_t line, col; /* in the Lua chunk; 0 = unknown */
} wf_loc;

typedef struct wf_inst wf_inst;
typedef struct wf_block wf_block;

typedef struct wf_valinfo {
  const wf_type *type;
  wf_inst *def;    /* defining instruction, or NULL for block/function params */
  wf_block *block; /* for block params: the owner; NULL otherwise */
  int32_t index;   /* result index in def, or param index */
} wf_valinfo;

struct wf_inst {
  wf_op op;
  wf_loc loc;
  wf_inst *prev, *next; /* in the parent block */
  wf_block *parent;
  int nargs;
  wf_val *args;
  int nres;
  wf_val *res;
  int nblocks;
  wf_block **blocks;
  int64_t imm;     /* CONST int/bool value, component/dim index, callee */
  double fimm;     /* CONST float value */
  const char *str; /* PRINT format, TRAP message (arena) */
  uint32_t flags;  /* pass-private scratch */
};

struct wf_block {
  wf_inst *first, *last;
  wf_inst *parent; /* owning region instruction, NULL for a function body */
  int nparams;
  wf_val *params;
};

typedef struct wf_func {
  const char *name;
  int is_kernel;
  int nparams;
  wf_val *params; /* function parameters (values with def == NULL) */
  int nret;
  const wf_type **rettypes;
  wf_block *body;
  /* values */
  wf_valinfo *vals;
  int32_t nvals, capvals;
  struct wf_module *mod;
  const char *chunk; /* Lua chunk name for messages ("@file.lua") */
} wf_func;

typedef struct wf_module {
  wf_types *types; /* shared; not owned when borrowed_types */
  int borrowed_types;
  wf_func **funcs;
  int nfuncs, capfuncs;
  struct wf_arena *arena; /* owns every inst, block, array and string */
} wf_module;

/* ---- module and functions ---- */
WF_IR_INTERNAL wf_module *wf_module_new(wf_types *T); /* T NULL: own types */
WF_IR_INTERNAL void wf_module_free(wf_module *m);
WF_IR_INTERNAL void *wf_ir_alloc(wf_module *m, size_t n); /* zeroed, arena */
WF_IR_INTERNAL const char *wf_ir_strdup(wf_module *m, const char *s);
WF_IR_INTERNAL wf_func *wf_func_new(wf_module *m, const char *name, int is_kernel, int nparams,
                                    const wf_type *const *ptypes, int nret,
                                    const wf_type *const *rettypes);
WF_IR_INTERNAL int wf_module_find(wf_module *m, const char *name); /* index or -1 */

/* ---- builder: appends at the end of a block ---- */
typedef struct wf_builder {
  wf_func *fn;
  wf_block *block; /* insertion block */
  wf_inst *before; /* insert before this inst (NULL: append) */
  wf_loc loc;      /* location stamped on new instructions */
} wf_builder;

WF_IR_INTERNAL void wf_b_init(wf_builder *b, wf_func *fn, wf_block *block);
WF_IR_INTERNAL wf_val wf_b_newval(wf_func *fn, const wf_type *t);
WF_IR_INTERNAL wf_block *wf_b_newblock(wf_func *fn, int nparams, const wf_type *const *ptypes);
/* Generic: create an instruction with nargs args, nres results of rtypes,
** nblocks empty block slots (filled by the caller). Returns the inst. */
WF_IR_INTERNAL wf_inst *wf_b_inst(wf_builder *b, wf_op op, int nargs, const wf_val *args, int nres,
                                  const wf_type *const *rtypes, int nblocks);
/* One-result helpers return the result value. */
WF_IR_INTERNAL wf_val wf_b_op1(wf_builder *b, wf_op op, const wf_type *rt, wf_val a);
WF_IR_INTERNAL wf_val wf_b_op2(wf_builder *b, wf_op op, const wf_type *rt, wf_val a, wf_val c);
WF_IR_INTERNAL wf_val wf_b_op3(wf_builder *b, wf_op op, const wf_type *rt, wf_val a, wf_val c,
                               wf_val d);
WF_IR_INTERNAL wf_val wf_b_consti(wf_builder *b, const wf_type *t, int64_t v); /* int/bool */
WF_IR_INTERNAL wf_val wf_b_constf(wf_builder *b, const wf_type *t, double v);
WF_IR_INTERNAL wf_val wf_b_extract(wf_builder *b, wf_val agg, int index);
WF_IR_INTERNAL wf_val wf_b_insert(wf_builder *b, wf_val agg, int index, wf_val v);
/* Component k (a dynamic int index, in range) of a vector, quaternion or
** matrix (a row), and agg with it replaced: Warp's local arrays. */
WF_IR_INTERNAL wf_val wf_b_extractd(wf_builder *b, wf_val agg, wf_val k);
WF_IR_INTERNAL wf_val wf_b_insertd(wf_builder *b, wf_val agg, wf_val k, wf_val v);
WF_IR_INTERNAL wf_val wf_b_agg(wf_builder *b, const wf_type *t, int n, const wf_val *comps);

/* ---- editing ---- */
WF_IR_INTERNAL void wf_inst_unlink(wf_inst *i);
WF_IR_INTERNAL void wf_inst_insert_before(wf_inst *pos, wf_inst *i);
WF_IR_INTERNAL void wf_block_append(wf_block *bl, wf_inst *i);
/* Replace every use of `from` with `to` inside fn. */
WF_IR_INTERNAL void wf_replace_uses(wf_func *fn, wf_val from, wf_val to);
static inline const wf_type *wf_vtype(const wf_func *fn, wf_val v) {
  return fn->vals[v].type;
}

/* ---- text form: printer and parser (round-trip) ---- */
WF_IR_INTERNAL void wf_ir_print_func(const wf_func *fn, FILE *f);
WF_IR_INTERNAL void wf_ir_print(const wf_module *m, FILE *f);
/* Returns a malloc'd string (caller frees). */
WF_IR_INTERNAL char *wf_ir_to_string(const wf_module *m);
/* Parse IR text into a new module. On error returns NULL and writes
** "line:col: message" into err. */
WF_IR_INTERNAL wf_module *wf_ir_parse(const char *text, wf_types *T, char *err, size_t errsize);

/* ---- bounds checks (pass_bounds.c) ----
** Array accesses (LOAD, STORE, ATOMIC_*, VIEW) are bounds-checked unless
** bit k of their imm is set: index operand k (args[1 + k]) is known to be
** in bounds because a CHECK instruction placed by wf_pass_bounds covers it.
** CHECK %a, %first [, %last] checks a whole range at once; its imm packs
** the axis of %a (bits 0-3), flags and a constant offset (imm / 256):
**   launch (WF_CHECK_LAUNCH): one operand, a `tid d` value. Every thread of
**     the launch indexes axis with tid d + offset, so the backends check
**     offset .. dim[d] - 1 + offset once per launch (or chunk of threads).
**   range: %first, %last are a unit-step loop's bounds (counting down with
**     WF_CHECK_DOWN); when the loop runs, first + offset .. last + offset
**     must be in bounds. The error names the first index out of bounds in
**     the loop's order, as the unhoisted check would.
**   hoist (WF_CHECK_HOIST, with range): every thread runs this check with
**     the same operands (top level of the kernel, operands computed from
**     parameters and constants), so the backends may run it once per
**     launch (or chunk of threads) instead of once per thread.
** Printed generically: `check %a, %lo, %hi, 256` (offset 1, axis 0). */
#define WF_CHECK_LAUNCH 16
#define WF_CHECK_DOWN 32
#define WF_CHECK_HOIST 64
static inline int64_t wf_check_imm(int axis, int flags, int64_t offset) {
  return offset * 256 + (axis | flags);
}
static inline int wf_check_axis(int64_t imm) {
  return (int)(imm & 15);
}
static inline int64_t wf_check_offset(int64_t imm) {
  return (imm - (imm & 255)) / 256;
}
/* Marks accesses and places CHECKs in every kernel; a rerun first drops
** what an earlier run added, so the pass is idempotent. */
WF_IR_INTERNAL void wf_pass_bounds(wf_module *m);

/* ---- verifier and passes: each 0 on success, else writes err ---- */
WF_IR_INTERNAL int wf_ir_verify(wf_module *m, char *err, size_t errsize);
WF_IR_INTERNAL int wf_pass_inline(wf_module *m, char *err, size_t errsize);
WF_IR_INTERNAL void wf_pass_fold(wf_module *m);
WF_IR_INTERNAL void wf_pass_cse(wf_module *m);
WF_IR_INTERNAL void wf_pass_dce(wf_module *m);
/* The standard pipeline (inline, fold, cse, dce, bounds; verify in debug builds). */
WF_IR_INTERNAL int wf_ir_optimize(wf_module *m, char *err, size_t errsize);

/* ======================================================================
** additions (backward compatible with the declarations above)
** ====================================================================== */
/* The first interned struct called `name`, or NULL. */
WF_IR_INTERNAL const wf_type *wf_t_find_struct(wf_types *T, const char *name);
/* Like wf_b_inst but not linked into any block (passes move it later). */
WF_IR_INTERNAL wf_inst *wf_inst_new(wf_func *fn, wf_op op, int nargs, const wf_val *args, int nres,
                                    const wf_type *const *rtypes, int nblocks);
/* inst->blocks[k] = bl and bl->parent = inst. Builders may also fill
** inst->blocks[] directly: the verifier and passes call wf_func_fix_parents. */
WF_IR_INTERNAL void wf_inst_set_block(wf_inst *in, int k, wf_block *bl);
/* Recomputes block->parent and inst->parent links in the whole function. */
WF_IR_INTERNAL void wf_func_fix_parents(wf_func *fn);
/* Print one instruction (no nested blocks, no newline) as the printer does,
** with values numbered by their index: for messages. */
WF_IR_INTERNAL int wf_ir_snprint_inst(const wf_func *fn, const wf_inst *in, char *buf, size_t n);
/* The name of value v for messages: a parameter's (names[index]), or
** the path of struct fields taken from one ("m.state.x", written into
** buf); NULL for other values. */
WF_IR_INTERNAL const char *wf_ir_value_path(const wf_func *fn, wf_val v, const char *const *names,
                                            int nnames, char *buf, size_t n);

#endif
