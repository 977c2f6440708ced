#!/usr/bin/python3
"""scripts/golden/dtypes.py: PyTorch 1.13's answers for kiln's ten dtypes,
written to tests/data/dtypes/*.txt for tests/core/test_dtypes.c and
tests/ops/test_dtype_ops.c.

Run from the repository root: /usr/bin/python3 scripts/golden/dtypes.py
(Debian's python3-torch; `make test` only reads the committed files).
With --rules it prints the NARROW rows of src/ops/ops.def instead (what
each op's results are on the narrow dtypes, probed from PyTorch on the
OpInfo samples kiln passes).

  promote.txt  every pair's torch.promote_types
  half.txt     hashes of exhaustive/strided half conversions, as bits
  convert.txt  Tensor.to between every pair of dtypes, bit for bit
  ops.txt      elementwise ops, comparisons and reductions on the new dtypes
  narrow.txt   ops without a narrow kernel (widened, Note [Widening] in
               src/ops/widen.c) on Half, BFloat16, Char, Byte and Int: their
               results and dtypes, and PyTorch's refusals
  *_2x3.npy    .npy files of the new dtypes, written by numpy

Element values are written as the hex of their raw bits (two's complement
for integers), so the C side rebuilds exactly the tensors PyTorch saw.
"""
import math
import os
import re
import struct
import sys
import warnings

import numpy as np
import torch

OUT = os.path.join("tests", "data", "dtypes")

# in kiln_dtype order
DTYPES = [
    ("Float", torch.float32), ("Double", torch.float64), ("Long", torch.int64),
    ("Bool", torch.bool), ("Int", torch.int32), ("Short", torch.int16),
    ("Char", torch.int8), ("Byte", torch.uint8), ("Half", torch.float16),
    ("BFloat16", torch.bfloat16),
]
NAME = {dt: n for n, dt in DTYPES}
BITS_VIEW = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16,
             torch.bfloat16: torch.int16, torch.bool: torch.uint8}
WIDTH = {torch.float32: 32, torch.float64: 64, torch.int64: 64, torch.bool: 8, torch.int32: 32,
         torch.int16: 16, torch.int8: 8, torch.uint8: 8, torch.float16: 16, torch.bfloat16: 16}


def bits(t):
    """The raw bits of each element of t (flattened), as hex strings."""
    t = t.contiguous().reshape(-1)
    v = t.view(BITS_VIEW[t.dtype]) if t.dtype in BITS_VIEW else t
    w = WIDTH[t.dtype]
    return ["%x" % (int(x) & ((1 << w) - 1)) for x in v.tolist()]


def tensor_tok(t):
    shape = "x".join(str(s) for s in t.shape) if t.dim() else "s"
    return "T:%s:%s:%s" % (NAME[t.dtype], shape, ",".join(bits(t)) or "-")


