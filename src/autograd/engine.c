/* src/autograd/engine.c: the backward engine. Single-threaded and
 * dependency-counted: a node runs once every node that feeds it gradient
 * has run; among ready nodes the most recently created runs first, and
 * AccumulateGrad nodes run as soon as they are ready (Note [Order]).
 *
 * Note [Order]: ready nodes sit in a max-heap on the creation sequence
 * number, AccumulateGrad's being UINT64_MAX, exactly as PyTorch's ready
 * queue. So a leaf's gradient is accumulated once, with the sum of every
 * contribution, right after its last contributor ran, and the order is a
 * function of the graph alone (deterministic). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "autograd.h"

typedef struct ag_callback {
  kiln_callback fn;
  void *ud;
} ag_callback;

typedef struct ag_capture {
  ag_node *node;
  int input_nr;
  kiln_tensor *grad; /* owned */
  kiln_tensor *leaf; /* leaf input: its hooks run on the captured grad */
} ag_capture;

typedef struct ag_task {
  uint64_t id;
  bool create_graph, retain_graph;
  ag_node **nodes;
  int n_nodes, cap_nodes;
  ag_node **heap;
  int n_heap;
  ag_callback *callbacks;
  int n_callbacks, cap_callbacks;
  ag_capture *captures;
  int n_captures;
  bool accumulate_all;          /* plain backward: every AccumulateGrad */
  kiln_tensor *const *only;     /* backward(inputs=): only these leaves */
  int n_only;
} ag_task;

static _Thread_local ag_task *cur_task;
static _Atomic uint64_t next_task_id = 1; /* atomic: Note [Threads] in kiln.h */
static atomic_bool anomaly_on; /* process-wide, as kiln.h says */
/* kiln_set_backward_progress: called between the nodes of a backward */
static _Thread_local kiln_callback progress_fn;
static _Thread_local void *progress_ud;

bool ag_anomaly_enabled(void) { return anomaly_on; }
void kiln_set_anomaly_enabled(bool enabled) { anomaly_on = enabled; }
bool kiln_is_anomaly_enabled(void) { return anomaly_on; }

bool ag_engine_create_graph(void) { return cur_task && cur_task->create_graph; }

/* ---- grad mode ------------------------------------------------------------ */

static _Thread_local int no_grad_depth;
static _Thread_local bool no_grad_saved[64];

bool kiln_is_grad_enabled(void) { return op_grad_enabled; }

bool kiln_set_grad_enabled(bool enabled) {
  bool prev = op_grad_enabled;
  op_grad_enabled = enabled;
  return prev;
}

void kiln_no_grad_begin(void) {
  if (no_grad_depth < 64) no_grad_saved[no_grad_depth] = op_grad_enabled;
  no_grad_depth++;
  op_grad_enabled = false;
}

void kiln_no_grad_end(void) {
  if (no_grad_depth == 0) return;
  no_grad_depth--;
  op_grad_enabled = no_grad_depth < 64 ? no_grad_saved[no_grad_depth] : false;
}

/* ---- callbacks ------------------------------------------------------------- */

kiln_status kiln_queue_callback(kiln_callback fn, void *ud) {
  ag_task *t = cur_task;
  if (!fn) return core_error(KILN_ERR_INVALID, "queue_callback: fn is NULL");
  if (!t)
    return core_error(KILN_ERR_STATE,
                      "queue_callback: no backward is running; callbacks can only be "
                      "queued from code that runs during a backward (hooks, nodes)");
  if (t->n_callbacks == t->cap_callbacks) {
    int cap = t->cap_callbacks ? t->cap_callbacks * 2 : 8;
    ag_callback *c = core_realloc(t->callbacks, (size_t)cap * sizeof *c);
    if (!c) return KILN_ERR_NOMEM;
    t->callbacks = c;
    t->cap_callbacks = cap;
  }
  t->callbacks[t->n_callbacks++] = (ag_callback){fn, ud};
  return KILN_OK;
}

void kiln_set_backward_progress(kiln_callback fn, void *ud) {
  progress_fn = fn;
  progress_ud = ud;
}

