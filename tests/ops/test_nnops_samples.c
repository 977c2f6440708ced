/* tests/ops/test_nnops_samples.c: gradcheck samples (tests/ops/sample.h)
 * for the nn.functional ops of src/ops/upsample.c, conv_transpose.c,
 * nn_losses.c, pool_gather.c and nn_more.c: the table-driven gradcheck
 * and gradgradcheck run each against float64 finite differences; values
 * against PyTorch come from tests/ops/test_opinfo.c. */
#include "sample.h"
#include "test.h"

#define SAMPLE_ARGS(ENUM, tag, ...)                                             \
  OP_SAMPLE(ENUM, tag) {                                                        \
    op_val args_[] = {__VA_ARGS__};                                             \
    for (size_t i = 0; i < sizeof args_ / sizeof *args_; i++) s->args[i] = args_[i]; \
    s->n_args = (int)(sizeof args_ / sizeof *args_);                            \
  }
#define RN(nd, ...) OPV_T(sample_randn(g, nd, (int64_t[]){__VA_ARGS__}))

/* ---- upsample.c ---- */
static const int64_t O5[1] = {5}, O33[2] = {3, 5}, O334[3] = {3, 3, 4}, O7[1] = {7},
                     O343[3] = {3, 4, 3}, O56[2] = {5, 6}, O34[2] = {3, 4}, O43[2] = {4, 3},
                     O232[3] = {2, 3, 2};
static const double F2[2] = {2.0, 1.5}, F15[2] = {1.5, 2.0}, F3[3] = {1.5, 2.0, 1.0};
SAMPLE_ARGS(UPSAMPLE_NEAREST1D, size, RN(3, 1, 2, 3), OPV_INTS(O5, 1), OPV_NONE)
SAMPLE_ARGS(UPSAMPLE_NEAREST2D, scale, RN(4, 1, 2, 3, 2), OPV_NONE, OPV_FLOATS(F2, 2))
SAMPLE_ARGS(UPSAMPLE_NEAREST3D, size, RN(5, 1, 1, 2, 2, 3), OPV_INTS(O334, 3), OPV_NONE)
SAMPLE_ARGS(UPSAMPLE_NEAREST_EXACT1D, size, RN(3, 1, 2, 4), OPV_INTS(O7, 1), OPV_NONE)
SAMPLE_ARGS(UPSAMPLE_NEAREST_EXACT2D, size, RN(4, 1, 2, 3, 2), OPV_INTS(O33, 2), OPV_NONE)
SAMPLE_ARGS(UPSAMPLE_NEAREST_EXACT3D, scale, RN(5, 1, 1, 2, 2, 3), OPV_NONE, OPV_FLOATS(F3, 3))
SAMPLE_ARGS(UPSAMPLE_LINEAR1D, corners, RN(3, 1, 2, 4), OPV_INTS(O7, 1), OPV_B(true), OPV_NONE)
SAMPLE_ARGS(UPSAMPLE_BILINEAR2D, scale, RN(4, 1, 2, 3, 4), OPV_NONE, OPV_B(false),
            OPV_FLOATS(F15, 2))
SAMPLE_ARGS(UPSAMPLE_TRILINEAR3D, size, RN(5, 1, 1, 2, 3, 2), OPV_INTS(O343, 3), OPV_B(false),
            OPV_NONE)
SAMPLE_ARGS(UPSAMPLE_BICUBIC2D, size, RN(4, 1, 1, 4, 4), OPV_INTS(O56, 2), OPV_B(false), OPV_NONE)
SAMPLE_ARGS(UPSAMPLE_BILINEAR2D_AA, down, RN(4, 1, 1, 6, 5), OPV_INTS(O34, 2), OPV_B(false),
            OPV_NONE)
SAMPLE_ARGS(UPSAMPLE_BICUBIC2D_AA, down, RN(4, 1, 1, 6, 6), OPV_INTS(O43, 2), OPV_B(true),
            OPV_NONE)
SAMPLE_ARGS(ADAPTIVE_AVG_POOL3D, plain, RN(5, 1, 2, 3, 4, 5), OPV_INTS(O232, 3))

/* ---- conv_transpose.c ---- */
static const int64_t I1[1] = {1}, I2[1] = {2}, I22[2] = {2, 1}, I11[2] = {1, 1}, I12[2] = {1, 2},
                     I10[2] = {1, 0}, I111[3] = {1, 1, 1}, I212[3] = {2, 1, 2}, I010[3] = {0, 1, 0},
                     I100[3] = {1, 0, 0};
SAMPLE_ARGS(CONV_TRANSPOSE1D, groups, RN(3, 2, 4, 3), RN(3, 4, 1, 3), RN(1, 2), OPV_INTS(I2, 1),
            OPV_INTS(I1, 1), OPV_INTS(I1, 1), OPV_I(2), OPV_INTS(I2, 1))
