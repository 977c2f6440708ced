/* src/lazy/record.c: lazy nodes and tensors: recording ops through the op
 * table (op_lazy_hook), device data, node hashing, and the live-tensor
 * registry that kiln_mark_step syncs.
 *
 * Note [Lazy hashing]: a node's hash combines its op, its constant
 * arguments, and its operands' hashes; a device-data node hashes its dtype
 * and shape, never its values. So every step of a training loop, whose
 * tensors change values but not shapes, hashes the same and hits the
 * compile cache. */
#include <string.h>

#include "lazy.h"

/* Note [Threads] (include/kiln.h): each thread has a lazy device of its
 * own: its live tensors, node ids, scalar cache and visit epochs (and the
 * compile cache and metrics, exec/lazy_sync.c, metrics.c) are
 * thread-local; a lazy tensor is used only on the thread that made it. */
static _Thread_local lazy_state *live_head, *live_tail;
static _Thread_local uint64_t next_id = 1;

/* ---- nodes ------------------------------------------------------------------ */

void lazy_node_retain(lazy_node *n) {
  if (n) n->refcount++;
}

void lazy_node_release(lazy_node *n) {
  /* iterative: long chains (an unrolled RNN) must not recurse deeply */
  lazy_node *small[32], **stack = small;
  int sp = 0, cap = 32;
  if (!n) return;
  stack[sp++] = n;
  while (sp) {
    lazy_node *x = stack[--sp];
    if (--x->refcount > 0) continue;
    for (int i = 0; i < x->n_operands; i++) {
      lazy_node *c = x->operands[i].node;
      if (!c) continue;
      if (sp == cap) {
        lazy_node **bigger = core_alloc((size_t)cap * 2 * sizeof *bigger);
        if (!bigger) {
          lazy_node_release(c);
          continue;
        }
        memcpy(bigger, stack, (size_t)sp * sizeof *stack);
        if (stack != small) core_free(stack);
        stack = bigger;
        cap *= 2;
      }
      stack[sp++] = c;
    }
    for (int i = 0; i < x->n_args; i++) {
      if (x->arg_kind[i] != LAZY_ARG_CONST) continue;
      op_val *a = &x->args[i];
      if (a->tag == OP_VAL_INTS) core_free((void *)a->ints.v);
      if (a->tag == OP_VAL_STR) core_free((void *)a->s);
    }
    kiln_release(x->data);
    core_free(x); /* and its arrays (Note [One block per node]) */
  }
  if (stack != small) core_free(stack);
}

/* Note [One block per node]: a training step records ~900 nodes and frees
 * the last step's ~900 when kiln_mark_step rebinds its roots; a node and
 * its five arrays (constants, argument kinds, operand positions, operands,
 * output metas) are one allocation, not six, which took a third of
 * mark_step's time outside the graph's run (resnet18's step: the rebind's
 * release of the old graph 0.26 ms). Arrays of at least one element, each
 * at its type's alignment; the counts are an op's arity and outputs. */
static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static _Thread_local uint64_t next_seq;

static lazy_node *node_alloc(int n_args, int n_operands, int n_outs) {
  if (n_args < 0 || n_operands < 0 || n_outs < 0 || n_args > 4096 || n_operands > 4096 ||
      n_outs > 4096) {
    core_error(KILN_ERR_INVALID, "lazy: a node of %d arguments, %d operands, %d outputs", n_args,
               n_operands, n_outs);
    return NULL;
  }
  size_t na = (size_t)(n_args ? n_args : 1), no = (size_t)(n_operands ? n_operands : 1),
         nm = (size_t)(n_outs ? n_outs : 1);
  size_t o_args = align_up(sizeof(lazy_node), _Alignof(op_val));
  size_t o_metas = align_up(o_args + na * sizeof(op_val), _Alignof(op_meta));
  size_t o_ops = align_up(o_metas + nm * sizeof(op_meta), _Alignof(lazy_value));
  size_t o_argop = align_up(o_ops + no * sizeof(lazy_value), _Alignof(int));
  size_t o_kind = o_argop + na * sizeof(int);
  char *b = core_calloc(1, o_kind + na);
  if (!b) return NULL;
  lazy_node *n = (lazy_node *)b;
  n->refcount = 1;
  n->seq = ++next_seq;
  n->n_args = n_args;
  n->n_operands = n_operands;
  n->n_outs = n_outs;
  n->args = (op_val *)(b + o_args);
  n->metas = (op_meta *)(b + o_metas);
  n->operands = (lazy_value *)(b + o_ops);
  n->arg_operand = (int *)(b + o_argop);
  n->arg_kind = (uint8_t *)(b + o_kind);
  return n;
}

