"""fuzz/gen_run_seeds.py: writes seeds of the run fuzz target (fuzz_run)
from the OpInfo graphs of tests/data/opinfo/*.txt (issue #16: fuzz the
argument checking of every op through the run target), into fuzz/seeds/run/
(committed). Per op:
  <op>.typed.ir   its float sample of the most dims with each input's dtype and shape
                  declared (`Float(2, 5)`): fuzz_run makes its inputs so;
  <op>.<dt>.ir    the same graph with the float inputs declared as one of the
                  other dtypes (Double, Half, BFloat16, Int, Short, Char, Byte;
                  int64 index inputs as Int when that dtype is an integer),
                  chosen by the op's position, so that every op's dtype checks
                  run;
  <op>.i64.ir, <op>.b.ir   its first int64 / bool sample, typed.
Needs only the Python standard library:
    python3 fuzz/gen_run_seeds.py"""
import glob
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "seeds", "run")
NAMES = {"f32": "Float", "i64": "Long", "b": "Bool"}
OTHER = ["Double", "Half", "BFloat16", "Int", "Short", "Char", "Byte"]
INTS = {"Int", "Short", "Char", "Byte"}


def samples(path):
    """(dtype tag, graph text, [(dtype, sizes)]) of each sample of one file."""
    lines = open(path).read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"sample \d+ (\S+)", lines[i])
        if not m:
            i += 1
            continue
        tag, graph, ins = m.group(1), None, []
        i += 1
        while i < len(lines) and lines[i] != "end":
            g = re.match(r"graph (\d+)$", lines[i])
            if g:
                n = int(g.group(1))
                graph = "\n".join(lines[i + 1:i + 1 + n]) + "\n"
                i += n
            elif lines[i].startswith("in "):
                f = lines[i].split(" : ")[0].split()
                ndim = int(f[4])
                ins.append((f[2], [int(s) for s in f[5:5 + ndim]]))
            i += 1
        if graph:
            out.append((tag, graph, ins))
    return out


def typed(graph, types):
    """graph with its k-th `: Tensor` parameter declared as types[k]."""
    head, sep, body = graph.partition("):\n")
    parts = head.split(" : Tensor")
    if len(parts) - 1 != len(types):
        return None
    text = parts[0]
    for t, rest in zip(types, parts[1:]):
        text += " : " + t + rest
    return text + sep + body


def decl(name, sizes):
    return "%s(%s)" % (name, ", ".join(str(s) for s in sizes))


def main():
    os.makedirs(OUT, exist_ok=True)
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "opinfo", "*.txt")))
    seen, written, k = set(), 0, 0
    for path in files:
        op = os.path.basename(path)[:-4]
        ss = samples(path)
        if not ss:
            continue
        other = OTHER[k % len(OTHER)]
        k += 1
        seeds = []
        f32 = [x for x in ss if x[0] == "f32"] or ss
        first = max(f32, key=lambda x: sum(len(s) for _, s in x[2]))  # the most dims
        seeds.append(("typed", first[1], [decl(NAMES.get(d, "Float"), s) for d, s in first[2]]))
        alt = []
        for d, s in first[2]:
            name = NAMES.get(d, "Float")
            if d == "f32":
                name = other
            elif d == "i64" and other in INTS:
                name = "Int"
            alt.append(decl(name, s))
        seeds.append((other, first[1], alt))
        for tag in ("i64", "b"):
            for t, g, ins in ss:
                if t == tag:
                    seeds.append((tag, g, [decl(NAMES.get(d, "Float"), s) for d, s in ins]))
                    break
        for suffix, g, types in seeds:
            text = typed(g, types)
            if text is None or text in seen:
                continue
            seen.add(text)
            with open(os.path.join(OUT, "%s.%s.ir" % (op, suffix)), "w") as f:
                f.write(text)
            written += 1
    print("gen_run_seeds: %d seeds from %d OpInfo files" % (written, len(files)))


if __name__ == "__main__":
    main()
