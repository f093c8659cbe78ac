/*
** test_cuda_prelude.c -- src/cuda/prelude.cuh, the CUDA helpers the
** emitter copies in front of kernels:
**   1. the copy CMake embeds (cmake/embed.cmake) equals the file, byte
**      for byte (quotes, backslashes, tabs and newlines survive)
**   2. every "//@" marker line is one src/cuda/emit.c knows
**   3. the file is valid CUDA C on its own: NVRTC compiles it
**   4. an emitted module carries a piece only when its code uses it
**   5. no piece is dead: one of its names occurs in the emitter's sources
*/
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/wf_cuda.h"
#include "prelude_cuh.h"
#include "wtest.h"

static char *read_file(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", WEFT_SOURCE_DIR, rel);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

/* Is the marker line at p (up to its newline) one the emitter knows? */
static int marker_ok(const char *p) {
  static const char *const ok[] = {"//@ file", "//@ piece device", "//@ piece half",
                                   "//@ piece portable"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    size_t n = strlen(ok[i]);
    if (strncmp(p, ok[i], n) == 0 && (p[n] == '\n' || p[n] == ' ' || p[n] == 0)) return 1;
  }
  return 0;
}

static void test_markers(const char *text) {
  int pieces = 0;
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, "//@", 3) != 0) continue;
    pieces++;
    if (!marker_ok(p)) fprintf(stderr, "unknown marker: %.60s\n", p);
    CHECK(marker_ok(p));
  }
  CHECK(pieces > 10);
}

static void test_nvrtc(const char *text) {
  char err[8192];
  wf_nvrtc *nv = wf_nvrtc_open(err, sizeof err);
  if (!nv) {
    printf("SKIP nvrtc: %s\n", err);
    CHECK(access("/usr/local/cuda/lib64/libnvrtc.so.13", F_OK) != 0);
    return;
  }
  wf_cuda_image img;
  int rc = wf_nvrtc_compile(nv, text, "prelude.cuh", "compute_80", "min", &img, err, sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  CHECK_INT(rc, 0);
  if (rc == 0) wf_cuda_image_free(&img);
  wf_nvrtc_close(nv);
}

/* A kernel storing a constant needs none of the optional helpers; one
** with an integer % needs wf_imod and nothing for float16. */
static void test_selection(void) {
  const char *ir = "kernel @k(%0:array<i32,1>) {\n"
                   "  %1:i32 = tid 0\n"
                   "  %2:i32 = const 7\n"
                   "  %3:i32 = mod %1, %2\n"
                   "  store %0, %1, %3\n"
                   "  ret\n"
                   "}\n";
  char err[1024];
  wf_module *m = wf_ir_parse(ir, NULL, err, sizeof err);
  if (!m) fprintf(stderr, "parse: %s\n", err);
  CHECK(m != NULL);
  if (!m) return;
  wf_cuda_src s;
  int rc = wf_cuda_emit(m, &s, err, sizeof err);
  if (rc) fprintf(stderr, "emit: %s\n", err);
  CHECK_INT(rc, 0);
  if (rc == 0) {
    CHECK(strstr(s.text, "#define WF_FN static __device__") != NULL);
    CHECK(strstr(s.text, "struct wf_arr {") != NULL);
    CHECK(strstr(s.text, "T wf_imod(T a, T b)") != NULL);
    CHECK(strstr(s.text, "wf_randf") == NULL);
    CHECK(strstr(s.text, "struct __align__(2) wf_half") == NULL);
    CHECK(strstr(s.text, "//@") == NULL); /* markers stay in the file */
    CHECK(strstr(s.text, "prelude.cuh --") == NULL);
    wf_cuda_src_free(&s);
  }
  wf_module_free(m);
}

/* Does some NAME of the piece marker at p (up to its newline) occur in
** one of srcs? A piece without names is always emitted, so it is used. */
static int piece_used(const char *p, char *const *srcs, int nsrc) {
  const char *eol = strchr(p, '\n');
  size_t len = eol ? (size_t)(eol - p) : strlen(p);
  const char *q = p + strlen("//@ piece ");
  while (q < p + len && *q != ' ')
    q++; /* KIND */
  if (q >= p + len) return 1;
  for (q++; q < p + len;) {
    char name[64];
    size_t n = 0;
    while (q < p + len && *q != '|' && n + 1 < sizeof name)
      name[n++] = *q++;
    while (n > 0 && name[n - 1] != '_' && !isalnum((unsigned char)name[n - 1]))
      n--; /* "wf_view(" -> "wf_view" */
    name[n] = 0;
    for (int i = 0; i < nsrc && n > 0; i++)
      if (srcs[i] && strstr(srcs[i], name)) return 1;
    if (q < p + len) q++; /* '|' */
  }
  return 0;
}

/* The emitter names helpers in src/cuda/emit.c and in the op table's cuda
** column (src/ir/ir.h); a piece named in neither is dead text. */
static void test_pieces_used(const char *text) {
  char *srcs[2] = {read_file("src/cuda/emit.c"), read_file("src/ir/ir.h")};
  CHECK(srcs[0] != NULL && srcs[1] != NULL);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, "//@ piece ", strlen("//@ piece ")) != 0) continue;
    int used = piece_used(p, srcs, 2);
    if (!used) fprintf(stderr, "piece nothing emits: %.*s\n", (int)strcspn(p, "\n"), p);
    CHECK(used);
  }
  free(srcs[0]);
  free(srcs[1]);
}

int main(void) {
  char *text = read_file("src/cuda/prelude.cuh");
  CHECK(text != NULL);
  if (text) {
    CHECK_STR(wf_cuda_prelude, text);
    test_markers(text);
    test_pieces_used(text);
    test_nvrtc(text);
  }
  free(text);
  test_selection();
  WTEST_DONE();
}
