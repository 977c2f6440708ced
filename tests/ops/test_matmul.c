/* tests/ops/test_matmul.c: mm, bmm, addmm, matmul, linear: values against
 * PyTorch golden data and naive loops, non-contiguous operands (every BLAS
 * layout and the copy fallback), int64, error messages, and samples for the
 * table-driven gradcheck. */
#include "golden_linalg.h"
#include "sample.h"
#include "test.h"

/* ---- helpers -------------------------------------------------------------- */

/* C-order [n, m] = a[n, k] @ b[k, m] over any strides, by the book. */
static void naive_mm(const kiln_tensor *a, const kiln_tensor *b, double *out) {
  int64_t n = a->shape[0], k = a->shape[1], m = b->shape[1];
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++) {
      double s = 0;
      for (int64_t q = 0; q < k; q++) s += core_get_flat(a, i * k + q) * core_get_flat(b, q * m + j);
      out[i * m + j] = s;
    }
}

static void check_close(const kiln_tensor *r, const double *want, int64_t n, double tol,
                        const char *what) {
  CHECK_MSG(r && kiln_tensor_numel(r) == n, "%s: wrong numel", what);
  if (!r || kiln_tensor_numel(r) != n) return;
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = core_get_flat(r, i);
    if (!(fabs(v - want[i]) <= tol * (1 + fabs(want[i])))) {
      if (bad++ < 3) test_fail(__FILE__, __LINE__, "%s: element %lld: %.9g != %.9g", what,
                               (long long)i, v, want[i]);
    }
  }
}

static bool shape_is(const kiln_tensor *t, int nd, const int64_t *s) {
  if (!t || t->ndim != nd) return false;
  for (int i = 0; i < nd; i++)
    if (t->shape[i] != s[i]) return false;
  return true;
}

static kiln_tensor *seq(int nd, const int64_t *shape, kiln_dtype dt, double scale) {
  kiln_tensor *t = kiln_arange(0, (double)core_numel(nd, shape), 1, KILN_DTYPE_F64);
  t = kiln_reshape(kiln_mul_scalar(kiln_sub_scalar(t, 3.0), scale), nd, shape);
  return kiln_to_dtype(t, dt);
}

/* ---- mm -------------------------------------------------------------------- */

TEST(mm_values_small) {
  kiln_scope_begin();
  float av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {7, 8, 9, 10, 11, 12};
  kiln_tensor *a = kiln_from_data(av, 2, (int64_t[]){2, 3}, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_from_data(bv, 2, (int64_t[]){3, 2}, KILN_DTYPE_F32);
  kiln_tensor *c = kiln_mm(a, b);
  double want[4] = {58, 64, 139, 154};
  CHECK(kiln_tensor_dtype(c) == KILN_DTYPE_F32);
  CHECK(shape_is(c, 2, (int64_t[]){2, 2}));
  check_close(c, want, 4, 0, "mm f32");
  /* b^T @ a^T = (a @ b)^T, both operands transposed views (CblasTrans) */
  kiln_tensor *ct = kiln_mm(kiln_t(b), kiln_t(a));
  double want_t[4] = {58, 139, 64, 154};
  check_close(ct, want_t, 4, 0, "mm transposed views");
  kiln_scope_end();
}

TEST(mm_layouts_match_naive) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(42);
  /* [37, 29] @ [29, 41] through every operand layout */
  kiln_tensor *a = kiln_randn(2, (int64_t[]){37, 29}, KILN_DTYPE_F64, g);
  kiln_tensor *b = kiln_randn(2, (int64_t[]){29, 41}, KILN_DTYPE_F64, g);
  kiln_tensor *a_t = kiln_t(kiln_contiguous(kiln_t(a)));            /* column-major */
  kiln_tensor *big = kiln_randn(2, (int64_t[]){60, 90}, KILN_DTYPE_F64, g);
  kiln_tensor *b_rows = kiln_narrow(kiln_narrow(big, 0, 3, 29), 1, 5, 41); /* lda 90 */
  kiln_tensor *b_step = kiln_slice(kiln_slice(big, 0, 0, 58, 2), 1, 1, 83, 2); /* copy */
  kiln_tensor *row = kiln_randn(2, (int64_t[]){1, 29}, KILN_DTYPE_F64, g);
  kiln_tensor *a_exp = kiln_expand(row, 2, (int64_t[]){37, 29}); /* stride 0: copy */
  kiln_tensor *as[3] = {a, a_t, a_exp}, *bs[3] = {b, b_rows, b_step};
  double want[37 * 41];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      kiln_tensor *r = kiln_mm(as[i], bs[j]);
      CHECK_MSG(r, "mm %d,%d failed: %s", i, j, kiln_last_error());
      if (!r) continue;
      naive_mm(as[i], bs[j], want);
      check_close(r, want, 37 * 41, 1e-12, "mm layouts");
    }
  /* float32 through sgemm, a transposed operand */
  kiln_tensor *af = kiln_to_dtype(a, KILN_DTYPE_F32), *bf = kiln_to_dtype(b_rows, KILN_DTYPE_F32);
  kiln_tensor *rf = kiln_mm(kiln_t(kiln_contiguous(kiln_t(af))), bf);
  naive_mm(af, bf, want);
  check_close(rf, want, 37 * 41, 1e-5, "mm f32");
  /* inputs untouched (copies are private) */
  CHECK(!kiln_tensor_is_contiguous(b_step));
  kiln_generator_free(g);
  kiln_scope_end();
}

