/* src/ops/matrix_extra.c: matrix products written with matmul/mm/bmm and
 * elementwise ops: baddbmm, addbmm, addmv, addr, mv, dot, vdot, outer
 * (ger), inner, kron, tensordot. beta = 0 ignores self (NaN in it does not
 * propagate), as PyTorch. */
#include <string.h>

#include "op.h"

static int t2(const char *fn, const op_val *a, const char *n0, const char *n1, kiln_tensor **x,
              kiln_tensor **y) {
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], n0, x)) < 0 || (rc = op_arg_tensor(fn, &a[1], n1, y)) < 0)
    return rc;
  return 0;
}
static int need_dims(const char *fn, kiln_tensor *t, const char *name, int nd) {
  char d[64];
  if (t->ndim != nd)
    return core_error(KILN_ERR_INVALID, "%s: %s must be a %d-D tensor, got %s", fn, name, nd,
                      core_tensor_desc(t, d, sizeof d));
  return 0;
}

/* beta self + alpha prod */
static kiln_tensor *blend(const op_val *self, kiln_tensor *prod, const op_val *beta,
                          const op_val *alpha) {
  double b = op_val_is_num(beta) ? op_val_num(beta) : 1, al = op_val_is_num(alpha) ? op_val_num(alpha) : 1;
  if (!prod) return NULL;
  kiln_tensor *r = al == 1 ? prod : kiln_mul_scalar(prod, al);
  if (b == 0 || !r) return r;
  kiln_tensor *s = b == 1 ? self->t : kiln_mul_scalar(self->t, b);
  return s ? kiln_add(s, r) : NULL;
}

int op_mv_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *m, *v;
  int rc = t2("aten::mv", a, "self", "vec", &m, &v);
  if (rc < 0 || (rc = need_dims("aten::mv", m, "self", 2)) < 0 ||
      (rc = need_dims("aten::mv", v, "vec", 1)) < 0)
    return rc;
  return op_out1(kiln_matmul(m, v), outs);
}
int op_dot_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  char d[64], e[64];
  int rc = t2("aten::dot", a, "self", "tensor", &x, &y);
  if (rc < 0) return rc;
  if (x->ndim != 1 || y->ndim != 1)
    return core_error(KILN_ERR_INVALID, "aten::dot: 1D tensors expected, but got %dD and %dD "
                                        "tensors", x->ndim, y->ndim);
  if (x->shape[0] != y->shape[0])
    return core_error(KILN_ERR_INVALID, "aten::dot: inconsistent tensor size, expected tensor %s "
                      "and src %s to have the same number of elements", core_tensor_desc(x, d, 64),
                      core_tensor_desc(y, e, 64));
  if (x->dtype != y->dtype)
    return core_error(KILN_ERR_INVALID, "aten::dot: expected both vectors to have same dtype, but "
                      "found %s and %s", kiln_dtype_name(x->dtype), kiln_dtype_name(y->dtype));
  return op_out1(kiln_sum(kiln_mul(x, y), NULL, 0, false), outs);
}
int op_vdot_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_dot_decompose(a, n, outs, max);
}
int op_outer_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc = t2("aten::outer", a, "self", "vec2", &x, &y);
  if (rc < 0 || (rc = need_dims("aten::outer", x, "self", 1)) < 0 ||
      (rc = need_dims("aten::outer", y, "vec2", 1)) < 0)
    return rc;
  return op_out1(kiln_mul(kiln_unsqueeze(x, 1), kiln_unsqueeze(y, 0)), outs);
}
int op_ger_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  return op_outer_decompose(a, n, outs, max);
}
/* inner: contraction of the last dims */
int op_inner_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc = t2("aten::inner", a, "self", "other", &x, &y);
  if (rc < 0) return rc;
  if (x->ndim == 0 || y->ndim == 0) return op_out1(kiln_mul(x, y), outs);
  if (x->shape[x->ndim - 1] != y->shape[y->ndim - 1])
    return core_error(KILN_ERR_INVALID, "aten::inner: expected the last dimension of both inputs "
                      "to match, got %lld and %lld", (long long)x->shape[x->ndim - 1],
                      (long long)y->shape[y->ndim - 1]);
  /* x [..., k] @ y^T [k, ...] via reshape */
  int64_t k = x->shape[x->ndim - 1], fx[2] = {-1, k}, fy[2] = {-1, k};
  kiln_tensor *p = kiln_mm(kiln_reshape(x, 2, fx), kiln_t(kiln_reshape(y, 2, fy)));
  int64_t sh[KILN_MAX_DIMS];
  int nd = 0;
  for (int i = 0; i < x->ndim - 1; i++) sh[nd++] = x->shape[i];
  for (int i = 0; i < y->ndim - 1; i++) sh[nd++] = y->shape[i];
  if (nd > KILN_MAX_DIMS) return core_error(KILN_ERR_INVALID, "aten::inner: too many dims");
  return op_out1(p ? kiln_reshape(p, nd, sh) : NULL, outs);
}
int op_baddbmm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc = t2("aten::baddbmm", &a[1], "batch1", "batch2", &x, &y);
  if (rc < 0 || (rc = op_arg_tensor("aten::baddbmm", &a[0], "self", NULL)) < 0) return rc;
  return op_out1(blend(&a[0], kiln_bmm(x, y), &a[3], &a[4]), outs);
}
int op_addbmm_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc = t2("aten::addbmm", &a[1], "batch1", "batch2", &x, &y);
  if (rc < 0 || (rc = op_arg_tensor("aten::addbmm", &a[0], "self", NULL)) < 0) return rc;
  int64_t d0 = 0;
  kiln_tensor *p = kiln_bmm(x, y);
  return op_out1(blend(&a[0], p ? kiln_sum(p, &d0, 1, false) : NULL, &a[3], &a[4]), outs);
}
int op_addmv_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *m, *v;
  int rc = t2("aten::addmv", &a[1], "mat", "vec", &m, &v);
  if (rc < 0 || (rc = op_arg_tensor("aten::addmv", &a[0], "self", NULL)) < 0 ||
      (rc = need_dims("aten::addmv", m, "mat", 2)) < 0 ||
      (rc = need_dims("aten::addmv", v, "vec", 1)) < 0)
    return rc;
  return op_out1(blend(&a[0], kiln_matmul(m, v), &a[3], &a[4]), outs);
}
int op_addr_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc = t2("aten::addr", &a[1], "vec1", "vec2", &x, &y);
  if (rc < 0 || (rc = op_arg_tensor("aten::addr", &a[0], "self", NULL)) < 0 ||
      (rc = need_dims("aten::addr", x, "vec1", 1)) < 0 ||
      (rc = need_dims("aten::addr", y, "vec2", 1)) < 0)
    return rc;
  kiln_tensor *o = kiln_mul(kiln_unsqueeze(x, 1), kiln_unsqueeze(y, 0));
  return op_out1(blend(&a[0], o, &a[3], &a[4]), outs);
}
/* kron(a, b)[i*bs + j] = a[i] b[j] per dim: a [.., m, 1] * b [1, n] interleaved */
int op_kron_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x, *y;
  int rc = t2("aten::kron", a, "self", "other", &x, &y);
  if (rc < 0) return rc;
  int nd = x->ndim > y->ndim ? x->ndim : y->ndim;
  if (2 * nd > KILN_MAX_DIMS) return core_error(KILN_ERR_INVALID, "aten::kron: too many dims");
  int64_t sa[KILN_MAX_DIMS], sb[KILN_MAX_DIMS], so[KILN_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    int64_t p = i < nd - x->ndim ? 1 : x->shape[i - (nd - x->ndim)];
    int64_t q = i < nd - y->ndim ? 1 : y->shape[i - (nd - y->ndim)];
    sa[2 * i] = p;
    sa[2 * i + 1] = 1;
    sb[2 * i] = 1;
    sb[2 * i + 1] = q;
    so[i] = p * q;
  }
  kiln_tensor *r = kiln_mul(kiln_reshape(x, 2 * nd, sa), kiln_reshape(y, 2 * nd, sb));
  return op_out1(r ? kiln_reshape(r, nd, so) : NULL, outs);
}
/* tensordot(a, b, dims_a, dims_b): contracted dims moved last (a) / first
 * (b), both flattened to matrices, one mm */
