/*
** jit.c -- native code for kernels: O3, object code, ORC LLJIT, the disk
** cache. The Lua functions over it (core.cpu_compile, core.llvm_ir,
** core.cpu_stats) are src/bindings/cpu.c.
**
** One wf_jit per Lua state, made on first use and kept in the registry
** (userdata "weft.cpujit", freed by __gc with the state). It owns the
** LLJIT (all kernel code), a target machine for the host (CPU name and
** features, O3, PIC, the large code model: see jit_tm), and counters.
**
** Compiling a kernel:
**   key = hash(codegen version, libweft's build id (util/buildid.h),
**              weft and LLVM versions, triple, cpu, features, options,
**              chunk/locations, IR text)                      128 bits
**   in memory (registry table key -> result)                  -> done
**   disk: $WEFT_CACHE_DIR/<key>.o (default ~/.cache/weft; "0", "off" or
**         empty disables), a checksummed entry "WEFTOBJ2" (diskcache.h);
**         a damaged entry is removed with a warning and compiled again
**   else: IR -> LLVM (emit.c) -> default<O3> -> object -> write to a
**         temporary file + rename (atomic for concurrent processes)
**   the object goes into the LLJIT; the entry symbol is "wfk_<key>".
**
** Code lifetime: each object is added under its own ORC resource tracker
** and counted by its references (wf_jit_kernel_get; the "weft.cpucode"
** handles that core.cpu_compile returns hold one each); when the last is
** dropped the tracker removes the code. The in-memory table is weak, and the JIT itself is
** freed only when its holder and all handles are gone.
*/
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/BitReader.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Support.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "cpu/cpu.h"
#include "weft.h" /* WEFT_VERSION, part of cache keys */
#include "util/buildid.h"
#include "util/diskcache.h"
#include "util/dump.h"
#include "util/hash.h"

#ifndef WEFT_LLVM_VERSION
#define WEFT_LLVM_VERSION "?"
#endif

#define CACHE_MAGIC "WEFTOBJ2" /* entry format tag, also part of the key */

struct wf_jit {
  LLVMOrcLLJITRef jit;
  LLVMTargetMachineRef tm;
  char *triple, *cpu, *features;
  int cache_on;
  char cachedir[1024];
  int64_t compiles, disk_hits, disk_writes, mem_hits;
  int serial;
  /* kernels in the LLJIT (key -> entry): compiling the same kernel again
  ** returns its code instead of defining the symbol twice. Each entry's
  ** object sits under its own resource tracker and is removed from the
  ** LLJIT when its last code handle is collected (code_unref). */
  struct wf_jit_code {
    char key[33];
    void *fn;
    LLVMOrcResourceTrackerRef rt;
    int refs; /* code handles (l_cpu_compile) and pins (wf_jit_compile) */
  } * *loaded;
  int nloaded, caploaded;
  int64_t code_freed;
  int refs; /* owners: the Lua state's holder and every live code handle */
};

/* ---------------------------------------------------------------------
** hashing (util/hash.h): source positions are part of a kernel's key
** --------------------------------------------------------------------- */
static void h_locs(wf_hash128 *h, const wf_block *bl) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    wf_hash_bytes(h, &in->loc, sizeof in->loc);
    for (int b = 0; b < in->nblocks; b++)
      h_locs(h, in->blocks[b]);
  }
}

/* ---------------------------------------------------------------------
** the JIT object
** --------------------------------------------------------------------- */
static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;
static int llvm_init_failed;

/* Also turns on the loop vectorizer's VPlan native path, which widens
** outer loops -- the thread loops emit.c marks with
** llvm.loop.vectorize.enable (see "SIMD across threads" there). It is a
** process-wide LLVM option, set once here; it acts only on outer loops
** that carry that hint, so other LLVM users in the process are unaffected.
** (Since LLVM 15 an option given twice is not an error, so another
** library setting it as well is harmless.) */
static void llvm_init(void) {
  if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter()) llvm_init_failed = 1;
  const char *argv[] = {"weft", "-enable-vplan-native-path"};
  LLVMParseCommandLineOptions(2, argv, NULL);
}

/* WEFT_SIMD=0/off: no vectorization across threads (part of the key). */
static int simd_on(void) {
  const char *v = getenv("WEFT_SIMD");
  return !(v && (!strcmp(v, "0") || !strcmp(v, "off")));
}

/* WEFT_POLL=0/off: kernels do not poll the interrupt flag at loop
** back-edges (weft_interrupt then stops launches between chunks only;
** bench/interrupt.lua measures the difference). Part of the key. */
static int poll_on(void) {
  const char *v = getenv("WEFT_POLL");
  return !(v && (!strcmp(v, "0") || !strcmp(v, "off")));
}

/* Diagnostics of an LLVM context: dropped. Failures come back as errors;
** what remains are remarks and the warning "loop not vectorized" for a
** thread loop the vectorizer declined, which is not the user's concern. */
static void diag_ignore(LLVMDiagnosticInfoRef di, void *ud) {
  (void)di, (void)ud;
}

static LLVMContextRef context_new(void) {
  LLVMContextRef C = LLVMContextCreate();
  LLVMContextSetDiagnosticHandler(C, diag_ignore, NULL);
  return C;
}

static void errmsg_take(LLVMErrorRef er, char *err, size_t es, const char *what) {
  char *m = LLVMGetErrorMessage(er);
  snprintf(err, es, "%s: %s", what, m ? m : "unknown error");
  LLVMDisposeErrorMessage(m);
}

static void jit_release(wf_jit *j) {
  for (int i = 0; i < j->nloaded; i++) {
    if (j->loaded[i]->rt) LLVMOrcReleaseResourceTracker(j->loaded[i]->rt);
    free(j->loaded[i]);
  }
  free(j->loaded);
  if (j->jit) LLVMOrcDisposeLLJIT(j->jit);
  if (j->tm) LLVMDisposeTargetMachine(j->tm);
  LLVMDisposeMessage(j->triple);
  LLVMDisposeMessage(j->cpu);
  LLVMDisposeMessage(j->features);
  memset(j, 0, sizeof *j);
}

static void cache_setup(wf_jit *j) {
  j->cache_on =
      wf_dcache_dir("", j->cachedir, sizeof j->cachedir) && wf_dcache_mkdirs(j->cachedir) == 0;
}

