/*
** nbody.c -- C baseline of the n-body benchmark (gcc -O3 -march=native,
** one thread): for every body, the softened inverse-square acceleration
** from all n bodies, n = 4096, float32 vec3 -- the same arithmetic as
** bench/bench.lua's kernel. Prints the median time in seconds.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct vec3 {
  float x, y, z;
} vec3;

#ifndef BENCH_LIB
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif

/* Also built as a shared library (-DBENCH_LIB) for bench.lua. */
void bench_nbody(int n, const vec3 *restrict pos, vec3 *restrict acc) {
  for (int i = 0; i < n; i++) {
    vec3 p = pos[i], a = {0, 0, 0};
    for (int j = 0; j < n; j++) {
      float dx = pos[j].x - p.x, dy = pos[j].y - p.y, dz = pos[j].z - p.z;
      float r2 = dx * dx + dy * dy + dz * dz + 0.01f;
      float inv = 1.0f / (r2 * sqrtf(r2));
      a.x += dx * inv, a.y += dy * inv, a.z += dz * inv;
    }
    acc[i] = a;
  }
}

#ifndef BENCH_LIB
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int n = 4096;
  int runs = argc > 1 ? atoi(argv[1]) : 5;
  if (runs < 1 || runs > 1000) runs = 5;
  vec3 *pos = malloc(sizeof(vec3) * (size_t)n), *acc = malloc(sizeof(vec3) * (size_t)n);
  if (!pos || !acc) return 1;
  for (int i = 0; i < n; i++)
    pos[i] = (vec3){(float)(i % 16), (float)((i / 16) % 16), (float)(i / 256)};
  double t[1000];
  for (int r = 0; r < runs; r++) {
    double t0 = now();
    bench_nbody(n, pos, acc);
    t[r] = now() - t0;
  }
  qsort(t, (size_t)runs, sizeof t[0], cmp);
  printf("%.9f %g\n", t[runs / 2], (double)acc[77].x);
  free(pos), free(acc);
  return 0;
}
#endif
