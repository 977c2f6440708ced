/* src/autograd/autograd.h: autograd's internal view: backward nodes and
 * edges, per-tensor autograd state, and the engine's entry points. */
#ifndef KILN_AUTOGRAD_H
#define KILN_AUTOGRAD_H

#include "ops/op.h"

typedef struct ag_node ag_node;

typedef struct ag_edge {
  ag_node *node;  /* owned reference; NULL = no gradient flows there */
  int input_nr;   /* which of node's gradient inputs this feeds */
} ag_edge;

/* Computes gradients for the node's next edges from the gradients of its
 * forward outputs. grads_in[i] may be NULL (no gradient reached output i).
 * needs[j] says whether next edge j wants a gradient. Writes new references
 * (or NULL) into grads_out. */
typedef int (*ag_apply_fn)(ag_node *n, kiln_tensor *const *grads_in,
                           const bool *needs, kiln_tensor **grads_out);

typedef struct ag_hook {
  int output_nr;                      /* tensor hooks: which output */
  kiln_tensor *(*fn)(kiln_tensor *grad, void *ud);
  void *ud;
} ag_hook;

typedef struct ag_saved {
  kiln_tensor *t;        /* owned: the input, or a data-less alias of an output */
  uint32_t version;      /* storage version when saved */
  bool is_output;
} ag_saved;

/* Note [Node kinds]: an op node (op >= 0) runs op_table[op].grad on its
 * saved arguments; AccumulateGrad (op == AG_ACCUMULATE) adds into a leaf's
 * .grad; other kinds (DifferentiableGraph backward, ...) bring their own
 * apply and release. */
enum { AG_ACCUMULATE = -1, AG_CUSTOM = -2 };

struct ag_node {
  int refcount;
  int op;
  const char *name;
  uint64_t seq;          /* creation order; AccumulateGrad is UINT64_MAX */
  int n_inputs;          /* gradient inputs = forward outputs */
  op_meta *in_meta;      /* shape/dtype of each forward output */
  int n_next;
  ag_edge *next;         /* one per input slot of the forward */
  ag_apply_fn apply;
  void (*release_fn)(ag_node *n);  /* frees custom state */
  void *state;           /* custom state */
  /* op nodes: saved arguments (tensors in args point into saved[]) */
  op_val *args;
  int n_args;
  ag_saved *saved;
  int n_saved;
  ag_saved *saved_outs;  /* when OPF_SAVE_OUT (or _AUX_OUTS: [0] unused) */
  bool freed;            /* saved state dropped after a backward */
  /* AccumulateGrad */
  kiln_tensor *leaf;     /* owned */
  /* tensor hooks on outputs (non-leaf tensors) */
  ag_hook *pre_hooks;
  int n_pre_hooks;
  /* retain_grad: outputs whose gradient is stored in .grad (weak) */
  kiln_tensor **retainers;
  int n_retainers;
  char *trace;           /* anomaly mode: the forward op that made it */
  /* engine scratch (valid during one backward) */
  uint64_t task;
  int deps;
  bool needed;
  kiln_tensor **inbuf;
  /* AccumulateGrad: gradient pairs (x, y) meaning x^T @ y, not yet
   * multiplied (Note [Factored weight gradients] in factored.c) */
  kiln_tensor **fx, **fy;
  int n_factors, cap_factors;
  int64_t factor_rows;
};

/* Note [Factored weight gradients] (factored.c). ag_factors_add keeps new
 * references to x [K, M] and y [K, N] on n (< 0 on OOM, nothing kept);
 * ag_factors_take multiplies the pairs held, cat(x)^T @ cat(y) (a tensor
 * in the caller's scope; NULL with the error set on failure, or with
 * none held), and drops them; ag_factors_drop drops them unmultiplied. */
int ag_factors_add(ag_node *n, kiln_tensor *x, kiln_tensor *y);
kiln_tensor *ag_factors_take(ag_node *n);
void ag_factors_drop(ag_node *n);
/* How many products of several pairs ag_factors_take has made (tests). */
long ag_factors_joined(void);
/* Hands the gradient x^T @ y for input input_nr of n to the running
 * backward as factors: 1 if taken (the engine multiplies them with the
 * other pairs for that AccumulateGrad when it runs), 0 if not (n is not
 * a leaf's AccumulateGrad that this plain backward accumulates, or shapes
 * do not fit: the caller multiplies), < 0 on failure. Borrows x, y. */
