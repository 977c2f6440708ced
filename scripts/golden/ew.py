#!/usr/bin/python3
"""scripts/golden/ew.py: writes tests/ops/golden_ew.h, PyTorch 1.13's values
and gradients for kiln's elementwise ops (unary, activation, binary,
compare). Run with the system python that has torch:

    /usr/bin/python3 scripts/golden/ew.py > tests/ops/golden_ew.h

Each case is (name, dtype, expected values); the C test maps the name to a
kiln call on the shared inputs below. Gradients are w.r.t. float64 inputs
with the upstream gradient G."""
import math
import torch
import torch.nn.functional as F

F32, F64, I64, BOOL = 0, 1, 2, 3
TD = {F32: torch.float32, F64: torch.float64, I64: torch.int64, BOOL: torch.bool}

inf, nan = math.inf, math.nan
# unary input (floating): kinks, ties with Y, saturation, inf, nan
X = [-3.5, -2.0, -1.0, -0.5, -0.1, -0.0, 0.0, 1e-8, 0.1, 0.5, 1.0, 1.5, 2.0,
     3.0, 10.0, -25.0, 25.0, inf, -inf, nan]
Y = [-3.5, 2.0, -1.0, 0.25, -0.2, 0.0, -0.0, 1e-8, 0.3, -0.5, 2.0, 1.5, -2.0,
     0.5, 3.0, nan, 2.0, 1.0, -inf, 1.0]
C = [1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0]
N = len(X)
# integer inputs
XI = [-7, -3, -1, 0, 1, 2, 5, 9, -2, 3]
YI = [2, -3, 3, 0, -2, 2, 3, 40, -2, 3]
CI = [1, 0, 1, 1, 0, 0, 1, 0, 1, 0]
XB = [True, False, True, False, True, False, True, False, True, False]
YB = [True, True, False, False, True, True, False, False, True, False]
# gradient inputs: finite, with kinks (0, clamp bounds) and ties
XG = [-3.5, -2.0, -1.0, -0.5, -0.1, 0.0, 0.1, 0.5, 1.0, 1.5, 2.0, 3.0]
YG = [-3.5, 2.0, -1.0, 0.25, -0.2, 0.0, 0.3, -0.5, 2.0, 1.5, -2.0, 0.5]
CG = [1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1]
G = [0.3, -1.2, 2.0, 0.7, -0.4, 1.1, -2.5, 0.9, 1.6, -0.8, 0.25, -1.9]
NG = len(XG)
# pow: zero and negative bases with integer exponents, zero exponents
PB = [2.0, 0.5, 0.0, 0.0, 0.0, -1.5, -2.0, 3.0, 1.0, 4.0, 0.7, 1.3]
PE = [3.0, -1.5, 2.0, 0.0, -1.0, 2.0, 3.0, 0.0, 0.5, 0.5, -2.0, 1.7]

def unary_fns():
    return {
        'neg': torch.neg, 'abs': torch.abs, 'sign': torch.sign, 'exp': torch.exp,
        'log': torch.log, 'sqrt': torch.sqrt, 'rsqrt': torch.rsqrt, 'sin': torch.sin,
        'cos': torch.cos, 'tanh': torch.tanh, 'sigmoid': torch.sigmoid, 'erf': torch.erf,
        'relu': torch.relu, 'gelu': F.gelu,
        'gelu_tanh': lambda x: F.gelu(x, approximate='tanh'), 'silu': F.silu,
        'leaky_relu': lambda x: F.leaky_relu(x, 0.2),
        'clamp': lambda x: torch.clamp(x, -0.5, 1.5),
        'clamp_min': lambda x: torch.clamp(x, min=0.3),
        'clamp_max': lambda x: torch.clamp(x, max=-0.2),
        'clamp_crossed': lambda x: torch.clamp(x, 2.0, 1.0),
        'pow_2': lambda x: torch.pow(x, 2.0), 'pow_half': lambda x: torch.pow(x, 0.5),
        'pow_m1_5': lambda x: torch.pow(x, -1.5),
    }

INT_UNARY = {'neg': torch.neg, 'abs': torch.abs, 'sign': torch.sign, 'relu': torch.relu,
             'clamp_int': lambda x: torch.clamp(x, -2, 4), 'pow_2': lambda x: torch.pow(x, 2.0)}
BOOL_UNARY = {'sign': torch.sign}

def binary_fns():
    return {'pow': torch.pow, 'maximum': torch.maximum, 'minimum': torch.minimum,
            'eq': torch.eq, 'ne': torch.ne, 'lt': torch.lt, 'le': torch.le, 'gt': torch.gt,
            'ge': torch.ge}

