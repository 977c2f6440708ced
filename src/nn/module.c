/* src/nn/module.c: modules (named parameters and the layers on them),
 * parameter initialisation, and the layers' forwards written with the
 * public ops (linear, conv2d, embedding, layer norm, dropout, LSTM). */
#include <math.h>
#include <string.h>

#include "nn.h"

/* ---- modules ----------------------------------------------------------- */

kiln_nn_module *kiln_nn_module_new(void) {
  kiln_nn_module *m = core_calloc(1, sizeof *m);
  if (m) m->training = true;
  return m;
}

void kiln_nn_module_free(kiln_nn_module *m) {
  if (!m) return;
  for (int i = 0; i < m->n_params; i++) {
    kiln_release(m->params[i]);
    core_free(m->names[i]);
  }
  for (int i = 0; i < m->n_layers; i++) core_free(m->layers[i]);
  for (int i = 0; i < m->n_buffers; i++) {
    kiln_release(m->buffers[i]);
    core_free(m->buffer_names[i]);
  }
  core_free(m->buffers);
  core_free(m->buffer_names);
  core_free(m->params);
  core_free(m->names);
  core_free(m->layers);
  core_free(m);
}

static int find_param(const kiln_nn_module *m, const char *name) {
  for (int i = 0; i < m->n_params; i++)
    if (strcmp(m->names[i], name) == 0) return i;
  return -1;
}

kiln_status kiln_nn_module_add_param(kiln_nn_module *m, const char *name, kiln_tensor *t) {
  if (!m || !t || !name || !*name)
    return core_error(KILN_ERR_INVALID, "nn_module_add_param: NULL module, tensor or empty name");
  if (find_param(m, name) >= 0)
    return core_error(KILN_ERR_INVALID, "nn_module_add_param: a parameter '%s' already exists",
                      name);
  if (!core_dtype_is_floating(t->dtype))
    return core_error(KILN_ERR_INVALID, "nn_module_add_param: '%s' is %s, not floating", name,
                      kiln_dtype_name(t->dtype));
  if (m->n_params == m->cap_params) {
    int cap = m->cap_params ? 2 * m->cap_params : 8;
    char **names = core_realloc(m->names, (size_t)cap * sizeof *names);
    if (!names) return KILN_ERR_NOMEM;
    m->names = names;
    kiln_tensor **params = core_realloc(m->params, (size_t)cap * sizeof *params);
    if (!params) return KILN_ERR_NOMEM;
    m->params = params;
    m->cap_params = cap;
  }
  char *copy = core_strdup(name);
  if (!copy) return KILN_ERR_NOMEM;
  int rc = kiln_requires_grad(t) ? KILN_OK : kiln_set_requires_grad(t, true);
  if (rc < 0) {
    core_free(copy);
    return rc;
  }
  m->names[m->n_params] = copy;
  m->params[m->n_params++] = kiln_retain(t);
  return KILN_OK;
}

int kiln_nn_module_n_params(const kiln_nn_module *m) { return m ? m->n_params : 0; }

const char *kiln_nn_module_param_name(const kiln_nn_module *m, int i) {
  return m && i >= 0 && i < m->n_params ? m->names[i] : NULL;
}

kiln_tensor *kiln_nn_module_param(const kiln_nn_module *m, int i) {
  return m && i >= 0 && i < m->n_params ? m->params[i] : NULL;
}

kiln_tensor *kiln_nn_module_find_param(const kiln_nn_module *m, const char *name) {
  int i = m && name ? find_param(m, name) : -1;
  return i < 0 ? NULL : m->params[i];
}

int64_t kiln_nn_module_numel(const kiln_nn_module *m) {
  int64_t n = 0;
  for (int i = 0; m && i < m->n_params; i++) n += kiln_tensor_numel(m->params[i]);
  return n;
}

int nn_module_add_buffer(kiln_nn_module *m, const char *name, kiln_tensor *t) {
  char **names = core_realloc(m->buffer_names, (size_t)(m->n_buffers + 1) * sizeof *names);
  if (!names) return KILN_ERR_NOMEM;
  m->buffer_names = names;
  kiln_tensor **bs = core_realloc(m->buffers, (size_t)(m->n_buffers + 1) * sizeof *bs);
  if (!bs) return KILN_ERR_NOMEM;
  m->buffers = bs;
  if (!(names[m->n_buffers] = core_strdup(name))) return KILN_ERR_NOMEM;
  bs[m->n_buffers] = kiln_retain(t);
  return m->n_buffers++;
}

