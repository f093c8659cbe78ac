/*
** wtest.h -- the assertions of the C tests (tests/c): a failed check prints
** file:line and the compared values, and the test keeps going; main ends
** with WTEST_DONE(), which prints the counts and returns 1 on any failure.
*/
#ifndef WF_WTEST_H
#define WF_WTEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wtest_failures, wtest_checks;

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    wtest_checks++;                                                                                \
    if (!(c)) {                                                                                    \
      wtest_failures++;                                                                            \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                        \
    }                                                                                              \
  } while (0)

#define CHECK_INT(a, b)                                                                            \
  do {                                                                                             \
    long long a_ = (long long)(a), b_ = (long long)(b);                                            \
    wtest_checks++;                                                                                \
    if (a_ != b_) {                                                                                \
      wtest_failures++;                                                                            \
      fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #a, a_, b_);       \
    }                                                                                              \
  } while (0)

#define CHECK_STR(a, b)                                                                            \
  do {                                                                                             \
    const char *a_ = (a), *b_ = (b);                                                               \
    wtest_checks++;                                                                                \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                       \
      wtest_failures++;                                                                            \
      fprintf(stderr, "%s:%d: %s\n--- got:\n%s\n--- expected:\n%s\n", __FILE__, __LINE__, #a,      \
              a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                             \
    }                                                                                              \
  } while (0)

/* Substring check, for error messages. */
#define CHECK_HAS(a, sub)                                                                          \
  do {                                                                                             \
    const char *a_ = (a), *s_ = (sub);                                                             \
    wtest_checks++;                                                                                \
    if (!a_ || !strstr(a_, s_)) {                                                                  \
      wtest_failures++;                                                                            \
      fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,               \
              a_ ? a_ : "(null)", s_);                                                             \
    }                                                                                              \
  } while (0)

#define WTEST_DONE()                                                                               \
  do {                                                                                             \
    printf("%d checks, %d failures\n", wtest_checks, wtest_failures);                              \
    return wtest_failures ? 1 : 0;                                                                 \
  } while (0)

#endif
