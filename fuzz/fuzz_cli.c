/* fuzz/fuzz_cli.c: libFuzzer target for the `kiln` command line. The
 * input is split into an argument vector at NULs and newlines and given
 * to the command's own entry point (tools/kiln.c's main, included here
 * under another name) for `run`, `ir`, `eval`, `help` and `--version`;
 * for `train` only its option table is parsed (cli_parse with train_cmd:
 * never a real training). Every call must return an exit status, never
 * crash or trip a sanitizer. It works in a private temporary directory
 * (entered for each call) holding two small graphs (g.ir: add, l.ir: linear), .npy inputs (a.npy
 * [2,3], b.npy [3]) and a small checkpoint (c.ckpt); arguments holding a
 * '/' are skipped (no file outside it is read or written), as are numbers
 * of more than 3 digits (--runs 10^6 is a slow program, not a bug).
 * stdout and stderr go to /dev/null (libFuzzer and the sanitizers keep
 * their own descriptor 2). Single allocations above 64 MiB fail. Run with
 * `make fuzz` (FUZZ_OOM=1: fuzz_oom.h). */
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "kiln.h"
#include "fuzz_oom.h"

int kiln_tool_main(int argc, char **argv);
#define main kiln_tool_main
#include "../tools/kiln.c"
#undef main
#include "../tools/cli.c"
#include "../tools/train.c"


/* bench is not linked into this target (its help is the only way here) */
int kiln_bench_main(int argc, char **argv) { return 0; }

#define MAX_ARGS 64

static char dir[64];
static int home = -1; /* the fuzzer's directory (its corpus paths are relative) */

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  return remove(p);
}

static void cleanup(void) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static const char G_ADD[] =
    "graph(%x.1 : Tensor,\n      %y.1 : Tensor):\n"
    "  %4 : int = prim::Constant[value=1]()\n"
    "  %5 : Tensor = aten::add(%x.1, %y.1, %4)\n  return (%5)\n";
static const char G_LINEAR[] =
    "graph(%x.1 : Tensor,\n      %w.1 : Tensor,\n      %b.1 : Tensor):\n"
    "  %6 : Tensor = aten::linear(%x.1, %w.1, %b.1)\n  return (%6)\n";

static void put(const char *name, const char *text) {
  FILE *f = fopen(name, "w");
  if (!f || fputs(text, f) < 0 || fclose(f) != 0) abort();
}

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/kiln-fuzz-cli-XXXXXX");
  home = open(".", O_RDONLY | O_DIRECTORY);
  if (home < 0 || !mkdtemp(dir) || chdir(dir) != 0) abort();
  atexit(cleanup);
  put("g.ir", G_ADD);
  put("l.ir", G_LINEAR);
  kiln_generator *g = kiln_generator_new(3);
  kiln_nn_module *m = kiln_nn_module_new();
  if (!g || !m || !kiln_nn_linear_new(m, "fc", 3, 2, true, g)) abort();
  kiln_scope_begin();
  kiln_tensor *a = kiln_randn(2, (int64_t[]){2, 3}, KILN_DTYPE_F32, g);
  kiln_tensor *b = kiln_randn(1, (int64_t[]){3}, KILN_DTYPE_F32, g);
  kiln_checkpoint_info info = {.lr = 0.1};
  if (!a || !b || kiln_npy_save("a.npy", a) < 0 || kiln_npy_save("b.npy", b) < 0 ||
      kiln_checkpoint_save("c.ckpt", m, NULL, &info) < 0)
    abort();
  kiln_scope_end();
  kiln_nn_module_free(m);
  kiln_generator_free(g);
  FILE *null_out = fopen("/dev/null", "w");
  if (!null_out) abort();
  stdout = null_out; /* the FILE streams only: fd 2 stays the fuzzer's */
  stderr = null_out;
  if (fchdir(home) != 0) abort();
}

/* Arguments the harness refuses: a path out of the directory, a long number. */
static bool skipped(const char *a) {
  if (strchr(a, '/')) return true;
  for (int run = 0; *a; a++)
    if ((run = *a >= '0' && *a <= '9' ? run + 1 : 0) > 3) return true;
  return false;
}

static int fuzz_one(const uint8_t *data, size_t size) {
  if (!dir[0]) setup();
  if (size > 1024) return 0;
  char *buf = malloc(size + 1), *argv[MAX_ARGS + 2];
  if (!buf) return 0;
  memcpy(buf, data, size);
  buf[size] = '\0';
  int argc = 0;
  argv[argc++] = "kiln";
  for (char *p = buf, *end = buf + size; p <= end && argc <= MAX_ARGS; p++) {
    char *q = p;
    while (q < end && *q != '\n' && *q != '\0') q++;
    *q = '\0';
    if (skipped(p)) goto out;
    argv[argc++] = p;
    p = q;
  }
  if (argc > MAX_ARGS) goto out;
  argv[argc] = NULL;
  /* the commands' parsed values are static: one call per process in kiln */
  memset(&ra, 0, sizeof ra);
  memset(&ta, 0, sizeof ta);
  eval_data = NULL;
  eval_limit = 0;
  if (chdir(dir) != 0) abort();
  core_alloc_limit((size_t)64 << 20);
  if (argc >= 2 && strcmp(argv[1], "train") == 0) {
    char **pos;
    int n_pos;
    (void)cli_parse(&train_cmd, argc - 1, argv + 1, &pos, &n_pos);
  } else if (argc >= 2 && strcmp(argv[1], "bench") != 0) {
    (void)kiln_tool_main(argc, argv);
  }
  core_alloc_limit(0);
  fflush(stdout);
  if (fchdir(home) != 0) abort();
out:
  free(buf);
  return 0;
}
