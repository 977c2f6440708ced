/* tests/autograd/test_inplace_saved.c: what an in-place op saves for
 * backward, against PyTorch 1.13 (tests/data/inplace_saved/cases.txt, from
 * scripts/golden/inplace_saved.py): y = x * 1, y.<op>_(args), a second
 * write y.add_(1), then backward. An op whose backward uses its result
 * saved y itself (Note [In-place saved result] in src/ops/inplace.c), so
 * the backward fails on y's version with PyTorch's numbers; one that saved
 * nothing of y (add_, mul_ by a constant) or its old value (sin_, mul_ by
 * a tensor) gives PyTorch's gradient. Found by fuzz/fuzz_exec.c: eager
 * backpropagated through relu_ then add_, where the jit failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "test.h"

#define CASES "tests/data/inplace_saved/cases.txt"

/* "a;b" into v[2] */
static void pair(const char *s, char sep, double *v) {
  char *end;
  v[0] = strtod(s, &end);
  v[1] = *end == sep ? strtod(end + 1, NULL) : 0;
}

/* One case's arguments after self (see the script's header); n or -1. */
static int parse_args(char *spec, op_val *a, int max) {
  int n = 0;
  if (!strcmp(spec, "-")) return 0;
  for (char *tok = strtok(spec, ","); tok && n < max; tok = strtok(NULL, ",")) {
    if (tok[0] == 'f' && tok[1] == ':') {
      a[n++] = OPV_F(strtod(tok + 2, NULL));
    } else if ((tok[0] == 't' || tok[0] == 'g') && tok[1] == ':') {
      double v[2];
      int64_t s[1] = {2};
      pair(tok + 2, ';', v);
      kiln_tensor *t = kiln_from_data(v, 1, s, KILN_DTYPE_F64);
      if (!t || (tok[0] == 'g' && kiln_set_requires_grad(t, true) < 0)) return -1;
      a[n++] = OPV_T(t);
    } else {
      return -1;
    }
  }
  return n;
}

TEST(inplace_saves_what_pytorch_saves_then_a_second_write) {
  FILE *f = fopen(CASES, "r");
  CHECK_MSG(f != NULL, "cannot open %s", CASES);
  if (!f) return;
  char line[256];
  int cases = 0, failing = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char op[32], spec[64], xs[64], kind[16], rest[96];
    if (sscanf(line, "%31s %63s %63s %15s %95[^\n]", op, spec, xs, kind, rest) != 5) {
      CHECK_MSG(0, "bad line: %s", line);
      continue;
    }
    kiln_scope_begin();
    char name[48];
    snprintf(name, sizeof name, "aten::%s_", op);
    op_val a[4];
    double xv[2], want[2];
    int64_t s[1] = {2};
    pair(xs, ',', xv);
    kiln_tensor *x = kiln_from_data(xv, 1, s, KILN_DTYPE_F64);
    kiln_set_requires_grad(x, true);
    kiln_tensor *y = kiln_mul(x, kiln_scalar(1.0, KILN_DTYPE_F64)); /* not a leaf */
    a[0] = OPV_T(y);
    int n = parse_args(spec, a + 1, 3);
    int id = n >= 0 ? op_find_arity(name, n + 1) : -1;
    if (id < 0) id = op_find(name);
    CHECK_MSG(n >= 0 && id >= 0, "%s %s: no such op or bad arguments", name, spec);
    kiln_tensor *r = n >= 0 && id >= 0 ? op_call1(id, a, n + 1) : NULL;
    CHECK_MSG(r == y, "%s %s: %s", name, spec, kiln_last_error());
    if (r == y) {
      CHECK(kiln_add_(y, kiln_scalar(1.0, KILN_DTYPE_F64), 1.0) == 0); /* the second write */
      kiln_clear_error();
      int rc = kiln_backward(kiln_sum(y, NULL, 0, false), NULL);
      if (!strcmp(kind, "version")) {
        unsigned now = 0, expected = 0;
        char msg[96];
        sscanf(rest, "%u %u", &now, &expected);
        snprintf(msg, sizeof msg, "is at version %u; expected version %u", now, expected);
        CHECK_MSG(rc < 0, "%s %s: backward ran; PyTorch: %s", name, spec, msg);
        CHECK_MSG(strstr(kiln_last_error(), "modified by an inplace operation") &&
                      strstr(kiln_last_error(), msg),
                  "%s %s: '%s', PyTorch: %s", name, spec, kiln_last_error(), msg);
        failing++;
      } else {
        pair(rest, ',', want);
        CHECK_MSG(rc == 0, "%s %s: backward failed: %s", name, spec, kiln_last_error());
        double g[2] = {0};
        kiln_tensor *gt = kiln_tensor_grad(x);
        CHECK_MSG(gt && kiln_tensor_copy_to(gt, g, KILN_DTYPE_F64) == 0, "%s: no gradient", name);
        for (int i = 0; i < 2; i++)
          CHECK_MSG(fabs(g[i] - want[i]) <= 1e-12 * (1 + fabs(want[i])), "%s %s: grad[%d] %.17g, PyTorch %.17g",
                    name, spec, i, g[i], want[i]);
      }
    }
    cases++;
    kiln_scope_end();
  }
  fclose(f);
  CHECK(cases >= 30);
  CHECK(failing >= 19);
  test_note("%d cases, %d fail on the version as in PyTorch", cases, failing);
}

