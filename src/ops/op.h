/* src/ops/op.h: the op table's internal interface. An op is defined once,
 * in ops.def; its entry points at <op>_infer (shape/dtype inference),
 * <op>_cpu (the kernel), <op>_grad (the derivative formula, written with
 * the public tensor API) and, for elementwise ops, <op>_tiles (one kernel per
 * compute dtype over contiguous runs). Eager execution, the interpreter,
 * lazy recording, shape propagation, differentiation and fusion all read
 * this table; nothing else keeps a list of ops. */
#ifndef KILN_OP_H
#define KILN_OP_H

#include "core/core.h"

/* ---- values passed to ops ------------------------------------------------ */
typedef enum op_val_tag {
  OP_VAL_NONE = 0,
  OP_VAL_TENSOR,
  OP_VAL_INT,
  OP_VAL_FLOAT,
  OP_VAL_BOOL,
  OP_VAL_INTS,     /* int[] */
  OP_VAL_TENSORS,  /* Tensor[] */
  OP_VAL_STR,
  OP_VAL_FLOATS    /* float[] (upsampling's scale_factors; decomposing ops only) */
} op_val_tag;

/* One argument, in the aten schema's order. Borrowed by op_call. */
typedef struct op_val {
  uint8_t tag;
  union {
    kiln_tensor *t;
    int64_t i;
    double f;
    bool b;
    struct { const int64_t *v; int n; } ints;
    struct { kiln_tensor *const *v; int n; } ts;
    const char *s;
    struct { const double *v; int n; } floats;
  };
} op_val;

#define OPV_NONE ((op_val){.tag = OP_VAL_NONE})
/* A tensor argument, None for NULL. A function, not a macro naming x
 * twice: OPV_T(kiln_exp(a)) ran the op twice, and when the second call
 * ran out of memory made a TENSOR argument holding NULL. */
static inline op_val op_val_tensor(kiln_tensor *x) {
  op_val v = {.tag = x ? OP_VAL_TENSOR : OP_VAL_NONE};
  v.t = x;
  return v;
}
#define OPV_T(x) op_val_tensor(x)
#define OPV_I(x) ((op_val){.tag = OP_VAL_INT, .i = (x)})
#define OPV_F(x) ((op_val){.tag = OP_VAL_FLOAT, .f = (x)})
#define OPV_B(x) ((op_val){.tag = OP_VAL_BOOL, .b = (x)})
#define OPV_INTS(p, n_) ((op_val){.tag = OP_VAL_INTS, .ints = {(p), (n_)}})
#define OPV_TS(p, n_) ((op_val){.tag = OP_VAL_TENSORS, .ts = {(p), (n_)}})
#define OPV_S(x) ((op_val){.tag = OP_VAL_STR, .s = (x)})
#define OPV_FLOATS(p, n_) ((op_val){.tag = OP_VAL_FLOATS, .floats = {(p), (n_)}})

/* A number argument (int, float or bool) as double; NONE gives NAN. */
double op_val_num(const op_val *v);
bool op_val_is_num(const op_val *v);

/* ---- inference ----------------------------------------------------------- */
typedef struct op_meta {
  kiln_dtype dtype;
  int ndim;
  int64_t shape[KILN_MAX_DIMS];
} op_meta;

/* Most outputs an op can have (split/chunk make one per piece). */
#define OP_MAX_OUTS 1024

/* ---- derivative formulas ------------------------------------------------- */
/* Input slots: every tensor argument, and every element of a Tensor[]
 * argument, in argument order, gets one slot. */
typedef struct op_grad_ctx {
  const op_val *args;       /* forward inputs (saved; tensors unpacked) */
  int n_args;
  kiln_tensor *const *outs; /* forward outputs (saved, unpacked) */
  int n_outs;
  kiln_tensor *const *grads;  /* dL/d outs[i]; NULL where none flowed */
  const bool *needs;        /* per input slot: is its gradient wanted */
  kiln_tensor **grad_in;    /* per input slot: the formula assigns results
                               here (no retain needed; NULL = zero) */
  int n_slots;
} op_grad_ctx;

/* Stores a formula's result for slot. A NULL result means an op inside the
 * formula failed (its message is set): that fails the backward instead of
 * becoming a silent zero gradient. */
