/* src/nn/optim.c: optimizers (SGD with momentum, Nesterov and weight
 * decay; Adam and AdamW) written with the public ops, and learning-rate
 * schedules.
 *
 * Note [Recordable steps]: every update is "state = f(state, grad)"
 * computed with ordinary ops and stored with kiln_copy_ under no_grad,
 * once every new value exists (Note [All or nothing]). On lazy parameters that records the update into the step's
 * graph and binds the parameter to the new value without changing its
 * identity. The
 * numbers that vary between steps (lr, Adam's bias corrections) enter
 * through the *_scalar ops: lazy tensors take Scalars as 0-d device data,
 * so a new learning rate is new data, not a new graph. Buffers start as
 * zeros rather than being created at the first step (as PyTorch does),
 * so step 1 records the same graph as step 2: with zeros,
 * momentum * 0 + g == g and Adam's first moments are PyTorch's. */
#include <math.h>
#include <string.h>

#include "nn.h"

struct kiln_optim {
  kiln_nn_module *m;    /* borrowed */
  kiln_optim_opts o;
  int64_t steps;
  int n_bufs;           /* per parameter: 0, 1 (momentum) or 2 (Adam) */
  int n_state;          /* m->n_params * n_bufs */
  kiln_tensor **state;  /* owned; parameter i's buffer k at i * n_bufs + k */
  char **names;         /* owned */
};

static const char *const buf_names[3][2] = {
    {"momentum_buffer", NULL}, {"exp_avg", "exp_avg_sq"}, {"exp_avg", "exp_avg_sq"}};

static const char *const kind_names[3] = {"sgd", "adam", "adamw"};

static int check_opts(const kiln_optim_opts *o) {
  if (o->kind < KILN_OPTIM_SGD || o->kind > KILN_OPTIM_ADAMW)
    return core_error(KILN_ERR_INVALID, "optim_new: unknown optimizer kind %d", (int)o->kind);
  if (!(o->lr >= 0) || !isfinite(o->lr))
    return core_error(KILN_ERR_INVALID, "optim_new: invalid learning rate %g", o->lr);
  if (!(o->momentum >= 0) || !(o->weight_decay >= 0))
    return core_error(KILN_ERR_INVALID, "optim_new: momentum %g and weight_decay %g must be >= 0",
                      o->momentum, o->weight_decay);
  if (o->nesterov && (o->kind != KILN_OPTIM_SGD || o->momentum <= 0))
    return core_error(KILN_ERR_INVALID, "optim_new: Nesterov needs SGD with momentum > 0");
  if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1) || !(o->eps >= 0))
    return core_error(KILN_ERR_INVALID, "optim_new: betas (%g, %g) must be in [0, 1), eps %g >= 0",
                      o->beta1, o->beta2, o->eps);
  return 0;
}

void kiln_optim_free(kiln_optim *o) {
  if (!o) return;
  for (int i = 0; i < o->n_state; i++) {
    kiln_release(o->state[i]);
    core_free(o->names[i]);
  }
  core_free(o->state);
  core_free(o->names);
  core_free(o);
}

kiln_optim *kiln_optim_new(kiln_nn_module *m, const kiln_optim_opts *opts) {
  if (!m || !opts) {
    core_error(KILN_ERR_INVALID, "optim_new: NULL module or options");
    return NULL;
  }
  kiln_optim_opts o = *opts;
  if (o.kind != KILN_OPTIM_SGD) {
    if (o.beta1 == 0) o.beta1 = 0.9;
    if (o.beta2 == 0) o.beta2 = 0.999;
    if (o.eps == 0) o.eps = 1e-8;
  }
  if (check_opts(&o) < 0) return NULL;
  kiln_optim *op = core_calloc(1, sizeof *op);
  if (!op) return NULL;
  op->m = m;
  op->o = o;
  op->n_bufs = o.kind == KILN_OPTIM_SGD ? (o.momentum > 0 ? 1 : 0) : 2;
  int n = m->n_params * op->n_bufs;
  if (n > 0) {
    op->state = core_calloc((size_t)n, sizeof *op->state);
    op->names = core_calloc((size_t)n, sizeof *op->names);
    if (!op->state || !op->names) goto fail;
  }
  kiln_scope_begin();
  for (int i = 0; i < m->n_params; i++) {
    kiln_tensor *p = m->params[i];
    for (int k = 0; k < op->n_bufs; k++) {
      const char *bn = buf_names[o.kind][k];
      size_t len = strlen(m->names[i]) + strlen(bn) + 2;
      char *name = core_alloc(len);
      kiln_tensor *z = kiln_zeros(p->ndim, p->shape, p->dtype);
      if (z && kiln_tensor_is_lazy(p)) z = kiln_to_lazy(z);
      if (!name || !z) {
        core_free(name);
        kiln_scope_end();
        goto fail;
      }
      snprintf(name, len, "%s.%s", m->names[i], bn);
      op->names[op->n_state] = name;
      op->state[op->n_state++] = kiln_keep(z);
    }
  }
  kiln_scope_end();
  return op;
fail:
  kiln_optim_free(op);
  return NULL;
}

