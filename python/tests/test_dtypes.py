"""The ten dtypes from Python: torch's names (kiln.float16, ...), numpy
interop where numpy has the type (shared memory both ways; bfloat16 refuses
.numpy() as torch does), conversions, and ops on the narrow dtypes: half
types compute in float32 and give half results (gradients too), integer
types wrap around, and ops PyTorch lacks for a dtype refuse."""
import numpy as np
import pytest

import kiln

NUMPY = [(kiln.float32, np.float32), (kiln.float64, np.float64), (kiln.int64, np.int64),
         (kiln.bool_, np.bool_), (kiln.int32, np.int32), (kiln.int16, np.int16),
         (kiln.int8, np.int8), (kiln.uint8, np.uint8), (kiln.float16, np.float16)]


def test_ten_dtypes_named_as_torch():
    assert kiln.dtypes == ("float32", "float64", "int64", "bool", "int32", "int16", "int8",
                           "uint8", "float16", "bfloat16")
    for d in kiln.dtypes:
        assert kiln.zeros(2, 3, dtype=d).dtype == d
    assert kiln.ones(2, dtype="half").dtype == kiln.float16
    with pytest.raises(TypeError):
        kiln.zeros(2, dtype="complex64")


@pytest.mark.parametrize("kd,nd", NUMPY)
def test_numpy_round_trip_shares_memory(kd, nd):
    a = (np.arange(12).reshape(3, 4) - 5).astype(nd)
    t = kiln.from_numpy(a)
    assert t.dtype == kd
    b = np.asarray(t)
    assert b.dtype == a.dtype and np.shares_memory(a, b)
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(kiln.tensor(a).numpy(), a)
    assert kiln.tensor(a, dtype=kd).dtype == kd


def test_bfloat16_has_no_numpy_type():
    t = kiln.tensor([1.0, 2.5, -3.0]).to(kiln.bfloat16)
    assert t.dtype == "bfloat16"
    with pytest.raises(TypeError, match="bfloat16"):
        t.numpy()
    assert t.tolist() == [1.0, 2.5, -3.0]
    assert "bfloat16" in repr(t)
    # float32 -> bfloat16 rounds to nearest even: 1 + 2^-8 is a tie, goes to 1
    assert kiln.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8]).to("bfloat16").tolist() == \
        [1.0, 1.0 + 2 ** -6]


def test_float16_conversion_matches_numpy():
    x = np.array([0.1, 65504.0, 65520.0, 6e-8, 2.0 ** -25, -1.0 / 3.0], np.float32)
    got = kiln.tensor(x).to(kiln.float16).numpy()
    with np.errstate(over="ignore"):  # 65520 rounds to inf, as it should
        want = x.astype(np.float16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_integer_ops_wrap_and_promote():
    a = kiln.tensor(np.array([100, 120, -128], np.int8))
    assert (a + a).tolist() == [-56, -16, 0]
    assert (a + a).dtype == kiln.int8
    u = kiln.tensor(np.array([200, 3], np.uint8))
    assert (u + kiln.tensor(np.array([1, 1], np.int8))).dtype == kiln.int16
    assert a.sum().dtype == kiln.int64 and a.sum().item() == 92
    assert a.argmax().item() == 1
    m = kiln.tensor(np.array([[1, 2], [3, 4]], np.int32))
    assert (m @ m).dtype == kiln.int32 and (m @ m).tolist() == [[7, 10], [15, 22]]


def test_half_ops_compute_in_float32_and_stay_half():
    x = kiln.tensor([[1.0, 2.0, 3.0]]).to(kiln.float16)
    s = kiln.softmax(x, 1)
    assert s.dtype == kiln.float16
    want = np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()
    np.testing.assert_allclose(s.numpy()[0].astype(np.float64), want, rtol=1e-3)
    w = kiln.tensor([[0.5], [0.25], [-1.0]]).to(kiln.bfloat16)
    y = x.to(kiln.bfloat16) @ w
    assert y.dtype == kiln.bfloat16 and y.tolist() == [[-2.0]]


def test_half_gradients_are_half():
    x = kiln.tensor([[1.0, -2.0], [0.5, 4.0]]).to(kiln.float16)
    x.requires_grad = True
    y = (x @ x).sum()
    y.backward()
    assert x.grad.dtype == kiln.float16
    # d/dx sum(x @ x) = ones @ x^T + x^T @ ones
    xn = np.array([[1.0, -2.0], [0.5, 4.0]])
    want = np.ones((2, 2)) @ xn.T + xn.T @ np.ones((2, 2))
    np.testing.assert_array_equal(x.grad.numpy(), want.astype(np.float16))


def test_ops_pytorch_lacks_refuse():
    a = kiln.tensor(np.array([[1, 2, 3]], np.int8))
    with pytest.raises(kiln.KilnError, match="not implemented for dtype Char"):
        kiln.softmax(a, 1)
