/* src/nn/optim_fused.c: SGD's update as one in-place pass over each
 * parameter, its gradient and its momentum buffer, for CPU tensors.
 *
 * Note [Fused SGD]: optim.c's step computes an SGD update with four ops
 * (two mul_scalar, two add: each a new tensor the size of the parameter)
 * and then copies the new parameter and buffer back: six passes over the
 * parameters' memory, 11% of resnet18's training step (11.7M parameters;
 * batch 16, 64x64, one thread). On the CPU, when every parameter that has
 * a gradient is a contiguous Float or Double tensor with gradient and
 * buffer of its dtype, the step is this file's single loop instead, each
 * element computed by the same float operations in the same order as the
 * ops (d = g + p wd; buf' = buf m + d; d = buf', or d + buf' m with
 * Nesterov; p' = p + d (-lr); every scalar rounded to the dtype first, as
 * the ops' scalar operands are), so the results are equal bit for bit.
 * Nothing is allocated, so nothing fails once it starts: all or nothing
 * (Note [All or nothing] in optim.c) holds. Lazy parameters, other
 * layouts and Adam keep the ops (Note [Recordable steps]). */
#include <string.h>

#include "core/cpu.h"
#include "nn.h"

bool nn_sgd_fused_enabled = true;

static bool fits(const kiln_tensor *t, const kiln_tensor *p) {
  return t && t->device == CORE_DEVICE_CPU && t->dtype == p->dtype && core_is_contiguous(t) &&
         kiln_tensor_numel(t) == kiln_tensor_numel(p) && core_data(t);
}

bool nn_sgd_fused_applies(const kiln_optim_opts *o, kiln_tensor *p, kiln_tensor *g,
                          kiln_tensor *buf) {
  if (o->kind != KILN_OPTIM_SGD || !nn_sgd_fused_enabled) return false;
  if (!g) return true; /* skipped by the step */
  return (p->dtype == KILN_DTYPE_F32 || p->dtype == KILN_DTYPE_F64) && fits(p, p) &&
         fits(g, p) && (o->momentum > 0 ? fits(buf, p) : !buf);
}

/* Note [Fused SGD] continued: the loop is compiled per CPU level (Note
 * [CPU levels] in src/core/cpu.h), and each combination of the flags has
 * a loop of its own, branch-free, which gcc vectorizes (with the flags
 * tested inside it kept the loop scalar: 7-10% of resnet18's training
 * step, and 0.15 ms per step of the CNN's 80K parameters, as much on each
 * of 2 ranks as on 1). Every element's operations are unchanged. */
#define SGD_LOOP(T, DECAY, BUF, NESTEROV)                                                  \
  for (int64_t i = 0; i < n; i++) {                                                        \
    T d = g[i];                                                                            \
    if (DECAY) {                                                                           \
      T a = p[i] * wd;                                                                     \
      d = d + a;                                                                           \
    }                                                                                      \
    if (BUF) {                                                                             \
      T a = buf[i] * m;                                                                    \
      T b = a + d;                                                                         \
      buf[i] = b;                                                                          \
      if (NESTEROV) {                                                                      \
        T c = b * m;                                                                       \
        d = d + c;                                                                         \
      } else {                                                                             \
        d = b;                                                                             \
      }                                                                                    \
    }                                                                                      \
    T a = d * nlr;                                                                         \
    p[i] = p[i] + a;                                                                       \
  }

#define DEF_SGD(NAME, T)                                                                   \
  CORE_CLONES(NAME##_run, (T *restrict p, const T *restrict g, T *restrict buf, int64_t n,  \
                           T wd, T m, T nlr, bool decay, bool nesterov),                    \
              (p, g, buf, n, wd, m, nlr, decay, nesterov)) {                               \
    if (buf && decay && nesterov) SGD_LOOP(T, true, true, true)                            \
    else if (buf && decay) SGD_LOOP(T, true, true, false)                                  \
    else if (buf && nesterov) SGD_LOOP(T, false, true, true)                               \
    else if (buf) SGD_LOOP(T, false, true, false)                                          \
    else if (decay) SGD_LOOP(T, true, false, false)                                        \
    else SGD_LOOP(T, false, false, false)                                                  \
  }                                                                                        \
  static void NAME(T *p, const T *g, T *buf, int64_t n, T wd, T m, T nlr, bool decay,      \
                   bool nesterov) {                                                        \
    enum { CHUNK = 32768 };                                                                \
    int64_t nc = (n + CHUNK - 1) / CHUNK;                                                  \
    _Pragma("omp parallel for schedule(static) if (n >= 4 * CHUNK)")                       \
    for (int64_t c = 0; c < nc; c++) {                                                     \
      int64_t lo = c * CHUNK, len = n - lo < CHUNK ? n - lo : CHUNK;                       \
      NAME##_run(p + lo, g + lo, buf ? buf + lo : NULL, len, wd, m, nlr, decay, nesterov); \
    }                                                                                      \
  }
DEF_SGD(sgd_f32, float)
DEF_SGD(sgd_f64, double)

void nn_sgd_fused(const kiln_optim_opts *o, kiln_tensor *p, kiln_tensor *g, kiln_tensor *buf) {
  if (!g) return;
  int64_t n = kiln_tensor_numel(p);
  bool decay = o->weight_decay > 0;
  if (!(o->momentum > 0)) buf = NULL;
  if (p->dtype == KILN_DTYPE_F32)
    sgd_f32(core_data(p), core_data(g), buf ? core_data(buf) : NULL, n, (float)o->weight_decay,
            (float)o->momentum, (float)-o->lr, decay, o->nesterov);
  else
    sgd_f64(core_data(p), core_data(g), buf ? core_data(buf) : NULL, n, o->weight_decay,
            o->momentum, -o->lr, decay, o->nesterov);
  core_bump_version(p);
  if (buf) core_bump_version(buf);
}
