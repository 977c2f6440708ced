/* src/nn/train.c: the training loop behind `kiln train` and `kiln eval`:
 * data, model, optimizer and schedule; one step per batch in eager, jit or
 * lazy mode; test loss and accuracy per epoch; checkpoints and resuming;
 * logs, progress bar, plot and metrics.
 *
 * Note [Resuming]: the data generator is seeded once; it initialises the
 * parameters and then only shuffles, once at the start of each epoch. A
 * checkpoint stores the generator's state at the start of the current
 * epoch and the number of batches done in it, so a resumed run redraws
 * that epoch's order and skips the batches done: the run continues
 * exactly as if it had not stopped (same batches, same losses). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "nn.h"

enum { ARCH_MLP, ARCH_CNN, ARCH_LSTM };

typedef struct trainer {
  const kiln_nn_train_opts *o;
  int arch;
  kiln_nn_module *m;
  kiln_optim *opt;
  kiln_graph *graph;          /* jit */
  kiln_function *fn;          /* jit */
  kiln_model *model;          /* an imported model (opts graph_path); m is its module */
  int64_t ex_shape[KILN_MAX_DIMS]; /* its example input */
  int ex_ndim;
  kiln_data *train, *test;
  kiln_data_loader *loader, *test_loader;
  kiln_generator *gen;
  uint64_t epoch_rng[4];      /* gen's state when the current epoch began */
  int64_t step;               /* global steps done */
  double base_lr;
  nn_log log;
  int64_t counters[NN_N_COUNTERS];
  int rank, world;            /* --dist: this rank of world (else 0 of 1) */
  kiln_dist_reducer *red;     /* --dist, eager and jit */
  nn_phases ph;               /* KILN_TRAIN_PHASES=1 */
} trainer;

const char *const nn_lazy_counter_names[NN_N_COUNTERS] = {
    "MarkStep",          "UncachedCompile",  "CachedCompile",     "ExecuteGraph",
    "DeviceDataCacheMiss", "CreateLazyTensor", "DestroyLazyTensor", "SyncTensorsToData",
    "CompileTime",       "ExecuteTime"};

size_t kiln_nn_train_opts_size(void) { return sizeof(kiln_nn_train_opts); }

void kiln_nn_train_opts_default(kiln_nn_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->model = "mlp";
  o->mode = KILN_NN_EAGER;
  o->epochs = 2;
  o->batch = 64;
  o->optimizer = "sgd";
  o->momentum = 0.9;
  o->schedule = "cosine";
  o->eval_batch = 1000;
}

static const char *const mode_names[3] = {"eager", "jit", "lazy"};

int kiln_nn_mode_parse(const char *name) {
  for (int i = 0; name && i < 3; i++)
    if (strcmp(name, mode_names[i]) == 0) return i;
  return -1;
}

const char *kiln_nn_mode_name(kiln_nn_mode mode) {
  return (unsigned)mode < 3 ? mode_names[mode] : "?";
}

void kiln_nn_train_result_free(kiln_nn_train_result *r) {
  if (!r) return;
  core_free(r->losses);
  core_free(r->test_loss);
  core_free(r->test_accuracy);
  memset(r, 0, sizeof *r);
}

/* ---- the forward in each mode -------------------------------------------- */

/* Logits for images x [B, 1, 28, 28] (already lazy in lazy mode). */
/* Images [B, 1, 28, 28] shaped as the imported model's example input:
 * flat ([1, 784]), or C channels (grey repeated). */
static kiln_tensor *model_forward(trainer *t, kiln_tensor *x) {
  int64_t B = kiln_tensor_size(x, 0);
  if (t->ex_ndim == 2) {
    x = kiln_reshape(x, 2, (int64_t[]){B, kiln_tensor_numel(x) / (B ? B : 1)});
  } else if (t->ex_ndim == 4 && t->ex_shape[1] != 1) {
    int64_t c = t->ex_shape[1];
    x = kiln_contiguous(kiln_expand(x, 4, (int64_t[]){B, c, kiln_tensor_size(x, 2),
                                                      kiln_tensor_size(x, 3)}));
  } else if (t->ex_ndim == 3) {
    x = kiln_reshape(x, 3, (int64_t[]){B, kiln_tensor_size(x, 2), kiln_tensor_size(x, 3)});
  }
  if (!x) return NULL;
  kiln_value in = {.kind = KILN_VALUE_TENSOR, .t = x}, out[8];
  int k = kiln_model_call(t->model, &in, 1, out, 8);
  if (k < 0) return NULL;
  if (k < 1 || out[0].kind != KILN_VALUE_TENSOR) {
    core_error(KILN_ERR_STATE, "train: the graph '%s' returned no tensor", t->o->graph_path);
    return NULL;
  }
  return out[0].t;
}

