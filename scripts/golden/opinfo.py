#!/usr/bin/python3
"""scripts/golden/opinfo.py: kiln's operator coverage measured by PyTorch's
own OpInfo database (torch.testing._internal.common_methods_invocations.op_db).
Run with Debian's PyTorch 1.13:

    /usr/bin/python3 scripts/golden/opinfo.py            # regenerate the data
    /usr/bin/python3 scripts/golden/opinfo.py --report   # coverage from the C test's results

For every OpInfo with float32, int64 or bool samples and no random
behaviour it scripts one small function per sample, `def fn(a0, a1, ...):
return <op>(...)` (tensors become the parameters, every other argument a
literal), and classifies the op:

  excluded  TorchScript 1.13 cannot script it, or it has no usable sample
            (random, complex-only, tensors too big): not counted;
  missing   the graph uses a kind that is neither an op-table op
            (src/ops/ops.def) nor a builtin (src/ir/prims.def);
  kiln      every kind is known: its samples are written.

Outputs (committed, small):

  tests/data/opinfo/manifest.txt   "<family> <op> <status> [kinds]" per op
  tests/data/opinfo/<op>.txt       the samples of each `kiln` op, in the
                                   line format read by tests/ops/test_opinfo.c:

      sample <k> <dtype>
      graph <n_lines>            print(graph) after torch._C._jit_pass_inline
      ...
      in <i> <dt> <rg> <ndim> <shape...> : <values>
      out <k> <dt> <ndim> <shape...> : <values>      (tensor)
      out <k> int|float|bool : <value>               (number)
      grad <i> <dt> <ndim> <shape...> : <values>     d(sum_k out_k * w_k)/d in_i
      end

  The cotangent w_k of output k is w[j] = ((7 j) % 11 + 1) / 4 (exact in
  float32), so the C test rebuilds it without storing it.

An op is covered when all of its samples pass in the C test (eager, the
executor with 1 and with 5 runs, lazy tensors, gradients against PyTorch's
and against float64 finite differences). The test writes
build/opinfo_results.txt ("<op> pass|fail <why>"); --report reads it and
prints `ops covered: P/T` per family and overall.
"""
import math
import os
import re
import sys
import types
import unittest
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, 'tests', 'data', 'opinfo')
RESULTS = os.path.join(ROOT, 'build', 'opinfo_results.txt')

MAX_NUMEL = 250       # elements per sample tensor (the smallest samples are taken first)
MAX_FLOAT_SAMPLES = 2
FAMILIES = ['unary', 'binary', 'reduction', 'scan', 'sort', 'shape', 'indexing', 'factory',
            'matrix', 'nn', 'other']


def load_op_db():
    m = types.ModuleType('expecttest')

    class TestCase(unittest.TestCase):
        pass
    m.TestCase = TestCase
    m.ACCEPT = False
    sys.modules['expecttest'] = m
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


# ---- families ------------------------------------------------------------------------------

SCAN = {'cumsum', 'cumprod', 'cummax', 'cummin', 'logcumsumexp', 'cumulative_trapezoid', 'diff',
        'trapezoid', 'trapz'}
SORT = {'sort', 'argsort', 'topk', 'msort', 'kthvalue', 'unique', 'unique_consecutive',
        'searchsorted', 'bucketize', 'median', 'nanmedian', 'mode'}
REDUCTION_NAMES = {'sum', 'mean', 'prod', 'var', 'std', 'var_mean', 'std_mean', 'norm', 'logsumexp',
                   'amax', 'amin', 'aminmax', 'argmax', 'argmin', 'max', 'min', 'any', 'all',
                   'count_nonzero', 'nansum', 'nanmean', 'sum_to_size', 'dist', 'renorm',
                   'nanquantile', 'quantile', 'histc', 'bincount'}
INDEXING = {'gather', 'scatter', 'scatter_add', 'scatter_reduce', 'index_select', 'index_add',
            'index_copy', 'index_fill', 'index_put', 'index_reduce', 'masked_fill',
            'masked_select', 'masked_scatter', 'take', 'take_along_dim', 'nonzero', 'put',
            '__getitem__', 'where', 'argwhere', 'select_scatter', 'slice_scatter',
            'diagonal_scatter', 'as_strided_scatter', 'index'}
