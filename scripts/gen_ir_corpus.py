#!/usr/bin/python3
"""scripts/gen_ir_corpus.py: the TorchScript graph corpus for kiln's IR
tests (tests/data/ir/). Run with Debian's PyTorch 1.13:

    /usr/bin/python3 scripts/gen_ir_corpus.py

For each function below it writes

    tests/data/ir/<name>.ir          print(graph) of torch.jit.script(fn)
                                     after torch._C._jit_pass_inline
    tests/data/ir/<name>/in<I>.npy   tensor input I (graph input order)
    tests/data/ir/<name>/out<K>.npy  output K (tuples and lists flattened
                                     in order; a number as a 0-d array)
    tests/data/ir/<name>/grad<I>.npy d(sum of every floating-point output
                                     that requires grad)/d input I, for
                                     each input I that requires grad
    tests/data/ir/<name>/meta.json   {"args": the `kiln run` INPUT
                                     arguments (npy file names or scalar
                                     literals), "requires_grad": [I...],
                                     "n_outputs": K, "rtol", "atol"}

Every graph may use only op-table ops (src/ops/ops.def) and the builtins
of src/ir/prims.def; the script checks that and stops otherwise (change
the function, not the table). Inputs are small float32 tensors from a
fixed seed, so the outputs are reproducible and the corpus stays small.
"""
import json
import os
import re
import shutil
import sys
from typing import List, Tuple

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, 'tests', 'data', 'ir')

CASES = []


def case(*inputs, grad=()):
    """Registers fn with its inputs: ('t', shape) normal float32,
    ('pos', shape) in [0.5, 2), ('long', shape, high) int64 in [0, high),
    ('bool', shape), or a Python int/float/bool literal. grad lists the
    input indices that require grad."""
    def deco(fn):
        CASES.append((fn.__name__, fn, inputs, tuple(grad)))
        return fn
    return deco


# ---- what ordinary code scripts to (overloads, in-place branches) -------------

@case(('t', (3, 4)), grad=(0,))
def sum_mean_max_all(x):
    return x.sum() + x.mean() * 2.0 + x.max()


@case(('t', (2, 3, 4)), grad=(0,))
def flatten_squeeze(x):
    return torch.flatten(x, 1).unsqueeze(0).squeeze() * 2


@case(('pos', (3, 4)), grad=(0,))
def reciprocal_div(x):
    return 2 / x + x.reciprocal()


@case(('t', (3, 4)), grad=(0,))
def functional_activations(x):
    return F.relu(x) + F.silu(x) + F.leaky_relu(x, 0.2)


@case(('t', (3, 4)), ('t', (3, 4)), grad=(0,))
def mse_functional(x, y):
    return F.mse_loss(x, y)


# ---- elementwise, broadcasting, scalars --------------------------------------

@case(('t', (3, 4)), ('t', (4,)), grad=(0, 1))
def ew_add_broadcast(x, y):
    return x + y


@case(('t', (2, 3, 1)), ('t', (1, 4)), grad=(0, 1))
def ew_mul_sub_broadcast(x, y):
    return x * y - x


@case(('t', (3, 4)), ('t', (3, 1)), grad=(0, 1))
def ew_div_pow(x, y):
    return x / (y.abs() + 1) ** 2


@case(('t', (2, 5)), grad=(0,))
def scalar_literals(x):
    return x * 2.5 + 1 - 3, x / 4, 0.5 - x * 0.25


@case(('t', (3, 2)), 1.75, grad=(0,))
def scalar_float_input(x, s: float):
    return x * s + s, s * 2.0


@case(('t', (3, 2)), 3, grad=(0,))
def scalar_int_input(x, k: int):
    return x * k - k, k + 1


@case(('pos', (2, 3)), grad=(0,))
def unary_chain(x):
    return torch.sqrt(x).log() + torch.exp(-x) + x.rsqrt() * torch.sin(x) - torch.cos(x)


@case(('t', (4, 3)), grad=(0,))
def unary_activations(x):
    return torch.tanh(x) + torch.sigmoid(x) * x.relu() + torch.erf(x) - x.abs().neg()


@case(('t', (4, 3)), grad=(0,))
def gelu_silu(x):
    return F.gelu(x) + torch._C._nn.silu(x), F.gelu(x, approximate='tanh')


@case(('t', (3, 5)), grad=(0,))
def leaky_relu_sign(x):
    return torch._C._nn.leaky_relu(x, 0.2) + torch.sign(x)


