#!/usr/bin/python3
"""scripts/golden/dtypes.py: PyTorch 1.13's answers for kiln's ten dtypes,
written to tests/data/dtypes/*.txt for tests/core/test_dtypes.c and
tests/ops/test_dtype_ops.c.

Run from the repository root: /usr/bin/python3 scripts/golden/dtypes.py
(Debian's python3-torch; `make test` only reads the committed files).

  promote.txt  every pair's torch.promote_types
  half.txt     hashes of exhaustive/strided half conversions, as bits
  convert.txt  Tensor.to between every pair of dtypes, bit for bit
  ops.txt      elementwise ops, comparisons and reductions on the new dtypes
  *_2x3.npy    .npy files of the new dtypes, written by numpy

Element values are written as the hex of their raw bits (two's complement
for integers), so the C side rebuilds exactly the tensors PyTorch saw.
"""
import math
import os
import struct

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


def main():
    os.makedirs(OUT, exist_ok=True)
    npy_files()
    for name, fn in (("promote", promote), ("half", half), ("convert", convert), ("ops", ops)):
        with open(os.path.join(OUT, name + ".txt"), "w") as f:
            f.write("# written by scripts/golden/dtypes.py with PyTorch %s\n" % torch.__version__)
            fn(f)


if __name__ == "__main__":
    main()
