#!/usr/bin/python3
"""scripts/bench_compare.py: kiln's benchmarks side by side with PyTorch 1.13
(`make bench-compare`). Standard library only.

    /usr/bin/python3 scripts/bench_compare.py [--kiln build/bench_kiln]
        [--threads "1 2"] [--filter SUBSTR] [--runs N] [--min-time S]
        [--kiln-wait-policy unset|passive|active] [--torch-wait-policy ...]
        [--no-torch] [--same-process] [--rounds R] [--save FILE.json]

For each thread count N it runs every workload of `bench_kiln --json
--threads N` and of `/usr/bin/python3 bench/torch_anchor.py --json --threads
N`, each workload in a fresh process (--same-process: one process per
program and thread count), then prints one table per thread
count (kiln, torch, and kiln's time relative to torch's: below 1 means kiln
is faster; rates such as GB/s are inverted so that the column always reads
as time), the issue's targets with PASS/FAIL, and, with several thread
counts, kiln's scaling from the first to the last.

--rounds R (default 1) measures everything R times, kiln's programs and
PyTorch's alternating round by round, and reports for each workload its
best round (the lowest median: the round least disturbed by other
processes on a shared machine) with the range of its R medians in the
note column, so a ratio is not one round's luck against the other side's.

Environment (Note [Bench threads] in bench/bench_main.c): both processes
get OMP_NUM_THREADS=N and OPENBLAS_NUM_THREADS=N and also set the counts
through their APIs (omp_set_num_threads / torch.set_num_threads, and
openblas_set_num_threads). How idle OpenMP workers wait is each one's best
known setting, changeable with --kiln-wait-policy / --torch-wait-policy:
- kiln: the environment as given (default "unset", where kiln itself sets
  GOMP_SPINCOUNT: Note [Thread waits] in src/core/threads.c): kiln keeps OpenBLAS
  single-threaded and splits GEMMs over its one OpenMP pool, so spinning
  workers fight no one; OMP_WAIT_POLICY=PASSIVE would make the MLP step 2x
  slower (a futex wake-up per parallel region).
- torch: OMP_WAIT_POLICY=PASSIVE (default "passive"): PyTorch runs
  OpenBLAS's pthreads pool beside its OpenMP pool, and with spinning
  workers it is 3-5x slower at 2 threads than at 1 (pytorch-perf.md).
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"


def run_json(cmd, env, label):
    """Runs cmd, passing stderr through; returns {name: result} from the JSON
    lines on stdout (other lines are echoed)."""
    print("$ %s" % " ".join(cmd), file=sys.stderr)
    sys.stderr.flush()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    out = {}
    for line in p.stdout:
        line = line.strip()
        if line.startswith("{"):
            try:
                d = json.loads(line)
                out[d["name"]] = d
                print("  %s: %-34s %10.4g %s%s" % (label, d["name"], d["median"], d["unit"],
                                                   " (contended)" if d.get("contended") else ""),
                      file=sys.stderr)
                sys.stderr.flush()
                continue
            except (ValueError, KeyError):
                pass
        if line:
            print(line, file=sys.stderr)
    rc = p.wait()
    if rc:
        print("bench_compare: %s exited with status %d" % (label, rc), file=sys.stderr)
    return out


def list_workloads(cmd, filt):
    """The workload names `cmd --list` prints, selected as the tools' --filter
    does: the one of exactly that name if there is one, else every name
    containing it."""
    names = subprocess.run(cmd + ["--list"], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                           check=True).stdout.split()
    if filt and filt in names:
        return [filt]
    return [n for n in names if not filt or filt in n]


def best_rounds(rounds):
    """{name: result} over several rounds' {name: result}: each name's best
    round (lowest as_time), with every round's median in "round_medians"
    when there was more than one."""
    out = {}
    for r in rounds:
        for name, d in r.items():
            if name not in out or as_time(d) < as_time(out[name]):
                best = dict(d)
                best["round_medians"] = out.get(name, {}).get("round_medians", [])
                out[name] = best
            out[name]["round_medians"].append(d["median"])
    if len(rounds) < 2:
        for d in out.values():
            d.pop("round_medians", None)
    return out


def spread(r):
    """'lo-hi' of a result's round medians, or '' for one round."""
    m = r.get("round_medians") if r else None
    return "%s-%s" % (fmt(min(m)), fmt(max(m))) if m and len(m) > 1 else ""


def is_rate(unit):
    return unit.endswith("/s")


def as_time(r):
    """A result as a time-like number (lower is better)."""
    return 1.0 / r["median"] if is_rate(r["unit"]) else r["median"]


def fmt(v):
    return "%.4g" % v if v is not None else "-"


