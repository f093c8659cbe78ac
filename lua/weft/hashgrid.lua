-- Hash grids for neighbour search (src/geom/hashgrid.h and .c):
--
--   local g = weft.HashGrid(dim_x, dim_y, dim_z [, { device = "cpu" }])
--   g:build(points, radius)   -- points: array of vec3f; cells of width radius
--   g:reserve(n)   g.id
--
-- In kernels: for j in weft.hash_grid_query(g.id, p, r) do ... end yields
-- the points within r of p (their positions at the last build, give or
-- take rounding: candidates, which kernels still test by distance) from
-- the cells the box p +- r touches, and weft.hash_grid_point_id(g.id, i)
-- is the i-th point in cell order (a coherent order for the launch index).
local ffi = require "ffi"
local cdef = require "weft.cdef"

cdef.declare [[
typedef struct wf_hashgrid wf_hashgrid;
int wf_hashgrid_new(int dim_x, int dim_y, int dim_z, wf_hashgrid **out, char *err, size_t errlen);
int wf_hashgrid_reserve(wf_hashgrid *h, int64_t n, char *err, size_t errlen);
int wf_hashgrid_build(wf_hashgrid *h, const void *points, int64_t n, int64_t stride,
                      double radius, int nthreads, char *err, size_t errlen);
void wf_hashgrid_free(wf_hashgrid *h);
void wf_hashgrid_device_desc(const wf_hashgrid *h, uint64_t dev_ids, uint64_t dev_starts,
                             uint64_t dev_sorted, void *out);
const int32_t *wf_hashgrid_array(const wf_hashgrid *h, int which, int64_t *n);
]]

cdef.declare [[
void *wf_geom_track(wf_rt *rt, uint64_t id, int kind);
void wf_geom_untrack(void *reg, uint64_t id);
]]

local ERRLEN = 256
local GEOM_HASHGRID = 3 -- WF_GEOM_HASHGRID (src/geom/native.h)

