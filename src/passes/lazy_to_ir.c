/* src/passes/lazy_to_ir.c: turns recorded lazy nodes into an IR graph (the
 * bridge that lets lazy graphs and traced derivatives go through the same
 * passes and the same interpreter as TorchScript graphs).
 *
 *   lazy:  %0 = device_data  %1 = device_data  %2 = aten::mm(%0, %1)
 *   IR:    graph(%0 : Float(4, 4), %1 : Float(4, 4)):
 *            %2 : Float(4, 4) = aten::mm(%0, %1)
 *            return (%2)
 */
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"

typedef struct conv {
  ir_graph *g;
  unsigned flags;
  const lazy_value *ins;
  int n_ins;
  lazy_node **extra;  /* data nodes that became extra inputs */
  int n_extra, cap_extra;
  /* node -> its IR outputs (set when converted) */
  lazy_node **keys;
  ir_value ***vals;
  uint64_t *order;    /* per map entry: its place in the recorded order */
  int n_map, cap_map;
  /* PASS_LAZY_RECORDED_ORDER: the nodes made, appended at the end */
  struct pending {
    ir_node *x;
    uint64_t key;
    int sub, i;
  } *pend;
  int n_pend, cap_pend;
} conv;

/* Note [Recorded order]: pass_lazy_to_ir converts a node after its
 * operands, so the IR's order is the outputs' post-order. For a lazy
 * training step that is a poor schedule: the first output (the first
 * parameter's update) pulls in the whole forward and backward, and every
 * other gradient's GEMM and bias sum then runs at the end, reading its
 * operands (activations, output gradients: megabytes each) back from DRAM
 * long after they were made. Eagerly, each of those ran in the backward
 * right after the gradient it reads. With PASS_LAZY_RECORDED_ORDER (the
 * lazy step's compile) the nodes are placed in the order they were
 * recorded, which is the order eager mode would have run them in: a node's
 * key is its creation number (lazy_node.seq), raised to one more than its
 * operands' keys where needed, so the order is topological even for nodes
 * recorded on another thread. A node's constants and list constructs go
 * just before it, its list unpack just after. Hashing and the graph's
 * inputs still follow the post-order (lazy_sync.c): a graph recorded in
 * another order with the same hash reuses the first one's code, which
 * computes the same values. */
static int pend_add(conv *c, ir_node *x, uint64_t key, int sub) {
  if (!(c->flags & PASS_LAZY_RECORDED_ORDER)) {
    ir_node_append(ir_graph_top(c->g), x);
    return 0;
  }
  if (c->n_pend == c->cap_pend) {
    int cap = c->cap_pend ? c->cap_pend * 2 : 64;
    struct pending *p = core_realloc(c->pend, (size_t)cap * sizeof *p);
    if (!p) return KILN_ERR_NOMEM;
    c->pend = p;
    c->cap_pend = cap;
  }
  c->pend[c->n_pend] = (struct pending){x, key, sub, c->n_pend};
  c->n_pend++;
  return 0;
}

static int pend_cmp(const void *a, const void *b) {
  const struct pending *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  if (x->sub != y->sub) return x->sub - y->sub;
  return x->i - y->i;
}

static int map_find(const conv *c, const lazy_node *n) {
  for (int i = c->n_map - 1; i >= 0; i--)
    if (c->keys[i] == n) return i;
  return -1;
}

static ir_value **map_get(conv *c, const lazy_node *n) {
  int i = map_find(c, n);
  return i >= 0 ? c->vals[i] : NULL;
}

