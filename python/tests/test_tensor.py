"""Tensors: creation, metadata, operators, promotion, indexing, in-place
updates, and kiln's errors raised as Python exceptions with its message."""
import numpy as np
import pytest

import kiln


def test_creation_and_metadata():
    t = kiln.zeros(2, 3)
    assert t.shape == (2, 3) and t.dtype == "float32" and t.ndim == 2 and t.numel() == 6
    assert kiln.ones((4,), dtype="int64").tolist() == [1, 1, 1, 1]
    assert kiln.full((2,), 2.5, dtype=kiln.float64).tolist() == [2.5, 2.5]
    assert kiln.arange(5).tolist() == [0, 1, 2, 3, 4] and kiln.arange(5).dtype == "int64"
    assert kiln.arange(0, 1, 0.25).tolist() == [0, 0.25, 0.5, 0.75]
    assert kiln.tensor([[1, 2], [3, 4]]).stride() == (2, 1)
    assert kiln.tensor(3.5).item() == 3.5 and kiln.tensor(True).item() is True
    assert kiln.tensor(2**62 + 1).item() == 2**62 + 1  # int64 exact
    assert kiln.__version__.count(".") == 2


def test_random_is_seeded():
    kiln.manual_seed(7)
    a = kiln.randn(100).numpy().copy()
    kiln.manual_seed(7)
    b = kiln.randn(100).numpy()
    assert np.array_equal(a, b)
    assert abs(a.mean()) < 0.4 and 0.6 < a.std() < 1.4
    u = kiln.rand(1000).numpy()
    assert u.min() >= 0 and u.max() < 1


def test_operators_match_numpy():
    a = np.array([[1.5, -2.0], [3.0, 4.0]], np.float32)
    b = np.array([0.5, 2.0], np.float32)
    ta, tb = kiln.tensor(a), kiln.tensor(b)
    np.testing.assert_allclose((ta + tb).numpy(), a + b)
    np.testing.assert_allclose((ta - tb).numpy(), a - b)
    np.testing.assert_allclose((ta * tb).numpy(), a * b)
    np.testing.assert_allclose((ta / tb).numpy(), a / b)
    np.testing.assert_allclose((ta @ ta).numpy(), a @ a)
    np.testing.assert_allclose((-ta).numpy(), -a)
    np.testing.assert_allclose(abs(ta).numpy(), abs(a))
    np.testing.assert_allclose((ta ** 2).numpy(), a ** 2)
    np.testing.assert_allclose((2 - ta).numpy(), 2 - a)
    np.testing.assert_allclose((1 / tb).numpy(), 1 / b)
    np.testing.assert_allclose(ta.exp().numpy(), np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(ta.relu().numpy(), np.maximum(a, 0))
    np.testing.assert_allclose(ta.sum(1).numpy(), a.sum(1))
    np.testing.assert_allclose(ta.mean().item(), a.mean(), rtol=1e-6)
    np.testing.assert_allclose(ta.amax(0).numpy(), a.max(0))
    assert ta.argmax(1).tolist() == [0, 1]
    assert (ta > 0).tolist() == [[True, False], [True, True]]
    np.testing.assert_allclose(ta.softmax(1).numpy().sum(1), [1, 1], rtol=1e-6)
    np.testing.assert_allclose(kiln.where(ta > 0, ta, kiln.tensor(0.0)).numpy(),
                               np.where(a > 0, a, 0))
    np.testing.assert_allclose(kiln.cat([ta, ta], 0).numpy(), np.concatenate([a, a]))
    np.testing.assert_allclose(kiln.stack([tb, tb], 1).numpy(), np.stack([b, b], 1))


def test_promotion_follows_pytorch():
    i = kiln.tensor([1, 2, 3])
    assert (i + 1).dtype == "int64"
    assert (i + 1.5).dtype == "float32"  # a Python float is a wrapped number
    assert (kiln.tensor([1.0], dtype="float64") + kiln.tensor([1.0])).dtype == "float64"
    assert (kiln.tensor([1.0]) * 2).dtype == "float32"
    assert (i > 1).dtype == "bool"


def test_views_and_indexing():
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    t = kiln.tensor(a)
    assert t.reshape(6, 4).shape == (6, 4) and t.view(-1).shape == (24,)
    np.testing.assert_array_equal(t.T.numpy(), a.T)
    np.testing.assert_array_equal(t.transpose(0, 2).numpy(), a.transpose(2, 1, 0))
    np.testing.assert_array_equal(t.permute(1, 0, 2).numpy(), a.transpose(1, 0, 2))
    np.testing.assert_array_equal(t[1].numpy(), a[1])
    np.testing.assert_array_equal(t[:, 1:, ::2].numpy(), a[:, 1:, ::2])
    np.testing.assert_array_equal(t[-1, 2, 3].numpy(), a[-1, 2, 3])
    np.testing.assert_array_equal(t[None, 0].numpy(), a[None, 0])
    np.testing.assert_array_equal(t[..., 1].numpy(), a[..., 1])
    assert t.unsqueeze(0).shape == (1, 2, 3, 4) and t.unsqueeze(0).squeeze().shape == (2, 3, 4)
    t[0, 0] = 7.0
    assert t.numpy()[0, 0].tolist() == [7.0] * 4
    idx = kiln.tensor([2, 0])
    np.testing.assert_array_equal(t[1][idx].numpy(), a[1][[2, 0]])


def test_in_place():
    t = kiln.zeros(3)
    t.add_(kiln.tensor([1.0, 2.0, 3.0]), alpha=2)
    assert t.tolist() == [2, 4, 6]
    t.mul_(kiln.tensor(0.5)).fill_(1.5)
    assert t.tolist() == [1.5] * 3


def test_errors_are_exceptions_with_kilns_message():
    a, b = kiln.zeros(2, 3), kiln.zeros(2, 3)
    with pytest.raises(kiln.KilnError, match=r"matmul.*\[2, 3\].*\[2, 3\]"):
        a @ b
    with pytest.raises(kiln.KilnError, match="view"):
        a.view(4, 4)
    with pytest.raises(kiln.KilnIOError, match="no-such-file.npy"):
        kiln.load("/nonexistent/no-such-file.npy")
    with pytest.raises(OSError):
        kiln.load("/nonexistent/no-such-file.npy")
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.tensor([1, 2]).requires_grad = True  # an integer leaf
    with pytest.raises(ValueError):
        kiln.tensor([1, 2]).requires_grad = True
    with pytest.raises(kiln.FormatError, match="2:17: unknown op aten::nosuchop"):
        kiln.jit.load("graph(%x : Tensor):\n  %y : Tensor = aten::nosuchop(%x)\n  return (%y)\n")
    with pytest.raises(kiln.KilnError):
        kiln.nn.model("nosuchmodel")
    # an error clears: the next call works
    assert (a + b).shape == (2, 3)


def test_npy_save_load(tmp_path):
    t = kiln.tensor([[1, 2], [3, 4]], dtype="int64")
    kiln.save(t, tmp_path / "t.npy")
    assert np.load(tmp_path / "t.npy").tolist() == [[1, 2], [3, 4]]
    assert kiln.load(tmp_path / "t.npy").tolist() == [[1, 2], [3, 4]]
