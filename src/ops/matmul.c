/* src/ops/matmul.c: mm, bmm, addmm through CBLAS (int64 by plain loops);
 * matmul and linear decompose into them, as torch.matmul and F.linear do. */
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "op.h"

/* ---- argument checks ---------------------------------------------------- */

/* args[i] must be a tensor of ndim dims and a dtype GEMM supports. */
static int need_mat(const char *fn, const char *what, const op_val *v, int ndim) {
  char d[160];
  if (v->tag != OP_VAL_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s: %s must be a tensor, got %s", fn, what,
                      op_val_desc(v, d, sizeof d));
  if (v->t->ndim != ndim)
    return core_error(KILN_ERR_INVALID, "%s: %s must be a %d-D tensor, got %s", fn, what,
                      ndim, op_val_desc(v, d, sizeof d));
  if (v->t->dtype == KILN_DTYPE_BOOL)
    return core_error(KILN_ERR_INVALID,
                      "%s: not implemented for %s (Float, Double or Long only)", fn,
                      op_val_desc(v, d, sizeof d));
  for (int i = 0; i < ndim; i++)
    if (v->t->shape[i] > INT_MAX)
      return core_error(KILN_ERR_UNSUPPORTED, "%s: %s %s has a dim above 2^31-1", fn, what,
                        op_val_desc(v, d, sizeof d));
  return 0;
}

static int same_dtype(const char *fn, const char *wa, const kiln_tensor *a, const char *wb,
                      const kiln_tensor *b) {
  char da[160], db[160];
  if (a->dtype == b->dtype) return 0;
  return core_error(KILN_ERR_INVALID,
                    "%s: expected %s and %s to have the same dtype, got %s and %s", fn, wa,
                    wb, core_tensor_desc(a, da, sizeof da), core_tensor_desc(b, db, sizeof db));
}

/* "aten::mm: shapes [4, 3] and [2, 5] cannot be multiplied (3 != 2)" */
static int cannot_multiply(const char *fn, const kiln_tensor *a, const kiln_tensor *b,
                           int64_t ka, int64_t kb) {
  char sa[160], sb[160];
  return core_error(KILN_ERR_INVALID, "%s: shapes %s and %s cannot be multiplied (%lld != %lld)",
                    fn, core_shape_str(a->ndim, a->shape, sa, sizeof sa),
                    core_shape_str(b->ndim, b->shape, sb, sizeof sb), (long long)ka,
                    (long long)kb);
}

/* ---- the GEMM driver ------------------------------------------------------ */

/* One operand of a (batched) product as BLAS sees it: matrix i starts at
 * base + i * bstride; within it element (r, c) is at r * rs + c * cs. */
typedef struct gemm_arg {
  const char *base;
  int64_t bstride, rs, cs;
  bool trans;        /* BLAS: the stored matrix is the transpose (column-major) */
  int ld;            /* BLAS leading dimension */
  kiln_tensor *copy; /* owned contiguous copy, or NULL */
} gemm_arg;

/* Can a rows x cols matrix with strides (rs, cs) go to row-major BLAS
 * without a copy? Either rows are contiguous (cs == 1, NoTrans, ld = rs) or
 * columns are (rs == 1, Trans, ld = cs): that covers contiguous tensors,
 * t()/transpose views and row slices. A size-1 dim's stride is free. */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans,
                        int *ld) {
  int64_t l;
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= (cols > 1 ? cols : 1))) {
    l = rows == 1 ? (cols > 1 ? cols : 1) : rs;
    *trans = false;
  } else if ((rows == 1 || rs == 1) && (cols == 1 || cs >= (rows > 1 ? rows : 1))) {
    l = cols == 1 ? (rows > 1 ? rows : 1) : cs;
    *trans = true;
  } else {
    return false;
  }
  if (l > INT_MAX) return false;
  *ld = (int)l;
  return true;
}

/* Fills g for the 2-d or 3-d tensor t (the last two dims are the matrix).
 * With blas, makes a contiguous copy when the strides do not suit BLAS
 * (expanded, strided slices). Returns < 0 on OOM. */
static int gemm_arg_init(gemm_arg *g, const kiln_tensor *t, bool blas) {
  int nd = t->ndim;
  int64_t rows = t->shape[nd - 2], cols = t->shape[nd - 1];
  memset(g, 0, sizeof *g);
  g->base = core_data(t);
  g->bstride = nd == 3 ? t->strides[0] : 0;
  g->rs = t->strides[nd - 2];
  g->cs = t->strides[nd - 1];
  if (!blas || blas_layout(rows, cols, g->rs, g->cs, &g->trans, &g->ld)) return 0;
  g->copy = core_tensor_new(nd, t->shape, t->dtype);
  if (!g->copy) return KILN_ERR_NOMEM;
  op_copy_into(g->copy, t);
  g->base = core_data(g->copy);
  g->bstride = nd == 3 ? rows * cols : 0;
  g->rs = cols;
  g->cs = 1;
  g->trans = false;
  g->ld = (int)(cols > 1 ? cols : 1);
  return 0;
}

/* C[n, m] = alpha * A[n, k] @ B[k, m] + beta * C for int64, by loops in
 * i-k-j order (the inner loop runs along C's and B's rows). */
