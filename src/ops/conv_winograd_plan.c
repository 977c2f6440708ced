/* src/ops/conv_winograd_plan.c: the parts of the Winograd F(2x2, 3x3)
 * convolution (conv_winograd.c at AVX-512, conv_winograd_avx2.c at AVX2:
 * Note [Winograd F(2x2,3x3)]) that do not depend on the CPU level: which
 * convolutions take it, the tables of a block's vector lanes, and the
 * driver that shares blocks among threads. Both levels decide, tabulate
 * and block alike, so they compute the same sums. */
#include <limits.h>
#include <omp.h>

#include "conv.h"

bool op_conv_winograd = true;

bool op_conv_winograd_applies(const win_geom *g) {
  if (!op_conv_winograd || !op_conv_implicit || g->G != 1 || g->KH != 3 || g->KW != 3 ||
      g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 || g->ph > 2 || g->pw > 2 ||
      g->C < 4 || g->C > 4096 || g->N <= 0 || g->OH <= 0 || g->OW <= 0 || g->O <= 0 ||
      !op_conv_offsets_fit(g, OP_WINO_UNIT))
    return false;
  if ((double)g->O * (double)g->C * 16 > (double)INT32_MAX) return false;
  /* the multiplies of 32-tile units against the direct tiles' 32-position
   * units (the AVX-512 panel widths; AVX2 decides the same, so both levels
   * take the same path) */
  int64_t T = op_wino_tiles(g), P = g->N * g->OH * g->OW, u = OP_WINO_UNIT;
  double wino = 16.0 * (double)((T + u - 1) / u), direct = 9.0 * (double)((P + u - 1) / u);
  return wino <= 0.6 * direct;
}

void op_wino_tables(const win_geom *g, int64_t t0, int64_t nt, int vl, const op_wino_tab *tab) {
  int64_t TH = (g->OH + 1) / 2, TW = (g->OW + 1) / 2, per = TH * TW, L = g->OH * g->OW;
  int64_t xs = g->C * g->H * g->W, nv = (nt + vl - 1) / vl;
  for (int64_t v = 0; v < nv; v++) {
    int32_t *ib = tab->ib + v * vl, *ob = tab->ob + v * vl;
    uint16_t im[16] = {0}, om[4] = {0};
    for (int l = 0; l < vl; l++) {
      int64_t t = t0 + v * vl + l;
      ib[l] = ob[l] = 0;
      if (t >= t0 + nt) continue; /* past the block: masked off everywhere */
      int64_t n = t / per, q = t % per, th = q / TW, tw = q % TW;
      int64_t ih = 2 * th - g->ph, iw = 2 * tw - g->pw, oh = 2 * th, ow = 2 * tw;
      ib[l] = (int32_t)(n * xs + ih * g->W + iw);
      ob[l] = (int32_t)(n * g->O * L + oh * g->OW + ow);
      for (int e = 0; e < 16; e++) {
        int64_t y = ih + e / 4, x = iw + e % 4;
        if (y >= 0 && y < g->H && x >= 0 && x < g->W) im[e] |= (uint16_t)(1u << l);
      }
      for (int e = 0; e < 4; e++)
        if (oh + e / 2 < g->OH && ow + e % 2 < g->OW) om[e] |= (uint16_t)(1u << l);
    }
    /* R: each aligned group of R lanes is R adjacent tiles of one row
     * (inputs and outputs 2 apart); lanes past the block are masked off
     * and fit any run */
    int64_t nin = t0 + nt - (t0 + v * vl);
    int R = 8;
    for (; R > 1; R /= 2) {
      bool ok = true;
      for (int l = 0; l < vl && l < nin && ok; l++) {
        int64_t tf = t0 + v * vl + l / R * R, tl = t0 + v * vl + l;
        ok = tf / TW == tl / TW; /* the same tile row of the same image */
      }
      if (ok) break;
    }
    tab->runs[v] = R;
    for (int r = 0; r < 8; r++) {
      tab->rin[v * 8 + r] = r * R < vl ? ib[r * R] : 0;
      tab->rout[v * 8 + r] = r * R < vl ? ob[r * R] : 0;
    }
    for (int e = 0; e < 16; e++) tab->imk[e * nv + v] = im[e];
    for (int e = 0; e < 4; e++) tab->omk[e * nv + v] = om[e];
  }
}

