/* tests/ops/test_dtype_widen.c: ops without a narrow kernel on the narrow
 * dtypes (Note [Widening] in src/ops/widen.c): results and their dtypes
 * against PyTorch 1.13 (tests/data/dtypes/narrow.txt, written by
 * scripts/golden/dtypes.py), refusals where PyTorch refuses, gradients of
 * half tensors in their dtype, running statistics written back. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "dtype_data.h"
#include "ops/op.h"
#include "test.h"

static double eps_of(kiln_dtype dt) {
  return dt == KILN_DTYPE_F16 ? 0x1p-10 : dt == KILN_DTYPE_BF16 ? 0x1p-7 : 0x1p-22;
}

/* got ~ want: same dtype and shape; integers and bools exactly; floating
 * elements within eps * (|want| + max|want| / 16) of the dtype (PyTorch's
 * and kiln's float32 kernels sum in other orders, so a result may round
 * to the neighbouring half value) */
static bool close_within(const kiln_tensor *got, const kiln_tensor *want, double ulps,
                         double frac, char *why, size_t nw) {
  if (!got) return snprintf(why, nw, "no result: %s", kiln_last_error()), false;
  if (got->dtype != want->dtype)
    return snprintf(why, nw, "dtype %s, PyTorch's %s", kiln_dtype_name(got->dtype),
                    kiln_dtype_name(want->dtype)), false;
  if (got->ndim != want->ndim || memcmp(got->shape, want->shape, (size_t)got->ndim * 8))
    return snprintf(why, nw, "shape differs"), false;
  kiln_tensor *g = kiln_contiguous((kiln_tensor *)got);
  int64_t n = kiln_tensor_numel(want);
  double scale = 0;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(core_get_flat(want, i)));
  for (int64_t i = 0; i < n; i++) {
    double x = core_get_flat(g, i), y = core_get_flat(want, i);
    if (x == y || (isnan(x) && isnan(y))) continue;
    if (core_dtype_is_floating(want->dtype) &&
        fabs(x - y) <= ulps * eps_of(want->dtype) * (fabs(y) + scale * frac))
      continue;
    return snprintf(why, nw, "element %lld: %.9g, PyTorch's %.9g", (long long)i, x, y), false;
  }
  return true;
}

static bool close_tensor(const kiln_tensor *got, const kiln_tensor *want, char *why, size_t nw) {
  return close_within(got, want, 1, 1.0 / 16, why, nw);
}

static char *next_line(char **p) {
  while (**p) {
    char *l = *p, *e = strchr(l, '\n');
    if (e) *e = 0, *p = e + 1;
    else *p = l + strlen(l);
    if (*l && *l != '#') return l;
  }
  return NULL;
}

/* Every line of narrow.txt: op/opf lines give PyTorch's results (dtype,
 * shape, values), err lines must refuse with a message naming the op and
 * the dtype ("aten::softmax: not implemented for dtype Char"). */
