/*
** embed.c -- a C host embedding weft, the way a game engine would:
**
**   1. the host owns its simulation state (positions and velocities as
**      float[3] per particle) and shares it with Lua once, without copying
**      (weft_wrap);
**   2. it loads the kernels from a Lua script (examples/embed_sim.lua);
**   3. every frame it launches a kernel over its own buffers from C
**      (weft_launch with weft_Arg arguments: no Lua glue, no copies);
**   4. it hands the positions to a consumer (a renderer, a physics engine,
**      PyTorch...) through DLPack (weft_export_dlpack); the consumer reads
**      the tensor and calls its deleter when done.
**
** At the end it checks the kernel's work against the same integration done
** in plain C, and prints "embed: ok".
**
**   build/embed [path/to/embed_sim.lua]        (run from the source tree)
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft.h"

#ifndef WEFT_SOURCE_DIR
#define WEFT_SOURCE_DIR "."
#endif

#define NPART 1000
#define FRAMES 240
#define DT (1.0f / 120.0f)

/* ---- the DLPack ABI (what <dlpack/dlpack.h> declares) ------------------- */
/* A consumer normally includes dlpack.h; the legacy tensor is spelled out
** here so that the example builds anywhere. */
typedef struct {
  int32_t device_type; /* 1 = CPU, 2 = CUDA */
  int32_t device_id;
} DLDevice;
typedef struct {
  uint8_t code; /* 2 = float */
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides; /* in elements; NULL = compact row-major */
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* ---- the host's state ------------------------------------------------------ */

typedef struct Particles {
  float pos[NPART][3];
  float vel[NPART][3];
} Particles;

/* A pseudo-random number in [lo, hi) (a small LCG: the example needs no
** libm and gives the same particles everywhere). */
static float rnd(uint32_t *state, float lo, float hi) {
  *state = *state * 1664525u + 1013904223u;
  return lo + (hi - lo) * (float)(*state >> 8) / 16777216.0f;
}

/* A cloud of particles above the ground, thrown in random directions. */
static void spawn(Particles *s) {
  uint32_t seed = 42;
  for (int i = 0; i < NPART; i++) {
    s->pos[i][0] = rnd(&seed, -0.5f, 0.5f);
    s->pos[i][1] = rnd(&seed, 0.5f, 2.0f);
    s->pos[i][2] = rnd(&seed, -0.5f, 0.5f);
    s->vel[i][0] = rnd(&seed, -1.0f, 1.0f);
    s->vel[i][1] = rnd(&seed, -1.0f, 3.0f);
    s->vel[i][2] = rnd(&seed, -1.0f, 1.0f);
  }
}

static float absf(float x) {
  return x < 0.0f ? -x : x;
}

/* The kernel's step in plain C, to check the result. */
static void step_reference(Particles *s, float dt) {
  for (int i = 0; i < NPART; i++) {
    float *p = s->pos[i], *v = s->vel[i];
    v[1] += -9.81f * dt;
    for (int k = 0; k < 3; k++)
      p[k] += v[k] * dt;
    if (p[1] < 0.0f) {
      p[1] = -p[1];
      v[1] = -v[1] * 0.8f;
    }
  }
}

/* ---- a DLPack consumer ------------------------------------------------------ */

/* What a consumer does with a tensor it receives: check that it is what it
** expects, read it in place, and give it back by calling its deleter. Here
** it computes the lowest height and the centroid. Returns 0 if the tensor
** was not a CPU float32 N x 3 array. */
static int consume_positions(DLManagedTensor *m, const void *expect_data, float *min_y,
                             float centroid[3]) {
  const DLTensor *t = &m->dl_tensor;
  int ok = t->device.device_type == 1 && t->dtype.code == 2 && t->dtype.bits == 32 &&
           t->dtype.lanes == 1 && t->ndim == 2 && t->shape[0] == NPART && t->shape[1] == 3;
  ok = ok && t->data == expect_data; /* zero copy: the host's own buffer */
  if (ok) {
    const float *p = (const float *)((const char *)t->data + t->byte_offset);
    int64_t s0 = t->strides ? t->strides[0] : 3, s1 = t->strides ? t->strides[1] : 1;
    *min_y = 3.4e38f;
    centroid[0] = centroid[1] = centroid[2] = 0.0f;
    for (int64_t i = 0; i < t->shape[0]; i++) {
      for (int k = 0; k < 3; k++)
        centroid[k] += p[i * s0 + k * s1] / NPART;
      if (p[i * s0 + s1] < *min_y) *min_y = p[i * s0 + s1];
    }
  }
  if (m->deleter) m->deleter(m); /* exactly once, when done */
  return ok;
}

/* ---- the host ------------------------------------------------------------------ */

static int fail(weft_State *W, const char *what) {
  fprintf(stderr, "embed: %s: %s\n", what, W ? weft_errmsg(W) : "cannot open weft");
  if (W) weft_close(W);
  return 1;
}

int main(int argc, char **argv) {
  const char *script = argc > 1 ? argv[1] : WEFT_SOURCE_DIR "/examples/embed_sim.lua";
  static Particles sim, ref; /* the host's memory; ref is the plain-C check */
  spawn(&sim);
  ref = sim;

  /* weft_open_ex says why it failed (no Lua layer found, out of memory) */
  char why[512];
  weft_Options opts;
  memset(&opts, 0, sizeof opts);
  opts.errbuf = why;
  opts.errbuf_size = sizeof why;
  weft_State *W = weft_open_ex(&opts);
  if (!W) {
    fprintf(stderr, "embed: %s\n", why);
    return 1;
  }

  /* Share the buffers once: Lua sees two arrays of NPART vec3 viewing the
  ** host's memory (nothing is copied, now or later). */
  int64_t n = NPART;
  if (weft_wrap(W, "pos", sim.pos, "vec3", 1, &n, "cpu") != WEFT_OK ||
      weft_wrap(W, "vel", sim.vel, "vec3", 1, &n, "cpu") != WEFT_OK)
    return fail(W, "weft_wrap");
  if (weft_dofile(W, script) != WEFT_OK) return fail(W, "loading the kernels");

  /* Compile the kernel now, at load time, so the first frame does not wait
  ** for the compiler (or the disk cache). */
  if (weft_compile(W, "sim.step", 1, "cpu") != WEFT_OK) return fail(W, "weft_compile");

  /* The frame loop: one launch per frame, arguments by tag. */
  weft_Arg args[3];
  memset(args, 0, sizeof args);
  args[0].type = WEFT_ARG_GLOBAL, args[0].s = "pos";
  args[1].type = WEFT_ARG_GLOBAL, args[1].s = "vel";
  args[2].type = WEFT_ARG_FLOAT, args[2].d = DT;
  for (int frame = 0; frame < FRAMES; frame++) {
    if (weft_launch(W, "sim.step", 1, &n, 3, args) != WEFT_OK) return fail(W, "sim.step");
    step_reference(&ref, DT);
  }

  /* Hand the positions to a consumer through DLPack: a 2-D float32 tensor
  ** (NPART x 3) viewing sim.pos. It stays valid until its deleter runs,
  ** whatever happens to the Lua name meanwhile. */
  DLManagedTensor *m = weft_export_dlpack(W, "pos", 0);
  if (!m) return fail(W, "weft_export_dlpack");
  float min_y = 0.0f, c[3];
  int shared = consume_positions(m, sim.pos, &min_y, c);
  weft_close(W);

  float err = 0.0f;
  for (int i = 0; i < NPART; i++)
    for (int k = 0; k < 3; k++) {
      float d = absf(sim.pos[i][k] - ref.pos[i][k]) + absf(sim.vel[i][k] - ref.vel[i][k]);
      if (d > err) err = d;
    }
  int ok = shared && min_y >= 0.0f && err < 1e-3f;
  printf("embed: %d particles, %d frames; centroid (%.3f, %.3f, %.3f), lowest %.3f, "
         "max |kernel - C| = %.2g\n",
         NPART, FRAMES, c[0], c[1], c[2], min_y, err);
  printf("%s\n", ok ? "embed: ok" : "embed: WRONG");
  return ok ? 0 : 1;
}
