/* GCC 12.2 (Debian 12's) at -O2 compiles f to a bare return: its SLP
** vectorizer takes the two adjacent (double)(float) round trips for no-ops
** (CMakeLists.txt runs this at configure time and, when it exits 1,
** compiles weft without SLP vectorization but in files checked for the
** pattern). */
#include <stdlib.h>

__attribute__((noinline)) void f(double *p) {
  float a = (float)p[0], b = (float)p[1];
  p[0] = a, p[1] = b;
}

int main(void) {
  double p[2] = {0.1, 0.2};
  f(p);
  return p[0] == (double)(float)0.1 && p[1] == (double)(float)0.2 ? 0 : 1;
}
