/* tests/ops/test_unary.c: unary math ops (neg ... erf): PyTorch golden
 * values and gradients for every elementwise op of the group (the runner
 * lives here), strided and promoted inputs, errors, and gradcheck samples. */
#include <stdlib.h>

#include "golden_ew.h"
#include "sample.h"
#include "test.h"

#include <string.h>

/* ---- PyTorch goldens for all elementwise ops (unary, activation, binary,
 * compare) ----------------------------------------------------------------- */

typedef kiln_tensor *(*un_fn)(kiln_tensor *);
typedef kiln_tensor *(*bin_fn)(kiln_tensor *, kiln_tensor *);

static kiln_tensor *gelu_tanh(kiln_tensor *x) { return kiln_gelu(x, true); }
static kiln_tensor *gelu_exact(kiln_tensor *x) { return kiln_gelu(x, false); }
static kiln_tensor *leaky_02(kiln_tensor *x) { return kiln_leaky_relu(x, 0.2); }
static kiln_tensor *clamp_both(kiln_tensor *x) { return kiln_clamp(x, -0.5, 1.5); }
static kiln_tensor *clamp_min(kiln_tensor *x) { return kiln_clamp(x, 0.3, NAN); }
static kiln_tensor *clamp_max(kiln_tensor *x) { return kiln_clamp(x, NAN, -0.2); }
static kiln_tensor *clamp_crossed(kiln_tensor *x) { return kiln_clamp(x, 2.0, 1.0); }
static kiln_tensor *clamp_int(kiln_tensor *x) { return kiln_clamp(x, -2, 4); }
static kiln_tensor *pow_2(kiln_tensor *x) { return kiln_pow_scalar(x, 2.0); }
static kiln_tensor *pow_half(kiln_tensor *x) { return kiln_pow_scalar(x, 0.5); }
static kiln_tensor *pow_m1_5(kiln_tensor *x) { return kiln_pow_scalar(x, -1.5); }

static const struct {
  const char *name;
  un_fn f1;
  bin_fn f2;
} calls[] = {
    {"neg", kiln_neg, NULL},        {"abs", kiln_abs, NULL},
    {"sign", kiln_sign, NULL},      {"exp", kiln_exp, NULL},
    {"log", kiln_log, NULL},        {"sqrt", kiln_sqrt, NULL},
    {"rsqrt", kiln_rsqrt, NULL},    {"sin", kiln_sin, NULL},
    {"cos", kiln_cos, NULL},        {"tanh", kiln_tanh, NULL},
    {"sigmoid", kiln_sigmoid, NULL}, {"erf", kiln_erf, NULL},
    {"relu", kiln_relu, NULL},      {"gelu", gelu_exact, NULL},
    {"gelu_tanh", gelu_tanh, NULL}, {"silu", kiln_silu, NULL},
    {"leaky_relu", leaky_02, NULL}, {"clamp", clamp_both, NULL},
    {"clamp_min", clamp_min, NULL}, {"clamp_max", clamp_max, NULL},
    {"clamp_crossed", clamp_crossed, NULL}, {"clamp_int", clamp_int, NULL},
    {"pow_2", pow_2, NULL},         {"pow_half", pow_half, NULL},
    {"pow_m1_5", pow_m1_5, NULL},   {"pow", NULL, kiln_pow},
    {"maximum", NULL, kiln_maximum}, {"minimum", NULL, kiln_minimum},
    {"eq", NULL, kiln_eq},          {"ne", NULL, kiln_ne},
    {"lt", NULL, kiln_lt},          {"le", NULL, kiln_le},
    {"gt", NULL, kiln_gt},          {"ge", NULL, kiln_ge},
    {"where", NULL, NULL},
};

static int find_call(const char *name) {
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
    if (strcmp(calls[i].name, name) == 0) return (int)i;
  return -1;
}

/* n doubles as a 1-d tensor of dtype dt. */
static kiln_tensor *vec(const double *v, int64_t n, kiln_dtype dt) {
  kiln_tensor *t = kiln_from_data(v, 1, &n, KILN_DTYPE_F64);
  return dt == KILN_DTYPE_F64 ? t : kiln_to_dtype(t, dt);
}