static int jit_init(wf_jit *j, char *err, size_t es) {
  pthread_once(&llvm_once, llvm_init);
  if (llvm_init_failed) {
    snprintf(err, es, "weft: LLVM has no native target for this host");
    return -1;
  }
  j->triple = LLVMGetDefaultTargetTriple();
  j->cpu = LLVMGetHostCPUName();
  j->features = LLVMGetHostCPUFeatures();
  LLVMOrcLLJITBuilderRef jb = LLVMOrcCreateLLJITBuilder();
  LLVMOrcJITTargetMachineBuilderRef jtmb;
  LLVMErrorRef er = LLVMOrcJITTargetMachineBuilderDetectHost(&jtmb);
  if (er) {
    LLVMOrcDisposeLLJITBuilder(jb);
    errmsg_take(er, err, es, "weft: LLJIT host detection");
    return -1;
  }
  LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(jb, jtmb);
  if ((er = LLVMOrcCreateLLJIT(&j->jit, jb))) {
    j->jit = NULL;
    errmsg_take(er, err, es, "weft: cannot create the LLJIT");
    return -1;
  }
  /* the helpers and libm, resolved explicitly */
  LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(j->jit);
  const wf_cpu_sym *syms = wf_cpu_symbols();
  size_t n = 0;
  while (syms[n].name)
    n++;
  LLVMOrcCSymbolMapPairs pairs = calloc(n, sizeof *pairs);
  if (!pairs) {
    snprintf(err, es, "weft: out of memory");
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    pairs[i].Name = LLVMOrcLLJITMangleAndIntern(j->jit, syms[i].name);
    pairs[i].Sym.Address = (LLVMOrcExecutorAddress)(uintptr_t)syms[i].addr;
    pairs[i].Sym.Flags.GenericFlags =
        LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
    pairs[i].Sym.Flags.TargetFlags = 0;
  }
  LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(pairs, n);
  free(pairs);
  if ((er = LLVMOrcJITDylibDefine(jd, mu))) {
    LLVMOrcDisposeMaterializationUnit(mu);
    errmsg_take(er, err, es, "weft: JIT symbols");
    return -1;
  }
  /* anything else the code generator may call (compiler-rt style helpers) */
  LLVMOrcDefinitionGeneratorRef gen;
  if (!(er = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
            &gen, LLVMOrcLLJITGetGlobalPrefix(j->jit), NULL, NULL)))
    LLVMOrcJITDylibAddGenerator(jd, gen);
  else
    LLVMConsumeError(er);
  cache_setup(j);
  return 0;
}

wf_jit *wf_jit_new(char *err, size_t es) {
  wf_jit *j = calloc(1, sizeof *j);
  if (!j) {
    snprintf(err, es, "weft: out of memory");
    return NULL;
  }
  if (jit_init(j, err, es) != 0) {
    jit_release(j);
    free(j);
    return NULL;
  }
  j->refs = 1;
  return j;
}

void wf_jit_free(wf_jit *j) {
  if (!j) return;
  jit_release(j);
  free(j);
}

/* Drops one owner of j; the last frees it. Code references own the JIT
** too (wf_jit_kernel), since the Lua state's holder may be collected
** before them at lua_close. */
void wf_jit_release(wf_jit *j) {
  if (j && --j->refs == 0) wf_jit_free(j);
}

/* ---------------------------------------------------------------------
** compiling
** --------------------------------------------------------------------- */
static int dump_llvm(void) {
  return wf_dump_wanted("llvm");
}

/* WEFT_DUMP=time: compile phases on stderr. */
static int dump_time(void) {
  return wf_dump_wanted("time");
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* compile cost, not machine load */
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The target machine for code generation, made at the first compile (a
** process that only loads cached objects never needs one). */
static int jit_tm(wf_jit *j, char *err, size_t es) {
  if (j->tm) return 0;
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(j->triple, &target, &msg)) {
    snprintf(err, es, "weft: LLVM target %s: %s", j->triple, msg ? msg : "");
    LLVMDisposeMessage(msg);
    return -1;
  }
  /* The large code model: the JIT's memory manager maps an object's code
  ** and its read-only data separately, and they may land more than 2 GB
  ** apart (a large reservation between them, such as a CUDA driver's or
  ** the emulator's device heap), where the small model's 32-bit
  ** PC-relative constant loads would silently wrap to another address. */
  j->tm = LLVMCreateTargetMachine(target, j->triple, j->cpu, j->features,
                                  LLVMCodeGenLevelAggressive, LLVMRelocPIC, LLVMCodeModelLarge);
  if (!j->tm) {
    snprintf(err, es, "weft: cannot create an LLVM target machine for %s", j->triple);
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------------
** uniform gathers. The VPlan native path (emit.c, "SIMD across threads")
** widens every instruction of the outer loop, the induction of an inner
** loop too: a load of pos[j] becomes a gather from 8 equal addresses.
** After O3, each gather with an all-true mask whose address vector is
** provably uniform (all lanes equal) becomes a scalar load of lane 0 and a
** broadcast. Uniformity is the greatest fixpoint over the vector
** instructions: a splat shuffle or splat constant is uniform, and so is a
** phi, arithmetic, comparison, cast, select or GEP whose vector operands
** are all uniform.
** --------------------------------------------------------------------- */
typedef struct uvec {
  LLVMValueRef *v;  /* the vector instructions of the function */
  int8_t *u;        /* uniform? */
  LLVMValueRef *sc; /* scalar version of a uniform one, once built */
  int n, cap;
  LLVMBuilderRef B;
  LLVMTypeRef i32;
} uvec;

static int uvec_find(const uvec *s, LLVMValueRef v) {
  for (int i = 0; i < s->n; i++)
    if (s->v[i] == v) return i;
  return -1;
}

static int is_vector(LLVMValueRef v) {
  return LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind;
}

/* A constant vector with all lanes the same (uniqued constants compare
** by pointer). */
static int const_splat(LLVMValueRef c) {
  if (LLVMIsAConstantAggregateZero(c)) return 1;
  unsigned n = LLVMGetVectorSize(LLVMTypeOf(c));
  if (!LLVMIsAConstantDataVector(c) && !LLVMIsAConstantVector(c)) return 0;
  LLVMValueRef e0 = LLVMGetAggregateElement(c, 0);
  for (unsigned i = 1; i < n; i++)
    if (LLVMGetAggregateElement(c, i) != e0) return 0;
  return e0 && !LLVMIsUndef(e0);
}

/* Is operand v uniform under the current assumptions? */
static int operand_uniform(const uvec *s, LLVMValueRef v) {
  if (!is_vector(v)) return 1; /* scalars are broadcast */
  if (LLVMIsAInstruction(v)) {
    int i = uvec_find(s, v);
    return i >= 0 && s->u[i];
  }
  return LLVMIsAConstant(v) && const_splat(v);
}

static int inst_uniform(const uvec *s, LLVMValueRef I) {
  LLVMOpcode op = LLVMGetInstructionOpcode(I);
  if (op == LLVMShuffleVector) {
    unsigned n = LLVMGetNumMaskElements(I);
    int m0 = LLVMGetMaskValue(I, 0);
    if (m0 == LLVMGetUndefMaskElem()) return 0;
    for (unsigned i = 1; i < n; i++)
      if (LLVMGetMaskValue(I, i) != m0) return 0;
    return 1;
  }
  int ok = op == LLVMPHI || op == LLVMSelect || op == LLVMGetElementPtr || op == LLVMICmp ||
           op == LLVMFCmp || op == LLVMFNeg || (op >= LLVMAdd && op <= LLVMXor) ||
           (op >= LLVMTrunc && op <= LLVMAddrSpaceCast);
  int n = LLVMGetNumOperands(I);
  for (int i = 0; ok && i < n; i++)
    ok = operand_uniform(s, LLVMGetOperand(I, i));
  return ok;
}

static int uvec_push(uvec *s, LLVMValueRef v) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    LLVMValueRef *nv = realloc(s->v, sizeof *nv * (size_t)cap);
    if (!nv) return -1;
    s->v = nv;
    int8_t *nu = realloc(s->u, (size_t)cap);
    if (!nu) return -1;
    s->u = nu;
    LLVMValueRef *ns = realloc(s->sc, sizeof *ns * (size_t)cap);
    if (!ns) return -1;
    s->sc = ns;
    s->cap = cap;
  }
  s->v[s->n] = v;
  s->sc[s->n] = NULL;
  s->u[s->n++] = 1;
  return 0;
}

