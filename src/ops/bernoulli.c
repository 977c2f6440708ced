/* src/ops/bernoulli.c: aten::bernoulli.p and, derived, bernoulli_.float
 * (torchvision's StochasticDepth fills torch.empty with bernoulli_):
 * each element 1 with probability p, else 0, from the default generator. */
#include "op.h"

/* bernoulli(self, p, generator): self's shape and a floating dtype;
 * 0 <= p <= 1; a generator other than None is not supported */
int op_bernoulli_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::bernoulli";
  char d[160];
  (void)n;
  if (m < 1) return core_error(KILN_ERR_INVALID, "%s: no room for the result", fn);
  if (a[0].tag != OP_VAL_TENSOR || !core_dtype_is_floating(a[0].t->dtype))
    return core_error(KILN_ERR_INVALID, "%s: self must be a Float or Double tensor, got %s", fn,
                      op_val_desc(&a[0], d, sizeof d));
  if (!op_val_is_num(&a[1]) || !(op_val_num(&a[1]) >= 0 && op_val_num(&a[1]) <= 1))
    return core_error(KILN_ERR_INVALID, "%s: p must be in [0, 1], got %s", fn,
                      op_val_desc(&a[1], d, sizeof d));
  if (a[2].tag != OP_VAL_NONE)
    return core_error(KILN_ERR_UNSUPPORTED, "%s: only the default generator is supported", fn);
  op_meta_of(a[0].t, &o[0]);
  return 1;
}

int op_bernoulli_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  (void)n;
  (void)m;
  kiln_tensor *out = o[0];
  int64_t numel = kiln_tensor_numel(out);
  double p = op_val_num(&a[1]);
  kiln_generator *gen = core_op_generator();
  bool held = core_rand_hold(gen); /* one lock for the tensor, not one per draw */
  if (out->dtype == KILN_DTYPE_F32) {
    float *x = core_data(out);
    for (int64_t i = 0; i < numel; i++) x[i] = core_rand_double_held(gen) < p ? 1.0f : 0.0f;
  } else {
    double *x = core_data(out);
    for (int64_t i = 0; i < numel; i++) x[i] = core_rand_double_held(gen) < p ? 1.0 : 0.0;
  }
  core_rand_release(held);
  return 0;
}
