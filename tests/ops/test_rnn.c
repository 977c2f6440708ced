/* tests/ops/test_rnn.c: the recurrent ops of src/ops/rnn.c. Gradcheck
 * samples (tests/ops/sample.h) for every layer and cell op, in the shapes
 * that exercise layers, directions, projections, batch_first and missing
 * biases; cell values computed by hand; dropout between layers; the
 * one-line errors. Values against PyTorch for whole modules come from the
 * model corpus (rnn_* models in tests/nn/test_models.c). */
#include <math.h>

#include "sample.h"
#include "test.h"

static kiln_tensor *R2(kiln_generator *g, int64_t a, int64_t b) {
  return kiln_mul_scalar(sample_randn(g, 2, (int64_t[]){a, b}), 0.5);
}
static kiln_tensor *R1(kiln_generator *g, int64_t a) {
  return kiln_mul_scalar(sample_randn(g, 1, (int64_t[]){a}), 0.5);
}
static kiln_tensor *R3(kiln_generator *g, int64_t a, int64_t b, int64_t c) {
  return sample_randn(g, 3, (int64_t[]){a, b, c});
}

/* Fills P with the parameters of L layers x D directions: G gates, input
 * F, hidden H, projection Pj (0: none), biases when bias. Returns the count. */
static int params(kiln_generator *g, kiln_tensor **P, int L, int D, int64_t G, int64_t F,
                  int64_t H, int64_t Pj, bool bias) {
  int n = 0;
  int64_t Hout = Pj ? Pj : H;
  for (int l = 0; l < L; l++)
    for (int d = 0; d < D; d++) {
      P[n++] = R2(g, G * H, l == 0 ? F : D * Hout);
      P[n++] = R2(g, G * H, Hout);
      if (bias) {
        P[n++] = R1(g, G * H);
        P[n++] = R1(g, G * H);
      }
      if (Pj) P[n++] = R2(g, Pj, H);
    }
  return n;
}

static void layer_args(op_sample *s, kiln_tensor *x, op_val hx, kiln_tensor **P, int n_p,
                       bool bias, int L, bool bidir, bool bf) {
  s->args[0] = OPV_T(x);
  s->args[1] = hx;
  s->args[2] = OPV_TS(P, n_p);
  s->args[3] = OPV_B(bias);
  s->args[4] = OPV_I(L);
  s->args[5] = OPV_F(0.0);
  s->args[6] = OPV_B(true);
  s->args[7] = OPV_B(bidir);
  s->args[8] = OPV_B(bf);
  s->n_args = 9;
}

/* ---- gradcheck samples ------------------------------------------------------- */
OP_SAMPLE(LSTM, bidirectional_batch_first) { /* B 2, T 3, F 2, H 2 */
  static kiln_tensor *hx[2], *P[8];
  hx[0] = R3(g, 2, 2, 2);
  hx[1] = R3(g, 2, 2, 2);
  int n = params(g, P, 1, 2, 4, 2, 2, 0, true);
  layer_args(s, R3(g, 2, 3, 2), OPV_TS(hx, 2), P, n, true, 1, true, true);
}
OP_SAMPLE(LSTM, two_layers_projection_no_bias) { /* T 3, B 2, F 2, H 3, proj 2 */
  static kiln_tensor *hx[2], *P[6];
  hx[0] = R3(g, 2, 2, 2);
  hx[1] = R3(g, 2, 2, 3);
  int n = params(g, P, 2, 1, 4, 2, 3, 2, false);
  layer_args(s, R3(g, 3, 2, 2), OPV_TS(hx, 2), P, n, false, 2, false, false);
}
OP_SAMPLE(GRU, two_layers) {
  static kiln_tensor *P[8];
  int n = params(g, P, 2, 1, 3, 2, 2, 0, true);
  layer_args(s, R3(g, 3, 2, 2), OPV_T(R3(g, 2, 2, 2)), P, n, true, 2, false, false);
}
OP_SAMPLE(GRU, bidirectional_no_bias_batch_first) {
  static kiln_tensor *P[4];
  int n = params(g, P, 1, 2, 3, 3, 2, 0, false);
  layer_args(s, R3(g, 2, 3, 3), OPV_T(R3(g, 2, 2, 2)), P, n, false, 1, true, true);
}
OP_SAMPLE(RNN_TANH, two_layers) {
  static kiln_tensor *P[8];
  int n = params(g, P, 2, 1, 1, 2, 3, 0, true);
  layer_args(s, R3(g, 3, 2, 2), OPV_T(R3(g, 2, 2, 3)), P, n, true, 2, false, false);
}
OP_SAMPLE(RNN_RELU, bidirectional_no_bias_batch_first) {
  static kiln_tensor *P[4];
  int n = params(g, P, 1, 2, 1, 2, 3, 0, false);
  layer_args(s, R3(g, 2, 3, 2), OPV_T(R3(g, 2, 2, 3)), P, n, false, 1, true, true);
}

