/* tests/tools/test_kiln_cli_safety.c: the kiln command on hostile or
 * mistaken input (issue #20): an index that overflows int, a FIFO given as
 * a file, many runs of a big output, training that diverges to NaN, a data
 * file bigger than the limit. Each must end with a clear error (or bounded
 * memory), never hang, crash, or report success. Needs $KILN_BIN. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../nn/nn_fixture.h"
#include "kiln.h"
#include "test.h"

static const char *bin(void) {
  const char *b = getenv("KILN_BIN");
  if (!b || access(b, X_OK) != 0) {
    test_fail(__FILE__, __LINE__, "KILN_BIN is not set");
    return NULL;
  }
  return b;
}

/* /tmp/kiln-cli-<pid>.<ext>: per process, as parallel runs of the suite
 * (other worktrees) overwrote a shared /tmp/kiln-cli.err. */
static const char *cli_file(const char *ext) {
  static char p[2][64];
  char *q = p[ext[0] == 'e'];
  snprintf(q, sizeof p[0], "/tmp/kiln-cli-%d.%s", (int)getpid(), ext);
  return q;
}

/* Runs `kiln args` (stderr to a file, read into err); its exit status. */
static int kiln(const char *args, char *err, size_t cap) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "timeout 60 %s %s >%s 2>%s", bin(), args, cli_file("out"),
           cli_file("err"));
  int st = system(cmd);
  err[0] = 0;
  FILE *f = fopen(cli_file("err"), "r");
  if (f) {
    size_t n = fread(err, 1, cap - 1, f);
    err[n] = 0;
    fclose(f);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

static const char *add_one_ir = "graph(%x : Tensor):\n"
                                "  %one : int = prim::Constant[value=1]()\n"
                                "  %y : Tensor = aten::add(%x, %one, %one)\n"
                                "  return (%y)\n";

TEST(kiln_run_requires_grad_index_beyond_int_is_an_error) {
  if (!bin()) return;
  char err[2048];
  write_file("/tmp/kiln-cli.ir", add_one_ir);
  kiln_scope_begin();
  int64_t sh[1] = {4};
  CHECK(kiln_npy_save("/tmp/kiln-cli-x.npy", kiln_ones(1, sh, KILN_DTYPE_F32)) == 0);
  kiln_scope_end();
  int st = kiln("run /tmp/kiln-cli.ir /tmp/kiln-cli-x.npy --requires-grad 2147483648 --grad "
                "--out /tmp/kiln-cli-o",
                err, sizeof err);
  CHECK_EQ_INT(st, 2);
  CHECK_STR_CONTAINS(err, "--requires-grad");
  st = kiln("run /tmp/kiln-cli.ir /tmp/kiln-cli-x.npy --requires-grad 4294967297 --grad "
            "--out /tmp/kiln-cli-o",
            err, sizeof err);
  CHECK_EQ_INT(st, 2);
}

TEST(kiln_run_fifo_input_is_refused_not_waited_on) {
  if (!bin()) return;
  char err[2048];
  write_file("/tmp/kiln-cli.ir", add_one_ir);
  unlink("/tmp/kiln-cli-fifo.npy");
  CHECK(mkfifo("/tmp/kiln-cli-fifo.npy", 0600) == 0);
  int st = kiln("run /tmp/kiln-cli.ir /tmp/kiln-cli-fifo.npy --out /tmp/kiln-cli-o", err,
                sizeof err);
  CHECK_EQ_INT(st, 1);
  CHECK_STR_CONTAINS(err, "not a regular file (it is a FIFO)");
  st = kiln("run /tmp/kiln-cli-fifo.npy --out /tmp/kiln-cli-o", err, sizeof err);
  CHECK_EQ_INT(st, 1);
  CHECK_STR_CONTAINS(err, "not a regular file (it is a FIFO)");
  /* a directory of data whose image file is a FIFO */
  CHECK(system("rm -rf /tmp/kiln-cli-d && mkdir /tmp/kiln-cli-d && "
               "mkfifo /tmp/kiln-cli-d/train-images-idx3-ubyte.gz") == 0);
  st = kiln("train --data /tmp/kiln-cli-d --steps 1", err, sizeof err);
  CHECK_EQ_INT(st, 1);
  CHECK_STR_CONTAINS(err, "not a regular file (it is a FIFO)");
  unlink("/tmp/kiln-cli-fifo.npy");
  CHECK(system("rm -rf /tmp/kiln-cli-d") == 0);
}

TEST(kiln_run_many_runs_keep_only_the_last_outputs) {
  if (!bin()) return;
  char err[2048];
  write_file("/tmp/kiln-cli.ir", add_one_ir);
  kiln_scope_begin();
  int64_t sh[1] = {1 << 20}; /* 4 MiB of float32 per output */
  CHECK(kiln_npy_save("/tmp/kiln-cli-big.npy", kiln_ones(1, sh, KILN_DTYPE_F32)) == 0);
  kiln_scope_end();
  /* 100 runs: every call's outputs kept would be 400 MiB */
  int st = kiln("run /tmp/kiln-cli.ir /tmp/kiln-cli-big.npy --runs 100 --out /tmp/kiln-cli-o",
                err, sizeof err);
  CHECK_MSG(st == 0, "exit %d: %s", st, err);
  /* the peak RSS of that run alone, by /usr/bin/time (KiB) */
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           /* ASan's quarantine would keep freed outputs: make it small */
           "ASAN_OPTIONS=quarantine_size_mb=1 /usr/bin/time -f %%M -o /tmp/kiln-cli.rss %s run "
           "/tmp/kiln-cli.ir "
           "/tmp/kiln-cli-big.npy --runs 100 --out /tmp/kiln-cli-o >/dev/null 2>&1",
           bin());
  CHECK(system(cmd) == 0);
  char *rss = test_read_file("/tmp/kiln-cli.rss", NULL);
  long kib = rss ? atol(rss) : -1;
  free(rss);
  CHECK_MSG(kib > 0 && kib < 150 * 1024, "peak RSS %ld KiB", kib);
  kiln_scope_begin();
  kiln_tensor *y = kiln_npy_load("/tmp/kiln-cli-o/out0.npy");
  CHECK(y != NULL);
  if (y) {
    double v = 0;
    CHECK(kiln_item(kiln_select(y, 0, 12345), &v) == 0);
    CHECK_NEAR(v, 2.0, 0);
  }
  kiln_scope_end();
  CHECK(system("rm -rf /tmp/kiln-cli-o /tmp/kiln-cli-big.npy") == 0);
}

