/* tests/ops/test_decompose_oom.c: decompositions under allocation failure
 * (issue #20, found by `make fuzz FUZZ_OOM=1` on aten::log_sigmoid). OPV_T
 * was a macro naming its argument twice, so OPV_T(kiln_exp(a)) ran exp
 * twice, and when the second run failed made a TENSOR argument holding
 * NULL (a NULL dereference in dispatch). At every allocation of each op
 * below, the call returns the value of a call that never failed, or NULL
 * with an out-of-memory error. */
#include <math.h>

#include "core/core.h"
#include "ops/op.h"
#include "test.h"

/* Every allocation of op(x, rest...) fails in turn, x the 6 values below;
 * the number of failure points. */
static int sweep_args(int op, const op_val *rest, int n_args) {
  kiln_scope_begin();
  kiln_tensor *x = kiln_from_data((float[]){-3.5f, -0.25f, 0.0f, 0.75f, 4.0f, 30.0f}, 1,
                                  (int64_t[]){6}, KILN_DTYPE_F32);
  op_val args[4] = {OPV_T(x)};
  for (int i = 1; i < n_args; i++) args[i] = rest[i - 1];
  kiln_tensor *want = op_call1(op, args, n_args);
  CHECK(want != NULL);
  int hit = 0;
  for (long k = 1; want && k < 10000; k++) {
    kiln_scope_begin();
    kiln_clear_error();
    core_alloc_fail_at(k);
    kiln_tensor *got = op_call1(op, args, n_args);
    long made = core_alloc_fail_at(0);
    if (got) {
      for (int i = 0; i < 6; i++)
        CHECK_MSG(core_get_flat(got, i) == core_get_flat(want, i), "%s at %ld: [%d] %g vs %g",
                  op_table[op].name, k, i, core_get_flat(got, i), core_get_flat(want, i));
    } else {
      CHECK_MSG(made >= k && strstr(kiln_last_error(), "out of memory"), "%s at %ld: %s",
                op_table[op].name, k, kiln_last_error());
    }
    kiln_scope_end();
    if (made < k) break;
    hit++;
  }
  kiln_scope_end();
  return hit;
}

static int sweep(int op, int n_args) {
  /* self, then each Scalar at 1 (softplus's threshold 20) */
  op_val rest[3] = {OPV_F(1.0), OPV_F(op == KILN_OP_SOFTPLUS ? 20.0 : 1.0), OPV_F(1.0)};
  return sweep_args(op, rest, n_args);
}

/* Found by `make fuzz FUZZ_OOM=1` (fuzz_run): logcumsumexp passed a failed
 * exp's NULL on to its cumsum, which read it (UBSan: member access within
 * a null pointer, src/ops/sort.c). The scans, along dim 0. */
TEST(scans_fail_cleanly_at_every_allocation) {
  static const int ops[] = {KILN_OP_LOGCUMSUMEXP, KILN_OP_CUMSUM, KILN_OP_CUMPROD};
  int total = 0;
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
    op_val dim[2] = {OPV_I(0), OPV_NONE};
    int h = sweep_args(ops[i], dim, ops[i] == KILN_OP_LOGCUMSUMEXP ? 2 : 3);
    CHECK_MSG(h >= 2, "%s: %d failure points", op_table[ops[i]].name, h);
    total += h;
  }
  test_note("%d failure points over 3 scans", total);
}

TEST(decompositions_fail_cleanly_at_every_allocation) {
  static const int ops[] = {KILN_OP_LOG_SIGMOID, KILN_OP_SOFTPLUS, KILN_OP_MISH, KILN_OP_ELU,
                            KILN_OP_CELU, KILN_OP_SELU}, n_args[] = {1, 3, 1, 4, 2, 1};
  int total = 0;
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
    int h = sweep(ops[i], n_args[i]);
    CHECK_MSG(h >= 3, "%s: %d failure points", op_table[ops[i]].name, h);
    total += h;
  }
  test_note("%d failure points over 6 ops", total);
}

/* Found by `make fuzz FUZZ_OOM=1` (fuzz_run, fuzz/seeds/run/oom-diagflat.ir):
 * diagflat passed a failed reshape's NULL on to diag_embed, which read its
 * ndim (UBSan: member access within a null pointer, src/ops/math_extra.c).
 * diagflat(x, 1) of 6 values is [7, 7]; its first row is 0, x[0], 0, ... */
TEST(diagflat_and_diag_embed_fail_cleanly_at_every_allocation) {
  op_val flat[1] = {OPV_I(1)}, embed[3] = {OPV_I(-1), OPV_I(0), OPV_I(1)};
  int h = sweep_args(KILN_OP_DIAGFLAT, flat, 2);
  CHECK_MSG(h >= 3, "diagflat: %d failure points", h);
  int h2 = sweep_args(KILN_OP_DIAG_EMBED, embed, 4);
  CHECK_MSG(h2 >= 3, "diag_embed: %d failure points", h2);
  test_note("%d + %d failure points", h, h2);
}