@case(('t', (3, 4)), grad=(0,))
def clamp_ops(x):
    return x.clamp(-0.5, 0.5), torch.clamp(x, min=0.1), x.clamp(max=0.0)


@case(('t', (3, 4)), ('t', (4,)), grad=(0, 1))
def where_compare(x, y):
    return torch.where(x > y, x, y * 2.0), torch.where(x <= 0.0, torch.zeros_like(x), x)


@case(('t', (3, 4)), ('t', (3, 4)), grad=(0, 1))
def maximum_minimum(x, y):
    return torch.maximum(x, y) + torch.minimum(x, y * 0.5)


@case(('t', (3, 4)), ('t', (4,)))
def comparisons(x, y):
    return (x < y).float() + (x >= y).float() * 2.0 + (x == x).float() - (x != y).float()


@case(('pos', (3, 4)), ('t', (3, 4)), grad=(0, 1))
def pow_forms(x, y):
    return x.pow(y), torch.pow(2.0, y), x ** 0.5


# ---- reductions ---------------------------------------------------------------

@case(('t', (3, 4, 2)), grad=(0,))
def sum_mean(x):
    return x.sum(dim=1), x.mean(dim=[0, 2], keepdim=True), x.sum(dim=[0, 1, 2])


@case(('t', (4, 5)), grad=(0,))
def amax_amin_var(x):
    return x.amax(dim=1), x.amin(dim=0, keepdim=True), x.var(dim=1)


@case(('t', (4, 5)), grad=(0,))
def max_argmax(x):
    values, indices = x.max(dim=1)
    return values, indices, x.argmax(dim=0)


# ---- linear algebra -----------------------------------------------------------------

@case(('t', (3, 4)), ('t', (4, 2)), grad=(0, 1))
def matmul_2d(x, w):
    return x @ w


@case(('t', (2, 3, 4)), ('t', (4, 5)), grad=(0, 1))
def matmul_batched(x, w):
    return torch.matmul(x, w)


@case(('t', (3, 4)), ('t', (4, 2)), ('t', (2, 3, 4)), ('t', (2, 4, 2)), grad=(0, 1, 2, 3))
def mm_bmm(x, w, a, b):
    return torch.mm(x, w), torch.bmm(a, b)


@case(('t', (2,)), ('t', (3, 4)), ('t', (4, 2)), grad=(0, 1, 2))
def addmm_scaled(b, x, w):
    return torch.addmm(b, x, w, beta=0.5, alpha=2.0)


@case(('t', (5, 3)), ('t', (4, 3)), ('t', (4,)), grad=(0, 1, 2))
def linear(x, w, b):
    return F.linear(x, w, b)


# ---- views ----------------------------------------------------------------------------

@case(('t', (2, 3, 4)), grad=(0,))
def views(x):
    a = x.view(6, 4)
    b = x.reshape(4, -1)
    c = x.transpose(0, 2).contiguous()
    d = x.permute(2, 0, 1)
    e = a.t()
    return a, b, c, d, e


@case(('t', (2, 3)), grad=(0,))
def unsqueeze_expand(x):
    u = x.unsqueeze(1)
    return u.expand(2, 4, 3) * 1.0, u.squeeze(1) + 1.0


@case(('t', (4, 6)), grad=(0,))
def slicing(x):
    return x[1:3], x[:, ::2], x[0], x[:, -1], x.narrow(1, 2, 3)


@case(('t', (3, 4)), grad=(0,))
def size_queries(x):
    n = x.size(0)
    m = x.dim()
    y = x.view(n, -1, 2)
    return y * float(m), x.size()[1]


# ---- softmax and losses -----------------------------------------------------------------

@case(('t', (3, 5)), grad=(0,))
def softmax_dim(x):
    return torch.softmax(x, dim=1), x.log_softmax(0)


@case(('t', (3, 5)), grad=(0,))
def softmax_functional(x):
    return F.softmax(x, dim=-1), F.log_softmax(x, dim=1)


@case(('t', (4, 5)), ('long', (4,), 5), grad=(0,))
def nll_loss(x, target):
    return F.nll_loss(F.log_softmax(x, dim=1), target)


@case(('t', (4, 5)), ('long', (4,), 5), grad=(0,))
def cross_entropy(x, target):
    return F.cross_entropy(x, target), F.cross_entropy(x, target, reduction='sum')


@case(('t', (3, 4)), ('t', (3, 4)), grad=(0, 1))
def mse_loss(x, y):
    # F.mse_loss goes through aten::broadcast_tensors (not in the op table)
    return torch._C._nn.mse_loss(x, y), torch._C._nn.mse_loss(x, y, 0)


