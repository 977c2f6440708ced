/* kiln.h: the whole public API of kiln, a deep-learning runtime in C11.
 *
 * kiln has tensors with reverse-mode autograd, a TorchScript-compatible
 * graph IR run by a profiling executor, and lazy tensors. This header is
 * the manual; sections follow the library's layers, bottom-up.
 *
 * Memory. Tensors are refcounted handles. Every function that returns a
 * tensor returns a NEW reference. Inside a scope (kiln_scope_begin/end) new
 * tensors are also registered with the scope, which releases them when it
 * ends; kiln_keep(t) takes an extra reference so t outlives the scope (the
 * caller then releases it). Outside any scope the caller owns the returned
 * reference and must kiln_release it.
 *
 * Errors. Functions that can fail return NULL or a negative kiln_status and
 * set a thread-local message, kiln_last_error(), naming the function, the
 * operands' shapes and dtypes, and what was expected. No user error aborts.
 *
 * A training step, eager mode:
 *
 *   kiln_scope_begin();
 *   kiln_tensor *h = kiln_relu(kiln_linear(x, w1, b1));
 *   kiln_tensor *loss = kiln_cross_entropy(kiln_linear(h, w2, b2), y,
 *                                          KILN_REDUCTION_MEAN);
 *   if (kiln_backward(loss, NULL) < 0) fprintf(stderr, "%s\n", kiln_last_error());
 *   kiln_no_grad_begin();
 *   ... w1 -= lr * grad(w1), in place with kiln_sub_ ...
 *   kiln_no_grad_end();
 *   kiln_scope_end();            // h, loss and the rest are released here
 */
#ifndef KILN_H
#define KILN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_API __attribute__((visibility("default")))

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
/* Clears the thread's error message. */
KILN_API void kiln_clear_error(void);

/* Element types. Promotion follows PyTorch: bool < int64 < float32 < float64
 * by category (bool, integer, floating); a Python-style scalar or a 0-d
 * tensor only changes the result if it is of a higher category. */
typedef enum kiln_dtype {
  KILN_DTYPE_F32 = 0,
  KILN_DTYPE_F64 = 1,
  KILN_DTYPE_I64 = 2,
  KILN_DTYPE_BOOL = 3,
  KILN_DTYPE_COUNT
} kiln_dtype;

/* Size of one element in bytes. */
KILN_API size_t kiln_dtype_size(kiln_dtype dt);
/* PyTorch's name: "Float", "Double", "Long", "Bool". Static string. */
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

/* Anomaly mode: when on, a backward node producing NaN/Inf fails the
 * backward with a message naming it and the forward op that created it. */
KILN_API void kiln_set_anomaly_enabled(bool enabled);
KILN_API bool kiln_is_anomaly_enabled(void);

/* Names a tensor (shown in the DOT dump, e.g. "fc1.weight"). Copies name. */
KILN_API kiln_status kiln_tensor_set_name(kiln_tensor *t, const char *name);
/* Graphviz DOT text of the backward graph from root: one node per backward
 * node (op name), AccumulateGrad nodes labelled with their leaf, edges in
 * execution order. Returns a malloc'd string (free with kiln_free), or NULL. */
KILN_API char *kiln_autograd_dot(kiln_tensor *root);
KILN_API kiln_status kiln_autograd_dot_write(kiln_tensor *root, const char *path);
/* Frees memory kiln returned as char* (strings, dumps). */
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
/* Syncs every live lazy tensor with pending IR as one graph. */
KILN_API kiln_status kiln_mark_step(void);
/* The pending IR of ts in the style of PyTorch's _get_tensors_text:
 * "IR {\n  %0 = [Float[4,4]] lazy_tensors::device_data(), device=CPU0\n ...}".
 * Returns a malloc'd string (kiln_free), or NULL. */
KILN_API char *kiln_lazy_tensors_text(kiln_tensor *const *ts, int n);
/* Counter or timer by name (MarkStep, UncachedCompile, CachedCompile,
 * ExecuteGraph, DeviceDataCacheMiss, CreateLazyTensor, DestroyLazyTensor,
 * SyncTensorsToData; timers CompileTime, ExecuteTime in ns); -1 if unknown. */
KILN_API int64_t kiln_lazy_counter(const char *name);
/* Zeroes all counters and timers and forgets recompile reasons. */
KILN_API void kiln_lazy_metrics_reset(void);
/* Human-readable report and a JSON object of all metrics (malloc'd). */
KILN_API char *kiln_lazy_metrics_report(void);
KILN_API char *kiln_lazy_metrics_json(void);
/* Compile-cache capacity (graphs kept, LRU); default 1024. */
KILN_API void kiln_lazy_set_cache_size(int n);
/* Why the cache missed for graphs of a structure seen before, oldest
 * first: "input 2: shape [128, 784] -> [64, 784]". Borrowed strings, valid
 * until the next reset. */
KILN_API int kiln_lazy_n_recompile_reasons(void);
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
/* TorchScript text of g (malloc'd; kiln_free). */
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

/* A function over a copy of g (g may be freed afterwards). NULL if the
 * graph cannot run (an unsupported node kind), with the error set. */
KILN_API kiln_function *kiln_function_new(const kiln_graph *g);
KILN_API void kiln_function_free(kiln_function *f);
/* Calls f. Writes the outputs (a tuple output is flattened in order) into
 * outputs and returns their count, or a negative status (wrong number of
 * inputs, a kernel error: the message names the node). */
KILN_API int kiln_function_call(kiln_function *f, const kiln_value *inputs, int n_inputs,
                                kiln_value *outputs, int max_outputs);

/* ===================================================================== */
/* nn: .npy files (numpy's format, NEP 1)                                 */
/* ===================================================================== */
/* Reads versions 1.0, 2.0 and 3.0 with dtypes '<f4' '<f8' '<i8' '|b1'
 * (and '<i4', '|u1', widened to int64), C or Fortran order (the result is
 * always C order), any shape up to KILN_MAX_DIMS dims including 0-d. The
 * header must be a dict with exactly 'descr', 'fortran_order' and 'shape'
 * (at most 10000 bytes) and the data exactly as long as the shape says.
 * Returns a new contiguous tensor, or NULL with a message naming the file
 * and what is wrong (KILN_ERR_IO, _FORMAT, _UNSUPPORTED). */
KILN_API kiln_tensor *kiln_npy_load(const char *path);
/* The same from n bytes in memory; name is only used in messages. */
KILN_API kiln_tensor *kiln_npy_load_buffer(const void *buf, size_t n, const char *name);
/* Writes t (any layout; saved in logical C order) as numpy 1.24 would
 * (version 1.0, header padded to 64 bytes). Writes a temporary file beside
 * path, fsyncs it and renames it over path, so path holds either its old
 * content or the whole new file, never a partial one. */
KILN_API kiln_status kiln_npy_save(const char *path, const kiln_tensor *t);

#ifdef __cplusplus
}
#endif

#endif