def fnv(values):
    h = 0xcbf29ce484222325
    for v in values:
        h = ((h ^ v) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def promote(f):
    for a, da in DTYPES:
        for b, db in DTYPES:
            f.write("promote %s %s %s\n" % (a, b, NAME[torch.promote_types(da, db)]))


def half(f):
    all16 = torch.arange(65536, dtype=torch.int32).to(torch.int16)
    for n, dt in (("Half", torch.float16), ("BFloat16", torch.bfloat16)):
        f32 = all16.view(dt).float().view(torch.int32)
        f.write("to_float %s %x\n" % (n, fnv(int(x) & 0xFFFFFFFF for x in f32.tolist())))
    # float32 bit patterns i * 2654435761 mod 2^32: every exponent, NaNs,
    # infinities, subnormals
    N = 1 << 20
    pat = (np.arange(N, dtype=np.uint64) * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
    src = torch.from_numpy(pat.astype(np.uint32).view(np.int32)).view(torch.float32)
    for n, dt in (("Half", torch.float16), ("BFloat16", torch.bfloat16)):
        h = src.to(dt).view(torch.int16)
        if dt == torch.bfloat16:
            # A NaN: PyTorch 1.13's vectorized contiguous .to() gives 0xffff, its
            # scalar path (0-d or strided tensors, c10::BFloat16) 0x7fc0; kiln
            # follows c10's rule, so the hash takes 0x7fc0 for every NaN.
            h = torch.where(src.isnan(), torch.tensor(0x7FC0, dtype=torch.int16), h)
        f.write("from_float %s %d %x\n" % (n, N, fnv(int(x) & 0xFFFF for x in h.tolist())))


FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -2.5, 3.5, 0.1, -7.75, 100.3, 1e-3, 6e-5, 1e-7,
          65504.0, 65520.0, 1e5, -3e38, float("inf"), float("-inf"), float("nan"),
          1.0 + 2.0 ** -11 + 2.0 ** -40, 255.0, 127.9, -128.0, 1.0 / 3.0]
INTS = {torch.int64: [0, 1, -1, 127, 128, -129, 255, 256, 32767, -32769, 2 ** 31, -(2 ** 31) - 1,
                      2 ** 53 + 1, -(2 ** 62), 65519, 2049],
        torch.int32: [0, 1, -1, 127, 128, -129, 255, 256, 32767, -32769, 2 ** 31 - 1, -(2 ** 31),
                      2049, 65536],
        torch.int16: [0, 1, -1, 127, 128, -129, 255, 256, 32767, -32768, 2049],
        torch.int8: [0, 1, -1, 127, -128, 5, -77],
        torch.uint8: [0, 1, 127, 128, 200, 255],
        torch.bool: [False, True]}


def in_range(x, dt):
    """Whether PyTorch's float -> dt conversion is defined (C++ static_cast)."""
    if dt == torch.bool or dt.is_floating_point:
        return True
    if math.isnan(x) or math.isinf(x):
        return False
    info = torch.iinfo(dt)
    return info.min - 1 < x < info.max + 1


def convert(f):
    for sn, sd in DTYPES:
        if sd.is_floating_point:
            src_all = torch.tensor(FLOATS, dtype=torch.float64).to(sd)
        else:
            src_all = torch.tensor(INTS[sd], dtype=sd)
        for dn, dd in DTYPES:
            if sd.is_floating_point and not dd.is_floating_point and dd != torch.bool:
                keep = [i for i, x in enumerate(src_all.double().tolist()) if in_range(x, dd)]
                src = src_all[keep]
            else:
                src = src_all
            out = src.to(dd)
            f.write("convert %s %s\n" % (tensor_tok(src), tensor_tok(out)))


def arg_tok(a):
    if isinstance(a, torch.Tensor):
        return tensor_tok(a)
    if a is None:
        return "N"
    if isinstance(a, bool):
        return "B:%d" % a
    if isinstance(a, int):
        return "I:%d" % a
    if isinstance(a, float):
        return "F:%r" % a
    if isinstance(a, list):
        return "L:" + ",".join(str(x) for x in a)
    raise TypeError(a)


def case(f, aten, fn, *args):
    """One op line. PyTorch 1.13's CPU build has no Half kernel for some
    ops ("clamp_min_cpu" not implemented for 'Half'); the reference is then
    the op on float32 copies, rounded back: what kiln defines a half op to
    be. Such lines say `opf` instead of `op`."""
    tag = "op"
    try:
        out = fn(*args)
    except RuntimeError:
        halves = (torch.float16, torch.bfloat16)
        dt = next(a.dtype for a in args if isinstance(a, torch.Tensor) and a.dtype in halves)
        out = fn(*[a.float() if isinstance(a, torch.Tensor) and a.dtype in halves else a
                   for a in args])
        if out.dtype == torch.float32:
            out = out.to(dt)
        tag = "opf"
    f.write("%s %s %d %s -> %s\n" % (tag, aten, len(args), " ".join(arg_tok(a) for a in args),
                                     tensor_tok(out)))


def ops(f):
    g = torch.Generator().manual_seed(0)
    new = [torch.int32, torch.int16, torch.int8, torch.uint8, torch.float16, torch.bfloat16]

    def sample(dt, n=6, lo=-100, hi=100, nonzero=False, shape=None):
        shape = shape or (n,)
        if dt.is_floating_point:
            x = (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dt)
        else:
            info = torch.iinfo(dt)
            x = torch.randint(max(lo, info.min), min(hi, info.max) + 1, shape, generator=g).to(dt)
        if nonzero:
            x = torch.where(x == 0, torch.ones_like(x), x)
        return x

    for dt in new:
        fl = dt.is_floating_point
        big = 10 ** 6 if not fl else 100
        a, b = sample(dt, lo=-big, hi=big), sample(dt, lo=-big, hi=big)
        case(f, "aten::add", lambda x, y, z: torch.add(x, y, alpha=z), a, b, 1)
        if not fl:
            # (a half type's add with alpha != 1: PyTorch 1.13 rounds alpha * b to
            # the half type before adding; kiln computes a + alpha * b in float32
            # and rounds once, so the two can differ by more than a unit)
            case(f, "aten::add", lambda x, y, z: torch.add(x, y, alpha=z), a, b, 3)
        case(f, "aten::sub", lambda x, y, z: torch.sub(x, y, alpha=z), a, b, 1)
        case(f, "aten::mul", torch.mul, a, b)
        case(f, "aten::mul", torch.mul, a, 3)
        case(f, "aten::add", lambda x, y, z: torch.add(x, y, alpha=z), a, 300, 1)
        case(f, "aten::div", torch.div, a, sample(dt, nonzero=True))
        case(f, "aten::maximum", torch.maximum, a, b)
        case(f, "aten::minimum", torch.minimum, a, b)
        for op in ("eq", "ne", "lt", "le", "gt", "ge"):
            case(f, "aten::" + op, getattr(torch, op), a, b)
            case(f, "aten::" + op, getattr(torch, op), a, a.flip(0))
        case(f, "aten::lt", torch.lt, a, 7)
        case(f, "aten::neg", torch.neg, a)
        if dt != torch.uint8:
            case(f, "aten::abs", torch.abs, a)
        case(f, "aten::relu", torch.relu, a)
        case(f, "aten::sign", torch.sign, a)
        case(f, "aten::clamp", torch.clamp, a, -5, 50)
        for op in ("sin", "exp", "tanh", "sigmoid"):
            case(f, "aten::" + op, getattr(torch, op), sample(dt, lo=-5, hi=5))
        case(f, "aten::sqrt", torch.sqrt, sample(dt, lo=0, hi=100))
        case(f, "aten::where", torch.where, a > b, a, b)
        if not fl:
            for op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
                case(f, "aten::" + op, getattr(torch, op), a, b)
            case(f, "aten::bitwise_not", torch.bitwise_not, a)
            d = sample(dt, lo=-9, hi=9, nonzero=True)
            case(f, "aten::floor_divide", torch.floor_divide, a, d)
            case(f, "aten::remainder", torch.remainder, a, d)
            case(f, "aten::pow", torch.pow, sample(dt, lo=0, hi=20), sample(dt, lo=0, hi=5))
        # mixed dtypes: promotion (uint8 + int8 = int16; ints + half = half)
        for other in (torch.int8, torch.uint8, torch.int64, torch.float32, torch.float16,
                      torch.bfloat16, torch.bool):
            o = sample(other, lo=-100, hi=100) if other != torch.bool else a > 0
            case(f, "aten::add", lambda x, y, z: torch.add(x, y, alpha=z), a, o, 1)
            case(f, "aten::mul", torch.mul, a, o)
        case(f, "aten::mul", torch.mul, a, 0.1)
        case(f, "aten::add", lambda x, y, z: torch.add(x, y, alpha=z), a,
             torch.tensor(2.5, dtype=torch.float64), 1)
        # reductions
        m = sample(dt, lo=-100, hi=100, shape=(3, 5))
        case(f, "aten::sum", lambda x, d: torch.sum(x, dtype=d), m, None)
        case(f, "aten::sum", lambda x, d, k, t: torch.sum(x, d, k, dtype=t), m, [1], False, None)
        case(f, "aten::sum", lambda x, d, k, t: torch.sum(x, d, k, dtype=t), m, [0], True, None)
        if fl:
            case(f, "aten::mean", lambda x, d: torch.mean(x, dtype=d), m, None)
            case(f, "aten::mean", lambda x, d, k, t: torch.mean(x, d, k, dtype=t), m, [1], False,
                 None)
            long = sample(dt, n=3000, lo=0, hi=10)
            case(f, "aten::sum", lambda x, d: torch.sum(x, dtype=d), long, None)


def npy_files():
    """.npy files of the new dtypes, written by numpy itself: element i (C
    order) of shape (2, 3) is (i * 37 - 90) in the integer types (wrapped),
    i * 0.375 - 1 in float16."""
    i = np.arange(6).reshape(2, 3)
    for name, dt in (("i4", np.int32), ("i2", np.int16), ("i1", np.int8), ("u1", np.uint8)):
        np.save(os.path.join(OUT, name + "_2x3.npy"), (i * 37 - 90).astype(np.int64).astype(dt))
    np.save(os.path.join(OUT, "f2_2x3.npy"), (i * 0.375 - 1).astype(np.float16))


# ---- ops without a narrow kernel, widened (Note [Widening] in src/ops/widen.c) ----------

def out_toks(r):
    rs = list(r) if isinstance(r, (tuple, list)) else [r]
    return "%d %s" % (len(rs), " ".join(tensor_tok(t) for t in rs))


def args_toks(args):
    toks = []
    for a in args:
        if isinstance(a, tuple):  # a Tensor[] argument
            toks.append("TL:%d" % len(a))
            toks.extend(tensor_tok(t) for t in a)
        else:
            toks.append(arg_tok(a))
    return " ".join(toks)


def float_reference(fn, args, dt):
    """fn on float32 copies of the half-type tensors, float32 results rounded back to dt."""
    halves = (torch.float16, torch.bfloat16)
    up = lambda a: a.float() if isinstance(a, torch.Tensor) and a.dtype in halves else a
    out = fn(*[tuple(up(t) for t in a) if isinstance(a, tuple) else up(a) for a in args])
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o.to(dt) if o.dtype == torch.float32 else o for o in outs]