/* Equal as PyTorch results: same NaN-ness, same infinity, else within
 * atol + rtol * |want|. */
static bool same_value(double got, double want, double atol, double rtol) {
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  if (isinf(want) || isinf(got)) return got == want;
  return fabs(got - want) <= atol + rtol * fabs(want);
}

TEST(ew_golden_values) {
  int n_cases = (int)(sizeof golden_ew_cases / sizeof golden_ew_cases[0]), checked = 0;
  for (int k = 0; k < n_cases; k++) {
    const golden_ew_case *c = &golden_ew_cases[k];
    int ci = find_call(c->name);
    CHECK_MSG(ci >= 0, "golden case %s has no call", c->name);
    if (ci < 0) continue;
    kiln_scope_begin();
    kiln_dtype dt = (kiln_dtype)c->dtype;
    bool fl = core_dtype_is_floating(dt);
    int64_t n = fl ? GOLDEN_EW_N : GOLDEN_EW_NI;
    double xi[GOLDEN_EW_NI], yi[GOLDEN_EW_NI];
    for (int i = 0; i < GOLDEN_EW_NI; i++) {
      xi[i] = dt == KILN_DTYPE_BOOL ? golden_ew_xb[i] : (double)golden_ew_xi[i];
      yi[i] = dt == KILN_DTYPE_BOOL ? golden_ew_yb[i] : (double)golden_ew_yi[i];
    }
    kiln_tensor *x = vec(fl ? golden_ew_x : xi, n, dt), *y = vec(fl ? golden_ew_y : yi, n, dt);
    kiln_tensor *r;
    if (calls[ci].f1)
      r = calls[ci].f1(x);
    else if (calls[ci].f2)
      r = calls[ci].f2(x, y);
    else
      r = kiln_where(vec(fl ? golden_ew_c : golden_ew_ci, n, KILN_DTYPE_BOOL), x, y);
    CHECK_MSG(r != NULL, "%s(%s): failed: %s", c->name, kiln_dtype_name(dt), kiln_last_error());
    if (r) {
      CHECK_MSG((int)kiln_tensor_dtype(r) == c->out_dtype, "%s(%s): dtype %s, PyTorch %s",
                c->name, kiln_dtype_name(dt), kiln_dtype_name(kiln_tensor_dtype(r)),
                kiln_dtype_name((kiln_dtype)c->out_dtype));
      double tol = kiln_tensor_dtype(r) == KILN_DTYPE_F32 ? 1e-6 : 1e-13;
      if (!core_dtype_is_floating(kiln_tensor_dtype(r))) tol = 0;
      for (int64_t i = 0; i < n; i++) {
        double got = core_get_flat(r, i);
        CHECK_MSG(same_value(got, c->want[i], tol, tol),
                  "%s(%s) [%lld]: x=%g y=%g: got %.9g, PyTorch %.9g",
                  c->name, kiln_dtype_name(dt), (long long)i,
                  fl ? golden_ew_x[i] : xi[i], fl ? golden_ew_y[i] : yi[i], got, c->want[i]);
      }
      checked++;
    }
    kiln_scope_end();
  }
  test_note("%d golden cases", checked);
}

