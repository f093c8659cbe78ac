/*
** test_ir_text.c -- the IR text form: print -> parse -> print round trips
** (every op, every type, every region form) and parse errors.
*/
#include <math.h>

#include "ir/ir.h"
#include "wtest.h"

static char *read_file(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", WEFT_SOURCE_DIR, rel);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

/* Parses text, prints it; returns the print (or NULL with the error shown). */
static char *reprint(const char *text, wf_module **out) {
  char err[256];
  wf_module *m = wf_ir_parse(text, NULL, err, sizeof err);
  if (!m) {
    fprintf(stderr, "parse error: %s\n", err);
    return NULL;
  }
  char *s = wf_ir_to_string(m);
  if (out)
    *out = m;
  else
    wf_module_free(m);
  return s;
}

/* The canonical file prints back to itself, twice, and names every op. */
static void test_roundtrip_file(void) {
  char *text = read_file("tests/ir/roundtrip.ir");
  CHECK(text != NULL);
  if (!text) return;
  wf_module *m = NULL;
  char *once = reprint(text, &m);
  CHECK_STR(once, text);
  char *twice = once ? reprint(once, NULL) : NULL;
  CHECK_STR(twice, once);
  for (int op = 0; op < WF_OP__COUNT; op++) {
    char pat[64];
    snprintf(pat, sizeof pat, " %s", wf_op_name(op));
    CHECK_HAS(once, pat);
  }
  if (m) {
    wf_func *k = m->funcs[1];
    CHECK_INT(k->is_kernel, 1);
    CHECK_STR(k->chunk, "@k.lua");
    CHECK_INT(m->funcs[0]->nret, 2);
    /* constants are exact */
    int found = 0;
    for (wf_inst *i = k->body->first; i; i = i->next) {
      if (i->op != WF_OP_CONST) continue;
      const wf_type *t = wf_vtype(k, i->res[0]);
      if (t->kind == WF_T_FLOAT && t->bits == 32 && i->fimm > 0.09 && i->fimm < 0.11)
        found += i->fimm == 0.1;
      if (t->kind == WF_T_FLOAT && t->bits == 64 && i->fimm > 3 && i->fimm < 3.1)
        found += i->fimm == 3.0000000000000004;
      if (t->kind == WF_T_FLOAT && i->fimm == 0 && signbit(i->fimm)) found++;
      if (t->kind == WF_T_INT && t->bits == 64) found += i->imm == -1;
    }
    CHECK_INT(found, 4);
    wf_inst *call = NULL;
    for (wf_inst *i = k->body->first; i; i = i->next)
      if (i->op == WF_OP_CALL) call = i;
    CHECK(call && call->imm == 0 && call->nres == 2 && call->loc.line == 30 && call->loc.col == 2);
    const wf_type *P = wf_t_find_struct(m->types, "Particle");
    CHECK(P && P->nfields == 3 && P->fields[1].offset == 12 && P->size == 32);
    wf_module_free(m);
  }
  free(once);
  free(twice);
  free(text);
}

/* Free-form input (other names, spacing, comments) prints canonically. */
static void test_canonical(void) {
  const char *in = "; a comment\n"
                   "func @f(%x : f32) -> f32 {   ; trailing comment\n"
                   "  %two:f32 = const 2\n"
                   "  %r:f32 = mul %x,%two\n"
                   "  %s:f32 = for %x, %x, %x iter ( %r ) { ^( %i:f32 , %a:f32 ):\n"
                   "      yield %a }\n"
                   "  ret %s\n"
                   "}\n"
                   "kernel @\"odd name\"() { %c:f32 = call @f(%c0) ret }\n";
  char err[256];
  wf_module *m = wf_ir_parse(in, NULL, err, sizeof err);
  CHECK(m == NULL);
  CHECK_STR(err, "9:41: undefined value %c0");
  in = "; a comment\n"
       "func @f(%x : f32) -> f32 {   ; trailing comment\n"
       "  %two:f32 = const 2\n"
       "  %r:f32 = mul %x,%two\n"
       "  %s:f32 = for %x, %x, %x iter ( %r ) { ^( %i:f32 , %a:f32 ):\n"
       "      yield %a }\n"
       "  ret %s\n"
       "}\n"
       "kernel @\"odd name\"(%p:f32) {\n %c:f32 = call @f(%p)\n ret }\n";
  char *out = reprint(in, NULL);
  CHECK_STR(out, "func @f(%0:f32) -> f32 {\n"
                 "  %1:f32 = const 2.0\n"
                 "  %2:f32 = mul %0, %1\n"
                 "  %3:f32 = for %0, %0, %0 iter(%2) {\n"
                 "  ^(%4:f32, %5:f32):\n"
                 "    yield %5\n"
                 "  }\n"
                 "  ret %3\n"
                 "}\n"
                 "\n"
                 "kernel @\"odd name\"(%0:f32) {\n"
                 "  %1:f32 = call @f(%0)\n"
                 "  ret\n"
                 "}\n");
  free(out);
}

/* Types built in C print and parse back to the same interned pointer. */
static void test_types_roundtrip(void) {
  wf_types *T = wf_types_new();
  const wf_type *f16 = wf_t_float(T, 16), *f32 = wf_t_float(T, 32), *f64 = wf_t_float(T, 64);
  const wf_type *scal[] = {wf_t_bool(T),
                           wf_t_int(T, 8, 1),
                           wf_t_int(T, 8, 0),
                           wf_t_int(T, 16, 1),
                           wf_t_int(T, 16, 0),
                           wf_t_int(T, 32, 1),
                           wf_t_int(T, 32, 0),
                           wf_t_int(T, 64, 1),
                           wf_t_int(T, 64, 0),
                           f16,
                           f32,
                           f64};
  const wf_type *all[128];
  int n = 0;
  for (int i = 0; i < 12; i++) {
    all[n++] = scal[i];
    all[n++] = wf_t_vec(T, 3, scal[i]);
    all[n++] = wf_t_vec(T, 11, scal[i]);
    all[n++] = wf_t_mat(T, 2, 4, scal[i]);
    all[n++] = wf_t_mat(T, 10, 2, scal[i]);
    all[n++] = wf_t_quat(T, scal[i]);
    all[n++] = wf_t_transform(T, scal[i]);
    all[n++] = wf_t_array(T, scal[i], 1 + i % 4);
  }
  all[n++] = wf_t_rng(T);
  wf_field fl[2] = {{"x", f32, 0}, {"m", wf_t_mat(T, 3, 3, f64), 8}};
  const wf_type *S = wf_t_struct(T, "S", 2, fl);
  all[n++] = S;
  all[n++] = wf_t_array(T, S, 2);
  /* one function whose params have all these types */
  wf_module *m = wf_module_new(T);
  wf_func *fn = wf_func_new(m, "types", 0, n, all, 0, NULL);
  wf_builder b;
  wf_b_init(&b, fn, fn->body);
  wf_b_inst(&b, WF_OP_RET, 0, NULL, 0, NULL, 0);
  char *txt = wf_ir_to_string(m);
  char err[256];
  wf_module *m2 = wf_ir_parse(txt, T, err, sizeof err);
  CHECK(m2 != NULL);
  if (!m2) fprintf(stderr, "%s\n%s\n", err, txt);
  for (int i = 0; m2 && i < n; i++)
    CHECK(wf_vtype(m2->funcs[0], m2->funcs[0]->params[i]) == all[i]);
  CHECK_HAS(txt, "struct S { x: f32 @0, m: mat33d @8 }\n");
  CHECK_HAS(txt, "%2:vec11<bool>");
  CHECK_HAS(txt, "mat<10,2,f16>");
  CHECK_HAS(txt, "vec3ul");
  wf_module_free(m2);
  wf_module_free(m);
  free(txt);
  wf_types_free(T);
}

/* Errors read "line:col: message". */
static void test_parse_errors(void) {
  static const struct {
    const char *text, *msg;
  } cases[] = {
      {"func @f() {\n  %1:f32 = frob %0\n}\n", "2:12: unknown op 'frob'"},
      {"func @f() {\n  %1:f33 = const 1\n}\n", "2:6: unknown type 'f33'"},
      {"func @f() {\n  %1:f32 = neg %0\n}\n", "2:16: undefined value %0"},
      {"func @f(%0:f32) {\n  %0:f32 = neg %0\n}\n", "2:3: redefinition of %0"},
      {"func @f() {\n  %1:f32 = call @g()\n  ret\n}\n", "2:18: unknown function @g"},
      {"func @f() {\n  ret\n", "3:1: expected '}' before end of input"},
      {"kernel f() {}", "1:8: expected '@name' after kernel"},
      {"module", "1:1: expected 'kernel', 'func' or 'struct'"},
      {"func @f() {\n  print \"abc\n}\n", "2:9: unterminated string"},
      {"func @f() {\n  %1:struct.Nope = undef\n}\n", "2:6: unknown struct 'Nope'"},
      {"func @f() {\n  %1:bool = const yes\n}\n", "2:19: expected true or false"},
      {"func @f(%0:f32) {\n  %1:f32 = add %0 %0\n}\n",
       "2:19: unexpected '%' after the instruction"},
      {"func @f() {\n  %1:f32 = add\n  ret\n}\nfunc @f() {}\n", "5:7: redefinition of function @f"},
      {"func @f() {\n  ^(%0:f32):\n}\n", "2:3: a function body has no block parameters"},
      {"func @f(%0:i32) {\n  %1:f32 = extract %0,\n}\n",
       "2:23: expected a value or an integer after ','"},
      /* sizes beyond int (found by tests/fuzz/fuzz_ir): no wrap, no overflow */
      {"func @f(%0:array<f32,4294967297>) {\n  ret\n}\n", "1:12: unknown type 'array'"},
      {"func @f(%0:mat<4,3466666666666666,f16>) {\n  ret\n}\n", "1:12: unknown type 'mat'"},
      {"func @f(%0:mat<65536,65536,f32>) {\n  ret\n}\n", "1:12: unknown type 'mat'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char err[256] = "";
    wf_module *m = wf_ir_parse(cases[i].text, NULL, err, sizeof err);
    CHECK(m == NULL);
    CHECK_STR(err, cases[i].msg);
    wf_module_free(m);
  }
}

/* Every prefix of the canonical file, and the file with any one line
** deleted, parses or fails with "line:col: ..."; whatever parses goes
** through the verifier (which must not crash on broken IR) and, when it
** verifies, through the optimizer. */
static void try_text(const char *t, int *bad, int *parsed) {
  char err[256] = "";
  int line, col;
  wf_module *m = wf_ir_parse(t, NULL, err, sizeof err);
  if (!m && sscanf(err, "%d:%d: ", &line, &col) != 2) ++*bad;
  if (m) {
    ++*parsed;
    if (wf_ir_verify(m, err, sizeof err) == 0 && wf_ir_optimize(m, err, sizeof err) != 0) ++*bad;
    free(wf_ir_to_string(m));
  }
  wf_module_free(m);
}

static void test_mutations(void) {
  char *text = read_file("tests/ir/roundtrip.ir");
  if (!text) return;
  size_t n = strlen(text);
  int bad = 0, parsed = 0;
  char *buf = malloc(n + 1);
  for (size_t k = 0; k < n; k += 3) {
    memcpy(buf, text, k);
    buf[k] = 0;
    try_text(buf, &bad, &parsed);
  }
  for (const char *ln = text; *ln;) { /* delete one line */
    const char *eol = strchr(ln, '\n');
    const char *next = eol ? eol + 1 : ln + strlen(ln);
    size_t head = (size_t)(ln - text);
    memcpy(buf, text, head);
    strcpy(buf + head, next);
    try_text(buf, &bad, &parsed);
    ln = next;
  }
  CHECK_INT(bad, 0);
  CHECK(parsed > 20); /* the deletions of unused definitions and of terminators */
  free(buf);
  free(text);
}

/* A struct used only by a value that a pass removed is not declared: the
** print must parse back and print the same text (a struct constant folded
** away left "struct S { ... }" in the first print only). */
static void test_dead_struct(void) {
  const char *text = "struct S { a: f32 @0, b: f32 @4 }\n\n"
                     "kernel @k(%0:array<f32,1>, %1:f32) {\n"
                     "  %2:struct.S = agg %1, %1\n"
                     "  %3:i32 = const 0\n"
                     "  store %0, %3, %1\n"
                     "  ret\n"
                     "}\n";
  char err[256];
  wf_module *m = wf_ir_parse(text, NULL, err, sizeof err);
  CHECK(m != NULL);
  if (!m) return;
  wf_pass_dce(m);
  char *once = wf_ir_to_string(m);
  CHECK(once && !strstr(once, "struct S"));
  char *twice = once ? reprint(once, NULL) : NULL;
  CHECK_STR(twice, once);
  free(once);
  free(twice);
  wf_module_free(m);
}

/* tests/fuzz/ir.dict gives fuzz_ir the op names as tokens: its op_ lines
** are exactly the op table's names, one `op_NAME="NAME"` each. */
static void test_fuzz_dict(void) {
  char *dict = read_file("tests/fuzz/ir.dict");
  CHECK(dict != NULL);
  if (!dict) return;
  int nlines = 0;
  for (const char *p = dict; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
    if (strncmp(p, "op_", 3) == 0) nlines++;
  CHECK_INT(nlines, WF_OP__COUNT);
  for (int op = 0; op < WF_OP__COUNT; op++) {
    char line[80];
    snprintf(line, sizeof line, "\nop_%s=\"%s\"\n", wf_op_name(op), wf_op_name(op));
    if (!strstr(dict, line)) fprintf(stderr, "ir.dict lacks op_%s\n", wf_op_name(op));
    CHECK(strstr(dict, line) != NULL);
  }
  free(dict);
}

int main(void) {
  test_fuzz_dict();
  test_dead_struct();
  test_mutations();
  test_roundtrip_file();
  test_canonical();
  test_types_roundtrip();
  test_parse_errors();
  WTEST_DONE();
}