static inline int op_grad_put(op_grad_ctx *g, int slot, kiln_tensor *r) {
  if (!r) return KILN_ERR_INVALID;
  g->grad_in[slot] = r;
  return 0;
}

/* In a one-input formula: `go` is the output's gradient; returns early
 * when no gradient flowed or slot 0 does not want one. */
#define OP_GRAD_UNARY_GUARD()                                                  \
  kiln_tensor *go = g->grads[0];                                               \
  if (!go || !g->needs[0]) return 0

/* ---- elementwise kernels ------------------------------------------------- */
/* Non-operand arguments of an elementwise op, in order, as numbers (NONE is
 * NAN; a str argument is 1 for "tanh", else 0: gelu's approximate). */
#define OP_MAX_ATTRS 4
typedef struct op_attrs {
  double s[OP_MAX_ATTRS];
} op_attrs;

/* out[i] = f(in[0][i], in[1][i], ...) for i < n. Inputs are in the compute
 * dtype (the entry's index); out is in the op's output dtype. */
typedef void (*op_tile_fn)(void *out, const void *const *in, int64_t n,
                           const op_attrs *at);

/* A tile kernel's definition as C text (tile.h): out = (OT)(expr), where
 * expr reads `a` (arity 1), `a`, `b` (2) or `c`, `a`, `b` (3), all of
 * type T, and `at` (const op_attrs *). The fused executor's native kernels
 * are compiled from it. */
typedef struct op_tile_src {
  int arity;
  const char *type, *out_type, *expr; /* expr NULL: no text (TILE_*_C, TILE_NO_TEXT) */
} op_tile_src;
/* op's tile text for dtype dt, or NULL when that tile has none. */
const op_tile_src *op_tile_text(int op, kiln_dtype dt);

/* ---- the table ----------------------------------------------------------- */
enum {
  OPF_ELEMENTWISE = 1 << 0, /* pointwise over broadcast operands */
  OPF_FUSIBLE = 1 << 1,     /* may join a FusionGroup */
  OPF_DIFF = 1 << 2,        /* has a derivative formula */
  OPF_DECOMPOSES = 1 << 3,  /* implemented by other ops (see _decompose) */
  OPF_VIEW = 1 << 4,        /* outputs alias the first input */
  OPF_ALLOCS = 1 << 5,      /* cpu allocates its own outputs */
  OPF_FLOAT_ONLY = 1 << 6,  /* integer/bool inputs compute in float32 */
  OPF_BOOL_OUT = 1 << 7,    /* elementwise result is bool */
  OPF_COND_FIRST = 1 << 8,  /* operand 0 is a bool condition (where) */
  OPF_LIST_OUT = 1 << 9,    /* returns Tensor[] (chunk, split) */
  OPF_RANDOM = 1 << 10,     /* reads the default generator */
  OPF_NO_DOUBLE = 1 << 11,  /* its formula is not itself differentiable */
  OPF_SAVE_OUT = 1 << 12,   /* the formula reads the outputs */
  OPF_NO_SAVE_IN = 1 << 14, /* the formula reads only the inputs' shapes and
                               dtypes: autograd saves metadata, not data */
  OPF_INPLACE = 1 << 15,    /* writes its first argument ("Tensor(a!) self") */
  OPF_SELF_OUT = 1 << 16,   /* not elementwise, but its kernel may write the result
                               into self's buffer when self has the result's shape
                               (it reads each element of self before writing it) */
  OPF_HAS_INPLACE = 1 << 17, /* PyTorch has its in-place form <name>_ (Note
                                [In-place variants]) */
  OPF_INPLACE_SAVES_RESULT = 1 << 18, /* PyTorch's formula for the in-place form reads its
                                         result (self after the write): Note [In-place
                                         saved result] in inplace.c */
  OPF_EXT_DTYPES = 1 << 19, /* not elementwise, a view or in-place, yet takes the
                               extended dtypes (Note [Extended dtypes] in dtype_gate.c) */
  OPF_SAVE_AUX_OUTS = 1 << 20, /* the formula reads the outputs after the first (a
                                  norm's statistics), not the first: autograd saves
                                  those only, so the result may be written in place
                                  (batch_norm -> relu_), as PyTorch's norms */
};

