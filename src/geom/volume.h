/*
** volume.h -- sampling a NanoVDB grid: the one copy of the tree walk, the
** closest and trilinear samplers, their gradient and the index/world maps.
**
** Plain C99 with no libc beyond floorf/roundf, so the same text compiles
** into libweft for the CPU backend and into the CUDA prelude (define
** WF_GEOM_FN as `static __device__ inline` there before including it).
**
** A volume id is the address of a wf_vol descriptor. The descriptor
** caches what every lookup needs (where the root is, the per-type offsets
** of the tables) so the walk does no type dispatch:
**
**   grid buffer (breadth first, checked by wf_nvdb_check before use)
**   +------+------+------------------+--------+--------+--------+
**   | grid | tree | root + its tiles | uppers | lowers | leaves |
**   +------+------+------------------+--------+--------+--------+
**     672    64     root_size + 32*n   32^3     16^3     8^3 values
**
** Root tiles are found by a key built from the coordinate's top bits;
** internal nodes hold a child mask and a table whose slot is either a
** tile value or the signed byte offset of the child from the node.
*/
#ifndef WF_GEOM_VOLUME_H
#define WF_GEOM_VOLUME_H

#ifndef WF_GEOM_GEOMFN_H /* the CUDA C has it already (src/cuda/emit.c) */
#include "geom/geomfn.h"
#endif

#define WF_VOL_MAGIC 0x6c6f76746665775full /* "_weftvol": a live descriptor */
#define WF_VOL_CLOSEST 0
#define WF_VOL_LINEAR 1

/* NanoVDB grid types weft samples */
#define WF_NVDB_FLOAT 1
#define WF_NVDB_INT32 4
#define WF_NVDB_VEC3F 6
#define WF_NVDB_INDEX 19   /* index grids (read only): a voxel's value is */
#define WF_NVDB_ONINDEX 20 /* an index into data kept beside the grid */

/* A slot of the leaf table: the leaf holding the 8^3 block at (i, j, k)
** (multiples of 8) lies off bytes into the grid; off 0 marks a free slot. */
typedef struct wf_vol_slot {
  int32_t i, j, k, pad;
  int64_t off;
} wf_vol_slot;

typedef struct wf_vol {
  uint64_t magic;               /* WF_VOL_MAGIC while alive */
  const unsigned char *grid;    /* the grid buffer (device memory for CUDA) */
  const unsigned char *root;    /* the root node inside it */
  uint32_t ntiles;              /* root tiles */
  uint32_t type;                /* WF_NVDB_* */
  uint32_t vsize;               /* bytes of one value: 4 or 12 */
  uint32_t root_bg;             /* root: offset of the background value */
  uint32_t root_size;           /* root: size before its tile table */
  uint32_t table_stride;        /* internal nodes: bytes per table slot */
  uint32_t upper_table;         /* upper node: offset of its table */
  uint32_t lower_table;         /* lower node: offset of its table */
  uint32_t leaf_table;          /* leaf: offset of its 512 values */
  uint32_t slot_mask;           /* leaf table: slots - 1 (a power of 2) */
  const wf_vol_slot *slots;     /* leaf table, or NULL: walk the tree */
  float mat[9], inv[9], vec[3]; /* index -> world: mat * ijk + vec */
  uint32_t tile_value;          /* root tile: offset of its value */
  /* The block table: for every 8^3 block of a box around the active
  ** voxels, where its values are (wf_vol_block_at); NULL: none. */
  const int64_t *blocks;
  int32_t box_lo[3]; /* the box's first voxel (multiples of 8) */
  uint32_t box_n[3]; /* its size in voxels (multiples of 8) */
  /* Float and vec3 grids: every value of that box, x slowest and z
  ** fastest, vsize bytes each (a cell's corners at fixed strides);
  ** NULL: none. */
  const float *dense;
} wf_vol;

/* The leaf table's slot for a block origin (all multiples of 8). */
WF_GEOM_FN uint32_t wf_vol_hash(int32_t i, int32_t j, int32_t k) {
  return ((uint32_t)i * 73856093u) ^ ((uint32_t)j * 19349663u) ^ ((uint32_t)k * 83492791u) ^
         ((uint32_t)k >> 11);
}

typedef struct wf_vol_v3 {
  float x, y, z;
} wf_vol_v3;

