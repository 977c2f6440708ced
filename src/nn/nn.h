/* src/nn/nn.h: the nn layer, internal view: the module and layer structs,
 * crash-safe file writing, and the helpers train.c shares with report.c. */
#ifndef KILN_NN_H
#define KILN_NN_H

#include "core/core.h"

/* ---- modules and layers ---------------------------------------------- */
typedef enum nn_layer_kind {
  NN_LINEAR, NN_CONV2D, NN_EMBEDDING, NN_LAYER_NORM, NN_DROPOUT, NN_LSTM
} nn_layer_kind;

enum { NN_LAYER_MAX_PARAMS = 4 };

struct kiln_nn_layer {
  nn_layer_kind kind;
  kiln_nn_module *owner;
  int n_params;
  int param[NN_LAYER_MAX_PARAMS]; /* indices into owner's parameters; -1 = none */
  int64_t stride, padding;        /* conv2d */
  double eps;                     /* layer norm */
  double p;                       /* dropout */
  kiln_generator *gen;            /* dropout (borrowed; NULL = default) */
};

typedef kiln_tensor *(*nn_forward_fn)(kiln_nn_module *m, kiln_tensor *x);

struct kiln_nn_module {
  int n_params, cap_params;
  char **names;
  kiln_tensor **params;     /* owned references */
  int n_layers, cap_layers;
  kiln_nn_layer **layers;   /* owned */
  int n_buffers;            /* tensors saved with the parameters that are not
                               trained (BatchNorm's running statistics) */
  char **buffer_names;
  kiln_tensor **buffers;    /* owned references */
  bool training;
  const char *arch;         /* static string, or NULL */
  nn_forward_fn forward;
};

/* Adds buffer t under name (copied): retains t, which does not require
 * grad. Checkpoints save and load buffers beside the parameters. Returns
 * its index or a negative status. */
int nn_module_add_buffer(kiln_nn_module *m, const char *name, kiln_tensor *t);

/* ---- fused SGD (optim_fused.c, Note [Fused SGD]) ---------------------- */
/* A test hook (true): false sends every SGD step through the ops, whose
 * allocations the out-of-memory sweeps fail one by one. */
extern bool nn_sgd_fused_enabled;
/* Whether nn_sgd_fused can update p (gradient g, momentum buffer buf or
 * NULL) under options o: true for a parameter without gradient. */
bool nn_sgd_fused_applies(const kiln_optim_opts *o, kiln_tensor *p, kiln_tensor *g,
                          kiln_tensor *buf);
/* One SGD update of p and buf in place (nothing when g is NULL), for
 * tensors nn_sgd_fused_applies accepts; cannot fail. */
void nn_sgd_fused(const kiln_optim_opts *o, kiln_tensor *p, kiln_tensor *g, kiln_tensor *buf);

/* The parameter at index i of l's owner (borrowed), NULL for -1. */
static inline kiln_tensor *nn_layer_param(const kiln_nn_layer *l, int k) {
  return l->param[k] < 0 ? NULL : l->owner->params[l->param[k]];
}

/* ---- crash-safe writing (Note [Atomic save] in fileio.c) ---------------- */
typedef struct nn_writer nn_writer;
/* Appends n bytes; returns 0 or a negative status (message set). */
int nn_write(nn_writer *w, const void *buf, size_t n);
/* Creates "<path>.tmp.<pid>.<k>", calls fn(w, ud) to fill it, fsyncs,
 * renames it over path and fsyncs the directory. ctx starts messages. On
 * any failure the temp file is removed, path is untouched, and the status
 * is returned. */
int nn_atomic_write(const char *path, const char *ctx, int (*fn)(nn_writer *w, void *ud),
                    void *ud);
/* Test hook: make the nth nn_write from now fail with EIO (1 = the next);
 * 0 disables. */
void nn_write_fail_at(long n);

/* zlib's CRC-32 of n bytes, continuing from crc (start with 0). */
uint32_t nn_crc32(uint32_t crc, const void *buf, size_t n);

/* ---- safetensors internals (checkpoint.c) -------------------------------- */
/* The data section of a loaded file (borrowed) and its length in *n. */
const void *nn_st_data(const kiln_safetensors *st, size_t *n);
/* __metadata__ pairs, sorted by key (borrowed). */
int nn_st_n_meta(const kiln_safetensors *st);
const char *nn_st_meta_key(const kiln_safetensors *st, int i);
const char *nn_st_meta_value(const kiln_safetensors *st, int i);

/* ---- training internals shared by train.c and report.c ----------------- */
enum { NN_N_COUNTERS = 10 };
/* The lazy counter names reported per step (kiln_lazy_counter's names). */
extern const char *const nn_lazy_counter_names[NN_N_COUNTERS];
/* The executor's counters (kiln_function_stats' fields), in jit mode. */
enum { NN_N_JIT_COUNTERS = 5 };
extern const char *const nn_jit_counter_names[NN_N_JIT_COUNTERS];

