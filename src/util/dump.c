/* dump.c -- WEFT_DUMP parsing (dump.h). */
#include <stdlib.h>
#include <string.h>

#include "util/dump.h"

int wf_dump_in(const char *spec, const char *stage) {
  if (!spec || !stage || !*stage) return 0;
  size_t n = strlen(stage);
  for (const char *p = spec; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && memcmp(p, stage, n) == 0) return 1;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

int wf_dump_wanted(const char *stage) {
  return wf_dump_in(getenv("WEFT_DUMP"), stage);
}
