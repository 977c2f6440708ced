/* tests/ops/test_fill.c: fill, zero and copy (src/ops/fill.c) and their
 * derived in-place forms fill_, zero_, copy_ (Note [In-place variants]):
 * values, dtypes kept, broadcasting, and gradcheck samples. */
#include "sample.h"
#include "test.h"

OP_SAMPLE(FILL, value) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){2, 3}));
  s->args[1] = OPV_F(1.5);
  s->n_args = 2;
}

OP_SAMPLE(ZERO, plain) {
  s->args[0] = OPV_T(sample_randn(g, 1, (int64_t[]){4}));
  s->n_args = 1;
}

OP_SAMPLE(COPY, broadcast) {
  s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){2, 3}));
  s->args[1] = OPV_T(sample_randn(g, 1, (int64_t[]){3}));
  s->args[2] = OPV_B(false);
  s->n_args = 3;
}

TEST(fill_zero_copy_in_place) {
  kiln_scope_begin();
  int64_t s2[2] = {2, 3}, s1[1] = {3};
  int64_t iv[6] = {1, 2, 3, 4, 5, 6};
  kiln_tensor *x = kiln_from_data(iv, 2, s2, KILN_DTYPE_I64);
  /* torch: x.fill_(2.7) on int64 gives 2 (cast), zero_ zeros, copy_ broadcasts and casts */
  CHECK(op_call1(KILN_OP_INPLACE(KILN_OP_FILL), (op_val[]){OPV_T(x), OPV_F(2.7)}, 2) == x);
  CHECK(kiln_tensor_dtype(x) == KILN_DTYPE_I64 && core_get_flat(x, 5) == 2);
  double dv[3] = {-1.5, 0.25, 9.75};
  kiln_tensor *row = kiln_from_data(dv, 1, s1, KILN_DTYPE_F64);
  CHECK(op_call1(KILN_OP_INPLACE(KILN_OP_COPY), (op_val[]){OPV_T(x), OPV_T(row), OPV_B(false)}, 3) == x);
  CHECK(core_get_flat(x, 0) == -1 && core_get_flat(x, 4) == 0 && core_get_flat(x, 5) == 9);
  CHECK(op_call1(KILN_OP_INPLACE(KILN_OP_ZERO), (op_val[]){OPV_T(x)}, 1) == x);
  for (int i = 0; i < 6; i++) CHECK(core_get_flat(x, i) == 0);
  /* copy_ never grows self */
  kiln_tensor *small = kiln_zeros(1, s1, KILN_DTYPE_F64), *big = kiln_ones(2, s2, KILN_DTYPE_F64);
  CHECK(op_call1(KILN_OP_INPLACE(KILN_OP_COPY), (op_val[]){OPV_T(small), OPV_T(big), OPV_B(false)}, 3) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "cannot be broadcast");
  kiln_scope_end();
}

/* Note [In-place variants]: every derived entry is an in-place form of
 * its functional op, with alias info from its derived schema. */
TEST(inplace_entries_derived_from_the_table) {
  int n = 0;
  for (int op = 0; op < KILN_OP_COUNT; op++) {
    int ip = KILN_OP_INPLACE(op);
    bool has = op_table[op].flags & OPF_HAS_INPLACE;
    CHECK_MSG(!has == !op_table[ip].name, "%s: in-place entry iff OPF_HAS_INPLACE", op_table[op].name);
    CHECK(!op_writes_arg(op, 0) || strstr(op_schema_text(op), "!)"));
    if (!has) continue;
    n++;
    char want[64];
    snprintf(want, sizeof want, "%s_", op_table[op].name);
    CHECK_MSG(strcmp(op_table[ip].name, want) == 0, "%s", op_table[ip].name);
    /* by name and arity: this entry, or the first overload of the same
     * arity (masked_fill_.Scalar before .Tensor; the IR resolves them by
     * argument types, tested in ir_inplace_overloads_resolve_by_type) */
    int found = op_find_arity(want, op_table[op].n_args);
    CHECK_MSG(found == ip || (found >= KILN_OP_COUNT && found < ip &&
                              strcmp(op_table[found].name, want) == 0),
              "%s: not found by name", want);
    CHECK_MSG(op_table[ip].flags & OPF_INPLACE, "%s: no OPF_INPLACE", want);
    CHECK_MSG(strstr(op_schema_text(ip), "(Tensor(a!) ") &&
                  strstr(op_schema_text(ip), ") -> Tensor(a!)"),
              "%s: schema %s", want, op_schema_text(ip));
    CHECK_MSG(op_writes_arg(ip, 0) && op_written_args(ip) == 1 && op_output_alias(ip, 0) == 0,
              "%s: alias info", want);
    CHECK(op_schema_n_args(ip) == op_schema_n_args(op));
  }
  CHECK(op_output_alias(KILN_OP_VIEW, 0) == 0 && op_output_alias(KILN_OP_RELU, 0) == -1);
  CHECK(op_output_alias(KILN_OP_CHUNK, 0) == 0 && op_written_args(KILN_OP_VIEW) == 0);
  CHECK_EQ_INT(strcmp(op_schema_text(KILN_OP_INPLACE(KILN_OP_ADD)),
                      "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"),
               0);
  test_note("%d in-place forms", n);
}

