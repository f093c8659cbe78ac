-- Triangle meshes and bounding volume hierarchies (src/runtime/geom.h):
--
--   local m = weft.Mesh{ points = P, indices = I [, velocities = V]
--                        [, support_winding_number = true] }
--   m.id  m.points  m.indices  m.velocities  m:refit()
--   local b = weft.Bvh(lowers, uppers)   b.id  b:refit()
--
-- Kernels receive the id (a uint64) and call the native queries of
-- src/geom/native.h (weft.mesh_query_point, ...). The object keeps its
-- arrays alive; the BVH is built in C over them without a copy.
-- mesh_eval_position and mesh_eval_velocity are weft.func here, built on
-- mesh_get_index and mesh_get_point, so autodiff takes their gradients
-- with respect to u and v like any code, and with respect to the points
-- through mesh_get_point's adjoint (into points.grad when the points
-- require gradients).
local ffi = require "ffi"
local cdef = require "weft.cdef"

cdef.declare [[
typedef struct wf_geom wf_geom;
int wf_geom_mesh_new(wf_rt *rt, const wf_array *points, const wf_array *indices,
                     const wf_array *velocities, int winding, wf_geom **out);
int wf_geom_bvh_new(wf_rt *rt, const wf_array *lowers, const wf_array *uppers, wf_geom **out);
int wf_geom_refit(wf_rt *rt, wf_geom *g);
int wf_geom_set_grads(wf_rt *rt, wf_geom *g, const wf_array *points_grad,
                      const wf_array *velocities_grad);
uint64_t wf_geom_id(const wf_geom *g);
void wf_geom_free(wf_geom *g);
]]

