/*
** inline_bc.c -- the volume, hash grid, mesh and BVH builtins as LLVM
** bitcode: built by clang at build time (CMakeLists.txt, when a clang of
** the JIT's LLVM version is found) and linked into every CPU kernel module
** that calls them (src/cpu/jit.c), so they inline into the kernel and
** compile for the host's CPU instead of being calls into libweft. Not
** part of libweft.
**
** WF_GEOM_FN and WF_GN (query.h's wf_nat_* functions) are empty here:
** those functions are external definitions, which the JIT makes internal
** after linking (unused ones are dropped).
*/
#define WF_GN
#define WF_GEOM_FN
#define WF_HOST_SHIM /* the kernel side only */
#include "geom/hashgrid.h"
#include "geom/volume.h"
#include "geom/query.h"
