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

/* Note [Plot layout]: 960 x 330 px (a 1000-px window shows it whole): on
 * the left the training loss per step, raw (thin, light) and smoothed
 * (an exponential moving average, debiased as TensorBoard's, weight 0.9;
 * thick); on the right the test accuracy per epoch on its own axis, each
 * point labelled with its value when there are at most 12. Axes have
 * "nice" ticks (1, 2 or 5 times a power of ten: Heckbert's Graphics Gems
 * algorithm) covering the data. The same numbers are written as CSV
 * beside the SVG (nn_plot_csv_path). */
enum { PW = 370, PH = 220, MARGIN_L = 64, MARGIN_T = 46, GAP = 110, PLOT_W = 960, PLOT_H = 330 };

/* A nice number near x: 1, 2, 5 or 10 times a power of ten, rounded or
 * not smaller than x. */
static double nice_num(double x, bool round_it) {
  double e = floor(log10(x)), f = x / pow(10, e), nf;
  if (round_it) nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
  else nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
  return nf * pow(10, e);
}

typedef struct axis {
  double lo, hi, step;  /* ticks lo, lo + step, ..., hi */
  int decimals;         /* digits after the point in tick labels */
} axis;

/* Ticks covering [min, max], about n of them; integer steps when integral. */
static axis nice_axis(double min, double max, int n, bool integral) {
  axis a;
  if (!(max > min)) {
    double pad = fabs(min) > 0 ? fabs(min) * 0.1 : 1;
    min -= pad;
    max += pad;
  }
  a.step = nice_num(nice_num(max - min, false) / (n - 1), true);
  if (integral && a.step < 1) a.step = 1;
  a.lo = floor(min / a.step) * a.step;
  a.hi = ceil(max / a.step) * a.step;
  a.decimals = a.step >= 1 ? 0 : (int)-floor(log10(a.step) + 1e-9);
  return a;
}

static double ax_pos(const axis *a, double v, double len) { return len * (v - a->lo) / (a->hi - a->lo); }

/* Frame, grid, ticks and labels of one panel at (x0, y0). */
static void panel(sbuf *b, int x0, int y0, const char *title, const char *xlabel,
                  const char *ylabel, const axis *ax, const axis *ay) {
  sb_printf(b, "<g class=\"axes\">\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
               "fill=\"none\" stroke=\"#888\"/>\n", x0, y0, PW, PH);
  sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"14\">", x0 + PW / 2,
            y0 - 14);
  sb_xml(b, title);
  sb_printf(b, "</text>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", x0 + PW / 2,
            y0 + PH + 34);
  sb_xml(b, xlabel);
  sb_printf(b, "</text>\n<text transform=\"translate(%d,%d) rotate(-90)\" "
               "text-anchor=\"middle\">", x0 - 46, y0 + PH / 2);
  sb_xml(b, ylabel);
  sb_printf(b, "</text>\n");
  for (double v = ay->lo; v <= ay->hi + ay->step * 1e-6; v += ay->step) {
    double py = y0 + PH - ax_pos(ay, v, PH);
    sb_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>\n", x0, py,
              x0 + PW, py);
    sb_printf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n", x0 - 6, py + 4,
              ay->decimals, fabs(v) < ay->step * 1e-6 ? 0.0 : v);
  }
  for (double v = ax->lo; v <= ax->hi + ax->step * 1e-6; v += ax->step) {
    double px = x0 + ax_pos(ax, v, PW);
    sb_printf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#888\"/>\n", px,
              y0 + PH, px, y0 + PH + 4);
    sb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.*f</text>\n", px,
              y0 + PH + 17, ax->decimals, v);
  }
  sb_printf(b, "</g>\n");
}

/* The debiased exponential moving average of x[0..i] (weight w). */
static void smooth(const double *x, int64_t n, double w, double *out) {
  double s = 0, norm = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = isfinite(x[i]) ? x[i] : (i ? out[i - 1] : 0);
    s = w * s + (1 - w) * v;
    norm = w * norm + (1 - w);
    out[i] = s / norm;
  }
}

static void polyline(sbuf *b, const char *cls, const char *style, int x0, int y0, const axis *ax,
                     const axis *ay, int64_t n, double (*xs)(const nn_log *, int64_t),
                     const double *ys, const nn_log *log) {
  sb_printf(b, "<polyline class=\"%s\" fill=\"none\" %s points=\"", cls, style);
  for (int64_t i = 0; i < n; i++) {
    double v = isfinite(ys[i]) ? ys[i] : ay->hi;
    double px = x0 + ax_pos(ax, xs(log, i), PW), py = y0 + PH - ax_pos(ay, v, PH);
    sb_printf(b, "%s%.2f,%.2f", i ? " " : "", px, py);
  }
  sb_printf(b, "\"/>\n");
}

static double step_x(const nn_log *log, int64_t i) { return (double)(log->first_step + i); }
static double epoch_x(const nn_log *log, int64_t e) { return (double)(e + 1); }

static const char *const SMOOTH_STYLE = "stroke=\"#1f4e9c\" stroke-width=\"2\"";