typedef int (*op_infer_fn)(const op_val *args, int n_args, op_meta *outs,
                           int max_outs);
typedef int (*op_cpu_fn)(const op_val *args, int n_args, kiln_tensor **outs,
                         int n_outs);
typedef int (*op_grad_fn)(op_grad_ctx *g);
typedef int (*op_decompose_fn)(const op_val *args, int n_args, kiln_tensor **outs,
                               int max_outs);

typedef struct op_info {
  const char *name;     /* aten name, e.g. "aten::add" */
  const char *schema;   /* PyTorch's schema text */
  const char *doc;      /* one-line synopsis */
  unsigned flags;
  int n_operands;       /* elementwise: leading tensor operands */
  int n_args;           /* number of schema arguments */
  op_infer_fn infer;    /* returns number of outputs, or < 0 */
  op_cpu_fn cpu;        /* fills (or, with OPF_ALLOCS/VIEW, creates) outs */
  op_grad_fn grad;
  op_decompose_fn decompose;
  const op_tile_fn *tiles;  /* elementwise: [KILN_DTYPE_COUNT], NULL = none */
  /* elementwise: each tile's text, [KILN_DTYPE_COUNT]; NULL (the array or
   * an entry) where a tile is hand-written rather than a TILE_* expression */
  const op_tile_src *const *tile_srcs;
} op_info;

#define OP(name, ENUM, aten, nin, nargs, flags, schema, doc) KILN_OP_##ENUM,
#define EW OP
enum kiln_op {
#include "ops.def"
  KILN_OP_COUNT
};
#undef OP
#undef EW

/* Note [In-place variants]: an op flagged OPF_HAS_INPLACE has a second
 * entry, KILN_OP_INPLACE(op), derived from its line (no line of its own):
 * aten name "<name>_", the schema with self annotated `Tensor(a!)` and
 * returned (op_schema_text), flags OPF_INPLACE | OPF_DECOMPOSES (plus
 * OPF_RANDOM), and a runner (inplace.c) that computes the functional op and
 * writes the result into self: the functional kernel straight into self
 * when it can, else through a temporary; `other` broadcasts into self's
 * shape, never self into other's; the result dtype must cast to self's
 * (PyTorch's rule: no float into an integer tensor, nothing but bool into
 * a bool one). Under autograd the functional op records the history and
 * self takes it over (rebase_history). The derived entries sit after the
 * functional ones in op_table; an op without an in-place form has an
 * empty entry there (name NULL). Loops over KILN_OP_COUNT see the
 * functional ops only. */
#define OP_INDEX_COUNT (2 * KILN_OP_COUNT)
#define KILN_OP_INPLACE(op) (KILN_OP_COUNT + (op))
/* A decomposition's results (decompositions are written with the
 * public API): outs[0] = t and 1, or, when t is NULL, the status of the
 * call that failed (KILN_ERR_INVALID if it set none). */
static inline int op_failed_status(void) {
  return kiln_last_status() < 0 ? (int)kiln_last_status() : KILN_ERR_INVALID;
}
static inline int op_out1(kiln_tensor *t, kiln_tensor **outs) {
  if (!t) return op_failed_status();
  outs[0] = t;
  return 1;
}
/* The same for two results, checking the caller's room for them. */
static inline int op_out2(kiln_tensor *a, kiln_tensor *b, kiln_tensor **outs, int max) {
  if (!a || !b) return op_failed_status();
  if (max < 2) return core_error(KILN_ERR_INVALID, "room for %d outputs, need 2", max);
  outs[0] = a;
  outs[1] = b;
  return 2;
}

static inline bool op_is_inplace(int op) { return op >= KILN_OP_COUNT; }
/* The functional op of an in-place entry (op itself otherwise). */
static inline int op_functional(int op) { return op >= KILN_OP_COUNT ? op - KILN_OP_COUNT : op; }

extern const op_info op_table[OP_INDEX_COUNT];

/* The schema text of op: the table's, or for an in-place entry the
 * derived one ("relu_(Tensor(a!) self) -> Tensor(a!)"). Static storage. */
const char *op_schema_text(int op);

/* Alias information from the schemas (Note [Alias annotations], alias.c):
 * the arguments op writes (bit i = argument i), whether it writes argument
 * i, and the argument output `out` may share memory with (-1: fresh). */