/* Is v a call of llvm.masked.gather.* with an all-true constant mask? */
static int plain_gather(LLVMValueRef v) {
  if (!LLVMIsACallInst(v) || LLVMGetNumArgOperands(v) != 4) return 0;
  LLVMValueRef f = LLVMGetCalledValue(v);
  size_t len = 0;
  const char *nm = f && LLVMIsAFunction(f) ? LLVMGetValueName2(f, &len) : NULL;
  if (!nm || strncmp(nm, "llvm.masked.gather.", 19)) return 0;
  LLVMValueRef mask = LLVMGetOperand(v, 2);
  if (!LLVMIsAConstant(mask)) return 0;
  if (LLVMIsAConstantVector(mask) || LLVMIsAConstantDataVector(mask)) {
    unsigned n = LLVMGetVectorSize(LLVMTypeOf(mask));
    for (unsigned i = 0; i < n; i++) {
      LLVMValueRef e = LLVMGetAggregateElement(mask, i);
      if (!LLVMIsAConstantInt(e) || LLVMConstIntGetZExtValue(e) != 1) return 0;
    }
    return 1;
  }
  return 0;
}

/* The scalar value of uniform (or scalar) v: built next to the vector
** instruction it replaces (before it, so it dominates the same uses),
** memoized; phis first, so cycles close. */
static LLVMValueRef scal(uvec *s, LLVMValueRef v) {
  if (!is_vector(v)) return v;
  LLVMTypeRef et = LLVMGetElementType(LLVMTypeOf(v));
  if (!LLVMIsAInstruction(v)) /* a splat constant */
    return LLVMIsAConstantAggregateZero(v) ? LLVMConstNull(et) : LLVMGetAggregateElement(v, 0);
  int k = uvec_find(s, v);
  if (s->sc[k]) return s->sc[k];
  LLVMOpcode op = LLVMGetInstructionOpcode(v);
  LLVMValueRef r = NULL, ops[8];
  int n = LLVMGetNumOperands(v);
  if (op == LLVMPHI) {
    LLVMPositionBuilderBefore(s->B, v);
    r = s->sc[k] = LLVMBuildPhi(s->B, et, "");
    unsigned ni = LLVMCountIncoming(v);
    for (unsigned i = 0; i < ni; i++) {
      LLVMValueRef in = scal(s, LLVMGetIncomingValue(v, i));
      LLVMBasicBlockRef bb = LLVMGetIncomingBlock(v, i);
      LLVMAddIncoming(r, &in, &bb, 1);
    }
    return r;
  }
  if (op == LLVMShuffleVector) {
    int m = LLVMGetMaskValue(v, 0);
    LLVMValueRef src = LLVMGetOperand(v, 0);
    int n0 = (int)LLVMGetVectorSize(LLVMTypeOf(src));
    if (m >= n0) src = LLVMGetOperand(v, 1), m -= n0;
    LLVMValueRef idx = LLVMIsAInsertElementInst(src) ? LLVMGetOperand(src, 2) : NULL;
    if (idx && LLVMIsAConstantInt(idx) && LLVMConstIntGetZExtValue(idx) == (unsigned long long)m) {
      r = LLVMGetOperand(src, 1);
    } else if (operand_uniform(s, src)) {
      r = scal(s, src);
    } else {
      LLVMPositionBuilderBefore(s->B, v);
      r = LLVMBuildExtractElement(s->B, src, LLVMConstInt(s->i32, (unsigned long long)m, 0), "");
    }
    return s->sc[k] = r;
  }
  if (n > 8) return NULL;
  for (int i = 0; i < n; i++)
    if (!(ops[i] = scal(s, LLVMGetOperand(v, i)))) return NULL;
  LLVMPositionBuilderBefore(s->B, v);
  if (op == LLVMGetElementPtr) {
    r = LLVMBuildGEP2(s->B, LLVMGetGEPSourceElementType(v), ops[0], ops + 1, (unsigned)n - 1, "");
    if (LLVMIsAGetElementPtrInst(r)) LLVMSetIsInBounds(r, LLVMIsInBounds(v));
  } else if (op == LLVMICmp) {
    r = LLVMBuildICmp(s->B, LLVMGetICmpPredicate(v), ops[0], ops[1], "");
  } else if (op == LLVMFCmp) {
    r = LLVMBuildFCmp(s->B, LLVMGetFCmpPredicate(v), ops[0], ops[1], "");
  } else if (op == LLVMSelect) {
    r = LLVMBuildSelect(s->B, ops[0], ops[1], ops[2], "");
  } else if (op == LLVMFNeg) {
    r = LLVMBuildFNeg(s->B, ops[0], "");
  } else if (op >= LLVMTrunc && op <= LLVMAddrSpaceCast) {
    r = LLVMBuildCast(s->B, op, ops[0], et, "");
  } else if (op >= LLVMAdd && op <= LLVMXor) {
    r = LLVMBuildBinOp(s->B, op, ops[0], ops[1], "");
  }
  return s->sc[k] = r;
}

