/*
** diskcache.c -- checked, atomic cache entries on disk (see diskcache.h).
*/
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/diskcache.h"

int wf_dcache_dir(const char *sub, char *buf, size_t n) {
  const char *e = getenv("WEFT_CACHE_DIR");
  const char *sep = sub && *sub ? "/" : "";
  int w;
  if (e) {
    if (!*e || !strcmp(e, "0") || !strcmp(e, "off")) return 0;
    w = snprintf(buf, n, "%s%s%s", e, sep, sub ? sub : "");
  } else {
    const char *home = getenv("HOME");
    if (!home || !*home) return 0;
    w = snprintf(buf, n, "%s/.cache/weft%s%s", home, sep, sub ? sub : "");
  }
  return w > 0 && (size_t)w < n;
}

int wf_dcache_mkdirs(const char *path) {
  char buf[1024];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] == '/' || buf[i] == '\0') {
      char c = buf[i];
      buf[i] = '\0';
      if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
      buf[i] = c;
    }
  }
  return 0;
}

/* 64-bit checksum: 8 bytes at a time, each step (xor, odd multiply,
** xorshift) a bijection of the state, so a change confined to one word is
** always caught; wider damage slips through with odds of about 2^-64. */
static uint64_t checksum(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (; n >= 8; n -= 8, s += 8) {
    uint64_t w;
    memcpy(&w, s, 8);
    h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 29;
  }
  uint64_t w = 0; /* the tail (under 8 bytes), tagged with its length */
  memcpy(&w, s, n);
  h = (h ^ w ^ ((uint64_t)n << 56)) * 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 31);
}

static uint64_t entry_sum(const char *key, const void *data, size_t size) {
  uint64_t h = checksum(0x6a09e667f3bcc908ULL ^ size, key, 32);
  return checksum(h, data, size);
}

/* Read n bytes at fd into p (retrying short reads); 0 when all arrived. */
static int read_all(int fd, char *p, size_t n) {
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r, n -= (size_t)r;
  }
  return 0;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t r = write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r, n -= (size_t)r;
  }
  return 0;
}

#define WHY(...) (snprintf(why, whysize, __VA_ARGS__), -1)

static int read_entry(int fd, const char *magic, const char *key, char **data, size_t *size,
                      char *why, size_t whysize) {
  struct stat st;
  if (fstat(fd, &st) != 0) return WHY("cannot stat it");
  if (!S_ISREG(st.st_mode)) return WHY("not a regular file");
  if (st.st_size < WF_DCACHE_HEADER)
    return WHY("truncated header (%lld bytes)", (long long)st.st_size);
  if ((uint64_t)st.st_size > WF_DCACHE_HEADER + (uint64_t)WF_DCACHE_MAXSIZE)
    return WHY("too large (%lld bytes)", (long long)st.st_size);
  unsigned char hdr[WF_DCACHE_HEADER];
  if (read_all(fd, (char *)hdr, sizeof hdr) != 0) return WHY("cannot read the header");
  if (memcmp(hdr, magic, 8) != 0) return WHY("wrong format tag");
  if (memcmp(hdr + 8, key, 32) != 0) return WHY("holds another key");
  uint64_t n, sum;
  memcpy(&n, hdr + 40, 8);
  memcpy(&sum, hdr + 48, 8);
  if (n != (uint64_t)st.st_size - WF_DCACHE_HEADER)
    return WHY("size %llu in the header, %lld bytes in the file", (unsigned long long)n,
               (long long)(st.st_size - WF_DCACHE_HEADER));
  char *buf = malloc((size_t)n + 1);
  if (!buf) return 1; /* out of memory: a miss, not damage */
  if (read_all(fd, buf, (size_t)n) != 0) {
    free(buf);
    return WHY("cannot read the payload");
  }
  if (entry_sum(key, buf, (size_t)n) != sum) {
    free(buf);
    return WHY("checksum mismatch");
  }
  buf[n] = '\0';
  *data = buf;
  *size = (size_t)n;
  return 0;
}

int wf_dcache_read(const char *path, const char *magic, const char *key, char **data, size_t *size,
                   char *why, size_t whysize) {
  *data = NULL;
  *size = 0;
  if (whysize) why[0] = '\0';
  /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ENOTDIR ? 1 : WHY("cannot open it");
  int rc = read_entry(fd, magic, key, data, size, why, whysize);
  close(fd);
  return rc;
}

int wf_dcache_write(const char *dir, const char *path, const char *magic, const char *key,
                    const void *data, size_t size) {
  if (size > WF_DCACHE_MAXSIZE || wf_dcache_mkdirs(dir) != 0) return -1;
  char tmp[1200];
  int w = snprintf(tmp, sizeof tmp, "%s/.tmp-%.32s-XXXXXX", dir, key);
  if (w <= 0 || (size_t)w >= sizeof tmp) return -1;
  int fd = mkstemp(tmp);
  if (fd < 0) return -1;
  unsigned char hdr[WF_DCACHE_HEADER];
  uint64_t n = size, sum = entry_sum(key, data, size);
  memcpy(hdr, magic, 8);
  memcpy(hdr + 8, key, 32);
  memcpy(hdr + 40, &n, 8);
  memcpy(hdr + 48, &sum, 8);
  int ok = write_all(fd, (const char *)hdr, sizeof hdr) == 0 && write_all(fd, data, size) == 0 &&
           fchmod(fd, 0644) == 0;
  ok = close(fd) == 0 && ok;
  if (ok && rename(tmp, path) == 0) return 0;
  unlink(tmp);
  return -1;
}

void wf_dcache_warn(const char *path, const char *why) {
  fprintf(stderr, "weft: warning: damaged cache entry %s (%s); compiling again\n", path, why);
  unlink(path);
}
