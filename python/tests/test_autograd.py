"""Autograd against hand-computed derivatives: products, powers, chains
through tanh and matmul, broadcasting, accumulation, retain_graph,
no_grad as a context manager and a decorator, detach."""
import numpy as np
import pytest

import kiln


def test_product_and_power():
    x = kiln.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = kiln.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = (w * x).sum() + (x ** 2).sum()      # dy/dx = w + 2x, dy/dw = x
    assert y.item() == pytest.approx(4.5 + 14)
    y.backward()
    assert x.grad.tolist() == [2.5, 3.0, 8.0]
    assert w.grad.tolist() == [1.0, 2.0, 3.0]
    assert x.is_leaf and not y.is_leaf and y.grad_fn == "aten::add"


def test_chain_through_tanh_and_matmul():
    x = np.array([[0.5, -1.0], [2.0, 0.25]])
    w = np.array([[1.0, 0.5], [-0.5, 2.0]])
    b = np.array([0.1, -0.2])
    tx = kiln.tensor(x, requires_grad=True)
    tw = kiln.tensor(w, requires_grad=True)
    tb = kiln.tensor(b, requires_grad=True)
    s = (kiln.tanh(tx @ tw + tb) ** 2).sum()
    s.backward()
    y = np.tanh(x @ w + b)
    dz = 2 * y * (1 - y ** 2)           # d sum(y^2) / dz, z = x w + b
    np.testing.assert_allclose(s.item(), (y ** 2).sum(), rtol=1e-12)
    np.testing.assert_allclose(tw.grad.numpy(), x.T @ dz, rtol=1e-12)
    np.testing.assert_allclose(tx.grad.numpy(), dz @ w.T, rtol=1e-12)
    np.testing.assert_allclose(tb.grad.numpy(), dz.sum(0), rtol=1e-12)  # broadcast bias


def test_accumulation_and_retain_graph():
    x = kiln.tensor([3.0], requires_grad=True)
    y = (x * x).sum()                   # dy/dx = 2x = 6
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [12.0]    # accumulated twice
    with pytest.raises(kiln.KilnError):
        y.backward()                    # the graph was freed
    x.grad = None
    assert x.grad is None


def test_gradient_argument():
    x = kiln.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.backward(kiln.tensor([1.0, 10.0]))
    assert x.grad.tolist() == [3.0, 30.0]


def test_no_grad_context_and_decorator():
    w = kiln.tensor([1.0, 2.0], requires_grad=True)
    assert kiln.is_grad_enabled()
    with kiln.no_grad():
        assert not kiln.is_grad_enabled()
        y = w * 2
        w.sub_(kiln.tensor([0.5, 0.5]))  # allowed on a leaf under no_grad
        with kiln.enable_grad():
            assert (w * 2).requires_grad
    assert kiln.is_grad_enabled()
    assert not y.requires_grad and w.tolist() == [0.5, 1.5]

    @kiln.no_grad()
    def f(t):
        return t * t

    assert not f(w).requires_grad and kiln.is_grad_enabled()
    with pytest.raises(kiln.KilnError):
        w.add_(kiln.tensor([1.0, 1.0]))  # grad mode on: in-place on a leaf refused
    assert not w.detach().requires_grad


def test_cross_entropy_gradient():
    logits = kiln.tensor([[2.0, 0.0, -1.0]], dtype="float64", requires_grad=True)
    loss = kiln.cross_entropy(logits, kiln.tensor([0]))
    loss.backward()
    z = np.array([2.0, 0.0, -1.0])
    p = np.exp(z) / np.exp(z).sum()
    np.testing.assert_allclose(loss.item(), -np.log(p[0]), rtol=1e-12)
    np.testing.assert_allclose(logits.grad.numpy()[0], p - [1, 0, 0], rtol=1e-12)
