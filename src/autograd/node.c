/* src/autograd/node.c: backward nodes, per-tensor autograd state, and
 * recording: the hook op_call invokes to attach history to an op's
 * outputs. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "autograd.h"

/* atomic: graphs are built on several threads (Note [Threads] in kiln.h) */
static _Atomic uint64_t next_seq;

static void meta_free(kiln_tensor *t);

void ag_init(void) {
  core_ag_meta_free_hook = meta_free;
  op_autograd_hook = ag_record;
  op_is_leaf_hook = kiln_is_leaf;
}

/* Note [Init]: autograd installs its hooks before main via a constructor,
 * so ops record history without any explicit initialisation call. */
__attribute__((constructor)) static void ag_ctor(void) { ag_init(); }

ag_meta *ag_meta_get(kiln_tensor *t) {
  if (!t->ag) {
    t->ag = core_calloc(1, sizeof(ag_meta));
  }
  return t->ag;
}

static void remove_retainer(ag_node *n, kiln_tensor *t) {
  for (int i = 0; i < n->n_retainers; i++)
    if (n->retainers[i] == t) {
      n->retainers[i] = n->retainers[--n->n_retainers];
      return;
    }
}

static void meta_free(kiln_tensor *t) {
  ag_meta *m = t->ag;
  t->ag = NULL;
  /* The node keeps a weak pointer to a retain_grad tensor: drop it. */
  if (m->retains_grad && m->grad_fn) remove_retainer(m->grad_fn, t);
  kiln_release(m->grad);
  if (m->grad_fn) ag_node_release(m->grad_fn);
  if (m->grad_acc) m->grad_acc = NULL;
  core_free(m->hooks);
  core_free(m->post_hooks);
  core_free(m->name);
  kiln_release(m->base);
  core_free(m);
}

ag_node *ag_node_new(int op, const char *name, int n_inputs, int n_next) {
  ag_node *n = core_calloc(1, sizeof *n);
  if (!n) return NULL;
  n->refcount = 1;
  n->op = op;
  n->name = name;
  n->seq = atomic_fetch_add_explicit(&next_seq, 1, memory_order_relaxed);
  n->n_inputs = n_inputs;
  n->n_next = n_next;
  n->in_meta = core_calloc((size_t)(n_inputs ? n_inputs : 1), sizeof *n->in_meta);
  n->next = core_calloc((size_t)(n_next ? n_next : 1), sizeof *n->next);
  if (!n->in_meta || !n->next) {
    core_free(n->in_meta);
    core_free(n->next);
    core_free(n);
    return NULL;
  }
  return n;
}

void ag_node_retain(ag_node *n) {
  if (n) n->refcount++;
}

static void free_saved(ag_node *n) {
  for (int i = 0; i < n->n_saved; i++) kiln_release(n->saved[i].t);
  if (n->saved_outs)
    for (int i = 0; i < n->n_inputs; i++) kiln_release(n->saved_outs[i].t);
  core_free(n->saved);
  core_free(n->saved_outs);
  n->saved = NULL;
  n->saved_outs = NULL;
  n->n_saved = 0;
  if (n->args) {
    for (int i = 0; i < n->n_args; i++) {
      op_val *a = &n->args[i];
      if (a->tag == OP_VAL_INTS) core_free((void *)a->ints.v);
      if (a->tag == OP_VAL_TENSORS) core_free((void *)a->ts.v);
      if (a->tag == OP_VAL_STR) core_free((void *)a->s);
    }
    core_free(n->args);
    n->args = NULL;
  }
}

