/* tests/tools/test_cli.c: the `kiln` command line, table-driven: every
 * subcommand's -h/--help (and `kiln help CMD`) exits 0 with its usage on
 * stdout; each bad command line exits 2 (1 for work that fails) with
 * exactly ONE line on stderr naming what is wrong, and nothing on stdout,
 * before any work starts (output paths included). Needs $KILN_BIN. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define IR "tests/data/ir/addmm_scaled.ir"

typedef struct cli_case {
  const char *args;
  int status;
  const char *reason; /* substring of the one stderr line */
} cli_case;

static const cli_case bad[] = {
    {"", 2, "usage: kiln COMMAND"},
    {"frobnicate", 2, "unknown command 'frobnicate'"},
    {"help frobnicate", 2, "unknown command 'frobnicate'"},
    {"train --epochs", 2, "--epochs needs a value"},
    {"train --epochs=x", 2, "--epochs: expected an integer, got 'x'"},
    {"train --epochs=0", 2, "--epochs: must be at least 1, got 0"},
    {"train --ep 0", 2, "--epochs: must be at least 1"},        /* abbreviation */
    {"train -e -3", 2, "--epochs: must be at least 1, got -3"}, /* short, negative */
    {"train --batch 1.5", 2, "--batch: expected an integer, got '1.5'"},
    {"train --limit 5", 2, "'--limit' is ambiguous"},
    {"train --mode fast", 2, "--mode: expected one of eager|jit|lazy, got 'fast'"},
    {"train --model=resnet", 2, "--model: expected one of mlp|cnn|lstm"},
    {"train --optimizer rmsprop", 2, "--optimizer: expected one of sgd|adam|adamw"},
    {"train --schedule linear", 2, "--schedule: expected one of none|step|cosine"},
    {"train --sync sometimes", 2, "--sync: expected one of step|phases"},
    {"train --lr -1", 2, "--lr: must be at least 0, got -1"},
    {"train --lr=nan", 2, "--lr: expected a number, got 'nan'"},
    {"train --momentum x", 2, "--momentum: expected a number"},
    {"train --seed -1", 2, "--seed: must be at least 0"},
    {"train --steps 0", 2, "--steps: must be at least 1"},
    {"train --save /nonexistent-dir/m.safetensors", 2, "--save: directory '/nonexistent-dir'"},
    {"train --plot /tmp", 2, "--plot: '/tmp' is a directory"},
    {"train --metrics /nonexistent-dir/m.json", 2, "--metrics: directory '/nonexistent-dir'"},
    {"train --resume /nonexistent.safetensors", 2, "--resume: '/nonexistent.safetensors'"},
    {"train --data", 2, "--data needs a value"},
    {"train --data=", 2, "--data: empty value"},
    {"train extra", 2, "unexpected argument 'extra'"},
    {"train --grad", 2, "unknown option '--grad'"},
    {"train -x", 2, "unknown option '-x'"},
    {"run", 2, "expected GRAPH.ir"},
    {"run " IR, 2, "--out DIR is required"},
    {"run " IR " --out /etc/passwd", 2, "--out: '/etc/passwd' is not a directory"},
    {"run " IR " --out /nonexistent-dir/sub", 2, "--out: directory '/nonexistent-dir'"},
    {"run " IR " --out /tmp/kiln-cli --runs 0", 2, "--runs: must be at least 1, got 0"},
    {"run " IR " --out /tmp/kiln-cli --requires-grad a", 2, "--requires-grad: expected indices"},
    {"run " IR " --out /tmp/kiln-cli --phases zz", 2, "--phases: expected CALLS:I,J"},
    {"run " IR " --out=/tmp/kiln-cli --grad=1", 2, "--grad takes no value"},
    {"run " IR " --out /tmp/kiln-cli --stats /nonexistent-dir/s.json", 2, "--stats: directory"},
    {"run /nonexistent.ir --out /tmp/kiln-cli", 1, "/nonexistent.ir"},
    {"run " IR " --out /tmp/kiln-cli", 1, "takes 3 inputs, 0 given"},
    {"ir", 2, "expected GRAPH.ir"},
    {"ir a b", 2, "unexpected argument 'b'"},
    {"eval", 2, "expected CHECKPOINT"},
    {"eval a b", 2, "unexpected argument 'b'"},
    {"eval --limit 0 x", 2, "--limit: must be at least 1"},
    {"eval /nonexistent.safetensors", 1, "cannot open"},
    {"help a b", 2, "at most one COMMAND"},
};

