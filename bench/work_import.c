/* bench/work_import.c: the imported-model benchmarks of issue 17:
 * torchvision's resnet18 (inference at batch 1 and 16, a training step at
 * batch 16, 3x64x64 inputs) and nn.TransformerEncoderLayer(256, 4) (a
 * training step, batch 16, seq 64), each in eager, jit and lazy mode. The
 * models are exported by scripts/bench_models.py into build/bench-models/
 * (KILN_BENCH_MODELS overrides the directory); without them the workloads
 * fail their setup with a message saying how to make them. The PyTorch
 * side is bench/torch_anchor.py (same modules, seeds and steps). */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

static struct {
  kiln_model *m;
  kiln_optim *o;
  kiln_tensor *x, *y;
  kiln_nn_mode mode;
  bool train, ce;
} I;

static int load(const char *name, kiln_nn_mode mode, bool train, int64_t batch, int ndim,
                const int64_t *shape) {
  const char *dir = getenv("KILN_BENCH_MODELS");
  char ir[512], w[512];
  snprintf(ir, sizeof ir, "%s/%s.ir", dir ? dir : "build/bench-models", name);
  snprintf(w, sizeof w, "%s/%s.safetensors", dir ? dir : "build/bench-models", name);
  kiln_model_opts o;
  kiln_model_opts_default(&o);
  o.mode = mode;
  o.training = train;
  I.m = kiln_model_load(ir, w, &o);
  if (!I.m) {
    fprintf(stderr, "bench: %s: run /usr/bin/python3 scripts/bench_models.py first\n", name);
    return -1;
  }
  I.mode = mode;
  I.train = train;
  kiln_generator *g = kiln_generator_new(8);
  I.x = kiln_randn(ndim, shape, KILN_DTYPE_F32, g);
  I.y = NULL;
  if (I.ce) {
    kiln_tensor *u = kiln_rand(1, &batch, KILN_DTYPE_F32, g);
    I.y = u ? kiln_to_dtype(kiln_mul_scalar(u, 999.99), KILN_DTYPE_I64) : NULL;
  }
  kiln_generator_free(g);
  if (!I.x || (I.ce && !I.y)) return -1;
  if (train) {
    kiln_optim_opts oo = {.kind = KILN_OPTIM_SGD, .lr = 0.01, .momentum = 0.9};
    I.o = kiln_optim_new(kiln_model_module(I.m), &oo);
    if (!I.o || (mode == KILN_NN_LAZY && kiln_optim_to_lazy(I.o) < 0)) return -1;
  }
  return 0;
}

static void teardown(void) {
  kiln_optim_free(I.o);
  kiln_model_free(I.m);
  kiln_release(I.x);
  kiln_release(I.y);
  I.o = NULL, I.m = NULL, I.x = I.y = NULL;
}

/* One inference or training step; < 0 on failure. */
static int step(void) {
  int rc = 0;
  bool lazy = I.mode == KILN_NN_LAZY;
  kiln_scope_begin();
  kiln_value in = {.kind = KILN_VALUE_TENSOR, .t = lazy ? kiln_to_lazy(I.x) : I.x}, out[2];
  if (!I.train) {
    kiln_no_grad_begin();
    rc = kiln_model_call(I.m, &in, 1, out, 2) < 1 ? -1 : 0;
    kiln_no_grad_end();
    if (rc == 0 && lazy) rc = kiln_mark_step() < 0 ? -1 : 0;
  } else {
    kiln_tensor *loss = NULL;
    if (kiln_model_call(I.m, &in, 1, out, 2) >= 1)
      loss = I.ce ? kiln_cross_entropy(out[0].t, lazy ? kiln_to_lazy(I.y) : I.y,
                                       KILN_REDUCTION_MEAN)
                  : kiln_mean(out[0].t, NULL, 0, false);
    if (!loss || kiln_backward(loss, NULL) < 0 || kiln_optim_step(I.o) < 0 ||
        kiln_optim_zero_grad(I.o) < 0 || (lazy && kiln_mark_step() < 0))
      rc = -1;
  }
  kiln_scope_end();
  return rc;
}