void ag_node_release(ag_node *n) {
  /* Iterative over chains of nodes whose last reference drops, so a long
   * graph (an RNN over thousands of steps) cannot overflow the C stack. */
  ag_node *stack_small[64], **stack = stack_small;
  int n_stack = 0, cap = 64;
  if (!n) return;
  stack[n_stack++] = n;
  while (n_stack) {
    ag_node *x = stack[--n_stack];
    if (--x->refcount > 0) continue;
    for (int i = 0; i < x->n_next; i++) {
      ag_node *c = x->next[i].node;
      if (!c) continue;
      if (n_stack == cap) {
        ag_node **bigger = core_alloc((size_t)cap * 2 * sizeof *bigger);
        if (!bigger) { /* cannot grow: release recursively instead */
          ag_node_release(c);
          continue;
        }
        memcpy(bigger, stack, (size_t)n_stack * sizeof *stack);
        if (stack != stack_small) core_free(stack);
        stack = bigger;
        cap *= 2;
      }
      stack[n_stack++] = c;
    }
    if (x->release_fn) x->release_fn(x);
    free_saved(x);
    if (x->leaf) {
      if (x->leaf->ag && x->leaf->ag->grad_acc == x) x->leaf->ag->grad_acc = NULL;
      kiln_release(x->leaf);
    }
    for (int i = 0; i < x->n_retainers; i++)
      if (x->retainers[i]->ag) x->retainers[i]->ag->retains_grad = false;
    core_free(x->retainers);
    core_free(x->pre_hooks);
    core_free(x->trace);
    core_free(x->in_meta);
    core_free(x->next);
    core_free(x);
  }
  if (stack != stack_small) core_free(stack);
}


static int accumulate_apply(ag_node *n, kiln_tensor *const *grads_in,
                            const bool *needs, kiln_tensor **grads_out);

/* Note [View regeneration] (views.c): made before a rebase of its memory */
static bool stale_view(const kiln_tensor *t) {
  return t && t->requires_grad && t->ag && t->ag->is_view && t->storage &&
         t->ag->view_rebases != t->storage->ag_rebases;
}

int ag_gradient_edge(kiln_tensor *t, ag_edge *out) {
  out->node = NULL;
  out->input_nr = 0;
  if (!t || !ag_view_adopt_grad(t)) return 0; /* Note [Views without history] */
  ag_meta *m = ag_meta_get(t);
  if (!m) return KILN_ERR_NOMEM;
  if (stale_view(t)) {
    int rc = ag_refresh_view(t); /* Note [View regeneration] */
    if (rc < 0) return rc;
  }
  if (m->grad_fn) {
    out->node = m->grad_fn;
    out->input_nr = m->output_nr;
    ag_node_retain(m->grad_fn);
    return 0;
  }
  if (!m->grad_acc) {
    ag_node *acc = ag_node_new(AG_ACCUMULATE, "AccumulateGrad", 1, 0);
    if (!acc) return KILN_ERR_NOMEM;
    acc->seq = UINT64_MAX; /* runs as soon as it is ready (as PyTorch) */
    acc->apply = accumulate_apply;
    acc->leaf = kiln_retain(t);
    op_meta_of(t, &acc->in_meta[0]);
    m->grad_acc = acc; /* weak; the returned edge is the owning ref */
    out->node = acc;
    return 0;
  }
  out->node = m->grad_acc;
  ag_node_retain(m->grad_acc);
  return 0;
}

int ag_set_history(kiln_tensor **outs, int n_outs, ag_node *n) {
  /* Every output's meta first: an output left without history would give
   * wrong gradients silently, so out of memory changes nothing. */
  for (int i = 0; i < n_outs; i++)
    if (outs[i] && core_dtype_is_floating(outs[i]->dtype) && !ag_meta_get(outs[i]))
      return KILN_ERR_NOMEM;
  for (int i = 0; i < n_outs; i++) {
    kiln_tensor *o = outs[i];
    if (!o || !core_dtype_is_floating(o->dtype)) continue;
    ag_meta *m = ag_meta_get(o);
    if (m->grad_fn) ag_node_release(m->grad_fn);
    else if (!m->made_seq) m->made_seq = n->seq + 1;
    m->grad_fn = n;
    ag_node_retain(n);
    m->output_nr = i;
    o->requires_grad = true;
  }
  return 0;
}



