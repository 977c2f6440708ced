/* tests/ops/test_norm_kernels.c: the fused layer-norm and batch-norm
 * kernels (Note [Fused norms] in src/ops/layer_norm_kernel.c) against the
 * same normalisation written with the table's reductions and elementwise
 * ops (values, gradients of every input, running statistics), on odd
 * sizes, in float32 and float64, with and without weight/bias; eval-mode
 * native_batch_norm_backward; lazy results equal to eager ones; bad
 * arguments. PyTorch's own values are checked by the OpInfo goldens
 * (test_opinfo.c) and test_batch_norm.c. */
#include <math.h>
#include <string.h>

#include "sample.h"
#include "test.h"

/* max |a - b| / (1 + |b|) over the elements (both CPU, same shape) */
static double max_rel(kiln_tensor *a, kiln_tensor *b) {
  if (!a || !b || kiln_tensor_numel(a) != kiln_tensor_numel(b)) return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < kiln_tensor_numel(a); i++) {
    double x = core_get_flat(a, i), y = core_get_flat(b, i);
    double e = fabs(x - y) / (1 + fabs(y));
    if (!(e <= m)) m = isnan(e) ? INFINITY : e;
  }
  return m;
}

static kiln_tensor *leaf(kiln_tensor *t, kiln_dtype dt) {
  kiln_tensor *r = kiln_clone(kiln_to_dtype(t, dt));
  kiln_set_requires_grad(r, true);
  return r;
}

/* ---- layer norm -------------------------------------------------------------------- */
static kiln_tensor *ln_ref(kiln_tensor *x, int k, kiln_tensor *w, kiln_tensor *b, double eps) {
  int64_t dims[KILN_MAX_DIMS];
  for (int i = 0; i < k; i++) dims[i] = kiln_tensor_ndim(x) - k + i;
  kiln_tensor *mu = kiln_mean(x, dims, k, true);
  kiln_tensor *var = kiln_mean(kiln_mul(kiln_sub(x, mu), kiln_sub(x, mu)), dims, k, true);
  kiln_tensor *y = kiln_mul(kiln_sub(x, mu), kiln_rsqrt(kiln_add_scalar(var, eps)));
  if (w) y = kiln_mul(y, w);
  if (b) y = kiln_add(y, b);
  return y;
}

static void ln_case(kiln_generator *g, int nd, const int64_t *shape, int k, bool has_w,
                    bool has_b, kiln_dtype dt, double tol) {
  kiln_scope_begin();
  const int64_t *ns = shape + nd - k;
  kiln_tensor *x0 = kiln_add_scalar(sample_randn(g, nd, shape), 3.0); /* a mean away from 0 */
  kiln_tensor *w0 = sample_randn(g, k, ns), *b0 = sample_randn(g, k, ns);
  kiln_tensor *go = kiln_to_dtype(sample_randn(g, nd, shape), dt);
  kiln_tensor *x = leaf(x0, dt), *w = has_w ? leaf(w0, dt) : NULL, *b = has_b ? leaf(b0, dt) : NULL;
  kiln_tensor *xr = leaf(x0, dt), *wr = has_w ? leaf(w0, dt) : NULL, *br = has_b ? leaf(b0, dt) : NULL;
  kiln_tensor *y = op_call1(KILN_OP_LAYER_NORM, (op_val[]){OPV_T(x), OPV_INTS(ns, k), OPV_T(w),
                                                           OPV_T(b), OPV_F(1e-5), OPV_B(true)}, 6);
  kiln_tensor *yr = ln_ref(xr, k, wr, br, 1e-5);
  char what[96];
  snprintf(what, sizeof what, "layer_norm nd=%d k=%d w=%d b=%d %s", nd, k, has_w, has_b,
           kiln_dtype_name(dt));
  CHECK_MSG(y && yr, "%s: %s", what, kiln_last_error());
  if (y && yr) {
    CHECK_MSG(max_rel(y, yr) < tol, "%s: y off by %g", what, max_rel(y, yr));
    CHECK(kiln_backward(y, go) == 0 && kiln_backward(yr, go) == 0);
    CHECK_MSG(max_rel(kiln_tensor_grad(x), kiln_tensor_grad(xr)) < tol, "%s: dx off by %g", what,
              max_rel(kiln_tensor_grad(x), kiln_tensor_grad(xr)));
    if (w)
      CHECK_MSG(max_rel(kiln_tensor_grad(w), kiln_tensor_grad(wr)) < tol, "%s: dw off by %g", what,
                max_rel(kiln_tensor_grad(w), kiln_tensor_grad(wr)));
    if (b)
      CHECK_MSG(max_rel(kiln_tensor_grad(b), kiln_tensor_grad(br)) < tol, "%s: db off by %g", what,
                max_rel(kiln_tensor_grad(b), kiln_tensor_grad(br)));
  }
  kiln_scope_end();
}