/* The status of the call that returned NULL (its error is set). */
static int failed(void) {
  kiln_status s = kiln_last_status();
  return s < 0 ? s : KILN_ERR_NOMEM;
}

/* Every intermediate is checked: a NULL passed on would be reported by
 * the next call as a missing argument, not as the failure it was. */
#define TRY(x)                         \
  do {                                 \
    if (!(x)) return failed();         \
  } while (0)

/* One parameter's new values, inside the caller's scope and no_grad,
 * written nowhere (Note [All or nothing]): out[0] the parameter's, out[1 +
 * k] buffer k's, new tensors of the scope. Returns 0 or the failure's
 * status (its error set). */
static int stage(const kiln_optim *op, kiln_tensor *p, kiln_tensor *g, kiln_tensor *const *buf,
                 kiln_tensor **out) {
  const kiln_optim_opts *o = &op->o;
  kiln_tensor *a, *b;
  if (o->kind == KILN_OPTIM_SGD) {
    kiln_tensor *d = g;
    if (o->weight_decay > 0) {
      TRY(a = kiln_mul_scalar(p, o->weight_decay));
      TRY(d = kiln_add(d, a));
    }
    if (op->n_bufs) {
      /* buf * momentum + d: the rounding of PyTorch's buf.mul_(m).add_(d) */
      TRY(a = kiln_mul_scalar(buf[0], o->momentum));
      TRY(out[1] = kiln_add(a, d));
      if (o->nesterov) {
        TRY(a = kiln_mul_scalar(out[1], o->momentum));
        TRY(d = kiln_add(d, a));
      } else {
        d = out[1];
      }
    }
    /* p + (-lr) * d with lr as data (a new lr is not a new lazy graph);
     * the same rounding as p - lr * d */
    TRY(a = kiln_mul_scalar(d, -o->lr));
    TRY(out[0] = kiln_add(p, a));
    return 0;
  }
  /* Adam(W), as torch.optim's single-tensor implementation */
  double t = (double)op->steps;
  double bc1 = 1 - pow(o->beta1, t), bc2 = 1 - pow(o->beta2, t);
  kiln_tensor *pv = p;
  if (o->weight_decay > 0) {
    if (o->kind == KILN_OPTIM_ADAMW) {
      TRY(pv = kiln_mul_scalar(p, 1 - o->lr * o->weight_decay));
    } else {
      TRY(a = kiln_mul_scalar(p, o->weight_decay));
      TRY(g = kiln_add(g, a));
    }
  }
  TRY(a = kiln_mul_scalar(buf[0], o->beta1));
  TRY(b = kiln_mul_scalar(g, 1 - o->beta1));
  TRY(out[1] = kiln_add(a, b));
  TRY(a = kiln_mul_scalar(buf[1], o->beta2));
  TRY(b = kiln_mul(g, g));
  TRY(b = kiln_mul_scalar(b, 1 - o->beta2));
  TRY(out[2] = kiln_add(a, b));
  TRY(a = kiln_sqrt(out[2]));
  TRY(a = kiln_div_scalar(a, sqrt(bc2)));
  TRY(a = kiln_add_scalar(a, o->eps));
  TRY(a = kiln_div(out[1], a));
  TRY(a = kiln_mul_scalar(a, o->lr / bc1));
  TRY(out[0] = kiln_sub(pv, a));
  return 0;
}

#undef TRY

/* Note [All or nothing]: a step computes every parameter's and buffer's
 * new value first (stage, which allocates and may fail), then writes
 * them all (kiln_copy_ of a value of the destination's shape and dtype:
 * a memcpy on the CPU, a rebind of a lazy tensor, neither allocates).
 * An allocation that fails leaves every parameter, buffer and the step
 * count as they were (issue #20: it used to leave some parameters
 * updated, others not). The price: the new values of every parameter
 * and buffer are alive at once, about one more copy of the model and
 * its optimizer state until the step ends. */
