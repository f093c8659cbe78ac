/*
** lower.h -- shared internals of the typed lowering (lower.c, literal.c,
** flow.c, builtins.c, resolve.c): expression results, variables,
** per-function state.
**
** Locals are SSA bindings: `vars` maps each visible local name to its
** current IR value. Assignments rebind; `if` merges the bindings changed in
** either branch into the if's results; loops carry the bindings their body
** changes (found by lowering the body once into a scratch block first; the
** finding is remembered per loop statement and incoming bindings, and a
** loop met while probing an enclosing one is not lowered for real, so each
** loop body is lowered a bounded number of times however deep the nest).
** Pseudo-locals whose names start with '(' hold the break flag, the return
** flag and the return values, so the same merging handles early exits.
*/
#ifndef WF_FRONT_LOWER_H
#define WF_FRONT_LOWER_H

#include "front/front.h"

/* A number whose type is not decided yet: a literal, or `cond ? a : b` of
** such numbers (what `c and 1 or 0` gives). Like a literal it takes the
** type its context asks for (a store, the other operand, a typed local)
** and only then becomes SELECTs of constants of that type. cond is a bool
** value defined where the conditional was evaluated. A conditional whose
** branches had to be lowered into an `if` (they may trap or read memory)
** is a `dyn` leaf: the if's float64 result, exact for every literal, which
** is converted to the type the context asks for. Arithmetic with literals
** folds leaf by leaf (Lua's double arithmetic, as for two literals); where
** that is not possible (dyn leaves, too many leaves) it is kept as an op
** node and done in the type of the use, as for a typed operand. */
typedef struct wf_weak {
  wf_val cond;                 /* a node: its bool condition; WF_NOVAL for a leaf */
  wf_val dyn;                  /* a leaf: WF_NOVAL for a literal (num), else a float64 value */
  double num;                  /* a literal leaf */
  int isint;                   /* every literal below was written as an integer */
  int integral;                /* every value below is an integer */
  int op;                      /* an arithmetic node: '+' '-' '*' '/' '%' '^' on a, b; 'n': -a */
  const struct wf_weak *a, *b; /* a node: then, else (or the operands) */
  wf_loc loc;                  /* of the conditional: stamped on its SELECTs */
} wf_weak;

/* A value read from a number literal local that a loop typed (see wf_var). */
typedef struct wf_why {
  const char *name;
  int loopline;
  int hasnum; /* it held the literal num when the loop began */
  double num;
} wf_why;

/* What an expression evaluated to. */
typedef enum {
  RV_NONE,  /* no value (call with no results) */
  RV_VAL,   /* typed IR value */
  RV_LIT,   /* number literal, not yet typed (adapts to the other operand) */
  RV_WEAK,  /* conditional of literals (`c and 1 or 0`): weak, like RV_LIT */
  RV_STR,   /* string literal (print's format only) */
  RV_SHAPE, /* x.shape of an array value: only x.shape[k] is allowed */
  RV_LUA    /* compile-time Lua value: type, builtin, func, namespace */
} wf_rvkind;

/* LV_TYPEFN: a type constructor function of the Lua layer (weft.vector,
** weft.matrix), called at compile time with constant arguments. */
typedef enum { LV_TYPE, LV_BUILTIN, LV_FUNC, LV_NS, LV_TYPEFN } wf_lvkind;

typedef struct wf_rv {
  wf_rvkind kind;
  const wf_type *t; /* RV_VAL, RV_SHAPE (array type); LV_TYPE: the type */
  wf_val v;
  double num;               /* RV_LIT */
  int isint;                /* RV_LIT; RV_WEAK: every leaf is an integer literal */
  const wf_weak *weak;      /* RV_WEAK */
  const char *str;          /* RV_STR; LV_BUILTIN: builtin name; RV_LUA: dotted path */
  const struct wf_why *why; /* RV_VAL: where its type came from, for errors (or NULL) */
  wf_lvkind lk;
  int ref; /* RV_LUA: index in the keep table */
} wf_rv;

typedef struct wf_var {
  const char *name;
  wf_val v; /* WF_NOVAL: declared without a value and never assigned (or islit) */
  const wf_type *t;
  int is_param;
  /* `local s = 0.0`: the local holds an untyped number literal (num) that
  ** adapts to the other operand, like the literal itself. Assigning it an
  ** untyped number keeps it untyped (`s = s + 0.5`), and an `if` whose
  ** branches leave it untyped merges it into a weak conditional, as
  ** `c and a or b`; assigning a typed value gives it that type, and where
  ** control flow merges it with a typed value it becomes a constant of
  ** that type. A loop must carry it as a typed SSA value: assigned a
  ** number inside a loop it was declared outside of (index < loopbase), it
  ** takes the number's default type there (int32, or float32), as before;
  ** loopline then remembers that loop for error messages (wf_why). */
  int islit, litint;
  double num;
  const wf_weak *weak; /* islit: `local s = c and 1 or 0` holds this instead of num */
  int loopline;        /* a number local carried (so typed) by the loop at this line */
  int loophasnum;      /* ... which held the literal loopnum before that loop */
  double loopnum;
} wf_var;