def within_ulps(a, b, ulps):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if not a.dtype.is_floating_point:
        return bool(torch.equal(a, b))
    x, y = a.double(), b.double()
    eps = 2.0 ** -10 if a.dtype == torch.float16 else 2.0 ** -7
    scale = float(y.abs().max()) if y.numel() else 0.0
    return bool(((x - y).abs() <= ulps * eps * (y.abs() + scale / 16)).all())


def narrow_case(f, aten, fn, *args):
    """One line of narrow.txt: `op` with PyTorch's results (their dtypes
    included); `opf` for a half type where PyTorch 1.13's CPU build has no
    kernel for it, or its kernel rounds in between (bfloat16 bmm sums in
    bfloat16) and so lands more than a unit away from the float32 op: the
    reference is then the op on float32 copies with every float32 result
    rounded back, what kiln defines a half op to be (Note [Widening]);
    `err` where PyTorch refuses the dtype (an integer one): kiln must
    refuse too."""
    halves = (torch.float16, torch.bfloat16)
    flat = [x for a in args for x in (a if isinstance(a, tuple) else (a,))]
    dt = next(a.dtype for a in flat if isinstance(a, torch.Tensor))
    head = "%s %d %s" % (aten, len(args), args_toks(args))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(*args)
    except (RuntimeError, TypeError) as e:
        if dt not in halves:
            f.write("err %s # %s\n" % (head, str(e).split("\n")[0]))
            return
        f.write("opf %s -> %s # PyTorch: %s\n" % (head, out_toks(float_reference(fn, args, dt)),
                                                    str(e).split("\n")[0]))
        return
    if dt in halves:
        ref = float_reference(fn, args, dt)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if not all(within_ulps(o, r, 1) for o, r in zip(outs, ref)):
            f.write("opf %s -> %s # PyTorch's own %s kernel differs by more than a unit\n"
                    % (head, out_toks(ref), NAME[dt]))
            return
    f.write("op %s -> %s\n" % (head, out_toks(out)))


