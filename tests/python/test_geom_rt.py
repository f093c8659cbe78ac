"""Volumes and hash grids from Python through rt: Lua code makes the
objects, kernels read NumPy arrays without copies."""
import numpy as np


def test_volume_and_hash_grid_from_python(rt):
    dense = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    rt["d"] = dense
    rt.exec("""
      vol = weft.Volume.from_dense(d, { voxel_size = 0.5, background = -1 })
      local k = weft.kernel{ id = weft.uint64, p = weft.array(weft.vec3), out = weft.array(weft.float32),
        function(id, p, out)
          local i = weft.tid()
          out[i] = weft.volume_sample_f(id, weft.volume_world_to_index(id, p[i]), weft.Volume.LINEAR)
        end }
      local q = weft.kernel{ id = weft.uint64, p = weft.array(weft.vec3), n = weft.array(weft.int32),
        function(id, p, n)
          local i = weft.tid()
          for j in weft.hash_grid_query(id, p[i], 0.3) do
            if weft.length(p[j] - p[i]) <= 0.3 then n[i] = n[i] + 1 end
          end
        end }
      function sample(p, out)
        local pv = weft.array(p:ptr(), weft.vec3f, { shape = { p.shape[1] }, copy = false })
        weft.launch(k, #out, { vol.id, pv, out })
      end
      function neighbours(p, n)
        local pv = weft.array(p:ptr(), weft.vec3f, { shape = { p.shape[1] }, copy = false })
        local g = weft.HashGrid(4, 4, 4)
        g:build(pv, 0.3)
        weft.launch(q, #n, { g.id, pv, n })
      end
    """)
    # world (0.5, 1.0, 1.5) is voxel (1, 2, 3); half a voxel on in z
    pts = np.array([[0.5, 1.0, 1.5], [0.5, 1.0, 1.75], [-3, 0, 0]], np.float32)
    out = np.zeros(3, np.float32)
    rt.call("sample", pts, out)
    v = dense[1, 2, 3]
    assert out.tolist() == [v, v + 0.5, -1]
    p = np.array([[0, 0, 0], [0.2, 0, 0], [0.9, 0.9, 0.9], [0.1, 0.1, 0.1]], np.float32)
    n = np.zeros(4, np.int32)
    rt.call("neighbours", p, n)
    assert n.tolist() == [3, 3, 1, 3]
