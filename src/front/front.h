/*
** front.h -- the kernel compiler's front end: Lua kernel source -> AST ->
** typed lowering into the SSA IR of ir/ir.h.
**
** Takes: a Lua function (its source through the debug library, its
** upvalues and environment) and ir. Gives: a typed IR module
** (wf_front_compile), or a positioned Lua error.
**
**   source text --lex.c--> tokens --parse.c--> AST (wf_ast_*)
**   AST --lower.c (+ builtins.c, resolve.c)--> wf_module (typed SSA IR)
**
** Every AST node carries a line and column in its Lua chunk. All front-end
** memory lives in one arena (wf_arena) freed in one go after a compile,
** whether it succeeded or failed. User errors are raised as Lua errors
** "chunk:line: message\n<source line>\n<caret>" from inside a protected
** call (api.c), so the caller frees everything before re-raising.
*/
#ifndef WF_FRONT_H
#define WF_FRONT_H

#include <lua.h>
#include <lauxlib.h>

#include "ir/ir.h"
#include "util/arena.h"
#include "util/util.h"

/* ======================================================================
** arena
** ====================================================================== */
/* util/arena.h: wf_arena_new, wf_arena_alloc (zeroed; NULL on OOM), wf_arena_free */

/* ======================================================================
** source of one Lua function
** ====================================================================== */
typedef struct wf_src {
  const char *chunk; /* as Lua shows it (short_src), e.g. "spec/x_spec.lua" */
  const char *text;  /* whole chunk text */
  size_t len;
  int linedefined, lastlinedefined;
} wf_src;

/* ======================================================================
** lexer
** ====================================================================== */
enum {
  TK_EOF = 256,
  TK_NAME,
  TK_NUMBER,
  TK_STRING,
  /* keywords */
  TK_AND,
  TK_BREAK,
  TK_DO,
  TK_ELSE,
  TK_ELSEIF,
  TK_END,
  TK_FALSE,
  TK_FOR,
  TK_FUNCTION,
  TK_GOTO,
  TK_IF,
  TK_IN,
  TK_LOCAL,
  TK_NIL,
  TK_NOT,
  TK_OR,
  TK_REPEAT,
  TK_RETURN,
  TK_THEN,
  TK_TRUE,
  TK_UNTIL,
  TK_WHILE,
  /* multi-char symbols */
  TK_EQ,
  TK_NE,
  TK_LE,
  TK_GE,
  TK_CONCAT,
  TK_DOTS,
  TK_IDIV,
  TK_SHL,
  TK_SHR,
  TK_DBCOLON
};

typedef struct wf_token {
  int tok;
  int line, col;
  const char *str; /* TK_NAME, TK_STRING (arena, NUL-terminated) */
  size_t slen;
  double num;
  int isint; /* TK_NUMBER written without '.' or exponent (or hex) */
} wf_token;

struct wf_fctx;
typedef struct wf_lex {
  struct wf_fctx *C;
  const wf_src *src;
  size_t pos;
  int line;
  size_t linestart;
  wf_token t, ahead; /* current token and one lookahead */
  int has_ahead;
} wf_lex;

WF_INTERNAL void wf_lex_init(wf_lex *X, struct wf_fctx *C, const wf_src *src, size_t pos, int line);
WF_INTERNAL void wf_lex_next(wf_lex *X);
WF_INTERNAL int wf_lex_peek(wf_lex *X);
WF_INTERNAL const char *wf_tok_name(int tok);

/* ======================================================================
** AST
** ====================================================================== */
typedef enum wf_ek {
  E_NUM,
  E_TRUE,
  E_FALSE,
  E_NIL,
  E_STR,
  E_NAME,
  E_INDEX,
  E_FIELD,
  E_CALL,
  E_METHOD,
  E_BIN,
  E_UN,
  E_AND,
  E_OR,
  E_TABLE,
  E_PAREN,
  E_FUNC,
  E_VARARG,
  E_NATIVE /* made by the front end (native.c): native row `op` on args */
} wf_ek;

typedef struct wf_expr wf_expr;
typedef struct wf_stmt wf_stmt;

typedef struct wf_tfield { /* table constructor item: [key]=v, name=v or v */
  const char *name;        /* name = v */
  wf_expr *key;            /* [key] = v */
  wf_expr *value;
} wf_tfield;

struct wf_expr {
  wf_ek kind;
  int line, col;
  int op;           /* E_BIN/E_UN: token ('+', TK_EQ, TK_NOT, '#', '-') */
  double num;       /* E_NUM */
  int isint;        /* E_NUM */
  const char *name; /* E_NAME, E_FIELD, E_METHOD, E_STR */
  wf_expr *a, *b;   /* operands; E_INDEX obj/key; E_FIELD/E_CALL/E_METHOD obj */
  int nargs;        /* E_CALL, E_METHOD */
  wf_expr **args;
  int nfields; /* E_TABLE */
  wf_tfield *fields;
};

typedef enum wf_sk {
  S_LOCAL,
  S_ASSIGN,
  S_CALL,
  S_IF,
  S_FORNUM,
  S_WHILE,
  S_REPEAT,
  S_BREAK,
  S_RETURN,
  S_DO,
  S_FORIN, /* generic for over a geometry query: names, exprs[0] the call, body */
  S_GOTO,  /* goto names[0]: only to the label ending the enclosing loop (parse.c) */
  S_LABEL  /* ::names[0]::, removed from the end of a loop body into contlabel */
} wf_sk;

