/* tests/exec/test_fusion_inplace.c: a fusion group whose outputs take its
 * inputs' buffers (Note [Fused buffer reuse] in src/exec/fusion.c) run by
 * its native kernel's in-place loop (Note [In-place native loop] in
 * src/exec/fusion_cc.c) against the tile executor and against the values
 * computed here, element by element, as the ops round them. The group is
 * SGD's momentum update plus a third output that reads two inputs the
 * first two outputs overwrite at the same index, so a loop that stored an
 * output before the last read of its address would be caught. */
#include <math.h>
#include <string.h>

#include "exec/fusion.h"
#include "exec/fusion_cc.h"
#include "ops/ew.h"
#include "test.h"

static const char *SGD_GROUP =
    "graph(%buf : Tensor, %g : Tensor, %p : Tensor):\n"
    "  %one : int = prim::Constant[value=1]()\n"
    "  %m : float = prim::Constant[value=0.9]()\n"
    "  %nlr : float = prim::Constant[value=-0.01]()\n"
    "  %1 : Tensor = aten::mul(%buf, %m)\n"
    "  %2 : Tensor = aten::add(%1, %g, %one)\n"
    "  %3 : Tensor = aten::mul(%2, %nlr)\n"
    "  %4 : Tensor = aten::add(%p, %3, %one)\n"
    "  %5 : Tensor = aten::sub(%buf, %g, %one)\n"
    "  return (%2, %4, %5)\n";

static exec_value tv(kiln_tensor *t) { return (exec_value){.tag = EXEC_V_TENSOR, .t = t}; }

/* Runs the group over copies of buf, g, p with every input reusable, in
 * native mode `mode`; res[3] receive the outputs (new references). */
static int run_group(fused_group *f, kiln_tensor *const src[3], int mode, kiln_tensor **res,
                     bool *took) {
  exec_value in[3], out[3] = {{0}};
  for (int i = 0; i < 3; i++) in[i] = tv(kiln_retain(kiln_clone(src[i])));
  int prev = exec_fusion_cc_set_mode(mode);
  int rc = exec_fused_group_run_reuse(f, in, 7, out);
  exec_fusion_cc_set_mode(prev);
  *took = true;
  for (int o = 0; o < 3; o++) {
    res[o] = rc == 0 ? out[o].t : NULL;
    *took = *took && rc == 0 && out[o].t == in[o].t; /* output o took input o's buffer */
  }
  for (int i = 0; i < 3; i++) kiln_release(in[i].t);
  return rc;
}

TEST(fusion_native_inplace_loop_matches_tiles_and_reference) {
  kiln_scope_begin();
  ir_graph *g = ir_graph_parse(SGD_GROUP, strlen(SGD_GROUP));
  fused_group *f = g ? exec_fused_group_new(g) : NULL;
  CHECK_MSG(f != NULL, "%s", kiln_last_error());
  kiln_generator *gen = kiln_generator_new(41);
  /* a tail only; one chunk and a tail; several chunks over two threads */
  int64_t sizes[3] = {37, 16 * EW_TILE + 21, 5 * 16 * EW_TILE + 1003};
  for (int k = 0; f && k < 3; k++) {
    kiln_tensor *src[3];
    for (int i = 0; i < 3; i++) src[i] = kiln_randn(1, &sizes[k], KILN_DTYPE_F32, gen);
    const float *b = kiln_tensor_data(src[0]), *gr = kiln_tensor_data(src[1]),
                *p = kiln_tensor_data(src[2]);
    kiln_tensor *tiles[3], *native[3];
    bool took_t, took_n;
    int64_t native0 = kiln_fused_kernels_native();
    int rc_t = run_group(f, src, 0, tiles, &took_t);
    int rc_n = run_group(f, src, 2, native, &took_n);
    CHECK_MSG(rc_t == 0 && rc_n == 0, "size %lld: %s", (long long)sizes[k], kiln_last_error());
    CHECK_MSG(took_t && took_n, "size %lld: outputs did not take the inputs' buffers",
              (long long)sizes[k]);
    if (k == 0) /* the first native-mode run made the group's kernel native */
      CHECK_EQ_INT(kiln_fused_kernels_native() - native0, 1);
    int64_t bad = 0, off = 0;
    for (int64_t i = 0; rc_t == 0 && rc_n == 0 && i < sizes[k]; i++) {
      float v1 = b[i] * 0.9f, v2 = fmaf(1.0f, gr[i], v1), v3 = v2 * -0.01f;
      float want[3] = {v2, fmaf(1.0f, v3, p[i]), fmaf(-1.0f, gr[i], b[i])};
      for (int o = 0; o < 3; o++) {
        float t = ((const float *)kiln_tensor_data(tiles[o]))[i];
        float n = ((const float *)kiln_tensor_data(native[o]))[i];
        bad += memcmp(&t, &want[o], 4) != 0;
        off += memcmp(&n, &want[o], 4) != 0;
      }
    }
    CHECK_MSG(bad == 0 && off == 0, "size %lld: %lld tile and %lld native values differ",
              (long long)sizes[k], (long long)bad, (long long)off);
    for (int o = 0; o < 3; o++) {
      kiln_release(tiles[o]);
      kiln_release(native[o]);
    }
  }
  exec_fused_group_free(f);
  ir_graph_free(g);
  kiln_generator_free(gen);
  kiln_scope_end();
}
