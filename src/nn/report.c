/* src/nn/report.c: what training shows and leaves behind: the per-step
 * log, the progress bar (a terminal only, at most 10 redraws a second, as
 * curl's), the SVG plot and the metrics JSON. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "nn.h"

/* ---- the log ------------------------------------------------------------- */

void nn_log_free(nn_log *log) {
  core_free(log->loss);
  core_free(log->counters);
  core_free(log->test_loss);
  core_free(log->test_acc);
  core_free(log->epoch_end_step);
  log->loss = NULL;
  log->counters = NULL;
  log->test_loss = log->test_acc = NULL;
  log->epoch_end_step = NULL;
  log->n_steps = log->cap = 0;
  log->n_epochs = log->cap_epochs = 0;
}

int nn_log_step(nn_log *log, double loss, const int64_t *counters) {
  if (log->n_steps == log->cap) {
    int64_t cap = log->cap ? 2 * log->cap : 1024;
    double *l = core_realloc(log->loss, (size_t)cap * sizeof *l);
    if (!l) return KILN_ERR_NOMEM;
    log->loss = l;
    if (log->n_counters) {
      int64_t *c = core_realloc(log->counters, (size_t)(cap * log->n_counters) * sizeof *c);
      if (!c) return KILN_ERR_NOMEM;
      log->counters = c;
    }
    log->cap = cap;
  }
  log->loss[log->n_steps] = loss;
  if (log->n_counters)
    memcpy(log->counters + log->n_steps * log->n_counters, counters,
           (size_t)log->n_counters * sizeof *counters);
  log->n_steps++;
  return 0;
}

int nn_log_epoch(nn_log *log, double test_loss, double test_acc) {
  if (log->n_epochs == log->cap_epochs) {
    int cap = log->cap_epochs ? 2 * log->cap_epochs : 16;
    double *a = core_realloc(log->test_loss, (size_t)cap * sizeof *a);
    if (!a) return KILN_ERR_NOMEM;
    log->test_loss = a;
    double *b = core_realloc(log->test_acc, (size_t)cap * sizeof *b);
    if (!b) return KILN_ERR_NOMEM;
    log->test_acc = b;
    int64_t *c = core_realloc(log->epoch_end_step, (size_t)cap * sizeof *c);
    if (!c) return KILN_ERR_NOMEM;
    log->epoch_end_step = c;
    log->cap_epochs = cap;
  }
  log->test_loss[log->n_epochs] = test_loss;
  log->test_acc[log->n_epochs] = test_acc;
  log->epoch_end_step[log->n_epochs] = log->first_step + log->n_steps - 1;
  log->n_epochs++;
  return 0;
}

/* ---- a growing text buffer (core_strbuf) ------------------------------------ */

typedef core_strbuf sbuf;
#define sb_printf core_strbuf_printf

static int write_sbuf(nn_writer *w, void *ud) {
  sbuf *b = ud;
  return nn_write(w, b->p, b->n);
}

static int save_sbuf(const char *path, const char *ctx, sbuf *b) {
  int rc = b->oom ? KILN_ERR_NOMEM : nn_atomic_write(path, ctx, write_sbuf, b);
  core_free(b->p);
  return rc;
}

/* Text with &, <, > and " escaped for XML. */
static void sb_xml(sbuf *b, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '&': sb_printf(b, "&amp;"); break;
    case '<': sb_printf(b, "&lt;"); break;
    case '>': sb_printf(b, "&gt;"); break;
    case '"': sb_printf(b, "&quot;"); break;
    default: sb_printf(b, "%c", *s);
    }
  }
}

/* ---- the plot ------------------------------------------------------------------- */

enum { PW = 420, PH = 260, MARGIN_L = 60, MARGIN_T = 50, GAP = 90 };