typedef struct wf_block_ast {
  int n;
  wf_stmt **s;
} wf_block_ast;

struct wf_stmt {
  wf_sk kind;
  int line, col;
  int nnames; /* S_LOCAL names; S_FORNUM: 1 */
  const char **names;
  int *namecols;
  int ntargets; /* S_ASSIGN */
  wf_expr **targets;
  int nexprs; /* S_LOCAL, S_ASSIGN, S_RETURN values; S_CALL: 1; S_FORNUM lo,hi[,step] */
  wf_expr **exprs;
  int nconds; /* S_IF: conds[i] -> blocks[i]; has_else: blocks[nconds]; S_WHILE/REPEAT: 1 */
  wf_expr **conds;
  wf_block_ast *blocks;
  int has_else;
  wf_block_ast body;        /* S_FORNUM, S_WHILE, S_REPEAT, S_DO */
  struct wf_loopmemo *memo; /* loops: what the body changes, per incoming bindings (lower.c) */
  const char *contlabel;    /* loops: the label ending the body (`goto continue`) */
};

typedef struct wf_funcast {
  int line, col;
  int nparams;
  const char **params;
  wf_block_ast body;
  int lastline;
} wf_funcast;

/* Parse the function of src that starts at linedefined and whose
** parameter names are pnames (may be NULL: any). When several functions
** on that line fit, the Lua function at stack index fnidx (0: none)
** decides by its bytecode; an error if it cannot. */
WF_INTERNAL wf_funcast *wf_parse_function(struct wf_fctx *C, const wf_src *src, int nparams,
                                          const char *const *pnames, int fnidx);

/* ======================================================================
** compile context
** ====================================================================== */
#define WF_FRONT_ENV_KEY "weft.front.env" /* registry: table set by front_setup */

typedef struct wf_fstate wf_fstate;

/* One specialized weft.func in the module: (Lua function, arg types) -> index. */
typedef struct wf_fspec {
  const void *fnptr;
  int nargs;
  const wf_type **argtypes;
  int index; /* in mod->funcs */
  struct wf_fspec *next;
} wf_fspec;

/* Where a weft.func being compiled was called: one entry per nesting level,
** innermost first, pushed around the callee's compile (resolve.c). An
** error in a builtin's body (a stdlib.lua weft.func) is reported at the
** user's call; one in the user's own weft.func at its line, followed by
** "called from chunk:line" for each call on the way to the kernel. */
typedef struct wf_callsite {
  const wf_src *src; /* the caller's source */
  int line, col;     /* of the call */
  const char *path;  /* the callee as written ("weft.lerp") */
  int builtin;       /* the callee is weft's own (the func object's _builtin) */
  struct wf_callsite *up;
} wf_callsite;

typedef struct wf_fctx {
  lua_State *L;
  wf_arena *A;
  wf_module *mod;
  wf_types *T;
  int envidx;  /* stack index: front env table (front_setup) */
  int keepidx; /* stack index: table keeping captured Lua values alive */
  int nkeep;
  int depsidx; /* stack index: the free names resolved (0: none kept) */
  int ndeps;
  wf_fstate *cur; /* function being lowered (innermost) */
  wf_fspec *specs;
  int depth;         /* nesting of func compiles (recursion guard) */
  wf_callsite *site; /* innermost weft.func call being compiled (NULL: the kernel) */
} wf_fctx;

/* Raise "chunk:line: message" with the source line and a caret at col,
** then a "called from chunk:line" line per enclosing weft.func call; inside
** a builtin's body, at the user's call instead (C->site). */
WF_INTERNAL void wf_front_error(wf_fctx *C, const wf_src *src, int line, int col, const char *fmt,
                                ...) __attribute__((format(printf, 5, 6), noreturn));
WF_INTERNAL char *wf_front_strdup(wf_fctx *C, const char *s, size_t n);
WF_INTERNAL void *wf_front_alloc(wf_fctx *C, size_t n); /* raises on OOM */

/* ---- resolve.c: Lua values -> types, classification ---- */
/* Convert the weft type table at stack index idx to a wf_type (NULL if it
** is not a type table). */
WF_INTERNAL const wf_type *wf_front_totype(wf_fctx *C, int idx);
/* Read the source of the Lua function at stack index idx. Raises a plain
** error (no position) when the function has no readable source. */
WF_INTERNAL void wf_front_getsrc(wf_fctx *C, int idx, wf_src *src);

/* ---- lower.c ---- */
/* Compile the decl at stack index declidx (with argtypes at argidx, or 0)
** into C->mod as its first function. */
WF_INTERNAL void wf_front_compile_kernel(wf_fctx *C, int declidx, int argidx);
/* The front end's entry: compile the kernel or weft.func declaration at
** stack index decl (argument types at index args, 0 = none; both
** absolute) into a new module, which the caller owns, and push the list of
** free names it resolved. Errors are Lua errors ("chunk:line: message"),
** raised after everything the compile made is freed. */
WF_INTERNAL wf_module *wf_front_compile(lua_State *L, int decl, int args);

#endif