/* Rewrites the uniform gathers of one function; returns how many. */
static int fix_gathers_fn(LLVMContextRef C, LLVMValueRef F) {
  uvec s = {0};
  int ngather = 0, done = 0;
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(F); bb; bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef I = LLVMGetFirstInstruction(bb); I; I = LLVMGetNextInstruction(I)) {
      if (plain_gather(I)) ngather++;
      if (is_vector(I) && uvec_push(&s, I) != 0) goto out;
    }
  if (ngather == 0) goto out;
  for (int changed = 1; changed;) {
    changed = 0;
    for (int i = 0; i < s.n; i++)
      if (s.u[i] && !inst_uniform(&s, s.v[i])) s.u[i] = 0, changed = 1;
  }
  s.B = LLVMCreateBuilderInContext(C);
  s.i32 = LLVMInt32TypeInContext(C);
  unsigned ks = LLVMGetMDKindIDInContext(C, "alias.scope", 11),
           kn = LLVMGetMDKindIDInContext(C, "noalias", 7);
  int n0 = s.n; /* scalar clones are not vectors: s.v does not grow */
  for (int i = 0; i < n0; i++) {
    LLVMValueRef g = s.v[i];
    if (!g || !plain_gather(g) || !operand_uniform(&s, LLVMGetOperand(g, 0))) continue;
    LLVMValueRef p = scal(&s, LLVMGetOperand(g, 0));
    if (!p) continue;
    LLVMTypeRef vt = LLVMTypeOf(g);
    LLVMPositionBuilderBefore(s.B, g);
    LLVMValueRef l = LLVMBuildLoad2(s.B, LLVMGetElementType(vt), p, "uniform");
    LLVMSetAlignment(l, (unsigned)LLVMConstIntGetZExtValue(LLVMGetOperand(g, 1)));
    if (LLVMGetMetadata(g, ks)) LLVMSetMetadata(l, ks, LLVMGetMetadata(g, ks));
    if (LLVMGetMetadata(g, kn)) LLVMSetMetadata(l, kn, LLVMGetMetadata(g, kn));
    LLVMValueRef one =
        LLVMBuildInsertElement(s.B, LLVMGetPoison(vt), l, LLVMConstInt(s.i32, 0, 0), "");
    LLVMValueRef splat =
        LLVMBuildShuffleVector(s.B, one, LLVMGetPoison(vt),
                               LLVMConstNull(LLVMVectorType(s.i32, LLVMGetVectorSize(vt))), "");
    LLVMReplaceAllUsesWith(g, splat);
    LLVMInstructionEraseFromParent(g);
    s.v[i] = NULL;
    done++;
  }
  /* a lane read out of a uniform vector (the inner loop's exit test) */
  if (done)
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(F); bb; bb = LLVMGetNextBasicBlock(bb))
      for (LLVMValueRef I = LLVMGetFirstInstruction(bb); I; I = LLVMGetNextInstruction(I)) {
        if (!LLVMIsAExtractElementInst(I) || !operand_uniform(&s, LLVMGetOperand(I, 0))) continue;
        LLVMValueRef x = scal(&s, LLVMGetOperand(I, 0));
        if (x) LLVMReplaceAllUsesWith(I, x);
      }
  LLVMDisposeBuilder(s.B);
out:
  free(s.v);
  free(s.u);
  free(s.sc);
  return done;
}

/* ---------------------------------------------------------------------
** consecutive gathers and scatters. With the VPlan native path on (it is a
** process-wide LLVM option), LLVM 16 widens even the innermost thread loop
** of a kernel like saxpy with gathers and scatters, although its lanes read
** and write consecutive elements: measured 4.4x slower than gcc -O3 on
** saxpy. After O3, a gather or scatter with an all-true mask whose address
** vector is base + (a + lane) * size (lane = 0..N-1, size = the element's
** bytes) becomes one wide load or store at lane 0's address. The lanes are
** recognized structurally: the vectorizer's induction phi (start splat +
** <0, 1, ..., N-1>, step a splat), plus splats, times the element size
** (shl or mul by a splat), as a GEP index over bytes or over elements.
** --------------------------------------------------------------------- */

/* c when v is a constant vector whose lanes are c, c + step, c + 2 step... */
static int const_lanes(LLVMValueRef v, long long step, long long *c) {
  if (!LLVMIsAConstant(v) || !is_vector(v)) return 0;
  unsigned n = LLVMGetVectorSize(LLVMTypeOf(v));
  if (LLVMIsAConstantAggregateZero(v)) {
    *c = 0;
    return step == 0;
  }
  if (!LLVMIsAConstantVector(v) && !LLVMIsAConstantDataVector(v)) return 0;
  for (unsigned i = 0; i < n; i++) {
    LLVMValueRef e = LLVMGetAggregateElement(v, i);
    if (!e || !LLVMIsAConstantInt(e)) return 0;
    long long x = LLVMConstIntGetSExtValue(e);
    if (i == 0)
      *c = x;
    else if (x != *c + (long long)i * step)
      return 0;
  }
  return 1;
}

/* All lanes of v are equal: a splat constant or a shuffle of lane 0. */
static int lanes_equal(LLVMValueRef v) {
  long long c;
  if (const_lanes(v, 0, &c)) return 1;
  if (!LLVMIsAShuffleVectorInst(v)) return 0;
  unsigned n = LLVMGetNumMaskElements(v);
  for (unsigned i = 0; i < n; i++)
    if (LLVMGetMaskValue(v, i) != 0) return 0;
  return 1;
}

static int is_binop(LLVMValueRef v, LLVMOpcode op) {
  return LLVMIsAInstruction(v) && LLVMGetInstructionOpcode(v) == op;
}