TEST(layer_norm_kernel_matches_the_composite_on_odd_sizes) {
  kiln_generator *g = kiln_generator_new(31);
  static const int64_t s1[3] = {3, 7, 13}, s2[3] = {5, 3, 17}, s3[2] = {2, 1}, s4[2] = {4, 67};
  for (int d = 0; d < 2; d++) {
    kiln_dtype dt = d ? KILN_DTYPE_F32 : KILN_DTYPE_F64;
    double tol = d ? 2e-5 : 1e-11;
    for (int wb = 0; wb < 4; wb++) {
      ln_case(g, 3, s1, 1, wb & 1, wb & 2, dt, tol);
      ln_case(g, 3, s2, 2, wb & 1, wb & 2, dt, tol);
      ln_case(g, 2, s4, 1, wb & 1, wb & 2, dt, tol);
    }
    if (!d) ln_case(g, 2, s3, 1, true, true, dt, tol); /* rows of one element: y = bias (dx
                                                          is 0 up to 1/sqrt(eps) ulps) */
    ln_case(g, 3, s2, 3, true, false, dt, tol); /* over every dim */
  }
  kiln_generator_free(g);
}

/* Note [Norm weight grads in blocks]: dw and db of a layer norm over many
 * rows are summed in blocks of rows (here 3, the last one short) on the
 * threads; they match the composite, and their bits do not depend on the
 * thread count. */
TEST(layer_norm_weight_grads_in_blocks_match_and_ignore_the_thread_count) {
  kiln_generator *g = kiln_generator_new(33);
  static const int64_t sh[2] = {700, 200}; /* 327 rows a block: 327, 327, 46 */
  ln_case(g, 2, sh, 1, true, true, KILN_DTYPE_F64, 1e-11);
  ln_case(g, 2, sh, 1, true, true, KILN_DTYPE_F32, 2e-5);
  ln_case(g, 2, sh, 1, false, true, KILN_DTYPE_F32, 2e-5);
  kiln_scope_begin();
  int64_t ns[1] = {200};
  kiln_tensor *x0 = sample_randn(g, 2, sh), *w0 = sample_randn(g, 1, ns);
  kiln_tensor *b0 = sample_randn(g, 1, ns);
  kiln_tensor *go = sample_randn(g, 2, sh), *dw[2] = {0}, *db[2] = {0};
  int threads = kiln_get_num_threads();
  for (int t = 0; t < 2; t++) {
    kiln_set_num_threads(t ? 2 : 1);
    kiln_tensor *x = leaf(x0, KILN_DTYPE_F32), *w = leaf(w0, KILN_DTYPE_F32);
    kiln_tensor *b = leaf(b0, KILN_DTYPE_F32);
    kiln_tensor *y = op_call1(KILN_OP_LAYER_NORM, (op_val[]){OPV_T(x), OPV_INTS(ns, 1), OPV_T(w),
                                                             OPV_T(b), OPV_F(1e-5), OPV_B(true)},
                              6);
    CHECK_MSG(y && kiln_backward(y, kiln_to_dtype(go, KILN_DTYPE_F32)) == 0, "%s",
              kiln_last_error());
    dw[t] = kiln_tensor_grad(w);
    db[t] = kiln_tensor_grad(b);
  }
  kiln_set_num_threads(threads);
  CHECK(dw[0] && dw[1] && db[0] && db[1]);
  if (dw[0] && dw[1] && db[0] && db[1]) {
    CHECK(memcmp(kiln_tensor_data(dw[0]), kiln_tensor_data(dw[1]), 200 * sizeof(float)) == 0);
    CHECK(memcmp(kiln_tensor_data(db[0]), kiln_tensor_data(db[1]), 200 * sizeof(float)) == 0);
  }
  kiln_generator_free(g);
  kiln_scope_end();
}

