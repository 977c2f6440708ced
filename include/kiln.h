/* kiln.h: the whole public API of kiln, a deep-learning runtime in C11.
 *
 * kiln has tensors with reverse-mode autograd, a TorchScript-compatible
 * graph IR run by a profiling executor, and lazy tensors. This header is
 * the manual; sections follow the library's layers, bottom-up.
 *
 * Memory. Tensors are refcounted handles. Every function that returns a
 * tensor returns a NEW reference, unless its comment says BORROWED
 * (kiln_tensor_grad, a module's parameters, ...). Inside a scope (kiln_scope_begin/end) new
 * tensors are also registered with the scope, which releases them when it
 * ends; kiln_keep(t) takes an extra reference so t outlives the scope (the
 * caller then releases it). Outside any scope the caller owns the returned
 * reference and must kiln_release it.
 *
 * Errors. Functions that can fail return NULL or a negative kiln_status and
 * set a thread-local message, kiln_last_error(), naming the function, the
 * operands' shapes and dtypes, and what was expected. No user error aborts.
 *
 * Note [Threads]. Several threads may use kiln at once on independent
 * objects: each its own tensors (eager ops, autograd, in-place updates),
 * its own kiln_functions (profiling, optimizing, fusing at the same time)
 * and its own lazy tensors; each gets the values the same work gives run
 * alone (tests/core/test_thread_contract.c, also under `make test TSAN=1`).
 * Safe to share between threads without a lock of yours:
 *   - a tensor nobody writes and that does not require grad (model
 *     weights read by every request thread): reference counts are atomic;
 *   - one kiln_function: concurrent calls serialize on its lock (one runs,
 *     the others wait); backwards through its outputs run outside it;
 *   - the default generator (kiln_rand(..., NULL), dropout): each draw
 *     takes its lock, so concurrent draws get distinct numbers of its one
 *     sequence in a scheduling-dependent order; a thread that needs a
 *     reproducible stream uses a kiln_generator_new of its own;
 *   - what kiln keeps process-wide: the fused-kernel cache and native
 *     kernels, op schemas, the CPU level, the kiln_fused_kernels_* counts,
 *     kiln_set_anomaly_enabled (one setting for every thread).
 * Per thread: the error message, grad mode, scopes, the backward progress
 * callback, the storage cache, the OpenMP thread count (a new thread
 * starts with OpenMP's default: OMP_NUM_THREADS, else every core; k
 * threads computing at once use up to k teams, so a server with many
 * request threads calls kiln_set_num_threads(1) on each), and the LAZY
 * DEVICE: each thread has its own pending graph, compile cache (and
 * kiln_lazy_set_cache_size), recompile reasons and kiln_lazy_* metrics;
 * kiln_mark_step syncs the calling thread's lazy tensors only. A lazy
 * tensor is used and released only on the thread that made it.
 * Your lock (one thread at a time) is needed for: a tensor one thread
 * writes (in place, kiln_copy_, through kiln_tensor_data, set_grad,
 * set_requires_grad) while another reads or writes it; backward into the
 * same leaf tensors from several threads; a kiln_generator_new generator;
 * a kiln_graph, kiln_nn_module, kiln_optim, kiln_model or data set; the
 * borrowed strings of kiln_function_guard_failure_reason while a call of
 * the function runs.
 *
 * A training step, eager mode:
 *
 *   kiln_scope_begin();
 *   kiln_tensor *h = kiln_relu(kiln_linear(x, w1, b1));
 *   kiln_tensor *loss = kiln_cross_entropy(kiln_linear(h, w2, b2), y,
 *                                          KILN_REDUCTION_MEAN);
 *   if (kiln_backward(loss, NULL) < 0) fprintf(stderr, "%s\n", kiln_last_error());
 *   kiln_no_grad_begin();       // w1 -= lr * grad(w1), in place:
 *   kiln_add_(w1, kiln_tensor_grad(w1), -lr);   // ... and so on for each parameter
 *   kiln_no_grad_end();
 *   kiln_scope_end();            // h, loss and the rest are released here
 */
#ifndef KILN_H
#define KILN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_API __attribute__((visibility("default")))

/* Versions (README "Versions and ABI"): a program built against this header
 * runs with any libkiln.so of the same MAJOR and a MINOR at least this one;
 * PATCH releases change no declaration. */
#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0
#define KILN_VERSION_STRING "0.1.0"
/* The version of the library that is running, "MAJOR.MINOR.PATCH" (static
 * string; compare with KILN_VERSION_STRING, the header's). */
KILN_API const char *kiln_version(void);

/* ===================================================================== */
/* core: status, dtypes, tensors, scopes, generators                       */
/* ===================================================================== */

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERR_INVALID = -1,  /* bad argument: shape, dtype, dim, value */
  KILN_ERR_NOMEM = -2,    /* allocation failed */
  KILN_ERR_IO = -3,       /* file missing, unreadable, short */
  KILN_ERR_FORMAT = -4,   /* malformed file or text */
  KILN_ERR_STATE = -5,    /* wrong state (freed graph, modified saved tensor) */
  KILN_ERR_UNSUPPORTED = -6
} kiln_status;

/* The thread's last error message (never NULL; "" if none). Owned by kiln,
 * valid until the next failing call on this thread. */
KILN_API const char *kiln_last_error(void);
/* The kiln_status of the thread's last error (KILN_OK if none): what a
 * call that returned NULL failed with. */
KILN_API kiln_status kiln_last_status(void);
/* Clears the thread's error message and status. */
KILN_API void kiln_clear_error(void);

/* Element types. Promotion is torch.promote_types' (Note [Promotion] in
 * src/core/dtype.c) by category (bool, integer, floating); a Python-style
 * scalar or a 0-d tensor only changes the result if it is of a higher
 * category. Half types (F16, BF16) are stored as 16 bits and computed in
 * float32; integer types wrap around in their own width. */
typedef enum kiln_dtype {
  KILN_DTYPE_F32 = 0,
  KILN_DTYPE_F64 = 1,
  KILN_DTYPE_I64 = 2,
  KILN_DTYPE_BOOL = 3,
  KILN_DTYPE_I32 = 4,
  KILN_DTYPE_I16 = 5,
  KILN_DTYPE_I8 = 6,
  KILN_DTYPE_U8 = 7,
  KILN_DTYPE_F16 = 8,  /* IEEE binary16, PyTorch's Half */
  KILN_DTYPE_BF16 = 9, /* bfloat16 */
  KILN_DTYPE_COUNT
} kiln_dtype;

/* Size of one element in bytes. */
KILN_API size_t kiln_dtype_size(kiln_dtype dt);
/* PyTorch's name as IR types print it: "Float", "Double", "Long", "Bool",
 * "Int", "Short", "Char", "Byte", "Half", "BFloat16". Static string. */
KILN_API const char *kiln_dtype_name(kiln_dtype dt);
/* The result dtype of a binary op on two tensors of these dtypes. */
KILN_API kiln_dtype kiln_promote_types(kiln_dtype a, kiln_dtype b);

#define KILN_MAX_DIMS 8

typedef struct kiln_tensor kiln_tensor;
typedef struct kiln_generator kiln_generator;

/* Reference counting. retain returns t; release(NULL) is a no-op. */
KILN_API kiln_tensor *kiln_retain(kiln_tensor *t);
KILN_API void kiln_release(kiln_tensor *t);

/* Scopes (autorelease pools); they nest. Tensors created while a scope is
 * open are released when it ends. kiln_keep(t) takes one extra reference
 * (returns t) so that t survives the scope; release it later yourself. */
KILN_API void kiln_scope_begin(void);
KILN_API void kiln_scope_end(void);
KILN_API kiln_tensor *kiln_keep(kiln_tensor *t);

/* Metadata. Shape/stride pointers are owned by t and valid while t lives
 * and is not resized. */
KILN_API int kiln_tensor_ndim(const kiln_tensor *t);
KILN_API const int64_t *kiln_tensor_shape(const kiln_tensor *t);
KILN_API const int64_t *kiln_tensor_strides(const kiln_tensor *t);
/* Size of dim (negative dims count from the end); -1 if out of range. */
KILN_API int64_t kiln_tensor_size(const kiln_tensor *t, int dim);
KILN_API int64_t kiln_tensor_numel(const kiln_tensor *t);
KILN_API kiln_dtype kiln_tensor_dtype(const kiln_tensor *t);
KILN_API int64_t kiln_tensor_offset(const kiln_tensor *t);
KILN_API bool kiln_tensor_is_contiguous(const kiln_tensor *t);
/* Pointer to element [0,...,0] of a CPU tensor (storage + offset); NULL for
 * tensors without data. Owned by the tensor's storage. */
KILN_API void *kiln_tensor_data(const kiln_tensor *t);
/* Shape as text, e.g. "[4, 3]"; writes at most n bytes; returns buf. */
KILN_API char *kiln_shape_str(const kiln_tensor *t, char *buf, size_t n);

/* Creation. All return new references, or NULL on error (bad shape,
 * ndim > KILN_MAX_DIMS, negative size, out of memory). */
KILN_API kiln_tensor *kiln_empty(int ndim, const int64_t *shape, kiln_dtype dt);
KILN_API kiln_tensor *kiln_zeros(int ndim, const int64_t *shape, kiln_dtype dt);
KILN_API kiln_tensor *kiln_ones(int ndim, const int64_t *shape, kiln_dtype dt);
KILN_API kiln_tensor *kiln_full(int ndim, const int64_t *shape, double value,
                                kiln_dtype dt);
/* 0-d tensor holding value. */
KILN_API kiln_tensor *kiln_scalar(double value, kiln_dtype dt);
/* [start, end) by step, as torch.arange. */
KILN_API kiln_tensor *kiln_arange(double start, double end, double step,
                                  kiln_dtype dt);
/* Copies numel(shape) elements of dtype dt from data. */
KILN_API kiln_tensor *kiln_from_data(const void *data, int ndim,
                                     const int64_t *shape, kiln_dtype dt);
/* A tensor over memory kiln does not own (zero-copy, as torch.from_numpy):
 * data must be aligned to the element size (else KILN_ERR_INVALID; views
 * with offsets are no more aligned, and kernels check) and hold every element the shape and strides (in
 * elements, non-negative; NULL = contiguous) address. When the last
 * tensor on the memory is released, release(ctx) runs (release may be
 * NULL). On failure release is NOT called and NULL is returned. */