static const char *const helps[] = {
    "-h", "--help", "help", "help run", "help ir", "help train", "help eval", "help bench",
    "run -h", "run --help", "ir --help", "train -h", "train --help", "eval --help",
    "bench --help", "train --epochs 3 --help", "--version",
};

/* Runs kiln with args; returns the exit status, stdout and stderr. */
static int run_kiln(const char *bin, const char *args, char *out, size_t n_out, char *err,
                    size_t n_err) {
  char cmd[1024], po[64], pe[64];
  /* per process: make test and make test SAN=1 may run side by side */
  snprintf(po, sizeof po, "/tmp/kiln-cli-%d.out", (int)getpid());
  snprintf(pe, sizeof pe, "/tmp/kiln-cli-%d.err", (int)getpid());
  snprintf(cmd, sizeof cmd, "%s %s >%s 2>%s", bin, args, po, pe);
  int st = system(cmd);
  char *o = test_read_file(po, NULL), *e = test_read_file(pe, NULL);
  remove(po);
  remove(pe);
  snprintf(out, n_out, "%s", o ? o : "");
  snprintf(err, n_err, "%s", e ? e : "");
  free(o);
  free(e);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

TEST(cli_bad_command_lines_one_line_reason) {
  const char *bin = getenv("KILN_BIN");
  if (!bin || access(bin, X_OK) != 0) {
    test_fail(__FILE__, __LINE__, "KILN_BIN is not set");
    return;
  }
  static char out[65536], err[65536];
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int st = run_kiln(bin, bad[i].args, out, sizeof out, err, sizeof err);
    CHECK_MSG(st == bad[i].status, "'kiln %s' exited %d, expected %d", bad[i].args, st,
              bad[i].status);
    CHECK_MSG(strstr(err, bad[i].reason) != NULL, "'kiln %s': stderr '%s' lacks '%s'",
              bad[i].args, err, bad[i].reason);
    if (bad[i].args[0]) /* bare `kiln` prints the command list */
      CHECK_MSG(count_lines(err) == 1, "'kiln %s': %d lines on stderr: %s", bad[i].args,
                count_lines(err), err);
    CHECK_MSG(out[0] == 0, "'kiln %s' wrote to stdout: %s", bad[i].args, out);
  }
  test_note("%zu bad command lines", sizeof bad / sizeof *bad);
  if (system("rm -rf /tmp/kiln-cli") != 0) test_fail(__FILE__, __LINE__, "cleanup");
}

TEST(cli_every_help_exits_zero) {
  const char *bin = getenv("KILN_BIN");
  if (!bin || access(bin, X_OK) != 0) {
    test_fail(__FILE__, __LINE__, "KILN_BIN is not set");
    return;
  }
  static char out[65536], err[65536];
  for (size_t i = 0; i < sizeof helps / sizeof *helps; i++) {
    int st = run_kiln(bin, helps[i], out, sizeof out, err, sizeof err);
    CHECK_MSG(st == 0, "'kiln %s' exited %d (%s)", helps[i], st, err);
    CHECK_MSG(err[0] == 0, "'kiln %s' wrote to stderr: %s", helps[i], err);
    const char *want = strstr(helps[i], "version") ? "kiln " : "usage: kiln";
    CHECK_MSG(strncmp(out, want, strlen(want)) == 0, "'kiln %s' printed '%.60s'", helps[i], out);
    if (strstr(helps[i], "train")) CHECK_STR_CONTAINS(out, "--limit-train N");
  }
  /* --opt=value and abbreviations reach the job: one step of a tiny run */
  int st = run_kiln(bin, "train --steps=1 --limit-tr=64 --limit-te 64 --ep 1 --optim=sgd", out,
                    sizeof out, err, sizeof err);
  CHECK_MSG(st == 0, "train with --opt=value and abbreviations exited %d: %s", st, err);
  CHECK_STR_CONTAINS(out, "64 training and 64 test images");
  CHECK_STR_CONTAINS(out, "summary: 1 steps");
}