def narrow(f):
    g = torch.Generator().manual_seed(16)

    def x(dt, *shape, lo=-4.0, hi=4.0):
        if dt.is_floating_point:
            return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dt)
        info = torch.iinfo(dt)
        return torch.randint(max(int(lo * 30), info.min), min(int(hi * 30), info.max) + 1, shape,
                             generator=g).to(dt)

    def distinct(dt, *shape):
        """values with no ties, even after rounding to dt (sort's indices)"""
        n = 1
        for s_ in shape:
            n *= s_
        v = torch.randperm(n, generator=g).to(torch.float64) - n // 2
        if dt.is_floating_point:
            v = v * 0.25
        elif dt == torch.uint8:
            v = v + n // 2
        return v.reshape(shape).to(dt)

    for dt in (torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32):
        fl = dt.is_floating_point
        a, b = x(dt, 3, 4), x(dt, 4, 2)
        narrow_case(f, "aten::mm", torch.mm, a, b)
        narrow_case(f, "aten::bmm", torch.bmm, x(dt, 2, 3, 4), x(dt, 2, 4, 2))
        narrow_case(f, "aten::matmul", torch.matmul, x(dt, 2, 3, 4), x(dt, 4))
        narrow_case(f, "aten::linear", torch.nn.functional.linear, x(dt, 2, 4), x(dt, 3, 4),
                    x(dt, 3))
        if fl:  # (PyTorch 1.13 convolves integers too; kiln's conv2d refuses them)
            narrow_case(f, "aten::conv2d",
                        lambda i, w, bb, st, pd, dl, gr: torch.conv2d(i, w, bb, st, pd, dl, gr),
                        x(dt, 1, 2, 5, 5), x(dt, 3, 2, 3, 3), x(dt, 3), [1, 1], [1, 1], [1, 1], 1)
        narrow_case(f, "aten::max_pool2d",
                    lambda i, k, st, pd, dl, c: torch.nn.functional.max_pool2d(i, k, st, pd, dl, c),
                    distinct(dt, 1, 2, 4, 4), [2, 2], [2, 2], [0, 0], [1, 1], False)
        narrow_case(f, "aten::avg_pool2d",
                    lambda i, k, st, pd, c, ci, dv: torch._C._nn.avg_pool2d(i, k, st, pd, c, ci, dv),
                    x(dt, 1, 2, 4, 4), [2, 2], [2, 2], [0, 0], False, True, None)
        narrow_case(f, "aten::softmax", lambda i, d, t: torch.softmax(i, d, dtype=t), x(dt, 2, 5),
                    1, None)
        narrow_case(f, "aten::log_softmax", lambda i, d, t: torch.log_softmax(i, d, dtype=t),
                    x(dt, 2, 5), 1, None)
        narrow_case(f, "aten::layer_norm",
                    lambda i, s_, w, bb, e, c: torch.layer_norm(i, s_, w, bb, e, c),
                    x(dt, 2, 6), [6], x(dt, 6), x(dt, 6), 1e-5, True)
        narrow_case(f, "aten::cumsum", lambda i, d, t: torch.cumsum(i, d, dtype=t), x(dt, 2, 5), 1,
                    None)
        narrow_case(f, "aten::argmax", torch.argmax, distinct(dt, 3, 4), 1, False)
        narrow_case(f, "aten::sort", torch.sort, distinct(dt, 2, 6), -1, False)
        narrow_case(f, "aten::topk", torch.topk, distinct(dt, 2, 6), 3, -1, True, True)
        narrow_case(f, "aten::max", torch.max, distinct(dt, 3, 4), 1, False)
        narrow_case(f, "aten::amax", torch.amax, x(dt, 3, 4), [1], False)
        narrow_case(f, "aten::prod", lambda i, t: torch.prod(i, dtype=t), x(dt, 2, 3, lo=-2, hi=2),
                    None)
        narrow_case(f, "aten::cat", torch.cat, (x(dt, 2, 3), x(dt, 1, 3)), 0)
        narrow_case(f, "aten::stack", torch.stack, (x(dt, 2, 3), x(dt, 2, 3)), 1)
        idx = torch.tensor([[0, 3], [2, 2], [1, 0]])
        narrow_case(f, "aten::gather", lambda i, d, ix, sg: torch.gather(i, d, ix, sparse_grad=sg),
                    x(dt, 3, 4), 1, idx, False)
        narrow_case(f, "aten::index_select", torch.index_select, x(dt, 3, 4), 0,
                    torch.tensor([2, 0]))
        narrow_case(f, "aten::embedding", torch.embedding, x(dt, 5, 3), torch.tensor([4, 0, 2, 2]),
                    -1, False, False)
        narrow_case(f, "aten::var", lambda i, d, u, k: torch.var(i, d, u, k), x(dt, 3, 4), [1],
                    True, False)
        narrow_case(f, "aten::mean", lambda i, d, k, t: torch.mean(i, d, k, dtype=t), x(dt, 3, 4),
                    [1], False, None)


