/*
** nvrtc.c -- CUDA C -> PTX/CUBIN with NVRTC, PTX -> CUBIN with nvJitLink,
** both loaded with dlopen, and the disk cache of the results.
**
** Search order for each library: $WEFT_NVRTC (nvrtc only), the plain
** soname (ld.so paths), $CUDA_HOME/lib64, the toolkit configured at build
** time (WEFT_CUDA_HOME, /usr/local/cuda).
**
** Cache: <dir>/cuda/<key>.ptx or .cubin, dir = $WEFT_CACHE_DIR or
** ~/.cache/weft ("0", "off" or empty disables it, as for the CPU). key =
** 128-bit hash of the source, the target, the options, the NVRTC version
** ($WEFT_NVRTC too) and libweft's build id (src/util/buildid.h). Entries are checksummed
** and written atomically (temp file + rename): src/util/diskcache.h; a
** damaged one is compiled again with a warning.
*/
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda/wf_cuda.h"
#include "util/buildid.h"
#include "util/diskcache.h"
#include "util/hash.h"

#define CACHE_MAGIC "WEFTCU02" /* entry format tag, also part of the key */

#ifndef WEFT_CUDA_HOME
#define WEFT_CUDA_HOME "/usr/local/cuda"
#endif

typedef int nvrtcResult;
typedef void *nvrtcProgram;
typedef void *nvJitLinkHandle;
#define NVJITLINK_INPUT_PTX 2

struct wf_nvrtc {
  void *lib, *jitlib;
  int major, minor;
  nvrtcResult (*Version)(int *, int *);
  nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                               const char *const *);
  nvrtcResult (*DestroyProgram)(nvrtcProgram *);
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetPTX)(nvrtcProgram, char *);
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
  const char *(*GetErrorString)(nvrtcResult);
  /* nvJitLink (lazy) */
  int (*JLCreate)(nvJitLinkHandle *, uint32_t, const char **);
  int (*JLDestroy)(nvJitLinkHandle *);
  int (*JLAddData)(nvJitLinkHandle, int, const void *, size_t, const char *);
  int (*JLComplete)(nvJitLinkHandle);
  int (*JLCubinSize)(nvJitLinkHandle, size_t *);
  int (*JLErrorLogSize)(nvJitLinkHandle, size_t *);
  int (*JLErrorLog)(nvJitLinkHandle, char *);
};