static kiln_tensor *forward(trainer *t, kiln_tensor *x) {
  if (t->model) return model_forward(t, x);
  if (!t->fn) return kiln_nn_module_forward(t->m, x);
  kiln_value in[16], out[1];
  int n = 0;
  int64_t B = kiln_tensor_size(x, 0);
  if (t->arch == ARCH_MLP) x = kiln_reshape(x, 2, (int64_t[]){B, 784});
  if (t->arch == ARCH_LSTM) x = kiln_reshape(x, 3, (int64_t[]){B, 28, 28});
  if (!x) return NULL;
  in[n++] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = x};
  if (t->arch == ARCH_LSTM) {
    int64_t hs = kiln_tensor_size(kiln_nn_module_param(t->m, 1), 1);
    kiln_tensor *z = kiln_zeros(2, (int64_t[]){B, hs}, KILN_DTYPE_F32);
    if (!z) return NULL;
    in[n++] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = z};
    in[n++] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = z};
  }
  for (int i = 0; i < t->m->n_params && n < 16; i++)
    in[n++] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = t->m->params[i]};
  int k = kiln_function_call(t->fn, in, n, out, 1);
  if (k < 0) return NULL;
  if (k != 1 || out[0].kind != KILN_VALUE_TENSOR) {
    core_error(KILN_ERR_STATE, "train: the %s graph returned no tensor", t->o->model);
    return NULL;
  }
  return out[0].t;
}

static bool lazy_mode(const trainer *t) { return t->o->mode == KILN_NN_LAZY; }

/* Batch i; with shard set, this rank's rows of it (only those are read),
 * and in *weight the factor that makes the ranks' mean losses average to
 * the batch's mean (1 unless the batch does not divide by the world). */
static int batch_tensors(trainer *t, const kiln_data_loader *l, int64_t i, kiln_tensor **x,
                         kiln_tensor **y, bool shard, double *weight) {
  int rc;
  if (weight) *weight = 1;
  if (shard && t->world > 1) {
    int64_t bs = nn_data_loader_batch_rows(l, i), lo = bs * t->rank / t->world,
            hi = bs * (t->rank + 1) / t->world;
    if (hi == lo) { /* fewer rows than ranks: one row that weighs nothing */
      lo = 0;
      hi = 1;
      if (weight) *weight = 0;
    } else if (weight) {
      *weight = (double)(hi - lo) * t->world / (double)bs;
    }
    rc = nn_data_loader_rows(l, i, lo, hi - lo, x, y);
  } else {
    rc = kiln_data_loader_batch(l, i, x, y);
  }
  if (rc == 0 && lazy_mode(t)) {
    *x = kiln_to_lazy(*x);
    *y = kiln_to_lazy(*y);
    if (!*x || !*y) rc = KILN_ERR_NOMEM;
  }
  return rc;
}

static int mark(trainer *t) { return lazy_mode(t) ? kiln_mark_step() : 0; }

/* One training step on batch i; its loss in *loss. */
static int train_step(trainer *t, int64_t i, double *loss) {
  const kiln_nn_train_opts *o = t->o;
  kiln_scope_begin();
  kiln_tensor *x, *y, *l = NULL;
  double w = 1;
  /* --no-sync-steps K: the optimizer steps (and ranks reduce) on every
   * K-th batch; the others only accumulate gradients */
  bool stepping = o->no_sync_steps <= 1 || (t->step + 1) % o->no_sync_steps == 0;
  nn_phases_start(&t->ph);
  int rc = batch_tensors(t, t->loader, i, &x, &y, true, &w);
  nn_phases_mark(&t->ph, NN_PH_DATA);
  if (rc == 0) {
    kiln_tensor *logits = forward(t, x);
    l = logits ? kiln_cross_entropy(logits, y, KILN_REDUCTION_MEAN) : NULL;
    if (l && w != 1) l = kiln_mul_scalar(l, w);
    if (!l) rc = KILN_ERR_INVALID;
  }
  if (t->red) kiln_dist_reducer_set_sync(t->red, stepping);
  /* a synced eager/jit step sums the ranks' losses in the reducer's side
   * all-reduce (Note [Side all-reduce] in src/dist/reducer.c), not in a
   * blocking all-reduce of their own */
  bool side = t->red && t->world > 1 && stepping && !lazy_mode(t);
  if (rc == 0 && side) rc = kiln_item(l, loss);
  if (rc == 0 && side) rc = kiln_dist_reducer_set_values(t->red, loss, 1);
  if (rc == 0 && o->sync_phases) rc = mark(t);
  nn_phases_mark(&t->ph, NN_PH_FORWARD);
  if (rc == 0) rc = kiln_backward(l, NULL);
  nn_phases_mark(&t->ph, NN_PH_BACKWARD);
  if (rc == 0 && t->red) rc = kiln_dist_reducer_finish(t->red);
  if (rc == 0 && o->sync_phases) rc = mark(t);
  nn_phases_mark(&t->ph, NN_PH_REDUCE);
  if (rc == 0 && stepping) rc = kiln_optim_step(t->opt);
  if (rc == 0 && stepping) rc = kiln_optim_zero_grad(t->opt);
  if (rc == 0) rc = mark(t);
  nn_phases_mark(&t->ph, NN_PH_OPTIM);
  if (rc == 0 && !side) rc = kiln_item(l, loss);
  if (rc == 0 && t->world > 1) {
    rc = side ? kiln_dist_reducer_values(t->red, loss, 1)
              : kiln_dist_all_reduce_f64(loss, 1, KILN_DIST_SUM);
    if (rc < 0) core_error_prefix("step %" PRId64 ": the loss's all-reduce: ", t->step + 1);
    else rc = 0;
    *loss /= t->world;
  }
  kiln_scope_end();
  nn_phases_mark(&t->ph, NN_PH_LOSS);
  return rc;
}

