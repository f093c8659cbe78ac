/*
** types.c -- the wf_types interning context.
**
** Every type is allocated once per context and compared by pointer. The
** context keeps a growable array of owned types; lookups scan it (modules
** use a few dozen types, so a linear scan is cheaper than a hash table).
**
** C layout (the run-time representation shared with hosts):
**   bool 1, intN/floatN N/8 bytes, align = size
**   vecN<s>     N * sizeof(s), align of s      (vec3f: 12 bytes, align 4)
**   matRC<s>    R * C * sizeof(s), row-major
**   quat<s>     4 scalars (x y z w); transform<s>: 7 scalars (p, q)
**   array<e,n>  a pointer to the array header (8 bytes on 64-bit hosts)
**   rng         uint32 counter
**   struct      the caller's field offsets; size rounded up to its align
*/
#include <stdlib.h>
#include <string.h>

#include "ir/abi.h"
#include "ir/ir.h"

struct wf_types {
  wf_type **all;
  int n, cap;
};

wf_types *wf_types_new(void) {
  return calloc(1, sizeof(wf_types));
}

/* Frees every type with its owned name and field array. */
void wf_types_free(wf_types *T) {
  if (!T) return;
  for (int i = 0; i < T->n; i++) {
    wf_type *t = T->all[i];
    free((void *)t->name);
    if (t->fields) {
      for (int k = 0; k < t->nfields; k++)
        free((void *)t->fields[k].name);
      free((void *)t->fields);
    }
    free(t);
  }
  free(T->all);
  free(T);
}

static char *dupstr(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* Linear search for a non-struct type with the same key fields. */
static const wf_type *find(wf_types *T, const wf_type *k) {
  for (int i = 0; i < T->n; i++) {
    const wf_type *t = T->all[i];
    if (t->kind == k->kind && t->bits == k->bits && t->is_signed == k->is_signed &&
        t->rows == k->rows && t->cols == k->cols && t->ndim == k->ndim && t->elem == k->elem &&
        t->kind != WF_T_STRUCT)
      return t;
  }
  return NULL;
}

/* Copies the key into a new owned type (name computed by wf_t_snprint). */
static const wf_type *add(wf_types *T, const wf_type *k) {
  if (T->n == T->cap) {
    int nc = T->cap ? T->cap * 2 : 32;
    wf_type **na = realloc(T->all, (size_t)nc * sizeof(*na));
    if (!na) return NULL;
    T->all = na;
    T->cap = nc;
  }
  wf_type *t = malloc(sizeof(*t));
  if (!t) return NULL;
  *t = *k;
  t->lua_id = -1;
  if (t->kind != WF_T_STRUCT) {
    char buf[320];
    t->name = NULL;
    wf_t_snprint(t, buf, sizeof buf);
    t->name = dupstr(buf);
  }
  T->all[T->n++] = t;
  return t;
}

static const wf_type *intern(wf_types *T, const wf_type *k) {
  const wf_type *t = find(T, k);
  return t ? t : add(T, k);
}

const wf_type *wf_t_void(wf_types *T) {
  wf_type k = {.kind = WF_T_VOID, .size = 0, .align = 1};
  return intern(T, &k);
}

const wf_type *wf_t_bool(wf_types *T) {
  wf_type k = {.kind = WF_T_BOOL, .bits = 8, .size = 1, .align = 1};
  return intern(T, &k);
}

const wf_type *wf_t_int(wf_types *T, int bits, int is_signed) {
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64) return NULL;
  wf_type k = {.kind = WF_T_INT, .bits = (uint8_t)bits, .is_signed = !!is_signed};
  k.size = k.align = (uint32_t)bits / 8;
  return intern(T, &k);
}

const wf_type *wf_t_float(wf_types *T, int bits) {
  if (bits != 16 && bits != 32 && bits != 64) return NULL;
  wf_type k = {.kind = WF_T_FLOAT, .bits = (uint8_t)bits};
  k.size = k.align = (uint32_t)bits / 8;
  return intern(T, &k);
}

