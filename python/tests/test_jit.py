"""kiln.jit.load: a TorchScript function from the text PyTorch prints
(print(torch.jit.script(f).graph) after _jit_pass_inline, PyTorch 1.13),
called through the profiling executor: values and gradients hand-computed
and PyTorch's, the stats after profiling and optimizing, the optimized
graph; and the PyTorch corpus of tests/data/ir by path."""
import json
import os

import numpy as np
import pytest

import kiln
from conftest import CORPUS

# torch.jit.script of:  y = torch.tanh(x @ w + b); return (y * y).sum(), y
TORCHSCRIPT = """graph(%x.1 : Tensor,
      %w.1 : Tensor,
      %b.1 : Tensor):
  %13 : NoneType = prim::Constant()
  %7 : int = prim::Constant[value=1]()
  %5 : Tensor = aten::matmul(%x.1, %w.1) # /tmp/ts_gen.py:4:19
  %8 : Tensor = aten::add(%5, %b.1, %7) # /tmp/ts_gen.py:4:19
  %y.1 : Tensor = aten::tanh(%8) # /tmp/ts_gen.py:4:8
  %12 : Tensor = aten::mul(%y.1, %y.1) # /tmp/ts_gen.py:5:12
  %14 : Tensor = aten::sum(%12, %13) # /tmp/ts_gen.py:5:12
  %16 : (Tensor, Tensor) = prim::TupleConstruct(%14, %y.1)
  return (%16)
"""
# PyTorch 1.13's values for the inputs below (float64).
TORCH_SUM = 3.231442441150278
TORCH_W_GRAD = [[0.5728817387560232, 0.8126445410000553],
                [-0.5394129248335374, 0.26031817238835864]]


def test_torchscript_text_profiled_and_optimized():
    f = kiln.jit.load(TORCHSCRIPT)
    assert f.n_inputs == 3 and "aten::tanh" in f.graph
    x = np.array([[0.5, -1.0], [2.0, 0.25]])
    w = np.array([[1.0, 0.5], [-0.5, 2.0]])
    b = np.array([0.1, -0.2])
    y_hand = np.tanh(x @ w + b)
    for call in range(4):
        tw = kiln.tensor(w, requires_grad=True)
        s, y = f(kiln.tensor(x), tw, kiln.tensor(b))
        np.testing.assert_allclose(y.numpy(), y_hand, rtol=1e-12)
        assert s.item() == pytest.approx(TORCH_SUM, rel=1e-12)
        s.backward()
        np.testing.assert_allclose(tw.grad.numpy(), x.T @ (2 * y_hand * (1 - y_hand ** 2)),
                                   rtol=1e-12)
        np.testing.assert_allclose(tw.grad.numpy(), TORCH_W_GRAD, rtol=1e-12)
    st = f.stats
    assert st["profiling_runs"] == 1 and st["optimizations"] == 1
    assert st["guard_failures"] == 0
    assert "DifferentiableGraph" in f.optimized_graph


def test_corpus_graph_by_path():
    name = "addmm_scaled"
    meta = json.load(open(os.path.join(CORPUS, name, "meta.json")))
    f = kiln.jit.load(os.path.join(CORPUS, name + ".ir"))
    ins = [kiln.tensor(np.load(os.path.join(CORPUS, name, a))) for a in meta["args"]]
    for i in meta["requires_grad"]:
        ins[i].requires_grad = True
    out = f(*ins)
    np.testing.assert_allclose(out.numpy(), np.load(os.path.join(CORPUS, name, "out0.npy")),
                               rtol=meta["rtol"], atol=meta["atol"])
    out.backward(kiln.ones(*out.shape, dtype=out.dtype))
    for i in meta["requires_grad"]:
        np.testing.assert_allclose(ins[i].grad.numpy(),
                                   np.load(os.path.join(CORPUS, name, "grad%d.npy" % i)),
                                   rtol=meta["rtol"], atol=meta["atol"])


def test_scalar_inputs_and_outputs():
    f = kiln.jit.load("graph(%x : Tensor, %k : int):\n"
                      "  %y : Tensor = aten::mul(%x, %k)\n"
                      "  return (%y, %k)\n")
    y, k = f(kiln.tensor([1.0, 2.0]), 3)
    assert y.tolist() == [3.0, 6.0] and k == 3
    with pytest.raises(kiln.KilnError):
        f(kiln.tensor([1.0]))  # one input short