/* Test loss (mean) and accuracy over the whole test set. */
static int evaluate(trainer *t, double *loss, double *acc) {
  int rc = 0;
  double sum = 0, hits = 0;
  int64_t nb = kiln_data_loader_n_batches(t->test_loader), n = kiln_data_size(t->test);
  bool was = kiln_set_grad_enabled(false);
  bool training = kiln_nn_module_is_training(t->m);
  kiln_nn_module_set_training(t->m, false);
  for (int64_t i = 0; i < nb && rc == 0; i++) {
    kiln_scope_begin();
    kiln_tensor *x, *y;
    rc = batch_tensors(t, t->test_loader, i, &x, &y, false, NULL);
    kiln_tensor *logits = rc == 0 ? forward(t, x) : NULL;
    kiln_tensor *ls = logits ? kiln_cross_entropy(logits, y, KILN_REDUCTION_SUM) : NULL;
    kiln_tensor *ok = logits ? kiln_sum(kiln_eq(kiln_argmax(logits, 1, false, false), y), NULL,
                                        0, false)
                             : NULL;
    if (rc == 0 && (!ls || !ok)) rc = KILN_ERR_INVALID;
    if (rc == 0) rc = mark(t);
    double a = 0, b = 0;
    if (rc == 0) rc = kiln_item(ls, &a);
    if (rc == 0) rc = kiln_item(ok, &b);
    sum += a;
    hits += b;
    kiln_scope_end();
  }
  kiln_nn_module_set_training(t->m, training);
  kiln_set_grad_enabled(was);
  *loss = n ? sum / (double)n : 0;
  *acc = n ? hits / (double)n : 0;
  return rc;
}

/* ---- setup ------------------------------------------------------------------ */

static int parse_optimizer(const kiln_nn_train_opts *o, kiln_optim_opts *oo) {
  memset(oo, 0, sizeof *oo);
  const char *name = o->optimizer ? o->optimizer : "sgd";
  if (strcmp(name, "sgd") == 0) {
    oo->kind = KILN_OPTIM_SGD;
    oo->lr = o->lr > 0 ? o->lr : 0.05;
    oo->momentum = o->momentum;
  } else if (strcmp(name, "adam") == 0 || strcmp(name, "adamw") == 0) {
    oo->kind = name[4] ? KILN_OPTIM_ADAMW : KILN_OPTIM_ADAM;
    oo->lr = o->lr > 0 ? o->lr : 1e-3;
    if (oo->kind == KILN_OPTIM_ADAMW) oo->weight_decay = 0.01;
  } else {
    return core_error(KILN_ERR_INVALID, "train: unknown optimizer '%s' (sgd, adam, adamw)", name);
  }
  return 0;
}

static double scheduled_lr(const trainer *t, int64_t epoch, int64_t step) {
  const char *s = t->o->schedule ? t->o->schedule : "none";
  if (strcmp(s, "step") == 0) return kiln_optim_lr_step(t->base_lr, epoch, 1, 0.7);
  if (strcmp(s, "cosine") == 0) {
    int64_t total = (int64_t)t->o->epochs * kiln_data_loader_n_batches(t->loader);
    return kiln_optim_lr_cosine(t->base_lr, 0, step, total);
  }
  return kiln_optim_lr(t->opt);
}

