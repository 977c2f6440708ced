/* src/exec/diffgraph.c: the prim::DifferentiableGraph op. It runs the
 * forward graph of its Gradient on detached inputs and records ONE autograd
 * node whose backward runs the backward graph, with the captured values.
 *
 * Note [Shape-polymorphic differentiation]: a Gradient is traced for the
 * input shapes it meets (Note in passes/differentiate.c); plans are cached
 * per (dtypes, shapes), a few at a time, so new batch sizes cost one trace,
 * never a new optimization of the enclosing function, and the graph needs
 * no shape guard. */
#include <stdio.h>
#include <string.h>

#include "executor.h"
#include "fusion.h"
#include "passes/passes.h"
#include "passes/pipeline.h"

#define DIFF_PLANS 8

typedef struct diff_plan {
  int refcount;
  op_meta *key;       /* n_in input metas */
  pass_gradient gr;
  exec_code *fwd, *bwd;
} diff_plan;

struct diff_rt {
  ir_graph *sub;
  int n_in, n_out;
  bool *assumed;
  diff_plan *plans[DIFF_PLANS];
  int n_plans, next_slot;
  diff_plan *last;
  bool fuse;
  exec_code *plain;   /* the subgraph without autograd (guard bypassed) */
};

static void plan_release(diff_plan *p) {
  if (!p || --p->refcount > 0) return;
  core_free(p->key);
  pass_gradient_free(&p->gr);
  exec_code_free(p->fwd);
  exec_code_free(p->bwd);
  core_free(p);
}

static diff_plan *plan_make(diff_rt *d, const op_meta *metas) {
  diff_plan *p = core_calloc(1, sizeof *p);
  if (!p) return NULL;
  p->refcount = 1;
  p->key = core_alloc((size_t)(d->n_in ? d->n_in : 1) * sizeof *p->key);
  if (!p->key) goto fail;
  memcpy(p->key, metas, (size_t)d->n_in * sizeof *metas);
  if (pass_differentiate(d->sub, metas, d->assumed, &p->gr) < 0) goto fail;
  /* the traced graphs' types are exact for this plan's shapes (plans are
   * keyed by them): passes/pipeline.c */
  pass_opts o = {.fusion = d->fuse, .min_subgraph_size = 2};
  if (pass_pipeline_run(p->gr.f, &pass_pipeline_diff_forward, &o) < 0 ||
      pass_pipeline_run(p->gr.df, &pass_pipeline_diff_backward, &o) < 0 ||
      pass_factor_grads(&p->gr) < 0) /* Note [Factored weight gradients] */
    goto fail;
  p->fwd = exec_compile(p->gr.f, &exec_fusion_compile_opts);
  p->bwd = p->fwd ? exec_compile(p->gr.df, &exec_fusion_compile_opts) : NULL;
  if (!p->bwd) goto fail;
  return p;
fail:
  plan_release(p);
  return NULL;
}

static bool key_equal(const diff_rt *d, const diff_plan *p, const op_meta *m) {
  for (int i = 0; i < d->n_in; i++) {
    if (p->key[i].dtype != m[i].dtype || p->key[i].ndim != m[i].ndim) return false;
    for (int k = 0; k < m[i].ndim; k++)
      if (p->key[i].shape[k] != m[i].shape[k]) return false;
  }
  return true;
}

static diff_plan *plan_for(diff_rt *d, const op_meta *m) {
  for (int i = 0; i < d->n_plans; i++)
    if (key_equal(d, d->plans[i], m)) return d->plans[i];
  diff_plan *p = plan_make(d, m);
  if (!p) return NULL;
  int slot = d->n_plans < DIFF_PLANS ? d->n_plans++ : d->next_slot++ % DIFF_PLANS;
  plan_release(d->plans[slot]);
  d->plans[slot] = p;
  return p;
}

