/* src/core/core.h: kiln's core layer, internal view: the tensor and storage
 * structs, the allocation hook, errors, scopes. Every other layer builds on
 * these; nothing here knows about ops, autograd or graphs. */
#ifndef KILN_CORE_H
#define KILN_CORE_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "kiln.h"

/* Broken invariants only (never user errors). */
#include <assert.h>
#define KILN_ASSERT(x) assert(x)

/* ---- allocation: every allocation goes through these ---------------- */
/* Returns NULL (and sets the error message) on failure. Blocks from
 * core_alloc/calloc/realloc/strdup carry a header (Note [Small-object
 * cache]): free them with core_free only, never with free(). */
void *core_alloc(size_t nbytes);
void *core_calloc(size_t n, size_t size);
void *core_realloc(void *p, size_t nbytes);
/* 64-byte aligned; free with core_free_aligned. */
void *core_alloc_aligned(size_t nbytes);
void core_free(void *p);
void core_free_aligned(void *p);
char *core_strdup(const char *s);
/* Test hook: make the nth allocation from now fail (1 = the next one);
 * 0 disables. Returns the number of allocations made since the last call. */
long core_alloc_fail_at(long n);
/* Test hook: every allocation above max_bytes fails (0: no limit; the fuzz
 * targets cap tensors so that a graph asking for terabytes is an error,
 * not an out-of-memory kill). Returns the previous limit. */
size_t core_alloc_limit(size_t max_bytes);

/* ---- the storage cache (cache.c, Note [Storage cache]) ---------------- */
/* A 64-byte aligned block of at least n bytes; *block receives its size
 * (pass it back to core_block_free). NULL on OOM. */
void *core_block_alloc(size_t n, size_t *block);
void core_block_free(void *p, size_t block);
/* Frees this thread's cached blocks (storage and small objects). */
void core_cache_release(void);
/* Frees this thread's cached small objects (alloc.c). */
void core_small_release(void);
/* Cache hits and misses (new mallocs) on this thread, bytes held. */
void core_cache_stats(int64_t *hits, int64_t *misses, size_t *bytes);
/* Note [Thread exit] (thread.c): a thread-local cache calls core_thread_arm
 * whenever it keeps something; when an armed thread exits, the functions
 * registered with core_thread_on_exit (at load time, from constructors) run
 * on it, then core_cache_release. core_thread_on_exit fails (< 0) past its
 * fixed number of hooks. core_threads_released counts the threads so far
 * released (tests). */
void core_thread_arm(void);
int core_thread_on_exit(void (*fn)(void));
long core_threads_released(void);

/* A growing text buffer (strbuf.c): start zeroed; appends that run out of
 * memory set oom and stop; p (NUL-terminated once anything was appended)
 * is the caller's to core_free. */