static int setup(trainer *t, const kiln_nn_train_opts *o) {
  int rc = 0;
  const char *archs[3] = {"mlp", "cnn", "lstm"};
  t->arch = -1;
  for (int i = 0; i < 3; i++)
    if (o->model && strcmp(o->model, archs[i]) == 0) t->arch = i;
  if (o->graph_path && !o->weights_path)
    return core_error(KILN_ERR_INVALID, "train: --graph needs --weights");
  if (t->arch < 0 && !o->graph_path)
    return core_error(KILN_ERR_INVALID, "train: unknown model '%s' (mlp, cnn, lstm)",
                      o->model ? o->model : "(null)");
  if ((unsigned)o->mode > KILN_NN_LAZY)
    return core_error(KILN_ERR_INVALID, "train: unknown mode %d", (int)o->mode);
  if (o->epochs < 1 || o->batch < 1 || o->eval_batch < 1 || o->max_steps < 0 || !(o->lr >= 0))
    return core_error(KILN_ERR_INVALID,
                      "train: epochs (%d), batch (%lld) and eval batch must be >= 1, "
                      "steps and lr >= 0",
                      o->epochs, (long long)o->batch);
  t->world = 1;
  if (o->dist) {
    if ((rc = kiln_dist_init()) < 0) return rc;
    t->rank = kiln_dist_rank();
    t->world = kiln_dist_world_size();
    if (o->dist_timeout > 0) kiln_dist_set_timeout(o->dist_timeout);
    if (o->batch % t->world)
      return core_error(KILN_ERR_INVALID,
                        "train: --batch %lld does not divide by the %d ranks (each rank "
                        "runs batch/ranks rows of every batch)",
                        (long long)o->batch, t->world);
  }
  if (o->no_sync_steps < 0 || o->bucket_mb < 0)
    return core_error(KILN_ERR_INVALID, "train: --no-sync-steps and --bucket-mb must be >= 0");
  if (o->schedule && strcmp(o->schedule, "none") && strcmp(o->schedule, "step") &&
      strcmp(o->schedule, "cosine"))
    return core_error(KILN_ERR_INVALID, "train: unknown schedule '%s' (none, step, cosine)",
                      o->schedule);
  kiln_optim_opts oo;
  if ((rc = parse_optimizer(o, &oo)) < 0) return rc;
  const char *dir = o->data_dir ? o->data_dir : kiln_data_default_dir();
  t->train = kiln_data_mnist_load(dir, true);
  if (!t->train) return KILN_ERR_IO;
  t->test = kiln_data_mnist_load(dir, false);
  if (!t->test) return KILN_ERR_IO;
  if (o->train_limit > 0 && o->train_limit < kiln_data_size(t->train))
    kiln_data_truncate(t->train, o->train_limit);
  if (o->test_limit > 0 && o->test_limit < kiln_data_size(t->test))
    kiln_data_truncate(t->test, o->test_limit);
  t->loader = kiln_data_loader_new(t->train, o->batch, false);
  t->test_loader = kiln_data_loader_new(t->test, o->eval_batch, false);
  t->gen = kiln_generator_new(o->seed);
  if (!t->loader || !t->test_loader || !t->gen) return KILN_ERR_NOMEM;
  if (o->graph_path) {
    kiln_model_opts mo;
    kiln_model_opts_default(&mo);
    mo.mode = o->mode == KILN_NN_LAZY ? KILN_NN_EAGER : o->mode; /* lazy: moved below */
    mo.training = 1;
    t->model = kiln_model_load(o->graph_path, o->weights_path, &mo);
    if (!t->model) return KILN_ERR_INVALID;
    t->m = kiln_model_module(t->model);
    t->ex_ndim = kiln_model_input_shape(t->model, 0, t->ex_shape, NULL);
    if (kiln_model_n_inputs(t->model) != 1)
      return core_error(KILN_ERR_INVALID, "train: the graph '%s' takes %d inputs (1: the images)",
                        o->graph_path, kiln_model_n_inputs(t->model));
  } else {
    t->m = kiln_nn_model_new(o->model, t->gen);
  }
  if (!t->m) return KILN_ERR_INVALID;
  t->opt = kiln_optim_new(t->m, &oo);
  if (!t->opt) return KILN_ERR_INVALID;
  t->base_lr = oo.lr;
  kiln_generator_get_state(t->gen, t->epoch_rng);
  if (o->mode == KILN_NN_JIT && !t->model) {
    const char *ir = kiln_nn_model_ir(o->model);
    t->graph = kiln_graph_parse(ir, strlen(ir));
    t->fn = t->graph ? kiln_function_new(t->graph) : NULL;
    if (!t->fn) {
      core_error_prefix("train: the %s forward graph:", o->model);
      return KILN_ERR_INVALID;
    }
  }
  return 0;
}

static void teardown(trainer *t) {
  kiln_dist_reducer_free(t->red);
  kiln_function_free(t->fn);
  kiln_graph_free(t->graph);
  kiln_optim_free(t->opt);
  if (t->model) kiln_model_free(t->model); /* frees its module, t->m */
  else kiln_nn_module_free(t->m);
  kiln_data_loader_free(t->loader);
  kiln_data_loader_free(t->test_loader);
  kiln_data_free(t->train);
  kiln_data_free(t->test);
  kiln_generator_free(t->gen);
  nn_log_free(&t->log);
}

