/* tests/nn/test_plot.c: the training plot (Note [Plot layout]): fits a
 * 1000-px window; every axis's ticks are round numbers (1, 2 or 5 times a
 * power of ten, evenly spaced, covering the data); the smoothed loss is
 * the debiased moving average, computed here by hand; a one-epoch run's
 * accuracy is labelled with its value; the CSV beside the SVG holds the
 * same numbers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/nn.h"
#include "test.h"

/* Tick labels: the numbers of <text ... text-anchor="end|middle">N</text>
 * inside <g class="axes"> groups, in order; returns how many. */
static int tick_values(const char *svg, const char *anchor, double *out, int max) {
  int n = 0;
  char key[64];
  snprintf(key, sizeof key, "text-anchor=\"%s\">", anchor);
  for (const char *g = strstr(svg, "<g class=\"axes\">"); g; g = strstr(g + 1, "<g class=\"axes\">")) {
    const char *end = strstr(g, "</g>");
    for (const char *p = strstr(g, key); p && p < end && n < max; p = strstr(p + 1, key)) {
      char *e;
      double v = strtod(p + strlen(key), &e);
      if (e != p + strlen(key) && *e == '<') out[n++] = v;
    }
  }
  return n;
}

static bool nice_step(double step) {
  double e = floor(log10(step) + 1e-9), f = step / pow(10, e);
  return fabs(f - 1) < 1e-6 || fabs(f - 2) < 1e-6 || fabs(f - 5) < 1e-6;
}

/* Runs of evenly spaced values with a nice step; returns false otherwise. */
static bool ticks_nice(const double *v, int n, char *why, size_t nw) {
  int start = 0;
  for (int i = 1; i <= n; i++) {
    bool brk = i == n || v[i] < v[i - 1]; /* the next axis starts over */
    if (!brk) continue;
    if (i - start >= 2) {
      double step = v[start + 1] - v[start];
      for (int k = start + 1; k < i; k++)
        if (fabs(v[k] - v[k - 1] - step) > step * 1e-6) {
          snprintf(why, nw, "uneven ticks %g, %g, %g", v[k - 2 >= start ? k - 2 : start], v[k - 1], v[k]);
          return false;
        }
      if (!nice_step(step)) {
        snprintf(why, nw, "tick step %g is not 1, 2 or 5 x 10^k", step);
        return false;
      }
    }
    start = i;
  }
  return true;
}

static void fill_log(nn_log *log, int64_t n_steps, int n_epochs) {
  memset(log, 0, sizeof *log);
  log->first_step = 1;
  for (int64_t i = 0; i < n_steps; i++) nn_log_step(log, 2.3 * exp(-(double)i / 150) + 0.01 * (double)(i % 7), NULL);
  for (int e = 0; e < n_epochs; e++) {
    log->n_steps = (e + 1) * n_steps / n_epochs; /* nn_log_epoch records the last step */
    nn_log_epoch(log, 0.9 - 0.1 * e, 0.578 + 0.0913 * e);
  }
  log->n_steps = n_steps;
}

TEST(nn_plot_nice_ticks_smoothed_loss_csv) {
  char dir[] = "/tmp/kiln-plot-XXXXXX", svg[256], csv[256];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(svg, sizeof svg, "%s/p.svg", dir);
  snprintf(csv, sizeof csv, "%s/p.csv", dir);
  int64_t steps_cases[3] = {938, 47, 1};
  int epochs_cases[3] = {3, 1, 1};
  for (int c = 0; c < 3; c++) {
    nn_log log;
    fill_log(&log, steps_cases[c], epochs_cases[c]);
    CHECK(nn_write_plot(svg, &log, "mlp, lazy") == 0);
    char *text = test_read_file(svg, NULL);
    CHECK(text != NULL);
    if (!text) continue;
    int w = 0;
    const char *ws = strstr(text, "width=\"");
    if (ws) w = atoi(ws + 7);
    CHECK_MSG(w > 600 && w <= 1000, "plot is %d px wide", w);
    double v[256];
    char why[128] = "";
    int ny = tick_values(text, "end", v, 256), nx = tick_values(text, "middle", v + 128, 128);
    CHECK(ny >= 6 && nx >= 4);
    CHECK_MSG(ticks_nice(v, ny, why, sizeof why), "%lld steps: y axis: %s", (long long)steps_cases[c], why);
    CHECK_MSG(ticks_nice(v + 128, nx, why, sizeof why), "%lld steps: x axis: %s", (long long)steps_cases[c], why);
    /* the y ticks cover the data: the loss axis reaches the largest loss */
    double lmax = 0;
    for (int64_t i = 0; i < log.n_steps; i++) lmax = fmax(lmax, log.loss[i]);
    CHECK(v[0] == 0);
    bool covered = false;
    for (int i = 0; i < ny; i++) covered |= v[i] >= lmax;
    CHECK_MSG(covered, "no loss tick reaches %g", lmax);
    CHECK(strstr(text, "class=\"loss-smooth\"") != NULL);
    if (epochs_cases[c] == 1) CHECK_STR_CONTAINS(text, ">0.5780</text>"); /* the lone point's value */
    free(text);
    /* the CSV: header, one row per step, smoothed = debiased EMA (0.9) */
    FILE *f = fopen(csv, "r");
    CHECK(f != NULL);
    if (!f) continue;
    char line[256];
    CHECK(fgets(line, sizeof line, f) && strcmp(line, "step,loss,loss_smoothed,epoch,test_loss,test_accuracy\n") == 0);
    double s = 0, norm = 0;
    int64_t rows = 0;
    int epochs_seen = 0;
    while (fgets(line, sizeof line, f)) {
      long long step;
      double loss, sm;
      char rest[128] = "";
      CHECK(sscanf(line, "%lld,%lf,%lf,%127s", &step, &loss, &sm, rest) >= 3);
      s = 0.9 * s + 0.1 * log.loss[rows];
      norm = 0.9 * norm + 0.1;
      CHECK_NEAR(loss, log.loss[rows], 1e-8);
      CHECK_NEAR(sm, s / norm, 1e-8);
      CHECK_EQ_INT(step, rows + 1);
      epochs_seen += strcmp(rest, ",,") != 0 && rest[0] != 0;
      rows++;
    }
    fclose(f);
    CHECK_EQ_INT(rows, log.n_steps);
    CHECK_EQ_INT(epochs_seen, epochs_cases[c]);
    nn_log_free(&log);
  }
  char rm[300];
  snprintf(rm, sizeof rm, "rm -rf %s", dir);
  CHECK(system(rm) == 0);
}