int nn_write_plot(const char *path, const nn_log *log, const char *title) {
  sbuf b = {0};
  double *sm = core_calloc((size_t)(log->n_steps ? log->n_steps : 1), sizeof *sm);
  if (!sm) return KILN_ERR_NOMEM;
  smooth(log->loss, log->n_steps, 0.9, sm);
  sb_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
            PLOT_W, PLOT_H, PLOT_W, PLOT_H);
  sb_printf(&b, "<title>");
  sb_xml(&b, title);
  sb_printf(&b, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  sb_printf(&b, "<text x=\"%d\" y=\"18\" text-anchor=\"middle\" font-size=\"13\" "
                "fill=\"#444\">", PLOT_W / 2);
  sb_xml(&b, title);
  sb_printf(&b, "</text>\n");
  /* left: training loss per step, raw and smoothed */
  double lmax = 0;
  for (int64_t i = 0; i < log->n_steps; i++)
    if (isfinite(log->loss[i]) && log->loss[i] > lmax) lmax = log->loss[i];
  if (lmax <= 0) lmax = 1;
  double x0s = step_x(log, 0), x1s = step_x(log, log->n_steps > 0 ? log->n_steps - 1 : 0);
  axis axs = nice_axis(x0s, x1s > x0s ? x1s : x0s + 1, 6, true);
  axis ayl = nice_axis(0, lmax, 6, false);
  panel(&b, MARGIN_L, MARGIN_T, "training loss", "step", "loss", &axs, &ayl);
  polyline(&b, "loss", "stroke=\"#9ec3e6\" stroke-width=\"1\"", MARGIN_L, MARGIN_T, &axs, &ayl,
           log->n_steps, step_x, log->loss, log);
  polyline(&b, "loss-smooth", SMOOTH_STYLE, MARGIN_L, MARGIN_T, &axs, &ayl, log->n_steps, step_x,
           sm, log);
  if (log->n_steps > 0) /* the last smoothed value, at the line's end */
    sb_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#1f4e9c\">"
                  "smoothed %.4f (raw: light)</text>\n",
              MARGIN_L + PW - 6, MARGIN_T + 14, sm[log->n_steps - 1]);
  /* right: test accuracy per epoch, its own axis */
  int x0a = MARGIN_L + PW + GAP;
  double amin = 1, amax = 0;
  for (int e = 0; e < log->n_epochs; e++) {
    if (log->test_acc[e] < amin) amin = log->test_acc[e];
    if (log->test_acc[e] > amax) amax = log->test_acc[e];
  }
  if (log->n_epochs == 0) amin = 0, amax = 1;
  axis aya = nice_axis(amin, amax, 5, false);
  if (aya.hi > 1 && amax <= 1) aya.hi = ceil(1 / aya.step - 1e-9) * aya.step;
  if (aya.lo < 0) aya.lo = 0;
  axis axe = nice_axis(1, log->n_epochs > 1 ? log->n_epochs : 1, 6, true);
  if (log->n_epochs <= 1) axe.lo = 0, axe.hi = 2; /* one epoch: its point in the middle */
  panel(&b, x0a, MARGIN_T, "test accuracy", "epoch", "accuracy", &axe, &aya);
  polyline(&b, "accuracy", "stroke=\"#d62728\" stroke-width=\"2\"", x0a, MARGIN_T, &axe, &aya,
           log->n_epochs, epoch_x, log->test_acc, log);
  for (int e = 0; e < log->n_epochs; e++) {
    double px = x0a + ax_pos(&axe, e + 1, PW), py = MARGIN_T + PH - ax_pos(&aya, log->test_acc[e], PH);
    sb_printf(&b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3.5\" fill=\"#d62728\"><title>epoch %d: "
                  "%.4f</title></circle>\n", px, py, e + 1, log->test_acc[e]);
    /* labels at the panel's edges lean inwards, clear of the axis labels */
    const char *anchor = px - x0a < 30 ? "start" : x0a + PW - px < 30 ? "end" : "middle";
    double lx = anchor[0] == 's' ? px + 5 : anchor[0] == 'e' ? px - 5 : px;
    if (log->n_epochs <= 12)
      sb_printf(&b, "<text class=\"value\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"%s\" "
                    "fill=\"#a01010\">%.4f</text>\n", lx, py - 8, anchor, log->test_acc[e]);
  }
  sb_printf(&b, "</svg>\n");
  int rc = save_sbuf(path, "plot", &b);
  if (rc == 0) rc = nn_write_plot_csv(path, log, sm);
  core_free(sm);
  return rc;
}

/* "<stem>.csv" for "<stem>.svg", else "<path>.csv"; NULL on OOM. */
char *nn_plot_csv_path(const char *svg_path) {
  size_t n = strlen(svg_path);
  bool svg = n >= 4 && strcmp(svg_path + n - 4, ".svg") == 0;
  char *p = core_alloc(n + 5);
  if (!p) return NULL;
  memcpy(p, svg_path, n + 1);
  strcpy(p + (svg ? n - 4 : n), ".csv");
  return p;
}

int nn_write_plot_csv(const char *svg_path, const nn_log *log, const double *smoothed) {
  char *path = nn_plot_csv_path(svg_path);
  if (!path) return KILN_ERR_NOMEM;
  sbuf b = {0};
  sb_printf(&b, "step,loss,loss_smoothed,epoch,test_loss,test_accuracy\n");
  int e = 0;
  for (int64_t i = 0; i < log->n_steps; i++) {
    int64_t step = log->first_step + i;
    sb_printf(&b, "%lld,%.9g,%.9g", (long long)step, log->loss[i], smoothed[i]);
    while (e < log->n_epochs && log->epoch_end_step[e] < step) e++;
    if (e < log->n_epochs && log->epoch_end_step[e] == step)
      sb_printf(&b, ",%d,%.9g,%.9g\n", e + 1, log->test_loss[e], log->test_acc[e]);
    else
      sb_printf(&b, ",,,\n");
  }
  int rc = save_sbuf(path, "plot CSV", &b);
  core_free(path);
  return rc;
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