static uint64_t data_hash(const kiln_tensor *t, uint8_t scalar_tag, bool with_shape) {
  uint64_t h = core_hash_mix(0x1a2b3c4d5e6f7788ull, (uint64_t)t->dtype);
  h = core_hash_mix(h, scalar_tag);
  if (with_shape) {
    h = core_hash_mix(h, (uint64_t)t->ndim);
    for (int i = 0; i < t->ndim; i++) h = core_hash_mix(h, (uint64_t)t->shape[i]);
  }
  return h;
}

lazy_node *lazy_data_node(kiln_tensor *cpu) {
  lazy_node *n = node_alloc(0, 0, 1);
  if (!n) return NULL;
  n->op = LAZY_DATA;
  lazy_data_node_fill(n, cpu);
  return n;
}

void lazy_data_node_fill(lazy_node *n, kiln_tensor *cpu) {
  kiln_release(n->data);
  n->data = kiln_retain(cpu);
  op_meta_of(cpu, &n->metas[0]);
  n->hash = data_hash(cpu, 0, true);
  n->shape_free_hash = data_hash(cpu, 0, false);
}

lazy_node *lazy_symbolic_node(const op_meta *m) {
  lazy_node *n = node_alloc(0, 0, 1);
  if (!n) return NULL;
  n->op = LAZY_DATA;
  n->metas[0] = *m;
  uint64_t h = core_hash_mix(0x1a2b3c4d5e6f7788ull, (uint64_t)m->dtype);
  h = core_hash_mix(h, 0);
  n->shape_free_hash = h;
  h = core_hash_mix(h, (uint64_t)m->ndim);
  for (int i = 0; i < m->ndim; i++) h = core_hash_mix(h, (uint64_t)m->shape[i]);
  n->hash = h;
  return n;
}

/* Scalars: a small value-keyed cache of 0-d device data, as LTC's
 * device-data cache; a miss bumps DeviceDataCacheMiss.
 *
 * Note [Scalar cache eviction]: a value used twice in one step must be
 * one node both times, or the step's graph changes shape (and recompiles)
 * with the cache's state. So a miss replaces only an entry nothing but the
 * cache refers to (refcount 1: no pending IR uses it), taken round-robin;
 * when every entry is in use the cache grows. */
enum { SCALAR_CACHE_MIN = 64 };
typedef struct scalar_entry {
  uint8_t tag;
  uint64_t bits;
  lazy_node *node;
} scalar_entry;
static _Thread_local scalar_entry *scalar_cache;
static _Thread_local int scalar_cache_cap, scalar_cache_next;

/* Note [Thread exit] (core/thread.c): the exiting thread's scalar cache. */
static void release_scalar_cache(void) {
  for (int i = 0; i < scalar_cache_cap; i++) lazy_node_release(scalar_cache[i].node);
  core_free(scalar_cache);
  scalar_cache = NULL;
  scalar_cache_cap = scalar_cache_next = 0;
}

/* A slot for a new entry (its old node released), or -1 on OOM. */
static int scalar_slot(void) {
  for (int k = 0; k < scalar_cache_cap; k++) {
    int i = (scalar_cache_next + k) % scalar_cache_cap;
    lazy_node *n = scalar_cache[i].node;
    if (!n || n->refcount == 1) {
      scalar_cache_next = (i + 1) % scalar_cache_cap;
      lazy_node_release(n);
      scalar_cache[i].node = NULL;
      return i;
    }
  }
  int cap = scalar_cache_cap ? 2 * scalar_cache_cap : SCALAR_CACHE_MIN;
  scalar_entry *c = core_realloc(scalar_cache, (size_t)cap * sizeof *c);
  if (!c) return -1;
  memset(c + scalar_cache_cap, 0, (size_t)(cap - scalar_cache_cap) * sizeof *c);
  int i = scalar_cache_cap;
  core_thread_arm();
  scalar_cache = c;
  scalar_cache_cap = cap;
  scalar_cache_next = (i + 1) % cap;
  return i;
}