KILN_API kiln_tensor *kiln_from_blob(void *data, int ndim, const int64_t *shape,
                                     const int64_t *strides, kiln_dtype dt,
                                     void (*release)(void *ctx), void *ctx);
/* Uniform [0,1) and standard normal, from gen (NULL = the default
 * generator). Floating dtypes only. */
KILN_API kiln_tensor *kiln_rand(int ndim, const int64_t *shape, kiln_dtype dt,
                                kiln_generator *gen);
KILN_API kiln_tensor *kiln_randn(int ndim, const int64_t *shape, kiln_dtype dt,
                                 kiln_generator *gen);

/* Generators: seeded, deterministic (xoshiro256**). */
KILN_API kiln_generator *kiln_generator_new(uint64_t seed);
KILN_API void kiln_generator_free(kiln_generator *g);
KILN_API void kiln_generator_seed(kiln_generator *g, uint64_t seed);
/* The default generator (owned by kiln); kiln_manual_seed reseeds it. */
KILN_API kiln_generator *kiln_default_generator(void);
KILN_API void kiln_manual_seed(uint64_t seed);
/* The generator's whole state (for checkpoints): 4 words. */
KILN_API void kiln_generator_get_state(const kiln_generator *g, uint64_t s[4]);
KILN_API void kiln_generator_set_state(kiln_generator *g, const uint64_t s[4]);

/* The value of a one-element tensor as double. KILN_ERR_INVALID if numel != 1. */
KILN_API kiln_status kiln_item(const kiln_tensor *t, double *out);
/* Copies t's elements in C order, converted to dtype dt, into buf, which
 * holds at least numel elements. */
KILN_API kiln_status kiln_tensor_copy_to(const kiln_tensor *t, void *buf,
                                         kiln_dtype dt);
/* Copies src into dst in place (broadcasting src, converting dtype); bumps
 * dst's version. Not recorded by autograd; fails on a leaf that requires
 * grad while grad mode is on. */
KILN_API kiln_status kiln_copy_(kiln_tensor *dst, const kiln_tensor *src);
/* Fills t with value in place. */
KILN_API kiln_status kiln_fill_(kiln_tensor *t, double value);
/* The version counter of t's memory (PyTorch's t._version), shared by its
 * views: every in-place write raises it. 0 for a tensor without memory
 * of its own (lazy, symbolic) or NULL. */
KILN_API uint64_t kiln_tensor_version(const kiln_tensor *t);

/* ---- CPU level and threads --------------------------------------------- */
/* The instruction-set level kiln's kernels run at: "baseline", "avx2" or
 * "avx512", chosen at first use from the CPU and lowered by the environment
 * variable KILN_CPU (README: CPU levels). A static string. */
KILN_API const char *kiln_cpu_level(void);
/* The number of threads the calling thread's parallel regions use from now
 * on (n >= 1; larger than the cores available to the process is capped to
 * them; other threads keep theirs: Note [Threads]).
 * KILN_ERR_INVALID for n < 1. Default: KILN_NUM_THREADS, else
 * OMP_NUM_THREADS, else the available cores (README: Threads). */
KILN_API kiln_status kiln_set_num_threads(int n);
/* The number of threads the calling thread's parallel regions are asked
 * to use (as set above). Beside other busy processes they use fewer, the
 * cores left free, at least 1 (README: Threads; KILN_ADAPT_THREADS=0 turns
 * that off). Never fails. */
KILN_API int kiln_get_num_threads(void);

/* ===================================================================== */
/* ops: every function below is one entry of the op table                 */
/* ===================================================================== */
/* All return new references or NULL with kiln_last_error() set. Dims may be
 * negative (counted from the end). Binary ops broadcast. */

/* Views (share storage with their input). */
KILN_API kiln_tensor *kiln_view(kiln_tensor *t, int ndim, const int64_t *shape);
KILN_API kiln_tensor *kiln_reshape(kiln_tensor *t, int ndim, const int64_t *shape);
KILN_API kiln_tensor *kiln_t(kiln_tensor *t);
KILN_API kiln_tensor *kiln_transpose(kiln_tensor *t, int dim0, int dim1);
KILN_API kiln_tensor *kiln_permute(kiln_tensor *t, int ndim, const int64_t *dims);
KILN_API kiln_tensor *kiln_unsqueeze(kiln_tensor *t, int dim);
/* Removes all size-1 dims. */
KILN_API kiln_tensor *kiln_squeeze(kiln_tensor *t);
KILN_API kiln_tensor *kiln_squeeze_dim(kiln_tensor *t, int dim);
KILN_API kiln_tensor *kiln_expand(kiln_tensor *t, int ndim, const int64_t *shape);
KILN_API kiln_tensor *kiln_narrow(kiln_tensor *t, int dim, int64_t start,
                                  int64_t length);
KILN_API kiln_tensor *kiln_slice(kiln_tensor *t, int dim, int64_t start,
                                 int64_t end, int64_t step);
KILN_API kiln_tensor *kiln_select(kiln_tensor *t, int dim, int64_t index);
/* Copies. */
KILN_API kiln_tensor *kiln_contiguous(kiln_tensor *t);
KILN_API kiln_tensor *kiln_clone(kiln_tensor *t);
KILN_API kiln_tensor *kiln_to_dtype(kiln_tensor *t, kiln_dtype dt);
/* A new handle on t's data with no autograd history (requires_grad false). */
KILN_API kiln_tensor *kiln_detach(kiln_tensor *t);

/* Unary elementwise. Integer inputs of floating functions give float32. */
KILN_API kiln_tensor *kiln_neg(kiln_tensor *t);
KILN_API kiln_tensor *kiln_abs(kiln_tensor *t);
KILN_API kiln_tensor *kiln_exp(kiln_tensor *t);
KILN_API kiln_tensor *kiln_log(kiln_tensor *t);
KILN_API kiln_tensor *kiln_sqrt(kiln_tensor *t);
KILN_API kiln_tensor *kiln_rsqrt(kiln_tensor *t);
KILN_API kiln_tensor *kiln_sin(kiln_tensor *t);
KILN_API kiln_tensor *kiln_cos(kiln_tensor *t);
KILN_API kiln_tensor *kiln_tanh(kiln_tensor *t);
KILN_API kiln_tensor *kiln_sigmoid(kiln_tensor *t);
KILN_API kiln_tensor *kiln_erf(kiln_tensor *t);
/* -1, 0 or 1 (its gradient is zero). */
KILN_API kiln_tensor *kiln_sign(kiln_tensor *t);
KILN_API kiln_tensor *kiln_relu(kiln_tensor *t);
/* approximate: false = exact erf form, true = tanh form. */
KILN_API kiln_tensor *kiln_gelu(kiln_tensor *t, bool approximate_tanh);
KILN_API kiln_tensor *kiln_silu(kiln_tensor *t);
KILN_API kiln_tensor *kiln_leaky_relu(kiln_tensor *t, double negative_slope);
/* Either bound may be NAN to mean "none". */
KILN_API kiln_tensor *kiln_clamp(kiln_tensor *t, double min, double max);

/* Binary elementwise (broadcasting, type promotion). */
KILN_API kiln_tensor *kiln_add(kiln_tensor *a, kiln_tensor *b);
KILN_API kiln_tensor *kiln_sub(kiln_tensor *a, kiln_tensor *b);
/* a + alpha * b and a - alpha * b. */
KILN_API kiln_tensor *kiln_add_alpha(kiln_tensor *a, kiln_tensor *b, double alpha);
KILN_API kiln_tensor *kiln_sub_alpha(kiln_tensor *a, kiln_tensor *b, double alpha);
KILN_API kiln_tensor *kiln_mul(kiln_tensor *a, kiln_tensor *b);
KILN_API kiln_tensor *kiln_div(kiln_tensor *a, kiln_tensor *b);
KILN_API kiln_tensor *kiln_pow(kiln_tensor *a, kiln_tensor *b);
KILN_API kiln_tensor *kiln_maximum(kiln_tensor *a, kiln_tensor *b);
KILN_API kiln_tensor *kiln_minimum(kiln_tensor *a, kiln_tensor *b);
/* With a Python-style scalar (does not promote a float tensor's dtype; a
 * float scalar on an integer tensor gives float32). */
KILN_API kiln_tensor *kiln_add_scalar(kiln_tensor *a, double s);
KILN_API kiln_tensor *kiln_sub_scalar(kiln_tensor *a, double s);
KILN_API kiln_tensor *kiln_mul_scalar(kiln_tensor *a, double s);
/* In place, as PyTorch's add_/mul_: self += alpha * other, self *= other,
 * self *= s (other broadcasts to self; the result keeps self's dtype).
 * Not recorded by autograd: refused when self requires grad and grad mode
 * is on (use them under no_grad, as optimizers do). Lazy tensors record
 * the op. KILN_OK or a negative kiln_status with the error set. */
KILN_API kiln_status kiln_add_(kiln_tensor *self, kiln_tensor *other, double alpha);
KILN_API kiln_status kiln_mul_(kiln_tensor *self, kiln_tensor *other);
KILN_API kiln_status kiln_mul_scalar_(kiln_tensor *self, double s);
KILN_API kiln_tensor *kiln_div_scalar(kiln_tensor *a, double s);
KILN_API kiln_tensor *kiln_pow_scalar(kiln_tensor *a, double exponent);
/* Comparisons give bool tensors. */
KILN_API kiln_tensor *kiln_eq(kiln_tensor *a, kiln_tensor *b);
KILN_API kiln_tensor *kiln_ne(kiln_tensor *a, kiln_tensor *b);
KILN_API kiln_tensor *kiln_lt(kiln_tensor *a, kiln_tensor *b);
KILN_API kiln_tensor *kiln_le(kiln_tensor *a, kiln_tensor *b);
KILN_API kiln_tensor *kiln_gt(kiln_tensor *a, kiln_tensor *b);
KILN_API kiln_tensor *kiln_ge(kiln_tensor *a, kiln_tensor *b);
/* cond ? a : b, cond of dtype bool. */
KILN_API kiln_tensor *kiln_where(kiln_tensor *cond, kiln_tensor *a, kiln_tensor *b);

