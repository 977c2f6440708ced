/* tests/nn/test_checkpoint_status.c: a checkpoint that is missing fails
 * with KILN_ERR_IO (it was KILN_ERR_FORMAT), a file that is not
 * safetensors with KILN_ERR_FORMAT; kiln_last_status() reports the status
 * of the last error, and kiln_clear_error() resets it. */
#include <stdio.h>
#include <stdlib.h>

#include "kiln.h"
#include "test.h"

TEST(checkpoint_missing_file_is_io_error) {
  kiln_checkpoint_info info;
  kiln_clear_error();
  CHECK_EQ_INT(kiln_last_status(), KILN_OK);
  CHECK_EQ_INT(kiln_checkpoint_read_info("/nonexistent/x.safetensors", &info), KILN_ERR_IO);
  CHECK_EQ_INT(kiln_last_status(), KILN_ERR_IO);
  CHECK_STR_CONTAINS(kiln_last_error(), "cannot open");
  kiln_nn_module *m = kiln_nn_model_new("mlp", NULL);
  CHECK_EQ_INT(kiln_checkpoint_load("/nonexistent/x.safetensors", m, NULL, NULL), KILN_ERR_IO);
  char path[] = "/tmp/kiln-ckpt-status-XXXXXX";
  FILE *f = fdopen(mkstemp(path), "w");
  fputs("this is not a safetensors file", f);
  fclose(f);
  CHECK_EQ_INT(kiln_checkpoint_load(path, m, NULL, NULL), KILN_ERR_FORMAT);
  CHECK_EQ_INT(kiln_last_status(), KILN_ERR_FORMAT);
  remove(path);
  kiln_clear_error();
  CHECK_EQ_INT(kiln_last_status(), KILN_OK);
  CHECK(kiln_npy_load("/nonexistent/y.npy") == NULL);
  CHECK_EQ_INT(kiln_last_status(), KILN_ERR_IO);
  kiln_nn_module_free(m);
}