TEST(dtypes_widened_ops_match_torch) {
  char *buf = test_read_file("tests/data/dtypes/narrow.txt", NULL), *p = buf, *l;
  CHECK(buf != NULL);
  if (!buf) return;
  int n_ok = 0, n_err = 0, per[KILN_DTYPE_COUNT] = {0};
  while ((l = next_line(&p))) {
    kiln_scope_begin();
    char *save = NULL, *tag = strtok_r(l, " ", &save), *aten = strtok_r(NULL, " ", &save);
    int nargs = atoi(strtok_r(NULL, " ", &save));
    op_val args[10];
    int64_t ints[10][KILN_MAX_DIMS];
    kiln_tensor *lists[10][4];
    bool ok = nargs <= 10;
    kiln_dtype dt = KILN_DTYPE_COUNT;
    for (int i = 0; ok && i < nargs; i++) {
      char *tok = strtok_r(NULL, " ", &save);
      ok = tok != NULL;
      if (ok && !strncmp(tok, "TL:", 3)) {
        int k = atoi(tok + 3);
        ok = k <= 4;
        for (int j = 0; ok && j < k; j++) ok = (lists[i][j] = test_dtype_parse_tensor(strtok_r(NULL, " ", &save))) != NULL;
        args[i] = OPV_TS(lists[i], k);
        if (ok && dt == KILN_DTYPE_COUNT) dt = lists[i][0]->dtype;
      } else if (ok) {
        ok = test_dtype_parse_arg(tok, &args[i], ints[i]);
        if (ok && args[i].tag == OP_VAL_TENSOR && dt == KILN_DTYPE_COUNT) dt = args[i].t->dtype;
      }
    }
    int op = op_find_arity(aten, nargs);
    CHECK_MSG(ok && op >= 0 && dt < KILN_DTYPE_COUNT, "bad line for %s", aten);
    if (ok && op >= 0 && dt < KILN_DTYPE_COUNT) {
      kiln_tensor *outs[4] = {0};
      int got = op_call(op, args, nargs, outs, 4); /* results autoreleased */
      if (!strcmp(tag, "err")) {
        CHECK_MSG(got < 0, "%s(%s): PyTorch refuses, kiln gave a result", aten, kiln_dtype_name(dt));
        if (got < 0) { /* one line naming the op and the dtype */
          CHECK_STR_CONTAINS(kiln_last_error(), aten);
          CHECK_STR_CONTAINS(kiln_last_error(), kiln_dtype_name(dt));
        }
        n_err++;
      } else {
        strtok_r(NULL, " ", &save); /* -> */
        int nout = atoi(strtok_r(NULL, " ", &save));
        CHECK_MSG(got == nout, "%s %s(%s): %d results, PyTorch's %d: %s", tag, aten,
                  kiln_dtype_name(dt), got, nout, got < 0 ? kiln_last_error() : "");
        for (int k = 0; got == nout && k < nout; k++) {
          kiln_tensor *want = test_dtype_parse_tensor(strtok_r(NULL, " ", &save));
          char why[300];
          CHECK_MSG(want && close_tensor(outs[k], want, why, sizeof why), "%s %s(%s) result %d: %s",
                    tag, aten, kiln_dtype_name(dt), k, want ? why : "bad line");
        }
        per[dt]++;
        n_ok++;
      }
    }
    kiln_scope_end();
  }
  test_note("%d widened op cases (Half %d, BFloat16 %d, Char %d, Byte %d, Int %d), %d refusals",
            n_ok, per[KILN_DTYPE_F16], per[KILN_DTYPE_BF16], per[KILN_DTYPE_I8],
            per[KILN_DTYPE_U8], per[KILN_DTYPE_I32], n_err);
  CHECK(n_ok > 80 && n_err > 10);
  free(buf);
}

static kiln_tensor *call(const char *aten, op_val *args, int n) {
  int op = op_find_arity(aten, n);
  return op >= 0 ? op_call1(op, args, n) : NULL;
}

typedef kiln_tensor *(*fwd_fn)(kiln_tensor *x, kiln_tensor *aux);

static kiln_tensor *f_mm(kiln_tensor *x, kiln_tensor *w) { return kiln_mm(x, w); }
static kiln_tensor *f_softmax(kiln_tensor *x, kiln_tensor *w) { (void)w; return kiln_softmax(x, 1); }
static kiln_tensor *f_layer_norm(kiln_tensor *x, kiln_tensor *w) {
  int64_t s = x->shape[1];
  kiln_tensor *w1 = kiln_reshape(kiln_narrow(w, 0, 0, 1), 1, &s); /* weight [6] */
  return call("aten::layer_norm", (op_val[]){OPV_T(x), OPV_INTS(&s, 1), OPV_T(w1), OPV_NONE,
                                             OPV_F(1e-5), OPV_B(true)}, 6);
}
/* training-mode batch norm over x's 6 channels, weight from w */
static kiln_tensor *f_batch_norm(kiln_tensor *x, kiln_tensor *w) {
  int64_t s = x->shape[1];
  kiln_tensor *w1 = kiln_reshape(kiln_narrow(w, 0, 0, 1), 1, &s);
  return call("aten::batch_norm", (op_val[]){OPV_T(x), OPV_T(w1), OPV_NONE, OPV_NONE, OPV_NONE,
                                             OPV_B(true), OPV_F(0.1), OPV_F(1e-5), OPV_B(false)}, 9);
}
static kiln_tensor *f_cumsum(kiln_tensor *x, kiln_tensor *w) {
  (void)w;
  return call("aten::cumsum", (op_val[]){OPV_T(x), OPV_I(1), OPV_NONE}, 3);
}
static kiln_tensor *f_conv(kiln_tensor *x, kiln_tensor *w) {
  kiln_tensor *xi = kiln_reshape(x, 4, (int64_t[]){1, 1, 4, 6});
  int64_t one[2] = {1, 1}, zero[2] = {0, 0};
  kiln_tensor *wk = kiln_reshape(kiln_narrow(kiln_narrow(w, 0, 0, 2), 1, 0, 2), 4, (int64_t[]){1, 1, 2, 2});
  return call("aten::conv2d", (op_val[]){OPV_T(xi), OPV_T(wk), OPV_NONE, OPV_INTS(one, 2),
                                         OPV_INTS(zero, 2), OPV_INTS(one, 2), OPV_I(1)}, 7);
}
static kiln_tensor *f_max_pool(kiln_tensor *x, kiln_tensor *w) {
  (void)w;
  kiln_tensor *xi = kiln_reshape(x, 4, (int64_t[]){1, 1, 4, 6});
  int64_t two[2] = {2, 2}, zero[2] = {0, 0}, one[2] = {1, 1};
  return call("aten::max_pool2d", (op_val[]){OPV_T(xi), OPV_INTS(two, 2), OPV_INTS(two, 2),
                                             OPV_INTS(zero, 2), OPV_INTS(one, 2), OPV_B(false)}, 6);
}
static kiln_tensor *f_sort(kiln_tensor *x, kiln_tensor *w) {
  (void)w;
  return call("aten::sort", (op_val[]){OPV_T(x), OPV_I(-1), OPV_B(true)}, 3);
}
static kiln_tensor *f_cat(kiln_tensor *x, kiln_tensor *w) {
  kiln_tensor *ts[2] = {x, kiln_narrow(w, 0, 0, 2)};
  return call("aten::cat", (op_val[]){OPV_TS(ts, 2), OPV_I(0)}, 2);
}

