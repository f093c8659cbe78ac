/*
** nanovdb.c -- NanoVDB files: read, check, write, build from dense data.
**
** Everything read from a file is untrusted: sizes are bounded before they
** are multiplied or allocated, and wf_nvdb_check proves that every child
** offset of the tree lands on a node of the next level, so the sampler in
** volume.h can walk the tree without further checks.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "geom/nanovdb.h"

/* Per grid type: the byte layout of the nodes (NanoVDB 32.x). */
typedef struct nvdb_layout {
  uint32_t type, vsize, root_bg, root_size, tile_value, stride;
  uint32_t upper_table, upper_size, lower_table, lower_size, leaf_table, leaf_size;
  const char *name;
} nvdb_layout;

static const nvdb_layout layouts[] = {
    {WF_NVDB_FLOAT, 4, 28, 64, 20, 8, 8256, 270400, 1088, 33856, 96, 2144, "float"},
    {WF_NVDB_INT32, 4, 28, 64, 20, 8, 8256, 270400, 1088, 33856, 96, 2144, "int32"},
    {WF_NVDB_VEC3F, 12, 28, 96, 20, 16, 8256, 532544, 1088, 66624, 128, 6272, "Vec3f"},
    /* index grids: a leaf has no values, only its first index (vsize 0) */
    {WF_NVDB_INDEX, 0, 32, 96, 24, 8, 8256, 270400, 1088, 33856, 80, 96, "Index"},
    {WF_NVDB_ONINDEX, 0, 32, 96, 24, 8, 8256, 270400, 1088, 33856, 80, 96, "OnIndex"},
};

/* names of the types NanoVDB knows, for messages */
static const char *const type_names[] = {
    "Unknown",   "Float",       "Double",     "Int16",  "Int32",   "Int64", "Vec3f",
    "Vec3d",     "Mask",        "Half",       "UInt32", "Boolean", "RGBA8", "Fp4",
    "Fp8",       "Fp16",        "FpN",        "Vec4f",  "Vec4d",   "Index", "OnIndex",
    "IndexMask", "OnIndexMask", "PointIndex", "Vec3u8", "Vec3u16", "UInt8"};

/* grid header fields (offsets into the 672-byte GridData) */
enum {
  G_MAGIC = 0,
  G_CHECKSUM = 8,
  G_VERSION = 16,
  G_FLAGS = 20,
  G_INDEX = 24,
  G_COUNT = 28,
  G_SIZE = 32,
  G_NAME = 40,
  G_MAP = 296,
  G_WORLD_BBOX = 560,
  G_VOXEL = 608,
  G_CLASS = 632,
  G_TYPE = 636,
  G_BLIND_OFF = 640,
  G_BLIND_COUNT = 648
};
/* map fields, from G_MAP */
enum {
  M_MATF = 0,
  M_INVF = 36,
  M_VECF = 72,
  M_TAPF = 84,
  M_MATD = 88,
  M_INVD = 160,
  M_VECD = 232,
  M_TAPD = 256
};
#define FLAG_HAS_BBOX (1u << 1)
#define FLAG_BREADTH_FIRST (1u << 5)
#define TREE (WF_NVDB_GRID_SIZE)

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

static uint64_t rd64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static uint32_t rd32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static uint16_t rd16(const unsigned char *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}
static void wr64(unsigned char *p, uint64_t v) {
  memcpy(p, &v, 8);
}
static void wr32(unsigned char *p, uint32_t v) {
  memcpy(p, &v, 4);
}

static const nvdb_layout *layout_of(uint32_t type) {
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
    if (layouts[i].type == type) return &layouts[i];
  return NULL;
}

static const char *type_name(uint32_t type) {
  return type < sizeof type_names / sizeof type_names[0] ? type_names[type] : "unknown";
}

/* One level of nodes: [begin, begin + count * size) inside the grid. */
typedef struct level {
  uint64_t begin, count, size;
} level;

static int level_range(const unsigned char *g, uint64_t n, int which, uint64_t size, level *L,
                       char *err, size_t errlen) {
  static const char *names[] = {"leaf", "lower", "upper"};
  int64_t off = (int64_t)rd64(g + TREE + 8 * which);
  L->count = rd32(g + TREE + 32 + 4 * which);
  L->size = size;
  L->begin = 0;
  if (L->count == 0) return 0;
  if (off < WF_NVDB_TREE_SIZE || (uint64_t)off > n - TREE || off % WF_NVDB_ALIGN != 0)
    return fail(err, errlen, "corrupt grid: %s nodes at offset %lld", names[which], (long long)off);
  L->begin = TREE + (uint64_t)off;
  if (L->count > (n - L->begin) / size)
    return fail(err, errlen, "corrupt grid: %llu %s nodes do not fit in the grid",
                (unsigned long long)L->count, names[which]);
  return 0;
}

/* Does parent + rel name the start of a node of level L? */
static int lands(const level *L, uint64_t parent, int64_t rel) {
  if (rel <= 0 || L->count == 0) return 0; /* children always follow their parents */
  uint64_t at = parent + (uint64_t)rel;
  if (at < parent || at < L->begin) return 0;
  return (at - L->begin) % L->size == 0 && (at - L->begin) / L->size < L->count;
}