#define WF_VOL_TILE_SIZE 32  /* root tile: key, child, state, value */
#define WF_VOL_TILE_VALUE 20 /* where root tiles of float, int32, vec3 grids keep values */
#define WF_VOL_UPPER_CHILD_MASK 4128
#define WF_VOL_LOWER_CHILD_MASK 544

WF_GEOM_FN int wf_vol_bit(const unsigned char *mask, uint32_t n) {
  return (((const uint32_t *)mask)[n >> 5] >> (n & 31)) & 1u;
}

/* The address of the value at (i, j, k): in a leaf (*in_leaf = 1), in a
** tile of an internal node or the root, or the background. */
WF_GEOM_FN const unsigned char *wf_vol_walk(const wf_vol *v, int32_t i, int32_t j, int32_t k,
                                            int *in_leaf) {
  const unsigned char *root = v->root;
  const uint64_t key = (uint64_t)((uint32_t)k >> 12) | ((uint64_t)((uint32_t)j >> 12) << 21) |
                       ((uint64_t)((uint32_t)i >> 12) << 42);
  const unsigned char *tile = root + v->root_size;
  uint32_t t;
  *in_leaf = 0;
  for (t = 0; t < v->ntiles; t++, tile += WF_VOL_TILE_SIZE)
    if (*(const uint64_t *)tile == key) break;
  if (t == v->ntiles) return root + v->root_bg;
  int64_t child = *(const int64_t *)(tile + 8);
  if (child == 0) return tile + v->tile_value;
  const unsigned char *upper = root + child;
  uint32_t n = (((uint32_t)i & 4095u) >> 7 << 10) | (((uint32_t)j & 4095u) >> 7 << 5) |
               (((uint32_t)k & 4095u) >> 7);
  const unsigned char *slot = upper + v->upper_table + (uint64_t)n * v->table_stride;
  if (!wf_vol_bit(upper + WF_VOL_UPPER_CHILD_MASK, n)) return slot;
  const unsigned char *lower = upper + *(const int64_t *)slot;
  n = (((uint32_t)i & 127u) >> 3 << 8) | (((uint32_t)j & 127u) >> 3 << 4) |
      (((uint32_t)k & 127u) >> 3);
  slot = lower + v->lower_table + (uint64_t)n * v->table_stride;
  if (!wf_vol_bit(lower + WF_VOL_LOWER_CHILD_MASK, n)) return slot;
  const unsigned char *leaf = lower + *(const int64_t *)slot;
  n = (((uint32_t)i & 7u) << 6) | (((uint32_t)j & 7u) << 3) | ((uint32_t)k & 7u);
  *in_leaf = 1;
  return leaf + v->leaf_table + (uint64_t)n * v->vsize;
}

/* As wf_vol_walk, through the leaf table first: one probe (usually)
** instead of the walk down the root, upper and lower nodes. */
/* The block table's entry for voxel (i, j, k) of the box: the byte offset
** of the block's first value in the grid, times 2, plus 1 for a leaf (its
** values follow each other) or 0 for a tile or the background (one value
** for the whole block). */
WF_GEOM_FN int64_t wf_vol_block_at(const wf_vol *v, int32_t i, int32_t j, int32_t k) {
  const uint32_t x = ((uint32_t)i - (uint32_t)v->box_lo[0]) >> 3,
                 y = ((uint32_t)j - (uint32_t)v->box_lo[1]) >> 3,
                 z = ((uint32_t)k - (uint32_t)v->box_lo[2]) >> 3;
  return v->blocks[((uint64_t)x * (v->box_n[1] >> 3) + y) * (v->box_n[2] >> 3) + z];
}

/* Is the box of voxels (i..i+d, j..j+d, k..k+d) inside the block table's? */
WF_GEOM_FN int wf_vol_in_box(const wf_vol *v, int32_t i, int32_t j, int32_t k, uint32_t d) {
  return v->blocks && (uint32_t)i - (uint32_t)v->box_lo[0] < v->box_n[0] - d &&
         (uint32_t)j - (uint32_t)v->box_lo[1] < v->box_n[1] - d &&
         (uint32_t)k - (uint32_t)v->box_lo[2] < v->box_n[2] - d;
}

