#!/usr/bin/python3
"""scripts/golden/mutation.py: PyTorch 1.13's answers for graphs that write
tensors in place (issue #15), in tests/data/mutation/. Run with Debian's
PyTorch:

    /usr/bin/python3 scripts/golden/mutation.py

For each scripted function below it writes

    tests/data/mutation/<name>.ir            its TorchScript graph (inlined)
    tests/data/mutation/<name>/in<I>.npy     tensor input I
    tests/data/mutation/<name>/r<R>_out<K>.npy  output K of call R (R = 1,
                                             5: the inputs are reused, so
                                             writes to them accumulate)
    tests/data/mutation/<name>/r<R>_in<I>.npy   input I after R calls, for
                                             each input the graph writes
    tests/data/mutation/<name>/grad<I>.npy   d(sum of outputs that require
                                             grad)/d input I after one call
    tests/data/mutation/<name>/meta.json     {"args", "written",
                                             "requires_grad", "n_outputs",
                                             "rtol", "atol"}

tests/tools/test_kiln_mutation.c runs each with `kiln run` (--runs 1 and
5, with and without --lazy) and compares.
"""
import json
import os
import re
import shutil
import sys
from typing import List

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, 'tests', 'data', 'mutation')
CASES = []


def case(*inputs, grad=(), lazy_error=None):
    """inputs: ('t', shape) normal float32, ('pos', shape) in [0.5, 2),
    ('long', shape, high), or a Python literal; grad: indices requiring grad
    (never written: in place on such a leaf is an error); lazy_error: the
    message kiln's --lazy run fails with instead."""
    def deco(fn):
        CASES.append((fn.__name__, fn, inputs, tuple(grad), lazy_error))
        return fn
    return deco


# ---- each in-place variant, on a graph input ------------------------------------------------

@case(('t', (3, 4)))
def unary_inplace_input(x):
    x.relu_()
    return x


@case(('t', (3, 4)))
def sigmoid_tanh_inplace(x):
    x.sigmoid_()
    x.tanh_()
    return x


@case(('t', (3, 4)), ('t', (4,)))
def add_sub_inplace_broadcast(x, y):
    x.add_(y, alpha=2.0)
    x.sub_(y)
    return x


@case(('t', (3, 4)), ('pos', (3, 4)))
def mul_div_inplace(x, y):
    x.mul_(y)
    x.div_(y * 2.0)
    return x


@case(('t', (3, 4)))
def clamp_leaky_silu_inplace(x):
    x.clamp_(-0.5, 0.8)
    x.mul_(3.0)
    F.leaky_relu_(x, 0.2)
    F.silu(x, inplace=True)
    return x


@case(('t', (3, 4)))
def hardtanh_like_clamp_inplace(x):
    torch.clamp_(x, min=-1.0, max=1.0)
    return x * 2.0


@case(('t', (3, 4)), ('t', (4,)))
def fill_zero_copy_inplace(x, y):
    a = x * 1.0
    x.fill_(1.5)
    b = x * a
    x.zero_()
    x.copy_(y)
    return b, x


@case(('t', (3, 4)))
def dropout_eval_inplace(x):
    return F.dropout(x, 0.5, False, True) * 2.0


@case(('t', (3, 4)), ('t', (3, 4)))
def unary_chain_temp(x, y):
    t = x * y
    t.neg_()
    t.exp_()
    t.add_(1.0)
    t.sqrt_()
    t.reciprocal_()
    return t


@case(('t', (3, 4)), ('t', (3, 4)))
def compare_inplace(x, y):
    t = x * 1.0
    t.gt_(y)
    return t


@case(('pos', (3, 4)), ('t', (3, 4)))
def more_unary_inplace(x, y):
    t = y * 1.0
    t.abs_()
    t.sin_()
    t.cos_()
    t.erf_()
    t.pow_(2.0)
    x.log_()
    x.rsqrt_()
    return t, x


@case(('t', (4, 3)), ('t', (2, 3)), ('t', (4, 3)), ('long', (2,), 4), ('long', (2, 3), 4))
def index_scatter_add_inplace(x, src, y, idx, j):
    x.index_add_(0, idx, src, alpha=2.0)
    y.scatter_add_(0, j, src)
    return x, y


@case(('t', (3, 4)), ('t', (3, 4)))
def sign_eq_inplace(x, y):
    t = x * 1.0
    t.sign_()
    u = x * 1.0
    u.eq_(y)
    v = x * 1.0
    v.lt_(0.0)
    return t, u, v


# ---- aliasing ---------------------------------------------------------------------------------

@case(('t', (3, 4)))
def write_through_select(x):
    x[0].add_(1.0)
    return x


@case(('t', (3, 4)))
def write_through_t(x):
    x.t().mul_(2.0)
    return x


@case(('t', (3, 4)))
def write_view_of_temp(x):
    t = x * 1.0
    v = t[1]
    v.mul_(10.0)
    return t, v


@case(('t', (2, 3, 4)))
def write_through_nested_views(x):
    x[1].t()[2:4].mul_(-3.0)
    x.transpose(0, 2)[0].add_(1.0)
    x.view(6, 4)[5].zero_()
    return x