#define WF_MAXRET 8

/* Components of a vector, rows and columns of a matrix: at most 64 each
** (weft.vector and weft.matrix in lua/weft/types.lua; wf_front_totype
** refuses larger types). Arrays of wf_val indexed by one of these live on
** the stack; a matrix's rows * cols scalars (up to 4096) and a struct's
** fields (any number) go in the arena. */
#define WF_MAX_COMP 64

struct wf_fstate {
  wf_fctx *C;
  wf_src src;
  wf_func *fn;
  wf_builder b;
  int is_kernel;
  int fnidx; /* keep-table index of the Lua function (upvalues, env) */
  const void *fnptr;
  wf_var *vars;
  int nvars, capvars;
  int retflag;            /* var index of "(ret)" */
  int retvars[WF_MAXRET]; /* var indices of "(r1)".. */
  int nret;               /* -1 until the first return */
  int brk;                /* var index of the innermost loop's "(break)", or -1 */
  int nbreaks, nreturns;  /* counters of lowered break/return statements */
  int cont;               /* var index of the innermost loop's "(cont)" (goto continue), or -1 */
  int nconts;             /* counter of lowered `goto continue` statements */
  int probing;            /* > 0 while a loop body is lowered into a scratch block */
  int loopbase;           /* vars below this index are declared outside the innermost loop */
  int loopline;           /* line of the innermost loop statement (0: none) */
  int edepth;             /* nesting of expressions being lowered (wf_lo_expr) */
  wf_fstate *parent;
};

/* ---- lower.c helpers used by builtins.c ---- */
WF_INTERNAL void wf_lo_err(wf_fstate *F, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));
WF_INTERNAL const char *wf_lo_tname(wf_fctx *C, const wf_type *t);
WF_INTERNAL wf_rv wf_lo_expr(wf_fstate *F, wf_expr *e);
/* Lower a call expression wanting up to `want` results into out[]. */
WF_INTERNAL int wf_lo_call(wf_fstate *F, wf_expr *e, int want, wf_rv *out);
/* Value of rv as an IR value of type want (NULL: literal default type). */
WF_INTERNAL wf_val wf_lo_value(wf_fstate *F, wf_rv *r, const wf_type *want, wf_expr *at);
/* An untyped number (RV_LIT or RV_WEAK)? */
#define wf_lo_isnum(r) ((r)->kind == RV_LIT || (r)->kind == RV_WEAK)
/* Every value the untyped number r can take is an integer. */
WF_INTERNAL int wf_lo_num_integral(const wf_rv *r);
/* The untyped number r converted to scalar type t as weft.T(r) would:
** truncated for ints, r ~= 0 for bool. */
WF_INTERNAL wf_val wf_lo_num_cast(wf_fstate *F, const wf_rv *r, const wf_type *t, wf_expr *at);
/* cond ? x : y for untyped numbers x and y: a weak number (RV_WEAK). */
WF_INTERNAL wf_rv wf_lo_weak_select(wf_fstate *F, wf_val cond, const wf_rv *x, const wf_rv *y);
WF_INTERNAL wf_rv wf_lo_mkval(wf_val v, const wf_type *t);
WF_INTERNAL wf_val wf_lo_cw2(wf_fstate *F, wf_op op, const wf_type *t, wf_val a, wf_val b,
                             int b_scalar);
WF_INTERNAL wf_val wf_lo_cw1(wf_fstate *F, wf_op op, const wf_type *t, wf_val a);
WF_INTERNAL wf_val wf_lo_const(wf_fstate *F, const wf_type *t, double v);
WF_INTERNAL wf_rv wf_lo_arith(wf_fstate *F, int op, wf_rv a, wf_rv b, wf_expr *at);
WF_INTERNAL int wf_lo_findvar(wf_fstate *F, const char *name);
WF_INTERNAL void wf_lo_assign_var(wf_fstate *F, int vi, wf_rv r, wf_expr *at);
WF_INTERNAL wf_val wf_lo_index_key(wf_fstate *F, wf_rv k, wf_expr *at);

