/*
** fuzz_nvdb.c -- libFuzzer harness for the NanoVDB reader and the grid
** check (src/geom/nanovdb.c) and the tree walk behind it (volume.h).
**
** The first input byte picks a mode:
**   even  the rest is a .nvdb file: load grid 0, then the grid named "g";
**   odd   the rest patches a valid grid weft built (from_dense of a small
**         float, vec3 or int32 block; bits 1-2 pick it): records of
**         u32 offset, u8 length, bytes; the patched grid is loaded as an
**         uncompressed file (this reaches the tree check, which random
**         bytes inside zlib streams rarely do).
**
** Invariants (a broken one aborts): a load either succeeds or fails with
** a message; a loaded grid can be sampled anywhere (closest, trilinear,
** gradient) and every read stays inside its buffer (ASan), and its info
** and save_nvdb to /dev/null work.
**
** Build: CC=clang-16 CXX=clang++-16 cmake -S . -B build-fuzz -DWEFT_FUZZ=ON
**        cmake --build build-fuzz --target fuzz_nvdb
** Run:   build-fuzz/fuzz_nvdb -max_len=65536 NEWDIR tests/fuzz/nvdb/corpus
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geom/nanovdb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(wf_volume *v) {
  static const float pts[][3] = {
      {0, 0, 0},       {3.5f, 2.25f, 7.9f}, {-1, -1, -1},     {19.5f, 8.5f, 12.5f},
      {7, 7, 7},       {8, 8, 8},           {1e6f, -1e6f, 3}, {-4097, 4095.5f, 127.5f},
      {2e9f, 0, -2e9f}};
  char err[256];
  for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++)
    for (int mode = 0; mode < 2; mode++) {
      float out[3], grad[9];
      wf_volume_sample_points(v, pts[i], 1, mode, out, grad);
    }
  wf_vol_info info;
  wf_volume_info_get(v, &info);
  if (wf_volume_save(v, "/dev/null", 1, err, sizeof err) != 0) {
    fprintf(stderr, "fuzz_nvdb: save failed: %s\n", err);
    abort();
  }
}

static void try_load(const uint8_t *p, size_t n, int index, const char *name) {
  char err[256] = "";
  wf_volume *v = NULL;
  if (wf_volume_load(p, n, index, name, &v, err, sizeof err) == 0) {
    if (!v) abort();
    exercise(v);
    wf_volume_free(v);
  } else if (!err[0] || v) {
    fprintf(stderr, "fuzz_nvdb: a failed load without a message\n");
    abort();
  }
}

/* a valid uncompressed file around a small grid of each type */
static uint8_t *base_file(int which, size_t *n) {
  static const int types[3] = {WF_NVDB_FLOAT, WF_NVDB_VEC3F, WF_NVDB_INT32};
  const int64_t shape[3] = {10, 9, 13};
  float dense[10 * 9 * 13 * 3];
  for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++)
    dense[i] = (float)(i % 17) - 8.0f;
  const int vs = types[which] == WF_NVDB_VEC3F ? 12 : 4;
  const int64_t strides[3] = {9 * 13 * vs, 13 * vs, vs};
  const double origin[3] = {0.5, -1, 2};
  const float bg[3] = {1, 2, 3};
  char err[256];
  wf_volume *v;
  if (wf_volume_from_dense(dense, types[which], shape, strides, 0.5, origin, bg, "g", &v, err,
                           sizeof err))
    abort();
  if (wf_volume_save(v, "/dev/null", 0, err, sizeof err)) abort();
  /* the same bytes save_nvdb writes with codec none, built in memory */
  *n = 16 + WF_NVDB_META_SIZE + 2 + v->size;
  uint8_t *f = calloc(1, *n);
  const uint64_t magic = WF_NVDB_MAGIC0;
  const uint32_t ver = WF_NVDB_VERSION, nsz = 2;
  memcpy(f, &magic, 8);
  memcpy(f + 8, &ver, 4);
  f[12] = 1;
  memcpy(f + 16, &v->size, 8);
  memcpy(f + 24, &v->size, 8);
  memcpy(f + 16 + 32, v->buf + 636, 4);
  memcpy(f + 16 + 136, &nsz, 4);
  f[16 + WF_NVDB_META_SIZE] = 'g';
  memcpy(f + 16 + WF_NVDB_META_SIZE + 2, v->buf, v->size);
  wf_volume_free(v);
  return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint8_t *bases[3];
  static size_t base_n[3];
  if (size < 1) return 0;
  if (!(data[0] & 1)) {
    try_load(data + 1, size - 1, 0, NULL);
    try_load(data + 1, size - 1, 0, "g");
    return 0;
  }
  const int which = (data[0] >> 1) % 3;
  if (!bases[which]) bases[which] = base_file(which, &base_n[which]);
  const size_t n = base_n[which];
  uint8_t *f = malloc(n);
  memcpy(f, bases[which], n);
  size_t at = 1;
  while (size - at >= 5) {
    uint32_t off;
    memcpy(&off, data + at, 4);
    size_t len = data[at + 4];
    at += 5;
    if (len > size - at) len = size - at;
    off %= (uint32_t)n;
    if (len > n - off) len = n - off;
    memcpy(f + off, data + at, len);
    at += len;
  }
  try_load(f, n, 0, NULL);
  free(f);
  return 0;
}
