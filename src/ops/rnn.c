/* src/ops/rnn.c: recurrent layers as decompositions into table ops: the
 * .input overloads of aten::lstm, aten::gru, aten::rnn_tanh and
 * aten::rnn_relu (what nn.LSTM, nn.GRU and nn.RNN script to) and the cells
 * aten::lstm_cell, gru_cell, rnn_tanh_cell and rnn_relu_cell.
 *
 * Note [RNN decomposition]: as ATen's CPU path does, each layer and
 * direction projects its whole input sequence at once (one linear over
 * [T, B, F]: x W_ih^T + b_ih), then steps through time with one small
 * linear per step (h W_hh^T + b_hh) and the gate arithmetic, in ATen's
 * order:
 *   LSTM  g = hw + xw; i, f, o = sigmoid, c' = tanh; c = f c + i c';
 *         h = o tanh(c), then h W_hr^T when the layer has a projection
 *   GRU   r = sigmoid(hw_r + xw_r); z = sigmoid(hw_z + xw_z);
 *         n = tanh(xw_n + hw_n r); h = (h - n) z + n
 *   RNN   h = tanh(hw + xw) (or relu)
 * The reverse direction runs the steps from T-1 down to 0; the outputs of
 * both directions are concatenated along the feature dim, and between
 * layers (not after the last) dropout(p) applies in training when p > 0.
 * batch_first transposes the input and the output. Autograd, lazy
 * recording and the JIT's differentiation come from the ops used; packed
 * sequences (the .data overloads) are not supported. */
#include <string.h>

#include "op.h"

typedef enum rnn_kind { RNN_LSTM, RNN_GRU, RNN_TANH, RNN_RELU } rnn_kind;

static const int n_gates[] = {4, 3, 1, 1};
static const char *const rnn_names[] = {"aten::lstm", "aten::gru", "aten::rnn_tanh",
                                        "aten::rnn_relu"};
static const char *const cell_names[] = {"aten::lstm_cell", "aten::gru_cell",
                                         "aten::rnn_tanh_cell", "aten::rnn_relu_cell"};

/* One layer-direction's (or a cell's) weights; biases and w_hr may be NULL. */
typedef struct cell_w {
  kiln_tensor *w_ih, *w_hh, *b_ih, *b_hh, *w_hr;
} cell_w;

/* The H columns of gate k of g (the last dim holds the gates side by side). */
static kiln_tensor *gate(kiln_tensor *g, int k, int64_t H) {
  return g ? kiln_narrow(g, g->ndim - 1, k * H, H) : NULL;
}

/* One time step from xw = x W_ih^T + b_ih (computed by the caller) and the
 * state h (and c for the LSTM): the new h in *h, c in *c. NULL on failure
 * (the error set by the op that failed). Tensors live in the current scope. */
static int cell_step(rnn_kind k, kiln_tensor *xw, const cell_w *w, int64_t H, kiln_tensor **h,
                     kiln_tensor **c) {
  kiln_tensor *hw = kiln_linear(*h, w->w_hh, w->b_hh), *hy = NULL;
  switch (k) {
  case RNN_LSTM: {
    kiln_tensor *g = kiln_add(hw, xw);
    kiln_tensor *ig = kiln_sigmoid(gate(g, 0, H)), *fg = kiln_sigmoid(gate(g, 1, H));
    kiln_tensor *cg = kiln_tanh(gate(g, 2, H)), *og = kiln_sigmoid(gate(g, 3, H));
    kiln_tensor *cy = kiln_add(kiln_mul(fg, *c), kiln_mul(ig, cg));
    hy = kiln_mul(og, kiln_tanh(cy));
    if (hy && w->w_hr) hy = kiln_linear(hy, w->w_hr, NULL);
    if (!cy) return op_failed_status();
    *c = cy;
    break;
  }
  case RNN_GRU: {
    kiln_tensor *r = kiln_sigmoid(kiln_add(gate(hw, 0, H), gate(xw, 0, H)));
    kiln_tensor *z = kiln_sigmoid(kiln_add(gate(hw, 1, H), gate(xw, 1, H)));
    kiln_tensor *nn = kiln_tanh(kiln_add(gate(xw, 2, H), kiln_mul(gate(hw, 2, H), r)));
    hy = kiln_add(kiln_mul(kiln_sub(*h, nn), z), nn);
    break;
  }
  case RNN_TANH: hy = kiln_tanh(kiln_add(hw, xw)); break;
  case RNN_RELU: hy = kiln_relu(kiln_add(hw, xw)); break;
  }
  if (!hy) return op_failed_status();
  *h = hy;
  return 0;
}

