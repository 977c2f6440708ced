#!/bin/sh
# scripts/bench_dist.sh BUILD_DIR: the data-parallel benchmarks of make bench
# under MPI=1 (issue 18): `kiln train --dist` on 1 and 2 ranks of one
# thread each (with and without KILN_DIST_PROGRESS_THREAD=1, and 1 rank of
# 2 threads, for comparison), for the MLP with
# --bucket-mb 0.25 and for the CNN, in eager mode; then the MLP in lazy
# mode (--sync step) on 1 and 2 ranks (LAZY_CFGS), whose overlap is that
# of the all-reduce nodes in the step's graph. Prints one line per run:
#   mlp_dist_samples_per_s ranks=2 threads=1  <samples/s>  overlap <pct>
# (samples/s of the training steps, all ranks together; overlap = 1 -
# waiting at the end of backward / all-reduce span, from the reducer;
# cpu: process CPU time per step, the mean over the ranks, and wait: the
# wall time per step blocked at the end of backward, from
# KILN_TRAIN_PHASES=1, Note [Step phases] in src/nn/phases.c).
# Each configuration runs REPS times (default 3), alternating, and the
# median is printed: the machine may be shared, so read ratios. MODELS
# (default "mlp cnn cnn/0.25") picks the eager models, "/X" adding
# --bucket-mb X (the CNN's 320 KiB are one bucket by default, all-reduced
# after the whole backward; at 0.25 fc1's gradients go first, during the
# convolutions' backward); LAZY_CFGS="" skips lazy.
B=${1:-build-mpi}
KILN=./$B/kiln
REPS=${REPS:-3}
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none"
T=$(mktemp -d /tmp/kiln-bench-dist.XXXXXX)
CFGS=${CFGS:-"1_1 2_1 2_1t 1_2"}  # ranks_threads, t: with the progress thread
LAZY_CFGS=${LAZY_CFGS-"1_1 2_1"}
MODELS=${MODELS:-"mlp cnn cnn/0.25"}
run() { # model[/bucket-mb] ranks threads steps progress-thread [mode] -> "samples overlap cpu wait"
  extra=""
  [ "$1" = mlp ] && extra="--bucket-mb 0.25"
  case $1 in */*) extra="--bucket-mb ${1#*/}";; esac
  [ -n "$6" ] && extra="$extra --mode $6 --sync step"
  KILN_TRAIN_PHASES=1 KILN_DIST_PROGRESS_THREAD=$5 OMP_NUM_THREADS=$3 $MPIRUN -np $2 \
    -x OMP_NUM_THREADS -x KILN_DIST_PROGRESS_THREAD -x KILN_TRAIN_PHASES \
    $KILN train --dist --model ${1%/*} --batch 128 \
    --steps $4 --limit-train 16384 --limit-test 100 --epochs 1 $extra > $T/out 2>&1 || {
    tail -3 $T/out >&2; echo "0 0 0 0"; return; }
  s=$(sed -n 's/^summary: .*(\([0-9]*\) samples\/s).*/\1/p' $T/out)
  o=$(sed -n 's/.*overlap \([0-9]*\)%.*/\1/p' $T/out)
  c=$(sed -n 's/^phases rank .* total \([0-9.]*\)\/.*/\1/p' $T/out |
      awk '{s += $1; n++} END {if (n) printf "%.2f", s / n; else print 0}')
  w=$(sed -n 's/^phases rank .* reducer, .* wait \([0-9.]*\) .*/\1/p' $T/out |
      awk '{s += $1; n++} END {if (n) printf "%.2f", s / n; else print 0}')
  echo "${s:-0} ${o:-0} ${c:-0} ${w:-0}"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for model in $MODELS; do
  steps=120
  [ ${model%/*} = cnn ] && steps=40
  f=$(echo $model | tr / _)
  for cfg in $CFGS; do :> $T/$f.$cfg; done
  for r in $(seq $REPS); do
    for cfg in $CFGS; do
      set -- $(echo $cfg | tr _ ' ')
      th=0
      case $2 in *t) th=1;; esac
      run $model $1 ${2%t} $steps $th >> $T/$f.$cfg
    done
  done
  for cfg in $CFGS; do
    set -- $(echo $cfg | tr _ ' ')
    sps=$(cut -d' ' -f1 $T/$f.$cfg | median)
    ov=$(cut -d' ' -f2 $T/$f.$cfg | median)
    cpu=$(cut -d' ' -f3 $T/$f.$cfg | median)
    wt=$(cut -d' ' -f4 $T/$f.$cfg | median)
    note=""
    case $2 in *t) note=" (progress thread)";; esac
    case $model in */*) note="$note (--bucket-mb ${model#*/})";; esac
    printf "%s_dist_samples_per_s ranks=%s threads=%s %10s  overlap %s%%  cpu %s ms/step/rank  wait %s ms/step%s\n" \
      ${model%/*} $1 ${2%t} $sps $ov $cpu $wt "$note"
  done
done
for cfg in $LAZY_CFGS; do :> $T/lazy.$cfg; done
for r in $(seq $REPS); do
  for cfg in $LAZY_CFGS; do
    set -- $(echo $cfg | tr _ ' ')
    run mlp $1 $2 120 0 lazy >> $T/lazy.$cfg
  done
done
for cfg in $LAZY_CFGS; do
  set -- $(echo $cfg | tr _ ' ')
  sps=$(cut -d' ' -f1 $T/lazy.$cfg | median)
  ov=$(cut -d' ' -f2 $T/lazy.$cfg | median)
  printf "mlp_dist_lazy_samples_per_s ranks=%s threads=%s %10s  overlap %s%%\n" $1 $2 $sps $ov
done
rm -rf $T