kiln_status kiln_nn_module_to_lazy(kiln_nn_module *m) {
  if (!m) return core_error(KILN_ERR_INVALID, "nn_module_to_lazy: NULL module");
  int rc = KILN_OK;
  for (int i = 0; i < m->n_buffers && rc == KILN_OK; i++) {
    kiln_tensor *b = m->buffers[i];
    if (kiln_tensor_is_lazy(b)) continue;
    kiln_scope_begin();
    kiln_tensor *lz = kiln_to_lazy(b);
    if (lz) {
      m->buffers[i] = kiln_keep(lz);
      kiln_release(b);
    } else {
      rc = KILN_ERR_NOMEM;
    }
    kiln_scope_end();
  }
  for (int i = 0; i < m->n_params && rc == KILN_OK; i++) {
    kiln_tensor *p = m->params[i];
    if (kiln_tensor_is_lazy(p)) continue;
    kiln_scope_begin();
    kiln_tensor *lz = kiln_to_lazy(p);
    rc = lz ? kiln_set_requires_grad(lz, true) : KILN_ERR_NOMEM;
    if (rc == KILN_OK) {
      kiln_tensor_set_name(lz, m->names[i]);
      m->params[i] = kiln_keep(lz); /* ours after the scope ends */
      kiln_release(p);
    }
    kiln_scope_end();
  }
  return rc;
}

void kiln_nn_module_set_training(kiln_nn_module *m, bool training) {
  if (m) m->training = training;
}

bool kiln_nn_module_is_training(const kiln_nn_module *m) { return m && m->training; }

const char *kiln_nn_module_arch(const kiln_nn_module *m) { return m ? m->arch : NULL; }

kiln_tensor *kiln_nn_module_forward(kiln_nn_module *m, kiln_tensor *x) {
  if (!m || !m->forward) {
    core_error(KILN_ERR_INVALID, "nn_module_forward: the module has no forward");
    return NULL;
  }
  if (!x) {
    core_error(KILN_ERR_INVALID, "nn_module_forward: NULL input");
    return NULL;
  }
  return m->forward(m, x);
}

/* ---- initialisation ---------------------------------------------------- */

static int check_init(const char *fn, const kiln_tensor *t, int min_dims) {
  if (!t) return core_error(KILN_ERR_INVALID, "%s: NULL tensor", fn);
  if (kiln_tensor_is_lazy(t) || !core_data(t))
    return core_error(KILN_ERR_INVALID, "%s: the tensor has no CPU data (lazy?)", fn);
  if (!core_dtype_is_floating(t->dtype))
    return core_error(KILN_ERR_INVALID, "%s: dtype %s is not floating", fn,
                      kiln_dtype_name(t->dtype));
  if (t->ndim < min_dims) {
    char s[64];
    return core_error(KILN_ERR_INVALID, "%s: needs at least %d dims, got %s", fn, min_dims,
                      core_shape_str(t->ndim, t->shape, s, sizeof s));
  }
  return 0;
}

kiln_status kiln_nn_init_uniform_(kiln_tensor *t, double lo, double hi, kiln_generator *gen) {
  int rc = check_init("nn_init_uniform_", t, 0);
  if (rc < 0) return rc;
  if (!gen) gen = kiln_default_generator();
  kiln_scope_begin();
  kiln_tensor *u = kiln_rand(t->ndim, t->shape, t->dtype, gen);
  kiln_tensor *v = u ? kiln_add_scalar(kiln_mul_scalar(u, hi - lo), lo) : NULL;
  bool was = kiln_set_grad_enabled(false);
  rc = v ? kiln_copy_(t, v) : KILN_ERR_NOMEM;
  kiln_set_grad_enabled(was);
  kiln_scope_end();
  return rc;
}

static void fans(const kiln_tensor *t, double *fan_in, double *fan_out) {
  double field = 1;
  for (int d = 2; d < t->ndim; d++) field *= (double)t->shape[d];
  *fan_in = (double)t->shape[1] * field;
  *fan_out = (double)t->shape[0] * field;
}

