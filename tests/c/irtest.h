/*
** irtest.h -- tiny assertion helpers shared by the IR tests (tests/c).
** Each failed check prints file:line and the compared values; main returns
** the failure count through IRT_DONE.
*/
#ifndef WF_IRTEST_H
#define WF_IRTEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int irt_failures, irt_checks;

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    irt_checks++;                                                                                  \
    if (!(c)) {                                                                                    \
      irt_failures++;                                                                              \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                      \
    }                                                                                              \
  } while (0)

#define CHECK_INT(a, b)                                                                            \
  do {                                                                                             \
    long long a_ = (long long)(a), b_ = (long long)(b);                                            \
    irt_checks++;                                                                                  \
    if (a_ != b_) {                                                                                \
      irt_failures++;                                                                              \
      fprintf(stderr, "%s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #a, a_, b_);     \
    }                                                                                              \
  } while (0)

#define CHECK_STR(a, b)                                                                            \
  do {                                                                                             \
    const char *a_ = (a), *b_ = (b);                                                               \
    irt_checks++;                                                                                  \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                       \
      irt_failures++;                                                                              \
      fprintf(stderr, "%s:%d: %s\n--- got:\n%s\n--- expected:\n%s\n", __FILE__, __LINE__, #a,    \
              a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                             \
    }                                                                                              \
  } while (0)

/* Substring check, for error messages. */
#define CHECK_HAS(a, sub)                                                                          \
  do {                                                                                             \
    const char *a_ = (a), *s_ = (sub);                                                             \
    irt_checks++;                                                                                  \
    if (!a_ || !strstr(a_, s_)) {                                                                  \
      irt_failures++;                                                                              \
      fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,            \
              a_ ? a_ : "(null)", s_);                                                             \
    }                                                                                              \
  } while (0)

#define IRT_DONE()                                                                                 \
  do {                                                                                             \
    printf("%d checks, %d failures\n", irt_checks, irt_failures);                                  \
    return irt_failures ? 1 : 0;                                                                   \
  } while (0)

#endif
