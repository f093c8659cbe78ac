-- Matrix products (src/runtime/blas.h: CBLAS on the cpu, cuBLAS on CUDA):
--
--   weft.matmul(a, b, c, d [, alpha = 1 [, beta = 0]])   -- d = alpha a @ b + beta c
--   weft.batched_matmul(a, b, c, d [, alpha [, beta]])   -- 3-D arrays, batch first
--
-- a is m x k, b k x n, c and d m x n (each with a batch dimension in front
-- for batched_matmul); float32 or float64, all of one dtype and on one
-- device. c may be d itself (d = alpha a @ b + beta d); d must not share
-- memory with a or b. Strided views are taken as they are when their rows
-- or columns are compact (a transposed view costs nothing), else copied.
--
-- On a tape, a product is recorded like a launch; backward adds
--   a.grad += alpha d.grad @ b^T   b.grad += alpha a^T @ d.grad
--   c.grad += beta d.grad
-- and, as for any kernel that stores into d, then clears d.grad (d's old
-- values did not contribute; when c is d, d.grad becomes beta d.grad).
local ffi = require "ffi"
local cdef = require "weft.cdef"

cdef.declare [[
int wf_blas_gemm(wf_rt *rt, int32_t device, int dtype, int64_t batch, int64_t m, int64_t n,
                 int64_t k, double alpha, const void *a, int64_t lda, int64_t sa, int ta,
                 const void *b, int64_t ldb, int64_t sb, int tb, double beta, void *c,
                 int64_t ldc, int64_t sc);
const char *wf_blas_name(wf_rt *rt, int32_t device);
]]

local FLAG_READONLY = 4