/* Every set child bit of every node of P must point at a node of C. */
static int check_children(const unsigned char *g, const level *P, uint32_t mask_off,
                          uint32_t nslots, uint32_t table_off, uint32_t stride, const level *C,
                          const char *what, char *err, size_t errlen) {
  for (uint64_t i = 0; i < P->count; i++) {
    const uint64_t node = P->begin + i * P->size;
    for (uint32_t w = 0; w < nslots / 64; w++) {
      uint64_t m = rd64(g + node + mask_off + 8 * w);
      while (m) {
        const uint32_t bit = (uint32_t)__builtin_ctzll(m), slot = w * 64 + bit;
        m &= m - 1;
        if (!lands(C, node, (int64_t)rd64(g + node + table_off + (uint64_t)slot * stride)))
          return fail(err, errlen, "corrupt grid: a %s node's child offset is out of place", what);
      }
    }
  }
  return 0;
}

int wf_nvdb_check(const unsigned char *g, uint64_t n, char *err, size_t errlen) {
  if (n < WF_NVDB_GRID_SIZE + WF_NVDB_TREE_SIZE)
    return fail(err, errlen, "truncated grid (%llu bytes)", (unsigned long long)n);
  const uint64_t magic = rd64(g + G_MAGIC);
  if (magic != WF_NVDB_MAGIC0 && magic != WF_NVDB_MAGIC1)
    return fail(err, errlen, "not a NanoVDB grid (bad magic)");
  const uint32_t ver = rd32(g + G_VERSION);
  if (ver >> 21 != 32)
    return fail(err, errlen, "unsupported NanoVDB grid version %u.%u (weft reads 32.x)", ver >> 21,
                (ver >> 10) & 2047);
  const uint64_t size = rd64(g + G_SIZE);
  if (size != n || size % WF_NVDB_ALIGN != 0)
    return fail(err, errlen, "corrupt grid: its size field says %llu bytes, it has %llu",
                (unsigned long long)size, (unsigned long long)n);
  if (!memchr(g + G_NAME, 0, 256)) return fail(err, errlen, "corrupt grid: unterminated name");
  const uint32_t type = rd32(g + G_TYPE);
  const nvdb_layout *L = layout_of(type);
  if (!L)
    return fail(err, errlen,
                "unsupported grid type %u (%s); weft reads float, int32, Vec3f and index grids",
                type, type_name(type));
  if (!(rd32(g + G_FLAGS) & FLAG_BREADTH_FIRST))
    return fail(err, errlen, "unsupported grid layout (not breadth first)");
  level leaf, lower, upper;
  if (level_range(g, n, 0, L->leaf_size, &leaf, err, errlen) ||
      level_range(g, n, 1, L->lower_size, &lower, err, errlen) ||
      level_range(g, n, 2, L->upper_size, &upper, err, errlen))
    return -1;
  const int64_t roff = (int64_t)rd64(g + TREE + 24);
  if (roff < WF_NVDB_TREE_SIZE || (uint64_t)roff > n - TREE - L->root_size || roff % 32 != 0)
    return fail(err, errlen, "corrupt grid: root at offset %lld", (long long)roff);
  const uint64_t root = TREE + (uint64_t)roff;
  const uint32_t ntiles = rd32(g + root + 24);
  if (ntiles > (n - root - L->root_size) / WF_VOL_TILE_SIZE)
    return fail(err, errlen, "corrupt grid: %u root tiles do not fit in the grid", ntiles);
  for (uint32_t t = 0; t < ntiles; t++) {
    const int64_t child = (int64_t)rd64(g + root + L->root_size + 32u * t + 8);
    if (child != 0 && !lands(&upper, root, child))
      return fail(err, errlen, "corrupt grid: root tile %u's child offset is out of place", t);
  }
  if (check_children(g, &upper, WF_VOL_UPPER_CHILD_MASK, 32768, L->upper_table, L->stride, &lower,
                     "upper", err, errlen) ||
      check_children(g, &lower, WF_VOL_LOWER_CHILD_MASK, 4096, L->lower_table, L->stride, &leaf,
                     "lower", err, errlen))
    return -1;
  return 0;
}