int kiln_backward_will_accumulate(const kiln_tensor *leaf) {
  ag_task *t = cur_task;
  if (!t)
    return core_error(KILN_ERR_STATE, "backward_will_accumulate: no backward is running");
  if (!leaf || !leaf->ag || !leaf->ag->grad_acc) return 0;
  const ag_node *n = leaf->ag->grad_acc;
  return n->task == t->id && n->needed;
}

/* ---- heap ----------------------------------------------------------------- */

static void heap_push(ag_task *t, ag_node *n) {
  int i = t->n_heap++;
  t->heap[i] = n;
  while (i > 0) {
    int p = (i - 1) / 2;
    if (t->heap[p]->seq >= t->heap[i]->seq) break;
    ag_node *x = t->heap[p];
    t->heap[p] = t->heap[i];
    t->heap[i] = x;
    i = p;
  }
}

static ag_node *heap_pop(ag_task *t) {
  ag_node *top = t->heap[0];
  t->heap[0] = t->heap[--t->n_heap];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < t->n_heap && t->heap[l]->seq > t->heap[m]->seq) m = l;
    if (r < t->n_heap && t->heap[r]->seq > t->heap[m]->seq) m = r;
    if (m == i) break;
    ag_node *x = t->heap[m];
    t->heap[m] = t->heap[i];
    t->heap[i] = x;
    i = m;
  }
  return top;
}

/* ---- graph discovery ------------------------------------------------------- */

static int add_node(ag_task *t, ag_node *n) {
  if (n->task == t->id) return 0;
  if (t->n_nodes == t->cap_nodes) {
    int cap = t->cap_nodes ? t->cap_nodes * 2 : 64;
    ag_node **v = core_realloc(t->nodes, (size_t)cap * sizeof *v);
    if (!v) return KILN_ERR_NOMEM;
    t->nodes = v;
    t->cap_nodes = cap;
  }
  t->nodes[t->n_nodes++] = n;
  n->task = t->id;
  n->deps = 0;
  n->needed = false;
  n->inbuf = NULL;
  return 1;
}

static bool is_capture(const ag_task *t, const ag_node *n) {
  for (int i = 0; i < t->n_captures; i++)
    if (t->captures[i].node == n) return true;
  return false;
}

static bool accumulates(const ag_task *t, const ag_node *n) {
  if (n->op != AG_ACCUMULATE) return false;
  if (t->accumulate_all) return true;
  for (int i = 0; i < t->n_only; i++)
    if (t->only[i] == n->leaf) return true;
  return false;
}

/* Collects every node reachable from the roots (iteratively) and decides
 * which must execute: those that accumulate, and those upstream of a node
 * that executes or captures. Nodes are discovered in DFS pre-order; a
 * reverse pass over a post-order settles `needed`. */
static int discover(ag_task *t, ag_node **roots, int n_roots) {
  ag_node **stack = NULL;
  int *pos = NULL, sp = 0, cap = 0, rc = 0;
  for (int r = 0; r < n_roots; r++) {
    if (!roots[r] || roots[r]->task == t->id) continue;
    if ((rc = add_node(t, roots[r])) < 0) goto done;
    if (sp == cap) {
      cap = cap ? cap * 2 : 64;
      ag_node **s2 = core_realloc(stack, (size_t)cap * sizeof *s2);
      int *p2 = s2 ? core_realloc(pos, (size_t)cap * sizeof *p2) : NULL;
      if (s2) stack = s2;
      if (!s2 || !p2) { rc = KILN_ERR_NOMEM; goto done; }
      pos = p2;
    }
    stack[sp] = roots[r];
    pos[sp++] = 0;
    while (sp) {
      ag_node *x = stack[sp - 1];
      if (pos[sp - 1] < x->n_next) {
        ag_node *c = x->next[pos[sp - 1]++].node;
        if (!c || c->task == t->id) continue;
        if ((rc = add_node(t, c)) < 0) goto done;
        if (sp == cap) {
          cap *= 2;
          ag_node **s2 = core_realloc(stack, (size_t)cap * sizeof *s2);
          int *p2 = s2 ? core_realloc(pos, (size_t)cap * sizeof *p2) : NULL;
          if (s2) stack = s2;
          if (!s2 || !p2) { rc = KILN_ERR_NOMEM; goto done; }
          pos = p2;
        }
        stack[sp] = c;
        pos[sp++] = 0;
      } else {
        /* post-order: children settled */
        sp--;
        x->needed = accumulates(t, x);
        for (int j = 0; j < x->n_next && !x->needed; j++) {
          ag_node *c = x->next[j].node;
          if (c && (c->needed || is_capture(t, c))) x->needed = true;
        }
        /* AccumulateGrad that only captures (kiln_grad) does not run */
        if (x->op == AG_ACCUMULATE && !accumulates(t, x)) x->needed = false;
      }
    }
  }
  /* dependency counts: edges from executing nodes into nodes that execute
   * or capture */
  for (int i = 0; i < t->n_nodes; i++) {
    ag_node *x = t->nodes[i];
    if (!x->needed) continue;
    for (int j = 0; j < x->n_next; j++) {
      ag_node *c = x->next[j].node;
      if (c && (c->needed || is_capture(t, c))) c->deps++;
    }
  }
  rc = 0;
done:
  core_free(stack);
  core_free(pos);
  return rc;
}

