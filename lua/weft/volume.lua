-- Sparse volumes: weft.Volume over NanoVDB grids (src/geom/nanovdb.c reads,
-- checks and writes them; src/geom/volume.h samples them in kernels).
--
--   local v = weft.Volume.load_from_nvdb(path_or_bytes [, { device, grid }])
--   local v = weft.Volume.from_dense(a3d, { voxel_size, origin, background, name })
--   v:save_nvdb(path [, "none" | "zip"])   v.id   v:voxel_size()   v:grid_info()
--   v:sample(points [, mode])   -- host-side sampling of index-space points
--
-- A volume's id (uint64) is the address of its descriptor; it stays valid
-- while the Lua object is alive.
local ffi = require "ffi"
local cdef = require "weft.cdef"

cdef.declare [[
typedef struct wf_volume wf_volume;
typedef struct wf_vol_info {
  char name[256];
  char type_str[16];
  uint64_t size_in_bytes;
  uint32_t grid_index, grid_count, type, grid_class;
  double voxel_size[3];
  double translation[3];
  double transform[9];
  int32_t bbox_min[3], bbox_max[3];
  uint64_t active_voxels;
  uint32_t leaf_count, lower_count, upper_count, tile_count;
} wf_vol_info;
int wf_volume_load(const void *data, size_t n, int index, const char *name,
                   wf_volume **out, char *err, size_t errlen);
int wf_volume_from_dense(const void *data, int type, const int64_t *shape,
                         const int64_t *strides, double voxel_size, const double *origin,
                         const void *background, const char *name, wf_volume **out,
                         char *err, size_t errlen);
int wf_volume_save(const wf_volume *v, const char *path, int codec, char *err, size_t errlen);
int wf_volume_info_get(const wf_volume *v, wf_vol_info *out);
int wf_volume_sample_points(const wf_volume *v, const float *uvw, int64_t n, int mode,
                            void *out, float *grad);
void wf_volume_free(wf_volume *v);
void wf_volume_sizes(const wf_volume *v, uint64_t *sizes);
const void *wf_volume_bytes(const wf_volume *v, int which);
void wf_volume_device_desc(const wf_volume *v, uint64_t dev_grid, uint64_t dev_slots, void *out);
]]

local NVDB_FLOAT, NVDB_INT32, NVDB_VEC3F, NVDB_INDEX, NVDB_ONINDEX = 1, 4, 6, 19, 20
local GEOM_VOLUME = 4 -- WF_GEOM_VOLUME (src/geom/native.h)
-- file magics: "NanoVDB0" (NanoVDB 32.3 and before) and "NanoVDB2"
local MAGICS = { NanoVDB0 = true, NanoVDB2 = true }
cdef.declare [[
void *wf_geom_track(wf_rt *rt, uint64_t id, int kind);
void wf_geom_untrack(void *reg, uint64_t id);
]]

local ERRLEN = 512