/* Found by `make fuzz FUZZ_OOM=1` (fuzz_run, seed
 * fuzz/seeds/run/trapz_oom_conversion.ir): the trapezoid rules went on
 * with the NULL of a failed integer-to-float conversion (UBSan: a null
 * dereference in src/ops/math_extra.c). An int16 input, dx 3, the last
 * dim: at every allocation the value of a call that never failed, or NULL
 * with an out-of-memory error. */
TEST(trapezoid_rules_fail_cleanly_at_every_allocation) {
  static const int ops[] = {KILN_OP_TRAPZ, KILN_OP_TRAPEZOID, KILN_OP_CUMULATIVE_TRAPEZOID};
  int total = 0;
  for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
    kiln_scope_begin();
    kiln_tensor *x = kiln_from_data((int16_t[]){1, -2, 3, 4, 5, -6}, 2, (int64_t[]){2, 3},
                                    KILN_DTYPE_I16);
    op_val args[3] = {OPV_T(x), OPV_F(3.0), OPV_I(-1)};
    kiln_tensor *want = op_call1(ops[o], args, 3);
    CHECK_MSG(want != NULL, "%s: %s", op_table[ops[o]].name, kiln_last_error());
    for (long k = 1; want && k < 10000; k++) {
      kiln_scope_begin();
      kiln_clear_error();
      core_alloc_fail_at(k);
      kiln_tensor *got = op_call1(ops[o], args, 3);
      long made = core_alloc_fail_at(0);
      if (got) {
        for (int64_t i = 0; i < kiln_tensor_numel(want); i++)
          CHECK_MSG(core_get_flat(got, i) == core_get_flat(want, i), "%s at %ld: [%lld]",
                    op_table[ops[o]].name, k, (long long)i);
      } else {
        CHECK_MSG(made >= k && strstr(kiln_last_error(), "out of memory"), "%s at %ld: %s",
                  op_table[ops[o]].name, k, kiln_last_error());
      }
      kiln_scope_end();
      if (made < k) break;
      total++;
    }
    kiln_scope_end();
  }
  CHECK(total > 6);
}

/* Found by `make fuzz FUZZ_OOM=1` (fuzz_run, seed
 * fuzz/seeds/run/rot90_oom.ir): rot90 with k = 2 flipped the NULL of a
 * failed first flip (UBSan: member access within a null pointer, flip1 in
 * src/ops/shape_extra.c); flip over two dims had the same chain, and roll
 * without dims rolled a failed reshape's NULL. A Short
 * [3, 4, 5] input (its flips widen nothing): at every allocation the
 * value of a call that never failed, or NULL with an out-of-memory error. */
TEST(rot90_flip_and_roll_fail_cleanly_at_every_allocation) {
  int total = 0;
  /* rot90 k = 1, 2, 3; flip(dims = [0, 2]); roll of the flattened
   * transpose (its reshape copies: the same bug in roll1) */
  for (int v = 0; v < 5; v++) {
    kiln_scope_begin();
    int16_t data[60];
    for (int i = 0; i < 60; i++) data[i] = (int16_t)(i * 7 - 100);
    kiln_tensor *x = kiln_from_data(data, 3, (int64_t[]){3, 4, 5}, KILN_DTYPE_I16);
    static const int64_t dims[2] = {0, 2}, shift[1] = {7};
    op_val args[3] = {OPV_T(x), OPV_I(v + 1), OPV_INTS(dims, 2)};
    int op = v < 3 ? KILN_OP_ROT90 : v == 3 ? KILN_OP_FLIP : KILN_OP_ROLL;
    if (v == 3) args[1] = OPV_INTS(dims, 2);
    if (v == 4) {
      args[0] = OPV_T(kiln_transpose(x, 0, 2));
      args[1] = OPV_INTS(shift, 1);
      args[2] = OPV_INTS(dims, 0);
    }
    int na = v == 3 ? 2 : 3;
    kiln_tensor *want = op_call1(op, args, na);
    CHECK_MSG(want != NULL, "%s: %s", op_table[op].name, kiln_last_error());
    for (long k = 1; want && k < 10000; k++) {
      kiln_scope_begin();
      kiln_clear_error();
      core_alloc_fail_at(k);
      kiln_tensor *got = op_call1(op, args, na);
      long made = core_alloc_fail_at(0);
      if (got) {
        CHECK(kiln_tensor_numel(got) == 60);
        for (int64_t i = 0; i < 60 && kiln_tensor_numel(got) == 60; i++)
          CHECK_MSG(core_get_flat(got, i) == core_get_flat(want, i), "%s %d at %ld: [%lld]",
                    op_table[op].name, v, k, (long long)i);
      } else {
        CHECK_MSG(made >= k && strstr(kiln_last_error(), "out of memory"), "%s %d at %ld: %s",
                  op_table[op].name, v, k, kiln_last_error());
      }
      kiln_scope_end();
      if (made < k) break;
      total++;
    }
    kiln_scope_end();
  }
  CHECK(total > 8);
  test_note("%d failure points", total);
}
