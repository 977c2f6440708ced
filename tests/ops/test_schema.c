/* tests/ops/test_schema.c: the schema strings parse, agree with n_args, and
 * name PyTorch's argument types. */
#include "ops/op.h"
#include "test.h"

TEST(schema_arity_matches_table) {
  for (int op = 0; op < KILN_OP_COUNT; op++)
    CHECK_MSG(op_schema_n_args(op) == op_table[op].n_args, "%s: schema has %d args, table says %d",
              op_table[op].name, op_schema_n_args(op), op_table[op].n_args);
}

TEST(schema_arg_types) {
  CHECK(op_arg_is_scalar(KILN_OP_ADD, 2));
  CHECK(!op_arg_is_scalar(KILN_OP_ADD, 1));
  CHECK(strcmp(op_arg_type(KILN_OP_SUM, 1), "int[1]?") == 0);
  CHECK(strcmp(op_arg_type(KILN_OP_VIEW, 0), "Tensor") == 0);
  CHECK(strcmp(op_arg_name(KILN_OP_ADDMM, 3), "beta") == 0);
  CHECK(strcmp(op_arg_default(KILN_OP_ADDMM, 3), "1") == 0);
  CHECK(op_arg_default(KILN_OP_MM, 0) == NULL);
  CHECK(op_arg_is_scalar(KILN_OP_CLAMP, 1));
  CHECK(strcmp(op_arg_type(KILN_OP_CAT, 0), "Tensor[]") == 0);
}
