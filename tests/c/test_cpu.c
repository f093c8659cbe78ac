/*
** test_cpu.c -- the CPU backend without the front end: kernels built with
** the IR builder, compiled by the JIT, launched on the pool; values checked
** against C references.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "runtime/rt.h"
#include "runtime/wf_launch.h"

#include "wtest.h"

/* ---- helpers ---- */
typedef struct K {
  wf_module *m;
  wf_types *T;
  wf_func *fn;
  wf_builder b;
} K;

static void k_begin(K *k, const char *name, int np, const wf_type **pt) {
  k->m = wf_module_new(NULL);
  k->T = k->m->types;
  (void)pt;
}

static void k_func(K *k, const char *name, int np, const wf_type **pt) {
  k->fn = wf_func_new(k->m, name, 1, np, pt, 0, NULL);
  k->fn->chunk = "@test.lua";
  wf_b_init(&k->b, k->fn, k->fn->body);
}

static wf_val P(K *k, int i) {
  return k->fn->params[i];
}

static wf_val tid(K *k, int d) {
  const wf_type *i32 = wf_t_int(k->T, 32, 1);
  wf_inst *in = wf_b_inst(&k->b, WF_OP_TID, 0, NULL, 1, &i32, 0);
  in->imm = d;
  return in->res[0];
}

static wf_val load(K *k, wf_val arr, int n, const wf_val *idx) {
  wf_val args[5] = {arr};
  for (int i = 0; i < n; i++)
    args[1 + i] = idx[i];
  const wf_type *et = wf_vtype(k->fn, arr)->elem;
  return wf_b_inst(&k->b, WF_OP_LOAD, 1 + n, args, 1, &et, 0)->res[0];
}

static void store(K *k, wf_val arr, int n, const wf_val *idx, wf_val v) {
  wf_val args[6] = {arr};
  for (int i = 0; i < n; i++)
    args[1 + i] = idx[i];
  args[1 + n] = v;
  wf_b_inst(&k->b, WF_OP_STORE, 2 + n, args, 0, NULL, 0);
}

static wf_val atomic(K *k, wf_op op, wf_val arr, wf_val i, wf_val v) {
  wf_val args[3] = {arr, i, v};
  const wf_type *et = wf_vtype(k->fn, arr)->elem;
  return wf_b_inst(&k->b, op, 3, args, 1, &et, 0)->res[0];
}

static wf_array mkarr(int nd, const int64_t *shape, int elsize) {
  wf_array a;
  memset(&a, 0, sizeof a);
  a.ndim = nd;
  a.size = 1;
  for (int i = 0; i < nd; i++)
    a.size *= shape[i];
  int64_t st = elsize;
  for (int i = nd - 1; i >= 0; i--) {
    a.shape[i] = shape[i];
    a.strides[i] = st;
    st *= shape[i];
  }
  a.elsize = elsize;
  a.data = calloc((size_t)(a.size ? a.size : 1), (size_t)elsize);
  return a;
}

static wf_jit *J;
static wf_rt *RT;

static void *compile(K *k, int debug, int ndim, const char *const *names, int nnames) {
  wf_cpu_opts o;
  memset(&o, 0, sizeof o);
  o.debug = debug;
  o.ndim = ndim;
  o.names = names;
  o.nnames = nnames;
  char err[1024];
  void *fn = wf_jit_compile(J, k->fn, &o, NULL, err, sizeof err);
  if (!fn) fprintf(stderr, "compile failed: %s\n", err);
  CHECK(fn != NULL);
  return fn;
}

/* ---- tests ---- */

