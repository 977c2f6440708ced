/* tests/ops/test_batch_norm.c: aten::batch_norm (Note [Batch norm]) in
 * training mode (output and running statistics updated in place) and eval
 * mode, against PyTorch 1.13 (torch.batch_norm on float64, printed by
 * hand-run torch with seed 0); gradcheck samples in both modes. */
#include "sample.h"
#include "test.h"

static const double X[12] = {1.5409961082440433, -0.29342890576094638, -2.1787893820745574,
                             0.56843127728066778, -1.0845223424240209, -1.3985953953708767,
                             0.40334684762929929, 0.83802633299765983, -0.71925757846935923,
                             -0.40334352493217457, -0.59663536261512728, 0.18203648506130554};
static const double W[3] = {-0.8566745932963743, 1.1006041709034271, -1.0711873631091473};
static const double B[3] = {0.12270123916331216, -0.56631747515485464, 0.37311463418249957};
static const double RM[3] = {-0.89199531480656247, -1.5091077446322021, 0.37039353337381531};
static const double RV[3] = {0.60973526023744606, 1.0237520594022436, 0.72602020293839054};

static int bn(kiln_tensor *x, kiln_tensor *w, kiln_tensor *b, kiln_tensor *rm, kiln_tensor *rv,
              bool training, kiln_tensor **y) {
  *y = op_call1(KILN_OP_BATCH_NORM,
                (op_val[]){OPV_T(x), OPV_T(w), OPV_T(b), OPV_T(rm), OPV_T(rv), OPV_B(training),
                           OPV_F(0.1), OPV_F(1e-5), OPV_B(false)},
                9);
  return *y ? 0 : -1;
}

TEST(batch_norm_matches_pytorch) {
  static const double ytrain[12] = {
      -1.0581492558628738, 1.2995712573975045, -2.2369336829204305, 0.83187220698420117,
      1.0199997985331632,  1.5842126326358132, 0.40403043432291885, -0.15464747920430072,
      -0.60655143453635207, -0.25365699014683701, 0.14354098420012706, -1.2552948786391054};
  static const double rm1[3] = {-0.74057227374815493, -1.4265209503738676, 0.2609112646527158};
  static const double rv1[3] = {0.60799641037971286, 1.0508097949055872, 0.70082413042017999};
  static const double yeval[12] = {
      -2.5465057198903072, -0.53397909655156717, -1.2947679484903438, 1.6935388495090391,
      2.2021663264563589,  2.5970041714108296,   -1.2984037764861613, -1.7752856496858191,
      0.29284708190672964, 0.63648460900303461,  1.5888178017050651,  0.60990824108350516};
  kiln_scope_begin();
  int64_t xs[3] = {2, 3, 2}, cs[1] = {3};
  kiln_tensor *x = kiln_from_data(X, 3, xs, KILN_DTYPE_F64), *w = kiln_from_data(W, 1, cs, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_from_data(B, 1, cs, KILN_DTYPE_F64);
  kiln_tensor *rm = kiln_from_data(RM, 1, cs, KILN_DTYPE_F64), *rv = kiln_from_data(RV, 1, cs, KILN_DTYPE_F64);
  kiln_tensor *y;
  CHECK(bn(x, w, b, rm, rv, false, &y) == 0);
  for (int i = 0; y && i < 12; i++) CHECK_NEAR(core_get_flat(y, i), yeval[i], 1e-12);
  CHECK(kiln_tensor_version(rm) == 0 && core_get_flat(rm, 0) == RM[0]); /* eval: only read */
  CHECK(bn(x, w, b, rm, rv, true, &y) == 0);
  for (int i = 0; y && i < 12; i++) CHECK_NEAR(core_get_flat(y, i), ytrain[i], 1e-12);
  for (int i = 0; i < 3; i++) {
    CHECK_NEAR(core_get_flat(rm, i), rm1[i], 1e-14);
    CHECK_NEAR(core_get_flat(rv, i), rv1[i], 1e-14);
  }
  CHECK(kiln_tensor_version(rm) > 0 && kiln_tensor_version(rv) > 0);
  /* errors: eval without running statistics, one value per channel */
  CHECK(bn(x, w, b, NULL, NULL, false, &y) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "evaluation mode");
  int64_t one[2] = {1, 3};
  CHECK(bn(kiln_zeros(2, one, KILN_DTYPE_F64), w, b, rm, rv, true, &y) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "more than 1 value per channel");
  kiln_scope_end();
}

OP_SAMPLE(BATCH_NORM, training) {
  int64_t cs[1] = {3};
  s->args[0] = OPV_T(sample_randn(g, 3, (int64_t[]){2, 3, 2}));
  s->args[1] = OPV_T(sample_randn(g, 1, cs));
  s->args[2] = OPV_T(sample_randn(g, 1, cs));
  s->args[3] = OPV_T(kiln_zeros(1, cs, KILN_DTYPE_F64));
  s->args[4] = OPV_T(kiln_ones(1, cs, KILN_DTYPE_F64));
  s->args[5] = OPV_B(true);
  s->args[6] = OPV_F(0.1);
  s->args[7] = OPV_F(1e-5);
  s->args[8] = OPV_B(false);
  s->skip_slot[3] = s->skip_slot[4] = true;
  s->n_args = 9;
}

OP_SAMPLE(BATCH_NORM, eval) {
  int64_t cs[1] = {3};
  s->args[0] = OPV_T(sample_randn(g, 4, (int64_t[]){2, 3, 2, 2}));
  s->args[1] = OPV_T(sample_randn(g, 1, cs));
  s->args[2] = OPV_T(sample_randn(g, 1, cs));
  s->args[3] = OPV_T(sample_randn(g, 1, cs));
  s->args[4] = OPV_T(kiln_add_scalar(kiln_ones(1, cs, KILN_DTYPE_F64), 0.5));
  s->args[5] = OPV_B(false);
  s->args[6] = OPV_F(0.1);
  s->args[7] = OPV_F(1e-5);
  s->args[8] = OPV_B(false);
  s->skip_slot[3] = s->skip_slot[4] = true;
  s->n_args = 9;
}
