/*
** nanovdb.h -- NanoVDB files and grids on the host: read (codecs none and
** zip, several grids, chosen by index or name), check, write, and build
** from dense arrays. Written from the published layout (NanoVDB 32.x).
**
** A file is one or more segments:
**
**   header  u64 magic "NanoVDB0" (or "NanoVDB2"), u32 version,
**           u16 grid count, u16 codec (0 none, 1 zip, 2 blosc)
**   then per grid a 176-byte metadata record and its name,
**   then per grid its buffer: raw (codec none) or as chunks
**           u64 size + zlib stream until gridSize bytes are out
**
** The functions below are the FFI surface that lua/weft/volume.lua calls;
** they return 0 or -1 and write a message into err (errlen bytes).
*/
#ifndef WF_GEOM_NANOVDB_H
#define WF_GEOM_NANOVDB_H

#include <stddef.h>
#include <stdint.h>

#include "geom/volume.h"
#include "weft.h"

#define WF_NVDB_MAGIC0 0x304244566f6e614eull            /* "NanoVDB0" */
#define WF_NVDB_MAGIC1 0x314244566f6e614eull            /* "NanoVDB1": a grid */
#define WF_NVDB_MAGIC2 0x324244566f6e614eull            /* "NanoVDB2": a file */
#define WF_NVDB_VERSION ((32u << 21) | (3u << 10) | 3u) /* what weft writes */

#define WF_NVDB_GRID_SIZE 672
#define WF_NVDB_TREE_SIZE 64
#define WF_NVDB_META_SIZE 176
#define WF_NVDB_ALIGN 32

/* What Lua learns about a loaded grid (v:grid_info(), v:voxel_size()). */
typedef struct wf_vol_info {
  char name[256];
  char type_str[16];
  uint64_t size_in_bytes;
  uint32_t grid_index, grid_count, type, grid_class;
  double voxel_size[3];
  double translation[3];
  double transform[9];
  int32_t bbox_min[3], bbox_max[3];
  uint64_t active_voxels;
  uint32_t leaf_count, lower_count, upper_count, tile_count;
} wf_vol_info;

/* The host object: the descriptor (whose address is the id) and the
** buffer it points into. */
typedef struct wf_volume {
  wf_vol desc;
  unsigned char *buf; /* 64-byte aligned, owned */
  uint64_t size;
  wf_vol_slot *slots; /* the leaf table (desc.slots) then the block table
                      ** (desc.blocks) in one block, owned */
  uint64_t aux_size;  /* its bytes */
} wf_volume;

/* Load one grid of a file held in memory: by name when name is non-NULL
** and non-empty, else by index (0-based across all segments). */
WEFT_API int wf_volume_load(const void *data, size_t n, int index, const char *name,
                            wf_volume **out, char *err, size_t errlen);
/* Build from a dense 3-D block: type WF_NVDB_FLOAT/INT32/VEC3F, element
** (x, y, z) at data + x*sx + y*sy + z*sz bytes becomes voxel (x, y, z). */
WEFT_API int wf_volume_from_dense(const void *data, int type, const int64_t *shape,
                                  const int64_t *strides, double voxel_size, const double *origin,
                                  const void *background, const char *name, wf_volume **out,
                                  char *err, size_t errlen);
/* Write a file with this one grid; codec 0 none, 1 zip. */
WEFT_API int wf_volume_save(const wf_volume *v, const char *path, int codec, char *err,
                            size_t errlen);
/* Sample n index-space points (3 floats each) on the host; out gets 1 or
** 3 floats (or an int32) per point, grad (may be NULL) 3 per component. */
WEFT_API int wf_volume_sample_points(const wf_volume *v, const float *uvw, int64_t n, int mode,
                                     void *out, float *grad);
WEFT_API int wf_volume_info_get(const wf_volume *v, wf_vol_info *out);
WEFT_API void wf_volume_free(wf_volume *v);
/* Device copies: sizes (grid, leaf table, descriptor), the host bytes
** (which: 0 grid, 1 leaf table), and the descriptor pointing at copies. */
WEFT_API void wf_volume_sizes(const wf_volume *v, uint64_t *sizes);
WEFT_API const void *wf_volume_bytes(const wf_volume *v, int which);
WEFT_API void wf_volume_device_desc(const wf_volume *v, uint64_t dev_grid, uint64_t dev_slots,
                                    void *out);

/* Check a grid buffer so that sampling can never read outside it (every
** child offset lands on a node of the next level). 0 = good. */
int wf_nvdb_check(const unsigned char *g, uint64_t n, char *err, size_t errlen);

#endif
