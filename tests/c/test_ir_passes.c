#include <stdlib.h>
/*
** test_ir_passes.c -- passes and the verifier, as IR text in / text out.
**
** Cases live in tests/ir/passes.ir and tests/ir/verify.ir:
**
**   ==== <name> | <pass> [<pass> ...]      passes: inline fold cse dce bounds
**   <input IR>                              optimize verify
**   ---- expect                            then the exact printed output
**   <expected IR>
** or
**   ---- error <message>                   the first failing pass's message
**
** The input must verify, except in cases expecting an error; every output
** must verify (the passes keep the IR valid).
*/
#include "ir/ir.h"
#include "wtest.h"

static char *read_file(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", WEFT_SOURCE_DIR, rel);
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

/* Runs one named pass; 0 on success (err set otherwise). */
static int run_pass(wf_module *m, const char *p, char *err, size_t n) {
  if (!strcmp(p, "inline")) return wf_pass_inline(m, err, n);
  if (!strcmp(p, "fold")) return wf_pass_fold(m), 0;
  if (!strcmp(p, "cse")) return wf_pass_cse(m), 0;
  if (!strcmp(p, "dce")) return wf_pass_dce(m), 0;
  if (!strcmp(p, "bounds")) return wf_pass_bounds(m), 0;
  if (!strcmp(p, "optimize")) return wf_ir_optimize(m, err, n);
  if (!strcmp(p, "verify")) return wf_ir_verify(m, err, n);
  snprintf(err, n, "unknown pass '%s'", p);
  return -1;
}

/* Robustness: the input with any one line deleted either fails to parse or
** verify with a message, or verifies and then optimizes into verified IR. */
static void mutate(const char *file, const char *name, const char *input) {
  size_t n = strlen(input);
  char *buf = malloc(n + 1), err[512];
  for (const char *ln = input; buf && *ln;) {
    const char *eol = strchr(ln, '\n');
    const char *next = eol ? eol + 1 : ln + strlen(ln);
    size_t head = (size_t)(ln - input);
    memcpy(buf, input, head);
    strcpy(buf + head, next);
    ln = next;
    err[0] = 0;
    wf_module *m = wf_ir_parse(buf, NULL, err, sizeof err);
    wtest_checks++;
    if (!m) {
      if (!err[0]) wtest_failures++;
      continue;
    }
    if (wf_ir_verify(m, err, sizeof err) != 0) {
      if (strncmp(err, "in @", 4) != 0) {
        wtest_failures++;
        fprintf(stderr, "%s: case '%s': bad verifier message: %s\n", file, name, err);
      }
    } else if (wf_ir_optimize(m, err, sizeof err) == 0 && wf_ir_verify(m, err, sizeof err) != 0) {
      wtest_failures++;
      fprintf(stderr, "%s: case '%s' with a line deleted: optimized IR does not verify: %s\n%s",
              file, name, err, buf);
    }
    wf_module_free(m);
  }
  free(buf);
}

static void run_case(const char *file, const char *name, char *passes, const char *input,
                     const char *expect, const char *error) {
  char err[512] = "";
  wf_module *m = wf_ir_parse(input, NULL, err, sizeof err);
  wtest_checks++;
  if (!m) {
    wtest_failures++;
    fprintf(stderr, "%s: case '%s': input does not parse: %s\n", file, name, err);
    return;
  }
  if (!error && wf_ir_verify(m, err, sizeof err)) {
    wtest_failures++;
    fprintf(stderr, "%s: case '%s': input does not verify: %s\n", file, name, err);
    wf_module_free(m);
    return;
  }
  mutate(file, name, input);
  int rc = 0;
  for (char *p = strtok(passes, " \t"); p && !rc; p = strtok(NULL, " \t"))
    rc = run_pass(m, p, err, sizeof err);
  wtest_checks++;
  if (error) {
    if (!rc || strcmp(err, error) != 0) {
      wtest_failures++;
      fprintf(stderr, "%s: case '%s': expected error\n  %s\ngot (rc %d)\n  %s\n", file, name, error,
              rc, err);
    }
  } else if (rc) {
    wtest_failures++;
    fprintf(stderr, "%s: case '%s': failed: %s\n", file, name, err);
  } else {
    char *out = wf_ir_to_string(m);
    if (!out || strcmp(out, expect) != 0) {
      wtest_failures++;
      fprintf(stderr, "%s: case '%s':\n--- got:\n%s--- expected:\n%s", file, name,
              out ? out : "(null)\n", expect);
    }
    wtest_checks++;
    if (wf_ir_verify(m, err, sizeof err)) {
      wtest_failures++;
      fprintf(stderr, "%s: case '%s': output does not verify: %s\n", file, name, err);
    }
    free(out);
  }
  wf_module_free(m);
}

/* Splits a case file at its "====" / "----" lines. */
static int run_file(const char *rel) {
  char *text = read_file(rel);
  if (!text) {
    fprintf(stderr, "cannot read %s\n", rel);
    wtest_failures++;
    return 0;
  }
  int ncases = 0;
  char *p = strstr(text, "==== ");
  while (p) {
    char *hdr = p + 5, *eol = strchr(hdr, '\n');
    if (!eol) break;
    *eol = 0;
    char *next = strstr(eol + 1, "\n==== ");
    if (next) next[1] = 0; /* terminate this case's text (keep its newline) */
    char *bar = strchr(hdr, '|');
    char name[128] = "?", passes[256] = "";
    if (bar) {
      snprintf(name, sizeof name, "%.*s", (int)(bar - hdr), hdr);
      snprintf(passes, sizeof passes, "%s", bar + 1);
    }
    char *input = eol + 1, *sep = strstr(input, "---- "), *expect = NULL, *error = NULL;
    if (sep) {
      *sep = 0;
      char *rest = sep + 5, *e2 = strchr(rest, '\n');
      if (e2) *e2 = 0;
      if (!strncmp(rest, "expect", 6)) {
        expect = e2 ? e2 + 1 : "";
        size_t el = strlen(expect); /* blank lines between cases are not part of it */
        while (el >= 2 && expect[el - 1] == '\n' && expect[el - 2] == '\n')
          expect[--el] = 0;
      } else if (!strncmp(rest, "error ", 6))
        error = rest + 6;
    }
    if (!sep || (!expect && !error)) {
      fprintf(stderr, "%s: case '%s' has no '---- expect' or '---- error'\n", rel, name);
      wtest_failures++;
    } else {
      run_case(rel, name, passes, input, expect, error);
    }
    ncases++;
    p = next ? next + 1 : NULL;
  }
  free(text);
  return ncases;
}

int main(void) {
  /* The optimizer verifies between passes in debug builds, and in release
  ** builds when asked: ask, so the verifier cases hold in both. */
  setenv("WEFT_VERIFY", "1", 1);
  int n = run_file("tests/ir/passes.ir");
  int v = run_file("tests/ir/verify.ir");
  printf("%d pass cases, %d verifier cases\n", n, v);
  CHECK(n > 10);
  CHECK(v > 10);
  WTEST_DONE();
}
