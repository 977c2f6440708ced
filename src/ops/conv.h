/* src/ops/conv.h: the geometry of a 2-d sliding window (conv.c validates
 * it) and the convolution kernels over batches of images (conv_gemm.c). */
#ifndef KILN_OPS_CONV_H
#define KILN_OPS_CONV_H

#include <xmmintrin.h>

#include "op.h"

/* Geometry of one 2-d sliding window (conv or pool) over planes. */
typedef struct win_geom {
  int64_t N, C, H, W, O, KH, KW, OH, OW; /* conv: C is per group */
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t G; /* conv: groups (channels C * G in, O out, O / G per group) */
} win_geom;

/* Bytes of each scratch matrix (col, gcol, gout') per chunk of images,
 * at least one image's (Note [Conv batching] in conv_gemm.c); 4 MiB. A
 * test hook: tests set it small to cut batches into several chunks. */
extern size_t op_conv_chunk_bytes;

/* out[N, O, OH, OW] = conv(x[N, G C, H, W], w[O, C, KH, KW]) + bias[O]
 * (bias may be NULL), all contiguous, dt float32 or float64, g validated
 * by conv.c. Returns 0, or KILN_ERR_NOMEM (error set) when its scratch
 * cannot be allocated; out is then unspecified. */
int op_conv_forward(kiln_dtype dt, const win_geom *g, const char *x, const char *w,
                    const char *bias, char *out);

/* What op_conv_forward_ep does to each output element after the product
 * (Note [Conv epilogue] in conv_fused.c): v = v * scale[o] + shift[o]
 * (+ residual at the same [n, o, oh, ow]), then max(v, 0) with relu (a NaN
 * stays NaN). Arrays of the conv's dtype, NULL for none (scale 1, shift 0);
 * residual contiguous [N, O, OH, OW]. */
typedef struct conv_epilogue {
  const char *scale, *shift, *residual;
  bool relu;
} conv_epilogue;

/* op_conv_forward with an epilogue instead of a bias (ep NULL: none); same
 * layouts and failure. */
int op_conv_forward_ep(kiln_dtype dt, const win_geom *g, const char *x, const char *w,
                       const conv_epilogue *ep, char *out);

/* op_conv_forward_ep's float32 kernel at the AVX-512 level (Note [Implicit
 * im2col] in conv_avx512.c): same layouts and epilogue. Returns 1 when it
 * computed out, 0 when it does not apply (another CPU level, an offset
 * past int32, op_conv_implicit false: the caller runs conv_gemm.c's
 * path), or KILN_ERR_NOMEM (error set; out unspecified). */
int op_conv_forward_avx512(const win_geom *g, const float *x, const float *w,
                           const conv_epilogue *ep, float *out);

/* op_conv_forward_avx512 for 3x3 stride-1 kernels by Winograd's F(2x2,
 * 3x3) (Note [Winograd F(2x2,3x3)] in conv_winograd.c): same layouts and
 * epilogue, outputs within float32 rounding of the direct conv's. Returns
 * 1 when it computed out, 0 when it does not apply (another level or
 * geometry, too few tiles to save multiplies, op_conv_winograd or
 * op_conv_implicit false), or KILN_ERR_NOMEM (error set; out unspecified). */
int op_conv_winograd_avx512(const win_geom *g, const float *x, const float *w,
                            const conv_epilogue *ep, float *out);

/* op_conv_winograd_avx512 without epilogue for a weight w [C][O][3][3]
 * read transposed and flipped, as op_conv_forward_avx512_flipped (the
 * stride-1 input gradient): the same outputs, bit for bit, as
 * op_conv_winograd_avx512 on the flipped copy. Same returns. */
int op_conv_winograd_avx512_flipped(const win_geom *g, const float *x, const float *w,
                                    float *out);

/* The same at the AVX2 level (conv_winograd_avx2.c): bitwise the AVX-512
 * level's outputs (the same sums in the same order). Same returns. */
int op_conv_winograd_avx2(const win_geom *g, const float *x, const float *w,
                          const conv_epilogue *ep, float *out);

/* Whether op_conv_forward_avx512 and _avx2 may take the Winograd path
 * (true); a test hook, so tests compare the direct tiles bitwise. */
extern bool op_conv_winograd;

/* ---- the level-independent parts of Winograd (conv_winograd_plan.c) ---- */

/* The tiles of a 32-tile unit, the unit that threads share out. */
enum { OP_WINO_UNIT = 32 };