typedef struct core_strbuf {
  char *p;
  size_t n, cap;
  bool oom;
} core_strbuf;
void core_strbuf_printf(core_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends len bytes of s. */
void core_strbuf_append(core_strbuf *b, const char *s, size_t len);

/* ---- errors ---------------------------------------------------------- */
/* Sets the thread's error message (printf-style) and returns status. */
int core_error(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int core_verror(int status, const char *fmt, va_list ap);
/* Appends to the current message (for context such as "in node %3"). */
void core_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Note [Log variables]: KILN_JIT_LOG (graphs after passes and pipelines,
 * Note [Pass logging]) and KILN_LOG (events: "recompiles") each hold a
 * comma-separated list of names, spaces around a name ignored; "all" names
 * everything. Does environment variable var name `name` (whole names
 * only)? Read at every call, so a program (or a test) may set it late. */
bool core_log_enabled(const char *var, const char *name);

/* ---- storage and tensors --------------------------------------------- */
typedef enum core_device { CORE_DEVICE_CPU = 0, CORE_DEVICE_LAZY = 1 } core_device;

/* Refcounted memory. A storage's version counter is shared by all views of
 * it: in-place writes bump it, autograd compares it when it unpacks a
 * saved tensor (src/autograd/node.c). */
typedef struct core_storage {
  _Atomic int refcount; /* atomic: Note [Threads] in include/kiln.h */
  uint32_t version;
  uint64_t uid;        /* unique for the process's life, never reused (Note
                         [Packed B cache] in src/ops/sgemm_pack_cache.c) */
  uint32_t ag_rebases; /* autograd histories rebased onto this memory (Note
                         [View regeneration] in src/autograd/views.c) */
  bool frozen;         /* Note [Frozen storage] below */
  size_t nbytes;
  size_t block;    /* bytes of the cached block holding header and data */
  void *data;      /* 64-byte aligned, or NULL for data-less (symbolic) */
  bool owns_data;  /* data lives in this allocation or was core_alloc'd */
  void (*release)(void *ctx);  /* kiln_from_blob's: runs when freed */
  void *release_ctx;
} core_storage;

/* Note [Frozen storage]: memory no one may write but a lazy graph run it
 * is donated to. The lazy layer sets `frozen` on device data it owns
 * alone (kiln_to_lazy's private copy, a run's result that no other tensor
 * shares: core_storage_freeze) and clears it when it donates the buffer to
 * a run, before the run (core_storage_thaw). No public call hands out such
 * memory (a lazy tensor has no data pointer; kiln_to_cpu copies), so a
 * frozen storage's bytes are fixed while its uid and version are: a cache
 * may keep what it computed from them across calls and scopes, as the
 * Winograd weights cache does (Note [Winograd weights cache] in
 * src/ops/conv_winograd_cache.c). Thawing or freeing a frozen storage calls
 * core_frozen_drop_hook with its uid, so such caches drop their entries. */
void core_storage_freeze(core_storage *s);
void core_storage_thaw(core_storage *s);

struct ag_meta;   /* autograd's per-tensor state (src/autograd) */

struct kiln_tensor {
  _Atomic int refcount; /* a tensor read by several threads is retained by each */
  kiln_dtype dtype;
  uint8_t device;          /* core_device */
  uint8_t ndim;
  bool wrapped_number;     /* a Python-style scalar (promotion: lowest tier) */
  bool requires_grad;      /* leaf flag, or has a grad_fn (kept by autograd) */
  int64_t offset;          /* in elements */
  int64_t shape[KILN_MAX_DIMS];
  int64_t strides[KILN_MAX_DIMS];  /* in elements */
  core_storage *storage;   /* owned reference; NULL only for symbolic tensors */
  struct ag_meta *ag;      /* NULL until autograd needs it */
  void *lazy;              /* lazy layer's state, NULL for CPU */
};

/* Note [Hooks]: the only calls from a lower layer up (core and ops
 * cannot include the headers above them) go through these function
 * pointers, each assigned in exactly one place, a constructor that runs
 * before main (Note [Init] in src/lazy/record.c). `make check`
 * (scripts/check_hooks.sh) fails if one is assigned anywhere else; the
 * list below is what it reads, one "hook: file" line each.
 *   core_ag_meta_free_hook: src/autograd/node.c
 *   core_lazy_free_hook: src/lazy/record.c
 *   core_lazy_share_hook: src/lazy/record.c
 *   core_lazy_materialize_hook: src/exec/lazy_sync.c
 *   core_frozen_drop_hook: src/ops/conv_winograd_cache.c
 *   op_autograd_hook: src/autograd/node.c
 *   op_is_leaf_hook: src/autograd/node.c
 *   op_lazy_hook: src/lazy/record.c
 *   op_lazy_copy_hook: src/lazy/record.c
 *   op_lazy_write_hook: src/lazy/record.c
 *   op_rebase_history_hook: src/autograd/inplace.c
 *   op_view_of_hook: src/autograd/inplace.c
 *   op_saved_result_hook: src/autograd/inplace.c
 *   op_view_base_hook: src/autograd/views.c
 *   op_view_grad_hook: src/autograd/views.c
 *   op_all_reduce_start_hook: src/dist/comm.c
 *   op_all_reduce_wait_hook: src/dist/comm.c
 * The two all-reduce hooks (src/ops/collective.h) are the ones set at run
 * time instead of by a constructor: kiln_dist_init sets them and
 * kiln_dist_finalize clears them, NULL while MPI is not initialised (Note
 * [All-reduce start and wait] in src/ops/collective.c).
 * The thread's kernel poll function (Note [Kernel poll] below) is set
 * at run time too, by a call, not an assignment.
 * (op_grad_enabled is state, not a hook: ops read it, autograd's grad-mode
 * functions in src/autograd/engine.c write it.) Callers test a hook for
 * NULL, or call it only on a tensor the upper layer made (a lazy tensor
 * exists only where the lazy layer does). */
/* autograd: free a tensor's autograd state. */
extern void (*core_ag_meta_free_hook)(kiln_tensor *t);
/* lazy: free a tensor's lazy state. */
extern void (*core_lazy_free_hook)(kiln_tensor *t);
/* lazy: give dst (a fresh header) its own state on src's lazy value. */
extern void (*core_lazy_share_hook)(kiln_tensor *dst, const kiln_tensor *src);
/* exec: the CPU value of a lazy tensor, syncing what it needs (new ref,
 * or NULL with the error set). */
extern kiln_tensor *(*core_lazy_materialize_hook)(const kiln_tensor *t);
/* ops: a frozen storage of this uid was thawed or is being freed (Note
 * [Frozen storage]); drop what was cached from it. Never fails. */
extern void (*core_frozen_drop_hook)(uint64_t uid);

/* A new contiguous tensor (refcount 1, not registered with any scope).
 * NULL on bad shape or OOM. */
kiln_tensor *core_tensor_new(int ndim, const int64_t *shape, kiln_dtype dt);
/* A tensor header over an existing storage (retained): a view. */
kiln_tensor *core_tensor_view(core_storage *s, kiln_dtype dt, int ndim,
                              const int64_t *shape, const int64_t *strides,
                              int64_t offset);
/* A new header on t's data (same storage or lazy value) without autograd
 * state; with_data false gives shape/dtype only. NULL on OOM. */
kiln_tensor *core_alias(const kiln_tensor *t, bool with_data);
/* A tensor header without storage (shape/dtype only). */
kiln_tensor *core_tensor_meta(int ndim, const int64_t *shape, kiln_dtype dt);
/* Number of open scopes on this thread. */
int core_scope_depth(void);
/* Registers t with the innermost open scope (if any); returns t. If the
 * scope's list cannot grow, t is RELEASED and NULL returned (out of memory):
 * a caller must use the result, never t. */
kiln_tensor *core_autorelease(kiln_tensor *t);
/* Makes room for n more tensors in the innermost scope, so that the next n
 * core_autorelease calls cannot fail: 0, or KILN_ERR_NOMEM (nothing
 * changed). Callers registering several results reserve first. */
int core_scope_reserve(int n);
/* How many allocations have failed on this thread so far: a caller that
 * must not report success after a failed allocation (a gradient formula
 * that returned no gradient) compares it before and after. */
long core_alloc_failures(void);
/* Opens path for reading if it is a regular file: the descriptor, or a
 * negative status with the error naming ctx and path (a FIFO, a directory
 * or a device is refused: reading one could block or never end). */
int core_open_regular(const char *path, const char *ctx);
/* The same as a stdio stream (fclose it), or NULL with the error set. */
FILE *core_fopen_regular(const char *path, const char *ctx);
/* Validates a shape: 0 <= ndim <= KILN_MAX_DIMS, sizes >= 0. */
int core_check_shape(const char *fn, int ndim, const int64_t *shape);
int64_t core_numel(int ndim, const int64_t *shape);
/* Note [Byte sizes]: no tensor's storage may exceed CORE_MAX_NBYTES: the
 * user address space of x86-64 and AArch64 (2^47; ASan's allocator gives at
 * most 2^40, so sanitizer builds say that). A tensor made by core_tensor_new
 * therefore has numel * element size <= CORE_MAX_NBYTES, which is why code
 * computing byte offsets inside an existing storage may multiply without a
 * check; every size computed for a NEW buffer is checked here or with
 * __builtin_mul_overflow where it is computed. */
#if defined(__SANITIZE_ADDRESS__)
#define CORE_MAX_NBYTES ((uint64_t)1 << 40)
#else
#define CORE_MAX_NBYTES ((uint64_t)1 << 47)
#endif
/* The bytes of a contiguous tensor of this shape and dtype, in *nbytes; a
 * KILN_ERR_INVALID naming fn, the shape and the byte count if the product
 * overflows or exceeds CORE_MAX_NBYTES (shape already validated). */
int core_nbytes(const char *fn, int ndim, const int64_t *shape, kiln_dtype dt, size_t *nbytes);
/* a * b * c in *out, for the size of a new scratch buffer; a KILN_ERR_INVALID
 * naming fn if the product overflows or exceeds CORE_MAX_NBYTES. */
int core_buf_bytes(const char *fn, uint64_t a, uint64_t b, uint64_t c, size_t *out);
void core_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
bool core_is_contiguous(const kiln_tensor *t);
/* Normalises a possibly negative dim for a tensor of ndim dims (ndim 0 is
 * treated as 1, as PyTorch does). Returns -1 and sets the error if out of
 * range. */
int core_wrap_dim(const char *fn, int64_t dim, int ndim);
/* "[4, 3]" into buf. */
char *core_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);
/* "Float[4, 3]" for messages. */
char *core_tensor_desc(const kiln_tensor *t, char *buf, size_t n);
static inline void *core_data(const kiln_tensor *t) {
  return t->storage && t->storage->data
             ? (char *)t->storage->data + t->offset * (int64_t)kiln_dtype_size(t->dtype)
             : NULL;
}
/* Bumps the version counter of t's storage (after an in-place write). */
static inline void core_bump_version(kiln_tensor *t) {
  if (t->storage) t->storage->version++;
}
void core_storage_release(core_storage *s);
/* A new storage uid: unique for the process's life (never fails). */
uint64_t core_storage_uid(void);

/* ---- JSON text (json.c, on jansson) -------------------------------------- */
struct json_t;
/* A JSON number for v, or null when v is not finite (new reference). */
struct json_t *core_json_num(double v);
/* j's text (object keys in insertion order, reals with 9 significant
 * digits, a final newline) as a core_alloc'd string the caller frees with
 * kiln_free; its length in *len (may be NULL). Consumes j (NULL is fine).
 * ok false (a failed append while building j) or OOM: NULL with the error
 * set. */
char *core_json_take(struct json_t *j, bool ok, size_t *len);

/* Reads element i (in C order over t's logical shape) as double. Slow;
 * for tests, item and printing. */
double core_get_flat(const kiln_tensor *t, int64_t i);

/* ---- int64 arithmetic ---------------------------------------------------- */
/* Note [Int semantics]: kiln's int64 arithmetic (tensor kernels, the
 * interpreter's int builtins, constant folding) wraps around in two's
 * complement as PyTorch's does in practice, and is never C's undefined
 * behaviour: INT64_MIN // -1 is INT64_MIN, INT64_MIN % -1 is 0, -INT64_MIN
 * and |INT64_MIN| are INT64_MIN. Floor division and remainder follow
 * Python (the remainder takes the divisor's sign); b must not be 0. The
 * float forms follow below. */
/* A float converted to int64 truncates toward zero; NaN, the infinities
 * and values out of range (C's undefined behaviour) give INT64_MIN, as
 * PyTorch's conversions do on x86 (the hardware's "integer indefinite"). */
static inline int64_t core_f2i(double v) {
  return v >= -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN;
}
static inline int64_t core_wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t core_wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t core_wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline int64_t core_wrap_neg(int64_t a) { return (int64_t)(0u - (uint64_t)a); }
static inline int64_t core_wrap_abs(int64_t a) { return a < 0 ? core_wrap_neg(a) : a; }
static inline int64_t core_int_floordiv(int64_t a, int64_t b) {
  if (b == -1) return core_wrap_neg(a);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}
static inline int64_t core_int_remainder(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
/* a ** e for e >= 0, wrapping, by squaring (any e is quick). */
static inline int64_t core_int_pow(int64_t a, int64_t e) {
  int64_t r = 1;
  for (; e > 0; e >>= 1) {
    if (e & 1) r = core_wrap_mul(r, a);
    a = core_wrap_mul(a, a);
  }
  return r;
}

/* Python's float // and % (the remainder takes the divisor's sign), as
 * TorchScript computes them; b must not be 0. */
static inline double core_float_floordiv(double a, double b) { return floor(a / b); }
static inline double core_float_remainder(double a, double b) {
  double r = fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

/* len(range(lo, hi, step)) for step != 0, exact for every int64 input
 * (clamped to INT64_MAX, which no loop reaches). */
static inline int64_t core_range_length(int64_t lo, int64_t hi, int64_t step) {
  uint64_t diff, s;
  if (step > 0) {
    if (hi <= lo) return 0;
    diff = (uint64_t)hi - (uint64_t)lo;
    s = (uint64_t)step;
  } else {
    if (lo <= hi) return 0;
    diff = (uint64_t)lo - (uint64_t)hi;
    s = 0u - (uint64_t)step;
  }
  uint64_t n = (diff - 1) / s + 1;
  return n > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)n;
}

/* ---- hashing ---------------------------------------------------------- */
/* Note [Hash mixing]: the one mixer of kiln's structural hashes (lazy
 * nodes and pending graphs, fusion kernel keys, CSE buckets): boost's
 * hash_combine step, then splitmix64's finalizer, so every bit of v
 * reaches every bit of the result. Each user says what it compares
 * besides the hash. */
static inline uint64_t core_hash_mix(uint64_t h, uint64_t v) {
  uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/* n bytes at p, one at a time. */
static inline uint64_t core_hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) h = core_hash_mix(h, s[i]);
  return h;
}
/* A NUL-terminated string, ended by a marker (so "a","b" differs from "ab"). */
static inline uint64_t core_hash_str(uint64_t h, const char *s) {
  for (; *s; s++) h = core_hash_mix(h, (unsigned char)*s);
  return core_hash_mix(h, 0xff);
}
/* A double's bits. */
static inline uint64_t core_hash_double(uint64_t h, double d) {
  uint64_t bits;
  memcpy(&bits, &d, sizeof bits);
  return core_hash_mix(h, bits);
}

/* ---- dtypes ----------------------------------------------------------- */
/* F32, F64, F16, BF16 (torch.is_floating_point). */
bool core_dtype_is_floating(kiln_dtype dt);
/* I64, I32, I16, I8, U8 (not bool). */
bool core_dtype_is_integral(kiln_dtype dt);
/* A dtype beyond kiln's first four (F32, F64, I64, BOOL): the ops that
 * take one are listed in Note [Extended dtypes] (src/ops/dtype_gate.c). */
bool core_dtype_is_extended(kiln_dtype dt);
/* The dtype kernels compute a dt in: F32 for the half types, I64 for the
 * integer types (their results wrap when stored back), else dt itself. */
kiln_dtype core_dtype_compute(kiln_dtype dt);
/* dst[j] = src[j * stride] converted from sd to dd, j < n (Note
 * [Conversions], src/core/convert.c); stride 0 repeats src[0]. */
void core_convert_run(void *dst, kiln_dtype dd, const void *src, kiln_dtype sd, int64_t stride,
                      int64_t n);
/* One element at p of dtype dt, as or from a double (a half type through
 * float32; int64 beyond 2^53 rounds: use the _int forms for integers). */
double core_load_double(const void *p, kiln_dtype dt);
void core_store_double(void *p, kiln_dtype dt, double v);
/* The same exactly for integer and bool dtypes (floating ones convert). */
int64_t core_load_int(const void *p, kiln_dtype dt);
void core_store_int(void *p, kiln_dtype dt, int64_t v);

/* ---- random ------------------------------------------------------------ */
struct kiln_generator {
  uint64_t s[4];
};
uint64_t core_rand_u64(kiln_generator *g);
/* The generator random ops draw from on this thread: the default one, or
 * the one core_set_op_generator lent (Note [Dropout generator] in
 * src/ops/dropout.c). core_set_op_generator returns the previous loan
 * (NULL = none); the caller restores it. Never fails. */
kiln_generator *core_op_generator(void);
kiln_generator *core_set_op_generator(kiln_generator *g);
/* Uniform [0, 1) with 53 random bits. */
double core_rand_double(kiln_generator *g);
/* A run of draws under one lock (the default generator's; others have
 * none): core_rand_hold returns the token core_rand_release takes, and in
 * between core_rand_double_held draws as core_rand_double does, without
 * locking per draw. A kernel's loop over its elements does this. Never
 * fails. */
bool core_rand_hold(kiln_generator *g);
void core_rand_release(bool held);
double core_rand_double_held(kiln_generator *g);
double core_rand_normal(kiln_generator *g);

/* ---- threads (threads.c, Note [Thread waits]) ----------------------------- */
/* The cores this process may use: its affinity mask, capped by its
 * cgroup's CPU quota rounded up. At least 1. */
int core_available_cores(void);
/* ceil(quota / period): a cgroup CPU quota in cores; 0 for none (quota or
 * period <= 0, as cgroup v2's "max" reads). */
int core_quota_cores(long long quota, long long period);
/* Note [Busy cores] (threads.c): sets this thread's parallel regions to the
 * cores other processes leave free, at most every 20 ms; ops call it
 * before their kernel runs. Never fails (without /proc it does nothing). */
void core_threads_adapt(void);
/* The thread count for wanted threads on cores cores beside others runnable
 * tasks of other processes: min(wanted, cores - others), at least 1. */
int core_threads_for(int wanted, int cores, int others);
/* The count this thread's parallel regions use now (omp_get_max_threads). */
int core_threads_in_use(void);
/* Turns the adaptation on or off for the process (tests); returns whether
 * it was on. Off restores the calling thread's count asked for. */
bool core_threads_set_adaptive(bool on);

/* ---- kernel polling (poll.c, Note [Kernel poll]) ------------------------- */
/* Note [Kernel poll]: Open MPI moves a non-blocking all-reduce on only
 * inside MPI calls, and a backward spends long stretches inside one
 * kernel (a convolution's GEMMs) where no engine or executor callback
 * runs. So long kernels call core_poll() between their blocks (the GEMM's
 * row panels, a convolution's batch chunks), and the distributed layer
 * sets the calling thread's poll function while its all-reduces are
 * pending (Note [Progress] in src/dist/reducer.c, Note [Graph all-reduces]
 * in src/dist/comm.c); fn rate-limits itself. The function is per thread:
 * OpenMP workers never poll, so MPI is called only from the thread that
 * started the all-reduces. Like the two all-reduce hooks of Note [Hooks],
 * it is set at run time (fn NULL clears it). */
extern _Thread_local void (*core_poll_fn)(void *ud);
extern _Thread_local void *core_poll_ud;
/* Sets (fn non-NULL) or clears this thread's poll function. Never fails. */
void core_set_poll(void (*fn)(void *ud), void *ud);
static inline void core_poll(void) {
  if (core_poll_fn) core_poll_fn(core_poll_ud);
}

/* ---- instruction-set levels (cpu.c, Note [CPU levels]) ----------------- */
#include "cpu.h"

#endif
