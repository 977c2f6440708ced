"""kiln.lazy: lazy tensors. Ops on a lazy tensor are recorded; mark_step()
compiles everything pending into one graph (cached by structure) and runs
it; reading a value syncs what it needs.

    w = kiln.lazy.to_lazy(kiln.randn(4, 4)).requires_grad_()
    loss = (x @ w).sum(); loss.backward()
    kiln.lazy.mark_step()
    kiln.lazy.metrics()["counters"]      # MarkStep, UncachedCompile, ..."""

import ctypes
import json

from . import _lib
from ._lib import lib
from .tensor import Tensor

COUNTERS = ("MarkStep", "UncachedCompile", "CachedCompile", "ExecuteGraph",
            "DeviceDataCacheMiss", "CreateLazyTensor", "DestroyLazyTensor",
            "SyncTensorsToData", "DonatedBuffers")


def to_lazy(t):
    """A new lazy tensor with t's values as device data."""
    return Tensor(lib.kiln_to_lazy(t._h))


def to_cpu(t):
    return t.cpu()


def mark_step():
    """Compiles (once per distinct graph) and runs everything pending."""
    _lib.check(lib.kiln_mark_step())


def counter(name):
    """One counter or timer by name; None if kiln has no such counter."""
    v = lib.kiln_lazy_counter(name.encode())
    return None if v < 0 else v


def metrics():
    """All counters and timers as a dict (kiln_lazy_metrics_json)."""
    return json.loads(_lib.take_string(lib.kiln_lazy_metrics_json()))


def metrics_report():
    """The human-readable report."""
    return _lib.take_string(lib.kiln_lazy_metrics_report())


def reset_metrics():
    lib.kiln_lazy_metrics_reset()


def last_compiled_graph():
    """The last graph mark_step compiled, after the passes (text), or None."""
    return _lib.take_string(lib.kiln_lazy_last_compiled_graph())


def tensors_text(*tensors):
    """The pending IR of tensors, as PyTorch's _get_tensors_text prints it."""
    arr = (ctypes.c_void_p * len(tensors))(*[t._h for t in tensors])
    return _lib.take_string(lib.kiln_lazy_tensors_text(arr, len(tensors)))
