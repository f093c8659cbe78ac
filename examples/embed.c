/*
** embed.c -- a C host embedding weft: it owns a float buffer, shares it with
** Lua without copying (weft_wrap), runs a script that updates it, and reads
** the result back from its own memory.
**
**   build/embed            (run from the source tree)
*/
#include <stdio.h>
#include <stdlib.h>

#include "weft.h"

#define N 8

static const char *script =
    "-- `pos` is the host's own memory, wrapped without a copy\n"
    "assert(pos.dtype == weft.float32 and #pos == 8)\n"
    "for i = 0, #pos - 1 do pos[i] = pos[i] * 2 + 1 end\n";

int main(void) {
  float pos[N];
  for (int i = 0; i < N; i++) pos[i] = (float)i;

  weft_State *W = weft_open();
  if (!W) {
    fprintf(stderr, "embed: cannot open weft\n");
    return 1;
  }
  int64_t shape[1] = {N};
  if (weft_wrap(W, "pos", pos, "float32", 1, shape, "cpu") != WEFT_OK ||
      weft_dostring(W, script) != WEFT_OK) {
    fprintf(stderr, "embed: %s\n", weft_errmsg(W));
    weft_close(W);
    return 1;
  }
  weft_close(W);

  int ok = 1;
  for (int i = 0; i < N; i++) {
    printf("%g ", pos[i]);
    ok &= pos[i] == (float)(2 * i + 1);
  }
  printf("\n%s\n", ok ? "embed: ok" : "embed: WRONG");
  return ok ? 0 : 1;
}