/* The results r[0..n) of a decomposition that ran inside its own scope
 * (Note [Decompose scope] in matmul.c): retained across the scope's end,
 * then registered with the caller's. */
static int finish(kiln_tensor **r, int n, int rc, kiln_tensor **outs, int max) {
  if (rc >= 0 && max < n) rc = core_error(KILN_ERR_INVALID, "room for %d outputs, need %d", max, n);
  for (int i = 0; i < n && rc >= 0; i++)
    if (!r[i]) rc = op_failed_status();
  if (rc >= 0)
    for (int i = 0; i < n; i++) kiln_retain(r[i]);
  kiln_scope_end();
  if (rc < 0) return rc;
  if (core_scope_reserve(n) < 0) {
    for (int i = 0; i < n; i++) kiln_release(r[i]);
    return KILN_ERR_NOMEM;
  }
  for (int i = 0; i < n; i++) outs[i] = core_autorelease(r[i]);
  return n;
}

static bool has_shape(const kiln_tensor *t, int nd, const int64_t *shape) {
  return t->ndim == nd && !memcmp(t->shape, shape, (size_t)nd * sizeof *shape);
}

static int shape_error(const char *fn, const char *what, int nd, const int64_t *want,
                       const kiln_tensor *got) {
  char a[96], b[96];
  return core_error(KILN_ERR_INVALID, "%s: %s must have shape %s, got %s", fn, what,
                    core_shape_str(nd, want, a, sizeof a), core_tensor_desc(got, b, sizeof b));
}

/* Checks one layer-direction's weights for input size F, hidden H and
 * output size Hout (H, or the projection's size). */
static int check_w(const char *fn, rnn_kind k, const cell_w *w, int64_t F, int64_t H,
                   int64_t Hout) {
  int64_t GH = n_gates[k] * H;
  if (!has_shape(w->w_ih, 2, (int64_t[]){GH, F}))
    return shape_error(fn, "weight_ih", 2, (int64_t[]){GH, F}, w->w_ih);
  if (!has_shape(w->w_hh, 2, (int64_t[]){GH, Hout}))
    return shape_error(fn, "weight_hh", 2, (int64_t[]){GH, Hout}, w->w_hh);
  if (w->b_ih && !has_shape(w->b_ih, 1, &GH)) return shape_error(fn, "bias_ih", 1, &GH, w->b_ih);
  if (w->b_hh && !has_shape(w->b_hh, 1, &GH)) return shape_error(fn, "bias_hh", 1, &GH, w->b_hh);
  if (w->w_hr && !has_shape(w->w_hr, 2, (int64_t[]){Hout, H}))
    return shape_error(fn, "weight_hr", 2, (int64_t[]){Hout, H}, w->w_hr);
  return 0;
}

/* One layer in one direction over x [T, B, F] from h0 (and c0): the
 * outputs [T, B, Hout] in *out, the last state in *h (and *c). */
