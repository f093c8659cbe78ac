-- weft.stdlib: the builtins that compose other builtins, written once here
-- as weft.func. Both backends compile them and autodiff differentiates them
-- like any weft.func, so they need no row in the op table (src/ir/ir.h) and
-- no derivative rule. Names and semantics are Warp's (warp/_src/builtins.py,
-- warp/native/builtin.h); where a result must have the argument's type, a
-- typed value is built from weft.sign (+-1 for every input, NaN included),
-- since an untyped literal would take its default type.
--
-- Each builtin checks its argument types before its body is compiled
-- (resolve.c: check_builtin), so a wrong call is reported at the user's
-- call as "weft.lerp(float64, int32, float32): <what is wrong>" rather
-- than as a type error on a line of this file. A check gets one
-- description per argument, { name = "vec3d", kind = "vec", scalar =
-- "float64", float = true, literal = "int" | "float" | nil }, and returns
-- nil or the message. Any other error in a builtin's body is still
-- reported at the user's call (src/front/api.c: wf_front_error).
return function(weft)
  local func, select, sign, trunc, clamp = weft.func, weft.select, weft.sign, weft.trunc, weft.clamp
  local min, max, abs = weft.min, weft.max, weft.abs

  -- any arguments: the body's own errors still name the user's call
  local function any_args() end

  -- a weft.func the builtins below call: marked like a builtin, so an
  -- error in its body also names the user's call
  local function helper(fn)
    local f = func(fn)
    f._builtin = any_args
    return f
  end

  -- weft[name] = a weft.func of fn whose arguments check accepts
  local function builtin(name, check, fn)
    local f = func{ name = name, fn }
    f._builtin = check or any_args
    weft[name] = f
  end

  -- a hint when an integer literal is among the arguments: it is int32
  local function literal_hint(...)
    for _, d in ipairs { ... } do
      if d.literal == "int" then return "; integer literals are int32 here (write 1.0, not 1)" end
    end
    return ""
  end

  local function scalar_arg(x)
    if x.kind ~= "int" and x.kind ~= "float" then
      return "the argument must be an int or float scalar"
    end
  end

  local function float_arg(x)
    if not x.float then
      return "the argument must be a float scalar or a vector, matrix, quaternion or transform of "
        .. "floats" .. literal_hint(x)
    end
  end

  -- a, b and t (or x) of one float type
  local function one_float(a, b, t)
    if not (a.float and b.float and t.float and a.scalar == b.scalar and b.scalar == t.scalar) then
      return "the arguments must share one float type" .. literal_hint(a, b, t)
    end
  end

  local function lerp_args(a, b, t)
    if a.float and a.name == b.name then
      if t.kind ~= "float" or t.scalar ~= a.scalar then
        return "t must be a " .. a.scalar .. " scalar" .. literal_hint(t)
      end
      return nil
    end
    return one_float(a, b, t) or "a and b must have the same type"
  end

  local function smoothstep_args(a, b, x)
    local bad = one_float(a, b, x)
    if bad then return bad end
    if a.kind ~= "float" or b.kind ~= "float" or x.kind ~= "float" then
      return "the arguments must be float scalars"
    end
  end

  -- step(x): 1 if x < 0, else 0, in x's type (unsigned: always 0)
  builtin("step", scalar_arg, function(x)
    local s = sign(x)
    return select(x < 0, s - s, 1)
  end)

  -- nonzero(x): 1 if x ~= 0 (NaN included), else 0, in x's type
  builtin("nonzero", scalar_arg, function(x)
    local s = sign(x)
    return select(x == 0, s * s, 0)
  end)

  -- lerp(a, b, t) = a * (1 - t) + b * t; a and b scalars, vectors,
  -- matrices or quaternions of t's scalar type
  builtin("lerp", lerp_args, function(a, b, t)
    return a * (1 - t) + b * t
  end)

  -- smoothstep(a, b, x): the cubic Hermite step of x between edges a and b
  builtin("smoothstep", smoothstep_args, function(a, b, x)
    local t = clamp((x - a) / (b - a), 0, 1)
    return t * t * (3 - 2 * t)
  end)

  -- degrees and radians (constants as Warp's RAD_TO_DEG and DEG_TO_RAD)
  builtin("degrees", float_arg, function(x)
    return x * 57.29577951308232087679
  end)
  builtin("radians", float_arg, function(x)
    return x * 0.01745329251994329577
  end)

  -- frac(x) = x - trunc(x), with the sign of x
  builtin("frac", float_arg, function(x)
    return x - trunc(x)
  end)

  -- isnan(x): x is NaN (a vector: any component is)
  builtin("isnan", float_arg, function(x)
    return x ~= x
  end)

  -- isfinite(x): x is neither NaN nor infinite (a vector: every component;
  -- x - x is 0 exactly for finite x, NaN otherwise)
  builtin("isfinite", float_arg, function(x)
    local d = x - x
    return d == d
  end)

  -- isinf(x): x is +-infinity (a vector: any component is, NaN ones or
  -- not, as Warp). max(x, 0) - min(x, 0) is |x| with each NaN component
  -- made 0 (min and max return their second operand when the first is
  -- NaN); the zero is s - s, exact in x's type. inf - inf is NaN.
  builtin("isinf", float_arg, function(x)
    local s = sign(x)
    local z = s - s
    local a = max(x, z) - min(x, z)
    local d = a - a
    return d ~= d
  end)

  ---------------------------------------------------------------------
  -- vectors and matrices (warp/native/vec.h, mat.h; warp/_src/math.py)
  ---------------------------------------------------------------------
  local FLOATS = { "h", "f", "d" } -- float16, float32, float64 suffixes
  local BITS = { h = 16, f = 32, d = 64 }
  -- the scalar type of a float suffix
  local function scalar_t(sfx) return weft["float" .. BITS[sfx]] end

  -- weft[name] = a weft.func with one overload per float type: make(sfx)
  -- returns the overload's spec ({ arg = type, ..., function }) built
  -- with that type's constructors as upvalues.
  local function typed(name, check, make)
    local f
    for _, sfx in ipairs(FLOATS) do
      local spec = make(sfx)
      spec.name = name
      if f then f:overload(spec) else f = func(spec) end
    end
    f._builtin = check or any_args
    weft[name] = f
  end

  local function kinds_arg(kinds, what)
    return function(...)
      for _, d in ipairs { ... } do
        if not kinds[d.kind] then return "the arguments must be " .. what .. literal_hint(d) end
      end
    end
  end
  local vec_arg = kinds_arg({ vec = true }, "vectors")
  local mat_arg = kinds_arg({ mat = true }, "matrices")
  local vec_scalar_arg = kinds_arg({ vec = true, float = true }, "a vector and a float scalar")

  -- trace(m): the sum of the diagonal, of a square matrix (as Warp)
  local function square_mat_arg(m)
    local why = mat_arg(m)
    if why then return why end
    if m.rows ~= m.cols then
      return "the matrix must be square, got " .. m.rows .. "x" .. m.cols
    end
  end
  builtin("trace", square_mat_arg, function(m)
    local r = m[0][0]
    for i = 1, #m - 1 do r = r + m[i][i] end
    return r
  end)

  -- ddot(a, b): the sum of a[i][j] * b[i][j]
  builtin("ddot", mat_arg, function(a, b)
    local r = a[0][0] * b[0][0]
    for i = 0, #a - 1 do
      for j = 0, #a[0] - 1 do
        if i + j > 0 then r = r + a[i][j] * b[i][j] end
      end
    end
    return r
  end)

  -- get_diag(m): the diagonal as a vector
  builtin("get_diag", mat_arg, function(m)
    local d = m[0]
    for i = 1, #m - 1 do d[i] = m[i][i] end
    return d
  end)

  -- skew(v): the matrix with skew(v) * w = cross(v, w)
  typed("skew", vec_arg, function(sfx)
    local M = weft["mat33" .. sfx]
    return { v = weft["vec3" .. sfx], function(v)
      local s = sign(v[0])
      local z = s - s
      return M(z, -v[2], v[1], v[2], z, -v[0], -v[1], v[0], z)
    end }
  end)

  -- the norms of warp/_src/math.py
  builtin("norm_l1", vec_arg, function(v)
    local n = abs(v[0])
    for i = 1, #v - 1 do n = n + abs(v[i]) end
    return n
  end)
  builtin("norm_l2", vec_arg, function(v)
    return weft.length(v)
  end)
  local huber = helper(function(v, delta)
    local a = weft.dot(v, v)
    if a <= delta * delta then return 0.5 * a end
    return delta * (weft.sqrt(a) - 0.5 * delta)
  end)
  local pseudo_huber = helper(function(v, delta)
    local a = weft.dot(v, v)
    return delta * weft.sqrt(1.0 + a / (delta * delta))
  end)
  builtin("norm_huber", vec_scalar_arg, function(v, delta) return huber(v, delta) end)
  weft.norm_huber:overload(function(v) return huber(v, 1.0) end)
  builtin("norm_pseudo_huber", vec_scalar_arg, function(v, delta) return pseudo_huber(v, delta) end)
  weft.norm_pseudo_huber:overload(function(v) return pseudo_huber(v, 1.0) end)
  builtin("smooth_normalize", vec_scalar_arg, function(v, delta)
    return v / pseudo_huber(v, delta)
  end)
  weft.smooth_normalize:overload(function(v) return v / pseudo_huber(v, 1.0) end)

  -- argmin(v), argmax(v): the index (uint32) of the first smallest
  -- (largest) component; NaN components are skipped, all NaN gives 0
  local arg_extreme = helper(function(v, want_max)
    local r = weft.uint32(0)
    local best = v[0]
    for i = 1, #v - 1 do
      local x = v[i]
      local better = select(want_max, x < best, x > best)
      if x == x and (best ~= best or better) then
        best = x
        r = weft.uint32(i)
      end
    end
    return r
  end)
  builtin("argmin", vec_arg, function(v) return arg_extreme(v, false) end)
  builtin("argmax", vec_arg, function(v) return arg_extreme(v, true) end)

  -- cw_mul, cw_div: componentwise product and quotient of vectors
  builtin("cw_mul", vec_arg, function(a, b)
    local r = a
    for i = 0, #a - 1 do r[i] = a[i] * b[i] end
    return r
  end)
  builtin("cw_div", vec_arg, function(a, b)
    local r = a
    for i = 0, #a - 1 do r[i] = a[i] / b[i] end
    return r
  end)

  ---------------------------------------------------------------------
  -- quaternions, transforms, spatial vectors (warp/native/quat.h,
  -- spatial.h; warp/_src/math.py)
  ---------------------------------------------------------------------
  local quat_arg = kinds_arg({ quat = true }, "quaternions")
  local transform_arg = kinds_arg({ transform = true }, "transforms")

  -- quat_to_matrix(q): the rotation matrix, columns q rotating the axes
  typed("quat_to_matrix", quat_arg, function(sfx)
    local V = weft["vec3" .. sfx]
    return { q = weft["quat" .. sfx], function(q)
      return weft.matrix_from_cols(weft.quat_rotate(q, V(1.0, 0.0, 0.0)),
        weft.quat_rotate(q, V(0.0, 1.0, 0.0)), weft.quat_rotate(q, V(0.0, 0.0, 1.0)))
    end }
  end)

  -- quat_from_matrix(m): of a 3x3 rotation (or the top left of a 4x4),
  -- Warp's branch on the trace and the largest diagonal element
  local from_matrix = function(sfx)
    local Q = weft["quat" .. sfx]
    return function(m)
      local tr = m[0][0] + m[1][1] + m[2][2]
      local x, y, z, w, h
      if tr >= 0.0 then
        h = weft.sqrt(tr + 1.0)
        w = 0.5 * h
        h = 0.5 / h
        x = (m[2][1] - m[1][2]) * h
        y = (m[0][2] - m[2][0]) * h
        z = (m[1][0] - m[0][1]) * h
      else
        local md = 0
        if m[1][1] > m[0][0] then md = 1 end
        if m[2][2] > select(md == 1, m[0][0], m[1][1]) then md = 2 end
        if md == 0 then
          h = weft.sqrt((m[0][0] - (m[1][1] + m[2][2])) + 1.0)
          x = 0.5 * h
          h = 0.5 / h
          y = (m[0][1] + m[1][0]) * h
          z = (m[2][0] + m[0][2]) * h
          w = (m[2][1] - m[1][2]) * h
        elseif md == 1 then
          h = weft.sqrt((m[1][1] - (m[2][2] + m[0][0])) + 1.0)
          y = 0.5 * h
          h = 0.5 / h
          z = (m[1][2] + m[2][1]) * h
          x = (m[0][1] + m[1][0]) * h
          w = (m[0][2] - m[2][0]) * h
        else
          h = weft.sqrt((m[2][2] - (m[0][0] + m[1][1])) + 1.0)
          z = 0.5 * h
          h = 0.5 / h
          x = (m[2][0] + m[0][2]) * h
          y = (m[1][2] + m[2][1]) * h
          w = (m[1][0] - m[0][1]) * h
        end
      end
      return weft.normalize(Q(x, y, z, w))
    end
  end
  typed("quat_from_matrix", mat_arg, function(sfx)
    return { m = weft["mat33" .. sfx], from_matrix(sfx) }
  end)
  for _, sfx in ipairs(FLOATS) do
    weft.quat_from_matrix:overload{ m = weft["mat44" .. sfx], from_matrix(sfx) }
  end

  -- quat_rpy(roll, pitch, yaw)
  typed("quat_rpy", nil, function(sfx)
    local S, Q = scalar_t(sfx), weft["quat" .. sfx]
    return { roll = S, pitch = S, yaw = S, function(roll, pitch, yaw)
      local cy, sy = weft.cos(yaw * 0.5), weft.sin(yaw * 0.5)
      local cr, sr = weft.cos(roll * 0.5), weft.sin(roll * 0.5)
      local cp, sp = weft.cos(pitch * 0.5), weft.sin(pitch * 0.5)
      return Q(cy * sr * cp - sy * cr * sp, cy * cr * sp + sy * sr * cp,
        sy * cr * cp - cy * sr * sp, cy * cr * cp + sy * sr * sp)
    end }
  end)

  -- quat_to_axis_angle(q): axis, angle (Warp's out arguments, returned)
  typed("quat_to_axis_angle", quat_arg, function(sfx)
    local V = weft["vec3" .. sfx]
    return { q = weft["quat" .. sfx], function(q)
      local v = V(q[0], q[1], q[2])
      local axis = weft.normalize(v)
      if q[3] < 0.0 then axis = -axis end
      return axis, 2.0 * weft.atan2(weft.length(v), abs(q[3]))
    end }
  end)

  -- quat_slerp(q0, q1, t), Warp's: q0 * axis_angle(t * angle(q0^-1 q1))
  builtin("quat_slerp", nil, function(q0, q1, t)
    local axis, angle = weft.quat_to_axis_angle(weft.quat_inverse(q0) * q1)
    return q0 * weft.quat_from_axis_angle(axis, t * angle)
  end)
  weft.slerp = weft.quat_slerp

  -- quat_to_rpy(q): roll, pitch, yaw as a vec3 (warp/_src/math.py)
  typed("quat_to_rpy", quat_arg, function(sfx)
    local V = weft["vec3" .. sfx]
    return { q = weft["quat" .. sfx], function(q)
      local x, y, z, w = q[0], q[1], q[2], q[3]
      local t0 = 2.0 * (w * x + y * z)
      local t1 = 1.0 - 2.0 * (x * x + y * y)
      local roll = weft.atan2(t0, t1)
      local t2 = clamp(2.0 * (w * y - z * x), -1.0, 1.0)
      local pitch = weft.asin(t2)
      local t3 = 2.0 * (w * z + x * y)
      local t4 = 1.0 - 2.0 * (y * y + z * z)
      return V(roll, pitch, weft.atan2(t3, t4))
    end }
  end)

  -- transforms: t = (p, q) maps x to q x q^-1 + p
  typed("transform_multiply", transform_arg, function(sfx)
    local T = weft["transform" .. sfx]
    return { a = T, b = T, function(a, b)
      return T(weft.quat_rotate(a.q, b.p) + a.p, a.q * b.q)
    end }
  end)
  typed("transform_inverse", transform_arg, function(sfx)
    local T = weft["transform" .. sfx]
    return { t = T, function(t)
      local qi = weft.quat_inverse(t.q)
      return T(-weft.quat_rotate(qi, t.p), qi)
    end }
  end)
  -- transform_to_matrix(t): the 4x4 matrix of the transform
  typed("transform_to_matrix", transform_arg, function(sfx)
    local M = weft["mat44" .. sfx]
    return { t = weft["transform" .. sfx], function(t)
      local r = weft.quat_to_matrix(t.q)
      local p = t.p
      local s = sign(p[0])
      local z, o = s - s, s * s
      return M(r[0][0], r[0][1], r[0][2], p[0], r[1][0], r[1][1], r[1][2], p[1],
        r[2][0], r[2][1], r[2][2], p[2], z, z, z, o)
    end }
  end)
  -- transform_from_matrix(m): the transform of a 4x4 rigid matrix
  typed("transform_from_matrix", mat_arg, function(sfx)
    local T, V = weft["transform" .. sfx], weft["vec3" .. sfx]
    return { m = weft["mat44" .. sfx], function(m)
      return T(V(m[0][3], m[1][3], m[2][3]), weft.quat_from_matrix(m))
    end }
  end)

  -- spatial vectors: (w, v), top w = components 0-2, bottom v = 3-5
  local sv_arg = kinds_arg({ vec = true }, "spatial vectors")
  typed("spatial_top", sv_arg, function(sfx)
    local V = weft["vec3" .. sfx]
    return { a = weft["spatial_vector" .. sfx], function(a) return V(a[0], a[1], a[2]) end }
  end)
  typed("spatial_bottom", sv_arg, function(sfx)
    local V = weft["vec3" .. sfx]
    return { a = weft["spatial_vector" .. sfx], function(a) return V(a[3], a[4], a[5]) end }
  end)
  builtin("spatial_dot", sv_arg, function(a, b) return weft.dot(a, b) end)
  typed("spatial_cross", sv_arg, function(sfx)
    local SV = weft["spatial_vector" .. sfx]
    return { a = SV, b = SV, function(a, b)
      local aw, av = weft.spatial_top(a), weft.spatial_bottom(a)
      local bw, bv = weft.spatial_top(b), weft.spatial_bottom(b)
      return SV(weft.cross(aw, bw), weft.cross(av, bw) + weft.cross(aw, bv))
    end }
  end)
  typed("spatial_cross_dual", sv_arg, function(sfx)
    local SV = weft["spatial_vector" .. sfx]
    return { a = SV, b = SV, function(a, b)
      local aw, av = weft.spatial_top(a), weft.spatial_bottom(a)
      local bw, bv = weft.spatial_top(b), weft.spatial_bottom(b)
      return SV(weft.cross(aw, bw) + weft.cross(av, bv), weft.cross(aw, bv))
    end }
  end)
  -- spatial_adjoint(R, S): the 6x6 [[R, 0], [S, R]]
  typed("spatial_adjoint", mat_arg, function(sfx)
    local SV, M3, V = weft["spatial_vector" .. sfx], weft["mat33" .. sfx], weft["vec3" .. sfx]
    return { R = M3, S = M3, function(R, S)
      local z = V()
      return weft.matrix_from_rows(SV(R[0], z), SV(R[1], z), SV(R[2], z), SV(S[0], R[0]),
        SV(S[1], R[1]), SV(S[2], R[2]))
    end }
  end)
  -- velocity_at_point(qd, r) = v + w x r
  builtin("velocity_at_point", nil, function(qd, r)
    return weft.spatial_bottom(qd) + weft.cross(weft.spatial_top(qd), r)
  end)
  -- transform_twist(t, x), transform_wrench(t, x) (warp/_src/math.py)
  typed("transform_twist", nil, function(sfx)
    local SV = weft["spatial_vector" .. sfx]
    return { t = weft["transform" .. sfx], x = SV, function(t, x)
      local w = weft.quat_rotate(t.q, weft.spatial_top(x))
      local v = weft.quat_rotate(t.q, weft.spatial_bottom(x))
      return SV(w, v + weft.cross(t.p, w))
    end }
  end)
  typed("transform_wrench", nil, function(sfx)
    local SV = weft["spatial_vector" .. sfx]
    return { t = weft["transform" .. sfx], x = SV, function(t, x)
      local f = weft.quat_rotate(t.q, weft.spatial_bottom(x))
      return SV(weft.quat_rotate(t.q, weft.spatial_top(x)) + weft.cross(t.p, f), f)
    end }
  end)

  -- quat_twist(axis, q): the twist of q about a unit axis (swing-twist)
  typed("quat_twist", nil, function(sfx)
    local V, Q = weft["vec3" .. sfx], weft["quat" .. sfx]
    return { axis = V, q = Q, function(axis, q)
      local a = weft.dot(V(q[0], q[1], q[2]), axis) * axis
      return weft.normalize(Q(a[0], a[1], a[2], q[3]))
    end }
  end)
  builtin("quat_twist_angle", nil, function(axis, q)
    return 2.0 * weft.atan2(abs(q[0] * axis[0] + q[1] * axis[1] + q[2] * axis[2]), q[3])
  end)
  builtin("quat_twist_angle_signed", nil, function(axis, q)
    return 2.0 * weft.atan2(q[0] * axis[0] + q[1] * axis[1] + q[2] * axis[2], q[3])
  end)

  -- quat_from_euler(e, i, j, k): rotations e[i], e[j], e[k] about the
  -- fixed axes i, j, k (0, 1, 2) in that order: q_k q_j q_i
  typed("quat_from_euler", nil, function(sfx)
    local V, Q = weft["vec3" .. sfx], weft["quat" .. sfx]
    local axis_quat = helper(function(ax, h)
      local s, c = weft.sin(h), weft.cos(h)
      local z = s - s
      if ax == 0 then return Q(s, z, z, c) end
      if ax == 1 then return Q(z, s, z, c) end
      return Q(z, z, s, c)
    end)
    return { e = V, i = weft.int32, j = weft.int32, k = weft.int32, function(e, i, j, k)
      local qi = axis_quat(i, 0.5 * e[i])
      local qj = axis_quat(j, 0.5 * e[j])
      local qk = axis_quat(k, 0.5 * e[k])
      return qk * (qj * qi)
    end }
  end)

  -- quat_to_euler(q, i, j, k): the angles quat_from_euler takes back, for
  -- Tait-Bryan (i ~= k) and proper Euler (i == k) orders, gimbal lock too
  -- (the method of warp/_src/math.py: 1-based axes, scalar-first q)
  typed("quat_to_euler", nil, function(sfx)
    local V = weft["vec3" .. sfx]
    local S = scalar_t(sfx)
    local pick = helper(function(n, q1, q2, q3)
      if n == 2 then return q2 end
      if n == 3 then return q3 end
      return q1
    end)
    return { q = weft["quat" .. sfx], i0 = weft.int32, j0 = weft.int32, k0 = weft.int32, function(q, i0, j0, k0)
      local q0, q1, q2, q3 = q[3], q[0], q[1], q[2]
      local i, j, k = i0 + 1, j0 + 1, k0 + 1
      local proper = i == k
      if proper then k = 6 - i - j end
      local e = S((i - j) * (j - k) * (k - i)) * 0.5
      local a = q0
      local b = pick(i, q1, q2, q3)
      local c = pick(j, q1, q2, q3)
      local d = pick(k, q1, q2, q3) * e
      if not proper then
        a = a - pick(j, q1, q2, q3)
        b = b + pick(k, q1, q2, q3) * e
        c = c + q0
        d = d - pick(i, q1, q2, q3)
      end
      local t2 = weft.acos(2.0 * (a * a + b * b) / (a * a + b * b + c * c + d * d) - 1.0)
      local tp, tm = weft.atan2(b, a), weft.atan2(d, c)
      local t1 = t2 - t2
      local t3
      if abs(t2) < 1e-6 then
        t3 = 2.0 * tp - t1
      elseif abs(t2 - 3.14159265358979323846) < 1e-6 then
        t3 = 2.0 * tm + t1
      else
        t1 = tp - tm
        t3 = tp + tm
      end
      if not proper then
        t2 = t2 - 1.57079632679489661923
        t3 = t3 * e
      end
      local r = V(t1, t2, t3)
      if i == 2 then r = V(t2, t1, t3) elseif i == 3 then r = V(t3, t2, t1) end
      r[j - 1] = t2
      r[k - 1] = t3
      return r
    end }
  end)

  ---------------------------------------------------------------------
  -- arrays and checks
  ---------------------------------------------------------------------
  -- lower_bound(arr, value) and lower_bound(arr, begin, end, value):
  -- the first index in [begin, end - 1] whose element is not below value
  -- in a sorted 1-d array (Warp's: end - 1 when every element is below)
  local lower_bound = helper(function(arr, lo, hi, value)
    local upper = hi - 1
    while lo < upper do
      local mid = lo + weft.floordiv(upper - lo, 2)
      if arr[mid] < value then lo = mid + 1 else upper = mid end
    end
    return lo
  end)
  builtin("lower_bound", nil, function(arr, value) return lower_bound(arr, 0, #arr, value) end)
  weft.lower_bound:overload(function(arr, b, e, value) return lower_bound(arr, b, e, value) end)

  -- expect_near(actual, expected [, tolerance = 1e-6]): prints Warp's
  -- message when the two differ by more than the tolerance (vectors: the
  -- largest component difference)
  local expect_near = helper(function(actual, expected, tolerance, d)
    if d > tolerance then
      print("Error, expect_near() failed with tolerance", tolerance, "\n    Expected:", expected,
        "\n    Actual:", actual, "\n    Absolute difference:", d)
    end
  end)
  builtin("expect_near", nil, function(a, b, t) expect_near(a, b, t, abs(a - b)) end)
  weft.expect_near:overload(function(a, b) expect_near(a, b, 1e-6, abs(a - b)) end)
  for _, sfx in ipairs(FLOATS) do
    local V, S = weft["vec3" .. sfx], scalar_t(sfx)
    weft.expect_near:overload{ a = V, b = V, t = S, function(a, b, t) expect_near(a, b, t, weft.max(abs(a - b))) end }
    weft.expect_near:overload{ a = V, b = V, function(a, b) expect_near(a, b, 1e-6, weft.max(abs(a - b))) end }
  end

  -- breakpoint(): a no-op in weft's kernels (Warp stops a debugger there
  -- in debug builds; attach gdb to the CPU launch and break on the line)
  builtin("breakpoint", nil, function() end)

  ---------------------------------------------------------------------
  -- svd3, svd2, qr3, eig3: Warp's methods (warp/native/svd.h, after
  -- McAdams et al., "Computing the SVD of 3x3 matrices with minimal
  -- branching"): Jacobi sweeps with approximate Givens quaternions on
  -- A^T A, singular values sorted, then a Givens QR. Results are Lua
  -- multiple returns where Warp writes out arguments:
  --   local U, sigma, V = weft.svd3(A)    local Q, R = weft.qr3(A)
  --   local Q, d = weft.eig3(A)           local U, sigma, V = weft.svd2(A)
  -- Autodiff differentiates these steps themselves (Warp has analytic
  -- adjoints instead): the gradient of the function computed.
  ---------------------------------------------------------------------
  local function decompositions(sfx)
    local M3, V3, V2, M2 = weft["mat33" .. sfx], weft["vec3" .. sfx], weft["vec2" .. sfx], weft["mat22" .. sfx]
    local Q4, S = weft["quat" .. sfx], scalar_t(sfx)
    local ITERS = sfx == "d" and 8 or 4
    local EPS = sfx == "d" and 1e-12 or 1e-6

    -- one conjugation S = Q' S Q of symmetric S (s11 s21 s22 s31 s32 s33)
    -- by the Givens rotation of its (p, q) pair, accumulated into qv;
    -- returns S rearranged for the next pair
    local conj = helper(function(s11, s21, s22, s31, s32, s33, qv, x, y, z)
      local ch = 2.0 * (s11 - s22)
      local sh = s21
      if 5.82842712474619 * sh * sh < ch * ch then
        local w = 1.0 / weft.sqrt(ch * ch + sh * sh)
        ch = w * ch
        sh = w * sh
      else -- cos and sin of pi/8 (an if, not a select: w may be infinite)
        ch = S(0.9238795325112867)
        sh = S(0.3826834323650898)
      end
      local scale = ch * ch + sh * sh
      local a = (ch * ch - sh * sh) / scale
      local b = (2.0 * sh * ch) / scale
      local n11 = a * (a * s11 + b * s21) + b * (a * s21 + b * s22)
      local n21 = a * (-b * s11 + a * s21) + b * (-b * s21 + a * s22)
      local n22 = -b * (-b * s11 + a * s21) + a * (-b * s21 + a * s22)
      local n31 = a * s31 + b * s32
      local n32 = -b * s31 + a * s32
      local t = V3(qv[0] * sh, qv[1] * sh, qv[2] * sh)
      sh = sh * qv[3]
      local q = qv * ch
      q[z] = q[z] + sh
      q[3] = q[3] - t[z]
      q[x] = q[x] + t[y]
      q[y] = q[y] - t[x]
      return n22, n32, s33, n21, n31, n11, q
    end)

    -- the quaternion whose rotation diagonalizes symmetric S
    local jacobi = helper(function(s11, s21, s22, s31, s32, s33)
      local q = Q4(0.0, 0.0, 0.0, 1.0)
      for _ = 1, ITERS do
        s11, s21, s22, s31, s32, s33, q = conj(s11, s21, s22, s31, s32, s33, q, 0, 1, 2)
        s11, s21, s22, s31, s32, s33, q = conj(s11, s21, s22, s31, s32, s33, q, 1, 2, 0)
        s11, s21, s22, s31, s32, s33, q = conj(s11, s21, s22, s31, s32, s33, q, 2, 0, 1)
      end
      return q
    end)

    local quat_mat = helper(function(q)
      local x, y, z, w = q[0], q[1], q[2], q[3]
      local qxx, qyy, qzz, qxz, qxy, qyz = x * x, y * y, z * z, x * z, x * y, y * z
      local qwx, qwy, qwz = w * x, w * y, w * z
      return M3(1.0 - 2.0 * (qyy + qzz), 2.0 * (qxy - qwz), 2.0 * (qxz + qwy),
        2.0 * (qxy + qwz), 1.0 - 2.0 * (qxx + qzz), 2.0 * (qyz - qwx),
        2.0 * (qxz - qwy), 2.0 * (qyz + qwx), 1.0 - 2.0 * (qxx + qyy))
    end)

    -- the Givens rotation (ch, sh) that annihilates a2 against pivot a1
    local givens = helper(function(a1, a2)
      local rho = weft.sqrt(a1 * a1 + a2 * a2)
      local sh = select(rho > EPS, S(0.0), a2)
      local ch = abs(a1) + max(rho, EPS)
      if a1 < 0.0 then sh, ch = ch, sh end
      local w = 1.0 / weft.sqrt(ch * ch + sh * sh)
      return ch * w, sh * w
    end)

    local qr = helper(function(B)
      local b11, b12, b13 = B[0][0], B[0][1], B[0][2]
      local b21, b22, b23 = B[1][0], B[1][1], B[1][2]
      local b31, b32, b33 = B[2][0], B[2][1], B[2][2]
      local ch1, sh1 = givens(b11, b21)
      local a = 1.0 - 2.0 * sh1 * sh1
      local b = 2.0 * ch1 * sh1
      local r11, r12, r13 = a * b11 + b * b21, a * b12 + b * b22, a * b13 + b * b23
      local r21, r22, r23 = -b * b11 + a * b21, -b * b12 + a * b22, -b * b13 + a * b23
      local r31, r32, r33 = b31, b32, b33
      local ch2, sh2 = givens(r11, r31)
      a = 1.0 - 2.0 * sh2 * sh2
      b = 2.0 * ch2 * sh2
      b11, b12, b13 = a * r11 + b * r31, a * r12 + b * r32, a * r13 + b * r33
      b21, b22, b23 = r21, r22, r23
      b31, b32, b33 = -b * r11 + a * r31, -b * r12 + a * r32, -b * r13 + a * r33
      local ch3, sh3 = givens(b22, b32)
      a = 1.0 - 2.0 * sh3 * sh3
      b = 2.0 * ch3 * sh3
      local R = M3(b11, b12, b13, a * b21 + b * b31, a * b22 + b * b32, a * b23 + b * b33,
        -b * b21 + a * b31, -b * b22 + a * b32, -b * b23 + a * b33)
      local sh12, sh22, sh32 = sh1 * sh1, sh2 * sh2, sh3 * sh3
      local Q = M3((-1.0 + 2.0 * sh12) * (-1.0 + 2.0 * sh22),
        4.0 * ch2 * ch3 * (-1.0 + 2.0 * sh12) * sh2 * sh3 + 2.0 * ch1 * sh1 * (-1.0 + 2.0 * sh32),
        4.0 * ch1 * ch3 * sh1 * sh3 - 2.0 * ch2 * (-1.0 + 2.0 * sh12) * sh2 * (-1.0 + 2.0 * sh32),
        2.0 * ch1 * sh1 * (1.0 - 2.0 * sh22),
        -8.0 * ch1 * ch2 * ch3 * sh1 * sh2 * sh3 + (-1.0 + 2.0 * sh12) * (-1.0 + 2.0 * sh32),
        -2.0 * ch3 * sh3 + 4.0 * sh1 * (ch3 * sh1 * sh3 + ch1 * ch2 * sh2 * (-1.0 + 2.0 * sh32)),
        2.0 * ch2 * sh2, 2.0 * ch3 * (1.0 - 2.0 * sh22) * sh3, (-1.0 + 2.0 * sh22) * (-1.0 + 2.0 * sh32))
      return Q, R
    end)

    -- swap rows a and b of the transposed B and V (columns of B, V) when
    -- c, negating the one moved down (Warp's condNegSwap)
    local negswap = helper(function(c, a, b)
      return select(c, a, b), select(c, b, -a)
    end)

    local svd = helper(function(A)
      local ata = weft.transpose(A) * A
      local V = quat_mat(jacobi(ata[0][0], ata[1][0], ata[1][1], ata[2][0], ata[2][1], ata[2][2]))
      local Bt, Vt = weft.transpose(A * V), weft.transpose(V)
      local b1, b2, b3, v1, v2, v3 = Bt[0], Bt[1], Bt[2], Vt[0], Vt[1], Vt[2]
      local rho1, rho2, rho3 = weft.dot(b1, b1), weft.dot(b2, b2), weft.dot(b3, b3)
      local c = rho1 < rho2
      b1, b2 = negswap(c, b1, b2)
      v1, v2 = negswap(c, v1, v2)
      rho1, rho2 = select(c, rho1, rho2), select(c, rho2, rho1)
      c = rho1 < rho3
      b1, b3 = negswap(c, b1, b3)
      v1, v3 = negswap(c, v1, v3)
      rho3 = select(c, rho3, rho1) -- (Warp also swaps rho1 in, unused after)
      c = rho2 < rho3
      b2, b3 = negswap(c, b2, b3)
      v2, v3 = negswap(c, v2, v3)
      local U, R = qr(weft.matrix_from_cols(b1, b2, b3))
      return U, V3(R[0][0], R[1][1], R[2][2]), weft.matrix_from_cols(v1, v2, v3)
    end)

    local eig = helper(function(A)
      local Q = quat_mat(jacobi(A[0][0], A[1][0], A[1][1], A[2][0], A[2][1], A[2][2]))
      local u = (weft.transpose(Q) * A) * Q
      return Q, V3(u[0][0], u[1][1], u[2][2])
    end)

    local svd2 = helper(function(A)
      local a11, a12, a21, a22 = A[0][0], A[0][1], A[1][0], A[1][1]
      local ata11 = a11 * a11 + a21 * a21
      local ata12 = a11 * a12 + a21 * a22
      local ata22 = a12 * a12 + a22 * a22
      local tr = ata11 + ata22
      local diff = ata11 - ata22
      local disc = diff * diff + 4.0 * ata12 * ata12
      if disc == 0.0 then
        local s = weft.sqrt(0.5 * tr)
        local I = M2(1.0, 0.0, 0.0, 1.0)
        return I, V2(s, s), I
      end
      local sq = weft.sqrt(disc)
      local l1, l2 = (tr + sq) * 0.5, (tr - sq) * 0.5
      local inv1 = 1.0 / weft.sqrt(l1)
      local sigma1, sigma2 = 1.0 / inv1, weft.sqrt(l2)
      local v1y, v1x = diff - sq + 2.0 * ata12, diff + sq - 2.0 * ata12
      local len = v1x * v1x + v1y * v1y
      local v11, v21 = S(0.707106781186547524401), S(0.707106781186547524401)
      if len ~= 0.0 then
        local il = 1.0 / weft.sqrt(len)
        v11, v21 = v1x * il, v1y * il
      end
      local u11 = (a11 * v11 + a12 * v21) * inv1
      local u21 = (a21 * v11 + a22 * v21) * inv1
      local ds = sign(a11 * a22 - a12 * a21)
      return M2(u11, -u21 * ds, u21, u11 * ds), V2(sigma1, sigma2), M2(v11, -v21, v21, v11)
    end)

    return svd, qr, eig, svd2
  end

  for n, sfx in ipairs(FLOATS) do
    local svd, qr, eig, svd2 = decompositions(sfx)
    local M3, M2 = weft["mat33" .. sfx], weft["mat22" .. sfx]
    local specs = {
      svd3 = { A = M3, function(A) return svd(A) end },
      qr3 = { A = M3, function(A) return qr(A) end },
      eig3 = { A = M3, function(A) return eig(A) end },
      svd2 = { A = M2, function(A) return svd2(A) end },
    }
    for name, spec in pairs(specs) do
      spec.name = name
      if n == 1 then
        weft[name] = func(spec)
        weft[name]._builtin = mat_arg
      else
        weft[name]:overload(spec)
      end
    end
  end

  ---------------------------------------------------------------------
  -- noise, pnoise, curlnoise: Warp's Perlin noise (warp/native/noise.h)
  -- in float32, with its hashing of lattice points into rand_pcg, so the
  -- values are Warp's. The state is the seed (not advanced).
  ---------------------------------------------------------------------
  local u32, f32, i32 = weft.uint32, weft.float32, weft.int32
  local V2, V3, V4 = weft.vec2f, weft.vec3f, weft.vec4f
  local bxor, rshift = weft.bit_xor, weft.rshift

  -- rand_pcg, and randf of a state already advanced to s
  local pcg = helper(function(s)
    local b = s * 747796405 + 2891336453
    local c = bxor(rshift(b, rshift(b, 28) + 4), b) * 277803737
    return bxor(rshift(c, 22), c)
  end)
  local unit = helper(function(s) return f32(rshift(s, 8)) * (1.0 / 16777216.0) end)
  -- Warp's normalize: v / |v|, zero stays zero
  local norm = helper(function(v)
    local l = weft.sqrt(weft.dot(v, v))
    if l > 0.0 then return v / l end
    return v * 0.0
  end)
  local smoother = helper(function(t) return t * t * t * (t * (t * 6.0 - 15.0) + 10.0) end)
  local smoother_grad = helper(function(t) return 30.0 * t * t * (t * (t - 2.0) + 1.0) end)
  local interp = helper(function(a0, a1, t) return (a1 - a0) * smoother(t) + a0 end)
  local interp_grad = helper(function(a0, a1, t, da0, da1, dt)
    return (da1 - da0) * smoother(t) + (a1 - a0) * smoother_grad(t) * dt + da0
  end)

  -- the gradients at lattice points (the hashes of Warp's, where + binds
  -- before ^: ix p1 ^ (iy p2 + state))
  local grad1 = helper(function(st, ix)
    return 2.0 * unit(pcg(u32(ix) * 73856093 + st)) + -1.0
  end)
  local grad2 = helper(function(st, ix, iy)
    local s1 = pcg(bxor(u32(ix) * 73856093, u32(iy) * 19349663 + st))
    return norm(V2(unit(s1) - 0.5, unit(pcg(s1)) - 0.5))
  end)
  local grad3 = helper(function(st, ix, iy, iz)
    local s1 = pcg(bxor(bxor(u32(ix) * 73856093, u32(iy) * 19349663), u32(iz) * 53471161 + st))
    local s2 = pcg(s1)
    return norm(V3(unit(s1) - 0.5, unit(s2) - 0.5, unit(pcg(s2)) - 0.5))
  end)
  local grad4 = helper(function(st, ix, iy, iz, it)
    local h = bxor(bxor(bxor(u32(ix) * 73856093, u32(iy) * 19349663), u32(iz) * 53471161),
      u32(it) * 10000019 + st)
    local s1 = pcg(h)
    local s2 = pcg(s1)
    local s3 = pcg(s2)
    return norm(V4(unit(s1) - 0.5, unit(s2) - 0.5, unit(s3) - 0.5, unit(pcg(s3)) - 0.5))
  end)

  local noise1 = helper(function(st, x0, x1, dx)
    return interp(dx * grad1(st, x0), (dx - 1.0) * grad1(st, x1), dx)
  end)
  local dot2 = helper(function(st, ix, iy, dx, dy)
    local g = grad2(st, ix, iy)
    return dx * g[0] + dy * g[1]
  end)
  local noise2 = helper(function(st, x0, y0, x1, y1, dx, dy)
    local xi0 = interp(dot2(st, x0, y0, dx, dy), dot2(st, x1, y0, dx - 1.0, dy), dx)
    local xi1 = interp(dot2(st, x0, y1, dx, dy - 1.0), dot2(st, x1, y1, dx - 1.0, dy - 1.0), dx)
    return interp(xi0, xi1, dy)
  end)
  local dot3 = helper(function(st, ix, iy, iz, dx, dy, dz)
    local g = grad3(st, ix, iy, iz)
    return dx * g[0] + dy * g[1] + dz * g[2]
  end)
  local noise3 = helper(function(st, x0, y0, z0, x1, y1, z1, dx, dy, dz)
    local xi00 = interp(dot3(st, x0, y0, z0, dx, dy, dz), dot3(st, x1, y0, z0, dx - 1.0, dy, dz), dx)
    local xi10 = interp(dot3(st, x0, y1, z0, dx, dy - 1.0, dz), dot3(st, x1, y1, z0, dx - 1.0, dy - 1.0, dz), dx)
    local yi0 = interp(xi00, xi10, dy)
    local xi01 = interp(dot3(st, x0, y0, z1, dx, dy, dz - 1.0), dot3(st, x1, y0, z1, dx - 1.0, dy, dz - 1.0), dx)
    local xi11 = interp(dot3(st, x0, y1, z1, dx, dy - 1.0, dz - 1.0),
      dot3(st, x1, y1, z1, dx - 1.0, dy - 1.0, dz - 1.0), dx)
    return interp(yi0, interp(xi01, xi11, dy), dz)
  end)
  local dot4 = helper(function(st, ix, iy, iz, it, d)
    local g = grad4(st, ix, iy, iz, it)
    return d[0] * g[0] + d[1] * g[1] + d[2] * g[2] + d[3] * g[3]
  end)
  -- 4-d: the 16 corners, interpolated along x, y, z, then t
  local noise4 = helper(function(st, p0, p1, d)
    local r = d[0] - d[0]
    local zt = d[0] - d[0]
    for c = 0, 1 do -- t
      local zs = d[0] - d[0]
      for b = 0, 1 do -- z
        local ys = d[0] - d[0]
        for a = 0, 1 do -- y
          local yy = select(a == 1, p0[1], p1[1])
          local zz = select(b == 1, p0[2], p1[2])
          local tt = select(c == 1, p0[3], p1[3])
          local off = V4(0.0, f32(a), f32(b), f32(c))
          local v0 = dot4(st, p0[0], yy, zz, tt, d - off)
          local v1 = dot4(st, p1[0], yy, zz, tt, d - off - V4(1.0, 0.0, 0.0, 0.0))
          local xi = interp(v0, v1, d[0])
          if a == 0 then ys = xi else ys = interp(ys, xi, d[1]) end
        end
        if b == 0 then zs = ys else zs = interp(zs, ys, d[2]) end
      end
      if c == 0 then zt = zs else r = interp(zt, zs, d[3]) end
    end
    return r
  end)

  -- Warp's int mod: C's %, the sign of the dividend
  local cmod = helper(function(a, b)
    local r = a % b
    if r ~= 0 and (r < 0) ~= (a < 0) then r = r - b end
    return r
  end)
  local floor = weft.floor
  local cell = helper(function(x) return i32(floor(x)) end)

  builtin("noise", nil, function(state, x)
    local x0 = cell(x)
    return noise1(u32(state), x0, x0 + 1, x - floor(x))
  end)
  weft.noise:overload{ xy = V2, function(state, xy)
    local x0, y0 = cell(xy[0]), cell(xy[1])
    return noise2(u32(state), x0, y0, x0 + 1, y0 + 1, xy[0] - floor(xy[0]), xy[1] - floor(xy[1]))
  end }
  weft.noise:overload{ p = V3, function(state, p)
    local x0, y0, z0 = cell(p[0]), cell(p[1]), cell(p[2])
    return noise3(u32(state), x0, y0, z0, x0 + 1, y0 + 1, z0 + 1, p[0] - floor(p[0]), p[1] - floor(p[1]),
      p[2] - floor(p[2]))
  end }
  weft.noise:overload{ p = V4, function(state, p)
    local c0 = weft.vec4i(cell(p[0]), cell(p[1]), cell(p[2]), cell(p[3]))
    return noise4(u32(state), c0, c0 + weft.vec4i(1, 1, 1, 1), p - floor(p))
  end }

  builtin("pnoise", nil, function(state, x, px)
    local x0 = cmod(cell(x), px)
    return noise1(u32(state), x0, cmod(x0 + 1, px), x - floor(x))
  end)
  weft.pnoise:overload{ xy = V2, px = weft.int32, py = weft.int32, function(state, xy, px, py)
    local x0, y0 = cmod(cell(xy[0]), px), cmod(cell(xy[1]), py)
    return noise2(u32(state), x0, y0, cmod(x0 + 1, px), cmod(y0 + 1, py), xy[0] - floor(xy[0]),
      xy[1] - floor(xy[1]))
  end }
  weft.pnoise:overload{ p = V3, px = weft.int32, py = weft.int32, pz = weft.int32,
    function(state, p, px, py, pz)
      local x0, y0, z0 = cmod(cell(p[0]), px), cmod(cell(p[1]), py), cmod(cell(p[2]), pz)
      return noise3(u32(state), x0, y0, z0, cmod(x0 + 1, px), cmod(y0 + 1, py), cmod(z0 + 1, pz),
        p[0] - floor(p[0]), p[1] - floor(p[1]), p[2] - floor(p[2]))
    end }

  -- curlnoise(state, xy, octaves, lacunarity, gain) in 2-d: the rotated
  -- gradient of the octaves' noise
  local grad_noise2 = helper(function(st, x0, y0, x1, y1, dx, dy)
    local g00, g10 = grad2(st, x0, y0), grad2(st, x1, y0)
    local g01, g11 = grad2(st, x0, y1), grad2(st, x1, y1)
    local v00 = weft.dot(V2(dx, dy), g00)
    local v10 = weft.dot(V2(dx - 1.0, dy), g10)
    local v01 = weft.dot(V2(dx, dy - 1.0), g01)
    local v11 = weft.dot(V2(dx - 1.0, dy - 1.0), g11)
    local ex, ey = V2(1.0, 0.0), V2(0.0, 1.0)
    local xi0, gxi0 = interp(v00, v10, dx), interp_grad(v00, v10, dx, g00, g10, ex)
    local xi1, gxi1 = interp(v01, v11, dx), interp_grad(v01, v11, dx, g01, g11, ex)
    return interp_grad(xi0, xi1, dy, gxi0, gxi1, ey)
  end)
  -- the gradient of 3-d noise, as Warp's noise_3d_gradient
  local grad_noise3 = helper(function(st, c0, c1, d)
    local ex, ey, ez = V3(1.0, 0.0, 0.0), V3(0.0, 1.0, 0.0), V3(0.0, 0.0, 1.0)
    local g000, g100 = grad3(st, c0[0], c0[1], c0[2]), grad3(st, c1[0], c0[1], c0[2])
    local g010, g110 = grad3(st, c0[0], c1[1], c0[2]), grad3(st, c1[0], c1[1], c0[2])
    local g001, g101 = grad3(st, c0[0], c0[1], c1[2]), grad3(st, c1[0], c0[1], c1[2])
    local g011, g111 = grad3(st, c0[0], c1[1], c1[2]), grad3(st, c1[0], c1[1], c1[2])
    local v000 = weft.dot(d, g000)
    local v100 = weft.dot(d - ex, g100)
    local v010 = weft.dot(d - ey, g010)
    local v110 = weft.dot(d - ex - ey, g110)
    local v001 = weft.dot(d - ez, g001)
    local v101 = weft.dot(d - ex - ez, g101)
    local v011 = weft.dot(d - ey - ez, g011)
    local v111 = weft.dot(d - ex - ey - ez, g111)
    local dx, dy, dz = d[0], d[1], d[2]
    local xi00, gxi00 = interp(v000, v100, dx), interp_grad(v000, v100, dx, g000, g100, ex)
    local xi10, gxi10 = interp(v010, v110, dx), interp_grad(v010, v110, dx, g010, g110, ex)
    local xi01, gxi01 = interp(v001, v101, dx), interp_grad(v001, v101, dx, g001, g101, ex)
    local xi11, gxi11 = interp(v011, v111, dx), interp_grad(v011, v111, dx, g011, g111, ex)
    local yi0, gyi0 = interp(xi00, xi10, dy), interp_grad(xi00, xi10, dy, gxi00, gxi10, ey)
    local yi1, gyi1 = interp(xi01, xi11, dy), interp_grad(xi01, xi11, dy, gxi01, gxi11, ey)
    return interp_grad(yi0, yi1, dz, gyi0, gyi1, ez)
  end)
  builtin("curlnoise", nil, function(state, xy, octaves, lacunarity, gain)
    local st = u32(state)
    local sum = V2(0.0, 0.0)
    local freq, amp = f32(1.0), f32(1.0)
    for _ = 1, octaves do
      local pt = freq * xy
      local x0, y0 = cell(pt[0]), cell(pt[1])
      sum = sum + amp * grad_noise2(st, x0, y0, x0 + 1, y0 + 1, pt[0] - floor(pt[0]), pt[1] - floor(pt[1]))
      amp = amp * gain
      freq = freq * lacunarity
    end
    return V2(-sum[1], sum[0])
  end)

  ---------------------------------------------------------------------
  -- poisson(state, lam) and sample_cdf(state, cdf): random draws in
  -- weft.funcs. A function marked _rng_inout returns the advanced state
  -- last; the front end (resolve.c) writes it back to the caller's state
  -- variable, so weft.poisson(s, 3.0) advances s as weft.randf(s) does.
  ---------------------------------------------------------------------
  local function drawing(f)
    f._rng_inout = true
    return f
  end

  -- log-gamma of SPECFUN (Zhang and Jin), Warp's random_loggam, float32
  local loggam = helper(function(x)
    if x == 1.0 or x == 2.0 then return f32(0.0) end
    local n = u32(0)
    if x < 7.0 then n = u32(7.0 - x) end
    local x0 = x + f32(n)
    local x2 = (1.0 / x0) * (1.0 / x0)
    local gl0 = f32(-1.39243221690590)
    gl0 = gl0 * x2 + 1.796443723688307e-01
    gl0 = gl0 * x2 + -2.955065359477124e-02
    gl0 = gl0 * x2 + 6.410256410256410e-03
    gl0 = gl0 * x2 + -1.917526917526918e-03
    gl0 = gl0 * x2 + 8.417508417508418e-04
    gl0 = gl0 * x2 + -5.952380952380952e-04
    gl0 = gl0 * x2 + 7.936507936507937e-04
    gl0 = gl0 * x2 + -2.777777777777778e-03
    gl0 = gl0 * x2 + 8.333333333333333e-02
    local gl = gl0 / x0 + 0.5 * 1.8378770664093453 + (x0 - 0.5) * weft.log(x0) - x0
    if x < 7.0 then
      for _ = 1, n do
        gl = gl - weft.log(x0 - 1.0)
        x0 = x0 - 1.0
      end
    end
    return gl
  end)

  -- small lam: multiply uniforms until the product drops below e^-lam
  local poisson_mult = drawing(helper(function(state, lam)
    local enlam = weft.exp(-lam)
    local x = u32(0)
    local prod = f32(1.0)
    while true do
      prod = prod * weft.randf(state)
      if prod > enlam then x = x + 1 else return x, state end
    end
  end))

  -- large lam: Hoermann's transformed rejection (PTRS), Warp's constants
  local poisson_ptrs = drawing(helper(function(state, lam)
    local slam, loglam = weft.sqrt(lam), weft.log(lam)
    local b = 0.931 + 2.53 * slam
    local a = -0.059 + 0.02483 * b
    local invalpha = 1.1239 + 1.1328 / (b - 3.4)
    local vr = 0.9277 - 3.6224 / (b - 2.0)
    while true do
      local U = weft.randf(state) - 0.5
      local V = weft.randf(state)
      local us = 0.5 - abs(U)
      local k = floor((2.0 * a / us + b) * U + lam + 0.43)
      if us >= 0.07 and V <= vr then return u32(k), state end
      if not (k < 0.0 or (us < 0.013 and V > us)) then
        if weft.log(V) + weft.log(invalpha) - weft.log(a / (us * us) + b) <= -lam + k * loglam - loggam(k + 1.0) then
          return u32(k), state
        end
      end
    end
  end))

  builtin("poisson", function(_, lam)
    if lam.name ~= "float32" then return "lam must be a float32" .. literal_hint(lam) end
  end, function(state, lam)
    local x = u32(0)
    if lam >= 10.0 then
      x = poisson_ptrs(state, lam)
    elseif lam ~= 0.0 then
      x = poisson_mult(state, lam)
    end
    return x, state
  end)
  drawing(weft.poisson)

  -- sample_cdf(state, cdf): the first index whose cumulative value is not
  -- below a uniform draw (Warp's lower_bound of randf)
  builtin("sample_cdf", nil, function(state, cdf)
    local u = weft.randf(state)
    return lower_bound(cdf, 0, #cdf, u), state
  end)
  drawing(weft.sample_cdf)

  -- Warp's generic constructors of quaternions and transforms: the float
  -- type is the arguments' (quaternion(x, y, z, w), quaternion(v, w),
  -- transformation(p, q))
  typed("quaternion", nil, function(sfx)
    local S, Q = scalar_t(sfx), weft["quat" .. sfx]
    return { x = S, y = S, z = S, w = S, function(x, y, z, w) return Q(x, y, z, w) end }
  end)
  typed("transformation", nil, function(sfx)
    local T = weft["transform" .. sfx]
    return { p = weft["vec3" .. sfx], q = weft["quat" .. sfx], function(p, q) return T(p, q) end }
  end)
  for _, sfx in ipairs(FLOATS) do
    local S, Q = scalar_t(sfx), weft["quat" .. sfx]
    weft.quaternion:overload{ v = weft["vec3" .. sfx], w = S, function(v, w) return Q(v, w) end }
  end

  -- expect_eq(actual, expected), expect_neq: print Warp's message when the
  -- check fails (equality of every component for vectors and matrices)
  builtin("expect_eq", nil, function(actual, expected)
    if not (actual == expected) then -- luacheck: ignore 581 (Warp's !(a == b), for vectors too)
      print("Error, expect_eq() failed:\n\t Expected:", expected, "\n\t Actual:", actual)
    end
  end)
  builtin("expect_neq", nil, function(actual, expected)
    if actual == expected then
      print("Error, expect_neq() failed:\n\t Expected:", expected, "\n\t Actual:", actual)
    end
  end)

  -- Warp's names for operations weft spells otherwise: len(x) is #x,
  -- div_approx and inverse_approx are the exact / and inverse
  builtin("len", nil, function(x) return #x end)
  builtin("div_approx", nil, function(a, b) return a / b end)
  builtin("inverse_approx", mat_arg, function(m) return weft.inverse(m) end)

  -- curlnoise: the 3-d curl of three noise gradients (of 3-d or 4-d noise
  -- on V points), each octave re-seeding the state twice as Warp does
  -- (rand_init(state, k)); cells(pt) gives the lower and upper cell corners
  local function curlnoise_overload(V, cells, grad_noise)
    weft.curlnoise:overload{ p = V, function(state, p, octaves, lacunarity, gain)
      local st = u32(state)
      local s1, s2, s3 = V(), V(), V()
      local freq, amp = f32(1.0), f32(1.0)
      for _ = 1, octaves do
        local pt = freq * p
        local c0, c1 = cells(pt)
        local d = pt - floor(pt)
        local g1 = grad_noise(st, c0, c1, d)
        st = pcg(st + pcg(u32(10019689)))
        local g2 = grad_noise(st, c0, c1, d)
        st = pcg(st + pcg(u32(13112221)))
        local g3 = grad_noise(st, c0, c1, d)
        s1 = s1 + amp * g1
        s2 = s2 + amp * g2
        s3 = s3 + amp * g3
        amp = amp * gain
        freq = freq * lacunarity
      end
      return V3(s3[1] - s2[2], s1[2] - s3[0], s2[0] - s1[1])
    end }
  end
  curlnoise_overload(V3, helper(function(pt)
    local c0 = weft.vec3i(cell(pt[0]), cell(pt[1]), cell(pt[2]))
    return c0, c0 + weft.vec3i(1, 1, 1)
  end), grad_noise3)

  -- pnoise in 4-d
  weft.pnoise:overload{ p = V4, px = weft.int32, py = weft.int32, pz = weft.int32, pt = weft.int32,
    function(state, p, px, py, pz, pt)
      local c0 = weft.vec4i(cmod(cell(p[0]), px), cmod(cell(p[1]), py), cmod(cell(p[2]), pz), cmod(cell(p[3]), pt))
      local c1 = weft.vec4i(cmod(c0[0] + 1, px), cmod(c0[1] + 1, py), cmod(c0[2] + 1, pz), cmod(c0[3] + 1, pt))
      return noise4(u32(state), c0, c1, p - floor(p))
    end }

  -- the gradient of 4-d noise (Warp's noise_4d_gradient): the corners
  -- interpolated along x, y, z, then t, carrying value and gradient
  local grad_noise4 = helper(function(st, p0, p1, d)
    local ex, ey = V4(1.0, 0.0, 0.0, 0.0), V4(0.0, 1.0, 0.0, 0.0)
    local ez, et = V4(0.0, 0.0, 1.0, 0.0), V4(0.0, 0.0, 0.0, 1.0)
    local zero = d[0] - d[0]
    local zt, gzt, r = zero, d * 0.0, d * 0.0
    for c = 0, 1 do
      local zs, gzs = zero, d * 0.0
      for b = 0, 1 do
        local ys, gys = zero, d * 0.0
        for a = 0, 1 do
          local yy = select(a == 1, p0[1], p1[1])
          local zz = select(b == 1, p0[2], p1[2])
          local tt = select(c == 1, p0[3], p1[3])
          local dd = d - V4(0.0, f32(a), f32(b), f32(c))
          local g0 = grad4(st, p0[0], yy, zz, tt)
          local g1 = grad4(st, p1[0], yy, zz, tt)
          local v0, v1 = weft.dot(dd, g0), weft.dot(dd - ex, g1)
          local xi, gxi = interp(v0, v1, d[0]), interp_grad(v0, v1, d[0], g0, g1, ex)
          if a == 0 then
            ys, gys = xi, gxi
          else
            ys, gys = interp(ys, xi, d[1]), interp_grad(ys, xi, d[1], gys, gxi, ey)
          end
        end
        if b == 0 then
          zs, gzs = ys, gys
        else
          zs, gzs = interp(zs, ys, d[2]), interp_grad(zs, ys, d[2], gzs, gys, ez)
        end
      end
      if c == 0 then
        zt, gzt = zs, gzs
      else
        r = interp_grad(zt, zs, d[3], gzt, gzs, et)
      end
    end
    return r
  end)

  curlnoise_overload(V4, helper(function(pt)
    local c0 = weft.vec4i(cell(pt[0]), cell(pt[1]), cell(pt[2]), cell(pt[3]))
    return c0, c0 + weft.vec4i(1, 1, 1, 1)
  end), grad_noise4)
end
