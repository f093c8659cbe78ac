/*
** test_cuda_emit.c -- the CUDA emitter and NVRTC without a GPU:
**   1. tests/cuda/kernels.ir -> CUDA C (structure, #line directives)
**   2. NVRTC: PTX for compute_75/80/90 and CUBIN for sm_75/80/90; the PTX
**      assembled by nvJitLink for sm_75/80/90
**   3. the same CUDA C compiled for the host with tests/cuda/shim.h (g++),
**      run, and every result compared with a C reference of the CPU
**      backend's semantics (Lua % and //, x/0 = 0, saturating casts, the
**      PCG random numbers of src/cpu/emit.c, Lua-style print)
**   4. NVRTC errors mapped to Lua lines; the disk cache
*/
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda/wf_cuda.h"
#include "wtest.h"

static char *read_path(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

static char *read_src(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", WEFT_SOURCE_DIR, rel);
  return read_path(path);
}

/* Appends printf output to a growing string. */
typedef struct str {
  char *p;
  size_t n, cap;
} str;
static void sadd(str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sadd(str *s, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (s->n + (size_t)k + 1 > s->cap) {
    s->cap = (s->n + (size_t)k + 1) * 2;
    s->p = realloc(s->p, s->cap);
  }
  memcpy(s->p + s->n, tmp, (size_t)k + 1);
  s->n += (size_t)k;
}

/* ---- reference semantics (the CPU backend's, see src/cpu/emit.c) ---- */
static int32_t r_div(int32_t a, int32_t b) {
  return b == 0 ? 0 : b == -1 ? (int32_t)(0u - (uint32_t)a) : a / b;
}
static int32_t r_mod(int32_t a, int32_t b) {
  if (b == 0 || b == -1) return 0;
  int32_t r = a % b;
  return (r != 0 && ((r ^ b) < 0)) ? r + b : r;
}
static int32_t r_floordiv(int32_t a, int32_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int32_t)(0u - (uint32_t)a);
  int32_t q = a / b;
  return (a % b != 0 && ((a % b) ^ b) < 0) ? q - 1 : q;
}
static uint32_t pcg(uint32_t x) {
  uint32_t b = x * 747796405u + 2891336453u;
  uint32_t c = ((b >> ((b >> 28u) + 4u)) ^ b) * 277803737u;
  return (c >> 22u) ^ c;
}
static int32_t r_sat_i32(float x) {
  if (x != x) return 0;
  if (x <= -2147483648.0f) return INT32_MIN;
  if (x >= 2147483648.0f) return INT32_MAX;
  return (int32_t)x;
}

static void expected_output(str *e) {
  float x[100], y[100];
  for (int i = 0; i < 100; i++)
    x[i] = i * 0.5f, y[i] = 1.0f - i;
  for (int i = 0; i < 100; i++) {
    float t = 2.5f * x[i];
    sadd(e, "saxpy %d %.9g\n", i, t + y[i]);
  }
  for (int i = 0; i < 7; i++)
    for (int j = 0; j < 5; j++) {
      int32_t a = i - 3, b = j - 2;
      sadd(e, "intops %d %d %d %d %d %d\n", i, j, r_div(a, b), r_mod(a, b), r_floordiv(a, b),
           a >> (j & 31));
    }
  float xs[12] = {-3.25f, -1.0f,  -0.5f,  0.0f,     0.75f, 2.5f,
                  4.0f,   7.125f, 100.0f, -2.5e-3f, 3.0f,  -7.0f};
  float sum = 0, mx = -1e30f, mn = 1e30f;
  for (int i = 0; i < 12; i++) {
    float v = xs[i], acc = 0;
    for (int k = 1; k <= 5; k++) {
      float t = (float)k * v;
      acc = acc + t;
    }
    float w = fabsf(v);
    int cnt = 0;
    while (w > 1.0f)
      w = w / 2.0f, cnt++;
    float q = floorf(v / -1.5f);
    float t = q * -1.5f;
    float md = v - t;
    float fd = floorf(v / -1.5f);
    float iff = v < 0 ? -sqrtf(fabsf(v)) : roundf(v);
    uint32_t s = pcg(5u + pcg((uint32_t)i));
    s = pcg(s);
    float rf = (float)(s >> 8) * (1.0f / 16777216.0f);
    s = pcg(s);
    int32_t ri = (int32_t)s;
    float big = v * 1e9f;
    sadd(e, "floats %d %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g\n", i, acc, (float)cnt, md, fd, iff,
         rf, (float)r_sat_i32(big), (float)ri);
    sum += v;
    mx = v > mx ? v : mx;
    mn = v < mn ? v : mn;
  }
  sadd(e, "atomics %.9g %.9g %.9g\n", sum, mx, mn);
  float v[5][3] = {{1, 2, 3}, {4, 5, 4}, {-1, 0.5f, 2}, {7, 7, 7}, {0, 1, 2}};
  float s3[3] = {0, 0, 0};
  for (int i = 0; i < 5; i++) {
    int pal = v[i][0] == v[i][2];
    sadd(e, "aggs %d %.17g\n", i, pal ? 1000.0 : (double)v[i][2]);
    for (int k = 0; k < 3; k++)
      s3[k] += v[i][2 - k];
  }
  sadd(e, "aggsum %.9g %.9g %.9g\n", s3[0], s3[1], s3[2]);
  _Float16 h[4] = {(_Float16)1.5f, (_Float16)-2.25f, (_Float16)0.1f, (_Float16)1000.0f};
  for (int i = 0; i < 4; i++) {
    _Float16 a = (_Float16)((float)h[i] * 2.0f);
    _Float16 b = (_Float16)((float)a + 0.5f);
    sadd(e, "half %d %.9g\n", i, (double)(float)b);
  }
  sadd(e, "tids bad 0\n");
  for (int i = 0; i < 4; i++) {
    float acc = 0;
    for (int j = 0; j < 6; j++)
      acc += (float)(i * 10 + j);
    sadd(e, "views %d %.9g\n", i, acc);
  }
  sadd(e, "i=0 x=1.5\ttrue\ni=1 x=1.5\ttrue\n");
}

/* ---- tests ---- */
static wf_module *load_kernels(void) {
  char *text = read_src("tests/cuda/kernels.ir");
  CHECK(text != NULL);
  if (!text) return NULL;
  char err[256];
  wf_module *m = wf_ir_parse(text, NULL, err, sizeof err);
  if (!m) fprintf(stderr, "kernels.ir: %s\n", err);
  CHECK(m != NULL);
  free(text);
  return m;
}

static void test_emit_text(const wf_cuda_src *s) {
  CHECK_INT(s->nentries, 8);
  CHECK_STR(s->entries[0], "weft_saxpy");
  CHECK_HAS(
      s->text,
      "extern \"C\" __global__ void weft_saxpy(wf_dims wf_d, wf_arr v0, wf_arr v1, float v2)");
  CHECK_HAS(s->text, "#line 4 \"spec/cuda_demo.lua\"");
  CHECK_HAS(s->text, "wf_i += (long long)blockDim.x * gridDim.x");
  /* float16 through the emitter's own prelude: no cuda_fp16.h to parse */
  CHECK_HAS(s->text, "struct __align__(2) wf_half { unsigned short x; };");
  CHECK(strstr(s->text, "cuda_fp16.h") == NULL);
  CHECK(s->uses_half);
  CHECK_HAS(s->text, "static_assert(sizeof(wf_vec3f_1) == 12");
}

static void test_nvrtc(wf_nvrtc *nv, const wf_cuda_src *s) {
  static const char *archs[] = {"75", "80", "90"};
  char err[8192];
  for (int i = 0; i < 3; i++) {
    char a[32];
    wf_cuda_image img;
    snprintf(a, sizeof a, "compute_%s", archs[i]);
    int rc = wf_nvrtc_compile(nv, s->text, "kernels.cu", a, "min", &img, err, sizeof err);
    if (rc) fprintf(stderr, "%s: %s\n", a, err);
    CHECK_INT(rc, 0);
    if (rc) continue;
    CHECK(!img.is_cubin);
    CHECK_HAS(img.data, ".entry weft_saxpy(");
    CHECK_HAS(img.data, ".entry weft_printk(");
    for (int k = 0; k < 3; k++) {
      char sm[16];
      size_t cs = 0;
      if (k < i) continue; /* PTX for compute_90 does not assemble for sm_80 */
      snprintf(sm, sizeof sm, "sm_%s", archs[k]);
      int ar = wf_nvrtc_assemble(nv, img.data, sm, &cs, err, sizeof err);
      if (ar) fprintf(stderr, "%s -> %s: %s\n", a, sm, err);
      CHECK_INT(ar, 0);
      CHECK(cs > 1000);
    }
    wf_cuda_image_free(&img);
    snprintf(a, sizeof a, "sm_%s", archs[i]);
    rc = wf_nvrtc_compile(nv, s->text, "kernels.cu", a, "min", &img, err, sizeof err);
    CHECK_INT(rc, 0);
    CHECK(img.is_cubin && img.size > 1000 && memcmp(img.data, "\177ELF", 4) == 0);
    wf_cuda_image_free(&img);
  }
  /* an assembler error comes back as a message */
  CHECK(wf_nvrtc_assemble(nv, ".version 9.0\n.target sm_80\n.address_size 64\nbogus;\n", "sm_80",
                          NULL, err, sizeof err) != 0);
  CHECK_HAS(err, "PTX assembly for sm_80 failed");
}

/* NVRTC errors name the Lua chunk and line of the #line directive. */
static void test_error_lines(wf_nvrtc *nv) {
  const char *src = "extern \"C\" __global__ void k(float *x) {\n"
                    "#line 12 \"spec/foo_spec.lua\"\n"
                    "  x[0] = undefined_thing;\n"
                    "}\n";
  wf_cuda_image img;
  char err[4096];
  CHECK(wf_nvrtc_compile(nv, src, "k.cu", "compute_80", "min", &img, err, sizeof err) != 0);
  CHECK_HAS(err, "spec/foo_spec.lua:12: error: identifier \"undefined_thing\" is undefined");
  char out[128];
  wf_nvrtc_map_log("a.lua(3): error: x\nplain line\nb(x): y", out, sizeof out);
  CHECK_STR(out, "a.lua:3: error: x\nplain line\nb(x): y");
  CHECK(wf_nvrtc_compile(nv, src, "k.cu", "sm_8", "min", &img, err, sizeof err) != 0);
  CHECK_HAS(err, "bad CUDA architecture 'sm_8'");
}

/* Second compile of the same source comes from the cache directory. */
static void test_cache(wf_nvrtc *nv) {
  char dir[] = "/tmp/weft-cuda-cache-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  setenv("WEFT_CACHE_DIR", dir, 1);
  const char *src = "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n";
  wf_cuda_image a, b;
  char err[2048];
  CHECK_INT(wf_nvrtc_compile(nv, src, "k.cu", "compute_80", "min", &a, err, sizeof err), 0);
  CHECK_INT(a.from_cache, 0);
  CHECK_INT(wf_nvrtc_compile(nv, src, "k.cu", "compute_80", "min", &b, err, sizeof err), 0);
  CHECK_INT(b.from_cache, 1);
  CHECK(a.size == b.size && memcmp(a.data, b.data, a.size) == 0);
  wf_cuda_image_free(&b);
  /* another target is another entry */
  CHECK_INT(wf_nvrtc_compile(nv, src, "k.cu", "sm_80", "min", &b, err, sizeof err), 0);
  CHECK_INT(b.from_cache, 0);
  wf_cuda_image_free(&a);
  wf_cuda_image_free(&b);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "test $(ls %s/cuda | wc -l) -eq 2 && ! ls %s/cuda/.tmp-* 2>/dev/null",
           dir, dir);
  CHECK_INT(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK_INT(system(cmd), 0);
  setenv("WEFT_CACHE_DIR", "off", 1);
}

/* The emitted code compiled for the host runs and matches the reference. */
static void test_host_shim(const wf_cuda_src *s) {
  if (system("g++ --version >/dev/null 2>&1") != 0) {
    printf("SKIP host shim: no g++\n");
    return;
  }
  char dir[] = "/tmp/weft-cuda-shim-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[512], cmd[2048];
  snprintf(path, sizeof path, "%s/all.cpp", dir);
  char *harness = read_src("tests/cuda/harness.cpp");
  CHECK(harness != NULL);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f || !harness) return;
  fputs(s->text, f);
  fputs(harness, f);
  fclose(f);
  free(harness);
  snprintf(cmd, sizeof cmd,
           "g++ -std=c++17 -O1 -w -include %s/tests/cuda/shim.h %s -o %s/run 2> %s/cc.log && "
           "%s/run > %s/out.txt",
           WEFT_SOURCE_DIR, path, dir, dir, dir, dir);
  int rc = system(cmd);
  CHECK_INT(rc, 0);
  if (rc) {
    snprintf(cmd, sizeof cmd, "head -30 %s/cc.log >&2", dir);
    (void)system(cmd);
  }
  snprintf(path, sizeof path, "%s/out.txt", dir);
  char *got = read_path(path);
  str e = {0};
  expected_output(&e);
  CHECK_STR(got, e.p);
  free(got);
  free(e.p);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK_INT(system(cmd), 0);
}

