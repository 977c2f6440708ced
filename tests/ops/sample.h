/* tests/ops/sample.h: sample inputs per op, registered next to each op's
 * tests and read by the table-driven checks (gradcheck, gradgradcheck,
 * infer-vs-kernel). Every differentiable op must have at least one sample:
 * tests/ops/test_gradcheck.c fails for any op without one.
 *
 *   OP_SAMPLE(MUL, broadcast) {
 *     s->args[0] = OPV_T(sample_randn(g, 2, (int64_t[]){2, 3}));
 *     s->args[1] = OPV_T(sample_randn(g, 1, (int64_t[]){3}));
 *     s->n_args = 2;
 *   }
 *
 * Tensors are float64 (gradcheck's precision) and created in the caller's
 * scope. Samples should be small (<= ~60 elements per input). */
#ifndef KILN_TEST_SAMPLE_H
#define KILN_TEST_SAMPLE_H

#include "ops/op.h"

#define SAMPLE_MAX_ARGS 20
#define SAMPLE_MAX_SLOTS 16

typedef struct op_sample {
  op_val args[SAMPLE_MAX_ARGS];
  int n_args;
  /* input slots gradcheck must not perturb (e.g. a float target) */
  bool skip_slot[SAMPLE_MAX_SLOTS];
  /* finite differences are invalid near kinks: samples keep inputs away
   * from them; set when an op needs a looser tolerance */
  double atol, rtol;
  /* bit k: output k is not weighed (its gradient is one PyTorch's formula
   * ignores: native_layer_norm's statistics) */
  unsigned skip_outs;
  /* int lists must outlive the sample: keep them here */
  int64_t ints[4][8];
} op_sample;

typedef void (*sample_fn)(op_sample *s, kiln_generator *g);

typedef struct sample_entry {
  int op;
  const char *name;
  sample_fn fn;
} sample_entry;

void sample_register(int op, const char *name, sample_fn fn);
/* All registered samples; *n receives the count. */
const sample_entry *sample_all(int *n);

#define OP_SAMPLE(ENUM, tag)                                                   \
  static void sample_##ENUM##_##tag(op_sample *s, kiln_generator *g);         \
  __attribute__((constructor)) static void sample_reg_##ENUM##_##tag(void) {  \
    sample_register(KILN_OP_##ENUM, #ENUM "/" #tag, sample_##ENUM##_##tag);   \
  }                                                                           \
  static void sample_##ENUM##_##tag(op_sample *s, kiln_generator *g)

/* float64 randn / rand-in-[lo,hi) tensors (in the current scope). */
kiln_tensor *sample_randn(kiln_generator *g, int ndim, const int64_t *shape);
kiln_tensor *sample_uniform(kiln_generator *g, int ndim, const int64_t *shape,
                            double lo, double hi);
/* A non-contiguous tensor of the given shape: the transpose of a
 * contiguous [shape[1], shape[0]] randn (2-d shapes only). */
kiln_tensor *sample_transposed(kiln_generator *g, const int64_t shape[2]);
/* int64 tensor with values uniform in [0, hi). */
kiln_tensor *sample_index(kiln_generator *g, int ndim, const int64_t *shape, int64_t hi);

/* Checks t against want (n values, relative tolerance tol, NaN equal to
 * NaN); failures name `what` and the element. */
void sample_check_vals(const char *what, kiln_tensor *t, const double *want, int64_t n,
                       double tol);

#endif
