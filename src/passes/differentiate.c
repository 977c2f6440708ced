/* src/passes/differentiate.c: differentiation by tracing.
 *
 * 1. One symbolic lazy tensor per subgraph input (shape/dtype, no data),
 *    requires_grad from the mask.
 * 2. Evaluate the subgraph's nodes on them through the op table: this
 *    records the forward (and, since inputs require grad, autograd nodes).
 * 3. Symbolic vjps for the outputs that require grad; kiln_grad over the
 *    engine: the derivative formulas record the backward.
 * 4. Partition: forward = what the outputs need; backward = what the
 *    gradients need that the forward does not compute; forward values the
 *    backward reads become captured inputs/outputs.
 * The derivative formulas are the ones eager autograd runs, so the JIT's
 * gradients equal eager gradients by construction. */
#include <string.h>

#include "autodiff.h"
#include "ir/scalar.h"

/* ---- a straight-line evaluator over IR values -------------------------- */

typedef struct tval {
  op_val v;        /* tensors are borrowed from the tracing scope */
  int64_t ints[KILN_MAX_DIMS * 4];
  kiln_tensor **ts;
} tval;

static int constant_of(const ir_node *n, tval *out) {
  ir_const c;
  out->v = OPV_NONE;
  if (ir_constant_of(n, &c) < 0) return -1; /* Note [Constant values] */
  switch (c.tag) {
  case IR_CONST_NONE: return 0;
  case IR_CONST_INT: out->v = OPV_I(c.i); return 0;
  case IR_CONST_BOOL: out->v = OPV_B(c.b); return 0;
  case IR_CONST_FLOAT: out->v = OPV_F(c.f); return 0;
  case IR_CONST_STR:
  case IR_CONST_DEVICE: out->v = OPV_S(c.s); return 0;
  case IR_CONST_FLOATS: /* an empty float[] only: `[]` */
    if (c.n) break;
    /* fall through */
  case IR_CONST_INTS:
  case IR_CONST_BOOLS:
    if (c.n > (int)(sizeof out->ints / sizeof *out->ints)) break;
    memcpy(out->ints, c.ints, (size_t)c.n * sizeof *out->ints);
    out->v = OPV_INTS(out->ints, c.n);
    return 0;
  default: break;
  }
  return core_error(KILN_ERR_UNSUPPORTED, "differentiate: unsupported constant in a subgraph");
}

static int eval_node(const ir_node *n, tval *vals) {
  if (n->prim == IR_PRIM_CONSTANT) return constant_of(n, &vals[n->outputs[0]->id]);
  if (n->prim == IR_PRIM_LIST_CONSTRUCT) {
    tval *o = &vals[n->outputs[0]->id];
    bool tensors = n->n_inputs > 0 && vals[n->inputs[0]->id].v.tag == OP_VAL_TENSOR;
    if (tensors) {
      o->ts = core_alloc((size_t)n->n_inputs * sizeof *o->ts);
      if (!o->ts) return KILN_ERR_NOMEM;
      for (int i = 0; i < n->n_inputs; i++) o->ts[i] = vals[n->inputs[i]->id].v.t;
      o->v = OPV_TS(o->ts, n->n_inputs);
      return 0;
    }
    if (n->n_inputs > (int)(sizeof o->ints / sizeof *o->ints))
      return core_error(KILN_ERR_UNSUPPORTED, "differentiate: list too long");
    for (int i = 0; i < n->n_inputs; i++) {
      const op_val *e = &vals[n->inputs[i]->id].v;
      if (e->tag != OP_VAL_INT)
        return core_error(KILN_ERR_UNSUPPORTED, "differentiate: unsupported list element");
      o->ints[i] = e->i;
    }
    o->v = OPV_INTS(o->ints, n->n_inputs);
    return 0;
  }
  if (n->prim == IR_PRIM_LIST_UNPACK) {
    const op_val *l = &vals[n->inputs[0]->id].v;
    if (l->tag != OP_VAL_TENSORS || l->ts.n != n->n_outputs)
      return core_error(KILN_ERR_INVALID, "differentiate: ListUnpack of %d values into %d",
                        l->tag == OP_VAL_TENSORS ? l->ts.n : -1, n->n_outputs);
    for (int i = 0; i < n->n_outputs; i++) vals[n->outputs[i]->id].v = OPV_T(l->ts.v[i]);
    return 0;
  }
  if (n->op < 0)
    return core_error(KILN_ERR_UNSUPPORTED, "differentiate: cannot trace %s", ir_node_kind(n));
  op_val args[32];
  kiln_tensor *outs[OP_MAX_OUTS > 64 ? 64 : OP_MAX_OUTS];
  if (n->n_inputs > 32) return core_error(KILN_ERR_UNSUPPORTED, "differentiate: too many args");
  for (int i = 0; i < n->n_inputs; i++) args[i] = vals[n->inputs[i]->id].v;
  int k = op_call(n->op, args, n->n_inputs, outs, 64);
  if (k < 0) return k;
  if (op_table[n->op].flags & OPF_LIST_OUT) {
    tval *o = &vals[n->outputs[0]->id];
    o->ts = core_alloc((size_t)(k ? k : 1) * sizeof *o->ts);
    if (!o->ts) return KILN_ERR_NOMEM;
    memcpy(o->ts, outs, (size_t)k * sizeof *outs);
    o->v = OPV_TS(o->ts, k);
    return 0;
  }
  if (k != n->n_outputs)
    return core_error(KILN_ERR_INVALID, "differentiate: %s made %d outputs, the node has %d",
                      ir_node_kind(n), k, n->n_outputs);
  for (int i = 0; i < k; i++) vals[n->outputs[i]->id].v = OPV_T(outs[i]);
  return 0;
}