# ---- the NARROW rows of src/ops/ops.def (Note [Widening] in src/ops/widen.c) ----------

OPINFO = os.path.join("tests", "data", "opinfo")
NATIVE_FLAGS = ("OPF_ELEMENTWISE", "OPF_VIEW", "OPF_EXT_DTYPES", "OPF_INPLACE")
NARROW_INTS = [torch.int32, torch.int16, torch.int8, torch.uint8]
TORCH_OF = {"f32": torch.float32, "i64": torch.int64, "b": torch.bool}


def table_rows():
    """(ENUM, aten name, native, decomposes into views) per op-table row, in table order."""
    rows = []
    with open(os.path.join("src", "ops", "ops.def")) as f:
        for line in f:
            m = re.match(r'\s*(OP|EW)\((\w+), (\w+), "([\w:]+)", \d+, \d+, ([^,]+),', line)
            if m:
                native = m.group(1) == "EW" or any(x in m.group(5) for x in NATIVE_FLAGS)
                ret = line.split(") -> ", 1)[1] if ") -> " in line else ""
                views = "OPF_DECOMPOSES" in m.group(5) and re.match(r'\(?Tensor\(a( -> \*)?\)', ret)
                rows.append((m.group(3), m.group(4), native, bool(views)))
    return rows


def opinfo_samples(name):
    """(dtype tag, expression, aten kinds, [input tensors]) per sample of an op file."""
    out, cur = [], None
    with open(os.path.join(OPINFO, name + ".txt")) as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        l = lines[i]
        if l.startswith("sample "):
            cur = {"dt": l.split()[2], "expr": [], "kinds": set(), "ins": {}}
        elif l.startswith("# ") and cur is not None:
            cur["expr"].append(l[2:])
        elif l.startswith("graph ") and cur is not None:
            n = int(l.split()[1])
            text = "\n".join(lines[i + 1:i + 1 + n])
            cur["kinds"] = set(re.findall(r' = ([a-z]+::[\w.]+?)(?:_\d+)?[\[(]', text))
            i += n
        elif l.startswith("in ") and cur is not None:
            head, vals = l.split(" : ") if " : " in l else (l, "")
            f_ = head.split()
            k, dt, nd = int(f_[1]), f_[2], int(f_[4])
            shape = [int(x) for x in f_[5:5 + nd]]
            v = [float(x) for x in vals.split()] if dt == "f32" else [int(x) for x in vals.split()]
            cur["ins"][k] = torch.tensor(v, dtype=TORCH_OF[dt]).reshape(shape)
        elif l == "end" and cur is not None:
            out.append(cur)
            cur = None
        i += 1
    return out


