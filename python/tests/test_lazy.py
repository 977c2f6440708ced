"""A lazy training loop: linear regression on lazy tensors, one
mark_step per step, equal to the same loop run eagerly, with the lazy
counters pinned: one uncached compile, every later step a cache hit, one
graph execution per step."""
import numpy as np

import kiln

STEPS = 6


def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.25).astype(np.float32)
    return x, y


def run(lazy):
    x, y = data()
    w = kiln.zeros(3, 1)
    b = kiln.zeros(1)
    tx, ty = kiln.tensor(x), kiln.tensor(y)
    if lazy:
        w, b = kiln.lazy.to_lazy(w), kiln.lazy.to_lazy(b)
        tx, ty = kiln.lazy.to_lazy(tx), kiln.lazy.to_lazy(ty)
    w.requires_grad = True
    b.requires_grad = True
    losses = []
    for _ in range(STEPS):
        loss = kiln.mse_loss(tx @ w + b, ty)
        loss.backward()
        with kiln.no_grad():
            w.sub_(w.grad * 0.1)
            b.sub_(b.grad * 0.1)
        w.grad = None
        b.grad = None
        if lazy:
            kiln.lazy.mark_step()
        losses.append(loss.item())
    return losses, w.cpu().numpy()


def test_lazy_loop_equals_eager_with_pinned_counters():
    eager, w_eager = run(False)
    kiln.lazy.reset_metrics()
    lazy, w_lazy = run(True)
    np.testing.assert_allclose(lazy, eager, rtol=1e-5)
    np.testing.assert_allclose(w_lazy, w_eager, rtol=1e-5)
    assert lazy[-1] < lazy[0] / 2  # it learns
    m = kiln.lazy.metrics()
    c = {k: kiln.lazy.counter(k) for k in ("MarkStep", "UncachedCompile", "CachedCompile",
                                            "ExecuteGraph")}
    assert c == {"MarkStep": STEPS, "UncachedCompile": 1, "CachedCompile": STEPS - 1,
                 "ExecuteGraph": STEPS}, c
    assert isinstance(m, dict) and m
    assert "graph" in kiln.lazy.last_compiled_graph()
    assert kiln.lazy.counter("NoSuchCounter") is None


def test_pending_ir_text():
    a = kiln.lazy.to_lazy(kiln.ones(2, 2))
    t = (a * 2).relu()
    text = kiln.lazy.tensors_text(t)
    assert "aten::relu" in text and "device_data" in text
    assert t.is_lazy and not t.cpu().is_lazy
    assert t.cpu().tolist() == [[2, 2], [2, 2]]