static void gemm_i64(const gemm_arg *A, const gemm_arg *B, int64_t bi, int64_t n, int64_t k,
                     int64_t m, int64_t alpha, int64_t beta, int64_t *C) {
  const int64_t *a = (const int64_t *)A->base + bi * A->bstride;
  const int64_t *b = (const int64_t *)B->base + bi * B->bstride;
  for (int64_t i = 0; i < n; i++) {
    int64_t *c = C + i * m;
    for (int64_t j = 0; j < m; j++) c[j] = beta == 0 ? 0 : beta * c[j];
    for (int64_t kk = 0; kk < k; kk++) {
      int64_t av = alpha * a[i * A->rs + kk * A->cs];
      const int64_t *brow = b + kk * B->rs;
      if (B->cs == 1)
        for (int64_t j = 0; j < m; j++) c[j] += av * brow[j];
      else
        for (int64_t j = 0; j < m; j++) c[j] += av * brow[j * B->cs];
    }
  }
}

static void gemm_blas(kiln_dtype dt, const gemm_arg *A, const gemm_arg *B, int64_t bi,
                      int n, int k, int m, double alpha, double beta, const op_gemm_addend *add,
                      void *C) {
  size_t es = kiln_dtype_size(dt);
  op_gemm_ep(dt, A->trans, B->trans, n, m, k, alpha,
             (const char *)A->base + (size_t)(bi * A->bstride) * es, A->ld,
             (const char *)B->base + (size_t)(bi * B->bstride) * es, B->ld, beta, add, C,
             m > 1 ? m : 1, NULL, NULL);
}

/* C[i] = alpha * a[i] @ b[i] + beta * C[i] for i < batch; a is [.., n, k],
 * b [.., k, m] (2-d or 3-d, any strides), C contiguous [batch, n, m] (read
 * only when beta != 0). Returns < 0 on OOM. */
static int gemm_run(kiln_dtype dt, int64_t batch, int64_t n, int64_t k, int64_t m,
                    double alpha, const kiln_tensor *a, const kiln_tensor *b, double beta,
                    const op_gemm_addend *add, void *C) {
  size_t es = kiln_dtype_size(dt);
  int64_t cnum = batch * n * m;
  gemm_arg A, B;
  int rc = 0;
  if (cnum == 0) return 0;
  if (k == 0) { /* empty sum: C = beta * C */
    for (int64_t i = 0; i < cnum; i++) {
      if (dt == KILN_DTYPE_F32) ((float *)C)[i] = beta == 0 ? 0.0f : (float)beta * ((float *)C)[i];
      else if (dt == KILN_DTYPE_F64) ((double *)C)[i] = beta == 0 ? 0.0 : beta * ((double *)C)[i];
      else ((int64_t *)C)[i] = beta == 0 ? 0 : (int64_t)beta * ((int64_t *)C)[i];
    }
    return 0;
  }
  bool blas = dt != KILN_DTYPE_I64;
  if ((rc = gemm_arg_init(&A, a, blas)) < 0) return rc;
  if ((rc = gemm_arg_init(&B, b, blas)) < 0) {
    kiln_release(A.copy);
    return rc;
  }
  if (!blas) {
#pragma omp parallel for schedule(static) if (batch > 1 && cnum * k >= OP_PARALLEL_MIN)
    for (int64_t i = 0; i < batch; i++)
      gemm_i64(&A, &B, i, n, k, m, (int64_t)alpha, (int64_t)beta, (int64_t *)C + i * n * m);
  } else if (batch > 1 && omp_get_max_threads() > 1 && n * m * k < 128 * 128 * 128 &&
             batch * n * m * k >= OP_PARALLEL_MIN) {
    /* Many small products: one per OpenMP thread (Note [BLAS threads]). */
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; i++)
      gemm_blas(dt, &A, &B, i, (int)n, (int)k, (int)m, alpha, beta, NULL,
                (char *)C + i * n * m * (int64_t)es);
  } else {
    /* Large products: BLAS parallelises each one itself. One product on a
     * B of its own memory may reuse B's packed panels: Note [Packed B cache] */
    op_pack_src src;
    op_pack_src_of(batch == 1 && !B.copy ? b : NULL, &src);
    op_pack_src prev = op_pack_src_swap(&src);
    for (int64_t i = 0; i < batch; i++)
      gemm_blas(dt, &A, &B, i, (int)n, (int)k, (int)m, alpha, beta, batch == 1 ? add : NULL,
                (char *)C + i * n * m * (int64_t)es);
    op_pack_src_swap(&prev);
  }
  kiln_release(A.copy);
  kiln_release(B.copy);
  return 0;
}

/* ---- mm ---------------------------------------------------------------------- */

int op_mm_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::mm";
  if (need_mat(fn, "self", &a[0], 2) < 0 || need_mat(fn, "mat2", &a[1], 2) < 0 ||
      same_dtype(fn, "self", a[0].t, "mat2", a[1].t) < 0)
    return -1;
  if (a[0].t->shape[1] != a[1].t->shape[0])
    return cannot_multiply(fn, a[0].t, a[1].t, a[0].t->shape[1], a[1].t->shape[0]);
  o[0].dtype = a[0].t->dtype;
  o[0].ndim = 2;
  o[0].shape[0] = a[0].t->shape[0];
  o[0].shape[1] = a[1].t->shape[1];
  return 1;
}