/* ---- running nodes ------------------------------------------------------- */

static int ensure_inbuf(ag_node *n) {
  if (n->inbuf) return 0;
  n->inbuf = core_calloc((size_t)(n->n_inputs ? n->n_inputs : 1), sizeof *n->inbuf);
  return n->inbuf ? 0 : KILN_ERR_NOMEM;
}

static void drop_inbuf(ag_node *n) {
  if (n->fx || n->fy) ag_factors_drop(n); /* arrays even without pairs: a failed add */
  if (!n->inbuf) return;
  for (int i = 0; i < n->n_inputs; i++) kiln_release(n->inbuf[i]);
  core_free(n->inbuf);
  n->inbuf = NULL;
}

/* Adds g (borrowed) into n's gradient input input_nr. */
static int add_input(ag_node *n, int input_nr, kiln_tensor *g, const ag_node *from) {
  char d[160], e[160];
  const op_meta *m = &n->in_meta[input_nr];
  if (ensure_inbuf(n) < 0) return KILN_ERR_NOMEM;
  if (g->ndim != m->ndim || memcmp(g->shape, m->shape, (size_t)m->ndim * sizeof *m->shape))
    return core_error(KILN_ERR_STATE,
                      "backward: %s produced a gradient of shape %s for input %d of "
                      "%s, which expects %s",
                      from ? from->name : "the root", core_tensor_desc(g, d, sizeof d),
                      input_nr, n->name,
                      core_shape_str(m->ndim, m->shape, e, sizeof e));
  if (g->dtype != m->dtype && core_dtype_is_floating(m->dtype)) {
    g = kiln_to_dtype(g, m->dtype);
    if (!g) return -1;
  }
  kiln_tensor *old = n->inbuf[input_nr];
  /* Note [In-place accumulation]: a buffered gradient nothing else holds
   * (not a view, not kept by a hook or a scope, no graph of its own) takes
   * the sum in place, as PyTorch's InputBuffer does: the weight gradients
   * of a 32-step loop are then one buffer, not 32 fresh ones. */
  if (old && old->refcount == 1 && old->storage && old->storage->refcount == 1 && !old->ag &&
      !kiln_is_grad_enabled() && old->device == CORE_DEVICE_CPU && g->device == CORE_DEVICE_CPU &&
      !old->wrapped_number && old->dtype == g->dtype && core_is_contiguous(old)) {
    if (op_call_into(KILN_OP_ADD, (op_val[]){OPV_T(old), OPV_T(g), OPV_I(1)}, 3, old) == 0)
      return 0;
    kiln_clear_error();
  }
  kiln_tensor *sum = old ? kiln_add(old, g) : g;
  if (!sum) return -1;
  n->inbuf[input_nr] = kiln_retain(sum);
  kiln_release(old);
  return 0;
}

/* Past this many rows held, factor pairs are multiplied into the buffer
 * (Note [Factored weight gradients]): bounds the memory they keep. */