FACTORY = {'zeros', 'ones', 'full', 'empty', 'arange', 'linspace', 'logspace', 'eye', 'zeros_like',
           'ones_like', 'full_like', 'empty_like', 'new_zeros', 'new_ones', 'new_full',
           'new_empty', 'rand_like', 'randn_like', 'randint_like', 'tril_indices',
           'triu_indices', 'empty_strided', 'new_empty_strided'}
MATRIX = {'mm', 'bmm', 'addmm', 'baddbmm', 'addbmm', 'addmv', 'addr', 'mv', 'dot', 'vdot', 'outer',
          'ger', 'einsum', 'tensordot', 'kron', 'matmul', 'inner', 'chain_matmul',
          'linalg.multi_dot', 'linalg.vecdot', 'linalg.matmul', 'cross', 'linalg.cross'}


def family(op):
    name = op.name
    cls = type(op).__name__
    if name.startswith('nn.functional.') or name.startswith('_native') or name in (
            'softmax', 'log_softmax', '_softmax_backward_data', 'nn.functional.softmax'):
        return 'nn'
    if name in SCAN:
        return 'scan'
    if name in SORT:
        return 'sort'
    if name in MATRIX:
        return 'matrix'
    if name in FACTORY:
        return 'factory'
    if name in INDEXING:
        return 'indexing'
    if cls == 'ReductionOpInfo' or name in REDUCTION_NAMES:
        return 'reduction'
    if cls == 'UnaryUfuncInfo':
        return 'unary'
    if cls == 'BinaryUfuncInfo':
        return 'binary'
    if (name.startswith('linalg.') or name.startswith('fft.') or name.startswith('special.')
            or cls == 'SpectralFuncInfo'):
        return 'other'
    if name in ('clamp', 'clamp_min', 'clamp_max', 'lerp', 'addcmul', 'addcdiv', 'nan_to_num',
                'polygamma', 'mvlgamma', 'isclose', 'heaviside', 'positive', 'logit', 'frexp',
                'isin', 'float_power', 'ldexp', 'xlogy', 'erfinv', 'sgn', 'clip', 'isnan',
                'isinf', 'isfinite', 'isreal', 'isneginf', 'isposinf', 'signbit', 'round',
                'fill', 'zero_', 'allclose', 'equal'):
        return 'unary' if name in ('nan_to_num', 'polygamma', 'mvlgamma', 'positive', 'logit',
                                   'frexp', 'erfinv', 'sgn', 'isnan', 'isinf', 'isfinite',
                                   'isreal', 'isneginf', 'isposinf', 'signbit', 'round',
                                   'fill', 'zero_') else 'binary'
    if name in ('linalg.det', 'det', 'logdet', 'slogdet', 'inverse', 'pinverse', 'cholesky',
                'cholesky_inverse', 'cholesky_solve', 'lu', 'lu_solve', 'lu_unpack', 'qr',
                'svd', 'symeig', 'triangular_solve', 'geqrf', 'ormqr', 'matrix_exp', 'trace',
                'pca_lowrank', 'svd_lowrank', 'cov', 'corrcoef', 'cdist', 'pdist', 'lobpcg',
                'linalg.householder_product', 'stft', 'istft', 'histogram', 'histogramdd'):
        return 'other'
    return 'shape'


# ---- scripting one sample ------------------------------------------------------------------

class Unsupported(Exception):
    pass


def call_expr(op):
    """A TorchScript expression for op's function (or method) variant."""
    import torch
    fn = op.op
    if op.name.startswith('nn.functional.'):
        short = op.name[len('nn.functional.'):]
        if getattr(torch.nn.functional, short, None) is fn:
            return 'torch.nn.functional.' + short, False
    for mod, prefix in ((torch, 'torch.'), (torch.nn.functional, 'torch.nn.functional.'),
                        (torch.linalg, 'torch.linalg.'), (torch.special, 'torch.special.'),
                        (torch.fft, 'torch.fft.')):
        short = op.name.split('.')[-1]
        if getattr(mod, short, None) is fn:
            return prefix + short, False
        nm = getattr(fn, '__name__', None)
        if nm and getattr(mod, nm, None) is fn:
            return prefix + nm, False
    if op.method_variant is not None:
        return getattr(op.method_variant, '__name__', op.name), True
    raise Unsupported('no scriptable variant')