static int run_layer(rnn_kind k, kiln_tensor *x, const cell_w *w, int64_t H, bool reverse,
                     kiln_tensor **out, kiln_tensor **h, kiln_tensor **c) {
  int64_t T = x->shape[0];
  kiln_tensor *xw = kiln_linear(x, w->w_ih, w->b_ih);
  if (!xw) return op_failed_status();
  if ((uint64_t)T > SIZE_MAX / sizeof(kiln_tensor *))
    return core_error(KILN_ERR_INVALID, "rnn: %lld time steps overflow", (long long)T);
  kiln_tensor **steps = core_alloc((size_t)(T ? T : 1) * sizeof *steps);
  if (!steps) return KILN_ERR_NOMEM;
  int rc = 0;
  for (int64_t s = 0; s < T && rc >= 0; s++) {
    int64_t t = reverse ? T - 1 - s : s;
    kiln_tensor *xt = kiln_select(xw, 0, t);
    rc = xt ? cell_step(k, xt, w, H, h, c) : op_failed_status();
    steps[t] = *h;
  }
  if (rc >= 0) {
    *out = kiln_stack(steps, (int)T, 0);
    if (!*out) rc = op_failed_status();
  }
  core_free(steps);
  return rc;
}

static int arg_bool(const char *fn, const op_val *v, const char *name, bool *out) {
  char d[96];
  if (v->tag != OP_VAL_BOOL && v->tag != OP_VAL_INT)
    return core_error(KILN_ERR_INVALID, "%s: %s must be a bool, got %s", fn, name,
                      op_val_desc(v, d, sizeof d));
  *out = v->tag == OP_VAL_BOOL ? v->b : v->i != 0;
  return 0;
}

/* The layers: a = (input, hx, params, has_biases, num_layers, dropout,
 * train, bidirectional, batch_first); hx is Tensor[2] {h0, c0} for the LSTM,
 * a Tensor for the others. Results: output, h_n (, c_n). */
