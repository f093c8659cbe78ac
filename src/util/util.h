/*
** util.h -- the bottom of the tree: plain C helpers that every folder may
** use and that use nothing of weft.
**
** Takes: libc (and POSIX for the disk cache). Gives:
**   arena.h      bump allocator freed in one go (IR modules, the front end)
**   sbuf.h       growable string for text emitters (IR printer, CUDA C)
**   hash.h       128-bit non-cryptographic hash naming cache entries
**   dump.h       WEFT_DUMP parsing (which stages print to stderr)
**   diskcache.h  checked, atomic cache entries on disk (CPU and CUDA)
**   buildid.h    libweft's own GNU build id, part of every cache key
**
** Dependencies point one way (tests/deps/check_includes.lua checks it):
**   util <- ir <- (front, ad) <- (cpu, cuda) <- runtime <- bindings
**        <- (interop, cli)
** A folder's .c and .h files include headers of their own folder and of the
** folders to their left only.
*/
#ifndef WF_UTIL_H
#define WF_UTIL_H

/* Internal linkage across the library's files: not exported from libweft. */
#ifndef WF_INTERNAL
#define WF_INTERNAL __attribute__((visibility("hidden")))
#endif

#endif
