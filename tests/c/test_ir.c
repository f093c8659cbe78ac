/*
** test_ir.c -- types, the builder, editing and the printer.
*/
#include "ir/abi.h"
#include "ir/ir.h"
#include "wtest.h"

static char *tname(const wf_type *t) {
  static char buf[8][128];
  static int k;
  char *b = buf[k++ & 7];
  wf_t_snprint(t, b, 128);
  return b;
}

/* Layouts shared with C hosts and interning by pointer. */
static void test_types(void) {
  wf_types *T = wf_types_new();
  const wf_type *f32 = wf_t_float(T, 32), *f64 = wf_t_float(T, 64), *f16 = wf_t_float(T, 16);
  const wf_type *i32 = wf_t_int(T, 32, 1), *u8 = wf_t_int(T, 8, 0), *b = wf_t_bool(T);
  CHECK(f32 == wf_t_float(T, 32));
  CHECK(i32 != wf_t_int(T, 32, 0));
  CHECK(wf_t_int(T, 12, 1) == NULL);
  const wf_type *v3 = wf_t_vec(T, 3, f32);
  CHECK(v3 == wf_t_vec(T, 3, f32));
  CHECK_INT(v3->size, 12);
  CHECK_INT(v3->align, 4);
  CHECK_INT(v3->ncomp, 3);
  CHECK_STR(tname(v3), "vec3f");
  CHECK_STR(v3->name, "vec3f");
  CHECK_INT(b->size, 1);
  CHECK_STR(tname(b), "bool");
  CHECK_STR(tname(u8), "u8");
  CHECK_STR(tname(i32), "i32");
  CHECK_STR(tname(f16), "f16");
  CHECK_STR(tname(wf_t_vec(T, 2, u8)), "vec2ub");
  CHECK_STR(tname(wf_t_vec(T, 4, wf_t_int(T, 64, 1))), "vec4l");
  CHECK_STR(tname(wf_t_vec(T, 3, b)), "vec3<bool>");
  const wf_type *m33 = wf_t_mat(T, 3, 3, f64);
  CHECK_STR(tname(m33), "mat33d");
  CHECK_INT(m33->size, 72);
  CHECK_INT(m33->align, 8);
  CHECK_INT(wf_t_arity(m33), 3);
  CHECK(wf_t_component(T, m33, 1) == wf_t_vec(T, 3, f64));
  const wf_type *m23 = wf_t_mat(T, 2, 3, f32);
  CHECK(wf_t_component(T, m23, 0) == wf_t_vec(T, 3, f32));
  CHECK_STR(tname(wf_t_quat(T, f32)), "quatf");
  CHECK_INT(wf_t_quat(T, f32)->size, 16);
  const wf_type *tr = wf_t_transform(T, f32);
  CHECK_STR(tname(tr), "transformf");
  CHECK_INT(tr->size, 28);
  CHECK_INT(tr->ncomp, 7);
  CHECK_INT(wf_t_arity(tr), 2);
  CHECK(wf_t_component(T, tr, 0) == v3);
  CHECK(wf_t_component(T, tr, 1) == wf_t_quat(T, f32));
  CHECK(wf_t_component(T, tr, 2) == NULL);
  const wf_type *a2 = wf_t_array(T, f32, 2);
  CHECK_STR(tname(a2), "array<f32,2>");
  CHECK_INT(a2->size, WF_ARR_KERNEL_BYTES); /* the kernel header, ir/abi.h */
  CHECK(wf_t_array(T, a2, 1) == NULL);
  CHECK_STR(tname(wf_t_rng(T)), "rng");
  CHECK_INT(wf_t_rng(T)->size, 4);
  wf_field fl[3] = {{"pos", v3, 0}, {"mass", f32, 12}, {"id", wf_t_int(T, 64, 1), 16}};
  const wf_type *P = wf_t_struct(T, "Particle", 3, fl);
  CHECK(P == wf_t_struct(T, "Particle", 3, fl));
  CHECK(P != wf_t_struct(T, "Particle", 2, fl));
  CHECK(wf_t_find_struct(T, "Particle") == P);
  CHECK_INT(P->size, 24);
  CHECK_INT(P->align, 8);
  CHECK_STR(tname(P), "struct.Particle");
  CHECK_STR(tname(wf_t_array(T, P, 1)), "array<struct.Particle,1>");
  CHECK(wf_t_component(T, P, 1) == f32);
  CHECK(wf_t_is_scalar(b) && wf_t_is_scalar(f32) && !wf_t_is_scalar(v3));
  CHECK(wf_t_is_float(f16) && !wf_t_is_float(i32) && wf_t_is_int(u8) && !wf_t_is_int(b));
  CHECK_INT(wf_t_arity(f32), 0);
  wf_types_free(T);
}