/* y[i] = a * x[i] + y[i], also with x and y the same array */
static void test_saxpy(void) {
  K k;
  k_begin(&k, "saxpy", 0, NULL);
  const wf_type *f32 = wf_t_float(k.T, 32), *af = wf_t_array(k.T, f32, 1);
  const wf_type *pt[3] = {af, af, f32};
  k_func(&k, "saxpy", 3, pt);
  wf_val i = tid(&k, 0);
  wf_val xv = load(&k, P(&k, 0), 1, &i), yv = load(&k, P(&k, 1), 1, &i);
  wf_val r = wf_b_op2(&k.b, WF_OP_ADD, f32, wf_b_op2(&k.b, WF_OP_MUL, f32, P(&k, 2), xv), yv);
  store(&k, P(&k, 1), 1, &i, r);
  void *fn = compile(&k, 0, 1, NULL, 0);
  int64_t n = 100003;
  wf_array x = mkarr(1, &n, 4), y = mkarr(1, &n, 4);
  float *xd = x.data, *yd = y.data;
  for (int64_t j = 0; j < n; j++)
    xd[j] = (float)j, yd[j] = 1.0f;
  int64_t offs[3];
  int64_t size = wf_cpu_arg_layout(k.fn, offs);
  CHECK(size == 24 && offs[0] == 0 && offs[1] == 8 && offs[2] == 16);
  unsigned char args[24];
  wf_array *px = &x, *py = &y;
  float a = 2.0f;
  memcpy(args + 0, &px, 8);
  memcpy(args + 8, &py, 8);
  memcpy(args + 16, &a, 4);
  CHECK(wf_cpu_launch(RT, fn, 1, &n, args, wf_cpu_cost(k.fn)) == 0);
  int bad = 0;
  for (int64_t j = 0; j < n; j++)
    bad += yd[j] != 2.0f * (float)j + 1.0f;
  CHECK(bad == 0);
  /* aliased: x passed as both, y = 2x + x */
  memcpy(args + 8, &px, 8);
  CHECK(wf_cpu_launch(RT, fn, 1, &n, args, 1) == 0);
  bad = 0;
  for (int64_t j = 0; j < n; j++)
    bad += xd[j] != 3.0f * (float)j;
  CHECK(bad == 0);
  /* a strided view (every other element of a bigger buffer) */
  int64_t n2 = 1000;
  wf_array s = mkarr(1, &n2, 4);
  s.strides[0] = 8;
  s.shape[0] = 500;
  float *sd = s.data;
  for (int j = 0; j < 1000; j++)
    sd[j] = 1.0f;
  wf_array *ps = &s;
  memcpy(args + 0, &ps, 8);
  memcpy(args + 8, &py, 8);
  int64_t n3 = 500;
  for (int j = 0; j < 500; j++)
    yd[j] = 0;
  CHECK(wf_cpu_launch(RT, fn, 1, &n3, args, 1) == 0);
  bad = 0;
  for (int j = 0; j < 500; j++)
    bad += yd[j] != 2.0f;
  CHECK(bad == 0);
  /* empty launch */
  int64_t zero = 0;
  CHECK(wf_cpu_launch(RT, fn, 1, &zero, args, 1) == 0);
  free(x.data), free(y.data), free(s.data);
  wf_module_free(k.m);
}

/* out[i][j][l] = i*10000 + j*100 + l for 2-D and 3-D launches */
static void test_tids(void) {
  for (int nd = 2; nd <= 3; nd++) {
    K k;
    k_begin(&k, "tids", 0, NULL);
    const wf_type *i32 = wf_t_int(k.T, 32, 1), *ai = wf_t_array(k.T, i32, nd);
    k_func(&k, "tids", 1, &ai);
    wf_val t[3], acc = wf_b_consti(&k.b, i32, 0);
    static const int mul[3] = {10000, 100, 1};
    for (int d = 0; d < nd; d++) {
      t[d] = tid(&k, d);
      wf_val m = wf_b_consti(&k.b, i32, mul[3 - nd + d]);
      acc = wf_b_op2(&k.b, WF_OP_ADD, i32, acc, wf_b_op2(&k.b, WF_OP_MUL, i32, t[d], m));
    }
    store(&k, P(&k, 0), nd, t, acc);
    void *fn = compile(&k, 0, nd, NULL, 0);
    int64_t shape[3] = {7, 13, 11};
    if (nd == 2) shape[0] = 37, shape[1] = 53;
    wf_array o = mkarr(nd, shape, 4);
    wf_array *po = &o;
    CHECK(wf_cpu_launch(RT, fn, nd, shape, &po, 100000) == 0); /* forced onto the pool */
    int bad = 0;
    int32_t *od = o.data;
    if (nd == 2) {
      for (int i = 0; i < shape[0]; i++)
        for (int j = 0; j < shape[1]; j++)
          bad += od[i * shape[1] + j] != i * 100 + j;
    } else {
      for (int i = 0; i < shape[0]; i++)
        for (int j = 0; j < shape[1]; j++)
          for (int l = 0; l < shape[2]; l++)
            bad += od[(i * shape[1] + j) * shape[2] + l] != i * 10000 + j * 100 + l;
    }
    CHECK(bad == 0);
    free(o.data);
    wf_module_free(k.m);
  }
}

