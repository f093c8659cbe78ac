// harness.cpp -- runs the kernels of tests/cuda/kernels.ir, emitted as CUDA C
// (kernels.cu, made by test_cuda_emit), on the host through shim.h, and prints
// every result; test_cuda_emit compares the lines with its own reference.
// Build: g++ -std=c++17 -include tests/cuda/shim.h kernels.cu harness.cpp
// (the test concatenates kernels.cu and this file into one unit).

static wf_arr mkarr(void *p, int nd, const long long *shape, long long es) {
  wf_arr a;
  a.data = (char *)p;
  long long s = es;
  for (int k = 3; k >= 0; k--) {
    a.shape[k] = k < nd ? shape[k] : 1;
    a.strides[k] = k < nd ? s : 0;
    if (k < nd) s *= shape[k];
  }
  return a;
}

int main() {
  { // saxpy over 100 elements (grid-stride: 3 blocks of 32 threads)
    float x[100], y[100];
    for (int i = 0; i < 100; i++) x[i] = i * 0.5f, y[i] = 1.0f - i;
    long long n = 100;
    WF_SHIM_LAUNCH(weft_saxpy, 1, &n, mkarr(x, 1, &n, 4), mkarr(y, 1, &n, 4), 2.5f);
    for (int i = 0; i < 100; i++) printf("saxpy %d %.9g\n", i, y[i]);
  }
  { // integer division semantics
    int out[7][5][4];
    long long sh[3] = {7, 5, 4}, d[2] = {7, 5};
    WF_SHIM_LAUNCH(weft_intops, 2, d, mkarr(out, 3, sh, 4));
    for (int i = 0; i < 7; i++)
      for (int j = 0; j < 5; j++)
        printf("intops %d %d %d %d %d %d\n", i, j, out[i][j][0], out[i][j][1], out[i][j][2], out[i][j][3]);
  }
  { // loops, while, mod/floordiv, if, rng, saturating cast, atomics
    float x[12] = {-3.25f, -1.0f, -0.5f, 0.0f, 0.75f, 2.5f, 4.0f, 7.125f, 100.0f, -2.5e-3f, 3.0f, -7.0f};
    float out[12][8], acc[3] = {0.0f, -1e30f, 1e30f};
    long long n = 12, sh[2] = {12, 8}, three = 3;
    WF_SHIM_LAUNCH(weft_floats, 1, &n, mkarr(x, 1, &n, 4), mkarr(out, 2, sh, 4), mkarr(acc, 1, &three, 4), 5);
    for (int i = 0; i < 12; i++) {
      printf("floats %d", i);
      for (int k = 0; k < 8; k++) printf(" %.9g", out[i][k]);
      printf("\n");
    }
    printf("atomics %.9g %.9g %.9g\n", acc[0], acc[1], acc[2]);
  }
  { // aggregates
    float v[5][3] = {{1, 2, 3}, {4, 5, 4}, {-1, 0.5f, 2}, {7, 7, 7}, {0, 1, 2}};
    float sum[1][3] = {{0, 0, 0}};
    double o[5];
    long long n = 5, one = 1;
    WF_SHIM_LAUNCH(weft_aggs, 1, &n, mkarr(v, 1, &n, 12), mkarr(sum, 1, &one, 12), mkarr(o, 1, &n, 8));
    for (int i = 0; i < 5; i++) printf("aggs %d %.17g\n", i, o[i]);
    printf("aggsum %.9g %.9g %.9g\n", sum[0][0], sum[0][1], sum[0][2]);
  }
  { // float16
    wf_half h[4] = {(wf_half)1.5f, (wf_half)-2.25f, (wf_half)0.1f, (wf_half)1000.0f};
    long long n = 4;
    WF_SHIM_LAUNCH(weft_halfk, 1, &n, mkarr(h, 1, &n, 2));
    for (int i = 0; i < 4; i++) printf("half %d %.9g\n", i, (double)(float)h[i]);
  }
  { // 4-D launch: tid decomposition
    int t[2][3][4][5];
    long long d[4] = {2, 3, 4, 5};
    WF_SHIM_LAUNCH(weft_tids, 4, d, mkarr(t, 4, d, 4));
    int bad = 0;
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++)
        for (int k = 0; k < 4; k++)
          for (int l = 0; l < 5; l++) bad += t[i][j][k][l] != i * 1000 + j * 100 + k * 10 + l;
    printf("tids bad %d\n", bad);
  }
  { // views and shape
    float m[4][6], r[4];
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 6; j++) m[i][j] = (float)(i * 10 + j);
    long long sh[2] = {4, 6}, n = 4;
    WF_SHIM_LAUNCH(weft_views, 1, &n, mkarr(m, 2, sh, 4), mkarr(r, 1, &n, 4));
    for (int i = 0; i < 4; i++) printf("views %d %.9g\n", i, r[i]);
  }
  { // print
    long long n = 2;
    fflush(stdout);
    WF_SHIM_LAUNCH(weft_printk, 1, &n, 1.5f);
  }
  return 0;
}
