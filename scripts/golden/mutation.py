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
from typing import List, Optional

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, 'tests', 'data', 'mutation')
CASES = []


def case(*inputs, grad=(), lazy_error=None, error=None):
    """inputs: ('t', shape) normal float32, ('pos', shape) in [0.5, 2),
    ('long', shape, high), ... (make_input), or a Python literal; grad:
    indices requiring grad (never written: in place on such a leaf is an
    error); lazy_error: the message kiln's --lazy run fails with instead;
    error: PyTorch's error message, which every kiln run must fail with
    too (meta "error")."""
    def deco(fn):
        CASES.append((fn.__name__, fn, inputs, tuple(grad), (lazy_error, error)))
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


# ---- every other in-place variant the op table derives (OPF_HAS_INPLACE) -------------------
# (name, input specs, statement writing t, on_input): t is a temporary x * 1.0 (x * 1 for
# integers), or with on_input the graph input x itself (ops whose repeated application over
# --runs 5 stays well conditioned). y, z are inputs 1 and 2.

T34, P34, U34 = ('t', (3, 4)), ('pos', (3, 4)), ('unit', (3, 4))
VARIANTS = [
    ('acos_', [U34], 't.acos_()', False),
    ('asin_', [U34], 't.asin_()', False),
    ('atan_', [T34], 't.atan_()', True),
    ('acosh_', [('gt1', (3, 4))], 't.acosh_()', False),
    ('asinh_', [T34], 't.asinh_()', True),
    ('atanh_', [U34], 't.atanh_()', False),
    ('cosh_', [T34], 't.cosh_()', False),
    ('sinh_', [T34], 't.sinh_()', False),
    ('tan_', [U34], 't.tan_()', False),
    ('ceil_', [T34], 't.mul_(3.0)\n    t.ceil_()', False),
    ('floor_', [T34], 't.floor_()', True),
    ('trunc_', [T34], 't.mul_(3.0)\n    t.trunc_()', False),
    ('round_', [T34], 't.mul_(3.0)\n    t.round_()', False),
    ('frac_', [T34], 't.mul_(3.0)\n    t.frac_()', False),
    ('deg2rad_', [T34], 't.deg2rad_()', False),
    ('rad2deg_', [T34], 't.rad2deg_()', False),
    ('digamma_', [P34], 't.digamma_()', False),
    ('lgamma_', [P34], 't.lgamma_()', False),
    ('erfc_', [T34], 't.erfc_()', False),
    ('erfinv_', [U34], 't.erfinv_()', False),
    ('exp2_', [T34], 't.exp2_()', False),
    ('expm1_', [T34], 't.expm1_()', False),
    ('log10_', [P34], 't.log10_()', False),
    ('log1p_', [P34], 't.log1p_()', False),
    ('log2_', [P34], 't.log2_()', False),
    ('sgn_', [T34], 't.sgn_()', True),
    ('square_', [T34], 't.square_()', False),
    ('logit_', [('prob', (3, 4))], 't.logit_()', False),
    ('logit_eps_', [('prob', (3, 4))], 't.mul_(1.2)\n    t.logit_(0.05)', False),
    ('nan_to_num_', [T34], 't.log_()\n    t.add_(1.0 / x.floor())\n    t.nan_to_num_(0.5, 100.0, -100.0)', False),
    ('celu_', [T34], 'torch.ops.aten.celu_(t, 0.5)', False),
    ('elu_', [T34], 'torch.ops.aten.elu_(t, 1.5)', True),
    ('selu_', [T34], 'torch.ops.aten.selu_(t)', False),
    ('gelu_', [T34], 'torch.ops.aten.gelu_(t)', False),
    ('gelu_tanh_', [T34], "torch.ops.aten.gelu_(t, approximate='tanh')", False),
    ('hardsigmoid_', [T34], 't.mul_(3.0)\n    torch.ops.aten.hardsigmoid_(t)', False),
    ('hardswish_', [T34], 't.mul_(3.0)\n    torch.ops.aten.hardswish_(t)', False),
    ('hardtanh_', [T34], 'torch.ops.aten.hardtanh_(t, -0.5, 0.7)', True),
    ('mish_', [T34], 'torch.ops.aten.mish_(t)', False),
    ('threshold_', [T34], 'torch.ops.aten.threshold_(t, 0.1, 20.0)', True),
    ('clamp_min_', [T34], 't.clamp_min_(-0.2)', True),
    ('clamp_max_', [T34], 't.clamp_max_(0.3)', True),
    ('atan2_', [T34, T34], 't.atan2_(y)', False),
    ('hypot_', [T34, T34], 't.hypot_(y)', False),
    ('copysign_', [T34, T34], 't.copysign_(y)', True),
    ('xlogy_', [T34, P34], 't.xlogy_(y)', False),
    ('remainder_', [T34, P34], 't.mul_(3.0)\n    t.remainder_(y)', False),
    ('fmod_', [T34, P34], 't.mul_(3.0)\n    t.fmod_(y)', False),
    ('floor_divide_', [T34, P34], 't.mul_(3.0)\n    t.floor_divide_(y)', False),
    ('true_divide_', [T34, P34], 'torch.ops.aten.true_divide_(t, y)', False),
    ('lerp_', [T34, T34], 't.lerp_(y, 0.3)', False),
    ('addcmul_', [T34, T34, ('t', (4,))], 't.addcmul_(y, z, value=0.5)', False),
    ('addcdiv_', [T34, T34, ('pos', (4,))], 't.addcdiv_(y, z, value=0.5)', False),
    ('ge_', [T34, T34], 't.ge_(y)', False),
    ('le_', [T34, ('t', (4,))], 't.le_(y)', False),
    ('ne_', [('long', (3, 4), 3), ('long', (3, 4), 3)], 't.ne_(y)', False),
    ('logical_and_', [T34, ('long', (3, 4), 2)], 't.logical_and_(y)', False),
    ('logical_or_', [('long', (3, 4), 2), ('long', (3, 4), 2)], 't.logical_or_(y)', False),
    ('logical_xor_', [('bool', (3, 4)), ('bool', (3, 4))], 't.logical_xor_(y)', True),
    ('bitwise_and_', [('long', (3, 4), 16), ('long', (3, 4), 16)], 't.bitwise_and_(y)', False),
    ('bitwise_or_', [('long', (3, 4), 16), ('long', (4,), 16)], 't.bitwise_or_(y)', True),
    ('bitwise_xor_', [('long', (3, 4), 16), ('long', (3, 4), 16)], 't.bitwise_xor_(y)', False),
    ('masked_fill_', [T34, ('bool', (3, 4))], 't.masked_fill_(y, -1.5)', True),
    ('masked_fill_tensor_', [T34, ('bool', (4,)), ('t', ())], 't.masked_fill_(y, z)', False),
    ('index_fill_', [T34, ('perm', 2, 4)], 't.index_fill_(1, y, -2.0)', True),
    ('index_copy_', [T34, ('perm', 2, 3), ('t', (2, 4))], 't.index_copy_(0, y, z)', False),
    ('scatter_', [T34, ('uniq', (2, 4), 3), ('t', (2, 4))], 't.scatter_(0, y, z)', False),
    ('bernoulli_', [T34], 't.bernoulli_(1.0)\n    u = x * 1.0\n    u.bernoulli_(0.0)\n    t.add_(u)', False),
]