/* Shared by vec/mat/quat/transform: ncomp scalars of `scalar`. */
static const wf_type *composite(wf_types *T, wf_tkind kind, int rows, int cols, int ncomp,
                                const wf_type *scalar) {
  if (!scalar || !wf_t_is_scalar(scalar) || rows < 1 || rows > 255 || cols < 1 || cols > 255)
    return NULL;
  wf_type k = {.kind = kind, .rows = (uint8_t)rows, .cols = (uint8_t)cols, .elem = scalar};
  k.ncomp = ncomp;
  k.size = (uint32_t)ncomp * scalar->size;
  k.align = scalar->align;
  return intern(T, &k);
}

const wf_type *wf_t_vec(wf_types *T, int n, const wf_type *scalar) {
  return composite(T, WF_T_VEC, n, 1, n, scalar);
}

const wf_type *wf_t_mat(wf_types *T, int rows, int cols, const wf_type *scalar) {
  /* range first: rows * cols of unchecked sizes overflows int */
  if (rows < 1 || rows > 255 || cols < 1 || cols > 255) return NULL;
  return composite(T, WF_T_MAT, rows, cols, rows * cols, scalar);
}

const wf_type *wf_t_quat(wf_types *T, const wf_type *scalar) {
  return composite(T, WF_T_QUAT, 4, 1, 4, scalar);
}

const wf_type *wf_t_transform(wf_types *T, const wf_type *scalar) {
  return composite(T, WF_T_TRANSFORM, 7, 1, 7, scalar);
}

const wf_type *wf_t_array(wf_types *T, const wf_type *elem, int ndim) {
  if (!elem || elem->kind == WF_T_ARRAY || elem->kind == WF_T_VOID || ndim < 1 || ndim > 4)
    return NULL;
  wf_type k = {.kind = WF_T_ARRAY, .ndim = (uint8_t)ndim, .elem = elem};
  /* As a struct field an array is its kernel header (data, shape,
  ** strides) by value, the layout CUDA kernels take; a parameter's slot
  ** holds a header pointer instead (cpu/entry.c). */
  k.size = WF_ARR_KERNEL_BYTES;
  k.align = (uint32_t)sizeof(void *);
  return intern(T, &k);
}

const wf_type *wf_t_rng(wf_types *T) {
  wf_type k = {.kind = WF_T_RNG, .size = 4, .align = 4};
  return intern(T, &k);
}

/* Equal name and identical field list (names, types, offsets). */
static int same_struct(const wf_type *t, const char *name, int n, const wf_field *f) {
  if (t->kind != WF_T_STRUCT || t->nfields != n || strcmp(t->name, name) != 0) return 0;
  for (int i = 0; i < n; i++)
    if (t->fields[i].type != f[i].type || t->fields[i].offset != f[i].offset ||
        strcmp(t->fields[i].name, f[i].name) != 0)
      return 0;
  return 1;
}

const wf_type *wf_t_struct(wf_types *T, const char *name, int nfields, const wf_field *fields) {
  if (!name || nfields < 0) return NULL;
  for (int i = 0; i < T->n; i++)
    if (same_struct(T->all[i], name, nfields, fields)) return T->all[i];
  wf_type k = {.kind = WF_T_STRUCT, .align = 1, .nfields = nfields};
  uint32_t end = 0;
  for (int i = 0; i < nfields; i++) {
    const wf_type *ft = fields[i].type;
    if (!ft || !fields[i].name) return NULL;
    if (ft->align > k.align) k.align = ft->align;
    if (fields[i].offset + ft->size > end) end = fields[i].offset + ft->size;
  }
  k.size = (end + k.align - 1) / k.align * k.align;
  wf_field *fc = calloc(nfields ? (size_t)nfields : 1, sizeof(*fc));
  char *nm = dupstr(name);
  int ok = fc && nm;
  for (int i = 0; ok && i < nfields; i++) {
    fc[i] = fields[i];
    fc[i].name = dupstr(fields[i].name);
    ok = fc[i].name != NULL;
  }
  k.fields = fc;
  k.name = nm;
  const wf_type *t = ok ? add(T, &k) : NULL;
  if (!t) {
    for (int i = 0; fc && i < nfields; i++)
      free((void *)fc[i].name);
    free(fc);
    free(nm);
  }
  return t;
}

/* Finds an interned struct by name (the parser's fallback when the text has
** no declaration); the first one registered wins. */
const wf_type *wf_t_find_struct(wf_types *T, const char *name) {
  for (int i = 0; i < T->n; i++)
    if (T->all[i]->kind == WF_T_STRUCT && strcmp(T->all[i]->name, name) == 0) return T->all[i];
  return NULL;
}