static lazy_node *scalar_node(const op_val *v) {
  double d = op_val_num(v);
  uint64_t bits;
  memcpy(&bits, &d, sizeof bits);
  for (int i = 0; i < scalar_cache_cap; i++)
    if (scalar_cache[i].node && scalar_cache[i].tag == v->tag && scalar_cache[i].bits == bits) {
      lazy_node_retain(scalar_cache[i].node);
      return scalar_cache[i].node;
    }
  kiln_dtype dt = v->tag == OP_VAL_FLOAT ? KILN_DTYPE_F64
                  : v->tag == OP_VAL_INT ? KILN_DTYPE_I64
                                         : KILN_DTYPE_BOOL;
  kiln_tensor *t = core_tensor_new(0, NULL, dt);
  if (!t) return NULL;
  kiln_fill_(t, d);
  t->storage->version = 0;
  lazy_node *n = lazy_data_node(t);
  kiln_release(t);
  if (!n) return NULL;
  n->scalar_tag = v->tag;
  n->hash = data_hash(n->data, v->tag, true);
  n->shape_free_hash = n->hash;
  lazy_metric_add(LAZY_M_DEVICE_DATA_CACHE_MISS, 1);
  int slot = scalar_slot();
  if (slot >= 0) { /* else uncached: still a valid node */
    scalar_cache[slot].tag = v->tag;
    scalar_cache[slot].bits = bits;
    scalar_cache[slot].node = n;
    lazy_node_retain(n);
  }
  return n;
}

/* ---- lazy tensors and the registry ----------------------------------------- */

static void lazy_free(kiln_tensor *t) {
  lazy_state *s = lazy_of(t);
  if (s->prev) s->prev->next = s->next;
  else live_head = s->next;
  if (s->next) s->next->prev = s->prev;
  else live_tail = s->prev;
  lazy_node_release(s->value.node);
  lazy_drop_view(s);
  core_free(s);
  t->lazy = NULL;
  lazy_metric_add(LAZY_M_DESTROY_LAZY_TENSOR, 1);
}

static void lazy_share(kiln_tensor *dst, const kiln_tensor *src);

static int lazy_record(int op, const op_val *args, int n_args, kiln_tensor **outs,
                       int max_outs);
static kiln_status lazy_copy(kiln_tensor *dst, const kiln_tensor *src);

/* Note [Init]: the lazy layer installs its hooks before main. */
__attribute__((constructor)) static void lazy_ctor(void) {
  core_lazy_free_hook = lazy_free;
  core_lazy_share_hook = lazy_share;
  op_lazy_hook = lazy_record;
  op_lazy_copy_hook = lazy_copy;
  op_lazy_write_hook = lazy_write;
  core_thread_on_exit(release_scalar_cache);
}

kiln_tensor *lazy_tensor_new(lazy_node *node, int index, const op_meta *m) {
  kiln_tensor *t = core_tensor_meta(m->ndim, m->shape, m->dtype);
  lazy_state *s = t ? core_calloc(1, sizeof *s) : NULL;
  if (!s) {
    kiln_release(t);
    return NULL;
  }
  t->device = CORE_DEVICE_LAZY;
  t->lazy = s;
  s->owner = t;
  s->value.node = node;
  s->value.index = index;
  lazy_node_retain(node);
  s->id = next_id++;
  s->prev = live_tail;
  if (live_tail) live_tail->next = s;
  else live_head = s;
  live_tail = s;
  lazy_metric_add(LAZY_M_CREATE_LAZY_TENSOR, 1);
  return t;
}

static void lazy_share(kiln_tensor *dst, const kiln_tensor *src) {
  /* dst is a fresh alias header of src (autograd's saved outputs): give it
   * its own registered state on the same value. */
  lazy_state *from = lazy_of(src);
  op_meta m;
  op_meta_of(src, &m);
  kiln_tensor *tmp = lazy_tensor_new(from->value.node, from->value.index, &m);
  if (!tmp) return;
  dst->device = CORE_DEVICE_LAZY;
  dst->lazy = tmp->lazy;
  lazy_of(dst)->owner = dst;
  tmp->lazy = NULL;
  tmp->device = CORE_DEVICE_CPU;
  kiln_release(tmp);
}

