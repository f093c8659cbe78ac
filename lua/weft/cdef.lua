-- The one ffi.cdef of weft: the C ABI of src/runtime/wf_rt.h (and the parts
-- declared beside it). LuaJIT refuses to redeclare a struct, so this module
-- declares everything once per LuaJIT state and is safe to require again
-- (busted re-requires modules between files).
local ffi = require "ffi"

local ABI_VERSION = 1

local decls = [[
/* ---- runtime (src/runtime/wf_rt.h) ---- */
typedef struct wf_buffer wf_buffer;
struct wf_buffer {
  int64_t refcount;
  void *ptr;
  size_t nbytes;
  int32_t device;
  int32_t flags;
  void (*release)(wf_buffer *b);
  void *ctx;
};
typedef struct wf_array {
  void *data;
  int64_t shape[4];
  int64_t strides[4];
  int64_t size;
  int32_t ndim;
  int32_t dtype;
  int32_t device;
  int32_t flags;
  int32_t elsize;
  int32_t pad_;
  wf_buffer *buf;
} wf_array;
/* The Lua-visible array: a wrapper so the API names (shape, dtype, ...)
** come from the metatype, not from the C header's fields. */
typedef struct weft_Array { wf_array h; } weft_Array;
typedef struct wf_rt wf_rt;
int wf_abi_version(void);
wf_rt *wf_rt_new(void);
void wf_rt_free(wf_rt *rt);
const char *wf_rt_errmsg(wf_rt *rt);
int wf_rt_num_threads(wf_rt *rt);
int wf_rt_set_num_threads(wf_rt *rt, int n);
int wf_rt_set_cell_order(wf_rt *rt, int on);
void wf_rt_attach_intr(wf_rt *rt, void *intr);
int wf_buffer_new(wf_rt *rt, int32_t device, size_t nbytes, wf_buffer **out);
int wf_buffer_wrap(wf_rt *rt, int32_t device, void *ptr, size_t nbytes,
                   void (*release_fn)(wf_buffer *), void *ctx, wf_buffer **out);
void wf_buffer_retain(wf_buffer *b);
void wf_buffer_release(wf_buffer *b);
void wf_array_release(wf_array *a);
int wf_array_copy(wf_rt *rt, wf_array *dst, const wf_array *src);
int wf_array_fill(wf_rt *rt, wf_array *dst, const void *value);
int wf_array_is_contiguous(const wf_array *a);
int wf_device_count(wf_rt *rt);
const char *wf_device_name(wf_rt *rt, int32_t device);

/* ---- launches (src/runtime/wf_launch.h) ---- */
int wf_cpu_launch(wf_rt *rt, void *fn, int ndim, const int64_t *dims, const void *args,
                  int64_t cost);

/* ---- interop (src/interop/interop.h) ---- */
int wf_dlpack_export(wf_rt *rt, const wf_array *a, int versioned, int code, int bits,
                     int ntrail, const int64_t *trail, uint64_t flags, void **out);
int wf_dlpack_import(wf_rt *rt, void *managed, int versioned, int ntrail,
                     const int64_t *trail, wf_array *out, const char **scalar);
void wf_dlpack_delete(void *managed, int versioned);
/* ---- end interop ---- */
/* ---- cuda (src/runtime/wf_cudadrv.h) ---- */
int wf_cuda_available(wf_rt *rt);
int wf_cuda_device_info(wf_rt *rt, int32_t dev, char *name, size_t namelen,
                        int *cc_major, int *cc_minor, size_t *total_mem);
int wf_cuda_module_load(wf_rt *rt, int32_t dev, const void *image, size_t size, void **module);
int wf_cuda_module_unload(wf_rt *rt, int32_t dev, void *module);
void wf_cuda_module_release(void *module);
int wf_cuda_module_function(wf_rt *rt, void *module, const char *name, void **fn);
int wf_cuda_launch(wf_rt *rt, int32_t dev, void *fn, int ndim, const int64_t *dims,
                   int nargs, void **args, int block_size, int verify, void *stream);
int wf_cuda_stream_new(wf_rt *rt, int32_t dev, void **out);
void wf_cuda_stream_release(void *s);
int wf_cuda_stream_synchronize(wf_rt *rt, void *s);
int wf_cuda_stream_wait_event(wf_rt *rt, void *s, void *e);
int wf_cuda_set_stream(wf_rt *rt, int32_t dev, void *s);
int wf_cuda_event_new(wf_rt *rt, int32_t dev, int timing, void **out);
void wf_cuda_event_release(void *e);
int wf_cuda_event_record(wf_rt *rt, void *e, void *s);
int wf_cuda_event_synchronize(wf_rt *rt, void *e);
int wf_cuda_event_elapsed(wf_rt *rt, void *start, void *end, float *ms);
int wf_cuda_host_alloc(wf_rt *rt, size_t nbytes, wf_buffer **out);
int wf_cuda_synchronize(wf_rt *rt, int32_t dev);
int wf_cuda_capture_begin(wf_rt *rt, int32_t dev);
int wf_cuda_capture_end(wf_rt *rt, int32_t dev, void **graph);
int wf_cuda_graph_launch(wf_rt *rt, int32_t dev, void *graph);
void wf_cuda_graph_free(wf_rt *rt, void *graph);
/* ---- end cuda ---- */
]]

-- Declare once per LuaJIT state: probing a declared type is cheap and does
-- not throw once it exists.
if not pcall(ffi.typeof, "wf_array") then
  ffi.cdef(decls)
end

local M = { ABI_VERSION = ABI_VERSION }

-- Find the library: symbols already in the process (the weft host, or a C
-- host linking libweft), else WEFT_LIB, else package.cpath, else the build
-- tree of a source checkout.
local function find_library()
  local ok = pcall(function() return ffi.C.wf_abi_version end)
  if ok then return ffi.C, nil end
  local candidates = {}
  local env = os.getenv("WEFT_LIB")
  if env and env ~= "" then candidates[#candidates + 1] = env end
  local p = package.searchpath("libweft", package.cpath)
  if p then candidates[#candidates + 1] = p end
  local here = debug.getinfo(1, "S").source:match("^@(.*)/weft/cdef%.lua$")
  if here then
    candidates[#candidates + 1] = here .. "/../build/libweft.so"
    candidates[#candidates + 1] = here .. "/../../lib/libweft.so"
  end
  local errs = {}
  for _, path in ipairs(candidates) do
    local okl, lib = pcall(ffi.load, path)
    if okl then return lib, path end
    errs[#errs + 1] = tostring(lib)
  end
  error("weft: cannot find libweft (set WEFT_LIB to its path): " .. table.concat(errs, "; "), 0)
end

-- busted resets package.loaded between spec files, so this module runs again
-- in the same LuaJIT state: keep what was found in the registry.
local reg = debug.getregistry()
local found = reg["weft.library"]
if not found then
  local C, path = find_library()
  found = { C = C, path = path }
  reg["weft.library"] = found
end
M.C, M.libpath = found.C, found.path
local abi = M.C.wf_abi_version()
if abi ~= ABI_VERSION then
  error(string.format("weft: libweft ABI %d does not match the Lua layer's %d", abi, ABI_VERSION), 0)
end

-- Declare more C functions (used by the parts); ignores redeclaration.
function M.declare(text)
  local ok, err = pcall(ffi.cdef, text)
  if not ok and not tostring(err):match("redefin") and not tostring(err):match("attempt to redefine") then
    error(err, 2)
  end
end

return M