/* The leaf table: every leaf that the tree walk reaches, by the origin of
** its 8^3 block as the walk computes it (a leaf's own bbox field is not
** trusted), at most half full. Without memory for it, lookups walk. */
static void leaf_table(wf_volume *v) {
  const unsigned char *g = v->buf;
  const nvdb_layout *L = layout_of(rd32(g + G_TYPE));
  const uint32_t nleaf = rd32(g + TREE + 32);
  if (nleaf == 0 || nleaf > (1u << 29)) return;
  uint32_t cap = 16;
  while (cap < 2 * nleaf)
    cap *= 2;
  wf_vol_slot *t = calloc(cap, sizeof *t);
  if (!t) return;
  uint32_t used = 0;
  const unsigned char *root = v->desc.root;
  for (uint32_t r = 0; r < v->desc.ntiles; r++) {
    const unsigned char *tile = root + L->root_size + 32u * r;
    const int64_t uc = (int64_t)rd64(tile + 8);
    if (!uc) continue;
    const uint64_t key = rd64(tile);
    const int32_t u0[3] = {(int32_t)((uint32_t)(key >> 42) << 12),
                           (int32_t)((uint32_t)((key >> 21) & 0x1fffff) << 12),
                           (int32_t)((uint32_t)(key & 0x1fffff) << 12)};
    const unsigned char *up = root + uc;
    for (uint32_t a = 0; a < 32768; a++) {
      if (!(a & 63) && !rd64(up + WF_VOL_UPPER_CHILD_MASK + a / 8)) {
        a += 63; /* a word without children */
        continue;
      }
      if (!wf_vol_bit(up + WF_VOL_UPPER_CHILD_MASK, a)) continue;
      const unsigned char *lw = up + (int64_t)rd64(up + L->upper_table + (uint64_t)a * L->stride);
      const int32_t l0[3] = {u0[0] + (int32_t)((a >> 10) << 7),
                             u0[1] + (int32_t)(((a >> 5) & 31) << 7),
                             u0[2] + (int32_t)((a & 31) << 7)};
      for (uint32_t b = 0; b < 4096; b++) {
        if (!(b & 63) && !rd64(lw + WF_VOL_LOWER_CHILD_MASK + b / 8)) {
          b += 63;
          continue;
        }
        if (!wf_vol_bit(lw + WF_VOL_LOWER_CHILD_MASK, b)) continue;
        const unsigned char *lf = lw + (int64_t)rd64(lw + L->lower_table + (uint64_t)b * L->stride);
        const int32_t o[3] = {l0[0] + (int32_t)((b >> 8) << 3),
                              l0[1] + (int32_t)(((b >> 4) & 15) << 3),
                              l0[2] + (int32_t)((b & 15) << 3)};
        uint32_t h = wf_vol_hash(o[0], o[1], o[2]) & (cap - 1);
        while (t[h].off && !(t[h].i == o[0] && t[h].j == o[1] && t[h].k == o[2]))
          h = (h + 1) & (cap - 1);
        if (t[h].off) continue;
        if (++used > cap / 2) { /* more leaves reached than counted: a corrupt tree */
          free(t);
          return;
        }
        t[h] = (wf_vol_slot){o[0], o[1], o[2], 0, (int64_t)(lf - g)};
      }
    }
  }
  v->slots = t;
  v->desc.slots = t;
  v->desc.slot_mask = cap - 1;
  v->aux_size = (uint64_t)cap * sizeof *t;
}

/* The block table (volume.h): an entry for every 8^3 block of the active
** box grown by a voxel (so the corners of cells at its faces are inside),
** each filled by the tree walk at the block's origin, appended to the leaf
** table. Lookups inside the box then take one load and no branch. It is
** left out when it would outgrow 32 KB plus a quarter of the grid's bytes
** (sparse grids: a float leaf is 2 KB, its block's entry 8 bytes) or no
** memory is left. */
static void block_table(wf_volume *v) {
  wf_vol *d = &v->desc;
  int64_t lo[3], n[3], count = 1;
  for (int a = 0; a < 3; a++) {
    const int64_t b0 = (int64_t)(int32_t)rd32(d->root + 4 * a) - 1,
                  b1 = (int64_t)(int32_t)rd32(d->root + 12 + 4 * a) + 1;
    if (b1 < b0 || b0 < INT32_MIN + 8 || b1 > INT32_MAX - 8) return; /* empty or at the edge */
    lo[a] = b0 & ~(int64_t)7;
    n[a] = ((b1 & ~(int64_t)7) - lo[a]) / 8 + 1;
    const int64_t most = 4096 + (int64_t)(v->size / 32); /* table <= 32 KB + grid / 4 */
    if (n[a] > most / count) return;
    count *= n[a];
  }
  const uint64_t before = v->aux_size, bytes = before + (uint64_t)count * sizeof(int64_t);
  unsigned char *aux = realloc(v->slots, bytes);
  if (!aux) return;
  v->slots = (wf_vol_slot *)aux;
  if (d->slots) d->slots = v->slots;
  v->aux_size = bytes;
  int64_t *e = (int64_t *)(aux + before);
  for (int64_t x = 0; x < n[0]; x++)
    for (int64_t y = 0; y < n[1]; y++)
      for (int64_t z = 0; z < n[2]; z++) {
        int in_leaf;
        const unsigned char *p = wf_vol_walk(d, (int32_t)(lo[0] + 8 * x), (int32_t)(lo[1] + 8 * y),
                                             (int32_t)(lo[2] + 8 * z), &in_leaf);
        *e++ = (int64_t)(p - d->grid) * 2 + in_leaf;
      }
  d->blocks = (const int64_t *)(aux + before);
  for (int a = 0; a < 3; a++) {
    d->box_lo[a] = (int32_t)lo[a];
    d->box_n[a] = (uint32_t)(8 * n[a]);
  }
}

/* The dense table (volume.h) of a float or vec3 grid: the value of every
** voxel of the block table's box, read through the block table, appended
** to the tables. Trilinear samples inside the box then read their 8
** corners at fixed strides from one index. Left out when it would outgrow
** 256 KB plus twice the grid's bytes (sparse grids; a dense grid's box is
** its voxels and a margin) or no memory is left. */
static void dense_table(wf_volume *v) {
  wf_vol *d = &v->desc;
  if (!d->blocks || (d->type != WF_NVDB_FLOAT && d->type != WF_NVDB_VEC3F)) return;
  const uint64_t nvox = (uint64_t)d->box_n[0] * d->box_n[1] * d->box_n[2];
  if (nvox > ((256u << 10) + 2 * v->size) / d->vsize) return;
  const uint64_t before = v->aux_size, blocks = (uint64_t)((const unsigned char *)d->blocks -
                                                           (const unsigned char *)v->slots);
  unsigned char *aux = realloc(v->slots, before + nvox * d->vsize);
  if (!aux) return;
  v->slots = (wf_vol_slot *)aux;
  if (d->slots) d->slots = v->slots;
  d->blocks = (const int64_t *)(aux + blocks);
  v->aux_size = before + nvox * d->vsize;
  float *o = (float *)(aux + before); /* before is a multiple of 8 */
  const uint32_t nf = d->vsize / 4;
  for (uint32_t x = 0; x < d->box_n[0]; x++)
    for (uint32_t y = 0; y < d->box_n[1]; y++)
      for (uint32_t z = 0; z < d->box_n[2]; z++) {
        const float *s = (const float *)wf_vol_find(
            d, d->box_lo[0] + (int32_t)x, d->box_lo[1] + (int32_t)y, d->box_lo[2] + (int32_t)z);
        for (uint32_t q = 0; q < nf; q++)
          *o++ = s[q];
      }
  d->dense = (const float *)(aux + before);
}