/* Only weight requires grad: input's gradient is not computed; weight's is right. */
TEST(layer_norm_kernel_gives_only_the_wanted_gradients) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(32);
  int64_t sh[2] = {6, 9}, ns[1] = {9};
  kiln_tensor *x = sample_randn(g, 2, sh), *w0 = sample_randn(g, 1, ns);
  kiln_tensor *w = leaf(w0, KILN_DTYPE_F64), *wr = leaf(w0, KILN_DTYPE_F64);
  kiln_tensor *y = op_call1(KILN_OP_LAYER_NORM, (op_val[]){OPV_T(x), OPV_INTS(ns, 1), OPV_T(w),
                                                           OPV_NONE, OPV_F(1e-5), OPV_B(true)}, 6);
  kiln_tensor *go = sample_randn(g, 2, sh);
  CHECK(y && kiln_backward(y, go) == 0);
  CHECK(kiln_tensor_grad(x) == NULL);
  CHECK(kiln_backward(ln_ref(x, 1, wr, NULL, 1e-5), go) == 0);
  CHECK(max_rel(kiln_tensor_grad(w), kiln_tensor_grad(wr)) < 1e-12);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* The result is not saved for the backward (only the statistics are, as
 * PyTorch's): writing it in place, as batch_norm -> relu_(inplace) does,
 * leaves the gradient right. */
TEST(norm_kernel_results_may_be_written_in_place) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(36);
  int64_t sh[3] = {4, 3, 5}, cs[1] = {3}, ns[1] = {5};
  kiln_tensor *x0 = sample_randn(g, 3, sh), *w0 = sample_randn(g, 1, cs);
  for (int which = 0; which < 2; which++) {
    kiln_tensor *x = leaf(x0, KILN_DTYPE_F64), *xr = leaf(x0, KILN_DTYPE_F64);
    kiln_tensor *w = which ? leaf(w0, KILN_DTYPE_F64) : NULL;
    kiln_tensor *y =
        which ? op_call1(KILN_OP_BATCH_NORM, (op_val[]){OPV_T(x), OPV_T(w), OPV_NONE, OPV_NONE,
                                                        OPV_NONE, OPV_B(true), OPV_F(0.1),
                                                        OPV_F(1e-5), OPV_B(false)}, 9)
              : op_call1(KILN_OP_LAYER_NORM, (op_val[]){OPV_T(x), OPV_INTS(ns, 1), OPV_NONE,
                                                        OPV_NONE, OPV_F(1e-5), OPV_B(true)}, 6);
    kiln_tensor *yr =
        which ? op_call1(KILN_OP_BATCH_NORM, (op_val[]){OPV_T(xr), OPV_T(w), OPV_NONE, OPV_NONE,
                                                        OPV_NONE, OPV_B(true), OPV_F(0.1),
                                                        OPV_F(1e-5), OPV_B(false)}, 9)
              : op_call1(KILN_OP_LAYER_NORM, (op_val[]){OPV_T(xr), OPV_INTS(ns, 1), OPV_NONE,
                                                        OPV_NONE, OPV_F(1e-5), OPV_B(true)}, 6);
    CHECK_MSG(y && yr, "%s", kiln_last_error());
    kiln_tensor *yo = op_call1(KILN_OP_INPLACE(KILN_OP_RELU), (op_val[]){OPV_T(y)}, 1);
    CHECK_MSG(yo != NULL, "relu_: %s", kiln_last_error());
    kiln_tensor *go = sample_randn(g, 3, sh);
    CHECK_MSG(kiln_backward(y, go) == 0, "%s", kiln_last_error());
    CHECK(kiln_backward(kiln_relu(yr), go) == 0);
    CHECK(max_rel(kiln_tensor_grad(x), kiln_tensor_grad(xr)) == 0);
  }
  kiln_generator_free(g);
  kiln_scope_end();
}