/* ---- lower.c, shared with literal.c and flow.c ---- */
/* A copy of the bindings of the visible locals (F->vars). */
typedef struct wf_lo_snap {
  int n;
  wf_var *v;
} wf_lo_snap;
WF_INTERNAL wf_lo_snap wf_lo_take_snap(wf_fstate *F);
WF_INTERNAL void wf_lo_restore_snap(wf_fstate *F, wf_lo_snap s);
/* A new local bound to v (of type t); returns its index in F->vars. */
WF_INTERNAL int wf_lo_addvar(wf_fstate *F, const char *name, wf_val v, const wf_type *t);
/* A vector, matrix, quaternion, transform or struct type? */
WF_INTERNAL int wf_lo_is_agg(const wf_type *t);
/* r as a bool value; `what` names the operand in the message. */
WF_INTERNAL wf_val wf_lo_as_bool(wf_fstate *F, wf_rv r, wf_expr *at, const char *what);
/* not (break or return): whether execution continues here. */
WF_INTERNAL wf_val wf_lo_continuing(wf_fstate *F);
WF_INTERNAL void wf_lo_stmt(wf_fstate *F, wf_stmt *s);
/* The statements of a block from index `from` on, as a branch of wf_lo_if
** (arg: a wf_lo_rest). */
typedef struct wf_lo_rest {
  wf_block_ast *b;
  int from;
} wf_lo_rest;
WF_INTERNAL wf_rv wf_lo_br_rest(wf_fstate *F, void *arg);
/* The statements of b from index `from` on, in a scope of their own. */
WF_INTERNAL void wf_lo_stmts(wf_fstate *F, wf_block_ast *b, int from);

/* ---- literal.c: untyped numbers (RV_LIT, RV_WEAK) ---- */
WF_INTERNAL wf_rv wf_lo_mklit(double num, int isint);
/* An integer-valued double in an int type's range, as a constant's bits. */
WF_INTERNAL int64_t wf_lo_int_bits(double v);
/* Fail unless the number v fits int type t (a literal never wraps). */
WF_INTERNAL void wf_lo_check_int_fits(wf_fstate *F, double v, const wf_type *t, wf_expr *at);
/* A literal as a constant of type t, checked to fit. */
WF_INTERNAL wf_val wf_lo_lit_as(wf_fstate *F, wf_rv *r, const wf_type *t, wf_expr *at);
/* An arithmetic operation on two literals, folded with Lua's semantics. */
WF_INTERNAL wf_rv wf_lo_fold_lits(int op, wf_rv a, wf_rv b);
/* Weak numbers: a new node, a literal leaf, a conditional, a dyn leaf. */
WF_INTERNAL wf_weak *wf_lo_weak_new(wf_fstate *F);
WF_INTERNAL const wf_weak *wf_lo_weak_leaf(wf_fstate *F, double num, int isint);
WF_INTERNAL const wf_weak *wf_lo_weak_node(wf_fstate *F, wf_val cond, const wf_weak *a,
                                           const wf_weak *b);
WF_INTERNAL const wf_weak *wf_lo_weak_dyn(wf_fstate *F, wf_val v, int isint, int integral);
/* The weak number of an RV_LIT or RV_WEAK, and back (a leaf is an RV_LIT). */
WF_INTERNAL const wf_weak *wf_lo_weak_of(wf_fstate *F, const wf_rv *r);
WF_INTERNAL wf_rv wf_lo_weak_rv(const wf_weak *w);
WF_INTERNAL int wf_lo_weak_isleaf(const wf_weak *w);
/* w as a value of scalar type t, or as a bool (its leaves 0 or 1). */
WF_INTERNAL wf_val wf_lo_weak_as(wf_fstate *F, const wf_weak *w, const wf_type *t, wf_expr *at);
WF_INTERNAL wf_val wf_lo_weak_bool(wf_fstate *F, const wf_weak *w);
/* a op b for untyped numbers, one weak (NULL: a comparison too big to
** fold), and -w. */
WF_INTERNAL const wf_weak *wf_lo_weak_binop(wf_fstate *F, int op, const wf_rv *a, const wf_rv *b);
WF_INTERNAL const wf_weak *wf_lo_weak_neg(wf_fstate *F, const wf_weak *w);
/* op(a[, b]) for a scalar builtin op of the table (sqrt, max, ...) on weak
** numbers, done at the type of the use; an op node whose op is
** WF_WEAK_CALL + the table op. isint, integral: of the result. */
#define WF_WEAK_CALL 1024
WF_INTERNAL const wf_weak *wf_lo_weak_call(wf_fstate *F, int op, const wf_weak *a, const wf_weak *b,
                                           int isint, int integral);

/* ---- flow.c: control-flow merging ---- */
typedef wf_rv (*wf_lo_branch_fn)(wf_fstate *F, void *arg);
/* if cond then thenf(targ) else elsef(earg) (NULL: nothing), merging the
** bindings either branch changes. want_value: 0 none; 1 the branches'
** values as the result; 2 also two untyped numbers, as a weak number. */
WF_INTERNAL wf_rv wf_lo_if(wf_fstate *F, wf_val cond, wf_lo_branch_fn thenf, void *targ,
                           wf_lo_branch_fn elsef, void *earg, int want_value, wf_expr *at);
