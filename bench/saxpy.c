/*
** saxpy.c -- C baseline of the saxpy benchmark (gcc -O3 -march=native,
** one thread): y = a * x + y over n = 2^24 floats. Prints the median time
** of the runs in seconds.
*/
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef BENCH_LIB
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif

/* Also built as a shared library (-DBENCH_LIB) that bench.lua calls
** in-process, alternating with weft's runs so both see the same load. */
void bench_saxpy(long n, float a, const float *restrict x, float *restrict y) {
  for (long i = 0; i < n; i++)
    y[i] = a * x[i] + y[i];
}

#ifndef BENCH_LIB

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  long n = 1L << 24;
  int runs = argc > 1 ? atoi(argv[1]) : 15;
  if (runs < 1 || runs > 1000) runs = 15;
  float *x = aligned_alloc(64, (size_t)n * sizeof(float));
  float *y = aligned_alloc(64, (size_t)n * sizeof(float));
  if (!x || !y) return 1;
  for (long i = 0; i < n; i++)
    x[i] = (float)(i & 1023), y[i] = 1.0f;
  double t[1000];
  for (int r = 0; r < runs; r++) {
    double t0 = now();
    bench_saxpy(n, 1.0001f, x, y);
    t[r] = now() - t0;
  }
  qsort(t, (size_t)runs, sizeof t[0], cmp);
  printf("%.9f %g\n", t[runs / 2], (double)y[12345]);
  free(x), free(y);
  return 0;
}
#endif
