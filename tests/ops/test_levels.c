/* tests/ops/test_levels.c: the hot kernels at every CPU level this machine
 * has, in one process (Note [CPU levels]): every elementwise tile of the
 * op table and every dtype conversion bit for bit against the baseline
 * copy, softmax and reductions within their documented bounds (vector sums
 * group terms by the level's width), and GEMM: the AVX2 and AVX-512 kernels
 * identical, both within rounding of OpenBLAS (the baseline's GEMM). */
#include <stdlib.h>
#include <string.h>

#include "ops/ew.h"
#include "ops/op.h"
#include "test.h"

#define N_ELEMS 1000 /* not a multiple of any vector width: tails too */

/* Inputs of every kind for dtype dt: ordinary values, zeros, signed
 * infinities, NaN, huge and tiny magnitudes (floats); small nonzero values
 * (int64, so no division by zero); 0/1 (bool). */
static void fill_input(void *buf, kiln_dtype dt, int64_t n, unsigned seed) {
  static const double special[] = {0.0, -0.0, 1.0, -1.0, 0.5, INFINITY, -INFINITY, NAN,
                                   88.5, -88.5, 1e30, -1e-30, 20.0, -9.5, 3.0, 1e-40};
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    double u = (double)((seed >> 8) & 0xffff) / 65536.0; /* [0, 1) */
    double v = i % 7 == 0 ? special[(seed >> 4) % 16] : (u - 0.5) * (i % 3 ? 8.0 : 200.0);
    switch (dt) {
    case KILN_DTYPE_F32: ((float *)buf)[i] = (float)v; break;
    case KILN_DTYPE_F64: ((double *)buf)[i] = v; break;
    case KILN_DTYPE_I64: ((int64_t *)buf)[i] = (int64_t)((seed >> 9) % 13) - 6 ?: 7; break;
    default: ((bool *)buf)[i] = (seed >> 11) & 1; break;
    }
  }
}

TEST(cpu_levels_tiles_bit_identical) {
  int max = core_cpu_max_level(), saved = core_cpu_level(), tiles = 0, bad = 0;
  static const op_attrs attrs[] = {{{1.0, 1.0, 1.0, 1.0}}, {{0.5, 2.0, -1.5, 3.0}},
                                   {{-2.0, NAN, 0.25, 1.0}}};
  char *in[3], *want = malloc(N_ELEMS * 8), *got = malloc(N_ELEMS * 8);
  for (int k = 0; k < 3; k++) in[k] = malloc(N_ELEMS * 8);
  for (int op = 0; op < KILN_OP_COUNT && want && got && in[0] && in[1] && in[2]; op++) {
    if (!op_table[op].tiles) continue;
    for (int dt = 0; dt < KILN_DTYPE_COUNT; dt++) {
      op_tile_fn fn = op_table[op].tiles[dt];
      if (!fn) continue;
      const void *ins[3] = {in[0], in[1], in[2]};
      for (int k = 0; k < 3; k++) {
        /* where's condition (operand 0) is bool */
        kiln_dtype idt = k == 0 && (op_table[op].flags & OPF_COND_FIRST) ? KILN_DTYPE_BOOL
                                                                         : (kiln_dtype)dt;
        fill_input(in[k], idt, N_ELEMS, 11u + (unsigned)(op * 7 + k));
      }
      for (size_t a = 0; a < sizeof attrs / sizeof *attrs; a++) {
        memset(want, 0, N_ELEMS * 8);
        core_cpu_set_level(CORE_CPU_BASELINE);
        fn(want, ins, N_ELEMS, &attrs[a]);
        for (int l = CORE_CPU_BASELINE + 1; l <= max; l++) {
          memset(got, 0, N_ELEMS * 8);
          core_cpu_set_level(l);
          fn(got, ins, N_ELEMS, &attrs[a]);
          /* the same bits (NaN payloads included) */
          if (memcmp(want, got, N_ELEMS * 8) != 0 && bad++ < 5)
            test_fail(__FILE__, __LINE__, "%s dtype %d attrs %zu: level %s differs from baseline",
                      op_table[op].name, dt, a, core_cpu_level_name(l));
        }
      }
      tiles++;
    }
  }
  core_cpu_set_level(saved);
  CHECK_EQ_INT(bad, 0);
  CHECK(tiles > 50);
  test_note("%d tiles x 3 attribute sets at %d levels", tiles, max + 1);
  free(want), free(got), free(in[0]), free(in[1]), free(in[2]);
}