#define FACTOR_ROWS 8192

int ag_accumulate_factored(ag_node *n, int input_nr, kiln_tensor *x, kiln_tensor *y) {
  ag_task *t = cur_task;
  if (!t || !n || n->op != AG_ACCUMULATE || n->task != t->id || !n->needed || input_nr != 0 ||
      t->create_graph || !accumulates(t, n) || is_capture(t, n) || !x || !y)
    return 0;
  const op_meta *m = &n->in_meta[0];
  if (x->ndim != 2 || y->ndim != 2 || m->ndim != 2 || x->shape[0] != y->shape[0] ||
      x->shape[1] != m->shape[0] || y->shape[1] != m->shape[1] || x->dtype != m->dtype ||
      y->dtype != m->dtype || x->device != CORE_DEVICE_CPU || y->device != CORE_DEVICE_CPU)
    return 0;
  if (n->factor_rows + x->shape[0] > FACTOR_ROWS && n->n_factors) {
    kiln_tensor *g = ag_factors_take(n);
    int rc = g ? add_input(n, 0, g, NULL) : -1;
    if (rc < 0) return rc;
  }
  return ag_factors_add(n, x, y) < 0 ? KILN_ERR_NOMEM : 1;
}

static bool has_nonfinite(const kiln_tensor *t) {
  if (!t || !core_data(t) || !core_dtype_is_floating(t->dtype)) return false;
  int64_t n = kiln_tensor_numel(t);
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(core_get_flat(t, i))) return true;
  return false;
}

/* Runs hooks on a gradient: each may replace it. g is owned (in/out). */
static int run_hooks(const ag_hook *hooks, int n_hooks, int output_nr, kiln_tensor **g) {
  for (int h = 0; h < n_hooks; h++) {
    if (hooks[h].output_nr != output_nr || !*g) continue;
    kiln_tensor *r = hooks[h].fn(*g, hooks[h].ud);
    if (r && r != *g) {
      kiln_retain(r);
      kiln_release(*g);
      *g = r;
    }
  }
  return 0;
}

static void free_node_state(ag_node *n) {
  if (n->op == AG_ACCUMULATE) return;
  for (int i = 0; i < n->n_saved; i++) {
    kiln_release(n->saved[i].t);
    n->saved[i].t = NULL;
  }
  if (n->saved_outs)
    for (int i = 0; i < n->n_inputs; i++) {
      kiln_release(n->saved_outs[i].t);
      n->saved_outs[i].t = NULL;
    }
  n->freed = true;
}