unsigned op_written_args(int op);
bool op_writes_arg(int op, int i);
int op_output_alias(int op, int out);
/* The in-place runner of KILN_OP_INPLACE(op) (inplace.c); the derived
 * entries' infer and decompose call these. Same contracts as an entry's
 * infer (the result meta is self's) and decompose. */
int op_inplace_infer(int op, const op_val *args, int n_args, op_meta *outs, int max_outs);
int op_inplace_run(int op, const op_val *args, int n_args, kiln_tensor **outs, int max_outs);
/* Each element of view's position among base's elements (row-major), as a
 * 1-d I64 tensor in the caller's scope; NULL + error (messages start with
 * who) when view reaches memory outside base or memory runs out. */
kiln_tensor *op_view_positions(const kiln_tensor *view, const kiln_tensor *base, const char *who);
/* avg_poolNd of an integer input (pool.c): f (the op's decompose) on the
 * float64 input, truncated toward zero into the input's dtype. */
int op_avg_pool_int(const op_val *args, int n_args, kiln_tensor **outs, int max_outs,
                    int (*f)(const op_val *, int, kiln_tensor **, int));

/* Prototypes of every op's functions (defined in src/ops/<group>.c). */
#define OP(name, ENUM, aten, nin, nargs, flags, schema, doc)                    \
  int op_##name##_infer(const op_val *, int, op_meta *, int);                  \
  int op_##name##_cpu(const op_val *, int, kiln_tensor **, int);               \
  int op_##name##_grad(op_grad_ctx *);                                          \
  int op_##name##_decompose(const op_val *, int, kiln_tensor **, int);
#define EW(name, ENUM, aten, nin, nargs, flags, schema, doc)                    \
  int op_##name##_grad(op_grad_ctx *);                                          \
  extern const op_tile_fn op_##name##_tiles[KILN_DTYPE_COUNT];                  \
  extern const op_tile_src *const op_##name##_tile_srcs[KILN_DTYPE_COUNT];
#include "ops.def"
#undef OP
#undef EW

/* The first op with this aten name ("aten::add"), or -1. */
int op_find(const char *name);
/* The op with this name taking n_args arguments, or -1. */
int op_find_arity(const char *name, int n_args);

/* The schema's view of argument i: type without alias annotations
 * ("Tensor", "int[]", "Scalar?"), name, default text (NULL if none). */
const char *op_arg_type(int op, int i);
const char *op_arg_name(int op, int i);
const char *op_arg_default(int op, int i);
int op_schema_n_args(int op);
/* Is argument i of type Scalar or Scalar? (a number that lazy tensors
 * treat as device data rather than a constant). */
bool op_arg_is_scalar(int op, int i);

/* Runs op on args: dispatches to lazy recording when any tensor argument is
 * lazy, else infers, allocates and runs the CPU kernel, then records
 * autograd if grad mode is on and an input requires grad. Writes new
 * references into outs (registered with the current scope) and returns
 * their count, or a negative kiln_status with the error set. */
int op_call(int op, const op_val *args, int n_args, kiln_tensor **outs, int max_outs);
/* Runs elementwise op writing its result into out (contiguous, of the
 * result's shape and dtype), which may be one of the inputs' tensors; or an
 * OPF_SELF_OUT op writing into out, which must then be its self (args[0])
 * and share no storage with its other tensor arguments. No autograd, no
 * lazy recording: the caller checks neither applies. < 0 (error set, out
 * untouched) when out does not fit. */
int op_call_into(int op, const op_val *args, int n_args, kiln_tensor *out);
/* op_call for single-output ops: the output or NULL. */
kiln_tensor *op_call1(int op, const op_val *args, int n_args);

/* The outputs' metas of one call: the prologue eager dispatch (op_call)
 * and lazy recording share. v points at small, or at an array for a
 * LIST_OUT op; do not copy the struct. */
typedef struct op_out_metas {
  op_meta *v;
  op_meta small[4];
} op_out_metas;
/* Infers the outputs of op (which has an infer function) on args into m
 * and checks they fit max_outs. Returns their count, or < 0 with the error
 * set. Either way call op_out_metas_free(m) when done with m->v. */
