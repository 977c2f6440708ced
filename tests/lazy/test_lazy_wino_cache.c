/* tests/lazy/test_lazy_wino_cache.c: the Winograd weights cache on lazy
 * device data (Note [Winograd weights cache] in
 * src/ops/conv_winograd_cache.c, Note [Frozen storage] in
 * src/core/core.h): lazy inference transforms a weight once and later
 * steps hit, giving eager's bits; a step that updates the weight in
 * place (a donated buffer), a CPU weight written through its data pointer
 * and a freed weight are never read stale. */
#include <string.h>

#include "core/cpu.h"
#include "ops/conv.h"
#include "test.h"

/* 20 output channels: a partial row block at both levels (8 and 6 rows) */
static const int64_t XS[4] = {4, 16, 16, 16}, WS[4] = {20, 16, 3, 3};
static const int64_t ONE[2] = {1, 1};

static bool same_bits(const kiln_tensor *x, const kiln_tensor *y) {
  return x && y && kiln_tensor_numel(x) == kiln_tensor_numel(y) &&
         memcmp(kiln_tensor_data(x), kiln_tensor_data(y),
                (size_t)kiln_tensor_numel(x) * sizeof(float)) == 0;
}

/* out[n, o, i, j] of a 3x3 "same" convolution of x with w, in double */
static double ref(const kiln_tensor *x, const kiln_tensor *w, int64_t n, int64_t o, int64_t i,
                  int64_t j) {
  double s = 0;
  for (int64_t c = 0; c < XS[1]; c++)
    for (int64_t dy = 0; dy < 3; dy++)
      for (int64_t dx = 0; dx < 3; dx++) {
        int64_t y = i + dy - 1, xx = j + dx - 1;
        if (y < 0 || y >= XS[2] || xx < 0 || xx >= XS[3]) continue;
        s += core_get_flat(x, ((n * XS[1] + c) * XS[2] + y) * XS[3] + xx) *
             core_get_flat(w, ((o * XS[1] + c) * 3 + dy) * 3 + dx);
      }
  return s;
}

static void check_against_ref(const kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w) {
  for (int64_t n = 0; n < 4; n += 3)
    for (int64_t o = 0; o < WS[0]; o += 3)
      for (int64_t i = 0; i < 16; i += 5)
        for (int64_t j = 0; j < 16; j += 3)
          CHECK_NEAR(core_get_flat(y, ((n * WS[0] + o) * 16 + i) * 16 + j), ref(x, w, n, o, i, j),
                     1e-4);
}

static long cache_hits(void) {
  long h;
  op_wino_cache_stats(&h, NULL);
  return h;
}

static int cache_entries(void) {
  int n;
  op_wino_cache_stats(NULL, &n);
  return n;
}

/* Winograd runs at the AVX2 and AVX-512 levels only (Note [Winograd
 * F(2x2,3x3)]); below them nothing is cached and only values are checked. */
static bool winograd_level(void) { return core_cpu_level() >= CORE_CPU_AVX2; }

TEST(lazy_inference_transforms_winograd_weights_once) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(23);
  kiln_tensor *w = kiln_randn(4, WS, KILN_DTYPE_F32, g);
  int entries0 = cache_entries();
  kiln_no_grad_begin();
  kiln_tensor *wl = kiln_to_lazy(w);
  long hits0 = cache_hits();
  for (int step = 0; step < 4; step++) {
    kiln_tensor *x = kiln_randn(4, XS, KILN_DTYPE_F32, g);
    kiln_tensor *yl = kiln_to_cpu(kiln_conv2d(kiln_to_lazy(x), wl, NULL, ONE, ONE));
    kiln_tensor *ye = kiln_conv2d(x, w, NULL, ONE, ONE);
    CHECK_MSG(same_bits(yl, ye), "step %d: lazy differs from eager", step);
    if (step == 3) check_against_ref(yl, x, w);
    /* a key is cached the second time it is seen: steps 0 and 1 miss,
     * step 1 fills, steps 2 and 3 hit */
    if (winograd_level())
      CHECK_MSG(cache_hits() - hits0 == (step < 2 ? 0 : step - 1), "step %d: %ld hits", step,
                cache_hits() - hits0);
  }
  if (winograd_level()) CHECK_EQ_INT(cache_entries(), entries0 + 1);
  kiln_no_grad_end();
  kiln_generator_free(g);
  kiln_scope_end();
  /* the weight's device data is freed with wl: its entry goes with it */
  CHECK_EQ_INT(cache_entries(), entries0);
}