int ag_accumulate_factored(ag_node *n, int input_nr, kiln_tensor *x, kiln_tensor *y);

/* Per-tensor autograd state (core's kiln_tensor.ag). */
typedef struct ag_meta {
  kiln_tensor *grad;     /* owned */
  ag_node *grad_fn;      /* owned */
  int output_nr;
  ag_node *grad_acc;     /* weak: the leaf's AccumulateGrad, if any */
  bool retains_grad;
  ag_hook *hooks;        /* leaf tensor hooks */
  int n_hooks;
  ag_hook *post_hooks;   /* post-accumulate hooks */
  int n_post_hooks;
  char *name;            /* optional, for the DOT dump */
  kiln_tensor *base;     /* owned: the tensor whose memory a view op's output views
                            (its root base; Note [CopySlices] in src/ops/inplace.c) */
  bool is_view;          /* made by a view op (base may be dropped) */
  bool view_no_grad;     /* made under no_grad (Note [Views without history], views.c) */
  uint64_t made_seq;     /* 1 + the seq of the node that made it (0: made without
                            history); no older node can have saved it (inplace.c) */
  uint32_t view_rebases; /* its storage's ag_rebases when its grad_fn was made
                            (Note [View regeneration] in views.c) */
} ag_meta;

/* The tensor's meta, created on first use (NULL only on OOM). */
ag_meta *ag_meta_get(kiln_tensor *t);
/* A new node (refcount 1) with n_next empty edges. */
ag_node *ag_node_new(int op, const char *name, int n_inputs, int n_next);
void ag_node_retain(ag_node *n);
void ag_node_release(ag_node *n);
/* The edge through which gradient for t flows: its grad_fn, or its
 * (created on demand) AccumulateGrad. node NULL if t needs no grad. */
int ag_gradient_edge(kiln_tensor *t, ag_edge *out);
/* Makes outs[i] (floating ones) outputs of node n: 0, or KILN_ERR_NOMEM
 * with no output changed. */
int ag_set_history(kiln_tensor **outs, int n_outs, ag_node *n);
/* Unpacks a saved tensor, checking its version. NULL + error if modified. */
kiln_tensor *ag_unpack(ag_node *n, ag_saved *s, int index);
/* Installs autograd's hooks into the op layer and core (idempotent). */
void ag_init(void);
bool ag_anomaly_enabled(void);
/* Is the running backward recording itself (create_graph)? */
bool ag_engine_create_graph(void);
/* op_autograd_hook: attaches a backward node to an op's outputs. */
int ag_record(int op, const op_val *args, int n_args, kiln_tensor **outs, int n_outs);
/* The root base a new view of in records (borrowed): in's own when in is
 * a view (NULL and *known false when in dropped it), else in. */
kiln_tensor *ag_view_root(kiln_tensor *in, bool *known);
/* Note [Views without history] (views.c): the outputs of a view op on in
 * that autograd did not record (and of an op that handed back in's memory)
 * record in's root base. 0, or KILN_ERR_NOMEM (the outputs are the
 * caller's to release). */
int ag_record_view_base(kiln_tensor *in, kiln_tensor **outs, int n_outs);
/* Is t a view made with grad mode on whose base came to require grad by a
 * recorded write made after it (so t requires grad too)? */
bool ag_view_grad_pending(const kiln_tensor *t);
/* t->requires_grad, set first when ag_view_grad_pending(t). */
bool ag_view_adopt_grad(kiln_tensor *t);
/* A view op's output t (base recorded): its history is current. */
void ag_note_view(kiln_tensor *t);
/* Note [View regeneration]: a view whose base's history was rebased since
 * its own was made gets its grad_fn regenerated from the base's (0), or,
 * when it no longer knows its base, fails with an error saying so (< 0). */
int ag_refresh_view(kiln_tensor *t);
/* apply of op nodes: runs op_table[op].grad on the saved arguments. */
int ag_op_apply(ag_node *n, kiln_tensor *const *grads_in, const bool *needs,
                kiln_tensor **grads_out);

#endif