def literal(v, tensors):
    import torch
    if isinstance(v, torch.Tensor):
        tensors.append(v)
        return 'a%d' % (len(tensors) - 1)
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('inf')" if v > 0 else "float('-inf')"
        return repr(v)
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, torch.dtype):
        return str(v)
    if isinstance(v, torch.Size):
        return repr(list(v))
    if isinstance(v, list):
        return '[' + ', '.join(literal(e, tensors) for e in v) + ']'
    if isinstance(v, tuple):
        return '(' + ''.join(literal(e, tensors) + ', ' for e in v) + ')'
    if isinstance(v, torch.device):
        return "torch.device('cpu')"
    if isinstance(v, torch.memory_format):
        return 'torch.' + str(v).split('.')[-1]
    raise Unsupported('argument of type %s' % type(v).__name__)


def source_of(op, sample):
    expr, method = call_expr(op)
    tensors = []
    first = literal(sample.input, tensors)
    rest = [literal(a, tensors) for a in sample.args]
    rest += ['%s=%s' % (k, literal(v, tensors)) for k, v in sample.kwargs.items()]
    if method:
        call = '%s.%s(%s)' % (first, expr, ', '.join(rest))
    else:
        call = '%s(%s)' % (expr, ', '.join([first] + rest))
    params = ', '.join('a%d: torch.Tensor' % i for i in range(len(tensors)))
    return 'def fn(%s):\n    return %s\n' % (params, call), tensors


def flatten(v, out):
    if isinstance(v, (tuple, list)):
        for e in v:
            flatten(e, out)
    else:
        out.append(v)
    return out


def cotangent(t):
    import torch
    n = t.numel()
    w = torch.tensor([((7 * j) % 11 + 1) / 4.0 for j in range(n)], dtype=t.dtype)
    return w.reshape(t.shape)


DT = None


def dt_name(t):
    import torch
    return {torch.float32: 'f32', torch.float64: 'f64', torch.int64: 'i64', torch.bool: 'b'}.get(t.dtype)


def fmt_vals(t):
    import torch
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        return ' '.join('1' if x else '0' for x in t.tolist())
    if t.dtype == torch.int64:
        return ' '.join(str(x) for x in t.tolist())
    return ' '.join('%.9g' % x if x == x else 'nan' for x in t.tolist())


def tensor_line(kind, idx, t, rg=None):
    head = '%s %d %s' % (kind, idx, dt_name(t))
    if rg is not None:
        head += ' %d' % int(rg)
    return '%s %d%s : %s' % (head, t.dim(), ''.join(' %d' % s for s in t.shape), fmt_vals(t))


def same(a, b):
    import torch
    a, b = flatten(a, []), flatten(b, [])
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if not torch.equal(x, y) and not torch.allclose(x.double(), y.double(), rtol=1e-5,
                                                            atol=1e-6, equal_nan=True):
                return False
        elif x != y and not (isinstance(x, float) and math.isnan(x) and math.isnan(y)):
            return False
    return True


def kinds_of(text):
    return set(re.findall(r' = ([a-z]+::[\w.]+?)(?:_\d+)?[\[(]', text))


def known_kinds():
    names = set()
    with open(os.path.join(ROOT, 'src', 'ops', 'ops.def')) as f:
        for line in f:
            m = re.match(r'\s*(?:OP|EW)\(\w+, \w+, "([\w:]+)"', line)
            if m:
                names.add(m.group(1))
                if 'OPF_HAS_INPLACE' in line:  # its derived in-place form (Note [In-place variants])
                    names.add(m.group(1) + '_')
    with open(os.path.join(ROOT, 'src', 'ir', 'prims.def')) as f:
        for line in f:
            m = re.match(r'\s*PRIM\(\w+, "([\w:.]+)"', line)
            if m:
                names.add(m.group(1))
    return names


def small(tensors):
    import torch
    for t in tensors:
        if t.numel() > MAX_NUMEL or dt_name(t) is None or t.is_sparse or t.is_complex():
            return False
        if t.layout != torch.strided:
            return False
    return True


