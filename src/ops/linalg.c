/* src/ops/linalg.c: square-matrix linear algebra over batches
 * [..., n, n]: the inverse and the determinant as kernels (Gauss-Jordan
 * and LU with partial pivoting, in double; float32 results rounded once),
 * with FunctionsManual.cpp's derivatives written in the public API (so
 * double backward comes free); slogdet, logdet, solve, matrix_power,
 * tensorinv and tensorsolve as decompositions of them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

/* A floating [..., n, n] tensor, else an error naming fn. */
static int square(const char *fn, const op_val *a, kiln_tensor **t) {
  int rc = op_arg_tensor(fn, a, "A", t);
  if (rc < 0) return rc;
  if ((*t)->ndim < 2)
    return core_error(KILN_ERR_INVALID, "%s: The input tensor A must have at least 2 dimensions.", fn);
  if ((*t)->shape[(*t)->ndim - 1] != (*t)->shape[(*t)->ndim - 2])
    return core_error(KILN_ERR_INVALID, "%s: A must be batches of square matrices, but they are %lld by %lld matrices",
                      fn, (long long)(*t)->shape[(*t)->ndim - 2], (long long)(*t)->shape[(*t)->ndim - 1]);
  if (!core_dtype_is_floating((*t)->dtype))
    return core_error(KILN_ERR_INVALID, "%s: Expected a floating point tensor as input. Got %s", fn,
                      kiln_dtype_name((*t)->dtype));
  return 0;
}

/* Gauss-Jordan with partial pivoting of the n x n m (row-major, in
 * place: m becomes its inverse, w is n x n scratch); the determinant in
 * *det; false when singular. */
static bool invert(double *m, double *w, int64_t n, double *det) {
  double d = 1;
  for (int64_t i = 0; i < n * n; i++) w[i] = (i / n == i % n) ? 1.0 : 0.0;
  for (int64_t c = 0; c < n; c++) {
    int64_t p = c;
    for (int64_t r = c + 1; r < n; r++)
      if (fabs(m[r * n + c]) > fabs(m[p * n + c])) p = r;
    if (m[p * n + c] == 0) {
      *det = 0;
      return false;
    }
    if (p != c) {
      for (int64_t k = 0; k < n; k++) {
        double t = m[c * n + k];
        m[c * n + k] = m[p * n + k];
        m[p * n + k] = t;
        t = w[c * n + k];
        w[c * n + k] = w[p * n + k];
        w[p * n + k] = t;
      }
      d = -d;
    }
    double piv = m[c * n + c];
    d *= piv;
    for (int64_t k = 0; k < n; k++) {
      m[c * n + k] /= piv;
      w[c * n + k] /= piv;
    }
    for (int64_t r = 0; r < n; r++) {
      if (r == c || m[r * n + c] == 0) continue;
      double f = m[r * n + c];
      for (int64_t k = 0; k < n; k++) {
        m[r * n + k] -= f * m[c * n + k];
        w[r * n + k] -= f * w[c * n + k];
      }
    }
  }
  memcpy(m, w, sizeof(double) * (size_t)(n * n));
  *det = d;
  return true;
}

/* Runs invert over every matrix of t; writes inverses into inv_out (if
 * not NULL) and determinants into det_out (if not NULL). */
static int run_batches(const char *fn, kiln_tensor *t, kiln_tensor *inv_out, kiln_tensor *det_out) {
  int64_t n = t->shape[t->ndim - 1], nn, batches = 1;
  for (int d = 0; d < t->ndim - 2; d++) batches *= t->shape[d];
  if (__builtin_mul_overflow(n, n, &nn)) return core_error(KILN_ERR_INVALID, "%s: matrix too large", fn);
  double *m = malloc(sizeof(double) * (size_t)(2 * nn + 1));
  if (!m) return core_error(KILN_ERR_NOMEM, "%s: out of memory", fn);
  int rc = 0;
  for (int64_t b = 0; b < batches && rc == 0; b++) {
    for (int64_t i = 0; i < nn; i++) m[i] = core_get_flat(t, b * nn + i);
    double det;
    bool ok = invert(m, m + nn, n, &det);
    if (!ok && inv_out) {
      rc = core_error(KILN_ERR_INVALID, "%s: The diagonal element %lld is zero, the inversion could not be "
                      "completed because the input matrix is singular.", fn, (long long)(b % (n ? n : 1)) + 1);
      break;
    }
    if (inv_out) {
      for (int64_t i = 0; i < nn; i++) {
        if (inv_out->dtype == KILN_DTYPE_F32) ((float *)core_data(inv_out))[b * nn + i] = (float)m[i];
        else ((double *)core_data(inv_out))[b * nn + i] = m[i];
      }
    }
    if (det_out) {
      if (det_out->dtype == KILN_DTYPE_F32) ((float *)core_data(det_out))[b] = (float)det;
      else ((double *)core_data(det_out))[b] = det;
    }
  }
  free(m);
  return rc;
}