INT_BINARY = ['pow', 'maximum', 'minimum', 'eq', 'ne', 'lt', 'le', 'gt', 'ge']
BOOL_BINARY = ['maximum', 'minimum', 'eq', 'ne', 'lt', 'le', 'gt', 'ge']

def c_num(v):
    v = float(v)
    if math.isnan(v):
        return 'NAN'
    if math.isinf(v):
        return 'INFINITY' if v > 0 else '-INFINITY'
    return repr(v)

def c_arr(vals):
    return '{' + ', '.join(c_num(v) for v in vals) + '}'

def out(cases, name, dt, t):
    cases.append((name, dt, t.double().tolist() if t.dtype != torch.bool
                  else [float(b) for b in t.tolist()]))

def main():
    cases = []  # (name, input dtype, values)
    ufns = unary_fns()
    for dt in (F32, F64):
        x = torch.tensor(X, dtype=TD[dt])
        for n, f in ufns.items():
            out(cases, n, dt, f(x))
    xi = torch.tensor(XI)
    for n, f in INT_UNARY.items():
        out(cases, n, I64, f(xi))
    xb = torch.tensor(XB)
    for n, f in BOOL_UNARY.items():
        out(cases, n, BOOL, f(xb))
    bfns = binary_fns()
    for dt in (F32, F64):
        x, y = torch.tensor(X, dtype=TD[dt]), torch.tensor(Y, dtype=TD[dt])
        for n, f in bfns.items():
            out(cases, n, dt, f(x, y))
        out(cases, 'where', dt, torch.where(torch.tensor(C, dtype=torch.bool), x, y))
    yi = torch.tensor(YI)
    for n in INT_BINARY:
        out(cases, n, I64, bfns[n](xi, yi))
    out(cases, 'where', I64, torch.where(torch.tensor(CI, dtype=torch.bool), xi, yi))
    yb = torch.tensor(YB)
    for n in BOOL_BINARY:
        out(cases, n, BOOL, bfns[n](xb, yb))
    out(cases, 'where', BOOL, torch.where(torch.tensor(CI, dtype=torch.bool), xb, yb))

    # gradients (float64)
    grads = []  # (name, dx, dy)
    g = torch.tensor(G, dtype=torch.float64)
    for n, f in ufns.items():
        x = torch.tensor(XG, dtype=torch.float64, requires_grad=True)
        (dx,) = torch.autograd.grad(f(x), x, g)
        grads.append((n, dx.tolist(), [0.0] * NG))
    for n in ('maximum', 'minimum', 'where'):
        x = torch.tensor(XG, dtype=torch.float64, requires_grad=True)
        y = torch.tensor(YG, dtype=torch.float64, requires_grad=True)
        r = (torch.where(torch.tensor(CG, dtype=torch.bool), x, y) if n == 'where'
             else bfns[n](x, y))
        dx, dy = torch.autograd.grad(r, (x, y), g)
        grads.append((n, dx.tolist(), dy.tolist()))
    x = torch.tensor(PB, dtype=torch.float64, requires_grad=True)
    y = torch.tensor(PE, dtype=torch.float64, requires_grad=True)
    r = torch.pow(x, y)
    dx, dy = torch.autograd.grad(r, (x, y), g)
    grads.append(('pow', dx.tolist(), dy.tolist()))
    grads.append(('pow_value', r.tolist(), [0.0] * NG))
    y = torch.tensor(PE, dtype=torch.float64, requires_grad=True)
    (dy,) = torch.autograd.grad(torch.pow(0.0, y), y, g)
    grads.append(('pow_base0', [0.0] * NG, dy.tolist()))
    (dy,) = torch.autograd.grad(torch.pow(2.5, y), y, g)
    grads.append(('pow_base2_5', [0.0] * NG, dy.tolist()))
    x = torch.tensor(PB, dtype=torch.float64, requires_grad=True)
    (dx,) = torch.autograd.grad(torch.pow(x, 0.0), x, g)
    grads.append(('pow_exp0', dx.tolist(), [0.0] * NG))

    p = print
    p('/* tests/ops/golden_ew.h: PyTorch %s golden values for the elementwise ops.' % torch.__version__)
    p(' * GENERATED by scripts/golden/ew.py; do not edit. */')
    p('#ifndef KILN_GOLDEN_EW_H')
    p('#define KILN_GOLDEN_EW_H')
    p('')
    p('#include <math.h>')
    p('#include <stdint.h>')
    p('')
    p('/* Each test file uses a subset. */')
    p('#define GOLDEN_EW_UNUSED __attribute__((unused))')
    p('')
    p('#define GOLDEN_EW_N %d   /* floating inputs */' % N)
    p('#define GOLDEN_EW_NI %d  /* int64 and bool inputs */' % len(XI))
    p('#define GOLDEN_EW_NG %d  /* gradient inputs */' % NG)
    p('GOLDEN_EW_UNUSED static const double golden_ew_x[GOLDEN_EW_N] = %s;' % c_arr(X))
    p('GOLDEN_EW_UNUSED static const double golden_ew_y[GOLDEN_EW_N] = %s;' % c_arr(Y))
    p('GOLDEN_EW_UNUSED static const double golden_ew_c[GOLDEN_EW_N] = %s;' % c_arr(C))
    p('GOLDEN_EW_UNUSED static const int64_t golden_ew_xi[GOLDEN_EW_NI] = {%s};' % ', '.join(map(str, XI)))
    p('GOLDEN_EW_UNUSED static const int64_t golden_ew_yi[GOLDEN_EW_NI] = {%s};' % ', '.join(map(str, YI)))
    p('GOLDEN_EW_UNUSED static const double golden_ew_ci[GOLDEN_EW_NI] = %s;' % c_arr(CI))
    p('GOLDEN_EW_UNUSED static const double golden_ew_xb[GOLDEN_EW_NI] = %s;' % c_arr(XB))
    p('GOLDEN_EW_UNUSED static const double golden_ew_yb[GOLDEN_EW_NI] = %s;' % c_arr(YB))
    p('GOLDEN_EW_UNUSED static const double golden_ew_xg[GOLDEN_EW_NG] = %s;' % c_arr(XG))
    p('GOLDEN_EW_UNUSED static const double golden_ew_yg[GOLDEN_EW_NG] = %s;' % c_arr(YG))
    p('GOLDEN_EW_UNUSED static const double golden_ew_cg[GOLDEN_EW_NG] = %s;' % c_arr(CG))
    p('GOLDEN_EW_UNUSED static const double golden_ew_g[GOLDEN_EW_NG] = %s;' % c_arr(G))
    p('GOLDEN_EW_UNUSED static const double golden_ew_pb[GOLDEN_EW_NG] = %s;' % c_arr(PB))
    p('GOLDEN_EW_UNUSED static const double golden_ew_pe[GOLDEN_EW_NG] = %s;' % c_arr(PE))
    p('')
    p('/* name: the op (and variant); dtype: the input dtype (kiln_dtype);')
    p(' * out_dtype: PyTorch\'s result dtype; want: the result, as double. */')
    p('typedef struct golden_ew_case {')
    p('  const char *name;')
    p('  int dtype, out_dtype;')
    p('  double want[GOLDEN_EW_N];')
    p('} golden_ew_case;')
    p('GOLDEN_EW_UNUSED static const golden_ew_case golden_ew_cases[] = {')
    for name, dt, vals in cases:
        p('  {"%s", %d, %d, %s},' % (name, dt, result_dtype(name, dt), c_arr(vals)))
    p('};')
    p('')
    p('/* Gradients at golden_ew_xg (and _yg; pow: _pb, _pe) with upstream golden_ew_g. */')
    p('typedef struct golden_ew_grad {')
    p('  const char *name;')
    p('  double dx[GOLDEN_EW_NG], dy[GOLDEN_EW_NG];')
    p('} golden_ew_grad;')
    p('GOLDEN_EW_UNUSED static const golden_ew_grad golden_ew_grads[] = {')
    for name, dx, dy in grads:
        p('  {"%s", %s,\n   %s},' % (name, c_arr(dx), c_arr(dy)))
    p('};')
    p('')
    p('#endif')

def result_dtype(name, dt):
    """Runs the op once more on a tiny input to read PyTorch's result dtype."""
    ufns, bfns = unary_fns(), binary_fns()
    ufns.update(INT_UNARY)
    if dt == BOOL:
        a = torch.tensor([True])
    else:
        a = torch.tensor([1], dtype=TD[dt])
    if name in ufns:
        r = ufns[name](a)
    elif name == 'where':
        r = torch.where(torch.tensor([True]), a, a)
    else:
        r = bfns[name](a, a)
    return {torch.float32: F32, torch.float64: F64, torch.int64: I64, torch.bool: BOOL}[r.dtype]

if __name__ == '__main__':
    main()