int op_mm_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  const kiln_tensor *x = a[0].t, *y = a[1].t;
  return gemm_run(x->dtype, 1, x->shape[0], x->shape[1], y->shape[1], 1.0, x, y, 0.0, NULL,
                  core_data(o[0]));
}

/* d(a@b)/da = g @ b^T, d(a@b)/db = a^T @ g */
/* a @ b, laid out like `like`: when `like` is a transposed view (as t(w)
 * in linear), the product is computed as (b^T @ a^T)^T, so it is a
 * transposed view too and the gradient that t()'s backward hands to w is
 * contiguous: the optimizer then streams it instead of gathering. */
static kiln_tensor *mm_like(kiln_tensor *a, kiln_tensor *b, const kiln_tensor *like) {
  bool colmajor = like->ndim == 2 && like->storage && like->strides[0] == 1 &&
                  like->strides[1] != 1 && like->shape[0] > 1 && like->shape[1] > 1;
  return colmajor ? kiln_t(kiln_mm(kiln_t(b), kiln_t(a))) : kiln_mm(a, b);
}

int op_mm_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0];
  if (!go) return 0;
  if (g->needs[0] && !(g->grad_in[0] = mm_like(go, kiln_t(g->args[1].t), g->args[0].t))) return -1;
  if (g->needs[1] && !(g->grad_in[1] = mm_like(kiln_t(g->args[0].t), go, g->args[1].t))) return -1;
  return 0;
}

/* ---- bmm --------------------------------------------------------------------- */

int op_bmm_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::bmm";
  if (need_mat(fn, "self", &a[0], 3) < 0 || need_mat(fn, "mat2", &a[1], 3) < 0 ||
      same_dtype(fn, "self", a[0].t, "mat2", a[1].t) < 0)
    return -1;
  const kiln_tensor *x = a[0].t, *y = a[1].t;
  if (x->shape[0] != y->shape[0]) {
    char sa[160], sb[160];
    return core_error(KILN_ERR_INVALID,
                      "aten::bmm: shapes %s and %s have different batch sizes (%lld != %lld)",
                      core_shape_str(3, x->shape, sa, sizeof sa),
                      core_shape_str(3, y->shape, sb, sizeof sb), (long long)x->shape[0],
                      (long long)y->shape[0]);
  }
  if (x->shape[2] != y->shape[1]) return cannot_multiply(fn, x, y, x->shape[2], y->shape[1]);
  o[0].dtype = x->dtype;
  o[0].ndim = 3;
  o[0].shape[0] = x->shape[0];
  o[0].shape[1] = x->shape[1];
  o[0].shape[2] = y->shape[2];
  return 1;
}

int op_bmm_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  const kiln_tensor *x = a[0].t, *y = a[1].t;
  return gemm_run(x->dtype, x->shape[0], x->shape[1], x->shape[2], y->shape[2], 1.0, x, y,
                  0.0, NULL, core_data(o[0]));
}

int op_bmm_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0];
  if (!go) return 0;
  if (g->needs[0] && !(g->grad_in[0] = kiln_bmm(go, kiln_transpose(g->args[1].t, 1, 2))))
    return -1;
  if (g->needs[1] && !(g->grad_in[1] = kiln_bmm(kiln_transpose(g->args[0].t, 1, 2), go)))
    return -1;
  return 0;
}

/* ---- addmm --------------------------------------------------------------------- */

int op_addmm_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::addmm";
  char d[160], s[160];
  if (need_mat(fn, "mat1", &a[1], 2) < 0 || need_mat(fn, "mat2", &a[2], 2) < 0 ||
      same_dtype(fn, "mat1", a[1].t, "mat2", a[2].t) < 0)
    return -1;
  if (a[0].tag != OP_VAL_TENSOR)
    return core_error(KILN_ERR_INVALID, "%s: self must be a tensor, got %s", fn,
                      op_val_desc(&a[0], d, sizeof d));
  if (same_dtype(fn, "self", a[0].t, "mat1", a[1].t) < 0) return -1;
  if (!op_val_is_num(&a[3]) || !op_val_is_num(&a[4]))
    return core_error(KILN_ERR_INVALID, "%s: beta and alpha must be numbers, got %s and %s",
                      fn, op_val_desc(&a[3], d, sizeof d), op_val_desc(&a[4], s, sizeof s));
  const kiln_tensor *self = a[0].t, *x = a[1].t, *y = a[2].t;
  if (x->shape[1] != y->shape[0]) return cannot_multiply(fn, x, y, x->shape[1], y->shape[0]);
  int64_t want[2] = {x->shape[0], y->shape[1]};
  bool ok = self->ndim <= 2;
  for (int i = 0; ok && i < self->ndim; i++) {
    int64_t sz = self->shape[self->ndim - 1 - i];
    ok = sz == 1 || sz == want[1 - i];
  }
  if (!ok)
    return core_error(KILN_ERR_INVALID,
                      "%s: self %s cannot be broadcast to the product's shape %s", fn,
                      core_tensor_desc(self, d, sizeof d), core_shape_str(2, want, s, sizeof s));
  o[0].dtype = x->dtype;
  o[0].ndim = 2;
  o[0].shape[0] = want[0];
  o[0].shape[1] = want[1];
  return 1;
}

