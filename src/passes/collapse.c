/* src/passes/collapse.c: collapsing nodes into a subgraph node (Note
 * [Collapsing] in passes.h), for FusionGroups (fuse.c) and
 * DifferentiableGraphs (autodiff_groups.c). */
#include "passes.h"

static bool member(ir_node *const *v, int n, const ir_node *m) {
  for (int i = 0; i < n; i++)
    if (v[i] == m) return true;
  return false;
}

static bool used_outside(ir_node *const *v, int n, const ir_value *x) {
  for (int u = 0; u < x->n_uses; u++)
    if (!member(v, n, x->uses[u].user)) return true;
  return false;
}

static bool is_constant(const ir_value *x) { return x->node && x->node->prim == IR_PRIM_CONSTANT; }

int pass_collapse(ir_graph *g, ir_node *const *v, int n, int prim) {
  int max_in = 0, max_out = 0;
  for (int i = 0; i < n; i++) {
    max_in += v[i]->n_inputs;
    max_out += v[i]->n_outputs;
  }
  ir_graph *sub = ir_graph_new();
  ir_value_map *map = ir_value_map_new();
  ir_node *node = ir_node_new_prim(g, prim);
  ir_value **ext = core_alloc((size_t)(max_in ? max_in : 1) * sizeof *ext);
  ir_value **outs = core_alloc((size_t)(max_out ? max_out : 1) * sizeof *outs);
  int n_ext = 0, n_outs = 0, rc = 0;
  if (!sub || !map || !node || !ext || !outs) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  ir_block *top = ir_graph_top(sub);
  for (int i = 0; i < n && rc == 0; i++) {
    ir_node *m = v[i];
    for (int k = 0; k < m->n_inputs && rc == 0; k++) {
      ir_value *x = m->inputs[k];
      if (ir_value_map_get(map, x) || (x->node && member(v, n, x->node))) continue;
      if (is_constant(x)) { /* copied in, not an input */
        ir_node *c = ir_node_copy_into(sub, x->node, map);
        if (!c) rc = KILN_ERR_NOMEM;
        else ir_node_append(top, c);
        continue;
      }
      ir_value *p = ir_block_add_param(top, x->type, x->name);
      if (!p || ir_value_map_set(map, x, p) < 0) rc = KILN_ERR_NOMEM;
      else ext[n_ext++] = x;
    }
    if (rc < 0) break;
    ir_node *c = ir_node_copy_into(sub, m, map);
    if (!c) {
      rc = KILN_ERR_NOMEM;
      break;
    }
    ir_node_append(top, c);
    for (int k = 0; k < m->n_outputs && rc == 0; k++)
      if (used_outside(v, n, m->outputs[k])) {
        outs[n_outs++] = m->outputs[k];
        if (ir_block_add_return(top, ir_value_map_get(map, m->outputs[k])) < 0) rc = KILN_ERR_NOMEM;
      }
  }
  if (rc < 0) goto done;
  for (int i = 0; i < n_ext; i++)
    if (ir_node_add_input(node, ext[i]) < 0) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
  ir_node_insert_after(node, v[n - 1]);
  for (int i = 0; i < n_outs; i++) {
    ir_value *o = ir_node_add_output(node, outs[i]->type);
    if (!o || ir_value_replace_all_uses(outs[i], o) < 0) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
  }
  rc = ir_node_set_g(node, "Subgraph", sub);
  sub = NULL; /* the node's now, or freed by ir_node_set_g */
  if (rc < 0) goto done;
  for (int i = n - 1; i >= 0 && rc == 0; i--) rc = ir_node_remove(v[i]);
  if (rc == 0) rc = 1;
done:
  ir_graph_free(sub);
  ir_value_map_free(map);
  core_free(ext);
  core_free(outs);
  return rc;
}
