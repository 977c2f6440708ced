/* tests/ops/test_epilogue.c: aten::_addmm_activation, addmm with a relu or
 * gelu epilogue: equal to addmm followed by the activation (bitwise: the
 * same kernels), through the threaded GEMM split, and differentiable. */
#include "sample.h"
#include "test.h"

static kiln_tensor *signs(int64_t n) {
  kiln_tensor *b = kiln_zeros(1, &n, KILN_DTYPE_F64);
  for (int64_t i = 0; i < n; i++) ((double *)kiln_tensor_data(b))[i] = i % 2 ? -1.0 : 1.0;
  return b;
}

OP_SAMPLE(ADDMM_ACTIVATION, relu) {
  /* |z| ~ 1: finite differences never cross relu's kink */
  s->args[0] = OPV_T(kiln_add(signs(4), kiln_mul_scalar(sample_randn(g, 1, (int64_t[]){4}), 0.05)));
  s->args[1] = OPV_T(kiln_mul_scalar(sample_randn(g, 2, (int64_t[]){3, 2}), 0.3));
  s->args[2] = OPV_T(kiln_mul_scalar(sample_transposed(g, (int64_t[]){2, 4}), 0.3));
  s->args[3] = OPV_F(1.0);
  s->args[4] = OPV_F(0.5);
  s->args[5] = OPV_B(false);
  s->n_args = 6;
}

OP_SAMPLE(ADDMM_ACTIVATION, gelu) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 4}));
  s->args[1] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 2}));
  s->args[2] = OPV_T(sample_randn(g, 2, (int64_t[]){2, 4}));
  s->args[3] = OPV_F(0.5);
  s->args[4] = OPV_F(1.0);
  s->args[5] = OPV_B(true);
  s->n_args = 6;
}

TEST(addmm_activation_equals_addmm_then_activation) {
  kiln_generator *g = kiln_generator_new(4);
  for (int gelu = 0; gelu < 2; gelu++)
    for (int big = 0; big < 2; big++) {
      kiln_scope_begin();
      int64_t n = big ? 256 : 5, k = big ? 300 : 3, m = big ? 200 : 7;
      kiln_tensor *b = kiln_randn(1, &m, KILN_DTYPE_F32, g);
      kiln_tensor *x = kiln_randn(2, (int64_t[]){n, k}, KILN_DTYPE_F32, g);
      kiln_tensor *w = kiln_t(kiln_randn(2, (int64_t[]){m, k}, KILN_DTYPE_F32, g));
      kiln_tensor *y = op_call1(KILN_OP_ADDMM_ACTIVATION,
                                (op_val[]){OPV_T(b), OPV_T(x), OPV_T(w), OPV_F(1.0), OPV_F(1.0), OPV_B(gelu)}, 6);
      kiln_tensor *z = kiln_addmm(b, x, w, 1.0, 1.0);
      kiln_tensor *want = gelu ? kiln_gelu(z, true) : kiln_relu(z);
      CHECK(y != NULL);
      int bad = 0;
      for (int64_t i = 0; y && i < n * m; i++)
        bad += ((float *)kiln_tensor_data(y))[i] != ((float *)kiln_tensor_data(want))[i];
      CHECK_MSG(bad == 0, "gelu=%d big=%d: %d elements differ", gelu, big, bad);
      kiln_scope_end();
    }
  kiln_scope_begin();
  kiln_tensor *i = kiln_zeros(2, (int64_t[]){2, 2}, KILN_DTYPE_I64);
  CHECK(op_call1(KILN_OP_ADDMM_ACTIVATION, (op_val[]){OPV_T(i), OPV_T(i), OPV_T(i), OPV_F(1.0), OPV_F(1.0), OPV_B(false)}, 6) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "floating");
  kiln_scope_end();
  kiln_generator_free(g);
}