/* ---- sets of lazy nodes ------------------------------------------------------ */

typedef struct node_set {
  lazy_node **v;
  int n, cap;
} node_set;

static bool set_has(const node_set *s, const lazy_node *x) {
  for (int i = 0; i < s->n; i++)
    if (s->v[i] == x) return true;
  return false;
}

static int set_add(node_set *s, lazy_node *x) {
  if (set_has(s, x)) return 0;
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 64;
    lazy_node **v = core_realloc(s->v, (size_t)cap * sizeof *v);
    if (!v) return KILN_ERR_NOMEM;
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = x;
  return 0;
}

typedef struct value_list {
  lazy_value *v;
  int n, cap;
} value_list;

static int vl_find(const value_list *l, const lazy_node *n, int index) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i].node == n && l->v[i].index == index) return i;
  return -1;
}

static int vl_add(value_list *l, lazy_node *n, int index) {
  if (vl_find(l, n, index) >= 0) return 0;
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 16;
    lazy_value *v = core_realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) return KILN_ERR_NOMEM;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = (lazy_value){n, index};
  return 0;
}

/* The device data g reads beyond its explicit inputs (its extra inputs),
 * retained into a new array *consts (*n them). Data-less (symbolic) ones
 * are values the trace did not track: an error. */
static int take_consts(const pass_lazy_graph *g, const char *which, kiln_tensor ***consts,
                       int *n) {
  *consts = core_calloc((size_t)(g->n_extra ? g->n_extra : 1), sizeof **consts);
  if (!*consts) return KILN_ERR_NOMEM;
  for (int i = 0; i < g->n_extra; i++) {
    if (!g->extra[i]->data)
      return core_error(KILN_ERR_STATE, "differentiate: the %s reads an untracked input", which);
    (*consts)[(*n)++] = kiln_retain(g->extra[i]->data);
  }
  return 0;
}

static int *int_array(int n) { return core_calloc((size_t)(n ? n : 1), sizeof(int)); }

void pass_gradient_free(pass_gradient *gr) {
  if (!gr) return;
  ir_graph_free(gr->f);
  ir_graph_free(gr->df);
  core_free(gr->df_input_vjps);
  core_free(gr->df_input_captured_inputs);
  core_free(gr->df_input_captured_outputs);
  core_free(gr->df_output_vjps);
  for (int i = 0; i < gr->n_consts; i++) kiln_release(gr->consts[i]);
  core_free(gr->consts);
  for (int i = 0; i < gr->n_f_consts; i++) kiln_release(gr->f_consts[i]);
  core_free(gr->f_consts);
  core_free(gr->factor_of);
  memset(gr, 0, sizeof *gr);
}

/* One differentiation's state, shared by its steps (pass_differentiate). */
typedef struct diff_ctx {
  const ir_block *top;
  const op_meta *in_meta;
  const bool *rg;
  pass_gradient *out;
  int n_in, n_out, n_vals;
  tval *vals;                 /* per IR value of s: its traced value */
  kiln_tensor **ins, **outs;  /* symbolic inputs, traced outputs */
  kiln_tensor **vjps, **rg_ins, **grads;
  int *vjp_of, *rg_idx;       /* vjp -> output index; requires-grad input -> input index */
  int n_rg, n_vjp, n_f_outs;
  node_set fwd;               /* the forward's lazy nodes */
  value_list captured;        /* forward values the backward reads */
  lazy_value *f_outs, *df_ins, *df_outs;
  pass_lazy_graph fg, dg;
} diff_ctx;