static int run_node(ag_task *t, ag_node *n) {
  int rc = 0;
  kiln_tensor **outs = NULL;
  bool *needs = NULL;
  if (ensure_inbuf(n) < 0) return KILN_ERR_NOMEM;
  /* tensor hooks and retain_grad on this node's outputs */
  for (int i = 0; i < n->n_inputs; i++) {
    if (n->n_pre_hooks) run_hooks(n->pre_hooks, n->n_pre_hooks, i, &n->inbuf[i]);
    for (int r = 0; r < n->n_retainers; r++) {
      kiln_tensor *rt = n->retainers[r];
      if (rt->ag->output_nr != i || !n->inbuf[i]) continue;
      kiln_tensor *g = t->create_graph ? n->inbuf[i] : kiln_detach(n->inbuf[i]);
      kiln_tensor *sum = g && rt->ag->grad ? kiln_add(rt->ag->grad, g) : g;
      if (!sum) return -1;
      kiln_retain(sum);
      kiln_release(rt->ag->grad);
      rt->ag->grad = sum;
    }
  }
  if (n->op == AG_ACCUMULATE) {
    ag_meta *m = n->leaf->ag;
    if (n->n_factors) { /* Note [Factored weight gradients] */
      kiln_tensor *g = ag_factors_take(n);
      if (!g || (rc = add_input(n, 0, g, NULL)) < 0) return g ? rc : -1;
    }
    if (m && m->n_hooks) run_hooks(m->hooks, m->n_hooks, 0, &n->inbuf[0]);
    rc = n->apply(n, n->inbuf, NULL, NULL);
    if (rc == 0 && n->inbuf[0] && m)
      for (int h = 0; h < m->n_post_hooks; h++)
        ((kiln_post_accumulate_hook)(void (*)(void))m->post_hooks[h].fn)(
            n->leaf, m->post_hooks[h].ud);
    return rc;
  }
  if (n->freed)
    return core_error(KILN_ERR_STATE,
                      "backward: trying to backward through the graph a second time "
                      "(through %s), but its saved tensors were freed after the first "
                      "backward; pass retain_graph to keep them",
                      n->name);
  outs = core_calloc((size_t)(n->n_next ? n->n_next : 1), sizeof *outs);
  needs = core_calloc((size_t)(n->n_next ? n->n_next : 1), sizeof *needs);
  if (!outs || !needs) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int j = 0; j < n->n_next; j++) {
    ag_node *c = n->next[j].node;
    needs[j] = c && (c->needed || is_capture(t, c));
  }
  rc = n->apply(n, n->inbuf, needs, outs);
  if (rc < 0) goto done;
  if (anomaly_on)
    for (int j = 0; j < n->n_next; j++)
      if (has_nonfinite(outs[j])) {
        rc = core_error(KILN_ERR_STATE,
                        "anomaly: backward of %s returned NaN or Inf in its gradient "
                        "for input %d; the forward op was %s",
                        n->name, j, n->trace ? n->trace : n->name);
        goto done;
      }
  for (int j = 0; j < n->n_next && rc == 0; j++) {
    ag_node *c = n->next[j].node;
    if (!outs[j] || !needs[j]) continue;
    rc = add_input(c, n->next[j].input_nr, outs[j], n);
  }
  if (!t->retain_graph) free_node_state(n);
done:
  if (outs)
    for (int j = 0; j < n->n_next; j++) kiln_release(outs[j]);
  core_free(outs);
  core_free(needs);
  return rc;
}

/* Note [Saved outputs under create_graph]: a saved output is stored as an
 * alias without history (a reference to its own node would be a cycle).
 * When the backward is itself recorded, the alias is re-attached to this
 * node for the duration of the formula, so the formula's use of the output
 * differentiates through the forward op. */
int ag_op_apply(ag_node *n, kiln_tensor *const *grads_in, const bool *needs,
                     kiln_tensor **grads_out) {
  const op_info *info = &op_table[n->op];
  kiln_tensor *outs_small[4], **outs = outs_small;
  int rc = 0;
  if (!info->grad)
    return core_error(KILN_ERR_UNSUPPORTED, "backward: the derivative of %s is not implemented",
                      info->name);
  for (int i = 0; i < n->n_saved; i++)
    if (!ag_unpack(n, &n->saved[i], i)) return KILN_ERR_STATE;
  if (n->n_inputs > 4) {
    outs = core_calloc((size_t)n->n_inputs, sizeof *outs);
    if (!outs) return KILN_ERR_NOMEM;
  }
  for (int i = 0; i < n->n_inputs; i++) {
    outs[i] = NULL;
    if (!n->saved_outs) continue;
    if (i == 0 && (info->flags & OPF_SAVE_AUX_OUTS)) continue; /* not saved */
    kiln_tensor *o = ag_unpack(n, &n->saved_outs[i], i);
    if (!o) {
      rc = KILN_ERR_STATE;
      goto done;
    }
    if (ag_engine_create_graph() && core_dtype_is_floating(o->dtype)) {
      kiln_tensor *a = core_alias(o, true);
      if (!a) {
        rc = KILN_ERR_NOMEM;
        goto done;
      }
      if (!core_autorelease(a)) { /* released */
        rc = KILN_ERR_NOMEM;
        goto done;
      }
      ag_meta *m = ag_meta_get(a);
      if (!m) {
        rc = KILN_ERR_NOMEM;
        goto done;
      }
      m->grad_fn = n;
      ag_node_retain(n);
      m->output_nr = i;
      a->requires_grad = true;
      o = a;
    }
    outs[i] = o;
  }
  op_grad_ctx ctx = {n->args, n->n_args, outs, n->n_inputs, grads_in, needs, grads_out,
                     n->n_next};
  long failures = core_alloc_failures();
  rc = info->grad(&ctx);
  /* a formula whose op ran out of memory may return 0 with a gradient
   * missing: that must not become a wrong gradient reported as success */
  if (rc == 0 && core_alloc_failures() != failures) rc = KILN_ERR_NOMEM;
  if (rc < 0) {
    /* the formula's results are borrowed from its scope: drop, not release */
    for (int j = 0; j < n->n_next; j++) grads_out[j] = NULL;
    core_error_prefix("%s backward: ", info->name);
    goto done;
  }
  for (int j = 0; j < n->n_next; j++) {
    if (grads_out[j] && !needs[j]) grads_out[j] = NULL;
    kiln_retain(grads_out[j]);
  }
done:
  if (outs != outs_small) core_free(outs);
  return rc;
}

