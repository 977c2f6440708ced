/* tools/train.c: `kiln train` and `kiln eval`: parse options into
 * kiln_nn_train_opts and run kiln_nn_train / kiln_nn_eval_checkpoint. The
 * training logic lives in src/nn/train.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "kiln.h"

static int train_usage(FILE *f) {
  fprintf(f,
          "usage: kiln train [options]\n"
          "  --model mlp|cnn|lstm      model (default mlp)\n"
          "  --mode eager|jit|lazy     how steps run (default eager)\n"
          "  --epochs N                total epochs (default 2; a resumed run continues to N)\n"
          "  --batch B                 batch size (default 64)\n"
          "  --lr X                    learning rate (default sgd 0.05, adam 0.001)\n"
          "  --optimizer sgd|adam|adamw  (default sgd with momentum 0.9)\n"
          "  --momentum X              SGD momentum (default 0.9)\n"
          "  --schedule none|step|cosine  learning-rate schedule (default cosine)\n"
          "  --seed S                  seed of initialisation and shuffling (default 0)\n"
          "  --data DIR                MNIST-format data (default %s)\n"
          "  --save FILE               write a checkpoint (safetensors) at the end\n"
          "  --resume FILE             continue from a checkpoint\n"
          "  --plot FILE.svg           loss and accuracy curves\n"
          "  --metrics FILE.json       loss and counters per step\n"
          "  --steps N                 stop after N steps in total\n"
          "  --sync step|phases        lazy: one mark_step per step, or three\n"
          "  --limit-train N, --limit-test N  use only the first N images\n"
          "  --nan-check on|off        stop at the first non-finite loss (default on)\n"
          "  --detect-anomaly on|off   name the op that made the first NaN/Inf (default off)\n"
          "  --max-data-mb N           largest decompressed data file (default 1024)\n",
          kiln_data_default_dir());
  return f == stderr ? 2 : 0;
}

static int bad_value(const char *opt, const char *v) {
  fprintf(stderr, "kiln train: bad value '%s' for %s\n", v, opt);
  return 2;
}

static int parse_int(const char *opt, const char *v, long long min, long long *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (!*v || *end || errno || x < min) return bad_value(opt, v);
  *out = x;
  return 0;
}

int kiln_cmd_train(int argc, char **argv) {
  kiln_nn_train_opts o;
  kiln_nn_train_opts_default(&o);
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return train_usage(stdout);
    if (strncmp(a, "--", 2) != 0 || i + 1 >= argc) {
      fprintf(stderr, "kiln train: %s '%s'\n", i + 1 >= argc && strncmp(a, "--", 2) == 0
                                                  ? "missing value for"
                                                  : "unexpected argument",
              a);
      return train_usage(stderr);
    }
    const char *v = argv[++i];
    long long n = 0;
    char *end;
    if (strcmp(a, "--model") == 0) o.model = v;
    else if (strcmp(a, "--mode") == 0) {
      int m = kiln_nn_mode_parse(v);
      if (m < 0) return bad_value(a, v);
      o.mode = (kiln_nn_mode)m;
    } else if (strcmp(a, "--epochs") == 0) {
      if (parse_int(a, v, 1, &n)) return 2;
      o.epochs = (int)n;
    } else if (strcmp(a, "--batch") == 0) {
      if (parse_int(a, v, 1, &n)) return 2;
      o.batch = n;
    } else if (strcmp(a, "--steps") == 0) {
      if (parse_int(a, v, 1, &n)) return 2;
      o.max_steps = n;
    } else if (strcmp(a, "--seed") == 0) {
      if (parse_int(a, v, 0, &n)) return 2;
      o.seed = (uint64_t)n;
    } else if (strcmp(a, "--limit-train") == 0) {
      if (parse_int(a, v, 1, &n)) return 2;
      o.train_limit = n;
    } else if (strcmp(a, "--limit-test") == 0) {
      if (parse_int(a, v, 1, &n)) return 2;
      o.test_limit = n;
    } else if (strcmp(a, "--lr") == 0 || strcmp(a, "--momentum") == 0) {
      double x = strtod(v, &end);
      if (!*v || *end || !(x >= 0)) return bad_value(a, v);
      if (a[2] == 'l') o.lr = x;
      else o.momentum = x;
    } else if (strcmp(a, "--nan-check") == 0 || strcmp(a, "--detect-anomaly") == 0) {
      bool on = strcmp(v, "on") == 0;
      if (!on && strcmp(v, "off") != 0) return bad_value(a, v);
      if (a[2] == 'n') o.no_nan_check = !on;
      else kiln_set_anomaly_enabled(on);
    } else if (strcmp(a, "--max-data-mb") == 0) {
      if (parse_int(a, v, 1, &n) || n > ((long long)1 << 40)) return n ? bad_value(a, v) : 2;
      kiln_data_set_max_bytes((size_t)n << 20);
    } else if (strcmp(a, "--optimizer") == 0) o.optimizer = v;
    else if (strcmp(a, "--schedule") == 0) o.schedule = v;
    else if (strcmp(a, "--data") == 0) o.data_dir = v;
    else if (strcmp(a, "--save") == 0) o.save_path = v;
    else if (strcmp(a, "--resume") == 0) o.resume_path = v;
    else if (strcmp(a, "--plot") == 0) o.plot_path = v;
    else if (strcmp(a, "--metrics") == 0) o.metrics_path = v;
    else if (strcmp(a, "--sync") == 0) {
      if (strcmp(v, "step") != 0 && strcmp(v, "phases") != 0) return bad_value(a, v);
      o.sync_phases = v[0] == 'p';
    } else {
      fprintf(stderr, "kiln train: unknown option %s\n", a);
      return train_usage(stderr);
    }
  }
  o.out = stdout;
  o.progress = isatty(STDERR_FILENO);
  kiln_nn_train_result r;
  kiln_status rc = kiln_nn_train(&o, &r);
  kiln_nn_train_result_free(&r);
  if (rc < 0) {
    fprintf(stderr, "kiln: %s\n", kiln_last_error());
    return 1;
  }
  return 0;
}

int kiln_cmd_eval(int argc, char **argv) {
  const char *path = NULL, *dir = NULL;
  long long limit = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) dir = argv[++i];
    else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
      if (parse_int("--limit", argv[++i], 1, &limit)) return 2;
    } else if (argv[i][0] != '-' && !path) path = argv[i];
    else {
      fprintf(stderr, "usage: kiln eval CHECKPOINT [--data DIR] [--limit N]\n");
      return 2;
    }
  }
  if (!path) {
    fprintf(stderr, "usage: kiln eval CHECKPOINT [--data DIR] [--limit N]\n");
    return 2;
  }
  kiln_checkpoint_info info;
  double loss = 0, acc = 0;
  if (kiln_checkpoint_read_info(path, &info) < 0 ||
      kiln_nn_eval_checkpoint(path, dir, limit, &loss, &acc) < 0) {
    fprintf(stderr, "kiln: %s\n", kiln_last_error());
    return 1;
  }
  printf("%s: model %s, step %lld, epoch %lld\n", path, info.model, (long long)info.step,
         (long long)info.epoch);
  printf("test_loss=%.4f\n", loss);
  printf("test_accuracy=%.4f\n", acc);
  return 0;
}
