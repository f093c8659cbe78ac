"""Meshes from Python through rt: NumPy (n, 3) points and (f, 3) indices
become a weft.Mesh without copies; kernels cast rays and find closest
points into NumPy arrays; torch tensors work the same way."""
import numpy as np
import pytest

LUA = """
  cast = weft.kernel{ id = weft.uint64, o = weft.array(weft.vec3), t = weft.array(weft.float32),
    d = weft.array(weft.float32),
    function(id, o, t, d)
      local i = weft.tid()
      local r = weft.mesh_query_ray(id, o[i], weft.vec3(0.0, 0.0, -1.0), 100.0)
      t[i] = r.result and r.t or -1.0
      local q = weft.mesh_query_point_no_sign(id, o[i], 100.0)
      d[i] = weft.length(weft.mesh_eval_position(id, q.face, q.u, q.v) - o[i])
    end }
  function query(points, indices, origins, t, d)
    mesh = weft.Mesh{ points = points, indices = indices }
    local ov = weft.array(origins:ptr(), weft.vec3f, { shape = { origins.shape[1] }, copy = false })
    weft.launch(cast, #t, { mesh.id, ov, t, d })
  end
  function refit() mesh:refit() end
"""


def square(z):
    pts = np.array([[-1, -1, z], [1, -1, z], [1, 1, z], [-1, 1, z]], np.float32)
    idx = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
    return pts, idx


def test_numpy_mesh(rt):
    rt.exec(LUA)
    pts, idx = square(0.5)
    o = np.array([[0, 0, 2], [0.5, -0.5, 3], [5, 0, 1]], np.float32)
    t, d = np.zeros(3, np.float32), np.zeros(3, np.float32)
    rt.call("query", pts, idx, o, t, d)
    assert t.tolist() == [1.5, 2.5, -1.0]
    assert np.allclose(d, [1.5, 2.5, np.hypot(4, 0.5)])
    pts[:, 2] = -0.5  # the mesh reads this memory: refit sees the move
    rt.call("refit")
    rt.call("query", pts, idx, o, t, d)
    assert t.tolist() == [2.5, 3.5, -1.0]


def test_torch_mesh(rt):
    torch = pytest.importorskip("torch")
    rt.exec(LUA)
    pts, idx = square(0.0)
    o = np.array([[0.25, 0.25, 1]], np.float32)
    t, d = torch.zeros(1), torch.zeros(1)
    rt.call("query", torch.from_numpy(pts), torch.from_numpy(idx), o, t, d)
    assert t.tolist() == [1.0] and d.tolist() == [1.0]


def test_ray_gradient_through_python_tape(rt):
    # t of a ray cast differentiated through weft.Tape: d t / d origin.z is
    # 1 for a ray going down onto z = 0, and the points get theirs
    torch = pytest.importorskip("torch")
    import weft

    rt.exec("""
      cast_t = weft.kernel{ id = weft.uint64, o = weft.array(weft.float32, 2), t = weft.array(weft.float32),
        function(id, o, t)
          local i = weft.tid()
          local r = weft.mesh_query_ray(id, weft.vec3(o[i][0], o[i][1], o[i][2]), weft.vec3(0.0, 0.0, -1.0), 100.0)
          t[i] = r.t
        end }
      gpoints = weft.array({ { -1, -1, 0 }, { 1, -1, 0 }, { 1, 1, 0 }, { -1, 1, 0 } }, weft.vec3,
                           { requires_grad = true })
      gmesh = weft.Mesh{ points = gpoints, indices = weft.array({ 0, 1, 2, 0, 2, 3 }, weft.int32) }
      mesh_id = tonumber(gmesh.id)
      function points_dz()
        local s = 0
        for _, g in ipairs(gpoints.grad:totable()) do s = s + g[3] end
        return s
      end
    """)
    o = torch.tensor([[0.25, 0.5, 2.0]], requires_grad=True)
    t = torch.zeros(1, requires_grad=True)
    tape = weft.Tape(rt)
    with tape:
        rt.launch("cast_t", 1, inputs=[rt["mesh_id"], o], outputs=[t])
    tape.backward(t)
    assert t.tolist() == [2.0]
    assert o.grad.tolist() == [[0.0, 0.0, 1.0]]
    assert abs(rt.call("points_dz") + 1.0) < 1e-6  # moving the square up by h shortens t by h