TEST(cpu_levels_conversions_bit_identical) {
  int max = core_cpu_max_level(), saved = core_cpu_level(), bad = 0;
  char src[N_ELEMS * 8], want[N_ELEMS * 8], got[N_ELEMS * 8];
  for (int sd = 0; sd < KILN_DTYPE_COUNT; sd++)
    for (int dd = 0; dd < KILN_DTYPE_COUNT; dd++) {
      fill_input(src, (kiln_dtype)sd, N_ELEMS, 5u + (unsigned)sd);
      if (sd <= KILN_DTYPE_F64 && dd == KILN_DTYPE_I64) /* finite, in range: core_f2i's domain */
        for (int64_t i = 0; i < N_ELEMS; i++) {
          if (sd == KILN_DTYPE_F32 && !(fabsf(((float *)src)[i]) < 1e18f)) ((float *)src)[i] = 3.5f;
          if (sd == KILN_DTYPE_F64 && !(fabs(((double *)src)[i]) < 1e18)) ((double *)src)[i] = -2.5;
        }
      memset(want, 0, sizeof want);
      core_cpu_set_level(CORE_CPU_BASELINE);
      op_ew_convert(want, (kiln_dtype)dd, src, (kiln_dtype)sd, N_ELEMS);
      for (int l = 1; l <= max; l++) {
        memset(got, 0, sizeof got);
        core_cpu_set_level(l);
        op_ew_convert(got, (kiln_dtype)dd, src, (kiln_dtype)sd, N_ELEMS);
        if (memcmp(want, got, sizeof want) != 0 && bad++ < 5)
          test_fail(__FILE__, __LINE__, "convert %d -> %d differs at level %s", sd, dd,
                    core_cpu_level_name(l));
      }
    }
  core_cpu_set_level(saved);
  CHECK_EQ_INT(bad, 0);
}

/* Largest difference of two float32 tensors in ulps of the larger value. */
static double max_ulps(const kiln_tensor *a, const kiln_tensor *b) {
  const float *x = core_data(a), *y = core_data(b);
  double worst = 0;
  for (int64_t i = 0; i < kiln_tensor_numel(a); i++) {
    if (isnan(x[i]) && isnan(y[i])) continue;
    double m = fmax(fabs(x[i]), fabs(y[i])), u = m > 0 ? ldexp(1.0, ilogb(m) - 23) : 1e-45;
    double d = fabs((double)x[i] - y[i]) / u;
    worst = d > worst || isnan(d) ? (isnan(d) ? INFINITY : d) : worst;
  }
  return worst;
}

/* Softmax, log_softmax (rows long and short, and over a leading dim) and
 * sums: float32 results within 1 ulp of the baseline's (the double sums
 * differ in their last bits, the rounding to float hides it nearly always). */
TEST(cpu_levels_softmax_and_sums_within_one_ulp) {
  kiln_scope_begin();
  int max = core_cpu_max_level(), saved = core_cpu_level();
  kiln_generator *g = kiln_generator_new(9);
  kiln_tensor *x = kiln_mul_scalar(kiln_randn(2, (int64_t[]){64, 300}, KILN_DTYPE_F32, g), 4.0);
  kiln_tensor *s = kiln_randn(2, (int64_t[]){500, 10}, KILN_DTYPE_F32, g);
  kiln_tensor *r[CORE_CPU_LEVELS][6] = {{0}};
  for (int l = 0; l <= max; l++) {
    core_cpu_set_level(l);
    r[l][0] = kiln_softmax(x, 1);
    r[l][1] = kiln_log_softmax(x, 1);
    r[l][2] = kiln_log_softmax(s, 1);
    r[l][3] = kiln_softmax(x, 0);
    r[l][4] = kiln_sum(x, (int64_t[]){1}, 1, false);
    r[l][5] = kiln_sum(x, (int64_t[]){0}, 1, false);
  }
  core_cpu_set_level(saved);
  for (int l = 1; l <= max; l++)
    for (int k = 0; k < 6; k++) {
      CHECK_MSG(r[0][k] && r[l][k], "kernel %d failed: %s", k, kiln_last_error());
      if (!r[0][k] || !r[l][k]) continue;
      double u = max_ulps(r[0][k], r[l][k]);
      CHECK_MSG(u <= 1.0, "kernel %d at %s: %.1f ulp from baseline", k, core_cpu_level_name(l), u);
    }
  kiln_generator_free(g);
  kiln_scope_end();
}