/* The address of voxel (i, j, k)'s value through a block table entry. */
WF_GEOM_FN const unsigned char *wf_vol_entry_value(const wf_vol *v, int64_t e, int32_t i, int32_t j,
                                                   int32_t k) {
  const uint32_t n = (((uint32_t)i & 7u) << 6) | (((uint32_t)j & 7u) << 3) | ((uint32_t)k & 7u);
  /* no branch: samples at random points would mispredict it */
  return v->grid + (e >> 1) + ((uint64_t)n * v->vsize & (0 - (uint64_t)(e & 1)));
}

WF_GEOM_FN const unsigned char *wf_vol_lookup_at(const wf_vol *v, int32_t i, int32_t j, int32_t k,
                                                 int *in_leaf) {
  if (wf_vol_in_box(v, i, j, k, 0)) {
    const int64_t e = wf_vol_block_at(v, i, j, k);
    *in_leaf = (int)(e & 1);
    return wf_vol_entry_value(v, e, i, j, k);
  }
  if (v->slots) {
    const int32_t bi = i & ~7, bj = j & ~7, bk = k & ~7;
    uint32_t h = wf_vol_hash(bi, bj, bk) & v->slot_mask;
    for (;;) {
      const wf_vol_slot *s = v->slots + h;
      if (s->off == 0) break; /* not a leaf: a tile or the background */
      if (s->i == bi && s->j == bj && s->k == bk) {
        const uint32_t n =
            (((uint32_t)i & 7u) << 6) | (((uint32_t)j & 7u) << 3) | ((uint32_t)k & 7u);
        *in_leaf = 1;
        return v->grid + s->off + v->leaf_table + (uint64_t)n * v->vsize;
      }
      h = (h + 1) & v->slot_mask;
    }
  }
  return wf_vol_walk(v, i, j, k, in_leaf);
}

WF_GEOM_FN const unsigned char *wf_vol_find(const wf_vol *v, int32_t i, int32_t j, int32_t k) {
  int in_leaf;
  return wf_vol_lookup_at(v, i, j, k, &in_leaf);
}

WF_GEOM_FN float wf_vol_read_f(const wf_vol *v, int32_t i, int32_t j, int32_t k) {
  return *(const float *)wf_vol_find(v, i, j, k);
}
WF_GEOM_FN int32_t wf_vol_read_i(const wf_vol *v, int32_t i, int32_t j, int32_t k) {
  return *(const int32_t *)wf_vol_find(v, i, j, k);
}
WF_GEOM_FN wf_vol_v3 wf_vol_read_v(const wf_vol *v, int32_t i, int32_t j, int32_t k) {
  const float *p = (const float *)wf_vol_find(v, i, j, k);
  wf_vol_v3 r = {p[0], p[1], p[2]};
  return r;
}

/* The round of Warp's closest sampling: halves away from zero. */
WF_GEOM_FN int32_t wf_vol_round(float x) {
  return (int32_t)roundf(x);
}