kiln_status kiln_nn_init_kaiming_uniform_(kiln_tensor *t, double a, kiln_generator *gen) {
  int rc = check_init("nn_init_kaiming_uniform_", t, 2);
  if (rc < 0) return rc;
  double fi, fo;
  fans(t, &fi, &fo);
  double bound = fi > 0 ? sqrt(6.0 / ((1 + a * a) * fi)) : 0;
  return kiln_nn_init_uniform_(t, -bound, bound, gen);
}

kiln_status kiln_nn_init_xavier_uniform_(kiln_tensor *t, double gain, kiln_generator *gen) {
  int rc = check_init("nn_init_xavier_uniform_", t, 2);
  if (rc < 0) return rc;
  double fi, fo;
  fans(t, &fi, &fo);
  double bound = fi + fo > 0 ? gain * sqrt(6.0 / (fi + fo)) : 0;
  return kiln_nn_init_uniform_(t, -bound, bound, gen);
}

/* ---- layers ------------------------------------------------------------- */

/* A new float32 parameter "<name>.<suffix>" of m, uniform in [-bound,
 * bound] (or filled with fill when bound < 0). Its index, or -1. */
static int new_param(kiln_nn_module *m, const char *name, const char *suffix, int ndim,
                     const int64_t *shape, double bound, double fill, kiln_generator *gen,
                     bool normal) {
  char full[256];
  if ((size_t)snprintf(full, sizeof full, "%s.%s", name, suffix) >= sizeof full) {
    core_error(KILN_ERR_INVALID, "nn layer: name '%s' too long", name);
    return -1;
  }
  kiln_scope_begin(); /* releases our reference to t: the module keeps its own */
  kiln_tensor *t = kiln_empty(ndim, shape, KILN_DTYPE_F32);
  int rc = t ? KILN_OK : KILN_ERR_NOMEM;
  if (rc == KILN_OK && normal) {
    kiln_tensor *r = kiln_randn(ndim, shape, KILN_DTYPE_F32, gen ? gen : kiln_default_generator());
    rc = r ? kiln_copy_(t, r) : KILN_ERR_NOMEM;
  } else if (rc == KILN_OK && bound >= 0) {
    rc = kiln_nn_init_uniform_(t, -bound, bound, gen);
  } else if (rc == KILN_OK) {
    rc = kiln_fill_(t, fill);
  }
  if (rc == KILN_OK) rc = kiln_nn_module_add_param(m, full, t);
  if (rc == KILN_OK) kiln_tensor_set_name(t, full);
  kiln_scope_end();
  return rc == KILN_OK ? m->n_params - 1 : -1;
}

static kiln_nn_layer *new_layer(kiln_nn_module *m, const char *fn, const char *name,
                                nn_layer_kind kind) {
  if (!m || !name || !*name) {
    core_error(KILN_ERR_INVALID, "%s: NULL module or empty name", fn);
    return NULL;
  }
  char prefix[260];
  snprintf(prefix, sizeof prefix, "%s.", name);
  for (int i = 0; i < m->n_params; i++)
    if (strncmp(m->names[i], prefix, strlen(prefix)) == 0) {
      core_error(KILN_ERR_INVALID, "%s: the module already has a layer '%s'", fn, name);
      return NULL;
    }
  if (m->n_layers == m->cap_layers) {
    int cap = m->cap_layers ? 2 * m->cap_layers : 8;
    kiln_nn_layer **ls = core_realloc(m->layers, (size_t)cap * sizeof *ls);
    if (!ls) return NULL;
    m->layers = ls;
    m->cap_layers = cap;
  }
  kiln_nn_layer *l = core_calloc(1, sizeof *l);
  if (!l) return NULL;
  l->kind = kind;
  l->owner = m;
  for (int k = 0; k < NN_LAYER_MAX_PARAMS; k++) l->param[k] = -1;
  m->layers[m->n_layers++] = l;
  return l;
}

/* Drops a layer whose parameters could not all be made (the parameters
 * already added stay: harmless, and rare: only on OOM). */
static kiln_nn_layer *drop_layer(kiln_nn_module *m, kiln_nn_layer *l) {
  m->n_layers--;
  core_free(l);
  return NULL;
}

static int check_sizes(const char *fn, int n, const int64_t *v) {
  for (int i = 0; i < n; i++)
    if (v[i] <= 0) return core_error(KILN_ERR_INVALID, "%s: sizes must be positive", fn);
  return 0;
}