/* The 2x2 output tiles of g: N ceil(OH / 2) ceil(OW / 2). */
static inline int64_t op_wino_tiles(const win_geom *g) {
  return g->N * ((g->OH + 1) / 2) * ((g->OW + 1) / 2);
}

/* Whether g is a conv the Winograd path computes (3x3, stride 1, no
 * dilation or groups, padding <= 2, 4 <= C <= 4096, offsets in int32),
 * at >= 40% fewer multiplies, with op_conv_winograd and op_conv_implicit
 * set. The same answer at every level. */
bool op_conv_winograd_applies(const win_geom *g);

/* A block's lane tables for vectors of vl (8 or 16) tiles, nv = ceil(nt /
 * vl) vectors: ib, ob [nv][vl] the input offset of patch element (0, 0)
 * and the output offset of tile output (0, 0), channel 0; imk [16][nv]
 * and omk [4][nv] bit sets of the lanes whose patch element (i, j) is in
 * the image and whose output (dy, dx) exists; runs [nv] R = 8, 4 or 2
 * where every R lanes are R adjacent tiles of one row, else 1; rin, rout
 * [nv][8] the offsets of each run's first lane. */
typedef struct op_wino_tab {
  int32_t *ib, *ob, *runs, *rin, *rout;
  uint16_t *imk, *omk;
} op_wino_tab;

/* The bytes of the tables of nv vectors of vl lanes, and tab's arrays
 * laid out in p (which holds that many bytes, 4-byte aligned). */
static inline size_t op_wino_tab_bytes(int64_t nv, int vl) {
  return (size_t)(nv * (2 * vl + 17)) * sizeof(int32_t) + (size_t)(20 * nv) * sizeof(uint16_t);
}

static inline void op_wino_tab_at(op_wino_tab *tab, void *p, int64_t nv, int vl) {
  int32_t *q = (int32_t *)p;
  tab->ib = q, tab->ob = q + vl * nv, tab->runs = q + 2 * vl * nv;
  tab->rin = tab->runs + nv, tab->rout = tab->rin + 8 * nv;
  tab->imk = (uint16_t *)(tab->rout + 8 * nv);
  tab->omk = tab->imk + 16 * nv;
}

/* Fills tab for the tiles [t0, t0 + nt) of g (numbered n, th, tw). */
void op_wino_tables(const win_geom *g, int64_t t0, int64_t nt, int vl, const op_wino_tab *tab);

/* One Winograd convolution, as a level's kernels see it: out = conv(x, w)
 * with the epilogue ep (never NULL here); w [O][C][3][3], or with flipped
 * [C][O][3][3] read transposed and flipped (Note [Flipped weights]); nc
 * the tiles of a block (a multiple of OP_WINO_UNIT). */
typedef struct op_wino_run {
  const win_geom *g;
  const float *x, *w;
  bool flipped;
  const conv_epilogue *ep;
  float *out;
  int64_t L, nc; /* OH OW; tiles per block */
  bool cold_u;   /* the shared weights come from the cache (L3), not a transform */
} op_wino_run;

/* Prefetches into L2 the mr rows of C floats at u, u + C, ...: a block's
 * GEMMs fetch the next point's weights this way while they read the
 * current one's from the Winograd weights cache (Note [Winograd weights
 * cache]: resnet18's 4x4 stage reads its 4 MiB once per block, and did
 * not gain until the reads were prefetched). */
static inline void op_wino_prefetch(const float *u, int64_t C, int mr) {
  for (int i = 0; i < mr; i++)
    for (int64_t c = 0; c < C; c += 16) _mm_prefetch((const char *)(u + i * C + c), _MM_HINT_T1);
}

/* A CPU level's kernels for op_wino_drive: kgroup kernels per weights
 * call, mr output channels per row block; scratch_bytes, one thread's
 * scratch for blocks of nc tiles; weights, u [16][O][C] for the kernels
 * [p0, p1) of the O C; prepare, a block's tables and transformed input
 * [t0, t0 + nt) in scratch; rows, the block's outputs of channels
 * [o0, o0 + mr) from the shared u or, when u is NULL, transforming those
 * rows' weights itself. */
typedef struct op_wino_level {
  int kgroup, mr;
  size_t panel_bytes; /* a block's transformed input at most, for nc */
  size_t (*scratch_bytes)(int64_t C, int64_t nc);
  void (*weights)(const op_wino_run *r, int64_t p0, int64_t p1, float *u);
  void (*prepare)(const op_wino_run *r, char *scratch, int64_t t0, int64_t nt);
  void (*rows)(const op_wino_run *r, char *scratch, int64_t o0, int mr, const float *u);
} op_wino_level;