/* Reductions. dims == NULL (n_dims 0) reduces over all dims. */
KILN_API kiln_tensor *kiln_sum(kiln_tensor *t, const int64_t *dims, int n_dims,
                               bool keepdim);
KILN_API kiln_tensor *kiln_mean(kiln_tensor *t, const int64_t *dims, int n_dims,
                                bool keepdim);
KILN_API kiln_tensor *kiln_amax(kiln_tensor *t, const int64_t *dims, int n_dims,
                                bool keepdim);
KILN_API kiln_tensor *kiln_amin(kiln_tensor *t, const int64_t *dims, int n_dims,
                                bool keepdim);
/* Variance with Bessel's correction when correction = 1. */
KILN_API kiln_tensor *kiln_var(kiln_tensor *t, const int64_t *dims, int n_dims,
                               int64_t correction, bool keepdim);
/* max over one dim: values returned, int64 indices in *indices (new ref;
 * pass NULL to drop them). */
KILN_API kiln_tensor *kiln_max_dim(kiln_tensor *t, int dim, bool keepdim,
                                   kiln_tensor **indices);
/* argmax over dim; over the flattened tensor when flatten is true. */
KILN_API kiln_tensor *kiln_argmax(kiln_tensor *t, int dim, bool flatten,
                                  bool keepdim);

/* Linear algebra (CBLAS). */
KILN_API kiln_tensor *kiln_mm(kiln_tensor *a, kiln_tensor *b);
KILN_API kiln_tensor *kiln_bmm(kiln_tensor *a, kiln_tensor *b);
KILN_API kiln_tensor *kiln_matmul(kiln_tensor *a, kiln_tensor *b);
/* beta * bias + alpha * (a @ b). */
KILN_API kiln_tensor *kiln_addmm(kiln_tensor *bias, kiln_tensor *a,
                                 kiln_tensor *b, double beta, double alpha);
/* x @ w^T + b; b may be NULL. */
KILN_API kiln_tensor *kiln_linear(kiln_tensor *x, kiln_tensor *w, kiln_tensor *b);

/* Normalisation along a dim. */
KILN_API kiln_tensor *kiln_softmax(kiln_tensor *t, int dim);
KILN_API kiln_tensor *kiln_log_softmax(kiln_tensor *t, int dim);

/* Joining and splitting. chunk/split write up to max_out new references
 * into outs and return their count, or a negative kiln_status. */
KILN_API kiln_tensor *kiln_cat(kiln_tensor *const *ts, int n, int dim);
KILN_API kiln_tensor *kiln_stack(kiln_tensor *const *ts, int n, int dim);
KILN_API int kiln_chunk(kiln_tensor *t, int chunks, int dim, kiln_tensor **outs,
                        int max_out);
KILN_API int kiln_split(kiln_tensor *t, int64_t split_size, int dim,
                        kiln_tensor **outs, int max_out);
/* unbind: one view per index along dim (the dim dropped), like chunk. */
KILN_API int kiln_unbind(kiln_tensor *t, int dim, kiln_tensor **outs, int max_out);

/* Indexing (index tensors are int64). */
KILN_API kiln_tensor *kiln_index_select(kiln_tensor *t, int dim, kiln_tensor *index);
KILN_API kiln_tensor *kiln_embedding(kiln_tensor *weight, kiln_tensor *indices);
KILN_API kiln_tensor *kiln_gather(kiln_tensor *t, int dim, kiln_tensor *index);

/* Losses. Reduction codes are PyTorch's. */
typedef enum kiln_reduction {
  KILN_REDUCTION_NONE = 0,
  KILN_REDUCTION_MEAN = 1,
  KILN_REDUCTION_SUM = 2
} kiln_reduction;
/* logp [N, C] log-probabilities, target [N] int64 class indices. */
KILN_API kiln_tensor *kiln_nll_loss(kiln_tensor *logp, kiln_tensor *target,
                                    kiln_reduction reduction);
/* logits [N, C], target [N] int64. */
KILN_API kiln_tensor *kiln_cross_entropy(kiln_tensor *logits, kiln_tensor *target,
                                         kiln_reduction reduction);
KILN_API kiln_tensor *kiln_mse_loss(kiln_tensor *input, kiln_tensor *target,
                                    kiln_reduction reduction);

/* Convolution and pooling, NCHW. bias may be NULL. */
KILN_API kiln_tensor *kiln_conv2d(kiln_tensor *x, kiln_tensor *w, kiln_tensor *b,
                                  const int64_t stride[2], const int64_t padding[2]);
KILN_API kiln_tensor *kiln_max_pool2d(kiln_tensor *x, const int64_t kernel[2],
                                      const int64_t stride[2],
                                      const int64_t padding[2]);
/* Zeroes elements with probability p and scales the rest by 1/(1-p) when
 * train is true (using gen, NULL = default); identity otherwise. */
KILN_API kiln_tensor *kiln_dropout(kiln_tensor *x, double p, bool train,
                                   kiln_generator *gen);

/* ===================================================================== */
/* autograd                                                                */
/* ===================================================================== */

/* Grad mode (thread-local, nestable). no_grad_begin/end pairs disable
 * recording; set returns the previous mode. */
KILN_API bool kiln_is_grad_enabled(void);
KILN_API bool kiln_set_grad_enabled(bool enabled);
KILN_API void kiln_no_grad_begin(void);
KILN_API void kiln_no_grad_end(void);

/* Marks a leaf as requiring grad. KILN_ERR_INVALID for non-floating dtypes
 * or for non-leaves (use kiln_retain_grad for those). */
KILN_API kiln_status kiln_set_requires_grad(kiln_tensor *t, bool requires_grad);
KILN_API bool kiln_requires_grad(const kiln_tensor *t);
/* True for tensors without a grad_fn. */
KILN_API bool kiln_is_leaf(const kiln_tensor *t);
/* The accumulated gradient, or NULL. BORROWED: valid until the grad is
 * replaced or t is freed; retain it to keep it. */
KILN_API kiln_tensor *kiln_tensor_grad(const kiln_tensor *t);
/* Replaces .grad (grad may be NULL: "set to none"). Retains grad. */
KILN_API kiln_status kiln_tensor_set_grad(kiln_tensor *t, kiln_tensor *grad);
/* The name of the op that created t ("aten::mul"), or NULL for leaves. */
KILN_API const char *kiln_grad_fn_name(const kiln_tensor *t);

/* Runs backward from root. grad NULL means ones (root must have one
 * element then). Frees the graph afterwards. */
KILN_API kiln_status kiln_backward(kiln_tensor *root, kiln_tensor *grad);

/* Options of kiln_backward_ex and kiln_grad. Zero-initialise for defaults. */
typedef struct kiln_backward_opts {
  bool retain_graph;   /* keep saved tensors so the graph can run again */
  bool create_graph;   /* record the backward itself (double backward);
                          implies retain_graph */
  kiln_tensor *const *inputs;  /* backward_ex: accumulate only into these
                                  leaves (NULL = all) */
  int n_inputs;
} kiln_backward_opts;

/* Backward from n roots at once. grads[i] may be NULL (ones); grads may be
 * NULL. opts may be NULL. Errors: a root that does not require grad, a
 * graph already freed (without retain_graph), a saved tensor modified in
 * place, a NaN in anomaly mode; the message names the op. */
KILN_API kiln_status kiln_backward_ex(kiln_tensor *const *roots,
                                      kiln_tensor *const *grads, int n,
                                      const kiln_backward_opts *opts);
/* Gradients of outputs with respect to inputs, without touching any .grad.
 * Writes one new reference (registered with the current scope) per input
 * into grads_out; NULL for an input the outputs do not depend on. */
KILN_API kiln_status kiln_grad(kiln_tensor *const *outputs,
                               kiln_tensor *const *grad_outputs, int n_out,
                               kiln_tensor *const *inputs, int n_in,
                               const kiln_backward_opts *opts,
                               kiln_tensor **grads_out);

/* Keep the gradient of a non-leaf tensor in its .grad after backward. */
KILN_API kiln_status kiln_retain_grad(kiln_tensor *t);
/* A tensor hook runs on t's gradient as soon as it is computed. Return
 * NULL to keep the gradient, or a tensor to replace it (the engine retains
 * it; temporaries made in the hook are released by the engine). */
typedef kiln_tensor *(*kiln_grad_hook)(kiln_tensor *grad, void *ud);
KILN_API kiln_status kiln_register_hook(kiln_tensor *t, kiln_grad_hook fn, void *ud);
/* Runs on a leaf after its .grad was updated in a backward. */
typedef void (*kiln_post_accumulate_hook)(kiln_tensor *leaf, void *ud);
KILN_API kiln_status kiln_register_post_accumulate_hook(kiln_tensor *t,
                                                        kiln_post_accumulate_hook fn,
                                                        void *ud);
/* End-of-backward callbacks: code running during a backward (hooks,
 * custom nodes) queues them; they run once, in order, after every node of
 * that backward ran. KILN_ERR_STATE when no backward is running. */
typedef void (*kiln_callback)(void *ud);
KILN_API kiln_status kiln_queue_callback(kiln_callback fn, void *ud);
/* Progress: fn(ud) runs after each node of every backward on this thread
 * (NULL: none), e.g. to test pending communication between nodes. */
KILN_API void kiln_set_backward_progress(kiln_callback fn, void *ud);
/* From code running during a backward: 1 if the leaf's AccumulateGrad runs
 * in it (the loss reaches the leaf), 0 if not; KILN_ERR_STATE when no
 * backward is running. */
KILN_API int kiln_backward_will_accumulate(const kiln_tensor *leaf);

/* Anomaly mode: when on, a backward node producing NaN/Inf fails the
 * backward with a message naming it and the forward op that created it.
 * On lazy tensors, a kiln_mark_step (or sync) whose results hold NaN/Inf
 * fails naming the op and the lazy graph node (as kiln_lazy_tensors_text
 * numbers it) that made the first one, forward or backward; the tensors
 * stay pending. */
KILN_API void kiln_set_anomaly_enabled(bool enabled);
KILN_API bool kiln_is_anomaly_enabled(void);

/* Names a tensor (shown in the DOT dump, e.g. "fc1.weight"). Copies name. */
KILN_API kiln_status kiln_tensor_set_name(kiln_tensor *t, const char *name);
/* Graphviz DOT text of the backward graph from root: one node per backward
 * node (op name), AccumulateGrad nodes labelled with their leaf, edges in
 * execution order. Returns a string to free with kiln_free, or NULL. */