TEST(mm_int64_and_empty) {
  kiln_scope_begin();
  int64_t av[6] = {1, -2, 3, 4, 5, -6}, bv[6] = {7, 8, 9, 10, 11, 12};
  kiln_tensor *a = kiln_from_data(av, 2, (int64_t[]){2, 3}, KILN_DTYPE_I64);
  kiln_tensor *b = kiln_from_data(bv, 2, (int64_t[]){3, 2}, KILN_DTYPE_I64);
  kiln_tensor *c = kiln_mm(a, b);
  CHECK(c && kiln_tensor_dtype(c) == KILN_DTYPE_I64);
  double want[4] = {7 - 18 + 33, 8 - 20 + 36, 28 + 45 - 66, 32 + 50 - 72};
  check_close(c, want, 4, 0, "mm int64");
  kiln_tensor *ct = kiln_mm(kiln_t(b), kiln_t(a)); /* strided int64 */
  double want_t[4] = {want[0], want[2], want[1], want[3]};
  check_close(ct, want_t, 4, 0, "mm int64 transposed");
  /* k == 0: zeros; n == 0: empty */
  kiln_tensor *z = kiln_mm(kiln_ones(2, (int64_t[]){2, 0}, KILN_DTYPE_F32),
                           kiln_ones(2, (int64_t[]){0, 3}, KILN_DTYPE_F32));
  double zeros[6] = {0};
  CHECK(shape_is(z, 2, (int64_t[]){2, 3}));
  check_close(z, zeros, 6, 0, "mm k=0");
  kiln_tensor *e = kiln_mm(kiln_ones(2, (int64_t[]){0, 4}, KILN_DTYPE_F64),
                           kiln_ones(2, (int64_t[]){4, 3}, KILN_DTYPE_F64));
  CHECK(shape_is(e, 2, (int64_t[]){0, 3}));
  kiln_scope_end();
}