typedef struct nn_log {
  int64_t n_steps, cap;
  double *loss;              /* [n_steps] */
  int64_t *counters;         /* [n_steps * n_counters] cumulative */
  int n_counters;
  const char *const *counter_names;
  int n_epochs, cap_epochs;
  double *test_loss, *test_acc;
  int64_t *epoch_end_step;   /* the last logged step of each epoch */
  int64_t first_step;        /* global step number of loss[0] */
} nn_log;

void nn_log_free(nn_log *log);
int nn_log_step(nn_log *log, double loss, const int64_t *counters);
int nn_log_epoch(nn_log *log, double test_loss, double test_acc);
/* The SVG of log (losses per step, raw and smoothed; test accuracy per
 * epoch: Note [Plot layout]) at path, and its numbers as CSV at
 * nn_plot_csv_path(path). Negative kiln_status on failure. */
int nn_write_plot(const char *path, const nn_log *log, const char *title);
/* "<stem>.csv" beside "<stem>.svg" (or path + ".csv"): core_alloc'd, NULL on OOM. */
char *nn_plot_csv_path(const char *svg_path);
/* The CSV: step,loss,loss_smoothed,epoch,test_loss,test_accuracy, one row
 * per step; the epoch columns are filled on each epoch's last step. */
int nn_write_plot_csv(const char *svg_path, const nn_log *log, const double *smoothed);
/* {"mode": ..., "model": ..., "steps": [...], "epochs": [...]} at path. */
int nn_write_metrics(const char *path, const nn_log *log, const char *mode,
                     const char *model);

/* Rows [lo, lo + n) of batch i of l (as kiln_data_loader_batch returns
 * them, without gathering the others: a data-parallel rank's shard), new
 * references (autoreleased) in *x and *y. Negative kiln_status (error set)
 * on a batch or rows out of range, or no memory. */
int nn_data_loader_rows(const kiln_data_loader *l, int64_t i, int64_t lo, int64_t n,
                        kiln_tensor **x, kiln_tensor **y);
/* The number of rows of batch i of l (0 out of range). */
int64_t nn_data_loader_batch_rows(const kiln_data_loader *l, int64_t i);

/* KILN_TRAIN_PHASES=1: CPU and wall time per phase of the training step
 * (Note [Step phases] in phases.c). Never fails; off costs a test. */
enum { NN_PH_DATA, NN_PH_FORWARD, NN_PH_BACKWARD, NN_PH_REDUCE, NN_PH_OPTIM, NN_PH_LOSS,
       NN_N_PHASES };
typedef struct nn_phases {
  bool on;
  double cpu0, wall0;
  double cpu[NN_N_PHASES], wall[NN_N_PHASES];
} nn_phases;
void nn_phases_init(nn_phases *p);
/* Starts the clock of the next phase. */
void nn_phases_start(nn_phases *p);
/* The time since the last start or mark goes to phase. */
void nn_phases_mark(nn_phases *p, int phase);
/* One line per rank on f (ds: the reducer's parts, or NULL). */
void nn_phases_print(const nn_phases *p, FILE *f, int rank, int world, int64_t steps,
                     const kiln_dist_stats *ds);

/* A progress bar on stderr, redrawn at most 10 times a second. */
typedef struct nn_progress {
  bool enabled;
  double start, last_draw;
  int64_t total;
  int epoch, n_epochs;
} nn_progress;
double nn_now(void);
void nn_progress_begin(nn_progress *p, bool enabled, int epoch, int n_epochs, int64_t total);
void nn_progress_update(nn_progress *p, int64_t done, int64_t samples, double loss, bool force);
void nn_progress_end(nn_progress *p);

/* The name PyTorch's equivalent module gives a built-in model's tensor
 * (Note [PyTorch names] in torch_names.c): "fc1.weight" of the mlp is
 * "0.weight"; names of other archs, or without a mapping, are copied.
 * Writes at most n bytes into buf; returns buf. Never fails. */
const char *nn_torch_name(const char *arch, const char *name, char *buf, size_t n);

/* The parameters kiln_nn_model_new(arch) makes, in order: kiln names and
 * shapes, all float32 (a static table: reading a plain state_dict compares
 * its tensors with it instead of building every model). NULL for an
 * unknown arch; *n receives the count. Never fails otherwise. */
typedef struct nn_param_spec {
  const char *name;
  int ndim;
  int64_t shape[4];
} nn_param_spec;
const nn_param_spec *nn_model_params(const char *arch, int *n);

#endif
