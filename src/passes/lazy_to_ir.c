/* src/passes/lazy_to_ir.c: turns recorded lazy nodes into an IR graph (the
 * bridge that lets lazy graphs and traced derivatives go through the same
 * passes and the same interpreter as TorchScript graphs).
 *
 *   lazy:  %0 = device_data  %1 = device_data  %2 = aten::mm(%0, %1)
 *   IR:    graph(%0 : Float(4, 4), %1 : Float(4, 4)):
 *            %2 : Float(4, 4) = aten::mm(%0, %1)
 *            return (%2)
 */
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
  int n_map, cap_map;
} conv;

static ir_value **map_get(conv *c, const lazy_node *n) {
  for (int i = c->n_map - 1; i >= 0; i--)
    if (c->keys[i] == n) return c->vals[i];
  return NULL;
}

static int map_put(conv *c, lazy_node *n, ir_value **v) {
  if (c->n_map == c->cap_map) {
    int cap = c->cap_map ? c->cap_map * 2 : 64;
    lazy_node **k = core_realloc(c->keys, (size_t)cap * sizeof *k);
    if (!k) return KILN_ERR_NOMEM;
    c->keys = k;
    ir_value ***v2 = core_realloc(c->vals, (size_t)cap * sizeof *v2);
    if (!v2) return KILN_ERR_NOMEM;
    c->vals = v2;
    c->cap_map = cap;
  }
  c->keys[c->n_map] = n;
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

static ir_value *constant(ir_graph *g, const op_val *v, const ir_type **type_out) {
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
  if (!out) return NULL;
  ir_node_append(ir_graph_top(g), n);
  if (type_out) *type_out = t;
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
    out[0] = constant(c->g, &v, NULL);
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
  if (!out[0] || map_put(c, n, out) < 0) return NULL;
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
      if (args[k]) ir_node_append(ir_graph_top(c->g), l);
      break;
    }
    default: args[k] = constant(c->g, &n->args[k], NULL); break;
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
    if (!list) return NULL;
    ir_node_append(ir_graph_top(c->g), x);
    ir_node *u = ir_node_new_prim(c->g, IR_PRIM_LIST_UNPACK);
    if (!u || ir_node_add_input(u, list) < 0) return NULL;
    for (int i = 0; i < n->n_outs; i++)
      if (!(out[i] = ir_node_add_output(u, tensor_type(c->g, &n->metas[i])))) return NULL;
    ir_node_append(ir_graph_top(c->g), u);
  } else {
    for (int i = 0; i < n->n_outs; i++)
      if (!(out[i] = ir_node_add_output(x, tensor_type(c->g, &n->metas[i])))) return NULL;
    ir_node_append(ir_graph_top(c->g), x);
  }
  if (map_put(c, n, out) < 0) return NULL;
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
  if ((rc = values_only_pooling(c.g)) < 0) goto fail;
  res->g = c.g;
  res->extra = c.extra;
  res->n_extra = c.n_extra;
  core_free(c.keys);
  core_free(c.vals);
  return 0;
fail:
  if (rc == -1 && !kiln_last_error()[0]) core_error(KILN_ERR_NOMEM, "lazy_to_ir: out of memory");
  ir_graph_free(c.g);
  core_free(c.extra);
  core_free(c.keys);
  core_free(c.vals);
  return rc < 0 ? rc : KILN_ERR_NOMEM;
}
