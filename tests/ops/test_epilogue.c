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

/* ---- aten::kiln_mm_threshold_backward (Note [Threshold epilogue]) ---------------- */

OP_SAMPLE(KILN_MM_THRESHOLD_BACKWARD, basic) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 2}));
  s->args[1] = OPV_T(sample_transposed(g, (int64_t[]){2, 4}));
  s->args[2] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 4}));
  s->args[3] = OPV_F(0.0);
  s->n_args = 4;
}

/* where(y <= t, 0, x @ w) with the table's ops: the same bits (the same
 * GEMM, then a select), through the threaded split and both dtypes; NaN
 * in y keeps the product, y == t gives 0, a non-contiguous y is read in
 * its logical order, and an empty sum gives zeros. */
TEST(mm_threshold_backward_equals_mm_then_where) {
  kiln_generator *g = kiln_generator_new(6);
  for (int big = 0; big < 2; big++)
    for (int d = 0; d < 2; d++) {
      kiln_scope_begin();
      kiln_dtype dt = d ? KILN_DTYPE_F64 : KILN_DTYPE_F32;
      int64_t n = big ? 256 : 5, k = big ? 300 : 3, m = big ? 200 : 7;
      double t = big ? 0.0 : 0.25;
      kiln_tensor *x = kiln_randn(2, (int64_t[]){n, k}, dt, g);
      kiln_tensor *w = kiln_t(kiln_randn(2, (int64_t[]){m, k}, dt, g));
      kiln_tensor *y = kiln_randn(2, (int64_t[]){n, m}, dt, g);
      if (d) ((double *)kiln_tensor_data(y))[0] = NAN, ((double *)kiln_tensor_data(y))[1] = t;
      else ((float *)kiln_tensor_data(y))[0] = NAN, ((float *)kiln_tensor_data(y))[1] = (float)t;
      /* y[0] NaN keeps the product, y[1] == t gives 0 */
      kiln_tensor *yv = big ? kiln_t(kiln_contiguous(kiln_t(y))) : y; /* not contiguous */
      kiln_tensor *got = op_call1(KILN_OP_KILN_MM_THRESHOLD_BACKWARD,
                                  (op_val[]){OPV_T(x), OPV_T(w), OPV_T(yv), OPV_F(t)}, 4);
      kiln_tensor *p = kiln_mm(x, w);
      kiln_tensor *zero = kiln_full(2, (int64_t[]){n, m}, 0.0, dt);
      kiln_tensor *want = kiln_where(kiln_le(y, kiln_full(0, NULL, t, dt)), zero, p);
      CHECK_MSG(got && want, "%s", kiln_last_error());
      int bad = 0;
      for (int64_t i = 0; got && want && i < n * m; i++)
        bad += memcmp((char *)kiln_tensor_data(got) + i * kiln_dtype_size(dt),
                      (char *)kiln_tensor_data(want) + i * kiln_dtype_size(dt),
                      kiln_dtype_size(dt)) != 0;
      CHECK_MSG(bad == 0, "big=%d %s: %d elements differ", big, kiln_dtype_name(dt), bad);
      if (got && p) {
        CHECK(core_get_flat(got, 0) == core_get_flat(p, 0));
        CHECK(core_get_flat(got, 1) == 0.0);
      }
      kiln_scope_end();
    }
  kiln_scope_begin();
  kiln_tensor *e = op_call1(KILN_OP_KILN_MM_THRESHOLD_BACKWARD,
                            (op_val[]){OPV_T(kiln_zeros(2, (int64_t[]){2, 0}, KILN_DTYPE_F32)),
                                       OPV_T(kiln_zeros(2, (int64_t[]){0, 3}, KILN_DTYPE_F32)),
                                       OPV_T(kiln_ones(2, (int64_t[]){2, 3}, KILN_DTYPE_F32)),
                                       OPV_F(0.0)},
                            4);
  CHECK_MSG(e && kiln_tensor_numel(e) == 6, "%s", kiln_last_error());
  for (int i = 0; e && i < 6; i++) CHECK(((float *)kiln_tensor_data(e))[i] == 0.0f);
  kiln_tensor *a = kiln_ones(2, (int64_t[]){2, 2}, KILN_DTYPE_F32);
  CHECK(op_call1(KILN_OP_KILN_MM_THRESHOLD_BACKWARD,
                 (op_val[]){OPV_T(a), OPV_T(a), OPV_T(kiln_ones(1, (int64_t[]){3}, KILN_DTYPE_F32)),
                            OPV_F(0.0)},
                 4) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "4 elements");
  kiln_tensor *i64 = kiln_zeros(2, (int64_t[]){2, 2}, KILN_DTYPE_I64);
  CHECK(op_call1(KILN_OP_KILN_MM_THRESHOLD_BACKWARD,
                 (op_val[]){OPV_T(i64), OPV_T(i64), OPV_T(i64), OPV_F(0.0)}, 4) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "floating");
  kiln_scope_end();
  kiln_generator_free(g);
}

/* At every allocation of a call with a strided result (its C-order copy)
 * large enough to split across threads: the value of a call that never
 * failed, or NULL with an out-of-memory error. */
TEST(mm_threshold_backward_fails_cleanly_at_every_allocation) {
  kiln_generator *g = kiln_generator_new(7);
  kiln_scope_begin();
  kiln_tensor *x = kiln_randn(2, (int64_t[]){96, 80}, KILN_DTYPE_F32, g);
  kiln_tensor *w = kiln_t(kiln_randn(2, (int64_t[]){70, 80}, KILN_DTYPE_F32, g));
  kiln_tensor *y = kiln_t(kiln_randn(2, (int64_t[]){70, 96}, KILN_DTYPE_F32, g));
  op_val args[4] = {OPV_T(x), OPV_T(w), OPV_T(y), OPV_F(0.0)};
  kiln_tensor *want = op_call1(KILN_OP_KILN_MM_THRESHOLD_BACKWARD, args, 4);
  CHECK(want != NULL);
  int hit = 0;
  for (long k = 1; want && k < 1000; k++) {
    kiln_scope_begin();
    kiln_clear_error();
    core_alloc_fail_at(k);
    kiln_tensor *got = op_call1(KILN_OP_KILN_MM_THRESHOLD_BACKWARD, args, 4);
    long made = core_alloc_fail_at(0);
    if (got)
      CHECK_MSG(memcmp(kiln_tensor_data(got), kiln_tensor_data(want), 96 * 70 * sizeof(float)) == 0,
                "at %ld: values differ", k);
    else
      CHECK_MSG(made >= k && strstr(kiln_last_error(), "out of memory"), "at %ld: %s", k,
                kiln_last_error());
    kiln_scope_end();
    if (made < k) break;
    hit++;
  }
  CHECK_MSG(hit >= 2, "%d failure points", hit);
  test_note("%d failure points", hit);
  kiln_scope_end();
  kiln_generator_free(g);
}
