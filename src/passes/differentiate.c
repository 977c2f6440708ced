/* src/passes/differentiate.c: differentiation by tracing (DESIGN.md).
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
  memset(gr, 0, sizeof *gr);
}

int pass_differentiate(const ir_graph *s, const op_meta *in_meta, const bool *rg,
                       pass_gradient *out) {
  const ir_block *top = ir_graph_top(s);
  int n_in = ir_block_n_params(top), n_out = ir_block_n_returns(top), rc = 0;
  int n_vals = ir_graph_value_count(s);
  tval *vals = core_calloc((size_t)(n_vals ? n_vals : 1), sizeof *vals);
  kiln_tensor **ins = core_calloc((size_t)(n_in ? n_in : 1), sizeof *ins);
  kiln_tensor **outs = core_calloc((size_t)(n_out ? n_out : 1), sizeof *outs);
  kiln_tensor **vjps = core_calloc((size_t)(n_out ? n_out : 1), sizeof *vjps);
  kiln_tensor **rg_ins = core_calloc((size_t)(n_in ? n_in : 1), sizeof *rg_ins);
  kiln_tensor **grads = core_calloc((size_t)(n_in ? n_in : 1), sizeof *grads);
  int *vjp_of = int_array(n_out), *rg_idx = int_array(n_in);
  kiln_tensor **rg_outs = NULL; /* outputs that require grad, one per output at most */
  node_set fwd = {0};
  value_list captured = {0};
  lazy_value *f_outs = NULL, *df_ins = NULL, *df_outs = NULL;
  pass_lazy_graph fg = {0}, dg = {0};
  int n_rg = 0, n_vjp = 0;
  bool prev_mode = kiln_set_grad_enabled(true);
  memset(out, 0, sizeof *out);
  kiln_scope_begin();
  if (!vals || !ins || !outs || !vjps || !rg_ins || !grads || !vjp_of || !rg_idx) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  /* 1. symbolic inputs */
  for (int i = 0; i < n_in; i++) {
    lazy_node *d = lazy_symbolic_node(&in_meta[i]);
    if (!d) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
    ins[i] = core_autorelease(lazy_tensor_new(d, 0, &in_meta[i]));
    lazy_node_release(d);
    if (!ins[i]) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
    if (rg[i] && core_dtype_is_floating(in_meta[i].dtype)) {
      kiln_set_requires_grad(ins[i], true);
      rg_idx[n_rg] = i;
      rg_ins[n_rg++] = ins[i];
    }
    vals[ir_block_param(top, i)->id].v = OPV_T(ins[i]);
  }
  /* 2. the forward */
  for (const ir_node *n = top->first; n; n = n->next)
    if ((rc = eval_node(n, vals)) < 0) goto done;
  for (int i = 0; i < n_out; i++) {
    const op_val *v = &vals[ir_block_return(top, i)->id].v;
    if (v->tag != OP_VAL_TENSOR) {
      rc = core_error(KILN_ERR_UNSUPPORTED, "differentiate: output %d is not a tensor", i);
      goto done;
    }
    outs[i] = v->t;
  }
  /* 3. symbolic vjps and the backward */
  rg_outs = core_calloc((size_t)(n_out ? n_out : 1), sizeof *rg_outs);
  if (!rg_outs) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < n_out; i++) {
    if (!kiln_requires_grad(outs[i])) continue;
    op_meta m;
    op_meta_of(outs[i], &m);
    lazy_node *d = lazy_symbolic_node(&m);
    vjps[n_vjp] = d ? core_autorelease(lazy_tensor_new(d, 0, &m)) : NULL;
    lazy_node_release(d);
    if (!vjps[n_vjp]) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
    vjp_of[n_vjp] = i;
    rg_outs[n_vjp++] = outs[i];
  }
  if (n_vjp && n_rg) {
    kiln_set_grad_enabled(false); /* the backward itself is not differentiated */
    rc = kiln_grad(rg_outs, vjps, n_vjp, rg_ins, n_rg, NULL, grads);
    kiln_set_grad_enabled(true);
  }
  if (rc < 0) goto done;
  /* 4. partition: forward nodes are those the outputs need */
  {
    lazy_node **roots = core_alloc((size_t)(n_out ? n_out : 1) * sizeof *roots);
    if (!roots) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
    for (int i = 0; i < n_out; i++) roots[i] = lazy_of(outs[i])->value.node;
    int n_order = 0;
    lazy_node **order = lazy_post_order(roots, n_out, &n_order);
    core_free(roots);
    if (!order) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
    for (int i = 0; i < n_order && rc == 0; i++) rc = set_add(&fwd, order[i]);
    core_free(order);
    if (rc < 0) goto done;
  }
  /* backward nodes: reachable from the gradients, not forward; the forward
   * values they read are captured */
  {
    lazy_node **roots = core_alloc((size_t)(n_rg ? n_rg : 1) * sizeof *roots);
    int n_roots = 0, n_order = 0;
    if (!roots) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
    for (int i = 0; i < n_rg; i++)
      if (grads[i]) roots[n_roots++] = lazy_of(grads[i])->value.node;
    lazy_node **order = lazy_post_order(roots, n_roots, &n_order);
    core_free(roots);
    if (!order) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
    for (int i = 0; i < n_order && rc == 0; i++) {
      lazy_node *x = order[i];
      if (set_has(&fwd, x)) continue;
      for (int k = 0; k < x->n_operands && rc == 0; k++) {
        lazy_node *o = x->operands[k].node;
        if (set_has(&fwd, o) && !(o->op == LAZY_DATA && o->data)) /* constants are not captured */
          rc = vl_add(&captured, o, x->operands[k].index);
      }
    }
    /* a gradient that is itself a forward value (an input passed through) */
    for (int i = 0; i < n_rg && rc == 0; i++)
      if (grads[i] && set_has(&fwd, lazy_of(grads[i])->value.node))
        rc = vl_add(&captured, lazy_of(grads[i])->value.node, lazy_of(grads[i])->value.index);
    core_free(order);
    if (rc < 0) goto done;
  }
  /* 5. the forward graph: real outputs, then captured temporaries */
  out->n_inputs = n_in;
  out->f_real_outputs = n_out;
  out->df_input_captured_inputs = int_array(captured.n);
  out->df_input_captured_outputs = int_array(captured.n);
  f_outs = core_alloc((size_t)(n_out + captured.n + 1) * sizeof *f_outs);
  lazy_value *f_ins = core_alloc((size_t)(n_in ? n_in : 1) * sizeof *f_ins);
  if (!out->df_input_captured_inputs || !out->df_input_captured_outputs || !f_outs || !f_ins) {
    core_free(f_ins);
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < n_in; i++) f_ins[i] = lazy_of(ins[i])->value;
  int n_f_outs = 0;
  for (int i = 0; i < n_out; i++) f_outs[n_f_outs++] = lazy_of(outs[i])->value;
  /* captured values: inputs by index; others appended to f's outputs
   * (reusing a real output when it is one) */
  for (int c = 0; c < captured.n; c++) {
    lazy_value cv = captured.v[c];
    int as_input = -1, as_output = -1;
    for (int i = 0; i < n_in; i++)
      if (f_ins[i].node == cv.node && f_ins[i].index == cv.index) as_input = i;
    if (as_input >= 0) {
      out->df_input_captured_inputs[out->n_captured_inputs++] = as_input;
      continue;
    }
    for (int i = 0; i < n_f_outs; i++)
      if (f_outs[i].node == cv.node && f_outs[i].index == cv.index) as_output = i;
    if (as_output < 0) {
      as_output = n_f_outs;
      f_outs[n_f_outs++] = cv;
    }
    out->df_input_captured_outputs[out->n_captured_outputs++] = as_output;
  }
  rc = pass_lazy_to_ir(f_ins, n_in, f_outs, n_f_outs, 0, &fg);
  core_free(f_ins);
  if (rc < 0) goto done;
  /* tensors an op made from constants while tracing (adaptive_avg_pool2d's
   * averaging weights, a zeros): the plan's own inputs, after the real ones */
  if ((rc = take_consts(&fg, "forward", &out->f_consts, &out->n_f_consts)) < 0) goto done;
  /* 6. the backward graph */
  out->df_input_vjps = int_array(n_vjp);
  out->df_output_vjps = int_array(n_rg);
  int n_df_in = n_vjp + out->n_captured_inputs + out->n_captured_outputs;
  df_ins = core_alloc((size_t)(n_df_in ? n_df_in : 1) * sizeof *df_ins);
  df_outs = core_alloc((size_t)(n_rg ? n_rg : 1) * sizeof *df_outs);
  if (!out->df_input_vjps || !out->df_output_vjps || !df_ins || !df_outs) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  int k = 0;
  for (int i = 0; i < n_vjp; i++) {
    out->df_input_vjps[out->n_vjps++] = vjp_of[i];
    df_ins[k++] = lazy_of(vjps[i])->value;
  }
  for (int i = 0; i < out->n_captured_inputs; i++)
    df_ins[k++] = lazy_of(ins[out->df_input_captured_inputs[i]])->value;
  for (int i = 0; i < out->n_captured_outputs; i++)
    df_ins[k++] = f_outs[out->df_input_captured_outputs[i]];
  int n_df_out = 0;
  for (int i = 0; i < n_rg; i++) {
    if (!grads[i]) continue;
    out->df_output_vjps[out->n_output_vjps++] = rg_idx[i];
    df_outs[n_df_out++] = lazy_of(grads[i])->value;
  }
  rc = pass_lazy_to_ir(df_ins, n_df_in, df_outs, n_df_out, 0, &dg);
  if (rc < 0) goto done;
  if ((rc = take_consts(&dg, "backward", &out->consts, &out->n_consts)) < 0) goto done;
  out->f = fg.g;
  out->df = dg.g;
  fg.g = dg.g = NULL;
done:
  for (int i = 0; i < n_vals && vals; i++) core_free(vals[i].ts);
  core_free(vals);
  core_free(ins);
  core_free(outs);
  core_free(vjps);
  core_free(rg_outs);
  core_free(rg_ins);
  core_free(grads);
  core_free(vjp_of);
  core_free(rg_idx);
  core_free(fwd.v);
  core_free(captured.v);
  core_free(f_outs);
  core_free(df_ins);
  core_free(df_outs);
  ir_graph_free(fg.g);
  ir_graph_free(dg.g);
  core_free(fg.extra);
  core_free(dg.extra);
  kiln_scope_end();
  kiln_set_grad_enabled(prev_mode);
  if (rc < 0) pass_gradient_free(out);
  return rc;
}