/* addmm's self as the GEMM's addend over the product's [rows, cols]
 * (broadcast dims get stride 0); false for int64, whose loop GEMM adds
 * only C, and for an empty sum (K 0), where C = beta * self is a copy. */
static bool addend_of(const kiln_tensor *self, const kiln_tensor *x, op_gemm_addend *d) {
  if (x->dtype == KILN_DTYPE_I64 || x->shape[1] == 0) return false;
  int nd = self->ndim;
  d->data = core_data(self);
  d->rs = nd == 2 && self->shape[0] != 1 ? self->strides[0] : 0;
  d->cs = nd >= 1 && self->shape[nd - 1] != 1 ? self->strides[nd - 1] : 0;
  return true;
}

/* out = beta * self (broadcast) + alpha * mat1 @ mat2: the GEMM reads self
 * as its addend (Note [kiln sgemm]) in the same pass as the product, or
 * self is copied into out first. With beta == 0 self is not read (NaNs in
 * it do not propagate, as PyTorch). */
int op_addmm_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  const kiln_tensor *x = a[1].t, *y = a[2].t;
  double beta = op_val_num(&a[3]), alpha = op_val_num(&a[4]);
  op_gemm_addend d;
  bool direct = beta != 0 && addend_of(a[0].t, x, &d);
  if (beta != 0 && !direct) op_copy_into(o[0], a[0].t);
  return gemm_run(x->dtype, 1, x->shape[0], x->shape[1], y->shape[1], alpha, x, y, beta,
                  direct ? &d : NULL, core_data(o[0]));
}

int op_addmm_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0], *self = g->args[0].t;
  double beta = op_val_num(&g->args[3]), alpha = op_val_num(&g->args[4]);
  if (!go) return 0;
  if (g->needs[0]) {
    kiln_tensor *s = beta == 1 ? go : kiln_mul_scalar(go, beta);
    if (!s || !(g->grad_in[0] = op_sum_to(s, self->ndim, self->shape))) return -1;
  }
  if (g->needs[1]) {
    kiln_tensor *r = mm_like(go, kiln_t(g->args[2].t), g->args[1].t);
    if (r && alpha != 1) r = kiln_mul_scalar(r, alpha);
    if (!(g->grad_in[1] = r)) return -1;
  }
  if (g->needs[2]) {
    kiln_tensor *r = mm_like(kiln_t(g->args[1].t), go, g->args[2].t);
    if (r && alpha != 1) r = kiln_mul_scalar(r, alpha);
    if (!(g->grad_in[2] = r)) return -1;
  }
  return 0;
}

/* ---- _addmm_activation: addmm with a relu/gelu epilogue ----------------------- */

int op_addmm_activation_infer(const op_val *a, int n, op_meta *o, int m) {
  char d[64];
  if (a[5].tag != OP_VAL_BOOL)
    return core_error(KILN_ERR_INVALID, "aten::_addmm_activation: use_gelu must be a bool, got %s",
                      op_val_desc(&a[5], d, sizeof d));
  if (op_addmm_infer(a, 5, o, m) < 0) return -1;
  if (!core_dtype_is_floating(o[0].dtype))
    return core_error(KILN_ERR_INVALID, "aten::_addmm_activation: expected floating tensors, got %s",
                      kiln_dtype_name(o[0].dtype));
  return 1;
}

/* C[n, m] (contiguous) = alpha * x @ y + beta * D, 2-d x and y of any
 * strides, with the epilogue ep on C's blocks (Note [Block epilogue]):
 * the GEMM of _addmm_activation and kiln_mm_threshold_backward. Returns
 * < 0 on OOM. */
static int gemm2d_ep(const kiln_tensor *x, const kiln_tensor *y, double alpha, double beta,
                     const op_gemm_addend *add, void *C, op_gemm_epilogue ep, void *ctx) {
  int64_t nr = x->shape[0], k = x->shape[1], nc = y->shape[1];
  gemm_arg A, B;
  int rc;
  if ((rc = gemm_arg_init(&A, x, true)) < 0) return rc;
  if ((rc = gemm_arg_init(&B, y, true)) < 0) {
    kiln_release(A.copy);
    return rc;
  }
  op_pack_src src; /* Note [Packed B cache] */
  op_pack_src_of(B.copy ? NULL : y, &src);
  op_pack_src prev = op_pack_src_swap(&src);
  op_gemm_ep(x->dtype, A.trans, B.trans, nr, nc, k, alpha, A.base, A.ld, B.base, B.ld, beta, add,
             C, nc > 1 ? nc : 1, ep, ctx);
  op_pack_src_swap(&prev);
  kiln_release(A.copy);
  kiln_release(B.copy);
  return 0;
}

typedef struct act_ctx {
  op_tile_fn tile;
  op_attrs attrs;
  kiln_dtype dt;
} act_ctx;