static const char *saxpy_text = "kernel @saxpy(%0:array<f32,1>, %1:array<f32,1>, %2:f32) {\n"
                                "  %3:i32 = tid 0 !3:5\n"
                                "  %4:f32 = load %0, %3 !4:7\n"
                                "  %5:f32 = mul %2, %4 !4:7\n"
                                "  %6:f32 = load %1, %3\n"
                                "  %7:f32 = add %5, %6\n"
                                "  store %1, %3, %7\n"
                                "  ret\n"
                                "}\n";

/* Builds saxpy with the builder; checks the printed text. */
static void test_builder(void) {
  wf_module *m = wf_module_new(NULL);
  wf_types *T = m->types;
  const wf_type *f32 = wf_t_float(T, 32), *i32 = wf_t_int(T, 32, 1);
  const wf_type *arr = wf_t_array(T, f32, 1);
  const wf_type *pt[3] = {arr, arr, f32};
  wf_func *fn = wf_func_new(m, "saxpy", 1, 3, pt, 0, NULL);
  wf_builder b;
  wf_b_init(&b, fn, fn->body);
  b.loc = (wf_loc){3, 5};
  wf_inst *tid = wf_b_inst(&b, WF_OP_TID, 0, NULL, 1, &i32, 0);
  tid->imm = 0;
  wf_val i = tid->res[0];
  b.loc = (wf_loc){4, 7};
  wf_val x = wf_b_op2(&b, WF_OP_LOAD, f32, fn->params[0], i);
  wf_val ax = wf_b_op2(&b, WF_OP_MUL, f32, fn->params[2], x);
  b.loc = (wf_loc){0, 0};
  wf_val y = wf_b_op2(&b, WF_OP_LOAD, f32, fn->params[1], i);
  wf_val s = wf_b_op2(&b, WF_OP_ADD, f32, ax, y);
  wf_val sargs[3] = {fn->params[1], i, s};
  wf_b_inst(&b, WF_OP_STORE, 3, sargs, 0, NULL, 0);
  wf_b_inst(&b, WF_OP_RET, 0, NULL, 0, NULL, 0);
  CHECK(wf_module_find(m, "saxpy") == 0);
  CHECK(wf_module_find(m, "nope") == -1);
  CHECK(wf_vtype(fn, s) == f32);
  CHECK(fn->vals[s].def->op == WF_OP_ADD);
  char err[256];
  CHECK_INT(wf_ir_verify(m, err, sizeof err), 0);
  char *txt = wf_ir_to_string(m);
  CHECK_STR(txt, saxpy_text);
  free(txt);

  /* editing: insert before, unlink, replace uses */
  wf_inst *add = fn->vals[s].def;
  b.before = add;
  wf_val two = wf_b_constf(&b, f32, 2.5);
  wf_val y2 = wf_b_op2(&b, WF_OP_MUL, f32, y, two);
  wf_replace_uses(fn, y, y2);
  /* the replacement also rewrote y2's own operand: restore it */
  fn->vals[y2].def->args[0] = y;
  txt = wf_ir_to_string(m);
  CHECK_HAS(txt, "  %7:f32 = const 2.5\n  %8:f32 = mul %6, %7\n  %9:f32 = add %5, %8\n");
  free(txt);
  wf_inst *c = fn->vals[two].def;
  wf_inst_unlink(c);
  CHECK(c->parent == NULL);
  wf_block_append(fn->body, c);
  CHECK(fn->body->last == c);
  wf_inst_unlink(c);
  wf_inst_insert_before(fn->body->first, c);
  CHECK(fn->body->first == c && c->next == tid && tid->prev == c);
  wf_module_free(m);
}