void lazy_rebind(kiln_tensor *t, lazy_node *node, int index) {
  lazy_state *s = lazy_of(t);
  lazy_node_retain(node);
  lazy_node_release(s->value.node);
  s->value.node = node;
  s->value.index = index;
}

lazy_state *lazy_live_first(void) { return live_head; }

bool lazy_is_pending(const kiln_tensor *t) {
  return t->device == CORE_DEVICE_LAZY && lazy_of(t)->value.node->op != LAZY_DATA;
}

int lazy_value_of(kiln_tensor *t, lazy_value *out) {
  if (t->device == CORE_DEVICE_LAZY) {
    *out = lazy_of(t)->value;
    lazy_node_retain(out->node);
    return 0;
  }
  /* a CPU tensor used by a lazy op: upload it as device data (shared if
   * contiguous; a copy otherwise) */
  kiln_tensor *c = t;
  if (!core_is_contiguous(t)) {
    c = core_tensor_new(t->ndim, t->shape, t->dtype);
    if (!c) return KILN_ERR_NOMEM;
    op_copy_into(c, t);
  } else {
    c = core_tensor_view(t->storage, t->dtype, t->ndim, t->shape, t->strides, t->offset);
    if (!c) return KILN_ERR_NOMEM;
  }
  out->node = lazy_data_node(c);
  out->index = 0;
  kiln_release(c);
  return out->node ? 0 : KILN_ERR_NOMEM;
}

/* ---- recording ----------------------------------------------------------------- */

/* Note [Special scalars]: 0 and 1 stay constants (as LTC's
 * handle_special_scalars), so that `x * 1` and `x + 0` fold away and
 * alpha=1 is not an input; every other number is device data. */
static bool is_scalar_operand(int op, int k, const op_val *v) {
  if (!op_val_is_num(v)) return false;
  double d = op_val_num(v);
  if (d == 0.0 || d == 1.0) return false;
  const op_info *info = &op_table[op];
  if ((info->flags & OPF_ELEMENTWISE) && k < info->n_operands) return true;
  return op_arg_is_scalar(op, k);
}