kiln_nn_layer *kiln_nn_linear_new(kiln_nn_module *m, const char *name, int64_t in, int64_t out,
                                  bool bias, kiln_generator *gen) {
  if (check_sizes("nn_linear_new", 2, (int64_t[]){in, out}) < 0) return NULL;
  kiln_nn_layer *l = new_layer(m, "nn_linear_new", name, NN_LINEAR);
  if (!l) return NULL;
  double bound = 1.0 / sqrt((double)in);
  l->param[0] = new_param(m, name, "weight", 2, (int64_t[]){out, in}, bound, 0, gen, false);
  if (l->param[0] < 0) return drop_layer(m, l);
  if (bias) {
    l->param[1] = new_param(m, name, "bias", 1, &out, bound, 0, gen, false);
    if (l->param[1] < 0) return drop_layer(m, l);
  }
  l->n_params = 2;
  return l;
}

kiln_nn_layer *kiln_nn_conv2d_new(kiln_nn_module *m, const char *name, int64_t in_ch,
                                  int64_t out_ch, int64_t kernel, int64_t stride,
                                  int64_t padding, kiln_generator *gen) {
  if (check_sizes("nn_conv2d_new", 4, (int64_t[]){in_ch, out_ch, kernel, stride}) < 0 ||
      (padding < 0 && core_error(KILN_ERR_INVALID, "nn_conv2d_new: negative padding") < 0))
    return NULL;
  kiln_nn_layer *l = new_layer(m, "nn_conv2d_new", name, NN_CONV2D);
  if (!l) return NULL;
  double bound = 1.0 / sqrt((double)(in_ch * kernel * kernel));
  l->param[0] = new_param(m, name, "weight", 4, (int64_t[]){out_ch, in_ch, kernel, kernel},
                          bound, 0, gen, false);
  if (l->param[0] < 0) return drop_layer(m, l);
  l->param[1] = new_param(m, name, "bias", 1, &out_ch, bound, 0, gen, false);
  if (l->param[1] < 0) return drop_layer(m, l);
  l->n_params = 2;
  l->stride = stride;
  l->padding = padding;
  return l;
}

kiln_nn_layer *kiln_nn_embedding_new(kiln_nn_module *m, const char *name, int64_t n,
                                     int64_t dim, kiln_generator *gen) {
  if (check_sizes("nn_embedding_new", 2, (int64_t[]){n, dim}) < 0) return NULL;
  kiln_nn_layer *l = new_layer(m, "nn_embedding_new", name, NN_EMBEDDING);
  if (!l) return NULL;
  l->param[0] = new_param(m, name, "weight", 2, (int64_t[]){n, dim}, 0, 0, gen, true);
  if (l->param[0] < 0) return drop_layer(m, l);
  l->n_params = 1;
  return l;
}

kiln_nn_layer *kiln_nn_layer_norm_new(kiln_nn_module *m, const char *name, int64_t dim,
                                      double eps) {
  if (check_sizes("nn_layer_norm_new", 1, &dim) < 0) return NULL;
  kiln_nn_layer *l = new_layer(m, "nn_layer_norm_new", name, NN_LAYER_NORM);
  if (!l) return NULL;
  l->param[0] = new_param(m, name, "weight", 1, &dim, -1, 1.0, NULL, false);
  if (l->param[0] < 0) return drop_layer(m, l);
  l->param[1] = new_param(m, name, "bias", 1, &dim, -1, 0.0, NULL, false);
  if (l->param[1] < 0) return drop_layer(m, l);
  l->n_params = 2;
  l->eps = eps;
  return l;
}

kiln_nn_layer *kiln_nn_dropout_new(kiln_nn_module *m, const char *name, double p,
                                   kiln_generator *gen) {
  if (!(p >= 0 && p < 1)) {
    core_error(KILN_ERR_INVALID, "nn_dropout_new: p must be in [0, 1), got %g", p);
    return NULL;
  }
  kiln_nn_layer *l = new_layer(m, "nn_dropout_new", name, NN_DROPOUT);
  if (!l) return NULL;
  l->p = p;
  l->gen = gen;
  return l;
}

