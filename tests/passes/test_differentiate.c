/* tests/passes/test_differentiate.c: differentiation by tracing: the
 * forward and backward graphs compute the outputs and exactly the gradients
 * asked for, equal to eager autograd's. */
#include "exec/fusion.h"
#include "passes/autodiff.h"
#include "test.h"

static const char *TANH_LINEAR = "graph(%x : Tensor,\n"
                                 "      %w : Tensor,\n"
                                 "      %b : Tensor):\n"
                                 "  %3 : int = prim::Constant[value=1]()\n"
                                 "  %4 : Tensor = aten::matmul(%x, %w)\n"
                                 "  %5 : Tensor = aten::add(%4, %b, %3)\n"
                                 "  %6 : Tensor = aten::tanh(%5)\n"
                                 "  return (%6)\n";

/* runs graph g on tensors (borrowed); outputs get new refs */
static int run(const ir_graph *g, kiln_tensor **ins, int n_in, kiln_tensor **outs, int n_out) {
  exec_code *c = exec_compile(g, &exec_fusion_compile_opts);
  if (!c) return -1;
  exec_value in[16], out[16] = {{0}};
  for (int i = 0; i < n_in; i++) in[i] = (exec_value){.tag = EXEC_V_TENSOR, .t = ins[i]};
  int rc = exec_code_run(c, in, out);
  for (int i = 0; i < n_out && rc == 0; i++) outs[i] = core_autorelease(kiln_retain(out[i].t));
  for (int i = 0; i < c->n_outputs; i++) exec_value_clear(&out[i]);
  exec_code_free(c);
  return rc;
}

TEST(differentiate_tanh_linear_only_needed_grads) {
  ir_graph *s = ir_graph_parse(TANH_LINEAR, strlen(TANH_LINEAR));
  CHECK_MSG(s != NULL, "%s", kiln_last_error());
  if (!s) return;
  kiln_scope_begin();
  op_meta m[3] = {{KILN_DTYPE_F64, 2, {4, 3}}, {KILN_DTYPE_F64, 2, {3, 5}}, {KILN_DTYPE_F64, 1, {5}}};
  bool rg[3] = {false, true, true};
  pass_gradient gr;
  int rc = pass_differentiate(s, m, rg, &gr);
  CHECK_MSG(rc == 0, "%s", kiln_last_error());
  if (rc == 0) {
    CHECK_EQ_INT(gr.f_real_outputs, 1);
    CHECK_EQ_INT(gr.n_output_vjps, 2); /* dw and db only: x needs none */
    CHECK_EQ_INT(gr.df_output_vjps[0], 1);
    CHECK_EQ_INT(gr.df_output_vjps[1], 2);
    CHECK_EQ_INT(ir_block_n_returns(ir_graph_top(gr.df)), 2);
    CHECK(ir_graph_verify(gr.f) == 0 && ir_graph_verify(gr.df) == 0);
    char *df_text = ir_graph_print(gr.df, IR_PRINT_NO_SOURCE);
    CHECK_STR_CONTAINS(df_text, "aten::mm");
    core_free(df_text);
    /* run both and compare with eager */
    kiln_generator *g = kiln_generator_new(4);
    kiln_tensor *x = kiln_randn(2, m[0].shape, KILN_DTYPE_F64, g);
    kiln_tensor *w = kiln_randn(2, m[1].shape, KILN_DTYPE_F64, g);
    kiln_tensor *b = kiln_randn(1, m[2].shape, KILN_DTYPE_F64, g);
    kiln_tensor *fin[3] = {x, w, b}, *fout[8];
    int n_f = ir_block_n_returns(ir_graph_top(gr.f));
    CHECK(run(gr.f, fin, 3, fout, n_f) == 0);
    kiln_tensor *v = kiln_randn(2, (int64_t[]){4, 5}, KILN_DTYPE_F64, g);
    kiln_tensor *dfin[16];
    int k = 0;
    for (int i = 0; i < gr.n_vjps; i++) dfin[k++] = v;
    for (int i = 0; i < gr.n_captured_inputs; i++) dfin[k++] = fin[gr.df_input_captured_inputs[i]];
    for (int i = 0; i < gr.n_captured_outputs; i++) dfin[k++] = fout[gr.df_input_captured_outputs[i]];
    for (int i = 0; i < gr.n_consts; i++) dfin[k++] = gr.consts[i];
    kiln_tensor *dfout[2];
    CHECK(run(gr.df, dfin, k, dfout, 2) == 0);
    kiln_tensor *we = kiln_detach(w), *be = kiln_detach(b);
    kiln_set_requires_grad(we, true);
    kiln_set_requires_grad(be, true);
    kiln_tensor *y = kiln_tanh(kiln_add(kiln_matmul(x, we), be));
    for (int i = 0; i < 20; i++) CHECK_NEAR(core_get_flat(fout[0], i), core_get_flat(y, i), 1e-12);
    CHECK(kiln_backward(y, v) == KILN_OK);
    for (int i = 0; i < 15; i++)
      CHECK_NEAR(core_get_flat(dfout[0], i), core_get_flat(kiln_tensor_grad(we), i), 1e-12);
    for (int i = 0; i < 5; i++)
      CHECK_NEAR(core_get_flat(dfout[1], i), core_get_flat(kiln_tensor_grad(be), i), 1e-12);
    kiln_generator_free(g);
    pass_gradient_free(&gr);
  }
  kiln_scope_end();
  ir_graph_free(s);
}