/* The activation's own tile kernel from the op table, run on each row of
 * the slice through a small buffer (the kernel's pointers never alias). */
static void act_epilogue(void *C, int64_t rows, int64_t cols, int64_t ldc, void *ctx_) {
  const act_ctx *ctx = ctx_;
  size_t es = kiln_dtype_size(ctx->dt);
  _Alignas(64) char buf[4096];
  int64_t chunk = (int64_t)(sizeof buf / es);
  for (int64_t r = 0; r < rows; r++) {
    char *row = (char *)C + (size_t)(r * ldc) * es;
    for (int64_t j = 0; j < cols; j += chunk) {
      int64_t len = cols - j < chunk ? cols - j : chunk;
      memcpy(buf, row + j * (int64_t)es, (size_t)len * es);
      const void *in[1] = {buf};
      ctx->tile(row + j * (int64_t)es, in, len, &ctx->attrs);
    }
  }
}

int op_addmm_activation_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  const kiln_tensor *x = a[1].t, *y = a[2].t;
  double beta = op_val_num(&a[3]), alpha = op_val_num(&a[4]);
  bool gelu = a[5].b;
  kiln_dtype dt = x->dtype;
  act_ctx ctx = {op_table[gelu ? KILN_OP_GELU : KILN_OP_RELU].tiles[dt], {{1.0, NAN, NAN, NAN}}, dt};
  op_gemm_addend d;
  bool direct = beta != 0 && addend_of(a[0].t, x, &d);
  if (beta != 0 && !direct) op_copy_into(o[0], a[0].t);
  int64_t nr = x->shape[0], k = x->shape[1], nc = y->shape[1];
  if (nr * nc == 0) return 0;
  if (k == 0) { /* act(beta * self) */
    kiln_tensor *t = o[0];
    if (beta == 0) {
      memset(core_data(t), 0, (size_t)(nr * nc) * kiln_dtype_size(dt));
    } else if (beta != 1) {
      for (int64_t i = 0; i < nr * nc; i++) {
        if (dt == KILN_DTYPE_F32) ((float *)core_data(t))[i] *= (float)beta;
        else ((double *)core_data(t))[i] *= beta;
      }
    }
    act_epilogue(core_data(t), nr, nc, nc, &ctx);
    return 0;
  }
  return gemm2d_ep(x, y, alpha, beta, direct ? &d : NULL, core_data(o[0]), act_epilogue, &ctx);
}

/* y = act(z), z = addmm(...): the activation's formula gives dz, then
 * addmm's formula gives the rest (no formula is written twice). */
int op_addmm_activation_grad(op_grad_ctx *g) {
  kiln_tensor *go = g->grads[0], *y = g->outs[0], *gz = NULL;
  bool gelu = g->args[5].b, want = true;
  if (!go) return 0;
  if (gelu) {
    kiln_tensor *z = kiln_addmm(g->args[0].t, g->args[1].t, g->args[2].t,
                                op_val_num(&g->args[3]), op_val_num(&g->args[4]));
    if (!z) return -1;
    op_val args[2] = {OPV_T(z), OPV_S("tanh")};
    op_grad_ctx c = {args, 2, &y, 1, &go, &want, &gz, 1};
    if (op_gelu_grad(&c) < 0) return -1;
  } else {
    op_val args[1] = {OPV_T(y)};
    op_grad_ctx c = {args, 1, &y, 1, &go, &want, &gz, 1};
    if (op_relu_grad(&c) < 0) return -1;
  }
  if (!gz) return -1;
  op_grad_ctx c = {g->args, 5, NULL, 0, &gz, g->needs, g->grad_in, g->n_slots};
  return op_addmm_grad(&c);
}

/* ---- kiln_mm_threshold_backward ------------------------------------------------ */

/* Note [Threshold epilogue]: a relu's backward, where(result <= t, 0,
 * grad), whose grad is a product (the next linear's input gradient,
 * dY @ W), becomes one node: aten::kiln_mm_threshold_backward(self, mat2,
 * result, t), the lazy pipeline's rewrite (pass_threshold_epilogue in
 * src/passes/fuse.c). The mask is applied to each block of C as kiln's
 * sgemm finishes it (Note [Block epilogue]), so the product is not
 * written, read back and written again by a FusionGroup (a transformer
 * layer's 1024 x 2048: three passes over 8 MB). result is read with C's
 * layout: [n, m] row-major, any shape of n * m elements. The values are
 * the product's and where's: c, or 0 where result <= t (NaN in result
 * keeps c, as le says). */
