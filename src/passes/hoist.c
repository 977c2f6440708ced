/* src/passes/hoist.c: pass_hoist_results, a lazy-pipeline step: nodes
 * whose results only leave the graph run as early as their inputs allow.
 *
 * Note [Hoisting results]: a lazy training step records its optimizer
 * after the backward, so every parameter's update (a FusionGroup reading
 * grad, momentum buffer and parameter, returning the new two) comes after
 * the whole backward, and each gradient waits in memory from the node
 * that made it until the end. resnet18's 47 MB of gradients do not fit
 * the 32 MB L3: the updates read most of them back from DRAM. This pass
 * moves each node whose every output is used only by the graph's return,
 * and which reads a tensor made in the graph (the gradient; a node that
 * reads only the graph's inputs stays: it would only hold its result
 * longer), up to just after the last node that (a) defines one of its inputs,
 * (b) also reads one of its tensor inputs (so an input that died at the
 * node still dies there: the update keeps writing the parameter's buffer
 * in place, Note [Fused buffer reuse]), or (c) writes memory or has side
 * effects (nothing moves across those). The update then runs while its
 * gradient is in cache, and the gradient's buffer is free for the rest of
 * the backward. The node need not be the last reader of that tensor: an
 * update whose gradient GEMM also wrote the momentum (Note [GEMM at its
 * product's place] in fuse.c) frees nothing, since the graph returns the
 * momentum, yet reads it from cache when it moves, and its own result is
 * held to the end anyway (the update writes it into the parameter's
 * buffer). Other such nodes do not count for (b): two readers of one
 * tensor may run in either order. Only the top block of a graph without
 * If/Loop nodes is reordered (lazy graphs have none). The order of the
 * graph's values, and so what it computes, is unchanged; the collective
 * schedule (Note [Collective schedule]) runs after this and reorders a
 * distributed step again. */
#include "passes.h"

/* Do n's outputs go only to the block's return (and is there one)? */
static bool result_only(const ir_block *b, const ir_node *n) {
  if (n->n_outputs == 0 || n->n_blocks || n->prim == IR_PRIM_CONSTANT) return false;
  for (int i = 0; i < n->n_outputs; i++) {
    const ir_value *v = n->outputs[i];
    if (v->n_uses == 0) return false;
    for (int u = 0; u < v->n_uses; u++)
      if (v->uses[u].user != b->ret) return false;
  }
  return true;
}

/* x's position in b's node list, or -1 (a Param or Return node, another
 * block's node). */
static int pos_in(const ir_block *b, const int *pos, int max_id, const ir_node *x) {
  if (!x || x->owner != b || x == b->param || x == b->ret || x->id > max_id) return -1;
  return pos[x->id];
}

int pass_hoist_results(ir_graph *g) {
  ir_block *b = ir_graph_top(g);
  int n = 0, max_id = 0, moved = 0;
  for (ir_node *x = b->first; x; x = x->next) {
    if (x->n_blocks) return 0;
    if (x->id > max_id) max_id = x->id;
    n++;
  }
  if (n < 2) return 0;
  /* pos[id]: position in the block; hoist[pos]: a result-only node;
   * anchor[pos]: the node it goes after (NULL: the block's start) */
  int *pos = core_alloc((size_t)(max_id + 1) * sizeof *pos);
  bool *hoist = core_calloc((size_t)n, sizeof *hoist);
  bool *barrier = core_calloc((size_t)n, sizeof *barrier);
  ir_node **nodes = core_alloc((size_t)n * sizeof *nodes);
  ir_node **anchor = core_calloc((size_t)n, sizeof *anchor);
  if (!pos || !hoist || !barrier || !nodes || !anchor) {
    core_free(pos), core_free(hoist), core_free(barrier), core_free(nodes), core_free(anchor);
    return core_error(KILN_ERR_NOMEM, "out of memory in pass hoist_results");
  }
  for (int i = 0; i <= max_id; i++) pos[i] = -1;
  int k = 0;
  for (ir_node *x = b->first; x; x = x->next, k++) {
    nodes[k] = x;
    pos[x->id] = k;
    barrier[k] = pass_has_side_effects(x, true) || pass_alias_writes(x);
    hoist[k] = !barrier[k] && result_only(b, x);
  }
  int last_barrier = -1, last_fixed = -1; /* the latest node that stays where it is */
  for (int i = 0; i < n; i++) {
    if (barrier[i]) last_barrier = i;
    if (!hoist[i]) {
      last_fixed = i;
      continue;
    }
    ir_node *x = nodes[i];
    int at = last_barrier; /* the latest node x must stay after */
    bool reads_made = false; /* does x read a tensor made here? */
    for (int j = 0; j < x->n_inputs; j++) {
      const ir_value *v = x->inputs[j];
      int p = pos_in(b, pos, max_id, v->node);
      if (p > at) at = p;
      if (v->type->kind != IR_TYPE_TENSOR) continue;
      reads_made |= p >= 0;
      for (int u = 0; u < v->n_uses; u++) {
        int q = pos_in(b, pos, max_id, v->uses[u].user);
        if (q >= 0 && q < i && !hoist[q] && q > at) at = q;
      }
    }
    if (reads_made && at < last_fixed) { /* a node that stays comes between: x moves */
      anchor[i] = at >= 0 ? nodes[at] : NULL;
      moved++;
    } else {
      hoist[i] = false;
      last_fixed = i;
    }
  }
  /* the moves: anchors never move, so each target stays valid */
  for (int i = 0; i < n; i++) {
    if (!hoist[i]) continue;
    if (anchor[i]) ir_node_move_after(nodes[i], anchor[i]);
    else ir_node_move_before(nodes[i], b->first);
  }
  core_free(pos), core_free(hoist), core_free(barrier), core_free(nodes), core_free(anchor);
  return moved;
}