return function(weft, P)
  local C = cdef.C
  local raise, describe = P.raise, P.describe
  local is_array = weft.is_array

  local function dtype_name(a) return tostring(a.dtype) end

  -- a an array of dtype t (its name in messages: what)
  local function want_array(fname, what, a, t, tname)
    if not is_array(a) then raise("%s: %s must be an array of %s, got %s", fname, what, tname, describe(a)) end
    if a.dtype ~= t then
      raise("%s: %s must be an array of %s, got an array of %s", fname, what, tname, dtype_name(a))
    end
    return a
  end

  -- An (n, 3) compact array of float32 (int32 for indices) as a 1-D view
  -- of n vec3 (3n int32) over the same memory: what NumPy, torch and C
  -- hosts usually have. Anything else is returned as it is.
  local function flat(a, elem)
    if not is_array(a) or a.ndim ~= 2 or a.shape[2] ~= 3 or a.dtype ~= elem then return a end
    local h = a.h
    if h.strides[1] ~= 4 or h.strides[0] ~= 12 then return a end
    local n = a.shape[1]
    local t = elem == weft.float32 and weft.vec3 or weft.int32
    return weft.array(a:ptr(), t, { shape = { t == weft.vec3 and n or 3 * n }, copy = false,
                                     device = a.device })
  end

  local function same_device(fname, what, a, other, b)
    if a.device ~= b.device then
      raise("%s: %s is on %s but %s is on %s (all arrays must be on one device)", fname, what,
            tostring(a.device), other, tostring(b.device))
    end
  end

  -- Gradients of mesh_get_point / mesh_get_velocity go to the arrays' .grad
  -- as they are at creation and at each refit; the mesh holds those grad
  -- arrays, so a replaced .grad can never leave it writing freed memory.
  local function sync_grads(m)
    local pg = m.points.requires_grad and m.points.grad or nil
    local vg = m.velocities and m.velocities.requires_grad and m.velocities.grad or nil
    P.check(C.wf_geom_set_grads(P.rt, m._g, pg and pg.h or nil, vg and vg.h or nil), 3)
    m._grads = { pg, vg }
  end

  -- Live objects by id (meshes, Bvh objects, hash grids), for the tape
  -- (tape.lua): a launch given an object's id reads its arrays, and its
  -- adjoint replays the queries on them after the whole tape ran, so no
  -- later launch may overwrite those arrays (P.id_reads) and the object
  -- must not be refit or rebuilt in between (its _version, recorded with
  -- the launch by P.geom_versions).
  local live = setmetatable({}, { __mode = "v" })
  local function id_key(id)
    if type(id) == "number" or (type(id) == "cdata" and ffi.istype("uint64_t", id)) then return tonumber(id) end
  end
  function P.geom_track(o)
    o._version = 0
    live[id_key(o.id)] = o
  end
  function P.id_reads(a)
    local key = id_key(a)
    local o = key and live[key]
    if not o then return nil end
    local r = {}
    for _, x in ipairs { o.points, o.velocities, o.lowers, o.uppers } do r[#r + 1] = x end
    for _, x in pairs(o._views or {}) do r[#r + 1] = x end
    return r
  end
  -- { { p = parameter index, o = object, v = its version } ... } for the
  -- arguments of a launch that are live ids
  function P.geom_versions(inputs, outputs)
    local r, nin = {}, #(inputs or {})
    for p = 1, nin + #(outputs or {}) do
      local key = id_key(p <= nin and inputs[p] or outputs[p - nin])
      local o = key and live[key]
      if o then r[#r + 1] = { p = p, o = o, v = o._version } end
    end
    return r[1] and r or nil
  end

  -- weft.jvp (tape.lua): forward mode has no tangents of the points a
  -- mesh query reads (the points are not jvp inputs), so a tangent given
  -- for an input array that a mesh the kernel queries reads would be
  -- dropped on its way through the queries. Refused at the first query's
  -- line instead. geom_params(mod) is core.geom_params, cached per module.
  local geom_uses = setmetatable({}, { __mode = "k" })
  local function same_memory(a, b)
    if not (weft.is_array(a) and weft.is_array(b)) then return false end
    if a.h.buf ~= nil and a.h.buf == b.h.buf then return true end
    return a.h.data ~= nil and a.h.data == b.h.data
  end
  function P.jvp_geom_check(k, mod, params, args, tangents)
    local uses = geom_uses[mod]
    if not uses then
      uses = P.core.geom_params(mod)
      geom_uses[mod] = uses
    end
    for i, use in pairs(uses) do
      local o = use.kind == 1 and live[id_key(args[i])] -- 1: WF_GEOM_MESH
      for _, x in ipairs(o and P.id_reads(args[i]) or {}) do
        for j, t in pairs(tangents) do
          if t and same_memory(args[j], x) then
            local what = same_memory(x, o.points) and "points" or "velocities"
            error(string.format("%s:%d: weft.jvp of '%s': the tangent given for '%s' would be "
                  .. "dropped at weft.%s: '%s' holds the %s of the mesh queried, and forward "
                  .. "mode carries no tangents of a mesh's %s (give none, or use reverse mode)",
                  use.chunk:gsub("^[@=]", ""), use.line, k.name, params[j].name, use.name,
                  params[j].name, what, what), 0)
          end
        end
      end
    end
  end

  local mesh_methods, bvh_methods = {}, {}
  local mesh_mt = { __index = mesh_methods, __name = "weft.Mesh" }
  local bvh_mt = { __index = bvh_methods, __name = "weft.Bvh" }
  function mesh_mt.__tostring(m)
    return string.format("weft.Mesh(%d points, %d faces)", m._views[1].size, m._views[2].size / 3)
  end
  function bvh_mt.__tostring(b) return string.format("weft.Bvh(%d boxes)", b._views[1].size) end

  function mesh_methods.refit(m)
    P.check(C.wf_geom_refit(P.rt, m._g), 2)
    m._version = m._version + 1
    sync_grads(m)
  end
  function bvh_methods.refit(b)
    P.check(C.wf_geom_refit(P.rt, b._g), 2)
    b._version = b._version + 1
  end

  local MESH_KEYS = { points = true, indices = true, velocities = true, support_winding_number = true }

  function weft.Mesh(args)
    local fname = "weft.Mesh"
    if type(args) ~= "table" then
      raise("%s: expected a table { points = ..., indices = ... }, got %s", fname, describe(args))
    end
    for k in pairs(args) do
      if not MESH_KEYS[k] then raise("%s: unknown field '%s'", fname, tostring(k)) end
    end
    local pts = want_array(fname, "points", flat(args.points, weft.float32), weft.vec3, "weft.vec3")
    local idx = want_array(fname, "indices", flat(args.indices, weft.int32), weft.int32, "weft.int32")
    local vel = args.velocities
    if vel ~= nil then vel = want_array(fname, "velocities", flat(vel, weft.float32), weft.vec3, "weft.vec3") end
    same_device(fname, "points", pts, "indices", idx)
    if vel then same_device(fname, "points", pts, "velocities", vel) end
    local out = ffi.new("wf_geom*[1]")
    P.check(C.wf_geom_mesh_new(P.rt, pts.h, idx.h, vel and vel.h or nil,
                               args.support_winding_number and 1 or 0, out), 2)
    -- the user's arrays (views of (n, 3) arrays keep those alive too)
    local m = setmetatable({ points = args.points, indices = args.indices, velocities = args.velocities,
                             _views = { pts, idx, vel },
                             support_winding_number = args.support_winding_number and true or false,
                             device = pts.device }, mesh_mt)
    m._g = ffi.gc(out[0], C.wf_geom_free)
    m.id = C.wf_geom_id(out[0])
    P.geom_track(m)
    sync_grads(m)
    return m
  end

  function weft.Bvh(lowers, uppers)
    local fname = "weft.Bvh"
    local lo = want_array(fname, "lowers", flat(lowers, weft.float32), weft.vec3, "weft.vec3")
    local hi = want_array(fname, "uppers", flat(uppers, weft.float32), weft.vec3, "weft.vec3")
    same_device(fname, "lowers", lo, "uppers", hi)
    local out = ffi.new("wf_geom*[1]")
    P.check(C.wf_geom_bvh_new(P.rt, lo.h, hi.h, out), 2)
    local b = setmetatable({ lowers = lowers, uppers = uppers, device = lo.device, _views = { lo, hi } }, bvh_mt)
    b._g = ffi.gc(out[0], C.wf_geom_free)
    b.id = C.wf_geom_id(out[0])
    P.geom_track(b)
    return b
  end

  -- Barycentric evaluation with Warp's weights: u on the face's first
  -- point, v on its second, 1 - u - v on its third.
  local get_index, get_point, get_velocity = weft.mesh_get_index, weft.mesh_get_point, weft.mesh_get_velocity
  local sig = { id = weft.uint64, face = weft.int32, u = weft.float32, v = weft.float32 }
  local function eval_with(name, get)
    local s = { name = name }
    for k, t in pairs(sig) do s[k] = t end
    s[1] = function(id, face, u, v)
      local i0 = get_index(id, face * 3)
      local i1 = get_index(id, face * 3 + 1)
      local i2 = get_index(id, face * 3 + 2)
      return get(id, i0) * u + get(id, i1) * v + get(id, i2) * (1.0 - u - v)
    end
    return weft.func(s)
  end
  weft.mesh_eval_position = eval_with("mesh_eval_position", get_point)
  weft.mesh_eval_velocity = eval_with("mesh_eval_velocity", get_velocity)

  -- Gradients of the native queries (src/geom/native.h). The native finds
  -- the face, the result and the sign (piecewise constant: no gradient);
  -- the functions below recompute the float fields from that face's points
  -- and the query's arguments, and autodiff reverses them in the native's
  -- place (src/ad/rules.c), so t, u, v and normal get their gradients with
  -- respect to the arguments and, through mesh_get_point, the points. The
  -- forward pass runs the native alone. Each takes the native's arguments,
  -- then its result, and returns a result of the same type.
  local dot, cross, normalize = weft.dot, weft.cross, weft.normalize
  local face_points = weft.func{ name = "mesh_face_points", id = weft.uint64, face = weft.int32,
    function(id, face)
      return get_point(id, get_index(id, face * 3)), get_point(id, get_index(id, face * 3 + 1)),
        get_point(id, get_index(id, face * 3 + 2))
    end }
  -- the closest point's weights by the region of p (as src/geom/query.h's
  -- gclosest_tri tells them apart); in a vertex region, and on a
  -- degenerate face, they are constants
  local closest = weft.func{ name = "mesh_closest_uv", id = weft.uint64, p = weft.vec3,
    function(id, p, r)
      local q = r
      if r.result then
        local a, b, c = face_points(id, r.face)
        local ab, ac, ap, bp, cp = b - a, c - a, p - a, p - b, p - c
        local d1, d2, d3, d4, d5, d6 = dot(ab, ap), dot(ac, ap), dot(ab, bp), dot(ac, bp), dot(ab, cp),
          dot(ac, cp)
        local va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
        if (d1 <= 0.0 and d2 <= 0.0) or (d3 >= 0.0 and d4 <= d3) then -- vertex a or b
          q.u = r.u
        elseif vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0 then -- edge ab
          if d1 - d3 ~= 0.0 then
            q.v = d1 / (d1 - d3)
            q.u = 1.0 - q.v
          end
        elseif d6 >= 0.0 and d5 <= d6 then -- vertex c
          q.u = r.u
        elseif vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0 then -- edge ac
          if d2 - d6 ~= 0.0 then q.u = 1.0 - d2 / (d2 - d6) end
        elseif va <= 0.0 and d4 - d3 >= 0.0 and d5 - d6 >= 0.0 then -- edge bc
          if (d4 - d3) + (d5 - d6) ~= 0.0 then q.v = 1.0 - (d4 - d3) / ((d4 - d3) + (d5 - d6)) end
        elseif va + vb + vc ~= 0.0 then -- inside the face
          local inv = 1.0 / (va + vb + vc)
          local v, w = vb * inv, vc * inv
          q.u = 1.0 - v - w
          q.v = v
        end
      end
      return q
    end }
  local function closest_diff() return function(id, p, _, r) return closest(id, p, r) end end
  P.native_diff = {
    mesh_query_point = closest_diff(),
    mesh_query_point_no_sign = closest_diff(),
    mesh_query_point_sign_normal = function(id, p, _, _, r) return closest(id, p, r) end,
    mesh_query_point_sign_winding_number = function(id, p, _, _, _, r) return closest(id, p, r) end,
    -- o + t d = u a + v b + (1 - u - v) c, solved by Cramer's rule
    mesh_query_ray = function(id, start, dir, _, r)
      local q = r
      if r.result then
        local a, b, c = face_points(id, r.face)
        local e1, e2, s = a - c, b - c, start - c
        local pv, qv = cross(dir, e2), cross(s, e1)
        local inv = 1.0 / dot(e1, pv)
        q.t = dot(e2, qv) * inv
        q.u = dot(s, pv) * inv
        q.v = dot(dir, qv) * inv
        q.normal = normalize(cross(b - a, c - a))
      end
      return q
    end,
    mesh_eval_face_normal = function(id, face, n)
      local q = n
      if dot(n, n) > 0.0 then -- a face in range, not degenerate
        local a, b, c = face_points(id, face)
        q = normalize(cross(b - a, c - a))
      end
      return q
    end,
  }
end