def variant_case(name, specs, stmt, on_input):
    params = ['x', 'y', 'z'][:len(specs)]
    integral = specs[0][0] in ('long', 'bool')
    init = '    t = x\n' if on_input else ('    t = x.clone()\n' if integral else '    t = x * 1.0\n')
    src = 'def inplace_%s(%s):\n%s    %s\n    return t\n' % (name, ', '.join(params), init, stmt)
    cu = torch.jit.CompilationUnit(src)
    CASES.append(('inplace_' + name, cu.find_function('inplace_' + name), specs, (), (None, None)))


for v in VARIANTS:
    variant_case(*v)


# ---- advanced indexing: aten::index and aten::index_put_ (x[idx], x[mask], x[idx] = v) ----

@case(('t', (4, 3)), ('long', (2, 2), 4), ('bool', (4, 3)))
def index_tensor_and_mask(x, idx, m):
    a = x[idx]
    b = x[:, torch.tensor([2, -1, 0])]
    c = x[m]
    d = x[idx, 1]
    return a, b, c, d


@case(('t', (3, 4, 5)), ('long', (2,), 3), ('long', (2,), 5), ('bool', (4,)))
def index_nonadjacent_and_none(x, i, j, m):
    a = x[i, :, j]
    b = x[:, m]
    c = x[i, m]
    return a, b, c