/* SGD on the lazy weight: the update's graph writes w's new value into
 * its donated buffer (the same storage and uid). Two things keep the next
 * inference from reading the old weights' transform: the donation thaws
 * the storage and drops its entry, and the in-place write raises its
 * version (Note [Buffer reuse]); this checks the values, whichever holds. */
TEST(lazy_weight_update_in_place_is_never_read_stale) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(29);
  kiln_tensor *w = kiln_randn(4, WS, KILN_DTYPE_F32, g);
  kiln_tensor *x = kiln_randn(4, XS, KILN_DTYPE_F32, g);
  kiln_no_grad_begin();
  kiln_tensor *wl = core_autorelease(kiln_retain(kiln_to_lazy(w)));
  kiln_tensor *xl = kiln_to_lazy(x);
  for (int round = 0; round < 3; round++) {
    long hits0 = cache_hits();
    for (int step = 0; step < 3; step++) { /* inference: the third step hits */
      kiln_tensor *yl = kiln_to_cpu(kiln_conv2d(xl, wl, NULL, ONE, ONE));
      CHECK_MSG(same_bits(yl, kiln_conv2d(x, w, NULL, ONE, ONE)), "round %d step %d", round,
                step);
    }
    if (winograd_level()) CHECK_MSG(cache_hits() > hits0, "round %d: no hit", round);
    /* w -= 0.5 d, lazily and eagerly */
    kiln_tensor *d = kiln_randn(4, WS, KILN_DTYPE_F32, g);
    int64_t donated0 = kiln_lazy_counter("DonatedBuffers");
    kiln_scope_begin(); /* frees add_'s alias of wl before the sync: wl is its only root */
    CHECK(kiln_add_(wl, kiln_to_lazy(d), -0.5) == KILN_OK);
    kiln_scope_end();
    CHECK(kiln_mark_step() == KILN_OK);
    CHECK_MSG(kiln_lazy_counter("DonatedBuffers") > donated0, "round %d: w was not donated",
              round);
    CHECK(kiln_add_(w, d, -0.5) == KILN_OK);
    kiln_tensor *yl = kiln_to_cpu(kiln_conv2d(xl, wl, NULL, ONE, ONE));
    kiln_tensor *ye = kiln_conv2d(x, w, NULL, ONE, ONE);
    CHECK_MSG(same_bits(yl, ye), "round %d: the updated weight was read stale", round);
    check_against_ref(yl, x, w);
  }
  kiln_no_grad_end();
  kiln_generator_free(g);
  kiln_scope_end();
}

/* A CPU weight given to a lazy op is shared, not copied (Note in
 * lazy_value_of): the user may write it through its data pointer, which
 * bumps no version, so it is never frozen and never cached. */
TEST(lazy_conv_on_a_cpu_weight_written_by_pointer_is_never_cached) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(31);
  kiln_tensor *w = kiln_randn(4, WS, KILN_DTYPE_F32, g);
  kiln_tensor *x = kiln_randn(4, XS, KILN_DTYPE_F32, g);
  kiln_no_grad_begin();
  long hits0 = cache_hits();
  for (int step = 0; step < 4; step++) {
    kiln_tensor *yl = kiln_to_cpu(kiln_conv2d(kiln_to_lazy(x), w, NULL, ONE, ONE));
    CHECK_MSG(same_bits(yl, kiln_conv2d(x, w, NULL, ONE, ONE)), "step %d", step);
    if (step == 3) check_against_ref(yl, x, w);
    float *p = kiln_tensor_data(w);
    for (int64_t i = 0; i < WS[0] * 16 * 9; i += 7) p[i] = -p[i] + 0.25f;
  }
  CHECK_EQ_INT(cache_hits(), hits0);
  kiln_no_grad_end();
  kiln_generator_free(g);
  kiln_scope_end();
}