static int map_put(conv *c, lazy_node *n, ir_value **v, uint64_t order) {
  if (c->n_map == c->cap_map) {
    int cap = c->cap_map ? c->cap_map * 2 : 64;
    lazy_node **k = core_realloc(c->keys, (size_t)cap * sizeof *k);
    if (!k) return KILN_ERR_NOMEM;
    c->keys = k;
    ir_value ***v2 = core_realloc(c->vals, (size_t)cap * sizeof *v2);
    if (!v2) return KILN_ERR_NOMEM;
    c->vals = v2;
    uint64_t *o2 = core_realloc(c->order, (size_t)cap * sizeof *o2);
    if (!o2) return KILN_ERR_NOMEM;
    c->order = o2;
    c->cap_map = cap;
  }
  c->keys[c->n_map] = n;
  c->order[c->n_map] = order;
  c->vals[c->n_map++] = v;
  return 0;
}

static const ir_type *tensor_type(ir_graph *g, const op_meta *m) {
  return ir_type_tensor_new(g, m->dtype, m->ndim, m->shape, NULL, -1, "cpu");
}

/* Is (n, index) one of the explicit inputs? Returns its position or -1. */
static int input_pos(const conv *c, const lazy_node *n, int index) {
  for (int i = 0; i < c->n_ins; i++)
    if (c->ins[i].node == n && c->ins[i].index == index) return i;
  return -1;
}

/* A constant for the node of recorded-order key `key` (Note [Recorded order]). */
static ir_value *constant(conv *c, const op_val *v, uint64_t key) {
  ir_graph *g = c->g;
  ir_node *n = ir_node_new_prim(g, IR_PRIM_CONSTANT);
  if (!n) return NULL;
  const ir_type *t = ir_type_none();
  int rc = 0;
  switch (v->tag) {
  case OP_VAL_INT: rc = ir_node_set_i(n, "value", v->i); t = ir_type_int(); break;
  case OP_VAL_FLOAT: rc = ir_node_set_f(n, "value", v->f); t = ir_type_float(); break;
  case OP_VAL_BOOL: rc = ir_node_set_i(n, "value", v->b); t = ir_type_bool(); break;
  case OP_VAL_STR: rc = ir_node_set_s(n, "value", v->s); t = ir_type_str(); break;
  case OP_VAL_INTS:
    rc = ir_node_set_is(n, "value", v->ints.v, v->ints.n);
    t = ir_type_list(g, ir_type_int());
    break;
  default: break;
  }
  if (rc < 0 || !t) return NULL;
  ir_value *out = ir_node_add_output(n, t);
  if (!out || pend_add(c, n, key, 0) < 0) return NULL;
  return out;
}

static ir_value **convert_node(conv *c, lazy_node *n);

/* The IR value for operand (node, index). */
static ir_value *value_of(conv *c, lazy_node *n, int index) {
  int p = input_pos(c, n, index);
  if (p >= 0) return ir_block_param(ir_graph_top(c->g), p);
  ir_value **v = map_get(c, n);
  if (!v) v = convert_node(c, n);
  return v ? v[index] : NULL;
}

static ir_value **convert_data(conv *c, lazy_node *n) {
  ir_value **out = ir_graph_alloc(c->g, sizeof *out);
  if (!out) return NULL;
  if (n->scalar_tag && !(c->flags & PASS_LAZY_SCALARS_AS_INPUTS)) {
    op_val v = {.tag = n->scalar_tag};
    if (n->scalar_tag == OP_VAL_INT) v.i = *(const int64_t *)core_data(n->data);
    else if (n->scalar_tag == OP_VAL_BOOL) v.b = *(const bool *)core_data(n->data);
    else v.f = core_get_flat(n->data, 0);
    out[0] = constant(c, &v, n->seq);
  } else {
    if (!n->data && !(c->flags & PASS_LAZY_ALLOW_SYMBOLIC)) {
      core_error(KILN_ERR_STATE, "lazy_to_ir: a symbolic value is not an input of the graph");
      return NULL;
    }
    if (c->n_extra == c->cap_extra) {
      int cap = c->cap_extra ? c->cap_extra * 2 : 8;
      lazy_node **e = core_realloc(c->extra, (size_t)cap * sizeof *e);
      if (!e) return NULL;
      c->extra = e;
      c->cap_extra = cap;
    }
    c->extra[c->n_extra++] = n;
    const ir_type *t = n->scalar_tag == OP_VAL_INT     ? ir_type_int()
                       : n->scalar_tag == OP_VAL_FLOAT ? ir_type_float()
                       : n->scalar_tag == OP_VAL_BOOL  ? ir_type_bool()
                                                       : tensor_type(c->g, &n->metas[0]);
    out[0] = t ? ir_block_add_param(ir_graph_top(c->g), t, NULL) : NULL;
  }
  if (!out[0] || map_put(c, n, out, n->seq) < 0) return NULL;
  return out;
}