/* dlopen the first candidate that loads. */
static void *open_lib(const char *env, const char *soname) {
  char path[600];
  const char *e = env ? getenv(env) : NULL;
  if (e && *e) {
    void *h = dlopen(e, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
  }
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (h) return h;
  const char *home = getenv("CUDA_HOME");
  if (home && *home) {
    snprintf(path, sizeof path, "%s/lib64/%s", home, soname);
    if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return h;
  }
  snprintf(path, sizeof path, "%s/lib64/%s", WEFT_CUDA_HOME, soname);
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

#define SYM(lib, field, name)                                                                      \
  do {                                                                                             \
    void *p_ = dlsym(lib, name);                                                                   \
    if (!p_) {                                                                                     \
      snprintf(err, errsize, "weft: %s is missing %s", #lib, name);                                \
      goto fail;                                                                                   \
    }                                                                                              \
    memcpy(&nv->field, &p_, sizeof p_);                                                            \
  } while (0)

wf_nvrtc *wf_nvrtc_open(char *err, size_t errsize) {
  wf_nvrtc *nv = calloc(1, sizeof *nv);
  if (!nv) {
    snprintf(err, errsize, "weft: out of memory");
    return NULL;
  }
  void *lib = nv->lib = open_lib("WEFT_NVRTC", "libnvrtc.so.13");
  if (!lib) lib = nv->lib = open_lib(NULL, "libnvrtc.so.12");
  if (!lib) {
    snprintf(err, errsize,
             "weft: NVRTC is not available: libnvrtc.so.13 not found (install the CUDA toolkit or "
             "set CUDA_HOME)");
    goto fail;
  }
  SYM(lib, Version, "nvrtcVersion");
  SYM(lib, CreateProgram, "nvrtcCreateProgram");
  SYM(lib, DestroyProgram, "nvrtcDestroyProgram");
  SYM(lib, CompileProgram, "nvrtcCompileProgram");
  SYM(lib, GetPTXSize, "nvrtcGetPTXSize");
  SYM(lib, GetPTX, "nvrtcGetPTX");
  SYM(lib, GetCUBINSize, "nvrtcGetCUBINSize");
  SYM(lib, GetCUBIN, "nvrtcGetCUBIN");
  SYM(lib, GetProgramLogSize, "nvrtcGetProgramLogSize");
  SYM(lib, GetProgramLog, "nvrtcGetProgramLog");
  SYM(lib, GetErrorString, "nvrtcGetErrorString");
  nv->Version(&nv->major, &nv->minor);
  return nv;
fail:
  wf_nvrtc_close(nv);
  return NULL;
}

void wf_nvrtc_close(wf_nvrtc *nv) {
  if (!nv) return;
  if (nv->lib) dlclose(nv->lib);
  if (nv->jitlib) dlclose(nv->jitlib);
  free(nv);
}

int wf_nvrtc_version(wf_nvrtc *nv) {
  return nv->major * 1000 + nv->minor * 10;
}

/* ---- arch names --------------------------------------------------------- */
/* "80" -> compute_80, "sm_80" stays (CUBIN), "compute_80" stays (PTX).
** Returns 1 for CUBIN, 0 for PTX, -1 for a malformed name. */
static int norm_arch(const char *arch, char *out, size_t n) {
  const char *digits = arch;
  int cubin = 0;
  if (!arch || !*arch) arch = digits = "80";
  if (strncmp(arch, "sm_", 3) == 0) {
    cubin = 1;
    digits = arch + 3;
  } else if (strncmp(arch, "compute_", 8) == 0) {
    digits = arch + 8;
  }
  size_t k = 0;
  while (digits[k] >= '0' && digits[k] <= '9')
    k++;
  if (k < 2 || k > 3) return -1;
  if (digits[k] && !((digits[k] == 'a' || digits[k] == 'f') && !digits[k + 1])) return -1;
  snprintf(out, n, "%s_%s", cubin ? "sm" : "compute", digits);
  return cubin;
}

/* ---- error mapping ------------------------------------------------------ */
/* "file(12): error: x" -> "file:12: error: x", line by line. */
void wf_nvrtc_map_log(const char *log, char *out, size_t n) {
  size_t k = 0;
  if (!n) return;
  while (*log && k + 1 < n) {
    const char *eol = strchr(log, '\n');
    size_t len = eol ? (size_t)(eol - log) : strlen(log);
    const char *lp = memchr(log, '(', len);
    size_t d = lp ? 1 : 0;
    while (lp && lp + d < log + len && lp[d] >= '0' && lp[d] <= '9')
      d++;
    if (lp && d > 1 && lp + d + 1 < log + len && lp[d] == ')' && lp[d + 1] == ':') {
      /* file ":" digits ":" rest */
      int w = snprintf(out + k, n - k, "%.*s:%.*s%.*s", (int)(lp - log), log, (int)(d - 1), lp + 1,
                       (int)(len - (size_t)(lp + d + 1 - log)), lp + d + 1);
      k += w > 0 ? (size_t)w : 0;
    } else {
      int w = snprintf(out + k, n - k, "%.*s", (int)len, log);
      k += w > 0 ? (size_t)w : 0;
    }
    if (k >= n) {
      k = n - 1;
      break;
    }
    if (eol && k + 1 < n) out[k++] = '\n';
    log = eol ? eol + 1 : log + len;
  }
  out[k < n ? k : n - 1] = 0;
  /* drop a trailing newline */
  while (k > 0 && k < n && (out[k - 1] == '\n' || out[k - 1] == ' ' || out[k - 1] == '\0'))
    out[--k] = 0;
}

/* ---- cache -------------------------------------------------------------- */
int wf_cuda_cache_dir(char *buf, size_t n) {
  return wf_dcache_dir("cuda", buf, n);
}

/* The key of an image: every input of the compile (util/hash.h). */
static void cache_key(wf_nvrtc *nv, const char *src, const char *arch, const char *opts,
                      char out[33]) {
  char ver[32], bid[320];
  snprintf(ver, sizeof ver, "nvrtc %d.%d", nv->major, nv->minor);
  wf_build_id(bid, sizeof bid); /* the library's code: the prelude, the options it adds */
  wf_hash128 h;
  wf_hash_init(&h);
  wf_hash_str(&h, src);
  wf_hash_str(&h, bid);
  wf_hash_str(&h, arch);
  wf_hash_str(&h, opts);
  wf_hash_str(&h, ver);
  /* another NVRTC (the emulated device's pass-through) makes other images */
  const char *lib = getenv("WEFT_NVRTC");
  wf_hash_str(&h, lib ? lib : "");
  wf_hash_str(&h, CACHE_MAGIC);
  wf_hash_hex(&h, out);
}

/* ---- compile ------------------------------------------------------------ */
static void nv_fail(wf_nvrtc *nv, nvrtcResult r, const char *what, char *err, size_t errsize) {
  snprintf(err, errsize, "weft: NVRTC %s failed: %s", what, nv->GetErrorString(r));
}

int wf_nvrtc_compile(wf_nvrtc *nv, const char *src, const char *name, const char *arch,
                     const char *fast, wf_cuda_image *out, char *err, size_t errsize) {
  memset(out, 0, sizeof *out);
  char target[32], archopt[64];
  int cubin = norm_arch(arch, target, sizeof target);
  if (cubin < 0) {
    snprintf(err, errsize, "weft: bad CUDA architecture '%s' (expected sm_XX or compute_XX)",
             arch ? arch : "");
    return -1;
  }
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", target);
  /* -w: the log then holds only errors. --minimal (NVRTC 12.4+) leaves out
  ** the runtime API declarations, textures and device-side launches, which
  ** the emitted code never uses: a few ms less per cold compile. No
  ** -lineinfo: it only feeds profilers. */
  const char *opts[6] = {archopt, "-std=c++17", "-w", NULL, NULL, NULL};
  int nopts = 3;
  if (nv->major * 100 + nv->minor >= 1204) opts[nopts++] = "--minimal";
  /* --Ofast-compile (NVRTC 12.8+): NVVM's optimizer is most of a cold
  ** compile of a small kernel (~18 of ~30 ms for saxpy); "min" skips only
  ** its expensive passes, and ptxas still optimizes the PTX. */
  char fastopt[40];
  if (fast && strcmp(fast, "0") != 0) {
    if (strcmp(fast, "min") && strcmp(fast, "mid") && strcmp(fast, "max")) {
      snprintf(err, errsize, "weft: bad fast-compile level '%.12s' (expected 0, min, mid or max)",
               fast);
      return -1;
    }
    if (nv->major * 100 + nv->minor >= 1208) {
      snprintf(fastopt, sizeof fastopt, "--Ofast-compile=%s", fast);
      opts[nopts++] = fastopt;
    }
  }
  /* cache lookup */
  char dir[600], path[700], key[33];
  int cache = wf_cuda_cache_dir(dir, sizeof dir);
  if (cache) {
    char optstr[700] = "";
    for (int i = 0; i < nopts; i++) {
      size_t l = strlen(optstr);
      snprintf(optstr + l, sizeof optstr - l, "%s ", opts[i]);
    }
    cache_key(nv, src, target, optstr, key);
    snprintf(path, sizeof path, "%s/%s.%s", dir, key, cubin ? "cubin" : "ptx");
    char why[160];
    int rc = wf_dcache_read(path, CACHE_MAGIC, key, &out->data, &out->size, why, sizeof why);
    if (rc == 0) {
      out->is_cubin = cubin;
      out->from_cache = 1;
      return 0;
    }
    if (rc < 0) wf_dcache_warn(path, why);
  }
  nvrtcProgram prog = NULL;
  nvrtcResult r = nv->CreateProgram(&prog, src, name ? name : "weft.cu", 0, NULL, NULL);
  if (r) {
    nv_fail(nv, r, "program creation", err, errsize);
    return -1;
  }
  r = nv->CompileProgram(prog, nopts, opts);
  if (r) {
    size_t ls = 0;
    char *log = NULL;
    if (nv->GetProgramLogSize(prog, &ls) == 0 && ls > 1 && (log = malloc(ls + 1)) &&
        nv->GetProgramLog(prog, log) == 0) {
      log[ls] = 0;
      int w = snprintf(err, errsize, "weft: CUDA compilation failed:\n");
      if (w > 0 && (size_t)w < errsize) wf_nvrtc_map_log(log, err + w, errsize - (size_t)w);
    } else {
      nv_fail(nv, r, "compilation", err, errsize);
    }
    free(log);
    nv->DestroyProgram(&prog);
    return -1;
  }
  size_t size = 0;
  r = cubin ? nv->GetCUBINSize(prog, &size) : nv->GetPTXSize(prog, &size);
  char *data = r ? NULL : malloc(size + 1);
  if (!r && !data) {
    snprintf(err, errsize, "weft: out of memory");
    nv->DestroyProgram(&prog);
    return -1;
  }
  if (!r) r = cubin ? nv->GetCUBIN(prog, data) : nv->GetPTX(prog, data);
  nv->DestroyProgram(&prog);
  if (r) {
    free(data);
    nv_fail(nv, r, "result retrieval", err, errsize);
    return -1;
  }
  data[size] = 0;
  if (!cubin && size > 0 && data[size - 1] == 0) size--; /* PTX size counts the NUL */
  out->data = data;
  out->size = size;
  out->is_cubin = cubin;
  if (cache) wf_dcache_write(dir, path, CACHE_MAGIC, key, data, size);
  return 0;
}

void wf_cuda_image_free(wf_cuda_image *img) {
  if (!img) return;
  free(img->data);
  memset(img, 0, sizeof *img);
}

/* ---- nvJitLink ------------------------------------------------------------ */
#undef SYM
#define SYM(lib, field, name)                                                                      \
  do {                                                                                             \
    void *p_ = dlsym(lib, name);                                                                   \
    if (!p_) {                                                                                     \
      snprintf(err, errsize, "weft: nvJitLink is missing %s", name);                               \
      return -1;                                                                                   \
    }                                                                                              \
    memcpy(&nv->field, &p_, sizeof p_);                                                            \
  } while (0)

static int open_jitlink(wf_nvrtc *nv, char *err, size_t errsize) {
  if (nv->jitlib) return 0;
  void *lib = open_lib(NULL, "libnvJitLink.so.13");
  if (!lib) {
    snprintf(err, errsize, "weft: nvJitLink is not available (libnvJitLink.so.13 not found)");
    return -1;
  }
  nv->jitlib = lib;
  SYM(lib, JLCreate, "nvJitLinkCreate");
  SYM(lib, JLDestroy, "nvJitLinkDestroy");
  SYM(lib, JLAddData, "nvJitLinkAddData");
  SYM(lib, JLComplete, "nvJitLinkComplete");
  SYM(lib, JLCubinSize, "nvJitLinkGetLinkedCubinSize");
  SYM(lib, JLErrorLogSize, "nvJitLinkGetErrorLogSize");
  SYM(lib, JLErrorLog, "nvJitLinkGetErrorLog");
  return 0;
}

int wf_nvrtc_assemble(wf_nvrtc *nv, const char *ptx, const char *sm_arch, size_t *cubin_size,
                      char *err, size_t errsize) {
  if (open_jitlink(nv, err, errsize) != 0) return -1;
  char target[32], opt[64];
  if (norm_arch(sm_arch, target, sizeof target) < 0) {
    snprintf(err, errsize, "weft: bad CUDA architecture '%s'", sm_arch ? sm_arch : "");
    return -1;
  }
  const char *digits = strchr(target, '_') + 1;
  snprintf(opt, sizeof opt, "-arch=sm_%s", digits);
  const char *opts[1] = {opt};
  nvJitLinkHandle h = NULL;
  int r = nv->JLCreate(&h, 1, opts);
  if (r) {
    snprintf(err, errsize, "weft: nvJitLinkCreate failed (%d)", r);
    return -1;
  }
  r = nv->JLAddData(h, NVJITLINK_INPUT_PTX, ptx, strlen(ptx) + 1, "weft.ptx");
  if (!r) r = nv->JLComplete(h);
  if (r) {
    size_t ls = 0;
    char *log = NULL;
    if (nv->JLErrorLogSize(h, &ls) == 0 && ls > 1 && (log = malloc(ls + 1)) &&
        nv->JLErrorLog(h, log) == 0) {
      log[ls] = 0;
      snprintf(err, errsize, "weft: PTX assembly for %s failed: %s", opt + 6, log);
    } else {
      snprintf(err, errsize, "weft: PTX assembly for %s failed (nvJitLink error %d)", opt + 6, r);
    }
    free(log);
    nv->JLDestroy(&h);
    return -1;
  }
  size_t cs = 0;
  nv->JLCubinSize(h, &cs);
  if (cubin_size) *cubin_size = cs;
  nv->JLDestroy(&h);
  return 0;
}
