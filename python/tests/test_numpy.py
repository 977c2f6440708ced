"""numpy interop both ways: np.asarray(t) and kiln.from_numpy(a) share
memory (writes visible on both sides), round trips keep every kiln dtype,
non-contiguous arrays (transposed, strided, negative strides), 0-d and
empty arrays, and dtypes kiln lacks are converted (the ten dtypes:
test_dtypes.py)."""
import numpy as np
import pytest

import kiln

DTYPES = [np.float32, np.float64, np.int64, np.bool_]


def sample(dt, shape=(3, 4)):
    a = np.arange(np.prod(shape)).reshape(shape) - 5
    return (a % 2 == 0) if dt is np.bool_ else (a * 1.25 if dt in (np.float32, np.float64) else a).astype(dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_round_trip_every_dtype(dt):
    a = sample(dt)
    t = kiln.from_numpy(a)
    assert t.dtype == {np.float32: "float32", np.float64: "float64", np.int64: "int64",
                       np.bool_: "bool"}[dt]
    b = np.asarray(t)
    assert b.dtype == a.dtype and b.shape == a.shape
    np.testing.assert_array_equal(b, a)
    assert np.shares_memory(a, b)  # zero-copy both ways
    c = kiln.tensor(a).numpy()     # kiln.tensor copies
    np.testing.assert_array_equal(c, a)
    assert not np.shares_memory(a, c)


@pytest.mark.parametrize("dt", DTYPES)
def test_writes_are_shared(dt):
    a = sample(dt)
    t = kiln.from_numpy(a)
    a[0, 0] = 1
    assert t[0, 0].item() == 1
    t.fill_(0)
    assert not a.any()


@pytest.mark.parametrize("dt", DTYPES)
def test_non_contiguous_arrays(dt):
    base = sample(dt, (6, 8))
    for view in (base.T, base[::2, 1::3], base[:, 2], base[1:5, ::-1], base[::-2]):
        t = kiln.from_numpy(view)
        np.testing.assert_array_equal(t.numpy(), view)
        np.testing.assert_array_equal(t.contiguous().numpy(), np.ascontiguousarray(view))
        np.testing.assert_array_equal((t.to("float64") * 2).numpy(), view.astype(np.float64) * 2)
        if all(s >= 0 for s in view.strides):
            assert np.shares_memory(np.asarray(t), base)
    # a kiln view (transpose) exposes its strides to numpy
    t = kiln.from_numpy(base)
    tv = np.asarray(t.t())
    assert tv.strides == base.T.strides and np.shares_memory(tv, base)


def test_zero_d_and_empty():
    for dt in DTYPES:
        a = np.array(3, dtype=dt)
        assert kiln.from_numpy(a).shape == () and np.asarray(kiln.from_numpy(a)) == a
        e = np.zeros((0, 3), dtype=dt)
        t = kiln.from_numpy(e)
        assert t.shape == (0, 3) and np.asarray(t).shape == (0, 3)


def test_other_dtypes_are_converted():
    assert kiln.from_numpy(np.arange(3, dtype=np.uint16)).dtype == "int64"
    assert kiln.from_numpy(np.arange(3, dtype=np.uint32)).tolist() == [0, 1, 2]
    assert kiln.from_numpy(np.arange(3, dtype=np.int32)).dtype == "int32"  # a kiln dtype now
    assert kiln.from_numpy(np.ones(2, np.float16)).dtype == "float16"
    big = np.arange(4, dtype=">f8")
    assert kiln.from_numpy(big).tolist() == [0, 1, 2, 3]
    ro = np.arange(4.0)
    ro.flags.writeable = False
    t = kiln.from_numpy(ro)  # read-only: copied, so kiln cannot write into it
    t.fill_(9)
    assert ro.tolist() == [0, 1, 2, 3]
    with pytest.raises(TypeError):
        kiln.from_numpy(np.array(["a"]))


def test_array_outlives_tensor_and_tensor_outlives_array():
    a = np.arange(1000, dtype=np.float32)
    t = kiln.from_numpy(a)
    del a
    assert t.sum().item() == sum(range(1000))
    b = np.asarray(kiln.arange(0, 10, 1, dtype="float64"))
    assert b.sum() == 45  # the array keeps its tensor alive


def test_lazy_tensor_to_numpy_is_a_copy():
    t = kiln.lazy.to_lazy(kiln.tensor([1.0, 2.0])) * 3
    assert np.asarray(t).tolist() == [3, 6]
    assert t.numpy().tolist() == [3, 6]