static void desc_init(wf_volume *v) {
  const unsigned char *g = v->buf;
  const nvdb_layout *L = layout_of(rd32(g + G_TYPE));
  wf_vol *d = &v->desc;
  memset(d, 0, sizeof *d);
  d->magic = WF_VOL_MAGIC;
  d->grid = g;
  d->root = g + TREE + rd64(g + TREE + 24);
  d->ntiles = rd32(d->root + 24);
  d->type = L->type;
  d->vsize = L->vsize;
  d->root_bg = L->root_bg;
  d->root_size = L->root_size;
  d->tile_value = L->tile_value;
  d->table_stride = L->stride;
  d->upper_table = L->upper_table;
  d->lower_table = L->lower_table;
  d->leaf_table = L->leaf_table;
  memcpy(d->mat, g + G_MAP + M_MATF, 36);
  memcpy(d->inv, g + G_MAP + M_INVF, 36);
  memcpy(d->vec, g + G_MAP + M_VECF, 12);
  leaf_table(v);
  block_table(v);
  dense_table(v);
}

static wf_volume *volume_alloc(uint64_t size) {
  wf_volume *v = calloc(1, sizeof *v);
  if (!v) return NULL;
  if (size > SIZE_MAX - 64 || !(v->buf = aligned_alloc(64, (size + 63) & ~(uint64_t)63))) {
    free(v);
    return NULL;
  }
  v->size = size;
  return v;
}

void wf_volume_free(wf_volume *v) {
  if (!v) return;
  v->desc.magic = 0;
  free(v->slots);
  free(v->buf);
  free(v);
}

/* A grid of the file: where its metadata and data are. */
typedef struct file_grid {
  uint64_t grid_size, data, data_end;
  uint32_t type;
  uint16_t codec;
  const char *name;
} file_grid;

/* Decode one grid's data (at data, up to n) into a new volume. */
static int decode(const unsigned char *p, size_t n, const file_grid *fg, wf_volume **out, char *err,
                  size_t errlen) {
  const uint64_t size = fg->grid_size;
  if (size < WF_NVDB_GRID_SIZE + WF_NVDB_TREE_SIZE)
    return fail(err, errlen, "corrupt file: grid size %llu", (unsigned long long)size);
  const uint64_t avail = n - fg->data;
  /* zlib inflates at most ~1032:1; a bigger claim is a lie, not a grid */
  if ((fg->codec == 0 && size > avail) || (fg->codec == 1 && size / 1100 > avail))
    return fail(err, errlen, "truncated file: grid '%s' needs %llu bytes", fg->name,
                (unsigned long long)size);
  wf_volume *v = volume_alloc(size);
  if (!v) return fail(err, errlen, "out of memory for a %llu-byte grid", (unsigned long long)size);
  if (fg->codec == 0) {
    memcpy(v->buf, p + fg->data, size);
  } else {
    uint64_t pos = fg->data, done = 0;
    while (done < size) {
      if (n - pos < 8) {
        wf_volume_free(v);
        return fail(err, errlen, "truncated file: grid '%s' ends inside its data", fg->name);
      }
      const uint64_t csize = rd64(p + pos);
      pos += 8;
      if (csize > n - pos) {
        wf_volume_free(v);
        return fail(err, errlen, "truncated file: grid '%s' ends inside its data", fg->name);
      }
      uLongf got = (uLongf)(size - done);
      int zr = uncompress(v->buf + done, &got, p + pos, (uLong)csize);
      if (zr != Z_OK) {
        wf_volume_free(v);
        return fail(err, errlen, "corrupt zip data in grid '%s' (%s)", fg->name,
                    zr == Z_BUF_ERROR ? "more data than the grid size" : "zlib error");
      }
      done += got;
      pos += csize;
    }
  }
  if (wf_nvdb_check(v->buf, size, err, errlen)) {
    wf_volume_free(v);
    return -1;
  }
  desc_init(v);
  *out = v;
  return 0;
}