kiln_nn_layer *kiln_nn_lstm_new(kiln_nn_module *m, const char *name, int64_t input,
                                int64_t hidden, kiln_generator *gen) {
  if (check_sizes("nn_lstm_new", 2, (int64_t[]){input, hidden}) < 0) return NULL;
  kiln_nn_layer *l = new_layer(m, "nn_lstm_new", name, NN_LSTM);
  if (!l) return NULL;
  double bound = 1.0 / sqrt((double)hidden);
  int64_t g = 4 * hidden;
  l->param[0] = new_param(m, name, "weight_ih_l0", 2, (int64_t[]){g, input}, bound, 0, gen, false);
  if (l->param[0] < 0) return drop_layer(m, l);
  l->param[1] = new_param(m, name, "weight_hh_l0", 2, (int64_t[]){g, hidden}, bound, 0, gen, false);
  if (l->param[1] < 0) return drop_layer(m, l);
  l->param[2] = new_param(m, name, "bias_ih_l0", 1, &g, bound, 0, gen, false);
  if (l->param[2] < 0) return drop_layer(m, l);
  l->param[3] = new_param(m, name, "bias_hh_l0", 1, &g, bound, 0, gen, false);
  if (l->param[3] < 0) return drop_layer(m, l);
  l->n_params = 4;
  return l;
}

/* ---- forwards ----------------------------------------------------------- */

kiln_status kiln_nn_lstm_cell(kiln_tensor *x, kiln_tensor *h, kiln_tensor *c, kiln_tensor *w_ih,
                              kiln_tensor *w_hh, kiln_tensor *b_ih, kiln_tensor *b_hh,
                              kiln_tensor **h_new, kiln_tensor **c_new) {
  if (!x || !h || !c || !w_ih || !w_hh || !h_new || !c_new)
    return core_error(KILN_ERR_INVALID, "nn_lstm_cell: NULL argument");
  *h_new = *c_new = NULL;
  /* The op sequence of kiln_nn_model_ir("lstm")'s loop body, so that the
   * three modes compute the same values in the same order. */
  kiln_scope_begin();
  kiln_tensor *gates = kiln_add(kiln_linear(x, w_ih, b_ih), kiln_linear(h, w_hh, b_hh));
  kiln_tensor *g[4] = {NULL, NULL, NULL, NULL};
  int n = gates ? kiln_chunk(gates, 4, 1, g, 4) : -1;
  kiln_tensor *cn = NULL, *hn = NULL;
  if (n == 4) {
    cn = kiln_add(kiln_mul(kiln_sigmoid(g[1]), c), kiln_mul(kiln_sigmoid(g[0]), kiln_tanh(g[2])));
    hn = cn ? kiln_mul(kiln_sigmoid(g[3]), kiln_tanh(cn)) : NULL;
  } else if (n >= 0) {
    core_error(KILN_ERR_INVALID, "nn_lstm_cell: gates cannot be split in 4");
  }
  if (hn) {
    *h_new = kiln_keep(hn);
    *c_new = kiln_keep(cn);
  }
  kiln_scope_end();
  if (!*h_new) return KILN_ERR_INVALID;
  if (core_scope_reserve(2) < 0) {
    kiln_release(*h_new);
    kiln_release(*c_new);
    *h_new = *c_new = NULL;
    return KILN_ERR_NOMEM;
  }
  core_autorelease(*h_new);
  core_autorelease(*c_new);
  return KILN_OK;
}

kiln_tensor *kiln_nn_layer_norm(kiln_tensor *x, int n_dims, kiln_tensor *weight,
                                kiln_tensor *bias, double eps) {
  if (!x || n_dims < 1 || n_dims > kiln_tensor_ndim(x)) {
    core_error(KILN_ERR_INVALID, "nn_layer_norm: normalise over %d dims of a %d-d tensor",
               n_dims, x ? kiln_tensor_ndim(x) : 0);
    return NULL;
  }
  int64_t dims[KILN_MAX_DIMS];
  for (int i = 0; i < n_dims; i++) dims[i] = -n_dims + i;
  kiln_scope_begin();
  kiln_tensor *mu = kiln_mean(x, dims, n_dims, true);
  kiln_tensor *var = kiln_var(x, dims, n_dims, 0, true);
  kiln_tensor *y = kiln_div(kiln_sub(x, mu), kiln_sqrt(kiln_add_scalar(var, eps)));
  if (y && weight) y = kiln_mul(y, weight);
  if (y && bias) y = kiln_add(y, bias);
  if (y) kiln_keep(y);
  kiln_scope_end();
  return y ? core_autorelease(y) : NULL;
}

