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
int wf_geom_set_tangents(wf_rt *rt, wf_geom *g, const wf_array *points_tan,
                         const wf_array *velocities_tan);
uint64_t wf_geom_id(const wf_geom *g);
size_t wf_geom_bytes(const wf_geom *g);
void wf_geom_free(wf_geom *g);
size_t wf_geom_scratch_bytes(wf_rt *rt);
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

  -- Live objects by id (meshes, Bvh objects, hash grids; kind: 1, 2, 3
  -- as WF_GEOM_*), for the tape (tape.lua): a launch given an object's id
  -- reads its arrays, and its adjoint replays the queries on them after
  -- the whole tape ran, so no later launch may overwrite those arrays
  -- (P.geom_reads) and the object must not be refit or rebuilt in between
  -- (its _version, recorded with the launch by P.geom_versions).
  local live = setmetatable({}, { __mode = "v" })
  local function id_key(id)
    if type(id) == "number" or (type(id) == "cdata" and ffi.istype("uint64_t", id)) then return tonumber(id) end
  end
  function P.geom_track(o, kind)
    o._version, o._kind = 0, kind
    live[id_key(o.id)] = o
  end
  function P.geom_reads(o)
    local r = {}
    for _, x in ipairs { o.points, o.velocities, o.lowers, o.uppers } do r[#r + 1] = x end
    for _, x in pairs(o._views or {}) do r[#r + 1] = x end
    return r
  end

  -- core.geom_params of a module, cached: the uses of ids that kernel
  -- parameters (or their struct fields) pass, and those read or computed.
  local geom_uses = setmetatable({}, { __mode = "k" })
  local function uses_of(mod)
    local u = geom_uses[mod]
    if not u then
      u = { P.core.geom_params(mod) }
      geom_uses[mod] = u
    end
    return u[1], u[2]
  end
  local kind_names = { "weft.Mesh", "weft.Bvh", "weft.HashGrid" }

  -- { { o = object, v = its version, what = how the kernel got its id } }
  -- for the objects a launch of k (its module mod) may query: those whose
  -- ids are arguments or fields of struct arguments, and, where the kernel
  -- reads an id from an array or computes it, every live object of the
  -- query's kind (only the launch knew which; the tape refuses whatever
  -- would make any of their replays wrong).
  function P.geom_versions(k, mod, inputs, outputs)
    local r, seen, nin = {}, {}, #(inputs or {})
    local function arg(p) return p <= nin and inputs[p] or (outputs or {})[p - nin] end
    local function add(o, what)
      if o and not seen[o] then
        seen[o] = true
        r[#r + 1] = { o = o, v = o._version, what = what }
      end
    end
    for p = 1, nin + #(outputs or {}) do
      local key = id_key(arg(p))
      add(key and live[key], string.format("the object passed as '%s'", k.params[p].name))
    end
    local params, other = {}, {}
    if mod then params, other = uses_of(mod) end
    for _, use in ipairs(params) do
      if use.path then
        local ok, v = pcall(function()
          local v = arg(use.param)
          for f in use.path:gmatch("[^.]+") do v = v[f] end
          return v
        end)
        local key = ok and id_key(v)
        add(key and live[key], string.format("the object held by '%s.%s'", k.params[use.param].name, use.path))
      end
    end
    for _, use in ipairs(other) do
      local kn = kind_names[use.kind] or "object"
      for _, o in pairs(live) do
        if o._kind == use.kind then
          add(o, string.format("a live %s (weft.%s at %s:%d reads its id from an array or computes "
                               .. "it, so every live %s counts)", kn, use.name,
                               use.chunk:gsub("^[@=]", ""), use.line, kn))
        end
      end
    end
    return r[1] and r or nil
  end

  -- The derivative buffers of the meshes (src/runtime/geom_mesh.c,
  -- wf_geom_set_grads / wf_geom_set_tangents), set before each adjoint
  -- ("adj") or tangent ("jvp") launch (tape.lua). mesh_get_point and
  -- mesh_get_velocity (and through them every query's float fields) take
  -- the adjoints or tangents given for the argument arrays over the mesh's
  -- points and velocities. An id is a run-time value (a parameter, an
  -- array element, a struct field), so every live mesh is pointed at its
  -- buffers, or at none. Without an argument over them, a mesh's arrays
  -- get their own .grad in reverse mode (the one they have now) and no
  -- tangent in forward mode (they are no input of the kernel). An argument
  -- that overlaps a mesh's array in a way its derivative cannot be read
  -- element for element is refused rather than dropped. The mesh holds the
  -- arrays it is pointed at, so it never reads or writes freed memory.
  local function addr(a) return tonumber(ffi.cast("uintptr_t", a.h.data)) end
  local function bytes(a) return tonumber(a.h.size) * a.h.elsize end
  local what_kind = { adj = "adjoint launch", jvp = "weft.jvp" }

  -- The derivative of the mesh's array v (its name: what) from the given
  -- { array, derivative, name } triples, or nil.
  local function deriv_of(kind, k, v, given, what)
    local v0, vn = addr(v), bytes(v)
    for _, g in ipairs(given) do
      local x, t = g[1], g[2]
      local x0, xn = addr(x), bytes(x)
      -- (addresses compare within one device's memory only)
      if vn > 0 and x.h.device == v.h.device and v0 < x0 + xn and x0 < v0 + vn then
        local off = v0 - x0
        if off >= 0 and off + vn <= xn and (x.dtype.scalar or x.dtype) == weft.float32
            and C.wf_array_is_contiguous(x.h) ~= 0 and C.wf_array_is_contiguous(t.h) ~= 0 then
          if off == 0 then return t end
          return weft.array(ffi.cast("char *", t.h.data) + off, weft.vec3,
                            { shape = tonumber(v.h.size), copy = false, device = t.device })
        end
        raise("%s of '%s': '%s' overlaps the %s of a weft.Mesh, but not as a compact float32 "
              .. "array holding them all, so their derivatives cannot be taken from the one given "
              .. "for it (pass the mesh's own array, or give it none)", what_kind[kind], k.name,
              g[3], what)
      end
    end
  end

  local fields = { adj = "_grads", jvp = "_tans" }
  local function set_derivs(kind, m, pd, vd)
    local cur = m[fields[kind]] or {}
    if pd == cur[1] and vd == cur[2] then return end
    local set = kind == "adj" and C.wf_geom_set_grads or C.wf_geom_set_tangents
    P.check(set(P.rt, m._g, pd and pd.h or nil, vd and vd.h or nil), 3)
    m[fields[kind]] = { pd, vd }
  end

  local mesh_mt
  -- The meshes' own arrays' gradients (creation, refit).
  local function own_grads(m)
    local pg = m.points.requires_grad and m.points.grad or nil
    local vg = m.velocities and m.velocities.requires_grad and m.velocities.grad or nil
    return pg, vg
  end

  -- derivs: one per array parameter or struct holding arrays (a "no
  -- derivative" header has data NULL).
  function P.geom_derivs(kind, k, types, args, derivs)
    local given, j = {}, 0
    for i, p in ipairs(k.params) do
      local t = types[i]
      if t.kind == "array" or t.arrays then
        j = j + 1
        local d = derivs[j]
        if t.kind == "array" then
          if d.h.data ~= nil then given[#given + 1] = { args[i], d, p.name } end
        else -- a struct: its arrays' derivatives, field by field
          local ds = {}
          for _, f in ipairs(t._arrays_of(d)) do ds[f.path] = f.array end
          for _, f in ipairs(t._arrays_of(args[i])) do
            local dt = ds[f.path]
            if dt and dt.h.data ~= nil then given[#given + 1] = { f.array, dt, p.name .. "." .. f.path } end
          end
        end
      end
    end
    for _, o in pairs(live) do
      if getmetatable(o) == mesh_mt then
        local pd = deriv_of(kind, k, o._views[1], given, "points")
        local vd = o._views[3] and deriv_of(kind, k, o._views[3], given, "velocities")
        if kind == "adj" then
          local pg, vg = own_grads(o)
          pd, vd = pd or pg, vd or vg
        end
        set_derivs(kind, o, pd, vd)
      end
    end
  end

  local mesh_methods, bvh_methods = {}, {}
  mesh_mt = { __index = mesh_methods, __name = "weft.Mesh" }
  local bvh_mt = { __index = bvh_methods, __name = "weft.Bvh" }
  function mesh_mt.__tostring(m)
    return string.format("weft.Mesh(%d points, %d faces)", m._views[1].size, m._views[2].size / 3)
  end
  function bvh_mt.__tostring(b) return string.format("weft.Bvh(%d boxes)", b._views[1].size) end

  function mesh_methods.refit(m)
    P.check(C.wf_geom_refit(P.rt, m._g), 2)
    m._version = m._version + 1
    set_derivs("adj", m, own_grads(m))
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
    P.account(tonumber(C.wf_geom_bytes(out[0])))
    P.geom_track(m, 1)
    set_derivs("adj", m, own_grads(m))
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
    P.account(tonumber(C.wf_geom_bytes(out[0])))
    P.geom_track(b, 2)
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
  -- gclosest_lanes tells them apart); in a vertex region they are
  -- constants. A face flat for p (corners on a line or nearly, two or
  -- three equal: query.h's WF_GFLAT test) takes the nearest of the three
  -- clamped edges and the face's own weights when they fall on it, as
  -- gclosest_flat does: the regions' signs are rounding noise there.
  local clamp = weft.clamp
  local dist2 = weft.func{ name = "mesh_uv_dist2", a = weft.vec3, b = weft.vec3, c = weft.vec3, p = weft.vec3,
    u = weft.float32, v = weft.float32,
    function(a, b, c, p, u, v)
      local e = a * u + b * v + c * (1.0 - u - v) - p
      return dot(e, e)
    end }
  local closest_flat = weft.func{ name = "mesh_closest_flat", a = weft.vec3, b = weft.vec3, c = weft.vec3,
    p = weft.vec3, d1 = weft.float32, d2 = weft.float32, d3 = weft.float32, d4 = weft.float32,
    d5 = weft.float32, d6 = weft.float32, s = weft.float32, vb = weft.float32, vc = weft.float32,
    function(a, b, c, p, d1, d2, d3, d4, d5, d6, s, vb, vc)
      local eab, eac, ebc = 0.0, 0.0, 0.0
      if d1 - d3 ~= 0.0 then eab = clamp(d1 / (d1 - d3), 0.0, 1.0) end
      if d2 - d6 ~= 0.0 then eac = clamp(d2 / (d2 - d6), 0.0, 1.0) end
      local den = (d4 - d3) + (d5 - d6)
      if den ~= 0.0 then ebc = clamp((d4 - d3) / den, 0.0, 1.0) end
      local u, v = 1.0 - eab, eab -- edge ab
      local best = dist2(a, b, c, p, u, v)
      local d = dist2(a, b, c, p, 1.0 - eac, 0.0) -- edge ac
      if d < best then u, v, best = 1.0 - eac, 0.0, d end
      d = dist2(a, b, c, p, 0.0, 1.0 - ebc) -- edge bc
      if d < best then u, v, best = 0.0, 1.0 - ebc, d end
      if s ~= 0.0 then -- the face, if its weights make a point of it
        local fy = vb / s
        local fx = 1.0 - fy - vc / s
        if fx >= 0.0 and fy >= 0.0 and 1.0 - fx - fy >= 0.0 and dist2(a, b, c, p, fx, fy) < best then
          u, v = fx, fy
        end
      end
      return u, v
    end }
  local closest = weft.func{ name = "mesh_closest_uv", id = weft.uint64, p = weft.vec3,
    function(id, p, r)
      local q = r
      if r.result then
        local a, b, c = face_points(id, r.face)
        local ab, ac, ap, bp, cp = b - a, c - a, p - a, p - b, p - c
        local d1, d2, d3, d4, d5, d6 = dot(ab, ap), dot(ac, ap), dot(ab, bp), dot(ac, bp), dot(ab, cp),
          dot(ac, cp)
        local va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
        local ab2, ac2 = dot(ab, ab), dot(ac, ac)
        local s = va + vb + vc
        if s <= (1.0 / 131072.0) * (ab2 + ac2) * ((ab2 + ac2) + dot(ap, ap)) then -- flat for p
          q.u, q.v = closest_flat(a, b, c, p, d1, d2, d3, d4, d5, d6, s, vb, vc)
        elseif (d1 <= 0.0 and d2 <= 0.0) or (d3 >= 0.0 and d4 <= d3) then -- vertex a or b
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