# ---- models ------------------------------------------------------------------------------

@case(('t', (4, 6)), ('t', (8, 6)), ('t', (8,)), ('t', (3, 8)), ('t', (3,)), ('long', (4,), 3),
      grad=(1, 2, 3, 4))
def mlp(x, w1, b1, w2, b2, target):
    h = torch.relu(F.linear(x, w1, b1))
    logits = F.linear(h, w2, b2)
    return F.cross_entropy(logits, target), logits


@case(('t', (2, 3)), ('t', (2, 4)), ('t', (2, 4)), ('t', (16, 3)), ('t', (16, 4)), ('t', (16,)),
      grad=(0, 1, 2, 3, 4, 5))
def lstm_cell(x, h, c, w_ih, w_hh, b):
    gates = x @ w_ih.t() + h @ w_hh.t() + b
    i, f, g, o = gates.chunk(4, 1)
    i = torch.sigmoid(i)
    f = torch.sigmoid(f)
    g = torch.tanh(g)
    o = torch.sigmoid(o)
    c2 = f * c + i * g
    h2 = o * torch.tanh(c2)
    return h2, c2


@case(('t', (2, 3, 6, 6)), ('t', (4, 3, 3, 3)), ('t', (4,)), grad=(0, 1, 2))
def conv_pool(x, w, b):
    y = F.conv2d(x, w, b, stride=1, padding=1)
    return F.max_pool2d(torch.relu(y), 2)


# ---- control flow ----------------------------------------------------------------------------

@case(('t', (2, 3)), ('t', (3, 3)), 3, grad=(0, 1))
def loop_int(x, w, n: int):
    h = x
    for i in range(n):
        h = torch.tanh(h @ w + x) * float(i + 1)
    return h


@case(('t', (3, 2)), True, grad=(0,))
def if_bool_true(x, flag: bool):
    if flag:
        y = x * 2.0
    else:
        y = x.exp()
    return y


@case(('t', (3, 2)), False, grad=(0,))
def if_bool_false(x, flag: bool):
    if flag:
        y = x * 2.0
    else:
        y = x.exp()
    return y + 1.0


@case(('t', (2, 2)), 4, grad=(0,))
def while_loop(x, n: int):
    i = 0
    y = x
    while i < n:
        y = y * 0.5 + x
        i += 1
    return y, i


@case(('t', (2, 3)), 5, grad=(0,))
def loop_with_if(x, n: int):
    y = x
    for i in range(n):
        if i % 2 == 0:
            y = y + x
        else:
            y = y * 0.5
    return y


@case(('t', (2, 3)), 3, grad=(0,))
def list_append_stack(x, n: int):
    parts: List[torch.Tensor] = []
    for i in range(n):
        parts.append(x * float(i))
    return torch.stack(parts, 0), len(parts)