int op_kiln_mm_threshold_backward_infer(const op_val *a, int n, op_meta *o, int m) {
  const char *fn = "aten::kiln_mm_threshold_backward";
  char d[64];
  if (op_mm_infer(a, 2, o, m) < 0) return -1;
  if (!core_dtype_is_floating(o[0].dtype))
    return core_error(KILN_ERR_INVALID, "%s: expected floating tensors, got %s", fn,
                      kiln_dtype_name(o[0].dtype));
  kiln_tensor *r;
  int64_t numel;
  if (op_arg_tensor(fn, &a[2], "result", &r) < 0) return -1;
  if (__builtin_mul_overflow(o[0].shape[0], o[0].shape[1], &numel))
    return core_error(KILN_ERR_INVALID, "%s: the product's size overflows", fn);
  if (r->dtype != o[0].dtype || core_numel(r->ndim, r->shape) != numel)
    return core_error(KILN_ERR_INVALID,
                      "%s: result must be a %s tensor of %lld elements (the product's), got %s",
                      fn, kiln_dtype_name(o[0].dtype), (long long)numel,
                      op_val_desc(&a[2], d, sizeof d));
  if (a[3].tag != OP_VAL_INT && a[3].tag != OP_VAL_FLOAT)
    return core_error(KILN_ERR_INVALID, "%s: threshold must be a number, got %s", fn,
                      op_val_desc(&a[3], d, sizeof d));
  return 1;
}

typedef struct thr_ctx {
  char *C;          /* C's first element */
  const char *res;  /* result's, laid out like C */
  double t;
  kiln_dtype dt;
} thr_ctx;

/* One row of the mask, compiled per CPU level (Note [CPU levels]). */
CORE_CLONES(thr_row_f32, (float *restrict c, const float *restrict y, float t, int64_t n),
            (c, y, t, n)) {
  for (int64_t j = 0; j < n; j++) c[j] = y[j] <= t ? 0.0f : c[j];
}
CORE_CLONES(thr_row_f64, (double *restrict c, const double *restrict y, double t, int64_t n),
            (c, y, t, n)) {
  for (int64_t j = 0; j < n; j++) c[j] = y[j] <= t ? 0.0 : c[j];
}

static void thr_epilogue(void *C, int64_t rows, int64_t cols, int64_t ldc, void *ctx_) {
  const thr_ctx *ctx = ctx_;
  size_t es = kiln_dtype_size(ctx->dt);
  size_t off = (size_t)((const char *)C - ctx->C); /* the block's place in C, in bytes */
  for (int64_t r = 0; r < rows; r++) {
    size_t ro = off + (size_t)(r * ldc) * es;
    if (ctx->dt == KILN_DTYPE_F32)
      thr_row_f32((float *)(void *)(ctx->C + ro),
                  (const float *)(const void *)(ctx->res + ro), (float)ctx->t, cols);
    else
      thr_row_f64((double *)(void *)(ctx->C + ro),
                  (const double *)(const void *)(ctx->res + ro), ctx->t, cols);
  }
}

int op_kiln_mm_threshold_backward_cpu(const op_val *a, int n, kiln_tensor **o, int m) {
  const kiln_tensor *x = a[0].t, *y = a[1].t, *res = a[2].t;
  kiln_dtype dt = x->dtype;
  int64_t nr = x->shape[0], k = x->shape[1], nc = y->shape[1];
  if (nr * nc == 0) return 0;
  kiln_tensor *own = NULL; /* a C-order copy of a strided result, released below */
  if (!core_is_contiguous(res)) {
    if (!(own = core_tensor_new(res->ndim, res->shape, res->dtype))) return KILN_ERR_NOMEM;
    op_copy_into(own, res);
  }
  thr_ctx ctx = {core_data(o[0]), core_data(own ? own : res), op_val_num(&a[3]), dt};
  int rc = 0;
  if (k == 0) { /* an empty sum: C = 0, then the mask */
    memset(core_data(o[0]), 0, (size_t)(nr * nc) * kiln_dtype_size(dt));
    thr_epilogue(core_data(o[0]), nr, nc, nc, &ctx);
  } else {
    rc = gemm2d_ep(x, y, 1.0, 0.0, NULL, core_data(o[0]), thr_epilogue, &ctx);
  }
  kiln_release(own);
  return rc;
}

/* ---- matmul (decomposes) ----------------------------------------------------- */

/* Note [Decompose scope]: a decomposition runs its public ops inside a
 * scope of its own, so intermediates are released even when the caller has
 * no scope open; the result is retained across the scope's end and then
 * registered with the caller's scope (if any), like any op output. */
static int finish_decompose(kiln_tensor *r, kiln_tensor **outs) {
  if (r) kiln_retain(r);
  kiln_scope_end();
  if (!r) return -1;
  outs[0] = core_autorelease(r);
  return outs[0] ? 1 : KILN_ERR_NOMEM;
}

/* t reshaped to shape, or t itself when it already has that shape. */
static kiln_tensor *reshape_to(kiln_tensor *t, int nd, const int64_t *shape) {
  if (!t) return NULL;
  if (t->ndim == nd && !memcmp(t->shape, shape, (size_t)nd * sizeof *shape)) return t;
  return kiln_reshape(t, nd, shape);
}