@case(('t', (4, 3)), ('perm', 2, 4), ('t', (2, 3)), ('bool', (4, 3)))
def index_put_inplace(x, idx, v, m):
    x[idx] = v
    x[m] = 2.0
    x.index_put_([idx], v * 0.5, accumulate=True)
    return x


@case(('t', (3, 4)), ('long', (5,), 4), ('t', (5,)))
def index_put_accumulate_duplicates(x, idx, v):
    t = x.index_put((torch.tensor([0, 2, 0, 1, 0]), idx), v, accumulate=True)
    x.index_put_((torch.tensor([1, 1, 2, 2, 0]), idx), v * 2.0, True)
    return t, x


@case(('t', (3, 4, 2)), ('perm', 2, 4), ('t', (3, 2, 2)))
def index_put_middle_dim(x, idx, v):
    x[:, idx] = v
    return x


@case(('t', (4, 3)), ('perm', 2, 4), ('t', (2, 3)), ('bool', (4, 3)), grad=(0, 2))
def index_put_grad(x, idx, v, m):
    h = x * 2.0
    h[idx] = v * v
    g = h[m]
    return h * h, g.sum() + h[idx].sum()


@case(('t', (4, 3)), ('long', (3,), 4), grad=(0,))
def index_grad_duplicates(x, idx):
    return x[idx] * x[idx], x[:, torch.tensor([1, 1])]


@case(('t', (3, 4)), ('perm', 2, 3), True)
def index_put_in_loop_and_if(x, idx, flag: bool):
    for i in range(2):
        x[idx] = x[idx] * 2.0 + 1.0
    if flag:
        x[idx, 0] = -1.0
    return x


@case(('t', (3, 4)), ('perm', 2, 4), ('t', (3, 2)), grad=(0, 2))
def index_none_entry_grad(x, idx, v):
    h = x * 2.0 + 1.0
    # (h[:, idx] = v writes through slice(h), a view: CopySlices, which kiln refuses)
    ix = torch.jit.annotate(List[Optional[torch.Tensor]], [None, idx])
    h.index_put_(ix, v * 3.0)
    return h[:, idx] * x[:, idx], h.relu()


@case(('t', (3, 4)), ('perm', 2, 4), ('t', (3, 2)), ('t', (4,)), grad=(0, 2, 3),
      lazy_error='CopySlices')
def write_through_views_with_grad(x, idx, v, y):
    # h[:, idx] = v writes through slice(h): PyTorch's CopySlices
    h = x * 2.0 + 1.0
    h[:, idx] = v * 3.0
    h[0].mul_(y)
    h.t()[1].relu_()
    return h * h


# ---- an attention mask: masked_fill_ before softmax, with gradients ------------------------

@case(('t', (3, 5)), ('t', (4, 5)), ('bool', (3, 4)), grad=(0, 1))
def masked_fill_before_softmax(x, w, m):
    s = F.linear(x, w)
    s.masked_fill_(m, -1e9)
    p = F.softmax(s, -1)
    return p * torch.arange(4.0)


