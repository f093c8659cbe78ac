/*
** optimize.c -- the standard pass pipeline, readable as one list of calls.
**
** The verifier runs on the input and after every pass in debug builds
** (!NDEBUG) or when the environment sets WEFT_VERIFY=1; a failure after a
** pass names the pass (a bug in the pass, not in the user's kernel).
*/
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "ir/ir.h"

/* Verification on? Debug builds always; release builds on WEFT_VERIFY=1. */
static int want_verify(void) {
#ifndef NDEBUG
  return 1;
#else
  const char *e = getenv("WEFT_VERIFY");
  return e && strcmp(e, "1") == 0;
#endif
}

/* Verifies m; on failure prefixes the message with the stage. */
static int check(wf_module *m, const char *stage, char *err, size_t errsize) {
  char msg[512];
  if (wf_ir_verify(m, msg, sizeof msg) == 0) return 0;
  if (errsize) snprintf(err, errsize, "IR verification failed %s: %s", stage, msg);
  return -1;
}

int wf_ir_optimize(wf_module *m, char *err, size_t errsize) {
  int v = want_verify();
  if (errsize) err[0] = 0;
  if (v && check(m, "on input", err, errsize)) return -1;
  if (wf_pass_inline(m, err, errsize)) return -1;
  if (v && check(m, "after inline", err, errsize)) return -1;
  wf_pass_fold(m);
  if (v && check(m, "after fold", err, errsize)) return -1;
  wf_pass_cse(m);
  if (v && check(m, "after cse", err, errsize)) return -1;
  wf_pass_dce(m);
  if (v && check(m, "after dce", err, errsize)) return -1;
  wf_pass_bounds(m);
  if (v && check(m, "after bounds", err, errsize)) return -1;
  return 0;
}