/* ---- batch norm -------------------------------------------------------------------- */
static void bn_case(kiln_generator *g, int nd, const int64_t *shape, bool has_w, bool has_b,
                    kiln_dtype dt, double momentum, double tol) {
  kiln_scope_begin();
  int64_t C = shape[1], cs[1] = {C};
  int64_t dims[KILN_MAX_DIMS], count = 1;
  int k = 0;
  for (int i = 0; i < nd; i++)
    if (i != 1) dims[k++] = i, count *= shape[i];
  kiln_tensor *x0 = kiln_add_scalar(kiln_mul_scalar(sample_randn(g, nd, shape), 2.0), -5.0);
  kiln_tensor *w0 = sample_randn(g, 1, cs), *b0 = sample_randn(g, 1, cs);
  kiln_tensor *go = kiln_to_dtype(sample_randn(g, nd, shape), dt);
  kiln_tensor *x = leaf(x0, dt), *w = has_w ? leaf(w0, dt) : NULL, *b = has_b ? leaf(b0, dt) : NULL;
  kiln_tensor *xr = leaf(x0, dt), *wr = has_w ? leaf(w0, dt) : NULL, *br = has_b ? leaf(b0, dt) : NULL;
  kiln_tensor *rm = kiln_to_dtype(sample_randn(g, 1, cs), dt);
  kiln_tensor *rv = kiln_to_dtype(sample_uniform(g, 1, cs, 0.5, 2.0), dt);
  kiln_tensor *rm0 = kiln_clone(rm), *rv0 = kiln_clone(rv);
  kiln_tensor *y = op_call1(KILN_OP_BATCH_NORM,
                            (op_val[]){OPV_T(x), OPV_T(w), OPV_T(b), OPV_T(rm), OPV_T(rv),
                                       OPV_B(true), OPV_F(momentum), OPV_F(1e-5), OPV_B(false)}, 9);
  /* the reference, with the table's reductions */
  kiln_tensor *mu = kiln_mean(xr, dims, k, true);
  kiln_tensor *var = kiln_mean(kiln_mul(kiln_sub(xr, mu), kiln_sub(xr, mu)), dims, k, true);
  kiln_tensor *yr = kiln_mul(kiln_sub(xr, mu), kiln_rsqrt(kiln_add_scalar(var, 1e-5)));
  if (wr) yr = kiln_mul(yr, op_per_channel(wr, nd, C));
  if (br) yr = kiln_add(yr, op_per_channel(br, nd, C));
  kiln_tensor *mu1 = kiln_reshape(kiln_detach(mu), 1, cs), *var1 = kiln_reshape(kiln_detach(var), 1, cs);
  kiln_tensor *rm1 = kiln_add(kiln_mul_scalar(rm0, 1 - momentum), kiln_mul_scalar(mu1, momentum));
  kiln_tensor *rv1 = kiln_add(kiln_mul_scalar(rv0, 1 - momentum),
                              kiln_mul_scalar(var1, momentum * (double)count / (double)(count - 1)));
  char what[96];
  snprintf(what, sizeof what, "batch_norm nd=%d w=%d b=%d %s", nd, has_w, has_b, kiln_dtype_name(dt));
  CHECK_MSG(y && yr, "%s: %s", what, kiln_last_error());
  if (y && yr) {
    CHECK_MSG(max_rel(y, yr) < tol, "%s: y off by %g", what, max_rel(y, yr));
    CHECK_MSG(max_rel(rm, rm1) < tol, "%s: running_mean off by %g", what, max_rel(rm, rm1));
    CHECK_MSG(max_rel(rv, rv1) < tol, "%s: running_var off by %g", what, max_rel(rv, rv1));
    CHECK(kiln_backward(y, go) == 0 && kiln_backward(yr, go) == 0);
    CHECK_MSG(max_rel(kiln_tensor_grad(x), kiln_tensor_grad(xr)) < tol, "%s: dx off by %g", what,
              max_rel(kiln_tensor_grad(x), kiln_tensor_grad(xr)));
    if (w)
      CHECK_MSG(max_rel(kiln_tensor_grad(w), kiln_tensor_grad(wr)) < tol, "%s: dw off by %g", what,
                max_rel(kiln_tensor_grad(w), kiln_tensor_grad(wr)));
    if (b)
      CHECK_MSG(max_rel(kiln_tensor_grad(b), kiln_tensor_grad(br)) < tol, "%s: db off by %g", what,
                max_rel(kiln_tensor_grad(b), kiln_tensor_grad(br)));
  }
  kiln_scope_end();
}