int op_wino_drive(const op_wino_level *lv, const win_geom *g, const float *x, const float *w,
                  bool flipped, const conv_epilogue *ep, float *out) {
  int64_t T = op_wino_tiles(g), C = g->C, OC = g->O * C, U = OP_WINO_UNIT;
  int64_t nc = (int64_t)(lv->panel_bytes / ((size_t)(16 * C) * sizeof(float))) / U * U;
  if (nc < U) nc = U;
  if (nc > 8 * U) nc = 8 * U;
  op_wino_run r = {.g = g, .x = x, .w = w, .flipped = flipped, .ep = ep, .out = out,
                   .L = g->OH * g->OW, .nc = nc};
  double work = (double)T * (double)OC * 16;
  int nt = omp_in_parallel() || work < 64.0 * 64 * 64 ? 1 : omp_get_max_threads();
  /* Note [Winograd weights]: U_xi = G g G^T, 16 floats per 3x3 kernel,
   * is made on each call (the weights change between training steps). A
   * thread with one block transforms each row block's weights as it goes,
   * into L1; with more, they are transformed once into u [16][O][C],
   * shared (each thread redoing them per block cost 20% at resnet18's 8x8
   * stage; writing u, 4 MiB at its 4x4 stage, cost more than the
   * transform when each thread has one block). Weights that cannot
   * change, lazy inference's, are transformed into u once and kept (Note
   * [Winograd weights cache] in conv_winograd_cache.c). */
  int64_t units = (T + U - 1) / U, per = (units + nt - 1) / nt, ub = nc / U;
  size_t ubytes = 0;
  float *u = NULL;
  bool ready = false; /* u holds the cached weights (Note [Winograd weights cache]) */
  op_wino_entry *cached = flipped ? NULL : op_wino_cache_get(lv, g, w, &u, &ready);
  r.cold_u = ready;
  if (!cached && (per + ub - 1) / ub > 1) {
    u = core_block_alloc((size_t)(16 * OC) * sizeof(float), &ubytes);
    if (!u) return core_error(KILN_ERR_NOMEM, "aten::conv2d: out of memory for Winograd weights");
  }
  size_t need = lv->scratch_bytes(C, nc);
  int failed = 0;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    if (u && !ready) {
      int64_t kg = lv->kgroup, nq = (OC + kg - 1) / kg;
#pragma omp for schedule(static)
      for (int64_t q = 0; q < nq; q++) lv->weights(&r, q * kg, q * kg + kg < OC ? q * kg + kg : OC, u);
    }
    size_t nbytes = 0;
    char *mem = core_block_alloc(need, &nbytes);
    if (!mem) {
#pragma omp atomic write
      failed = 1;
    }
    conv_share sh = op_conv_share(T, U, nc, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t i = 0; mem && i < sh.nb; i++) {
      core_poll(); /* Note [Kernel poll] */
      int64_t t0, ntl;
      op_conv_share_block(&sh, T, U, i, &t0, &ntl);
      lv->prepare(&r, mem, t0, ntl);
      for (int64_t o0 = 0; o0 < g->O; o0 += lv->mr)
        lv->rows(&r, mem, o0, (int)(g->O - o0 < lv->mr ? g->O - o0 : lv->mr), u);
    }
    if (mem) core_block_free(mem, nbytes);
  }
  if (cached) op_wino_cache_put(cached, true); /* a hit, or filled by the loop above */
  else if (u) core_block_free(u, ubytes);
  if (failed) return core_error(KILN_ERR_NOMEM, "aten::conv2d: out of memory for Winograd panels");
  return 1;
}