KILN_API char *kiln_autograd_dot(kiln_tensor *root);
KILN_API kiln_status kiln_autograd_dot_write(kiln_tensor *root, const char *path);
/* Frees memory kiln returned as char* (strings, dumps). Only kiln_free
 * may: the blocks come from kiln's allocator, so free() on them is an
 * error. NULL is fine. */
KILN_API void kiln_free(void *p);

/* ===================================================================== */
/* lazy tensors                                                            */
/* ===================================================================== */
/* A LAZY tensor records the ops applied to it instead of running them;
 * kiln_mark_step() compiles everything pending into one graph (once per
 * distinct graph: a hash-keyed LRU cache) and runs it. Reading a value
 * (kiln_item, kiln_to_cpu, kiln_tensor_copy_to) syncs just what it needs.
 *
 *   kiln_tensor *w = kiln_to_lazy(w_cpu);         // device data
 *   kiln_set_requires_grad(w, true);
 *   for (step...) {
 *     kiln_scope_begin();
 *     kiln_tensor *loss = model(kiln_to_lazy(x), w);
 *     kiln_backward(loss, NULL);                  // records the backward
 *     ... optimizer updates with kiln_copy_ under no_grad ...
 *     kiln_mark_step();                           // compile once, run
 *     kiln_scope_end();
 *   }
 */

/* A new LAZY tensor holding t's values as device data. */
KILN_API kiln_tensor *kiln_to_lazy(kiln_tensor *t);
/* The CPU value of t (a new CPU tensor; syncs t's pending graph). For a
 * CPU t, returns a new reference to t. */
KILN_API kiln_tensor *kiln_to_cpu(kiln_tensor *t);
KILN_API bool kiln_tensor_is_lazy(const kiln_tensor *t);
/* Syncs every live lazy tensor of this thread (its lazy device: Note
 * [Threads]) with pending IR as one graph. */
KILN_API kiln_status kiln_mark_step(void);
/* The pending IR of ts in the style of PyTorch's _get_tensors_text:
 * "IR {\n  %0 = [Float[4,4]] lazy_tensors::device_data(), device=CPU0\n ...}".
 * Returns a string to free with kiln_free, or NULL. */
KILN_API char *kiln_lazy_tensors_text(kiln_tensor *const *ts, int n);
/* This thread's counter or timer by name (MarkStep, UncachedCompile, CachedCompile,
 * ExecuteGraph, DeviceDataCacheMiss, CreateLazyTensor, DestroyLazyTensor,
 * SyncTensorsToData, DonatedBuffers (graph inputs whose buffers mark_step
 * let the graph overwrite: Note [Buffer donation]); timers CompileTime,
 * ExecuteTime in ns); -1 if unknown. */
KILN_API int64_t kiln_lazy_counter(const char *name);
/* Zeroes all counters and timers and forgets recompile reasons. */
KILN_API void kiln_lazy_metrics_reset(void);
/* Human-readable report and a JSON object of all metrics (free with
 * kiln_free). */
KILN_API char *kiln_lazy_metrics_report(void);
KILN_API char *kiln_lazy_metrics_json(void);
/* Compile-cache capacity (graphs kept, LRU) of this thread's lazy device
 * (Note [Threads]); default 1024. */
KILN_API void kiln_lazy_set_cache_size(int n);
/* Why the cache missed for graphs of a structure seen before, oldest
 * first: "input 2: shape [128, 784] -> [64, 784]". Borrowed strings, valid
 * until the next reset. */
KILN_API int kiln_lazy_n_recompile_reasons(void);
/* TorchScript-style text of the last graph kiln_mark_step compiled, after
 * the passes (constant folding, peepholes, CSE, DCE, fusion); free with
 * kiln_free; NULL if none. */
KILN_API char *kiln_lazy_last_compiled_graph(void);
KILN_API const char *kiln_lazy_recompile_reason(int i);

/* ===================================================================== */
/* graphs (TorchScript IR) and functions (the graph executor)              */
/* ===================================================================== */
/* A graph is TorchScript's IR: kiln reads the text that
 * print(torch.jit.script(f).graph) prints (after torch._C._jit_pass_inline)
 * and prints its own graphs the same way. A function wraps a graph and its
 * executor; call it like the scripted function. */

typedef struct kiln_graph kiln_graph;

/* Parses graph text (len bytes). NULL on error with "line:col: message". */
KILN_API kiln_graph *kiln_graph_parse(const char *text, size_t len);
/* Reads and parses a file; errors name the file. */
KILN_API kiln_graph *kiln_graph_load(const char *path);
KILN_API void kiln_graph_free(kiln_graph *g);
/* TorchScript text of g (free with kiln_free). */
KILN_API char *kiln_graph_print(const kiln_graph *g);
KILN_API int kiln_graph_n_inputs(const kiln_graph *g);
KILN_API int kiln_graph_n_outputs(const kiln_graph *g);

/* A value passed to or returned from a function. Tensors are references:
 * inputs are borrowed; outputs are new references registered with the
 * current scope. */
typedef enum kiln_value_kind {
  KILN_VALUE_NONE = 0,
  KILN_VALUE_TENSOR,
  KILN_VALUE_INT,
  KILN_VALUE_FLOAT,
  KILN_VALUE_BOOL
} kiln_value_kind;

typedef struct kiln_value {
  kiln_value_kind kind;
  union {
    kiln_tensor *t;
    int64_t i;
    double f;
    bool b;
  };
} kiln_value;

typedef struct kiln_function kiln_function;

/* The profiling executor's knobs (kiln_function_options_default fills
 * them). Calls 1..profiling_runs run the graph with prim::profile nodes
 * recording dtypes, shapes and requires_grad; the next call optimizes once:
 * specializes types, groups differentiable nodes into DifferentiableGraphs
 * guarded by RequiresGradCheck with a fallback function (an executor of its
 * own, bailout_depth one lower; at depth 0 it just interprets),
 * differentiates them, and cleans up. */
typedef struct kiln_function_options {
  int profiling_runs;    /* default 1 */
  int bailout_depth;     /* default 20 */
  int min_subgraph_size; /* default 2: op nodes per DifferentiableGraph */
  bool fusion;           /* default true */
} kiln_function_options;

KILN_API void kiln_function_options_default(kiln_function_options *o);

/* A function over a copy of g (g may be freed afterwards). NULL if the
 * graph cannot run (an unsupported node kind), with the error set. */
KILN_API kiln_function *kiln_function_new(const kiln_graph *g);
/* The same with options (NULL = defaults). */
KILN_API kiln_function *kiln_function_new_ex(const kiln_graph *g, const kiln_function_options *o);

/* Counters of a function summed with those of its fallback functions. */
typedef struct kiln_function_stats {
  int64_t profiling_runs;  /* calls that ran the profiling graph */
  int64_t optimizations;   /* optimized plans built */
  int64_t guard_passes;    /* requires-grad guards that passed */
  int64_t guard_failures;  /* ... that failed (reasons below) */
  int64_t fallback_calls;  /* calls into fallback functions */
  int bailout_depth_reached; /* deepest fallback level used (0 = none) */
} kiln_function_stats;

KILN_API void kiln_function_get_stats(const kiln_function *f, kiln_function_stats *s);
/* Why guards failed, oldest first ("DifferentiableGraph_0: input 1
 * requires grad, assumed not"). Borrowed; valid while f lives. */
KILN_API int kiln_function_n_guard_failure_reasons(const kiln_function *f);
KILN_API const char *kiln_function_guard_failure_reason(const kiln_function *f, int i);
/* The optimized graph of the last call that ran one (TorchScript-style
 * text with each DifferentiableGraph's forward and backward graphs and the
 * fallback graphs), or NULL if no call has been optimized. Free with
 * kiln_free. */
KILN_API char *kiln_function_last_optimized_graph(const kiln_function *f);
/* The stats as JSON: profiling_runs, optimizations, guard_passes,
 * guard_failures, fallback_calls, guard_failure_reasons, optimized_graph.
 * Free with kiln_free. */
KILN_API char *kiln_function_stats_json(const kiln_function *f);
/* How many fused elementwise kernels were built so far (process-wide). A
 * kernel is keyed by its group and input dtypes only: new shapes or batch
 * sizes reuse it. */
KILN_API int64_t kiln_fused_kernels_compiled(void);
/* How many of those were also compiled to native code: the group's chain
 * as one loop, built by the system C compiler once the kernel's runs have
 * covered 4M elements in all (Note [Native kernels]; KILN_NATIVE_FUSION=0
 * turns it off, KILN_CC names the compiler). Values are the same either
 * way; without a compiler the tile kernels run. */
KILN_API int64_t kiln_fused_kernels_native(void);
KILN_API void kiln_function_free(kiln_function *f);
/* Calls f. Writes the outputs (a tuple output is flattened in order) into
 * outputs and returns their count, or a negative status (wrong number of
 * inputs, a kernel error: the message names the node). */
KILN_API int kiln_function_call(kiln_function *f, const kiln_value *inputs, int n_inputs,
                                kiln_value *outputs, int max_outputs);

/* ===================================================================== */
/* dist: data-parallel training over MPI (make MPI=1)                     */
/* ===================================================================== */
/* Every process (rank) of an `mpirun -np N` job holds the whole model and
 * runs its shard of each batch; a reducer sums the gradients of all ranks
 * during the backward (PyTorch DDP's design: buckets, ready hooks,
 * overlap) and divides them by N, so every rank takes the same step.
 *
 *     kiln_dist_init();                              // once, before threads
 *     kiln_dist_broadcast(params, n, 0);             // rank 0's values
 *     kiln_dist_reducer *r = kiln_dist_reducer_new(params, names, n, NULL);
 *     ... forward on this rank's shard; kiln_backward(loss, NULL);
 *     kiln_dist_reducer_finish(r);                   // grads are the mean
 *     ... optimizer step
 *
 * Without `make MPI=1` these functions exist; those that communicate fail
 * with KILN_ERR_UNSUPPORTED, "built without MPI". Every wait is bounded by
 * the timeout (default 300 s): a rank that dies or stops makes the others
 * fail with a message naming what they waited for, never hang. */