/* The lanes of v are a + lane for some a (depth bounds the walk). */
static int lanes_step1(LLVMValueRef v, int depth) {
  long long c;
  if (depth > 8) return 0;
  if (const_lanes(v, 1, &c)) return 1;
  if (is_binop(v, LLVMAdd)) { /* step1 + splat, either order */
    LLVMValueRef a = LLVMGetOperand(v, 0), b = LLVMGetOperand(v, 1);
    return (lanes_step1(a, depth + 1) && lanes_equal(b)) ||
           (lanes_step1(b, depth + 1) && lanes_equal(a));
  }
  if (LLVMIsAPHINode(v) && LLVMCountIncoming(v) == 2) {
    /* the induction: one incoming starts it, the other adds a splat to v */
    int start = 0, step = 0;
    for (unsigned i = 0; i < 2; i++) {
      LLVMValueRef x = LLVMGetIncomingValue(v, i);
      if (is_binop(x, LLVMAdd) &&
          ((LLVMGetOperand(x, 0) == v && lanes_equal(LLVMGetOperand(x, 1))) ||
           (LLVMGetOperand(x, 1) == v && lanes_equal(LLVMGetOperand(x, 0)))))
        step++;
      else if (lanes_step1(x, depth + 1))
        start++;
    }
    return start == 1 && step == 1;
  }
  return 0;
}

/* The lanes of v are a + lane * size. */
static int lanes_bytes(LLVMValueRef v, long long size, int depth) {
  long long c;
  if (depth > 8) return 0;
  if (size == 1 && lanes_step1(v, depth + 1)) return 1;
  if (is_binop(v, LLVMShl) && const_lanes(LLVMGetOperand(v, 1), 0, &c) && c >= 0 && c < 16 &&
      (1LL << c) == size)
    return lanes_step1(LLVMGetOperand(v, 0), depth + 1);
  if (is_binop(v, LLVMMul)) {
    LLVMValueRef a = LLVMGetOperand(v, 0), b = LLVMGetOperand(v, 1);
    if (const_lanes(b, 0, &c) && c == size) return lanes_step1(a, depth + 1);
    if (const_lanes(a, 0, &c) && c == size) return lanes_step1(b, depth + 1);
    return 0;
  }
  if (is_binop(v, LLVMAdd)) {
    LLVMValueRef a = LLVMGetOperand(v, 0), b = LLVMGetOperand(v, 1);
    return (lanes_bytes(a, size, depth + 1) && lanes_equal(b)) ||
           (lanes_bytes(b, size, depth + 1) && lanes_equal(a));
  }
  return 0;
}

/* Bytes of a scalar element type weft's kernels load (0: not handled). */
static long long elem_bytes(LLVMTypeRef t) {
  switch (LLVMGetTypeKind(t)) {
  case LLVMHalfTypeKind: return 2;
  case LLVMFloatTypeKind: return 4;
  case LLVMDoubleTypeKind: return 8;
  case LLVMIntegerTypeKind: {
    unsigned w = LLVMGetIntTypeWidth(t);
    return w % 8 == 0 && w <= 64 ? w / 8 : 0;
  }
  default: return 0;
  }
}

/* Is ptrs (a vector of pointers) base + (a + lane) * bytes(elem)? */
static int consecutive_ptrs(LLVMValueRef ptrs, LLVMTypeRef elem) {
  long long size = elem_bytes(elem);
  if (!size || !LLVMIsAGetElementPtrInst(ptrs) || LLVMGetNumOperands(ptrs) != 2) return 0;
  if (is_vector(LLVMGetOperand(ptrs, 0))) return 0; /* one scalar base */
  LLVMValueRef idx = LLVMGetOperand(ptrs, 1);
  LLVMTypeRef src = LLVMGetGEPSourceElementType(ptrs);
  if (LLVMGetTypeKind(src) == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(src) == 8)
    return lanes_bytes(idx, size, 0);
  return src == elem && lanes_step1(idx, 0);
}

/* Is v a call of the intrinsic named prefix* whose mask operand (mask) is
** a constant all-true vector? */
static int masked_call(LLVMValueRef v, const char *prefix, unsigned nargs, unsigned mask) {
  if (!LLVMIsACallInst(v) || LLVMGetNumArgOperands(v) != nargs) return 0;
  LLVMValueRef f = LLVMGetCalledValue(v);
  size_t len = 0;
  const char *nm = f && LLVMIsAFunction(f) ? LLVMGetValueName2(f, &len) : NULL;
  if (!nm || strncmp(nm, prefix, strlen(prefix))) return 0;
  LLVMValueRef m = LLVMGetOperand(v, mask);
  if (!LLVMIsAConstantVector(m) && !LLVMIsAConstantDataVector(m)) return 0;
  unsigned n = LLVMGetVectorSize(LLVMTypeOf(m));
  for (unsigned i = 0; i < n; i++) {
    LLVMValueRef e = LLVMGetAggregateElement(m, i);
    if (!e || !LLVMIsAConstantInt(e) || LLVMConstIntGetZExtValue(e) != 1) return 0;
  }
  return 1;
}

/* Rewrites the consecutive gathers and scatters of F; returns how many. */
static int fix_consecutive_fn(LLVMContextRef C, LLVMValueRef F) {
  int done = 0;
  LLVMBuilderRef B = NULL;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(C);
  unsigned ks = LLVMGetMDKindIDInContext(C, "alias.scope", 11),
           kn = LLVMGetMDKindIDInContext(C, "noalias", 7);
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(F); bb; bb = LLVMGetNextBasicBlock(bb)) {
    LLVMValueRef I = LLVMGetFirstInstruction(bb);
    while (I) {
      LLVMValueRef next = LLVMGetNextInstruction(I);
      /* gather(ptrs, align, mask, passthru); scatter(value, ptrs, align, mask) */
      int g = masked_call(I, "llvm.masked.gather.", 4, 2);
      int sc = !g && masked_call(I, "llvm.masked.scatter.", 4, 3);
      if (g || sc) {
        LLVMValueRef ptrs = LLVMGetOperand(I, g ? 0 : 1);
        LLVMTypeRef vt = g ? LLVMTypeOf(I) : LLVMTypeOf(LLVMGetOperand(I, 0));
        if (consecutive_ptrs(ptrs, LLVMGetElementType(vt))) {
          if (!B) B = LLVMCreateBuilderInContext(C);
          LLVMPositionBuilderBefore(B, I);
          LLVMValueRef p0 = LLVMBuildExtractElement(B, ptrs, LLVMConstInt(i32, 0, 0), "");
          unsigned align = (unsigned)LLVMConstIntGetZExtValue(LLVMGetOperand(I, g ? 1 : 2));
          LLVMValueRef m = g ? LLVMBuildLoad2(B, vt, p0, "consecutive")
                             : LLVMBuildStore(B, LLVMGetOperand(I, 0), p0);
          LLVMSetAlignment(m, align);
          if (LLVMGetMetadata(I, ks)) LLVMSetMetadata(m, ks, LLVMGetMetadata(I, ks));
          if (LLVMGetMetadata(I, kn)) LLVMSetMetadata(m, kn, LLVMGetMetadata(I, kn));
          if (g) LLVMReplaceAllUsesWith(I, m);
          LLVMInstructionEraseFromParent(I);
          done++;
        }
      }
      I = next;
    }
  }
  if (B) LLVMDisposeBuilder(B);
  return done;
}

