/* wtest.h -- minimal assertions for the C tests: count failures, keep going,
** print each failure with its line, and report at the end. */
#ifndef WTEST_H
#define WTEST_H
#include <stdio.h>
#include <string.h>

static int wtest_failures, wtest_checks;

#define CHECK(c)                                                                   \
  do {                                                                             \
    wtest_checks++;                                                                \
    if (!(c)) {                                                                    \
      wtest_failures++;                                                            \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);       \
    }                                                                              \
  } while (0)
#define CHECK_INT(a, b)                                                            \
  do {                                                                             \
    long long wa_ = (long long)(a), wb_ = (long long)(b);                         \
    wtest_checks++;                                                                \
    if (wa_ != wb_) {                                                              \
      wtest_failures++;                                                            \
      fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #a, \
              wa_, wb_);                                                           \
    }                                                                              \
  } while (0)
#define CHECK_STR(a, b)                                                            \
  do {                                                                             \
    const char *wa_ = (a), *wb_ = (b);                                             \
    wtest_checks++;                                                                \
    if (!wa_ || strcmp(wa_, wb_) != 0) {                                           \
      wtest_failures++;                                                            \
      fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, \
              #a, wa_ ? wa_ : "(null)", wb_);                                      \
    }                                                                              \
  } while (0)
#define CHECK_CONTAINS(a, b)                                                       \
  do {                                                                             \
    const char *wa_ = (a), *wb_ = (b);                                             \
    wtest_checks++;                                                                \
    if (!wa_ || !strstr(wa_, wb_)) {                                               \
      wtest_failures++;                                                            \
      fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, \
              wa_ ? wa_ : "(null)", wb_);                                          \
    }                                                                              \
  } while (0)

static inline int wtest_report(const char *name) {
  printf("%s: %d checks, %d failed\n", name, wtest_checks, wtest_failures);
  return wtest_failures ? 1 : 0;
}
#endif
