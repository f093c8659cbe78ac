"""Threads: a long CPU launch releases the GIL, so other Python threads run
during it; calls into one runtime from several threads are serialized."""
import threading
import time

import numpy as np

import weft

# ~0.2-1 s of work per launch on the machines here: 2^12 threads, each a
# loop of 2^15 multiply-adds (the work estimate, which counts a loop of
# unknown trip count as 16 iterations, is above the threshold at which a
# launch lets go of the GIL).
SLOW = """
slow = weft.kernel{ x = weft.array(weft.float32), n = weft.int32,
  function(x, n)
    local i = weft.tid()
    local a = x[i]
    for k = 1, n do a = a * 0.999 + 0.001 end
    x[i] = a
  end }
"""


def test_other_threads_run_during_a_long_launch(rt):
    rt.exec(SLOW)
    x = np.ones(1 << 12, dtype=np.float32)
    stamps = []
    stop = threading.Event()

    def spin():  # pure Python: runs only when it holds the GIL
        while not stop.is_set():
            stamps.append(time.perf_counter())

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.02)
    t0 = time.perf_counter()
    rt.launch("slow", x.size, inputs=[x, 1 << 15])
    t1 = time.perf_counter()
    stop.set()
    t.join()
    assert t1 - t0 > 0.05, "the launch was too short to tell"
    # With the GIL held for the whole launch the spinner gets no stamp in its
    # first half (it may run in the last switch interval, ~5 ms, after the
    # kernel is done and before t1 is read).
    early = sum(1 for s in stamps if t0 < s < t0 + (t1 - t0) / 2)
    assert early > 100, (early, t1 - t0)
    assert abs(float(x[0]) - 1.0) < 1e-3  # a -> 1 stays 1: the kernel ran


def test_short_launches_keep_the_gil_and_stay_correct(rt):
    rt.exec("""
      add = weft.kernel{ x = weft.array(weft.float64), v = weft.float64,
        function(x, v) local i = weft.tid(); x[i] = x[i] + v end }
    """)
    x = np.zeros(8)
    for _ in range(100):
        rt.launch("add", x.size, inputs=[x, 1.0])
    assert x.tolist() == [100.0] * 8


def test_threads_sharing_a_runtime_are_serialized(rt):
    rt.exec(SLOW + """
      add = weft.kernel{ x = weft.array(weft.float64), v = weft.float64,
        function(x, v) local i = weft.tid(); x[i] = x[i] + v end }
    """)
    errors = []
    results = {}

    def worker(w):
        try:
            mine = np.zeros(64)
            big = np.ones(1 << 10, dtype=np.float32)
            for r in range(20):
                rt.launch("add", mine.size, inputs=[mine, float(w + 1)])
                if r % 5 == 0:
                    rt.launch("slow", big.size, inputs=[big, 1 << 14])  # releases the GIL
                rt.exec("_t%d = (_t%d or 0) + 1" % (w, w))
            results[w] = (mine.copy(), rt["_t%d" % w])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for w in range(4):
        mine, count = results[w]
        assert mine.tolist() == [20.0 * (w + 1)] * 64
        assert count == 20