def _pair(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    return x.sigmoid(), x.tanh()


@case(('t', (2, 3)), grad=(0,))
def tuple_unpack(x):
    a, b = _pair(x)
    t = (a, b)
    return t[0] * t[1], a + b


# ---- joining and indexing ---------------------------------------------------------------------

@case(('t', (2, 4)), grad=(0,))
def chunk_cat(x):
    a, b = x.chunk(2, 1)
    return torch.cat([b, a], 1), torch.cat([a, b, a], 0)


@case(('t', (2, 3)), ('t', (2, 3)), grad=(0, 1))
def stack(x, y):
    return torch.stack([x, y], 0), torch.stack([x, y * 2.0], 2)


@case(('t', (2, 6)), grad=(0,))
def split_parts(x):
    p = x.split(2, 1)
    return p[0] + p[2], torch.cat(p, 0)


@case(('t', (5, 3)), ('long', (4,), 5), ('long', (5, 2), 3), grad=(0,))
def indexing(w, idx, g):
    return torch.embedding(w, idx), torch.index_select(w, 0, idx), torch.gather(w, 1, g)


@case(('t', (5, 3)), ('long', (2, 3), 5), grad=(0,))
def embedding_functional(w, idx):
    return F.embedding(idx, w)


# ---- dtype and copies ------------------------------------------------------------------------

@case(('t', (2, 3)), ('t', (2, 3)), grad=(0, 1))
def dtype_copies(x, y):
    d = x.to(torch.float64)
    z = torch.ones_like(x) + torch.zeros_like(y)
    return d * 2.0, x.detach() * y + z, y.clone(), (x > 0).long()


@case(('t', (3, 3)), grad=(0,))
def dropout_eval(x):
    return torch.dropout(x, 0.5, False) * 2.0


@case(('t', (5, 2, 3)), ('t', (2, 4)), ('t', (2, 4)), ('t', (16, 3)), ('t', (16, 4)), ('t', (16,)),
      grad=(0, 1, 2, 3, 4, 5))
def lstm_unbind(x, h, c, w_ih, w_hh, b):
    xs = F.linear(x, w_ih, b).unbind(0)
    for t in range(len(xs)):
        gates = xs[t] + F.linear(h, w_hh)
        i, f, g, o = gates.chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
    return h, c


# ---------------------------------------------------------------------------------------------

def known_kinds():
    """Op-table ops and prims.def kinds."""
    names = set()
    with open(os.path.join(ROOT, 'src', 'ops', 'ops.def')) as f:
        for line in f:
            m = re.match(r'\s*(?:OP|EW)\(\w+, \w+, "([\w:]+)"', line)
            if m:
                names.add(m.group(1))
    with open(os.path.join(ROOT, 'src', 'ir', 'prims.def')) as f:
        for line in f:
            m = re.match(r'\s*PRIM\(\w+, "([\w:]+)"', line)
            if m:
                names.add(m.group(1))
    return names


def make_input(spec, gen):
    if isinstance(spec, (bool, int, float)):
        return spec
    kind, shape = spec[0], spec[1]
    if kind == 't':
        return torch.randn(shape, generator=gen)
    if kind == 'pos':
        return torch.rand(shape, generator=gen) * 1.5 + 0.5
    if kind == 'long':
        return torch.randint(0, spec[2], shape, generator=gen)
    if kind == 'bool':
        return torch.rand(shape, generator=gen) > 0.5
    raise ValueError(spec)


def flatten(v, out):
    if isinstance(v, (tuple, list)):
        for e in v:
            flatten(e, out)
    else:
        out.append(v)
    return out


def as_array(v):
    if isinstance(v, torch.Tensor):
        return v.detach().numpy()
    if isinstance(v, bool):
        return np.array(v, dtype=np.bool_)
    if isinstance(v, int):
        return np.array(v, dtype=np.int64)
    if isinstance(v, float):
        return np.array(v, dtype=np.float64)
    raise TypeError(type(v))


def literal(v):
    if isinstance(v, bool):
        return 'true' if v else 'false'
    return repr(v)


def main():
    known = known_kinds()
    missing = {}
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    for name, fn, specs, grad in CASES:
        graph = torch.jit.script(fn).graph
        torch._C._jit_pass_inline(graph)
        text = str(graph).replace(ROOT + '/', '')
        kinds = set(re.findall(r' = ([a-z]+::\w+?)(?:_\d+)?[\[(]', text))
        for k in sorted(kinds - known):
            missing.setdefault(k, []).append(name)
        gen = torch.Generator().manual_seed(sum(map(ord, name)))
        inputs = [make_input(s, gen) for s in specs]
        for i in grad:
            inputs[i].requires_grad_(True)
        outs = flatten(torch.jit.script(fn)(*inputs), [])
        roots = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        if roots:
            torch.autograd.backward(roots, [torch.ones_like(o) for o in roots])
        d = os.path.join(OUT, name)
        os.makedirs(d)
        with open(os.path.join(OUT, name + '.ir'), 'w') as f:
            f.write(text)
        args = []
        for i, v in enumerate(inputs):
            if isinstance(v, torch.Tensor):
                np.save(os.path.join(d, 'in%d.npy' % i), v.detach().numpy())
                args.append('in%d.npy' % i)
            else:
                args.append(literal(v))
        for k, v in enumerate(outs):
            np.save(os.path.join(d, 'out%d.npy' % k), as_array(v))
        for i in grad:
            g = inputs[i].grad
            np.save(os.path.join(d, 'grad%d.npy' % i),
                    (g if g is not None else torch.zeros_like(inputs[i])).numpy())
        meta = {'args': args, 'requires_grad': list(grad), 'n_outputs': len(outs),
                'rtol': 1e-4, 'atol': 1e-5}
        with open(os.path.join(d, 'meta.json'), 'w') as f:
            json.dump(meta, f, indent=1)
            f.write('\n')
    if missing:
        for k, names in sorted(missing.items()):
            print('not in the op table or prims.def: %s (used by %s)' % (k, ', '.join(names)),
                  file=sys.stderr)
        sys.exit(1)
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(OUT) for f in fs)
    print('%d graphs, %d bytes in %s' % (len(CASES), total, os.path.relpath(OUT, ROOT)))


if __name__ == '__main__':
    main()