/* atomics under contention: exact integer sums, float sums of 1.0, min/max */
static void test_atomics(void) {
  K k;
  k_begin(&k, "atom", 0, NULL);
  const wf_type *i32 = wf_t_int(k.T, 32, 1), *f32 = wf_t_float(k.T, 32), *f64 = wf_t_float(k.T, 64);
  const wf_type *u8 = wf_t_int(k.T, 8, 0), *i64 = wf_t_int(k.T, 64, 1);
  const wf_type *pt[5] = {wf_t_array(k.T, i32, 1), wf_t_array(k.T, f32, 1), wf_t_array(k.T, f64, 1),
                          wf_t_array(k.T, u8, 1), wf_t_array(k.T, i64, 1)};
  k_func(&k, "atom", 5, pt);
  wf_val i = tid(&k, 0);
  wf_val z = wf_b_consti(&k.b, i32, 0), one = wf_b_consti(&k.b, i32, 1);
  atomic(&k, WF_OP_ATOMIC_ADD, P(&k, 0), z, one);
  atomic(&k, WF_OP_ATOMIC_MAX, P(&k, 0), one, i);
  wf_val neg = wf_b_op1(&k.b, WF_OP_NEG, i32, i);
  atomic(&k, WF_OP_ATOMIC_MIN, P(&k, 0), wf_b_consti(&k.b, i32, 2), neg);
  atomic(&k, WF_OP_ATOMIC_ADD, P(&k, 1), z, wf_b_constf(&k.b, f32, 1.0));
  wf_val fi = wf_b_op1(&k.b, WF_OP_CAST, f32, i);
  atomic(&k, WF_OP_ATOMIC_MAX, P(&k, 1), one, fi);
  atomic(&k, WF_OP_ATOMIC_MIN, P(&k, 1), wf_b_consti(&k.b, i32, 2),
         wf_b_op1(&k.b, WF_OP_NEG, f32, fi));
  atomic(&k, WF_OP_ATOMIC_ADD, P(&k, 2), z, wf_b_constf(&k.b, f64, 0.5));
  atomic(&k, WF_OP_ATOMIC_ADD, P(&k, 3), z, wf_b_consti(&k.b, u8, 1));
  atomic(&k, WF_OP_ATOMIC_ADD, P(&k, 4), z, wf_b_op1(&k.b, WF_OP_CAST, i64, i));
  void *fn = compile(&k, 0, 1, NULL, 0);
  int64_t three = 3, one1 = 1;
  wf_array a = mkarr(1, &three, 4), b = mkarr(1, &three, 4), c = mkarr(1, &one1, 8),
           d = mkarr(1, &one1, 1), e = mkarr(1, &one1, 8);
  wf_array *args[5] = {&a, &b, &c, &d, &e};
  int64_t n = 1000000;
  CHECK(wf_cpu_launch(RT, fn, 1, &n, args, 100) == 0);
  int32_t *ad = a.data;
  float *bd = b.data;
  CHECK(ad[0] == 1000000 && ad[1] == 999999 && ad[2] == -999999);
  CHECK(bd[0] == 1000000.0f && bd[1] == 999999.0f && bd[2] == -999999.0f);
  CHECK(((double *)c.data)[0] == 500000.0);
  CHECK(((uint8_t *)d.data)[0] == (uint8_t)(1000000 & 255));
  CHECK(((int64_t *)e.data)[0] == (int64_t)999999 * 1000000 / 2);
  free(a.data), free(b.data), free(c.data), free(d.data), free(e.data);
  wf_module_free(k.m);
}