int op_infer_outs(int op, const op_val *args, int n_args, int max_outs, op_out_metas *m);
void op_out_metas_free(op_out_metas *m);

/* Hooks installed by higher layers (Note [Hooks] in src/core/core.h). */
/* autograd: record a backward node for outs; returns < 0 on error. */
extern int (*op_autograd_hook)(int op, const op_val *args, int n_args,
                               kiln_tensor **outs, int n_outs);
/* autograd: is t a leaf (no grad_fn)? */
extern bool (*op_is_leaf_hook)(const kiln_tensor *t);
/* lazy: kiln_copy_ into or from a lazy tensor (rebinds the destination). */
extern kiln_status (*op_lazy_copy_hook)(kiln_tensor *dst, const kiln_tensor *src);
/* lazy: record a node instead of running; same contract as op_call. */
extern int (*op_lazy_hook)(int op, const op_val *args, int n_args,
                           kiln_tensor **outs, int max_outs);
/* autograd: self takes over result's history (rebase_history, Note
 * [In-place autograd] in inplace.c); < 0 on error. */
extern int (*op_rebase_history_hook)(kiln_tensor *self, kiln_tensor *result);
/* autograd: is t a view (made by a view op) of another tensor (1, or 0)?
 * *base: the root base it recorded, else NULL. < 0 (error set): t is a
 * view no in-place op may write while recording. */
extern int (*op_view_of_hook)(const kiln_tensor *t, kiln_tensor **base);
/* autograd: result's grad_fn saves self, just written with result, as its
 * output at self's current version, instead of result (Note [In-place
 * saved result] in inplace.c); < 0 on error. */
extern int (*op_saved_result_hook)(kiln_tensor *self, kiln_tensor *result);
/* lazy: an in-place op's write of result into lazy self (a new version;
 * through a view, its base too: Note [Lazy views] in src/lazy/views.c). */
extern int (*op_lazy_write_hook)(kiln_tensor *self, kiln_tensor *result);
/* autograd: outs of an op on in that autograd did not record, those
 * sharing in's memory, record in's root base (Note [Views without
 * history] in src/autograd/views.c); < 0 on out of memory. */
extern int (*op_view_base_hook)(kiln_tensor *in, kiln_tensor **outs, int n_outs);
/* autograd: does t require grad, a view whose base came to (set then)? */
extern bool (*op_view_grad_hook)(kiln_tensor *t);
/* Grad mode (thread-local); autograd's kiln_set_grad_enabled writes it. */
extern _Thread_local bool op_grad_enabled;

/* Number of input slots of a call and the tensor in each (see op_grad_ctx). */
int op_slots(const op_val *args, int n_args, kiln_tensor **slot_tensors, int max);

/* ---- shared kernel helpers --------------------------------------------- */
/* The tensor of an optional argument, or NULL for None (borrowed). */
static inline kiln_tensor *op_opt_tensor(const op_val *v) {
  return v->tag == OP_VAL_TENSOR ? v->t : NULL;
}
/* t [C] viewed as [1, C, 1, ...] for an input of ndim dims (batch_norm.c);
 * in the caller's scope, NULL with the error set on failure. */
kiln_tensor *op_per_channel(kiln_tensor *t, int ndim, int64_t c);
/* aten::batch_norm on its 9 arguments a (batch_norm.c): res[0] the result;
 * res[1], res[2] the batch mean and rstd [C] when training ran the fused
 * kernel, else NULL. In the caller's scope; < 0 with the error set. */
int op_batch_norm_impl(const op_val *a, kiln_tensor *res[3]);
/* A loss reduced as at::Reduction r says (0 none, 1 mean, 2 sum;
 * loss_extra.c); l itself for none, NULL with "fn: ..." for another value. */
kiln_tensor *op_loss_reduce(const char *fn, kiln_tensor *l, const op_val *r);
/* Elementwise inference and kernel driver for OPF_ELEMENTWISE entries. */
int op_ew_infer(int op, const op_val *args, int n_args, op_meta *outs);
int op_ew_run(int op, const op_val *args, int n_args, kiln_tensor *out);
/* Broadcast two shapes; < 0 with message naming fn on mismatch. */
int op_broadcast_shapes(const char *fn, int na, const int64_t *a, int nb,
                        const int64_t *b, int *nout, int64_t *out);
