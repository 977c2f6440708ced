/* src/core/dtype.c: element types and PyTorch's type-promotion lattice. */
#include "core.h"

static const size_t dtype_sizes[KILN_DTYPE_COUNT] = {4, 8, 8, 1};
static const char *const dtype_names[KILN_DTYPE_COUNT] = {"Float", "Double",
                                                          "Long", "Bool"};

size_t kiln_dtype_size(kiln_dtype dt) {
  return (unsigned)dt < KILN_DTYPE_COUNT ? dtype_sizes[dt] : 0;
}

const char *kiln_dtype_name(kiln_dtype dt) {
  return (unsigned)dt < KILN_DTYPE_COUNT ? dtype_names[dt] : "?";
}

bool core_dtype_is_floating(kiln_dtype dt) {
  return dt == KILN_DTYPE_F32 || dt == KILN_DTYPE_F64;
}

/* Note [Promotion]: within the lattice bool < int64 < float32 < float64 the
 * result is the larger type, as torch.promote_types. */
kiln_dtype kiln_promote_types(kiln_dtype a, kiln_dtype b) {
  static const int rank[KILN_DTYPE_COUNT] = {2, 3, 1, 0};
  return rank[a] >= rank[b] ? a : b;
}