/* Where grid fg's data ends (the next grid's data starts there). */
static int data_end(const unsigned char *p, size_t n, file_grid *fg, char *err, size_t errlen) {
  if (fg->codec == 0) {
    if (fg->grid_size > n - fg->data)
      return fail(err, errlen, "truncated file: grid '%s' needs %llu bytes", fg->name,
                  (unsigned long long)fg->grid_size);
    fg->data_end = fg->data + fg->grid_size;
    return 0;
  }
  /* zip: chunks until the grid is complete; count the inflated bytes */
  uint64_t pos = fg->data, done = 0;
  while (done < fg->grid_size) {
    if (n - pos < 8)
      return fail(err, errlen, "truncated file: grid '%s' ends inside its data", fg->name);
    const uint64_t csize = rd64(p + pos);
    if (csize > n - pos - 8)
      return fail(err, errlen, "truncated file: grid '%s' ends inside its data", fg->name);
    /* a chunk does not store its inflated size: inflate into a sink */
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit(&zs) != Z_OK) return fail(err, errlen, "zlib: cannot start inflating");
    unsigned char sink[16384];
    zs.next_in = (Bytef *)(p + pos + 8);
    zs.avail_in = (uInt)csize;
    int zr;
    uint64_t got = 0;
    do {
      zs.next_out = sink;
      zs.avail_out = sizeof sink;
      zr = inflate(&zs, Z_NO_FLUSH);
      got += sizeof sink - zs.avail_out;
    } while (zr == Z_OK && got <= fg->grid_size);
    inflateEnd(&zs);
    if (zr != Z_STREAM_END) return fail(err, errlen, "corrupt zip data in grid '%s'", fg->name);
    done += got;
    pos += 8 + csize;
  }
  if (done != fg->grid_size)
    return fail(err, errlen, "corrupt zip data in grid '%s' (more data than the grid size)",
                fg->name);
  fg->data_end = pos;
  return 0;
}

int wf_volume_load(const void *data, size_t n, int index, const char *name, wf_volume **out,
                   char *err, size_t errlen) {
  const unsigned char *p = data;
  const int by_name = name && name[0];
  size_t pos = 0;
  int gi = 0;
  char names[512] = "";
  *out = NULL;
  if (!by_name && index < 0) return fail(err, errlen, "grid index %d is negative", index);
  while (pos < n) {
    if (n - pos < 16)
      return fail(err, errlen, "truncated file (%zu bytes; a NanoVDB header has 16)", n - pos);
    const uint64_t magic = rd64(p + pos);
    if (magic != WF_NVDB_MAGIC0 && magic != WF_NVDB_MAGIC2)
      return fail(err, errlen,
                  pos == 0 ? "not a NanoVDB file (bad magic)"
                           : "corrupt file: bad magic after grid %d",
                  gi - 1);
    const uint32_t ver = rd32(p + pos + 8);
    const uint16_t count = rd16(p + pos + 12), codec = rd16(p + pos + 14);
    if (ver >> 21 != 32)
      return fail(err, errlen, "unsupported NanoVDB version %u.%u (weft reads 32.x)", ver >> 21,
                  (ver >> 10) & 2047);
    if (codec == 2) return fail(err, errlen, "unsupported codec blosc (weft reads none and zip)");
    if (codec > 2) return fail(err, errlen, "unknown codec %u (weft reads none and zip)", codec);
    if (count == 0) return fail(err, errlen, "corrupt file: a segment with no grids");
    /* the metadata of this segment's grids, then their data in order */
    size_t meta = pos + 16;
    for (uint32_t g = 0; g < count; g++) {
      if (n - meta < WF_NVDB_META_SIZE)
        return fail(err, errlen, "truncated file: grid %d's metadata is cut", gi + (int)g);
      const uint32_t nsz = rd32(p + meta + 136);
      if (nsz == 0 || nsz > n - meta - WF_NVDB_META_SIZE ||
          p[meta + WF_NVDB_META_SIZE + nsz - 1] != 0)
        return fail(err, errlen, "truncated file: grid %d's name is cut", gi + (int)g);
      meta += WF_NVDB_META_SIZE + nsz;
    }
    size_t m = pos + 16, dpos = meta;
    for (uint32_t g = 0; g < count; g++, gi++) {
      file_grid f;
      f.grid_size = rd64(p + m);
      f.type = rd32(p + m + 32);
      f.codec = codec;
      f.name = (const char *)p + m + WF_NVDB_META_SIZE;
      f.data = dpos;
      const uint32_t nsz = rd32(p + m + 136);
      m += WF_NVDB_META_SIZE + nsz;
      if (strlen(names) + strlen(f.name) + 4 < sizeof names)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'",
                 names[0] ? ", " : "", f.name);
      if (by_name ? strcmp(f.name, name) == 0 : gi == index) {
        if (!layout_of(f.type))
          return fail(
              err, errlen,
              "unsupported grid type %u (%s); weft reads float, int32, Vec3f and index grids",
              f.type, type_name(f.type));
        return decode(p, n, &f, out, err, errlen);
      }
      if (data_end(p, n, &f, err, errlen)) return -1;
      dpos = f.data_end;
    }
    pos = dpos;
  }
  if (by_name) return fail(err, errlen, "no grid named '%s' in the file (grids: %s)", name, names);
  return fail(err, errlen, "grid index %d is out of range (the file holds %d grid%s)", index, gi,
              gi == 1 ? "" : "s");
}

int wf_volume_info_get(const wf_volume *v, wf_vol_info *o) {
  const unsigned char *g = v->buf;
  memset(o, 0, sizeof *o);
  memcpy(o->name, g + G_NAME, 255);
  o->type = rd32(g + G_TYPE);
  snprintf(o->type_str, sizeof o->type_str, "%s", layout_of(o->type)->name);
  o->size_in_bytes = v->size;
  o->grid_index = rd32(g + G_INDEX);
  o->grid_count = rd32(g + G_COUNT);
  o->grid_class = rd32(g + G_CLASS);
  memcpy(o->voxel_size, g + G_VOXEL, 24);
  memcpy(o->translation, g + G_MAP + M_VECD, 24);
  memcpy(o->transform, g + G_MAP + M_MATD, 72);
  memcpy(o->bbox_min, v->desc.root, 12);
  memcpy(o->bbox_max, v->desc.root + 12, 12);
  o->active_voxels = rd64(g + TREE + 56);
  o->leaf_count = rd32(g + TREE + 32);
  o->lower_count = rd32(g + TREE + 36);
  o->upper_count = rd32(g + TREE + 40);
  o->tile_count = v->desc.ntiles;
  return 0;
}