/* Axes, ticks and labels of one panel at (x0, y0). */
static void panel(sbuf *b, int x0, int y0, const char *title, const char *xlabel, double xmin,
                  double xmax, double ymin, double ymax) {
  sb_printf(b, "<g class=\"axes\">\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
               "fill=\"none\" stroke=\"#888\"/>\n", x0, y0, PW, PH);
  sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"14\">", x0 + PW / 2,
            y0 - 10);
  sb_xml(b, title);
  sb_printf(b, "</text>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", x0 + PW / 2,
            y0 + PH + 36);
  sb_xml(b, xlabel);
  sb_printf(b, "</text>\n");
  for (int k = 0; k <= 4; k++) {
    double fy = ymin + (ymax - ymin) * k / 4, fx = xmin + (xmax - xmin) * k / 4;
    int py = y0 + PH - PH * k / 4, px = x0 + PW * k / 4;
    sb_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#eee\"/>\n", x0, py,
              x0 + PW, py);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.3g</text>\n", x0 - 6, py + 4, fy);
    /* whole numbers on long axes; quarter steps stay readable on short ones */
    sb_printf(b, xmax - xmin >= 8 ? "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%.0f</text>\n"
                                  : "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
              px, y0 + PH + 18, fx);
  }
  sb_printf(b, "</g>\n");
}

int nn_write_plot(const char *path, const nn_log *log, const char *title) {
  sbuf b = {0};
  int W = MARGIN_L + PW + GAP + PW + 30, H = MARGIN_T + PH + 60;
  sb_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n", W, H, W, H);
  sb_printf(&b, "<title>");
  sb_xml(&b, title);
  sb_printf(&b, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  /* left: training loss per step */
  double lmax = 0;
  for (int64_t i = 0; i < log->n_steps; i++)
    if (isfinite(log->loss[i]) && log->loss[i] > lmax) lmax = log->loss[i];
  if (lmax <= 0) lmax = 1;
  double x0s = (double)log->first_step, x1s = (double)(log->first_step + log->n_steps - 1);
  if (x1s <= x0s) x1s = x0s + 1;
  panel(&b, MARGIN_L, MARGIN_T, "training loss", "step", x0s, x1s, 0, lmax);
  sb_printf(&b, "<polyline class=\"loss\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1\" "
                "points=\"");
  for (int64_t i = 0; i < log->n_steps; i++) {
    double v = isfinite(log->loss[i]) ? log->loss[i] : lmax;
    double px = MARGIN_L + PW * ((double)(log->first_step + i) - x0s) / (x1s - x0s);
    double py = MARGIN_T + PH - PH * (v < 0 ? 0 : v) / lmax;
    sb_printf(&b, "%s%.2f,%.2f", i ? " " : "", px, py);
  }
  sb_printf(&b, "\"/>\n");
  /* right: test accuracy per epoch */
  int x0a = MARGIN_L + PW + GAP;
  double amin = 1, amax = 1;
  for (int e = 0; e < log->n_epochs; e++)
    if (log->test_acc[e] < amin) amin = log->test_acc[e];
  amin = floor(amin * 10) / 10;
  if (amin >= amax) amin = amax - 0.1;
  double ne = log->n_epochs > 1 ? log->n_epochs : 2;
  panel(&b, x0a, MARGIN_T, "test accuracy", "epoch", 1, ne, amin, amax);
  sb_printf(&b, "<polyline class=\"accuracy\" fill=\"none\" stroke=\"#d62728\" "
                "stroke-width=\"2\" points=\"");
#define ACC_X(e) (x0a + PW * (double)(e) / (ne - 1))
#define ACC_Y(e) (MARGIN_T + PH - PH * (log->test_acc[e] - amin) / (amax - amin))
  for (int e = 0; e < log->n_epochs; e++)
    sb_printf(&b, "%s%.2f,%.2f", e ? " " : "", ACC_X(e), ACC_Y(e));
  sb_printf(&b, "\"/>\n");
  for (int e = 0; e < log->n_epochs; e++) {
    double px = ACC_X(e), py = ACC_Y(e);
    sb_printf(&b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"#d62728\"><title>epoch %d: "
                  "%.4f</title></circle>\n", px, py, e + 1, log->test_acc[e]);
  }
#undef ACC_X
#undef ACC_Y
  sb_printf(&b, "</svg>\n");
  return save_sbuf(path, "plot", &b);
}

/* ---- metrics JSON (jansson) ------------------------------------------------------ */

static int write_text(nn_writer *w, void *ud) {
  const char *t = ud;
  return nn_write(w, t, strlen(t));
}

int nn_write_metrics(const char *path, const nn_log *log, const char *mode, const char *model) {
  json_t *steps = json_array(), *epochs = json_array();
  bool ok = steps && epochs;
  for (int64_t i = 0; i < log->n_steps && ok; i++) {
    json_t *c = json_object();
    ok = c != NULL;
    for (int k = 0; k < log->n_counters && ok; k++)
      ok = json_object_set_new(c, log->counter_names[k],
                               json_integer(log->counters[i * log->n_counters + k])) == 0;
    if (!ok) {
      json_decref(c);
      break;
    }
    /* json_pack and append_new take c and the step's object even on failure */
    ok = json_array_append_new(steps, json_pack("{s:I, s:o, s:o}", "step",
                                                      (json_int_t)(log->first_step + i), "loss",
                                                      core_json_num(log->loss[i]), "counters",
                                                      c)) == 0;
  }
  for (int e = 0; e < log->n_epochs && ok; e++)
    ok = json_array_append_new(epochs, json_pack("{s:i, s:I, s:o, s:o}", "epoch", e + 1,
                                                 "last_step", (json_int_t)log->epoch_end_step[e],
                                                 "test_loss", core_json_num(log->test_loss[e]),
                                                 "test_accuracy",
                                                 core_json_num(log->test_acc[e]))) == 0;
  json_t *j = NULL;
  if (ok)
    j = json_pack("{s:s, s:s, s:o, s:o}", "mode", mode, "model", model, "steps", steps,
                  "epochs", epochs);
  else {
    json_decref(steps);
    json_decref(epochs);
  }
  char *text = core_json_take(j, ok && j, NULL);
  if (!text) return KILN_ERR_NOMEM;
  int rc = nn_atomic_write(path, "metrics", write_text, text);
  core_free(text);
  return rc;
}

/* ---- progress bar ---------------------------------------------------------------- */

double nn_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int term_width(void) {
  const char *c = getenv("COLUMNS");
  if (c && atoi(c) > 20) return atoi(c);
  struct winsize ws;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) return ws.ws_col;
  return 79;
}

