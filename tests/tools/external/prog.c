/* tests/tools/external/prog.c: a program outside kiln's tree, built against
 * an installed kiln with pkg-config (tests/tools/install_test.sh): y =
 * sum(w * x) with w requiring grad, so dy/dw = x; an IR graph run by the
 * profiling executor; the header's and the library's versions agree.
 * Prints "ok" and exits 0 when every value is right. */
#include <kiln.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  if (strcmp(kiln_version(), KILN_VERSION_STRING) != 0) {
    fprintf(stderr, "version %s != header %s\n", kiln_version(), KILN_VERSION_STRING);
    return 1;
  }
  int64_t shape[1] = {3};
  float xs[3] = {1, 2, 3}, ws[3] = {0.5f, -1, 2};
  kiln_scope_begin();
  kiln_tensor *x = kiln_from_data(xs, 1, shape, KILN_DTYPE_F32);
  kiln_tensor *w = kiln_from_data(ws, 1, shape, KILN_DTYPE_F32);
  kiln_set_requires_grad(w, true);
  kiln_tensor *y = kiln_sum(kiln_mul(w, x), NULL, 0, false);
  double v = 0;
  if (!y || kiln_item(y, &v) < 0 || fabs(v - 4.5) > 1e-6 || kiln_backward(y, NULL) < 0) {
    fprintf(stderr, "eager: %s (y = %g)\n", kiln_last_error(), v);
    return 1;
  }
  const float *g = kiln_tensor_data(kiln_tensor_grad(w));
  if (g[0] != 1 || g[1] != 2 || g[2] != 3) {
    fprintf(stderr, "grad %g %g %g\n", g[0], g[1], g[2]);
    return 1;
  }
  const char *ir = "graph(%a : Tensor, %b : Tensor):\n"
                   "  %c : Tensor = aten::mul(%a, %b)\n"
                   "  %d : Tensor = aten::relu(%c)\n"
                   "  return (%d)\n";
  kiln_graph *gr = kiln_graph_parse(ir, strlen(ir));
  kiln_function *f = gr ? kiln_function_new(gr) : NULL;
  kiln_value in[2] = {{.kind = KILN_VALUE_TENSOR, .t = x}, {.kind = KILN_VALUE_TENSOR, .t = w}};
  kiln_value out[1];
  for (int r = 0; r < 3; r++)
    if (!f || kiln_function_call(f, in, 2, out, 1) != 1) {
      fprintf(stderr, "graph: %s\n", kiln_last_error());
      return 1;
    }
  const float *o = kiln_tensor_data(out[0].t);
  if (o[0] != 0.5f || o[1] != 0 || o[2] != 6) {
    fprintf(stderr, "graph out %g %g %g\n", o[0], o[1], o[2]);
    return 1;
  }
  kiln_function_free(f);
  kiln_graph_free(gr);
  kiln_scope_end();
  printf("ok %s\n", kiln_version());
  return 0;
}
