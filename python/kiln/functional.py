"""kiln.functional: the ops as functions (kiln.relu(x), kiln.cat([a, b]),
kiln.cross_entropy(logits, y), ...); each is one kiln op, differentiable
where the op is."""

import ctypes

from . import _lib
from ._lib import lib
from .tensor import Tensor, as_tensor

_REDUCTION = {"none": 0, "mean": 1, "sum": 2}


def _unary(name):
    f = getattr(lib, "kiln_" + name)

    def op(x):
        x = as_tensor(x)  # a named temporary: ._h of an unnamed one dies first
        return Tensor(f(x._h))

    op.__name__ = name
    op.__doc__ = "Elementwise %s." % name
    return op


for _n in "neg abs exp log sqrt rsqrt sin cos tanh sigmoid erf sign relu silu".split():
    globals()[_n] = _unary(_n)


def _binary(name):
    f = getattr(lib, "kiln_" + name)

    def op(a, b):
        a, b = as_tensor(a), as_tensor(b)
        return Tensor(f(a._h, b._h))

    op.__name__ = name
    op.__doc__ = "Elementwise %s with broadcasting and type promotion." % name
    return op


for _n in "add sub mul div pow maximum minimum eq ne lt le gt ge mm bmm matmul".split():
    globals()[_n] = _binary(_n)


def where(cond, a, b):
    a, b = as_tensor(a), as_tensor(b)
    return Tensor(lib.kiln_where(cond._h, a._h, b._h))


def _handles(ts):
    ts = list(ts)
    return (ctypes.c_void_p * len(ts))(*[t._h for t in ts]), len(ts)


def cat(tensors, dim=0):
    arr, n = _handles(tensors)
    return Tensor(lib.kiln_cat(arr, n, dim))


def stack(tensors, dim=0):
    arr, n = _handles(tensors)
    return Tensor(lib.kiln_stack(arr, n, dim))


def softmax(x, dim):
    return Tensor(lib.kiln_softmax(x._h, dim))


def log_softmax(x, dim):
    return Tensor(lib.kiln_log_softmax(x._h, dim))


def linear(x, weight, bias=None):
    """x @ weight.T + bias."""
    return Tensor(lib.kiln_linear(x._h, weight._h, None if bias is None else bias._h))


def cross_entropy(logits, target, reduction="mean"):
    """logits [N, C], target [N] int64 class indices."""
    return Tensor(lib.kiln_cross_entropy(logits._h, target._h, _REDUCTION[reduction]))


def nll_loss(logp, target, reduction="mean"):
    return Tensor(lib.kiln_nll_loss(logp._h, target._h, _REDUCTION[reduction]))


def mse_loss(input, target, reduction="mean"):
    target = as_tensor(target)
    return Tensor(lib.kiln_mse_loss(input._h, target._h, _REDUCTION[reduction]))


def embedding(weight, indices):
    return Tensor(lib.kiln_embedding(weight._h, indices._h))


def gather(x, dim, index):
    return Tensor(lib.kiln_gather(x._h, dim, index._h))


def conv2d(x, weight, bias=None, stride=1, padding=0):
    """NCHW convolution."""
    st = (ctypes.c_int64 * 2)(*_pair(stride))
    pd = (ctypes.c_int64 * 2)(*_pair(padding))
    return Tensor(lib.kiln_conv2d(x._h, weight._h, None if bias is None else bias._h, st, pd))


def max_pool2d(x, kernel_size, stride=None, padding=0):
    k = (ctypes.c_int64 * 2)(*_pair(kernel_size))
    st = (ctypes.c_int64 * 2)(*_pair(kernel_size if stride is None else stride))
    pd = (ctypes.c_int64 * 2)(*_pair(padding))
    return Tensor(lib.kiln_max_pool2d(x._h, k, st, pd))


def dropout(x, p=0.5, training=True):
    return Tensor(lib.kiln_dropout(x._h, float(p), bool(training), None))


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("ctypes", "lib", "Tensor")]