static int rnn_run(rnn_kind k, const op_val *a, kiln_tensor **outs, int max) {
  const char *fn = rnn_names[k];
  char d[96];
  kiln_tensor *x, *h0 = NULL, *c0 = NULL;
  int64_t L;
  bool bias, train, bidir, bf;
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], "input", &x)) < 0) return rc;
  if (k == RNN_LSTM) {
    if (a[1].tag != OP_VAL_TENSORS || a[1].ts.n != 2)
      return core_error(KILN_ERR_INVALID, "%s: hx must be a list of two tensors (h0, c0), got %s",
                        fn, op_val_desc(&a[1], d, sizeof d));
    h0 = a[1].ts.v[0];
    c0 = a[1].ts.v[1];
  } else if ((rc = op_arg_tensor(fn, &a[1], "hx", &h0)) < 0) {
    return rc;
  }
  if (a[2].tag != OP_VAL_TENSORS)
    return core_error(KILN_ERR_INVALID, "%s: params must be a tensor list, got %s", fn,
                      op_val_desc(&a[2], d, sizeof d));
  if ((rc = arg_bool(fn, &a[3], "has_biases", &bias)) < 0 ||
      (rc = op_arg_int(fn, &a[4], "num_layers", &L)) < 0 ||
      (rc = arg_bool(fn, &a[6], "train", &train)) < 0 ||
      (rc = arg_bool(fn, &a[7], "bidirectional", &bidir)) < 0 ||
      (rc = arg_bool(fn, &a[8], "batch_first", &bf)) < 0)
    return rc;
  if (!op_val_is_num(&a[5]))
    return core_error(KILN_ERR_INVALID, "%s: dropout must be a number, got %s", fn,
                      op_val_desc(&a[5], d, sizeof d));
  double p = op_val_num(&a[5]);
  if (!(p >= 0 && p <= 1))
    return core_error(KILN_ERR_INVALID, "%s: dropout should be a number in range [0, 1], got %g",
                      fn, p);
  int D = bidir ? 2 : 1, n_p = a[2].ts.n;
  if (x->ndim != 3)
    return core_error(KILN_ERR_INVALID, "%s: input must have 3 dimensions, got %s", fn,
                      core_tensor_desc(x, d, sizeof d));
  if (L < 1 || L > 1024)
    return core_error(KILN_ERR_INVALID, "%s: num_layers must be in [1, 1024], got %lld", fn,
                      (long long)L);
  /* per layer-direction: w_ih, w_hh (, b_ih, b_hh) (, w_hr: LSTM only) */
  int base = bias ? 4 : 2, stride = n_p % (L * D) == 0 ? (int)(n_p / (L * D)) : -1;
  if (stride != base && !(k == RNN_LSTM && stride == base + 1))
    return core_error(KILN_ERR_INVALID, "%s: %d parameters do not fit %lld layer(s)%s %s biases",
                      fn, n_p, (long long)L, bidir ? " in both directions" : "",
                      bias ? "with" : "without");
  kiln_tensor *const *P = a[2].ts.v;
  int64_t G = n_gates[k], H = P[1]->ndim == 2 ? P[1]->shape[0] / G : -1;
  int64_t Hout = stride > base && P[base]->ndim == 2 ? P[base]->shape[0] : H;
  if (H <= 0 || P[1]->shape[0] != G * H)
    return core_error(KILN_ERR_INVALID, "%s: weight_hh_l0 of %s is not %lld gates", fn,
                      core_tensor_desc(P[1], d, sizeof d), (long long)G);
  int64_t B = x->shape[bf ? 0 : 1];
  int64_t hs[3] = {L * D, B, Hout}, cs[3] = {L * D, B, H};
  if (!has_shape(h0, 3, hs)) return shape_error(fn, "hx[0]", 3, hs, h0);
  if (c0 && !has_shape(c0, 3, cs)) return shape_error(fn, "hx[1]", 3, cs, c0);
  if (x->shape[bf ? 1 : 0] == 0)
    return core_error(KILN_ERR_INVALID, "%s: the input has no time steps", fn);
  kiln_tensor *r[3] = {0};
  kiln_tensor **hn = core_calloc((size_t)(2 * L * D), sizeof *hn), **cn = hn + L * D;
  if (!hn) return KILN_ERR_NOMEM;
  rc = 0;
  kiln_scope_begin();
  kiln_tensor *in = bf ? kiln_transpose(x, 0, 1) : x; /* [T, B, F] */
  if (!in) rc = op_failed_status();
  for (int64_t l = 0; l < L && rc >= 0; l++) {
    kiln_tensor *dir_out[2] = {0};
    for (int dd = 0; dd < D && rc >= 0; dd++) {
      int64_t idx = l * D + dd;
      kiln_tensor *const *q = P + idx * stride;
      cell_w w = {q[0], q[1], bias ? q[2] : NULL, bias ? q[3] : NULL,
                  stride > base ? q[base] : NULL};
      if ((rc = check_w(fn, k, &w, in->shape[2], H, Hout)) < 0) break;
      kiln_tensor *h = kiln_select(h0, 0, idx), *c = c0 ? kiln_select(c0, 0, idx) : NULL;
      if (!h || (c0 && !c)) {
        rc = op_failed_status();
        break;
      }
      rc = run_layer(k, in, &w, H, dd == 1, &dir_out[dd], &h, &c);
      hn[idx] = h;
      cn[idx] = c;
    }
    if (rc < 0) break;
    in = D == 2 ? kiln_cat(dir_out, 2, 2) : dir_out[0];
    if (in && p > 0 && train && l < L - 1)
      in = op_call1(KILN_OP_DROPOUT, (op_val[]){OPV_T(in), OPV_F(p), OPV_B(true)}, 3);
    if (!in) rc = op_failed_status();
  }
  if (rc >= 0) {
    r[0] = bf ? kiln_transpose(in, 0, 1) : in;
    r[1] = kiln_stack(hn, (int)(L * D), 0);
    if (k == RNN_LSTM) r[2] = kiln_stack(cn, (int)(L * D), 0);
  }
  core_free(hn);
  return finish(r, k == RNN_LSTM ? 3 : 2, rc, outs, max);
}

