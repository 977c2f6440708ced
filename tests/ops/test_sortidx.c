/* tests/ops/test_sortidx.c: values of the sort and indexing ops of
 * src/ops/sort_extra.c and index_extra.c on inputs larger than OpInfo's
 * samples (ties, NaN, inverse indices and counts, dims, every reduction
 * with and without self, integer floor means), against PyTorch 1.13's
 * results (printed by scripts/golden/sortidx_values.py), and their bad
 * arguments: one-line errors naming the op. */
#include <math.h>

#include "core/core.h"
#include "sample.h"
#include "test.h"

static kiln_tensor *f32(int nd, const int64_t *sh, const double *v) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= sh[i];
  float buf[64];
  for (int64_t i = 0; i < n; i++) buf[i] = (float)v[i];
  return kiln_from_data(buf, nd, sh, KILN_DTYPE_F32);
}
static kiln_tensor *i64(int nd, const int64_t *sh, const int64_t *v) {
  return kiln_from_data(v, nd, sh, KILN_DTYPE_I64);
}
#define VALS(...) ((const double[]){__VA_ARGS__}), (int64_t)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double))

static void run(const char *what, int op, const op_val *a, int n, kiln_tensor **outs, int want) {
  int got = op_call(op, a, n, outs, 3);
  CHECK_MSG(got == want, "%s: %d outputs (%s)", what, got, got < 0 ? kiln_last_error() : "");
  for (int i = got < 0 ? 0 : got; i < 3; i++) outs[i] = NULL;
}