/* The 8 corner values of the cell whose low corner is (i, j, k), in the
** order (0,0,0) (0,0,1) (0,1,0) ... (1,1,1). Inside the block table's box
** each corner reads its block's entry, without a branch. Elsewhere, one
** lookup per 8^3 block the
** corners touch: the axes on which the cell crosses a block border (cm,
** bits x y z as in the corner number) give 1, 2, 4 or 8 blocks, and corner
** c lies in block c & cm. A leaf's corners are neighbours in its value
** table; a tile or the background gives its block one value. */
WF_GEOM_FN void wf_vol_corners(const wf_vol *v, int32_t i, int32_t j, int32_t k, int nf,
                               float *out) {
  const int cm = (((i & 7) == 7) << 2) | (((j & 7) == 7) << 1) | ((k & 7) == 7);
  const unsigned char *base[8];
  uint32_t step[8]; /* value size in a leaf, 0 in a tile */
  int b, c, q;
  if (v->dense && wf_vol_in_box(v, i, j, k, 1)) { /* all 8 in the dense table */
    const uint64_t sz = v->box_n[2], sy = sz * v->box_n[1];
    const float *s =
        v->dense + (uint64_t)nf * ((((uint32_t)i - (uint32_t)v->box_lo[0]) * (uint64_t)v->box_n[1] +
                                    ((uint32_t)j - (uint32_t)v->box_lo[1])) *
                                       sz +
                                   ((uint32_t)k - (uint32_t)v->box_lo[2]));
    for (c = 0; c < 8; c++) {
      const uint64_t at = (uint64_t)nf * ((uint64_t)(c >> 2) * sy + (uint64_t)((c >> 1) & 1) * sz +
                                          (uint64_t)(c & 1));
      for (q = 0; q < nf; q++)
        out[c * nf + q] = s[at + q];
    }
    return;
  }
  if (wf_vol_in_box(v, i, j, k, 1)) { /* all 8 in the block table */
    for (c = 0; c < 8; c++) {
      const int32_t ci = i + (c >> 2), cj = j + ((c >> 1) & 1), ck = k + (c & 1);
      const float *s =
          (const float *)wf_vol_entry_value(v, wf_vol_block_at(v, ci, cj, ck), ci, cj, ck);
      for (q = 0; q < nf; q++)
        out[c * nf + q] = s[q];
    }
    return;
  }
  if (!cm) { /* the common case: one block, corners at fixed offsets */
    int in_leaf;
    const unsigned char *p = wf_vol_lookup_at(v, i, j, k, &in_leaf);
    const uint64_t sz = in_leaf ? v->vsize : 0;
    for (c = 0; c < 8; c++) {
      const uint32_t at = (uint32_t)(((c >> 2) << 6) | (((c >> 1) & 1) << 3) | (c & 1));
      const float *s = (const float *)(p + at * sz);
      for (q = 0; q < nf; q++)
        out[c * nf + q] = s[q];
    }
    return;
  }
  for (b = 0; b < 8; b++) {
    if ((b & cm) != b) continue;
    const int32_t bi = i + (b >> 2), bj = j + ((b >> 1) & 1), bk = k + (b & 1);
    int in_leaf;
    const unsigned char *p = wf_vol_lookup_at(v, bi, bj, bk, &in_leaf);
    const uint32_t n =
        (((uint32_t)bi & 7u) << 6) | (((uint32_t)bj & 7u) << 3) | ((uint32_t)bk & 7u);
    step[b] = in_leaf ? v->vsize : 0;
    base[b] = p - (uint64_t)n * step[b];
  }
  for (c = 0; c < 8; c++) {
    const int32_t ci = i + (c >> 2), cj = j + ((c >> 1) & 1), ck = k + (c & 1);
    const uint32_t n =
        (((uint32_t)ci & 7u) << 6) | (((uint32_t)cj & 7u) << 3) | ((uint32_t)ck & 7u);
    const float *s = (const float *)(base[c & cm] + (uint64_t)n * step[c & cm]);
    for (q = 0; q < nf; q++)
      out[c * nf + q] = s[q];
  }
}

/* Sample nf float components at index-space uvw; grad (3*nf, may be NULL)
** receives d value / d uvw, row q for component q. */
WF_GEOM_FN void wf_vol_sample(const wf_vol *v, float u, float w1, float w2, int mode, int nf,
                              float *val, float *grad) {
  int c, q;
  if (grad)
    for (q = 0; q < 3 * nf; q++)
      grad[q] = 0.0f;
  if (mode != WF_VOL_LINEAR) {
    const float *s =
        (const float *)wf_vol_find(v, wf_vol_round(u), wf_vol_round(w1), wf_vol_round(w2));
    for (q = 0; q < nf; q++)
      val[q] = mode == WF_VOL_CLOSEST ? s[q] : 0.0f;
    return;
  }
  const float bu = floorf(u), bv = floorf(w1), bw = floorf(w2);
  const float fx = u - bu, fy = w1 - bv, fz = w2 - bw;
  const float wx[2] = {1.0f - fx, fx}, wy[2] = {1.0f - fy, fy}, wz[2] = {1.0f - fz, fz};
  float cv[24];
  wf_vol_corners(v, (int32_t)bu, (int32_t)bv, (int32_t)bw, nf, cv);
  for (q = 0; q < nf; q++)
    val[q] = 0.0f;
  for (c = 0; c < 8; c++) {
    const int ox = c >> 2, oy = (c >> 1) & 1, oz = c & 1;
    const float wgt = wx[ox] * wy[oy] * wz[oz];
    for (q = 0; q < nf; q++)
      val[q] += wgt * cv[c * nf + q];
    if (grad) {
      const float gx = (float)(2 * ox - 1) * wy[oy] * wz[oz];
      const float gy = (float)(2 * oy - 1) * wx[ox] * wz[oz];
      const float gz = (float)(2 * oz - 1) * wx[ox] * wy[oy];
      for (q = 0; q < nf; q++) {
        grad[3 * q + 0] += gx * cv[c * nf + q];
        grad[3 * q + 1] += gy * cv[c * nf + q];
        grad[3 * q + 2] += gz * cv[c * nf + q];
      }
    }
  }
}

