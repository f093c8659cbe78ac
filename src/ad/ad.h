/*
** ad.h -- reverse-mode automatic differentiation on weft's IR (src/ad).
**
** Takes: an IR module. Gives: the same module with adjoint ("adj_") and
** tangent ("jvp_") kernels appended, still plain IR for both backends.
**
** wf_ad_kernel appends to a module the adjoint of one kernel. The adjoint
** kernel "adj_<name>" takes the primal parameters (in order), then one
** adjoint array per ARRAY parameter of the primal (same type). Scalar
** parameters get no adjoint (as in Warp: gradients with respect to scalar
** kernel arguments are not returned).
**
** "No gradient wanted" for an array is passed as an adjoint header whose
** data is NULL and whose shape[0] is 0: the adjoint kernel tests shape[0]
** once at entry and skips every access to that adjoint array.
**
** Semantics (Warp's): each thread of the adjoint kernel replays the forward
** computation of its thread (without side effects: stores, atomics, prints
** and debug traps are not redone), then runs the reverse sweep:
**
**   x = a[i]               ->  atomic_add(adj_a, i, adj(x))
**                              (a read of an element this thread stored
**                              earlier: adj(stored value) += adj(x))
**   a[i] = v               ->  adj(v) += adj_a[i]; adj_a[i] = 0
**                              (a[i].x = v: load, insert, store)
**   atomic_add(a, i, v)    ->  adj(v) += adj_a[i]   (the old value returned
**                              by the atomic carries no gradient)
**   atomic_min/max(a, i, v) -> adj(v) += adj_a[i] for each component of v
**                              equal to a[i] after the launch (the winner)
**
** A replayed read of an element the kernel overwrites later would see the
** new value; if the adjoint needs it, the transform fails (check.c).
**
** Control flow: an `if` is reversed by a reverse `if` on the same (replayed)
** condition. Loops are reversed iteration by iteration, last first; the
** loop-carried state at the start of iteration k is RECOMPUTED from the loop
** entry (checkpointed recomputation): O(1) extra memory per thread, and
** O(n^2) body evaluations for n iterations. A `for` loop whose reverse does
** not need the carried values (accumulators: s = s + f(i)) is reversed in
** O(n) without recomputation. See src/ad/ad.c for the details.
**
** Run after the front end's optimize (calls inlined), then run
** wf_ir_optimize on the module.
*/
#ifndef WF_AD_H
#define WF_AD_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

struct lua_State;

/* Appends the adjoint of m->funcs[kernel_index] as "adj_<name>" (or does
** nothing if the module already holds it). Returns 0, or -1 with
** "chunk:line: message" (or a plain message) in err. On error the module
** is left as it was. */
WF_IR_INTERNAL int wf_ad_kernel(wf_module *m, int kernel_index, char *err, size_t n);
/* The same, with the kernel's parameter names (names[i] may be NULL) for
** messages such as "overwrites an element of array 'x'". */
WF_IR_INTERNAL int wf_ad_kernel_named(wf_module *m, int kernel_index, const char *const *names,
                                      char *err, size_t n);

/* Custom gradients (Warp's func_grad / func_replay). The module may come
** straight from the front end, with its calls: wf_ad_kernel first inlines
** every call except those of a function f for which the module holds
** "f$grad" or "f$replay" (wf_ad_inline_plain). Such a kept call is
** replayed as a call of "f$replay" (or of f itself, which must then have
** no side effects) and reversed as
**     adj_a1, ..., adj_ak = call @"f$grad"(a1, ..., an, adj_r1, ..., adj_rm)
** where "f$grad" takes f's params then one adjoint per result (same
** types) and returns the adjoints of f's float-typed params, in order.
** Without "f$grad" (a replay function only), f's own body is reversed at
** the call (its replay inside runs without side effects, and a value it
** would re-read wrongly is an error, as in a kernel).
** wf_ir_optimize afterwards inlines these calls like any other. */
WF_IR_INTERNAL int wf_ad_inline_plain(wf_module *m, char *err, size_t n);

/* Appends the forward-mode (tangent) kernel "jvp_<name>" of
** m->funcs[kernel_index] (see jvp.c): the primal parameters, then one
** tangent array per array parameter. Same conventions as wf_ad_kernel. */
WF_IR_INTERNAL int wf_ad_jvp(wf_module *m, int kernel_index, char *err, size_t n);

/* Marks the array parameters p < n whose elements fn loads (loads[p] = 1)
** and writes with stores or atomics (writes[p] = 1), through views (check.c).
** On an optimized adjoint kernel, loads of its first n parameters (the
** primal arrays) are the primal values its gradient depends on. */
WF_IR_INTERNAL void wf_ad_param_uses(const wf_func *fn, int n, uint8_t *loads, uint8_t *writes);

/* The same for the arrays struct parameters p < n hold: on(ud, p, path,
** write) per load (write 0) or store/atomic (write 1) of such an array,
** path naming its field ("state.x"); repeats are the caller's to merge. */
typedef void (*wf_ad_held_fn)(void *ud, int param, const char *path, int write);
WF_IR_INTERNAL void wf_ad_held_uses(const wf_func *fn, int n, wf_ad_held_fn on, void *ud);

#endif