return function(weft, P)
  local C = cdef.C
  -- the registry of live geometry objects (src/runtime/geom_track.c), if built in
  local track = pcall(function() return C.wf_geom_track end) and C.wf_geom_track or nil
  local function untrack(reg, id) if reg ~= nil then C.wf_geom_untrack(reg, id) end end
  local raise, describe = P.raise, P.describe

  local methods = {}
  local mt = { __index = methods, __name = "weft.HashGrid" }
  function mt.__tostring(g)
    return string.format("weft.HashGrid(%d, %d, %d)", g.dim_x, g.dim_y, g.dim_z)
  end

  local function int_arg(fname, what, x)
    if type(x) ~= "number" or x ~= math.floor(x) then
      raise("%s: %s must be an integer, got %s", fname, what, describe(x))
    end
    return x
  end

  -- Upload a device grid's point ids, cell starts and sorted positions and
  -- its descriptor pointing at them.
  local DESC_SIZE = 80 -- sizeof(wf_hgrid) (src/geom/hashgrid.h, checked in src/geom/native.c)
  local function upload(g)
    local n = ffi.new("int64_t[1]")
    local function put(which, key)
      local src = C.wf_hashgrid_array(g._h, which, n)
      local len = tonumber(n[0])
      if len == 0 then return g[key] end
      if not g[key] or g[key].size ~= len then g[key] = weft.empty(len, weft.int32, { device = g.device }) end
      weft.copy(g[key], weft.array(ffi.cast("int32_t *", src), weft.int32, { shape = { len }, copy = false }))
      return g[key]
    end
    local ids, starts, sorted = put(0, "_ids"), put(1, "_starts"), put(2, "_sorted")
    local function addr(a) return a and ffi.cast("uint64_t", a.h.data) or 0 end
    local desc = weft.empty(DESC_SIZE, weft.uint8)
    C.wf_hashgrid_device_desc(g._h, addr(ids), addr(starts), addr(sorted), desc.h.data)
    weft.copy(g._desc, desc)
  end

  function weft.HashGrid(dx, dy, dz, opts)
    local fname = "weft.HashGrid"
    int_arg(fname, "dim_x", dx)
    int_arg(fname, "dim_y", dy)
    int_arg(fname, "dim_z", dz)
    if opts ~= nil and type(opts) ~= "table" then raise("%s: opts must be a table, got %s", fname, describe(opts)) end
    for k in pairs(opts or {}) do
      if k ~= "device" then raise("%s: unknown option '%s'", fname, tostring(k)) end
    end
    local dev, devname = P.parse_device(fname, opts and opts.device)
    local out, err = ffi.new("wf_hashgrid*[1]"), ffi.new("char[?]", ERRLEN)
    if C.wf_hashgrid_new(dx, dy, dz, out, err, ERRLEN) ~= 0 then raise("%s", ffi.string(err)) end
    local g = setmetatable({ dim_x = dx, dim_y = dy, dim_z = dz, device = devname }, mt)
    local h = out[0]
    g._h = ffi.gc(h, C.wf_hashgrid_free)
    local id = ffi.cast("uint64_t", h)
    if dev >= 0 then
      -- on a device the id is a descriptor there, fixed for the grid's
      -- life; builds upload new contents behind it
      g._desc = weft.empty(DESC_SIZE, weft.uint8, { device = devname })
      id = ffi.cast("uint64_t", g._desc.h.data)
      upload(g)
    end
    -- the id joins the runtime's live objects until g is collected
    -- (a device object's ordinal + 1 from bit 8 on, as a mesh's: geom_mesh.c)
    local reg = track and track(P.rt, id, GEOM_HASHGRID + (dev >= 0 and (dev + 1) * 256 or 0))
    if track and reg == nil then P.check(-1, 2) end
    ffi.gc(h, nil)
    g._h = ffi.gc(h, function(p)
      untrack(reg, id)
      C.wf_hashgrid_free(p)
    end)
    g.id = id
    P.geom_track(g, 3)
    P.account(4 * (dx * dy * dz + 1)) -- the cells' starts
    return g
  end

  -- room for n points (ids, cells, the build's pairs and positions, the
  -- sorted records: 44 bytes each)
  -- counts towards a collection (P.account: lua/weft/array.lua)
  local function grown(g, n)
    if n > (g._room or 0) then
      P.account(44 * (n - (g._room or 0)))
      g._room = n
    end
  end

  function methods.reserve(g, n)
    int_arg("HashGrid:reserve", "n", n)
    local err = ffi.new("char[?]", ERRLEN)
    if C.wf_hashgrid_reserve(g._h, n, err, ERRLEN) ~= 0 then raise("%s", ffi.string(err)) end
    grown(g, n)
  end

  function methods.build(g, points, radius)
    local fname = "HashGrid:build"
    if not weft.is_array(points) or points.dtype.name ~= "vec3f" or points.ndim ~= 1 then
      local what = weft.is_array(points) and string.format("a %d-D array of %s", points.ndim, points.dtype.name)
        or describe(points)
      raise("%s: points must be a 1-D array of vec3f, got %s", fname, what)
    end
    if points.device ~= g.device then
      raise("%s: points are on %s, the grid on %s", fname, points.device, g.device)
    end
    if type(radius) ~= "number" then raise("%s: radius must be a number, got %s", fname, describe(radius)) end
    local err = ffi.new("char[?]", ERRLEN)
    local nthreads = C.wf_rt_num_threads(P.rt)
    local host = g._desc and points:to("cpu") or points -- device grids build on the host
    if C.wf_hashgrid_build(g._h, host.h.data, host.size, host.h.strides[0], radius, nthreads,
                           err, ERRLEN) ~= 0 then
      raise("%s", ffi.string(err))
    end
    grown(g, host.size)
    if g._desc then upload(g) end
    g.radius = radius
    g._version = (g._version or 0) + 1 -- tapes refuse replays of older builds (geom.lua)
  end

end