diff_rt *exec_diff_rt_new(const ir_graph *sub, const ir_node *node, bool fuse) {
  diff_rt *d = core_calloc(1, sizeof *d);
  if (!d) return NULL;
  d->fuse = fuse;
  d->sub = ir_graph_clone(sub);
  d->n_in = node->n_inputs;
  d->n_out = node->n_outputs;
  d->assumed = core_calloc((size_t)(d->n_in ? d->n_in : 1), sizeof *d->assumed);
  if (!d->sub || !d->assumed) goto fail;
  bool complete = true;
  op_meta *m = core_calloc((size_t)(d->n_in ? d->n_in : 1), sizeof *m);
  if (!m) goto fail;
  for (int i = 0; i < d->n_in; i++) {
    const ir_type *t = node->inputs[i]->type;
    d->assumed[i] = pass_assumes_requires_grad(t);
    if (t->kind != IR_TYPE_TENSOR) {
      core_free(m);
      core_error(KILN_ERR_UNSUPPORTED, "DifferentiableGraph: input %d is not a tensor", i);
      goto fail;
    }
    if (!t->seen || t->dtype < 0 || t->ndim < 0) {
      complete = false;
      continue;
    }
    m[i].dtype = (kiln_dtype)t->dtype;
    m[i].ndim = t->ndim;
    for (int k = 0; k < t->ndim; k++) {
      m[i].shape[k] = t->sizes ? t->sizes[k] : -1;
      if (m[i].shape[k] < 0) complete = false;
    }
  }
  /* differentiate now when the profiled types say everything (so the
   * optimized graph shows the forward and backward); else at first run */
  if (complete) {
    diff_plan *p = plan_for(d, m);
    if (!p) {
      core_free(m);
      goto fail;
    }
    d->last = p;
  }
  core_free(m);
  return d;
fail:
  exec_diff_rt_free(d);
  return NULL;
}

void exec_diff_rt_free(diff_rt *d) {
  if (!d) return;
  for (int i = 0; i < d->n_plans; i++) plan_release(d->plans[i]);
  exec_code_free(d->plain);
  ir_graph_free(d->sub);
  core_free(d->assumed);
  core_free(d);
}

/* ---- the backward node ----------------------------------------------------- */

typedef struct diff_backward {
  diff_plan *plan;
  kiln_tensor **captured;   /* captured inputs then captured outputs */
  int n_captured;
  op_meta *out_meta;        /* real outputs, for zero vjps */
} diff_backward;

static void backward_release(ag_node *n) {
  diff_backward *b = n->state;
  if (!b) return;
  for (int i = 0; b->captured && i < b->n_captured; i++) kiln_release(b->captured[i]);
  core_free(b->captured);
  core_free(b->out_meta);
  plan_release(b->plan);
  core_free(b);
  n->state = NULL;
}

