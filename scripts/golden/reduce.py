#!/usr/bin/env python3
"""Writes tests/ops/golden_reduce.h: PyTorch 1.13 reference values for the
reduction, softmax and loss ops (src/ops/reduce.c, softmax.c, loss.c).

Run from the repository root:  /usr/bin/python3 scripts/golden/reduce.py
The header is committed, so `make test` does not need torch."""
import torch

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
out = []


def arr(name, vals):
    vals = [float(v) for v in vals]
    body = ", ".join(repr(v) if v == v else "NAN" for v in vals)
    out.append(f"static const double {name}[{max(len(vals), 1)}] GOLDEN_UNUSED = {{{body}}};")


def ints(v, n=4):
    v = list(v) + [0] * (n - len(v))
    return "{" + ", ".join(str(int(i)) for i in v) + "}"


def rand_ties(shape):
    # small integers so that ties occur (amax / max.dim tie rules)
    return torch.randint(-3, 4, shape).double()


# ---- reductions --------------------------------------------------------------
OPS = {"sum": 0, "mean": 1, "amax": 2, "amin": 3, "var": 4, "max_values": 5, "max_indices": 6}
cases = [
    ("sum", (2, 3, 4), False, [1], False),
    ("sum", (2, 3, 4), False, [0, 2], True),
    ("sum", (2, 3, 4), True, [-1], False),
    ("sum", (3, 5), True, [], False),
    ("mean", (2, 3, 4), False, [0, 1], False),
    ("mean", (4, 5), True, [0], True),
    ("amax", (3, 4), False, [1], False),
    ("amax", (2, 3, 4), True, [0, 2], True),
    ("amin", (2, 3, 4), False, [], False),
    ("amin", (3, 4), True, [0], False),
    ("var", (2, 3, 4), False, [1], False),
    ("var", (3, 5), True, [0], True),
    ("var", (2, 3, 4), False, [], False),
    ("max_values", (3, 4), False, [1], False),
    ("max_values", (2, 3, 4), True, [1], True),
    ("max_indices", (3, 4), False, [1], False),
    ("max_indices", (2, 3, 4), True, [0], False),
    ("max_indices", (2, 3, 4), False, [2], True),
]
rows = []
for i, (op, shape, tr, dims, keep) in enumerate(cases):
    x = rand_ties(shape) if op in ("amax", "amin", "max_values", "max_indices") else torch.randn(shape)
    xt = x.transpose(0, -1) if tr else x
    if op == "sum":
        y = xt.sum(dims, keepdim=keep) if dims else xt.sum()
    elif op == "mean":
        y = xt.mean(dims, keepdim=keep)
    elif op == "amax":
        y = xt.amax(dims, keepdim=keep)
    elif op == "amin":
        y = xt.amin(dims, keepdim=keep)
    elif op == "var":
        y = xt.var(dims, keepdim=keep) if dims else xt.var()
    elif op == "max_values":
        y = xt.max(dims[0], keepdim=keep).values
    else:
        y = xt.max(dims[0], keepdim=keep).indices
    arr(f"gr_x{i}", x.flatten().tolist())
    arr(f"gr_y{i}", y.flatten().tolist())
    name = f"{op} {list(shape)}{' T' if tr else ''} dims={dims} keepdim={keep}"
    rows.append(f'  {{"{name}", {OPS[op]}, {len(shape)}, {ints(shape)}, {int(tr)}, {len(dims)}, '
                f'{ints(dims)}, {int(keep)}, gr_x{i}, {y.dim()}, {ints(y.shape)}, {y.numel()}, gr_y{i}}},')

# ---- softmax / log_softmax ----------------------------------------------------
sm_rows = []
sm_cases = [((3, 4), 1, False, False), ((3, 4), 0, False, True), ((2, 3, 4), 1, True, False),
            ((2, 3, 4), -1, True, True), ((5,), 0, False, False)]
for i, (shape, dim, log, tr) in enumerate(sm_cases):
    x = (torch.randn(shape) * 3).requires_grad_()
    xt = x.transpose(0, -1) if tr else x
    y = torch.log_softmax(xt, dim) if log else torch.softmax(xt, dim)
    g = torch.randn(y.shape)
    (gx,) = torch.autograd.grad(y, x, g)
    for nm, t in (("x", x), ("g", g), ("y", y), ("gx", gx)):
        arr(f"gs_{nm}{i}", t.detach().flatten().tolist())
    sm_rows.append(f'  {{"{"log_" if log else ""}softmax {list(shape)}{" T" if tr else ""} dim={dim}", '
                   f'{len(shape)}, {ints(shape)}, {int(tr)}, {dim}, {int(log)}, {x.numel()}, '
                   f'gs_x{i}, gs_g{i}, gs_y{i}, gs_gx{i}}},')