/* The compute dtype of elementwise operands, with PyTorch's three tiers:
 * dimensioned tensors, 0-d tensors, wrapped numbers. */
kiln_dtype op_result_type(const op_val *operands, int n);
/* Meta of a tensor argument (for infer functions). */
void op_meta_of(const kiln_tensor *t, op_meta *m);
/* Argument checks for infer functions: a tensor (stored in *t if t is not
 * NULL) or an int; < 0 with "fn: expected a tensor for 'name', got ...". */
int op_arg_tensor(const char *fn, const op_val *a, const char *name, kiln_tensor **t);
int op_arg_int(const char *fn, const op_val *a, const char *name, int64_t *out);
/* Formats "Float[4, 3]" of a tensor arg, "None"/number otherwise. */
char *op_val_desc(const op_val *v, char *buf, size_t n);
/* layer_norm's argument checks, as PyTorch's (layer_norm_kernel.c):
 * normalized_shape `shape` (an int list, or one int) must end x's shape,
 * weight and bias (args `wb[0]`, `wb[1]`) be None or tensors of that shape;
 * *k and *ns (pointing into shape) give it. < 0 with the error set. */
int op_check_norm_shape(const char *fn, const kiln_tensor *x, const op_val *shape,
                        const op_val wb[2], int *k, const int64_t **ns);

/* dst[i] = src[i] over dst's shape (src broadcast, dtypes converted). */
void op_copy_into(kiln_tensor *dst, const kiln_tensor *src);
/* TorchScript ScalarType codes: 0 Byte, 1 Char, 2 Short, 3 Int, 4 Long,
 * 5 Half, 6 Float, 7 Double, 11 Bool, 15 BFloat16. */
int op_dtype_from_code(int64_t code, kiln_dtype *out);
int op_dtype_code(kiln_dtype dt);
/* 0 when op takes its arguments' dtypes; < 0 with "<op>: not implemented
 * for dtype <name>" when one is an extended dtype it does not handle
 * (Note [Extended dtypes], dtype_gate.c). */
int op_dtype_gate(int op, const op_val *args, int n_args);
/* Widening (Note [Widening], widen.c): the NARROW rules of ops.def. */
enum { NW_HALF = 1, NW_INT = 2, NW_INT_LONG = 4, NW_SAME = 8 };
/* op's NW_* rule (0: none). */
unsigned op_narrow_rule(int op);
/* Whether op's rule takes the narrow dtype dt. */
bool op_widen_takes(int op, kiln_dtype dt);
/* Whether op runs widened: it has a rule and a narrow tensor argument. */
bool op_widens(int op, const op_val *args, int n_args);
/* op's infer on wide stand-ins, the results' dtypes narrowed by its rule;
 * returns the number of results or < 0 (error set). */
int op_widen_infer(int op, const op_val *args, int n_args, op_meta *outs, int max_outs);
/* op's kernel on wide copies of the CPU arguments; fills outs with new
 * tensors of the narrowed dtypes (owned by the caller, not yet in a
 * scope). Returns their number, or < 0 (error set) with none made. */
int op_widen_run(int op, const op_val *args, int n_args, kiln_tensor **outs, int max_outs);
/* op's decomposition on `to` copies, results cast back (as a decompose
 * function: results in the scope); the number of results or < 0. */
int op_widen_decompose(int op, const op_val *args, int n_args, kiln_tensor **outs, int max_outs);

/* C[M, N] = alpha * op(A) @ op(B) + beta * C, row-major, float32/64, with
 * the threading of Note [BLAS threads] (gemm.c). */
void op_gemm(kiln_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
             const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
             int64_t ldc);

/* A GEMM epilogue: applied to each rows x cols block of C (row stride
 * ldc) once the GEMM has finished it, while it is in cache; the blocks
 * partition C, each passed once. */
typedef void (*op_gemm_epilogue)(void *C, int64_t rows, int64_t cols, int64_t ldc, void *ctx);