static void cell_args(op_sample *s, kiln_generator *g, int64_t G, op_val hx, bool bias) {
  s->args[0] = OPV_T(R2(g, 2, 3));
  s->args[1] = hx;
  s->args[2] = OPV_T(R2(g, G * 2, 3));
  s->args[3] = OPV_T(R2(g, G * 2, 2));
  s->args[4] = bias ? OPV_T(R1(g, G * 2)) : OPV_NONE;
  s->args[5] = bias ? OPV_T(R1(g, G * 2)) : OPV_NONE;
  s->n_args = 6;
}
OP_SAMPLE(LSTM_CELL, bias) {
  static kiln_tensor *hx[2];
  hx[0] = R2(g, 2, 2);
  hx[1] = R2(g, 2, 2);
  cell_args(s, g, 4, OPV_TS(hx, 2), true);
}
OP_SAMPLE(LSTM_CELL, no_bias) {
  static kiln_tensor *hx[2];
  hx[0] = R2(g, 2, 2);
  hx[1] = R2(g, 2, 2);
  cell_args(s, g, 4, OPV_TS(hx, 2), false);
}
OP_SAMPLE(GRU_CELL, bias) { cell_args(s, g, 3, OPV_T(R2(g, 2, 2)), true); }
OP_SAMPLE(RNN_TANH_CELL, bias) { cell_args(s, g, 1, OPV_T(R2(g, 2, 2)), true); }
OP_SAMPLE(RNN_RELU_CELL, no_bias) { cell_args(s, g, 1, OPV_T(R2(g, 2, 2)), false); }

/* ---- values by hand ----------------------------------------------------------- */
static kiln_tensor *col(int n, const double *v) {
  return kiln_from_data(v, 2, (int64_t[]){n, 1}, KILN_DTYPE_F64);
}
static kiln_tensor *vec(int n, const double *v) {
  return kiln_from_data(v, 1, (int64_t[]){n}, KILN_DTYPE_F64);
}
static kiln_tensor *one(double v) { return kiln_from_data(&v, 2, (int64_t[]){1, 1}, KILN_DTYPE_F64); }
static double sig(double x) { return 1 / (1 + exp(-x)); }
static double val(kiln_tensor *t) { return t ? core_get_flat(t, 0) : NAN; }

TEST(rnn_cells_equal_hand_computed_steps) {
  kiln_scope_begin();
  kiln_tensor *x = one(1.0), *h = one(0.5), *c = one(0.2), *outs[2] = {0};
  /* rnn cells: act(x w_ih + b_ih + h w_hh + b_hh) */
  op_val a[6] = {OPV_T(x), OPV_T(h), OPV_T(one(0.3)), OPV_T(one(-0.4)), OPV_T(vec(1, (double[]){0.05})),
                 OPV_T(vec(1, (double[]){-0.1}))};
  CHECK_NEAR(val(op_call1(KILN_OP_RNN_TANH_CELL, a, 6)), tanh(0.3 - 0.2 + 0.05 - 0.1), 1e-12);
  CHECK_NEAR(val(op_call1(KILN_OP_RNN_RELU_CELL, a, 6)), 0.05, 1e-12);
  a[3] = OPV_T(one(-1.0));
  CHECK_NEAR(val(op_call1(KILN_OP_RNN_RELU_CELL, a, 6)), 0.0, 0); /* 0.3 - 0.5 + 0.05 - 0.1 < 0 */
  /* lstm cell, gates i f g o, no biases */
  kiln_tensor *hx[2] = {h, c};
  op_val l[6] = {OPV_T(x), OPV_TS(hx, 2), OPV_T(col(4, (double[]){0.1, 0.2, 0.3, 0.4})),
                 OPV_T(col(4, (double[]){-0.1, 0.1, -0.2, 0.2})), OPV_NONE, OPV_NONE};
  CHECK_EQ_INT(op_call(KILN_OP_LSTM_CELL, l, 6, outs, 2), 2);
  double ig = sig(0.1 - 0.05), fg = sig(0.2 + 0.05), gg = tanh(0.3 - 0.1), og = sig(0.4 + 0.1);
  double c1 = fg * 0.2 + ig * gg;
  CHECK_NEAR(val(outs[1]), c1, 1e-12);
  CHECK_NEAR(val(outs[0]), og * tanh(c1), 1e-12);
  /* gru cell, gates r z n, with biases (n's hidden part is scaled by r) */
  op_val gr[6] = {OPV_T(x), OPV_T(h), OPV_T(col(3, (double[]){0.1, 0.2, 0.3})),
                  OPV_T(col(3, (double[]){-0.1, 0.1, -0.2})),
                  OPV_T(vec(3, (double[]){0.01, 0.02, 0.03})),
                  OPV_T(vec(3, (double[]){0.04, 0.05, 0.06}))};
  double r = sig(0.11 - 0.05 + 0.04), z = sig(0.22 + 0.05 + 0.05);
  double n = tanh(0.33 + r * (-0.1 + 0.06));
  CHECK_NEAR(val(op_call1(KILN_OP_GRU_CELL, gr, 6)), (1 - z) * n + z * 0.5, 1e-12);
  kiln_scope_end();
}

/* An RNN layer over T steps equals its cell applied step by step, forward
 * and (for the second direction) backward in time, with outputs
 * concatenated per step and h_n ordered [forward, reverse]. */
