/* fuzz/fuzz_run.c: libFuzzer target for running graphs. Any input that
 * parses is run through a function three times (profiled, optimized,
 * optimized again) on small random inputs (of the declared dtype and
 * shape where the graph gives them, else [2, 3] floats), half requiring grad,
 * with a backward through the first tensor output: every failure must be
 * an error with a message, never a crash, a sanitizer report or a hang.
 * Graphs with loops are skipped (a loop of 10^18 steps is a slow program,
 * not a bug) and single allocations above 64 MiB fail (a graph may ask for
 * a terabyte tensor; that must be an error). Run with `make fuzz` (FUZZ_OOM=1:
 * fuzz_oom.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "ir/ir.h"
#include "kiln.h"
#include "fuzz_oom.h"

#define MAX_IN 16

/* A random input for a tensor parameter of type t: the dtype and sizes the
 * graph declares (`Long(3, 4)`; every size known, at most 4 dims, at most
 * 256 elements), else a [2, 3] float tensor; even parameters of a float
 * dtype require grad. */
static kiln_tensor *make_input(const ir_type *t, kiln_generator *gen, int i) {
  int64_t shape[4] = {2, 3}, numel = 1;
  int nd = 2;
  kiln_dtype dt = t->dtype >= 0 && t->dtype < KILN_DTYPE_COUNT ? (kiln_dtype)t->dtype : KILN_DTYPE_F32;
  bool known = t->ndim >= 0 && t->ndim <= 4 && (t->ndim == 0 || t->sizes);
  for (int d = 0; known && d < t->ndim; d++) {
    known = t->sizes[d] >= 0 && t->sizes[d] <= 256;
    numel *= known ? t->sizes[d] : 1;
  }
  if (known && numel <= 256) {
    nd = t->ndim;
    for (int d = 0; d < nd; d++) shape[d] = t->sizes[d];
  }
  kiln_tensor *x = kiln_randn(nd, shape, KILN_DTYPE_F32, gen);
  if (x && dt != KILN_DTYPE_F32) x = kiln_to_dtype(x, dt);
  if (x && i % 2 == 0 && (dt == KILN_DTYPE_F32 || dt == KILN_DTYPE_F64)) kiln_set_requires_grad(x, true);
  return x;
}

static int fuzz_one(const uint8_t *data, size_t size) {
  if (memmem(data, size, "prim::Loop", 10)) return 0;
  core_alloc_limit((size_t)64 << 20);
  kiln_graph *g = kiln_graph_parse((const char *)data, size);
  ir_graph *ig = g ? ir_graph_parse((const char *)data, size) : NULL; /* for the input types */
  if (!ig) {
    kiln_graph_free(g);
    core_alloc_limit(0);
    return 0;
  }
  const ir_block *top = ir_graph_top(ig);
  int n_in = ir_block_n_params(top);
  kiln_function *f = n_in <= MAX_IN ? kiln_function_new(g) : NULL;
  kiln_generator *gen = kiln_generator_new((uint64_t)size);
  kiln_scope_begin();
  kiln_value in[MAX_IN];
  bool ok = f != NULL;
  for (int i = 0; i < n_in && ok; i++) {
    const ir_type *t = ir_block_param(top, i)->type;
    switch (t->kind) {
    case IR_TYPE_TENSOR: {
      kiln_tensor *x = make_input(t, gen, i);
      in[i] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = x};
      ok = x != NULL;
      break;
    }
    case IR_TYPE_INT: in[i] = (kiln_value){.kind = KILN_VALUE_INT, .i = 1}; break;
    case IR_TYPE_FLOAT: in[i] = (kiln_value){.kind = KILN_VALUE_FLOAT, .f = 0.5}; break;
    case IR_TYPE_BOOL: in[i] = (kiln_value){.kind = KILN_VALUE_BOOL, .b = true}; break;
    default: ok = false; break; /* lists, tuples, ...: not generated */
    }
  }
  for (int call = 0; call < 3 && ok; call++) {
    kiln_value out[8];
    kiln_scope_begin();
    int n = kiln_function_call(f, in, n_in, out, 8);
    if (n < 0 && !kiln_last_error()[0]) abort(); /* a failure always says why */
    for (int k = 0; k < n && k < 8; k++)
      if (out[k].kind == KILN_VALUE_TENSOR && out[k].t && kiln_requires_grad(out[k].t)) {
        kiln_tensor *s = kiln_sum(out[k].t, NULL, 0, false);
        if (s && kiln_tensor_dtype(s) != KILN_DTYPE_I64 && kiln_tensor_dtype(s) != KILN_DTYPE_BOOL)
          kiln_backward(s, NULL);
        break;
      }
    kiln_scope_end();
  }
  kiln_scope_end();
  kiln_generator_free(gen);
  kiln_function_free(f);
  kiln_graph_free(g);
  ir_graph_free(ig);
  core_alloc_limit(0);
  return 0;
}