/* Step 1: symbolic lazy inputs of the given metas, requiring grad where rg
 * says (floating only). */
static int trace_inputs(diff_ctx *dc) {
  int rc = 0;
  for (int i = 0; i < dc->n_in; i++) {
    lazy_node *d = lazy_symbolic_node(&dc->in_meta[i]);
    if (!d) {
      rc = KILN_ERR_NOMEM;
      return rc;
    }
    dc->ins[i] = core_autorelease(lazy_tensor_new(d, 0, &dc->in_meta[i]));
    lazy_node_release(d);
    if (!dc->ins[i]) {
      rc = KILN_ERR_NOMEM;
      return rc;
    }
    if (dc->rg[i] && core_dtype_is_floating(dc->in_meta[i].dtype)) {
      kiln_set_requires_grad(dc->ins[i], true);
      dc->rg_idx[dc->n_rg] = i;
      dc->rg_ins[dc->n_rg++] = dc->ins[i];
    }
    dc->vals[ir_block_param(dc->top, i)->id].v = OPV_T(dc->ins[i]);
  }
  return rc;
}

/* Step 2: the forward, traced node by node on the symbolic inputs. */
static int trace_forward(diff_ctx *dc) {
  int rc = 0;
  for (const ir_node *n = dc->top->first; n; n = n->next)
    if ((rc = eval_node(n, dc->vals)) < 0) return rc;
  for (int i = 0; i < dc->n_out; i++) {
    const op_val *v = &dc->vals[ir_block_return(dc->top, i)->id].v;
    if (v->tag != OP_VAL_TENSOR) {
      rc = core_error(KILN_ERR_UNSUPPORTED, "differentiate: output %d is not a tensor", i);
      return rc;
    }
    dc->outs[i] = v->t;
  }
  return rc;
}

/* Step 3: a symbolic vjp per output that requires grad, and the backward
 * traced by kiln_grad (itself not differentiated). */
static int trace_backward(diff_ctx *dc) {
  int rc = 0;
  /* outputs that require grad, one per output at most: no fixed limit */
  kiln_tensor **rg_outs = core_calloc((size_t)(dc->n_out ? dc->n_out : 1), sizeof *rg_outs);
  if (!rg_outs) return KILN_ERR_NOMEM;
  for (int i = 0; i < dc->n_out; i++) {
    if (!kiln_requires_grad(dc->outs[i])) continue;
    op_meta m;
    op_meta_of(dc->outs[i], &m);
    lazy_node *d = lazy_symbolic_node(&m);
    dc->vjps[dc->n_vjp] = d ? core_autorelease(lazy_tensor_new(d, 0, &m)) : NULL;
    lazy_node_release(d);
    if (!dc->vjps[dc->n_vjp]) {
      core_free(rg_outs);
      return KILN_ERR_NOMEM;
    }
    dc->vjp_of[dc->n_vjp] = i;
    rg_outs[dc->n_vjp++] = dc->outs[i];
  }
  if (dc->n_vjp && dc->n_rg) {
    kiln_set_grad_enabled(false); /* the backward itself is not differentiated */
    rc = kiln_grad(rg_outs, dc->vjps, dc->n_vjp, dc->rg_ins, dc->n_rg, NULL, dc->grads);
    kiln_set_grad_enabled(true);
  }
  core_free(rg_outs);
  return rc;
}

/* Step 4: the forward nodes (those the outputs need) and the backward ones
 * (reachable from the gradients, not forward); the forward values the
 * backward reads are captured. */