def table(kiln, torch, threads):
    rows = [("workload", "unit", "kiln", "torch", "kiln/torch", "note")]
    names = list(kiln)
    names += [n[len("torch_"):] for n in torch
              if n.startswith("torch_") and n[len("torch_"):] not in kiln]
    for name in names:
        k, t = kiln.get(name), torch.get("torch_" + name)
        unit = (k or t)["unit"]
        ratio = as_time(k) / as_time(t) if k and t else None
        flag = "contended" if (k and k.get("contended")) or (t and t.get("contended")) else ""
        if spread(k) or spread(t):
            flag = ("rounds kiln %s torch %s %s" % (spread(k) or "-", spread(t) or "-", flag)).rstrip()
        rows.append((name if k else "torch_" + name, unit, fmt(k and k["median"]),
                     fmt(t and t["median"]), fmt(ratio), flag))
    rounds = any(spread(r) for r in list(kiln.values()) + list(torch.values()))
    print("\n## %d thread%s (medians%s; kiln/torch < 1: kiln faster; contended: a repetition "
          "ran while other processes used the CPU)\n" % (threads, "" if threads == 1 else "s",
                                                         ", each the best round's" if rounds else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) if j in (0, 1, 5) else c.rjust(w)
                        for j, (c, w) in enumerate(zip(r, widths))).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def targets(kiln, torch):
    """(description, measured text, pass/fail/None) for the issue's targets."""
    out = []

    def k(n):
        return kiln.get(n, {}).get("median")

    def t(n):
        return torch.get("torch_" + n, {}).get("median")

    def add(desc, value, ok, text=None):
        if value is None:
            out.append((desc, "-", None))
        else:
            out.append((desc, text or fmt(value), ok))

    te = t("elementwise_4m_eager")
    for mode in ("jit", "lazy"):
        km = k("elementwise_4m_" + mode)
        s = te / km if te and km else None
        add("elementwise_4m_%s >= 5x faster than torch eager" % mode, s,
            s is not None and s >= 5, s and "%.2fx" % s)
    a, c = k("elementwise_arith_4m"), k("copy_4m")
    s = a / c if a and c else None
    add("elementwise_arith_4m >= 80% of copy_4m", s, s is not None and s >= 0.8,
        s and "%.0f%%" % (100 * s))
    modes = [(m, k("mlp_step_" + m)) for m in ("eager", "jit", "lazy") if k("mlp_step_" + m)]
    tm = t("mlp_step_eager")
    if modes and tm:
        m, best = min(modes, key=lambda x: x[1])
        add("mlp_step best kiln mode <= 0.6x torch eager", best / tm, best / tm <= 0.6,
            "%.2fx (%s)" % (best / tm, m))
    else:
        add("mlp_step best kiln mode <= 0.6x torch eager", None, None)
    le, ll = k("mlp_step_eager"), k("mlp_step_lazy")
    add("mlp_step_lazy no slower than mlp_step_eager (kiln)", ll / le if le and ll else None,
        bool(le and ll and ll <= le), le and ll and "%.2fx" % (ll / le))
    ki, ti = k("mlp_infer_b1_jit"), t("mlp_infer_b1_jit")
    add("mlp_infer_b1_jit <= 0.5x torch jit", ki / ti if ki and ti else None,
        bool(ki and ti and ki / ti <= 0.5), ki and ti and "%.2fx" % (ki / ti))
    kl, tl = k("lstm_step_jit"), t("lstm_step_nn")
    add("lstm_step_jit <= 0.5x torch nn.LSTM (issue 19)", kl / tl if kl and tl else None,
        bool(kl and tl and kl / tl <= 0.5), kl and tl and "%.2fx" % (kl / tl))
    for name, limit, unit in (("overhead_add", 200, "ns"), ("overhead_add_grad", 600, "ns"),
                              ("lazy_record", 500, "ns"),
                              ("lazy_mark_step_cached_100", 50, "us"),
                              ("lazy_mark_step_uncached_100", 1000, "us")):
        v = k(name)
        add("%s <= %g %s" % (name, limit, unit), v, v is not None and v <= limit,
            v is not None and "%.4g %s" % (v, unit))
    sg, ob = k("sgemm_1024"), k("openblas_sgemm_1024")
    add("sgemm_1024 within 5% of openblas_sgemm_1024", sg / ob if sg and ob else None,
        bool(sg and ob and sg >= 0.95 * ob), sg and ob and "%.0f%%" % (100 * sg / ob))
    for shape in ("fwd", "dx", "dw"):
        sg, ob = k("sgemm_mlp_" + shape), k("openblas_sgemm_mlp_" + shape)
        add("sgemm_mlp_%s >= 1.1x openblas_sgemm_mlp_%s" % (shape, shape),
            sg / ob if sg and ob else None, bool(sg and ob and sg >= 1.1 * ob),
            sg and ob and "%.2fx" % (sg / ob))
    # Note [Busy machine] (bench/work_models.c): the MLP step beside a busy core
    for who, get in (("kiln", k), ("torch", t)):
        q, b = get("busy_machine_quiet"), get("busy_machine")
        add("%s busy_machine <= 2.5x busy_machine_quiet" % who, b / q if q and b else None,
            bool(q and b and b <= 2.5 * q), q and b and "%.2fx (%.3g / %.3g ms)" % (b / q, b, q))
    return out