SAMPLE_ARGS(CONV_TRANSPOSE2D, stride, RN(4, 1, 2, 3, 3), RN(4, 2, 3, 2, 3), RN(1, 3),
            OPV_INTS(I22, 2), OPV_INTS(I11, 2), OPV_INTS(I10, 2), OPV_I(1), OPV_INTS(I12, 2))
SAMPLE_ARGS(CONV_TRANSPOSE3D, stride, RN(5, 1, 2, 2, 3, 2), RN(5, 2, 1, 2, 2, 2), OPV_NONE,
            OPV_INTS(I212, 3), OPV_INTS(I010, 3), OPV_INTS(I100, 3), OPV_I(2), OPV_INTS(I111, 3))

/* ---- nn_losses.c ---- */
static kiln_tensor *signs(int64_t n) {
  double v[8];
  for (int64_t i = 0; i < n; i++) v[i] = i % 3 == 1 ? -1 : 1;
  return kiln_from_data(v, 1, &n, KILN_DTYPE_F64);
}
OP_SAMPLE(MARGIN_RANKING_LOSS, plain) {
  int64_t n = 5;
  s->args[0] = RN(1, 5);
  s->args[1] = RN(1, 5);
  s->args[2] = OPV_T(signs(n));
  s->args[3] = OPV_F(0.3);
  s->args[4] = OPV_I(1);
  s->skip_slot[2] = true;
  s->n_args = 5;
}
OP_SAMPLE(HINGE_EMBEDDING_LOSS, plain) {
  s->args[0] = RN(1, 6);
  s->args[1] = OPV_T(signs(6));
  s->args[2] = OPV_F(1.7);
  s->args[3] = OPV_I(2);
  s->skip_slot[1] = true;
  s->n_args = 4;
}
OP_SAMPLE(COSINE_EMBEDDING_LOSS, plain) {
  s->args[0] = RN(2, 4, 3);
  s->args[1] = RN(2, 4, 3);
  s->args[2] = OPV_T(signs(4));
  s->args[3] = OPV_F(-0.5);
  s->args[4] = OPV_I(0);
  s->skip_slot[2] = true;
  s->n_args = 5;
}
OP_SAMPLE(MULTI_MARGIN_LOSS, p2) {
  int64_t y[3] = {0, 3, 1}, n = 3;
  s->args[0] = RN(2, 3, 4);
  s->args[1] = OPV_T(kiln_from_data(y, 1, &n, KILN_DTYPE_I64));
  s->args[2] = OPV_I(2);
  s->args[3] = OPV_F(0.5);
  s->args[4] = OPV_T(sample_uniform(g, 1, (int64_t[]){4}, 0.5, 2));
  s->args[5] = OPV_I(1);
  s->n_args = 6;
}
OP_SAMPLE(MULTILABEL_MARGIN_LOSS, plain) {
  int64_t y[8] = {3, 0, -1, 1, 1, 2, 0, -1}, sh[2] = {2, 4};
  s->args[0] = RN(2, 2, 4);
  s->args[1] = OPV_T(kiln_from_data(y, 2, sh, KILN_DTYPE_I64));
  s->args[2] = OPV_I(0);
  s->n_args = 3;
}
SAMPLE_ARGS(TRIPLET_MARGIN_LOSS, swap, RN(2, 3, 4), RN(2, 3, 4), RN(2, 3, 4), OPV_F(1.0),
            OPV_F(2.0), OPV_F(1e-6), OPV_B(true), OPV_I(1))
OP_SAMPLE(POISSON_NLL_LOSS, full) {
  s->args[0] = OPV_T(sample_uniform(g, 2, (int64_t[]){2, 3}, 0.5, 2));
  s->args[1] = OPV_T(sample_uniform(g, 2, (int64_t[]){2, 3}, 0, 3));
  s->args[2] = OPV_B(false);
  s->args[3] = OPV_B(true);
  s->args[4] = OPV_F(1e-8);
  s->args[5] = OPV_I(1);
  s->skip_slot[1] = true;
  s->n_args = 6;
}

/* ---- pool_gather.c ---- */
static const int64_t K3[1] = {3}, S2[1] = {2}, P1[1] = {1}, D1[1] = {1}, K222[3] = {2, 2, 2},
                     S211[3] = {2, 1, 1}, P011[3] = {0, 1, 1}, O2[1] = {2}, O32[2] = {3, 2},
                     O222[3] = {2, 2, 2}, K22[2] = {2, 2}, D11[2] = {1, 1}, P10[2] = {1, 0},
                     S12[2] = {1, 2}, OPAD0[3] = {0, 0, 0};
SAMPLE_ARGS(MAX_POOL1D_WITH_INDICES, ceil, RN(3, 1, 2, 7), OPV_INTS(K3, 1), OPV_INTS(S2, 1),
            OPV_INTS(P1, 1), OPV_INTS(D1, 1), OPV_B(true))
SAMPLE_ARGS(MAX_POOL3D_WITH_INDICES, plain, RN(5, 1, 1, 3, 4, 3), OPV_INTS(K222, 3),
            OPV_INTS(S211, 3), OPV_INTS(P011, 3), OPV_INTS(I111, 3), OPV_B(false))