/* dL/dx (and dL/dy) of one golden gradient case through kiln_grad. */
static void golden_grad_case(const golden_ew_grad *c) {
  const int64_t n = GOLDEN_EW_NG;
  /* the pow cases (not unary variants such as pow_2) use base/exponent data */
  bool pow_data = find_call(c->name) < 0 || strcmp(c->name, "pow") == 0;
  kiln_scope_begin();
  kiln_tensor *x = vec(pow_data ? golden_ew_pb : golden_ew_xg, n, KILN_DTYPE_F64);
  kiln_tensor *y = vec(pow_data ? golden_ew_pe : golden_ew_yg, n, KILN_DTYPE_F64);
  kiln_tensor *gout = vec(golden_ew_g, n, KILN_DTYPE_F64);
  kiln_set_requires_grad(x, true);
  kiln_set_requires_grad(y, true);
  kiln_tensor *r = NULL, *ins[2] = {x, y}, *got[2] = {NULL, NULL};
  int n_in = 2;
  if (strcmp(c->name, "pow_value") == 0) {
    r = kiln_pow(x, y);
    for (int64_t i = 0; r && i < n; i++)
      CHECK_MSG(same_value(core_get_flat(r, i), c->dx[i], 0, 1e-14),
                "pow(%g, %g): got %.17g, PyTorch %.17g", golden_ew_pb[i], golden_ew_pe[i],
                core_get_flat(r, i), c->dx[i]);
    kiln_scope_end();
    return;
  }
  if (strcmp(c->name, "pow_base0") == 0 || strcmp(c->name, "pow_base2_5") == 0) {
    double base = c->name[8] == '0' ? 0.0 : 2.5;
    r = op_call1(KILN_OP_POW, (op_val[]){OPV_F(base), OPV_T(y)}, 2);
    ins[0] = y;
    n_in = 1;
  } else if (strcmp(c->name, "pow_exp0") == 0) {
    r = kiln_pow_scalar(x, 0.0);
    n_in = 1;
  } else if (strcmp(c->name, "where") == 0) {
    r = kiln_where(vec(golden_ew_cg, n, KILN_DTYPE_BOOL), x, y);
  } else {
    int ci = find_call(c->name);
    CHECK_MSG(ci >= 0, "golden grad %s has no call", c->name);
    if (ci < 0) goto done;
    if (calls[ci].f1) {
      r = calls[ci].f1(x);
      n_in = 1;
    } else {
      r = calls[ci].f2(x, y);
    }
  }
  CHECK_MSG(r != NULL, "%s: forward failed: %s", c->name, kiln_last_error());
  if (!r) goto done;
  int rc = kiln_grad(&r, &gout, 1, ins, n_in, NULL, got);
  CHECK_MSG(rc == 0, "%s: grad failed: %s", c->name, kiln_last_error());
  if (rc != 0) goto done;
  bool y_only = ins[0] == y;
  for (int k = 0; k < n_in; k++) {
    const double *want = (k == 0 && !y_only) ? c->dx : c->dy;
    for (int64_t i = 0; i < n; i++) {
      double gv = got[k] ? core_get_flat(got[k], i) : 0.0;
      CHECK_MSG(same_value(gv, want[i], 1e-14, 1e-12), "%s: d/d%s [%lld]: got %.17g, PyTorch %.17g",
                c->name, (k == 0 && !y_only) ? "x" : "y", (long long)i, gv, want[i]);
    }
  }
done:
  kiln_scope_end();
}

TEST(ew_golden_grads) {
  int n = (int)(sizeof golden_ew_grads / sizeof golden_ew_grads[0]);
  for (int k = 0; k < n; k++) golden_grad_case(&golden_ew_grads[k]);
  test_note("%d golden gradient cases", n);
}

/* ---- unary ops: layouts, dtypes, errors ------------------------------------ */

/* A [3, 4] float64 view, transposed, over the contiguous [4, 3] of
 * data 0..11 (element [i][j] is 3*j + i). */
static kiln_tensor *transposed_34(kiln_dtype dt) {
  double v[12];
  for (int i = 0; i < 12; i++) v[i] = 0.25 * i - 1.3;
  int64_t sh[2] = {4, 3};
  kiln_tensor *base = kiln_from_data(v, 2, sh, KILN_DTYPE_F64);
  if (dt != KILN_DTYPE_F64) base = kiln_to_dtype(base, dt);
  int64_t vsh[2] = {3, 4}, vst[2] = {1, 3};
  return core_autorelease(core_tensor_view(base->storage, dt, 2, vsh, vst, 0));
}

