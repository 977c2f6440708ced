/* src/lazy/lazy.h: lazy tensors, internal view. A LAZY kiln_tensor has no
 * storage; it stands for one output of a lazy_node: an op recorded through
 * the op table, or device data (a CPU tensor). Nothing runs until exec's
 * kiln_mark_step (or a read) compiles and runs the pending graph. */
#ifndef KILN_LAZY_H
#define KILN_LAZY_H

#include "autograd/autograd.h"

enum { LAZY_DATA = -1 };

/* How each argument of a recorded op is bound:
 * constants are part of the node (and its hash); tensors and Scalars are
 * operands: edges to other nodes. A Scalar operand is a 0-d device data
 * node whose value is not hashed, so changing a learning rate between
 * steps never recompiles (as LTC's scalar device data). */
enum { LAZY_ARG_CONST = 0, LAZY_ARG_TENSOR, LAZY_ARG_TENSORS, LAZY_ARG_SCALAR };

typedef struct lazy_node lazy_node;

typedef struct lazy_value {
  lazy_node *node;  /* owned reference */
  int index;
} lazy_value;

struct lazy_node {
  int refcount;
  int op;                /* op-table index or LAZY_DATA */
  int n_args;
  op_val *args;          /* constants (owned copies); operand args unused */
  uint8_t *arg_kind;     /* LAZY_ARG_* per argument */
  int *arg_operand;      /* first operand index of each operand argument */
  int n_operands;
  lazy_value *operands;
  int n_outs;
  op_meta *metas;
  uint64_t hash;         /* Note [Lazy hashing] */
  uint64_t shape_free_hash; /* the same without device-data shapes (recompile reasons) */
  kiln_tensor *data;     /* LAZY_DATA: the CPU tensor (owned) */
  uint8_t scalar_tag;    /* LAZY_DATA of a Scalar: OP_VAL_INT/FLOAT/BOOL */
  uint64_t seq;          /* creation order on its thread (Note [Recorded order]) */
  uint64_t visit;        /* traversal scratch */
  int post_id;           /* traversal scratch */
};

/* One view op between a lazy view and its base (Note [Lazy views]). */
typedef struct lazy_view_step {
  lazy_node *node;       /* owned: the view op as recorded */
  int index;             /* its output */
  int arg;               /* its argument that is the viewed tensor */
} lazy_view_step;

/* Per-tensor lazy state (kiln_tensor.lazy). */
typedef struct lazy_state {
  kiln_tensor *owner;    /* weak */
  lazy_value value;
  uint64_t id;           /* creation order (sync order, as LTC's unique id) */
  struct lazy_state *prev, *next;  /* the live-tensor registry */
  kiln_tensor *view_base; /* owned: a view's root base (NULL if not a view) */
  lazy_view_step *view_steps; /* core_alloc'd: base to view, n_view_steps */
  int n_view_steps;
  int n_views;            /* live states whose view_base is this owner (refreshes skip none) */
} lazy_state;

static inline lazy_state *lazy_of(const kiln_tensor *t) { return (lazy_state *)t->lazy; }

void lazy_node_retain(lazy_node *n);
void lazy_node_release(lazy_node *n);
/* A device-data node holding cpu (retained). NULL on OOM. */
lazy_node *lazy_data_node(kiln_tensor *cpu);
/* Makes n (a device-data node, e.g. a symbolic one made beforehand so
 * that nothing is allocated after a graph ran) hold cpu (retained). */
void lazy_data_node_fill(lazy_node *n, kiln_tensor *cpu);
/* A device-data node without data: a symbolic input (the JIT's
 * differentiation traces over these). NULL on OOM. */
lazy_node *lazy_symbolic_node(const op_meta *m);
/* A new LAZY tensor for value (node retained), registered as live. */
kiln_tensor *lazy_tensor_new(lazy_node *node, int index, const op_meta *m);
/* Rebinds t to value (e.g. after a sync or an in-place update). */
void lazy_rebind(kiln_tensor *t, lazy_node *node, int index);
/* An in-place op's write of r into lazy self (op_lazy_write_hook): self
 * is rebound to r, or, when self is a view, its root base is rebuilt;
 * then the base's live views are refreshed (Note [Lazy views], views.c).
 * < 0 with the error set (a view kind that cannot be written back). */
int lazy_write(kiln_tensor *self, kiln_tensor *r);
/* After lazy_record made outs of node: a view op's outputs remember their
 * root base and view steps (Note [Lazy views]). < 0 on OOM (error set). */
int lazy_note_view(lazy_node *node, const op_val *args, kiln_tensor *const *outs, int n_outs);
/* Rebinds every live view of base to its view steps replayed on base's
 * value now (after base was written). < 0 with the error set. */
int lazy_refresh_views(kiln_tensor *base);
/* Releases s's view record (the state itself stays). */
void lazy_drop_view(lazy_state *s);
/* The lazy value of a tensor argument: its node if lazy, else an upload
 * of the CPU tensor as device data. Owned ref in *out. */
int lazy_value_of(kiln_tensor *t, lazy_value *out);
/* Live lazy tensors, in creation order (the registry's head). */
lazy_state *lazy_live_first(void);
bool lazy_is_pending(const kiln_tensor *t);
/* Post-order of the nodes reachable from roots (each once). Returns a
 * core_alloc'd array and its length in *n; NULL on OOM. Numbers nodes
 * 0..n-1 in post_id. */
lazy_node **lazy_post_order(lazy_node *const *roots, int n_roots, int *n);

/* ---- metrics (exec's mark_step updates them too) --------------------- */
typedef enum lazy_metric {
  LAZY_M_MARK_STEP,
  LAZY_M_UNCACHED_COMPILE,
  LAZY_M_CACHED_COMPILE,
  LAZY_M_EXECUTE_GRAPH,
  LAZY_M_DEVICE_DATA_CACHE_MISS,
  LAZY_M_CREATE_LAZY_TENSOR,
  LAZY_M_DESTROY_LAZY_TENSOR,
  LAZY_M_SYNC_TENSORS_TO_DATA,
  LAZY_M_DONATED_BUFFERS, /* graph inputs whose buffers mark_step handed over */
  LAZY_M_COMPILE_TIME,   /* timers: total ns */
  LAZY_M_EXECUTE_TIME,
  LAZY_M_COUNT
} lazy_metric;

void lazy_metric_add(lazy_metric m, int64_t v);
/* Records a recompile reason (copied). */
void lazy_note_recompile(const char *reason);

#endif