int op_linalg_inv_infer(const op_val *a, int n, op_meta *o, int m) {
  kiln_tensor *t;
  int rc = square("aten::linalg_inv", &a[0], &t);
  if (rc < 0) return rc;
  op_meta_of(t, o);
  return 1;
}
int op_linalg_inv_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  return run_batches("aten::linalg_inv", a[0].t, o[0], NULL);
}
static kiln_tensor *mT(kiln_tensor *t) { return t ? kiln_transpose(t, -2, -1) : NULL; }
/* d inv(A) = -inv^T g inv^T */
int op_linalg_inv_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0];
  if (!go || !g->needs[0]) return 0;
  kiln_tensor *yt = mT(g->outs[0]);
  return op_grad_put(g, 0, kiln_neg(kiln_matmul(kiln_matmul(yt, go), yt)));
}

int op_linalg_det_infer(const op_val *a, int n, op_meta *o, int m) {
  kiln_tensor *t;
  int rc = square("aten::linalg_det", &a[0], &t);
  if (rc < 0) return rc;
  op_meta_of(t, o);
  o->ndim -= 2;
  return 1;
}
int op_linalg_det_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  return run_batches("aten::linalg_det", a[0].t, NULL, o[0]);
}
/* d det(A) = g det inv(A)^T (invertible A) */
int op_linalg_det_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0], *x = g->args[0].t;
  if (!go || !g->needs[0]) return 0;
  kiln_tensor *inv = op_call1(KILN_OP_LINALG_INV, (op_val[]){OPV_T(x)}, 1);
  kiln_tensor *s = kiln_mul(go, g->outs[0]);
  s = s ? kiln_unsqueeze(kiln_unsqueeze(s, s->ndim), s->ndim + 1) : NULL;
  return op_grad_put(g, 0, inv && s ? kiln_mul(s, mT(inv)) : NULL);
}

/* ---- decompositions ------------------------------------------------------- */
/* slogdet = (sign det, log |det|) */
int op_linalg_slogdet_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = square("aten::linalg_slogdet", &a[0], &x);
  if (rc < 0) return rc;
  kiln_tensor *d = op_call1(KILN_OP_LINALG_DET, a, 1);
  if (!d) return KILN_ERR_INVALID;
  outs[0] = kiln_sign(d);
  outs[1] = kiln_log(kiln_abs(d));
  return outs[0] && outs[1] ? 2 : KILN_ERR_INVALID;
}
/* logdet = log det (NaN for a negative determinant) */
int op_logdet_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  kiln_tensor *x;
  int rc = square("aten::logdet", &a[0], &x);
  if (rc < 0) return rc;
  kiln_tensor *d = op_call1(KILN_OP_LINALG_DET, a, 1);
  return op_out1(d ? kiln_log(d) : NULL, outs);
}
/* solve(A, B, left) = inv(A) B (B a batch of vectors when it has one dim
 * fewer than A and matches A's leading shape), or B inv(A) */
int op_linalg_solve_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linalg_solve";
  kiln_tensor *x, *b;
  int rc;
  if ((rc = square(fn, &a[0], &x)) < 0 || (rc = op_arg_tensor(fn, &a[1], "B", &b)) < 0) return rc;
  bool left = a[2].tag != OP_VAL_BOOL || a[2].b;
  kiln_tensor *inv = op_call1(KILN_OP_LINALG_INV, (op_val[]){OPV_T(x)}, 1);
  if (!inv) return KILN_ERR_INVALID;
  bool vec = b->ndim == 1 || (b->ndim == x->ndim - 1 &&
                              memcmp(b->shape, x->shape, sizeof(int64_t) * (size_t)b->ndim) == 0);
  if (vec) {
    kiln_tensor *r = left ? kiln_matmul(inv, kiln_unsqueeze(b, b->ndim))
                          : kiln_matmul(kiln_unsqueeze(b, b->ndim - 1), inv);
    return op_out1(r ? kiln_squeeze_dim(r, left ? r->ndim - 1 : r->ndim - 2) : NULL, outs);
  }
  return op_out1(left ? kiln_matmul(inv, b) : kiln_matmul(b, inv), outs);
}
/* matrix_power(A, k): repeated squaring; k < 0 powers the inverse; k = 0
 * is the identity */