int op_lstm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  (void)n;
  return rnn_run(RNN_LSTM, a, outs, max);
}
int op_gru_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  (void)n;
  return rnn_run(RNN_GRU, a, outs, max);
}
int op_rnn_tanh_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  (void)n;
  return rnn_run(RNN_TANH, a, outs, max);
}
int op_rnn_relu_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  (void)n;
  return rnn_run(RNN_RELU, a, outs, max);
}

/* ---- cells ------------------------------------------------------------------ */
/* a = (input [B, F] or [F], hx, w_ih, w_hh, b_ih?, b_hh?); hx is Tensor[2]
 * {h, c} for the LSTM cell. Results: h' (, c'). */
static int cell_run(rnn_kind k, const op_val *a, kiln_tensor **outs, int max) {
  const char *fn = cell_names[k];
  char d[96];
  kiln_tensor *x, *h = NULL, *c = NULL;
  cell_w w = {0};
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], "input", &x)) < 0) return rc;
  if (k == RNN_LSTM) {
    if (a[1].tag != OP_VAL_TENSORS || a[1].ts.n != 2)
      return core_error(KILN_ERR_INVALID, "%s: hx must be a list of two tensors (h, c), got %s",
                        fn, op_val_desc(&a[1], d, sizeof d));
    h = a[1].ts.v[0];
    c = a[1].ts.v[1];
  } else if ((rc = op_arg_tensor(fn, &a[1], "hx", &h)) < 0) {
    return rc;
  }
  if ((rc = op_arg_tensor(fn, &a[2], "w_ih", &w.w_ih)) < 0 ||
      (rc = op_arg_tensor(fn, &a[3], "w_hh", &w.w_hh)) < 0)
    return rc;
  for (int i = 4; i <= 5; i++)
    if (a[i].tag != OP_VAL_NONE && a[i].tag != OP_VAL_TENSOR)
      return core_error(KILN_ERR_INVALID, "%s: %s must be a tensor or None, got %s", fn,
                        i == 4 ? "b_ih" : "b_hh", op_val_desc(&a[i], d, sizeof d));
  w.b_ih = a[4].tag == OP_VAL_TENSOR ? a[4].t : NULL;
  w.b_hh = a[5].tag == OP_VAL_TENSOR ? a[5].t : NULL;
  if (x->ndim != 1 && x->ndim != 2)
    return core_error(KILN_ERR_INVALID, "%s: Expected input to be 1D or 2D, got %dD instead", fn,
                      x->ndim);
  int64_t G = n_gates[k], H = w.w_hh->ndim == 2 ? w.w_hh->shape[1] : -1;
  if ((rc = check_w(fn, k, &w, x->shape[x->ndim - 1], H, H)) < 0) return rc;
  int64_t hs[2] = {x->shape[0], H};
  const int64_t *want = x->ndim == 2 ? hs : hs + 1;
  if (!has_shape(h, x->ndim, want)) return shape_error(fn, "hx", x->ndim, want, h);
  if (c && !has_shape(c, x->ndim, want)) return shape_error(fn, "cx", x->ndim, want, c);
  (void)G;
  kiln_tensor *r[2] = {0};
  kiln_scope_begin();
  kiln_tensor *xw = kiln_linear(x, w.w_ih, w.b_ih);
  rc = xw ? cell_step(k, xw, &w, H, &h, &c) : op_failed_status();
  r[0] = h;
  r[1] = c;
  return finish(r, k == RNN_LSTM ? 2 : 1, rc, outs, max);
}

int op_lstm_cell_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  (void)n;
  return cell_run(RNN_LSTM, a, outs, max);
}
int op_gru_cell_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  (void)n;
  return cell_run(RNN_GRU, a, outs, max);
}
int op_rnn_tanh_cell_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  (void)n;
  return cell_run(RNN_TANH, a, outs, max);
}
int op_rnn_relu_cell_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  (void)n;
  return cell_run(RNN_RELU, a, outs, max);
}