# ---- losses -------------------------------------------------------------------
# kind 0 nll_loss, 1 cross_entropy, 2 mse_loss; target ints stored as doubles
ls_rows = []
ls_cases = [(0, (4, 3), 1, -100, [0, 2, 1, 2]), (0, (4, 3), 0, -100, [1, 1, 0, 2]),
            (0, (4, 3), 2, 1, [1, 0, 1, 2]), (0, (3,), 1, -100, 2),
            (1, (5, 4), 1, -100, [3, 0, 1, 1, 2]), (1, (5, 4), 0, 2, [3, 0, 2, 1, 2]),
            (1, (5, 4), 2, -100, [0, 0, 3, 1, 2]), (1, (4,), 1, -100, 3),
            (2, (3, 4), 1, 0, None), (2, (3, 4), 0, 0, None), (2, (3, 4), 2, 0, None)]
F = torch.nn.functional
RED = {0: "none", 1: "mean", 2: "sum"}
for i, (kind, shape, red, ign, tgt) in enumerate(ls_cases):
    x = torch.randn(shape).requires_grad_()
    if kind == 2:
        t = torch.randn(shape)
        y = F.mse_loss(x, t, reduction=RED[red])
    else:
        t = torch.tensor(tgt)
        inp = x.log_softmax(-1) if kind == 0 else x
        fn = F.nll_loss if kind == 0 else F.cross_entropy
        y = fn(inp, t, reduction=RED[red], ignore_index=ign)
        if kind == 0:  # nll_loss is given log-probabilities: store them as x
            x = inp.detach().requires_grad_()
            y = F.nll_loss(x, t, reduction=RED[red], ignore_index=ign)
    g = torch.randn(y.shape)
    (gx,) = torch.autograd.grad(y, x, g)
    for nm, v in (("x", x), ("t", t), ("g", g), ("y", y), ("gx", gx)):
        arr(f"gl_{nm}{i}", v.detach().double().flatten().tolist())
    tshape = list(t.shape)
    ls_rows.append(f'  {{"{["nll_loss", "cross_entropy", "mse_loss"][kind]} {list(shape)} '
                   f'{RED[red]} ignore={ign}", {kind}, {len(shape)}, {ints(shape)}, {len(tshape)}, '
                   f'{red}, {ign}, gl_x{i}, gl_t{i}, gl_g{i}, {y.numel()}, gl_y{i}, gl_gx{i}}},')

with open("tests/ops/golden_reduce.h", "w") as f:
    f.write("/* tests/ops/golden_reduce.h: GENERATED by scripts/golden/reduce.py from\n"
            " * PyTorch %s; do not edit. Reference values for reductions, softmax\n"
            " * and losses. */\n" % torch.__version__)
    f.write("#ifndef KILN_GOLDEN_REDUCE_H\n#define KILN_GOLDEN_REDUCE_H\n\n"
            "#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n\n"
            "#define GOLDEN_UNUSED __attribute__((unused))\n\n")
    f.write("\n".join(out) + "\n\n")
    f.write("""/* op: 0 sum, 1 mean, 2 amax, 3 amin, 4 var (unbiased), 5 max.dim values,
 * 6 max.dim indices. x has shape `shape`; when transpose is set the op runs
 * on x.transpose(0, -1). dims are the reduced dims (max.dim: dims[0]). */
typedef struct golden_reduce_case {
  const char *name;
  int op, ndim;
  int64_t shape[4];
  bool transpose;
  int n_dims;
  int64_t dims[4];
  bool keepdim;
  const double *x;
  int out_ndim;
  int64_t out_shape[4];
  int n_want;
  const double *want;
} golden_reduce_case;

""")
    f.write("static const golden_reduce_case golden_reduce[] GOLDEN_UNUSED = {\n" + "\n".join(rows) + "\n};\n")
    f.write("#define GOLDEN_REDUCE_N ((int)(sizeof golden_reduce / sizeof golden_reduce[0]))\n\n")
    f.write("""/* softmax / log_softmax(x or x.transpose(0, -1), dim); gx = d<y, g>/dx. */
typedef struct golden_softmax_case {
  const char *name;
  int ndim;
  int64_t shape[4];
  bool transpose;
  int dim;
  bool log;
  int numel;
  const double *x, *g, *y, *gx;
} golden_softmax_case;

""")
    f.write("static const golden_softmax_case golden_softmax[] GOLDEN_UNUSED = {\n" + "\n".join(sm_rows) + "\n};\n")
    f.write("#define GOLDEN_SOFTMAX_N ((int)(sizeof golden_softmax / sizeof golden_softmax[0]))\n\n")
    f.write("""/* kind: 0 nll_loss (x holds log-probabilities), 1 cross_entropy (logits),
 * 2 mse_loss (t is a float target of x's shape). t holds class indices as
 * doubles for kinds 0 and 1 (t_ndim 0 or 1). reduction: 0 none, 1 mean,
 * 2 sum. gx = d<y, g>/dx. */
typedef struct golden_loss_case {
  const char *name;
  int kind, ndim;
  int64_t shape[4];
  int t_ndim, reduction;
  int64_t ignore_index;
  const double *x, *t, *g;
  int n_y;
  const double *y, *gx;
} golden_loss_case;

""")
    f.write("static const golden_loss_case golden_loss[] GOLDEN_UNUSED = {\n" + "\n".join(ls_rows) + "\n};\n")
    f.write("#define GOLDEN_LOSS_N ((int)(sizeof golden_loss / sizeof golden_loss[0]))\n\n#endif\n")