const char *const nn_jit_counter_names[NN_N_JIT_COUNTERS] = {
    "profiling_runs", "optimizations", "guard_passes", "guard_failures", "fallback_calls"};

/* Cumulative counters after a step: lazy metrics, or the executor's. */
static void read_counters(trainer *t) {
  if (lazy_mode(t)) {
    for (int k = 0; k < NN_N_COUNTERS; k++)
      t->counters[k] = kiln_lazy_counter(nn_lazy_counter_names[k]);
  } else if (t->fn || (t->model && t->o->mode == KILN_NN_JIT)) {
    kiln_function_stats s;
    kiln_function_get_stats(t->fn ? t->fn : kiln_model_function(t->model), &s);
    int64_t v[NN_N_JIT_COUNTERS] = {s.profiling_runs, s.optimizations, s.guard_passes,
                                    s.guard_failures, s.fallback_calls};
    memcpy(t->counters, v, sizeof v);
  }
}

static int save(trainer *t, int64_t epoch, int64_t batch) {
  kiln_checkpoint_info info;
  memset(&info, 0, sizeof info);
  snprintf(info.model, sizeof info.model, "%s", t->model ? "graph" : t->o->model);
  snprintf(info.optimizer, sizeof info.optimizer, "%s", kiln_optim_name(t->opt));
  info.lr = kiln_optim_lr(t->opt);
  info.step = t->step;
  if (batch >= kiln_data_loader_n_batches(t->loader)) {
    /* a finished epoch: the next one starts from gen's current state */
    epoch++;
    batch = 0;
    kiln_generator_get_state(t->gen, info.rng);
  } else {
    memcpy(info.rng, t->epoch_rng, sizeof info.rng);
  }
  info.epoch = epoch;
  info.batch = batch;
  return kiln_checkpoint_save(t->o->save_path, t->m, t->opt, &info);
}

static void print_header(const trainer *t, FILE *out, int64_t start_epoch, int64_t start_batch) {
  const kiln_nn_train_opts *o = t->o;
  fprintf(out, "kiln train: model %s (%" PRId64 " parameters), mode %s%s, optimizer %s (lr %g",
          t->model ? o->graph_path : o->model, kiln_nn_module_numel(t->m),
          kiln_nn_mode_name(o->mode),
          o->mode != KILN_NN_LAZY ? ""
          : o->sync_phases        ? " (3 syncs per step)"
                                  : " (1 sync per step)",
          kiln_optim_name(t->opt), kiln_optim_lr(t->opt));
  if (strcmp(kiln_optim_name(t->opt), "sgd") == 0) fprintf(out, ", momentum %g", o->momentum);
  fprintf(out, "), batch %" PRId64 ", epochs %d, seed %" PRIu64 "\n", o->batch, o->epochs, o->seed);
  fprintf(out, "data: %s: %" PRId64 " training and %" PRId64 " test images\n",
          o->data_dir ? o->data_dir : kiln_data_default_dir(), kiln_data_size(t->train),
          kiln_data_size(t->test));
  if (o->resume_path)
    fprintf(out, "resumed from %s at step %" PRId64 " (epoch %" PRId64 ", batch %" PRId64 ")\n",
            o->resume_path, t->step, start_epoch + 1, start_batch);
  fflush(out);
}

static void print_lazy_summary(FILE *out) {
  fprintf(out,
          "lazy: MarkStep=%" PRId64 " UncachedCompile=%" PRId64 " CachedCompile=%" PRId64
          " ExecuteGraph=%" PRId64 " CompileTime=%.1fms ExecuteTime=%.1fms\n",
          kiln_lazy_counter("MarkStep"), kiln_lazy_counter("UncachedCompile"),
          kiln_lazy_counter("CachedCompile"), kiln_lazy_counter("ExecuteGraph"),
          (double)kiln_lazy_counter("CompileTime") / 1e6,
          (double)kiln_lazy_counter("ExecuteTime") / 1e6);
}

static void print_jit_summary(FILE *out, const kiln_function *fn) {
  kiln_function_stats s;
  kiln_function_get_stats(fn, &s);
  fprintf(out,
          "jit: profiling_runs=%" PRId64 " optimizations=%" PRId64 " guard_passes=%" PRId64
          " guard_failures=%" PRId64 " fallback_calls=%" PRId64 "\n",
          s.profiling_runs, s.optimizations, s.guard_passes, s.guard_failures, s.fallback_calls);
  /* each distinct reason once, with its count (evaluation under no_grad
   * fails the requires-grad guard every time: PyTorch does the same) */
  int n = kiln_function_n_guard_failure_reasons(fn), shown = 0;
  for (int i = 0; i < n && shown < 5; i++) {
    const char *r = kiln_function_guard_failure_reason(fn, i);
    int count = 0, seen = 0;
    for (int j = 0; j < n; j++) {
      bool same = strcmp(kiln_function_guard_failure_reason(fn, j), r) == 0;
      count += same;
      seen += same && j < i;
    }
    if (seen) continue;
    fprintf(out, "  guard failure (x%d): %s\n", count, r);
    shown++;
  }
}

