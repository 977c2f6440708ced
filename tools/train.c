/* tools/train.c: `kiln train` and `kiln eval`: their option tables
 * (tools/cli.h) filled into kiln_nn_train_opts, then kiln_nn_train /
 * kiln_nn_eval_checkpoint. The training logic lives in src/nn/train.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "kiln.h"

/* Values as parsed; copied into kiln_nn_train_opts after the checks. */
typedef struct train_args {
  const char *model, *mode, *optimizer, *schedule, *sync;
  const char *data, *save, *resume, *plot, *metrics, *graph, *weights, *nan_check, *anomaly;
  long long epochs, batch, steps, seed, limit_train, limit_test, threads, no_sync_steps, max_data_mb;
  double lr, momentum, bucket_mb, dist_timeout;
  bool dist;
} train_args;

static train_args ta;

/* One row per option; tools/cli.h says how to add one. */
static const cli_opt train_opts[] = {
    {"model", 0, CLI_CHOICE, &ta.model, "mlp|cnn|lstm", 0, "model (default mlp)"},
    {"graph", 0, CLI_IN_FILE, &ta.graph, "G.ir", 0,
     "train a model exported by tools/kiln-export (with --weights)"},
    {"weights", 0, CLI_IN_FILE, &ta.weights, "W.safetensors", 0, "the --graph model's weights"},
    {"mode", 0, CLI_CHOICE, &ta.mode, "eager|jit|lazy", 0, "how steps run (default eager)"},
    {"epochs", 'e', CLI_INT, &ta.epochs, "N", 1,
     "total epochs (default 2; a resumed run continues to N)"},
    {"batch", 'b', CLI_INT, &ta.batch, "B", 1, "batch size (default 64)"},
    {"lr", 0, CLI_NUM, &ta.lr, "X", 0, "learning rate (default sgd 0.05, adam 0.001)"},
    {"optimizer", 0, CLI_CHOICE, &ta.optimizer, "sgd|adam|adamw", 0,
     "optimizer (default sgd with momentum 0.9)"},
    {"momentum", 0, CLI_NUM, &ta.momentum, "X", 0, "SGD momentum (default 0.9)"},
    {"schedule", 0, CLI_CHOICE, &ta.schedule, "none|step|cosine", 0,
     "learning-rate schedule (default cosine)"},
    {"seed", 0, CLI_INT, &ta.seed, "S", 0, "seed of initialisation and shuffling (default 0)"},
    {"data", 0, CLI_STR, &ta.data, "DIR", 0, "MNIST-format data (default: Debian's)"},
    {"save", 0, CLI_OUT_FILE, &ta.save, "FILE", 0, "write a checkpoint (safetensors) at the end"},
    {"resume", 0, CLI_IN_FILE, &ta.resume, "FILE", 0, "continue from a checkpoint"},
    {"plot", 0, CLI_OUT_FILE, &ta.plot, "FILE.svg", 0, "loss and accuracy curves"},
    {"metrics", 0, CLI_OUT_FILE, &ta.metrics, "FILE.json", 0, "loss and counters per step"},
    {"steps", 0, CLI_INT, &ta.steps, "N", 1, "stop after N steps in total"},
    {"sync", 0, CLI_CHOICE, &ta.sync, "step|phases", 0,
     "lazy: one mark_step per step, or three"},
    {"limit-train", 0, CLI_INT, &ta.limit_train, "N", 1, "use only the first N training images"},
    {"limit-test", 0, CLI_INT, &ta.limit_test, "N", 1, "use only the first N test images"},
    {"nan-check", 0, CLI_CHOICE, &ta.nan_check, "on|off", 0,
     "stop at the first non-finite loss (default on)"},
    {"detect-anomaly", 0, CLI_CHOICE, &ta.anomaly, "on|off", 0,
     "name the op that made the first NaN/Inf (default off)"},
    {"max-data-mb", 0, CLI_INT, &ta.max_data_mb, "N", 1,
     "largest decompressed data file (default 1024)"},
    {"threads", 0, CLI_INT, &ta.threads, "N", 1,
     "threads (default KILN_NUM_THREADS, OMP_NUM_THREADS or the available cores; never more)"},
    {"dist", 0, CLI_FLAG, &ta.dist, NULL, 0,
     "data parallel under mpirun (make MPI=1): --batch is the global batch"},
    {"bucket-mb", 0, CLI_NUM, &ta.bucket_mb, "X", 0, "--dist: gradient bucket cap in MiB (default 25)"},
    {"no-sync-steps", 0, CLI_INT, &ta.no_sync_steps, "K", 1,
     "accumulate K batches per optimizer step (reduce on the Kth)"},
    {"dist-timeout", 0, CLI_NUM, &ta.dist_timeout, "S", 0,
     "--dist: seconds any wait may take (default 300)"},
};

static const cli_cmd train_cmd = {
    "train", NULL, "Trains a model on Fashion-MNIST and evaluates it after every epoch.",
    "Per-epoch lines go to stdout; on a terminal a progress line (fitted to its width)\n"
    "is drawn on stderr. Output paths are checked before training starts.\n",
    train_opts, sizeof train_opts / sizeof *train_opts, 0, 0};

