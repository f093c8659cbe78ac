/*
** buildid.c -- the GNU build id of the object holding this code (see
** buildid.h). The object is the one whose PT_LOAD segments contain the
** address of `anchor`; its notes are read where the loader mapped them.
*/
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "util/buildid.h"

/* An object of this file: its address lies in libweft's own mapping. */
static const char anchor = 0;

int wf_build_id_from_notes(const void *p, size_t len, char *out, size_t n) {
  const unsigned char *b = p;
  size_t off = 0;
  while (len - off >= sizeof(ElfW(Nhdr))) {
    ElfW(Nhdr) nh;
    memcpy(&nh, b + off, sizeof nh);
    /* name and descriptor are padded to 4 bytes */
    size_t namesz = ((size_t)nh.n_namesz + 3) & ~(size_t)3;
    size_t descsz = ((size_t)nh.n_descsz + 3) & ~(size_t)3;
    size_t rest = len - off - sizeof nh;
    if (namesz > rest || descsz > rest - namesz) return 0;
    const unsigned char *name = b + off + sizeof nh, *desc = name + namesz;
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
        nh.n_descsz > 0) {
      static const char hex[] = "0123456789abcdef";
      size_t k = 0;
      for (size_t i = 0; i < nh.n_descsz && k + 2 < n; i++) {
        out[k++] = hex[desc[i] >> 4];
        out[k++] = hex[desc[i] & 15];
      }
      if (n > 0) out[k] = '\0';
      return 1;
    }
    off += sizeof nh + namesz + descsz;
  }
  return 0;
}

typedef struct probe {
  uintptr_t addr; /* an address inside the object we look for */
  char *out;
  size_t n;
  int found;
} probe;

/* dl_iterate_phdr callback: stops (returns 1) at the object holding
** pr->addr, after reading its build id if it has one. */
static int probe_object(struct dl_phdr_info *info, size_t size, void *arg) {
  probe *pr = arg;
  (void)size;
  int mine = 0;
  for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
    mine = ph->p_type == PT_LOAD && pr->addr >= lo && pr->addr - lo < (uintptr_t)ph->p_memsz;
  }
  if (!mine) return 0;
  for (int i = 0; i < info->dlpi_phnum && !pr->found; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const void *notes = (const void *)((uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr);
    pr->found = wf_build_id_from_notes(notes, (size_t)ph->p_memsz, pr->out, pr->n);
  }
  return 1;
}

int wf_build_id(char *out, size_t n) {
  static const char tag[] = "build-id ";
  if (n < sizeof tag + 2) {
    if (n > 0) out[0] = '\0';
    return 0;
  }
  memcpy(out, tag, sizeof tag - 1);
  probe pr = {(uintptr_t)&anchor, out + sizeof tag - 1, n - (sizeof tag - 1), 0};
  dl_iterate_phdr(probe_object, &pr);
  if (pr.found) return 1;
  /* no build id: the file's identity changes with every rebuild too */
  Dl_info di;
  const char *path =
      dladdr(&anchor, &di) && di.dli_fname && di.dli_fname[0] ? di.dli_fname : "/proc/self/exe";
  struct stat st;
  if (stat(path, &st) == 0) {
    snprintf(out, n, "file %s %lld %lld.%09ld %llu", path, (long long)st.st_size,
             (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec, (unsigned long long)st.st_ino);
    return 2;
  }
  snprintf(out, n, "unknown");
  return 0;
}
