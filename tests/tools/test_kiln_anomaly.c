/* tests/tools/test_kiln_anomaly.c: `kiln train --detect-anomaly on` in
 * lazy mode (issue #20): a diverging run stops naming the op and the lazy
 * graph node that made the first NaN/Inf (src/exec/lazy_anomaly.c), and
 * exits 1 with nothing saved. Needs $KILN_BIN. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../nn/nn_fixture.h"
#include "kiln.h"
#include "test.h"

TEST(kiln_train_lazy_detect_anomaly_names_op_and_node) {
  const char *b = getenv("KILN_BIN");
  CHECK_MSG(b && access(b, X_OK) == 0, "KILN_BIN is not set");
  if (!b || access(b, X_OK) != 0) return;
  char dir[256], cmd[2048], errf[64];
  CHECK(nn_fixture_make(dir, sizeof dir, 256, 32, 7) == 0);
  snprintf(errf, sizeof errf, "/tmp/kiln-anomaly-%ld.err", (long)getpid());
  snprintf(cmd, sizeof cmd,
           "timeout 120 %s train --data %s --mode lazy --lr 1e6 --epochs 1 --batch 32 "
           "--detect-anomaly on --save %s/ck.st >/dev/null 2>%s",
           b, dir, dir, errf);
  int st = system(cmd);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit status %d", st);
  char *err = test_read_file(errf, NULL);
  CHECK_STR_CONTAINS(err, "anomaly: aten::");
  CHECK_STR_CONTAINS(err, "made the first NaN or Inf of the lazy step");
  CHECK_STR_CONTAINS(err, "of graph node %");
  if (err) test_note("%.300s", err);
  free(err);
  snprintf(cmd, sizeof cmd, "%s/ck.st", dir);
  CHECK_MSG(access(cmd, F_OK) != 0, "a checkpoint was saved");
  unlink(errf);
  nn_fixture_remove(dir);
}
