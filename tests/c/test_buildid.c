/*
** test_buildid.c -- src/util/buildid.c: the build id the disk cache keys
** hold is the one the linker wrote (readelf -n agrees), and the note
** parser takes only a well-formed NT_GNU_BUILD_ID note.
*/
#include <elf.h>
#include <link.h> /* ElfW */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/buildid.h"
#include "wtest.h"

/* "Build ID: <hex>" of readelf -n on path into out, or "" when readelf
** is missing or prints none. */
static void readelf_id(const char *path, char *out, size_t n) {
  char cmd[256], line[512];
  out[0] = '\0';
  snprintf(cmd, sizeof cmd, "readelf -n %s 2>/dev/null", path);
  FILE *p = popen(cmd, "r");
  if (!p) return;
  while (fgets(line, sizeof line, p)) {
    const char *s = strstr(line, "Build ID: ");
    if (!s || out[0]) continue;
    snprintf(out, n, "%s", s + 10);
    out[strcspn(out, " \r\n")] = '\0';
  }
  pclose(p);
}

static void test_self(void) {
  char id[320], want[256], full[300], exe[200];
  int kind = wf_build_id(id, sizeof id);
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1); /* the shell's is readelf's */
  exe[len > 0 ? len : 0] = '\0';
  readelf_id(exe, want, sizeof want);
  if (want[0]) {
    /* this test links the static library: the code is the executable's */
    CHECK_INT(kind, 1);
    snprintf(full, sizeof full, "build-id %s", want);
    CHECK_STR(id, full);
  } else {
    fprintf(stderr, "test_buildid: readelf found no build id; checking the fallback only\n");
    CHECK(kind == 2 || kind == 0);
  }
  /* stable within a process */
  char again[320];
  wf_build_id(again, sizeof again);
  CHECK_STR(again, id);
  /* a buffer too small for anything: empty, not overrun */
  char tiny[4] = "xyz";
  CHECK_INT(wf_build_id(tiny, 3), 0);
  CHECK_STR(tiny, "");
}

/* A note (header, name, descriptor, each padded to 4 bytes) at p. */
static size_t put_note(unsigned char *p, uint32_t type, const char *name, uint32_t namesz,
                       const unsigned char *desc, uint32_t descsz) {
  ElfW(Nhdr) h = {namesz, descsz, type};
  memcpy(p, &h, sizeof h);
  size_t off = sizeof h;
  memset(p + off, 0, (namesz + 3) & ~3u);
  memcpy(p + off, name, namesz);
  off += (namesz + 3) & ~3u;
  memset(p + off, 0, (descsz + 3) & ~3u);
  memcpy(p + off, desc, descsz);
  return off + ((descsz + 3) & ~3u);
}

static void test_notes(void) {
  static const unsigned char d[5] = {0xde, 0xad, 0x01, 0xbe, 0xef};
  unsigned char buf[256];
  char out[64];
  /* another note first (an ABI tag), then the build id */
  size_t n = put_note(buf, NT_GNU_ABI_TAG, "GNU", 4, d, 4);
  n += put_note(buf + n, NT_GNU_BUILD_ID, "GNU", 4, d, 5);
  CHECK_INT(wf_build_id_from_notes(buf, n, out, sizeof out), 1);
  CHECK_STR(out, "dead01beef");
  /* truncated output: whole bytes only */
  CHECK_INT(wf_build_id_from_notes(buf, n, out, 6), 1);
  CHECK_STR(out, "dead");
  /* the right type from another vendor is not a build id */
  n = put_note(buf, NT_GNU_BUILD_ID, "XYZ", 4, d, 5);
  CHECK_INT(wf_build_id_from_notes(buf, n, out, sizeof out), 0);
  /* a descriptor running past the segment ends the scan */
  n = put_note(buf, NT_GNU_BUILD_ID, "GNU", 4, d, 5);
  CHECK_INT(wf_build_id_from_notes(buf, n - 4, out, sizeof out), 0);
  ElfW(Nhdr) huge = {4, 0xfffffff0u, NT_GNU_BUILD_ID};
  memcpy(buf, &huge, sizeof huge);
  CHECK_INT(wf_build_id_from_notes(buf, 64, out, sizeof out), 0);
  CHECK_INT(wf_build_id_from_notes(buf, 3, out, sizeof out), 0); /* shorter than a header */
}

int main(void) {
  test_self();
  test_notes();
  WTEST_DONE();
}