SAMPLE_ARGS(MAX_POOL3D, plain, RN(4, 1, 3, 3, 4), OPV_INTS(K222, 3), OPV_INTS(S211, 3),
            OPV_INTS(OPAD0, 3), OPV_INTS(I111, 3), OPV_B(true))
SAMPLE_ARGS(ADAPTIVE_MAX_POOL1D, plain, RN(3, 1, 2, 5), OPV_INTS(O2, 1))
SAMPLE_ARGS(ADAPTIVE_MAX_POOL2D, plain, RN(4, 1, 2, 5, 3), OPV_INTS(O32, 2))
SAMPLE_ARGS(ADAPTIVE_MAX_POOL3D, plain, RN(4, 1, 3, 4, 3), OPV_INTS(O222, 3))
OP_SAMPLE(MAX_UNPOOL2D, plain) {
  int64_t ix[4] = {0, 5, 3, 2}, sh[4] = {1, 1, 2, 2};
  s->args[0] = RN(4, 1, 1, 2, 2);
  s->args[1] = OPV_T(kiln_from_data(ix, 4, sh, KILN_DTYPE_I64));
  s->ints[0][0] = 2;
  s->ints[0][1] = 3;
  s->args[2] = OPV_INTS(s->ints[0], 2);
  s->n_args = 3;
}
OP_SAMPLE(MAX_UNPOOL3D, plain) {
  int64_t ix[2] = {7, 1}, sh[4] = {1, 1, 1, 2};
  s->args[0] = RN(4, 1, 1, 1, 2);
  s->args[1] = OPV_T(kiln_from_data(ix, 4, sh, KILN_DTYPE_I64));
  s->ints[0][0] = s->ints[0][1] = s->ints[0][2] = 2;
  s->ints[1][0] = s->ints[1][1] = s->ints[1][2] = 2;
  s->ints[2][0] = s->ints[2][1] = s->ints[2][2] = 0;
  s->args[2] = OPV_INTS(s->ints[0], 3);
  s->args[3] = OPV_INTS(s->ints[1], 3);
  s->args[4] = OPV_INTS(s->ints[2], 3);
  s->n_args = 5;
}
SAMPLE_ARGS(AVG_POOL3D, ceil, RN(5, 1, 1, 3, 4, 3), OPV_INTS(K222, 3), OPV_INTS(S211, 3),
            OPV_INTS(P011, 3), OPV_B(true), OPV_B(false), OPV_NONE)
SAMPLE_ARGS(IM2COL, plain, RN(4, 1, 2, 3, 4), OPV_INTS(K22, 2), OPV_INTS(D11, 2), OPV_INTS(P10, 2),
            OPV_INTS(S12, 2))

/* ---- nn_more.c ---- */
OP_SAMPLE(INSTANCE_NORM, running) {
  int64_t cs[1] = {2};
  s->args[0] = RN(3, 2, 2, 4);
  s->args[1] = RN(1, 2);
  s->args[2] = RN(1, 2);
  s->args[3] = OPV_T(kiln_zeros(1, cs, KILN_DTYPE_F64));
  s->args[4] = OPV_T(kiln_ones(1, cs, KILN_DTYPE_F64));
  s->args[5] = OPV_B(true);
  s->args[6] = OPV_F(0.1);
  s->args[7] = OPV_F(1e-5);
  s->args[8] = OPV_B(false);
  s->skip_slot[3] = s->skip_slot[4] = true;
  s->n_args = 9;
}
SAMPLE_ARGS(BILINEAR, plain, RN(2, 3, 2), RN(2, 3, 4), RN(3, 2, 2, 4), RN(1, 2))
SAMPLE_ARGS(PDIST, plain, RN(2, 4, 3), OPV_F(2.0))

/* ---- grid_sample.c ---- */
SAMPLE_ARGS(GRID_SAMPLER, zeros, RN(4, 1, 2, 3, 4),
            OPV_T(sample_uniform(g, 4, (int64_t[]){1, 2, 3, 2}, -1.1, 1.1)), OPV_I(0), OPV_I(0),
            OPV_B(false))
SAMPLE_ARGS(GRID_SAMPLER, reflection, RN(4, 1, 1, 3, 3),
            OPV_T(sample_uniform(g, 4, (int64_t[]){1, 2, 2, 2}, -1.6, 1.6)), OPV_I(0), OPV_I(2),
            OPV_B(true))
SAMPLE_ARGS(CONV1D_PADDING, same, RN(3, 1, 4, 5), RN(3, 2, 2, 4), RN(1, 2), OPV_INTS(I1, 1),
            OPV_S("same"), OPV_INTS(I1, 1), OPV_I(2))
SAMPLE_ARGS(CONV2D_PADDING, same_unbatched, RN(3, 2, 4, 3), RN(4, 3, 2, 2, 3), OPV_NONE,
            OPV_INTS(I11, 2), OPV_S("same"), OPV_INTS(I12, 2), OPV_I(1))