/* All functions of M; when a gather changed, a short cleanup pipeline
** folds the now-dead vector address arithmetic. */
static LLVMErrorRef fix_gathers(LLVMModuleRef M, LLVMTargetMachineRef tm) {
  int n = 0;
  LLVMContextRef C = LLVMGetModuleContext(M);
  for (LLVMValueRef F = LLVMGetFirstFunction(M); F; F = LLVMGetNextFunction(F))
    if (LLVMCountBasicBlocks(F) > 0) n += fix_gathers_fn(C, F) + fix_consecutive_fn(C, F);
  if (n == 0) return NULL;
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMErrorRef er = LLVMRunPasses(M, "function(instcombine,early-cse,adce,simplifycfg)", tm, po);
  LLVMDisposePassBuilderOptions(po);
  return er;
}

#ifdef WEFT_GEOM_BC
#include "geom_bc.h" /* wf_geom_bc: src/geom/inline_bc.c as bitcode */

/* Does M call a builtin that the bitcode defines (volume, hash grid)? */
static int calls_geom_bc(LLVMModuleRef M) {
  for (LLVMValueRef F = LLVMGetFirstFunction(M); F; F = LLVMGetNextFunction(F)) {
    size_t n;
    const char *name = LLVMGetValueName2(F, &n);
    if (LLVMIsDeclaration(F) &&
        (!strncmp(name, "wf_nat_volume_", 14) || !strncmp(name, "wf_nat_hash_grid_", 17) ||
         !strncmp(name, "wf_nat_mesh_", 12) || !strncmp(name, "wf_nat_bvh_", 11)))
      return 1;
  }
  return 0;
}

/* Links the volume and hash grid builtins into M as internal functions,
** so O3 inlines them into the kernel (and drops the rest). A bitcode that
** does not load leaves M calling libweft's copies. */
static void link_geom_bc(LLVMModuleRef M) {
  if (!calls_geom_bc(M)) return;
  LLVMContextRef C = LLVMGetModuleContext(M);
  LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRange((const char *)wf_geom_bc,
                                                                  sizeof wf_geom_bc, "geom.bc", 0);
  LLVMModuleRef B = NULL;
  int bad = LLVMParseBitcodeInContext2(C, buf, &B);
  LLVMDisposeMemoryBuffer(buf);
  if (bad) return;
  LLVMSetTarget(B, LLVMGetTarget(M));
  LLVMSetDataLayout(B, LLVMGetDataLayoutStr(M));
  for (LLVMValueRef F = LLVMGetFirstFunction(B); F; F = LLVMGetNextFunction(F)) {
    if (LLVMIsDeclaration(F)) continue;
    /* the kernel's CPU and features apply once inlined */
    LLVMRemoveStringAttributeAtIndex(F, LLVMAttributeFunctionIndex, "target-cpu", 10);
    LLVMRemoveStringAttributeAtIndex(F, LLVMAttributeFunctionIndex, "target-features", 15);
    LLVMRemoveStringAttributeAtIndex(F, LLVMAttributeFunctionIndex, "tune-cpu", 8);
  }
  if (LLVMLinkModules2(M, B)) return; /* B is gone either way */
  const unsigned always = LLVMGetEnumAttributeKindForName("alwaysinline", 12),
                 noinline = LLVMGetEnumAttributeKindForName("noinline", 8);
  for (LLVMValueRef F = LLVMGetFirstFunction(M); F; F = LLVMGetNextFunction(F)) {
    size_t n;
    const char *name = LLVMGetValueName2(F, &n);
    if (LLVMIsDeclaration(F) || (strncmp(name, "wf_nat_", 7) && strncmp(name, "wf_vol_", 7) &&
                                 strncmp(name, "wf_hgrid_", 9)))
      continue;
    LLVMSetLinkage(F, LLVMInternalLinkage);
    /* the builtins themselves always: a kernel's body may be emitted
    ** twice (contiguous and strided arrays), which would keep them calls */
    if (!strncmp(name, "wf_nat_", 7)) {
      LLVMRemoveEnumAttributeAtIndex(F, LLVMAttributeFunctionIndex, noinline);
      LLVMAddAttributeAtIndex(F, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(C, always, 0));
    }
  }
}
#endif

