#!/bin/sh
# scripts/coverage.sh BUILD_DIR: after the instrumented suite ran (make
# coverage), collects the gcov counts with lcov into BUILD_DIR/coverage.info
# and prints line and branch coverage per layer (src/core ... src/nn,
# tools), for the src/nn readers (checkpoint, safetensors, npy, the IDX
# data loader, import, fileio) and overall (src/ and tools/).
set -e
dir=${1:-build-cov}
# a zero baseline of every object (--initial) merged with the counts, so
# files the suite never reached count as uncovered rather than absent
rc="--rc lcov_branch_coverage=1"
{ lcov --capture --initial --directory "$dir" --base-directory . $rc --output-file "$dir/base.info" &&
  lcov --capture --directory "$dir" --base-directory . $rc --output-file "$dir/run.info" &&
  lcov -a "$dir/base.info" -a "$dir/run.info" $rc --output-file "$dir/coverage.info"; } \
  >"$dir/lcov.log" 2>&1 || { cat "$dir/lcov.log" >&2; exit 1; }
# Counted from the DA (line) and BRDA (branch) records, each line or
# branch once however many records name its file (headers appear once per
# object that includes them): covered if any run reached it.
awk -v root="$(pwd)/" '
  function pct(a, b) { return b ? sprintf("%5.1f%%", 100 * a / b) : "     -" }
  function row(name, a, b, c, d) {
    printf "%-16s lines %s of %6d   branches %s of %6d\n", name, pct(a, b), b, pct(c, d), d
  }
  /^SF:/ { f = substr($0, 4); sub(root, "", f); n = split(f, p, "/");
           g = (p[1] == "src") ? "src/" p[2] : p[1];
           r = (f ~ /^src\/nn\/(checkpoint|safetensors|npy|data|import|fileio)\.c$/) }
  /^DA:/ { split(substr($0, 4), a, ","); k = f ":" a[1];
           if (!(k in line)) { line[k] = 0; lf[g]++; if (r) rlf++ }
           if (a[2] > 0 && !line[k]) { line[k] = 1; lh[g]++; if (r) rlh++ } }
  /^BRDA:/ { split(substr($0, 6), a, ","); k = f ":" a[1] ":" a[2] ":" a[3];
             if (!(k in br)) { br[k] = 0; bf[g]++; if (r) rbf++ }
             if (a[4] != "-" && a[4] > 0 && !br[k]) { br[k] = 1; bh[g]++; if (r) rbh++ } }
  END {
    n = split("src/core src/ops src/autograd src/ir src/lazy src/passes src/exec src/dist src/nn tools", L, " ");
    for (i = 1; i <= n; i++) {
      g = L[i];
      row(g, lh[g], lf[g], bh[g], bf[g]);
      a1 += lh[g]; b1 += lf[g]; c1 += bh[g]; d1 += bf[g];
    }
    row("src/nn readers", rlh, rlf, rbh, rbf);
    row("overall", a1, b1, c1, d1);
  }
' "$dir/coverage.info"
