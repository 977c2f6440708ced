/* tests/ops/test_reduce_more.c: gradcheck samples (tests/ops/sample.h) for
 * the ops of src/ops/reduce_more.c (quantile, nanquantile, the norm
 * overloads), shape_more.c (unfold, as_strided, repeat_interleave,
 * gradient) and native_norm.c. Values against PyTorch come
 * from tests/ops/test_opinfo.c's OpInfo samples. */
#include "sample.h"
#include "test.h"

static const int64_t S25[2] = {2, 5}, S3[1] = {3};

#define QUANTILE_SAMPLE(ENUM)                                                    \
  OP_SAMPLE(ENUM, rows) {                                                        \
    s->args[0] = OPV_T(sample_randn(g, 2, S25));                                 \
    s->args[1] = OPV_T(sample_uniform(g, 1, S3, 0.1, 0.9));                      \
    s->args[2] = OPV_I(1);                                                       \
    s->args[3] = OPV_B(true);                                                    \
    s->args[4] = OPV_S("linear");                                                \
    s->n_args = 5;                                                               \
  }
QUANTILE_SAMPLE(QUANTILE)
QUANTILE_SAMPLE(NANQUANTILE)

#define QUANTILE_SCALAR_SAMPLE(ENUM, mode)                                       \
  OP_SAMPLE(ENUM, all) {                                                         \
    s->args[0] = OPV_T(sample_randn(g, 2, S25));                                 \
    s->args[1] = OPV_F(0.3);                                                     \
    s->args[2] = OPV_NONE;                                                       \
    s->args[3] = OPV_B(false);                                                   \
    s->args[4] = OPV_S(mode);                                                    \
    s->n_args = 5;                                                               \
  }
QUANTILE_SCALAR_SAMPLE(QUANTILE_SCALAR, "midpoint")
QUANTILE_SCALAR_SAMPLE(NANQUANTILE_SCALAR, "nearest")

OP_SAMPLE(NORM_DIM_DTYPE, f64) {
  s->args[0] = OPV_T(sample_randn(g, 2, S25));
  s->args[1] = OPV_F(3.0);
  s->ints[0][0] = 1;
  s->args[2] = OPV_INTS(s->ints[0], 1);
  s->args[3] = OPV_B(false);
  s->args[4] = OPV_I(7);
  s->n_args = 5;
}

/* ---- shape_more.c's ops --------------------------------------------------------- */
static const int64_t S34[2] = {3, 4}, S7[1] = {7}, S9[1] = {9};

OP_SAMPLE(UNFOLD, overlapping) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_I(3);
  s->args[3] = OPV_I(1);
  s->n_args = 4;
}
/* windows that overlap (stride 1 < size 3) and skip element 0 */
OP_SAMPLE(AS_STRIDED, overlapping) {
  s->args[0] = OPV_T(sample_randn(g, 1, S9));
  s->ints[0][0] = 3;
  s->ints[0][1] = 3;
  s->ints[1][0] = 2;
  s->ints[1][1] = 1;
  s->args[1] = OPV_INTS(s->ints[0], 2);
  s->args[2] = OPV_INTS(s->ints[1], 2);
  s->args[3] = OPV_I(1);
  s->n_args = 4;
}
OP_SAMPLE(REPEAT_INTERLEAVE, dim) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_I(3);
  s->args[2] = OPV_I(1);
  s->args[3] = OPV_NONE;
  s->n_args = 4;
}
OP_SAMPLE(REPEAT_INTERLEAVE_T, counts) {
  static const int64_t reps[3] = {2, 0, 1};
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_T(kiln_from_data(reps, 1, S3, KILN_DTYPE_I64));
  s->args[2] = OPV_I(0);
  s->args[3] = OPV_NONE;
  s->n_args = 4;
}
OP_SAMPLE(GRADIENT, order2) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_F(0.5);
  s->args[2] = OPV_NONE;
  s->args[3] = OPV_I(2);
  s->n_args = 4;
}
OP_SAMPLE(GRADIENT_DIMS, dim1) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_F(2.0);
  s->ints[0][0] = -1;
  s->args[2] = OPV_INTS(s->ints[0], 1);
  s->args[3] = OPV_I(1);
  s->n_args = 4;
}
OP_SAMPLE(GRADIENT_ARRAY, one_dim) {
  s->args[0] = OPV_T(sample_randn(g, 1, S7));
  s->ints[0][0] = 0;
  s->args[1] = OPV_INTS(s->ints[0], 1);
  s->args[2] = OPV_I(1);
  s->n_args = 3;
}

/* ---- native_norm.c's ops ---------------------------------------------------------- */
OP_SAMPLE(NATIVE_LAYER_NORM, affine) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->ints[0][0] = 4;
  s->args[1] = OPV_INTS(s->ints[0], 1);
  s->args[2] = OPV_T(sample_randn(g, 1, S34 + 1));
  s->args[3] = OPV_T(sample_randn(g, 1, S34 + 1));
  s->args[4] = OPV_F(1e-5);
  s->n_args = 5;
  s->skip_outs = 6; /* mean, rstd: detached, as PyTorch's formula ignores their gradients */
}
OP_SAMPLE(NATIVE_BATCH_NORM, training) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_T(sample_randn(g, 1, S34 + 1));
  s->args[2] = OPV_T(sample_randn(g, 1, S34 + 1));
  s->args[3] = OPV_NONE;
  s->args[4] = OPV_NONE;
  s->args[5] = OPV_B(true);
  s->args[6] = OPV_F(0.1);
  s->args[7] = OPV_F(1e-5);
  s->n_args = 8;
  s->skip_outs = 6;
}

