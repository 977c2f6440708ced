/* src/nn/phases.c: where a training step's time goes, phase by phase
 * (KILN_TRAIN_PHASES=1): process CPU time and wall clock of the data,
 * forward, backward, reduction, optimizer and loss phases of `kiln train`,
 * summed over the steps and printed per rank at the end, with the
 * reducer's own parts (Note [Step phases]).
 *
 * Note [Step phases]: a data-parallel step on N ranks should cost each
 * rank 1/N of one rank's step; what does not shrink with the per-rank
 * batch (the optimizer over all parameters, the bucket copies, per-op
 * fixed costs, the waits) is what this table shows. CPU time includes the
 * spinning of MPI waits (Note [Bounded waits] in src/dist/comm.c); wall
 * minus CPU is time another process had the core. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn.h"

static const char *const phase_names[NN_N_PHASES] = {"data", "forward", "backward", "reduce",
                                                     "optim", "loss"};

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void nn_phases_init(nn_phases *p) {
  memset(p, 0, sizeof *p);
  const char *e = getenv("KILN_TRAIN_PHASES");
  p->on = e && strcmp(e, "1") == 0;
}

void nn_phases_start(nn_phases *p) {
  if (!p->on) return;
  p->cpu0 = cpu_now();
  p->wall0 = nn_now();
}

void nn_phases_mark(nn_phases *p, int phase) {
  if (!p->on || phase < 0 || phase >= NN_N_PHASES) return;
  double c = cpu_now(), w = nn_now();
  p->cpu[phase] += c - p->cpu0;
  p->wall[phase] += w - p->wall0;
  p->cpu0 = c;
  p->wall0 = w;
}

void nn_phases_print(const nn_phases *p, FILE *f, int rank, int world, int64_t steps,
                     const kiln_dist_stats *ds) {
  if (!p->on || !f || steps <= 0) return;
  /* each line in one write: other ranks and stdout share the stream */
  char line[512];
  double n = (double)steps, tc = 0, tw = 0;
  int k = snprintf(line, sizeof line, "phases rank %d of %d, ms per step (cpu / wall):", rank,
                   world);
  for (int i = 0; i < NN_N_PHASES && k > 0 && k < (int)sizeof line; i++) {
    k += snprintf(line + k, sizeof line - (size_t)k, " %s %.3f/%.3f", phase_names[i],
                  1e3 * p->cpu[i] / n, 1e3 * p->wall[i] / n);
    tc += p->cpu[i];
    tw += p->wall[i];
  }
  fprintf(f, "%s total %.3f/%.3f\n", line, 1e3 * tc / n, 1e3 * tw / n);
  if (ds)
    fprintf(f,
            "phases rank %d reducer, ms per step (wall): hooks %.3f tests %.3f (%.1f per step) "
            "wait %.3f (cpu %.3f; side %.3f) divide %.3f all-reduce span %.3f\n",
            rank, 1e3 * ds->hook_seconds / n, 1e3 * ds->test_seconds / n,
            (double)ds->n_tests / n, 1e3 * ds->wait_seconds / n, 1e3 * ds->wait_cpu_seconds / n,
            1e3 * ds->flags_seconds / n, 1e3 * ds->divide_seconds / n, 1e3 * ds->comm_seconds / n);
  fflush(f);
}