int wf_volume_save(const wf_volume *v, const char *path, int codec, char *err, size_t errlen) {
  if (codec != 0 && codec != 1)
    return fail(err, errlen, "unknown codec %d (weft writes none and zip)", codec);
  const unsigned char *g = v->buf;
  unsigned char *copy = malloc(v->size), *z = NULL;
  if (!copy) return fail(err, errlen, "out of memory");
  memcpy(copy, g, v->size);
  wr32(copy + G_INDEX, 0); /* a single-grid file, whatever file it came from */
  wr32(copy + G_COUNT, 1);
  const unsigned char *body = copy;
  uint64_t body_size = v->size;
  if (codec == 1) {
    uLongf zn = compressBound((uLong)v->size);
    if (!(z = malloc(8 + zn))) {
      free(copy);
      return fail(err, errlen, "out of memory");
    }
    if (compress2(z + 8, &zn, copy, (uLong)v->size, Z_DEFAULT_COMPRESSION) != Z_OK) {
      free(copy);
      free(z);
      return fail(err, errlen, "zlib: compression failed");
    }
    wr64(z, zn);
    body = z;
    body_size = 8 + zn;
  }
  const char *gname = (const char *)g + G_NAME;
  const uint32_t nsz = (uint32_t)strlen(gname) + 1;
  unsigned char head[16], meta[WF_NVDB_META_SIZE];
  memset(meta, 0, sizeof meta);
  wr64(head, WF_NVDB_MAGIC0);
  wr32(head + 8, WF_NVDB_VERSION);
  head[12] = 1, head[13] = 0, head[14] = (unsigned char)codec, head[15] = 0;
  wr64(meta + 0, v->size);
  wr64(meta + 8, body_size);
  wr64(meta + 24, rd64(g + TREE + 56));
  wr32(meta + 32, rd32(g + G_TYPE));
  wr32(meta + 36, rd32(g + G_CLASS));
  memcpy(meta + 40, g + G_WORLD_BBOX, 48);
  memcpy(meta + 88, v->desc.root, 24);
  memcpy(meta + 112, g + G_VOXEL, 24);
  wr32(meta + 136, nsz);
  for (int i = 0; i < 3; i++)
    wr32(meta + 140 + 4 * i, rd32(g + TREE + 32 + 4 * i));
  wr32(meta + 152, 1);
  for (int i = 0; i < 3; i++)
    wr32(meta + 156 + 4 * i, rd32(g + TREE + 44 + 4 * i));
  meta[168] = (unsigned char)codec;
  wr32(meta + 172, WF_NVDB_VERSION);
  FILE *f = fopen(path, "wb");
  int bad = !f || fwrite(head, 1, 16, f) != 16 || fwrite(meta, 1, sizeof meta, f) != sizeof meta ||
            fwrite(gname, 1, nsz, f) != nsz || fwrite(body, 1, body_size, f) != body_size;
  if (f && fclose(f) != 0) bad = 1;
  free(copy);
  free(z);
  if (bad) return fail(err, errlen, "cannot write '%s'", path);
  return 0;
}

/* ---- from dense data ---- */

