#!/bin/sh
# scripts/bench_dist.sh BUILD_DIR: the data-parallel benchmarks of make bench
# under MPI=1 (issue 18): `kiln train --dist` on 1 and 2 ranks of one
# thread each (and 1 rank of 2 threads, for comparison), for the MLP with
# --bucket-mb 0.25 and for the CNN, in eager mode. Prints one line per run:
#   mlp_dist_samples_per_s ranks=2 threads=1  <samples/s>  overlap <pct>
# (samples/s of the training steps, all ranks together; overlap = 1 -
# waiting at the end of backward / all-reduce span, from the reducer).
# Each configuration runs REPS times (default 3), alternating, and the
# median is printed: the machine may be shared, so read ratios.
B=${1:-build-mpi}
KILN=./$B/kiln
REPS=${REPS:-3}
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none"
T=$(mktemp -d /tmp/kiln-bench-dist.XXXXXX)
run() { # model ranks threads steps -> "samples overlap"
  extra=""
  [ "$1" = mlp ] && extra="--bucket-mb 0.25"
  OMP_NUM_THREADS=$3 $MPIRUN -np $2 -x OMP_NUM_THREADS $KILN train --dist --model $1 --batch 128 \
    --steps $4 --limit-train 16384 --limit-test 100 --epochs 1 $extra > $T/out 2>&1 || {
    tail -3 $T/out >&2; echo "0 0"; return; }
  s=$(sed -n 's/^summary: .*(\([0-9]*\) samples\/s).*/\1/p' $T/out)
  o=$(sed -n 's/.*overlap \([0-9]*\)%.*/\1/p' $T/out)
  echo "${s:-0} ${o:-0}"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for model in mlp cnn; do
  steps=120
  [ $model = cnn ] && steps=40
  for cfg in "1 1" "2 1" "1 2"; do :> $T/$model.$(echo $cfg | tr ' ' _); done
  for r in $(seq $REPS); do
    for cfg in "1 1" "2 1" "1 2"; do
      set -- $cfg
      run $model $1 $2 $steps >> $T/$model.$1_$2
    done
  done
  for cfg in "1 1" "2 1" "1 2"; do
    set -- $cfg
    sps=$(cut -d' ' -f1 $T/$model.$1_$2 | median)
    ov=$(cut -d' ' -f2 $T/$model.$1_$2 | median)
    printf "%s_dist_samples_per_s ranks=%s threads=%s %10s  overlap %s%%\n" $model $1 $2 $sps $ov
  done
done
rm -rf $T