@case(('t', (3, 4)))
def add_expanded_operand(x):
    t = x[0:1] * 1.0
    e = t.expand(3, 4)
    x.add_(e)
    return x


@case(('t', (3, 4)), ('t', (3, 4)))
def input_used_after_write(x, y):
    a = x * y
    x.add_(y)
    b = x * y
    return b - a, x


@case(('t', (3, 4)), ('t', (3, 4)))
def write_in_loop(x, y):
    for i in range(3):
        x.add_(y)
        y.mul_(0.5)
    return x


@case(('t', (3, 4)), ('t', (3, 4)))
def temp_written_in_loop(x, y):
    t = x.clone()
    for i in range(3):
        t.mul_(y)
        t.add_(1.0)
    return t


@case(('t', (3, 4)), True)
def write_in_if(x, flag: bool):
    t = x * 2.0
    if flag:
        t.relu_()
        x.mul_(2.0)
    else:
        x.sub_(1.0)
    return t + x


@case(('t', (3, 4)), ('t', (3, 4)))
def cse_across_write(x, y):
    a = x * y
    x.add_(y)
    b = x * y
    return b - a


# ---- gradients through in-place ops on non-leaves ------------------------------------------

@case(('t', (3, 4)), ('t', (5, 4)), ('t', (5,)), grad=(0, 1, 2))
def relu_after_linear(x, w, b):
    h = F.linear(x, w, b)
    h.relu_()
    return h * h


@case(('t', (3, 4)), ('t', (4, 4)), ('t', (4,)), grad=(0, 1, 2))
def residual_add_(x, w, b):
    h = F.linear(x, w, b)
    h += x
    h.relu_()
    return F.linear(h, w, b)


@case(('t', (3, 4)), ('t', (3, 4)), grad=(0, 1))
def mul_div_non_leaf(x, y):
    h = x * 2.0
    h.mul_(y)
    h.div_(y * y + 1.0)
    h.tanh_()
    return h


# ---------------------------------------------------------------------------------------------

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
    raise ValueError(spec)


def flatten(v, out):
    if isinstance(v, (tuple, list)):
        for e in v:
            flatten(e, out)
    else:
        out.append(v)
    return out


def literal(v):
    if isinstance(v, bool):
        return 'true' if v else 'false'
    return repr(v)


def known_kinds():
    names = set()
    with open(os.path.join(ROOT, 'src', 'ops', 'ops.def')) as f:
        for line in f:
            m = re.match(r'\s*(?:OP|EW)\(\w+, \w+, "([\w:]+)".*OPF_HAS_INPLACE', line)
            if m:
                names.add(m.group(1) + '_')
            m = re.match(r'\s*(?:OP|EW)\(\w+, \w+, "([\w:]+)"', line)
            if m:
                names.add(m.group(1))
    with open(os.path.join(ROOT, 'src', 'ir', 'prims.def')) as f:
        for line in f:
            m = re.match(r'\s*PRIM\(\w+, "([\w:]+)"', line)
            if m:
                names.add(m.group(1))
    return names


def main():
    known = known_kinds()
    missing = {}
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    for name, fn, specs, grad, lazy_error in CASES:
        sfn = torch.jit.script(fn)
        graph = sfn.graph
        torch._C._jit_pass_inline(graph)
        text = str(graph).replace(ROOT + '/', '')
        for k in sorted(set(re.findall(r' = ([a-z]+::\w+?)(?:_\d+)?[\[(]', text)) - known):
            missing.setdefault(k, []).append(name)
        gen = torch.Generator().manual_seed(sum(map(ord, name)))
        inputs = [make_input(s, gen) for s in specs]
        d = os.path.join(OUT, name)
        os.makedirs(d)
        with open(os.path.join(OUT, name + '.ir'), 'w') as f:
            f.write(text)
        args = []
        for i, v in enumerate(inputs):
            if isinstance(v, torch.Tensor):
                np.save(os.path.join(d, 'in%d.npy' % i), v.numpy())
                args.append('in%d.npy' % i)
            else:
                args.append(literal(v))
        written = set()
        n_out = 0
        for runs in (1, 5):
            xs = [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs]
            with torch.no_grad():
                for _ in range(runs):
                    outs = flatten(sfn(*xs), [])
            n_out = len(outs)
            for k, v in enumerate(outs):
                np.save(os.path.join(d, 'r%d_out%d.npy' % (runs, k)), v.numpy())
            for i, v in enumerate(xs):
                if isinstance(v, torch.Tensor) and not torch.equal(v, inputs[i]):
                    written.add(i)
            for i in sorted(written):
                np.save(os.path.join(d, 'r%d_in%d.npy' % (runs, i)), xs[i].numpy())
        if grad:
            xs = [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs]
            for i in grad:
                xs[i].requires_grad_(True)
            outs = [o for o in flatten(sfn(*xs), []) if o.requires_grad]
            torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
            for i in grad:
                np.save(os.path.join(d, 'grad%d.npy' % i), xs[i].grad.numpy())
        meta = {'args': args, 'written': sorted(written), 'requires_grad': list(grad),
                'n_outputs': n_out, 'rtol': 1e-4, 'atol': 1e-5}
        if lazy_error:
            meta['lazy_error'] = lazy_error
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