static int backward_apply(ag_node *n, kiln_tensor *const *grads_in, const bool *needs,
                          kiln_tensor **grads_out) {
  diff_backward *b = n->state;
  const pass_gradient *gr = &b->plan->gr;
  int n_in = gr->n_vjps + b->n_captured + gr->n_consts, rc = 0;
  int n_ret = ir_block_n_returns(ir_graph_top(gr->df)); /* factors after the vjps */
  exec_value *in = core_calloc((size_t)(n_in ? n_in : 1), sizeof *in);
  exec_value *out = core_calloc((size_t)(n_ret ? n_ret : 1), sizeof *out);
  if (!b->captured && b->n_captured)
    return core_error(KILN_ERR_STATE, "DifferentiableGraphBackward: saved values were freed");
  if (!in || !out) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  int k = 0;
  for (int i = 0; i < gr->n_vjps; i++) {
    int o = gr->df_input_vjps[i];
    kiln_tensor *g = o < n->n_inputs ? grads_in[o] : NULL;
    if (!g) { /* no gradient reached this output: zeros */
      const op_meta *m = &b->out_meta[o];
      g = kiln_zeros(m->ndim, m->shape, m->dtype);
      if (!g) {
        rc = -1;
        goto done;
      }
    }
    in[k++] = (exec_value){.tag = EXEC_V_TENSOR, .t = g};
  }
  for (int i = 0; i < b->n_captured; i++) in[k++] = (exec_value){.tag = EXEC_V_TENSOR, .t = b->captured[i]};
  for (int i = 0; i < gr->n_consts; i++) in[k++] = (exec_value){.tag = EXEC_V_TENSOR, .t = gr->consts[i]};
  if ((rc = exec_code_run(b->plan->bwd, in, out)) < 0) {
    core_error_prefix("DifferentiableGraph backward: ");
    goto done;
  }
  for (int i = 0; i < gr->n_output_vjps; i++) {
    int slot = gr->df_output_vjps[i];
    if (slot >= n->n_next || !needs[slot] || out[i].tag != EXEC_V_TENSOR) continue;
    int y = gr->factor_of ? gr->factor_of[i] : -1;
    if (y < 0) {
      grads_out[slot] = kiln_retain(out[i].t);
      continue;
    }
    /* Note [Factored weight gradients]: out[i]^T @ out[y], multiplied
     * later with the loop's other steps when a leaf accumulates it */
    if (out[y].tag != EXEC_V_TENSOR) {
      rc = core_error(KILN_ERR_STATE, "DifferentiableGraph backward: factor %d is not a tensor", y);
      goto done;
    }
    rc = ag_accumulate_factored(n->next[slot].node, n->next[slot].input_nr, out[i].t, out[y].t);
    if (rc < 0) goto done;
    if (rc == 0) {
      kiln_tensor *g = kiln_mm(kiln_t(out[i].t), out[y].t);
      if (!g) {
        rc = -1;
        goto done;
      }
      grads_out[slot] = kiln_retain(g);
    }
    rc = 0;
  }
done:
  if (out)
    for (int i = 0; i < n_ret; i++) exec_value_clear(&out[i]);
  core_free(in);
  core_free(out);
  return rc;
}

/* ---- the op ----------------------------------------------------------------------- */

static int run_plain(diff_rt *d, exec_value *in, exec_value *out) {
  if (!d->plain && !(d->plain = exec_compile(d->sub, &exec_fusion_compile_opts))) return -1;
  return exec_code_run(d->plain, in, out);
}

/* p's forward on the n_in inputs in, then its constant tensors (borrowed) */
static int run_forward(const diff_plan *p, int n_in, exec_value *in, exec_value *fo) {
  const pass_gradient *gr = &p->gr;
  if (!gr->n_f_consts) return exec_code_run(p->fwd, in, fo);
  exec_value *all = core_calloc((size_t)n_in + (size_t)gr->n_f_consts, sizeof *all);
  if (!all) return KILN_ERR_NOMEM;
  memcpy(all, in, (size_t)n_in * sizeof *all);
  for (int i = 0; i < gr->n_f_consts; i++)
    all[n_in + i] = (exec_value){.tag = EXEC_V_TENSOR, .t = gr->f_consts[i]};
  int rc = exec_code_run(p->fwd, all, fo);
  core_free(all);
  return rc;
}

/* Can v require grad? Not a tensor of a known non-floating dtype (a bool
 * or integer tensor never does, nor, eagerly, what is made from it). */
static bool may_require_grad(const ir_value *v) {
  const ir_type *t = v->type;
  return !(t && t->kind == IR_TYPE_TENSOR && t->dtype >= 0 &&
           !core_dtype_is_floating((kiln_dtype)t->dtype));
}

/* Marks in reach[o] whether output o of d's subgraph depends on an input
 * that requires grad through floating values (PyTorch's requires_grad
 * propagation): only those outputs get the node's history; the others
 * stay plain tensors, as the same ops run eagerly leave them (to(to(x,
 * bool), float) does not require grad). < 0 on out of memory. */