/* kiln's own float32 GEMM (Note [kiln sgemm], sgemm.c): C = alpha op(A)
 * op(B) + beta D, row-major, on the calling thread; D is C when NULL, else
 * row i of D starts at D + i * ldd (ldd 0 repeats one row: a bias) and may
 * be C itself. ep (may be NULL) runs on each row block of C after its last
 * K slice (Note [Block epilogue]). Returns false (and touches nothing) when
 * the CPU level (Note [CPU levels]) has no kernel (baseline), a size is not
 * positive, or its packing buffers cannot be allocated; the caller then
 * uses BLAS. */
#define OP_SGEMM_NATIVE (core_cpu_level() >= CORE_CPU_AVX2)
bool op_sgemm_native(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                     const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                     const float *D, int64_t ldd, float *C, int64_t ldc, op_gemm_epilogue ep,
                     void *ep_ctx);
/* The AVX2+FMA kernel behind op_sgemm_native (sgemm_avx2.c), same contract. */
bool op_sgemm_avx2(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                   const float *D, int64_t ldd, float *C, int64_t ldc, op_gemm_epilogue ep,
                   void *ep_ctx);
/* The current level's micro-tile: its rows (rows) or columns, so that
 * op_gemm's threads split C on whole panels (16 where BLAS runs). */
int op_sgemm_panel(bool rows);
/* This thread's packing buffer `which` (0: A, 1: B), grown to at least n
 * floats, 64-byte aligned, kept for the thread's life (Note [Thread exit]);
 * NULL when it cannot grow. */
float *op_sgemm_pack(int which, size_t n);

/* Note [Packed B cache] (sgemm_pack_cache.c): packed B panels reused
 * across products on one weight inside a scope. */
typedef struct op_pack_src {
  uint64_t uid, epoch;
  uint32_t version;
  const char *lo, *hi; /* the bytes of B's storage */
} op_pack_src;
typedef struct op_pack_entry op_pack_entry;
/* Opens and closes a cache scope on this thread (they nest; the outermost
 * end frees the scope's entries). Never fail. */
void op_pack_scope_begin(void);
void op_pack_scope_end(void);
/* Fills *src to name b as a GEMM's B operand (zero, i.e. not cached,
 * outside a scope or for a tensor without CPU memory). */
void op_pack_src_of(const kiln_tensor *b, op_pack_src *src);
/* Makes *src (NULL: none) this thread's current B source for the kernels,
 * returning the previous one to restore. */
op_pack_src op_pack_src_swap(const op_pack_src *src);
/* The cache entry for the packed panels (n floats) of block (jc, pc, kc,
 * nc) of B under the current source and kernel: *panels points at them,
 * *ready says whether they are filled (else the caller packs into them);
 * NULL (nothing set) when not cached. Pinned until op_pack_put (NULL ok). */
op_pack_entry *op_pack_get(const float *B, int64_t ldb, bool tb, int64_t jc, int64_t pc,
                           int64_t kc, int64_t nc, int kernel, size_t n, float **panels,
                           bool *ready);
void op_pack_put(op_pack_entry *e);
/* Lookups that hit so far, and the entries held now (for tests). */
void op_pack_stats(long *n_hits, int *n_entries);
/* The panels allocated so far rather than taken from the recycling pool,
 * and the bytes the pool holds now (Note [Packed B cache]). */
void op_pack_pool_stats(long *n_fresh, size_t *pooled_bytes);

/* The addend of a GEMM, C = alpha op(A) op(B) + beta D: D[i, j] is at
 * data + (i * rs + j * cs) elements (a 0 stride broadcasts, as addmm's
 * bias row), in C's dtype. It may be C itself (same strides), nothing
 * else that C overlaps. */
typedef struct op_gemm_addend {
  const void *data;
  int64_t rs, cs;
} op_gemm_addend;

/* op_gemm with an addend (NULL: C itself; read only when beta != 0) and an
 * epilogue (ep may be NULL). */
void op_gemm_ep(kiln_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                const void *A, int64_t lda, const void *B, int64_t ldb, double beta,
                const op_gemm_addend *add, void *C, int64_t ldc, op_gemm_epilogue ep,
                void *ep_ctx);

/* Gradient helpers written with the public API (no op entries of their own). */
/* Sums g down to the given shape (undoing broadcasting); new ref in scope. */
kiln_tensor *op_sum_to(kiln_tensor *g, int ndim, const int64_t *shape);

#define OP_PARALLEL_MIN 32768 /* elements before OpenMP splits a loop */

#endif