static char *make_trace(int op, const op_val *args, int n_args) {
  char buf[512], d[160];
  size_t k = (size_t)snprintf(buf, sizeof buf, "%s(", op_table[op].name);
  for (int i = 0; i < n_args && k < sizeof buf; i++)
    k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? ", " : "",
                          op_val_desc(&args[i], d, sizeof d));
  if (k < sizeof buf) snprintf(buf + k, sizeof buf - k, ")");
  return core_strdup(buf);
}


/* Note [View regeneration] (views.c) for a tensor argument */
static int refresh_stale(const op_val *a) {
  if (a->tag == OP_VAL_TENSOR && stale_view(a->t)) return ag_refresh_view(a->t);
  if (a->tag == OP_VAL_TENSORS)
    for (int k = 0; k < a->ts.n; k++)
      if (stale_view(a->ts.v[k])) {
        int rc = ag_refresh_view(a->ts.v[k]);
        if (rc < 0) return rc;
      }
  return 0;
}

int ag_record(int op, const op_val *args, int n_args, kiln_tensor **outs, int n_outs) {
  const op_info *info = &op_table[op];
  int n_slots = op_slots(args, n_args, NULL, 0), slot = 0, n_saved = 0;
  bool save_data = !(info->flags & OPF_NO_SAVE_IN);
  for (int i = 0; i < n_args; i++) { /* before saving drops a view's base */
    int rc = refresh_stale(&args[i]);
    if (rc < 0) return rc;
  }
  ag_node *n = ag_node_new(op, info->name, n_outs, n_slots);
  if (!n) return KILN_ERR_NOMEM;
  n->apply = ag_op_apply;
  n->n_args = n_args;
  n->args = core_calloc((size_t)(n_args ? n_args : 1), sizeof *n->args);
  n->saved = core_calloc((size_t)(n_slots ? n_slots : 1), sizeof *n->saved);
  if (!n->args || !n->saved) goto oom;
  for (int i = 0; i < n_args; i++) {
    const op_val *a = &args[i];
    op_val *d = &n->args[i];
    *d = *a;
    if (a->tag == OP_VAL_TENSOR || a->tag == OP_VAL_TENSORS) {
      int cnt = a->tag == OP_VAL_TENSOR ? 1 : a->ts.n;
      kiln_tensor **list = NULL;
      if (a->tag == OP_VAL_TENSORS) {
        list = core_calloc((size_t)(cnt ? cnt : 1), sizeof *list);
        if (!list) {
          d->tag = OP_VAL_NONE; /* d->ts.v is still the caller's */
          goto oom;
        }
        d->ts.v = list;
      }
      for (int k = 0; k < cnt; k++, slot++) {
        kiln_tensor *t = a->tag == OP_VAL_TENSOR ? a->t : a->ts.v[k];
        ag_saved *s = &n->saved[n_saved++];
        /* A tensor that needs no grad is saved as a data alias without
         * autograd state (no gradient flows to it, under create_graph
         * neither): the tensor itself, a view holding its base (a lazy view
         * its lazy base), would close a reference cycle once the base's
         * later history reaches this node (b.add_(v * w) with v a view of
         * b: fuzz_exec's indirect leaks, lazy mode), and it keeps its base. */
        bool plain = save_data && !t->requires_grad;
        s->t = plain ? core_alias(t, true) : save_data ? kiln_retain(t) : core_alias(t, false);
        if (!s->t) goto oom;
        if (save_data && !plain && t->ag && t->ag->base) {
          /* a saved view drops its base: the base's later history could
           * hold this node, a reference cycle (the view then can no longer
           * be written under autograd: Note [CopySlices]) */
          kiln_release(t->ag->base);
          t->ag->base = NULL;
        }
        s->version = t->storage ? t->storage->version : 0;
        if (a->tag == OP_VAL_TENSOR) d->t = s->t;
        else list[k] = s->t;
        if (ag_gradient_edge(t, &n->next[slot]) < 0) goto oom;
      }
    } else if (a->tag == OP_VAL_INTS) {
      int64_t *v = core_alloc((size_t)(a->ints.n ? a->ints.n : 1) * sizeof *v);
      if (!v) {
        d->tag = OP_VAL_NONE;
        goto oom;
      }
      if (a->ints.n) memcpy(v, a->ints.v, (size_t)a->ints.n * sizeof *v);
      d->ints.v = v;
    } else if (a->tag == OP_VAL_STR) {
      d->s = core_strdup(a->s);
      if (!d->s) {
        d->tag = OP_VAL_NONE;
        goto oom;
      }
    }
  }
  n->n_saved = n_saved;
  for (int i = 0; i < n_outs; i++) op_meta_of(outs[i], &n->in_meta[i]);
  if (info->flags & (OPF_SAVE_OUT | OPF_SAVE_AUX_OUTS)) {
    n->saved_outs = core_calloc((size_t)n_outs, sizeof *n->saved_outs);
    if (!n->saved_outs) goto oom;
    for (int i = (info->flags & OPF_SAVE_OUT) ? 0 : 1; i < n_outs; i++) {
      n->saved_outs[i].t = core_alias(outs[i], true);
      if (!n->saved_outs[i].t) goto oom;
      n->saved_outs[i].version = outs[i]->storage ? outs[i]->storage->version : 0;
      n->saved_outs[i].is_output = true;
    }
  }
  if (ag_anomaly_enabled()) n->trace = make_trace(op, args, n_args);
  if (ag_set_history(outs, n_outs, n) < 0) goto oom;
  ag_node_release(n); /* the outputs hold it now */
  if ((info->flags & OPF_VIEW) && n_args && args[0].tag == OP_VAL_TENSOR) {
    /* a view remembers its root base, for in-place writes (Note
     * [CopySlices]); a view of a view that dropped its base knows none */
    bool known;
    kiln_tensor *root = ag_view_root(args[0].t, &known);
    for (int i = 0; i < n_outs; i++) {
      ag_meta *m = outs[i] && outs[i]->ag ? outs[i]->ag : NULL;
      if (m && !m->is_view && outs[i] != args[0].t && outs[i] != root) {
        m->base = known ? kiln_retain(root) : NULL;
        ag_note_view(outs[i]);
      }
    }
  }
  return 0;
oom:
  n->n_saved = n_saved;
  ag_node_release(n);
  return KILN_ERR_NOMEM;
}

