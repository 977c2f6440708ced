/* tests/ops/test_sortidx_samples.c: gradcheck samples (tests/ops/sample.h)
 * for the sort and indexing ops of src/ops/sort_extra.c and index_extra.c;
 * the table-driven gradcheck (and gradgradcheck, where the op has a
 * differentiable formula) runs each against float64 finite differences.
 * Values against PyTorch come from tests/ops/test_opinfo.c. */
#include "sample.h"
#include "test.h"

static const int64_t S34[2] = {3, 4}, S4[1] = {4}, S3[1] = {3};

static kiln_tensor *mask(kiln_generator *g, int nd, const int64_t *sh) {
  return kiln_gt(sample_randn(g, nd, sh), kiln_scalar(0, KILN_DTYPE_F64));
}
/* an index [3, 4] into dim 0 of a [3, 4] self, every row hit */
static kiln_tensor *rows_index(void) {
  static const int64_t v[12] = {0, 1, 2, 0, 2, 2, 1, 0, 1, 0, 0, 2};
  return kiln_from_data(v, 2, S34, KILN_DTYPE_I64);
}

OP_SAMPLE(NANMEDIAN, plain) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->n_args = 1;
}
OP_SAMPLE(NANMEDIAN_DIM, dim1) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_B(true);
  s->n_args = 3;
}
OP_SAMPLE(MODE, dim0) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_I(0);
  s->args[2] = OPV_B(false);
  s->n_args = 3;
}
#define SR(tag, red, incl)                                                      \
  OP_SAMPLE(SCATTER_REDUCE, tag) {                                              \
    s->args[0] = OPV_T(sample_uniform(g, 2, S34, 0.5, 2));                      \
    s->args[1] = OPV_I(0);                                                      \
    s->args[2] = OPV_T(rows_index());                                           \
    s->args[3] = OPV_T(sample_uniform(g, 2, S34, 0.5, 2));                      \
    s->args[4] = OPV_S(red);                                                    \
    s->args[5] = OPV_B(incl);                                                   \
    s->n_args = 6;                                                              \
  }
SR(sum, "sum", false)
SR(prod, "prod", true)
SR(mean, "mean", true)
SR(amax, "amax", false)
SR(amin, "amin", true)
OP_SAMPLE(INDEX_REDUCE, prod) {
  static const int64_t ix[4] = {2, 0, 2, 1};
  s->args[0] = OPV_T(sample_uniform(g, 2, S34, 0.5, 2));
  s->args[1] = OPV_I(1);
  s->args[2] = OPV_T(kiln_from_data(ix, 1, S4, KILN_DTYPE_I64));
  s->args[3] = OPV_T(sample_uniform(g, 2, S34, 0.5, 2));
  s->args[4] = OPV_S("prod");
  s->args[5] = OPV_B(true);
  s->n_args = 6;
}
OP_SAMPLE(MASKED_SELECT, broadcast) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_T(mask(g, 1, S4));
  s->n_args = 2;
}
OP_SAMPLE(MASKED_SCATTER, plain) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_T(mask(g, 2, S34));
  s->args[2] = OPV_T(sample_randn(g, 2, S34));
  s->n_args = 3;
}
OP_SAMPLE(PUT, accumulate) {
  static const int64_t ix[3] = {5, 0, 5};
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_T(kiln_from_data(ix, 1, S3, KILN_DTYPE_I64));
  s->args[2] = OPV_T(sample_randn(g, 1, S3));
  s->args[3] = OPV_B(true);
  s->n_args = 4;
}
OP_SAMPLE(SELECT_SCATTER, dim1) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_T(sample_randn(g, 1, S3));
  s->args[2] = OPV_I(1);
  s->args[3] = OPV_I(2);
  s->n_args = 4;
}
OP_SAMPLE(SLICE_SCATTER, step2) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_T(sample_randn(g, 2, (int64_t[]){3, 2}));
  s->args[2] = OPV_I(1);
  s->args[3] = OPV_I(0);
  s->args[4] = OPV_NONE;
  s->args[5] = OPV_I(2);
  s->n_args = 6;
}
OP_SAMPLE(DIAGONAL_SCATTER, offset1) {
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_T(sample_randn(g, 1, S3));
  s->args[2] = OPV_I(1);
  s->args[3] = OPV_I(0);
  s->args[4] = OPV_I(1);
  s->n_args = 5;
}
OP_SAMPLE(AS_STRIDED_SCATTER, strided) {
  s->ints[0][0] = 2, s->ints[0][1] = 2, s->ints[1][0] = 1, s->ints[1][1] = 4;
  s->args[0] = OPV_T(sample_randn(g, 2, S34));
  s->args[1] = OPV_T(sample_randn(g, 2, (int64_t[]){2, 2}));
  s->args[2] = OPV_INTS(s->ints[0], 2);
  s->args[3] = OPV_INTS(s->ints[1], 2);
  s->args[4] = OPV_I(1);
  s->n_args = 5;
}