TEST(batch_norm_kernel_matches_the_composite_on_odd_sizes) {
  kiln_generator *g = kiln_generator_new(33);
  static const int64_t s1[3] = {4, 3, 5}, s2[4] = {2, 5, 3, 3}, s3[2] = {7, 2}, s4[3] = {1, 2, 2};
  for (int d = 0; d < 2; d++) {
    kiln_dtype dt = d ? KILN_DTYPE_F32 : KILN_DTYPE_F64;
    double tol = d ? 2e-5 : 1e-11;
    for (int wb = 0; wb < 4; wb++) {
      bn_case(g, 3, s1, wb & 1, wb & 2, dt, 0.1, tol);
      bn_case(g, 4, s2, wb & 1, wb & 2, dt, 0.3, tol);
    }
    bn_case(g, 2, s3, true, true, dt, 0.1, tol); /* no spatial dims */
    bn_case(g, 3, s4, true, true, dt, 1.0, tol); /* two values per channel, momentum 1 */
  }
  kiln_generator_free(g);
}

/* eval mode through native_batch_norm_backward: dx = g w / sqrt(rv + eps),
 * dw = sum(g (x - rm)) / sqrt(rv + eps), db = sum(g) */
TEST(batch_norm_backward_kernel_in_eval_mode) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(34);
  int64_t sh[3] = {3, 4, 5}, cs[1] = {4}, dims[2] = {0, 2};
  kiln_tensor *x = sample_randn(g, 3, sh), *go = sample_randn(g, 3, sh), *w = sample_randn(g, 1, cs);
  kiln_tensor *rm = sample_randn(g, 1, cs), *rv = sample_uniform(g, 1, cs, 0.5, 2.0);
  int64_t mask[3] = {1, 1, 1};
  kiln_tensor *o[3] = {0};
  int n = op_call(KILN_OP_NATIVE_BATCH_NORM_BACKWARD,
                  (op_val[]){OPV_T(go), OPV_T(x), OPV_T(w), OPV_T(rm), OPV_T(rv), OPV_NONE, OPV_NONE,
                             OPV_B(false), OPV_F(1e-5), OPV_INTS(mask, 3)}, 10, o, 3);
  CHECK_MSG(n == 3, "%s", kiln_last_error());
  kiln_tensor *is = op_per_channel(kiln_rsqrt(kiln_add_scalar(rv, 1e-5)), 3, 4);
  kiln_tensor *dx = kiln_mul(kiln_mul(go, op_per_channel(w, 3, 4)), is);
  kiln_tensor *dw = kiln_sum(kiln_mul(go, kiln_mul(kiln_sub(x, op_per_channel(rm, 3, 4)), is)), dims, 2, false);
  kiln_tensor *db = kiln_sum(go, dims, 2, false);
  if (n == 3) {
    CHECK(max_rel(o[0], dx) < 1e-12);
    CHECK(max_rel(o[1], dw) < 1e-12);
    CHECK(max_rel(o[2], db) < 1e-12);
  }
  /* a masked-out gradient is an empty tensor */
  mask[0] = 0;
  n = op_call(KILN_OP_NATIVE_BATCH_NORM_BACKWARD,
              (op_val[]){OPV_T(go), OPV_T(x), OPV_T(w), OPV_T(rm), OPV_T(rv), OPV_NONE, OPV_NONE,
                         OPV_B(false), OPV_F(1e-5), OPV_INTS(mask, 3)}, 10, o, 3);
  CHECK(n == 3 && kiln_tensor_numel(o[0]) == 0 && max_rel(o[1], dw) < 1e-12);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* Lazy tensors record the kernels and give eager's values bit for bit. */
