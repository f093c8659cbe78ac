/*
** native.h -- the table of native geometry builtins: functions written once
** in C (src/geom/query.h), compiled into libweft for the CPU backend and
** embedded into the CUDA C the cuda backend emits, so both run the same
** code. Kernels reach them through one IR op, WF_OP_NATIVE, whose imm is a
** row of this table.
**
** Plain data, no includes: the IR verifier, the front end, both emitters
** and the JIT's symbol table expand it.
**
** Row: _(name, kind, flags, state, res, args, defaults, adj, tan)
**   name      the builtin's name (weft.<name> in kernels, unless
**             WF_NATF_INTERNAL) and the C function wf_nat_<name>
**   kind      the object kind its first argument's id must be (WF_GEOM_*,
**             checked against the live objects in debug mode), or 0
**   flags     WF_NATF_*
**   state     bytes of per-query state (iterator rows: the begin call gets
**             a fresh, 16-byte aligned block; its result is the handle)
**   res, args type specs (below); args one letter per argument
**   defaults  values of trailing optional float arguments, "" if none:
**             "2,0.5" makes the last two optional
**   adj       the row computing the adjoint (args..., adjoint of the
**             result) as a side effect (it accumulates into the object's
**             gradient buffers), or NONE
**   tan       the row giving the result's tangent from the primal
**             arguments (forward mode: it reads the object's tangent
**             buffers, which weft.jvp points at the tangents given for the
**             object's arrays), or NONE
**
** Type specs: b bool, i int32, u uint64, f float32, v vec3f, "" none; a
** struct result is "{field:spec,...}" (interned as struct <name>_t).
**
** The C ABI of wf_nat_<name> (query.h implements it):
**   void wf_nat_<name>([void *state,] void *res, const void *arg0, ...)
** every value in its C layout (src/ir/types.c): res receives the result
** (NULL when there is none), argK points at argument K.
**
** Iterating queries (`for f in weft.mesh_query_aabb(id, lo, hi) do`) take
** three consecutive rows: <q> (begin: fills the state, returns the handle),
** <q>_next (handle -> bool: advanced to the next candidate?) and <q>_get
** (handle -> the candidate). The front end lowers the loop to
**   local h = q(args); while q_next(h) do local f = q_get(h) ... end
*/
#ifndef WF_GEOM_NATIVE_H
#define WF_GEOM_NATIVE_H

/* object kinds (the registry of live objects, src/runtime/geom_registry.c) */
#define WF_GEOM_MESH 1
#define WF_GEOM_BVH 2
#define WF_GEOM_HASHGRID 3
#define WF_GEOM_VOLUME 4

/* What a debug-mode launch sees of that registry (abi.h's ctx->geom
** points at one): the kind of a live id, 0 if it is none. The registry
** lives in the runtime, above the backends, so it hands them this
** function instead of its header. */
typedef struct wf_geom_ids {
  int (*kind)(const struct wf_geom_ids *ids, unsigned long long id);
} wf_geom_ids;

/* flags */
#define WF_NATF_INTERNAL 1 /* not a builtin (iterator steps, adjoints) */
#define WF_NATF_ITER 2     /* the begin row of an iterating query */
#define WF_NATF_STEP 4     /* float results piecewise constant: zero gradient */

/* Gradients. A row's float results get theirs from its adj row, or else
** from a "<name>$diff" function the front end compiles beside the kernel
** from lua/weft/geom.lua's P.native_diff[name] (the float fields of the
** result recomputed in kernel code from the arguments, the result and the
** mesh's points; src/ad/rules.c reverses it in the native's place), or
** are step functions (WF_NATF_STEP). A row with none of the three whose
** float results depend on a float argument or on a mesh's points makes
** autodiff fail at the call rather than give a zero gradient. */
#define WF_NAT_DIFF_SUFFIX "$diff"