def run_expr(expr, ins):
    n = max(ins) + 1 if ins else 0
    params = ", ".join("a%d" % k for k in range(n))
    src = "def fn(%s):\n%s\n" % (params, "\n".join("    " + e for e in expr))
    ns = {"torch": torch, "inf": math.inf, "nan": math.nan}
    exec(src, ns)
    return ns["fn"](*[ins[k] for k in range(n)])


def first_tensor(r):
    if isinstance(r, torch.Tensor):
        return r
    if isinstance(r, (tuple, list)) and r and isinstance(r[0], torch.Tensor):
        return r[0]
    return None


def int_probe(s):
    """PyTorch on the sample's int64 (or float32, rounded) inputs cast to
    each narrow integer dtype (all of them, else only a0): None when some
    dtype fails, else whether the first result stays int64."""
    stays_long = set()
    src = torch.float32 if s["dt"] == "f32" else torch.int64
    for dt in NARROW_INTS:
        done = False
        # every input; for int64 ones also only a0, or all but one (an
        # index: index_add(a0, 0, a1, a2)); at least one input cast
        variants = ["all"] + (["a0"] + list(s["ins"]) if src == torch.int64 else [])
        for which in variants:
            cast = {k for k, t in s["ins"].items() if t.dtype == src and
                    (which == "all" or (which == "a0" and k == 0) or
                     (isinstance(which, int) and k != which))}
            if not cast:
                continue
            ins = {k: (t.round().to(dt) if k in cast else t) for k, t in s["ins"].items()}
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = first_tensor(run_expr(s["expr"], ins))
            except Exception:
                continue
            if r is None:
                continue
            stays_long.add(r.dtype == torch.int64)
            done = True
            break
        if not done:
            return None
    return len(stays_long) == 1 and True in stays_long