/* Converts n (and, first, its operands, stopping at the explicit inputs).
 * The recursion is as deep as the longest operand chain; the graphs
 * converted here are traced subgraphs and single steps. */
static ir_value **convert_node(conv *c, lazy_node *n) {
  if (n->op == LAZY_DATA) return convert_data(c, n);
  const op_info *info = &op_table[n->op];
  ir_value *args[32];
  if (n->n_args > 32) {
    core_error(KILN_ERR_UNSUPPORTED, "lazy_to_ir: %s has too many arguments", info->name);
    return NULL;
  }
  /* the operands first, then n's key: after theirs (Note [Recorded order]) */
  uint64_t key = n->seq;
  for (int k = 0; k < n->n_operands && (c->flags & PASS_LAZY_RECORDED_ORDER); k++) {
    lazy_node *o = n->operands[k].node;
    if (!value_of(c, o, n->operands[k].index)) return NULL;
    int at = map_find(c, o);
    if (at >= 0 && c->order[at] >= key) key = c->order[at] + 1;
  }
  for (int k = 0; k < n->n_args; k++) {
    int oi = n->arg_operand[k];
    switch (n->arg_kind[k]) {
    case LAZY_ARG_TENSOR:
    case LAZY_ARG_SCALAR:
      args[k] = value_of(c, n->operands[oi].node, n->operands[oi].index);
      break;
    case LAZY_ARG_TENSORS: {
      ir_node *l = ir_node_new_prim(c->g, IR_PRIM_LIST_CONSTRUCT);
      if (!l) return NULL;
      for (int j = 0; j < n->args[k].ts.n; j++) {
        ir_value *v = value_of(c, n->operands[oi + j].node, n->operands[oi + j].index);
        if (!v || ir_node_add_input(l, v) < 0) return NULL;
      }
      args[k] = ir_node_add_output(l, ir_type_list(c->g, ir_type_tensor()));
      if (args[k] && pend_add(c, l, key, 0) < 0) return NULL;
      break;
    }
    default: args[k] = constant(c, &n->args[k], key); break;
    }
    if (!args[k]) return NULL;
  }
  ir_node *x = ir_node_new_op(c->g, n->op);
  ir_value **out = ir_graph_alloc(c->g, (size_t)(n->n_outs ? n->n_outs : 1) * sizeof *out);
  if (!x || !out) return NULL;
  for (int k = 0; k < n->n_args; k++)
    if (ir_node_add_input(x, args[k]) < 0) return NULL;
  if (info->flags & OPF_LIST_OUT) {
    ir_value *list = ir_node_add_output(x, ir_type_list(c->g, ir_type_tensor()));
    if (!list || pend_add(c, x, key, 1) < 0) return NULL;
    ir_node *u = ir_node_new_prim(c->g, IR_PRIM_LIST_UNPACK);
    if (!u || ir_node_add_input(u, list) < 0) return NULL;
    for (int i = 0; i < n->n_outs; i++)
      if (!(out[i] = ir_node_add_output(u, tensor_type(c->g, &n->metas[i])))) return NULL;
    if (pend_add(c, u, key, 2) < 0) return NULL;
  } else {
    for (int i = 0; i < n->n_outs; i++)
      if (!(out[i] = ir_node_add_output(x, tensor_type(c->g, &n->metas[i])))) return NULL;
    if (pend_add(c, x, key, 1) < 0) return NULL;
  }
  if (map_put(c, n, out, key) < 0) return NULL;
  return out;
}