/* PyTorch's in-place cast rule: the result must cast to self's dtype. */
TEST(inplace_cast_rule) {
  kiln_scope_begin();
  int64_t s[1] = {2};
  int64_t iv[2] = {1, 2};
  float fv[2] = {0.5f, 1.5f};
  kiln_tensor *i = kiln_from_data(iv, 1, s, KILN_DTYPE_I64), *f = kiln_from_data(fv, 1, s, KILN_DTYPE_F32);
  CHECK(op_call1(KILN_OP_INPLACE(KILN_OP_ADD), (op_val[]){OPV_T(i), OPV_T(f), OPV_I(1)}, 3) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "result type Float can't be cast to the desired output type Long");
  CHECK(op_call1(KILN_OP_INPLACE(KILN_OP_SIGMOID), (op_val[]){OPV_T(i)}, 1) == NULL); /* float result */
  CHECK_STR_CONTAINS(kiln_last_error(), "can't be cast");
  /* int into float is fine: torch gives [1.5, 3.5] */
  CHECK(op_call1(KILN_OP_INPLACE(KILN_OP_ADD), (op_val[]){OPV_T(f), OPV_T(i), OPV_I(1)}, 3) == f);
  CHECK(core_get_flat(f, 0) == 1.5 && core_get_flat(f, 1) == 3.5 && kiln_tensor_dtype(f) == KILN_DTYPE_F32);
  /* a comparison's bool result casts into a float self: torch gives [0., 1.] */
  CHECK(op_call1(KILN_OP_INPLACE(KILN_OP_GT), (op_val[]){OPV_T(f), OPV_F(2.0)}, 2) == f);
  CHECK(core_get_flat(f, 0) == 0 && core_get_flat(f, 1) == 1);
  kiln_scope_end();
}

/* hardtanh_ and hardswish_ (MobileNet's ReLU6 and Hardswish, inplace=True)
 * write their functional op's result into self, which they return: values
 * by hand (hardtanh(x, 0, 6) = clamp(x, 0, 6); hardswish(x) =
 * x * clamp(x + 3, 0, 6) / 6). */
TEST(inplace_hardtanh_hardswish_values) {
  kiln_scope_begin();
  static const double xs[6] = {-4, -1.5, 0, 2, 5, 7};
  int64_t n = 6;
  int ht = op_find_arity("aten::hardtanh_", 3), hs = op_find_arity("aten::hardswish_", 1);
  CHECK(ht >= 0 && hs >= 0);
  if (ht >= 0 && hs >= 0) {
    kiln_tensor *a = kiln_from_data(xs, 1, &n, KILN_DTYPE_F64);
    kiln_tensor *b = kiln_from_data(xs, 1, &n, KILN_DTYPE_F64);
    kiln_tensor *out[1] = {NULL};
    op_val args[3] = {OPV_T(a), OPV_F(0.0), OPV_F(6.0)};
    CHECK_EQ_INT(op_call(ht, args, 3, out, 1), 1);
    CHECK(out[0] == a || (out[0] && kiln_tensor_data(out[0]) == kiln_tensor_data(a)));
    op_val args2[1] = {OPV_T(b)};
    CHECK_EQ_INT(op_call(hs, args2, 1, out, 1), 1);
    const double *pa = kiln_tensor_data(a), *pb = kiln_tensor_data(b);
    for (int i = 0; i < 6; i++) {
      double c = xs[i] < 0 ? 0 : xs[i] > 6 ? 6 : xs[i];
      double r = xs[i] + 3 < 0 ? 0 : xs[i] + 3 > 6 ? 6 : xs[i] + 3;
      CHECK_NEAR(pa[i], c, 0);
      CHECK_NEAR(pb[i], xs[i] * r / 6, 1e-15);
    }
  }
  kiln_scope_end();
}