static int outputs_needing_grad(const diff_rt *d, const exec_value *in, bool *reach) {
  const ir_block *top = ir_graph_top(d->sub);
  bool *rg = core_calloc((size_t)ir_graph_value_count(d->sub) + 1, sizeof *rg);
  if (!rg) return KILN_ERR_NOMEM;
  for (int i = 0; i < ir_block_n_params(top) && i < d->n_in; i++)
    rg[ir_block_param(top, i)->id] = in[i].t->requires_grad;
  for (const ir_node *n = top->first; n; n = n->next) {
    bool any = false;
    for (int i = 0; i < n->n_inputs; i++) any |= rg[n->inputs[i]->id];
    for (int i = 0; i < n->n_outputs; i++) rg[n->outputs[i]->id] = any && may_require_grad(n->outputs[i]);
  }
  for (int i = 0; i < ir_block_n_returns(top); i++) reach[i] = rg[ir_block_return(top, i)->id];
  core_free(rg);
  return 0;
}

int exec_diff_rt_prim(const exec_instr *x, exec_value *in, exec_value *out) {
  diff_rt *d = x->k.obj;
  bool any_rg = false;
  op_meta small[16], *m = small;
  exec_value fo_small[32], *fo = fo_small;
  int rc = 0, n_fo = 0;
  diff_plan *p = NULL;
  ag_node *node = NULL;
  kiln_tensor **real = NULL;
  for (int i = 0; i < d->n_in; i++) {
    if (in[i].tag != EXEC_V_TENSOR)
      return core_error(KILN_ERR_INVALID, "DifferentiableGraph: input %d is a %s, not a tensor", i,
                        exec_tag_name(in[i].tag));
    any_rg |= in[i].t->requires_grad;
  }
  if (!kiln_is_grad_enabled() || !any_rg) return run_plain(d, in, out);
  if (d->n_in > 16 && !(m = core_alloc((size_t)d->n_in * sizeof *m))) return KILN_ERR_NOMEM;
  for (int i = 0; i < d->n_in; i++) op_meta_of(in[i].t, &m[i]);
  p = plan_for(d, m);
  if (m != small) core_free(m);
  if (!p) return -1;
  d->last = p;
  const pass_gradient *gr = &p->gr;
  n_fo = ir_block_n_returns(ir_graph_top(gr->f));
  if (n_fo > 32 && !(fo = core_calloc((size_t)n_fo, sizeof *fo))) return KILN_ERR_NOMEM;
  memset(fo, 0, (size_t)n_fo * sizeof *fo);
  /* the forward runs detached: the one node below stands for all of it */
  bool prev = kiln_set_grad_enabled(false);
  rc = run_forward(p, d->n_in, in, fo);
  kiln_set_grad_enabled(prev);
  if (rc < 0) goto done;
  node = ag_node_new(AG_CUSTOM, "DifferentiableGraphBackward", gr->f_real_outputs, d->n_in);
  diff_backward *b = core_calloc(1, sizeof *b);
  if (!node || !b) {
    core_free(b);
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  node->apply = backward_apply;
  node->release_fn = backward_release;
  node->state = b;
  b->plan = p;
  p->refcount++;
  b->n_captured = gr->n_captured_inputs + gr->n_captured_outputs;
  b->captured = core_calloc((size_t)(b->n_captured ? b->n_captured : 1), sizeof *b->captured);
  b->out_meta = core_calloc((size_t)(gr->f_real_outputs ? gr->f_real_outputs : 1), sizeof *b->out_meta);
  if (!b->captured || !b->out_meta) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  int k = 0;
  for (int i = 0; i < gr->n_captured_inputs; i++)
    b->captured[k++] = core_alias(in[gr->df_input_captured_inputs[i]].t, true);
  for (int i = 0; i < gr->n_captured_outputs; i++)
    b->captured[k++] = core_alias(fo[gr->df_input_captured_outputs[i]].t, true);
  for (int i = 0; i < k; i++)
    if (!b->captured[i]) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
  /* edges: only inputs that get a gradient and actually require one */
  for (int i = 0; i < gr->n_output_vjps; i++) {
    int slot = gr->df_output_vjps[i];
    if (in[slot].t->requires_grad && (rc = ag_gradient_edge(in[slot].t, &node->next[slot])) < 0)
      goto done;
  }
  /* one entry per real output, however many (a 64-entry array once
   * dropped the rest: issue #15) */
  int n_real = gr->f_real_outputs;
  real = core_calloc((size_t)(n_real ? n_real : 1), sizeof *real);
  if (!real) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < n_real; i++) {
    if (fo[i].tag != EXEC_V_TENSOR) {
      rc = core_error(KILN_ERR_STATE, "DifferentiableGraph: output %d is not a tensor", i);
      goto done;
    }
    /* an output that is an input (the graph returns x, or a no-op such
     * as eval-mode dropout does) or an earlier output is handed out as a
     * fresh alias: the node's history goes on the alias, never on the
     * caller's tensor (which would stop being a leaf and, saved by the
     * node, form a reference cycle) */
    bool shared = fo[i].t->ag != NULL;
    for (int j = 0; j < d->n_in && !shared; j++) shared = in[j].tag == EXEC_V_TENSOR && in[j].t == fo[i].t;
    for (int j = 0; j < i && !shared; j++) shared = real[j] == fo[i].t;
    if (shared) {
      kiln_tensor *a = core_alias(fo[i].t, true);
      if (!a) {
        rc = KILN_ERR_NOMEM;
        goto done;
      }
      kiln_release(fo[i].t);
      fo[i].t = a;
    }
    real[i] = fo[i].t;
    op_meta_of(real[i], &b->out_meta[i]);
    op_meta_of(real[i], &node->in_meta[i]);
  }
  bool *reach = core_calloc((size_t)(ir_block_n_returns(ir_graph_top(d->sub)) + n_real + 1), sizeof *reach);
  if (!reach || (rc = outputs_needing_grad(d, in, reach)) < 0) {
    core_free(reach);
    rc = rc < 0 ? rc : KILN_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < n_real; i++)
    if (!reach[i]) real[i] = NULL; /* no history: requires_grad stays false */
  core_free(reach);
  if ((rc = ag_set_history(real, n_real, node)) < 0) goto done;
  for (int i = 0; i < n_real; i++) out[i] = exec_value_copy(&fo[i]);
done:
  core_free(real);
  ag_node_release(node);
  for (int i = 0; i < n_fo; i++) exec_value_clear(&fo[i]);
  if (fo != fo_small) core_free(fo);
  return rc;
}

char *exec_diff_rt_describe(const diff_rt *d, int index) {
  if (!d->last) return NULL;
  char *f = ir_graph_print(d->last->gr.f, IR_PRINT_NO_SOURCE);
  char *df = ir_graph_print(d->last->gr.df, IR_PRINT_NO_SOURCE);
  size_t n = (f ? strlen(f) : 0) + (df ? strlen(df) : 0) + 512;
  char *s = core_alloc(n);
  if (s) {
    const pass_gradient *g = &d->last->gr;
    size_t k = (size_t)snprintf(s, n, "prim::DifferentiableGraph_%d forward:\n%s", index, f ? f : "");
    k += (size_t)snprintf(s + k, n - k, "prim::DifferentiableGraph_%d backward (gradients for inputs", index);
    for (int i = 0; i < g->n_output_vjps; i++)
      k += (size_t)snprintf(s + k, n - k, "%s%d", i ? ", " : " ", g->df_output_vjps[i]);
    snprintf(s + k, n - k, "):\n%s", df ? df : "");
  }
  core_free(f);
  core_free(df);
  return s;
}
