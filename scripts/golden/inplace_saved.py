#!/usr/bin/python3
"""scripts/golden/inplace_saved.py: what PyTorch 1.13's in-place ops save
for backward (Note [In-place saved result] in src/ops/inplace.c), in
tests/data/inplace_saved/cases.txt. Run with Debian's PyTorch:

    /usr/bin/python3 scripts/golden/inplace_saved.py

For each case: x (requires grad) = the given values, y = x * 1 (not a
leaf), y.<op>_(args), then a second write y.add_(1), then
y.sum().backward(). An op whose backward uses its result saved y itself
(at version 1), so the backward fails on the version; one that saved
nothing of y (or a clone of its old value) backpropagates. One line per
case:

    <op> <args> <x0,x1> version <now> <expected>   (PyTorch's error)
    <op> <args> <x0,x1> ok <g0,g1>                 (x.grad)

args: '-' none, or comma-separated: f:<v> a float, t:<a>;<b> a [2] float
tensor without grad, g:<a>;<b> one with grad (all float64). tests/autograd/
test_inplace_saved.c runs each with kiln and compares.
"""
import os
import re

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, 'tests', 'data', 'inplace_saved', 'cases.txt')
X = '0.3,0.6'
CASES = [  # (op, args, x): kiln's in-place ops (src/ops/ops.def, OPF_HAS_INPLACE)
    ('relu', '-', '-0.3,0.6'), ('sigmoid', '-', X), ('tanh', '-', X), ('exp', '-', X),
    ('sqrt', '-', X), ('rsqrt', '-', X), ('reciprocal', '-', X), ('tan', '-', X),
    ('expm1', '-', X), ('exp2', '-', X), ('sgn', '-', '-0.3,0.6'),
    ('leaky_relu', 'f:0.25', '-0.3,0.6'), ('elu', 'f:1,f:1,f:1', '-0.3,0.6'), ('selu', '-', '-0.3,0.6'),
    ('celu', 'f:1', '-0.3,0.6'), ('hypot', 't:0.5;0.7', X), ('copysign', 't:1;-1', X),
    ('pow', 't:0.5;2', X), ('pow', 'g:0.5;2', X), ('pow', 'f:2', X),
    ('erfinv', '-', X), ('add', 'f:2,f:1', X), ('mul', 'f:2', X), ('add', 'g:0.5;0.7,f:1', X),
    ('mul', 'g:0.5;0.7', X), ('sin', '-', X), ('log', '-', X), ('neg', '-', X),
    ('abs', '-', '-0.3,0.6'), ('clamp', 'f:-1,f:1', X), ('square', '-', X), ('div', 'f:2', X),
]


def arg(spec):
    kind, v = spec.split(':')
    if kind == 'f':
        return float(v)
    return torch.tensor([float(e) for e in v.split(';')], dtype=torch.float64,
                        requires_grad=kind == 'g')


def main():
    lines = []
    for op, args, xs in CASES:
        x = torch.tensor([float(v) for v in xs.split(',')], dtype=torch.float64, requires_grad=True)
        a = [] if args == '-' else [arg(s) for s in args.split(',')]
        y = x * 1
        fn = {'leaky_relu': torch._C._nn.leaky_relu_, 'elu': torch._C._nn.elu_,
              'selu': torch.selu_, 'celu': torch.celu_}.get(op)
        if fn is not None:
            fn(y, *a)
        elif op == 'add':
            y.add_(a[0], alpha=a[1])
        else:
            getattr(y, op + '_')(*a)
        y.add_(1)
        try:
            y.sum().backward()
            g = ','.join('%.17g' % v for v in x.grad.tolist())
            lines.append('%s %s %s ok %s' % (op, args, xs, g))
        except RuntimeError as e:
            m = re.search(r'is at version (\d+); expected version (\d+)', str(e))
            assert m, str(e)
            lines.append('%s %s %s version %s %s' % (op, args, xs, m.group(1), m.group(2)))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, 'w') as f:
        f.write('# scripts/golden/inplace_saved.py (PyTorch %s)\n' % torch.__version__)
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