void nn_progress_begin(nn_progress *p, bool enabled, int epoch, int n_epochs, int64_t total) {
  p->enabled = enabled;
  p->start = nn_now();
  p->last_draw = 0;
  p->total = total;
  p->epoch = epoch;
  p->n_epochs = n_epochs;
}

void nn_progress_update(nn_progress *p, int64_t done, int64_t samples, double loss, bool force) {
  if (!p->enabled) return;
  double now = nn_now();
  if (!force && now - p->last_draw < 0.1) return; /* at most 10 Hz */
  p->last_draw = now;
  double el = now - p->start, rate = el > 0 ? (double)samples / el : 0;
  double eta = done > 0 ? el * (double)(p->total - done) / (double)done : 0;
  /* Note [Progress width]: the line never reaches the terminal's last
   * column (a full line wraps, and every redraw then scrolls): the rate and
   * ETA go first, then the bar, and what is left is cut. */
  int cols = term_width() - 1;
  char info[160], head[32], line[512];
  int h = snprintf(head, sizeof head, "epoch %d/%d", p->epoch, p->n_epochs);
  int k = snprintf(info, sizeof info, " %lld/%lld %.0f samples/s loss %.4f ETA %.0fs",
                   (long long)done, (long long)p->total, rate, loss, eta);
  if (h + 2 + 10 + k > cols)
    k = snprintf(info, sizeof info, " %lld/%lld loss %.4f", (long long)done, (long long)p->total,
                 loss);
  int width = cols - h - 3 - k; /* " [" and "]" */
  if (width > 60) width = 60;
  int n;
  if (width >= 5) {
    int fill = p->total > 0 ? (int)((double)width * (double)done / (double)p->total) : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    n = snprintf(line, sizeof line, "%s [%s]%s", head, bar, info);
  } else {
    n = snprintf(line, sizeof line, "%s%s", head, info);
  }
  if (n > cols && cols > 0 && cols < (int)sizeof line) line[cols] = 0;
  fprintf(stderr, "\r%s\033[K", line);
  fflush(stderr);
}

void nn_progress_end(nn_progress *p) {
  if (!p->enabled) return;
  fprintf(stderr, "\r\033[K");
  fflush(stderr);
}