/* `a and b`, `a or b`, `c and x or y`. */
WF_INTERNAL wf_rv wf_lo_andor(wf_fstate *F, wf_expr *e);
/* Numeric for; while (is_repeat 0) or repeat-until (1). */
WF_INTERNAL void wf_lo_for(wf_fstate *F, wf_stmt *s);
WF_INTERNAL void wf_lo_while(wf_fstate *F, wf_stmt *s, int is_repeat);
/* The statements of a for or while loop's body, with its "(cont)" flag
** (false at the start of each pass) when it ends in a `goto` label. */
WF_INTERNAL void wf_lo_loop_body(wf_fstate *F, wf_stmt *s);
/* The value of local x where it merges into type t. */
WF_INTERNAL wf_val wf_lo_var_value(wf_fstate *F, wf_var *x, const wf_type *t);

/* ---- native.c: native builtins (src/geom/native.h) ---- */
/* The public native row named `name`, or -1. */
WF_INTERNAL int wf_nat_find(const char *name);
/* A call of builtin `name` that is native row `row`. */
WF_INTERNAL int wf_nat_call(wf_fstate *F, int row, const char *name, wf_expr *call, wf_rv *out);
/* An E_NATIVE expression (made by wf_lo_forin). */
WF_INTERNAL wf_rv wf_lo_native(wf_fstate *F, wf_expr *e);
/* for f in weft.<query>(...) do ... end */
WF_INTERNAL void wf_lo_forin(wf_fstate *F, wf_stmt *s);

/* ---- builtins.c ---- */
/* Lower a call to builtin `name`; returns the number of results in out. */
WF_INTERNAL int wf_bi_call(wf_fstate *F, const char *name, wf_expr *call, int want, wf_rv *out);
/* core.builtin_ops: the names of the op table's builtins (a Lua table). */
WF_INTERNAL int wf_bi_names(lua_State *L);
/* Construct or cast with a type used as a function: T(args...). */
WF_INTERNAL int wf_bi_construct(wf_fstate *F, const wf_type *t, wf_expr *call, wf_rv *out);
/* q v q^-1 for a quaternion q of type qt and a vec3 v of type vt. */
WF_INTERNAL wf_val wf_bi_quat_rotate(wf_fstate *F, const wf_type *qt, wf_val q, const wf_type *vt,
                                     wf_val v);

/* ---- luamath.c ---- */
/* Lower a call of LuaJIT's math.rad, deg, ldexp, frexp, modf, fmod or
** two-argument log, of weft.idiv, or of a scalar math builtin on untyped
** numbers; -1 when the builtin's own lowering is to go on (with *call
** perhaps rewritten to read its arguments, lowered once, from locals). */
WF_INTERNAL int wf_bi_luamath(wf_fstate *F, const char *name, wf_expr **call, wf_rv *out);

/* ---- resolve.c ---- */
/* Resolve a free name (upvalue, then environment) of F's Lua function. */
WF_INTERNAL wf_rv wf_res_name(wf_fstate *F, const char *name, wf_expr *at);
/* Field `name` of a compile-time Lua namespace value. */
WF_INTERNAL wf_rv wf_res_field(wf_fstate *F, wf_rv ns, const char *name, wf_expr *at);
/* Push the kept Lua value of r. */
WF_INTERNAL void wf_res_push(wf_fctx *C, int ref);
/* Store the value on top of the stack in the keep table; returns its ref (pops). */
WF_INTERNAL int wf_res_keep(wf_fctx *C);
/* Call a weft.func object (LV_FUNC) with the call's arguments. */
WF_INTERNAL int wf_res_callfunc(wf_fstate *F, wf_rv fobj, wf_expr *call, int want, wf_rv *out);
/* Compile the Lua function at stack index fi as module function `name`
** (parameter types pt[0..n)) unless the module has one by that name, for
** the call at `at` of path; -1 if it does not take n parameters. */
WF_INTERNAL int wf_res_auxfunc(wf_fstate *F, int fi, const char *name, int n,
                               const wf_type *const *pt, const char *path, wf_expr *at);
/* weft.vector(64, weft.int32) in a kernel: the type, made at compile time
** from number literals and types (an LV_TYPE value). */
WF_INTERNAL wf_rv wf_res_calltypefn(wf_fstate *F, wf_rv fobj, wf_expr *call);
/* Lower the body of a Lua function into a new IR function (kernel or func). */
WF_INTERNAL wf_func *wf_lo_function(wf_fctx *C, int fnref, const char *name, int is_kernel,
                                    int nparams, const wf_type *const *ptypes,
                                    const char *const *pnames, const wf_src *src);

#endif