/* The level-independent driver (Note [Winograd weights] in
 * conv_winograd_plan.c): blocks, threads, the shared weights. Returns 1, or
 * KILN_ERR_NOMEM (error set; out unspecified). g must pass
 * op_conv_winograd_applies. */
int op_wino_drive(const op_wino_level *lv, const win_geom *g, const float *x, const float *w,
                  bool flipped, const conv_epilogue *ep, float *out);

/* Note [Winograd weights cache] (conv_winograd_cache.c): transformed
 * weights kept across calls on frozen storage. op_wino_weight_swap names
 * w (NULL: none) as the weight tensor of this thread's conv calls until
 * the next swap, returning the previous one to restore. op_wino_cache_get
 * returns the entry pinned for the weights w (16 O C floats at *u; *ready
 * says whether they are filled, else the caller transforms into them),
 * or NULL (nothing set, no error) when they are not cached. op_wino_cache_put
 * unpins it, filled saying whether the caller filled it (NULL ok). */
typedef struct op_wino_entry op_wino_entry;
const kiln_tensor *op_wino_weight_swap(const kiln_tensor *w);
op_wino_entry *op_wino_cache_get(const void *level, const win_geom *g, const float *w,
                                 float **u, bool *ready);
void op_wino_cache_put(op_wino_entry *e, bool filled);
/* Lookups that hit so far and the entries held now (for tests; NULL ok). */
void op_wino_cache_stats(long *n_hits, int *n_held);

/* The same at the AVX2 level (Note [Implicit im2col at AVX2] in
 * conv_avx2.c; bitwise the AVX-512 kernel's outputs): returns 1
 * when it computed out, 0 when it does not apply (another CPU level, an
 * offset past int32), or KILN_ERR_NOMEM (error set; out unspecified). */
int op_conv_forward_avx2(const win_geom *g, const float *x, const float *w,
                         const conv_epilogue *ep, float *out);

/* op_conv_forward_avx512 without epilogue for a weight given as the
 * transpose-flip of w[C, O, KH, KW] (a conv's original weight for the
 * geometry g of its input gradient, Note [Backward data as a conv] in
 * conv_bwd_data.c): out[n, o] = sum over c, ki, kj of w[c, o, KH-1-ki,
 * KW-1-kj] x[n, c, ...] (Note [Flipped weights] in conv_avx512.c).
 * Returns 1 when it computed out, 0 when it does not apply (as
 * op_conv_forward_avx512, or groups, or few positions), or KILN_ERR_NOMEM. */
int op_conv_forward_avx512_flipped(const win_geom *g, const float *x, const float *w,
                                   float *out);

/* Whether op_conv_bwd_stride computes g's input gradient for dtype dt
 * (float32 at the AVX-512 level, a stride > 1, no groups; Note [Strided
 * backward data by phases] in conv_bwd_stride.c). */
bool op_conv_bwd_stride_applies(kiln_dtype dt, const win_geom *g);

/* gx[N, C, H, W] += the input gradient of op_conv_forward for grad_output
 * go [N, O, OH, OW], w [O, C, KH, KW], all contiguous, g validated by
 * conv.c with op_conv_bwd_stride_applies. 0, or KILN_ERR_NOMEM (error
 * set; gx unspecified). */
int op_conv_bwd_stride(const win_geom *g, const float *w, const float *go, float *gx);

/* Whether op_conv_wgrad_avx512 computes g's weight gradient for dtype dt
 * (float32, the AVX-512 level, op_conv_implicit, every offset in int32). */
bool op_conv_wgrad_avx512_applies(kiln_dtype dt, const win_geom *g);

/* gw[O, C, KH, KW] = (OVERWRITTEN, not added to) the weight gradient of
 * op_conv_forward for grad_output go [N, O, OH, OW], x and go contiguous,
 * g validated by conv.c with op_conv_wgrad_avx512_applies (Note [Implicit
 * weight gradient] in conv_avx512.c). 0, or KILN_ERR_NOMEM (error set; gw
 * unspecified). */
int op_conv_wgrad_avx512(const win_geom *g, const float *x, const float *go, float *gw);

/* Whether every offset the implicit-im2col kernels hold in int32 (their
 * gathers, scatters and tables, for panels nr positions wide) fits, and g
 * is not empty (conv_implicit.c). */
bool op_conv_offsets_fit(const win_geom *g, int64_t nr);

/* rows[p][k] (rows kp >= K apart, zero from K to kp) = the receptive field
 * of position p in [p0, p1) of one group's input x (images xs elements
 * apart): x[c, ih, iw] at k = (c, ki, kj), 0 in the padding; rows are
 * independent, so threads may gather disjoint ranges (conv_implicit.c). */
