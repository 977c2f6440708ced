#!/usr/bin/python3
"""bench/torch_anchor.py: kiln's benchmark workloads (bench/work_*.c) in
PyTorch 1.13, for `make bench-compare` (scripts/bench_compare.py).

    /usr/bin/python3 bench/torch_anchor.py [--json] [--filter SUBSTR]
        [--threads N] [--runs N] [--min-time SECONDS] [--no-guard] [--list]

Each workload prints the same JSON line as `kiln bench --json`, its name
prefixed with "torch_". Modes: eager; torch.jit.script after warm-up calls;
lazy tensors on the TorchScript backend (torch._lazy.ts_backend.init(),
mark_step() and wait_device_ops() per iteration). The timing protocol is
kiln's: warm-up, repetitions sized to --min-time seconds, median of --runs
(>= 5), and the same contention guard (a repetition during which other
processes used > 5% of the machine is redone up to 3 times).

Threads: --threads N calls torch.set_num_threads(N) and OpenBLAS's
openblas_set_num_threads(N) through ctypes (torch.set_num_threads does not
limit the OpenBLAS pool); without it both keep their defaults (torch: 1
intra-op thread here, OpenBLAS: all cores). OMP_WAIT_POLICY and friends
must be set in the environment before the process starts.

Differences from kiln's workloads, on purpose:
- LSTM gates are split by slicing instead of chunk(4, 1): on the 1.13 lazy
  backend chunk falls back to CPU and aborts; every torch variant slices so
  all run the same program. As in kiln's, the input projection is one
  linear over all time steps, unbound into steps (what nn.LSTM does);
  lazy indexes the projection instead (the lazy backend aborts on unbind).
  torch_lstm_step_nn is torch.nn.LSTM (the issue's LSTM target), with b_ih
  and b_hh.
- openblas_sgemm_1024 is numpy.matmul(out=) (the same OpenBLAS library).
"""
import argparse
import ctypes
import ctypes.util
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

if os.environ.get("KILN_BENCH_CLOCK") == "cpu":  # process CPU time, as bench_kiln's
    time.perf_counter = time.process_time

# ---- harness -----------------------------------------------------------------


