#!/bin/sh
# scripts/coverage.sh BUILD_DIR: after the instrumented suite ran (make
# coverage), collects the gcov counts with lcov into BUILD_DIR/coverage.info
# and prints line and branch coverage per layer (src/core ... src/nn,
# tools), for the src/nn readers (checkpoint, safetensors, npy, the IDX
# data loader, import, fileio) and overall (src/ and tools/).
set -e
dir=${1:-build-cov}
lcov --quiet --capture --directory "$dir" --base-directory . --rc lcov_branch_coverage=1 \
  --output-file "$dir/coverage.info" >"$dir/lcov.log" 2>&1 || { cat "$dir/lcov.log" >&2; exit 1; }
awk -v root="$(pwd)/" '
  function pct(a, b) { return b ? sprintf("%5.1f%%", 100 * a / b) : "     -" }
  function row(name, a, b, c, d) {
    printf "%-16s lines %s of %6d   branches %s of %6d\n", name, pct(a, b), b, pct(c, d), d
  }
  /^SF:/ { f = substr($0, 4); sub(root, "", f); n = split(f, p, "/");
           g = (p[1] == "src") ? "src/" p[2] : p[1];
           r = (f ~ /^src\/nn\/(checkpoint|safetensors|npy|data|import|fileio)\.c$/) }
  /^LF:/ { v = substr($0, 4); lf[g] += v; if (r) rlf += v }
  /^LH:/ { v = substr($0, 4); lh[g] += v; if (r) rlh += v }
  /^BRF:/ { v = substr($0, 5); bf[g] += v; if (r) rbf += v }
  /^BRH:/ { v = substr($0, 5); bh[g] += v; if (r) rbh += v }
  END {
    n = split("src/core src/ops src/autograd src/ir src/lazy src/passes src/exec src/dist src/nn tools", L, " ");
    for (i = 1; i <= n; i++) {
      g = L[i];
      row(g, lh[g], lf[g], bh[g], bf[g]);
      a += lh[g]; b += lf[g]; c += bh[g]; d += bf[g];
    }
    row("src/nn readers", rlh, rlf, rbh, rbf);
    row("overall", a, b, c, d);
  }
' "$dir/coverage.info"
