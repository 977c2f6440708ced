/* src/ops/linalg_svd.c: singular values of batches of matrices [..., m, n]
 * (linalg_svdvals) by one-sided Jacobi rotations (Hestenes), plain C in
 * double like linalg.c (float32 results rounded once), with the
 * derivative U diag(g) V^T computed by the same kernel (so it has no
 * double backward). The singular vectors' signs are not LAPACK's, which
 * is why only the sign-free results (the values, and the norms built on
 * them) are ops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

#define JACOBI_SWEEPS 80

/* One-sided Jacobi on a (r x c, r >= c, row-major, in place): rotations
 * of column pairs until all are orthogonal, accumulated in v (c x c,
 * row-major). Afterwards column j of a is s_j u_j and column j of v is
 * v_j; s[j] = |a_j|. */
static void jacobi(double *a, int64_t r, int64_t c, double *v, double *s) {
  for (int64_t i = 0; i < c * c; i++) v[i] = (i / c == i % c) ? 1.0 : 0.0;
  for (int sweep = 0; sweep < JACOBI_SWEEPS; sweep++) {
    bool rotated = false;
    for (int64_t p = 0; p < c; p++) {
      for (int64_t q = p + 1; q < c; q++) {
        double al = 0, be = 0, ga = 0;
        for (int64_t i = 0; i < r; i++) {
          double x = a[i * c + p], y = a[i * c + q];
          al += x * x;
          be += y * y;
          ga += x * y;
        }
        if (ga == 0 || fabs(ga) <= 1e-15 * sqrt(al * be)) continue;
        rotated = true;
        double zeta = (be - al) / (2 * ga);
        double t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1 + zeta * zeta));
        double cs = 1 / sqrt(1 + t * t), sn = cs * t;
        for (int64_t i = 0; i < r; i++) {
          double x = a[i * c + p], y = a[i * c + q];
          a[i * c + p] = cs * x - sn * y;
          a[i * c + q] = sn * x + cs * y;
        }
        for (int64_t i = 0; i < c; i++) {
          double x = v[i * c + p], y = v[i * c + q];
          v[i * c + p] = cs * x - sn * y;
          v[i * c + q] = sn * x + cs * y;
        }
      }
    }
    if (!rotated) break;
  }
  for (int64_t j = 0; j < c; j++) {
    double n2 = 0;
    for (int64_t i = 0; i < r; i++) n2 += a[i * c + j] * a[i * c + j];
    s[j] = sqrt(n2);
  }
}

/* A floating [..., m, n] tensor, else an error naming fn. */
static int matrices(const char *fn, const op_val *a, kiln_tensor **t) {
  int rc = op_arg_tensor(fn, a, "A", t);
  if (rc < 0) return rc;
  if ((*t)->ndim < 2)
    return core_error(KILN_ERR_INVALID, "%s: The input tensor A must have at least 2 dimensions.", fn);
  if (!core_dtype_is_floating((*t)->dtype))
    return core_error(KILN_ERR_INVALID, "%s: Expected a floating point tensor as input. Got %s", fn,
                      kiln_dtype_name((*t)->dtype));
  return 0;
}

static void put(kiln_tensor *t, int64_t i, double v) {
  if (t->dtype == KILN_DTYPE_F32) ((float *)core_data(t))[i] = (float)v;
  else ((double *)core_data(t))[i] = v;
}

/* Every matrix of x (contiguous data read through core_get_flat): its
 * singular values, descending, into vals ([..., k]) when not NULL; and
 * when g is not NULL, U diag(g) V^T into gin ([..., m, n]). */
static int run(const char *fn, kiln_tensor *x, kiln_tensor *vals, kiln_tensor *g, kiln_tensor *gin) {
  int64_t m = x->shape[x->ndim - 2], n = x->shape[x->ndim - 1], batches = 1, mn;
  for (int d = 0; d < x->ndim - 2; d++) batches *= x->shape[d];
  bool tr = m < n; /* work on A^T: rows >= cols */
  int64_t r = tr ? n : m, c = tr ? m : n, k = c;
  size_t need;
  if (__builtin_mul_overflow(m, n, &mn) || __builtin_mul_overflow((size_t)(mn + c * c + 2 * c + 1), sizeof(double), &need))
    return core_error(KILN_ERR_INVALID, "%s: matrix too large", fn);
  double *a = malloc(need);
  if (!a) return core_error(KILN_ERR_NOMEM, "%s: out of memory", fn);
  double *v = a + mn, *s = v + c * c;
  int64_t *ord = malloc(sizeof(int64_t) * (size_t)(c + 1));
  if (!ord) {
    free(a);
    return core_error(KILN_ERR_NOMEM, "%s: out of memory", fn);
  }
  for (int64_t b = 0; b < batches; b++) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double e = core_get_flat(x, b * mn + i * n + j);
        if (tr) a[j * c + i] = e;
        else a[i * c + j] = e;
      }
    jacobi(a, r, c, v, s);
    for (int64_t j = 0; j < k; j++) ord[j] = j;
    for (int64_t j = 1; j < k; j++) /* insertion sort, descending, stable */
      for (int64_t h = j; h > 0 && s[ord[h]] > s[ord[h - 1]]; h--) {
        int64_t t = ord[h];
        ord[h] = ord[h - 1];
        ord[h - 1] = t;
      }
    if (vals)
      for (int64_t j = 0; j < k; j++) put(vals, b * k + j, s[ord[j]]);
    if (g) {
      /* A^(T) = sum_j s_j u_j v_j^T with s_j u_j = column j of a: the
       * gradient sum_j g_j u_j v_j^T (transposed back when tr) */
      for (int64_t i = 0; i < m; i++)
        for (int64_t l = 0; l < n; l++) {
          double acc = 0;
          for (int64_t j = 0; j < k; j++) {
            int64_t o = ord[j];
            if (s[o] == 0) continue;
            double gj = core_get_flat(g, b * k + j) / s[o];
            acc += tr ? gj * a[l * c + o] * v[i * c + o] : gj * a[i * c + o] * v[l * c + o];
          }
          put(gin, b * mn + i * n + l, acc);
        }
    }
  }
  free(ord);
  free(a);
  return 0;
}

int op_linalg_svdvals_infer(const op_val *a, int n, op_meta *o, int m) {
  kiln_tensor *t;
  int rc = matrices("aten::linalg_svdvals", &a[0], &t);
  if (rc < 0) return rc;
  op_meta_of(t, o);
  int64_t rows = t->shape[t->ndim - 2], cols = t->shape[t->ndim - 1];
  o->ndim -= 1;
  o->shape[o->ndim - 1] = rows < cols ? rows : cols;
  o->shape[o->ndim] = 0;
  return 1;
}
int op_linalg_svdvals_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  return run("aten::linalg_svdvals", a[0].t, o[0], NULL, NULL);
}
/* d A = U diag(g) V^T (the reduced SVD's vectors of the saved A) */
int op_linalg_svdvals_grad(op_grad_ctx *g) {
  OP_GRAD_UNARY_GUARD();
  kiln_tensor *x = g->args[0].t;
  kiln_tensor *gc = kiln_contiguous(kiln_detach(go));
  kiln_tensor *gin = gc ? kiln_zeros(x->ndim, x->shape, x->dtype) : NULL;
  if (!gin) return op_failed_status();
  int rc = run("aten::linalg_svdvals", x, NULL, gc, gin);
  return rc < 0 ? rc : op_grad_put(g, 0, gin);
}