/* Private accumulation: an array updated only by atomic_add whose result
** is unused gets the private body (body.p); one whose old value is used,
** or that is also loaded, keeps only atomics. The sums stay exact on the
** pool, inline, and with a non-compact (strided) array. */
static void test_privatize(void) {
  K k;
  k_begin(&k, "priv", 0, NULL);
  const wf_type *i32 = wf_t_int(k.T, 32, 1), *f32 = wf_t_float(k.T, 32);
  const wf_type *af = wf_t_array(k.T, f32, 1);
  const wf_type *pt[4] = {af, af, af, wf_t_array(k.T, i32, 1)};
  k_func(&k, "priv", 4, pt);
  wf_val i = tid(&k, 0);
  wf_val z = wf_b_consti(&k.b, i32, 0), m4 = wf_b_consti(&k.b, i32, 4);
  wf_val one = wf_b_constf(&k.b, f32, 1.0);
  /* a[i % 4] += 1 (private);  old = b[0] += 1; out[0] += (old >= 0) (atomic);
  ** c[0] += c[1] (read: atomic) */
  atomic(&k, WF_OP_ATOMIC_ADD, P(&k, 0), wf_b_op2(&k.b, WF_OP_MOD, i32, i, m4), one);
  wf_val old = atomic(&k, WF_OP_ATOMIC_ADD, P(&k, 1), z, one);
  wf_val pos = wf_b_op2(&k.b, WF_OP_GE, wf_t_bool(k.T), old, wf_b_constf(&k.b, f32, 0.0));
  atomic(&k, WF_OP_ATOMIC_ADD, P(&k, 3), z, wf_b_op1(&k.b, WF_OP_CAST, i32, pos));
  wf_val one_i = wf_b_consti(&k.b, i32, 1);
  atomic(&k, WF_OP_ATOMIC_ADD, P(&k, 2), z, load(&k, P(&k, 2), 1, &one_i));
  wf_cpu_opts o;
  memset(&o, 0, sizeof o);
  o.ndim = 1;
  o.symbol = "wfk_priv";
  char err[512];
  LLVMContextRef C = LLVMContextCreate();
  LLVMModuleRef M = wf_llvm_emit(C, k.fn, &o, err, sizeof err);
  CHECK(M != NULL);
  LLVMValueRef bp = M ? LLVMGetNamedFunction(M, "body.p") : NULL;
  CHECK(bp != NULL);
  /* in body.p: a plain add for a, atomics for b, out and c */
  int atomics = 0, stores = 0;
  for (LLVMBasicBlockRef bb = bp ? LLVMGetFirstBasicBlock(bp) : NULL; bb;
       bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef x = LLVMGetFirstInstruction(bb); x; x = LLVMGetNextInstruction(x)) {
      atomics += LLVMGetInstructionOpcode(x) == LLVMAtomicRMW;
      stores += LLVMGetInstructionOpcode(x) == LLVMStore;
    }
  CHECK(atomics == 3 && stores == 1);
  if (M) LLVMDisposeModule(M);
  LLVMContextDispose(C);

  void *fn = compile(&k, 0, 1, NULL, 0);
  /* the same kernel again: the code the JIT already holds, no duplicate */
  CHECK(compile(&k, 0, 1, NULL, 0) == fn);
  int64_t four = 4, one1 = 1, two = 2, eight = 8;
  for (int pass = 0; pass < 3; pass++) {
    /* pass 0: pool; 1: inline (small cost); 2: pool with a strided a */
    wf_array a = mkarr(1, pass == 2 ? &eight : &four, 4), b = mkarr(1, &one1, 4),
             c = mkarr(1, &two, 4), out = mkarr(1, &one1, 4);
    if (pass == 2) a.shape[0] = 4, a.strides[0] = 8, a.size = 4;
    ((float *)c.data)[1] = 0.5f;
    wf_array *args[4] = {&a, &b, &c, &out};
    int64_t n = pass == 1 ? 1000 : 400000;
    CHECK(wf_cpu_launch(RT, fn, 1, &n, args, pass == 1 ? 1 : 100) == 0);
    float *ad = a.data;
    int stride = pass == 2 ? 2 : 1;
    for (int j = 0; j < 4; j++)
      CHECK(ad[j * stride] == (float)(n / 4));
    if (pass == 2) CHECK(ad[1] == 0.0f && ad[3] == 0.0f);
    CHECK(((float *)b.data)[0] == (float)n);
    CHECK(((int32_t *)out.data)[0] == (int32_t)n);
    CHECK(((float *)c.data)[0] == 0.5f * (float)n);
    free(a.data), free(b.data), free(c.data), free(out.data);
  }
  wf_module_free(k.m);
}

