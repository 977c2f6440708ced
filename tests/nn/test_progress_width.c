/* tests/nn/test_progress_width.c: the training progress line fits the
 * terminal (Note [Progress width] in src/nn/report.c): at every width from
 * 21 to 200 columns each redraw is shorter than the width (so it never
 * wraps and scrolls), keeps the epoch and the loss when there is room, and
 * keeps the bar when the terminal is wide. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "nn/nn.h"
#include "test.h"

/* Draws one line at `cols` columns; returns its visible length. */
static int draw(int cols, char *line, size_t n) {
  char env[16];
  snprintf(env, sizeof env, "%d", cols);
  setenv("COLUMNS", env, 1);
  char path[] = "/tmp/kiln-progress-XXXXXX";
  int fd = mkstemp(path), saved = dup(STDERR_FILENO);
  fflush(stderr);
  dup2(fd, STDERR_FILENO);
  nn_progress p;
  nn_progress_begin(&p, true, 12, 100, 93750);
  nn_progress_update(&p, 4321, 4321 * 64, 0.123456, true);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  char *text = test_read_file(path, NULL);
  remove(path);
  /* "\r<line>\033[K" */
  int len = 0;
  if (text && text[0] == '\r')
    for (const char *c = text + 1; *c && *c != '\033' && len < (int)n - 1; c++) line[len++] = *c;
  line[len] = 0;
  free(text);
  return len;
}

TEST(nn_progress_line_fits_the_terminal) {
  char line[512];
  for (int cols = 21; cols <= 200; cols++) {
    int len = draw(cols, line, sizeof line);
    CHECK_MSG(len > 0 && len <= cols - 1, "%d columns: %d-character line '%s'", cols, len, line);
    CHECK_MSG(strncmp(line, "epoch 12/100", 12) == 0, "%d columns: '%s'", cols, line);
    if (cols >= 40) CHECK_MSG(strstr(line, "loss 0.1235") != NULL, "%d columns: '%s'", cols, line);
    if (cols >= 60) CHECK_MSG(strstr(line, " [") && strstr(line, "] "), "%d columns: no bar: '%s'", cols, line);
    if (cols >= 120) CHECK_MSG(strstr(line, "ETA") != NULL, "%d columns: '%s'", cols, line);
  }
  unsetenv("COLUMNS");
}
