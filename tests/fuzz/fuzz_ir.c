/*
** fuzz_ir.c -- libFuzzer harness for the IR text form (src/ir): the input
** is IR text. It is parsed; a module that parses is verified; a module that
** verifies must print, parse back and print the same text; it then runs
** through the pass pipeline (with the verifier after every pass), the
** CUDA C emitter, the LLVM IR emitter of each kernel (checked by LLVM's
** verifier; debug or release code by the input's length) and the adjoint
** and tangent transforms of each kernel.
**
** Findings are crashes, sanitizer reports, hangs, and broken invariants,
** which abort with a line on stderr:
**   - a verified module whose printed text does not parse back the same;
**   - "IR verification failed after <pass>" (a pass broke a valid module);
**   - a kernel whose LLVM IR fails LLVMVerifyModule.
** Parse, verify, inline, autodiff and emit errors are fine.
**
** Build: CC=clang-16 CXX=clang++-16 cmake -S . -B build-fuzz -DWEFT_FUZZ=ON
**        cmake --build build-fuzz --target fuzz_ir
** Run:   build-fuzz/fuzz_ir -dict=tests/fuzz/ir.dict -max_len=4096 \
**          NEWDIR tests/fuzz/ir/corpus
**        (make fuzz FUZZ_SECONDS=3600 runs every harness that long; a crash
**        input is replayed with build-fuzz/fuzz_ir CRASHFILE)
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>

#include "ad/ad.h"
#include "cpu/cpu.h"
#include "cuda/wf_cuda.h"
#include "ir/ir.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One LLVM context for every input (modules are disposed after each). */
static LLVMContextRef llvm_context(void) {
  static LLVMContextRef C; /* libFuzzer's entry points take no context */
  if (!C) C = LLVMContextCreate();
  return C;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  setenv("WEFT_VERIFY", "1", 1); /* the verifier after every pass */
  llvm_context();
  return 0;
}

/* A broken invariant: say which, show the text, stop. */
static void finding(const char *what, const char *detail, const char *text) {
  fprintf(stderr, "fuzz_ir: %s\n%s\n---- input:\n%s\n", what, detail ? detail : "", text);
  abort();
}

/* print(m) parses back and prints the same text. */
static void check_roundtrip(wf_module *m, const char *input) {
  char err[512];
  char *once = wf_ir_to_string(m);
  if (!once) return;
  wf_module *m2 = wf_ir_parse(once, NULL, err, sizeof err);
  if (!m2) finding("the printed text of a verified module does not parse", err, once);
  char *twice = wf_ir_to_string(m2);
  if (twice && strcmp(once, twice) != 0) finding("print(parse(print(m))) differs", twice, once);
  (void)input;
  free(twice);
  wf_module_free(m2);
  free(once);
}

/* Pass-pipeline errors that are bugs rather than bad input. */
static void check_pass_error(const char *err, const char *text) {
  if (strstr(err, "IR verification failed after"))
    finding("a pass broke a verified module", err, text);
}

/* LLVM IR of kernel fn; LLVM's verifier must accept what emits. */
static void check_llvm(wf_func *fn, int debug, const char *text) {
  wf_cpu_opts o;
  memset(&o, 0, sizeof o);
  o.debug = debug;
  o.ndim = 1;
  o.simd = 1;
  o.symbol = "wfk_fuzz";
  char err[512];
  LLVMModuleRef M = wf_llvm_emit(llvm_context(), fn, &o, err, sizeof err);
  if (!M) return;
  char *msg = NULL;
  if (LLVMVerifyModule(M, LLVMReturnStatusAction, &msg)) finding("invalid LLVM IR", msg, text);
  LLVMDisposeMessage(msg);
  LLVMDisposeModule(M);
}

/* The adjoint (or tangent) of kernel k, then the pipeline again. */
static void transform(wf_module *m, int k, int jvp, const char *text) {
  char err[1024];
  int rc = jvp ? wf_ad_jvp(m, k, err, sizeof err) : wf_ad_kernel(m, k, err, sizeof err);
  if (rc != 0) return;
  if (wf_ir_optimize(m, err, sizeof err) != 0) {
    if (strstr(err, "IR verification failed"))
      finding(jvp ? "the tangent transform made an invalid module"
                  : "the adjoint transform made an invalid module",
              err, text);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  char err[1024];
  wf_module *m = wf_ir_parse(text, NULL, err, sizeof err);
  if (!m) goto done;
  if (wf_ir_verify(m, err, sizeof err) != 0) goto freem;
  check_roundtrip(m, text);
  if (wf_ir_optimize(m, err, sizeof err) != 0) {
    check_pass_error(err, text);
    goto freem;
  }
  if (wf_ir_verify(m, err, sizeof err) != 0)
    finding("the pipeline left an invalid module", err, text);
  check_roundtrip(m, text);
  /* emit first (the transforms append functions), then each kernel's
  ** adjoint and tangent on the same module */
  wf_cuda_src src;
  memset(&src, 0, sizeof src);
  if (wf_cuda_emit(m, &src, err, sizeof err) == 0) wf_cuda_src_free(&src);
  int nf = m->nfuncs;
  for (int k = 0; k < nf && k < 4; k++)
    if (m->funcs[k]->is_kernel) check_llvm(m->funcs[k], (int)(size & 1), text);
  for (int k = 0; k < nf && k < 4; k++) {
    if (!m->funcs[k]->is_kernel) continue;
    transform(m, k, 0, text);
    transform(m, k, 1, text);
  }
freem:
  wf_module_free(m);
done:
  free(text);
  return 0;
}