/* sum(op(x) * c) on a half x: the gradient is of x's dtype, and within
 * rounding of the same computation in float32 (from the same values): the
 * backward formula runs on half tensors, as PyTorch's, so each of its few
 * ops rounds (4 units of the largest gradient's 1/4). */
TEST(dtypes_widened_gradients_keep_the_half_dtype) {
  static const struct { const char *name; fwd_fn f; } ops[] = {
    {"mm", f_mm}, {"softmax", f_softmax}, {"layer_norm", f_layer_norm}, {"batch_norm", f_batch_norm}, {"cumsum", f_cumsum},
    {"conv2d", f_conv}, {"max_pool2d", f_max_pool}, {"sort", f_sort}, {"cat", f_cat}};
  kiln_dtype dts[2] = {KILN_DTYPE_F16, KILN_DTYPE_BF16};
  kiln_manual_seed(16);
  for (int d = 0; d < 2; d++)
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
      kiln_scope_begin();
      int64_t sx[2] = {4, 6}, sw[2] = {6, 6};
      kiln_tensor *x32 = kiln_to_dtype(kiln_to_dtype(kiln_randn(2, sx, KILN_DTYPE_F32, NULL), dts[d]), KILN_DTYPE_F32);
      kiln_tensor *w32 = kiln_to_dtype(kiln_to_dtype(kiln_randn(2, sw, KILN_DTYPE_F32, NULL), dts[d]), KILN_DTYPE_F32);
      kiln_tensor *xh = kiln_to_dtype(x32, dts[d]), *wh = kiln_to_dtype(w32, dts[d]);
      kiln_tensor *g[2] = {NULL, NULL};
      kiln_tensor *xs[2] = {xh, x32}, *ws[2] = {wh, w32};
      for (int v = 0; v < 2; v++) {
        kiln_tensor *x = kiln_detach(xs[v]);
        kiln_set_requires_grad(x, true);
        kiln_tensor *y = ops[k].f(x, ws[v]);
        CHECK_MSG(y != NULL, "%s(%s): %s", ops[k].name, kiln_dtype_name(x->dtype), kiln_last_error());
        if (!y) continue;
        CHECK_MSG(y->dtype == x->dtype, "%s(%s) gave %s", ops[k].name, kiln_dtype_name(x->dtype),
                  kiln_dtype_name(y->dtype));
        /* a fixed cotangent of y's shape: (i % 5 - 2) / 4, exact in both dtypes */
        int64_t n = kiln_tensor_numel(y);
        kiln_tensor *c = kiln_empty(y->ndim, y->shape, KILN_DTYPE_F32);
        for (int64_t i = 0; c && i < n; i++) ((float *)core_data(c))[i] = (float)(i % 5 - 2) / 4;
        kiln_tensor *loss = kiln_sum(kiln_mul(y, kiln_to_dtype(c, y->dtype)), NULL, 0, false);
        CHECK_MSG(loss && kiln_backward(loss, NULL) == KILN_OK, "%s backward: %s", ops[k].name,
                  kiln_last_error());
        g[v] = kiln_tensor_grad(x);
      }
      CHECK_MSG(g[0] && g[0]->dtype == dts[d], "%s: the gradient of a %s input is %s", ops[k].name,
                kiln_dtype_name(dts[d]), g[0] ? kiln_dtype_name(g[0]->dtype) : "missing");
      if (g[0] && g[1]) {
        kiln_tensor *want = kiln_to_dtype(g[1], dts[d]);
        char why[300];
        CHECK_MSG(close_within(g[0], want, 4, 0.25, why, sizeof why), "%s(%s) gradient: %s", ops[k].name,
                  kiln_dtype_name(dts[d]), why);
      }
      kiln_scope_end();
    }
}

/* batch_norm in training on Half: the running statistics (Half tensors)
 * are updated in place, as the float32 computation rounded. */