/* debug mode: x[i + 3] on a 5-element array fails with a positioned message */
static void test_bounds(void) {
  K k;
  k_begin(&k, "oob", 0, NULL);
  const wf_type *i32 = wf_t_int(k.T, 32, 1), *ai = wf_t_array(k.T, i32, 1);
  const wf_type *pt[1] = {ai};
  k_func(&k, "oob", 1, pt);
  wf_val i = tid(&k, 0);
  k.b.loc.line = 7;
  wf_val j = wf_b_op2(&k.b, WF_OP_ADD, i32, i, wf_b_consti(&k.b, i32, 3));
  store(&k, P(&k, 0), 1, &j, i);
  const char *names[1] = {"x"};
  void *fn = compile(&k, 1, 1, names, 1);
  int64_t five = 5;
  wf_array x = mkarr(1, &five, 4);
  wf_array *px = &x;
  int st = wf_cpu_launch(RT, fn, 1, &five, &px, 1);
  CHECK(st == WEFT_ERRRUN);
  CHECK(strcmp(wf_rt_errmsg(RT),
               "test.lua:7: index 5 out of bounds for axis 0 with size 5 in array 'x' of kernel "
               "'oob'") == 0);
  if (st) printf("  message: %s\n", wf_rt_errmsg(RT));
  /* threads before the failure wrote their values; nothing crashed */
  CHECK(((int32_t *)x.data)[3] == 0 && ((int32_t *)x.data)[4] == 1);
  /* many threads: still one clean error */
  int64_t big = 1 << 20;
  CHECK(wf_cpu_launch(RT, fn, 1, &big, &px, 100000) == WEFT_ERRRUN);
  CHECK(strstr(wf_rt_errmsg(RT), "out of bounds for axis 0 with size 5 in array 'x'") != NULL);
  free(x.data);
  wf_module_free(k.m);
}

/* for-loop with a carried value, and Lua semantics of %, //, / on ints/floats */
static void test_loops_arith(void) {
  K k;
  k_begin(&k, "loops", 0, NULL);
  const wf_type *i32 = wf_t_int(k.T, 32, 1), *f64 = wf_t_float(k.T, 64);
  const wf_type *pt[2] = {wf_t_array(k.T, i32, 2), wf_t_array(k.T, f64, 2)};
  k_func(&k, "loops", 2, pt);
  wf_val i = tid(&k, 0);
  /* s = sum_{q=0..i} q */
  wf_val fa[4] = {wf_b_consti(&k.b, i32, 0), i, wf_b_consti(&k.b, i32, 1),
                  wf_b_consti(&k.b, i32, 0)};
  wf_inst *f = wf_b_inst(&k.b, WF_OP_FOR, 4, fa, 1, &i32, 1);
  const wf_type *bp[2] = {i32, i32};
  wf_block *body = wf_b_newblock(k.fn, 2, bp);
  wf_inst_set_block(f, 0, body);
  wf_builder bb;
  wf_b_init(&bb, k.fn, body);
  wf_val acc = wf_b_op2(&bb, WF_OP_ADD, i32, body->params[1], body->params[0]);
  wf_b_inst(&bb, WF_OP_YIELD, 1, &acc, 0, NULL, 0);
  wf_val sum = f->res[0];
  /* a = i - 5, b = 3 or -3 */
  wf_val a = wf_b_op2(&k.b, WF_OP_SUB, i32, i, wf_b_consti(&k.b, i32, 5));
  wf_val ops[4];
  wf_val idx[2];
  idx[0] = i;
  for (int s = 0; s < 2; s++) {
    wf_val b = wf_b_consti(&k.b, i32, s ? -3 : 3);
    ops[0] = wf_b_op2(&k.b, WF_OP_MOD, i32, a, b);
    ops[1] = wf_b_op2(&k.b, WF_OP_FLOORDIV, i32, a, b);
    ops[2] = wf_b_op2(&k.b, WF_OP_DIV, i32, a, b);
    wf_val fa2 = wf_b_op1(&k.b, WF_OP_CAST, f64, a), fb = wf_b_op1(&k.b, WF_OP_CAST, f64, b);
    for (int q = 0; q < 3; q++) {
      idx[1] = wf_b_consti(&k.b, i32, s * 3 + q);
      store(&k, P(&k, 0), 2, idx, ops[q]);
    }
    idx[1] = wf_b_consti(&k.b, i32, s * 2);
    store(&k, P(&k, 1), 2, idx, wf_b_op2(&k.b, WF_OP_MOD, f64, fa2, fb));
    idx[1] = wf_b_consti(&k.b, i32, s * 2 + 1);
    store(&k, P(&k, 1), 2, idx, wf_b_op2(&k.b, WF_OP_FLOORDIV, f64, fa2, fb));
  }
  idx[1] = wf_b_consti(&k.b, i32, 6);
  store(&k, P(&k, 0), 2, idx, sum);
  /* division by zero gives 0 in fast mode (no checks; no hardware trap) */
  idx[1] = wf_b_consti(&k.b, i32, 7);
  store(&k, P(&k, 0), 2, idx, wf_b_op2(&k.b, WF_OP_DIV, i32, a, wf_b_consti(&k.b, i32, 0)));
  void *fn = compile(&k, 0, 1, NULL, 0);
  int64_t si[2] = {11, 8}, sf[2] = {11, 4};
  wf_array ia = mkarr(2, si, 4), fa3 = mkarr(2, sf, 8);
  wf_array *args[2] = {&ia, &fa3};
  int64_t n = 11;
  CHECK(wf_cpu_launch(RT, fn, 1, &n, args, 1) == 0);
  int32_t *id = ia.data;
  double *fd = fa3.data;
  int bad = 0;
  for (int t = 0; t < 11; t++) {
    int av = t - 5;
    for (int s = 0; s < 2; s++) {
      int b = s ? -3 : 3;
      int fl = (int)floor((double)av / b);
      int md = av - fl * b;
      bad += id[t * 8 + s * 3 + 0] != md;
      bad += id[t * 8 + s * 3 + 1] != fl;
      bad += id[t * 8 + s * 3 + 2] != av / b;
      bad += fd[t * 4 + s * 2 + 0] != (double)av - floor((double)av / b) * b;
      bad += fd[t * 4 + s * 2 + 1] != floor((double)av / b);
    }
    bad += id[t * 8 + 6] != t * (t + 1) / 2;
    bad += id[t * 8 + 7] != 0;
  }
  CHECK(bad == 0);
  free(ia.data), free(fa3.data);
  wf_module_free(k.m);
}

