/* tests/ir/test_ir_print_api.c: kiln_graph_print (the public printer) and
 * list constants of floats, which `make coverage` showed unreached: the
 * text prints back as parsed, reparses to the same text, and runs. */
#include "test.h"

#include <stdlib.h>

#include "kiln.h"

TEST(graph_print_round_trips_float_list_constants) {
  static const char *text = "graph(%x : Tensor):\n"
                            "  %l : float[] = prim::Constant[value=[0.5, 1.5]]()\n"
                            "  %n : int[] = prim::Constant[value=[2, 3]]()\n"
                            "  %y : Tensor = aten::reshape(%x, %n)\n"
                            "  return (%y, %l)\n";
  kiln_scope_begin();
  kiln_graph *g = kiln_graph_parse(text, strlen(text));
  CHECK_MSG(g != NULL, "%s", kiln_last_error());
  char *p = g ? kiln_graph_print(g) : NULL;
  CHECK_STR_CONTAINS(p, "prim::Constant[value=[0.5, 1.5]]()");
  CHECK_STR_CONTAINS(p, "float[]");
  CHECK_STR_CONTAINS(p, "aten::reshape(%x, %n)");
  kiln_graph *g2 = p ? kiln_graph_parse(p, strlen(p)) : NULL;
  char *p2 = g2 ? kiln_graph_print(g2) : NULL;
  CHECK_MSG(p && p2 && strcmp(p, p2) == 0, "reprinted:\n%s\nvs\n%s", p ? p : "", p2 ? p2 : "");
  CHECK_EQ_INT(kiln_graph_n_inputs(g), 1);
  CHECK_EQ_INT(kiln_graph_n_outputs(g), 2);
  kiln_free(p);
  kiln_free(p2);
  kiln_graph_free(g2);
  /* it runs: [6] -> [2, 3] */
  kiln_function *f = g ? kiln_function_new(g) : NULL;
  float v[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[1] = {6};
  kiln_value in[1] = {{.kind = KILN_VALUE_TENSOR, .t = kiln_from_data(v, 1, shape, KILN_DTYPE_F32)}};
  kiln_value out[4];
  int n = f ? kiln_function_call(f, in, 1, out, 4) : -1;
  CHECK_MSG(n >= 1, "%s", kiln_last_error());
  if (n >= 1) {
    CHECK_EQ_INT(kiln_tensor_ndim(out[0].t), 2);
    CHECK_EQ_INT(kiln_tensor_size(out[0].t, 1), 3);
  }
  kiln_function_free(f);
  kiln_graph_free(g);
  kiln_scope_end();
}