static int lazy_record(int op, const op_val *args, int n_args, kiln_tensor **outs,
                       int max_outs) {
  op_out_metas om;
  int n, rc = 0, n_operands = 0;
  lazy_node *node = NULL;
  if (op == KILN_OP_DETACH) {
    /* no computation: a new tensor on the same value */
    lazy_value v;
    op_meta m;
    if ((rc = lazy_value_of(args[0].t, &v)) < 0) return rc;
    op_meta_of(args[0].t, &m);
    outs[0] = lazy_tensor_new(v.node, v.index, &m);
    lazy_node_release(v.node);
    return outs[0] ? 1 : KILN_ERR_NOMEM;
  }
  n = op_infer_outs(op, args, n_args, max_outs, &om);
  op_meta *metas = om.v;
  if (n < 0) {
    rc = n;
    goto done;
  }
  for (int k = 0; k < n_args; k++) {
    if (args[k].tag == OP_VAL_TENSOR) n_operands++;
    else if (args[k].tag == OP_VAL_TENSORS) n_operands += args[k].ts.n;
    else if (is_scalar_operand(op, k, &args[k])) n_operands++;
  }
  node = node_alloc(n_args, n_operands, n);
  if (!node) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  node->op = op;
  memcpy(node->metas, metas, (size_t)n * sizeof *metas);
  uint64_t h = core_hash_mix(0x5eed, (uint64_t)op), hs = h;
  int oi = 0;
  for (int k = 0; k < n_args; k++) {
    const op_val *a = &args[k];
    node->arg_operand[k] = oi;
    h = core_hash_mix(h, a->tag);
    hs = core_hash_mix(hs, a->tag);
    if (a->tag == OP_VAL_TENSOR || a->tag == OP_VAL_TENSORS) {
      int cnt = a->tag == OP_VAL_TENSOR ? 1 : a->ts.n;
      node->arg_kind[k] = a->tag == OP_VAL_TENSOR ? LAZY_ARG_TENSOR : LAZY_ARG_TENSORS;
      node->args[k].tag = a->tag;
      if (a->tag == OP_VAL_TENSORS) node->args[k].ts.n = cnt;
      for (int j = 0; j < cnt; j++, oi++) {
        kiln_tensor *t = a->tag == OP_VAL_TENSOR ? a->t : a->ts.v[j];
        if ((rc = lazy_value_of(t, &node->operands[oi])) < 0) goto done;
        h = core_hash_mix(core_hash_mix(h, node->operands[oi].node->hash), (uint64_t)node->operands[oi].index);
        hs = core_hash_mix(core_hash_mix(hs, node->operands[oi].node->shape_free_hash),
                 (uint64_t)node->operands[oi].index);
      }
    } else if (is_scalar_operand(op, k, a)) {
      node->arg_kind[k] = LAZY_ARG_SCALAR;
      node->args[k].tag = a->tag;
      node->operands[oi].node = scalar_node(a);
      if (!node->operands[oi].node) {
        rc = KILN_ERR_NOMEM;
        goto done;
      }
      h = core_hash_mix(h, node->operands[oi].node->hash);
      hs = core_hash_mix(hs, node->operands[oi].node->hash);
      oi++;
    } else {
      node->arg_kind[k] = LAZY_ARG_CONST;
      node->args[k] = *a;
      switch (a->tag) {
      case OP_VAL_INT: h = core_hash_mix(h, (uint64_t)a->i); break;
      case OP_VAL_FLOAT: h = core_hash_double(h, a->f); break;
      case OP_VAL_BOOL: h = core_hash_mix(h, a->b); break;
      case OP_VAL_INTS: {
        int64_t *v = core_alloc((size_t)(a->ints.n ? a->ints.n : 1) * sizeof *v);
        if (!v) {
          node->args[k].tag = OP_VAL_NONE;
          rc = KILN_ERR_NOMEM;
          goto done;
        }
        if (a->ints.n) memcpy(v, a->ints.v, (size_t)a->ints.n * sizeof *v); /* v may be NULL */
        node->args[k].ints.v = v;
        h = core_hash_mix(h, (uint64_t)a->ints.n);
        for (int j = 0; j < a->ints.n; j++) h = core_hash_mix(h, (uint64_t)a->ints.v[j]);
        break;
      }
      case OP_VAL_STR:
        node->args[k].s = core_strdup(a->s);
        if (!node->args[k].s) {
          node->args[k].tag = OP_VAL_NONE;
          rc = KILN_ERR_NOMEM;
          goto done;
        }
        h = core_hash_str(h, a->s);
        break;
      default: break;
      }
    }
  }
  node->hash = h;
  node->shape_free_hash = hs;
  memset(outs, 0, (size_t)n * sizeof *outs);
  for (int i = 0; i < n; i++) {
    outs[i] = lazy_tensor_new(node, i, &metas[i]);
    if (!outs[i]) {
      for (int j = 0; j < i; j++) kiln_release(outs[j]);
      rc = KILN_ERR_NOMEM;
      goto done;
    }
  }
  rc = lazy_note_view(node, args, outs, n);
  if (rc < 0) {
    for (int j = 0; j < n; j++) kiln_release(outs[j]);
    goto done;
  }
  rc = n;
done:
  lazy_node_release(node);
  op_out_metas_free(&om);
  return rc;
}

/* kiln_copy_ on a lazy destination: rebind it to the source's value (an
 * optimizer's in-place update keeps the parameter's identity). */