TEST(kiln_train_stops_at_the_first_nonfinite_loss) {
  if (!bin()) return;
  char dir[256], args[1024], err[4096];
  CHECK(nn_fixture_make(dir, sizeof dir, 256, 32, 7) == 0);
  const char *modes[3] = {"eager", "jit", "lazy"};
  for (int m = 0; m < 3; m++) {
    snprintf(args, sizeof args,
             "train --data %s --mode %s --lr 1e6 --epochs 1 --batch 32 --save %s/ck.st", dir,
             modes[m], dir);
    int st = kiln(args, err, sizeof err);
    CHECK_MSG(st == 1, "%s: exit %d", modes[m], st);
    CHECK_STR_CONTAINS(err, "the loss is");
    CHECK_STR_CONTAINS(err, "--nan-check off");
    snprintf(args, sizeof args, "%s/ck.st", dir);
    CHECK_MSG(access(args, F_OK) != 0, "%s: a checkpoint was saved", modes[m]);
  }
  /* --nan-check off: trains on, as before */
  snprintf(args, sizeof args, "train --data %s --lr 1e6 --epochs 1 --batch 32 --nan-check off",
           dir);
  CHECK_EQ_INT(kiln(args, err, sizeof err), 0);
  /* a sane rate trains and says where it saved */
  snprintf(args, sizeof args, "train --data %s --epochs 1 --batch 32 --save %s/ck.st", dir,
           dir);
  CHECK_EQ_INT(kiln(args, err, sizeof err), 0);
  char *out = test_read_file(cli_file("out"), NULL);
  CHECK_STR_CONTAINS(out, "saved ");
  free(out);
  nn_fixture_remove(dir);
}

TEST(kiln_train_data_file_over_the_limit_is_an_error) {
  if (!bin()) return;
  char dir[256], args[1024], err[4096];
  CHECK(nn_fixture_make(dir, sizeof dir, 64, 16, 8) == 0);
  /* 64 images of 28x28: 50 KB; a 1 MB limit passes, so the flag raises it */
  snprintf(args, sizeof args, "train --data %s --steps 1 --batch 32 --max-data-mb 1", dir);
  CHECK_EQ_INT(kiln(args, err, sizeof err), 0);
  /* a header claiming 2,000,000 images of 28x28 (1.5 GB) is refused up front */
  char path[512];
  snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
  unsigned char img[784] = {0};
  CHECK(nn_fixture_write_idx(path, true, 0x08, 3, (uint32_t[]){2000000, 28, 28}, img,
                             sizeof img) == 0);
  snprintf(args, sizeof args, "train --data %s --steps 1 --batch 32", dir);
  CHECK_EQ_INT(kiln(args, err, sizeof err), 1);
  CHECK_STR_CONTAINS(err, "more than the limit");
  nn_fixture_remove(dir);
}
