/* bench/work_ops.c: workloads of the ops added for OpInfo coverage, each
 * forward + backward in float32: conv2d_depthwise (MobileNet's 3x3
 * depthwise convolution, 32 channels, 56x56, batch 8, groups 32),
 * layer_norm ([8, 128, 256] over the last dim, with weight and bias),
 * batch_norm_train (training mode, [16, 64, 28, 28], weight, bias and the
 * running statistics updated in place) and sdpa (scaled dot-product attention written with matmul/softmax: batch 8,
 * 4 heads, seq 128, head dim 32). bench/torch_anchor.py times the same in
 * PyTorch. */
#include <math.h>

#include "bench.h"
#include "ops/op.h"

#define N_IN 6
static kiln_tensor *in[N_IN];

static void release_all(void) {
  for (int i = 0; i < N_IN; i++) {
    kiln_release(in[i]);
    in[i] = NULL;
  }
}
static void clear_grads(void) {
  for (int i = 0; i < N_IN; i++)
    if (in[i]) kiln_tensor_set_grad(in[i], NULL);
}
static int make(int k, int nd, const int64_t *shape, kiln_generator *g) {
  in[k] = kiln_randn(nd, shape, KILN_DTYPE_F32, g);
  if (!in[k]) return -1;
  return kiln_set_requires_grad(in[k], true);
}

/* ---- depthwise conv ---- */
static int setup_dw(void) {
  kiln_generator *g = kiln_generator_new(5);
  int rc = make(0, 4, (int64_t[]){8, 32, 56, 56}, g);
  if (rc == 0) rc = make(1, 4, (int64_t[]){32, 1, 3, 3}, g);
  if (rc == 0) rc = make(2, 1, (int64_t[]){32}, g);
  kiln_generator_free(g);
  return rc;
}
static double run_dw(int iters) {
  int64_t one[2] = {1, 1};
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    kiln_scope_begin();
    kiln_tensor *y = op_call1(KILN_OP_CONV2D,
                              (op_val[]){OPV_T(in[0]), OPV_T(in[1]), OPV_T(in[2]),
                                         OPV_INTS(one, 2), OPV_INTS(one, 2), OPV_INTS(one, 2),
                                         OPV_I(32)},
                              7);
    int rc = y ? kiln_backward(y, kiln_ones(4, kiln_tensor_shape(y), KILN_DTYPE_F32)) : -1;
    kiln_scope_end();
    clear_grads();
    if (rc < 0) return bench_fail("conv2d_depthwise", "conv2d groups=32");
  }
  return bench_now() - t0;
}

/* ---- layer_norm ---- */
static int setup_ln(void) {
  kiln_generator *g = kiln_generator_new(6);
  int rc = make(0, 3, (int64_t[]){8, 128, 256}, g);
  if (rc == 0) rc = make(1, 1, (int64_t[]){256}, g);
  if (rc == 0) rc = make(2, 1, (int64_t[]){256}, g);
  kiln_generator_free(g);
  return rc;
}
static double run_ln(int iters) {
  int64_t ns[1] = {256};
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    kiln_scope_begin();
    kiln_tensor *y = op_call1(KILN_OP_LAYER_NORM,
                              (op_val[]){OPV_T(in[0]), OPV_INTS(ns, 1), OPV_T(in[1]), OPV_T(in[2]),
                                         OPV_F(1e-5), OPV_B(true)},
                              6);
    int rc = y ? kiln_backward(y, kiln_ones(3, kiln_tensor_shape(y), KILN_DTYPE_F32)) : -1;
    kiln_scope_end();
    clear_grads();
    if (rc < 0) return bench_fail("layer_norm", "layer_norm");
  }
  return bench_now() - t0;
}

/* ---- batch_norm_train: training mode, running statistics updated ---- */
static int setup_bn(void) {
  kiln_generator *g = kiln_generator_new(8);
  int rc = make(0, 4, (int64_t[]){16, 64, 28, 28}, g);
  if (rc == 0) rc = make(1, 1, (int64_t[]){64}, g);
  if (rc == 0) rc = make(2, 1, (int64_t[]){64}, g);
  kiln_generator_free(g);
  int64_t c[1] = {64};
  if (rc == 0 && (!(in[3] = kiln_zeros(1, c, KILN_DTYPE_F32)) ||
                  !(in[4] = kiln_ones(1, c, KILN_DTYPE_F32))))
    rc = -1;
  return rc;
}
static double run_bn(int iters) {
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    kiln_scope_begin();
    kiln_tensor *y = op_call1(KILN_OP_BATCH_NORM,
                              (op_val[]){OPV_T(in[0]), OPV_T(in[1]), OPV_T(in[2]), OPV_T(in[3]),
                                         OPV_T(in[4]), OPV_B(true), OPV_F(0.1), OPV_F(1e-5),
                                         OPV_B(true)},
                              9);
    int rc = y ? kiln_backward(y, kiln_ones(4, kiln_tensor_shape(y), KILN_DTYPE_F32)) : -1;
    kiln_scope_end();
    clear_grads();
    if (rc < 0) return bench_fail("batch_norm_train", "batch_norm");
  }
  return bench_now() - t0;
}

/* ---- sdpa: softmax(q k^T / sqrt(d)) v ---- */
static int setup_sdpa(void) {
  kiln_generator *g = kiln_generator_new(7);
  int64_t sh[4] = {8, 4, 128, 32};
  int rc = make(0, 4, sh, g);
  if (rc == 0) rc = make(1, 4, sh, g);
  if (rc == 0) rc = make(2, 4, sh, g);
  kiln_generator_free(g);
  return rc;
}
static double run_sdpa(int iters) {
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    kiln_scope_begin();
    kiln_tensor *s = kiln_mul_scalar(kiln_matmul(in[0], kiln_transpose(in[1], 2, 3)),
                                     1.0 / sqrt(32.0));
    kiln_tensor *y = s ? kiln_matmul(kiln_softmax(s, -1), in[2]) : NULL;
    int rc = y ? kiln_backward(y, kiln_ones(4, kiln_tensor_shape(y), KILN_DTYPE_F32)) : -1;
    kiln_scope_end();
    clear_grads();
    if (rc < 0) return bench_fail("sdpa", "attention");
  }
  return bench_now() - t0;
}

static const bench_workload ops[] = {
    {"conv2d_depthwise", "ms", BENCH_TIME, 1e3, 0, 2, 0, setup_dw, run_dw, release_all},
    {"layer_norm", "ms", BENCH_TIME, 1e3, 0, 2, 0, setup_ln, run_ln, release_all},
    {"batch_norm_train", "ms", BENCH_TIME, 1e3, 0, 2, 0, setup_bn, run_bn, release_all},
    {"sdpa", "ms", BENCH_TIME, 1e3, 0, 2, 0, setup_sdpa, run_sdpa, release_all},
};

const bench_workload *bench_ops_workloads(int *n) {
  *n = (int)(sizeof ops / sizeof *ops);
  return ops;
}
