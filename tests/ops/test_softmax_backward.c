/* tests/ops/test_softmax_backward.c: aten::_softmax_backward_data (softmax's
 * gradient in one kernel, src/ops/softmax_backward.c): values against a
 * double-precision reference over the last, a middle and the first dim,
 * rows longer than any vector, every CPU level; input_dtype conversion;
 * softmax's backward through it equal to the formula with public ops;
 * errors; and gradcheck/gradgradcheck samples for the table's checks. */
#include <math.h>

#include "sample.h"
#include "test.h"

OP_SAMPLE(SOFTMAX_BACKWARD_DATA, last) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 5}));
  s->args[1] = OPV_T(sample_uniform(g, 2, (int64_t[]){3, 5}, 0.05, 1.0));
  s->args[2] = OPV_I(1);
  s->args[3] = OPV_I(7); /* Double */
  s->n_args = 4;
}
OP_SAMPLE(SOFTMAX_BACKWARD_DATA, first_transposed) {
  s->args[0] = OPV_T(sample_transposed(g, (int64_t[]){4, 3}));
  s->args[1] = OPV_T(sample_uniform(g, 2, (int64_t[]){4, 3}, 0.05, 1.0));
  s->args[2] = OPV_I(0);
  s->args[3] = OPV_I(7);
  s->n_args = 4;
}
OP_SAMPLE(SOFTMAX_BACKWARD_DATA, middle) {
  s->args[0] = OPV_T(sample_randn(g, 3, (int64_t[]){2, 3, 4}));
  s->args[1] = OPV_T(sample_uniform(g, 3, (int64_t[]){2, 3, 4}, 0.05, 1.0));
  s->args[2] = OPV_I(-2);
  s->args[3] = OPV_I(7);
  s->n_args = 4;
}

static kiln_tensor *smb(kiln_tensor *g, kiln_tensor *y, int64_t dim, int64_t code) {
  return op_call1(KILN_OP_SOFTMAX_BACKWARD_DATA,
                  (op_val[]){OPV_T(g), OPV_T(y), OPV_I(dim), OPV_I(code)}, 4);
}

/* The largest |got - want| relative to 1 + |want|, want = y (g - sum(g y))
 * along dim computed in double from the float values. */
static double worst_off(kiln_tensor *got, kiln_tensor *g, kiln_tensor *y, int dim) {
  kiln_tensor *gd = kiln_to_dtype(g, KILN_DTYPE_F64), *yd = kiln_to_dtype(y, KILN_DTYPE_F64);
  int64_t d = dim;
  kiln_tensor *want = kiln_mul(yd, kiln_sub(gd, kiln_sum(kiln_mul(gd, yd), &d, 1, true)));
  if (!got || !want) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < kiln_tensor_numel(want); i++) {
    double w = core_get_flat(want, i), x = core_get_flat(got, i);
    double e = fabs(x - w) / (1.0 + fabs(w));
    worst = e > worst || isnan(e) ? (isnan(e) ? INFINITY : e) : worst;
  }
  return worst;
}

TEST(softmax_backward_data_values_every_dim_and_level) {
  kiln_scope_begin();
  int saved = core_cpu_level(), max = core_cpu_max_level();
  kiln_generator *gen = kiln_generator_new(31);
  int64_t shape[3] = {5, 7, 301};
  kiln_tensor *g = kiln_randn(3, shape, KILN_DTYPE_F32, gen);
  kiln_tensor *x = kiln_mul_scalar(kiln_randn(3, shape, KILN_DTYPE_F32, gen), 3.0);
  for (int dim = 0; dim < 3; dim++) {
    kiln_tensor *y = kiln_softmax(x, dim);
    for (int l = CORE_CPU_BASELINE; l <= max; l++) {
      core_cpu_set_level(l);
      double e = worst_off(smb(g, y, dim, 6), g, y, dim);
      CHECK_MSG(e < 2e-6, "dim %d level %s: %g off", dim, core_cpu_level_name(l), e);
      /* a transposed (non-contiguous) grad_output */
      kiln_tensor *gt = kiln_transpose(kiln_contiguous(kiln_transpose(g, 0, 2)), 0, 2);
      e = worst_off(smb(gt, y, dim - 3, 6), g, y, dim);
      CHECK_MSG(e < 2e-6, "transposed, dim %d level %s: %g off", dim, core_cpu_level_name(l), e);
    }
  }
  core_cpu_set_level(saved);
  kiln_generator_free(gen);
  kiln_scope_end();
}

TEST(softmax_backward_data_input_dtype_and_errors) {
  kiln_scope_begin();
  kiln_generator *gen = kiln_generator_new(32);
  kiln_tensor *g = kiln_randn(2, (int64_t[]){3, 4}, KILN_DTYPE_F64, gen);
  kiln_tensor *y = kiln_softmax(kiln_randn(2, (int64_t[]){3, 4}, KILN_DTYPE_F64, gen), 1);
  kiln_tensor *r = smb(g, y, 1, 6); /* a Float input whose softmax was taken in Double */
  CHECK(r && kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  CHECK(worst_off(r, g, y, 1) < 1e-7);
  CHECK(smb(g, kiln_to_dtype(y, KILN_DTYPE_F32), 1, 6) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::_softmax_backward_data");
  CHECK(smb(g, kiln_reshape(y, 2, (int64_t[]){4, 3}), 1, 7) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "shape");
  CHECK(smb(g, y, 2, 7) == NULL);
  CHECK(smb(g, y, 1, 4) == NULL); /* Long */
  CHECK_STR_CONTAINS(kiln_last_error(), "floating");
  kiln_generator_free(gen);
  kiln_scope_end();
}

/* softmax's backward (now this kernel) equals y (g - sum(g y)) written
 * with public ops, for the float32 attention-sized case and a dtype
 * argument; its double backward is gradgradcheck's (SOFTMAX samples). */
TEST(softmax_backward_through_the_kernel_matches_public_ops) {
  kiln_scope_begin();
  kiln_generator *gen = kiln_generator_new(33);
  kiln_tensor *x = kiln_randn(4, (int64_t[]){2, 3, 17, 40}, KILN_DTYPE_F32, gen);
  kiln_tensor *go = kiln_randn(4, (int64_t[]){2, 3, 17, 40}, KILN_DTYPE_F32, gen);
  kiln_set_requires_grad(x, true);
  kiln_tensor *y = kiln_softmax(x, -1);
  CHECK(y && kiln_backward(y, go) == 0);
  kiln_tensor *gx = kiln_tensor_grad(x);
  CHECK(worst_off(gx, go, kiln_detach(y), 3) < 2e-6);
  kiln_generator_free(gen);
  kiln_scope_end();
}