/* True when kiln was built with MPI. */
KILN_API bool kiln_dist_built(void);
/* Initialises MPI (MPI_THREAD_FUNNELED; idempotent) with errors returned,
 * not fatal. KILN_ERR_UNSUPPORTED without MPI. With the environment's
 * KILN_DIST_PROGRESS_THREAD=1: MPI_THREAD_SERIALIZED and a thread that
 * progresses pending all-reduces (Note [Progress thread] in comm.c). */
KILN_API kiln_status kiln_dist_init(void);
/* Finalises MPI if kiln_dist_init initialised it. */
KILN_API kiln_status kiln_dist_finalize(void);
KILN_API bool kiln_dist_is_initialized(void);
/* This process's rank and the number of ranks: 0 and 1 before init. */
KILN_API int kiln_dist_rank(void);
KILN_API int kiln_dist_world_size(void);
/* Bound of every wait, in seconds (> 0; default 300). */
KILN_API void kiln_dist_set_timeout(double seconds);
KILN_API double kiln_dist_timeout(void);

typedef enum kiln_dist_op { KILN_DIST_SUM = 0, KILN_DIST_MAX = 1, KILN_DIST_MIN = 2 } kiln_dist_op;
/* Overwrites each CPU tensor (contiguous) with root's values; shapes and
 * dtypes must agree on all ranks (checked: a mismatch is an error naming
 * the tensor's index, on every rank). */
KILN_API kiln_status kiln_dist_broadcast(kiln_tensor *const *ts, int n, int root);
/* All-reduces n doubles in place with op (blocking). */
KILN_API kiln_status kiln_dist_all_reduce_f64(double *v, int n, kiln_dist_op op);
/* Blocks until every rank calls it (bounded by the timeout). */
KILN_API kiln_status kiln_dist_barrier(void);

/* The all-reduce as an op (aten::kiln_all_reduce): every rank's t summed
 * and divided by world_size (a copy when it is 1). On lazy tensors it is
 * recorded into the graph like any op (world_size and group enter the
 * graph's hash); its kernel needs kiln_dist_init when world_size > 1. */
KILN_API kiln_tensor *kiln_all_reduce(kiln_tensor *t, int world_size, int group);

/* The gradient reducer (Note [Buckets] in src/dist/reducer.c); on lazy
 * parameters it records one all-reduce node per bucket into the step's
 * graph at kiln_dist_reducer_finish (Note [Lazy reduction]). */
typedef struct kiln_dist_reducer kiln_dist_reducer;
typedef struct kiln_dist_reducer_opts {
  double bucket_mb;        /* bucket cap in MiB (0: 25); the first is 1 MiB or less */
  bool no_rebuild;         /* keep the registration-order layout */
} kiln_dist_reducer_opts;
/* A reducer over n CPU parameters (leaves that require grad; names for
 * messages, both arrays copied). Registers a post-accumulate hook on
 * each. Fails without MPI, before kiln_dist_init, or when ranks disagree on
 * the parameters' count, shapes or dtypes. */
KILN_API kiln_dist_reducer *kiln_dist_reducer_new(kiln_tensor *const *params,
                                                  const char *const *names, int n,
                                                  const kiln_dist_reducer_opts *opts);
/* Waits for nothing; frees r. The parameters' hooks stay registered but do
 * nothing once r is gone: free r only after the last backward with it. */
KILN_API void kiln_dist_reducer_free(kiln_dist_reducer *r);
/* sync false: backwards accumulate locally without communicating (DDP's
 * no_sync), until a backward with sync true reduces the accumulated sum. */
KILN_API void kiln_dist_reducer_set_sync(kiln_dist_reducer *r, bool sync);
/* After a backward: ends its reduction (waiting for every bucket, when the
 * backward's end callback has not) and returns its outcome: an error names
 * the bucket and the wait, or the parameter that some ranks used and
 * others did not. On success every parameter's .grad is the world's mean
 * and a view into its bucket. KILN_OK after a backward without sync. */
KILN_API kiln_status kiln_dist_reducer_finish(kiln_dist_reducer *r);
/* Up to KILN_DIST_MAX_VALUES doubles (e.g. the step's loss) summed over the
 * ranks with the next synced reduction of an eager or jit reducer, in the
 * small all-reduce that also checks which parameters each rank used, so
 * that they cost no collective of their own (Note [Side all-reduce] in
 * reducer.c). Call before the backward; after kiln_dist_reducer_finish,
 * kiln_dist_reducer_values copies the sums of the last reduction (values
 * not set count as 0) and returns n. Errors: n out of range, a backward in
 * progress, a lazy reducer, or no reduction yet. */
enum { KILN_DIST_MAX_VALUES = 4 };
KILN_API kiln_status kiln_dist_reducer_set_values(kiln_dist_reducer *r, const double *v, int n);
KILN_API int kiln_dist_reducer_values(const kiln_dist_reducer *r, double *out, int n);
typedef struct kiln_dist_stats {
  int n_buckets;
  int64_t n_reductions;     /* synced backwards */
  double comm_seconds;      /* sum over backwards: first launch to last completion */
  double wait_seconds;      /* time blocked at the end of backward */
  double overlap;           /* 1 - wait / comm (0 when no communication yet) */
  bool rebuilt;             /* buckets rebuilt from the first step's order */
  /* eager and jit, summed over backwards (wall clock): the hooks' copies
   * into the buckets, the progress tests, the division by the world size
   * and, within wait_seconds, the wait for the side all-reduce (the used
   * parameters and the values) */
  double hook_seconds, test_seconds, divide_seconds, flags_seconds;
  double wait_cpu_seconds;  /* process CPU time of the waits (they spin) */
  int64_t n_tests;
} kiln_dist_stats;
KILN_API void kiln_dist_reducer_stats(const kiln_dist_reducer *r, kiln_dist_stats *s);
/* Bucket b's parameter indices in order: count, and up to cap into idx. */
KILN_API int kiln_dist_reducer_bucket(const kiln_dist_reducer *r, int b, int *idx, int cap);

/* ===================================================================== */
/* nn: modules, layers, initialisation                                    */
/* ===================================================================== */
/* A module owns named parameters (leaf tensors that require grad) and the
 * layers built on them; it lists, saves and loads them by name. Layers are
 * handles owned by their module; their forward is ordinary ops, so it runs
 * eagerly, records lazily, or is differentiated like any other code.
 *
 *   kiln_generator *gen = kiln_generator_new(0);
 *   kiln_nn_module *m = kiln_nn_module_new();
 *   kiln_nn_layer *fc = kiln_nn_linear_new(m, "fc", 784, 10, true, gen);
 *   kiln_tensor *logits = kiln_nn_forward(fc, x);   // x [B, 784]
 *   ...
 *   kiln_nn_module_free(m);                          // frees fc too
 *
 * Parameter names follow PyTorch's state_dict ("fc.weight", "fc.bias",
 * "lstm.weight_ih_l0"), and so do the default initialisations. */

typedef struct kiln_nn_module kiln_nn_module;
typedef struct kiln_nn_layer kiln_nn_layer;

/* An empty module (no parameters, no forward). NULL on OOM. */
KILN_API kiln_nn_module *kiln_nn_module_new(void);
/* Frees m, its layers and its references to its parameters. NULL is a no-op. */
KILN_API void kiln_nn_module_free(kiln_nn_module *m);
/* Adds parameter t under name (copied; must be new to m): retains t and
 * marks it as requiring grad. KILN_ERR_INVALID for a duplicate or empty
 * name or a non-floating t. */
KILN_API kiln_status kiln_nn_module_add_param(kiln_nn_module *m, const char *name,
                                              kiln_tensor *t);
/* Parameters in the order they were added. Names and tensors are BORROWED
 * (valid while m lives; a tensor until kiln_nn_module_to_lazy). NULL for
 * an index out of range or an unknown name. */
KILN_API int kiln_nn_module_n_params(const kiln_nn_module *m);
KILN_API const char *kiln_nn_module_param_name(const kiln_nn_module *m, int i);
KILN_API kiln_tensor *kiln_nn_module_param(const kiln_nn_module *m, int i);
KILN_API kiln_tensor *kiln_nn_module_find_param(const kiln_nn_module *m, const char *name);
/* Total number of parameter elements. */
KILN_API int64_t kiln_nn_module_numel(const kiln_nn_module *m);
/* Replaces every parameter by a LAZY copy (device data, requires grad, the
 * same name; layers follow) and every buffer (an imported model's) by a lazy
 * copy. Grads are dropped. No-op when already lazy. */
KILN_API kiln_status kiln_nn_module_to_lazy(kiln_nn_module *m);
/* Training mode (default true): dropout is active only in training. */
KILN_API void kiln_nn_module_set_training(kiln_nn_module *m, bool training);
KILN_API bool kiln_nn_module_is_training(const kiln_nn_module *m);

/* Layers. Each adds its parameters to m under "<name>.<param>" and returns
 * a handle owned by m, or NULL (bad sizes, duplicate name, OOM). gen draws
 * the initial values (NULL = the default generator). */
/* y = x W^T + b; weight [out, in] and bias [out] ~ U(-1/sqrt(in), 1/sqrt(in))
 * (PyTorch's nn.Linear: Kaiming uniform with a = sqrt(5)). */
KILN_API kiln_nn_layer *kiln_nn_linear_new(kiln_nn_module *m, const char *name, int64_t in,
                                           int64_t out, bool bias, kiln_generator *gen);
/* NCHW convolution; weight [out_ch, in_ch, k, k], bias [out_ch], both
 * U(-1/sqrt(in_ch*k*k), +...). */
KILN_API kiln_nn_layer *kiln_nn_conv2d_new(kiln_nn_module *m, const char *name, int64_t in_ch,
                                           int64_t out_ch, int64_t kernel, int64_t stride,
                                           int64_t padding, kiln_generator *gen);
/* Lookup table weight [n, dim] ~ N(0, 1); the input holds int64 indices. */
KILN_API kiln_nn_layer *kiln_nn_embedding_new(kiln_nn_module *m, const char *name, int64_t n,
                                              int64_t dim, kiln_generator *gen);
/* Normalises over the last dim (size dim): weight 1, bias 0. */
KILN_API kiln_nn_layer *kiln_nn_layer_norm_new(kiln_nn_module *m, const char *name,
                                               int64_t dim, double eps);