static uint64_t cdiv(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

static void set_bit(unsigned char *mask, uint32_t n) {
  mask[n >> 3] |= (unsigned char)(1u << (n & 7));
}

static void put_bbox(unsigned char *p, const int64_t *lo, const int64_t *hi) {
  for (int a = 0; a < 3; a++) {
    wr32(p + 4 * a, (uint32_t)(int32_t)lo[a]);
    wr32(p + 12 + 4 * a, (uint32_t)(int32_t)hi[a]);
  }
}

/* the active box of a node at origin o and width w, clipped to [0, n) */
static void clip(const int64_t *o, int64_t w, const int64_t *n, int64_t *lo, int64_t *hi) {
  for (int a = 0; a < 3; a++) {
    lo[a] = o[a];
    hi[a] = o[a] + w - 1 < n[a] - 1 ? o[a] + w - 1 : n[a] - 1;
  }
}

int wf_volume_from_dense(const void *data, int type, const int64_t *shape, const int64_t *strides,
                         double h, const double *origin, const void *background, const char *name,
                         wf_volume **out, char *err, size_t errlen) {
  const nvdb_layout *L = layout_of((uint32_t)type);
  *out = NULL;
  if (!L) return fail(err, errlen, "from_dense: unsupported value type %d", type);
  for (int a = 0; a < 3; a++)
    if (shape[a] < 1 || shape[a] > (1 << 24))
      return fail(err, errlen, "from_dense: dimension %d has size %lld (1 to 2^24)", a + 1,
                  (long long)shape[a]);
  if (!(h > 0) || h > 1e30) return fail(err, errlen, "from_dense: voxel_size must be positive");
  if (name && strlen(name) > 255)
    return fail(err, errlen, "from_dense: name longer than 255 bytes");
  const int64_t *n = shape;
  uint64_t nl[3], nw[3], nu[3];
  for (int a = 0; a < 3; a++)
    nl[a] = cdiv(n[a], 8), nw[a] = cdiv(n[a], 128), nu[a] = cdiv(n[a], 4096);
  const uint64_t nleaf = nl[0] * nl[1] * nl[2], nlower = nw[0] * nw[1] * nw[2],
                 nupper = nu[0] * nu[1] * nu[2];
  if (nleaf > UINT32_MAX) return fail(err, errlen, "from_dense: too many voxels");
  const uint64_t root = TREE + WF_NVDB_TREE_SIZE;
  const uint64_t uppers = (root + L->root_size + 32 * nupper + 31) & ~(uint64_t)31;
  const uint64_t lowers = uppers + nupper * L->upper_size;
  const uint64_t leaves = lowers + nlower * L->lower_size;
  const uint64_t size = leaves + nleaf * L->leaf_size;
  if (size > ((uint64_t)1 << 40)) return fail(err, errlen, "from_dense: grid too large");
  wf_volume *v = volume_alloc(size);
  if (!v) return fail(err, errlen, "out of memory for a %llu-byte grid", (unsigned long long)size);
  unsigned char *g = v->buf;
  memset(g, 0, size);
  const uint32_t vs = L->vsize;
  /* grid header and map */
  wr64(g + G_MAGIC, WF_NVDB_MAGIC0);
  wr64(g + G_CHECKSUM, ~(uint64_t)0);
  wr32(g + G_VERSION, WF_NVDB_VERSION);
  wr32(g + G_FLAGS, FLAG_BREADTH_FIRST | FLAG_HAS_BBOX);
  wr32(g + G_COUNT, 1);
  wr64(g + G_SIZE, size);
  if (name) memcpy(g + G_NAME, name, strlen(name));
  double md[9] = {h, 0, 0, 0, h, 0, 0, 0, h}, id[9] = {1 / h, 0, 0, 0, 1 / h, 0, 0, 0, 1 / h};
  for (int i = 0; i < 9; i++) {
    float mf = (float)md[i], inf = (float)id[i];
    memcpy(g + G_MAP + M_MATF + 4 * i, &mf, 4);
    memcpy(g + G_MAP + M_INVF + 4 * i, &inf, 4);
  }
  for (int a = 0; a < 3; a++) {
    float of = (float)origin[a];
    memcpy(g + G_MAP + M_VECF + 4 * a, &of, 4);
  }
  const float one = 1.0f;
  const double oned = 1.0, hv[3] = {h, h, h};
  memcpy(g + G_MAP + M_TAPF, &one, 4);
  memcpy(g + G_MAP + M_MATD, md, 72);
  memcpy(g + G_MAP + M_INVD, id, 72);
  memcpy(g + G_MAP + M_VECD, origin, 24);
  memcpy(g + G_MAP + M_TAPD, &oned, 8);
  double wb[6];
  for (int a = 0; a < 3; a++)
    wb[a] = origin[a], wb[3 + a] = origin[a] + h * (double)n[a];
  memcpy(g + G_WORLD_BBOX, wb, 48);
  memcpy(g + G_VOXEL, hv, 24);
  wr32(g + G_TYPE, L->type);
  wr64(g + G_BLIND_OFF, size);
  /* tree */
  wr64(g + TREE + 0, leaves - TREE);
  wr64(g + TREE + 8, lowers - TREE);
  wr64(g + TREE + 16, uppers - TREE);
  wr64(g + TREE + 24, root - TREE);
  wr32(g + TREE + 32, (uint32_t)nleaf);
  wr32(g + TREE + 36, (uint32_t)nlower);
  wr32(g + TREE + 40, (uint32_t)nupper);
  wr64(g + TREE + 56, (uint64_t)(n[0] * n[1] * n[2]));
  /* root */
  const int64_t zero[3] = {0, 0, 0}, top[3] = {n[0] - 1, n[1] - 1, n[2] - 1};
  put_bbox(g + root, zero, top);
  wr32(g + root + 24, (uint32_t)nupper);
  memcpy(g + root + L->root_bg, background, vs);
  for (uint64_t ux = 0; ux < nu[0]; ux++)
    for (uint64_t uy = 0; uy < nu[1]; uy++)
      for (uint64_t uz = 0; uz < nu[2]; uz++) {
        const uint64_t u = (ux * nu[1] + uy) * nu[2] + uz;
        unsigned char *tile = g + root + L->root_size + 32 * u;
        const uint64_t up = uppers + u * L->upper_size;
        wr64(tile, uz | (uy << 21) | (ux << 42));
        wr64(tile + 8, up - root);
        memcpy(tile + WF_VOL_TILE_VALUE, background, vs);
        const int64_t o[3] = {(int64_t)ux * 4096, (int64_t)uy * 4096, (int64_t)uz * 4096};
        int64_t lo[3], hi[3];
        clip(o, 4096, n, lo, hi);
        put_bbox(g + up, lo, hi);
        for (uint32_t s = 0; s < 32768; s++) {
          const uint64_t wx = ux * 32 + (s >> 10), wy = uy * 32 + ((s >> 5) & 31),
                         wz = uz * 32 + (s & 31);
          unsigned char *slot = g + up + L->upper_table + (uint64_t)s * L->stride;
          if (wx < nw[0] && wy < nw[1] && wz < nw[2]) {
            set_bit(g + up + WF_VOL_UPPER_CHILD_MASK, s);
            wr64(slot, lowers + ((wx * nw[1] + wy) * nw[2] + wz) * L->lower_size - up);
          } else {
            memcpy(slot, background, vs);
          }
        }
      }
  for (uint64_t wx = 0; wx < nw[0]; wx++)
    for (uint64_t wy = 0; wy < nw[1]; wy++)
      for (uint64_t wz = 0; wz < nw[2]; wz++) {
        const uint64_t lw = lowers + ((wx * nw[1] + wy) * nw[2] + wz) * L->lower_size;
        const int64_t o[3] = {(int64_t)wx * 128, (int64_t)wy * 128, (int64_t)wz * 128};
        int64_t lo[3], hi[3];
        clip(o, 128, n, lo, hi);
        put_bbox(g + lw, lo, hi);
        for (uint32_t s = 0; s < 4096; s++) {
          const uint64_t lx = wx * 16 + (s >> 8), ly = wy * 16 + ((s >> 4) & 15),
                         lz = wz * 16 + (s & 15);
          unsigned char *slot = g + lw + L->lower_table + (uint64_t)s * L->stride;
          if (lx < nl[0] && ly < nl[1] && lz < nl[2]) {
            set_bit(g + lw + WF_VOL_LOWER_CHILD_MASK, s);
            wr64(slot, leaves + ((lx * nl[1] + ly) * nl[2] + lz) * L->leaf_size - lw);
          } else {
            memcpy(slot, background, vs);
          }
        }
      }
  const unsigned char *src = data;
  for (uint64_t lx = 0; lx < nl[0]; lx++)
    for (uint64_t ly = 0; ly < nl[1]; ly++)
      for (uint64_t lz = 0; lz < nl[2]; lz++) {
        unsigned char *lf = g + leaves + ((lx * nl[1] + ly) * nl[2] + lz) * L->leaf_size;
        const int64_t o[3] = {(int64_t)lx * 8, (int64_t)ly * 8, (int64_t)lz * 8};
        int64_t lo[3], hi[3];
        clip(o, 8, n, lo, hi);
        for (int a = 0; a < 3; a++) {
          wr32(lf + 4 * a, (uint32_t)lo[a]);
          lf[12 + a] = (unsigned char)(hi[a] - lo[a]);
        }
        for (uint32_t s = 0; s < 512; s++) {
          const int64_t x = o[0] + (s >> 6), y = o[1] + ((s >> 3) & 7), z = o[2] + (s & 7);
          unsigned char *dst = lf + L->leaf_table + (uint64_t)s * vs;
          if (x < n[0] && y < n[1] && z < n[2]) {
            set_bit(lf + 16, s);
            memcpy(dst, src + x * strides[0] + y * strides[1] + z * strides[2], vs);
          } else {
            memcpy(dst, background, vs);
          }
        }
      }
  desc_init(v);
  *out = v;
  return 0;
}

/* Sample n index-space points on the host (tests, and Lua outside kernels):
** nf = 1 float, 3 vec3, 0 int32 (closest only); grad may be NULL. */
int wf_volume_sample_points(const wf_volume *v, const float *uvw, int64_t n, int mode, void *out,
                            float *grad) {
  const int nf = v->desc.type == WF_NVDB_VEC3F ? 3 : 1;
  if (v->desc.type == WF_NVDB_INDEX || v->desc.type == WF_NVDB_ONINDEX) {
    for (int64_t i = 0; i < n; i++) /* no values to sample */
      ((int32_t *)out)[i] =
          (int32_t)wf_vol_index(&v->desc, wf_vol_round(uvw[3 * i]), wf_vol_round(uvw[3 * i + 1]),
                                wf_vol_round(uvw[3 * i + 2]));
    return 0;
  }
  for (int64_t i = 0; i < n; i++) {
    const float *p = uvw + 3 * i;
    if (v->desc.type == WF_NVDB_INT32) {
      ((int32_t *)out)[i] = wf_vol_sample_i(&v->desc, p[0], p[1], p[2]);
      continue;
    }
    wf_vol_sample(&v->desc, p[0], p[1], p[2], mode, nf, (float *)out + nf * i,
                  grad ? grad + 3 * nf * i : NULL);
  }
  return 0;
}

/* ---- device copies (lua/weft/volume.lua uploads the bytes) ---- */

/* Sizes of what a device copy needs: the grid, its leaf and block tables
** (one block), and the descriptor; and where the host bytes are (which:
** 0 grid, 1 tables). */
void wf_volume_sizes(const wf_volume *v, uint64_t *sizes) {
  sizes[0] = v->size;
  sizes[1] = v->aux_size;
  sizes[2] = sizeof(wf_vol);
}
const void *wf_volume_bytes(const wf_volume *v, int which) {
  return which == 0 ? (const void *)v->buf : (const void *)v->slots;
}
/* The descriptor of a copy whose grid and leaf table live at dev_grid
** and dev_slots (0: no tables) in another address space. */
void wf_volume_device_desc(const wf_volume *v, uint64_t dev_grid, uint64_t dev_slots, void *out) {
  wf_vol d = v->desc;
  d.grid = (const unsigned char *)(uintptr_t)dev_grid;
  d.root = d.grid + (v->desc.root - v->desc.grid);
  d.slots = dev_slots && d.slots ? (const wf_vol_slot *)(uintptr_t)dev_slots : NULL;
  d.blocks =
      dev_slots && d.blocks
          ? (const int64_t *)(uintptr_t)(dev_slots + (uint64_t)((const unsigned char *)d.blocks -
                                                                (const unsigned char *)v->slots))
          : NULL;
  d.dense =
      dev_slots && d.dense
          ? (const float *)(uintptr_t)(dev_slots + (uint64_t)((const unsigned char *)d.dense -
                                                              (const unsigned char *)v->slots))
          : NULL;
  memcpy(out, &d, sizeof d);
}