TEST(dtypes_widened_batch_norm_updates_half_running_stats) {
  kiln_scope_begin();
  kiln_manual_seed(17);
  int64_t sx[2] = {5, 3}, sc = 3;
  kiln_tensor *x32 = kiln_to_dtype(kiln_to_dtype(kiln_randn(2, sx, KILN_DTYPE_F32, NULL), KILN_DTYPE_F16), KILN_DTYPE_F32);
  kiln_tensor *rm[2] = {kiln_zeros(1, &sc, KILN_DTYPE_F16), kiln_zeros(1, &sc, KILN_DTYPE_F32)};
  kiln_tensor *rv[2] = {kiln_ones(1, &sc, KILN_DTYPE_F16), kiln_ones(1, &sc, KILN_DTYPE_F32)};
  kiln_tensor *y[2];
  for (int v = 0; v < 2; v++) {
    kiln_tensor *x = v ? x32 : kiln_to_dtype(x32, KILN_DTYPE_F16);
    y[v] = call("aten::batch_norm", (op_val[]){OPV_T(x), OPV_NONE, OPV_NONE, OPV_T(rm[v]), OPV_T(rv[v]),
                                               OPV_B(true), OPV_F(0.1), OPV_F(1e-5), OPV_B(false)}, 9);
    CHECK_MSG(y[v] != NULL, "batch_norm: %s", kiln_last_error());
  }
  char why[300];
  CHECK(rm[0]->dtype == KILN_DTYPE_F16 && rv[0]->dtype == KILN_DTYPE_F16);
  CHECK_MSG(close_tensor(rm[0], kiln_to_dtype(rm[1], KILN_DTYPE_F16), why, sizeof why), "running_mean: %s", why);
  CHECK_MSG(close_tensor(rv[0], kiln_to_dtype(rv[1], KILN_DTYPE_F16), why, sizeof why), "running_var: %s", why);
  CHECK(core_get_flat(rm[0], 0) != 0.0);
  if (y[0] && y[1])
    CHECK_MSG(close_tensor(y[0], kiln_to_dtype(y[1], KILN_DTYPE_F16), why, sizeof why), "output: %s", why);
  kiln_scope_end();
}

/* any/all as PyTorch 1.13: a Byte input gives Byte (its legacy uint8
 * results), every other dtype Bool. PyTorch: x = [[1, 0], [0, 0]] uint8:
 * x.any() 1, x.all() 0, x.any(1) [1, 0], x.all(0, keepdim=True) [[0, 0]];
 * [1, 2] int8 .any() True; [1., 2.] half .all() True. */
TEST(dtypes_any_all_of_uint8_are_uint8) {
  kiln_scope_begin();
  int64_t s2[2] = {2, 2}, s1[1] = {2};
  kiln_tensor *x = kiln_zeros(2, s2, KILN_DTYPE_U8);
  ((unsigned char *)core_data(x))[0] = 1;
  kiln_tensor *r[4] = {call("aten::any", (op_val[]){OPV_T(x)}, 1),
                       call("aten::all", (op_val[]){OPV_T(x)}, 1),
                       call("aten::any", (op_val[]){OPV_T(x), OPV_I(1), OPV_B(false)}, 3),
                       call("aten::all", (op_val[]){OPV_T(x), OPV_I(0), OPV_B(true)}, 3)};
  static const double want[4][2] = {{1, -1}, {0, -1}, {1, 0}, {0, 0}};
  for (int k = 0; k < 4; k++) {
    CHECK_MSG(r[k] && r[k]->dtype == KILN_DTYPE_U8, "case %d: %s", k,
              r[k] ? kiln_dtype_name(r[k]->dtype) : kiln_last_error());
    for (int i = 0; r[k] && i < 2 && want[k][i] >= 0; i++)
      CHECK_MSG(core_get_flat(r[k], i) == want[k][i], "case %d element %d: %g", k, i,
                core_get_flat(r[k], i));
  }
  CHECK(r[3] && r[3]->ndim == 2 && r[3]->shape[0] == 1 && r[3]->shape[1] == 2);
  kiln_tensor *c = kiln_ones(1, s1, KILN_DTYPE_I8), *h = kiln_ones(1, s1, KILN_DTYPE_F16);
  kiln_tensor *ca = call("aten::any", (op_val[]){OPV_T(c)}, 1);
  kiln_tensor *ha = call("aten::all", (op_val[]){OPV_T(h)}, 1);
  CHECK(ca && ca->dtype == KILN_DTYPE_BOOL && core_get_flat(ca, 0) == 1);
  CHECK(ha && ha->dtype == KILN_DTYPE_BOOL && core_get_flat(ha, 0) == 1);
  kiln_scope_end();
}
