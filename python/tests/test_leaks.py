"""No leaks over 10,000 tensor round trips: numpy -> kiln (shared and
copied) -> ops -> numpy, with autograd; the process's resident set size
after the loop is within a few MB of what it was after a warm-up."""
import gc

import numpy as np

import kiln


def rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 // 1024


def round_trip(a, i):
    t = kiln.from_numpy(a)                       # shared
    c = kiln.tensor(a)                           # copied
    w = kiln.tensor([[0.5], [1.5]], requires_grad=True)
    y = ((t + c) @ w).relu().sum()
    y.backward()
    out = np.asarray(t * 2)                      # kiln memory seen by numpy
    assert out[0, 0] == 2 * a[0, 0]
    assert w.grad.numpy().shape == (2, 1)
    return float(y.item())


def test_ten_thousand_round_trips_rss_stable():
    a = np.arange(64 * 2, dtype=np.float32).reshape(64, 2)
    for i in range(1000):                        # warm up caches and allocators
        round_trip(a, i)
    gc.collect()
    before = rss_kb()
    for i in range(10000):
        round_trip(a, i)
    gc.collect()
    grown = rss_kb() - before
    # Each round trip allocates ~10 tensors and ~3 KB of data: a leak of
    # any of them would add > 30 MB.
    assert grown < 4096, "RSS grew by %d KB over 10,000 round trips" % grown
    import sys
    assert not sys.modules["kiln.tensor"]._shared, "arrays still held for released tensors"