int op_tensordot_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::tensordot";
  kiln_tensor *x, *y;
  int rc = t2(fn, a, "self", "other", &x, &y);
  if (rc < 0) return rc;
  if (a[2].tag != OP_VAL_INTS || a[3].tag != OP_VAL_INTS || a[2].ints.n != a[3].ints.n)
    return core_error(KILN_ERR_INVALID, "%s: both dimension lists should have same length", fn);
  int k = a[2].ints.n;
  bool cx[KILN_MAX_DIMS] = {0}, cy[KILN_MAX_DIMS] = {0};
  int64_t px[KILN_MAX_DIMS], py[KILN_MAX_DIMS], sh[KILN_MAX_DIMS], m = 1, q = 1, c = 1;
  int np = 0, no = 0;
  for (int i = 0; i < k; i++) {
    int dx = core_wrap_dim(fn, a[2].ints.v[i], x->ndim), dy = core_wrap_dim(fn, a[3].ints.v[i], y->ndim);
    if (dx < 0 || dy < 0) return KILN_ERR_INVALID;
    if (x->shape[dx] != y->shape[dy])
      return core_error(KILN_ERR_INVALID, "%s: contracted dimensions need to match, but first has "
                        "size %lld in dim %d and second has size %lld in dim %d", fn,
                        (long long)x->shape[dx], dx, (long long)y->shape[dy], dy);
    cx[dx] = cy[dy] = true;
    c *= x->shape[dx];
  }
  for (int i = 0; i < x->ndim; i++)
    if (!cx[i]) {
      px[np++] = i;
      sh[no++] = x->shape[i];
      m *= x->shape[i];
    }
  for (int i = 0; i < k; i++) px[np++] = core_wrap_dim(fn, a[2].ints.v[i], x->ndim);
  int nq = 0;
  for (int i = 0; i < k; i++) py[nq++] = core_wrap_dim(fn, a[3].ints.v[i], y->ndim);
  for (int i = 0; i < y->ndim; i++)
    if (!cy[i]) {
      py[nq++] = i;
      sh[no++] = y->shape[i];
      q *= y->shape[i];
    }
  int64_t fx[2] = {m, c}, fy[2] = {c, q};
  kiln_tensor *mx = kiln_reshape(x->ndim ? kiln_permute(x, x->ndim, px) : x, 2, fx);
  kiln_tensor *my = kiln_reshape(y->ndim ? kiln_permute(y, y->ndim, py) : y, 2, fy);
  kiln_tensor *p = mx && my ? kiln_mm(mx, my) : NULL;
  return op_out1(p ? kiln_reshape(p, no, sh) : NULL, outs);
}
