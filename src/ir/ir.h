/*
** ir.h -- weft's typed SSA IR with structured control flow.
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
  uint8_t bits;      /* INT, FLOAT */
  uint8_t is_signed; /* INT */
  uint8_t rows, cols;      /* VEC: rows = n, cols = 1; MAT: rows x cols */
  uint8_t ndim;            /* ARRAY */
  const wf_type *elem;     /* VEC/MAT/QUAT/TRANSFORM: scalar; ARRAY: element */
  const char *name;        /* display name: "f32", "vec3f", struct name */
  uint32_t size, align;    /* C layout (arrays: size of a pointer) */
  int nfields;             /* STRUCT */
  const wf_field *fields;  /* STRUCT */
  int ncomp;               /* number of scalar components (VEC/MAT/QUAT/TRANSFORM) */
  int32_t lua_id;          /* type registry id on the Lua side, or -1 */
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
** opcodes: the one table. Columns:
**   name, text name, operands (-1 = variadic), results (-1 = variadic),
**   flags (WF_OPF_*).
** Expanded into the enum, the name table and the property table (ir.c).
** Derivative rules live beside each op in src/ad; a static check there
** fails the build when a WF_OPF_DIFF op has no rule.
** ====================================================================== */
#define WF_OPF_PURE 1   /* no side effects: CSE and DCE may touch it */
#define WF_OPF_DIFF 2   /* differentiable (float operands) */
#define WF_OPF_TERM 4   /* block terminator */
#define WF_OPF_REGION 8 /* owns blocks */
#define WF_OPF_MEM 16   /* reads or writes memory */
#define WF_OPF_CMP 32   /* comparison: result bool */

