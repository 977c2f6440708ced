/* tests/exec/test_fusion_levels.c: native fused kernels per CPU level (Note
 * [CPU levels]): a kernel's source names the level it is compiled for, so
 * kept kernel files of different levels never share a key, and a kernel
 * compiled at each level (its -march) computes the tile's values. */
#include <stdlib.h>
#include <string.h>

#include "exec/fusion_cc.h"
#include "test.h"

TEST(fusion_native_kernel_per_cpu_level) {
  const char *old_dir = getenv("KILN_CACHE_DIR");
  char *saved_dir = old_dir ? strdup(old_dir) : NULL;
  setenv("KILN_CACHE_DIR", "off", 1); /* compile each one, keep none */
  int prev = exec_fusion_cc_set_mode(2), saved = core_cpu_level();
  /* exp(x) * y: a transcendental through vmath.h, so fmaf at every level */
  fusion_cc_step st[2] = {{op_table[KILN_OP_EXP].tile_srcs[KILN_DTYPE_F32],
                           {-1, -1, -1},
                           {0, -1, -1},
                           {0},
                           {"float", NULL, NULL}},
                          {op_table[KILN_OP_MUL].tile_srcs[KILN_DTYPE_F32],
                           {0, -1, -1},
                           {-1, 1, -1},
                           {0},
                           {"float", "float", NULL}}};
  int out_step = 1;
  float x[45], y[45], want[45], e[45], got[45];
  for (int i = 0; i < 45; i++) x[i] = 0.37f * (float)i - 8.0f, y[i] = 1.5f - 0.05f * (float)i;
  op_attrs at[2] = {{{0}}, {{0}}};
  const void *ein[1] = {x}, *min_[2] = {e, y};
  core_cpu_set_level(CORE_CPU_BASELINE);
  op_table[KILN_OP_EXP].tiles[KILN_DTYPE_F32](e, ein, 45, &at[0]);
  op_table[KILN_OP_MUL].tiles[KILN_DTYPE_F32](want, min_, 45, &at[1]);
  char *first[CORE_CPU_LEVELS] = {0};
  for (int l = 0; l <= core_cpu_max_level(); l++) {
    core_cpu_set_level(l);
    char *src = exec_fusion_cc_source(st, 2, &out_step, 1);
    CHECK(src != NULL);
    if (!src) continue;
    char want_line[64];
    snprintf(want_line, sizeof want_line, ", level %s */", core_cpu_level_name(l));
    char *nl = strchr(src, '\n');
    first[l] = strndup(src, nl ? (size_t)(nl - src) : strlen(src));
    CHECK_STR_CONTAINS(first[l], want_line);
    for (int k = 0; k < l; k++) CHECK(first[k] && strcmp(first[k], first[l]) != 0);
    fusion_cc_kernel *kern = exec_fusion_cc_compile(src);
    CHECK_MSG(kern != NULL, "level %s: %s", core_cpu_level_name(l), kiln_last_error());
    if (kern) {
      const void *in[2] = {x, y};
      void *out[1] = {got};
      memset(got, 0, sizeof got);
      exec_fusion_cc_fn(kern)(out, in, 45, at);
      CHECK_MSG(memcmp(got, want, sizeof got) == 0, "level %s: kernel != tiles",
                core_cpu_level_name(l));
      /* the streaming-store entry (16-float blocks with AVX-512, 8 with
       * AVX2, none at the baseline): the same values, blocks and tail */
      fusion_native_fn nt = exec_fusion_cc_fn_stream(kern);
      CHECK_MSG((nt != NULL) == (l >= CORE_CPU_AVX2), "level %s: streaming entry %s",
                core_cpu_level_name(l), nt ? "present" : "missing");
      if (nt) {
        _Alignas(64) float got_nt[45];
        void *out_nt[1] = {got_nt};
        memset(got_nt, 0, sizeof got_nt);
        nt(out_nt, in, 45, at);
        CHECK_MSG(memcmp(got_nt, want, sizeof got_nt) == 0, "level %s: streaming kernel != tiles",
                  core_cpu_level_name(l));
      }
      exec_fusion_cc_free(kern);
    }
    core_free(src);
  }
  for (int l = 0; l < CORE_CPU_LEVELS; l++) free(first[l]);
  core_cpu_set_level(saved);
  exec_fusion_cc_set_mode(prev);
  if (saved_dir) setenv("KILN_CACHE_DIR", saved_dir, 1);
  else unsetenv("KILN_CACHE_DIR");
  free(saved_dir);
}