TEST(norm_kernels_on_lazy_tensors_equal_eager) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(35);
  int64_t sh[3] = {4, 3, 10}, ns[1] = {10}, cs[1] = {3};
  kiln_tensor *x = kiln_to_dtype(sample_randn(g, 3, sh), KILN_DTYPE_F32);
  kiln_tensor *w = kiln_to_dtype(sample_randn(g, 1, ns), KILN_DTYPE_F32);
  kiln_tensor *wc = kiln_to_dtype(sample_randn(g, 1, cs), KILN_DTYPE_F32);
  kiln_tensor *rm = kiln_zeros(1, cs, KILN_DTYPE_F32), *rv = kiln_ones(1, cs, KILN_DTYPE_F32);
  kiln_tensor *lx = kiln_to_lazy(x), *lw = kiln_to_lazy(w), *lwc = kiln_to_lazy(wc);
  kiln_tensor *lrm = kiln_to_lazy(rm), *lrv = kiln_to_lazy(rv);
  kiln_tensor *ln = op_call1(KILN_OP_LAYER_NORM, (op_val[]){OPV_T(x), OPV_INTS(ns, 1), OPV_T(w),
                                                            OPV_NONE, OPV_F(1e-5), OPV_B(true)}, 6);
  kiln_tensor *lln = op_call1(KILN_OP_LAYER_NORM, (op_val[]){OPV_T(lx), OPV_INTS(ns, 1), OPV_T(lw),
                                                             OPV_NONE, OPV_F(1e-5), OPV_B(true)}, 6);
  kiln_tensor *bn = op_call1(KILN_OP_BATCH_NORM,
                             (op_val[]){OPV_T(x), OPV_T(wc), OPV_NONE, OPV_T(rm), OPV_T(rv),
                                        OPV_B(true), OPV_F(0.1), OPV_F(1e-5), OPV_B(false)}, 9);
  kiln_tensor *lbn = op_call1(KILN_OP_BATCH_NORM,
                              (op_val[]){OPV_T(lx), OPV_T(lwc), OPV_NONE, OPV_T(lrm), OPV_T(lrv),
                                         OPV_B(true), OPV_F(0.1), OPV_F(1e-5), OPV_B(false)}, 9);
  CHECK_MSG(ln && lln && bn && lbn, "%s", kiln_last_error());
  CHECK(kiln_mark_step() == 0);
  kiln_tensor *pairs[4][2] = {{ln, lln}, {bn, lbn}, {rm, lrm}, {rv, lrv}};
  for (int i = 0; i < 4; i++) {
    kiln_tensor *c = kiln_to_cpu(pairs[i][1]);
    CHECK_MSG(c && max_rel(c, pairs[i][0]) == 0, "pair %d differs by %g", i, max_rel(c, pairs[i][0]));
  }
  kiln_generator_free(g);
  kiln_scope_end();
}

