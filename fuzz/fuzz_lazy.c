/* fuzz/fuzz_lazy.c: libFuzzer target for lazy recording and mark_step, a
 * differential oracle against eager. The input builds 1 to 3 small
 * float32 tensors (shapes from its first bytes, values from a generator)
 * and then a sequence of ops (4 bytes each: op, operand, operand, an
 * argument such as a dim, which may be out of range) applied to the
 * eager tensors and to lazy copies of them. An op that eager accepts the
 * lazy recording must accept (one eager refuses may be recorded and fail
 * later); every refusal must set a message; after kiln_mark_step every
 * lazy result must equal its eager one (NaN with NaN, infinities exactly,
 * else within 1e-4 of the values' scale). abort() on any disagreement, so
 * the fuzzer reports it. Run with `make fuzz`; with FUZZ_OOM=1 (fuzz_oom.h)
 * an allocation fails, and the oracle only asks that a failure say why. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kiln.h"
#include "fuzz_oom.h"

#define POOL 16
#define MAX_OPS 24
#define N_OPS 24

/* Op k on (a, b) with argument p; NULL with the error set if refused. */
static kiln_tensor *apply(int k, kiln_tensor *a, kiln_tensor *b, int p) {
  int nd = kiln_tensor_ndim(a);
  int dim = p % 7 - 3; /* -3..3: negative dims and out-of-range ones */
  int64_t d1[1] = {dim};
  switch (k) {
  case 0: return kiln_add(a, b);
  case 1: return kiln_sub(a, b);
  case 2: return kiln_mul(a, b);
  case 3: return kiln_div(a, b);
  case 4: return kiln_maximum(a, b);
  case 5: return kiln_neg(a);
  case 6: return kiln_relu(a);
  case 7: return kiln_tanh(a);
  case 8: return kiln_exp(a);
  case 9: return kiln_sigmoid(a);
  case 10: return kiln_mul_scalar(a, (p - 128) / 16.0);
  case 11: return kiln_sum(a, d1, 1, p & 1);
  case 12: return kiln_transpose(a, dim, (p >> 3) % 7 - 3);
  case 13: return kiln_matmul(a, b);
  case 14: return kiln_softmax(a, dim);
  case 15: return kiln_unsqueeze(a, dim);
  case 16: return kiln_clamp(a, -(p % 4) / 2.0, (p >> 2) % 4 / 2.0);
  case 17: {
    kiln_tensor *c = kiln_gt(a, b);
    return c ? kiln_where(c, a, b) : NULL;
  }
  case 18: return kiln_select(a, dim, (p >> 3) % 4 - 1);
  case 19: {
    int64_t flat[1] = {kiln_tensor_numel(a)};
    return kiln_reshape(a, 1, flat);
  }
  case 20: return kiln_mean(a, d1, 1, p & 1);
  case 21: return kiln_abs(a);
  case 22: return kiln_log_softmax(a, dim);
  case 23: return nd ? kiln_narrow(a, dim, (p >> 3) % 3, 1) : kiln_clone(a);
  }
  return NULL;
}

static bool same(kiln_tensor *e, kiln_tensor *l) {
  int nd = kiln_tensor_ndim(e);
  if (nd != kiln_tensor_ndim(l) ||
      memcmp(kiln_tensor_shape(e), kiln_tensor_shape(l), (size_t)nd * sizeof(int64_t)) != 0)
    return false;
  int64_t n = kiln_tensor_numel(e);
  float *x = malloc((size_t)(n ? n : 1) * sizeof *x), *y = malloc((size_t)(n ? n : 1) * sizeof *y);
  bool ok = x && y && kiln_tensor_copy_to(e, x, KILN_DTYPE_F32) == 0 &&
            kiln_tensor_copy_to(l, y, KILN_DTYPE_F32) == 0;
  double scale = 1;
  for (int64_t i = 0; ok && i < n; i++)
    if (isfinite(x[i]) && fabs(x[i]) > scale) scale = fabs(x[i]);
  for (int64_t i = 0; ok && i < n; i++) {
    if (isnan(x[i]) || isinf(x[i])) ok = isnan(x[i]) ? isnan(y[i]) : x[i] == y[i];
    else ok = fabs((double)x[i] - y[i]) <= 1e-4 * scale;
  }
  free(x);
  free(y);
  return ok;
}

static int fuzz_one(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t at = 0;
  int n0 = data[at++] % 3 + 1;
  kiln_tensor *eg[POOL], *lz[POOL];
  int n = 0;
  kiln_generator *gen = kiln_generator_new(size);
  int rc = 0;
  if (!gen) return fuzz_oom ? -1 : (abort(), 0);
  core_alloc_limit((size_t)64 << 20);
  kiln_scope_begin();
  for (int i = 0; i < n0; i++) {
    int nd = at < size ? data[at++] % 4 : 1; /* 0-d to 3-d */
    int64_t shape[3];
    for (int d = 0; d < nd; d++) shape[d] = at < size ? data[at++] % 4 + 1 : 2;
    eg[n] = kiln_randn(nd, shape, KILN_DTYPE_F32, gen);
    lz[n] = eg[n] ? kiln_to_lazy(eg[n]) : NULL;
    if (!eg[n] || !lz[n]) {
      if (!fuzz_oom) abort();
      rc = -1;
      goto out;
    }
    n++;
  }
  for (int op = 0; op < MAX_OPS && at + 4 <= size && n < POOL; op++, at += 4) {
    int k = data[at] % N_OPS, ia = data[at + 1] % n, ib = data[at + 2] % n, p = data[at + 3];
    kiln_clear_error();
    kiln_tensor *e = apply(k, eg[ia], eg[ib], p);
    if (!e && !kiln_last_error()[0]) abort(); /* a refusal must say why */
    kiln_clear_error();
    kiln_tensor *l = apply(k, lz[ia], lz[ib], p);
    if (!l && !kiln_last_error()[0]) abort();
    if (e && !l && !fuzz_oom) abort(); /* lazy refused what eager did */
    if (e && !l) {
      rc = -1;
      goto out;
    }
    if (!e) continue;     /* (lazy may record it and fail at the step) */
    eg[n] = e;
    lz[n] = l;
    n++;
  }
  if (kiln_mark_step() < 0) { /* everything recorded was accepted by eager */
    if (!fuzz_oom) abort();
    rc = -1;
    goto out;
  }
  for (int i = 0; i < n; i++) {
    kiln_tensor *c = kiln_to_cpu(lz[i]);
    if (fuzz_oom && !c) {
      rc = -1;
      break;
    }
    if (!c || (!fuzz_oom && !same(eg[i], c))) abort();
  }
out:
  kiln_scope_end();
  core_alloc_limit(0);
  kiln_generator_free(gen);
  return rc;
}