static int fill_result(const trainer *t, kiln_nn_train_result *r) {
  const nn_log *log = &t->log;
  r->n_steps = log->n_steps;
  r->first_step = log->first_step;
  r->n_epochs = log->n_epochs;
  r->losses = core_alloc((size_t)(log->n_steps ? log->n_steps : 1) * sizeof(double));
  r->test_loss = core_alloc((size_t)(log->n_epochs ? log->n_epochs : 1) * sizeof(double));
  r->test_accuracy = core_alloc((size_t)(log->n_epochs ? log->n_epochs : 1) * sizeof(double));
  if (!r->losses || !r->test_loss || !r->test_accuracy) return KILN_ERR_NOMEM;
  if (log->n_steps) memcpy(r->losses, log->loss, (size_t)log->n_steps * sizeof(double));
  if (log->n_epochs) {
    memcpy(r->test_loss, log->test_loss, (size_t)log->n_epochs * sizeof(double));
    memcpy(r->test_accuracy, log->test_acc, (size_t)log->n_epochs * sizeof(double));
  }
  return 0;
}

/* --dist: rank 0's parameters and optimizer state on every rank (they
 * agree already unless the seeds or checkpoints differ). */
static int dist_setup(trainer *t) {
  kiln_nn_module *m = t->m;
  int rc = kiln_dist_broadcast(m->params, m->n_params, 0);
  for (int i = 0; rc == 0 && i < kiln_optim_n_state(t->opt); i++) {
    kiln_tensor *s = kiln_optim_state(t->opt, i);
    rc = kiln_dist_broadcast(&s, 1, 0);
  }
  return rc;
}

/* The reducer (after kiln_nn_module_to_lazy in lazy mode: it then records
 * the all-reduces into the step's graph). */
static int dist_reducer(trainer *t) {
  kiln_nn_module *m = t->m;
  kiln_dist_reducer_opts ro = {.bucket_mb = t->o->bucket_mb};
  t->red = kiln_dist_reducer_new(m->params, (const char *const *)m->names, m->n_params, &ro);
  return t->red ? 0 : KILN_ERR_STATE;
}

/* ---- the loop ---------------------------------------------------------------- */