/* Note [Values-only pooling]: aten::max_pool2d decomposes into
 * max_pool2d_with_indices, so that is what lazy recording sees, and a lazy
 * graph computed the int64 indices even where nothing reads them
 * (inference). Eagerly, max_pool2d without autograd takes the values-only
 * kernel (Note [Separable max] in ops/pool_max.c). So a with_indices node
 * whose indices are unused becomes aten::max_pool2d again, whose decomposition
 * runs that kernel: the same values, as eager mode's, at a fraction of the
 * cost (resnet18 at batch 1: 3% of the step). Returns 0 or a negative
 * status. */
static int values_only_pooling(ir_graph *g) {
  for (ir_node *n = ir_graph_top(g)->first, *next; n; n = next) {
    next = n->next;
    if (n->op != KILN_OP_MAX_POOL2D_WITH_INDICES || n->n_outputs != 2 || n->outputs[1]->n_uses)
      continue;
    ir_node *m = ir_node_new_op(g, KILN_OP_MAX_POOL2D);
    if (!m) return KILN_ERR_NOMEM;
    for (int i = 0; i < n->n_inputs; i++)
      if (ir_node_add_input(m, n->inputs[i]) < 0) return KILN_ERR_NOMEM;
    ir_value *v = ir_node_add_output(m, n->outputs[0]->type);
    if (!v) return KILN_ERR_NOMEM;
    ir_node_insert_before(m, n);
    int rc = ir_value_replace_all_uses(n->outputs[0], v);
    if (rc < 0 || (rc = ir_node_remove(n)) < 0) return rc;
  }
  return 0;
}

int pass_lazy_to_ir(const lazy_value *inputs, int n_inputs, const lazy_value *outputs,
                    int n_outputs, unsigned flags, pass_lazy_graph *res) {
  conv c = {0};
  int rc = 0;
  memset(res, 0, sizeof *res);
  c.g = ir_graph_new();
  c.flags = flags;
  c.ins = inputs;
  c.n_ins = n_inputs;
  if (!c.g) return KILN_ERR_NOMEM;
  ir_block *top = ir_graph_top(c.g);
  for (int i = 0; i < n_inputs; i++) {
    lazy_node *n = inputs[i].node;
    const ir_type *t = n->scalar_tag == OP_VAL_INT     ? ir_type_int()
                       : n->scalar_tag == OP_VAL_FLOAT ? ir_type_float()
                       : n->scalar_tag == OP_VAL_BOOL  ? ir_type_bool()
                                                       : tensor_type(c.g, &n->metas[inputs[i].index]);
    if (!t || !ir_block_add_param(top, t, NULL)) {
      rc = KILN_ERR_NOMEM;
      goto fail;
    }
  }
  for (int i = 0; i < n_outputs; i++) {
    ir_value *v = value_of(&c, outputs[i].node, outputs[i].index);
    if (!v || ir_block_add_return(top, v) < 0) {
      rc = -1;
      goto fail;
    }
  }
  if (c.n_pend) { /* Note [Recorded order] */
    qsort(c.pend, (size_t)c.n_pend, sizeof *c.pend, pend_cmp);
    for (int i = 0; i < c.n_pend; i++) ir_node_append(top, c.pend[i].x);
  }
  if ((rc = values_only_pooling(c.g)) < 0) goto fail;
  res->g = c.g;
  res->extra = c.extra;
  res->n_extra = c.n_extra;
  core_free(c.keys);
  core_free(c.vals);
  core_free(c.order);
  core_free(c.pend);
  return 0;
fail:
  if (rc == -1 && !kiln_last_error()[0]) core_error(KILN_ERR_NOMEM, "lazy_to_ir: out of memory");
  ir_graph_free(c.g);
  core_free(c.extra);
  core_free(c.keys);
  core_free(c.vals);
  core_free(c.order);
  core_free(c.pend);
  return rc < 0 ? rc : KILN_ERR_NOMEM;
}