# ---- PyTorch's dtype rule for in-place results: the result must cast to self's dtype ---------

@case(('long', (3, 4), 5), error="result type Float can't be cast to the desired output type Long")
def inplace_float_into_long_is_an_error(x):
    x.mul_(0.5)
    return x


@case(('long', (3, 4), 5), ('t', (3, 4)),
      error="result type Float can't be cast to the desired output type Long")
def inplace_float_tensor_into_long_is_an_error(x, y):
    t = x.clone()
    t.add_(y)
    return t


@case(('long', (3, 4), 5), ('bool', (3, 4)))
def inplace_bool_into_long_casts(x, m):
    t = x.clone()
    t.add_(m)
    t.mul_(m)
    return t


# ---- views made before a write to their base see it (issue #15) ----------------------------

@case(('t', (3, 4)))
def stale_view_after_base_write(x):
    b = x.clone()
    v = b[0]
    b.add_(1.0)
    return v * 2.0


@case(('t', (3, 4)))
def stale_view_after_sibling_write(x):
    # through another view of the base, then through a view of a view
    b = x.clone()
    v1 = b.t()
    v2 = b[1]
    v2.mul_(3.0)
    w = v1[2]
    w.add_(1.0)
    return v1 * 2.0, v2 + 0.0, b


@case(('t', (3, 4)), grad=(0,), lazy_error='CopySlices')
def stale_view_grad_after_sibling_write(x):
    # v1's history must see the write through v2: eager regenerates it
    b = x * 1.0
    v1 = b.t()
    v2 = b[1]
    v2.mul_(3.0)
    return v1 * v1


@case(('t', (2, 3)), ('t', (3,)), grad=(1,))
def write_view_of_temp_without_grad(x, w):
    # b has no history (x needs no grad): b[1] += w is CopySlices on b, and
    # b's other view v1 (made before) comes to require grad
    b = x * 2.0
    v1 = b.t()
    v = b[1]
    v.add_(w)
    return b * b, v * 3.0, v1 * v1


@case(('t', (3,)), ('t', (3,)), grad=(1,))
def write_base_of_views_without_grad(x, w):
    # writing b (no history) with w: its live views come to require grad
    b = x * 1.0
    v1 = b[1:3]
    v2 = b.view(3, 1)
    b.mul_(w)
    return v1 * v1, v2 * 2.0


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
    if kind == 'unit':
        return torch.rand(shape, generator=gen) * 1.8 - 0.9
    if kind == 'prob':
        return torch.rand(shape, generator=gen) * 0.8 + 0.1
    if kind == 'gt1':
        return torch.rand(shape, generator=gen) * 2.0 + 1.1
    if kind == 'bool':
        return torch.rand(shape, generator=gen) > 0.5
    if kind == 'perm':  # ('perm', k, n): k distinct indices below n
        return torch.randperm(spec[2], generator=gen)[:spec[1]]
    if kind == 'uniq':  # ('uniq', (k, c), n): each column k distinct indices below n
        k, c = shape
        return torch.stack([torch.randperm(spec[2], generator=gen)[:k] for _ in range(c)], 1)
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
    for name, fn, specs, grad, (lazy_error, error) in CASES:
        sfn = fn if isinstance(fn, torch.jit.ScriptFunction) else torch.jit.script(fn)
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
        if error:
            try:
                sfn(*[v.clone() if isinstance(v, torch.Tensor) else v for v in inputs])
                raise SystemExit('%s: PyTorch does not fail' % name)
            except RuntimeError as e:
                if error not in str(e):
                    raise SystemExit('%s: PyTorch fails with %s' % (name, e))
            with open(os.path.join(d, 'meta.json'), 'w') as f:
                json.dump({'args': args, 'written': [], 'requires_grad': [], 'n_outputs': 0,
                           'rtol': 1e-4, 'atol': 1e-5, 'error': error}, f, indent=1)
                f.write('\n')
            continue
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