/* ---- entry points ---------------------------------------------------------- */

static int run_task(ag_task *t, kiln_tensor *const *roots, kiln_tensor *const *grads,
                    int n_roots) {
  int rc = 0;
  char d[160];
  ag_edge *edges = core_calloc((size_t)(n_roots ? n_roots : 1), sizeof *edges);
  ag_node **root_nodes = core_calloc((size_t)(n_roots ? n_roots : 1), sizeof *root_nodes);
  bool prev_mode = op_grad_enabled;
  ag_task *prev_task = cur_task;
  if (!edges || !root_nodes) {
    rc = KILN_ERR_NOMEM;
    goto out;
  }
  if (prev_task) {
    rc = core_error(KILN_ERR_STATE, "backward: cannot start a backward from inside another");
    goto out;
  }
  t->id = atomic_fetch_add_explicit(&next_task_id, 1, memory_order_relaxed);
  for (int i = 0; i < n_roots; i++) {
    kiln_tensor *r = roots[i];
    if (!r) {
      rc = core_error(KILN_ERR_INVALID, "backward: root %d is NULL", i);
      goto out;
    }
    if (!r->requires_grad) {
      rc = core_error(KILN_ERR_INVALID,
                      "backward: root %d (%s) does not require grad and has no grad_fn",
                      i, core_tensor_desc(r, d, sizeof d));
      goto out;
    }
    if ((!grads || !grads[i]) && kiln_tensor_numel(r) != 1) {
      rc = core_error(KILN_ERR_INVALID,
                      "backward: a gradient can be implied only for one-element roots; "
                      "root %d is %s, pass its gradient",
                      i, core_tensor_desc(r, d, sizeof d));
      goto out;
    }
    if ((rc = ag_gradient_edge(r, &edges[i])) < 0) goto out;
    root_nodes[i] = edges[i].node;
  }
  if ((rc = discover(t, root_nodes, n_roots)) < 0) goto out;
  op_grad_enabled = t->create_graph;
  cur_task = t;
  op_pack_scope_begin(); /* Note [Packed B cache] */
  kiln_scope_begin();
  for (int i = 0; i < n_roots && rc == 0; i++) {
    kiln_tensor *g = grads && grads[i] ? grads[i]
                                       : kiln_ones(roots[i]->ndim, roots[i]->shape,
                                                   roots[i]->dtype);
    if (!g) {
      rc = -1;
      break;
    }
    rc = add_input(edges[i].node, edges[i].input_nr, g, NULL);
  }
  kiln_scope_end();
  if (rc < 0) goto cleanup;
  t->heap = core_alloc((size_t)(t->n_nodes ? t->n_nodes : 1) * sizeof *t->heap);
  if (!t->heap) {
    rc = KILN_ERR_NOMEM;
    goto cleanup;
  }
  for (int i = 0; i < n_roots; i++) {
    ag_node *r = root_nodes[i];
    bool dup = false;
    for (int k = 0; k < i; k++) dup |= root_nodes[k] == r;
    if (!dup && r->deps == 0 && (r->needed || is_capture(t, r))) heap_push(t, r);
  }
  while (t->n_heap && rc == 0) {
    ag_node *n = heap_pop(t);
    for (int c = 0; c < t->n_captures; c++) {
      ag_capture *cap = &t->captures[c];
      if (cap->node != n || !n->inbuf || !n->inbuf[cap->input_nr]) continue;
      kiln_tensor *g = kiln_retain(n->inbuf[cap->input_nr]);
      if (cap->leaf && cap->leaf->ag)
        run_hooks(cap->leaf->ag->hooks, cap->leaf->ag->n_hooks, 0, &g);
      kiln_release(cap->grad);
      cap->grad = g;
    }
    if (n->needed) {
      kiln_scope_begin();
      rc = run_node(t, n);
      kiln_scope_end();
      if (rc < 0) break;
      for (int j = 0; j < n->n_next; j++) {
        ag_node *c = n->next[j].node;
        if (c && (c->needed || is_capture(t, c)) && --c->deps == 0) heap_push(t, c);
      }
      if (progress_fn) progress_fn(progress_ud);
    }
    drop_inbuf(n);
  }
  /* Note [Callbacks]: end-of-backward callbacks run after every node of
   * this backward, in the order queued; they may queue more. */
  for (int i = 0; rc == 0 && i < t->n_callbacks; i++) {
    kiln_scope_begin();
    t->callbacks[i].fn(t->callbacks[i].ud);
    kiln_scope_end();
  }
cleanup:
  for (int i = 0; i < t->n_nodes; i++) drop_inbuf(t->nodes[i]);
  op_pack_scope_end();
  cur_task = NULL;
  op_grad_enabled = prev_mode;
out:
  if (edges)
    for (int i = 0; i < n_roots; i++) ag_node_release(edges[i].node);
  core_free(edges);
  core_free(root_nodes);
  core_free(t->nodes);
  core_free(t->heap);
  core_free(t->callbacks);
  return rc;
}


