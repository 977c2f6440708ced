"""kiln.jit: TorchScript graphs run by kiln's profiling executor.

    f = kiln.jit.load(str(torch.jit.script(fn).graph))   # or a .ir path
    y = f(x, w)                  # the first call profiles, the next optimize
    f.stats                      # counters, guard failures, optimized graph
    f.optimized_graph            # TorchScript text of the optimized plan"""

import json
import os

from . import _lib
from ._lib import lib, ptr
from .tensor import Tensor, as_tensor


class Function:
    """A graph with its executor; call it like the scripted function.
    Inputs: Tensors, ints, floats, bools; outputs likewise (a tuple when the
    graph returns several)."""

    def __init__(self, graph_handle):
        self._g = graph_handle
        self._f = None
        self._f = ptr(lib.kiln_function_new(graph_handle))

    def __del__(self):
        if lib is None:
            return
        if getattr(self, "_f", None):
            lib.kiln_function_free(self._f)
        if getattr(self, "_g", None):
            lib.kiln_graph_free(self._g)
        self._f = self._g = None

    @property
    def n_inputs(self):
        return lib.kiln_graph_n_inputs(self._g)

    @property
    def graph(self):
        """The graph as TorchScript text."""
        return _lib.take_string(lib.kiln_graph_print(self._g))

    def __call__(self, *args):
        n = len(args)
        ins = (_lib.Value * max(n, 1))()
        keep = []
        for i, a in enumerate(args):
            v = ins[i]
            if isinstance(a, bool):
                v.kind, v.b = _lib.VALUE_BOOL, a
            elif isinstance(a, int):
                v.kind, v.i = _lib.VALUE_INT, a
            elif isinstance(a, float):
                v.kind, v.f = _lib.VALUE_FLOAT, a
            elif a is None:
                v.kind = _lib.VALUE_NONE
            else:
                t = as_tensor(a)
                keep.append(t)
                v.kind, v.t = _lib.VALUE_TENSOR, t._h
        cap = 64
        outs = (_lib.Value * cap)()
        k = _lib.check(lib.kiln_function_call(self._f, ins, n, outs, cap))
        res = []
        for i in range(k):
            v = outs[i]
            if v.kind == _lib.VALUE_TENSOR:
                res.append(Tensor(v.t))  # outputs are new references
            elif v.kind == _lib.VALUE_INT:
                res.append(v.i)
            elif v.kind == _lib.VALUE_FLOAT:
                res.append(v.f)
            elif v.kind == _lib.VALUE_BOOL:
                res.append(bool(v.b))
            else:
                res.append(None)
        return res[0] if k == 1 else tuple(res)

    @property
    def stats(self):
        """dict: profiling_runs, optimizations, guard_passes, guard_failures,
        fallback_calls, guard_failure_reasons, optimized_graph."""
        return json.loads(_lib.take_string(lib.kiln_function_stats_json(self._f)))

    @property
    def optimized_graph(self):
        """The last optimized plan as text, or None before one was built."""
        return _lib.take_string(lib.kiln_function_last_optimized_graph(self._f))


def load(ir_text_or_path):
    """A Function from TorchScript IR text (what print(scripted.graph)
    prints) or from the path of a file holding it. Parse errors raise
    kiln.KilnError with "line:col: message"."""
    s = os.fspath(ir_text_or_path)
    if "graph(" not in s and os.path.exists(s):
        g = ptr(lib.kiln_graph_load(s.encode()))
    else:
        b = s.encode()
        g = ptr(lib.kiln_graph_parse(b, len(b)))
    try:
        return Function(g)
    except Exception:
        lib.kiln_graph_free(g)
        raise
