-- mesh_scene.lua: the queries of bench/mesh.lua's scene (bench/warp_mesh.py
-- makes the same ones), for the benches and probes that run them:
--   local S = require "bench.mesh_scene"
--   S.rays(W, H[, step]): eye rays of a W x H pinhole camera looking at the
--     torus (every step-th row), weft arrays of origins and directions
--   S.points(): the 100k closest-point queries, a 50 x 50 x 40 grid around it
--   S.cast, S.closest: the kernels (t of the first hit or -1; the distance
--     to the closest point within 100)
local ffi = require "ffi"
local weft = require "weft"

local S = {}
local sqrt = math.sqrt

function S.rays(W, H, step)
  step = step or 1
  local rows = math.floor((H + step - 1) / step)
  local n = W * rows
  local O, D = weft.empty(n, weft.vec3), weft.empty(n, weft.vec3)
  local eye = { 0, -3.2, 2.2 }
  local el = sqrt(eye[2] ^ 2 + eye[3] ^ 2)
  local fwd = { 0, -eye[2] / el, -eye[3] / el }
  local right = { 1, 0, 0 } -- fwd x z, normalized (fwd has no x)
  local up = { right[2] * fwd[3] - right[3] * fwd[2], right[3] * fwd[1] - right[1] * fwd[3],
               right[1] * fwd[2] - right[2] * fwd[1] }
  local s = math.tan(math.rad(45) / 2)
  local o, d = ffi.cast("float *", O.h.data), ffi.cast("float *", D.h.data)
  for row = 0, rows - 1 do
    local y = row * step
    for x = 0, W - 1 do
      local dx, dy = (2 * (x + 0.5) / W - 1) * s, (1 - 2 * (y + 0.5) / H) * s
      local r = { fwd[1] + dx * right[1] + dy * up[1], fwd[2] + dx * right[2] + dy * up[2],
                  fwd[3] + dx * right[3] + dy * up[3] }
      local l = sqrt(r[1] ^ 2 + r[2] ^ 2 + r[3] ^ 2)
      local k = 3 * (row * W + x)
      o[k], o[k + 1], o[k + 2] = eye[1], eye[2], eye[3]
      d[k], d[k + 1], d[k + 2] = r[1] / l, r[2] / l, r[3] / l
    end
  end
  return O, D
end

function S.points()
  local Q = weft.empty(50 * 50 * 40, weft.vec3)
  local q, k = ffi.cast("float *", Q.h.data), 0
  for c = 0, 39 do
    for b = 0, 49 do
      for a = 0, 49 do
        q[k], q[k + 1], q[k + 2] = -1.6 + 3.2 * a / 49, -1.6 + 3.2 * b / 49, -0.6 + 1.2 * c / 39
        k = k + 3
      end
    end
  end
  return Q
end

S.cast = weft.kernel{ id = weft.uint64, o = weft.array(weft.vec3), d = weft.array(weft.vec3),
  t = weft.array(weft.float32),
  function(id, o, d, t)
    local i = weft.tid()
    local r = weft.mesh_query_ray(id, o[i], d[i], 1.0e6)
    t[i] = r.result and r.t or -1.0
  end }

S.closest = weft.kernel{ id = weft.uint64, p = weft.array(weft.vec3), out = weft.array(weft.float32),
  function(id, p, out)
    local i = weft.tid()
    local q = weft.mesh_query_point_no_sign(id, p[i], 100.0)
    if q.result then out[i] = weft.length(weft.mesh_eval_position(id, q.face, q.u, q.v) - p[i]) end
  end }

return S
