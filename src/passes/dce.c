/* src/passes/dce.c: dead code elimination (TorchScript's
 * EliminateDeadCode): mark what is needed, then remove the rest.
 *
 * Note [DCE liveness]: a value is live when a live node reads it or the
 * graph returns it; a node is live when one of its outputs is live, when
 * it has a side effect of its own (Note [Side effects]), or when a node in
 * one of its blocks is live (the block must run for it). A live node
 * needs all its inputs, except a prim::Loop, which needs its trip count
 * and condition, and a carried input only when that carried value is live
 * (its output or its block parameter is); a live prim::If needs the block
 * returns of its live outputs, a live prim::Loop the condition return and
 * the returns of its live carried values. Loop back edges make this
 * circular, so marking repeats until nothing changes. Then, bottom-up,
 * dead nodes go (so every use of a dead value is gone before its
 * definition), and live If/Loop nodes lose their dead outputs and carried
 * values. */
#include "passes.h"

typedef struct dce {
  uint8_t *live_v;  /* by value id */
  uint8_t *live_n;  /* by node id */
  uint8_t *live_s;  /* by alias set (Note [DCE and writes]) */
  pass_alias *alias;
  bool changed;
} dce;

static void mark_value(dce *d, const ir_value *v) {
  if (!d->live_v[v->id]) {
    d->live_v[v->id] = 1;
    d->changed = true;
  }
  int s = pass_alias_set(d->alias, v);
  if (s >= 0 && !d->live_s[s]) {
    d->live_s[s] = 1;
    d->changed = true;
  }
}

/* Note [DCE and writes]: a node that writes memory (an in-place op) is
 * live when that memory is: when it may be the caller's (a graph input:
 * the write must be seen) or when any value sharing it is live (a later
 * reader needs the write). A write to a temporary nothing reads goes. */
static bool writes_live(const dce *d, const ir_node *n) {
  for (int i = 0; i < n->n_inputs; i++) {
    if (!pass_alias_input_written(n, i)) continue;
    int s = pass_alias_set(d->alias, n->inputs[i]);
    if (s >= 0 && (d->live_s[s] || pass_alias_is_external(d->alias, n->inputs[i]))) return true;
  }
  return false;
}

/* Marks n live, and every node whose block holds it (the block must run). */
static void mark_node(dce *d, const ir_node *n) {
  while (n && n->prim != IR_PRIM_PARAM && n->prim != IR_PRIM_RETURN && !d->live_n[n->id]) {
    d->live_n[n->id] = 1;
    d->changed = true;
    n = n->owner ? n->owner->owner : NULL;
  }
}

static bool loop_carried_live(const dce *d, const ir_node *loop, int j) {
  return d->live_v[loop->outputs[j]->id] || d->live_v[ir_block_param(loop->blocks[0], j + 1)->id];
}

/* One bottom-up sweep over b (Note [DCE liveness]). */
static void mark_block(dce *d, const ir_block *b) {
  for (const ir_node *n = b->last; n; n = n->prev) {
    bool live = d->live_n[n->id] || pass_has_side_effects(n, false) || writes_live(d, n);
    for (int i = 0; i < n->n_outputs && !live; i++) live = d->live_v[n->outputs[i]->id];
    if (live) mark_node(d, n);
    if (n->prim == IR_PRIM_IF) {
      for (int i = 0; i < n->n_outputs; i++)
        if (d->live_v[n->outputs[i]->id])
          for (int k = 0; k < n->n_blocks; k++) mark_value(d, ir_block_return(n->blocks[k], i));
    }
    for (int k = 0; k < n->n_blocks; k++) mark_block(d, n->blocks[k]);
    if (!d->live_n[n->id]) continue;
    if (n->prim == IR_PRIM_LOOP) {
      const ir_block *body = n->blocks[0];
      mark_value(d, n->inputs[0]);
      mark_value(d, n->inputs[1]);
      mark_value(d, ir_block_return(body, 0));
      for (int j = 0; j < n->n_outputs; j++)
        if (loop_carried_live(d, n, j)) {
          mark_value(d, n->inputs[j + 2]);
          mark_value(d, ir_block_return(body, j + 1));
        }
    } else {
      for (int i = 0; i < n->n_inputs; i++) mark_value(d, n->inputs[i]);
    }
  }
}

/* Removes the dead nodes of b and the dead outputs of its live If/Loop
 * nodes, bottom-up. Returns the number of changes or < 0. */
static int sweep_block(dce *d, ir_block *b) {
  int changes = 0, rc;
  for (ir_node *n = b->last, *prev; n; n = prev) {
    prev = n->prev;
    if (!d->live_n[n->id]) {
      if ((rc = ir_node_remove(n)) < 0) return rc;
      changes++;
      continue;
    }
    if (n->prim == IR_PRIM_IF) {
      for (int i = n->n_outputs - 1; i >= 0; i--)
        if (!d->live_v[n->outputs[i]->id])
          for (int k = 0; k < n->n_blocks; k++) ir_block_remove_return(n->blocks[k], i);
    } else if (n->prim == IR_PRIM_LOOP) {
      for (int j = n->n_outputs - 1; j >= 0; j--)
        if (!loop_carried_live(d, n, j)) ir_block_remove_return(n->blocks[0], j + 1);
    }
    for (int k = 0; k < n->n_blocks; k++) {
      if ((rc = sweep_block(d, n->blocks[k])) < 0) return rc;
      changes += rc;
    }
    if (n->prim == IR_PRIM_IF) {
      for (int i = n->n_outputs - 1; i >= 0; i--)
        if (!d->live_v[n->outputs[i]->id]) {
          if ((rc = ir_node_remove_output(n, i)) < 0) return rc;
          changes++;
        }
    } else if (n->prim == IR_PRIM_LOOP) {
      ir_block *body = n->blocks[0];
      for (int j = n->n_outputs - 1; j >= 0; j--) {
        if (loop_carried_live(d, n, j)) continue;
        if ((rc = ir_block_remove_param(body, j + 1)) < 0) return rc;
        if ((rc = ir_node_remove_output(n, j)) < 0) return rc;
        ir_node_remove_input(n, j + 2);
        changes++;
      }
    }
  }
  return changes;
}

static int dce_graph(ir_graph *g) {
  int rc;
  dce d = {0};
  int n_values = ir_graph_value_count(g), n_nodes = ir_graph_node_count(g);
  d.live_v = core_calloc((size_t)(n_values ? n_values : 1), 1);
  d.live_n = core_calloc((size_t)(n_nodes ? n_nodes : 1), 1);
  d.live_s = core_calloc((size_t)(n_values ? n_values : 1), 1);
  d.alias = pass_alias_new(g);
  if (!d.live_v || !d.live_n || !d.live_s || !d.alias) {
    rc = core_error(KILN_ERR_NOMEM, "pass_dce: out of memory");
    goto done;
  }
  ir_block *top = ir_graph_top(g);
  for (int i = 0; i < ir_block_n_returns(top); i++) mark_value(&d, ir_block_return(top, i));
  do {
    d.changed = false;
    mark_block(&d, top);
  } while (d.changed);
  rc = sweep_block(&d, top);
  if (rc >= 0) {
    int sub = pass_for_each_subgraph(g, dce_graph);
    rc = sub < 0 ? sub : rc + sub;
  }
done:
  core_free(d.live_v);
  core_free(d.live_n);
  core_free(d.live_s);
  pass_alias_free(d.alias);
  return rc;
}

int pass_dce(ir_graph *g) {
  return dce_graph(g);
}