static int partition(diff_ctx *dc) {
  int rc = 0;
  {
    lazy_node **roots = core_alloc((size_t)(dc->n_out ? dc->n_out : 1) * sizeof *roots);
    if (!roots) {
      rc = KILN_ERR_NOMEM;
      return rc;
    }
    for (int i = 0; i < dc->n_out; i++) roots[i] = lazy_of(dc->outs[i])->value.node;
    int n_order = 0;
    lazy_node **order = lazy_post_order(roots, dc->n_out, &n_order);
    core_free(roots);
    if (!order) {
      rc = KILN_ERR_NOMEM;
      return rc;
    }
    for (int i = 0; i < n_order && rc == 0; i++) rc = set_add(&dc->fwd, order[i]);
    core_free(order);
    if (rc < 0) return rc;
  }
  /* backward nodes: reachable from the gradients, not forward; the forward
   * values they read are dc->captured */
  {
    lazy_node **roots = core_alloc((size_t)(dc->n_rg ? dc->n_rg : 1) * sizeof *roots);
    int n_roots = 0, n_order = 0;
    if (!roots) {
      rc = KILN_ERR_NOMEM;
      return rc;
    }
    for (int i = 0; i < dc->n_rg; i++)
      if (dc->grads[i]) roots[n_roots++] = lazy_of(dc->grads[i])->value.node;
    lazy_node **order = lazy_post_order(roots, n_roots, &n_order);
    core_free(roots);
    if (!order) {
      rc = KILN_ERR_NOMEM;
      return rc;
    }
    for (int i = 0; i < n_order && rc == 0; i++) {
      lazy_node *x = order[i];
      if (set_has(&dc->fwd, x)) continue;
      for (int k = 0; k < x->n_operands && rc == 0; k++) {
        lazy_node *o = x->operands[k].node;
        if (set_has(&dc->fwd, o) && !(o->op == LAZY_DATA && o->data)) /* constants are not dc->captured */
          rc = vl_add(&dc->captured, o, x->operands[k].index);
      }
    }
    /* a gradient that is itself a forward value (an input passed through) */
    for (int i = 0; i < dc->n_rg && rc == 0; i++)
      if (dc->grads[i] && set_has(&dc->fwd, lazy_of(dc->grads[i])->value.node))
        rc = vl_add(&dc->captured, lazy_of(dc->grads[i])->value.node, lazy_of(dc->grads[i])->value.index);
    core_free(order);
    if (rc < 0) return rc;
  }
  return rc;
}

/* Step 5: the forward graph: real outputs, then captured temporaries. */
static int build_forward(diff_ctx *dc) {
  int rc = 0;
  dc->out->n_inputs = dc->n_in;
  dc->out->f_real_outputs = dc->n_out;
  dc->out->df_input_captured_inputs = int_array(dc->captured.n);
  dc->out->df_input_captured_outputs = int_array(dc->captured.n);
  dc->f_outs = core_alloc((size_t)(dc->n_out + dc->captured.n + 1) * sizeof *dc->f_outs);
  lazy_value *f_ins = core_alloc((size_t)(dc->n_in ? dc->n_in : 1) * sizeof *f_ins);
  if (!dc->out->df_input_captured_inputs || !dc->out->df_input_captured_outputs || !dc->f_outs || !f_ins) {
    core_free(f_ins);
    rc = KILN_ERR_NOMEM;
    return rc;
  }
  for (int i = 0; i < dc->n_in; i++) f_ins[i] = lazy_of(dc->ins[i])->value;
  dc->n_f_outs = 0;
  for (int i = 0; i < dc->n_out; i++) dc->f_outs[dc->n_f_outs++] = lazy_of(dc->outs[i])->value;
  /* dc->captured values: inputs by index; others appended to f's outputs
   * (reusing a real output when it is one) */
  for (int c = 0; c < dc->captured.n; c++) {
    lazy_value cv = dc->captured.v[c];
    int as_input = -1, as_output = -1;
    for (int i = 0; i < dc->n_in; i++)
      if (f_ins[i].node == cv.node && f_ins[i].index == cv.index) as_input = i;
    if (as_input >= 0) {
      dc->out->df_input_captured_inputs[dc->out->n_captured_inputs++] = as_input;
      continue;
    }
    for (int i = 0; i < dc->n_f_outs; i++)
      if (dc->f_outs[i].node == cv.node && dc->f_outs[i].index == cv.index) as_output = i;
    if (as_output < 0) {
      as_output = dc->n_f_outs;
      dc->f_outs[dc->n_f_outs++] = cv;
    }
    dc->out->df_input_captured_outputs[dc->out->n_captured_outputs++] = as_output;
  }
  rc = pass_lazy_to_ir(f_ins, dc->n_in, dc->f_outs, dc->n_f_outs, 0, &dc->fg);
  core_free(f_ins);
  if (rc < 0) return rc;
  /* tensors an op made from constants while tracing (adaptive_avg_pool2d's
   * averaging weights, a zeros): the plan's own inputs, after the real ones */
  return take_consts(&dc->fg, "forward", &dc->out->f_consts, &dc->out->n_f_consts);
}

/* Step 6: the backward graph: vjps and captured values in, gradients out;
 * the constants it reads are kept. */