kiln_status kiln_nn_train(const kiln_nn_train_opts *o, kiln_nn_train_result *r) {
  if (!o) return core_error(KILN_ERR_INVALID, "train: NULL options");
  if (r) memset(r, 0, sizeof *r);
  double t_start = nn_now(), train_time = 0;
  trainer t;
  memset(&t, 0, sizeof t);
  t.o = o;
  nn_phases_init(&t.ph);
  int rc = setup(&t, o);
  FILE *out = t.rank == 0 ? o->out : NULL;
  bool lead = t.rank == 0;
  int64_t start_epoch = 0, start_batch = 0, samples = 0;
  if (rc == 0 && o->resume_path) {
    kiln_checkpoint_info info;
    rc = kiln_checkpoint_load(o->resume_path, t.m, t.opt, &info);
    if (rc == 0 && info.plain && out)
      fprintf(out, "notice: %s is a plain state_dict (no kiln metadata, no CRC to verify): "
                   "parameters loaded by name, shapes checked; optimizer state and step start "
                   "fresh\n", o->resume_path);
    if (rc == 0 && info.plain) {
      info.rng[0] = 0; /* keep the seeded generator */
      kiln_generator_get_state(t.gen, info.rng);
    }
    if (rc == 0) {
      t.step = info.step;
      start_epoch = info.epoch;
      start_batch = info.batch;
      kiln_generator_set_state(t.gen, info.rng);
      if (o->lr > 0) kiln_optim_set_lr(t.opt, o->lr); /* an explicit --lr wins */
      if (start_batch > kiln_data_loader_n_batches(t.loader))
        rc = core_error(KILN_ERR_INVALID,
                        "train: '%s' stopped at batch %" PRId64 " but an epoch has %" PRId64
                        " (another batch size or data set?)",
                        o->resume_path, start_batch, kiln_data_loader_n_batches(t.loader));
    }
  }
  if (rc == 0 && o->dist) rc = dist_setup(&t);
  if (rc == 0 && o->dist && !lazy_mode(&t)) rc = dist_reducer(&t);
  if (rc == 0 && lazy_mode(&t)) {
    rc = t.model ? kiln_model_to_lazy(t.model) : kiln_nn_module_to_lazy(t.m);
    if (rc == 0) rc = kiln_optim_to_lazy(t.opt);
    if (rc == 0 && o->dist) rc = dist_reducer(&t);
    if (rc == 0) rc = kiln_mark_step(); /* a checkpoint loaded into lazy state */
    kiln_lazy_metrics_reset();
  }
  if (rc < 0) goto done;
  t.log.first_step = t.step + 1;
  bool jit = t.fn || (t.model && o->mode == KILN_NN_JIT);
  t.log.n_counters = lazy_mode(&t) ? NN_N_COUNTERS : jit ? NN_N_JIT_COUNTERS : 0;
  t.log.counter_names = lazy_mode(&t) ? nn_lazy_counter_names : nn_jit_counter_names;
  if (out) print_header(&t, out, start_epoch, start_batch);

  int64_t nb = kiln_data_loader_n_batches(t.loader), steps_this_run = 0;
  bool stopped = false, evaluated_last = false;
  double final_loss = 0, final_acc = 0;
  int64_t saved_at = -1; /* the step of the checkpoint written, if one was */
  for (int64_t epoch = start_epoch; epoch < o->epochs && rc == 0 && !stopped; epoch++) {
    kiln_generator_get_state(t.gen, t.epoch_rng);
    kiln_data_loader_shuffle(t.loader, t.gen);
    int64_t first = epoch == start_epoch ? start_batch : 0;
    if (first >= nb) continue; /* the checkpoint ended exactly at this epoch's end */
    nn_progress bar;
    nn_progress_begin(&bar, o->progress && lead, (int)epoch + 1, o->epochs, nb);
    double ep_start = nn_now(), ep_loss = 0;
    int64_t ep_samples = 0, ep_steps = 0, i;
    for (i = first; i < nb && rc == 0; i++) {
      if (o->max_steps > 0 && t.step >= o->max_steps) {
        stopped = true;
        break;
      }
      double lr = scheduled_lr(&t, epoch, t.step);
      kiln_optim_set_lr(t.opt, lr);
      double t0 = nn_now(), loss = 0;
      rc = train_step(&t, i, &loss);
      train_time += nn_now() - t0;
      if (rc < 0) break;
      if (!o->no_nan_check && !isfinite(loss)) {
        rc = core_error(KILN_ERR_STATE,
                        "step %" PRId64 " (epoch %" PRId64 ", batch %" PRId64
                        "): the loss is %g; stopped, nothing saved (is the learning rate "
                        "%g too large? --detect-anomaly names the op; --nan-check off "
                        "keeps going)",
                        t.step + 1, epoch + 1, i, loss, lr);
        break;
      }
      t.step++;
      steps_this_run++;
      int64_t bs = i == nb - 1 ? kiln_data_size(t.train) - i * o->batch : o->batch;
      samples += bs;
      ep_samples += bs;
      ep_steps++;
      ep_loss += loss;
      read_counters(&t);
      if ((rc = nn_log_step(&t.log, loss, t.counters)) < 0) break;
      nn_progress_update(&bar, i + 1, ep_samples, ep_loss / (double)ep_steps, i == nb - 1);
      if (o->on_step && o->on_step(t.step, (int)epoch + 1, loss, o->on_step_ud) != 0) {
        stopped = true;
        i++;
        break;
      }
    }
    nn_progress_end(&bar);
    if (rc < 0 || ep_steps == 0) break;
    stopped = o->max_steps > 0 && t.step >= o->max_steps;
    if (o->save_path && lead && (stopped || epoch == o->epochs - 1)) {
      rc = save(&t, epoch, i);
      if (rc < 0) break;
      saved_at = t.step;
    }
    if (i < nb) break; /* stopped within the epoch: no per-epoch evaluation */
    double ep_time = nn_now() - ep_start;
    rc = lead ? evaluate(&t, &final_loss, &final_acc) : 0;
    if (rc < 0) break;
    evaluated_last = true;
    if ((rc = nn_log_epoch(&t.log, final_loss, final_acc)) < 0) break;
    if (out) {
      fprintf(out,
              "epoch %" PRId64 "/%d  loss %.4f  test_loss %.4f  test_acc %.4f  time %.2fs  "
              "%.0f samples/s\n",
              epoch + 1, o->epochs, ep_steps ? ep_loss / (double)ep_steps : 0.0, final_loss,
              final_acc, ep_time, ep_time > 0 ? (double)ep_samples / ep_time : 0.0);
      fflush(out);
    }
  }
  if (rc == 0 && !evaluated_last && lead) {
    rc = evaluate(&t, &final_loss, &final_acc);
    if (rc == 0 && out)
      fprintf(out, "after step %" PRId64 ": test_loss %.4f  test_acc %.4f\n", t.step, final_loss,
              final_acc);
  }
  if (rc == 0 && o->plot_path && lead) {
    char title[300];
    snprintf(title, sizeof title, "kiln train --%s %.200s --mode %s", o->graph_path ? "graph" : "model",
             o->graph_path ? o->graph_path : o->model, kiln_nn_mode_name(o->mode));
    rc = nn_write_plot(o->plot_path, &t.log, title);
  }
  if (rc == 0 && o->metrics_path && lead)
    rc = nn_write_metrics(o->metrics_path, &t.log, kiln_nn_mode_name(o->mode),
                          o->graph_path ? o->graph_path : o->model);
  if (rc == 0 && out) {
    double total = nn_now() - t_start;
    fprintf(out,
            "summary: %" PRId64 " steps, %" PRId64 " samples in %.2fs of training (%.0f "
            "samples/s), %.2fs in total\n",
            steps_this_run, samples, train_time,
            train_time > 0 ? (double)samples / train_time : 0.0, total);
    if (lazy_mode(&t)) print_lazy_summary(out);
    if (jit) print_jit_summary(out, t.fn ? t.fn : kiln_model_function(t.model));
    if (t.red) {
      kiln_dist_stats ds;
      kiln_dist_reducer_stats(t.red, &ds);
      fprintf(out, "dist: %d ranks, %d buckets%s, %" PRId64 " reductions", t.world,
              ds.n_buckets, ds.rebuilt ? " (rebuilt)" : "", ds.n_reductions);
      fprintf(out, ", all-reduce %.1fms, waiting %.1fms, overlap %.0f%%%s\n",
              ds.comm_seconds * 1e3, ds.wait_seconds * 1e3, 100 * ds.overlap,
              lazy_mode(&t) ? " (all-reduce nodes in the lazy graph)" : "");
    }
    if (saved_at >= 0) fprintf(out, "saved %s at step %" PRId64 "\n", o->save_path, saved_at);
    else if (o->save_path) fprintf(out, "nothing saved to %s: no step ran\n", o->save_path);
    fprintf(out, "test_accuracy=%.4f\n", final_acc);
    fflush(out);
  }
  if (rc == 0 && t.ph.on) {
    kiln_dist_stats ds;
    if (t.red) kiln_dist_reducer_stats(t.red, &ds);
    nn_phases_print(&t.ph, stderr, t.rank, t.world ? t.world : 1, steps_this_run,
                    t.red ? &ds : NULL);
  }
  if (r) {
    int rr = fill_result(&t, r);
    r->final_accuracy = final_acc;
    r->final_loss = final_loss;
    r->train_seconds = train_time;
    r->total_seconds = nn_now() - t_start;
    r->samples_per_sec = train_time > 0 ? (double)samples / train_time : 0;
    if (rc == 0) rc = rr;
  }
done:
  teardown(&t);
  return rc;
}