TEST(mm_errors) {
  kiln_scope_begin();
  kiln_tensor *a = kiln_zeros(2, (int64_t[]){4, 3}, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_zeros(2, (int64_t[]){2, 5}, KILN_DTYPE_F32);
  CHECK(kiln_mm(a, b) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::mm: shapes [4, 3] and [2, 5] cannot be multiplied (3 != 2)");
  kiln_tensor *d = kiln_zeros(2, (int64_t[]){3, 5}, KILN_DTYPE_F64);
  CHECK(kiln_mm(a, d) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::mm: expected self and mat2 to have the same dtype");
  CHECK_STR_CONTAINS(kiln_last_error(), "Float[4, 3] and Double[3, 5]");
  CHECK(kiln_mm(kiln_zeros(1, (int64_t[]){3}, KILN_DTYPE_F32), a) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::mm: self must be a 2-D tensor, got Float[3]");
  kiln_tensor *bl = kiln_zeros(2, (int64_t[]){3, 3}, KILN_DTYPE_BOOL);
  CHECK(kiln_mm(bl, bl) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "not implemented for Bool[3, 3]");
  CHECK(kiln_mm(a, NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "mat2 must be a tensor, got None");
  kiln_scope_end();
}

/* ---- bmm -------------------------------------------------------------------- */

TEST(bmm_values_and_layouts) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(9);
  /* 16 small products: the OpenMP-over-batch path */
  kiln_tensor *a = kiln_randn(3, (int64_t[]){16, 20, 24}, KILN_DTYPE_F64, g);
  kiln_tensor *b = kiln_randn(3, (int64_t[]){16, 22, 24}, KILN_DTYPE_F64, g);
  kiln_tensor *bt = kiln_transpose(b, 1, 2); /* [16, 24, 22], CblasTrans */
  kiln_tensor *r = kiln_bmm(a, bt);
  CHECK(shape_is(r, 3, (int64_t[]){16, 20, 22}));
  double want[20 * 22];
  for (int64_t i = 0; r && i < 16; i++) {
    kiln_tensor *ai = kiln_select(a, 0, i), *bi = kiln_select(bt, 0, i);
    naive_mm(ai, bi, want);
    check_close(kiln_select(r, 0, i), want, 20 * 22, 1e-12, "bmm");
  }
  /* expanded batch (batch stride 0) and float32 */
  kiln_tensor *one = kiln_randn(3, (int64_t[]){1, 3, 4}, KILN_DTYPE_F32, g);
  kiln_tensor *ex = kiln_expand(one, 3, (int64_t[]){5, 3, 4});
  kiln_tensor *c = kiln_randn(3, (int64_t[]){5, 4, 2}, KILN_DTYPE_F32, g);
  kiln_tensor *rc = kiln_bmm(ex, c);
  double w2[6];
  for (int64_t i = 0; rc && i < 5; i++) {
    naive_mm(kiln_select(one, 0, 0), kiln_select(c, 0, i), w2);
    check_close(kiln_select(rc, 0, i), w2, 6, 1e-6, "bmm expanded");
  }
  /* int64 batched */
  kiln_tensor *ia = seq(3, (int64_t[]){2, 2, 3}, KILN_DTYPE_I64, 1);
  kiln_tensor *ib = seq(3, (int64_t[]){2, 3, 2}, KILN_DTYPE_I64, 2);
  kiln_tensor *ir = kiln_bmm(ia, ib);
  CHECK(ir && kiln_tensor_dtype(ir) == KILN_DTYPE_I64);
  for (int64_t i = 0; ir && i < 2; i++) {
    naive_mm(kiln_select(ia, 0, i), kiln_select(ib, 0, i), w2);
    check_close(kiln_select(ir, 0, i), w2, 4, 0, "bmm int64");
  }
  kiln_generator_free(g);
  kiln_scope_end();
}

TEST(bmm_errors) {
  kiln_scope_begin();
  kiln_tensor *a = kiln_zeros(3, (int64_t[]){2, 4, 3}, KILN_DTYPE_F32);
  CHECK(kiln_bmm(a, kiln_zeros(3, (int64_t[]){3, 3, 5}, KILN_DTYPE_F32)) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::bmm: shapes [2, 4, 3] and [3, 3, 5] have different batch sizes (2 != 3)");
  CHECK(kiln_bmm(a, kiln_zeros(3, (int64_t[]){2, 2, 5}, KILN_DTYPE_F32)) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::bmm: shapes [2, 4, 3] and [2, 2, 5] cannot be multiplied (3 != 2)");
  CHECK(kiln_bmm(a, kiln_zeros(2, (int64_t[]){3, 5}, KILN_DTYPE_F32)) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::bmm: mat2 must be a 3-D tensor, got Float[3, 5]");
  kiln_scope_end();
}

/* ---- addmm ------------------------------------------------------------------ */

TEST(addmm_values) {
  kiln_scope_begin();
  double av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {7, 8, 9, 10, 11, 12}, biasv[2] = {0.5, -1};
  kiln_tensor *a = kiln_from_data(av, 2, (int64_t[]){2, 3}, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_from_data(bv, 2, (int64_t[]){3, 2}, KILN_DTYPE_F64);
  kiln_tensor *bias = kiln_from_data(biasv, 1, (int64_t[]){2}, KILN_DTYPE_F64);
  /* 2 * bias + 0.5 * a @ b; a @ b = [[58, 64], [139, 154]] */
  kiln_tensor *r = kiln_addmm(bias, a, b, 2.0, 0.5);
  double want[4] = {1 + 29, -2 + 32, 1 + 69.5, -2 + 77};
  check_close(r, want, 4, 1e-15, "addmm row bias");
  /* column bias [2, 1], transposed mat2 */
  kiln_tensor *colb = kiln_from_data(biasv, 2, (int64_t[]){2, 1}, KILN_DTYPE_F64);
  kiln_tensor *r2 = kiln_addmm(colb, a, kiln_t(kiln_contiguous(kiln_t(b))), 1.0, 1.0);
  double want2[4] = {58.5, 64.5, 138, 153};
  check_close(r2, want2, 4, 1e-15, "addmm column bias");
  /* 0-d bias; beta 0 ignores NaN in self */
  kiln_tensor *nanb = kiln_full(2, (int64_t[]){2, 2}, NAN, KILN_DTYPE_F64);
  kiln_tensor *r3 = kiln_addmm(nanb, a, b, 0.0, 1.0);
  double want3[4] = {58, 64, 139, 154};
  check_close(r3, want3, 4, 0, "addmm beta 0");
  kiln_tensor *r4 = kiln_addmm(kiln_scalar(1.0, KILN_DTYPE_F64), a, b, 1.0, 1.0);
  double want4[4] = {59, 65, 140, 155};
  check_close(r4, want4, 4, 0, "addmm 0-d bias");
  /* int64 */
  kiln_tensor *ia = kiln_to_dtype(a, KILN_DTYPE_I64), *ib = kiln_to_dtype(b, KILN_DTYPE_I64);
  kiln_tensor *r5 = kiln_addmm(kiln_ones(1, (int64_t[]){2}, KILN_DTYPE_I64), ia, ib, 3, 2);
  double want5[4] = {119, 131, 281, 311};
  CHECK(r5 && kiln_tensor_dtype(r5) == KILN_DTYPE_I64);
  check_close(r5, want5, 4, 0, "addmm int64");
  kiln_scope_end();
}

TEST(addmm_errors) {
  kiln_scope_begin();
  kiln_tensor *a = kiln_zeros(2, (int64_t[]){4, 3}, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_zeros(2, (int64_t[]){3, 5}, KILN_DTYPE_F32);
  CHECK(kiln_addmm(kiln_zeros(1, (int64_t[]){3}, KILN_DTYPE_F32), a, b, 1, 1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::addmm: self Float[3] cannot be broadcast to the product's shape [4, 5]");
  CHECK(kiln_addmm(kiln_zeros(1, (int64_t[]){5}, KILN_DTYPE_F64), a, b, 1, 1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::addmm: expected self and mat1 to have the same dtype");
  CHECK(kiln_addmm(kiln_zeros(1, (int64_t[]){5}, KILN_DTYPE_F32), a, a, 1, 1) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::addmm: shapes [4, 3] and [4, 3] cannot be multiplied (3 != 4)");
  kiln_scope_end();
}

/* ---- matmul ---------------------------------------------------------------------- */

TEST(matmul_golden_all_rules) {
  int n = (int)(sizeof golden_matmul_cases / sizeof *golden_matmul_cases);
  for (int i = 0; i < n; i++) {
    const golden_matmul *c = &golden_matmul_cases[i];
    kiln_scope_begin();
    kiln_tensor *a = kiln_from_data(c->a, c->na, c->sa, KILN_DTYPE_F64);
    kiln_tensor *b = kiln_from_data(c->b, c->nb, c->sb, KILN_DTYPE_F64);
    kiln_tensor *r = kiln_matmul(a, b);
    CHECK_MSG(r, "matmul case %d failed: %s", i, kiln_last_error());
    if (r) {
      CHECK_MSG(shape_is(r, c->nout, c->sout), "matmul case %d: wrong shape", i);
      check_close(r, c->out, core_numel(c->nout, c->sout), 0, "matmul golden");
    }
    /* the same through float32, with a non-contiguous left operand */
    if (c->na == 2) {
      kiln_tensor *af = kiln_t(kiln_contiguous(kiln_t(kiln_to_dtype(a, KILN_DTYPE_F32))));
      kiln_tensor *rf = kiln_matmul(af, kiln_to_dtype(b, KILN_DTYPE_F32));
      CHECK(rf && kiln_tensor_dtype(rf) == KILN_DTYPE_F32);
      if (rf) check_close(rf, c->out, core_numel(c->nout, c->sout), 1e-6, "matmul f32");
    }
    kiln_scope_end();
  }
}

TEST(matmul_no_scope_no_leak) {
  /* decompositions release their intermediates even without a scope */
  kiln_tensor *a = kiln_ones(3, (int64_t[]){2, 3, 4}, KILN_DTYPE_F32);
  kiln_tensor *b = kiln_ones(1, (int64_t[]){4}, KILN_DTYPE_F32);
  kiln_tensor *r = kiln_matmul(a, b);
  CHECK(r && r->refcount == 1);
  CHECK_NEAR(r ? core_get_flat(r, 5) : 0, 4.0, 0);
  kiln_tensor *c = kiln_ones(3, (int64_t[]){3, 4, 2}, KILN_DTYPE_F32);
  kiln_tensor *r2 = kiln_matmul(b, c);
  CHECK(r2 && r2->refcount == 1 && shape_is(r2, 2, (int64_t[]){3, 2}));
  kiln_release(r2);
  kiln_release(c);
  kiln_release(r);
  kiln_release(a);
  kiln_release(b);
}

TEST(matmul_errors) {
  kiln_scope_begin();
  kiln_tensor *a = kiln_zeros(3, (int64_t[]){2, 4, 3}, KILN_DTYPE_F32);
  CHECK(kiln_matmul(a, kiln_zeros(3, (int64_t[]){2, 2, 5}, KILN_DTYPE_F32)) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::matmul: shapes [2, 4, 3] and [2, 2, 5] cannot be multiplied (3 != 2)");
  CHECK(kiln_matmul(kiln_zeros(1, (int64_t[]){3}, KILN_DTYPE_F32),
                    kiln_zeros(1, (int64_t[]){4}, KILN_DTYPE_F32)) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::matmul: shapes [3] and [4] cannot be multiplied");
  CHECK(kiln_matmul(a, kiln_zeros(3, (int64_t[]){3, 3, 5}, KILN_DTYPE_F32)) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::matmul: batch dims of Float[2, 4, 3] and Float[3, 3, 5] cannot be broadcast");
  CHECK(kiln_matmul(kiln_scalar(1, KILN_DTYPE_F32), a) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::matmul: both arguments need to be at least 1-D");
  CHECK(kiln_matmul(a, kiln_zeros(2, (int64_t[]){3, 5}, KILN_DTYPE_F64)) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::matmul: expected self and other to have the same dtype");
  kiln_scope_end();
}

/* ---- linear ------------------------------------------------------------------------ */

TEST(linear_values) {
  kiln_scope_begin();
  double xv[6] = {1, 2, 3, 4, 5, 6}, wv[6] = {1, 0, -1, 2, 1, 0}, bv[2] = {0.5, -0.5};
  kiln_tensor *x = kiln_from_data(xv, 2, (int64_t[]){2, 3}, KILN_DTYPE_F64);
  kiln_tensor *w = kiln_from_data(wv, 2, (int64_t[]){2, 3}, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_from_data(bv, 1, (int64_t[]){2}, KILN_DTYPE_F64);
  /* x @ w^T = [[-2, 4], [-2, 13]] */
  double want[4] = {-1.5, 3.5, -1.5, 12.5}, want_nb[4] = {-2, 4, -2, 13};
  kiln_tensor *r = kiln_linear(x, w, b);
  check_close(r, want, 4, 0, "linear 2-d");
  check_close(kiln_linear(x, w, NULL), want_nb, 4, 0, "linear no bias");
  /* 3-d input [2, 1, 3] -> [2, 1, 2]; 1-d input -> [2] */
  kiln_tensor *r3 = kiln_linear(kiln_reshape(x, 3, (int64_t[]){2, 1, 3}), w, b);
  CHECK(shape_is(r3, 3, (int64_t[]){2, 1, 2}));
  check_close(r3, want, 4, 0, "linear 3-d");
  kiln_tensor *r1 = kiln_linear(kiln_select(x, 0, 1), w, b);
  CHECK(shape_is(r1, 1, (int64_t[]){2}));
  check_close(r1, want + 2, 2, 0, "linear 1-d");
  /* errors */
  CHECK(kiln_linear(x, kiln_zeros(2, (int64_t[]){2, 4}, KILN_DTYPE_F64), NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(),
                     "aten::linear: shapes [2, 3] and [4, 2] cannot be multiplied (3 != 4)");
  CHECK(kiln_linear(x, kiln_zeros(1, (int64_t[]){3}, KILN_DTYPE_F64), NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::linear: expected input of at least 1 dim and a 2-D weight");
  kiln_scope_end();
}

TEST(linear_backward_values) {
  kiln_scope_begin();
  double xv[6] = {1, 2, 3, 4, 5, 6}, wv[6] = {1, 0, -1, 2, 1, 0}, bv[2] = {0.5, -0.5};
  kiln_tensor *x = kiln_from_data(xv, 2, (int64_t[]){2, 3}, KILN_DTYPE_F64);
  kiln_tensor *w = kiln_from_data(wv, 2, (int64_t[]){2, 3}, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_from_data(bv, 1, (int64_t[]){2}, KILN_DTYPE_F64);
  kiln_set_requires_grad(x, true);
  kiln_set_requires_grad(w, true);
  kiln_set_requires_grad(b, true);
  kiln_tensor *loss = kiln_sum(kiln_linear(x, w, b), NULL, 0, false);
  CHECK(kiln_backward(loss, NULL) == 0);
  /* d/dx = ones[2,2] @ w = column sums of w per row; d/dw = ones^T @ x; d/db = 2 */
  double gx[6] = {3, 1, -1, 3, 1, -1}, gw[6] = {5, 7, 9, 5, 7, 9}, gb[2] = {2, 2};
  check_close(kiln_tensor_grad(x), gx, 6, 0, "linear dx");
  check_close(kiln_tensor_grad(w), gw, 6, 0, "linear dw");
  check_close(kiln_tensor_grad(b), gb, 2, 0, "linear db");
  kiln_scope_end();
}

/* ---- gradcheck samples ------------------------------------------------------------------ */

OP_SAMPLE(MM, plain) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 4}));
  s->args[1] = OPV_T(sample_randn(g, 2, (int64_t[]){4, 2}));
  s->n_args = 2;
}
OP_SAMPLE(MM, transposed) {
  s->args[0] = OPV_T(sample_transposed(g, (int64_t[]){2, 5}));
  s->args[1] = OPV_T(sample_transposed(g, (int64_t[]){5, 3}));
  s->n_args = 2;
}
OP_SAMPLE(BMM, plain) {
  s->args[0] = OPV_T(sample_randn(g, 3, (int64_t[]){2, 3, 4}));
  s->args[1] = OPV_T(kiln_transpose(sample_randn(g, 3, (int64_t[]){2, 2, 4}), 1, 2));
  s->n_args = 2;
}
OP_SAMPLE(ADDMM, row_bias) {
  s->args[0] = OPV_T(sample_randn(g, 1, (int64_t[]){3}));
  s->args[1] = OPV_T(sample_randn(g, 2, (int64_t[]){2, 4}));
  s->args[2] = OPV_T(sample_transposed(g, (int64_t[]){4, 3}));
  s->args[3] = OPV_F(0.5);
  s->args[4] = OPV_F(-2.0);
  s->n_args = 5;
}
OP_SAMPLE(ADDMM, full_bias) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){2, 3}));
  s->args[1] = OPV_T(sample_randn(g, 2, (int64_t[]){2, 2}));
  s->args[2] = OPV_T(sample_randn(g, 2, (int64_t[]){2, 3}));
  s->args[3] = OPV_F(1.0);
  s->args[4] = OPV_F(1.0);
  s->n_args = 5;
}
OP_SAMPLE(MATMUL, dot) {
  s->args[0] = OPV_T(sample_randn(g, 1, (int64_t[]){4}));
  s->args[1] = OPV_T(sample_randn(g, 1, (int64_t[]){4}));
  s->n_args = 2;
}
OP_SAMPLE(MATMUL, mv) {
  s->args[0] = OPV_T(sample_transposed(g, (int64_t[]){3, 4}));
  s->args[1] = OPV_T(sample_randn(g, 1, (int64_t[]){4}));
  s->n_args = 2;
}
OP_SAMPLE(MATMUL, vm) {
  s->args[0] = OPV_T(sample_randn(g, 1, (int64_t[]){3}));
  s->args[1] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 2}));
  s->n_args = 2;
}
OP_SAMPLE(MATMUL, folded) {
  s->args[0] = OPV_T(sample_randn(g, 3, (int64_t[]){2, 2, 3}));
  s->args[1] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 2}));
  s->n_args = 2;
}
OP_SAMPLE(MATMUL, batch_broadcast) {
  s->args[0] = OPV_T(sample_randn(g, 4, (int64_t[]){2, 1, 2, 3}));
  s->args[1] = OPV_T(sample_randn(g, 3, (int64_t[]){3, 3, 2}));
  s->n_args = 2;
}
OP_SAMPLE(MATMUL, vector_batched) {
  s->args[0] = OPV_T(sample_randn(g, 1, (int64_t[]){3}));
  s->args[1] = OPV_T(sample_randn(g, 3, (int64_t[]){2, 3, 2}));
  s->n_args = 2;
}
OP_SAMPLE(LINEAR, bias_2d) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 4}));
  s->args[1] = OPV_T(sample_randn(g, 2, (int64_t[]){2, 4}));
  s->args[2] = OPV_T(sample_randn(g, 1, (int64_t[]){2}));
  s->n_args = 3;
}
OP_SAMPLE(LINEAR, bias_3d) {
  s->args[0] = OPV_T(sample_randn(g, 3, (int64_t[]){2, 2, 3}));
  s->args[1] = OPV_T(sample_randn(g, 2, (int64_t[]){4, 3}));
  s->args[2] = OPV_T(sample_randn(g, 1, (int64_t[]){4}));
  s->n_args = 3;
}
OP_SAMPLE(LINEAR, no_bias) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 2}));
  s->args[1] = OPV_T(sample_randn(g, 2, (int64_t[]){2, 2}));
  s->args[2] = OPV_NONE;
  s->n_args = 3;
}

/* Note [GEMV]: one-row and one-column products (batch-1 inference) take
 * the GEMV path; every layout agrees with a naive product. */
TEST(mm_gemv_paths_match_naive) {
  kiln_generator *g = kiln_generator_new(77);
  int64_t shapes[4][3] = {{1, 37, 19}, {23, 41, 1}, {1, 5, 1}, {1, 1, 9}}; /* n, k, m */
  for (int si = 0; si < 4; si++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        kiln_scope_begin();
        int64_t n = shapes[si][0], k = shapes[si][1], m = shapes[si][2];
        kiln_tensor *a = ta ? kiln_t(kiln_randn(2, (int64_t[]){k, n}, KILN_DTYPE_F64, g))
                            : kiln_randn(2, (int64_t[]){n, k}, KILN_DTYPE_F64, g);
        kiln_tensor *b = tb ? kiln_t(kiln_randn(2, (int64_t[]){m, k}, KILN_DTYPE_F64, g))
                            : kiln_randn(2, (int64_t[]){k, m}, KILN_DTYPE_F64, g);
        kiln_tensor *c = kiln_mm(a, b);
        CHECK(c != NULL);
        for (int64_t i = 0; c && i < n; i++)
          for (int64_t j = 0; j < m; j++) {
            double want = 0;
            for (int64_t kk = 0; kk < k; kk++)
              want += core_get_flat(a, i * k + kk) * core_get_flat(b, kk * m + j);
            CHECK_NEAR(core_get_flat(c, i * m + j), want, 1e-12);
          }
        kiln_scope_end();
      }
  kiln_generator_free(g);
}