/* Dropout with probability p (no parameters); uses gen while m is training. */
KILN_API kiln_nn_layer *kiln_nn_dropout_new(kiln_nn_module *m, const char *name, double p,
                                            kiln_generator *gen);
/* One-layer LSTM, batch first: weight_ih_l0 [4H, I], weight_hh_l0 [4H, H],
 * bias_ih_l0 and bias_hh_l0 [4H], all U(-1/sqrt(H), 1/sqrt(H)); gates in
 * PyTorch's order (input, forget, cell, output). */
KILN_API kiln_nn_layer *kiln_nn_lstm_new(kiln_nn_module *m, const char *name, int64_t input,
                                         int64_t hidden, kiln_generator *gen);
/* Runs a layer on x: a new reference, or NULL with the error set. For an
 * LSTM, x is [B, T, I] and the result is the last hidden state [B, H]. */
KILN_API kiln_tensor *kiln_nn_forward(kiln_nn_layer *l, kiln_tensor *x);
/* LSTM over time: x [B, T, I]; h0, c0 [B, H] or NULL for zeros. Returns the
 * hidden states [B, T, H] and, when h_out / c_out are not NULL, the final
 * states there (new references). */
KILN_API kiln_tensor *kiln_nn_lstm_forward(kiln_nn_layer *l, kiln_tensor *x, kiln_tensor *h0,
                                           kiln_tensor *c0, kiln_tensor **h_out,
                                           kiln_tensor **c_out);

/* The same as functions of explicit tensors. One LSTM step: gates =
 * x W_ih^T + b_ih + h W_hh^T + b_hh (either bias may be NULL);
 * c' = sigmoid(f) c + sigmoid(i) tanh(g); h' = sigmoid(o) tanh(c'). Writes
 * new references into *h_new and *c_new. */
KILN_API kiln_status kiln_nn_lstm_cell(kiln_tensor *x, kiln_tensor *h, kiln_tensor *c,
                                       kiln_tensor *w_ih, kiln_tensor *w_hh, kiln_tensor *b_ih,
                                       kiln_tensor *b_hh, kiln_tensor **h_new,
                                       kiln_tensor **c_new);
/* (x - mean) / sqrt(var + eps) * weight + bias over the last n_dims dims
 * (biased variance, as torch.nn.functional.layer_norm); weight and bias
 * may be NULL. Composed from reductions and elementwise ops. */
KILN_API kiln_tensor *kiln_nn_layer_norm(kiln_tensor *x, int n_dims, kiln_tensor *weight,
                                         kiln_tensor *bias, double eps);

/* In-place initialisation of a CPU floating tensor (under no_grad). fan_in
 * is size(1) * the product of dims 2.. (the receptive field), fan_out is
 * size(0) * the same. kaiming: bound = sqrt(6 / ((1 + a^2) fan_in));
 * xavier: bound = gain * sqrt(6 / (fan_in + fan_out)). KILN_ERR_INVALID for
 * fewer than 2 dims (kaiming, xavier) or a non-floating or lazy tensor. */
KILN_API kiln_status kiln_nn_init_uniform_(kiln_tensor *t, double lo, double hi,
                                           kiln_generator *gen);
KILN_API kiln_status kiln_nn_init_kaiming_uniform_(kiln_tensor *t, double a,
                                                   kiln_generator *gen);
KILN_API kiln_status kiln_nn_init_xavier_uniform_(kiln_tensor *t, double gain,
                                                  kiln_generator *gen);

/* Models for 28x28 images in 10 classes (Fashion-MNIST):
 *   "mlp"  784-256-256-10 with ReLU (fc1, fc2, fc3);
 *   "cnn"  conv1 1->16 5x5, ReLU, max-pool 2; conv2 16->32 5x5, ReLU,
 *          max-pool 2; fc1 512->128, ReLU; fc2 128->10;
 *   "lstm" an LSTM (lstm, hidden 128) reading the 28 rows of 28 pixels,
 *          then fc 128->10 on the last hidden state.
 * A new module with a forward, initialised from gen; NULL with the error
 * set for an unknown arch. */
KILN_API kiln_nn_module *kiln_nn_model_new(const char *arch, kiln_generator *gen);
/* The module's arch ("mlp", ...) or NULL for a module built by hand. */
KILN_API const char *kiln_nn_module_arch(const kiln_nn_module *m);
/* The model's logits [B, 10] for images x [B, 1, 28, 28] (float32). NULL
 * with the error set for a module without a forward. */
KILN_API kiln_tensor *kiln_nn_module_forward(kiln_nn_module *m, kiln_tensor *x);
/* The forward as TorchScript IR text (the format torch.jit.script prints),
 * for kiln_graph_parse. Inputs: the model input (mlp: x [B, 784]; cnn: x
 * [B, 1, 28, 28]; lstm: x [B, 28, 28], h0 and c0 [B, 128]), then the
 * parameters in module order; one output, the logits. Static string, or
 * NULL for an unknown arch. */
KILN_API const char *kiln_nn_model_ir(const char *arch);

/* ===================================================================== */
/* nn: optimizers and learning-rate schedules                             */
/* ===================================================================== */
/* An optimizer updates a module's parameters from their .grad with
 * ordinary tensor ops and kiln_copy_ under no_grad, so on lazy parameters
 * the whole step is recorded into the step's graph. Hyper-parameters that
 * change (lr, Adam's bias corrections) enter as Scalars: on lazy tensors
 * they are device data, so changing them never recompiles. State buffers
 * start as zeros, so every step builds the same graph. */

typedef struct kiln_optim kiln_optim;

typedef enum kiln_optim_kind {
  KILN_OPTIM_SGD = 0,
  KILN_OPTIM_ADAM = 1,
  KILN_OPTIM_ADAMW = 2
} kiln_optim_kind;

/* Zero-initialise, set kind and lr; zeros mean PyTorch's defaults. */
typedef struct kiln_optim_opts {
  kiln_optim_kind kind;
  double lr;
  double momentum;       /* SGD: 0 = plain SGD (no buffer) */
  bool nesterov;         /* SGD: needs momentum > 0 */
  double weight_decay;   /* SGD, Adam: added to the gradient; AdamW: decoupled */
  double beta1, beta2;   /* Adam(W): 0 = 0.9 and 0.999 */
  double eps;            /* Adam(W): 0 = 1e-8 */
} kiln_optim_opts;

/* An optimizer over every parameter of m (m must outlive it; parameters
 * are read from m at each step, so kiln_nn_module_to_lazy is followed).
 * State buffers (momentum_buffer, exp_avg, exp_avg_sq) are zeros on the
 * parameters' device. NULL with the error set for bad options. */
KILN_API kiln_optim *kiln_optim_new(kiln_nn_module *m, const kiln_optim_opts *opts);
KILN_API void kiln_optim_free(kiln_optim *o);
/* One update of every parameter that has a .grad (others are skipped, as
 * PyTorch does); counts a step. Fails if a parameter's grad has the wrong
 * shape. All or nothing: when it fails (out of memory included), every
 * parameter, buffer and the step count are as before. */
KILN_API kiln_status kiln_optim_step(kiln_optim *o);
/* Sets every parameter's .grad to none (PyTorch 2's default). */
KILN_API kiln_status kiln_optim_zero_grad(kiln_optim *o);
KILN_API void kiln_optim_set_lr(kiln_optim *o, double lr);
KILN_API double kiln_optim_lr(const kiln_optim *o);
/* Steps taken (Adam's t); settable for resuming. */
KILN_API int64_t kiln_optim_steps(const kiln_optim *o);
KILN_API void kiln_optim_set_steps(kiln_optim *o, int64_t steps);
/* "sgd", "adam" or "adamw". */
KILN_API const char *kiln_optim_name(const kiln_optim *o);
/* State tensors, named "<param>.<buffer>" ("fc1.weight.exp_avg"). BORROWED,
 * valid until the next kiln_optim_to_lazy or kiln_optim_free. */
KILN_API int kiln_optim_n_state(const kiln_optim *o);
KILN_API const char *kiln_optim_state_name(const kiln_optim *o, int i);
KILN_API kiln_tensor *kiln_optim_state(const kiln_optim *o, int i);
/* Moves the state buffers to the LAZY device (after kiln_nn_module_to_lazy). */
KILN_API kiln_status kiln_optim_to_lazy(kiln_optim *o);

/* Schedules: the learning rate for epoch (or step) t. step: base *
 * gamma^floor(t / step_size) (StepLR); cosine: eta_min + (base - eta_min)
 * (1 + cos(pi t / t_max)) / 2 (CosineAnnealingLR, t clamped to t_max). */
KILN_API double kiln_optim_lr_step(double base, int64_t t, int64_t step_size, double gamma);
KILN_API double kiln_optim_lr_cosine(double base, double eta_min, int64_t t, int64_t t_max);

/* ===================================================================== */
/* nn: data (IDX files, MNIST-format data sets, batches)                  */
/* ===================================================================== */

/* Reads an IDX file (LeCun's format: big-endian magic 00 00 TT DD, DD
 * big-endian u32 sizes, C-order data), gzipped or not, as a tensor of
 * dtype dt (values converted). Checks the magic, type code, dims, and that
 * the data is exactly as long as the sizes say. NULL with a message naming
 * the file and what is wrong (KILN_ERR_IO, _FORMAT). */
KILN_API kiln_tensor *kiln_data_idx_load(const char *path, kiln_dtype dt);
/* The most bytes of data one IDX file may hold once decompressed (default
 * 1 GiB; Fashion-MNIST's largest is 47 MB): a small gzip can claim and
 * expand to far more. Returns the previous limit; 0 leaves it unchanged. */
KILN_API size_t kiln_data_set_max_bytes(size_t max_bytes);

/* An image classification data set held as bytes: N images of H x W
 * pixels (uint8) and N labels in [0, 10). */
typedef struct kiln_data kiln_data;

/* Loads "<dir>/train-images-idx3-ubyte.gz" and "train-labels-idx1-ubyte.gz"
 * (train) or the "t10k-" pair (test), each also without ".gz". Checks that
 * images are u8 with 3 dims, labels u8 with 1 dim, the counts match and
 * every label is <= 9. NULL with a message naming the file. Normalisation
 * defaults to Fashion-MNIST's mean 0.2860 and std 0.3530. */