/* clang-format off */
#define WF_IRDEF(_) \
  /* constants and parameters */ \
  _(CONST,    "const",    0, 1, WF_OPF_PURE)            /* imm/fimm by type */ \
  _(PARAM,    "param",    0, 1, WF_OPF_PURE)            /* imm = index; only in printing */ \
  _(UNDEF,    "undef",    0, 1, WF_OPF_PURE)            /* zero of its type */ \
  /* arithmetic on scalars of one type */ \
  _(ADD,      "add",      2, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(SUB,      "sub",      2, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(MUL,      "mul",      2, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(DIV,      "div",      2, 1, WF_OPF_PURE|WF_OPF_DIFF) /* ints: trunc toward 0 */ \
  _(MOD,      "mod",      2, 1, WF_OPF_PURE|WF_OPF_DIFF) /* Lua %: sign of divisor */ \
  _(FLOORDIV, "floordiv", 2, 1, WF_OPF_PURE)           \
  _(NEG,      "neg",      1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(POW,      "pow",      2, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(MIN,      "min",      2, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(MAX,      "max",      2, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(ABS,      "abs",      1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(SIGN,     "sign",     1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(SQRT,     "sqrt",     1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(EXP,      "exp",      1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(LOG,      "log",      1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(SIN,      "sin",      1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(COS,      "cos",      1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(TAN,      "tan",      1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(ASIN,     "asin",     1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(ACOS,     "acos",     1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(ATAN,     "atan",     1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(ATAN2,    "atan2",    2, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(SINH,     "sinh",     1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(COSH,     "cosh",     1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(TANH,     "tanh",     1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(FLOOR,    "floor",    1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(CEIL,     "ceil",     1, 1, WF_OPF_PURE|WF_OPF_DIFF) \
  _(ROUND,    "round",    1, 1, WF_OPF_PURE|WF_OPF_DIFF) /* half away from zero */ \
  /* comparisons: operands of one scalar type, result bool */ \
  _(EQ,       "eq",       2, 1, WF_OPF_PURE|WF_OPF_CMP) \
  _(NE,       "ne",       2, 1, WF_OPF_PURE|WF_OPF_CMP) \
  _(LT,       "lt",       2, 1, WF_OPF_PURE|WF_OPF_CMP) \
  _(LE,       "le",       2, 1, WF_OPF_PURE|WF_OPF_CMP) \
  _(GT,       "gt",       2, 1, WF_OPF_PURE|WF_OPF_CMP) \
  _(GE,       "ge",       2, 1, WF_OPF_PURE|WF_OPF_CMP) \
  /* logic and bits: bool or integer operands */ \
  _(NOT,      "not",      1, 1, WF_OPF_PURE)            /* bool */ \
  _(BAND,     "band",     2, 1, WF_OPF_PURE)            /* bool and int */ \
  _(BOR,      "bor",      2, 1, WF_OPF_PURE)            \
  _(BXOR,     "bxor",     2, 1, WF_OPF_PURE)            \
  _(BNOT,     "bnot",     1, 1, WF_OPF_PURE)            \
  _(SHL,      "shl",      2, 1, WF_OPF_PURE)            \
  _(SHR,      "shr",      2, 1, WF_OPF_PURE)            /* logical for unsigned, arithmetic for signed */ \
  _(SELECT,   "select",   3, 1, WF_OPF_PURE|WF_OPF_DIFF) /* cond, a, b (any type) */ \
  _(CAST,     "cast",     1, 1, WF_OPF_PURE|WF_OPF_DIFF) /* scalar conversion to the result type */ \
  /* aggregates */ \
  _(AGG,      "agg",     -1, 1, WF_OPF_PURE|WF_OPF_DIFF) /* build from wf_t_arity components */ \
  _(EXTRACT,  "extract",  1, 1, WF_OPF_PURE|WF_OPF_DIFF) /* imm = component index */ \
  _(INSERT,   "insert",   2, 1, WF_OPF_PURE|WF_OPF_DIFF) /* agg, value; imm = index */ \
  /* arrays: args = array, ndim int indices (i32 or i64) [, value] */ \
  _(SHAPE,    "shape",    1, 1, WF_OPF_PURE)            /* imm = dim; result i32 */ \
  _(VIEW,     "view",     2, 1, WF_OPF_PURE)            /* array, index: peel dim 0 */ \
  _(LOAD,     "load",    -1, 1, WF_OPF_MEM|WF_OPF_DIFF) \
  _(STORE,    "store",   -1, 0, WF_OPF_MEM|WF_OPF_DIFF) \
  _(ATOMIC_ADD, "atomic_add", -1, 1, WF_OPF_MEM|WF_OPF_DIFF) /* returns old value */ \
  _(ATOMIC_MIN, "atomic_min", -1, 1, WF_OPF_MEM|WF_OPF_DIFF) \
  _(ATOMIC_MAX, "atomic_max", -1, 1, WF_OPF_MEM|WF_OPF_DIFF) \
  /* threads, randomness, printing */ \
  _(TID,      "tid",      0, 1, WF_OPF_PURE)            /* imm = dimension; result i32 */ \
  _(RNG_INIT, "rng_init", 2, 1, WF_OPF_PURE)            /* seed, offset (i32) -> rng */ \
  _(RANDF,    "randf",    1, 2, WF_OPF_PURE)            /* rng -> f32 in [0,1), next rng */ \
  _(RANDI,    "randi",    1, 2, WF_OPF_PURE)            /* rng -> i32, next rng */ \
  _(PRINT,    "print",   -1, 0, WF_OPF_MEM)             /* str = format, args scalars */ \
  _(TRAP,     "trap",     0, 0, WF_OPF_MEM)             /* str = message; imm 1 ("trap ... debug"): only debug builds run it */ \
  _(CHECK,    "check",   -1, 0, WF_OPF_MEM)             /* array, first[, last]: a hoisted bounds check (pass_bounds.c) */ \
  /* calls (removed by the inline pass before the backends run) */ \
  _(CALL,     "call",    -1, -1, 0)                     /* imm = callee index in module */ \
  /* structured control flow */ \
  _(IF,       "if",       1, -1, WF_OPF_REGION)         /* cond; blocks then, else */ \
  _(FOR,      "for",     -1, -1, WF_OPF_REGION)         /* lo, hi, step, inits...; blocks body */ \
  _(WHILE,    "while",   -1, -1, WF_OPF_REGION)         /* inits...; blocks before, after */ \
  /* terminators */ \
  _(YIELD,    "yield",   -1, 0, WF_OPF_TERM)            \
  _(COND,     "condition", -1, 0, WF_OPF_TERM)          /* cond, values... */ \
  _(RET,      "ret",     -1, 0, WF_OPF_TERM)
/* clang-format on */

typedef enum wf_op {
#define WF_OPENUM(e, s, na, nr, fl) WF_OP_##e,
  WF_IRDEF(WF_OPENUM)
#undef WF_OPENUM
      WF_OP__COUNT
} wf_op;

typedef struct wf_opinfo {
  const char *name;
  int8_t nargs, nres; /* -1: variadic */
  uint16_t flags;
} wf_opinfo;
WF_IR_INTERNAL extern const wf_opinfo wf_opinfo_tab[WF_OP__COUNT];
/* Name of an op; "?" for a value outside the table (a corrupt instruction
** must still print in an error message). */
static inline const char *wf_op_name(int op) {
  return (op >= 0 && op < WF_OP__COUNT) ? wf_opinfo_tab[op].name : "?";
}
#define wf_op_flags(op) (wf_opinfo_tab[(op)].flags)

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
WF_IR_INTERNAL wf_inst *wf_b_inst(wf_builder *b, wf_op op, int nargs, const wf_val *args,
                                  int nres, const wf_type *const *rtypes, int nblocks);
/* One-result helpers return the result value. */
WF_IR_INTERNAL wf_val wf_b_op1(wf_builder *b, wf_op op, const wf_type *rt, wf_val a);
WF_IR_INTERNAL wf_val wf_b_op2(wf_builder *b, wf_op op, const wf_type *rt, wf_val a, wf_val c);
WF_IR_INTERNAL wf_val wf_b_op3(wf_builder *b, wf_op op, const wf_type *rt, wf_val a, wf_val c,
                               wf_val d);
WF_IR_INTERNAL wf_val wf_b_consti(wf_builder *b, const wf_type *t, int64_t v); /* int/bool */
WF_IR_INTERNAL wf_val wf_b_constf(wf_builder *b, const wf_type *t, double v);
WF_IR_INTERNAL wf_val wf_b_extract(wf_builder *b, wf_val agg, int index);
WF_IR_INTERNAL wf_val wf_b_insert(wf_builder *b, wf_val agg, int index, wf_val v);
WF_IR_INTERNAL wf_val wf_b_agg(wf_builder *b, const wf_type *t, int n, const wf_val *comps);

/* ---- editing ---- */
WF_IR_INTERNAL void wf_inst_unlink(wf_inst *i);
WF_IR_INTERNAL void wf_inst_insert_before(wf_inst *pos, wf_inst *i);
WF_IR_INTERNAL void wf_block_append(wf_block *bl, wf_inst *i);
/* Replace every use of `from` with `to` inside fn. */
WF_IR_INTERNAL void wf_replace_uses(wf_func *fn, wf_val from, wf_val to);
static inline const wf_type *wf_vtype(const wf_func *fn, wf_val v) { return fn->vals[v].type; }

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
static inline int wf_check_axis(int64_t imm) { return (int)(imm & 15); }
static inline int64_t wf_check_offset(int64_t imm) { return (imm - (imm & 255)) / 256; }
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
WF_IR_INTERNAL wf_inst *wf_inst_new(wf_func *fn, wf_op op, int nargs, const wf_val *args,
                                    int nres, const wf_type *const *rtypes, int nblocks);
/* inst->blocks[k] = bl and bl->parent = inst. Builders may also fill
** inst->blocks[] directly: the verifier and passes call wf_func_fix_parents. */
WF_IR_INTERNAL void wf_inst_set_block(wf_inst *in, int k, wf_block *bl);
/* Recomputes block->parent and inst->parent links in the whole function. */
WF_IR_INTERNAL void wf_func_fix_parents(wf_func *fn);
/* Print one instruction (no nested blocks, no newline) as the printer does,
** with values numbered by their index: for messages. */
WF_IR_INTERNAL int wf_ir_snprint_inst(const wf_func *fn, const wf_inst *in, char *buf, size_t n);

#endif