WF_GEOM_FN float wf_vol_sample_f(const wf_vol *v, float u, float w1, float w2, int mode) {
  float r;
  wf_vol_sample(v, u, w1, w2, mode, 1, &r, 0);
  return r;
}

WF_GEOM_FN int32_t wf_vol_sample_i(const wf_vol *v, float u, float w1, float w2) {
  return wf_vol_read_i(v, wf_vol_round(u), wf_vol_round(w1), wf_vol_round(w2));
}

/* index <-> world through the grid's float map (Warp uses the same) */
WF_GEOM_FN wf_vol_v3 wf_vol_map(const float *m, const float *add, float x, float y, float z) {
  wf_vol_v3 r;
  r.x = m[0] * x + m[1] * y + m[2] * z + (add ? add[0] : 0.0f);
  r.y = m[3] * x + m[4] * y + m[5] * z + (add ? add[1] : 0.0f);
  r.z = m[6] * x + m[7] * y + m[8] * z + (add ? add[2] : 0.0f);
  return r;
}
WF_GEOM_FN wf_vol_v3 wf_vol_index_to_world(const wf_vol *v, float x, float y, float z) {
  return wf_vol_map(v->mat, v->vec, x, y, z);
}
WF_GEOM_FN wf_vol_v3 wf_vol_world_to_index(const wf_vol *v, float x, float y, float z) {
  return wf_vol_map(v->inv, 0, x - v->vec[0], y - v->vec[1], z - v->vec[2]);
}
WF_GEOM_FN wf_vol_v3 wf_vol_index_to_world_dir(const wf_vol *v, float x, float y, float z) {
  return wf_vol_map(v->mat, 0, x, y, z);
}
WF_GEOM_FN wf_vol_v3 wf_vol_world_to_index_dir(const wf_vol *v, float x, float y, float z) {
  return wf_vol_map(v->inv, 0, x, y, z);
}

/* ---- kernel builtins: the rows of src/geom/native.h (its C ABI: the
** result pointer first, then a pointer to each argument). An id of 0 is no
** volume: lookups give zeros. The samplers themselves are weft.func in
** lua/weft/volume.lua built on volume_cell_*, so autodiff differentiates
** them with respect to the sample position. ---- */
WF_GEOM_FN const wf_vol *wf_vol_arg(const void *id) {
  return (const wf_vol *)(uintptr_t) * (const uint64_t *)id;
}
WF_GEOM_FN int32_t wf_vol_iarg(const void *p) {
  return *(const int32_t *)p;
}

/* volume_lookup_f/_i/_v(id, i, j, k): the value at a voxel */
WF_GEOM_FN void wf_vol_lookup(void *res, const void *id, const void *i, const void *j,
                              const void *k, uint32_t nbytes, uint32_t type) {
  const wf_vol *v = wf_vol_arg(id);
  unsigned char *r = (unsigned char *)res;
  uint32_t b;
  if (!v || v->type != type) { /* no volume, or one of another type: zeros, as Warp */
    for (b = 0; b < nbytes; b++)
      r[b] = 0;
    return;
  }
  const unsigned char *s = wf_vol_find(v, wf_vol_iarg(i), wf_vol_iarg(j), wf_vol_iarg(k));
  for (b = 0; b < nbytes; b++)
    r[b] = s[b];
}
WF_GEOM_FN void wf_nat_volume_lookup_f(void *res, const void *id, const void *i, const void *j,
                                       const void *k) {
  wf_vol_lookup(res, id, i, j, k, 4, WF_NVDB_FLOAT);
}
WF_GEOM_FN void wf_nat_volume_lookup_i(void *res, const void *id, const void *i, const void *j,
                                       const void *k) {
  wf_vol_lookup(res, id, i, j, k, 4, WF_NVDB_INT32);
}
WF_GEOM_FN void wf_nat_volume_lookup_v(void *res, const void *id, const void *i, const void *j,
                                       const void *k) {
  wf_vol_lookup(res, id, i, j, k, 12, WF_NVDB_VEC3F);
}