kiln_tensor *ag_unpack(ag_node *n, ag_saved *s, int index) {
  char d[160];
  if (!s->t) return NULL;
  uint32_t now = s->t->storage ? s->t->storage->version : 0;
  if (s->t->storage && now != s->version) {
    /* PyTorch's words, so that searching the message finds the cure */
    core_error(KILN_ERR_STATE,
               "one of the variables needed for gradient computation has been modified by an "
               "inplace operation: %s, which is %s %d of %s, is at version %u; expected "
               "version %u instead (clone it before modifying it in place)",
               core_tensor_desc(s->t, d, sizeof d), s->is_output ? "output" : "input", index,
               n->name, now, s->version);
    return NULL;
  }
  return s->t;
}

/* ---- public: requires_grad, grad, names ------------------------------- */

kiln_status kiln_set_requires_grad(kiln_tensor *t, bool requires_grad) {
  char d[160];
  if (!t) return core_error(KILN_ERR_INVALID, "set_requires_grad: tensor is NULL");
  if (t->ag && t->ag->grad_fn) {
    if (requires_grad) return KILN_OK;
    return core_error(KILN_ERR_INVALID,
                      "set_requires_grad: %s is not a leaf (made by %s); detach it "
                      "instead",
                      core_tensor_desc(t, d, sizeof d), t->ag->grad_fn->name);
  }
  if (requires_grad && !core_dtype_is_floating(t->dtype))
    return core_error(KILN_ERR_INVALID,
                      "set_requires_grad: only floating-point tensors can require "
                      "grad, got %s",
                      core_tensor_desc(t, d, sizeof d));
  if (requires_grad && t->ag && t->ag->is_view) {
    /* a leaf of its own: its AccumulateGrad holds it, so its base (whose
     * later history could reach that node) would be a reference cycle */
    kiln_release(t->ag->base);
    t->ag->base = NULL;
    t->ag->is_view = false;
  }
  t->requires_grad = requires_grad;
  return KILN_OK;
}