TEST(unary_strided_and_offset_inputs) {
  kiln_scope_begin();
  for (int d = 0; d < 2; d++) {
    kiln_dtype dt = d ? KILN_DTYPE_F64 : KILN_DTYPE_F32;
    kiln_tensor *t = transposed_34(dt);
    CHECK(!kiln_tensor_is_contiguous(t));
    kiln_tensor *r = kiln_tanh(t), *s = kiln_abs(t);
    CHECK(kiln_tensor_dtype(r) == dt && kiln_tensor_is_contiguous(r));
    CHECK_EQ_INT(kiln_tensor_shape(r)[0], 3);
    CHECK_EQ_INT(kiln_tensor_shape(r)[1], 4);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 4; j++) {
        double x = 0.25 * (3 * j + i) - 1.3;
        if (dt == KILN_DTYPE_F32) x = (float)x;
        CHECK_NEAR(core_get_flat(r, i * 4 + j), tanh(x), dt == KILN_DTYPE_F32 ? 1e-6 : 1e-15);
        CHECK_NEAR(core_get_flat(s, i * 4 + j), fabs(x), 0);
      }
  }
  /* a sliced view with an offset and a step: elements 1, 3, 5 of 0..7 */
  double v[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  int64_t n8 = 8, n3 = 3, st = 2;
  kiln_tensor *base = kiln_from_data(v, 1, &n8, KILN_DTYPE_F64);
  kiln_tensor *sl =
      core_autorelease(core_tensor_view(base->storage, KILN_DTYPE_F64, 1, &n3, &st, 1));
  kiln_tensor *r = kiln_sqrt(sl);
  for (int i = 0; i < 3; i++) CHECK_NEAR(core_get_flat(r, i), sqrt(2 * i + 1), 1e-15);
  /* an expanded (stride 0) input: [2, 3] from one row */
  int64_t sh[2] = {2, 3}, zst[2] = {0, 1};
  kiln_tensor *ex =
      core_autorelease(core_tensor_view(base->storage, KILN_DTYPE_F64, 2, sh, zst, 2));
  r = kiln_neg(ex);
  for (int i = 0; i < 6; i++) CHECK_NEAR(core_get_flat(r, i), -(2 + i % 3), 0);
  /* 0-d input */
  r = kiln_exp(kiln_scalar(1.0, KILN_DTYPE_F64));
  CHECK_EQ_INT(kiln_tensor_ndim(r), 0);
  CHECK_NEAR(core_get_flat(r, 0), M_E, 1e-15);
  /* empty input */
  int64_t z[2] = {0, 3};
  r = kiln_sin(kiln_zeros(2, z, KILN_DTYPE_F32));
  CHECK(r && kiln_tensor_numel(r) == 0 && kiln_tensor_shape(r)[1] == 3);
  kiln_scope_end();
}

TEST(unary_dtypes) {
  kiln_scope_begin();
  int64_t iv[4] = {-3, 0, 2, INT64_MIN}, n4 = 4;
  kiln_tensor *it = kiln_from_data(iv, 1, &n4, KILN_DTYPE_I64);
  /* integer kernels where PyTorch has them */
  kiln_tensor *r = kiln_neg(it);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_I64);
  const int64_t *rp = kiln_tensor_data(r);
  CHECK(rp[0] == 3 && rp[1] == 0 && rp[2] == -2 && rp[3] == INT64_MIN); /* wraps */
  r = kiln_abs(it);
  rp = kiln_tensor_data(r);
  CHECK(rp[0] == 3 && rp[2] == 2 && rp[3] == INT64_MIN);
  r = kiln_sign(it);
  rp = kiln_tensor_data(r);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_I64 && rp[0] == -1 && rp[1] == 0 && rp[2] == 1 &&
        rp[3] == -1);
  /* floating functions promote int64 and bool to float32 */
  r = kiln_exp(it);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  CHECK_NEAR(core_get_flat(r, 2), expf(2.0f), 0);
  bool bv[2] = {true, false};
  int64_t n2 = 2;
  kiln_tensor *bt = kiln_from_data(bv, 1, &n2, KILN_DTYPE_BOOL);
  r = kiln_sqrt(bt);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  CHECK_NEAR(core_get_flat(r, 0), 1.0, 0);
  r = kiln_sign(bt);
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_BOOL && core_get_flat(r, 0) == 1 &&
        core_get_flat(r, 1) == 0);
  /* float32 stays float32 */
  r = kiln_log(kiln_scalar(2.0, KILN_DTYPE_F32));
  CHECK(kiln_tensor_dtype(r) == KILN_DTYPE_F32);
  CHECK_NEAR(core_get_flat(r, 0), logf(2.0f), 0);
  kiln_scope_end();
}