#define WF_QP_T "{result:b,sign:f,face:i,u:f,v:f}"
/* the 8 corners of a volume cell (src/geom/volume.h, wf_vol_corners) */
#define WF_VCF_T "{c0:f,c1:f,c2:f,c3:f,c4:f,c5:f,c6:f,c7:f}"
#define WF_VCV_T "{c0:v,c1:v,c2:v,c3:v,c4:v,c5:v,c6:v,c7:v}"
#define WF_QR_T "{result:b,sign:f,face:i,t:f,u:f,v:f,normal:v}"

/* clang-format off */
#define WF_NATIVEDEF(_) \
  /* meshes: closest points (sign by ray parity, none, normal, winding number) */ \
  _(mesh_query_point,          WF_GEOM_MESH, 0, 0, WF_QP_T, "uvf", "", NONE, NONE) \
  _(mesh_query_point_no_sign,  WF_GEOM_MESH, 0, 0, WF_QP_T, "uvf", "", NONE, NONE) \
  _(mesh_query_point_sign_normal, WF_GEOM_MESH, 0, 0, WF_QP_T, "uvff", "0.001", NONE, NONE) \
  _(mesh_query_point_sign_winding_number, WF_GEOM_MESH, 0, 0, WF_QP_T, "uvfff", "2,0.5", NONE, NONE) \
  _(mesh_query_furthest_point_no_sign, WF_GEOM_MESH, WF_NATF_STEP, 0, WF_QP_T, "uvf", "", NONE, NONE) \
  _(mesh_query_ray,            WF_GEOM_MESH, 0, 0, WF_QR_T, "uvvf", "", NONE, NONE) \
  _(mesh_query_aabb,           WF_GEOM_MESH, WF_NATF_ITER, 288, "u", "uvv", "", NONE, NONE) \
  _(mesh_query_aabb_next,      0, WF_NATF_INTERNAL, 0, "b", "u", "", NONE, NONE) \
  _(mesh_query_aabb_get,       0, WF_NATF_INTERNAL, 0, "i", "u", "", NONE, NONE) \
  /* meshes: element access (the eval builtins compose these: lua/weft/geom.lua) */ \
  _(mesh_get_point,            WF_GEOM_MESH, 0, 0, "v", "ui", "", mesh_get_point_adj, mesh_get_point_tan) \
  _(mesh_get_point_adj,        WF_GEOM_MESH, WF_NATF_INTERNAL, 0, "", "uiv", "", NONE, NONE) \
  _(mesh_get_point_tan,        WF_GEOM_MESH, WF_NATF_INTERNAL, 0, "v", "ui", "", NONE, NONE) \
  _(mesh_get_velocity,         WF_GEOM_MESH, 0, 0, "v", "ui", "", mesh_get_velocity_adj, mesh_get_velocity_tan) \
  _(mesh_get_velocity_adj,     WF_GEOM_MESH, WF_NATF_INTERNAL, 0, "", "uiv", "", NONE, NONE) \
  _(mesh_get_velocity_tan,     WF_GEOM_MESH, WF_NATF_INTERNAL, 0, "v", "ui", "", NONE, NONE) \
  _(mesh_get_index,            WF_GEOM_MESH, 0, 0, "i", "ui", "", NONE, NONE) \
  _(mesh_eval_face_normal,     WF_GEOM_MESH, 0, 0, "v", "ui", "", NONE, NONE) \
  /* bounding volume hierarchies over boxes */ \
  _(bvh_query_aabb,            WF_GEOM_BVH, WF_NATF_ITER, 288, "u", "uvv", "", NONE, NONE) \
  _(bvh_query_aabb_next,       0, WF_NATF_INTERNAL, 0, "b", "u", "", NONE, NONE) \
  _(bvh_query_aabb_get,        0, WF_NATF_INTERNAL, 0, "i", "u", "", NONE, NONE) \
  _(bvh_query_ray,             WF_GEOM_BVH, WF_NATF_ITER, 288, "u", "uvv", "", NONE, NONE) \
  _(bvh_query_ray_next,        0, WF_NATF_INTERNAL, 0, "b", "u", "", NONE, NONE) \
  _(bvh_query_ray_get,         0, WF_NATF_INTERNAL, 0, "i", "u", "", NONE, NONE) \
  /* sparse volumes (src/geom/volume.h; the samplers: lua/weft/volume.lua) */ \
  _(volume_lookup_f,           WF_GEOM_VOLUME, 0, 0, "f", "uiii", "", NONE, NONE) \
  _(volume_lookup_i,           WF_GEOM_VOLUME, 0, 0, "i", "uiii", "", NONE, NONE) \
  _(volume_lookup_v,           WF_GEOM_VOLUME, 0, 0, "v", "uiii", "", NONE, NONE) \
  _(volume_lookup_index,       WF_GEOM_VOLUME, 0, 0, "i", "uiii", "", NONE, NONE) \
  _(volume_cell_f,             WF_GEOM_VOLUME, 0, 0, WF_VCF_T, "uiii", "", NONE, NONE) \
  _(volume_cell_v,             WF_GEOM_VOLUME, 0, 0, WF_VCV_T, "uiii", "", NONE, NONE) \
  _(volume_transform_row,      WF_GEOM_VOLUME, 0, 0, "v", "ui", "", NONE, NONE) \
  /* hash grids (src/geom/hashgrid.h) */ \
  _(hash_grid_query,           WF_GEOM_HASHGRID, WF_NATF_ITER, 288, "u", "uvf", "", NONE, NONE) \
  _(hash_grid_query_next,      0, WF_NATF_INTERNAL, 0, "b", "u", "", NONE, NONE) \
  _(hash_grid_query_get,       0, WF_NATF_INTERNAL, 0, "i", "u", "", NONE, NONE) \
  _(hash_grid_point_id,        WF_GEOM_HASHGRID, 0, 0, "i", "ui", "", NONE, NONE) \
  /* the nested form of the hash grid loop (src/front/native.c) */ \
  _(hash_grid_query_slice,     0, WF_NATF_INTERNAL, 0, "b", "u", "", NONE, NONE) \
  _(hash_grid_query_first,     0, WF_NATF_INTERNAL, 0, "i", "u", "", NONE, NONE) \
  _(hash_grid_query_last,      0, WF_NATF_INTERNAL, 0, "i", "u", "", NONE, NONE) \
  _(hash_grid_query_id,        0, WF_NATF_INTERNAL, 0, "i", "ui", "", NONE, NONE)