kiln_status kiln_optim_step(kiln_optim *op) {
  if (!op) return core_error(KILN_ERR_INVALID, "optim_step: NULL optimizer");
  kiln_nn_module *m = op->m;
  int w = 1 + op->n_bufs, n = m->n_params * w, rc = 0;
  for (int i = 0; i < m->n_params; i++) {
    kiln_tensor *p = m->params[i], *g = kiln_tensor_grad(p);
    if (g && (g->ndim != p->ndim || memcmp(g->shape, p->shape, (size_t)p->ndim * sizeof *p->shape))) {
      char a[64], b[64];
      return core_error(KILN_ERR_INVALID, "optim_step: '%s' is %s but its grad is %s",
                        m->names[i], core_tensor_desc(p, a, sizeof a),
                        core_tensor_desc(g, b, sizeof b));
    }
  }
  bool fused = true; /* Note [Fused SGD] in optim_fused.c */
  for (int i = 0; i < m->n_params && fused; i++)
    fused = nn_sgd_fused_applies(&op->o, m->params[i], kiln_tensor_grad(m->params[i]),
                                 op->n_bufs ? op->state[i * op->n_bufs] : NULL);
  if (fused) {
    op->steps++;
    for (int i = 0; i < m->n_params; i++)
      nn_sgd_fused(&op->o, m->params[i], kiln_tensor_grad(m->params[i]),
                   op->n_bufs ? op->state[i * op->n_bufs] : NULL);
    return KILN_OK;
  }
  kiln_tensor **staged = n ? core_calloc((size_t)n, sizeof *staged) : NULL;
  if (n && !staged) {
    core_error_prefix("optim_step: ");
    return KILN_ERR_NOMEM;
  }
  op->steps++;
  bool was = kiln_set_grad_enabled(false);
  for (int i = 0; i < m->n_params && rc == 0; i++) {
    kiln_tensor *p = m->params[i], *g = kiln_tensor_grad(p), *out[3] = {NULL, NULL, NULL};
    if (!g) continue;
    kiln_scope_begin();
    rc = stage(op, p, g, op->n_bufs ? &op->state[i * op->n_bufs] : NULL, out);
    for (int k = 0; k < w && rc == 0; k++) staged[i * w + k] = kiln_keep(out[k]);
    kiln_scope_end();
    if (rc < 0) core_error_prefix("optim_step: '%s': ", m->names[i]);
  }
  if (rc < 0) op->steps--; /* nothing written */
  /* the writes; none fails on tensors the step made (the guard is for
   * what cannot happen, and says so) */
  for (int i = 0; i < m->n_params && rc == 0; i++)
    for (int k = 0; k < w && rc == 0; k++) {
      kiln_tensor *dst = k ? op->state[i * op->n_bufs + k - 1] : m->params[i];
      if (staged[i * w + k]) rc = kiln_copy_(dst, staged[i * w + k]);
      if (rc < 0) core_error_prefix("optim_step: '%s' (parameters partly updated): ", m->names[i]);
    }
  kiln_set_grad_enabled(was);
  for (int i = 0; i < n; i++) kiln_release(staged[i]);
  core_free(staged);
  return rc;
}

kiln_status kiln_optim_zero_grad(kiln_optim *op) {
  if (!op) return core_error(KILN_ERR_INVALID, "optim_zero_grad: NULL optimizer");
  for (int i = 0; i < op->m->n_params; i++) {
    int rc = kiln_tensor_set_grad(op->m->params[i], NULL);
    if (rc < 0) return rc;
  }
  return KILN_OK;
}

void kiln_optim_set_lr(kiln_optim *o, double lr) {
  if (o) o->o.lr = lr;
}
double kiln_optim_lr(const kiln_optim *o) { return o ? o->o.lr : 0; }
int64_t kiln_optim_steps(const kiln_optim *o) { return o ? o->steps : 0; }
void kiln_optim_set_steps(kiln_optim *o, int64_t steps) {
  if (o) o->steps = steps;
}
const char *kiln_optim_name(const kiln_optim *o) { return o ? kind_names[o->o.kind] : NULL; }
int kiln_optim_n_state(const kiln_optim *o) { return o ? o->n_state : 0; }

const char *kiln_optim_state_name(const kiln_optim *o, int i) {
  return o && i >= 0 && i < o->n_state ? o->names[i] : NULL;
}

kiln_tensor *kiln_optim_state(const kiln_optim *o, int i) {
  return o && i >= 0 && i < o->n_state ? o->state[i] : NULL;
}

kiln_status kiln_optim_to_lazy(kiln_optim *o) {
  if (!o) return core_error(KILN_ERR_INVALID, "optim_to_lazy: NULL optimizer");
  int rc = KILN_OK;
  for (int i = 0; i < o->n_state && rc == KILN_OK; i++) {
    if (kiln_tensor_is_lazy(o->state[i])) continue;
    kiln_scope_begin();
    kiln_tensor *lz = kiln_to_lazy(o->state[i]);
    if (lz) {
      kiln_release(o->state[i]);
      o->state[i] = kiln_keep(lz);
    } else {
      rc = KILN_ERR_NOMEM;
    }
    kiln_scope_end();
  }
  return rc;
}

double kiln_optim_lr_step(double base, int64_t t, int64_t step_size, double gamma) {
  if (step_size <= 0 || t <= 0) return base;
  return base * pow(gamma, (double)(t / step_size));
}

double kiln_optim_lr_cosine(double base, double eta_min, int64_t t, int64_t t_max) {
  if (t_max <= 0) return base;
  if (t > t_max) t = t_max;
  if (t < 0) t = 0;
  return eta_min + (base - eta_min) * (1 + cos(M_PI * (double)t / (double)t_max)) / 2;
}