bool kiln_requires_grad(const kiln_tensor *t) {
  return t && (t->requires_grad || ag_view_grad_pending(t)); /* Note [Views without history] */
}

bool kiln_is_leaf(const kiln_tensor *t) {
  /* a view that came to require grad is no leaf before its history is
   * regenerated either (Note [Views without history] in views.c) */
  return !(t->ag && (t->ag->grad_fn || (t->ag->is_view && t->requires_grad)));
}

kiln_tensor *kiln_tensor_grad(const kiln_tensor *t) { return t->ag ? t->ag->grad : NULL; }

kiln_status kiln_tensor_set_grad(kiln_tensor *t, kiln_tensor *grad) {
  char d[160], e[160];
  if (!t) return core_error(KILN_ERR_INVALID, "set_grad: tensor is NULL");
  if (grad && (grad->ndim != t->ndim ||
               memcmp(grad->shape, t->shape, (size_t)t->ndim * sizeof *t->shape)))
    return core_error(KILN_ERR_INVALID, "set_grad: gradient %s does not match tensor %s",
                      core_tensor_desc(grad, d, sizeof d), core_tensor_desc(t, e, sizeof e));
  ag_meta *m = ag_meta_get(t);
  if (!m) return KILN_ERR_NOMEM;
  kiln_retain(grad);
  kiln_release(m->grad);
  m->grad = grad;
  return KILN_OK;
}

const char *kiln_grad_fn_name(const kiln_tensor *t) {
  return t && t->ag && t->ag->grad_fn ? t->ag->grad_fn->name : NULL;
}

kiln_status kiln_tensor_set_name(kiln_tensor *t, const char *name) {
  if (!t || !name) return core_error(KILN_ERR_INVALID, "set_name: NULL argument");
  ag_meta *m = ag_meta_get(t);
  char *s = core_strdup(name);
  if (!m || !s) {
    core_free(s);
    return KILN_ERR_NOMEM;
  }
  core_free(m->name);
  m->name = s;
  return KILN_OK;
}

kiln_status kiln_retain_grad(kiln_tensor *t) {
  if (!t) return core_error(KILN_ERR_INVALID, "retain_grad: tensor is NULL");
  if (!t->requires_grad)
    return core_error(KILN_ERR_INVALID,
                      "retain_grad: the tensor does not require grad");
  ag_meta *m = ag_meta_get(t);
  if (!m) return KILN_ERR_NOMEM;
  if (!m->grad_fn || m->retains_grad) return KILN_OK; /* leaves keep grads anyway */
  ag_node *n = m->grad_fn;
  kiln_tensor **r = core_realloc(n->retainers, (size_t)(n->n_retainers + 1) * sizeof *r);
  if (!r) return KILN_ERR_NOMEM;
  n->retainers = r;
  r[n->n_retainers++] = t;
  m->retains_grad = true;
  return KILN_OK;
}

/* ---- AccumulateGrad ----------------------------------------------------- */


static int accumulate_apply(ag_node *n, kiln_tensor *const *grads_in,
                            const bool *needs, kiln_tensor **grads_out) {
  (void)needs;
  (void)grads_out;
  kiln_tensor *leaf = n->leaf, *g = grads_in[0];
  ag_meta *m = ag_meta_get(leaf);
  if (!m) return KILN_ERR_NOMEM;
  if (!g) return 0;
  if (!ag_engine_create_graph() && g->requires_grad) g = kiln_detach(g);
  if (!g) return KILN_ERR_NOMEM;
  kiln_tensor *sum = m->grad ? kiln_add(m->grad, g) : g;
  if (!sum) return -1;
  kiln_retain(sum);
  kiln_release(m->grad);
  m->grad = sum;
  return 0;
}