void op_conv_gather_rows(const win_geom *g, const float *x, int64_t xs, int64_t p0, int64_t p1,
                         int64_t K, float *rows, int64_t kp);

/* Whether op_conv_forward_ep may take op_conv_forward_avx512 or _avx2 (true); a
 * test hook, so tests compare it with conv_gemm.c's path. */
extern bool op_conv_implicit;

/* conv2d's argument checks (conv.c): input x [N, G C, H, W], weight w,
 * stride/padding/dilation/groups as conv2d takes them; fills g. 0, or < 0
 * with the error set. */
int op_conv_geom(const char *fn, const kiln_tensor *x, const kiln_tensor *w,
                 const op_val *stride, const op_val *pad, const op_val *dil,
                 const op_val *groups, win_geom *g);

/* The input and weight gradients of op_conv_forward for grad_output go
 * [N, O, OH, OW]: gx (if mask[0]) and gw (if mask[1]) are ADDED to, so
 * the caller zeroes them first. Same dtypes, layouts and failure as
 * op_conv_forward (the bias gradient is the caller's). */
int op_conv_backward(kiln_dtype dt, const win_geom *g, const bool mask[3], const char *x,
                     const char *w, const char *go, char *gx, char *gw);

/* Whether op_conv_bwd_data computes g's input gradient (stride 1, not
 * a 1x1 kernel without padding; Note [Backward data as a conv] in
 * conv_bwd_data.c). */
bool op_conv_bwd_data_applies(const win_geom *g);

/* gx[N, G C, H, W] = the input gradient of op_conv_forward for grad_output
 * go [N, O, OH, OW] (OVERWRITTEN, not added to), w [O, C, KH, KW], all
 * contiguous, g validated by conv.c with op_conv_bwd_data_applies(g).
 * Same dtypes and failure as op_conv_forward. */
int op_conv_bwd_data(kiln_dtype dt, const win_geom *g, const char *w, const char *go, char *gx);

/* Max pooling of values only over g (pool_geom's planes: g->C planes of
 * H x W into OH x OW, dilation 1), x and out contiguous, dt float32 or
 * float64 (Note [Separable max] in pool_max.c). 0, or KILN_ERR_NOMEM with
 * the error set. */
int op_max_pool2d_values(kiln_dtype dt, const win_geom *g, const char *x, char *out);

/* One output row of float32 max_pool2d_with_indices over one plane xp
 * (H x W, H * W < 2^31, sw 1 or 2): rows h0, h0 + dh, ... < h1 (already
 * clipped to the input), columns ow_a <= ow < ow_b whose whole window lies
 * inside the row; writes o[ow] and ix[ow] (flat in the plane) as conv.c's
 * scalar loop would, bitwise (Note [Vector max pool] in pool_max_simd.c).
 * Only at the level named (core_cpu_level() at least that); never fail. */
void op_maxpool_row_f32_avx512(const float *xp, const win_geom *g, int64_t h0, int64_t h1,
                               int64_t ow_a, int64_t ow_b, float *o, int64_t *ix);
void op_maxpool_row_f32_avx2(const float *xp, const win_geom *g, int64_t h0, int64_t h1,
                             int64_t ow_a, int64_t ow_b, float *o, int64_t *ix);

/* Note [Balanced position blocks] (conv_avx512.c): thread t of n takes
 * the nr-wide position units [U t / n, U (t+1) / n) of the U = ceil(P / nr)
 * units of P positions, cut into nb near-equal blocks of at most nc (a
 * multiple of nr); block i of that share is positions [p0, p0 + np). */
typedef struct conv_share {
  int64_t u0, r, nb; /* the share's first unit, its units, its blocks */
} conv_share;

static inline conv_share op_conv_share(int64_t P, int64_t nr, int64_t nc, int t, int n) {
  int64_t U = (P + nr - 1) / nr, u0 = U * t / n, r = U * (t + 1) / n - u0, ub = nc / nr;
  conv_share s = {.u0 = u0, .r = r, .nb = (r + ub - 1) / ub};
  return s;
}

static inline void op_conv_share_block(const conv_share *s, int64_t P, int64_t nr, int64_t i,
                                       int64_t *p0, int64_t *np) {
  int64_t a = (s->u0 + s->r * i / s->nb) * nr, b = (s->u0 + s->r * (i + 1) / s->nb) * nr;
  *p0 = a;
  *np = (b < P ? b : P) - a;
}

#endif