static wf_module *parse_or_null(const char *text) {
  char err[512];
  wf_module *m = wf_ir_parse(text, NULL, err, sizeof err);
  if (!m) fprintf(stderr, "parse: %s\n", err);
  return m;
}

/* Emitter errors name the Lua line. */
static void test_emit_errors(void) {
  wf_module *m = parse_or_null("kernel @k(%0:array<bool,1>) chunk \"@spec/bad.lua\" {\n"
                               "  %1:i32 = tid 0\n"
                               "  %2:bool = const true\n"
                               "  %3:bool = atomic_add %0, %1, %2 !7:3\n"
                               "  ret\n"
                               "}\n");
  CHECK(m != NULL);
  if (!m) return;
  char err[512];
  wf_cuda_src s;
  CHECK(wf_cuda_emit(m, &s, err, sizeof err) != 0);
  CHECK_STR(err, "spec/bad.lua:7: cuda: atomic_add on bool elements is not supported on CUDA");
  wf_module_free(m);
}

/* 8/16-bit atomics: a CAS on the 32-bit word; infinities as macros both
** NVRTC and the shim define; only the helpers the code uses. */
static void test_emit_narrow_and_constants(void) {
  wf_module *m =
      parse_or_null("kernel @k(%0:array<i8,1>, %1:array<f32,1>) chunk \"@spec/n.lua\" {\n"
                    "  %2:i32 = tid 0\n"
                    "  %3:i8 = const 1\n"
                    "  %4:i8 = atomic_max %0, %2, %3 !3:1\n"
                    "  %5:f32 = const inf\n"
                    "  store %1, %2, %5 !4:1\n"
                    "  ret\n"
                    "}\n");
  CHECK(m != NULL);
  if (!m) return;
  char err[512];
  wf_cuda_src s;
  int rc = wf_cuda_emit(m, &s, err, sizeof err);
  if (rc) fprintf(stderr, "emit: %s\n", err);
  CHECK_INT(rc, 0);
  if (rc == 0) {
    CHECK_HAS(s.text, "wf_atomic_narrow(&wf_p->v, v3, 2)");
    CHECK_HAS(s.text, "template <class T> WF_FN T wf_atomic_narrow(");
    CHECK_HAS(s.text, "WF_INFF");
    CHECK(strstr(s.text, "wf_rng_init") == NULL); /* unused helpers are left out */
    CHECK(strstr(s.text, "wf_atomic_add") == NULL);
    CHECK(strstr(s.text, "wf_oob") == NULL);
    wf_cuda_src_free(&s);
  }
  wf_module_free(m);
}

