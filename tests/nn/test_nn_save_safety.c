/* tests/nn/test_nn_save_safety.c: saving and reading checkpoints at the
 * edges (issue #20): a kill during a save leaves a .tmp. file that the next
 * save of the same path removes; a file-size limit makes a save fail with
 * EFBIG instead of killing the process with SIGXFSZ; a checkpoint whose lr
 * is not finite or whose step cannot be continued is refused. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nn/nn.h"
#include "test.h"

TEST(nn_save_removes_stale_tmp_files_of_dead_writers) {
  char dir[] = "/tmp/kiln-save-XXXXXX", path[128], dead[192], live[192], other[192];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/x.npy", dir);
  /* a writer killed mid-save (no such process), one still writing (us),
   * and a file that only looks alike */
  snprintf(dead, sizeof dead, "%s.tmp.2147483646.3", path);
  snprintf(live, sizeof live, "%s.tmp.%ld.99", path, (long)getpid());
  snprintf(other, sizeof other, "%s.tmp.notes", path);
  const char *files[3] = {dead, live, other};
  for (int i = 0; i < 3; i++) {
    FILE *f = fopen(files[i], "w");
    CHECK(f != NULL);
    if (f) fclose(f);
  }
  kiln_scope_begin();
  CHECK(kiln_npy_save(path, kiln_ones(1, (int64_t[]){3}, KILN_DTYPE_F32)) == 0);
  kiln_scope_end();
  CHECK_MSG(access(dead, F_OK) != 0, "the dead writer's %s is still there", dead);
  CHECK(access(live, F_OK) == 0);
  CHECK(access(other, F_OK) == 0);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

TEST(nn_save_past_the_file_size_limit_fails_with_efbig) {
  char dir[] = "/tmp/kiln-save-XXXXXX", path[128];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/big.npy", dir);
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit rl = {65536, 65536};
    setrlimit(RLIMIT_FSIZE, &rl);
    kiln_scope_begin();
    int rc = kiln_npy_save(path, kiln_ones(1, (int64_t[]){1 << 18}, KILN_DTYPE_F32));
    bool ok = rc < 0 && strstr(kiln_last_error(), "File too large") &&
              strstr(kiln_last_error(), "not changed");
    kiln_scope_end();
    _exit(ok ? 0 : 3);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK_MSG(WIFEXITED(st), "the save was killed by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
  CHECK(access(path, F_OK) != 0);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

TEST(nn_checkpoint_with_nonfinite_lr_or_huge_step_is_refused) {
  char dir[] = "/tmp/kiln-save-XXXXXX", path[128];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/ck.safetensors", dir);
  kiln_generator *g = kiln_generator_new(1);
  kiln_nn_module *m = kiln_nn_model_new("mlp", g);
  struct {
    double lr;
    int64_t step;
    const char *what;
  } cases[] = {{NAN, 1, "lr"}, {INFINITY, 1, "lr"}, {-1.0, 1, "lr"}, {0.1, INT64_MAX, "step"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    kiln_checkpoint_info info = {.model = "mlp", .lr = cases[i].lr, .step = cases[i].step};
    CHECK_MSG(kiln_checkpoint_save(path, m, NULL, &info) == KILN_OK, "%s", kiln_last_error());
    kiln_checkpoint_info back;
    CHECK_MSG(kiln_checkpoint_read_info(path, &back) == KILN_ERR_FORMAT, "case %zu accepted", i);
    CHECK_STR_CONTAINS(kiln_last_error(), cases[i].what);
    CHECK(kiln_checkpoint_load(path, m, NULL, NULL) == KILN_ERR_FORMAT);
  }
  kiln_checkpoint_info info = {.model = "mlp", .lr = 0.1, .step = 7};
  CHECK(kiln_checkpoint_save(path, m, NULL, &info) == KILN_OK);
  CHECK(kiln_checkpoint_load(path, m, NULL, NULL) == KILN_OK);
  kiln_nn_module_free(m);
  kiln_generator_free(g);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}