KILN_API kiln_data *kiln_data_mnist_load(const char *dir, bool train);
/* The directory of Debian's dataset-fashion-mnist package. */
KILN_API const char *kiln_data_default_dir(void);
KILN_API void kiln_data_free(kiln_data *d);
KILN_API int64_t kiln_data_size(const kiln_data *d);
/* Pixels become (p / 255 - mean) / std. */
KILN_API kiln_status kiln_data_set_normalization(kiln_data *d, double mean, double std);
/* Keeps only the first n samples (n <= size). */
KILN_API kiln_status kiln_data_truncate(kiln_data *d, int64_t n);
/* Samples idx[0..n) as x [n, 1, H, W] float32 (normalised) and y [n]
 * int64: new references. */
KILN_API kiln_status kiln_data_get(const kiln_data *d, const int64_t *idx, int64_t n,
                                   kiln_tensor **x, kiln_tensor **y);

/* Batches over a data set (which must outlive the loader), in order or in
 * a seeded shuffled order; the last batch holds the remainder unless
 * drop_last. */
typedef struct kiln_data_loader kiln_data_loader;
KILN_API kiln_data_loader *kiln_data_loader_new(const kiln_data *d, int64_t batch,
                                                bool drop_last);
KILN_API void kiln_data_loader_free(kiln_data_loader *l);
KILN_API int64_t kiln_data_loader_n_batches(const kiln_data_loader *l);
/* Draws a new order (Fisher-Yates with gen), as a new epoch does;
 * without calling it the order is 0..N-1. */
KILN_API void kiln_data_loader_shuffle(kiln_data_loader *l, kiln_generator *gen);
/* Batch i of the current order as kiln_data_get returns it. */
KILN_API kiln_status kiln_data_loader_batch(const kiln_data_loader *l, int64_t i,
                                            kiln_tensor **x, kiln_tensor **y);

/* ===================================================================== */
/* nn: safetensors files and checkpoints                                  */
/* ===================================================================== */
/* safetensors (huggingface's format): a little-endian u64 N, N bytes of
 * JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]},
 * ..., "__metadata__": {"key": "value"}}, then the data, row-major
 * little-endian. Dtypes BOOL, U8, I8, I16, I32, I64, F16, BF16, F32, F64
 * are read and written; kiln_safetensors_load reads F16 and BF16 as F32,
 * I32 as I64 (exactly: what model import wants), the _stored loaders
 * every dtype as the file has it.
 *
 * The loader follows the reference implementation's rules, each with its
 * own message naming the file (and the tensor): file shorter than 8 bytes,
 * header over 100 MB or past the end of the file, header not UTF-8 or not
 * a JSON object, a duplicate key, an entry that is not {dtype, shape,
 * data_offsets}, an unknown dtype, negative or non-integer sizes or
 * offsets, a shape whose byte size overflows, offsets that do not match
 * the shape's size, gaps or overlaps between tensors (sorted by offset, the
 * first must start at 0), and a data section longer than the tensors. */

typedef struct kiln_safetensors kiln_safetensors;

/* Reads and validates a whole file. NULL with the error set
 * (KILN_ERR_IO, _FORMAT, _UNSUPPORTED). */
KILN_API kiln_safetensors *kiln_safetensors_load(const char *path);
/* The same from n bytes in memory; name is used in messages. */
KILN_API kiln_safetensors *kiln_safetensors_load_buffer(const void *buf, size_t n,
                                                        const char *name);
/* The same two keeping every tensor's dtype as stored (F16 as Half, ...). */
KILN_API kiln_safetensors *kiln_safetensors_load_stored(const char *path);
KILN_API kiln_safetensors *kiln_safetensors_load_buffer_stored(const void *buf, size_t n,
                                                               const char *name);
KILN_API void kiln_safetensors_free(kiln_safetensors *st);
/* Tensors in file order (by offset). Names and tensors BORROWED (valid
 * until kiln_safetensors_free); find returns NULL for an unknown name. */
KILN_API int kiln_safetensors_n_tensors(const kiln_safetensors *st);
KILN_API const char *kiln_safetensors_name(const kiln_safetensors *st, int i);
KILN_API kiln_tensor *kiln_safetensors_tensor(const kiln_safetensors *st, int i);
KILN_API kiln_tensor *kiln_safetensors_find(const kiln_safetensors *st, const char *name);
/* A __metadata__ value (borrowed), or NULL. */
KILN_API const char *kiln_safetensors_metadata(const kiln_safetensors *st, const char *key);
/* Writes n named tensors (CPU or lazy; lazy ones are synced) and n_meta
 * metadata pairs. Crash-safe: writes "<path>.tmp.<pid>.<k>" beside path,
 * checks every write, fsyncs, renames it over path and fsyncs the
 * directory; on any failure the temp file is removed and path keeps its
 * old content. */
KILN_API kiln_status kiln_safetensors_save(const char *path, int n, const char *const *names,
                                           kiln_tensor *const *ts, int n_meta,
                                           const char *const *keys,
                                           const char *const *values);

/* A checkpoint is a safetensors file of a module's parameters and buffers, named as
 * PyTorch's equivalent module names them (the mlp as nn.Sequential:
 * "0.weight", ...; README "Checkpoints and PyTorch" lists each model), the
 * optimizer's state ("optim.<param>.<buffer>", ignored by PyTorch's
 * load_state_dict(strict=False)) and metadata:
 * format "kiln-checkpoint-1", model, optimizer, lr, step, epoch, batch,
 * rng (the data generator's state when the current epoch started), and
 * crc32: zlib's CRC-32 (8 hex digits) of the data section (every tensor's
 * bytes, in file order) followed by every OTHER metadata pair, sorted by
 * key, as "key\0value\0" (Note [Checkpoint CRC] in src/nn/checkpoint.c).
 * It does not cover the JSON header's tensor entries (names, dtypes,
 * shapes, offsets): those are checked by the safetensors rules and against
 * the model. The loader verifies it. A missing or unreadable file is
 * KILN_ERR_IO; anything wrong inside it KILN_ERR_FORMAT. */
typedef struct kiln_checkpoint_info {
  char model[16];        /* the module's arch */
  char optimizer[16];    /* "sgd", "adam", "adamw" or "" */
  double lr;
  int64_t step;          /* optimizer steps taken */
  int64_t epoch;         /* epochs completed */
  int64_t batch;         /* batches done in the current epoch */
  uint64_t rng[4];       /* generator state at the start of that epoch */
  bool plain;            /* a plain state_dict (PyTorch's): no kiln metadata, no
                            CRC; model guessed from its tensors, the rest 0 */
} kiln_checkpoint_info;

/* Saves m, o (may be NULL) and info crash-safely (as kiln_safetensors_save). */
KILN_API kiln_status kiln_checkpoint_save(const char *path, const kiln_nn_module *m,
                                          const kiln_optim *o,
                                          const kiln_checkpoint_info *info);
/* Reads only the metadata (validating the whole file and its CRC). */
KILN_API kiln_status kiln_checkpoint_read_info(const char *path, kiln_checkpoint_info *info);
/* Loads a checkpoint into m and o (may be NULL) and fills info (may be
 * NULL). A plain safetensors state_dict written by PyTorch (no kiln
 * metadata: info->plain) loads too: every parameter by its PyTorch name
 * (or kiln's), dtypes and shapes checked, no CRC; o's state, step and lr
 * stay as they are. Everything is checked before anything is written: the file as
 * kiln_safetensors_load does, the CRC, the model name, that every
 * parameter (and optimizer buffer, when o is given) is present with its
 * dtype and shape, and that nothing else is; on failure m and o are
 * untouched and the message says what differs. Parameters may be CPU or
 * lazy. On success o's step count and learning rate are the checkpoint's. */
KILN_API kiln_status kiln_checkpoint_load(const char *path, kiln_nn_module *m, kiln_optim *o,
                                          kiln_checkpoint_info *info);

/* ===================================================================== */
/* nn: training (what `kiln train` and `kiln eval` run)                   */
/* ===================================================================== */

typedef enum kiln_nn_mode {
  KILN_NN_EAGER = 0,  /* ops run as called */
  KILN_NN_JIT = 1,    /* the forward is a kiln_function of kiln_nn_model_ir */
  KILN_NN_LAZY = 2    /* everything recorded; kiln_mark_step per step */
} kiln_nn_mode;

/* Fill with kiln_nn_train_opts_default, then change what you need. New
 * fields go at the end (README "Versions and ABI"); python/kiln/_lib.py
 * mirrors this struct, and kiln_checkpoint_info in python/kiln/nn.py. */
typedef struct kiln_nn_train_opts {
  const char *model;        /* "mlp" (default), "cnn", "lstm" */
  kiln_nn_mode mode;        /* default eager */
  int epochs;               /* total epochs (a resumed run continues to it); 2 */
  int64_t batch;            /* 64 */
  double lr;                /* 0: sgd 0.05, adam 1e-3 (resumed: the checkpoint's) */
  const char *optimizer;    /* "sgd" (default; momentum 0.9), "adam", "adamw" */
  double momentum;          /* SGD momentum; 0.9 */
  const char *schedule;     /* "cosine" (default: per step to 0 at the end of
                               the last epoch), "step" (x0.7 each epoch), "none" */
  uint64_t seed;            /* 0 */
  const char *data_dir;     /* NULL: kiln_data_default_dir() */
  const char *save_path;    /* checkpoint written at the end (NULL: none) */
  const char *resume_path;  /* checkpoint to continue from (NULL: none) */
  const char *plot_path;    /* SVG of loss per step and accuracy per epoch */
  const char *metrics_path; /* JSON of loss and counters per step */
  int64_t max_steps;        /* stop after this many steps in total (0: no limit) */
  bool sync_phases;         /* lazy: mark_step after forward, backward, step */
  int64_t train_limit;      /* use only the first N training samples (0: all) */
  int64_t test_limit;       /* the same for the test set */
  int64_t eval_batch;       /* 1000 */
  FILE *out;                /* per-epoch lines and the summary (NULL: silent) */
  bool progress;            /* draw a progress bar on stderr (a terminal) */
  /* data parallel (`mpirun -np N kiln train --dist`, make MPI=1): each rank
   * runs batch/N rows of every batch; rank 0 alone prints, evaluates,
   * saves and plots */
  bool dist;
  double bucket_mb;         /* gradient bucket cap in MiB (0: 25) */
  double dist_timeout;      /* seconds any wait may take (0: 300) */
  int64_t no_sync_steps;    /* accumulate K batches per optimizer step, reducing
                               only on the K-th (0 or 1: every batch) */
  /* Called after every training step with the global step number (from
   * 1), the epoch (from 1) and the step's loss; a non-zero return stops
   * training after this step (the checkpoint, when asked, is still
   * written). NULL: none. */
  int (*on_step)(int64_t step, int epoch, double loss, void *ud);
  void *on_step_ud;
  const char *graph_path;   /* train an imported model (kiln_model_load) instead of
                               `model`: its graph and weights; the images are shaped
                               as its example input (1 or 3 channels, or flat) */
  const char *weights_path;
  bool no_nan_check;        /* keep going after a non-finite loss (default: stop, an error) */
} kiln_nn_train_opts;