/* volume_cell_f/_v(id, i, j, k): the 8 corner values of the cell with
** low corner (i, j, k), corner c = (c >> 2, (c >> 1) & 1, c & 1) */
WF_GEOM_FN void wf_vol_cell(void *res, const void *id, const void *i, const void *j, const void *k,
                            int nf) {
  const wf_vol *v = wf_vol_arg(id);
  float *r = (float *)res;
  int q;
  if (!v || v->type != (nf == 3 ? WF_NVDB_VEC3F : WF_NVDB_FLOAT)) { /* zeros, as Warp */
    for (q = 0; q < 8 * nf; q++)
      r[q] = 0.0f;
    return;
  }
  wf_vol_corners(v, wf_vol_iarg(i), wf_vol_iarg(j), wf_vol_iarg(k), nf, r);
}
WF_GEOM_FN void wf_nat_volume_cell_f(void *res, const void *id, const void *i, const void *j,
                                     const void *k) {
  wf_vol_cell(res, id, i, j, k, 1);
}
WF_GEOM_FN void wf_nat_volume_cell_v(void *res, const void *id, const void *i, const void *j,
                                     const void *k) {
  wf_vol_cell(res, id, i, j, k, 3);
}

/* volume_transform_row(id, r): rows 0-2 of the index-to-world matrix,
** 3 its translation, 4-6 the rows of its inverse */
WF_GEOM_FN void wf_nat_volume_transform_row(void *res, const void *id, const void *row) {
  const wf_vol *v = wf_vol_arg(id);
  const int32_t r = wf_vol_iarg(row);
  float *o = (float *)res;
  const float *src = !v                ? 0
                     : r >= 0 && r < 3 ? v->mat + 3 * r
                     : r == 3          ? v->vec
                     : r >= 4 && r < 7 ? v->inv + 3 * (r - 4)
                                       : 0;
  o[0] = src ? src[0] : 0.0f;
  o[1] = src ? src[1] : 0.0f;
  o[2] = src ? src[2] : 0.0f;
}

/* volume_lookup_index(id, i, j, k), as Warp: the 0-based index a voxel of
** an index grid holds, -1 for none (inactive, a tile, or not an index
** grid). A leaf keeps the first index (1-based; 0 is the background) at
** its table and, for OnIndex grids, the counts of active voxels before
** mask words 1 to 7 (9 bits each) after it. */
WF_GEOM_FN int32_t wf_vol_index(const wf_vol *v, int32_t i, int32_t j, int32_t k) {
  int in_leaf;
  if (v->type != WF_NVDB_INDEX && v->type != WF_NVDB_ONINDEX) return -1;
  const unsigned char *p = wf_vol_lookup_at(v, i, j, k, &in_leaf);
  if (!in_leaf) return -1;
  const uint32_t n = (((uint32_t)i & 7u) << 6) | (((uint32_t)j & 7u) << 3) | ((uint32_t)k & 7u);
  const uint64_t offset = *(const uint64_t *)p;
  if (v->type == WF_NVDB_INDEX) return (int32_t)(offset + n) - 1;
  const uint64_t *mask = (const uint64_t *)(p - v->leaf_table + 16);
  const uint64_t word = mask[n >> 6], bit = (uint64_t)1 << (n & 63);
  if (!(word & bit)) return -1;
  uint64_t count = 0, w = word & (bit - 1);
  while (w) { /* popcount, portable to CUDA C and C99 */
    w &= w - 1;
    count++;
  }
  if (n >> 6) count += (*(const uint64_t *)(p + 8) >> (9 * ((n >> 6) - 1))) & 511u;
  return (int32_t)(offset + count) - 1;
}
WF_GEOM_FN void wf_nat_volume_lookup_index(void *res, const void *id, const void *i, const void *j,
                                           const void *k) {
  const wf_vol *v = wf_vol_arg(id);
  *(int32_t *)res = v ? wf_vol_index(v, wf_vol_iarg(i), wf_vol_iarg(j), wf_vol_iarg(k)) : -1;
}

#endif