static kiln_status lazy_copy(kiln_tensor *dst, const kiln_tensor *src) {
  char a[160], b[160];
  lazy_value v;
  if (dst->ndim != src->ndim || memcmp(dst->shape, src->shape, (size_t)dst->ndim * sizeof *dst->shape)) {
    /* broadcast or convert through an op so the graph records it */
    kiln_tensor *e = kiln_expand((kiln_tensor *)src, dst->ndim, dst->shape);
    if (!e)
      return core_error(KILN_ERR_INVALID, "copy_: source %s cannot be broadcast to %s",
                        core_tensor_desc(src, a, sizeof a), core_tensor_desc(dst, b, sizeof b));
    kiln_status rc = lazy_copy(dst, e);
    if (core_scope_depth() == 0) kiln_release(e);
    return rc;
  }
  if (src->dtype != dst->dtype) {
    kiln_tensor *c = kiln_to_dtype((kiln_tensor *)src, dst->dtype);
    if (!c) return KILN_ERR_INVALID;
    kiln_status rc = lazy_copy(dst, c);
    if (core_scope_depth() == 0) kiln_release(c);
    return rc;
  }
  int rc = lazy_value_of((kiln_tensor *)src, &v);
  if (rc < 0) return rc;
  if (dst->device != CORE_DEVICE_LAZY)
    return core_error(KILN_ERR_INVALID, "copy_: cannot copy a lazy tensor into a CPU tensor; "
                                        "use kiln_to_cpu");
  if (lazy_of(dst)->view_base) { /* a view: its base takes the copy (Note [Lazy views]) */
    lazy_node_release(v.node);
    return lazy_write(dst, (kiln_tensor *)src);
  }
  lazy_rebind(dst, v.node, v.index);
  lazy_node_release(v.node);
  return lazy_refresh_views(dst); /* the views of dst see the copy */
}

/* ---- traversal -------------------------------------------------------------------- */

static _Thread_local uint64_t visit_epoch = 1;

lazy_node **lazy_post_order(lazy_node *const *roots, int n_roots, int *n_out) {
  int cap = 64, n = 0, sp = 0, scap = 64;
  lazy_node **order = core_alloc((size_t)cap * sizeof *order);
  lazy_node **stack = core_alloc((size_t)scap * sizeof *stack);
  int *pos = core_alloc((size_t)scap * sizeof *pos);
  uint64_t epoch = ++visit_epoch;
  if (!order || !stack || !pos) goto oom;
  for (int r = 0; r < n_roots; r++) {
    if (!roots[r] || roots[r]->visit == epoch) continue;
    roots[r]->visit = epoch;
    stack[sp] = roots[r];
    pos[sp++] = 0;
    while (sp) {
      lazy_node *x = stack[sp - 1];
      if (pos[sp - 1] < x->n_operands) {
        lazy_node *c = x->operands[pos[sp - 1]++].node;
        if (c->visit == epoch) continue;
        c->visit = epoch;
        if (sp == scap) {
          scap *= 2;
          lazy_node **s2 = core_realloc(stack, (size_t)scap * sizeof *s2);
          if (!s2) goto oom;
          stack = s2;
          int *p2 = core_realloc(pos, (size_t)scap * sizeof *p2);
          if (!p2) goto oom;
          pos = p2;
        }
        stack[sp] = c;
        pos[sp++] = 0;
      } else {
        sp--;
        if (n == cap) {
          cap *= 2;
          lazy_node **o2 = core_realloc(order, (size_t)cap * sizeof *o2);
          if (!o2) goto oom;
          order = o2;
        }
        x->post_id = n;
        order[n++] = x;
      }
    }
  }
  core_free(stack);
  core_free(pos);
  *n_out = n;
  return order;
oom:
  core_free(order);
  core_free(stack);
  core_free(pos);
  return NULL;
}

/* ---- public -------------------------------------------------------------------- */

kiln_tensor *kiln_to_lazy(kiln_tensor *t) {
  op_meta m;
  if (!t) {
    core_error(KILN_ERR_INVALID, "to_lazy: tensor is NULL");
    return NULL;
  }
  if (t->device == CORE_DEVICE_LAZY) return core_autorelease(core_alias(t, true));
  /* a private contiguous copy: later writes to t do not reach the graph */
  kiln_tensor *c = core_tensor_new(t->ndim, t->shape, t->dtype);
  if (!c) return NULL;
  op_copy_into(c, t);
  core_storage_freeze(c->storage); /* Note [Frozen storage]: only a run may write it */
  lazy_node *n = lazy_data_node(c);
  kiln_release(c);
  if (!n) return NULL;
  op_meta_of(t, &m);
  kiln_tensor *l = lazy_tensor_new(n, 0, &m);
  lazy_node_release(n);
  return core_autorelease(l);
}

bool kiln_tensor_is_lazy(const kiln_tensor *t) { return t && t->device == CORE_DEVICE_LAZY; }
