/* src/exec/fusion_cc.h: native kernels for fusion groups (fusion_cc.c):
 * a group's chain of tile expressions written as one C loop, compiled with
 * the system C compiler and loaded. */
#ifndef KILN_EXEC_FUSION_CC_H
#define KILN_EXEC_FUSION_CC_H

#include "ops/op.h"

/* outs[o]: n results of output o; opnd[k]: the k-th operand that is not a
 * step's result (steps in order, operands in order): n values of its
 * input's dtype, or (scalar) at least one value of the step's compute
 * dtype; at[s]: step s's attributes. */
typedef void (*fusion_native_fn)(void *const *outs, const void *const *opnd, int64_t n,
                                 const op_attrs *at);

/* One step of a chain for the code generator: its tile text (computing
 * in src->type, giving src->out_type). args[a] >= 0 names the step whose
 * result operand a is; -1 means the next external operand, which comes
 * from group input in[a] (-1: a constant) as an array of C type atype[a],
 * or is one value of src->type when scalar[a] (constants, numbers,
 * zero-dim tensors). Operands convert to src->type by C casts, as the
 * tile executor's conversions do (bool results are 0/1). */
typedef struct fusion_cc_step {
  const op_tile_src *src;
  int args[3];
  int in[3];
  bool scalar[3];
  const char *atype[3];
} fusion_cc_step;

/* Most operands that are not step results (the executor's limit). */
#define FUSION_CC_MAX_OPERANDS 192

/* A loaded native kernel; free with exec_fusion_cc_free. */
typedef struct fusion_cc_kernel fusion_cc_kernel;

/* Writes the kernel's C source for steps[0..n_steps) with outputs
 * out_steps[0..n_out). Returns a core_alloc'd string (free with
 * core_free), or NULL with the error set. */
char *exec_fusion_cc_source(const fusion_cc_step *steps, int n_steps, const int *out_steps, int n_out);

/* Compiles source and loads its kernel, or loads the one an earlier
 * process kept (Note [Kernel files]). NULL with the error set (the
 * compiler's first message lines when it failed; KILN_ERR_UNSUPPORTED when
 * native kernels are off or no compiler runs). The caller owns the result. */
fusion_cc_kernel *exec_fusion_cc_compile(const char *source);
/* Why the last exec_fusion_cc_compile on this thread did not use the kernel
 * directory it was given (Note [Kernel files]), or NULL. */
const char *exec_fusion_cc_refusal(void);
/* Tests: called with a library's path after its descriptor was opened and
 * checked, just before it is loaded (to swap the file in between). */
extern void (*exec_fusion_cc_before_load_hook)(const char *path);
/* Kernels loaded from kept files instead of compiled, so far. */
int64_t exec_fusion_cc_files_loaded(void);
fusion_native_fn exec_fusion_cc_fn(const fusion_cc_kernel *k);
/* The same loop writing its outputs with streaming stores in 16-element
 * blocks; outputs must be 64-byte aligned. NULL without AVX-512, or when
 * an output is not float or double. */
fusion_native_fn exec_fusion_cc_fn_stream(const fusion_cc_kernel *k);
/* The same values, for outputs that may be the inputs' own arrays (at the
 * same index: Note [In-place native loop] in fusion_cc.c); plain stores.
 * NULL for a kernel file without it. */
fusion_native_fn exec_fusion_cc_fn_inplace(const fusion_cc_kernel *k);
void exec_fusion_cc_free(fusion_cc_kernel *k);

/* Native kernels: 0 never, 1 for a kernel once its runs have covered
 * FUSION_CC_WORK elements (the default), 2 for every kernel (tests). KILN_NATIVE_FUSION in
 * the environment sets the initial mode; KILN_CC names the compiler
 * (default "cc"). Setting a mode also forgets that the compiler would not
 * run. Returns the previous mode. */
#define FUSION_CC_WORK (INT64_C(1) << 22)
int exec_fusion_cc_set_mode(int mode);
int exec_fusion_cc_mode(void);

#endif
