"""kiln.autograd: grad mode (no_grad, enable_grad) and anomaly detection."""

import functools

from ._lib import lib


class _GradMode:
    _enabled = None

    def __enter__(self):
        self._prev = lib.kiln_set_grad_enabled(self._enabled)
        return self

    def __exit__(self, *exc):
        lib.kiln_set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Context manager (or decorator) that stops autograd recording: ops
    inside make tensors without history, and in-place updates of leaves
    that require grad are allowed (as optimizers do)."""
    _enabled = False


class enable_grad(_GradMode):
    """Context manager (or decorator) turning recording back on."""
    _enabled = True


def is_grad_enabled():
    return lib.kiln_is_grad_enabled()


def set_detect_anomaly(enabled):
    """Anomaly mode: a backward node producing NaN/Inf raises, naming it."""
    lib.kiln_set_anomaly_enabled(bool(enabled))