kiln_status kiln_backward_ex(kiln_tensor *const *roots, kiln_tensor *const *grads, int n,
                             const kiln_backward_opts *opts) {
  ag_task t = {0};
  kiln_backward_opts o = opts ? *opts : (kiln_backward_opts){0};
  t.create_graph = o.create_graph;
  t.retain_graph = o.retain_graph || o.create_graph;
  t.accumulate_all = !o.inputs;
  t.only = o.inputs;
  t.n_only = o.n_inputs;
  ag_capture *caps = NULL;
  int n_caps = 0, rc;
  if (o.inputs) {
    /* Non-leaf inputs receive their gradient in .grad via a capture. */
    caps = core_calloc((size_t)(o.n_inputs ? o.n_inputs : 1), sizeof *caps);
    if (!caps) return KILN_ERR_NOMEM;
    for (int i = 0; i < o.n_inputs; i++) {
      kiln_tensor *x = o.inputs[i];
      if (!x || !x->requires_grad) {
        core_free(caps);
        return core_error(KILN_ERR_INVALID, "backward: inputs[%d] does not require grad", i);
      }
      if (x->ag && x->ag->grad_fn) {
        caps[n_caps].node = x->ag->grad_fn;
        caps[n_caps].input_nr = x->ag->output_nr;
        caps[n_caps].leaf = x; /* the tensor to store into */
        n_caps++;
      }
    }
  }
  t.captures = caps;
  t.n_captures = n_caps;
  rc = run_task(&t, roots, grads, n);
  kiln_scope_begin();
  for (int i = 0; i < n_caps; i++) {
    if (rc == 0 && caps[i].grad) {
      ag_meta *m = ag_meta_get(caps[i].leaf);
      kiln_tensor *g = caps[i].grad;
      kiln_tensor *sum = m && m->grad ? kiln_add(m->grad, g) : g;
      if (m && sum) {
        kiln_retain(sum);
        kiln_release(m->grad);
        m->grad = sum;
      }
    }
    kiln_release(caps[i].grad);
  }
  kiln_scope_end();
  core_free(caps);
  return rc;
}

kiln_status kiln_backward(kiln_tensor *root, kiln_tensor *grad) {
  return kiln_backward_ex(&root, grad ? &grad : NULL, 1, NULL);
}

