/* tests/ops/test_opinfo_errors.c: bad arguments to the ops added for
 * OpInfo coverage give one-line errors that name the op (PyTorch's wording
 * where it has one), never a crash. */
#include "sample.h"
#include "test.h"

static void expect_error(const char *what, kiln_tensor *r, const char *op, const char *text) {
  const char *e = kiln_last_error();
  CHECK_MSG(r == NULL, "%s: succeeded", what);
  CHECK_MSG(e && strstr(e, op), "%s: \"%s\" does not name %s", what, e ? e : "", op);
  CHECK_MSG(e && strstr(e, text), "%s: \"%s\" does not say \"%s\"", what, e ? e : "", text);
  CHECK_MSG(e && !strchr(e, '\n'), "%s: more than one line: %s", what, e ? e : "");
}

TEST(opinfo_ops_bad_arguments) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(1);
  int64_t s234[3] = {2, 3, 4}, s5[1] = {5}, s23[2] = {2, 3};
  kiln_tensor *x = kiln_randn(3, s234, KILN_DTYPE_F32, g), *v = kiln_randn(1, s5, KILN_DTYPE_F32, g);
  kiln_tensor *m = kiln_randn(2, s23, KILN_DTYPE_F32, g);
  int64_t ns[1] = {5}, r2[2] = {2, 2}, sz[2] = {1, 1}, dd[2] = {0, 0}, p3[3] = {1, 1, 1},
          big[2] = {4, 4}, neg[2] = {-1, 2};
  expect_error("layer_norm shape", op_call1(KILN_OP_LAYER_NORM, (op_val[]){OPV_T(x), OPV_INTS(ns, 1),
               OPV_NONE, OPV_NONE, OPV_F(1e-5), OPV_B(true)}, 6), "aten::layer_norm",
               "Given normalized_shape=[5]");
  expect_error("group_norm groups", op_call1(KILN_OP_GROUP_NORM, (op_val[]){OPV_T(x), OPV_I(2),
               OPV_NONE, OPV_NONE, OPV_F(1e-5), OPV_B(true)}, 6), "aten::group_norm",
               "divisible by num_groups");
  expect_error("masked_fill mask", op_call1(KILN_OP_MASKED_FILL, (op_val[]){OPV_T(x), OPV_T(x),
               OPV_F(1)}, 3), "aten::masked_fill", "expected BoolTensor for mask");
  expect_error("repeat dims", op_call1(KILN_OP_REPEAT, (op_val[]){OPV_T(x), OPV_INTS(r2, 2)}, 2),
               "aten::repeat", "can not be smaller");
  expect_error("split sizes", op_call1(KILN_OP_SPLIT_WITH_SIZES, (op_val[]){OPV_T(x),
               OPV_INTS(sz, 2), OPV_I(2)}, 3), "aten::split_with_sizes", "sum exactly to 4");
  expect_error("flip twice", op_call1(KILN_OP_FLIP, (op_val[]){OPV_T(x), OPV_INTS(dd, 2)}, 2),
               "aten::flip", "appears multiple times");
  expect_error("roll align", op_call1(KILN_OP_ROLL, (op_val[]){OPV_T(x), OPV_INTS(r2, 2),
               OPV_INTS(sz, 1)}, 3), "aten::roll", "must align");
  expect_error("diagonal dims", op_call1(KILN_OP_DIAGONAL, (op_val[]){OPV_T(x), OPV_I(0), OPV_I(1),
               OPV_I(1)}, 4), "aten::diagonal", "cannot be identical");
  expect_error("pad odd", op_call1(KILN_OP_PAD, (op_val[]){OPV_T(x), OPV_INTS(p3, 3),
               OPV_S("constant"), OPV_NONE}, 4), "aten::pad", "divisible by 2");
  expect_error("pad reflect", op_call1(KILN_OP_PAD, (op_val[]){OPV_T(x), OPV_INTS(big, 2),
               OPV_S("reflect"), OPV_NONE}, 4), "aten::pad", "Padding size should be less");
  expect_error("pad mode", op_call1(KILN_OP_PAD, (op_val[]){OPV_T(x), OPV_INTS(sz, 2),
               OPV_S("mirror"), OPV_NONE}, 4), "aten::pad", "Unrecognised padding mode mirror");
  expect_error("avg_pool pad", op_call1(KILN_OP_AVG_POOL2D, (op_val[]){OPV_T(x), OPV_INTS(r2, 2),
               OPV_INTS(r2, 2), OPV_INTS(r2, 2), OPV_B(false), OPV_B(true), OPV_NONE}, 7),
               "aten::avg_pool2d", "pad should be at most half of kernel size");
  kiln_tensor *outs[2];
  CHECK(op_call(KILN_OP_TOPK, (op_val[]){OPV_T(x), OPV_I(9), OPV_I(-1), OPV_B(true), OPV_B(true)}, 5,
                outs, 2) < 0);
  expect_error("topk k", NULL, "aten::topk", "selected index k out of range");
  CHECK(op_call(KILN_OP_KTHVALUE, (op_val[]){OPV_T(x), OPV_I(0), OPV_I(-1), OPV_B(false)}, 4, outs,
                2) < 0);
  expect_error("kthvalue k", NULL, "aten::kthvalue", "out of range");
  expect_error("glu odd", op_call1(KILN_OP_GLU, (op_val[]){OPV_T(m), OPV_I(1)}, 2), "aten::glu",
               "Halving dimension must be even");
  expect_error("div mode", op_call1(KILN_OP_DIV_MODE, (op_val[]){OPV_T(x), OPV_T(x), OPV_S("round")},
               3), "aten::div", "expected rounding_mode to be one of None, 'trunc', or 'floor'");
  expect_error("arange step", op_call1(KILN_OP_ARANGE_STEP, (op_val[]){OPV_I(0), OPV_I(5), OPV_I(0),
               OPV_NONE, OPV_NONE, OPV_NONE, OPV_NONE}, 7), "aten::arange", "step must be nonzero");
  expect_error("zeros negative", op_call1(KILN_OP_ZEROS, (op_val[]){OPV_INTS(neg, 2), OPV_NONE,
               OPV_NONE, OPV_NONE, OPV_NONE}, 5), "aten::zeros", "negative dimension -1");
  expect_error("dot dims", op_call1(KILN_OP_DOT, (op_val[]){OPV_T(m), OPV_T(v)}, 2), "aten::dot",
               "1D tensors expected");
  int64_t two[1] = {2};
  expect_error("tensordot sizes", op_call1(KILN_OP_TENSORDOT, (op_val[]){OPV_T(x), OPV_T(m),
               OPV_INTS(two, 1), OPV_INTS(dd, 1)}, 4), "aten::tensordot",
               "contracted dimensions need to match");
  expect_error("prelu weight", op_call1(KILN_OP_PRELU, (op_val[]){OPV_T(x), OPV_T(v)}, 2),
               "aten::prelu", "Mismatch of parameter numbers and input channel size");
  expect_error("polygamma n", op_call1(KILN_OP_POLYGAMMA, (op_val[]){OPV_I(-1), OPV_T(x)}, 2),
               "aten::polygamma", "n must be non-negative");
  expect_error("bitwise float", op_call1(KILN_OP_BITWISE_AND, (op_val[]){OPV_T(x), OPV_T(x)}, 2),
               "aten::bitwise_and", "not implemented");
  kiln_generator_free(g);
  kiln_scope_end();
}
