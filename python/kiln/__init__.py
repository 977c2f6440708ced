"""kiln: Python bindings of the kiln deep-learning runtime (ctypes over
libkiln.so; no compiler needed).

    import kiln, numpy as np
    x = kiln.from_numpy(np.ones((2, 3), np.float32))   # shares the memory
    w = kiln.randn(3, 4, requires_grad=True)
    loss = (x @ w).relu().sum()
    loss.backward(); w.grad                               # a kiln.Tensor
    with kiln.no_grad(): w.sub_(0.1 * w.grad)             # in place: w stays the leaf

Modules: kiln.jit (TorchScript graphs and the profiling executor),
kiln.lazy (lazy tensors), kiln.nn (layers, models, optimizers, train()).
Errors raise kiln.KilnError subclasses carrying kiln's message."""

from . import _lib
from .errors import (KilnError, InvalidArgumentError, OutOfMemoryError, KilnIOError,
                     FormatError, StateError, UnsupportedError)
from .tensor import (Tensor, tensor, as_tensor, from_numpy, zeros, ones, empty, full, arange,
                     rand, randn, manual_seed, float32, float64, int64, bool_, int32, int16,
                     int8, uint8, float16, bfloat16, dtypes)
from .autograd import no_grad, enable_grad, is_grad_enabled, set_detect_anomaly
from .functional import *  # noqa: F401,F403
from . import functional, jit, lazy, nn  # noqa: F401

__version__ = _lib.lib.kiln_version().decode()
version = __version__


def load(path):
    """A tensor from a .npy file."""
    return Tensor(_lib.lib.kiln_npy_load(str(path).encode()))


def save(t, path):
    """Writes t to a .npy file (numpy's format)."""
    _lib.check(_lib.lib.kiln_npy_save(str(path).encode(), t._h))
