/*
** buildid.h -- an identifier of the code weft runs from, for the disk
** cache keys (src/cpu/jit.c, src/cuda/nvrtc.c): any rebuild with changed
** code must miss the entries an older build wrote.
**
** The GNU build id of the ELF object holding this code (libweft.so, or
** the executable that links the static library), read from its PT_NOTE
** segments in memory through dl_iterate_phdr. The linker derives it from
** the object's contents (Debian's ld passes --build-id by default; check
** with `readelf -n libweft.so`). Without one, the object file's identity
** (path, size, modification time, inode) stands in.
*/
#ifndef WF_BUILDID_H
#define WF_BUILDID_H

#include <stddef.h>

#include "util/util.h"

/* Writes "build-id <hex>" (or "file <path> <size> <mtime> <inode>", or
** "unknown") into out (n bytes, truncated, NUL-terminated). Returns 1 for
** a build id, 2 for the file fallback, 0 for unknown. */
WF_INTERNAL int wf_build_id(char *out, size_t n);

/* The hex digits of the first NT_GNU_BUILD_ID note among the notes at p
** (len bytes, as in a PT_NOTE segment) into out; 1 when found, else 0.
** Malformed notes end the scan. */
WF_INTERNAL int wf_build_id_from_notes(const void *p, size_t len, char *out, size_t n);

#endif