/* adaptive_avg_pool2d to 2x2 from 3x3 (overlapping windows rows/cols
 * [0,2) and [1,3)) decomposes into a product with averaging weights that
 * the op makes from constants while tracing: the forward's own constant
 * inputs (f_consts), after the real ones. Output and gradient by hand: the
 * mean of each 2x2 window, and each input's sum of v / 4 over the windows
 * that hold it. */
static const char *POOL = "graph(%x : Tensor):\n"
                          "  %1 : int = prim::Constant[value=2]()\n"
                          "  %2 : int[] = prim::ListConstruct(%1, %1)\n"
                          "  %3 : Tensor = aten::adaptive_avg_pool2d(%x, %2)\n"
                          "  return (%3)\n";

TEST(differentiate_forward_constants_are_inputs) {
  ir_graph *s = ir_graph_parse(POOL, strlen(POOL));
  CHECK_MSG(s != NULL, "%s", kiln_last_error());
  if (!s) return;
  kiln_scope_begin();
  op_meta m[1] = {{KILN_DTYPE_F64, 4, {2, 2, 3, 3}}};
  bool rg[1] = {true};
  pass_gradient gr;
  int rc = pass_differentiate(s, m, rg, &gr);
  CHECK_MSG(rc == 0, "%s", kiln_last_error());
  if (rc == 0) {
    CHECK(gr.n_f_consts >= 1);
    CHECK_EQ_INT(ir_block_n_params(ir_graph_top(gr.f)), 1 + gr.n_f_consts);
    kiln_generator *g = kiln_generator_new(5);
    kiln_tensor *x = kiln_randn(4, m[0].shape, KILN_DTYPE_F64, g);
    kiln_tensor *fin[16] = {x}, *fout[8];
    for (int i = 0; i < gr.n_f_consts && i < 15; i++) fin[1 + i] = gr.f_consts[i];
    int n_f = ir_block_n_returns(ir_graph_top(gr.f));
    CHECK(run(gr.f, fin, 1 + gr.n_f_consts, fout, n_f) == 0);
    for (int p = 0; p < 4; p++)
      for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
          double sum = 0;
          for (int h = i; h < i + 2; h++)
            for (int w = j; w < j + 2; w++) sum += core_get_flat(x, p * 9 + h * 3 + w);
          CHECK_NEAR(core_get_flat(fout[0], p * 4 + i * 2 + j), sum / 4, 1e-12);
        }
    kiln_tensor *v = kiln_randn(4, (int64_t[]){2, 2, 2, 2}, KILN_DTYPE_F64, g);
    kiln_tensor *dfin[16];
    int k = 0;
    for (int i = 0; i < gr.n_vjps; i++) dfin[k++] = v;
    for (int i = 0; i < gr.n_captured_inputs; i++) dfin[k++] = fin[gr.df_input_captured_inputs[i]];
    for (int i = 0; i < gr.n_captured_outputs; i++) dfin[k++] = fout[gr.df_input_captured_outputs[i]];
    for (int i = 0; i < gr.n_consts; i++) dfin[k++] = gr.consts[i];
    kiln_tensor *dfout[1];
    CHECK(run(gr.df, dfin, k, dfout, 1) == 0);
    for (int p = 0; p < 4; p++)
      for (int h = 0; h < 3; h++)
        for (int w = 0; w < 3; w++) {
          double want = 0;
          for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
              if (h >= i && h < i + 2 && w >= j && w < j + 2)
                want += core_get_flat(v, p * 4 + i * 2 + j) / 4;
          CHECK_NEAR(core_get_flat(dfout[0], p * 9 + h * 3 + w), want, 1e-12);
        }
    kiln_generator_free(g);
    pass_gradient_free(&gr);
  }
  kiln_scope_end();
  ir_graph_free(s);
}
