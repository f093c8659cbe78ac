/*
** diskcache.h -- the on-disk cache entries shared by the CPU objects
** (src/cpu/jit.c) and the CUDA images (src/cuda/nvrtc.c).
**
** Where: $WEFT_CACHE_DIR, else ~/.cache/weft; "0", "off" or an empty value
** disables the cache for both backends. The CPU keeps <dir>/<key>.o, CUDA
** <dir>/cuda/<key>.ptx|.cubin.
**
** An entry is a header and the payload:
**
**   +0   magic[8]     the backend's format tag ("WEFTOBJ2", "WEFTCU02")
**   +8   key[32]      hex of the 128-bit key the file is named after
**   +40  size         uint64, bytes of payload
**   +48  checksum     uint64 over key and payload (see diskcache.c)
**   +56  payload
**
** Reading never trusts the file: it is opened without blocking (a FIFO in
** its place must not hang), must be a regular file of sane size, and its
** header and checksum must match, or it is reported as damaged and the
** caller compiles again. Writing goes to a temporary file in the same
** directory that is renamed into place, so neither a crash mid-write nor
** two processes writing at once leave a torn entry.
*/
#ifndef WF_DISKCACHE_H
#define WF_DISKCACHE_H

#include <stddef.h>

#include "util/util.h"

#define WF_DCACHE_HEADER 56
#define WF_DCACHE_MAXSIZE ((size_t)1 << 30) /* payloads larger than this are damage */

/* The cache directory, with "/sub" appended when sub is not empty, into
** buf. 0 when the cache is disabled (or the path does not fit), else 1. */
WF_INTERNAL int wf_dcache_dir(const char *sub, char *buf, size_t n);

/* mkdir -p path; 0 on success. */
WF_INTERNAL int wf_dcache_mkdirs(const char *path);

/* Read the entry at path for key (32 hex digits) with format tag magic.
**   0   *data (malloc'd, NUL-terminated after *size bytes) holds the payload
**   1   no such entry (a plain miss)
**  -1   the entry is damaged: why holds the reason; the caller should warn
**       (wf_dcache_warn) and compile again. */
WF_INTERNAL int wf_dcache_read(const char *path, const char *magic, const char *key, char **data,
                               size_t *size, char *why, size_t whysize);

/* Write data as the entry at path (inside dir), atomically. 0 when the
** entry is in place; a failure only means the next run compiles again. */
WF_INTERNAL int wf_dcache_write(const char *dir, const char *path, const char *magic,
                                const char *key, const void *data, size_t size);

/* Remove a damaged entry and say so on stderr:
** "weft: warning: damaged cache entry <path> (<why>); compiling again". */
WF_INTERNAL void wf_dcache_warn(const char *path, const char *why);

#endif