int kiln_cmd_train(int argc, char **argv) {
  kiln_nn_train_opts o;
  kiln_nn_train_opts_default(&o);
  ta = (train_args){.model = o.model, .epochs = o.epochs, .batch = o.batch, .lr = o.lr,
                    .optimizer = o.optimizer, .momentum = o.momentum, .schedule = o.schedule,
                    .seed = (long long)o.seed};
  ta.mode = kiln_nn_mode_name(o.mode);
  char **pos;
  int n_pos, rc = cli_parse(&train_cmd, argc, argv, &pos, &n_pos);
  if (rc == CLI_HELP) return 0;
  if (rc != CLI_OK) return 2;
  if (ta.epochs > 1000000) return cli_bad(&train_cmd, "--epochs: at most 1000000");
  if (!ta.graph != !ta.weights) return cli_bad(&train_cmd, "--graph and --weights go together");
  if (ta.threads > 1 << 16) return cli_bad(&train_cmd, "--threads: at most 65536");
  if (ta.threads) kiln_set_num_threads((int)ta.threads); /* capped to the available cores */
  if (ta.max_data_mb > ((long long)1 << 40)) return cli_bad(&train_cmd, "--max-data-mb: too large");
  if (ta.max_data_mb) kiln_data_set_max_bytes((size_t)ta.max_data_mb << 20);
  if (ta.anomaly) kiln_set_anomaly_enabled(strcmp(ta.anomaly, "on") == 0);
  o.model = ta.model;
  o.mode = (kiln_nn_mode)kiln_nn_mode_parse(ta.mode);
  o.epochs = (int)ta.epochs;
  o.batch = ta.batch;
  o.lr = ta.lr;
  o.optimizer = ta.optimizer;
  o.momentum = ta.momentum;
  o.schedule = ta.schedule;
  o.seed = (uint64_t)ta.seed;
  o.data_dir = ta.data;
  o.save_path = ta.save;
  o.resume_path = ta.resume;
  o.plot_path = ta.plot;
  o.metrics_path = ta.metrics;
  o.max_steps = ta.steps;
  o.sync_phases = ta.sync && strcmp(ta.sync, "phases") == 0;
  o.train_limit = ta.limit_train;
  o.test_limit = ta.limit_test;
  o.no_nan_check = ta.nan_check && strcmp(ta.nan_check, "off") == 0;
  o.graph_path = ta.graph;
  o.weights_path = ta.weights;
  o.dist = ta.dist;
  o.bucket_mb = ta.bucket_mb;
  o.dist_timeout = ta.dist_timeout;
  o.no_sync_steps = ta.no_sync_steps;
  o.out = stdout;
  o.progress = isatty(STDERR_FILENO);
  kiln_nn_train_result r;
  kiln_status st = kiln_nn_train(&o, &r);
  kiln_nn_train_result_free(&r);
  if (st < 0) {
    /* under --dist an exit without finalising makes mpirun end the job */
    if (o.dist && kiln_dist_world_size() > 1)
      fprintf(stderr, "kiln train: rank %d: %s\n", kiln_dist_rank(), kiln_last_error());
    else fprintf(stderr, "kiln train: %s\n", kiln_last_error());
    return 1;
  }
  if (o.dist) kiln_dist_finalize();
  return 0;
}

static const char *eval_data;
static long long eval_limit;
static const cli_opt eval_opts[] = {
    {"data", 0, CLI_STR, &eval_data, "DIR", 0, "MNIST-format data (default: Debian's)"},
    {"limit", 0, CLI_INT, &eval_limit, "N", 1, "use only the first N test images"},
};
static const cli_cmd eval_cmd = {
    "eval", "CHECKPOINT", "Evaluates a checkpoint (kiln's, or a PyTorch state_dict in "
                          "safetensors) on the test set.",
    NULL, eval_opts, sizeof eval_opts / sizeof *eval_opts, 1, 1};

int kiln_cmd_eval(int argc, char **argv) {
  char **pos;
  int n_pos, rc = cli_parse(&eval_cmd, argc, argv, &pos, &n_pos);
  if (rc == CLI_HELP) return 0;
  if (rc != CLI_OK) return 2;
  const char *path = pos[0];
  kiln_checkpoint_info info;
  double loss = 0, acc = 0;
  if (kiln_checkpoint_read_info(path, &info) < 0 ||
      kiln_nn_eval_checkpoint(path, eval_data, eval_limit, &loss, &acc) < 0) {
    fprintf(stderr, "kiln eval: %s\n", kiln_last_error());
    return 1;
  }
  if (info.plain)
    fprintf(stderr, "kiln eval: notice: %s is a plain state_dict (no kiln metadata, no CRC to "
                    "verify); loaded as the %s by PyTorch's names, shapes checked\n",
            path, info.model);
  printf("%s: model %s, step %lld, epoch %lld\n", path, info.model, (long long)info.step,
         (long long)info.epoch);
  printf("test_loss=%.4f\n", loss);
  printf("test_accuracy=%.4f\n", acc);
  return 0;
}
