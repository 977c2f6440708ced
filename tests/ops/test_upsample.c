/* tests/ops/test_upsample.c: the resampling modes and shapes OpInfo's
 * samples do not reach (antialiased bilinear/bicubic, trilinear, nearest
 * and nearest-exact in 2-d/3-d) and a strided, dilated, grouped
 * conv_transpose3d with output_padding, against PyTorch 1.13's float64
 * values (tests/ops/golden_upsample.h, scripts/golden/upsample.py), plus
 * the one-line errors of bad sizes. */
#include <math.h>
#include <string.h>

#include "ops/op.h"
#include "golden_upsample.h"
#include "test.h"

static kiln_tensor *det(int nd, const int64_t *shape, double a, double b, bool cosine) {
  kiln_tensor *t = kiln_zeros(nd, shape, KILN_DTYPE_F64);
  if (!t) return NULL;
  double *p = kiln_tensor_data(t);
  for (int64_t i = 0; i < kiln_tensor_numel(t); i++)
    p[i] = cosine ? cos(a * (double)i) : sin(a * (double)i + b);
  return t;
}

static void check_values(const kiln_tensor *r, const double *want, int64_t n, const char *what) {
  CHECK_MSG(r && kiln_tensor_numel(r) == n, "%s: missing or wrong numel", what);
  if (!r || kiln_tensor_numel(r) != n) return;
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = core_get_flat(r, i);
    if (!(fabs(v - want[i]) <= 1e-9 * (1 + fabs(want[i]))) && bad++ < 3)
      test_fail(__FILE__, __LINE__, "%s: element %lld: %.12g != %.12g", what, (long long)i, v,
                want[i]);
  }
}

TEST(upsample_modes_equal_pytorch) {
  for (size_t c = 0; c < sizeof up_cases / sizeof *up_cases; c++) {
    const up_case *u = &up_cases[c];
    kiln_scope_begin();
    int nearest = u->align_corners < 0, op = op_find_arity(u->op, nearest ? 3 : 4);
    CHECK_MSG(op >= 0, "%s: no op %s", u->name, u->op);
    kiln_tensor *x = det(u->ndim, u->in, 0.7, 0.3, false), *out = NULL;
    op_val args[4] = {OPV_T(x), OPV_INTS(u->out, u->n_out), OPV_NONE, OPV_NONE};
    if (!nearest) args[2] = OPV_B(u->align_corners == 1);
    if (op >= 0) out = op_call1(op, args, nearest ? 3 : 4);
    CHECK_MSG(out, "%s: %s", u->name, kiln_last_error());
    if (out) {
      CHECK_EQ_INT(out->ndim, u->ndim);
      for (int i = 0; i < u->n_out; i++) CHECK_EQ_INT(out->shape[2 + i], u->out[i]);
    }
    check_values(out, u->want, u->n, u->name);
    kiln_scope_end();
  }
}

TEST(conv_transpose3d_equals_pytorch) {
  kiln_scope_begin();
  int64_t xs[5] = {1, 2, 2, 3, 2}, ws[5] = {2, 2, 2, 2, 2}, bs[1] = {4};
  double bv[4] = {0.5, -0.25, 0.125, 1.0};
  int64_t st[3] = {2, 1, 2}, pd[3] = {0, 1, 1}, op_[3] = {1, 0, 1}, dl[3] = {1, 2, 1};
  kiln_tensor *x = det(5, xs, 0.7, 0.3, false), *w = det(5, ws, 0.37, 0, true);
  kiln_tensor *b = kiln_from_data(bv, 1, bs, KILN_DTYPE_F64);
  kiln_tensor *y = op_call1(KILN_OP_CONV_TRANSPOSE3D,
                            (op_val[]){OPV_T(x), OPV_T(w), OPV_T(b), OPV_INTS(st, 3),
                                       OPV_INTS(pd, 3), OPV_INTS(op_, 3), OPV_I(2), OPV_INTS(dl, 3)},
                            8);
  CHECK_MSG(y, "conv_transpose3d: %s", kiln_last_error());
  if (y) {
    CHECK_EQ_INT(y->ndim, 5);
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(y->shape[i], ct3_out_shape[i]);
    check_values(y, ct3_want, kiln_tensor_numel(y), "conv_transpose3d");
  }
  kiln_scope_end();
}

TEST(upsample_bad_sizes_one_line_errors) {
  kiln_scope_begin();
  int64_t xs[4] = {1, 1, 2, 2}, zero[2] = {0, 3}, three[1] = {3};
  double neg[2] = {2.0, -1.0};
  kiln_tensor *x = det(4, xs, 0.7, 0.3, false);
  CHECK(!op_call1(KILN_OP_UPSAMPLE_BILINEAR2D,
                  (op_val[]){OPV_T(x), OPV_INTS(zero, 2), OPV_B(false), OPV_NONE}, 4));
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::upsample_bilinear2d: Input and output sizes");
  CHECK(!op_call1(KILN_OP_UPSAMPLE_NEAREST2D, (op_val[]){OPV_T(x), OPV_NONE, OPV_FLOATS(neg, 2)}, 3));
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::upsample_nearest2d: invalid scale factor");
  CHECK(!op_call1(KILN_OP_UPSAMPLE_NEAREST2D, (op_val[]){OPV_T(x), OPV_NONE, OPV_NONE}, 3));
  CHECK_STR_CONTAINS(kiln_last_error(), "exactly one of output_size and scale_factors");
  CHECK(!op_call1(KILN_OP_UPSAMPLE_LINEAR1D,
                  (op_val[]){OPV_T(x), OPV_INTS(three, 1), OPV_B(true), OPV_NONE}, 4));
  CHECK_STR_CONTAINS(kiln_last_error(), "Non-empty 3D data tensor expected");
  CHECK(strchr(kiln_last_error(), '\n') == NULL);
  kiln_scope_end();
}