TEST(rnn_bidirectional_layer_equals_cell_steps) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(5);
  kiln_tensor *P[8], *x = R3(g, 3, 2, 2), *h0 = R3(g, 2, 2, 2), *outs[3] = {0};
  int n = params(g, P, 1, 2, 3, 2, 2, 0, true);
  op_sample s;
  layer_args(&s, x, OPV_T(h0), P, n, true, 1, true, false);
  CHECK_EQ_INT(op_call(KILN_OP_GRU, s.args, 9, outs, 3), 2);
  for (int d = 0; d < 2; d++) {
    kiln_tensor *h = kiln_select(h0, 0, d);
    for (int k = 0; k < 3; k++) {
      int t = d ? 2 - k : k;
      op_val a[6] = {OPV_T(kiln_select(x, 0, t)), OPV_T(h), OPV_T(P[4 * d]), OPV_T(P[4 * d + 1]),
                     OPV_T(P[4 * d + 2]), OPV_T(P[4 * d + 3])};
      h = op_call1(KILN_OP_GRU_CELL, a, 6);
      kiln_tensor *got = kiln_narrow(kiln_select(outs[0], 0, t), 1, 2 * d, 2);
      for (int i = 0; i < 4; i++)
        CHECK_NEAR(core_get_flat(kiln_contiguous(got), i), core_get_flat(h, i), 1e-12);
    }
    for (int i = 0; i < 4; i++)
      CHECK_NEAR(core_get_flat(kiln_contiguous(kiln_select(outs[1], 0, d)), i),
                 core_get_flat(h, i), 1e-12);
  }
  kiln_generator_free(g);
  kiln_scope_end();
}

/* Dropout between layers: p = 1 in training zeroes layer 0's output, so
 * layer 1 sees zeros: equal to a one-layer RNN on a zero input with layer
 * 1's weights; not training, p is ignored. */
TEST(rnn_dropout_between_layers) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(9);
  kiln_tensor *P[8], *x = R3(g, 3, 2, 2), *h0 = R3(g, 2, 2, 3), *a_out[2], *b_out[2], *c_out[2];
  int n = params(g, P, 2, 1, 1, 2, 3, 0, true);
  (void)n;
  op_sample s, t;
  layer_args(&s, x, OPV_T(h0), P, 8, true, 2, false, false);
  s.args[5] = OPV_F(1.0);
  CHECK_EQ_INT(op_call(KILN_OP_RNN_TANH, s.args, 9, a_out, 2), 2);
  layer_args(&t, kiln_zeros(3, (int64_t[]){3, 2, 3}, KILN_DTYPE_F64),
             OPV_T(kiln_narrow(h0, 0, 1, 1)), P + 4, 4, true, 1, false, false);
  CHECK_EQ_INT(op_call(KILN_OP_RNN_TANH, t.args, 9, b_out, 2), 2);
  for (int i = 0; i < 18; i++)
    CHECK_NEAR(core_get_flat(a_out[0], i), core_get_flat(b_out[0], i), 1e-12);
  /* eval: p = 1 ignored, equals p = 0 in training */
  s.args[6] = OPV_B(false);
  CHECK_EQ_INT(op_call(KILN_OP_RNN_TANH, s.args, 9, b_out, 2), 2);
  s.args[5] = OPV_F(0.0);
  s.args[6] = OPV_B(true);
  CHECK_EQ_INT(op_call(KILN_OP_RNN_TANH, s.args, 9, c_out, 2), 2);
  for (int i = 0; i < 18; i++) CHECK(core_get_flat(b_out[0], i) == core_get_flat(c_out[0], i));
  kiln_generator_free(g);
  kiln_scope_end();
}

TEST(rnn_errors_name_the_argument) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(3);
  kiln_tensor *P[8], *outs[3];
  int n = params(g, P, 1, 1, 4, 2, 2, 0, true);
  kiln_tensor *hx[2] = {R3(g, 1, 2, 2), R3(g, 1, 2, 2)};
  op_sample s;
  layer_args(&s, R3(g, 3, 2, 2), OPV_TS(hx, 2), P, n - 1, true, 1, false, false);
  CHECK(op_call(KILN_OP_LSTM, s.args, 9, outs, 3) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::lstm: 3 parameters do not fit 1 layer(s) with");
  s.args[2] = OPV_TS(P, n);
  hx[1] = R3(g, 1, 3, 2);
  CHECK(op_call(KILN_OP_LSTM, s.args, 9, outs, 3) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::lstm: hx[1] must have shape [1, 2, 2]");
  hx[1] = hx[0];
  s.args[0] = OPV_T(R3(g, 3, 2, 5));
  CHECK(op_call(KILN_OP_LSTM, s.args, 9, outs, 3) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::lstm: weight_ih must have shape [8, 5]");
  s.args[0] = OPV_T(R2(g, 2, 2));
  CHECK(op_call(KILN_OP_LSTM, s.args, 9, outs, 3) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "input must have 3 dimensions");
  kiln_generator_free(g);
  kiln_scope_end();
}