/* Through a view (Note [CopySlices]): relu_ saved its result h[0], which
 * shares h's version; writing h[1] then fails relu's backward as PyTorch
 * does ("is at version 2; expected version 1"), while clamp_(min=0), which
 * saves h[0]'s old value, backpropagates: d sum(h)/dx = 2 where x[0] > 0
 * (clamp_'s zero gradient below the bound), 2 in row 1. */
TEST(inplace_saved_result_through_a_view_sees_a_write_of_its_base) {
  static const double xv[6] = {0.5, -1, 2, 1, 2, -3};
  const double want[6] = {2, 0, 2, 2, 2, 2};
  for (int relu = 1; relu >= 0; relu--) {
    kiln_scope_begin();
    int64_t s[2] = {2, 3};
    kiln_tensor *x = kiln_from_data(xv, 2, s, KILN_DTYPE_F64);
    kiln_set_requires_grad(x, true);
    kiln_tensor *h = kiln_mul_scalar(x, 2.0);
    kiln_tensor *row0 = kiln_select(h, 0, 0);
    kiln_tensor *w = relu ? op_call1(KILN_OP_INPLACE(KILN_OP_RELU), (op_val[]){OPV_T(row0)}, 1)
                          : op_call1(KILN_OP_INPLACE(KILN_OP_CLAMP),
                                     (op_val[]){OPV_T(row0), OPV_F(0), OPV_NONE}, 3);
    CHECK_MSG(w == row0, "%s", kiln_last_error());
    CHECK(kiln_add_(kiln_select(h, 0, 1), kiln_scalar(1.0, KILN_DTYPE_F64), 1.0) == 0);
    kiln_clear_error();
    int rc = kiln_backward(kiln_sum(h, NULL, 0, false), NULL);
    if (relu) {
      CHECK(rc < 0);
      CHECK_STR_CONTAINS(kiln_last_error(), "output 0 of aten::relu, is at version 2; expected version 1");
    } else {
      CHECK_MSG(rc == 0, "%s", kiln_last_error());
      double g[6] = {0};
      CHECK(kiln_tensor_grad(x) && kiln_tensor_copy_to(kiln_tensor_grad(x), g, KILN_DTYPE_F64) == 0);
      for (int i = 0; i < 6; i++) CHECK_NEAR(g[i], want[i], 0);
    }
    kiln_scope_end();
  }
}