static kiln_tensor *matmul_impl(kiln_tensor *a, kiln_tensor *b) {
  const char *fn = "aten::matmul";
  char d[160], e[160];
  int da = a->ndim, db = b->ndim;
  if (da == 0 || db == 0) {
    core_error(KILN_ERR_INVALID,
               "%s: both arguments need to be at least 1-D, got %s and %s", fn,
               core_tensor_desc(a, d, sizeof d), core_tensor_desc(b, e, sizeof e));
    return NULL;
  }
  if (same_dtype(fn, "self", a, "other", b) < 0) return NULL;
  int64_t k = a->shape[da - 1], kb = b->shape[db >= 2 ? db - 2 : 0];
  if (k != kb) {
    cannot_multiply(fn, a, b, k, kb);
    return NULL;
  }
  if (da <= 2 && db <= 2) {
    /* dot [1, k] @ [k, 1] -> 0-d; mv [n, k] @ [k, 1] -> [n]; vm [1, k] @
     * [k, m] -> [m]; mm. Each step checks for NULL so that an OOM message
     * is not replaced by a complaint about a None argument. */
    kiln_tensor *a2 = da == 1 ? kiln_unsqueeze(a, 0) : a;
    kiln_tensor *b2 = a2 && db == 1 ? kiln_unsqueeze(b, 1) : b;
    kiln_tensor *r = a2 && b2 ? kiln_mm(a2, b2) : NULL;
    int64_t shape[2], nd = 0;
    if (da == 2) shape[nd++] = a->shape[0];
    if (db == 2) shape[nd++] = b->shape[1];
    return reshape_to(r, (int)nd, shape);
  }
  if (da >= 3 && db <= 2) {
    /* Fold a's batch dims into its rows: one mm instead of a bmm. */
    int64_t rows = 1, shape[KILN_MAX_DIMS];
    for (int i = 0; i < da - 1; i++) rows *= shape[i] = a->shape[i];
    int nd = da - 1;
    if (db == 2) shape[nd++] = b->shape[1];
    kiln_tensor *b2 = db == 1 ? kiln_unsqueeze(b, 1) : b;
    kiln_tensor *a2 = reshape_to(a, 2, (int64_t[]){rows, k});
    if (!a2 || !b2) return NULL;
    return reshape_to(kiln_mm(a2, b2), nd, shape);
  }
  /* Batched: broadcast the batch dims, expand both, run one bmm. */
  int64_t n = da >= 2 ? a->shape[da - 2] : 1, m = db >= 2 ? b->shape[db - 1] : 1;
  int nba = da > 2 ? da - 2 : 0, nbb = db > 2 ? db - 2 : 0, nbatch = 0;
  int64_t batch[KILN_MAX_DIMS], total = 1;
  nbatch = nba > nbb ? nba : nbb;
  for (int i = 0; i < nbatch; i++) {
    int ia = i - (nbatch - nba), ib = i - (nbatch - nbb);
    int64_t sa = ia < 0 ? 1 : a->shape[ia], sb = ib < 0 ? 1 : b->shape[ib];
    if (sa != sb && sa != 1 && sb != 1) {
      core_error(KILN_ERR_INVALID,
                 "%s: batch dims of %s and %s cannot be broadcast (dim %d: %lld vs %lld)", fn,
                 core_tensor_desc(a, d, sizeof d), core_tensor_desc(b, e, sizeof e), i,
                 (long long)sa, (long long)sb);
      return NULL;
    }
    batch[i] = sa == 1 ? sb : sa;
    if (__builtin_mul_overflow(total, batch[i], &total)) {
      core_error(KILN_ERR_INVALID, "%s: the batch of %s and %s is too large", fn,
                 core_tensor_desc(a, d, sizeof d), core_tensor_desc(b, e, sizeof e));
      return NULL;
    }
  }
  if (nbatch + 2 > KILN_MAX_DIMS) {
    core_error(KILN_ERR_INVALID, "%s: too many dims", fn);
    return NULL;
  }
  int64_t ea[KILN_MAX_DIMS], eb[KILN_MAX_DIMS], out[KILN_MAX_DIMS];
  memcpy(ea, batch, (size_t)nbatch * sizeof *ea);
  memcpy(eb, batch, (size_t)nbatch * sizeof *eb);
  memcpy(out, batch, (size_t)nbatch * sizeof *out);
  ea[nbatch] = n, ea[nbatch + 1] = k;
  eb[nbatch] = k, eb[nbatch + 1] = m;
  int nout = nbatch;
  if (da > 1) out[nout++] = n;
  if (db > 1) out[nout++] = m;
  kiln_tensor *a2 = da == 1 ? kiln_unsqueeze(a, 0) : a;
  kiln_tensor *b2 = db == 1 ? kiln_unsqueeze(b, 1) : b;
  if (!a2 || !b2) return NULL;
  if (a2->ndim != nbatch + 2 || memcmp(a2->shape, ea, (size_t)(nbatch + 2) * sizeof *ea))
    a2 = kiln_expand(a2, nbatch + 2, ea);
  if (b2 && (b2->ndim != nbatch + 2 || memcmp(b2->shape, eb, (size_t)(nbatch + 2) * sizeof *eb)))
    b2 = kiln_expand(b2, nbatch + 2, eb);
  a2 = reshape_to(a2, 3, (int64_t[]){total, n, k});
  b2 = reshape_to(b2, 3, (int64_t[]){total, k, m});
  if (!a2 || !b2) return NULL;
  return reshape_to(kiln_bmm(a2, b2), nout, out);
}