TEST(sortidx_sort_values) {
  kiln_scope_begin();
  kiln_tensor *o[3];
  const double nan = NAN;
  kiln_tensor *x = f32(2, (int64_t[]){3, 4}, (double[]){2, 1, 2, 3, 5, 5, 1, 1, 0, 7, 7, 7});
  run("mode", KILN_OP_MODE, (op_val[]){OPV_T(x), OPV_I(1), OPV_B(false)}, 3, o, 2);
  sample_check_vals("mode values", o[0], VALS(2, 1, 7), 0);
  sample_check_vals("mode indices", o[1], VALS(2, 3, 3), 0);
  run("mode0", KILN_OP_MODE, (op_val[]){OPV_T(x), OPV_I(0), OPV_B(false)}, 3, o, 2);
  sample_check_vals("mode0 values", o[0], VALS(0, 1, 1, 1), 0);
  sample_check_vals("mode0 indices", o[1], VALS(2, 0, 1, 1), 0);
  kiln_tensor *y = f32(2, (int64_t[]){3, 4}, (double[]){1, nan, 3, 2, nan, 5, nan, nan, 4, 1, nan, 0});
  run("nanmedian", KILN_OP_NANMEDIAN_DIM, (op_val[]){OPV_T(y), OPV_I(1), OPV_B(false)}, 3, o, 2);
  sample_check_vals("nanmedian values", o[0], VALS(2, 5, 1), 0);
  sample_check_vals("nanmedian indices", o[1], VALS(3, 1, 1), 0);
  run("nanmedian all", KILN_OP_NANMEDIAN, (op_val[]){OPV_T(y)}, 1, o, 1);
  sample_check_vals("nanmedian all", o[0], VALS(2), 0);
  kiln_tensor *b = f32(1, (int64_t[]){4}, (double[]){1, 3, 5, 7});
  kiln_tensor *v = f32(2, (int64_t[]){2, 3}, (double[]){0, 1, 2, 5, 7, 9});
  run("bucketize", KILN_OP_BUCKETIZE, (op_val[]){OPV_T(v), OPV_T(b), OPV_B(false), OPV_B(false)}, 4, o, 1);
  sample_check_vals("bucketize", o[0], VALS(0, 0, 1, 2, 3, 4), 0);
  run("bucketize right", KILN_OP_BUCKETIZE, (op_val[]){OPV_T(v), OPV_T(b), OPV_B(false), OPV_B(true)}, 4, o, 1);
  sample_check_vals("bucketize right", o[0], VALS(0, 1, 1, 3, 4, 4), 0);
  kiln_tensor *s = f32(2, (int64_t[]){2, 4}, (double[]){1, 3, 5, 7, 2, 4, 6, 8});
  run("searchsorted", KILN_OP_SEARCHSORTED, (op_val[]){OPV_T(s), OPV_T(v), OPV_B(false), OPV_B(false),
      OPV_S("right"), OPV_NONE}, 6, o, 1);
  sample_check_vals("searchsorted rows", o[0], VALS(0, 1, 1, 2, 3, 4), 0);
  kiln_tensor *u7 = f32(1, (int64_t[]){4}, (double[]){7, 1, 5, 3});
  kiln_tensor *sorter = i64(1, (int64_t[]){4}, (int64_t[]){1, 3, 2, 0});
  run("searchsorted sorter", KILN_OP_SEARCHSORTED, (op_val[]){OPV_T(u7),
      OPV_T(f32(1, (int64_t[]){2}, (double[]){4, 8})), OPV_B(false), OPV_B(false), OPV_NONE,
      OPV_T(sorter)}, 6, o, 1);
  sample_check_vals("searchsorted sorter", o[0], VALS(2, 4), 0);
  kiln_tensor *u = i64(2, (int64_t[]){4, 2}, (int64_t[]){3, 1, 2, 3, 3, 1, 0, 5});
  run("unique", KILN_OP_UNIQUE2, (op_val[]){OPV_T(u), OPV_B(true), OPV_B(true), OPV_B(true)}, 4, o, 3);
  sample_check_vals("unique values", o[0], VALS(0, 1, 2, 3, 5), 0);
  sample_check_vals("unique inverse", o[1], VALS(3, 1, 2, 3, 3, 1, 0, 4), 0);
  sample_check_vals("unique counts", o[2], VALS(1, 2, 1, 3, 1), 0);
  run("unique_dim", KILN_OP_UNIQUE_DIM, (op_val[]){OPV_T(u), OPV_I(0), OPV_B(true), OPV_B(true),
      OPV_B(true)}, 5, o, 3);
  sample_check_vals("unique_dim values", o[0], VALS(0, 5, 2, 3, 3, 1), 0);
  sample_check_vals("unique_dim inverse", o[1], VALS(2, 1, 2, 0), 0);
  sample_check_vals("unique_dim counts", o[2], VALS(1, 1, 2), 0);
  kiln_tensor *c = i64(1, (int64_t[]){7}, (int64_t[]){1, 1, 2, 2, 1, 3, 3});
  run("unique_consecutive", KILN_OP_UNIQUE_CONSECUTIVE, (op_val[]){OPV_T(c), OPV_B(true), OPV_B(true),
      OPV_NONE}, 4, o, 3);
  sample_check_vals("unique_consecutive values", o[0], VALS(1, 2, 1, 3), 0);
  sample_check_vals("unique_consecutive inverse", o[1], VALS(0, 0, 1, 1, 2, 3, 3), 0);
  sample_check_vals("unique_consecutive counts", o[2], VALS(2, 2, 1, 2), 0);
  kiln_tensor *cd = i64(2, (int64_t[]){3, 3}, (int64_t[]){1, 1, 2, 1, 1, 2, 0, 1, 2});
  run("unique_consecutive dim", KILN_OP_UNIQUE_CONSECUTIVE, (op_val[]){OPV_T(cd), OPV_B(true),
      OPV_B(true), OPV_I(0)}, 4, o, 3);
  sample_check_vals("unique_consecutive dim values", o[0], VALS(1, 1, 2, 0, 1, 2), 0);
  sample_check_vals("unique_consecutive dim inverse", o[1], VALS(0, 0, 1), 0);
  sample_check_vals("unique_consecutive dim counts", o[2], VALS(2, 1), 0);
  kiln_scope_end();
}