/* clang-format on */

typedef enum wf_native {
#define WF_NATENUM(name, kind, fl, state, res, args, defs, adj, tan) WF_NAT_##name,
  WF_NATIVEDEF(WF_NATENUM)
#undef WF_NATENUM
      WF_NAT__COUNT,
  WF_NAT_NONE = -1
} wf_native;

typedef struct wf_nativeinfo {
  const char *name;
  int kind, flags, state;
  const char *res, *args, *defaults;
  int adj; /* row or WF_NAT_NONE */
  int tan; /* row or WF_NAT_NONE */
} wf_nativeinfo;

#define WF_NATINFO(name, kind, fl, state, res, args, defs, adj, tan)                               \
  {#name, kind, fl, state, res, args, defs, WF_NAT_##adj, WF_NAT_##tan},
#define WF_NATIVE_TABLE                                                                            \
  { WF_NATIVEDEF(WF_NATINFO) }

/* The table (src/geom/native.c). */
__attribute__((visibility("hidden"))) extern const wf_nativeinfo wf_native_tab[WF_NAT__COUNT];

/* Number of arguments of a row's C function (the args spec's letters). */
static inline int wf_native_nargs(const wf_nativeinfo *ni) {
  int n = 0;
  while (ni->args[n])
    n++;
  return n;
}

#endif