/* the documented PCG hash, reproduced in C */
static uint32_t pcg(uint32_t x) {
  uint32_t b = x * 747796405u + 2891336453u;
  uint32_t c = ((b >> ((b >> 28u) + 4u)) ^ b) * 277803737u;
  return (c >> 22u) ^ c;
}

static void test_rng(void) {
  K k;
  k_begin(&k, "rng", 0, NULL);
  const wf_type *i32 = wf_t_int(k.T, 32, 1), *f32 = wf_t_float(k.T, 32), *rng = wf_t_rng(k.T);
  const wf_type *pt[2] = {wf_t_array(k.T, i32, 1), wf_t_array(k.T, f32, 1)};
  k_func(&k, "rng", 2, pt);
  wf_val i = tid(&k, 0);
  wf_val ra[2] = {wf_b_consti(&k.b, i32, 42), i};
  wf_val s = wf_b_inst(&k.b, WF_OP_RNG_INIT, 2, ra, 1, &rng, 0)->res[0];
  const wf_type *rt1[2] = {i32, rng}, *rt2[2] = {f32, rng};
  wf_inst *r1 = wf_b_inst(&k.b, WF_OP_RANDI, 1, &s, 2, rt1, 0);
  wf_inst *r2 = wf_b_inst(&k.b, WF_OP_RANDF, 1, &r1->res[1], 2, rt2, 0);
  store(&k, P(&k, 0), 1, &i, r1->res[0]);
  store(&k, P(&k, 1), 1, &i, r2->res[0]);
  void *fn = compile(&k, 0, 1, NULL, 0);
  int64_t n = 1000;
  wf_array a = mkarr(1, &n, 4), b = mkarr(1, &n, 4);
  wf_array *args[2] = {&a, &b};
  CHECK(wf_cpu_launch(RT, fn, 1, &n, args, 1) == 0);
  int bad = 0;
  for (uint32_t t = 0; t < 1000; t++) {
    uint32_t st = pcg(42u + pcg(t));
    st = pcg(st);
    bad += ((int32_t *)a.data)[t] != (int32_t)st;
    st = pcg(st);
    float f = (float)(st >> 8) * (1.0f / 16777216.0f);
    bad += ((float *)b.data)[t] != f;
    bad += !(f >= 0.0f && f < 1.0f);
  }
  CHECK(bad == 0);
  free(a.data), free(b.data);
  wf_module_free(k.m);
}