kiln_tensor *kiln_nn_lstm_forward(kiln_nn_layer *l, kiln_tensor *x, kiln_tensor *h0,
                                  kiln_tensor *c0, kiln_tensor **h_out, kiln_tensor **c_out) {
  if (!l || l->kind != NN_LSTM || !x || kiln_tensor_ndim(x) != 3) {
    core_error(KILN_ERR_INVALID, "nn_lstm_forward: needs an LSTM layer and x [B, T, I]");
    return NULL;
  }
  kiln_tensor *w_ih = nn_layer_param(l, 0), *w_hh = nn_layer_param(l, 1);
  int64_t B = kiln_tensor_size(x, 0), T = kiln_tensor_size(x, 1);
  int64_t H = kiln_tensor_size(w_hh, 1);
  if (T < 1) {
    core_error(KILN_ERR_INVALID, "nn_lstm_forward: no time steps");
    return NULL;
  }
  kiln_tensor **hs = core_alloc((size_t)T * sizeof *hs);
  if (!hs) return NULL;
  kiln_scope_begin();
  kiln_tensor *h = h0, *c = c0;
  if (!h || !c) {
    int64_t sh[2] = {B, H};
    kiln_tensor *z = kiln_zeros(2, sh, kiln_tensor_dtype(x));
    if (z && kiln_tensor_is_lazy(x)) z = kiln_to_lazy(z);
    if (!h) h = z;
    if (!c) c = z;
  }
  for (int64_t t = 0; t < T && h && c; t++) {
    kiln_tensor *hn = NULL, *cn = NULL;
    if (kiln_nn_lstm_cell(kiln_select(x, 1, t), h, c, w_ih, w_hh, nn_layer_param(l, 2),
                          nn_layer_param(l, 3), &hn, &cn) < 0)
      h = NULL;
    else {
      h = hn;
      c = cn;
    }
    hs[t] = h;
  }
  kiln_tensor *out = h && c ? kiln_stack(hs, (int)T, 1) : NULL;
  core_free(hs);
  if (out) {
    kiln_keep(out);
    if (h_out) *h_out = kiln_keep(h);
    if (c_out) *c_out = kiln_keep(c);
  }
  kiln_scope_end();
  if (!out) return NULL;
  if (core_scope_reserve(3) < 0) {
    kiln_release(out);
    if (h_out) kiln_release(*h_out), *h_out = NULL;
    if (c_out) kiln_release(*c_out), *c_out = NULL;
    return NULL;
  }
  if (h_out) core_autorelease(*h_out);
  if (c_out) core_autorelease(*c_out);
  return core_autorelease(out);
}

kiln_tensor *kiln_nn_forward(kiln_nn_layer *l, kiln_tensor *x) {
  if (!l || !x) {
    core_error(KILN_ERR_INVALID, "nn_forward: NULL layer or input");
    return NULL;
  }
  switch (l->kind) {
  case NN_LINEAR: return kiln_linear(x, nn_layer_param(l, 0), nn_layer_param(l, 1));
  case NN_CONV2D: {
    int64_t s[2] = {l->stride, l->stride}, p[2] = {l->padding, l->padding};
    return kiln_conv2d(x, nn_layer_param(l, 0), nn_layer_param(l, 1), s, p);
  }
  case NN_EMBEDDING: return kiln_embedding(nn_layer_param(l, 0), x);
  case NN_LAYER_NORM:
    return kiln_nn_layer_norm(x, 1, nn_layer_param(l, 0), nn_layer_param(l, 1), l->eps);
  case NN_DROPOUT: return kiln_dropout(x, l->p, l->owner->training, l->gen);
  case NN_LSTM: {
    kiln_tensor *h = NULL;
    kiln_scope_begin(); /* drops the sequence of hidden states */
    kiln_tensor *out = kiln_nn_lstm_forward(l, x, NULL, NULL, &h, NULL);
    if (out) kiln_keep(h);
    kiln_scope_end();
    return out ? core_autorelease(h) : NULL;
  }
  }
  core_error(KILN_ERR_INVALID, "nn_forward: unknown layer kind");
  return NULL;
}
