/* tests/ops/test_bernoulli.c: aten::empty (kiln's are zeros) and
 * aten::bernoulli / bernoulli_ (torchvision's StochasticDepth): shapes,
 * dtypes, the p = 0 and p = 1 ends exactly, the rate of a middle p within
 * 5 standard deviations, in-place writes, and bad p. */
#include <math.h>

#include "sample.h"
#include "test.h"

TEST(bernoulli_and_empty) {
  kiln_scope_begin();
  int em = op_find_arity("aten::empty", 6), be = op_find_arity("aten::bernoulli", 3);
  int bi = op_find_arity("aten::bernoulli_", 3);
  CHECK(em >= 0 && be >= 0 && bi >= 0);
  if (em >= 0 && be >= 0 && bi >= 0) {
    int64_t sz[2] = {100, 100};
    kiln_tensor *e[1] = {NULL};
    op_val ea[6] = {OPV_INTS(sz, 2), OPV_I(7) /* torch.float64 */, OPV_NONE, OPV_NONE, OPV_NONE,
                    OPV_NONE};
    CHECK_EQ_INT(op_call(em, ea, 6, e, 1), 1);
    if (e[0]) {
      CHECK(kiln_tensor_dtype(e[0]) == KILN_DTYPE_F64 && kiln_tensor_numel(e[0]) == 10000);
      for (double p = 0; p <= 1; p += 0.3) {
        kiln_tensor *r[1] = {NULL};
        CHECK_EQ_INT(op_call(bi, (op_val[]){OPV_T(e[0]), OPV_F(p), OPV_NONE}, 3, r, 1), 1);
        CHECK(r[0] && kiln_tensor_data(r[0]) == kiln_tensor_data(e[0]));
        const double *v = kiln_tensor_data(e[0]);
        double ones = 0;
        bool binary = true;
        for (int i = 0; i < 10000; i++) {
          binary &= v[i] == 0 || v[i] == 1;
          ones += v[i];
        }
        CHECK(binary);
        CHECK_MSG(fabs(ones / 1e4 - p) <= 5 * sqrt(p * (1 - p) / 1e4), "p %g: rate %g", p, ones / 1e4);
      }
      kiln_tensor *r[1] = {NULL};
      CHECK_EQ_INT(op_call(be, (op_val[]){OPV_T(e[0]), OPV_F(1.0), OPV_NONE}, 3, r, 1), 1);
      CHECK(r[0] && kiln_tensor_data(r[0]) != kiln_tensor_data(e[0]) &&
            core_get_flat(r[0], 9999) == 1);
      CHECK(op_call(be, (op_val[]){OPV_T(e[0]), OPV_F(1.5), OPV_NONE}, 3, r, 1) < 0);
      CHECK_STR_CONTAINS(kiln_last_error(), "p must be in [0, 1]");
    }
  }
  kiln_scope_end();
}