/* vec3 elements: C layout, aggregate ops through agg/extract */
static void test_vec3(void) {
  K k;
  k_begin(&k, "v3", 0, NULL);
  const wf_type *f32 = wf_t_float(k.T, 32), *v3 = wf_t_vec(k.T, 3, f32);
  const wf_type *pt[2] = {wf_t_array(k.T, v3, 1), v3};
  k_func(&k, "v3", 2, pt);
  wf_val i = tid(&k, 0);
  wf_val v = load(&k, P(&k, 0), 1, &i);
  wf_val c[3];
  for (int q = 0; q < 3; q++)
    c[q] = wf_b_op2(&k.b, WF_OP_ADD, f32, wf_b_extract(&k.b, v, q),
                    wf_b_extract(&k.b, P(&k, 1), 2 - q));
  store(&k, P(&k, 0), 1, &i, wf_b_agg(&k.b, v3, 3, c));
  void *fn = compile(&k, 0, 1, NULL, 0);
  int64_t n = 10;
  wf_array a = mkarr(1, &n, 12);
  float *d = a.data;
  for (int q = 0; q < 30; q++)
    d[q] = (float)q;
  int64_t offs[2];
  CHECK(wf_cpu_arg_layout(k.fn, offs) == 24 && offs[1] == 8);
  unsigned char args[24];
  wf_array *pa = &a;
  float w[3] = {100, 200, 300};
  memcpy(args, &pa, 8);
  memcpy(args + 8, w, 12);
  CHECK(wf_cpu_launch(RT, fn, 1, &n, args, 1) == 0);
  int bad = 0;
  for (int q = 0; q < 30; q++)
    bad += d[q] != (float)q + w[2 - q % 3];
  CHECK(bad == 0);
  free(a.data);
  wf_module_free(k.m);
}

/* a second JIT with the same cache directory compiles nothing */
static void test_disk_cache(void) {
  char dir[] = "/tmp/weft-cache-test-XXXXXX";
  if (!mkdtemp(dir)) return;
  setenv("WEFT_CACHE_DIR", dir, 1);
  int64_t counts[2][2];
  for (int round = 0; round < 2; round++) {
    char err[512];
    wf_jit *j = wf_jit_new(err, sizeof err);
    CHECK(j != NULL);
    K k;
    k_begin(&k, "cached", 0, NULL);
    const wf_type *i32 = wf_t_int(k.T, 32, 1), *ai = wf_t_array(k.T, i32, 1);
    k_func(&k, "cached", 1, &ai);
    wf_val i = tid(&k, 0);
    store(&k, P(&k, 0), 1, &i, wf_b_op2(&k.b, WF_OP_MUL, i32, i, i));
    wf_cpu_opts o;
    memset(&o, 0, sizeof o);
    o.ndim = 1;
    int from_disk = -1;
    void *fn = wf_jit_compile(j, k.fn, &o, &from_disk, err, sizeof err);
    CHECK(fn != NULL);
    CHECK(from_disk == round);
    int64_t n = 9;
    wf_array a = mkarr(1, &n, 4);
    wf_array *pa = &a;
    CHECK(fn && wf_cpu_launch(RT, fn, 1, &n, &pa, 1) == 0);
    CHECK(((int32_t *)a.data)[8] == 64);
    wf_jit_stats(j, &counts[round][0], &counts[round][1]);
    free(a.data);
    wf_module_free(k.m);
    wf_jit_free(j);
  }
  CHECK(counts[0][0] == 1 && counts[0][1] == 0);
  CHECK(counts[1][0] == 0 && counts[1][1] == 1);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  unsetenv("WEFT_CACHE_DIR");
}

int main(void) {
  setenv("WEFT_CACHE_DIR", "off", 1);
  char err[512];
  J = wf_jit_new(err, sizeof err);
  if (!J) {
    fprintf(stderr, "jit: %s\n", err);
    return 1;
  }
  RT = wf_rt_new();
  wf_rt_set_num_threads(RT, 4);
  test_saxpy();
  test_tids();
  test_atomics();
  test_privatize();
  test_bounds();
  test_loops_arith();
  test_rng();
  test_vec3();
  test_disk_cache();
  wf_rt_free(RT); /* joins the pool */
  wf_jit_free(J);
  WTEST_DONE();
}
