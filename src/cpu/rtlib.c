/*
** rtlib.c -- C helpers that generated kernel code calls, and the table of
** symbols the JIT resolves explicitly (these helpers are hidden in libweft,
** so a process symbol search would not find them; libm is listed too so the
** kernels do not depend on what the process happens to export).
*/
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

/* The first failing thread wins the message slot. */
static int claim(wf_launch_ctx *ctx) {
  int32_t zero = 0;
  return __atomic_compare_exchange_n(&ctx->error, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

void wf_cpu_rt_oob(wf_launch_ctx *ctx, const char *where, int64_t index, int32_t axis, int64_t size,
                   const char *array) {
  if (!claim(ctx)) return;
  snprintf(ctx->msg, sizeof ctx->msg,
           "%s: index %" PRId64 " out of bounds for axis %d with size %" PRId64 " in array '%s'",
           where, index, (int)axis, size, array);
}

void wf_cpu_rt_trap(wf_launch_ctx *ctx, const char *where, const char *msg) {
  if (!claim(ctx)) return;
  snprintf(ctx->msg, sizeof ctx->msg, "%s: %s", where, msg);
}

/* A growable line buffer (stack first, heap when a line is long). */
typedef struct pbuf {
  char *s;
  size_t n, cap;
  char stack[512];
  int failed;
} pbuf;

static void pb_add(pbuf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = (b->n + n + 1) * 2;
    char *s2 = b->s == b->stack ? malloc(cap) : realloc(b->s, cap);
    if (!s2) {
      b->failed = 1;
      return;
    }
    if (b->s == b->stack) memcpy(s2, b->stack, b->n);
    b->s = s2;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
}

/* Format one value for the conversion `conv` with the flags/width/precision
** in spec (without the conversion letter), whatever the value's own type:
** integer conversions of floats truncate, float conversions of integers
** convert, %s prints the value as Lua's tostring would. */
static void pb_value(pbuf *b, const char *spec, char conv, char kind, int64_t bits) {
  char fmt[64], out[128];
  double d;
  memcpy(&d, &bits, sizeof d);
  int n = 0;
  if (conv == 's' || conv == 'v') {
    if (kind == 'b')
      n = snprintf(out, sizeof out, "%s", bits ? "true" : "false");
    else if (kind == 'f')
      n = snprintf(out, sizeof out, "%.14g", d);
    else if (kind == 'u')
      n = snprintf(out, sizeof out, "%" PRIu64, (uint64_t)bits);
    else
      n = snprintf(out, sizeof out, "%" PRId64, bits);
    snprintf(fmt, sizeof fmt, "%ss", spec);
    char out2[256];
    int m = snprintf(out2, sizeof out2, fmt, out);
    pb_add(b, out2, m < 0 ? 0 : (size_t)m < sizeof out2 ? (size_t)m : sizeof out2 - 1);
    return;
  }
  if (strchr("feEgGaA", conv)) {
    double v = kind == 'f' ? d : kind == 'u' ? (double)(uint64_t)bits : (double)bits;
    snprintf(fmt, sizeof fmt, "%s%c", spec, conv);
    n = snprintf(out, sizeof out, fmt, v);
  } else if (strchr("diouxXc", conv)) {
    int64_t v = kind == 'f' ? (int64_t)d : bits;
    if (conv == 'c') {
      snprintf(fmt, sizeof fmt, "%sc", spec);
      n = snprintf(out, sizeof out, fmt, (int)v);
    } else {
      snprintf(fmt, sizeof fmt, "%sll%c", spec, conv);
      n = snprintf(out, sizeof out, fmt, (long long)v);
    }
  }
  if (n > 0) pb_add(b, out, (size_t)n < sizeof out ? (size_t)n : sizeof out - 1);
}

void wf_cpu_rt_print(const char *fmt, int32_t n, const char *kinds, const int64_t *vals) {
  pbuf b = {.s = NULL, .n = 0, .cap = sizeof b.stack};
  b.s = b.stack;
  b.s[0] = '\0';
  int next = 0;
  const char *p = fmt ? fmt : "";
  while (*p) {
    const char *q = strchr(p, '%');
    if (!q) {
      pb_add(&b, p, strlen(p));
      break;
    }
    pb_add(&b, p, (size_t)(q - p));
    if (q[1] == '%') {
      pb_add(&b, "%", 1);
      p = q + 2;
      continue;
    }
    /* %[flags][width][.prec][length]conv */
    const char *r = q + 1;
    while (*r && strchr("-+ #0", *r))
      r++;
    while (*r >= '0' && *r <= '9')
      r++;
    if (*r == '.') {
      r++;
      while (*r >= '0' && *r <= '9')
        r++;
    }
    char spec[32];
    size_t sl = (size_t)(r - q);
    if (sl >= sizeof spec) sl = sizeof spec - 1;
    memcpy(spec, q, sl);
    spec[sl] = '\0';
    while (*r && strchr("hlLqjzt", *r))
      r++;
    char conv = *r;
    if (!conv || !strchr("diouxXcfeEgGaAsv", conv)) {
      pb_add(&b, q, (size_t)(r - q) + (conv ? 1 : 0));
      p = conv ? r + 1 : r;
      continue;
    }
    if (next < n) {
      pb_value(&b, spec, conv, kinds[next], vals[next]);
      next++;
    }
    p = r + 1;
  }
  /* values beyond the format: tab-separated, like Lua's print */
  for (; next < n; next++) {
    if (b.n > 0 && b.s[b.n - 1] != '\n') pb_add(&b, "\t", 1);
    pb_value(&b, "%", 's', kinds[next], vals[next]);
  }
  if (b.n == 0 || b.s[b.n - 1] != '\n') pb_add(&b, "\n", 1);
  if (!b.failed) {
    /* one locked write per line: lines from threads never interleave */
    flockfile(stdout);
    fwrite(b.s, 1, b.n, stdout);
    fflush(stdout);
    funlockfile(stdout);
  }
  if (b.s != b.stack) free(b.s);
}

static const wf_cpu_sym symbols[] = {
    {"wf_cpu_rt_oob", (void *)wf_cpu_rt_oob},
    {"wf_cpu_rt_trap", (void *)wf_cpu_rt_trap},
    {"wf_cpu_rt_print", (void *)wf_cpu_rt_print},
#define F1(name)                                                                                   \
  {#name, (void *)(double (*)(double))name}, {#name "f", (void *)(float (*)(float))name##f},
#define F2(name)                                                                                   \
  {#name, (void *)(double (*)(double, double))name},                                               \
      {#name "f", (void *)(float (*)(float, float))name##f},
    F1(sin) F1(cos) F1(tan) F1(asin) F1(acos) F1(atan) F1(sinh) F1(cosh) F1(tanh) F1(exp) F1(exp2)
        F1(log) F1(log2) F1(log10) F1(sqrt) F1(floor) F1(ceil) F1(round) F1(trunc) F1(rint)
            F1(nearbyint) F1(fabs) F2(atan2) F2(pow) F2(fmod) F2(fmin) F2(fmax)
#undef F1
#undef F2
                {"memcpy", (void *)memcpy},
    {"memset", (void *)memset},
    {"memmove", (void *)memmove},
    {NULL, NULL},
};

const wf_cpu_sym *wf_cpu_symbols(void) {
  return symbols;
}