/* |got - want| within the float32 GEMM error bound for sums of k
 * products, 2 k u (|A| |B| + |bias|) with u = 2^-24 (Higham's gamma_k,
 * doubled): a missed, doubled or misplaced term exceeds it. want and scale
 * are float64 (computed from the same float32 inputs). */
static double worst_excess(const kiln_tensor *got, const kiln_tensor *want,
                           const kiln_tensor *scale, int64_t k) {
  double worst = 0, bound = 2.0 * (double)k * 0x1p-24;
  for (int64_t i = 0; i < kiln_tensor_numel(got); i++) {
    double e = fabs(core_get_flat(got, i) - core_get_flat(want, i));
    worst = fmax(worst, e / (bound * core_get_flat(scale, i) + 1e-30));
  }
  return worst;
}

/* GEMM at each level through kiln_mm and addmm (bias epilogue): kiln's
 * AVX2 and AVX-512 kernels and OpenBLAS (baseline) each within the error
 * bound of the exact product (float64 from the same inputs). Their K
 * slices differ, so their sums round differently: comparing them with
 * each other needs that bound too (a fixed 1e-4 failed on one machine,
 * where a product of 131 terms cancelled to near zero). */
TEST(cpu_levels_gemm_agree) {
  kiln_scope_begin();
  int max = core_cpu_max_level(), saved = core_cpu_level();
  kiln_generator *g = kiln_generator_new(4);
  kiln_tensor *a = kiln_randn(2, (int64_t[]){131, 300}, KILN_DTYPE_F32, g);
  kiln_tensor *w = kiln_randn(2, (int64_t[]){77, 300}, KILN_DTYPE_F32, g);
  kiln_tensor *bias = kiln_randn(1, (int64_t[]){77}, KILN_DTYPE_F32, g);
  kiln_tensor *r[CORE_CPU_LEVELS][3] = {{0}};
  for (int l = 0; l <= max; l++) {
    core_cpu_set_level(l);
    r[l][0] = kiln_mm(a, kiln_t(w));                     /* x @ W^T */
    r[l][1] = kiln_addmm(bias, a, kiln_t(w), 1.0, 1.0); /* + bias */
    r[l][2] = kiln_mm(kiln_t(r[l][0]), a);              /* a weight gradient's shape */
  }
  core_cpu_set_level(saved);
  kiln_tensor *a64 = kiln_to_dtype(a, KILN_DTYPE_F64), *w64 = kiln_to_dtype(w, KILN_DTYPE_F64);
  kiln_tensor *b64 = kiln_to_dtype(bias, KILN_DTYPE_F64);
  kiln_tensor *xw = kiln_mm(a64, kiln_t(w64)), *axw = kiln_mm(kiln_abs(a64), kiln_t(kiln_abs(w64)));
  for (int l = 0; l <= max; l++) {
    for (int k = 0; k < 3; k++) CHECK_MSG(r[l][k], "%s", kiln_last_error());
    if (!r[l][0] || !r[l][1] || !r[l][2]) continue;
    kiln_tensor *c64 = kiln_to_dtype(r[l][0], KILN_DTYPE_F64);
    kiln_tensor *want[3] = {xw, kiln_add(xw, b64), kiln_mm(kiln_t(c64), a64)};
    kiln_tensor *scale[3] = {axw, kiln_add(axw, kiln_abs(b64)),
                             kiln_mm(kiln_t(kiln_abs(c64)), kiln_abs(a64))};
    const int64_t depth[3] = {300, 300, 131};
    for (int k = 0; k < 3; k++) {
      double x = worst_excess(r[l][k], want[k], scale[k], depth[k]);
      CHECK_MSG(x <= 1.0, "product %d at %s: %.3g of the error bound", k,
                core_cpu_level_name(l), x);
    }
  }
  kiln_generator_free(g);
  kiln_scope_end();
}