def print_targets(kiln, torch, threads):
    print("\n### targets at %d thread%s\n" % (threads, "" if threads == 1 else "s"))
    rows = [r for r in targets(kiln, torch) if r[2] is not None]
    if not rows:
        print("(no target's workloads were run)")
        return
    w = max(len(r[0]) for r in rows)
    for desc, text, ok in rows:
        print("%s  %12s  %s" % (desc.ljust(w), text, {True: "PASS", False: "FAIL",
                                                       None: "n/a"}[ok]))


def print_scaling(results, counts, who):
    lo, hi = counts[0], counts[-1]
    a, b = results[lo][who], results[hi][who]
    names = [n for n in a if n in b]
    if not names:
        return
    print("\n### %s: %d threads vs %d (time ratio; > 1.10 = slower with more threads, beyond "
          "noise)\n"
          % (who, hi, lo))
    w = max(len(n) for n in names)
    slower = []
    for n in names:
        r = as_time(b[n]) / as_time(a[n])
        mark = "  SLOWER" if r > 1.10 else ""
        if mark:
            slower.append(n)
        print("%s  %8s  %8s  %6.2f%s" % (n.ljust(w), fmt(a[n]["median"]), fmt(b[n]["median"]),
                                         r, mark))
    if who == "kiln":
        print("\n%d-thread results slower than %d-thread ones: %s"
              % (hi, lo, ", ".join(slower) if slower else "none"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default=os.path.join("build", "bench_kiln"))
    ap.add_argument("--threads", default="1 2", help='thread counts, e.g. "1 2" or "2"')
    ap.add_argument("--filter")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--kiln-wait-policy", default="unset", choices=("passive", "active", "unset"))
    ap.add_argument("--torch-wait-policy", default="passive",
                    choices=("passive", "active", "unset"))
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--same-process", action="store_true",
                    help="run all workloads of one program in one process (faster, but "
                         "earlier workloads then change later ones: torch's lazy MLP step "
                         "goes from 4 to 12 ms after the other lazy workloads)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure R times, kiln and torch alternating; report each "
                         "workload's best round and the range")
    ap.add_argument("--save", help="write every result as JSON to this file")
    opts = ap.parse_args()
    if opts.rounds < 1:
        ap.error("--rounds wants a positive count")
    counts = [int(x) for x in opts.threads.replace(",", " ").split()]
    if not counts or min(counts) < 1:
        ap.error("--threads wants positive thread counts")
    common = ["--runs", str(opts.runs), "--min-time", str(opts.min_time)]
    kiln_cmd = [opts.kiln, "--json"]
    torch_cmd = [PYTHON, os.path.join("bench", "torch_anchor.py"), "--json"]

    def env_for(n, policy):
        env = dict(os.environ, OMP_NUM_THREADS=str(n), OPENBLAS_NUM_THREADS=str(n))
        if policy != "unset":
            env["OMP_WAIT_POLICY"] = policy.upper()
        return env

    def measure(cmd, n, policy, label):
        """Every selected workload of cmd at n threads, each in a fresh
        process unless --same-process."""
        env = env_for(n, policy)
        base = cmd + ["--threads", str(n)] + common
        if opts.same_process:
            return run_json(base + (["--filter", opts.filter] if opts.filter else []), env, label)
        names = list_workloads(cmd, opts.filter)
        out = {}
        for name in names:
            out.update(run_json(base + ["--filter", name], env, label))
        return out

    results = {}
    for n in counts:
        kiln_rounds, torch_rounds = [], []
        for _ in range(opts.rounds):
            kiln_rounds.append(measure(kiln_cmd, n, opts.kiln_wait_policy, "kiln"))
            if not opts.no_torch:
                torch_rounds.append(measure(torch_cmd, n, opts.torch_wait_policy, "torch"))
        results[n] = {"kiln": best_rounds(kiln_rounds), "torch": best_rounds(torch_rounds)}
    print("# kiln vs PyTorch 1.13 (OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = threads; "
          "OMP_WAIT_POLICY: kiln %s, torch %s)" % (opts.kiln_wait_policy, opts.torch_wait_policy))
    for n in counts:
        table(results[n]["kiln"], results[n]["torch"], n)
        print_targets(results[n]["kiln"], results[n]["torch"], n)
    if len(counts) > 1:
        print_scaling(results, counts, "kiln")
        if not opts.no_torch:
            print_scaling(results, counts, "torch")
    if opts.save:
        with open(opts.save, "w") as f:
            json.dump({str(n): results[n] for n in counts}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