int wf_t_is_scalar(const wf_type *t) {
  return t && (t->kind == WF_T_BOOL || t->kind == WF_T_INT || t->kind == WF_T_FLOAT);
}
int wf_t_is_float(const wf_type *t) {
  return t && t->kind == WF_T_FLOAT;
}
int wf_t_is_int(const wf_type *t) {
  return t && t->kind == WF_T_INT;
}

int wf_t_arity(const wf_type *t) {
  if (!t) return 0;
  switch (t->kind) {
  case WF_T_VEC: return t->rows;
  case WF_T_MAT: return t->rows;
  case WF_T_QUAT: return 4;
  case WF_T_TRANSFORM: return 2;
  case WF_T_STRUCT: return t->nfields;
  default: return 0;
  }
}

const wf_type *wf_t_component(wf_types *T, const wf_type *t, int i) {
  if (!t || i < 0 || i >= wf_t_arity(t)) return NULL;
  switch (t->kind) {
  case WF_T_VEC:
  case WF_T_QUAT: return t->elem;
  case WF_T_MAT: return wf_t_vec(T, t->cols, t->elem);
  case WF_T_TRANSFORM: return i == 0 ? wf_t_vec(T, 3, t->elem) : wf_t_quat(T, t->elem);
  case WF_T_STRUCT: return t->fields[i].type;
  default: return NULL;
  }
}

/* Warp's suffix letters for the scalar of a vector type name (vec3f, vec2ub),
** or NULL when the scalar has none (bool): then the generic form is used. */
static const char *suffix(const wf_type *s) {
  if (s->kind == WF_T_FLOAT) return s->bits == 16 ? "h" : s->bits == 32 ? "f" : "d";
  if (s->kind != WF_T_INT) return NULL;
  switch (s->bits) {
  case 8: return s->is_signed ? "b" : "ub";
  case 16: return s->is_signed ? "s" : "us";
  case 32: return s->is_signed ? "i" : "ui";
  default: return s->is_signed ? "l" : "ul";
  }
}

/* snprintf that tolerates a NULL/zero-size buffer and accumulates length. */
#define APP(...)                                                                                   \
  do {                                                                                             \
    int k_ = snprintf(n > (size_t)len ? buf + len : NULL, n > (size_t)len ? n - (size_t)len : 0,   \
                      __VA_ARGS__);                                                                \
    if (k_ > 0) len += k_;                                                                         \
  } while (0)

int wf_t_snprint(const wf_type *t, char *buf, size_t n) {
  int len = 0;
  char sub[288];
  if (!t) {
    APP("<null>");
    return len;
  }
  if (t->name && t->kind != WF_T_STRUCT) {
    APP("%s", t->name);
    return len;
  }
  const char *sx = t->elem ? suffix(t->elem) : NULL;
  if (t->elem) wf_t_snprint(t->elem, sub, sizeof sub);
  switch (t->kind) {
  case WF_T_VOID: APP("void"); break;
  case WF_T_BOOL: APP("bool"); break;
  case WF_T_INT: APP("%c%d", t->is_signed ? 'i' : 'u', t->bits); break;
  case WF_T_FLOAT: APP("f%d", t->bits); break;
  case WF_T_VEC:
    if (sx)
      APP("vec%d%s", t->rows, sx);
    else
      APP("vec%d<%s>", t->rows, sub);
    break;
  case WF_T_MAT:
    if (sx && t->rows < 10 && t->cols < 10)
      APP("mat%d%d%s", t->rows, t->cols, sx);
    else
      APP("mat<%d,%d,%s>", t->rows, t->cols, sub);
    break;
  case WF_T_QUAT:
    if (sx)
      APP("quat%s", sx);
    else
      APP("quat<%s>", sub);
    break;
  case WF_T_TRANSFORM:
    if (sx)
      APP("transform%s", sx);
    else
      APP("transform<%s>", sub);
    break;
  case WF_T_STRUCT: APP("struct.%s", t->name); break;
  case WF_T_ARRAY: APP("array<%s,%d>", sub, t->ndim); break;
  case WF_T_RNG: APP("rng"); break;
  }
  return len;
}
#undef APP

void wf_t_print(const wf_type *t, FILE *f) {
  char buf[256];
  wf_t_snprint(t, buf, sizeof buf);
  fputs(buf, f);
}