return function(weft, P)
  local C, rt = cdef.C, P.rt
  local raise, describe, is_array = P.raise, P.describe, weft.is_array
  local bit = require "bit"
  local NAMES = { "a", "b", "c", "d" }

  -- The shape as a Lua table, read from the header (a.shape does more).
  local function dims(x)
    local h, r = x.h, {}
    for i = 0, h.ndim - 1 do r[i + 1] = tonumber(h.shape[i]) end
    return r
  end

  local function shape_str(x)
    return "{" .. table.concat(dims(x), ", ") .. "}"
  end

  -- The layout BLAS can take of the last two dimensions of x (rows r,
  -- cols c, element strides): data, leading dimension, batch stride (in
  -- elements) and whether it is stored transposed; nil when neither its
  -- rows nor its columns are compact.
  local function layout(x, r, c)
    local h, nd = x.h, x.h.ndim
    local es = h.elsize
    local s0, s1 = tonumber(h.strides[nd - 2]), tonumber(h.strides[nd - 1])
    local sb = nd == 3 and tonumber(h.strides[0]) / es or 0
    if s0 % es ~= 0 or s1 % es ~= 0 or sb ~= math.floor(sb) then return nil end
    s0, s1 = s0 / es, s1 / es
    if (s1 == 1 or c <= 1) and (s0 >= math.max(c, 1) or r <= 1) then
      return h.data, r <= 1 and math.max(c, 1) or s0, sb, false
    end
    if (s0 == 1 or r <= 1) and (s1 >= math.max(r, 1) or c <= 1) then
      return h.data, c <= 1 and math.max(r, 1) or s1, sb, true
    end
  end

  -- One product in row-major BLAS terms: out (+)= alpha op(x) op(y),
  -- tx / ty asking for the transpose of x / y. x, y may have any
  -- layout (copied when BLAS cannot take it); out must be row-compact.
  local function gemm(fname, x, tx, y, ty, out, alpha, beta)
    local nd = out.h.ndim
    local oh, xh, yh = out.h.shape, x.h.shape, y.h.shape
    local batch = nd == 3 and tonumber(oh[0]) or 1
    local m, n = tonumber(oh[nd - 2]), tonumber(oh[nd - 1])
    local xr, xc = tonumber(xh[nd - 2]), tonumber(xh[nd - 1])
    local k = tx and xr or xc
    local xd, ldx, sx, xt = layout(x, xr, xc)
    if not xd then
      x = weft.clone(x)
      xd, ldx, sx, xt = layout(x, xr, xc)
    end
    local yr, yc = tonumber(yh[nd - 2]), tonumber(yh[nd - 1])
    local yd, ldy, sy, yt = layout(y, yr, yc)
    if not yd then
      y = weft.clone(y)
      yd, ldy, sy, yt = layout(y, yr, yc)
    end
    local od, ldo, so = layout(out, m, n)
    -- a transposed layout is the transpose of a row-major matrix: flip op
    local st = C.wf_blas_gemm(rt, out.h.device, out.h.dtype == weft.float64.id and 1 or 0, batch,
                              m, n, k, alpha, xd, ldx, sx, (tx ~= xt) and 1 or 0, yd, ldy, sy,
                              (ty ~= yt) and 1 or 0, beta, od, ldo, so)
    if st ~= 0 then raise("%s: %s", fname, ffi.string(C.wf_rt_errmsg(rt)):gsub("^weft: ", ""):gsub("^matmul: ", "")) end
  end

  -- Byte ranges of two arrays overlap (a conservative test: the spans
  -- from the first to one past the last element).
  local function span(x)
    local h = x.h
    local lo = tonumber(ffi.cast("intptr_t", h.data)) -- user addresses fit a double
    local hi = lo + h.elsize
    for d = 0, h.ndim - 1 do
      local s, n = tonumber(h.strides[d]), tonumber(h.shape[d])
      if n == 0 then return lo, lo end
      if s >= 0 then hi = hi + s * (n - 1) else lo = lo + s * (n - 1) end
    end
    return lo, hi
  end
  local function overlap(x, y)
    if x.h.device ~= y.h.device then return false end
    local l1, h1 = span(x)
    local l2, h2 = span(y)
    return l1 < h2 and l2 < h1
  end
  local function same_view(x, y)
    local a, b = x.h, y.h
    if a.data ~= b.data or a.ndim ~= b.ndim then return false end
    for d = 0, a.ndim - 1 do
      if a.shape[d] ~= b.shape[d] or a.strides[d] ~= b.strides[d] then return false end
    end
    return true
  end

  -- y += s x (same shapes; y compact, any layout of x), for the gradients
  -- of c: one small kernel per dtype and rank, made on first use.
  local axpy = {}
  local function axpy_kernel(t, nd)
    local key = t.name .. nd
    if not axpy[key] then
      local A = weft.array(t, nd)
      if nd == 2 then
        axpy[key] = weft.kernel{ y = A, x = A, s = t, function(y, x, s)
          local i, j = weft.tid()
          y[i][j] = y[i][j] + s * x[i][j]
        end }
      else
        axpy[key] = weft.kernel{ y = A, x = A, s = t, function(y, x, s)
          local i, j, l = weft.tid()
          y[i][j][l] = y[i][j][l] + s * x[i][j][l]
        end }
      end
    end
    return axpy[key]
  end
  local function add_scaled(y, x, s)
    local t, nd = weft.types[y.h.dtype], y.h.ndim
    local tape = P.tape_active -- a step of a product, not a launch to record
    P.tape_active = nil
    local ok, err = pcall(weft.launch, axpy_kernel(t, nd), dims(y), { y, x, s }, { device = y.device })
    P.tape_active = tape
    if not ok then error(err, 0) end
  end

  -- The backward step of one recorded product.
  local function backward(r)
    local a, b, c, d = r.a, r.b, r.c, r.d
    local gd = d.grad
    if not gd then return end
    local ga, gb, gc = a.grad, b.grad, c and c.grad
    if ga then gemm(r.fname, gd, false, b, true, ga, r.alpha, 1) end
    if gb then gemm(r.fname, a, true, gd, false, gb, r.alpha, 1) end
    if r.inplace then
      if r.beta ~= 1 then add_scaled(gd, gd, r.beta - 1) end
    else
      if gc and r.beta ~= 0 then add_scaled(gc, gd, r.beta) end
      gd:zero_()
    end
  end

  local TAPE_PARAMS = { { name = "a" }, { name = "b" }, { name = "c" }, { name = "d" } }

  local function product(fname, nd, a, b, c, d, alpha, beta)
    alpha = alpha == nil and 1 or alpha
    beta = beta == nil and 0 or beta
    local args = { a, b, c, d }
    for i = 1, 4 do
      local x = args[i]
      if not is_array(x) then
        raise("%s: %s must be an array, got %s", fname, NAMES[i], describe(x))
      end
      if x.h.ndim ~= nd then
        raise("%s: %s must be a %d-D array, got %d-D %s", fname, NAMES[i], nd, x.h.ndim, shape_str(x))
      end
      local t = weft.types[x.h.dtype]
      if t ~= weft.float32 and t ~= weft.float64 then
        raise("%s: %s is an array of %s; matmul takes float32 or float64", fname, NAMES[i], t.name)
      end
      if i > 1 and x.h.dtype ~= a.h.dtype then
        raise("%s: dtypes differ (a %s, %s %s)", fname, weft.types[a.h.dtype].name, NAMES[i], t.name)
      end
      if i > 1 and x.h.device ~= a.h.device then
        raise("%s: arrays on different devices (a on %s, %s on %s)", fname, a.device, NAMES[i], x.device)
      end
    end
    if type(alpha) ~= "number" then raise("%s: alpha must be a number, got %s", fname, describe(alpha)) end
    if type(beta) ~= "number" then raise("%s: beta must be a number, got %s", fname, describe(beta)) end
    local sa, sb, sc, sd = dims(a), dims(b), dims(c), dims(d)
    local o = nd - 2 -- the batch dimension comes first
    if nd == 3 then
      for i = 2, 4 do
        if tonumber(args[i].h.shape[0]) ~= sa[1] then
          raise("%s: batch sizes differ (a %s, %s %s)", fname, shape_str(a), NAMES[i], shape_str(args[i]))
        end
      end
    end
    if sa[o + 2] ~= sb[o + 1] then
      raise("%s: a is %s and b is %s: the columns of a (%d) must match the rows of b (%d)", fname,
            shape_str(a), shape_str(b), sa[o + 2], sb[o + 1])
    end
    if sd[o + 1] ~= sa[o + 1] or sd[o + 2] ~= sb[o + 2] then
      raise("%s: d is %s; a %s @ b %s needs %d x %d", fname, shape_str(d), shape_str(a), shape_str(b),
            sa[o + 1], sb[o + 2])
    end
    if sc[o + 1] ~= sd[o + 1] or sc[o + 2] ~= sd[o + 2] then
      raise("%s: c is %s and d is %s: they must have the same shape", fname, shape_str(c), shape_str(d))
    end
    if bit.band(d.h.flags, FLAG_READONLY) ~= 0 then raise("%s: d is read-only", fname) end
    for i = 1, 2 do
      if d.h.size > 0 and overlap(d, args[i]) then
        raise("%s: d shares memory with %s (write the product to another array)", fname, NAMES[i])
      end
    end
    local inplace = same_view(c, d)
    if not inplace and d.h.size > 0 and overlap(c, d) then
      raise("%s: c and d overlap without being the same array", fname)
    end
    if P.capture_cpu and d.h.device < 0 then
      raise("%s: cannot be recorded in a cpu graph capture (run it outside the capture)", fname)
    end
    -- the product goes to d in place when BLAS can write d's layout,
    -- else to a compact copy
    local out = d
    local od, _, _, dt = layout(d, sd[o + 1], sd[o + 2])
    if not od or dt then out = weft.empty_like(d) end
    if beta ~= 0 and not (inplace and out == d) then weft.copy(out, c) end
    if sa[o + 2] > 0 then
      gemm(fname, a, false, b, false, out, alpha, beta)
    elseif beta ~= 1 then -- k == 0: d = beta c
      out:zero_()
      if beta ~= 0 then add_scaled(out, c, beta) end
    end
    if out ~= d then weft.copy(d, out) end
    local tape = P.tape_active
    if tape then
      local r = { fname = fname, a = a, b = b, c = c, d = d, alpha = alpha, beta = beta,
                  inplace = inplace }
      tape.launches[#tape.launches + 1] = {
        k = { name = fname:gsub("^weft%.", ""), params = TAPE_PARAMS },
        dim = 0, inputs = { a, b, c }, outputs = { d },
        uses = { { 1, 2 }, { 4 } },
        backward = function() backward(r) end,
      }
    end
    return d
  end

  function weft.matmul(a, b, c, d, alpha, beta)
    return product("weft.matmul", 2, a, b, c, d, alpha, beta)
  end

  function weft.batched_matmul(a, b, c, d, alpha, beta)
    return product("weft.batched_matmul", 3, a, b, c, d, alpha, beta)
  end

  -- The BLAS library serving a device ("cpu" or "cuda:N"), or nil and why.
  function weft.blas_library(device)
    local dev = P.parse_device("weft.blas_library", device or "cpu")
    local name = ffi.string(C.wf_blas_name(rt, dev))
    if name == "" then return nil, ffi.string(C.wf_rt_errmsg(rt)) end
    return name
  end
end