static int build_backward(diff_ctx *dc) {
  int rc = 0;
  dc->out->df_input_vjps = int_array(dc->n_vjp);
  dc->out->df_output_vjps = int_array(dc->n_rg);
  int n_df_in = dc->n_vjp + dc->out->n_captured_inputs + dc->out->n_captured_outputs;
  dc->df_ins = core_alloc((size_t)(n_df_in ? n_df_in : 1) * sizeof *dc->df_ins);
  dc->df_outs = core_alloc((size_t)(dc->n_rg ? dc->n_rg : 1) * sizeof *dc->df_outs);
  if (!dc->out->df_input_vjps || !dc->out->df_output_vjps || !dc->df_ins || !dc->df_outs) {
    rc = KILN_ERR_NOMEM;
    return rc;
  }
  int k = 0;
  for (int i = 0; i < dc->n_vjp; i++) {
    dc->out->df_input_vjps[dc->out->n_vjps++] = dc->vjp_of[i];
    dc->df_ins[k++] = lazy_of(dc->vjps[i])->value;
  }
  for (int i = 0; i < dc->out->n_captured_inputs; i++)
    dc->df_ins[k++] = lazy_of(dc->ins[dc->out->df_input_captured_inputs[i]])->value;
  for (int i = 0; i < dc->out->n_captured_outputs; i++)
    dc->df_ins[k++] = dc->f_outs[dc->out->df_input_captured_outputs[i]];
  int n_df_out = 0;
  for (int i = 0; i < dc->n_rg; i++) {
    if (!dc->grads[i]) continue;
    dc->out->df_output_vjps[dc->out->n_output_vjps++] = dc->rg_idx[i];
    dc->df_outs[n_df_out++] = lazy_of(dc->grads[i])->value;
  }
  rc = pass_lazy_to_ir(dc->df_ins, n_df_in, dc->df_outs, n_df_out, 0, &dc->dg);
  if (rc < 0) return rc;
  return take_consts(&dc->dg, "backward", &dc->out->consts, &dc->out->n_consts);
}

int pass_differentiate(const ir_graph *s, const op_meta *in_meta, const bool *rg,
                       pass_gradient *out) {
  diff_ctx ctx = {.top = ir_graph_top(s), .in_meta = in_meta, .rg = rg, .out = out}, *dc = &ctx;
  int rc = 0;
  dc->n_in = ir_block_n_params(dc->top);
  dc->n_out = ir_block_n_returns(dc->top);
  dc->n_vals = ir_graph_value_count(s);
  dc->vals = core_calloc((size_t)(dc->n_vals ? dc->n_vals : 1), sizeof *dc->vals);
  dc->ins = core_calloc((size_t)(dc->n_in ? dc->n_in : 1), sizeof *dc->ins);
  dc->outs = core_calloc((size_t)(dc->n_out ? dc->n_out : 1), sizeof *dc->outs);
  dc->vjps = core_calloc((size_t)(dc->n_out ? dc->n_out : 1), sizeof *dc->vjps);
  dc->rg_ins = core_calloc((size_t)(dc->n_in ? dc->n_in : 1), sizeof *dc->rg_ins);
  dc->grads = core_calloc((size_t)(dc->n_in ? dc->n_in : 1), sizeof *dc->grads);
  dc->vjp_of = int_array(dc->n_out);
  dc->rg_idx = int_array(dc->n_in);
  bool prev_mode = kiln_set_grad_enabled(true);
  memset(out, 0, sizeof *out);
  kiln_scope_begin();
  if (!dc->vals || !dc->ins || !dc->outs || !dc->vjps || !dc->rg_ins || !dc->grads || !dc->vjp_of ||
      !dc->rg_idx) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  if ((rc = trace_inputs(dc)) < 0 || (rc = trace_forward(dc)) < 0 || (rc = trace_backward(dc)) < 0 ||
      (rc = partition(dc)) < 0 || (rc = build_forward(dc)) < 0 || (rc = build_backward(dc)) < 0)
    goto done;
  out->f = dc->fg.g;
  out->df = dc->dg.g;
  dc->fg.g = dc->dg.g = NULL;
done:
  for (int i = 0; i < dc->n_vals && dc->vals; i++) core_free(dc->vals[i].ts);
  core_free(dc->vals);
  core_free(dc->ins);
  core_free(dc->outs);
  core_free(dc->vjps);
  core_free(dc->rg_ins);
  core_free(dc->grads);
  core_free(dc->vjp_of);
  core_free(dc->rg_idx);
  core_free(dc->fwd.v);
  core_free(dc->captured.v);
  core_free(dc->f_outs);
  core_free(dc->df_ins);
  core_free(dc->df_outs);
  ir_graph_free(dc->fg.g);
  ir_graph_free(dc->dg.g);
  core_free(dc->fg.extra);
  core_free(dc->dg.extra);
  kiln_scope_end();
  kiln_set_grad_enabled(prev_mode);
  if (rc < 0) pass_gradient_free(out);
  return rc;
}
