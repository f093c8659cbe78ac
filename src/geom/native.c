/*
** native.c -- the table of native builtins (native.h) as data, and the
** layouts the emitters and the front end rely on, checked here once.
*/
#include <stddef.h>

#include "geom/native.h"
#include "geom/query.h"

const wf_nativeinfo wf_native_tab[WF_NAT__COUNT] = WF_NATIVE_TABLE;

/* iterator rows: begin, then _next, then _get (the front end relies on it) */
#define WF_NAT_ITER_ORDER(q)                                                                       \
  _Static_assert(WF_NAT_##q##_next == WF_NAT_##q + 1 && WF_NAT_##q##_get == WF_NAT_##q + 2,        \
                 #q ": begin, _next, _get rows in a row")
WF_NAT_ITER_ORDER(mesh_query_aabb);
WF_NAT_ITER_ORDER(bvh_query_aabb);
WF_NAT_ITER_ORDER(bvh_query_ray);
WF_NAT_ITER_ORDER(hash_grid_query);
_Static_assert(sizeof(wf_hgrid) == 80, "wf_hgrid: DESC_SIZE in lua/weft/hashgrid.lua");
_Static_assert(sizeof(wf_hgrid_query) <= 288, "wf_hgrid_query fits the state column of its row");
_Static_assert(sizeof(wf_vol_v3) == 12, "volume_lookup_v returns a vec3f");
_Static_assert(sizeof(wf_giter) <= 288, "wf_giter fits the state column of its rows");
/* the result structs as the front end lays out WF_QP_T and WF_QR_T */
_Static_assert(sizeof(wf_gqp) == 20 && offsetof(wf_gqp, sign) == 4 && offsetof(wf_gqp, v) == 16,
               "mesh_query_point_t layout");
_Static_assert(sizeof(wf_gqr) == 36 && offsetof(wf_gqr, t) == 12 && offsetof(wf_gqr, normal) == 24,
               "mesh_query_ray_t layout");
_Static_assert(sizeof(wf_gnode) == 32, "wf_gnode: 32 bytes");