def read_ticks():
    """(busy ticks of the machine incl. steal, ticks used by this process)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        with open("/proc/self/stat") as f:
            s = f.read()
        fields = s[s.rindex(")") + 2:].split()
        own = int(fields[11]) + int(fields[12]) + spinner_ticks()
        return v[0] + v[1] + v[2] + v[5] + v[6] + v[7], own
    except (OSError, ValueError, IndexError):
        return None


# busy_machine's competitor (Note [Busy machine] in bench/work_models.c): a
# spin loop in another process, started by the workload's setup and stopped
# after it; its CPU time counts as the workload's own in the guard.
SPINNER = None


def spinner_ticks():
    if SPINNER is None:
        return 0
    with open("/proc/%d/stat" % SPINNER.pid) as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def stop_spinner():
    global SPINNER
    if SPINNER is not None:
        SPINNER.kill()
        SPINNER.wait()
        SPINNER = None


HZ = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1


def contended(a, b, seconds):
    others = (b[0] - a[0]) - (b[1] - a[1])
    return others > 2 + 0.05 * seconds * HZ * NCPU


class Workload:
    """name, unit, kind ('time' with scale, or 'rate' with work per
    iteration), warmup, max_iters; setup() returns the run(iters) function,
    which returns the seconds spent in its timed part."""

    def __init__(self, name, unit, kind, scale, setup, warmup=2, work=0.0, max_iters=0):
        self.name, self.unit, self.kind, self.scale = name, unit, kind, scale
        self.setup, self.warmup, self.work, self.max_iters = setup, warmup, work, max_iters

    def value(self, seconds, iters):
        if self.kind == "time":
            return seconds / iters * self.scale
        return self.work * iters / seconds * self.scale


def size_iters(w, run, min_time):
    n = 1
    while True:
        t = run(n)
        if w.max_iters and n >= w.max_iters:
            return w.max_iters
        if t >= min_time / 4 or n >= 1 << 26:
            it = max(1, int(n * min_time / t)) if t > 0 else n
            return min(it, w.max_iters) if w.max_iters else it
        n = int(n * (min_time / 2 / t)) + 1 if t > 0 and min_time / 4 / t < 10 else n * 10


def run_one(w, opts):
    run = w.setup()
    run(w.warmup)
    iters = size_iters(w, run, opts.min_time)
    vals, n_contended = [], 0
    for _ in range(opts.runs):
        for attempt in range(4):
            a = read_ticks() if opts.guard else None
            w0 = time.perf_counter()
            t = run(iters)
            wall = time.perf_counter() - w0
            v = w.value(t, iters)
            b = read_ticks() if a else None
            if not a or not b or not contended(a, b, wall):
                break
            if attempt == 3:
                n_contended += 1
                break
            time.sleep(0.2)
        vals.append(v)
    vals.sort()
    n = len(vals)
    med = vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2
    name = "torch_" + w.name
    if opts.json:
        d = {"name": name, "unit": w.unit, "median": float("%.6g" % med),
             "min": float("%.6g" % vals[0]), "max": float("%.6g" % vals[-1]), "runs": n}
        if n_contended:
            d["contended"] = n_contended
        print(json.dumps(d))
    else:
        print("%-34s %-8s %10.4g %10.4g %10.4g %5d%s" % (name, w.unit, med, vals[0], vals[-1], n,
                                                         " *" if n_contended else ""))
    sys.stdout.flush()
    stop_spinner()


# ---- lazy tensors --------------------------------------------------------------

_lazy = None


def lazy():
    """torch._lazy with the TorchScript backend initialised (once)."""
    global _lazy
    if _lazy is None:
        import torch._lazy
        import torch._lazy.ts_backend
        torch._lazy.ts_backend.init()
        _lazy = torch._lazy
    return _lazy


def sync():
    lz = lazy()
    lz.mark_step()
    lz.wait_device_ops()


# ---- dispatch overhead, lazy mark_step, copy -------------------------------------------


def setup_add(grad=False, on_lazy=False):
    dev = "cpu"
    if on_lazy:
        lazy()
        dev = "lazy"
    a = torch.ones(1, device=dev)
    b = torch.ones(1, device=dev)
    if grad:
        a.requires_grad_(True)
    add = torch.add
    now = time.perf_counter

    def run(iters):
        t0 = now()
        for _ in range(iters):
            add(a, b)
        return now() - t0
    return run


MS_NODES, MS_NUMEL = 100, 64


def setup_mark_step(cached):
    lazy()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(MS_NUMEL, generator=g).to("lazy")
    y = torch.rand(MS_NUMEL, generator=g).to("lazy")
    sync()
    serial = [0]

    def record(pattern):
        # kiln's ms_record: alternating add/mul, or base-3 digits of serial
        t = x
        for i in range(MS_NODES):
            op = i % 2 if pattern is None else pattern % 3
            if pattern is not None:
                pattern //= 3
            t = t + y if op == 0 else t * y if op == 1 else t - y
        return t

    t = record(None)  # primes the cache for the cached graph
    sync()
    del t

    def run(iters):
        total = 0.0
        for _ in range(iters):
            if cached:
                t = record(None)
            else:
                serial[0] += 1
                t = record(serial[0])
            t0 = time.perf_counter()
            sync()
            total += time.perf_counter() - t0
            del t
        return total
    return run


COPY_N = 4 << 20


def setup_copy():
    src = torch.ones(COPY_N)
    dst = torch.zeros(COPY_N)

    def run(iters):
        t0 = time.perf_counter()
        for _ in range(iters):
            dst.copy_(src)
        return time.perf_counter() - t0
    return run


# ---- elementwise ----------------------------------------------------------------------

EW_N = 4 << 20


def ew_chain(x, a, b):
    return torch.sigmoid(x * a + b) * torch.tanh(x) + 0.5 * x * x


def arith_chain(x, a, b):
    return x * a + b * x * x - 0.5


def ew_inputs(dev="cpu"):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(EW_N, generator=g)
    a, b = torch.tensor(1.5), torch.tensor(-0.25)
    return x.to(dev), a.to(dev), b.to(dev)


def setup_ew(fn, mode):
    if mode == "lazy":
        lazy()
        x, a, b = ew_inputs("lazy")
        sync()
    else:
        x, a, b = ew_inputs()
    f = torch.jit.script(fn) if mode == "jit" else fn

    def run(iters):
        t0 = time.perf_counter()
        for _ in range(iters):
            y = f(x, a, b)
            if mode == "lazy":
                sync()
            del y
        return time.perf_counter() - t0
    return run


# ---- SGEMM ----------------------------------------------------------------------------

GEMM_N = 1024


def gemm_inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randn(GEMM_N, GEMM_N, generator=g), torch.randn(GEMM_N, GEMM_N, generator=g)


def setup_sgemm():
    a, b = gemm_inputs()

    def run(iters):
        t0 = time.perf_counter()
        for _ in range(iters):
            torch.mm(a, b)
        return time.perf_counter() - t0
    return run


def setup_numpy_sgemm():
    a, b = (t.numpy() for t in gemm_inputs())
    c = np.empty_like(a)

    def run(iters):
        t0 = time.perf_counter()
        for _ in range(iters):
            np.matmul(a, b, out=c)
        return time.perf_counter() - t0
    return run


# ---- MLP ------------------------------------------------------------------------------

MLP_B, MLP_LR, MLP_MOMENTUM = 128, 0.01, 0.9


def mlp_forward(x, w1, b1, w2, b2, w3, b3):
    h = torch.relu(F.linear(x, w1, b1))
    h = torch.relu(F.linear(h, w2, b2))
    return F.linear(h, w3, b3)


def mlp_params(dev):
    g = torch.Generator().manual_seed(7)
    ps = []
    for shape, fan_in in (((256, 784), 784), ((256,), 784), ((256, 256), 256), ((256,), 256),
                          ((10, 256), 256), ((10,), 256)):
        bound = 1 / fan_in ** 0.5
        ps.append((torch.rand(shape, generator=g) * 2 * bound - bound).to(dev).requires_grad_())
    return ps


def setup_mlp_step(mode):
    dev = "lazy" if mode == "lazy" else "cpu"
    if mode == "lazy":
        lazy()
    ps = mlp_params(dev)
    g = torch.Generator().manual_seed(8)
    x = torch.randn(MLP_B, 784, generator=g)
    y = torch.randint(0, 10, (MLP_B,), generator=g)
    opt = torch.optim.SGD(ps, lr=MLP_LR, momentum=MLP_MOMENTUM)
    fwd = torch.jit.script(mlp_forward) if mode == "jit" else mlp_forward
    if mode == "lazy":
        sync()

    def run(iters):
        t0 = time.perf_counter()
        for _ in range(iters):
            xd, yd = (x.to("lazy"), y.to("lazy")) if mode == "lazy" else (x, y)
            loss = F.cross_entropy(fwd(xd, *ps), yd)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if mode == "lazy":
                sync()
        return time.perf_counter() - t0
    return run


def setup_busy_machine():
    """The eager MLP step beside a process spinning on one core."""
    global SPINNER
    run = setup_mlp_step("eager")
    SPINNER = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.05)
    return run


def setup_mlp_infer(mode):
    ps = mlp_params("cpu")
    x = torch.randn(1, 784, generator=torch.Generator().manual_seed(8))
    fwd = torch.jit.script(mlp_forward) if mode == "jit" else mlp_forward

    def run(iters):
        with torch.no_grad():
            t0 = time.perf_counter()
            for _ in range(iters):
                fwd(x, *ps)
            return time.perf_counter() - t0
    return run


# ---- LSTM -----------------------------------------------------------------------------

LSTM_T, LSTM_B, LSTM_I, LSTM_H = 32, 32, 64, 256


def lstm_cell(gates, c):
    """One step from the gates: the new (h, c)."""
    H = c.size(1)
    i = gates[:, 0:H]
    f = gates[:, H:2 * H]
    g = gates[:, 2 * H:3 * H]
    o = gates[:, 3 * H:4 * H]
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c


def lstm_loop(x, h, c, w_ih, w_hh, b):
    xs = F.linear(x, w_ih, b).unbind(0)
    for t in range(len(xs)):
        h, c = lstm_cell(xs[t] + F.linear(h, w_hh), c)
    return h


def lstm_loop_lazy(x, h, c, w_ih, w_hh, b):
    """lstm_loop indexing the projection instead of unbinding it: the 1.13
    lazy backend aborts on unbind (the same graph once traced)."""
    xw = F.linear(x, w_ih, b)
    for t in range(x.size(0)):
        h, c = lstm_cell(xw[t] + F.linear(h, w_hh), c)
    return h


def setup_lstm(mode):
    dev = "lazy" if mode == "lazy" else "cpu"
    if mode == "lazy":
        lazy()
    g = torch.Generator().manual_seed(8)
    bound = 1 / LSTM_H ** 0.5
    x = torch.randn(LSTM_T, LSTM_B, LSTM_I, generator=g)
    if mode == "nn":
        m = torch.nn.LSTM(LSTM_I, LSTM_H)
        ps = list(m.parameters())

        def step(xd):
            _, (h, _) = m(xd)
            return h
    else:
        ps = [(torch.rand(s, generator=g) * 2 * bound - bound).to(dev).requires_grad_()
              for s in ((4 * LSTM_H, LSTM_I), (4 * LSTM_H, LSTM_H), (4 * LSTM_H,))]
        h0 = torch.zeros(LSTM_B, LSTM_H).to(dev)
        c0 = torch.zeros(LSTM_B, LSTM_H).to(dev)
        fn = (torch.jit.script(lstm_loop) if mode == "jit"
              else lstm_loop_lazy if mode == "lazy" else lstm_loop)

        def step(xd):
            return fn(xd, h0, c0, *ps)
    if mode == "lazy":
        sync()

    def run(iters):
        t0 = time.perf_counter()
        for _ in range(iters):
            for p in ps:
                p.grad = None
            xd = x.to("lazy") if mode == "lazy" else x
            loss = step(xd).sum()
            loss.backward()
            if mode == "lazy":
                sync()
        return time.perf_counter() - t0
    return run


# ---- conv2d ---------------------------------------------------------------------------


def setup_conv():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(64, 32, 14, 14, generator=g).requires_grad_()
    w = torch.randn(64, 32, 3, 3, generator=g).requires_grad_()
    b = torch.randn(64, generator=g).requires_grad_()

    def run(iters):
        t0 = time.perf_counter()
        for _ in range(iters):
            y = F.conv2d(x, w, b, 1, 1)
            y.backward(torch.ones_like(y))
            x.grad = w.grad = b.grad = None
        return time.perf_counter() - t0
    return run


# ---- ops of the OpInfo issue (bench/work_ops.c) ------------------------------------------


def setup_ops(which):
    g = torch.Generator().manual_seed(5)
    if which == "dw":
        t = [torch.randn(8, 32, 56, 56, generator=g), torch.randn(32, 1, 3, 3, generator=g),
             torch.randn(32, generator=g)]
        f = lambda x, w, b: F.conv2d(x, w, b, 1, 1, 1, 32)
    elif which == "ln":
        t = [torch.randn(8, 128, 256, generator=g), torch.randn(256, generator=g),
             torch.randn(256, generator=g)]
        f = lambda x, w, b: F.layer_norm(x, (256,), w, b, 1e-5)
    elif which == "bn":
        g = torch.Generator().manual_seed(8)
        t = [torch.randn(16, 64, 28, 28, generator=g), torch.randn(64, generator=g),
             torch.randn(64, generator=g)]
        rm, rv = torch.zeros(64), torch.ones(64)
        f = lambda x, w, b: F.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5)
    else:
        t = [torch.randn(8, 4, 128, 32, generator=g) for _ in range(3)]
        f = lambda q, k, v: torch.matmul(torch.softmax(q @ k.transpose(2, 3) / 32 ** 0.5, -1), v)
    for x in t:
        x.requires_grad_()

    def run(iters):
        t0 = time.perf_counter()
        for _ in range(iters):
            y = f(*t)
            y.backward(torch.ones_like(y))
            for x in t:
                x.grad = None
        return time.perf_counter() - t0
    return run


# ---- list -----------------------------------------------------------------------------

GFLOP_1024 = 2.0 * GEMM_N ** 3
COPY_BYTES = 2.0 * 4 * COPY_N
EW_BYTES = 2.0 * 4 * EW_N


# ---- imported models (bench/work_import.c; scripts/bench_models.py) --------------------


def setup_import(name, mode, train, batch):
    """resnet18 or the transformer layer (the modules scripts/bench_models.py
    exports for kiln, same seeds): inference under no_grad in eval mode, or
    an SGD step in training mode (cross-entropy on random labels; the
    layer's loss is its output's mean). mode: eager or jit (torch.jit.script
    of the module)."""
    from importlib.machinery import SourceFileLoader
    bm = SourceFileLoader('bench_models', os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), 'scripts', 'bench_models.py')).load_module()
    m, shape = bm.bench_modules()[name]
    shape = [batch] + shape[1:]
    m.train(train)
    g = torch.Generator().manual_seed(8)
    x = torch.randn(shape, generator=g)
    y = torch.randint(0, 1000, (batch,), generator=g)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) if train else None
    f = torch.jit.script(m) if mode == "jit" else m

    def run(iters):
        t0 = time.perf_counter()
        if not train:
            with torch.no_grad():
                for _ in range(iters):
                    f(x)
            return time.perf_counter() - t0
        for _ in range(iters):
            out = f(x)
            loss = F.cross_entropy(out, y) if name == "resnet18" else out.mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0
    return run


def T(name, unit, scale, setup, warmup=2, max_iters=0):
    return Workload(name, unit, "time", scale, setup, warmup, 0.0, max_iters)


def R(name, unit, work, setup, warmup=2):
    return Workload(name, unit, "rate", 1e-9, setup, warmup, work)


WORKLOADS = [
    T("overhead_add", "ns/op", 1e9, setup_add, 1000),
    T("overhead_add_grad", "ns/op", 1e9, lambda: setup_add(grad=True), 1000),
    T("lazy_record", "ns/op", 1e9, lambda: setup_add(on_lazy=True), 1000),
    T("lazy_mark_step_cached_100", "us", 1e6, lambda: setup_mark_step(True), 3),
    T("lazy_mark_step_uncached_100", "us", 1e6, lambda: setup_mark_step(False), 3, 200),
    R("copy_4m", "GB/s", COPY_BYTES, setup_copy, 3),
    T("elementwise_4m_eager", "ms", 1e3, lambda: setup_ew(ew_chain, "eager"), 2),
    T("elementwise_4m_jit", "ms", 1e3, lambda: setup_ew(ew_chain, "jit"), 4),
    T("elementwise_4m_lazy", "ms", 1e3, lambda: setup_ew(ew_chain, "lazy"), 3),
    R("elementwise_arith_4m", "GB/s", EW_BYTES, lambda: setup_ew(arith_chain, "jit"), 4),
    R("sgemm_1024", "GFLOP/s", GFLOP_1024, setup_sgemm, 2),
    R("openblas_sgemm_1024", "GFLOP/s", GFLOP_1024, setup_numpy_sgemm, 2),
    T("mlp_step_eager", "ms", 1e3, lambda: setup_mlp_step("eager"), 5),
    T("mlp_step_jit", "ms", 1e3, lambda: setup_mlp_step("jit"), 30),
    T("mlp_step_lazy", "ms", 1e3, lambda: setup_mlp_step("lazy"), 5),
    T("mlp_infer_b1_eager", "us", 1e6, lambda: setup_mlp_infer("eager"), 20),
    T("mlp_infer_b1_jit", "us", 1e6, lambda: setup_mlp_infer("jit"), 30),
    T("lstm_step_eager", "ms", 1e3, lambda: setup_lstm("eager"), 2),
    T("lstm_step_jit", "ms", 1e3, lambda: setup_lstm("jit"), 4),
    T("lstm_step_lazy", "ms", 1e3, lambda: setup_lstm("lazy"), 3),
    T("lstm_step_nn", "ms", 1e3, lambda: setup_lstm("nn"), 2),
    T("conv2d_fwd_bwd", "ms", 1e3, setup_conv, 2),
    T("busy_machine_quiet", "ms", 1e3, lambda: setup_mlp_step("eager"), 5),
    T("busy_machine", "ms", 1e3, setup_busy_machine, 5),
    T("conv2d_depthwise", "ms", 1e3, lambda: setup_ops("dw"), 2),
    T("layer_norm", "ms", 1e3, lambda: setup_ops("ln"), 2),
    T("batch_norm_train", "ms", 1e3, lambda: setup_ops("bn"), 2),
    T("sdpa", "ms", 1e3, lambda: setup_ops("sdpa"), 2),
]
for _m in ("eager", "jit"):
    _w = 4 if _m == "jit" else 2
    WORKLOADS += [
        T("resnet18_infer_b1_" + _m, "ms", 1e3,
          lambda m=_m: setup_import("resnet18", m, False, 1), _w),
        T("resnet18_infer_b16_" + _m, "ms", 1e3,
          lambda m=_m: setup_import("resnet18", m, False, 16), _w),
        T("resnet18_train_step_b16_" + _m, "ms", 1e3,
          lambda m=_m: setup_import("resnet18", m, True, 16), _w),
        T("transformer_encoder_train_step_" + _m, "ms", 1e3,
          lambda m=_m: setup_import("transformer_encoder", m, True, 16), _w),
    ]


def set_openblas_threads(n):
    """openblas_set_num_threads(n) on the OpenBLAS torch and numpy use."""
    done = False
    for name in ("libopenblas.so.0", ctypes.util.find_library("openblas"), "libblas.so.3"):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_set_num_threads(ctypes.c_int(n))
            done = True
        except (OSError, AttributeError):
            pass
    return done


def openblas_threads():
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        return lib.openblas_get_num_threads()
    except (OSError, AttributeError):
        return -1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--filter")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--no-guard", dest="guard", action="store_false")
    ap.add_argument("--list", action="store_true")
    opts = ap.parse_args()
    if opts.runs < 5:
        ap.error("--runs must be >= 5")
    if opts.list:
        for w in WORKLOADS:
            print(w.name)
        return 0
    if opts.threads > 0:
        torch.set_num_threads(opts.threads)
        if not set_openblas_threads(opts.threads):
            print("torch_anchor: cannot set OpenBLAS threads", file=sys.stderr)
    env = " ".join("%s=%s" % (k, os.environ[k]) for k in (
        "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
        "OPENBLAS_THREAD_TIMEOUT", "OMP_PROC_BIND") if k in os.environ) or "(none set)"
    cap = [ln.split(":")[-1].strip() for ln in torch.__config__.show().splitlines()
           if "CPU capability" in ln]
    print("torch_anchor: torch %s, %d CPUs, intra-op threads %d, OpenBLAS threads %d, "
          "ATen %s | env %s" % (torch.__version__, NCPU, torch.get_num_threads(),
                                openblas_threads(), cap[0] if cap else "?", env),
          file=sys.stderr if opts.json else sys.stdout)
    if not opts.json:
        print("%-34s %-8s %10s %10s %10s %5s" % ("name", "unit", "median", "min", "max", "runs"))
    names = [w.name for w in WORKLOADS]
    exact = opts.filter in names
    failed = 0
    for w in WORKLOADS:
        if opts.filter and (w.name != opts.filter if exact else opts.filter not in w.name):
            continue
        try:
            run_one(w, opts)
        except Exception as e:  # one broken workload must not hide the others
            print("torch_anchor: %s failed: %s: %s" % (w.name, type(e).__name__, e),
                  file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