return function(weft, P)
  local C = cdef.C
  -- the registry of live geometry objects (src/runtime/geom_track.c), if built in
  local track = pcall(function() return C.wf_geom_track end) and C.wf_geom_track or nil
  local function untrack(reg, id) if reg ~= nil then C.wf_geom_untrack(reg, id) end end
  local raise, describe = P.raise, P.describe

  local Volume = { CLOSEST = 0, LINEAR = 1 }
  local methods = {}
  local mt = { __index = methods, __name = "weft.Volume" }
  function mt.__tostring(v)
    local info = v:grid_info()
    return string.format("weft.Volume(%s '%s', %d voxels)", info.type_str, info.name,
                         info.active_voxels)
  end

  -- the device of opts: its index (-1 for the cpu) and name
  local function device_of(fname, opts)
    return P.parse_device(fname, opts and opts.device)
  end

  -- A device copy: the grid, its leaf table and a descriptor pointing at
  -- them, uploaded; the id is the descriptor's device address. The host
  -- object stays (grid_info, save_nvdb and host sampling read it).
  local function upload(v, device)
    local sizes = ffi.new("uint64_t[3]")
    C.wf_volume_sizes(v._v, sizes)
    local function copy(which, n)
      if n == 0 then return nil end
      local d = weft.empty(n, weft.uint8, { device = device })
      local src = ffi.cast("uint8_t *", C.wf_volume_bytes(v._v, which))
      weft.copy(d, weft.array(src, weft.uint8, { shape = { n }, copy = false }))
      return d
    end
    local grid, slots = copy(0, tonumber(sizes[0])), copy(1, tonumber(sizes[1]))
    local desc = weft.empty(tonumber(sizes[2]), weft.uint8)
    C.wf_volume_device_desc(v._v, ffi.cast("uint64_t", grid.h.data),
                            slots and ffi.cast("uint64_t", slots.h.data) or 0, desc.h.data)
    local dd = weft.empty(tonumber(sizes[2]), weft.uint8, { device = device })
    weft.copy(dd, desc)
    v._dev = { grid, slots, dd }
    return ffi.cast("uint64_t", dd.h.data)
  end

  -- the Lua object; its id joins the runtime's live objects (debug-mode
  -- kernels check ids against them) until it is collected
  local function wrap(ptr, dev, device)
    local v = setmetatable({ device = device }, mt)
    v._v = ffi.gc(ptr, C.wf_volume_free)
    do -- the grid and its leaf table count towards a collection (lua/weft/array.lua)
      local sizes = ffi.new("uint64_t[3]")
      C.wf_volume_sizes(ptr, sizes)
      P.account(tonumber(sizes[0]) + tonumber(sizes[1]))
    end
    local id = dev >= 0 and upload(v, device) or ffi.cast("uint64_t", ptr)
    -- (a device object's ordinal + 1 from bit 8 on, as a mesh's: geom_mesh.c)
    local reg = track and track(P.rt, id, GEOM_VOLUME + (dev >= 0 and (dev + 1) * 256 or 0))
    if track and reg == nil then P.check(-1, 3) end
    ffi.gc(ptr, nil)
    v._v = ffi.gc(ptr, function(p)
      untrack(reg, id)
      C.wf_volume_free(p)
    end)
    v.id = id
    return v
  end

  local function check_opts(fname, opts, allowed)
    if opts == nil then return {} end
    if type(opts) ~= "table" then raise("%s: opts must be a table, got %s", fname, describe(opts)) end
    for k in pairs(opts) do
      if not allowed[k] then raise("%s: unknown option '%s'", fname, tostring(k)) end
    end
    return opts
  end

  -- Load a grid from a .nvdb file, or from its bytes in a string.
  -- opts.grid picks the grid: a 0-based index or a name (default 0).
  function Volume.load_from_nvdb(src, opts)
    local fname = "weft.Volume.load_from_nvdb"
    opts = check_opts(fname, opts, { device = true, grid = true })
    local dev, device = device_of(fname, opts)
    if type(src) ~= "string" then raise("%s: expected a path or the file's bytes, got %s", fname, describe(src)) end
    local data = src
    if not MAGICS[src:sub(1, 8)] then -- a path, not the bytes
      local f, ferr = io.open(src, "rb")
      if not f then raise("%s: cannot open '%s': %s", fname, src, tostring(ferr)) end
      data = f:read("*a")
      f:close()
    end
    local index, name = 0, nil
    if type(opts.grid) == "number" then index = opts.grid
    elseif type(opts.grid) == "string" then name = opts.grid
    elseif opts.grid ~= nil then raise("%s: opts.grid must be an index or a name, got %s", fname, describe(opts.grid)) end
    if index ~= math.floor(index) then raise("%s: opts.grid must be an integer index, got %s", fname, tostring(index)) end
    local out, err = ffi.new("wf_volume*[1]"), ffi.new("char[?]", ERRLEN)
    if C.wf_volume_load(data, #data, index, name, out, err, ERRLEN) ~= 0 then
      raise("%s: %s", fname, ffi.string(err))
    end
    return wrap(out[0], dev, device)
  end

  local DENSE_TYPES = { float32 = NVDB_FLOAT, int32 = NVDB_INT32, vec3f = NVDB_VEC3F }

  -- A volume holding every voxel of a 3-D array: element [x][y][z] is
  -- voxel (x, y, z) at world position origin + voxel_size * (x, y, z).
  function Volume.from_dense(a, opts)
    local fname = "weft.Volume.from_dense"
    opts = check_opts(fname, opts, { voxel_size = true, origin = true, background = true, name = true, device = true })
    local dev, device = device_of(fname, opts)
    if not weft.is_array(a) then raise("%s: expected a 3-D array, got %s", fname, describe(a)) end
    if a.ndim ~= 3 then raise("%s: expected a 3-D array, got %d dimensions", fname, a.ndim) end
    if a.device ~= "cpu" then a = a:to("cpu") end
    local t = DENSE_TYPES[a.dtype.name]
    if not t then raise("%s: arrays of %s are not supported (float32, int32 or vec3f)", fname, a.dtype.name) end
    local h = opts.voxel_size or 1.0
    if type(h) ~= "number" or h ~= h or h <= 0 then raise("%s: voxel_size must be a positive number", fname) end
    local o = opts.origin or { 0, 0, 0 }
    if type(o) == "cdata" then o = { o[0], o[1], o[2] } end
    if type(o) ~= "table" or #o ~= 3 then raise("%s: origin must be a table of 3 numbers", fname) end
    local origin = ffi.new("double[3]", o[1], o[2], o[3])
    local bg
    local b = opts.background or 0
    if t == NVDB_VEC3F then
      if type(b) == "number" then b = { b, b, b } end
      if type(b) == "cdata" then b = { b[0], b[1], b[2] } end
      bg = ffi.new("float[3]", b[1], b[2], b[3])
    elseif t == NVDB_INT32 then
      bg = ffi.new("int32_t[1]", b)
    else
      bg = ffi.new("float[1]", b)
    end
    local name = opts.name
    if name ~= nil and type(name) ~= "string" then raise("%s: name must be a string", fname) end
    local shape = ffi.new("int64_t[3]", a.h.shape[0], a.h.shape[1], a.h.shape[2])
    local strides = ffi.new("int64_t[3]", a.h.strides[0], a.h.strides[1], a.h.strides[2])
    local out, err = ffi.new("wf_volume*[1]"), ffi.new("char[?]", ERRLEN)
    if C.wf_volume_from_dense(a.h.data, t, shape, strides, h, origin, bg, name, out, err, ERRLEN) ~= 0 then
      raise("%s: %s", fname, ffi.string(err))
    end
    return wrap(out[0], dev, device)
  end

  local CODECS = { none = 0, zip = 1 }
  function methods.save_nvdb(v, path, codec)
    local fname = "Volume:save_nvdb"
    if type(path) ~= "string" then raise("%s: expected a path, got %s", fname, describe(path)) end
    local c = CODECS[codec or "none"]
    if not c then raise("%s: unknown codec '%s' (none or zip)", fname, tostring(codec)) end
    local err = ffi.new("char[?]", ERRLEN)
    if C.wf_volume_save(v._v, path, c, err, ERRLEN) ~= 0 then raise("%s: %s", fname, ffi.string(err)) end
    return path
  end

  local function info(v)
    local i = ffi.new("wf_vol_info")
    C.wf_volume_info_get(v._v, i)
    return i
  end

  function methods.voxel_size(v)
    local i = info(v)
    return i.voxel_size[0], i.voxel_size[1], i.voxel_size[2]
  end

  function methods.grid_info(v)
    local i = info(v)
    local m = {}
    for r = 0, 2 do m[r + 1] = { i.transform[3 * r], i.transform[3 * r + 1], i.transform[3 * r + 2] } end
    return {
      name = ffi.string(i.name), type_str = ffi.string(i.type_str),
      size_in_bytes = tonumber(i.size_in_bytes), grid_index = i.grid_index, grid_count = i.grid_count,
      translation = { i.translation[0], i.translation[1], i.translation[2] },
      transform_matrix = m,
      voxel_size = { i.voxel_size[0], i.voxel_size[1], i.voxel_size[2] },
      bbox_min = { i.bbox_min[0], i.bbox_min[1], i.bbox_min[2] },
      bbox_max = { i.bbox_max[0], i.bbox_max[1], i.bbox_max[2] },
      active_voxels = tonumber(i.active_voxels), leaf_count = i.leaf_count,
      lower_count = i.lower_count, upper_count = i.upper_count, tile_count = i.tile_count,
    }
  end

  -- Host-side sampling of an array of index-space points (vec3f):
  -- returns an array of values (float32, vec3f or int32) and, for float
  -- grids, their gradients w.r.t. the points.
  function methods.sample(v, pts, mode)
    local fname = "Volume:sample"
    if not weft.is_array(pts) or pts.dtype.name ~= "vec3f" or pts.device ~= "cpu" then
      raise("%s: expected a cpu array of vec3f, got %s", fname, describe(pts))
    end
    pts = pts:contiguous()
    local t = info(v).type
    local n = pts.size
    local int = t == NVDB_INT32 or t == NVDB_INDEX or t == NVDB_ONINDEX -- index grids: their indices
    local out = weft.zeros(n, t == NVDB_VEC3F and weft.vec3f or int and weft.int32 or weft.float32)
    local grad = t == NVDB_FLOAT and weft.zeros(n, weft.vec3f) or nil
    C.wf_volume_sample_points(v._v, ffi.cast("const float*", pts.h.data), n, mode or 1, out.h.data,
                              grad and ffi.cast("float*", grad.h.data) or nil)
    return out, grad
  end

  weft.Volume = Volume

  -- Kernel builtins composed on the native rows of src/geom/native.h
  -- (volume_lookup_*, volume_cell_*, volume_transform_row), so autodiff
  -- differentiates them with respect to the sample position. Sums run in
  -- Warp's order (corners (0,0,0), (0,0,1), ..., (1,1,1)), which keeps the
  -- results bit-equal to Warp's CPU.
  if not weft.volume_cell_f then return end -- a library without the rows
  local func, floor, round, int = weft.func, weft.floor, weft.round, weft.int32
  local cell_f, cell_v, row = weft.volume_cell_f, weft.volume_cell_v, weft.volume_transform_row
  local lookup_f, lookup_v, lookup_i = weft.volume_lookup_f, weft.volume_lookup_v, weft.volume_lookup_i
  local vec3, dot = weft.vec3, weft.dot
  local sig = { id = weft.uint64, uvw = weft.vec3, mode = weft.int32 }
  local function builtin(name, fn, s)
    local t = { name = name }
    for k, v in pairs(s or sig) do t[k] = v end
    t[1] = fn
    weft[name] = func(t)
  end

  -- trilinear interpolation of the 8 corners c (scalars or vec3s)
  local function trilinear(c, f)
    local wx0, wy0, wz0 = 1.0 - f.x, 1.0 - f.y, 1.0 - f.z
    local v = wx0 * wy0 * wz0 * c.c0
    v = v + wx0 * wy0 * f.z * c.c1
    v = v + wx0 * f.y * wz0 * c.c2
    v = v + wx0 * f.y * f.z * c.c3
    v = v + f.x * wy0 * wz0 * c.c4
    v = v + f.x * wy0 * f.z * c.c5
    v = v + f.x * f.y * wz0 * c.c6
    v = v + f.x * f.y * f.z * c.c7
    return v
  end
  local trilinear_f = func{ name = "volume_trilinear_f", trilinear }
  local trilinear_v = func{ name = "volume_trilinear_v", trilinear }

  builtin("volume_sample_f", function(id, uvw, mode)
    if mode == 1 then
      local b = vec3(floor(uvw.x), floor(uvw.y), floor(uvw.z))
      return trilinear_f(cell_f(id, int(b.x), int(b.y), int(b.z)), uvw - b)
    end
    local v = lookup_f(id, int(round(uvw.x)), int(round(uvw.y)), int(round(uvw.z)))
    if mode ~= 0 then v = 0.0 end
    return v
  end)
  builtin("volume_sample_v", function(id, uvw, mode)
    if mode == 1 then
      local b = vec3(floor(uvw.x), floor(uvw.y), floor(uvw.z))
      return trilinear_v(cell_v(id, int(b.x), int(b.y), int(b.z)), uvw - b)
    end
    local v = lookup_v(id, int(round(uvw.x)), int(round(uvw.y)), int(round(uvw.z)))
    if mode ~= 0 then v = vec3() end
    return v
  end)
  builtin("volume_sample_i", function(id, uvw)
    return lookup_i(id, int(round(uvw.x)), int(round(uvw.y)), int(round(uvw.z)))
  end, { id = weft.uint64, uvw = weft.vec3 })

  -- volume_sample(id, uvw, mode, dtype): the sampler of that value type
  -- (the front end picks it from by_dtype and drops the type argument)
  local sample_i_mode = func{ name = "volume_sample_i", id = weft.uint64, uvw = weft.vec3,
    _mode = weft.int32, function(id, uvw, _mode) return weft.volume_sample_i(id, uvw) end }
  builtin("volume_sample", function(id, uvw, mode, _dtype) return weft.volume_sample_f(id, uvw, mode) end,
          { id = weft.uint64, uvw = weft.vec3, mode = weft.int32, _dtype = weft.float32 })
  weft.volume_sample.by_dtype = { float32 = weft.volume_sample_f, vec3f = weft.volume_sample_v,
                                  int32 = sample_i_mode }

  -- the value and its gradient w.r.t. uvw (index space); closest: zero
  builtin("volume_sample_grad_f", function(id, uvw, mode)
    local g = vec3()
    if mode == 1 then
      local b = vec3(floor(uvw.x), floor(uvw.y), floor(uvw.z))
      local f = uvw - b
      local c = cell_f(id, int(b.x), int(b.y), int(b.z))
      local wx0, wy0, wz0 = 1.0 - f.x, 1.0 - f.y, 1.0 - f.z
      g = g + c.c0 * vec3(-wy0 * wz0, -wx0 * wz0, -wx0 * wy0)
      g = g + c.c1 * vec3(-wy0 * f.z, -wx0 * f.z, wx0 * wy0)
      g = g + c.c2 * vec3(-f.y * wz0, wx0 * wz0, -wx0 * f.y)
      g = g + c.c3 * vec3(-f.y * f.z, wx0 * f.z, wx0 * f.y)
      g = g + c.c4 * vec3(wy0 * wz0, -f.x * wz0, -f.x * wy0)
      g = g + c.c5 * vec3(wy0 * f.z, -f.x * f.z, f.x * wy0)
      g = g + c.c6 * vec3(f.y * wz0, f.x * wz0, -f.x * f.y)
      g = g + c.c7 * vec3(f.y * f.z, f.x * f.z, f.x * f.y)
      return trilinear_f(c, f), g
    end
    local v = lookup_f(id, int(round(uvw.x)), int(round(uvw.y)), int(round(uvw.z)))
    if mode ~= 0 then v = 0.0 end
    return v, g
  end)

  -- index <-> world through the grid's map (rows 0-2 matrix, 3
  -- translation, 4-6 inverse); the _dir forms leave out the translation
  local xsig = { id = weft.uint64, p = weft.vec3 }
  builtin("volume_index_to_world", function(id, p)
    return vec3(dot(row(id, 0), p), dot(row(id, 1), p), dot(row(id, 2), p)) + row(id, 3)
  end, xsig)
  builtin("volume_world_to_index", function(id, p)
    local d = p - row(id, 3)
    return vec3(dot(row(id, 4), d), dot(row(id, 5), d), dot(row(id, 6), d))
  end, xsig)
  builtin("volume_index_to_world_dir", function(id, p)
    return vec3(dot(row(id, 0), p), dot(row(id, 1), p), dot(row(id, 2), p))
  end, xsig)
  builtin("volume_world_to_index_dir", function(id, p)
    return vec3(dot(row(id, 4), p), dot(row(id, 5), p), dot(row(id, 6), p))
  end, xsig)
end
