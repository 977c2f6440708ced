/* tests/ops/dtype_data.h: reading the token format of tests/data/dtypes
 * (scripts/golden/dtypes.py), shared by test_dtypes.c and
 * test_dtype_widen.c; defined in test_dtypes.c. */
#ifndef KILN_TESTS_DTYPE_DATA_H
#define KILN_TESTS_DTYPE_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/op.h"

/* The dtype named by s[0..n), or -1. */
int test_dtype_by_name(const char *s, size_t n);
/* "T:<dtype>:<RxC | s>:<hex,...>" -> a new tensor (autoreleased), or NULL. */
kiln_tensor *test_dtype_parse_tensor(const char *tok);
/* One argument token (T:, I:, F:, B:, L:, N) into v; ints is L:'s room. */
bool test_dtype_parse_arg(const char *tok, op_val *v, int64_t *ints);

#endif
