/*
** query.h -- the geometry queries kernels call, written once: libweft
** compiles this file for the CPU backend (src/geom/native.c), and the cuda
** backend embeds it into the CUDA C it emits (cmake/embed.cmake), so both
** backends run the same code. Plain C99 that is also CUDA C++: no libc but
** math (sqrtf, fabsf), no stdint.h (int is 32 bits, long long 64), no
** allocation; recursion is replaced by fixed-size stacks.
**
** An object's id (the uint64 kernels receive) is the address of its
** descriptor: wf_gmesh for meshes, wf_gboxes for Bvh objects. Both hold a
** wf_gbvh over their primitives (faces, boxes): Bvh objects a binary tree,
** meshes the same tree 4-wide (wf_gnode4 below; nodes is NULL):
**
**   wf_gnode (32 bytes)  lo[3] a | hi[3] b
**     inner node: a = left child, b = right child (both after it)
**     leaf:       a = first slot in items[], b = -(number of items)
**   items[k]: the primitive in slot k (leaves own consecutive slots)
**
** Node 0 is the root, node 1 a pad (children come in pairs at even
** indices, a cache line each); every child has a larger index than its
** parent, so a refit visits the nodes backwards (src/geom/bvh.c builds
** and refits).
**
** The wf_nat_* functions at the end implement the rows of
** src/geom/native.h with its C ABI (a result pointer, argument pointers).
** An id of 0 is the null object: queries miss and reads give zeros (the
** debug-mode check of a bad id passes 0 on after reporting).
*/
#ifndef WF_GEOM_QUERY_H
#define WF_GEOM_QUERY_H

#if defined(__CUDACC__)
#define WF_G static __device__ inline
#else
#include <math.h>
#define WF_G static inline
#if defined(__GNUC__)
#define WF_GPREFETCH(p) __builtin_prefetch(p)
#endif
#endif

/* the builtins themselves (wf_nat_*): src/geom/inline_bc.c makes them
** external definitions, for the CPU JIT to link and inline as bitcode */
#ifndef WF_GN
#define WF_GN WF_G
#endif

#define WF_GSTACK 64 /* traversal stack: depth bound of the built trees */

/* Counters of a walk's steps (WF_GCOUNT(node), WF_GCOUNT(leaf), and
** WF_GCOUNT(few): visits with at most one lane to go on to): nothing,
** unless a probe defines them (bench/mesh_visits.c). */
#ifndef WF_GCOUNT
#define WF_GCOUNT(what) ((void)0)
#endif

typedef struct wf_g3 {
  float x, y, z;
} wf_g3;

typedef struct wf_gnode {
  float lo[3];
  int a;
  float hi[3];
  int b;
} wf_gnode;

/* fast winding numbers: per node, the area-weighted normal sum of its
** faces (a dipole at the area-weighted centroid c) and the radius r of a
** ball around c holding them */
typedef struct wf_gwind {
  float c[3], n[3], r, pad;
} wf_gwind;

/* 4-wide nodes (meshes; src/geom/bvh4.c collapses the binary tree into
** them): the boxes of 4 children as rows of lanes, so that the 4 slab tests
** or box distances are plain loops over the lanes, which compilers
** vectorize. child[j] > 0: a wide node; < 0: a leaf of count[j] slots from
** ~child[j]; 0: an empty lane (node 0, the root, is no one's child; the
** lanes in use come first). */
typedef struct wf_gnode4 {
  float lo[3][4], hi[3][4];
  int child[4], count[4];
} wf_gnode4;

/* A bound on the surface under each lane of a wide node (meshes), for
** point queries, where the boxes of a curved surface's patches are loose
** (a patch at 45 degrees to the axes fills a box as thick as it is
** wide): a unit normal n and the half-thickness t of a slab across n
** through the centre o of the lane's box that holds the lane's
** triangles. They lie in the ball around o of the box's half diagonal r
** too, so in the cylinder of radius r and height 2 t around the axis
** through o along n, whose distance from a point bounds theirs
** (gdisc4_dist2). Lanes with no normal (degenerate faces, or normals that
** cancel) have some n and t = r. One cache line per wide node. */
typedef struct wf_gdisc4 {
  float n[3][4], t[4];
} wf_gdisc4;

typedef struct wf_gbvh {
  const wf_gnode *nodes;
  const int *items;
  const wf_gwind *wind;  /* per wide lane; NULL unless the mesh supports winding numbers */
  const wf_gnode4 *wide; /* meshes: the tree 4-wide (every mesh query walks it) */
  const wf_gdisc4 *disc; /* meshes: per wide node, the bounds of its lanes' surface */
  int nnodes, nitems;
  int nwide, pad;
} wf_gbvh;

typedef struct wf_gmesh {
  int kind; /* WF_GEOM_MESH */
  int npoints, nfaces, pad;
  const wf_g3 *points;
  const wf_g3 *velocities; /* NULL: none */
  const int *indices;      /* 3 per face */
  const float *tris;       /* the triangles in leaf order, and bounds (gtri_at) */
  wf_g3 *points_grad;      /* adjoints of mesh_get_point (NULL: none) */
  wf_g3 *velocities_grad;
  const wf_g3 *points_tan; /* tangents of mesh_get_point (weft.jvp; NULL: zero) */
  const wf_g3 *velocities_tan;
  wf_gbvh bvh;
} wf_gmesh;

typedef struct wf_gboxes {
  int kind; /* WF_GEOM_BVH */
  int n, pad0, pad1;
  const wf_g3 *lowers, *uppers;
  wf_gbvh bvh;
} wf_gboxes;

/* ---- small vector math ---- */
WF_G wf_g3 g3(float x, float y, float z) {
  wf_g3 r;
  r.x = x;
  r.y = y;
  r.z = z;
  return r;
}
WF_G wf_g3 g3sub(wf_g3 a, wf_g3 b) {
  return g3(a.x - b.x, a.y - b.y, a.z - b.z);
}
WF_G wf_g3 g3add(wf_g3 a, wf_g3 b) {
  return g3(a.x + b.x, a.y + b.y, a.z + b.z);
}
WF_G wf_g3 g3mul(wf_g3 a, float s) {
  return g3(a.x * s, a.y * s, a.z * s);
}
WF_G float g3dot(wf_g3 a, wf_g3 b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}
WF_G wf_g3 g3cross(wf_g3 a, wf_g3 b) {
  return g3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}
WF_G float g3comp(wf_g3 a, int k) {
  return k == 0 ? a.x : k == 1 ? a.y : a.z;
}
WF_G wf_g3 g3norm(wf_g3 a) {
  float l = sqrtf(g3dot(a, a));
  return l > 0.0f ? g3mul(a, 1.0f / l) : g3(0.0f, 0.0f, 0.0f);
}
WF_G float gmin(float a, float b) {
  return a < b ? a : b;
}
WF_G float gmax(float a, float b) {
  return a > b ? a : b;
}

/* ---- lanes ----
** The leaf loops test WF_GL triangles at once and the wide nodes' box
** tests take their 4 lanes WF_GL at a time. On the CPU a wf_gl is a
** vector of 4 floats (GCC and clang vector extensions: plain IR vectors,
** which the JIT compiles for the host's vector units once the builtins
** are inlined into a kernel); in CUDA C and its host build (WF_SHIM_H)
** it is one float, and the same code is the scalar loop. Each lane does
** the scalar code's operations in its order, so every width gives the
** same floats (WF_GSCALAR forces one lane on the CPU, for tests).
** Comparisons give masks (wf_glm: zero or not per lane; combine them
** with & only), and glsel stands in for ?:, which C lacks for vectors. */
#if !defined(__CUDACC__) && !defined(WF_SHIM_H) && !defined(WF_GSCALAR) &&                         \
    (defined(__GNUC__) || defined(__clang__))