static int need_tensor2(const char *fn, const op_val *a) {
  char d[160], e[160];
  if (a[0].tag == OP_VAL_TENSOR && a[1].tag == OP_VAL_TENSOR) return 0;
  return core_error(KILN_ERR_INVALID, "%s: expected two tensors, got %s and %s", fn,
                    op_val_desc(&a[0], d, sizeof d), op_val_desc(&a[1], e, sizeof e));
}

/* torch.matmul: 1-d . 1-d is a dot product (0-d result); 2-d @ 2-d is mm; a
 * 1-d operand is promoted to a matrix (a row on the left, a column on the
 * right) and that dim removed again; with >= 3 dims on the left and <= 2 on
 * the right the batch folds into one mm; otherwise batch dims broadcast and
 * one bmm runs on the expanded operands. */
int op_matmul_decompose(const op_val *a, int n, kiln_tensor **outs, int max_outs) {
  if (need_tensor2("aten::matmul", a) < 0) return -1;
  kiln_scope_begin();
  return finish_decompose(matmul_impl(a[0].t, a[1].t), outs);
}

/* ---- linear (decomposes) -------------------------------------------------------- */

static kiln_tensor *linear_impl(kiln_tensor *x, kiln_tensor *w, kiln_tensor *bias) {
  const char *fn = "aten::linear";
  char d[160], e[160];
  if (w->ndim != 2 || x->ndim == 0) {
    core_error(KILN_ERR_INVALID,
               "%s: expected input of at least 1 dim and a 2-D weight, got %s and %s", fn,
               core_tensor_desc(x, d, sizeof d), core_tensor_desc(w, e, sizeof e));
    return NULL;
  }
  kiln_tensor *wt = kiln_t(w);
  if (!wt) return NULL;
  if (x->shape[x->ndim - 1] != w->shape[1]) {
    cannot_multiply(fn, x, wt, x->shape[x->ndim - 1], w->shape[1]);
    return NULL;
  }
  if (x->ndim == 2 && bias) return kiln_addmm(bias, x, wt, 1.0, 1.0);
  if (x->ndim == 2) return kiln_mm(x, wt);
  bool lazy = x->device == CORE_DEVICE_LAZY;
  if (x->ndim == 3 && bias && bias->ndim <= 1 && (lazy || core_is_contiguous(x))) {
    /* PyTorch 1.13's fused path for a contiguous 3-d input: addmm on the
     * [B * T, in] view, so the bias rides in the GEMM (added with the first
     * K slice, the order OpenBLAS's beta * C gives) and no pass adds it. A
     * lazy tensor's layout is known only when the graph runs: reshape
     * there views a contiguous input and copies another (as matmul's fold
     * of the batch would). */
    int64_t rows = x->shape[0] * x->shape[1], s2[2] = {rows, x->shape[2]};
    int64_t s3[3] = {x->shape[0], x->shape[1], w->shape[0]};
    kiln_tensor *r = kiln_addmm(bias, lazy ? kiln_reshape(x, 2, s2) : kiln_view(x, 2, s2), wt,
                                1.0, 1.0);
    return r ? (lazy ? kiln_reshape(r, 3, s3) : kiln_view(r, 3, s3)) : NULL;
  }
  kiln_tensor *r = kiln_matmul(x, wt);
  return bias && r ? kiln_add(r, bias) : r;
}

/* F.linear: x @ w^T + b. A 2-d input with a bias, or a contiguous 3-d one
 * (viewed as 2-d), is one addmm (the bias rides in BLAS's beta * C), as in
 * PyTorch 1.13; otherwise matmul, then add the bias. */
int op_linear_decompose(const op_val *a, int n, kiln_tensor **outs, int max_outs) {
  char d[160];
  if (need_tensor2("aten::linear", a) < 0) return -1;
  if (a[2].tag != OP_VAL_TENSOR && a[2].tag != OP_VAL_NONE)
    return core_error(KILN_ERR_INVALID, "aten::linear: bias must be a tensor or None, got %s",
                      op_val_desc(&a[2], d, sizeof d));
  kiln_scope_begin();
  return finish_decompose(linear_impl(a[0].t, a[1].t, a[2].tag == OP_VAL_TENSOR ? a[2].t : NULL),
                          outs);
}

/* ---- public API ------------------------------------------------------------------ */

kiln_tensor *kiln_mm(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_MM, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
kiln_tensor *kiln_bmm(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_BMM, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
kiln_tensor *kiln_matmul(kiln_tensor *a, kiln_tensor *b) {
  return op_call1(KILN_OP_MATMUL, (op_val[]){OPV_T(a), OPV_T(b)}, 2);
}
kiln_tensor *kiln_addmm(kiln_tensor *bias, kiln_tensor *a, kiln_tensor *b, double beta,
                        double alpha) {
  return op_call1(KILN_OP_ADDMM,
                  (op_val[]){OPV_T(bias), OPV_T(a), OPV_T(b), OPV_F(beta), OPV_F(alpha)}, 5);
}
kiln_tensor *kiln_linear(kiln_tensor *x, kiln_tensor *w, kiln_tensor *b) {
  return op_call1(KILN_OP_LINEAR, (op_val[]){OPV_T(x), OPV_T(w), OPV_T(b)}, 3);
}
