"""NanoVDB files between weft and NVIDIA Warp: grids weft writes (from_dense,
save_nvdb with codecs none and zip) load in Warp with the same values, and
weft samples Warp's own test assets exactly as Warp's CPU does. Skipped
when warp-lang is not installed."""
import glob
import os

import numpy as np
import pytest

wp = pytest.importorskip("warp")

ASSETS = glob.glob(os.path.join(os.path.dirname(wp.__file__), "tests", "assets"))


@pytest.fixture(scope="module")
def warp_cpu():
    wp.config.quiet = True
    wp.init()
    return "cpu"


def _warp_sample(vol, pts, mode, kind):
    """Warp's volume_sample_* at index-space points, on the CPU."""
    dt = {"f": wp.float32, "v": wp.vec3, "i": wp.int32}[kind]

    @wp.kernel
    def k(vid: wp.uint64, p: wp.array(dtype=wp.vec3), o: wp.array(dtype=dt), mode: int):
        i = wp.tid()
        if wp.static(kind == "f"):
            o[i] = wp.volume_sample_f(vid, p[i], mode)
        elif wp.static(kind == "v"):
            o[i] = wp.volume_sample_v(vid, p[i], mode)
        else:
            o[i] = wp.volume_sample_i(vid, p[i])

    out = wp.zeros(len(pts), dtype=dt, device="cpu")
    wp.launch(k, len(pts), inputs=[vol.id, wp.array(pts, dtype=wp.vec3, device="cpu"), out, mode],
              device="cpu")
    return out.numpy()


@pytest.mark.parametrize("codec", ["none", "zip"])
@pytest.mark.parametrize("kind", ["f", "v", "i"])
def test_warp_reads_what_weft_writes(rt, warp_cpu, tmp_path, codec, kind):
    path = str(tmp_path / f"g_{kind}_{codec}.nvdb")
    rng = np.random.default_rng(7)
    shape = (20, 9, 13)
    if kind == "v":
        dense = rng.standard_normal(shape + (3,)).astype(np.float32)
        dtype = "weft.vec3f"
    elif kind == "i":
        dense = rng.integers(-1000, 1000, shape).astype(np.int32)
        dtype = "weft.int32"
    else:
        dense = rng.standard_normal(shape).astype(np.float32)
        dtype = "weft.float32"
    rt["d"] = dense
    rt.exec(f"""
      local a = d
      if {'true' if kind == 'v' else 'false'} then
        a = weft.array(d:ptr(), weft.vec3f, {{ shape = {{20, 9, 13}} }})
      end
      vol = weft.Volume.from_dense(a, {{ voxel_size = 0.25, origin = {{1, -2, 0.5}},
                                        background = 3, name = "dense" }})
      vol:save_nvdb("{path}", "{codec}")
    """)
    wv = wp.Volume.load_from_nvdb(open(path, "rb"), device="cpu")
    info = wv.get_grid_info()
    assert info.name == "dense"
    assert np.allclose(wv.get_voxel_size(), (0.25, 0.25, 0.25))
    ijk = np.stack(np.meshgrid(*[np.arange(-1, s + 1) for s in shape], indexing="ij"), -1)
    ijk = ijk.reshape(-1, 3).astype(np.float32)
    got = _warp_sample(wv, ijk, 0, kind)
    inside = np.all((ijk >= 0) & (ijk < np.array(shape)), axis=1)
    want = dense.reshape(-1, *dense.shape[3:])
    assert np.array_equal(got[inside], want)
    assert np.all(got[~inside] == 3)
    # and the world transform Warp reads is weft's
    assert np.allclose(np.array(info.translation), (1, -2, 0.5))


@pytest.mark.skipif(not ASSETS, reason="Warp's test assets are not installed")
@pytest.mark.parametrize("name,kind", [("torus", "f"), ("test_grid", "f"), ("test_vec_grid", "v"),
                                       ("test_int32_grid", "i")])
def test_weft_samples_warp_assets_like_warp(rt, warp_cpu, name, kind):
    path = os.path.join(ASSETS[0], name + ".nvdb")
    pts = (np.random.default_rng(3).random((3000, 3)) * 90 - 45).astype(np.float32)
    wv = wp.Volume.load_from_nvdb(open(path, "rb"), device="cpu")
    rt["pts"] = pts
    for mode in ([0] if kind == "i" else [0, 1]):
        rt.exec(f"""
          local v = weft.Volume.load_from_nvdb("{path}")
          local p = weft.array(pts:ptr(), weft.vec3f, {{ shape = {{3000}} }})
          out = v:sample(p, {mode})
        """)
        got = np.asarray(rt["out"].numpy()).reshape(3000, -1)
        want = _warp_sample(wv, pts, mode, kind).reshape(3000, -1)
        assert np.array_equal(got, want), (name, mode)