HAND_SAMPLES = [
    ("aten::bmm", "torch.bmm(a0, a1)", {0: torch.ones(2, 3, 4, dtype=torch.int64),
                                         1: torch.ones(2, 4, 2, dtype=torch.int64)}),
    ("aten::embedding", "torch.embedding(a0, a1)",
     {0: torch.ones(5, 3, dtype=torch.int64), 1: torch.tensor([4, 0, 2])}),
]


def rules():
    """Prints the NARROW rows: NW_SAME for a composite op that returns a view
    of its input (its decomposition is views, which take every dtype);
    NW_HALF for every other non-native op that has no
    OpInfo sample or a float32 one (half types compute in float32, Note
    [Widening]); NW_INT / NW_INT_LONG where every int64 OpInfo sample kiln
    passes (for an op without one, every float32 sample, rounded) runs in
    PyTorch on int32, int16, int8 and uint8 too, by whether PyTorch's first
    result stays int64. Samples giving an explicit dtype= are left out
    (softmax(x, dtype=float64) takes an integer x; softmax(x) does not)."""
    rows = table_rows()
    with open(os.path.join(OPINFO, "expected_pass.txt")) as f:
        passing = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    f32, i64, f32_int = {}, {}, {}
    aten_rows = {}
    for enum, aten, native, views in rows:
        if not native:
            aten_rows.setdefault(aten, []).append(enum)
    for name in passing:
        for s in opinfo_samples(name):
            ks = [k for k in s["kinds"] if k in aten_rows]
            if len(ks) != 1:
                continue
            k = ks[0]
            explicit = any("dtype=" in e for e in s["expr"])  # softmax(x, dtype=...)
            if s["dt"] == "f32":
                f32[k] = True
                if not explicit:
                    f32_int.setdefault(k, []).append(int_probe(s))
            elif s["dt"] == "i64" and not explicit:
                i64.setdefault(k, []).append(int_probe(s))
    # ops without OpInfo samples in kiln's data: a hand-written sample each
    for aten, expr, ins in HAND_SAMPLES:
        s = {"dt": "i64", "expr": ["return " + expr], "ins": ins}
        f32[aten] = True
        i64.setdefault(aten, []).append(int_probe(s))
    seen_any = set(f32) | set(i64)
    for enum, aten, native, views in rows:
        if native:
            continue
        if views:
            print("NARROW(%s, NW_SAME)" % enum)
            continue
        r = []
        if aten in f32 or aten not in seen_any:
            r.append("NW_HALF")
        probes = i64.get(aten) or f32_int.get(aten)
        if probes and all(p is not None for p in probes):
            r.append("NW_INT_LONG" if all(probes) else "NW_INT" if not any(probes) else None)
            r = [x for x in r if x]
        if r:
            print("NARROW(%s, %s)" % (enum, " | ".join(r)))


def main():
    if "--rules" in sys.argv:
        rules()
        return
    os.makedirs(OUT, exist_ok=True)
    npy_files()
    for name, fn in (("promote", promote), ("half", half), ("convert", convert), ("ops", ops),
                     ("narrow", narrow)):
        with open(os.path.join(OUT, name + ".txt"), "w") as f:
            f.write("# written by scripts/golden/dtypes.py with PyTorch %s\n" % torch.__version__)
            fn(f)


if __name__ == "__main__":
    main()