def script_sample(op, sample):
    """(graph text, tensors, outputs) of one sample, or raises Unsupported."""
    import torch
    src, tensors = source_of(op, sample)
    if not small(tensors):
        raise Unsupported('tensors too big or of another dtype')
    try:
        cu = torch.jit.CompilationUnit(src)
    except Exception as e:  # noqa: BLE001 - anything TorchScript rejects
        raise Unsupported('not scriptable: %s' % str(e).strip().split('\n')[0][:80])
    graph = cu.fn.graph
    torch._C._jit_pass_inline(graph)
    text = str(graph)
    det = [t.detach().clone() for t in tensors]
    try:
        with torch.no_grad():
            outs = cu.fn(*det)
            again = cu.fn(*[t.clone() for t in det])
    except Exception as e:  # noqa: BLE001
        raise Unsupported('scripted call fails: %s' % str(e).strip().split('\n')[0][:80])
    if not same(outs, again):
        raise Unsupported('random')
    # in-place ops write their inputs: the scripted call ran on copies
    return src, text, cu, tensors, outs


def out_lines(outs):
    import torch
    lines = []
    for k, o in enumerate(flatten(outs, [])):
        if isinstance(o, torch.Tensor):
            if dt_name(o) is None or o.numel() > 4 * MAX_NUMEL:
                raise Unsupported('output dtype %s' % o.dtype)
            lines.append(tensor_line('out', k, o))
        elif isinstance(o, bool):
            lines.append('out %d bool : %d' % (k, int(o)))
        elif isinstance(o, int):
            lines.append('out %d int : %d' % (k, o))
        elif isinstance(o, float):
            lines.append('out %d float : %.17g' % (k, o))
        else:
            raise Unsupported('output of type %s' % type(o).__name__)
    return lines


def grad_lines(cu, tensors):
    import torch
    ins = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in tensors]
    outs = flatten(cu.fn(*ins), [])
    roots = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    wants = [t for t in ins if t.requires_grad]
    if not roots or not wants:
        return [], [False] * len(ins)
    gs = torch.autograd.grad(roots, wants, [cotangent(o) for o in roots], allow_unused=True)
    lines, gi = [], 0
    rg = []
    for i, t in enumerate(ins):
        rg.append(t.requires_grad)
        if t.requires_grad:
            g = gs[gi]
            gi += 1
            lines.append(tensor_line('grad', i, g if g is not None else torch.zeros_like(t)))
    return lines, rg


def samples_for(op, dtype, requires_grad):
    import torch
    try:
        return list(op.sample_inputs('cpu', dtype, requires_grad=requires_grad))
    except Exception:  # noqa: BLE001 - a sample generator that fails for this dtype
        return []


def sample_size(s):
    tensors = []
    try:
        literal(s.input, tensors)
        for a in list(s.args) + list(s.kwargs.values()):
            literal(a, tensors)
    except Unsupported:
        return (2, 0)
    # non-empty samples first (their values test something), smallest first
    return (int(any(t.numel() == 0 for t in tensors)), sum(t.numel() for t in tensors))


def op_name(op):
    return op.name + ('.' + op.variant_test_name if op.variant_test_name else '')