/* Debug mode: an error slot parameter, a check per index, division checks,
** and the parameter names in the messages. */
static void test_emit_debug(void) {
  wf_module *m =
      parse_or_null("kernel @k(%0:array<f32,2>, %1:array<i32,1>, %2:i32) chunk \"@spec/d.lua\" {\n"
                    "  %3:i32 = tid 0\n"
                    "  %4:array<f32,1> = view %0, %3 !5:2\n"
                    "  %5:f32 = load %4, %2 !6:2\n"
                    "  %6:i32 = load %1, %3 !7:2\n"
                    "  %7:i32 = div %6, %2 !8:2\n"
                    "  store %1, %3, %7 !8:2\n"
                    "  ret\n"
                    "}\n");
  CHECK(m != NULL);
  if (!m) return;
  char err[512];
  wf_cuda_src s;
  const char *names[3] = {"grid", "counts", "d"};
  wf_cuda_opts o = {.debug = 1, .nnames = 3, .names = names};
  int rc = wf_cuda_emit_opts(m, &o, &s, err, sizeof err);
  if (rc) fprintf(stderr, "emit: %s\n", err);
  CHECK_INT(rc, 0);
  if (rc == 0) {
    CHECK_HAS(s.text, "int v2, wf_err *wf_e) {");
    CHECK_HAS(s.text, "if (*(volatile int *)&wf_e->flag) return;");
    CHECK_HAS(s.text,
              "if (wf_oob(wf_e, (long long)v3, v0.shape[0], \"spec/d.lua:5\", 0, \"grid\", \"k\")) "
              "return;");
    CHECK_HAS(s.text,
              "if (wf_oob(wf_e, (long long)v2, v4.shape[0], \"spec/d.lua:6\", 1, \"grid\", \"k\")) "
              "return;");
    CHECK_HAS(s.text, "\"spec/d.lua:7\", 0, \"counts\", \"k\")) return;");
    CHECK_HAS(s.text, "{ wf_fail(wf_e, \"spec/d.lua:8\", \"integer division by zero\"); return; }");
    CHECK_HAS(s.text, "struct wf_err { int flag; char msg[508]; };");
    wf_cuda_src_free(&s);
  }
  /* fast mode (no options): none of it */
  rc = wf_cuda_emit(m, &s, err, sizeof err);
  CHECK_INT(rc, 0);
  if (rc == 0) {
    CHECK(strstr(s.text, "wf_e") == NULL);
    CHECK(strstr(s.text, "wf_oob") == NULL);
    wf_cuda_src_free(&s);
  }
  /* release mode: the tid indices at the top level are checked once per
  ** thread against the launch dim; the load by a parameter keeps its
  ** check; a zero divisor stops the launch as in debug mode */
  wf_pass_bounds(m);
  wf_cuda_opts r = {.checks = 1, .nnames = 3, .names = names};
  rc = wf_cuda_emit_opts(m, &r, &s, err, sizeof err);
  if (rc) fprintf(stderr, "emit: %s\n", err);
  CHECK_INT(rc, 0);
  if (rc == 0) {
    CHECK_HAS(s.text, "int v2, wf_err *wf_e) {");
    CHECK(strstr(s.text, "if (*(volatile int *)&wf_e->flag) return;") == NULL);
    CHECK_HAS(s.text, "if (wf_range(wf_e, 0LL, wf_d.dim[0] - 1 + 0LL, 0, 1, v0.shape[0], "
                      "\"spec/d.lua:5\", 0, \"grid\", \"k\")) return;");
    CHECK_HAS(s.text, "if (wf_range(wf_e, 0LL, wf_d.dim[0] - 1 + 0LL, 0, 1, v1.shape[0], "
                      "\"spec/d.lua:7\", 0, \"counts\", \"k\")) return;");
    CHECK_HAS(s.text,
              "if (wf_oob(wf_e, (long long)v2, v4.shape[0], \"spec/d.lua:6\", 1, \"grid\", \"k\")) "
              "return;");
    CHECK(strstr(s.text, "wf_oob(wf_e, (long long)v3") == NULL);
    CHECK_HAS(s.text, "{ wf_fail(wf_e, \"spec/d.lua:8\", \"integer division by zero\"); return; }");
    wf_cuda_src_free(&s);
  }
  wf_module_free(m);
}