KILN_API void kiln_nn_train_opts_default(kiln_nn_train_opts *o);
/* sizeof(kiln_nn_train_opts) in this library: a binding that mirrors the
 * struct (python/kiln) checks it, so a field added here cannot make
 * kiln_nn_train_opts_default write past a shorter copy. */
KILN_API size_t kiln_nn_train_opts_size(void);
/* "eager", "jit", "lazy" -> mode; -1 if unknown. */
KILN_API int kiln_nn_mode_parse(const char *name);
KILN_API const char *kiln_nn_mode_name(kiln_nn_mode mode);

/* What a run did. Arrays are owned by the result: kiln_nn_train_result_free. */
typedef struct kiln_nn_train_result {
  int64_t n_steps;          /* steps run by this call */
  int64_t first_step;       /* global number of the first one (1 unless resumed) */
  double *losses;           /* [n_steps] training loss of each step */
  int n_epochs;             /* epochs evaluated by this call */
  double *test_loss;        /* [n_epochs] */
  double *test_accuracy;    /* [n_epochs] */
  double final_accuracy;    /* on the test set after the last step */
  double final_loss;
  double train_seconds;     /* time in training steps (excluding evaluation) */
  double total_seconds;
  double samples_per_sec;   /* training samples / train_seconds */
} kiln_nn_train_result;

/* Trains as the options say, printing to opts->out, and fills r (may be
 * NULL). Errors (bad options, data files, checkpoints, a failing op)
 * return a negative status with the message set; partial results are
 * still in r. */
KILN_API kiln_status kiln_nn_train(const kiln_nn_train_opts *opts, kiln_nn_train_result *r);
KILN_API void kiln_nn_train_result_free(kiln_nn_train_result *r);
/* Evaluates the checkpoint at path on the test set of data_dir (NULL:
 * default), with the model its metadata names; writes test loss and
 * accuracy. */
KILN_API kiln_status kiln_nn_eval_checkpoint(const char *path, const char *data_dir,
                                             int64_t test_limit, double *loss,
                                             double *accuracy);

/* ===================================================================== */
/* nn: imported PyTorch modules (tools/kiln-export)                       */
/* ===================================================================== */
/* A model is an nn.Module exported by tools/kiln-export: NAME.ir, the
 * graph torch.jit.script(m).graph prints after inlining (`%self :
 * __torch__.X` and prim::GetAttr chains on it, then a manifest of the
 * state_dict in `# kiln:` comment lines), and NAME.safetensors, the
 * state_dict under PyTorch's names with the non-tensor attributes the
 * graph reads in its metadata ("attr:bn1.training" -> "true"). Loading
 * binds each GetAttr chain: a chain ending in a tensor reads the entry of
 * its dotted path ("layer1.0.conv1.weight"), one ending in a number, bool,
 * string, list or None the metadata value; prim::SetAttr on a tensor and
 * in-place ops on buffers (BatchNorm's running statistics) write into the
 * model's tensors. F16 and BF16 weights load as float32.
 *
 *   kiln_model *m = kiln_model_load("r18.ir", "r18.safetensors", NULL);
 *   if (!m) { fprintf(stderr, "%s\n", kiln_last_error()); return 1; }
 *   kiln_model_set_training(m, false);                 // eval()
 *   kiln_value in = {.kind = KILN_VALUE_TENSOR, .t = x}, out[1];
 *   kiln_scope_begin();
 *   if (kiln_model_call(m, &in, 1, out, 1) == 1) ... out[0].t: the logits ...
 *   kiln_scope_end();
 *   for (int i = 0; i < kiln_model_n_tensors(m); i++)  // "conv1.weight", ...
 *     printf("%s\n", kiln_model_tensor_name(m, i));
 *   kiln_model_save(m, "r18-tuned.safetensors");        // load_state_dict-able
 *   kiln_model_free(m);
 *
 * Training: kiln_model_module(m) holds the parameters (requires grad) as a
 * kiln_nn_module; give it to kiln_optim_new, call the model, take a loss,
 * kiln_backward, kiln_optim_step (what `kiln train --graph` does). */
typedef struct kiln_model kiln_model;

typedef struct kiln_model_opts {
  kiln_nn_mode mode;   /* eager: the graph's nodes run one by one on eager
                          tensors (autograd records them); jit (default): the
                          profiling executor; lazy: the nodes run on lazy
                          tensors (the tensors are moved to the LAZY device;
                          call kiln_mark_step) */
  int training;        /* -1 (default): as exported; 0 eval, 1 training */
  const kiln_function_options *jit; /* jit options (NULL: defaults) */
} kiln_model_opts;

/* jit mode, training as exported, default jit options. */
KILN_API void kiln_model_opts_default(kiln_model_opts *o);
/* Loads graph_path and weights_path (o NULL: defaults). Checks the weights
 * against the graph's manifest and binds the graph; NULL with a one-line
 * error naming the file and the entry otherwise: an entry missing, of
 * another shape or dtype (both named), weights of another class, a
 * truncated or malformed file, a GetAttr of a kind kiln does not bind. */
KILN_API kiln_model *kiln_model_load(const char *graph_path, const char *weights_path,
                                     const kiln_model_opts *o);
KILN_API void kiln_model_free(kiln_model *m);
/* Calls the forward on the module's own inputs (borrowed); outputs as
 * kiln_function_call writes them (new references in the current scope).
 * Returns the output count or a negative status. */
KILN_API int kiln_model_call(kiln_model *m, const kiln_value *inputs, int n_inputs,
                             kiln_value *outputs, int max_outputs);
KILN_API int kiln_model_n_inputs(const kiln_model *m);
/* The exported example input i: its shape into shape (KILN_MAX_DIMS room)
 * and dtype; returns ndim, or -1 if the export recorded none. */
KILN_API int kiln_model_input_shape(const kiln_model *m, int i, int64_t *shape,
                                    kiln_dtype *dtype);
/* The training flag every `training` attribute reads (module.train()). */
KILN_API kiln_status kiln_model_set_training(kiln_model *m, bool training);
KILN_API bool kiln_model_is_training(const kiln_model *m);
/* Named tensors in state_dict order: parameters and buffers. Names and
 * tensors BORROWED: a name while m lives, a tensor until kiln_model_to_lazy
 * replaces it (optimizer steps update in place). */
KILN_API int kiln_model_n_tensors(const kiln_model *m);
KILN_API const char *kiln_model_tensor_name(const kiln_model *m, int i);
KILN_API kiln_tensor *kiln_model_tensor(const kiln_model *m, int i);
KILN_API bool kiln_model_tensor_is_param(const kiln_model *m, int i);
KILN_API kiln_tensor *kiln_model_find(const kiln_model *m, const char *name);
/* Copies value into the tensor of that name (same shape). */
KILN_API kiln_status kiln_model_set_tensor(kiln_model *m, const char *name, kiln_tensor *value);
/* Writes every tensor under its name with the loaded file's metadata
 * (crash-safe, as kiln_safetensors_save): PyTorch's
 * m.load_state_dict(...) of it gives the model back. */
KILN_API kiln_status kiln_model_save(const kiln_model *m, const char *path);
/* The parameters as a module (borrowed; owned by m). */
KILN_API kiln_nn_module *kiln_model_module(const kiln_model *m);
/* The function of the current training flag (borrowed): its inputs are
 * the model's inputs, then the bound tensors. For its stats. */
KILN_API kiln_function *kiln_model_function(kiln_model *m);
/* Moves parameters and buffers to the LAZY device. */
KILN_API kiln_status kiln_model_to_lazy(kiln_model *m);

/* ===================================================================== */
/* nn: .npy files (numpy's format, NEP 1)                                 */
/* ===================================================================== */
/* Reads versions 1.0, 2.0 and 3.0 with dtypes '<f4' '<f8' '<i8' '|b1'
 * (and '<i4', '<i2', '|i1', '|u1', widened to int64, '<f2' to float32),
 * C or Fortran order (the result is
 * always C order), any shape up to KILN_MAX_DIMS dims including 0-d. The
 * header must be a dict with exactly 'descr', 'fortran_order' and 'shape'
 * (at most 10000 bytes) and the data exactly as long as the shape says.
 * Returns a new contiguous tensor, or NULL with a message naming the file
 * and what is wrong (KILN_ERR_IO, _FORMAT, _UNSUPPORTED). */
KILN_API kiln_tensor *kiln_npy_load(const char *path);
/* The same from n bytes in memory; name is only used in messages. */
KILN_API kiln_tensor *kiln_npy_load_buffer(const void *buf, size_t n, const char *name);
/* The same two keeping the file's dtype: '<i4' Int, '<i2' Short, '|i1'
 * Char, '|u1' Byte, '<f2' Half (kiln_npy_load widens the integers to
 * int64 and '<f2' to float32). */
KILN_API kiln_tensor *kiln_npy_load_stored(const char *path);
KILN_API kiln_tensor *kiln_npy_load_buffer_stored(const void *buf, size_t n, const char *name);
/* Writes t (any layout; saved in logical C order) as numpy 1.24 would
 * (version 1.0, header padded to 64 bytes). Writes a temporary file beside
 * path, fsyncs it and renames it over path, so path holds either its old
 * content or the whole new file, never a partial one. */
KILN_API kiln_status kiln_npy_save(const char *path, const kiln_tensor *t);

#ifdef __cplusplus
}
#endif

#endif