/* Regions, aggregates, constants and calls through the builder. */
static void test_regions(void) {
  wf_module *m = wf_module_new(NULL);
  wf_types *T = m->types;
  const wf_type *f32 = wf_t_float(T, 32), *i32 = wf_t_int(T, 32, 1), *bl = wf_t_bool(T);
  const wf_type *v3 = wf_t_vec(T, 3, f32);
  wf_func *sq = wf_func_new(m, "sq", 0, 1, &f32, 1, &f32);
  wf_builder b;
  wf_b_init(&b, sq, sq->body);
  wf_val r = wf_b_op2(&b, WF_OP_MUL, f32, sq->params[0], sq->params[0]);
  wf_b_inst(&b, WF_OP_RET, 1, &r, 0, NULL, 0);

  wf_func *fn = wf_func_new(m, "sum", 0, 1, &i32, 1, &f32);
  wf_b_init(&b, fn, fn->body);
  wf_val lo = wf_b_consti(&b, i32, 1), st = wf_b_consti(&b, i32, 1);
  wf_val z = wf_b_constf(&b, f32, 0);
  wf_val fa[4] = {lo, fn->params[0], st, z};
  wf_inst *loop = wf_b_inst(&b, WF_OP_FOR, 4, fa, 1, &f32, 1);
  const wf_type *bp[2] = {i32, f32};
  wf_inst_set_block(loop, 0, wf_b_newblock(fn, 2, bp));
  wf_builder lb;
  wf_b_init(&lb, fn, loop->blocks[0]);
  wf_val iv = loop->blocks[0]->params[0], acc = loop->blocks[0]->params[1];
  wf_val fi = wf_b_op1(&lb, WF_OP_CAST, f32, iv);
  wf_inst *call = wf_b_inst(&lb, WF_OP_CALL, 1, &fi, 1, &f32, 0);
  call->imm = 0;
  wf_val odd = wf_b_op2(&lb, WF_OP_GT, bl, fi, z);
  wf_inst *ifi = wf_b_inst(&lb, WF_OP_IF, 1, &odd, 1, &f32, 2);
  ifi->blocks[0] = wf_b_newblock(fn, 0, NULL); /* direct fill: parents fixed later */
  ifi->blocks[1] = wf_b_newblock(fn, 0, NULL);
  wf_builder tb;
  wf_b_init(&tb, fn, ifi->blocks[0]);
  wf_val na = wf_b_op2(&tb, WF_OP_ADD, f32, acc, call->res[0]);
  wf_b_inst(&tb, WF_OP_YIELD, 1, &na, 0, NULL, 0);
  wf_b_init(&tb, fn, ifi->blocks[1]);
  wf_b_inst(&tb, WF_OP_YIELD, 1, &acc, 0, NULL, 0);
  wf_b_inst(&lb, WF_OP_YIELD, 1, &ifi->res[0], 0, NULL, 0);
  wf_val comps[3] = {loop->res[0], loop->res[0], z};
  wf_val v = wf_b_agg(&b, v3, 3, comps);
  wf_val e = wf_b_extract(&b, v, 2);
  CHECK(wf_vtype(fn, e) == f32);
  wf_val v2 = wf_b_insert(&b, v, 1, e);
  CHECK(wf_vtype(fn, v2) == v3);
  wf_val out = wf_b_extract(&b, v2, 0);
  wf_b_inst(&b, WF_OP_RET, 1, &out, 0, NULL, 0);
  char err[256] = "";
  CHECK_INT(wf_ir_verify(m, err, sizeof err), 0);
  CHECK_STR(err, "");
  CHECK(ifi->blocks[0]->parent == ifi);
  CHECK(loop->blocks[0]->parent == loop);
  char *txt = wf_ir_to_string(m);
  CHECK_STR(txt, "func @sq(%0:f32) -> f32 {\n"
                 "  %1:f32 = mul %0, %0\n"
                 "  ret %1\n"
                 "}\n"
                 "\n"
                 "func @sum(%0:i32) -> f32 {\n"
                 "  %1:i32 = const 1\n"
                 "  %2:i32 = const 1\n"
                 "  %3:f32 = const 0.0\n"
                 "  %4:f32 = for %1, %0, %2 iter(%3) {\n"
                 "  ^(%5:i32, %6:f32):\n"
                 "    %7:f32 = cast %5\n"
                 "    %8:f32 = call @sq(%7)\n"
                 "    %9:bool = gt %7, %3\n"
                 "    %10:f32 = if %9 {\n"
                 "      %11:f32 = add %6, %8\n"
                 "      yield %11\n"
                 "    } else {\n"
                 "      yield %6\n"
                 "    }\n"
                 "    yield %10\n"
                 "  }\n"
                 "  %12:vec3f = agg %4, %4, %3\n"
                 "  %13:f32 = extract %12, 2\n"
                 "  %14:vec3f = insert %12, %13, 1\n"
                 "  %15:f32 = extract %14, 0\n"
                 "  ret %15\n"
                 "}\n");
  free(txt);
  char buf[128];
  wf_ir_snprint_inst(fn, ifi, buf, sizeof buf);
  CHECK_STR(buf, "%10:f32 = if %9 {...}");
  wf_module_free(m);
}

/* Op table columns the passes rely on. */
static void test_optable(void) {
  CHECK_STR(wf_op_name(WF_OP_COND), "condition");
  CHECK_STR(wf_op_name(WF_OP_ATOMIC_ADD), "atomic_add");
  CHECK(wf_op_flags(WF_OP_LT) & WF_OPF_CMP);
  CHECK(wf_op_flags(WF_OP_RET) & WF_OPF_TERM);
  CHECK(wf_op_flags(WF_OP_WHILE) & WF_OPF_REGION);
  CHECK(!(wf_op_flags(WF_OP_STORE) & WF_OPF_PURE));
  CHECK_INT(wf_opinfo_tab[WF_OP_RANDF].nres, 2);
  CHECK_INT(wf_opinfo_tab[WF_OP_SELECT].nargs, 3);
}

int main(void) {
  test_types();
  test_builder();
  test_regions();
  test_optable();
  WTEST_DONE();
}
