/* src/core/dtype.c: element types and PyTorch's type-promotion lattice. */
#include "core.h"

static const size_t dtype_sizes[KILN_DTYPE_COUNT] = {4, 8, 8, 1, 4, 2, 1, 1, 2, 2};
static const char *const dtype_names[KILN_DTYPE_COUNT] = {
    "Float", "Double", "Long", "Bool", "Int", "Short", "Char", "Byte", "Half", "BFloat16"};

size_t kiln_dtype_size(kiln_dtype dt) {
  return (unsigned)dt < KILN_DTYPE_COUNT ? dtype_sizes[dt] : 0;
}

const char *kiln_dtype_name(kiln_dtype dt) {
  return (unsigned)dt < KILN_DTYPE_COUNT ? dtype_names[dt] : "?";
}

bool core_dtype_is_floating(kiln_dtype dt) {
  return dt == KILN_DTYPE_F32 || dt == KILN_DTYPE_F64 || dt == KILN_DTYPE_F16 ||
         dt == KILN_DTYPE_BF16;
}

bool core_dtype_is_integral(kiln_dtype dt) {
  return dt == KILN_DTYPE_I64 || dt == KILN_DTYPE_I32 || dt == KILN_DTYPE_I16 ||
         dt == KILN_DTYPE_I8 || dt == KILN_DTYPE_U8;
}

bool core_dtype_is_extended(kiln_dtype dt) { return dt > KILN_DTYPE_BOOL; }

kiln_dtype core_dtype_compute(kiln_dtype dt) {
  if (dt == KILN_DTYPE_F16 || dt == KILN_DTYPE_BF16) return KILN_DTYPE_F32;
  if (core_dtype_is_integral(dt)) return KILN_DTYPE_I64;
  return dt;
}

/* Note [Promotion]: torch.promote_types, checked over every pair against
 * PyTorch 1.13 (tests/core/test_dtype.c, golden table from
 * scripts/golden/dtypes.py). By category bool < integer < floating the
 * higher one wins; within integers the wider, except that uint8 with a
 * signed type needs one more bit (uint8 + int8 = int16); within floating
 * types the wider, except that float16 with bfloat16 is float32. */
kiln_dtype kiln_promote_types(kiln_dtype a, kiln_dtype b) {
  if (a == b) return a;
  if (a == KILN_DTYPE_BOOL) return b;
  if (b == KILN_DTYPE_BOOL) return a;
  bool fa = core_dtype_is_floating(a), fb = core_dtype_is_floating(b);
  if (fa != fb) return fa ? a : b;
  if (fa) {
    if ((a == KILN_DTYPE_F16 && b == KILN_DTYPE_BF16) ||
        (a == KILN_DTYPE_BF16 && b == KILN_DTYPE_F16))
      return KILN_DTYPE_F32;
    return kiln_dtype_size(a) >= kiln_dtype_size(b) ? a : b;
  }
  if (a == KILN_DTYPE_U8 || b == KILN_DTYPE_U8) {
    kiln_dtype s = a == KILN_DTYPE_U8 ? b : a; /* signed */
    return s == KILN_DTYPE_I8 ? KILN_DTYPE_I16 : s;
  }
  return kiln_dtype_size(a) >= kiln_dtype_size(b) ? a : b;
}