/* IR -> optimized LLVM module (in C), or NULL with err. */
static LLVMModuleRef build_module(wf_jit *j, LLVMContextRef C, wf_func *fn, const wf_cpu_opts *o,
                                  int optimize, char *err, size_t es) {
  if (jit_tm(j, err, es) != 0) return NULL;
  LLVMModuleRef M = wf_llvm_emit(C, fn, o, err, es);
  if (!M) return NULL;
  LLVMSetTarget(M, j->triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(j->tm);
  LLVMSetModuleDataLayout(M, td);
  LLVMDisposeTargetData(td);
#ifdef WEFT_GEOM_BC
  if (optimize) link_geom_bc(M);
#endif
  if (optimize) {
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(po, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(po, 1);
    LLVMPassBuilderOptionsSetLoopUnrolling(po, 1);
    LLVMPassBuilderOptionsSetLoopInterleaving(po, 1);
    LLVMErrorRef er = LLVMRunPasses(M, "default<O3>", j->tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (!er && o->simd) er = fix_gathers(M, j->tm);
    if (er) {
      errmsg_take(er, err, es, "weft: LLVM optimization failed");
      LLVMDisposeModule(M);
      return NULL;
    }
  }
  return M;
}

/* The 32 hex digits naming fn's object in the disk cache, into key. */
static void kernel_key(wf_jit *j, wf_func *fn, const wf_cpu_opts *o, const char *irtext,
                       char key[33]) {
  wf_hash128 h;
  wf_hash_init(&h);
  char hdr[160];
  const char *pv = getenv("WEFT_PRIVATIZE"); /* emit.c: "0"/"off" keeps every atomic */
  snprintf(hdr, sizeof hdr,
           "weft-cpu %d weft %s llvm %s debug %d checks %d ndim %d priv %s simd %d poll %d",
           WF_CPU_CODEGEN_VERSION, WEFT_VERSION, WEFT_LLVM_VERSION, o->debug, o->checks, o->ndim,
           pv ? pv : "", simd_on(), poll_on());
  wf_hash_str(&h, hdr);
  /* the library's own code: a rebuild that changes the emitter misses */
  char bid[320];
  wf_build_id(bid, sizeof bid);
  wf_hash_str(&h, bid);
  wf_hash_str(&h, CACHE_MAGIC);
  wf_hash_str(&h, j->triple);
  wf_hash_str(&h, j->cpu);
  wf_hash_str(&h, j->features);
  wf_hash_str(&h, fn->name);
  wf_hash_str(&h, fn->chunk);
  for (int i = 0; i < o->nnames; i++)
    wf_hash_str(&h, o->names[i]);
  if (fn->body) h_locs(&h, fn->body);
  wf_hash_str(&h, irtext);
  wf_hash_hex(&h, key);
}

/* Reads <dir>/<key>.o into a fresh buffer (the object only), or NULL. A
** damaged entry (checksum, size, not a regular file...) is removed with a
** warning, so that the caller compiles and writes it again. */
static LLVMMemoryBufferRef cache_read(wf_jit *j, const char *key) {
  char path[1200], why[160];
  snprintf(path, sizeof path, "%s/%s.o", j->cachedir, key);
  char *data;
  size_t size;
  int rc = wf_dcache_read(path, CACHE_MAGIC, key, &data, &size, why, sizeof why);
  if (rc < 0) wf_dcache_warn(path, why);
  if (rc != 0) return NULL;
  LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(data, size, key);
  free(data);
  return buf;
}

/* Writes the object under its key (diskcache.c: temporary file + rename). */
static void cache_write(wf_jit *j, const char *key, const char *data, size_t size) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s.o", j->cachedir, key);
  if (wf_dcache_write(j->cachedir, path, CACHE_MAGIC, key, data, size) == 0) j->disk_writes++;
}

/* Removes an object's code from the JIT (and releases its tracker). */
static void tracker_drop(LLVMOrcResourceTrackerRef rt) {
  LLVMErrorRef er = LLVMOrcResourceTrackerRemove(rt);
  if (er) LLVMConsumeError(er);
  LLVMOrcReleaseResourceTracker(rt);
}

/* Adds an object to the JIT under a new resource tracker (*rt; taking the
** buffer) and finds sym in it. On failure the object is removed again. */
static void *add_and_lookup(wf_jit *j, LLVMMemoryBufferRef obj, const char *sym,
                            LLVMOrcResourceTrackerRef *rt, char *err, size_t es) {
  LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(j->jit);
  *rt = LLVMOrcJITDylibCreateResourceTracker(jd);
  LLVMErrorRef er = LLVMOrcLLJITAddObjectFileWithRT(j->jit, *rt, obj);
  if (er) {
    errmsg_take(er, err, es, "weft: cannot load kernel code");
    tracker_drop(*rt);
    *rt = NULL;
    return NULL;
  }
  LLVMOrcExecutorAddress addr = 0;
  if ((er = LLVMOrcLLJITLookup(j->jit, &addr, sym))) {
    errmsg_take(er, err, es, "weft: cannot link kernel code");
    tracker_drop(*rt);
    *rt = NULL;
    return NULL;
  }
  return (void *)(uintptr_t)addr;
}

/* The entry of a kernel this JIT already holds, or NULL. */
static struct wf_jit_code *loaded_find(const wf_jit *j, const char *key) {
  for (int i = 0; i < j->nloaded; i++)
    if (!strcmp(j->loaded[i]->key, key)) return j->loaded[i];
  return NULL;
}

/* Remembers a loaded kernel, or NULL when out of memory (its code is then
** removed again, so nothing leaks and the caller reports the failure). */
static struct wf_jit_code *loaded_add(wf_jit *j, const char *key, void *fn,
                                      LLVMOrcResourceTrackerRef rt) {
  struct wf_jit_code *e = NULL;
  if (j->nloaded == j->caploaded) {
    int cap = j->caploaded ? 2 * j->caploaded : 16;
    struct wf_jit_code **n = realloc(j->loaded, sizeof *n * (size_t)cap);
    if (n) {
      j->loaded = n;
      j->caploaded = cap;
    }
  }
  if (j->nloaded < j->caploaded) e = calloc(1, sizeof *e);
  if (!e) {
    tracker_drop(rt);
    return NULL;
  }
  snprintf(e->key, sizeof e->key, "%s", key);
  e->fn = fn;
  e->rt = rt;
  j->loaded[j->nloaded++] = e;
  return e;
}

/* Drops one reference to e; the last removes its code from the JIT. */
static void loaded_unref(wf_jit *j, struct wf_jit_code *e) {
  if (--e->refs > 0) return;
  for (int i = 0; i < j->nloaded; i++)
    if (j->loaded[i] == e) {
      j->loaded[i] = j->loaded[--j->nloaded];
      break;
    }
  tracker_drop(e->rt);
  free(e);
  j->code_freed++;
}

typedef struct cresult {
  void *fn;
  struct wf_jit_code *e;
  int from_disk;
  char key[33];
} cresult;

/* Compiles or finds fn; on success out->e carries one reference. */
static int compile_kernel(wf_jit *j, wf_func *fn, wf_cpu_opts *o, const char *irtext, cresult *out,
                          char *err, size_t es) {
  kernel_key(j, fn, o, irtext, out->key);
  char sym[64];
  snprintf(sym, sizeof sym, "wfk_%s", out->key);
  o->symbol = sym;
  o->cpu = j->cpu;
  o->features = j->features;
  o->simd = simd_on();
  o->poll = poll_on();
  int dump = dump_llvm();
  if ((out->e = loaded_find(j, out->key)) != NULL) {
    out->e->refs++; /* the caller's, taken before any Lua allocation can
                       run a finalizer that drops the entry's last one */
    out->fn = out->e->fn;
    j->mem_hits++;
    return 0;
  }
  LLVMOrcResourceTrackerRef rt = NULL;
  if (j->cache_on && !dump) {
    LLVMMemoryBufferRef obj = cache_read(j, out->key);
    if (obj) {
      char e2[256];
      out->fn = add_and_lookup(j, obj, sym, &rt, e2, sizeof e2);
      if (out->fn) {
        out->from_disk = 1;
        j->disk_hits++;
        if (!(out->e = loaded_add(j, out->key, out->fn, rt))) goto oom;
        out->e->refs++;
        return 0;
      }
      /* a damaged file: drop it and compile under a new symbol */
      char path[1200];
      snprintf(path, sizeof path, "%s/%s.o", j->cachedir, out->key);
      remove(path);
      snprintf(sym, sizeof sym, "wfk_%s_%d", out->key, ++j->serial);
    }
  }
  double t0 = now_ms();
  LLVMContextRef C = context_new();
  LLVMModuleRef M = build_module(j, C, fn, o, 1, err, es);
  if (!M) {
    LLVMContextDispose(C);
    return -1;
  }
  double t1 = now_ms();
  if (dump) {
    char *s = LLVMPrintModuleToString(M);
    fprintf(stderr, "; weft: LLVM IR of kernel '%s' (O3)\n%s\n", fn->name ? fn->name : "?", s);
    LLVMDisposeMessage(s);
  }
  char *msg = NULL;
  LLVMMemoryBufferRef obj = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(j->tm, M, LLVMObjectFile, &msg, &obj)) {
    snprintf(err, es, "weft: LLVM code generation failed: %s", msg ? msg : "");
    LLVMDisposeMessage(msg);
    LLVMDisposeModule(M);
    LLVMContextDispose(C);
    return -1;
  }
  LLVMDisposeModule(M);
  LLVMContextDispose(C);
  j->compiles++;
  if (dump_time())
    fprintf(stderr,
            "weft: kernel '%s': LLVM IR + O3 %.2f ms, code generation %.2f ms (thread CPU time)\n",
            fn->name ? fn->name : "?", t1 - t0, now_ms() - t1);
  if (j->cache_on && strchr(sym + 4, '_') == NULL)
    cache_write(j, out->key, LLVMGetBufferStart(obj), LLVMGetBufferSize(obj));
  out->fn = add_and_lookup(j, obj, sym, &rt, err, es);
  if (!out->fn) return -1;
  if ((out->e = loaded_add(j, out->key, out->fn, rt))) {
    out->e->refs++;
    return 0;
  }
oom:
  out->fn = NULL;
  snprintf(err, es, "weft: out of memory");
  return -1;
}

void *wf_jit_compile(wf_jit *j, wf_func *fn, wf_cpu_opts *o, int *from_disk, char *err, size_t es) {
  char *irtext = wf_ir_to_string(fn->mod);
  if (!irtext) {
    snprintf(err, es, "weft: out of memory");
    return NULL;
  }
  cresult res;
  memset(&res, 0, sizeof res);
  int st = compile_kernel(j, fn, o, irtext, &res, err, es);
  free(irtext);
  if (from_disk) *from_disk = res.from_disk;
  /* C callers hold no handle: their reference keeps the code with j */
  return st == 0 ? res.fn : NULL;
}

void wf_jit_stats(const wf_jit *j, int64_t *compiles, int64_t *disk_hits) {
  if (compiles) *compiles = j->compiles;
  if (disk_hits) *disk_hits = j->disk_hits;
}

void wf_jit_key(wf_jit *j, wf_func *fn, const wf_cpu_opts *o, const char *irtext, char key[33]) {
  kernel_key(j, fn, o, irtext, key);
}

int wf_jit_kernel_get(wf_jit *j, wf_func *fn, wf_cpu_opts *o, const char *irtext,
                      wf_jit_kernel *out, char *err, size_t es) {
  cresult res;
  memset(&res, 0, sizeof res);
  memset(out, 0, sizeof *out);
  if (compile_kernel(j, fn, o, irtext, &res, err, es) != 0) return -1;
  out->fn = res.fn;
  out->code = res.e;
  out->from_disk = res.from_disk;
  memcpy(out->key, res.key, sizeof out->key);
  j->refs++; /* the code's owner owns the JIT too */
  return 0;
}

void wf_jit_code_release(wf_jit *j, wf_jit_code *c) {
  if (!j) return;
  if (c) loaded_unref(j, c);
  wf_jit_release(j);
}

void wf_jit_mem_hit(wf_jit *j) {
  j->mem_hits++;
}

char *wf_jit_llvm_ir(wf_jit *j, wf_func *fn, wf_cpu_opts *o, int optimize, char *err, size_t es) {
  char sym[128];
  snprintf(sym, sizeof sym, "wfk_%s", fn->name ? fn->name : "kernel");
  o->symbol = sym;
  o->cpu = j->cpu;
  o->features = j->features;
  o->simd = simd_on();
  o->poll = poll_on();
  LLVMContextRef C = context_new();
  LLVMModuleRef M = build_module(j, C, fn, o, optimize, err, es);
  if (!M) {
    LLVMContextDispose(C);
    return NULL;
  }
  char *s = LLVMPrintModuleToString(M);
  LLVMDisposeModule(M);
  LLVMContextDispose(C);
  char *r = s ? strdup(s) : NULL;
  LLVMDisposeMessage(s);
  o->symbol = NULL;
  if (!r) snprintf(err, es, "weft: out of memory");
  return r;
}

void wf_jit_info_get(const wf_jit *j, wf_jit_info *out) {
  out->compiles = j->compiles;
  out->disk_hits = j->disk_hits;
  out->disk_writes = j->disk_writes;
  out->mem_hits = j->mem_hits;
  out->code_live = j->nloaded;
  out->code_freed = j->code_freed;
  out->cache_dir = j->cache_on ? j->cachedir : NULL;
  out->cpu = j->cpu;
  out->triple = j->triple;
}