TEST(sortidx_index_values) {
  kiln_scope_begin();
  kiln_tensor *o[3];
  const int64_t S23[2] = {2, 3};
  kiln_tensor *x = f32(2, S23, (double[]){1, 2, 3, 4, 5, 6});
  kiln_tensor *ix = i64(2, S23, (int64_t[]){0, 1, 0, 1, 1, 1});
  kiln_tensor *src = f32(2, S23, (double[]){10, 20, 30, 40, 50, 60});
  static const struct {
    const char *red;
    bool incl;
    double want[6];
  } cases[] = {
      {"sum", true, {11, 2, 33, 44, 75, 66}},     {"sum", false, {10, 2, 30, 40, 70, 60}},
      {"prod", true, {10, 2, 90, 160, 5000, 360}}, {"prod", false, {10, 2, 30, 40, 1000, 60}},
      {"mean", true, {5.5, 2, 16.5, 22, 25, 33}},  {"mean", false, {10, 2, 30, 40, 35, 60}},
      {"amax", true, {10, 2, 30, 40, 50, 60}},     {"amax", false, {10, 2, 30, 40, 50, 60}},
      {"amin", true, {1, 2, 3, 4, 5, 6}},          {"amin", false, {10, 2, 30, 40, 20, 60}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char what[64];
    snprintf(what, sizeof what, "scatter_reduce %s include_self=%d", cases[i].red, cases[i].incl);
    run(what, KILN_OP_SCATTER_REDUCE, (op_val[]){OPV_T(x), OPV_I(0), OPV_T(ix), OPV_T(src),
        OPV_S(cases[i].red), OPV_B(cases[i].incl)}, 6, o, 1);
    sample_check_vals(what, o[0], cases[i].want, 6, 1e-6);
  }
  /* the derived in-place form writes self */
  kiln_tensor *xc = kiln_clone(x);
  CHECK(op_call1(KILN_OP_INPLACE(KILN_OP_SCATTER_REDUCE), (op_val[]){OPV_T(xc), OPV_I(0), OPV_T(ix),
                 OPV_T(src), OPV_S("prod"), OPV_B(true)}, 6) == xc);
  sample_check_vals("scatter_reduce_ prod", xc, VALS(10, 2, 90, 160, 5000, 360), 1e-6);
  kiln_tensor *xi = i64(2, S23, (int64_t[]){1, 2, 3, 4, 5, 6});
  run("scatter_reduce int mean", KILN_OP_SCATTER_REDUCE, (op_val[]){OPV_T(xi), OPV_I(1),
      OPV_T(i64(2, S23, (int64_t[]){0, 0, 2, 1, 1, 1})),
      OPV_T(i64(2, S23, (int64_t[]){-7, 2, 9, 3, 3, 4})), OPV_S("mean"), OPV_B(true)}, 6, o, 1);
  sample_check_vals("scatter_reduce int mean (floor)", o[0], VALS(-2, 2, 6, 4, 3, 6), 0);
  run("index_reduce", KILN_OP_INDEX_REDUCE, (op_val[]){OPV_T(x), OPV_I(1),
      OPV_T(i64(1, (int64_t[]){3}, (int64_t[]){2, 0, 2})), OPV_T(src), OPV_S("amax"), OPV_B(false)},
      6, o, 1);
  sample_check_vals("index_reduce amax", o[0], VALS(20, 2, 30, 50, 5, 60), 0);
  kiln_tensor *m = kiln_from_data((bool[]){true, false, true}, 1, (int64_t[]){3}, KILN_DTYPE_BOOL);
  run("masked_select", KILN_OP_MASKED_SELECT, (op_val[]){OPV_T(x), OPV_T(m)}, 2, o, 1);
  sample_check_vals("masked_select", o[0], VALS(1, 3, 4, 6), 0);
  kiln_tensor *m2 = kiln_from_data((bool[]){true, false, true, false, true, false}, 2, S23,
                                   KILN_DTYPE_BOOL);
  run("masked_scatter", KILN_OP_MASKED_SCATTER, (op_val[]){OPV_T(x), OPV_T(m2), OPV_T(src)}, 3, o, 1);
  sample_check_vals("masked_scatter", o[0], VALS(10, 2, 20, 4, 30, 6), 0);
  run("put", KILN_OP_PUT, (op_val[]){OPV_T(x), OPV_T(i64(1, (int64_t[]){3}, (int64_t[]){5, 0, -1})),
      OPV_T(f32(1, (int64_t[]){3}, (double[]){9, 8, 7})), OPV_B(true)}, 4, o, 1);
  sample_check_vals("put accumulate", o[0], VALS(9, 2, 3, 4, 5, 22), 0);
  run("argwhere", KILN_OP_ARGWHERE,
      (op_val[]){OPV_T(f32(2, (int64_t[]){2, 2}, (double[]){0, 1, 2, 0}))}, 1, o, 1);
  sample_check_vals("argwhere", o[0], VALS(0, 1, 1, 0), 0);
  kiln_tensor *z = kiln_zeros(2, (int64_t[]){3, 4}, KILN_DTYPE_F32);
  run("diagonal_scatter", KILN_OP_DIAGONAL_SCATTER, (op_val[]){OPV_T(z),
      OPV_T(f32(1, (int64_t[]){3}, (double[]){1, 2, 3})), OPV_I(1), OPV_I(0), OPV_I(1)}, 5, o, 1);
  sample_check_vals("diagonal_scatter", o[0], VALS(0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3), 0);
  run("slice_scatter", KILN_OP_SLICE_SCATTER, (op_val[]){OPV_T(z),
      OPV_T(kiln_ones(2, (int64_t[]){3, 2}, KILN_DTYPE_F32)), OPV_I(1), OPV_I(1), OPV_NONE, OPV_I(2)},
      6, o, 1);
  sample_check_vals("slice_scatter", o[0], VALS(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1), 0);
  kiln_scope_end();
}

static void expect_error(const char *what, int rc, const char *op, const char *text) {
  const char *e = kiln_last_error();
  CHECK_MSG(rc < 0, "%s: succeeded", what);
  CHECK_MSG(e && strstr(e, op), "%s: \"%s\" does not name %s", what, e ? e : "", op);
  CHECK_MSG(e && strstr(e, text), "%s: \"%s\" does not say \"%s\"", what, e ? e : "", text);
  CHECK_MSG(e && !strchr(e, '\n'), "%s: more than one line: %s", what, e ? e : "");
}

TEST(sortidx_bad_arguments) {
  kiln_scope_begin();
  kiln_tensor *o[3];
  const int64_t S23[2] = {2, 3};
  kiln_tensor *x = kiln_zeros(2, S23, KILN_DTYPE_F32), *xi = kiln_zeros(2, S23, KILN_DTYPE_I64);
  kiln_tensor *e = kiln_zeros(2, (int64_t[]){2, 0}, KILN_DTYPE_F32);
  kiln_tensor *big = i64(2, S23, (int64_t[]){0, 5, 0, 0, 0, 0});
  expect_error("mode empty", op_call(KILN_OP_MODE, (op_val[]){OPV_T(e), OPV_I(1), OPV_B(false)}, 3, o, 3),
               "aten::mode", "empty");
  expect_error("mode dim", op_call(KILN_OP_MODE, (op_val[]){OPV_T(x), OPV_I(5), OPV_B(false)}, 3, o, 3),
               "aten::mode", "out of range");
  expect_error("bucketize 2-d", op_call(KILN_OP_BUCKETIZE, (op_val[]){OPV_T(x), OPV_T(x), OPV_B(false),
               OPV_B(false)}, 4, o, 3), "aten::bucketize", "boundaries tensor must be 1 dimension");
  expect_error("searchsorted side", op_call(KILN_OP_SEARCHSORTED, (op_val[]){OPV_T(x), OPV_T(x),
               OPV_B(false), OPV_B(false), OPV_S("up"), OPV_NONE}, 6, o, 3), "aten::searchsorted",
               "side can only be 'left' or 'right'");
  expect_error("searchsorted shape", op_call(KILN_OP_SEARCHSORTED, (op_val[]){OPV_T(x),
               OPV_T(kiln_zeros(2, (int64_t[]){3, 3}, KILN_DTYPE_F32)), OPV_B(false), OPV_B(false),
               OPV_NONE, OPV_NONE}, 6, o, 3), "aten::searchsorted", "first N-1 dimensions");
  expect_error("scatter_reduce reduce", op_call(KILN_OP_SCATTER_REDUCE, (op_val[]){OPV_T(x), OPV_I(0),
               OPV_T(xi), OPV_T(x), OPV_S("max"), OPV_B(true)}, 6, o, 3), "aten::scatter_reduce",
               "reduce argument must be either");
  expect_error("scatter_reduce range", op_call(KILN_OP_SCATTER_REDUCE, (op_val[]){OPV_T(x), OPV_I(0),
               OPV_T(big), OPV_T(x), OPV_S("sum"), OPV_B(true)}, 6, o, 3), "aten::scatter_reduce",
               "index 5 is out of bounds");
  expect_error("scatter_reduce dtype", op_call(KILN_OP_SCATTER_REDUCE, (op_val[]){OPV_T(x), OPV_I(0),
               OPV_T(xi), OPV_T(xi), OPV_S("sum"), OPV_B(true)}, 6, o, 3), "aten::scatter_reduce",
               "self.dtype to be equal to src.dtype");
  expect_error("index_reduce sum", op_call(KILN_OP_INDEX_REDUCE, (op_val[]){OPV_T(x), OPV_I(0),
               OPV_T(i64(1, (int64_t[]){2}, (int64_t[]){0, 1})), OPV_T(x), OPV_S("sum"), OPV_B(true)},
               6, o, 3), "aten::index_reduce", "reduce argument must be either prod");
  expect_error("masked_select mask", op_call(KILN_OP_MASKED_SELECT, (op_val[]){OPV_T(x), OPV_T(x)}, 2,
               o, 3), "aten::masked_select", "expected BoolTensor for mask");
  kiln_tensor *all = kiln_full(2, S23, 1, KILN_DTYPE_BOOL);
  expect_error("masked_scatter short", op_call(KILN_OP_MASKED_SCATTER, (op_val[]){OPV_T(x), OPV_T(all),
               OPV_T(kiln_zeros(1, (int64_t[]){2}, KILN_DTYPE_F32))}, 3, o, 3), "aten::masked_scatter",
               "Number of elements of source < number of ones in mask");
  expect_error("put sizes", op_call(KILN_OP_PUT, (op_val[]){OPV_T(x), OPV_T(xi),
               OPV_T(kiln_zeros(1, (int64_t[]){2}, KILN_DTYPE_F32)), OPV_B(false)}, 4, o, 3),
               "aten::put", "same number of elements");
  expect_error("select_scatter shape", op_call(KILN_OP_SELECT_SCATTER, (op_val[]){OPV_T(x), OPV_T(x),
               OPV_I(0), OPV_I(1)}, 4, o, 3), "aten::select_scatter", "expected src to have a size equal");
  expect_error("as_strided_scatter bounds", op_call(KILN_OP_AS_STRIDED_SCATTER, (op_val[]){OPV_T(x),
               OPV_T(x), OPV_INTS(S23, 2), OPV_INTS(((int64_t[]){3, 1}), 2), OPV_I(1)}, 5, o, 3),
               "aten::as_strided_scatter", "out of bounds for storage of 6 elements");
  int64_t four[1] = {4}, huge[1] = {(int64_t)1 << 62}; /* (4 - 1) * 2^62 overflows int64 */
  expect_error("as_strided_scatter overflow", op_call(KILN_OP_AS_STRIDED_SCATTER, (op_val[]){OPV_T(x),
               OPV_T(kiln_zeros(1, four, KILN_DTYPE_F32)), OPV_INTS(four, 1), OPV_INTS(huge, 1),
               OPV_I(0)}, 5, o, 3), "aten::as_strided_scatter", "out of bounds for storage");
  kiln_scope_end();
}

/* At every allocation of each call, the op returns what a call that never
 * failed returns, or fails with an out-of-memory error (as
 * tests/ops/test_decompose_oom.c for the activations). */
static int oom_sweep(const char *what, int op, const op_val *a, int n) {
  kiln_tensor *want[3], *got[3];
  int nw = op_call(op, a, n, want, 3), hit = 0;
  CHECK_MSG(nw > 0, "%s: %s", what, kiln_last_error());
  for (long k = 1; nw > 0 && k < 20000; k++) {
    kiln_scope_begin();
    kiln_clear_error();
    core_alloc_fail_at(k);
    int ng = op_call(op, a, n, got, 3);
    long made = core_alloc_fail_at(0);
    if (ng > 0) {
      CHECK_MSG(ng == nw, "%s at %ld: %d outputs", what, k, ng);
      for (int j = 0; j < ng && j < nw; j++) {
        int64_t m = kiln_tensor_numel(want[j]);
        CHECK_MSG(kiln_tensor_numel(got[j]) == m, "%s at %ld: output %d numel", what, k, j);
        for (int64_t i = 0; i < m && kiln_tensor_numel(got[j]) == m; i++)
          CHECK_MSG(core_get_flat(got[j], i) == core_get_flat(want[j], i) ||
                        (isnan(core_get_flat(got[j], i)) && isnan(core_get_flat(want[j], i))),
                    "%s at %ld: output %d [%lld]", what, k, j, (long long)i);
      }
    } else {
      CHECK_MSG(made >= k && strstr(kiln_last_error(), "out of memory"), "%s at %ld: %s", what, k,
                kiln_last_error());
    }
    kiln_scope_end();
    if (made < k) break;
    hit++;
  }
  return hit;
}

TEST(sortidx_fail_cleanly_at_every_allocation) {
  kiln_scope_begin();
  const int64_t S23[2] = {2, 3};
  kiln_tensor *x = f32(2, S23, (double[]){1, 2, 2, 4, 5, 6});
  kiln_tensor *ix = i64(2, S23, (int64_t[]){0, 1, 0, 1, 1, 1});
  kiln_tensor *u = i64(2, S23, (int64_t[]){3, 1, 3, 1, 0, 3});
  kiln_tensor *m = kiln_from_data((bool[]){true, false, true}, 1, (int64_t[]){3}, KILN_DTYPE_BOOL);
  int total = 0;
  total += oom_sweep("mode", KILN_OP_MODE, (op_val[]){OPV_T(x), OPV_I(1), OPV_B(false)}, 3);
  total += oom_sweep("nanmedian", KILN_OP_NANMEDIAN_DIM, (op_val[]){OPV_T(x), OPV_I(0), OPV_B(true)}, 3);
  total += oom_sweep("searchsorted", KILN_OP_SEARCHSORTED, (op_val[]){OPV_T(x), OPV_T(x), OPV_B(false),
                     OPV_B(true), OPV_NONE, OPV_NONE}, 6);
  total += oom_sweep("unique", KILN_OP_UNIQUE2, (op_val[]){OPV_T(u), OPV_B(true), OPV_B(true),
                     OPV_B(true)}, 4);
  total += oom_sweep("unique_dim", KILN_OP_UNIQUE_DIM, (op_val[]){OPV_T(u), OPV_I(1), OPV_B(true),
                     OPV_B(true), OPV_B(true)}, 5);
  total += oom_sweep("scatter_reduce", KILN_OP_SCATTER_REDUCE, (op_val[]){OPV_T(x), OPV_I(0),
                     OPV_T(ix), OPV_T(x), OPV_S("amax"), OPV_B(true)}, 6);
  kiln_tensor *xg = kiln_clone(x);
  kiln_set_requires_grad(xg, true);
  total += oom_sweep("scatter_reduce grad", KILN_OP_SCATTER_REDUCE, (op_val[]){OPV_T(xg), OPV_I(0),
                     OPV_T(ix), OPV_T(x), OPV_S("prod"), OPV_B(false)}, 6);
  total += oom_sweep("masked_scatter", KILN_OP_MASKED_SCATTER, (op_val[]){OPV_T(x), OPV_T(m),
                     OPV_T(x)}, 3);
  total += oom_sweep("masked_select", KILN_OP_MASKED_SELECT, (op_val[]){OPV_T(x), OPV_T(m)}, 2);
  total += oom_sweep("diagonal_scatter", KILN_OP_DIAGONAL_SCATTER, (op_val[]){OPV_T(x),
                     OPV_T(f32(1, (int64_t[]){2}, (double[]){7, 8})), OPV_I(0), OPV_I(0), OPV_I(1)}, 5);
  total += oom_sweep("argwhere", KILN_OP_ARGWHERE, (op_val[]){OPV_T(x)}, 1);
  CHECK(total > 50);
  test_note("%d failure points over 11 calls", total);
  kiln_scope_end();
}