TEST(norm_kernels_refuse_bad_arguments_and_take_empty_inputs) {
  kiln_scope_begin();
  int64_t sh[3] = {2, 3, 4}, cs[1] = {3}, ns[1] = {4};
  kiln_tensor *x = kiln_ones(3, sh, KILN_DTYPE_F32), *o[3];
  /* _native_batch_norm_legit computes batch statistics only */
  CHECK(op_call(KILN_OP_NATIVE_BATCH_NORM_LEGIT, (op_val[]){OPV_T(x), OPV_NONE, OPV_NONE, OPV_B(false),
                                                           OPV_F(0.1), OPV_F(1e-5)}, 6, o, 3) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "training must be True");
  int64_t one[3] = {1, 3, 1};
  CHECK(op_call(KILN_OP_NATIVE_BATCH_NORM_LEGIT,
                (op_val[]){OPV_T(kiln_ones(3, one, KILN_DTYPE_F32)), OPV_NONE, OPV_NONE, OPV_B(true),
                           OPV_F(0.1), OPV_F(1e-5)}, 6, o, 3) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "more than 1 value per channel");
  /* weight of the wrong size or dtype */
  int64_t c2[1] = {2};
  CHECK(op_call(KILN_OP_NATIVE_BATCH_NORM_LEGIT,
                (op_val[]){OPV_T(x), OPV_T(kiln_ones(1, c2, KILN_DTYPE_F32)), OPV_NONE, OPV_B(true),
                           OPV_F(0.1), OPV_F(1e-5)}, 6, o, 3) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "weight should be a Float tensor of 3 elements");
  CHECK(op_call(KILN_OP_NATIVE_LAYER_NORM,
                (op_val[]){OPV_T(x), OPV_INTS(ns, 1), OPV_T(kiln_ones(1, ns, KILN_DTYPE_F64)),
                           OPV_NONE, OPV_F(1e-5)}, 5, o, 3) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "expected weight of dtype Float");
  CHECK(op_call(KILN_OP_NATIVE_LAYER_NORM,
                (op_val[]){OPV_T(x), OPV_INTS(cs, 1), OPV_NONE, OPV_NONE, OPV_F(1e-5)}, 5, o, 3) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "normalized_shape");
  CHECK(op_call(KILN_OP_NATIVE_LAYER_NORM,
                (op_val[]){OPV_T(kiln_ones(3, sh, KILN_DTYPE_I64)), OPV_INTS(ns, 1), OPV_NONE,
                           OPV_NONE, OPV_F(1e-5)}, 5, o, 3) < 0);
  /* empty inputs: an empty result (and empty statistics) */
  int64_t e[3] = {0, 3, 4};
  kiln_tensor *xe = kiln_ones(3, e, KILN_DTYPE_F32);
  CHECK(op_call(KILN_OP_NATIVE_LAYER_NORM, (op_val[]){OPV_T(xe), OPV_INTS(ns, 1), OPV_NONE,
                                                      OPV_NONE, OPV_F(1e-5)}, 5, o, 3) == 3);
  CHECK(kiln_tensor_numel(o[0]) == 0 && kiln_tensor_numel(o[1]) == 0);
  kiln_scope_end();
}

OP_SAMPLE(NATIVE_BATCH_NORM_LEGIT, affine) {
  int64_t cs[1] = {3};
  s->args[0] = OPV_T(sample_randn(g, 3, (int64_t[]){3, 3, 5}));
  s->args[1] = OPV_T(sample_randn(g, 1, cs));
  s->args[2] = OPV_T(sample_randn(g, 1, cs));
  s->args[3] = OPV_B(true);
  s->args[4] = OPV_F(0.1);
  s->args[5] = OPV_F(1e-5);
  s->n_args = 6;
  s->skip_outs = 6; /* mean, rstd: PyTorch's formula ignores their gradients */
}
OP_SAMPLE(NATIVE_BATCH_NORM_LEGIT, plain) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){7, 2}));
  s->args[1] = OPV_NONE;
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_B(true);
  s->args[4] = OPV_F(0.1);
  s->args[5] = OPV_F(1e-5);
  s->n_args = 6;
  s->skip_outs = 6;
}
OP_SAMPLE(NATIVE_LAYER_NORM, two_dims_weight_only) {
  s->args[0] = OPV_T(sample_randn(g, 3, (int64_t[]){2, 3, 5}));
  s->ints[0][0] = 3;
  s->ints[0][1] = 5;
  s->args[1] = OPV_INTS(s->ints[0], 2);
  s->args[2] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 5}));
  s->args[3] = OPV_NONE;
  s->args[4] = OPV_F(1e-5);
  s->n_args = 5;
  s->skip_outs = 6;
}