static double run(int iters) {
  double t0 = bench_now();
  for (int i = 0; i < iters; i++)
    if (step() < 0) return bench_fail(bench_current, "step");
  return bench_now() - t0;
}

static const int64_t IMG1[4] = {1, 3, 64, 64}, IMG16[4] = {16, 3, 64, 64}, SEQ[3] = {16, 64, 256};
#define RESNET(fn, mode, train, b, shape)                                      \
  static int fn(void) {                                                        \
    I.ce = true;                                                               \
    return load("resnet18", mode, train, b, 4, shape);                         \
  }
RESNET(r1_eager, KILN_NN_EAGER, false, 1, IMG1)
RESNET(r1_jit, KILN_NN_JIT, false, 1, IMG1)
RESNET(r1_lazy, KILN_NN_LAZY, false, 1, IMG1)
RESNET(r16_eager, KILN_NN_EAGER, false, 16, IMG16)
RESNET(r16_jit, KILN_NN_JIT, false, 16, IMG16)
RESNET(r16_lazy, KILN_NN_LAZY, false, 16, IMG16)
RESNET(rt_eager, KILN_NN_EAGER, true, 16, IMG16)
RESNET(rt_jit, KILN_NN_JIT, true, 16, IMG16)
RESNET(rt_lazy, KILN_NN_LAZY, true, 16, IMG16)
#define XFMR(fn, mode)                                                         \
  static int fn(void) {                                                        \
    I.ce = false;                                                              \
    return load("transformer_encoder", mode, true, 16, 3, SEQ);                \
  }
XFMR(t_eager, KILN_NN_EAGER)
XFMR(t_jit, KILN_NN_JIT)
XFMR(t_lazy, KILN_NN_LAZY)

static const bench_workload imports[] = {
    {"resnet18_infer_b1_eager", "ms", BENCH_TIME, 1e3, 0, 3, 0, r1_eager, run, teardown},
    {"resnet18_infer_b1_jit", "ms", BENCH_TIME, 1e3, 0, 5, 0, r1_jit, run, teardown},
    {"resnet18_infer_b1_lazy", "ms", BENCH_TIME, 1e3, 0, 3, 0, r1_lazy, run, teardown},
    {"resnet18_infer_b16_eager", "ms", BENCH_TIME, 1e3, 0, 2, 0, r16_eager, run, teardown},
    {"resnet18_infer_b16_jit", "ms", BENCH_TIME, 1e3, 0, 4, 0, r16_jit, run, teardown},
    {"resnet18_infer_b16_lazy", "ms", BENCH_TIME, 1e3, 0, 2, 0, r16_lazy, run, teardown},
    {"resnet18_train_step_b16_eager", "ms", BENCH_TIME, 1e3, 0, 2, 0, rt_eager, run, teardown},
    {"resnet18_train_step_b16_jit", "ms", BENCH_TIME, 1e3, 0, 4, 0, rt_jit, run, teardown},
    {"resnet18_train_step_b16_lazy", "ms", BENCH_TIME, 1e3, 0, 2, 0, rt_lazy, run, teardown},
    {"transformer_encoder_train_step_eager", "ms", BENCH_TIME, 1e3, 0, 2, 0, t_eager, run, teardown},
    {"transformer_encoder_train_step_jit", "ms", BENCH_TIME, 1e3, 0, 4, 0, t_jit, run, teardown},
    {"transformer_encoder_train_step_lazy", "ms", BENCH_TIME, 1e3, 0, 2, 0, t_lazy, run, teardown},
};

const bench_workload *bench_import_workloads(int *n) {
  *n = (int)(sizeof imports / sizeof *imports);
  return imports;
}