def process(op, known):
    """(status, detail, sample texts)."""
    import torch
    dts = op.dtypes
    plan = []
    if torch.float32 in dts:
        plan.append((torch.float32, MAX_FLOAT_SAMPLES))
    if torch.int64 in dts:
        plan.append((torch.int64, 1))
    if torch.bool in dts:
        plan.append((torch.bool, 1))
    if not plan:
        return 'excluded', 'no float32/int64/bool', []
    if op.name in ('uniform', 'normal', 'bernoulli', 'multinomial', 'empty', 'empty_like',
                   'new_empty', 'new_empty_strided', 'empty_strided') or 'rand' in op.name or \
            'dropout' in op.name:
        return 'excluded', 'random or uninitialised', []
    texts, reasons, kinds = [], [], set()
    k = 0
    for dtype, want in plan:
        got = 0
        rg = dtype == torch.float32 and op.supports_autograd
        for s in sorted(samples_for(op, dtype, rg), key=sample_size):
            if type(op).__name__ == 'UnaryUfuncInfo' and isinstance(s.input, torch.Tensor) \
                    and s.input.numel() > 60:
                # elementwise: any 60 of its values are as good a sample
                s.input = s.input.detach().reshape(-1)[:60].reshape(3, 20).clone() \
                    .requires_grad_(s.input.requires_grad)
            if got >= want:
                break
            try:
                src, text, cu, tensors, outs = script_sample(op, s)
                lines = out_lines(outs)
                glines, rgs = grad_lines(cu, tensors) if rg else ([], [False] * len(tensors))
            except Unsupported as e:
                reasons.append(str(e))
                continue
            except Exception as e:  # noqa: BLE001
                reasons.append('error: %s' % str(e).strip().split('\n')[0][:80])
                continue
            kinds |= kinds_of(text)
            body = ['sample %d %s' % (k, dt_name(torch.empty(0, dtype=dtype)))]
            body.append('# ' + src.strip().split('\n')[-1].strip())
            glines_text = text.rstrip('\n').split('\n')
            body.append('graph %d' % len(glines_text))
            body += glines_text
            body += [tensor_line('in', i, t, rgs[i]) for i, t in enumerate(tensors)]
            body += lines + glines
            body.append('end')
            texts.append('\n'.join(body) + '\n')
            got += 1
            k += 1
    if not texts:
        why = sorted(set(reasons))[0] if reasons else 'no samples'
        return 'excluded', why, []
    miss = sorted(kinds - known)
    if miss:
        return 'missing', ' '.join(miss), []
    return 'kiln', '', texts


def generate():
    warnings.filterwarnings('ignore')
    import torch
    torch.manual_seed(0)
    op_db = load_op_db()
    known = known_kinds()
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith('.txt') and f != 'expected_pass.txt':  # the baseline stays
            os.remove(os.path.join(OUT, f))
    manifest = []
    seen = set()
    for op in op_db:
        name = op_name(op)
        if name in seen:
            continue
        seen.add(name)
        torch.manual_seed(sum(map(ord, name)))
        status, detail, texts = process(op, known)
        manifest.append('%s %s %s%s' % (family(op), name, status, ' ' + detail if detail else ''))
        if texts:
            with open(os.path.join(OUT, name + '.txt'), 'w') as f:
                f.write('op %s\nfamily %s\n' % (name, family(op)))
                f.writelines(texts)
    with open(os.path.join(OUT, 'manifest.txt'), 'w') as f:
        f.write('# scripts/golden/opinfo.py: <family> <op> kiln|missing <kinds>|excluded <why>\n')
        f.write('\n'.join(manifest) + '\n')
    counts = {}
    for line in manifest:
        fam, _, st = line.split(' ')[:3]
        c = counts.setdefault(fam, [0, 0, 0])
        c[{'kiln': 0, 'missing': 1, 'excluded': 2}[st]] += 1
    print('%d OpInfos' % len(manifest))
    for fam in FAMILIES:
        if fam in counts:
            c = counts[fam]
            print('  %-10s samples written %3d, missing kinds %3d, excluded %3d' % (fam, *c))
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print('%d bytes in %s' % (total, os.path.relpath(OUT, ROOT)))


def report():
    status = {}
    with open(os.path.join(OUT, 'manifest.txt')) as f:
        for line in f:
            if line.startswith('#'):
                continue
            fam, name, st = line.split()[:3]
            status[name] = (fam, st)
    passed = {}
    if os.path.exists(RESULTS):
        with open(RESULTS) as f:
            for line in f:
                p = line.split()
                if len(p) >= 2:
                    passed[p[0]] = p[1] == 'pass'
    else:
        print('no %s: run `make test FILTER=opinfo` first' % os.path.relpath(RESULTS, ROOT))
    tot_p = tot_t = 0
    for fam in FAMILIES:
        ops = [n for n, (f, st) in status.items() if f == fam and st != 'excluded']
        p = sum(1 for n in ops if passed.get(n))
        if ops:
            print('%-10s ops covered: %d/%d (%.1f%%)' % (fam, p, len(ops), 100.0 * p / len(ops)))
        tot_p += p
        tot_t += len(ops)
    print('%-10s ops covered: %d/%d (%.1f%%)' % ('all', tot_p, tot_t, 100.0 * tot_p / max(tot_t, 1)))


if __name__ == '__main__':
    if '--report' in sys.argv:
        report()
    else:
        generate()