TEST(unary_errors) {
  kiln_scope_begin();
  bool bv[2] = {true, false};
  int64_t n2 = 2;
  kiln_tensor *bt = kiln_from_data(bv, 1, &n2, KILN_DTYPE_BOOL);
  CHECK(kiln_neg(bt) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::neg: not implemented for dtype Bool");
  CHECK(kiln_abs(bt) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::abs: not implemented for dtype Bool");
  CHECK(kiln_exp(NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "aten::exp: operand 0 must be a tensor or a number");
  kiln_scope_end();
}

/* Distance in units in the last place between two finite floats. */
static int64_t ulps(float a, float b) {
  int32_t ia, ib;
  memcpy(&ia, &a, 4);
  memcpy(&ib, &b, 4);
  if (ia < 0) ia = (int32_t)0x80000000 - ia;
  if (ib < 0) ib = (int32_t)0x80000000 - ib;
  return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

/* The parallel fast path (numel >= OP_PARALLEL_MIN) and the gathered path
 * (a transposed input) agree with libm element by element: exactly for
 * rsqrt, within 2 ulp for exp and sigmoid (kiln's vectorizable exp,
 * src/ops/vmath.h). */
TEST(unary_large_matches_libm) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(17);
  int64_t n = 100003, sh[2] = {331, 303}, tsh[2] = {303, 331};
  kiln_tensor *x = kiln_randn(1, &n, KILN_DTYPE_F32, g);
  kiln_tensor *e = kiln_exp(x), *s = kiln_sigmoid(x), *q = kiln_rsqrt(kiln_abs(x));
  const float *px = kiln_tensor_data(x), *pe = kiln_tensor_data(e), *ps = kiln_tensor_data(s),
              *pq = kiln_tensor_data(q);
  int bad_e = 0, bad_s = 0, bad_q = 0;
  for (int64_t i = 0; i < n; i++) {
    bad_e += ulps(pe[i], expf(px[i])) > 2;
    bad_s += ulps(ps[i], 1.0f / (1.0f + expf(-px[i]))) > 2;
    bad_q += pq[i] != 1.0f / sqrtf(fabsf(px[i]));
  }
  CHECK_EQ_INT(bad_e, 0);
  CHECK_EQ_INT(bad_s, 0);
  CHECK_EQ_INT(bad_q, 0);
  kiln_tensor *m = kiln_randn(2, sh, KILN_DTYPE_F64, g);
  int64_t st[2] = {1, 303}; /* the transpose of m */
  kiln_tensor *mt = core_autorelease(core_tensor_view(m->storage, KILN_DTYPE_F64, 2, tsh, st, 0));
  kiln_tensor *c = kiln_cos(mt);
  const double *pm = kiln_tensor_data(m), *pc = kiln_tensor_data(c);
  int bad = 0;
  for (int64_t i = 0; i < tsh[0]; i++)
    for (int64_t j = 0; j < tsh[1]; j++) bad += pc[i * tsh[1] + j] != cos(pm[j * sh[1] + i]);
  CHECK_EQ_INT(bad, 0);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* The engine chains the formulas: d/dx 3 (exp(x) + log|x|) = 3 (exp(x) + 1/x). */
TEST(unary_backward_by_hand) {
  kiln_scope_begin();
  double v[3] = {-0.7, 0.2, 1.9};
  int64_t n = 3;
  kiln_tensor *x = kiln_from_data(v, 1, &n, KILN_DTYPE_F64);
  kiln_set_requires_grad(x, true);
  kiln_tensor *y = kiln_mul_scalar(kiln_add(kiln_exp(x), kiln_log(kiln_abs(x))), 3.0);
  CHECK(kiln_backward(y, kiln_ones(1, &n, KILN_DTYPE_F64)) == 0);
  kiln_tensor *gx = kiln_tensor_grad(x);
  CHECK(gx != NULL);
  for (int i = 0; gx && i < 3; i++)
    CHECK_NEAR(core_get_flat(gx, i), 3.0 * (exp(v[i]) + 1.0 / v[i]), 1e-12);
  CHECK_STR_CONTAINS(kiln_grad_fn_name(kiln_exp(x)), "aten::exp");
  kiln_scope_end();
}

/* ---- gradcheck samples ------------------------------------------------------- */

static const int64_t S23[2] = {2, 3}, S34[2] = {3, 4}, S232[3] = {2, 3, 2}, S25[2] = {2, 5};

/* Values in [0.2, 1.5) with random signs: away from the kink at 0. */
static kiln_tensor *away_from_zero(kiln_generator *g, int ndim, const int64_t *shape) {
  kiln_tensor *sign = kiln_sign(sample_randn(g, ndim, shape));
  return kiln_mul(sample_uniform(g, ndim, shape, 0.2, 1.5), sign);
}

#define SAMPLE_1(ENUM, tag, expr)                                               \
  OP_SAMPLE(ENUM, tag) {                                                        \
    s->args[0] = OPV_T(expr);                                                   \
    s->n_args = 1;                                                              \
  }

SAMPLE_1(NEG, plain, sample_randn(g, 2, S23))
SAMPLE_1(NEG, transposed, sample_transposed(g, S34))
SAMPLE_1(ABS, away_from_zero, away_from_zero(g, 3, S232))
SAMPLE_1(SIGN, plain, away_from_zero(g, 2, S23))
SAMPLE_1(EXP, plain, sample_randn(g, 2, S34))
SAMPLE_1(EXP, transposed, sample_transposed(g, S23))
SAMPLE_1(EXP, zero_dim, sample_randn(g, 0, NULL))
SAMPLE_1(LOG, positive, sample_uniform(g, 2, S25, 0.5, 3.0))
SAMPLE_1(SQRT, positive, sample_uniform(g, 2, S25, 0.5, 3.0))
SAMPLE_1(RSQRT, positive, sample_uniform(g, 2, S25, 0.5, 3.0))
SAMPLE_1(SIN, plain, sample_randn(g, 2, S34))
SAMPLE_1(COS, transposed, sample_transposed(g, S34))
SAMPLE_1(TANH, plain, sample_randn(g, 3, S232))
SAMPLE_1(SIGMOID, plain, sample_randn(g, 2, S34))
SAMPLE_1(ERF, plain, sample_randn(g, 2, S34))

/* kiln's float32 tanh (src/ops/vmath.h) against double-precision tanh over
 * a sweep of floats in (-12, 12), tiny and huge values, and the kernel on a
 * tensor: within 3 ulp (measured 2.5), odd, NaN through, +-1 at the ends. */
TEST(unary_tanh_f32_accuracy) {
  kiln_scope_begin();
  int64_t n = 0, cap = 200000;
  float *xs = malloc((size_t)cap * sizeof *xs);
  for (uint32_t b = 0; b < 0x41400000u && n + 2 <= cap; b += 0x41400000u / (cap / 2)) {
    float x;
    memcpy(&x, &b, sizeof x);
    xs[n++] = x;
    xs[n++] = -x;
  }
  kiln_tensor *x = kiln_from_data(xs, 1, &n, KILN_DTYPE_F32);
  kiln_tensor *t = kiln_tanh(x);
  const float *pt = kiln_tensor_data(t);
  int64_t worst = 0, odd_bad = 0;
  for (int64_t i = 0; pt && i < n; i++) {
    float want = (float)tanh((double)xs[i]);
    int64_t u = ulps(pt[i], want);
    /* within 3 ulp of the correctly rounded value (ulps() counts float steps) */
    if (u > worst) worst = u;
    if (i % 2 && pt[i] != -pt[i - 1]) odd_bad++;
  }
  CHECK_MSG(worst <= 3, "tanh: %lld ulp", (long long)worst);
  CHECK_EQ_INT(odd_bad, 0);
  float edge[6] = {1e-30f, -1e-30f, 40.0f, -1e30f, NAN, INFINITY};
  int64_t n6 = 6;
  const float *pe = kiln_tensor_data(kiln_tanh(kiln_from_data(edge, 1, &n6, KILN_DTYPE_F32)));
  CHECK(pe && pe[0] == 1e-30f && pe[1] == -1e-30f && pe[2] == 1.0f && pe[3] == -1.0f &&
        isnan(pe[4]) && pe[5] == 1.0f);
  free(xs);
  kiln_scope_end();
}