int op_linalg_matrix_power_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linalg_matrix_power";
  kiln_tensor *x;
  int64_t k;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0 || (rc = op_arg_int(fn, &a[1], "n", &k)) < 0) return rc;
  if (x->ndim < 2 || x->shape[x->ndim - 1] != x->shape[x->ndim - 2])
    return core_error(KILN_ERR_INVALID, "%s: A must be batches of square matrices", fn);
  int64_t sz = x->shape[x->ndim - 1];
  if (k == 0) {
    kiln_tensor *e = op_call1(KILN_OP_EYE, (op_val[]){OPV_I(sz), OPV_NONE, OPV_NONE, OPV_NONE, OPV_NONE}, 5);
    e = e ? kiln_to_dtype(e, x->dtype) : NULL;
    return op_out1(e ? kiln_add(kiln_mul_scalar(x, 0.0), e) : NULL, outs);
  }
  kiln_tensor *base = x;
  if (k < 0) {
    base = op_call1(KILN_OP_LINALG_INV, (op_val[]){OPV_T(x)}, 1);
    k = -k;
  }
  kiln_tensor *r = NULL;
  while (base && k > 0) {
    if (k & 1) r = r ? kiln_matmul(r, base) : base;
    k >>= 1;
    if (k) base = kiln_matmul(base, base);
  }
  return op_out1(r == x && r ? kiln_clone(x) : r, outs);
}
/* tensorinv(A, ind): A as a [prod(shape[:ind]), prod(shape[ind:])]
 * matrix, inverted, shaped shape[ind:] + shape[:ind] */
int op_linalg_tensorinv_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linalg_tensorinv";
  kiln_tensor *x;
  int64_t ind = 2;
  int rc = op_arg_tensor(fn, &a[0], "self", &x);
  if (rc < 0) return rc;
  if (a[1].tag == OP_VAL_INT) ind = a[1].i;
  if (ind <= 0 || ind > x->ndim)
    return core_error(KILN_ERR_INVALID, "%s: Expected a strictly positive integer for 'ind', but got %lld", fn,
                      (long long)ind);
  int64_t rows = 1, cols = 1, sh[KILN_MAX_DIMS];
  int k = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (d < ind) rows *= x->shape[d];
    else cols *= x->shape[d];
  }
  for (int d = (int)ind; d < x->ndim; d++) sh[k++] = x->shape[d];
  for (int d = 0; d < ind; d++) sh[k++] = x->shape[d];
  if (rows != cols)
    return core_error(KILN_ERR_INVALID, "%s: Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                      "prod(self.shape[:ind]), but got %lld != %lld", fn, (long long)cols, (long long)rows);
  kiln_tensor *inv = op_call1(KILN_OP_LINALG_INV, (op_val[]){OPV_T(kiln_reshape(x, 2, (int64_t[]){rows, cols}))}, 1);
  return op_out1(inv ? kiln_reshape(inv, k, sh) : NULL, outs);
}
/* tensorsolve(A, B, dims): the dims of A moved to the end, A as a
 * [numel(B), rest] matrix, solved, shaped A.shape[B.ndim:] */
int op_linalg_tensorsolve_decompose(const op_val *a, int n, kiln_tensor **outs, int max) {
  const char *fn = "aten::linalg_tensorsolve";
  kiln_tensor *x, *b;
  int rc;
  if ((rc = op_arg_tensor(fn, &a[0], "self", &x)) < 0 || (rc = op_arg_tensor(fn, &a[1], "other", &b)) < 0)
    return rc;
  if (a[2].tag == OP_VAL_INTS && a[2].ints.n > 0) {
    int nd = a[2].ints.n;
    if (nd > KILN_MAX_DIMS) return core_error(KILN_ERR_INVALID, "%s: too many dims", fn);
    int64_t dst[KILN_MAX_DIMS];
    for (int i = 0; i < nd; i++) dst[i] = x->ndim - nd + i;
    x = op_call1(KILN_OP_MOVEDIM, (op_val[]){OPV_T(x), a[2], OPV_INTS(dst, nd)}, 3);
    if (!x) return KILN_ERR_INVALID;
  }
  int64_t nb = kiln_tensor_numel(b), rest = 1, sh[KILN_MAX_DIMS];
  int k = 0;
  for (int d = b->ndim; d < x->ndim; d++) {
    rest *= x->shape[d];
    sh[k++] = x->shape[d];
  }
  if (b->ndim > x->ndim || nb != rest)
    return core_error(KILN_ERR_INVALID, "%s: Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                      "prod(self.shape[:other.ndim]), but got %lld != %lld", fn, (long long)rest, (long long)nb);
  kiln_tensor *m = kiln_reshape(x, 2, (int64_t[]){nb, rest});
  kiln_tensor *inv = m ? op_call1(KILN_OP_LINALG_INV, (op_val[]){OPV_T(m)}, 1) : NULL;
  kiln_tensor *r = inv ? kiln_matmul(inv, kiln_reshape(b, 1, &nb)) : NULL;
  return op_out1(r ? kiln_reshape(r, k, sh) : NULL, outs);
}