kiln_status kiln_grad(kiln_tensor *const *outputs, kiln_tensor *const *grad_outputs,
                      int n_out, kiln_tensor *const *inputs, int n_in,
                      const kiln_backward_opts *opts, kiln_tensor **grads_out) {
  ag_task t = {0};
  kiln_backward_opts o = opts ? *opts : (kiln_backward_opts){0};
  int rc;
  t.create_graph = o.create_graph;
  t.retain_graph = o.retain_graph || o.create_graph;
  t.accumulate_all = false;
  t.captures = core_calloc((size_t)(n_in ? n_in : 1), sizeof *t.captures);
  if (!t.captures) return KILN_ERR_NOMEM;
  t.n_captures = n_in;
  ag_edge *held = core_calloc((size_t)(n_in ? n_in : 1), sizeof *held);
  if (!held) {
    core_free(t.captures);
    return KILN_ERR_NOMEM;
  }
  for (int i = 0; i < n_in; i++) {
    kiln_tensor *x = inputs[i];
    if (!x || !x->requires_grad) {
      rc = core_error(KILN_ERR_INVALID, "grad: inputs[%d] does not require grad", i);
      goto done;
    }
    if ((rc = ag_gradient_edge(x, &held[i])) < 0) goto done;
    t.captures[i].node = held[i].node;
    t.captures[i].input_nr = held[i].input_nr;
    t.captures[i].leaf = kiln_is_leaf(x) ? x : NULL;
  }
  rc = run_task(&t, outputs, grad_outputs, n_out);
  if (rc == 0) rc = core_scope_reserve(n_in); /* every grad registered, or none returned */
  for (int i = 0; i < n_in; i++) {
    grads_out[i] = rc == 0 ? core_autorelease(t.captures[i].grad) : NULL;
    if (rc < 0) kiln_release(t.captures[i].grad);
  }
done:
  for (int i = 0; i < n_in; i++) ag_node_release(held[i].node);
  core_free(held);
  core_free(t.captures);
  return rc;
}

/* ---- hooks ------------------------------------------------------------------ */

kiln_status kiln_register_hook(kiln_tensor *t, kiln_grad_hook fn, void *ud) {
  if (!t || !fn) return core_error(KILN_ERR_INVALID, "register_hook: NULL argument");
  if (!t->requires_grad)
    return core_error(KILN_ERR_INVALID,
                      "register_hook: cannot register a hook on a tensor that does "
                      "not require grad");
  ag_meta *m = ag_meta_get(t);
  if (!m) return KILN_ERR_NOMEM;
  if (m->grad_fn) {
    ag_node *n = m->grad_fn;
    ag_hook *h = core_realloc(n->pre_hooks, (size_t)(n->n_pre_hooks + 1) * sizeof *h);
    if (!h) return KILN_ERR_NOMEM;
    n->pre_hooks = h;
    h[n->n_pre_hooks++] = (ag_hook){m->output_nr, fn, ud};
    return KILN_OK;
  }
  ag_hook *h = core_realloc(m->hooks, (size_t)(m->n_hooks + 1) * sizeof *h);
  if (!h) return KILN_ERR_NOMEM;
  m->hooks = h;
  h[m->n_hooks++] = (ag_hook){0, fn, ud};
  return KILN_OK;
}

kiln_status kiln_register_post_accumulate_hook(kiln_tensor *t, kiln_post_accumulate_hook fn,
                                               void *ud) {
  if (!t || !fn) return core_error(KILN_ERR_INVALID, "register_post_accumulate_hook: NULL argument");
  if (!kiln_is_leaf(t) || !t->requires_grad)
    return core_error(KILN_ERR_INVALID,
                      "register_post_accumulate_hook: only leaves that require grad "
                      "accumulate gradients");
  ag_meta *m = ag_meta_get(t);
  if (!m) return KILN_ERR_NOMEM;
  ag_hook *h = core_realloc(m->post_hooks, (size_t)(m->n_post_hooks + 1) * sizeof *h);
  if (!h) return KILN_ERR_NOMEM;
  m->post_hooks = h;
  h[m->n_post_hooks++] = (ag_hook){0, (kiln_tensor * (*)(kiln_tensor *, void *))(void (*)(void))fn, ud};
  return KILN_OK;
}

void kiln_free(void *p) { core_free(p); }