kiln_status kiln_nn_eval_checkpoint(const char *path, const char *data_dir, int64_t test_limit,
                                    double *loss, double *accuracy) {
  kiln_checkpoint_info info;
  int rc = kiln_checkpoint_read_info(path, &info);
  if (rc < 0) return rc;
  trainer t;
  memset(&t, 0, sizeof t);
  kiln_nn_train_opts o;
  kiln_nn_train_opts_default(&o);
  o.model = info.model;
  o.data_dir = data_dir;
  o.test_limit = test_limit;
  t.o = &o;
  int arch = -1;
  const char *archs[3] = {"mlp", "cnn", "lstm"};
  for (int i = 0; i < 3; i++)
    if (strcmp(info.model, archs[i]) == 0) arch = i;
  if (arch < 0 && info.plain)
    return core_error(KILN_ERR_FORMAT,
                      "eval: '%s': a plain state_dict that matches no built-in model (names "
                      "and shapes: Note [PyTorch names] in src/nn/torch_names.c)",
                      path);
  if (arch < 0)
    return core_error(KILN_ERR_FORMAT, "eval: '%s': unknown model '%s'", path, info.model);
  t.arch = arch;
  t.test = kiln_data_mnist_load(data_dir ? data_dir : kiln_data_default_dir(), false);
  if (!t.test) return KILN_ERR_IO;
  if (test_limit > 0 && test_limit < kiln_data_size(t.test)) kiln_data_truncate(t.test, test_limit);
  t.test_loader = kiln_data_loader_new(t.test, o.eval_batch, false);
  t.gen = kiln_generator_new(0);
  t.m = t.gen ? kiln_nn_model_new(info.model, t.gen) : NULL;
  rc = t.test_loader && t.m ? kiln_checkpoint_load(path, t.m, NULL, NULL) : KILN_ERR_NOMEM;
  double l = 0, a = 0;
  if (rc == 0) rc = evaluate(&t, &l, &a);
  if (rc == 0) {
    if (loss) *loss = l;
    if (accuracy) *accuracy = a;
  }
  teardown(&t);
  return rc;
}