int main(void) {
  setenv("WEFT_CACHE_DIR", "off", 1);
  wf_module *m = load_kernels();
  if (!m) WTEST_DONE();
  wf_cuda_src s;
  char err[1024];
  int rc = wf_cuda_emit(m, &s, err, sizeof err);
  if (rc) fprintf(stderr, "emit: %s\n", err);
  CHECK_INT(rc, 0);
  if (rc == 0) {
    if (getenv("WEFT_DUMP_CUDA")) fputs(s.text, stderr);
    test_emit_text(&s);
    test_host_shim(&s);
    wf_nvrtc *nv = wf_nvrtc_open(err, sizeof err);
    if (!nv) {
      printf("SKIP nvrtc: %s\n", err);
      /* the toolkit of these machines must be found */
      CHECK(access("/usr/local/cuda/lib64/libnvrtc.so.13", F_OK) != 0);
    } else {
      CHECK(wf_nvrtc_version(nv) >= 12000);
      test_nvrtc(nv, &s);
      test_error_lines(nv);
      test_cache(nv);
      wf_nvrtc_close(nv);
    }
    wf_cuda_src_free(&s);
  }
  test_emit_errors();
  test_emit_narrow_and_constants();
  test_emit_debug();
  wf_module_free(m);
  WTEST_DONE();
}