#define WF_GL 4
typedef float wf_gl __attribute__((vector_size(16)));
typedef int wf_glm __attribute__((vector_size(16)));
WF_G wf_gl glk(float k) {
  wf_gl v = {k, k, k, k};
  return v;
}
WF_G wf_glm glmk(int k) {
  wf_glm v = {k, k, k, k};
  return v;
}
WF_G wf_glm glidx(void) {
  wf_glm v = {0, 1, 2, 3};
  return v;
}
WF_G wf_gl glsel(wf_glm m, wf_gl a, wf_gl b) {
  return (wf_gl)((m & (wf_glm)a) | (~m & (wf_glm)b));
}
WF_G wf_gl glload(const float *p) {
  wf_gl v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
WF_G void glstore(float *p, wf_gl v) {
  __builtin_memcpy(p, &v, sizeof v);
}
/* lane i of v (i < WF_GL) */
WF_G float gllane(wf_gl v, int i) {
  return v[i];
}
WF_G void glset(wf_gl *v, int i, float x) {
  (*v)[i] = x;
}
WF_G wf_glm glbits(wf_gl v) {
  return (wf_glm)v;
}
WF_G int glmlane(wf_glm v, int i) {
  return v[i];
}
/* square roots of the lanes (of non-negative values: no errno to set) */
WF_G wf_gl glsqrt(wf_gl v) {
#if defined(__SSE__)
  return (wf_gl)__builtin_ia32_sqrtps(v);
#else
  for (int l = 0; l < WF_GL; l++)
    v[l] = sqrtf(v[l]);
  return v;
#endif
}
#else
#define WF_GL 1
typedef float wf_gl;
typedef int wf_glm;
WF_G wf_gl glk(float k) {
  return k;
}
WF_G wf_glm glmk(int k) {
  return k;
}
WF_G wf_glm glidx(void) {
  return 0;
}
WF_G wf_gl glsel(wf_glm m, wf_gl a, wf_gl b) {
  return m ? a : b;
}
WF_G wf_gl glload(const float *p) {
  return *p;
}
WF_G void glstore(float *p, wf_gl v) {
  *p = v;
}
WF_G float gllane(wf_gl v, int i) {
  return (void)i, v;
}
WF_G void glset(wf_gl *v, int i, float x) {
  (void)i, *v = x;
}
WF_G wf_glm glbits(wf_gl v) {
  union {
    float f;
    int i;
  } b;
  b.f = v;
  return b.i;
}
WF_G int glmlane(wf_glm v, int i) {
  return (void)i, v;
}
WF_G wf_gl glsqrt(wf_gl v) {
  return sqrtf(v);
}
#endif
WF_G wf_gl glmin(wf_gl a, wf_gl b) {
  return glsel(a < b, a, b);
}
WF_G wf_gl glmax(wf_gl a, wf_gl b) {
  return glsel(a > b, a, b);
}

/* Squared distance from p to the box [lo, hi] (0 inside). */
WF_G float gbox_dist2(const float *lo, const float *hi, wf_g3 p) {
  float dx = gmax(gmax(lo[0] - p.x, p.x - hi[0]), 0.0f);
  float dy = gmax(gmax(lo[1] - p.y, p.y - hi[1]), 0.0f);
  float dz = gmax(gmax(lo[2] - p.z, p.z - hi[2]), 0.0f);
  return dx * dx + dy * dy + dz * dz;
}

/* Do the boxes [lo, hi] and [qlo, qhi] overlap (touching counts)? */
WF_G int gbox_overlap(const float *lo, const float *hi, wf_g3 qlo, wf_g3 qhi) {
  return lo[0] <= qhi.x && hi[0] >= qlo.x && lo[1] <= qhi.y && hi[1] >= qlo.y && lo[2] <= qhi.z &&
         hi[2] >= qlo.z;
}

/* Slab test of the ray o + t d (inv = 1/d per axis) against a box: the
** entry distance, or a value > tmax when it misses [0, tmax]. 0 * inf
** (a ray in a slab's plane) gives NaN, which the min/max order drops. */
WF_G float gbox_ray(const float *lo, const float *hi, wf_g3 o, wf_g3 inv, float tmax) {
  float x0 = (lo[0] - o.x) * inv.x, x1 = (hi[0] - o.x) * inv.x;
  float y0 = (lo[1] - o.y) * inv.y, y1 = (hi[1] - o.y) * inv.y;
  float z0 = (lo[2] - o.z) * inv.z, z1 = (hi[2] - o.z) * inv.z;
  float tn = gmax(gmax(gmin(x0, x1), gmin(y0, y1)), gmax(gmin(z0, z1), 0.0f));
  float tf = gmin(gmin(gmax(x0, x1), gmax(y0, y1)), gmin(gmax(z0, z1), tmax));
  /* a little slack so rays grazing a box's face are not lost to rounding */
  return tn <= tf * 1.00000024f + 1e-30f ? tn : 3.4e38f;
}

WF_G wf_g3 gray_inv(wf_g3 d) {
  return g3(1.0f / d.x, 1.0f / d.y, 1.0f / d.z);
}

/* ---- triangles ---- */
WF_G void gtri(const wf_gmesh *m, int f, wf_g3 *a, wf_g3 *b, wf_g3 *c) {
  *a = m->points[m->indices[3 * f]];
  *b = m->points[m->indices[3 * f + 1]];
  *c = m->points[m->indices[3 * f + 2]];
}

/* The triangles in leaf order (wf_gmesh.tris; a live mesh always has
** them, filled by its refits: tri_block in src/runtime/geom_mesh.c):
** blocks of WF_GTB slots, each WF_GTROWS rows of WF_GTB floats, lane j
** slot j of the block; a block of zeros pads the end.
**   rows 0-8   the vertices a.x a.y a.z b.x ... c.z
** The WF_GL triangles from any slot load as rows of lanes (gtri_rows)
** wherever the leaf starts. (Point queries bound triangles by their
** leaf's lane in wf_gdisc4, which culls as many leaves as the bounds per
** triangle that blocks used to hold, without reading the leaf.) */
#define WF_GTB 4
#define WF_GTROWS 9
#if WF_GL != 1 && WF_GL != WF_GTB
#error "gtri_rows reads 1 or WF_GTB lanes"
#endif

/* Where row r of slot k lives in tris, and the floats the array holds for
** n slots (with the padding block). */
WF_G long long gtri_at(long long k, int r) {
  return k / WF_GTB * (WF_GTROWS * WF_GTB) + r * WF_GTB + k % WF_GTB;
}
WF_G long long gtri_floats(long long n) {
  return (n / WF_GTB + 2) * (WF_GTROWS * WF_GTB);
}

/* The triangle in BVH slot k. */
WF_G void gtri_slot(const wf_gmesh *m, int k, wf_g3 *a, wf_g3 *b, wf_g3 *c) {
  const float *t = m->tris;
  *a = g3(t[gtri_at(k, 0)], t[gtri_at(k, 1)], t[gtri_at(k, 2)]);
  *b = g3(t[gtri_at(k, 3)], t[gtri_at(k, 4)], t[gtri_at(k, 5)]);
  *c = g3(t[gtri_at(k, 6)], t[gtri_at(k, 7)], t[gtri_at(k, 8)]);
}

/* Rows r0 .. r0 + nr - 1 of slots k .. k + WF_GL - 1 as lanes. Lanes past
** the leaf hold the next slots or the padding: callers mask them. With 4
** lanes from slot k = 4 g + s, lane j < 4 - s is in block g and the
** others in block g + 1, each one unaligned load from where the row's
** lanes would start. */
WF_G void gtri_rows(const wf_gmesh *m, int k, int r0, int nr, wf_gl *t) {
  const float *lo = m->tris + gtri_at(k, r0);
#if WF_GL > 1
  const float *hi = lo + (WF_GTROWS - 1) * WF_GTB;
  wf_glm first = glidx() < glmk(WF_GTB - k % WF_GTB);
  for (int r = 0; r < nr; r++)
    t[r] = glsel(first, glload(lo + r * WF_GTB), glload(hi + r * WF_GTB));
#else
  for (int r = 0; r < nr; r++)
    t[r] = lo[r * WF_GTB];
#endif
}

/* Squared distances from p to the points the weights (wa, wb) give in
** each lane's triangle (gbary's arithmetic). */
WF_G wf_gl gdist2_lanes(const wf_gl *t, wf_gl px, wf_gl py, wf_gl pz, wf_gl wa, wf_gl wb) {
  wf_gl wc = glk(1.0f) - wa - wb;
  wf_gl qx = t[0] * wa + t[3] * wb + t[6] * wc - px;
  wf_gl qy = t[1] * wa + t[4] * wb + t[7] * wc - py;
  wf_gl qz = t[2] * wa + t[5] * wb + t[8] * wc - pz;
  return qx * qx + qy * qy + qz * qz;
}

/* A triangle is flat for p (gclosest_lanes) when the face's denominator
** s is at most WF_GFLAT (|ab|^2 + |ac|^2) (|ab|^2 + |ac|^2 + |ap|^2):
** then rounding may have decided its signs and the regions. For corners
** on a line (rounded to floats) |s| stayed below 2^-21 of that bound in
** 2M random trials with p from 0.01 to 1000 edge lengths away; this takes
** 16 times that. Near p it flags triangles whose sine of the angle at a
** is below 0.007, which the fallback answers to within their width. */
#define WF_GFLAT (1.0f / 131072.0f)

/* The flat lanes' weights: the first of the edges ab, ac, bc (p's foot
** on each line, clamped to the edge: eab, eac, ebc are the feet's
** parameters) and the face's weights (x, y), if those make a point of
** the triangle, with the least distance from p. Every candidate is a
** point of the triangle, so the answer lies on it even for corners on a
** line, no further from p than the best edge. */
WF_G void gclosest_flat(const wf_gl *t, wf_gl px, wf_gl py, wf_gl pz, wf_gl eab, wf_gl eac,
                        wf_gl ebc, wf_gl *x, wf_gl *y) {
  const wf_gl one = glk(1.0f), zero = glk(0.0f);
  eab = glmin(glmax(eab, zero), one), eac = glmin(glmax(eac, zero), one);
  ebc = glmin(glmax(ebc, zero), one);
  const wf_gl cu[4] = {one - eab, one - eac, zero, *x}, cv[4] = {eab, zero, one - ebc, *y};
  wf_gl bu = cu[0], bv = cv[0], bd = gdist2_lanes(t, px, py, pz, bu, bv);
  /* the face's weights may be NaN (then every comparison fails) */
  wf_glm in = (*x >= zero) & (*y >= zero) & (one - *x - *y >= zero);
  for (int i = 1; i < 4; i++) {
    wf_gl d = gdist2_lanes(t, px, py, pz, cu[i], cv[i]);
    wf_glm r = (d < bd) & (i == 3 ? in : glmk(-1));
    bu = glsel(r, cu[i], bu), bv = glsel(r, cv[i], bv), bd = glsel(r, d, bd);
  }
  *x = bu, *y = bv;
}

/* The point of triangle abc closest to p, as barycentric weights (wa, wb)
** of a and b (c gets 1 - wa - wb), for a triangle in each lane (t: its 9
** rows as gtri_rows gives them; p the same in every lane). Regions are
** told apart by the signs of dot products of p - vertex with the edges
** (the Voronoi regions of the vertices, then of the edges, else the
** face). Every region's weights are computed and the first region that
** holds is chosen by selects, from the last to the first: no branch
** depends on the region, which on the CPU costs less than the
** mispredicted branches of testing the regions in turn, and lets the
** lanes go together. Lanes whose triangle is flat for p (WF_GFLAT:
** corners on a line or nearly, two or three of them equal) take
** gclosest_flat's answer instead: there the signs that choose the region
** are rounding noise, and the face's weights (over a denominator that
** is all noise) can put the point anywhere on the line, off the corners'
** segment. One branch, taken when any lane is flat, rarely on meshes. */
WF_G void gclosest_lanes(const wf_gl *t, wf_gl px, wf_gl py, wf_gl pz, wf_gl *wa, wf_gl *wb) {
  const wf_gl one = glk(1.0f), zero = glk(0.0f);
  wf_gl abx = t[3] - t[0], aby = t[4] - t[1], abz = t[5] - t[2];
  wf_gl acx = t[6] - t[0], acy = t[7] - t[1], acz = t[8] - t[2];
  wf_gl apx = px - t[0], apy = py - t[1], apz = pz - t[2];
  wf_gl bpx = px - t[3], bpy = py - t[4], bpz = pz - t[5];
  wf_gl cpx = px - t[6], cpy = py - t[7], cpz = pz - t[8];
  wf_gl d1 = abx * apx + aby * apy + abz * apz, d2 = acx * apx + acy * apy + acz * apz;
  wf_gl d3 = abx * bpx + aby * bpy + abz * bpz, d4 = acx * bpx + acy * bpy + acz * bpz;
  wf_gl d5 = abx * cpx + aby * cpy + abz * cpz, d6 = acx * cpx + acy * cpy + acz * cpz;
  wf_gl vc = d1 * d4 - d3 * d2, vb = d5 * d2 - d1 * d6, va = d3 * d6 - d5 * d4;
  /* the face */
  wf_gl s = va + vb + vc, inv = one / s;
  wf_gl x = one - vb * inv - vc * inv, y = vb * inv;
  wf_gl ab2 = abx * abx + aby * aby + abz * abz, ac2 = acx * acx + acy * acy + acz * acz;
  wf_gl ap2 = apx * apx + apy * apy + apz * apz;
  wf_glm flat = s <= glk(WF_GFLAT) * (ab2 + ac2) * ((ab2 + ac2) + ap2);
  /* the three edges' parameters (0 on an edge of length 0) */
  wf_gl den = (d4 - d3) + (d5 - d6), ebc = glsel(den != zero, (d4 - d3) / den, zero);
  wf_gl eac = glsel(d2 - d6 != zero, d2 / (d2 - d6), zero);
  wf_gl eab = glsel(d1 - d3 != zero, d1 / (d1 - d3), zero);
  wf_gl fx = x, fy = y;
  /* edge bc */
  wf_glm r = (va <= zero) & (d4 - d3 >= zero) & (d5 - d6 >= zero);
  x = glsel(r, zero, x), y = glsel(r, one - ebc, y);
  /* edge ac */
  r = (vb <= zero) & (d2 >= zero) & (d6 <= zero);
  x = glsel(r, one - eac, x), y = glsel(r, zero, y);
  /* vertex c */
  r = (d6 >= zero) & (d5 <= d6);
  x = glsel(r, zero, x), y = glsel(r, zero, y);
  /* edge ab */
  r = (vc <= zero) & (d1 >= zero) & (d3 <= zero);
  x = glsel(r, one - eab, x), y = glsel(r, eab, y);
  /* vertex b, then vertex a */
  r = (d3 >= zero) & (d4 <= d3);
  x = glsel(r, zero, x), y = glsel(r, one, y);
  r = (d1 <= zero) & (d2 <= zero);
  x = glsel(r, one, x), y = glsel(r, zero, y);
  int any = 0;
  for (int j = 0; j < WF_GL; j++)
    any |= glmlane(flat, j) != 0;
  if (any) {
    gclosest_flat(t, px, py, pz, eab, eac, ebc, &fx, &fy);
    x = glsel(flat, fx, x), y = glsel(flat, fy, y);
  }
  *wa = x, *wb = y;
}

/* gclosest_lanes for one triangle. */
WF_G void gclosest_tri(wf_g3 a, wf_g3 b, wf_g3 c, wf_g3 p, float *wa, float *wb) {
  wf_gl t[9] = {glk(a.x), glk(a.y), glk(a.z), glk(b.x), glk(b.y),
                glk(b.z), glk(c.x), glk(c.y), glk(c.z)};
  wf_gl u, v;
  gclosest_lanes(t, glk(p.x), glk(p.y), glk(p.z), &u, &v);
  *wa = gllane(u, 0), *wb = gllane(v, 0);
}

/* The first of the lanes 0 .. n - 1 of d below lim, as the scalar loop
** `if (d < lim) lim = d` over them finds it (ties: the first), or -1. */
WF_G int glfirst_below(wf_gl d, int n, float lim) {
  int best = -1;
  for (int j = 0; j < WF_GL && j < n; j++) {
    float x = gllane(d, j);
    if (x < lim) lim = x, best = j;
  }
  return best;
}

WF_G wf_g3 gbary(wf_g3 a, wf_g3 b, wf_g3 c, float wa, float wb) {
  return g3add(g3add(g3mul(a, wa), g3mul(b, wb)), g3mul(c, 1.0f - wa - wb));
}

/* Watertight ray-triangle test (shear the triangle into the ray's frame,
** then 2-D edge functions; a zero edge function is recomputed in double
** so that edges and vertices shared by two triangles hit exactly one or
** both, never neither). Returns 1 on a hit with t in [0, tmax), weights
** (wa, wb) of a and b, and the unnormalized front/back det (> 0 when the
** ray comes from the side the normal (b-a)x(c-a) points to). */
typedef struct wf_gray {
  wf_g3 o;
  /* the shear as three rows: x' = P[kx] - sx P[kz], y' = P[ky] - sy P[kz],
  ** z' = P[kz]; the zero entries add exact zeros, so the dot products
  ** round as the permuted form does, without indexing by k */
  wf_g3 ex, ey, ez;
  float sz;
} wf_gray;

WF_G wf_gray gray_prep(wf_g3 o, wf_g3 d) {
  wf_gray r;
  float ax = fabsf(d.x), ay = fabsf(d.y), az = fabsf(d.z);
  int kz = ax >= ay && ax >= az ? 0 : ay >= az ? 1 : 2;
  int kx = kz == 2 ? 0 : kz + 1;
  int ky = kx == 2 ? 0 : kx + 1;
  float dz = g3comp(d, kz);
  if (dz < 0.0f) {
    int t = kx;
    kx = ky;
    ky = t;
  }
  float sx = g3comp(d, kx) / dz, sy = g3comp(d, ky) / dz;
  float e[3][3] = {{0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f}};
  e[0][kx] = 1.0f, e[0][kz] = -sx;
  e[1][ky] = 1.0f, e[1][kz] = -sy;
  e[2][kz] = 1.0f;
  r.o = o;
  r.ex = g3(e[0][0], e[0][1], e[0][2]);
  r.ey = g3(e[1][0], e[1][1], e[1][2]);
  r.ez = g3(e[2][0], e[2][1], e[2][2]);
  r.sz = 1.0f / dz;
  return r;
}

/* x*e.x + y*e.y + z*e.z in the order kx, kz of the permuted form: with one
** of the three entries zero the sum is exact either way */
WF_G float gshear(wf_g3 p, wf_g3 e) {
  return p.x * e.x + p.y * e.y + p.z * e.z;
}

/* gray_tri for a triangle in each lane (t: its rows as gtri_rows gives
** them), as its loop over lanes 0 .. n - 1 would go, each hit shortening
** tmax: the first lane of the nearest hit below tmax, or -1. A zero edge
** function is recomputed in double in its lane alone (rare). */
WF_G int gray_lanes(const wf_gray *R, const wf_gl *t, int n, float tmax, float *tt, float *wa,
                    float *wb, float *det) {
  const wf_gl zero = glk(0.0f);
  wf_gl A[3], B[3], C[3],
      e[3][3] = {{glk(R->ex.x), glk(R->ex.y), glk(R->ex.z)},
                 {glk(R->ey.x), glk(R->ey.y), glk(R->ey.z)},
                 {glk(R->ez.x), glk(R->ez.y), glk(R->ez.z)}};
  const float o[3] = {R->o.x, R->o.y, R->o.z};
  for (int i = 0; i < 3; i++)
    A[i] = t[i] - glk(o[i]), B[i] = t[3 + i] - glk(o[i]), C[i] = t[6 + i] - glk(o[i]);
  wf_gl sh[3][3]; /* sh[v][r]: vertex v's coordinate r (x, y, z) in the ray's frame */
  for (int r = 0; r < 3; r++) {
    sh[0][r] = A[0] * e[r][0] + A[1] * e[r][1] + A[2] * e[r][2];
    sh[1][r] = B[0] * e[r][0] + B[1] * e[r][1] + B[2] * e[r][2];
    sh[2][r] = C[0] * e[r][0] + C[1] * e[r][1] + C[2] * e[r][2];
  }
  wf_gl ax = sh[0][0], ay = sh[0][1], bx = sh[1][0], by = sh[1][1], cx = sh[2][0], cy = sh[2][1];
  wf_gl U = cx * by - cy * bx, V = ax * cy - ay * cx, W = bx * ay - by * ax;
  wf_glm z = (U == zero) | (V == zero) | (W == zero);
  for (int j = 0; j < WF_GL; j++) {
    if (!glmlane(z, j)) continue;
    double x[3] = {gllane(ax, j), gllane(bx, j), gllane(cx, j)};
    double y[3] = {gllane(ay, j), gllane(by, j), gllane(cy, j)};
    glset(&U, j, (float)(x[2] * y[1] - y[2] * x[1]));
    glset(&V, j, (float)(x[0] * y[2] - y[0] * x[2]));
    glset(&W, j, (float)(x[1] * y[0] - y[1] * x[0]));
  }
  wf_glm miss = ((U < zero) | (V < zero) | (W < zero)) & ((U > zero) | (V > zero) | (W > zero));
  wf_gl D = U + V + W;
  wf_gl T = (U * sh[0][2] + V * sh[1][2] + W * sh[2][2]) * glk(R->sz);
  wf_gl inv = glk(1.0f) / D, tv = T * inv;
  /* lanes that miss become tmax, which no hit may equal */
  tv = glsel(miss | (D == zero) | (tv < zero) | (tv != tv), glk(tmax), tv);
  int j = glfirst_below(tv, n, tmax);
  if (j >= 0)
    *tt = gllane(tv, j), *wa = gllane(U * inv, j), *wb = gllane(V * inv, j), *det = gllane(D, j);
  return j;
}

/* gray_lanes for one triangle: 1 on a hit. */
WF_G int gray_tri(const wf_gray *R, wf_g3 a, wf_g3 b, wf_g3 c, float tmax, float *t, float *wa,
                  float *wb, float *det) {
  wf_gl v[9] = {glk(a.x), glk(a.y), glk(a.z), glk(b.x), glk(b.y),
                glk(b.z), glk(c.x), glk(c.y), glk(c.z)};
  return gray_lanes(R, v, 1, tmax, t, wa, wb, det) >= 0;
}

/* ---- meshes ---- */
WF_G wf_g3 gface_normal(const wf_gmesh *m, int f) {
  wf_g3 a, b, c;
  gtri(m, f, &a, &b, &c);
  return g3norm(g3cross(g3sub(b, a), g3sub(c, a)));
}

/* ---- 4-wide traversal (meshes) ---- */
#define WF_G4STACK (3 * WF_GSTACK + 1) /* 3 lanes pushed per level */
#define WF_GWIDE_MAX (1 << 29)         /* wide nodes at most (lanes 4 w + j fit an int) */

/* gbox_ray on the 4 lanes of w, WF_GL at a time: hit[j] and the entry
** distance t[j]. */
WF_G void gbox4_ray(const wf_gnode4 *w, const float *o, const float *inv, float tmax, float *t,
                    int *hit) {
  for (int j = 0; j < 4; j += WF_GL) {
    wf_gl n[3], f[3];
    for (int c = 0; c < 3; c++) {
      wf_gl a = (glload(&w->lo[c][j]) - glk(o[c])) * glk(inv[c]);
      wf_gl b = (glload(&w->hi[c][j]) - glk(o[c])) * glk(inv[c]);
      n[c] = glmin(a, b), f[c] = glmax(a, b);
    }
    wf_gl tn = glmax(glmax(n[0], n[1]), glmax(n[2], glk(0.0f)));
    wf_gl tf = glmin(glmin(f[0], f[1]), glmin(f[2], glk(tmax)));
    glstore(t + j, tn);
    wf_glm h = tn <= tf * 1.00000024f + 1e-30f;
    for (int l = 0; l < WF_GL; l++)
      hit[j + l] = glmlane(h, l) != 0;
  }
}

/* A lower bound on the squared distance from p to the triangles under
** each lane of w (D: its bounds): the larger of the box distance and the
** distance to the lane's cylinder, sqrt(hs^2 + max(0, rho - r)^2), hs the
** height of p over the slab, rho its distance from the axis (from the
** cross product n x (p - o), which does not cancel as |p - o|^2 - h^2
** would). The rounding of either, a few ulps of |p - o|^2 + r^2, is
** covered by the (|p - o|^2 + r^2) / 2^14 taken off the cylinder's part
** (refit rounds t up, src/runtime/geom_mesh.c). c2 (unless NULL): what
** closest points visit the lanes by (gstack4_push), |p - o|^2 - h^2 / 2:
** the squared distance from the box's centre, less half the part of it
** across the slab (bench/mesh_visits.lua, on bench/mesh.lua's queries:
** ranked by the lanes' lower bounds they visited 41.2 nodes and 14.3
** leaves a query, by |p - o|^2 38.1 and 10.7, by this 37.9 and 10.3). */
WF_G void gdisc4_dist2(const wf_gdisc4 *D, const wf_gnode4 *w, wf_g3 p, float *d, float *c2) {
  const wf_gl px = glk(p.x), py = glk(p.y), pz = glk(p.z), zero = glk(0.0f), half = glk(0.5f);
  for (int j = 0; j < 4; j += WF_GL) {
    wf_gl lx = glload(&w->lo[0][j]), ly = glload(&w->lo[1][j]), lz = glload(&w->lo[2][j]);
    wf_gl ux = glload(&w->hi[0][j]), uy = glload(&w->hi[1][j]), uz = glload(&w->hi[2][j]);
    wf_gl bx = glmax(glmax(lx - px, px - ux), zero), by = glmax(glmax(ly - py, py - uy), zero),
          bz = glmax(glmax(lz - pz, pz - uz), zero);
    wf_gl hx = (ux - lx) * half, hy = (uy - ly) * half, hz = (uz - lz) * half;
    wf_gl dx = px - (lx + ux) * half, dy = py - (ly + uy) * half, dz = pz - (lz + uz) * half;
    wf_gl nx = glload(&D->n[0][j]), ny = glload(&D->n[1][j]), nz = glload(&D->n[2][j]);
    wf_gl r2 = hx * hx + hy * hy + hz * hz, r = glsqrt(r2), t = glload(&D->t[j]);
    wf_gl h = nx * dx + ny * dy + nz * dz;
    wf_gl cx = ny * dz - nz * dy, cy = nz * dx - nx * dz, cz = nx * dy - ny * dx;
    wf_gl rho = glsqrt(cx * cx + cy * cy + cz * cz);
    wf_gl hs = glmax(glmax(h, -h) - t, zero), e = glmax(rho - r, zero);
    wf_gl o2 = dx * dx + dy * dy + dz * dz, slack = (o2 + r2) * (1.0f / 16384.0f);
    glstore(d + j, glmax(bx * bx + by * by + bz * bz, hs * hs + e * e - slack));
    if (c2) glstore(c2 + j, o2 - h * h * half);
  }
}

/* The squared distance from p to the furthest point of the box [lo, hi]. */
WF_G float gbox_far2(const float *lo, const float *hi, wf_g3 p) {
  float fx = gmax(fabsf(p.x - lo[0]), fabsf(p.x - hi[0]));
  float fy = gmax(fabsf(p.y - lo[1]), fabsf(p.y - hi[1]));
  float fz = gmax(fabsf(p.z - lo[2]), fabsf(p.z - hi[2]));
  return fx * fx + fy * fy + fz * fz;
}

/* Lane j of w as two boxes of 3 floats. */
WF_G void gbox4_lane(const wf_gnode4 *w, int j, float *lo, float *hi) {
  for (int a = 0; a < 3; a++)
    lo[a] = w->lo[a][j], hi[a] = w->hi[a][j];
}

/* -gbox_far2 on the 4 lanes of w (the furthest point's ranking). */
WF_G void gbox4_nfar2(const wf_gnode4 *w, wf_g3 p, float *d) {
  for (int j = 0; j < 4; j++) {
    float lo[3], hi[3];
    gbox4_lane(w, j, lo, hi);
    d[j] = -gbox_far2(lo, hi, p);
  }
}

/* A traversal stack of lanes. On the CPU an entry is a lane's rank key
** (gstack4_push): its distance (entry t of a ray, squared distance of a
** point) as gdist_key's bits above 4 w + 3 - j for lane j of wide node
** w, so that pushes rank lanes by comparing whole entries and a pop skips
** lanes the best hit has moved past without reading their node.
** CUDA keeps the stack in local memory, where 8-byte entries doubled the
** kernels' stack frames: there (and on the emulated device, whose host
** build of the CUDA C defines WF_SHIM_H, so that the tests run this path)
** an entry is the lane's reference 4 w + j alone, and a pop computes its
** distance again from the query kept beside the stack; the two give the
** same lanes in the same order. Pushes write up to 3 entries past the top. */
#if defined(__CUDACC__) || defined(WF_SHIM_H)
#define WF_GSTACK_NARROW 1
#endif

typedef struct wf_gstack4 {
  const wf_gnode4 *W;
  const wf_gdisc4 *D; /* the lanes' bounds (ray 0) */
  int sp, ray;        /* 1: q, inv are a ray's origin and 1/dir; else q is a point
                        (0: ranked by gdisc4_dist2, 2: by -gbox_far2) */
  float q[3], inv[3];
#if !defined(WF_GSTACK_NARROW)
  unsigned long long ent[WF_G4STACK + 4];
#else
  int ref[WF_G4STACK + 4];
#endif
} wf_gstack4;

WF_G void gstack4_init(wf_gstack4 *S, const wf_gbvh *bvh, wf_g3 q, wf_g3 inv, int ray) {
  S->W = bvh->wide, S->D = bvh->disc, S->sp = 0, S->ray = ray;
  S->q[0] = q.x, S->q[1] = q.y, S->q[2] = q.z;
  S->inv[0] = inv.x, S->inv[1] = inv.y, S->inv[2] = inv.z;
}

/* Is distance d within lim (closed: d <= lim, else d < lim)? */
WF_G int gwithin(float d, float lim, int closed) {
  return (d < lim) | (closed & (d == lim));
}

/* A distance as bits that order as the floats do (the sign bit set for
** positives, every bit flipped for negatives; -0 becomes +0 first): for
** distances that are not NaN, a < b exactly when their keys are. */
WF_G unsigned gdist_key(float d) {
  union {
    float f;
    unsigned u;
  } b;
  b.f = d + 0.0f;
  return b.u ^ ((unsigned)((int)b.u >> 31) | 0x80000000u);
}

/* gdist_key of each lane. */
WF_G wf_glm gdist_keys(wf_gl d) {
  wf_glm u = glbits(d + glk(0.0f));
  return u ^ ((u >> 31) | glmk((int)0x80000000u));
}

/* gdist_key of a limit: one that is NaN, which no distance is within,
** becomes 0, which no key is below (nor equal to: only -NaN's bits give
** it). */
WF_G unsigned glim_key(float lim) {
  return lim == lim ? gdist_key(lim) : 0u;
}

/* Is the key dk within the limit's key lk (gwithin on the keys)? */
WF_G int gkey_within(unsigned dk, unsigned lk, int closed) {
  return (dk < lk) | (closed & (dk == lk));
}

/* Sort two rank keys. */
#define WF_GRANK_CE(x, y)                                                                          \
  do {                                                                                             \
    unsigned long long lo_ = x < y ? x : y, hi_ = x < y ? y : x;                                   \
    x = lo_, y = hi_;                                                                              \
  } while (0)

/* The lanes of wide node i in use with hit[j] and d[j] within lim: the
** nearest by o (d when o is NULL) becomes the next one to visit (*c,
** *n; the result is 0 when there is none), the others go on the stack,
** the furthest deepest; of lanes as near, the higher is visited first.
** The lanes' rank keys (gdist_key of o above 4 i + 3 - j, which ranks the
** higher lane first; ~0 for lanes not pushed, which rank last) are sorted
** by a network of five compare-exchanges, selects on the CPU: no branch
** depends on the distances, whose order no predictor learns (this
** replaced counting each lane's place: bench/mesh.lua's rays took a
** fifth less time). On the CPU the entries keep d's key (the pops' test)
** in place of o's. Lanes not pushed are written past the new top, into an
** entry the stack keeps spare. */
WF_G int gstack4_push(wf_gstack4 *S, int i, const float *d, const float *o, const int *hit,
                      float lim, int closed, int *c, int *n) {
  const wf_gnode4 *w = &S->W[i];
  unsigned long long r[4];
  unsigned dk[4];
  int on[4], k = 0, sp = S->sp, bits = 0;
  for (int j = 0; j < 4; j++) {
    on[j] = (hit[j] != 0) & (w->child[j] != 0) & gwithin(d[j], lim, closed);
    k += on[j], bits |= on[j] << j;
  }
  /* no lane, or one (the visit goes on to it): nothing to rank, on most
  ** visits (bench/mesh_visits.lua: 5.1 of 7.1 a ray, 21 of 37 a closest
  ** point), which this branch spares the network and the stores (bench/
  ** mesh.lua's rays took a fifth less time) */
  if (k <= 1) {
    WF_GCOUNT(few);
    if (!k) return 0;
    int next = (bits & 1) ? 0 : (bits & 2) ? 1 : (bits & 4) ? 2 : 3;
    *c = w->child[next], *n = w->count[next];
    return 1;
  }
  for (int j = 0; j < 4; j += WF_GL) {
    wf_glm key = gdist_keys(glload((o ? o : d) + j));
    for (int l = 0; l < WF_GL; l++)
      r[j + l] =
          ((unsigned long long)(unsigned)glmlane(key, l) << 32 | (unsigned)(4 * i + 3 - j - l)) |
          ((unsigned long long)on[j + l] - 1);
    if (o) {
      key = gdist_keys(glload(d + j));
      for (int l = 0; l < WF_GL; l++)
        dk[j + l] = (unsigned)glmlane(key, l);
    }
  }
  WF_GRANK_CE(r[0], r[1]);
  WF_GRANK_CE(r[2], r[3]);
  WF_GRANK_CE(r[0], r[2]);
  WF_GRANK_CE(r[1], r[3]);
  WF_GRANK_CE(r[1], r[2]);
  /* rank q (the nearest 0) goes to sp + k - 1 - q: ranks 1 .. k - 1 fill
  ** sp .. sp + k - 2, the furthest deepest */
  for (int q = 1; q < 4; q++) {
    int e = q < k ? sp + k - 1 - q : sp + 3;
#if !defined(WF_GSTACK_NARROW)
    S->ent[e] = o ? (unsigned long long)dk[3 - (int)(r[q] & 3)] << 32 | (unsigned)r[q] : r[q];
#else
    S->ref[e] = (int)(unsigned)r[q] ^ 3;
#endif
  }
  /* a full stack (deeper than built trees go) drops the nearer lanes */
  S->sp = sp + k - 1 < WF_G4STACK ? sp + k - 1 : WF_G4STACK;
  int next = 3 - (int)(r[0] & 3);
  *c = w->child[next], *n = w->count[next];
  return 1;
}

#if defined(WF_GSTACK_NARROW)
/* Is the lane at stack entry e still within lim? */
WF_G int gstack4_keep(const wf_gstack4 *S, int e, float lim, int closed) {
  float lo[3], hi[3];
  int w = S->ref[e] >> 2, j = S->ref[e] & 3;
  wf_g3 p = g3(S->q[0], S->q[1], S->q[2]);
  if (S->ray == 0) {
    float d[4];
    gdisc4_dist2(&S->D[w], &S->W[w], p, d, 0);
    return gwithin(d[j], lim, closed);
  }
  gbox4_lane(&S->W[w], j, lo, hi);
  if (S->ray == 2) return gwithin(-gbox_far2(lo, hi, p), lim, closed);
  /* gbox4_ray's test of one lane (the slab arithmetic in the same order) */
  float x0 = (lo[0] - S->q[0]) * S->inv[0], x1 = (hi[0] - S->q[0]) * S->inv[0];
  float y0 = (lo[1] - S->q[1]) * S->inv[1], y1 = (hi[1] - S->q[1]) * S->inv[1];
  float z0 = (lo[2] - S->q[2]) * S->inv[2], z1 = (hi[2] - S->q[2]) * S->inv[2];
  float tn = gmax(gmax(gmin(x0, x1), gmin(y0, y1)), gmax(gmin(z0, z1), 0.0f));
  float tf = gmin(gmin(gmax(x0, x1), gmax(y0, y1)), gmin(gmax(z0, z1), lim));
  return tn <= tf * 1.00000024f + 1e-30f && gwithin(tn, lim, closed);
}
#endif

/* The next lane on the stack still within lim, or 0 when there is none. */
WF_G int gstack4_pop(wf_gstack4 *S, float lim, int closed, int *c, int *n) {
#if !defined(WF_GSTACK_NARROW)
  unsigned lk = glim_key(lim);
  while (S->sp) {
    unsigned long long x = S->ent[--S->sp];
    if (!gkey_within((unsigned)(x >> 32), lk, closed)) continue;
    int ref = (int)(unsigned)x, j = 3 - (ref & 3);
    const wf_gnode4 *w = &S->W[ref >> 2];
    *c = w->child[j], *n = w->count[j];
    return 1;
  }
#else
  while (S->sp) {
    int e = --S->sp;
    if (!gstack4_keep(S, e, lim, closed)) continue;
    const wf_gnode4 *w = &S->W[S->ref[e] >> 2];
    *c = w->child[S->ref[e] & 3], *n = w->count[S->ref[e] & 3];
    return 1;
  }
#endif
  return 0;
}

/* Closest hit along o + t d, t in [0, tmax). Returns the face or -1. */
WF_G int gmesh_ray(const wf_gmesh *m, wf_g3 o, wf_g3 d, float tmax, float *t, float *wa, float *wb,
                   float *det) {
  if (!m || m->nfaces <= 0) return -1;
  const wf_gnode4 *W = m->bvh.wide;
  const int *items = m->bvh.items;
  wf_gray R = gray_prep(o, d);
  wf_g3 inv = gray_inv(d);
  const float org[3] = {o.x, o.y, o.z}, iv[3] = {inv.x, inv.y, inv.z};
  int best = -1;
  float bt = tmax;
  wf_gstack4 S;
  gstack4_init(&S, &m->bvh, o, inv, 1);
  int c = 0, cnt = 0, more = 1;
  while (more) {
    if (c < 0) {
      WF_GCOUNT(leaf);
      for (int k = ~c, e = ~c + cnt; k < e; k += WF_GL) {
        wf_gl tr[9];
        gtri_rows(m, k, 0, 9, tr);
        float tt, u, v, dd;
        int j = gray_lanes(&R, tr, e - k, bt, &tt, &u, &v, &dd);
        if (j >= 0) bt = tt, *wa = u, *wb = v, *det = dd, best = k + j;
      }
      more = gstack4_pop(&S, bt, 1, &c, &cnt);
      continue;
    }
    float tn[4];
    int hit[4];
    WF_GCOUNT(node);
    gbox4_ray(&W[c], org, iv, bt, tn, hit);
    more = gstack4_push(&S, c, tn, 0, hit, bt, 1, &c, &cnt) || gstack4_pop(&S, bt, 1, &c, &cnt);
  }
  *t = bt;
  return best >= 0 ? items[best] : -1; /* the slot's face, read once */
}

/* The number of faces o + t d crosses for t > 0 (the parity test). */
WF_G int gmesh_crossings(const wf_gmesh *m, wf_g3 o, wf_g3 d) {
  const wf_gnode4 *W = m->bvh.wide;
  wf_gray R = gray_prep(o, d);
  wf_g3 inv = gray_inv(d);
  const float org[3] = {o.x, o.y, o.z}, iv[3] = {inv.x, inv.y, inv.z};
  const float lim = 3.0e38f;
  wf_gstack4 S;
  gstack4_init(&S, &m->bvh, o, inv, 1);
  int c = 0, cnt = 0, more = 1, count = 0;
  while (more) {
    if (c < 0) {
      for (int k = ~c, e = ~c + cnt; k < e; k++) {
        wf_g3 a, b, cc;
        gtri_slot(m, k, &a, &b, &cc);
        float tt, u, v, dd;
        count += gray_tri(&R, a, b, cc, lim, &tt, &u, &v, &dd) && tt > 0.0f;
      }
      more = gstack4_pop(&S, lim, 1, &c, &cnt);
      continue;
    }
    float tn[4];
    int hit[4];
    gbox4_ray(&W[c], org, iv, lim, tn, hit);
    more = gstack4_push(&S, c, tn, 0, hit, lim, 1, &c, &cnt) || gstack4_pop(&S, lim, 1, &c, &cnt);
  }
  return count;
}

/* Inside (-1) or outside (1) by ray parity: three rays along skewed axes
** vote, so a ray through an edge or a vertex (counted twice or not at
** all) is outvoted. */
WF_G float gmesh_sign_parity(const wf_gmesh *m, wf_g3 p) {
  const wf_g3 dirs[3] = {
      {0.8841f, 0.3571f, 0.3012f}, {-0.2693f, 0.9117f, -0.3103f}, {0.3379f, -0.2011f, -0.9194f}};
  int inside = 0;
  for (int k = 0; k < 3; k++)
    inside += gmesh_crossings(m, p, dirs[k]) & 1;
  return inside >= 2 ? -1.0f : 1.0f;
}

/* Closest face to p strictly within lim: nearest lane first, lanes
** pushed with their bound (gdisc4_dist2) and skipped when the best
** distance has shrunk below it since. On the CPU the children of a
** node's lanes are prefetched as it is visited: most are visited from
** the stack, after the nearest lane's subtree, and the walk was waiting
** on their nodes, which miss the caches from one query to the next. The
** best face is kept as its slot, looked up in items once. */
WF_G int gmesh_closest(const wf_gmesh *m, wf_g3 p, float lim, float *wa, float *wb, float *dist2) {
  if (!m || m->nfaces <= 0) return -1;
  const wf_gnode4 *W = m->bvh.wide;
  const wf_gdisc4 *D = m->bvh.disc;
  int best = -1;
  float bd = lim * lim;
  if (!(bd > 0.0f)) return -1;
  const int all[4] = {1, 1, 1, 1};
  const wf_gl px = glk(p.x), py = glk(p.y), pz = glk(p.z);
  wf_gstack4 S;
  gstack4_init(&S, &m->bvh, p, p, 0);
  int c = 0, cnt = 0, more = 1;
  while (more) {
    if (c < 0) {
      WF_GCOUNT(leaf);
      for (int k = ~c, e = ~c + cnt; k < e; k += WF_GL) {
        wf_gl t[9], u, v;
        gtri_rows(m, k, 0, 9, t);
        gclosest_lanes(t, px, py, pz, &u, &v);
        wf_gl d2 = gdist2_lanes(t, px, py, pz, u, v);
        int j = glfirst_below(d2, e - k, bd);
        if (j >= 0) bd = gllane(d2, j), best = k + j, *wa = gllane(u, j), *wb = gllane(v, j);
      }
      more = gstack4_pop(&S, bd, 0, &c, &cnt);
      continue;
    }
    float d4[4], o4[4];
    WF_GCOUNT(node);
    gdisc4_dist2(&D[c], &W[c], p, d4, o4);
#if defined(WF_GPREFETCH)
    /* every lane's: testing d4[j] < bd first cost more in mispredicted
    ** branches than the prefetches of lanes the walk skips */
    for (int j = 0; j < 4; j++) {
      int ch = W[c].child[j];
      if (!ch) break; /* the lanes in use come first */
      if (ch > 0) {
        WF_GPREFETCH(&W[ch]), WF_GPREFETCH((const char *)&W[ch] + 64), WF_GPREFETCH(&D[ch]);
      } else {
        const float *t = m->tris + gtri_at(~ch, 0);
        WF_GPREFETCH(t), WF_GPREFETCH(t + 16), WF_GPREFETCH(t + 32);
      }
    }
#endif
    more = gstack4_push(&S, c, d4, o4, all, bd, 0, &c, &cnt) || gstack4_pop(&S, bd, 0, &c, &cnt);
  }
  *dist2 = bd;
  return best >= 0 ? m->bvh.items[best] : -1;
}

/* Furthest face from p strictly beyond lim: the lanes ranked by the
** negated squared distance of their furthest corner (which bounds the
** furthest point of the box), so that the stack's nearest-first order and
** pruning apply unchanged. The furthest point of a triangle is a vertex. */
WF_G int gmesh_furthest(const wf_gmesh *m, wf_g3 p, float lim, float *wa, float *wb, float *dist2) {
  if (!m || m->nfaces <= 0) return -1;
  const wf_gnode4 *W = m->bvh.wide;
  int best = -1;
  float bd = lim * lim;
  const int all[4] = {1, 1, 1, 1};
  wf_gstack4 S;
  gstack4_init(&S, &m->bvh, p, p, 2);
  int c = 0, cnt = 0, more = 1;
  while (more) {
    if (c < 0) {
      for (int k = ~c, e = ~c + cnt; k < e; k++) {
        wf_g3 a, b, cc;
        gtri_slot(m, k, &a, &b, &cc);
        float da = g3dot(g3sub(a, p), g3sub(a, p)), db = g3dot(g3sub(b, p), g3sub(b, p)),
              dc = g3dot(g3sub(cc, p), g3sub(cc, p));
        float u = da >= db && da >= dc ? 1.0f : 0.0f;
        float v = u == 0.0f && db >= dc ? 1.0f : 0.0f;
        wf_g3 q = g3sub(gbary(a, b, cc, u, v), p);
        float d2 = g3dot(q, q);
        if (d2 > bd) bd = d2, best = m->bvh.items[k], *wa = u, *wb = v;
      }
      more = gstack4_pop(&S, -bd, 0, &c, &cnt);
      continue;
    }
    float d4[4];
    gbox4_nfar2(&W[c], p, d4);
    more = gstack4_push(&S, c, d4, 0, all, -bd, 0, &c, &cnt) || gstack4_pop(&S, -bd, 0, &c, &cnt);
  }
  *dist2 = bd;
  return best;
}

/* The normal used for the sign of a closest point: the sum of the unit
** normals of every face whose closest point lies within eps (relative to
** the mesh's size at that distance) of the closest one, so that at an edge
** or a vertex the faces meeting there vote together. */
WF_G wf_g3 gmesh_pseudo_normal(const wf_gmesh *m, wf_g3 p, wf_g3 q, float d2, float eps) {
  const wf_gnode4 *W = m->bvh.wide;
  const wf_gdisc4 *D = m->bvh.disc;
  float tol = eps * (sqrtf(d2) + 1e-6f) + 1e-7f;
  float lim = sqrtf(d2) + tol;
  float lim2 = lim * lim;
  wf_g3 acc = g3(0.0f, 0.0f, 0.0f);
  const int all[4] = {1, 1, 1, 1};
  wf_gstack4 S;
  gstack4_init(&S, &m->bvh, p, p, 0);
  int c = 0, cnt = 0, more = 1;
  while (more) {
    if (c < 0) {
      for (int k = ~c, e = ~c + cnt; k < e; k++) {
        wf_g3 a, b, cc;
        gtri_slot(m, k, &a, &b, &cc);
        float u, v;
        gclosest_tri(a, b, cc, p, &u, &v);
        wf_g3 r = g3sub(gbary(a, b, cc, u, v), q);
        if (g3dot(r, r) <= tol * tol) acc = g3add(acc, g3norm(g3cross(g3sub(b, a), g3sub(cc, a))));
      }
      more = gstack4_pop(&S, lim2, 1, &c, &cnt);
      continue;
    }
    float d4[4];
    gdisc4_dist2(&D[c], &W[c], p, d4, 0);
    more = gstack4_push(&S, c, d4, 0, all, lim2, 1, &c, &cnt) || gstack4_pop(&S, lim2, 1, &c, &cnt);
  }
  return acc;
}

/* The solid angle of triangle abc seen from p, over 4 pi (van Oosterom
** and Strackee's formula). */
WF_G float gsolid_angle(wf_g3 a, wf_g3 b, wf_g3 c, wf_g3 p) {
  wf_g3 x = g3sub(a, p), y = g3sub(b, p), z = g3sub(c, p);
  float lx = sqrtf(g3dot(x, x)), ly = sqrtf(g3dot(y, y)), lz = sqrtf(g3dot(z, z));
  float num = g3dot(x, g3cross(y, z));
  float den = lx * ly * lz + g3dot(x, y) * lz + g3dot(y, z) * lx + g3dot(z, x) * ly;
  return atan2f(num, den) * (float)(1.0 / (2.0 * 3.14159265358979323846));
}

/* Generalized winding number of the mesh at p: exact for lanes close to
** p, a dipole far away (distance > accuracy * radius: Barill et al.'s
** fast winding numbers, first order; the data is per lane, 4 w + j). */
WF_G float gmesh_winding(const wf_gmesh *m, wf_g3 p, float accuracy) {
  if (!m || m->nfaces <= 0) return 0.0f;
  const wf_gnode4 *W = m->bvh.wide;
  const wf_gwind *D = m->bvh.wind;
  float w = 0.0f;
  /* lanes: 4 pushed, one popped per level */
  int stack[WF_G4STACK], sp = 0;
  for (int j = 0; j < 4; j++)
    if (W[0].child[j]) stack[sp++] = j;
  while (sp) {
    int l = stack[--sp];
    const wf_gnode4 *n = &W[l >> 2];
    int c = n->child[l & 3];
    if (D) {
      wf_g3 dv = g3sub(g3(D[l].c[0], D[l].c[1], D[l].c[2]), p);
      float d = sqrtf(g3dot(dv, dv));
      if (d > accuracy * D[l].r && d > 0.0f) {
        wf_g3 nn = g3(D[l].n[0], D[l].n[1], D[l].n[2]);
        w += g3dot(dv, nn) / (4.0f * 3.14159265f * d * d * d);
        continue;
      }
    }
    if (c < 0) {
      for (int k = ~c, e = ~c + n->count[l & 3]; k < e; k++) {
        wf_g3 a, b, cc;
        gtri_slot(m, k, &a, &b, &cc);
        w += gsolid_angle(a, b, cc, p);
      }
      continue;
    }
    for (int j = 0; j < 4 && sp < WF_G4STACK; j++)
      if (W[c].child[j]) stack[sp++] = 4 * c + j;
  }
  return w;
}

/* ---- box iterators (mesh_query_aabb, bvh_query_aabb, bvh_query_ray) ----
** The state: the tree, the query, a stack of nodes still to visit and the
** leaf being walked. next() advances to the next primitive whose box the
** query touches; get() reads it. Meshes walk their wide tree: an entry
** 4 w + j stands for the lanes from j on of wide node w, which a step
** tests in order up to the first hit, leaving an entry for the lanes
** after it; so the stack holds one entry per level and the child, as the
** binary walk (Bvh objects) holds the right child per level. */
typedef struct wf_giter {
  const wf_gbvh *bvh;
  const wf_gmesh *mesh; /* mesh queries test each face's box */
  const wf_gboxes *boxes;
  wf_g3 lo, hi; /* box queries; ray queries: origin and 1/dir */
  int ray, sp, k, e, cur, pad;
  int stack[WF_GSTACK - 10];
} wf_giter;

/* The box of primitive i of the iterator's object. */
WF_G void giter_box(const wf_giter *q, int i, float *lo, float *hi) {
  if (q->mesh) {
    wf_g3 a, b, c;
    gtri(q->mesh, i, &a, &b, &c);
    lo[0] = gmin(a.x, gmin(b.x, c.x)), hi[0] = gmax(a.x, gmax(b.x, c.x));
    lo[1] = gmin(a.y, gmin(b.y, c.y)), hi[1] = gmax(a.y, gmax(b.y, c.y));
    lo[2] = gmin(a.z, gmin(b.z, c.z)), hi[2] = gmax(a.z, gmax(b.z, c.z));
  } else {
    wf_g3 l = q->boxes->lowers[i], h = q->boxes->uppers[i];
    lo[0] = l.x, lo[1] = l.y, lo[2] = l.z, hi[0] = h.x, hi[1] = h.y, hi[2] = h.z;
  }
}

WF_G int giter_hit(const wf_giter *q, const float *lo, const float *hi) {
  if (q->ray) return gbox_ray(lo, hi, q->lo, q->hi, 3.0e38f) <= 3.0e38f;
  return gbox_overlap(lo, hi, q->lo, q->hi);
}

WF_G void giter_begin(wf_giter *q, const wf_gbvh *bvh, wf_g3 lo, wf_g3 hi, int ray) {
  q->bvh = bvh;
  q->lo = lo;
  q->hi = ray ? gray_inv(hi) : hi;
  q->ray = ray;
  q->sp = 0;
  q->k = q->e = 0;
  q->cur = -1;
  if (bvh && (bvh->wide ? bvh->nwide : bvh->nnodes) > 0) q->stack[q->sp++] = 0;
}

/* The wide walk's step from stack entry e (4 w + j). */
WF_G void giter_wide(wf_giter *q, int e, int nstack) {
  const wf_gnode4 *w = &q->bvh->wide[e >> 2];
  for (int j = e & 3; j < 4 && w->child[j]; j++) {
    float lo[3], hi[3];
    gbox4_lane(w, j, lo, hi);
    if (!giter_hit(q, lo, hi)) continue;
    if (j < 3 && q->sp < nstack) q->stack[q->sp++] = e - (e & 3) + j + 1;
    if (w->child[j] < 0) {
      q->k = ~w->child[j];
      q->e = q->k + w->count[j];
    } else if (q->sp < nstack) {
      q->stack[q->sp++] = 4 * w->child[j];
    }
    return;
  }
}

WF_G int giter_next(wf_giter *q) {
  const int nstack = (int)(sizeof q->stack / sizeof q->stack[0]);
  for (;;) {
    while (q->k < q->e) {
      int i = q->bvh->items[q->k++];
      float lo[3], hi[3];
      giter_box(q, i, lo, hi);
      if (giter_hit(q, lo, hi)) {
        q->cur = i;
        return 1;
      }
    }
    if (!q->sp) {
      q->cur = -1;
      return 0;
    }
    if (q->bvh->wide) {
      giter_wide(q, q->stack[--q->sp], nstack);
      continue;
    }
    const wf_gnode *n = &q->bvh->nodes[q->stack[--q->sp]];
    if (!giter_hit(q, n->lo, n->hi)) continue;
    if (n->b < 0) {
      q->k = n->a;
      q->e = n->a - n->b;
    } else if (q->sp + 2 <= nstack) {
      q->stack[q->sp++] = n->b;
      q->stack[q->sp++] = n->a;
    }
  }
}

/* ======================================================================
** the native builtins (rows of src/geom/native.h)
** ====================================================================== */
#define WF_GCOPY(dst, src, n)                                                                      \
  do {                                                                                             \
    unsigned char *d_ = (unsigned char *)(dst);                                                    \
    const unsigned char *s_ = (const unsigned char *)(src);                                        \
    for (int i_ = 0; i_ < (int)(n); i_++)                                                          \
      d_[i_] = s_[i_];                                                                             \
  } while (0)

/* argument readers (the arguments' C layouts) */
WF_G const wf_gmesh *gmesh_arg(const void *p) {
  unsigned long long id;
  WF_GCOPY(&id, p, sizeof id);
  return (const wf_gmesh *)id;
}
WF_G const wf_gboxes *gboxes_arg(const void *p) {
  unsigned long long id;
  WF_GCOPY(&id, p, sizeof id);
  return (const wf_gboxes *)id;
}
WF_G wf_g3 g3_arg(const void *p) {
  wf_g3 v;
  WF_GCOPY(&v, p, sizeof v);
  return v;
}
WF_G float f_arg(const void *p) {
  float v;
  WF_GCOPY(&v, p, sizeof v);
  return v;
}
WF_G int i_arg(const void *p) {
  int v;
  WF_GCOPY(&v, p, sizeof v);
  return v;
}

/* mesh_query_point_t and mesh_query_ray_t, as the front end lays them out */
typedef struct wf_gqp {
  unsigned char result, pad[3];
  float sign;
  int face;
  float u, v;
} wf_gqp;
typedef struct wf_gqr {
  unsigned char result, pad[3];
  float sign;
  int face;
  float t, u, v;
  wf_g3 normal;
} wf_gqr;

/* mode: 0 parity, 1 none, 2 normal, 3 winding number, 4 furthest */
WF_G void gquery_point(void *res, const void *id, const void *pt, const void *md, int mode,
                       float eps, float accuracy, float threshold) {
  const wf_gmesh *m = gmesh_arg(id);
  wf_g3 p = g3_arg(pt);
  wf_gqp r;
  r.result = 0, r.pad[0] = r.pad[1] = r.pad[2] = 0;
  r.sign = 0.0f, r.face = 0, r.u = 0.0f, r.v = 0.0f;
  float u = 0.0f, v = 0.0f, d2 = 0.0f;
  int f = mode == 4 ? gmesh_furthest(m, p, f_arg(md), &u, &v, &d2)
                    : gmesh_closest(m, p, f_arg(md), &u, &v, &d2);
  if (f >= 0) {
    r.result = 1, r.face = f, r.u = u, r.v = v;
    if (mode == 0) r.sign = gmesh_sign_parity(m, p);
    if (mode == 2) {
      wf_g3 a, b, c;
      gtri(m, f, &a, &b, &c);
      wf_g3 q = gbary(a, b, c, u, v);
      wf_g3 n = gmesh_pseudo_normal(m, p, q, d2, eps);
      r.sign = g3dot(g3sub(p, q), n) >= 0.0f ? 1.0f : -1.0f;
    }
    if (mode == 3) r.sign = gmesh_winding(m, p, accuracy) > threshold ? -1.0f : 1.0f;
  }
  WF_GCOPY(res, &r, sizeof r);
}

WF_GN void wf_nat_mesh_query_point(void *res, const void *id, const void *p, const void *md) {
  gquery_point(res, id, p, md, 0, 0.0f, 0.0f, 0.0f);
}
WF_GN void wf_nat_mesh_query_point_no_sign(void *res, const void *id, const void *p,
                                           const void *md) {
  gquery_point(res, id, p, md, 1, 0.0f, 0.0f, 0.0f);
}
WF_GN void wf_nat_mesh_query_point_sign_normal(void *res, const void *id, const void *p,
                                               const void *md, const void *eps) {
  gquery_point(res, id, p, md, 2, f_arg(eps), 0.0f, 0.0f);
}
WF_GN void wf_nat_mesh_query_point_sign_winding_number(void *res, const void *id, const void *p,
                                                       const void *md, const void *acc,
                                                       const void *thr) {
  gquery_point(res, id, p, md, 3, 0.0f, f_arg(acc), f_arg(thr));
}
WF_GN void wf_nat_mesh_query_furthest_point_no_sign(void *res, const void *id, const void *p,
                                                    const void *md) {
  gquery_point(res, id, p, md, 4, 0.0f, 0.0f, 0.0f);
}

WF_GN void wf_nat_mesh_query_ray(void *res, const void *id, const void *o, const void *d,
                                 const void *tmax) {
  const wf_gmesh *m = gmesh_arg(id);
  wf_gqr r;
  r.result = 0, r.pad[0] = r.pad[1] = r.pad[2] = 0;
  r.sign = 0.0f, r.face = 0, r.t = 0.0f, r.u = 0.0f, r.v = 0.0f, r.normal = g3(0.0f, 0.0f, 0.0f);
  float t = 0.0f, u = 0.0f, v = 0.0f, det = 0.0f;
  wf_g3 dir = g3_arg(d);
  int f = gmesh_ray(m, g3_arg(o), dir, f_arg(tmax), &t, &u, &v, &det);
  if (f >= 0) {
    r.result = 1, r.face = f, r.t = t, r.u = u, r.v = v;
    r.normal = gface_normal(m, f);
    r.sign = g3dot(dir, r.normal) < 0.0f ? 1.0f : -1.0f;
  }
  WF_GCOPY(res, &r, sizeof r);
}

WF_GN void wf_nat_mesh_query_aabb(void *state, void *res, const void *id, const void *lo,
                                  const void *hi) {
  wf_giter *q = (wf_giter *)state;
  const wf_gmesh *m = gmesh_arg(id);
  q->mesh = m;
  q->boxes = 0;
  giter_begin(q, m && m->nfaces > 0 ? &m->bvh : 0, g3_arg(lo), g3_arg(hi), 0);
  (void)res;
}
WF_GN void wf_nat_bvh_query_aabb(void *state, void *res, const void *id, const void *lo,
                                 const void *hi) {
  wf_giter *q = (wf_giter *)state;
  const wf_gboxes *b = gboxes_arg(id);
  q->mesh = 0;
  q->boxes = b;
  giter_begin(q, b && b->n > 0 ? &b->bvh : 0, g3_arg(lo), g3_arg(hi), 0);
  (void)res;
}
WF_GN void wf_nat_bvh_query_ray(void *state, void *res, const void *id, const void *o,
                                const void *d) {
  wf_giter *q = (wf_giter *)state;
  const wf_gboxes *b = gboxes_arg(id);
  q->mesh = 0;
  q->boxes = b;
  giter_begin(q, b && b->n > 0 ? &b->bvh : 0, g3_arg(o), g3_arg(d), 1);
  (void)res;
}
WF_G void giter_next_native(void *res, const void *h) {
  unsigned long long p;
  WF_GCOPY(&p, h, sizeof p);
  unsigned char ok = (unsigned char)giter_next((wf_giter *)p);
  WF_GCOPY(res, &ok, 1);
}
WF_G void giter_get_native(void *res, const void *h) {
  unsigned long long p;
  WF_GCOPY(&p, h, sizeof p);
  int cur = ((const wf_giter *)p)->cur;
  WF_GCOPY(res, &cur, sizeof cur);
}
WF_GN void wf_nat_mesh_query_aabb_next(void *res, const void *h) {
  giter_next_native(res, h);
}
WF_GN void wf_nat_mesh_query_aabb_get(void *res, const void *h) {
  giter_get_native(res, h);
}
WF_GN void wf_nat_bvh_query_aabb_next(void *res, const void *h) {
  giter_next_native(res, h);
}
WF_GN void wf_nat_bvh_query_aabb_get(void *res, const void *h) {
  giter_get_native(res, h);
}
WF_GN void wf_nat_bvh_query_ray_next(void *res, const void *h) {
  giter_next_native(res, h);
}
WF_GN void wf_nat_bvh_query_ray_get(void *res, const void *h) {
  giter_get_native(res, h);
}

/* element access: an index out of range reads zeros (debug mode reports
** it first: src/cpu/native.c) */
WF_G void gpoint_of(void *res, const wf_gmesh *m, const wf_g3 *arr, int i) {
  wf_g3 v = g3(0.0f, 0.0f, 0.0f);
  if (m && arr && i >= 0 && i < m->npoints) v = arr[i];
  WF_GCOPY(res, &v, sizeof v);
}
/* The element readers: mesh_get_point, mesh_get_velocity, and their
** tangents in forward mode (those weft.jvp was given for the mesh's
** arrays: zero where it was given none, as out of range). */
#define WF_GPOINT_READER(name, field)                                                              \
  WF_GN void wf_nat_##name(void *res, const void *id, const void *i) {                             \
    const wf_gmesh *m = gmesh_arg(id);                                                             \
    gpoint_of(res, m, m ? m->field : 0, i_arg(i));                                                 \
  }
WF_GPOINT_READER(mesh_get_point, points)
WF_GPOINT_READER(mesh_get_velocity, velocities)
WF_GPOINT_READER(mesh_get_point_tan, points_tan)
WF_GPOINT_READER(mesh_get_velocity_tan, velocities_tan)
#undef WF_GPOINT_READER
WF_GN void wf_nat_mesh_get_index(void *res, const void *id, const void *i) {
  const wf_gmesh *m = gmesh_arg(id);
  int k = i_arg(i), v = 0;
  if (m && k >= 0 && k < 3 * m->nfaces) v = m->indices[k];
  WF_GCOPY(res, &v, sizeof v);
}
WF_GN void wf_nat_mesh_eval_face_normal(void *res, const void *id, const void *f) {
  const wf_gmesh *m = gmesh_arg(id);
  int k = i_arg(f);
  wf_g3 n = g3(0.0f, 0.0f, 0.0f);
  if (m && k >= 0 && k < m->nfaces) n = gface_normal(m, k);
  WF_GCOPY(res, &n, sizeof n);
}

/* adjoints: atomic accumulation into the mesh's gradient buffers */
#if defined(__CUDACC__)
WF_G void gatomic_addf(float *p, float v) {
  atomicAdd(p, v);
}
#else
WF_G void gatomic_addf(float *p, float v) {
  union {
    float f;
    unsigned int u;
  } old, nw;
  old.u = __atomic_load_n((unsigned int *)p, __ATOMIC_RELAXED);
  do {
    nw.f = old.f + v;
  } while (!__atomic_compare_exchange_n((unsigned int *)p, &old.u, nw.u, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
}
#endif
WF_G void gadj_point(wf_g3 *grad, const wf_gmesh *m, int i, wf_g3 g) {
  if (!grad || i < 0 || i >= m->npoints) return;
  gatomic_addf(&grad[i].x, g.x);
  gatomic_addf(&grad[i].y, g.y);
  gatomic_addf(&grad[i].z, g.z);
}
WF_GN void wf_nat_mesh_get_point_adj(void *res, const void *id, const void *i, const void *g) {
  const wf_gmesh *m = gmesh_arg(id);
  if (m) gadj_point(m->points_grad, m, i_arg(i), g3_arg(g));
  (void)res;
}
WF_GN void wf_nat_mesh_get_velocity_adj(void *res, const void *id, const void *i, const void *g) {
  const wf_gmesh *m = gmesh_arg(id);
  if (m) gadj_point(m->velocities_grad, m, i_arg(i), g3_arg(g));
  (void)res;
}

/* the volume and hash grid builtins live beside their host code; the
** CUDA C carries their text ahead of this file (src/cuda/emit.c) */
#ifndef WF_GEOM_HASHGRID_H
#include "geom/hashgrid.h"
#endif
#ifndef WF_GEOM_VOLUME_H
#include "geom/volume.h"
#endif

#endif
