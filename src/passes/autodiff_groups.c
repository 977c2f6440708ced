/* src/passes/autodiff_groups.c: autodiff subgraphs and their guards.
 *
 * pass_create_autodiff_subgraphs groups runs of differentiable nodes of a
 * block into prim::DifferentiableGraph nodes (constants they read are
 * copied in):
 *   before: %4 = aten::matmul(%x, %w); %5 = aten::add(%4, %b, %1); %6 = aten::tanh(%5)
 *   after:  %6 = prim::DifferentiableGraph_0(%x, %w, %b)
 *           with prim::DifferentiableGraph_0 = graph(%x, %w, %b): ... return (%6)
 *
 * pass_guard_autodiff_subgraphs puts each behind a requires-grad guard whose
 * else-branch runs the same nodes undifferentiated (a fallback graph that
 * the executor turns into a function with an executor of its own):
 *   %x.2, %w.2, %b.2, %ok = prim::RequiresGradCheck[types=[...]](%x, %w, %b)
 *   %6 = prim::If(%ok)
 *     block0(): %r = prim::DifferentiableGraph_0(%x.2, %w.2, %b.2) -> (%r)
 *     block1(): %f = prim::FallbackGraph_1(%x, %w, %b) -> (%f)
 *
 * Note [Requires-grad guard]: an input is assumed to require grad when any
 * profile saw it do so (merged over all uses and iterations: seen both ways
 * counts as requiring it, the LSTM hidden state) or when it was never seen.
 * Unseen inputs are not guarded. At run time the guard passes when grad
 * mode is on, at least one guarded input requires grad, and no input
 * requires grad that was assumed not to (computing extra gradients and
 * dropping them is safe; the reverse would be wrong). */
#include <string.h>

#include "autodiff.h"
#include "passes.h"

static bool is_constant(const ir_value *v) { return v->node && v->node->prim == IR_PRIM_CONSTANT; }

/* The alias analysis of the graph being grouped (Note [Alias analysis]):
 * a node touching written memory stays outside, in order. */
static _Thread_local pass_alias *group_alias;

/* May node n join a differentiable group? */
static bool groupable(const ir_node *n) {
  if (n->n_blocks) return false;
  if (group_alias && pass_alias_has_writers(group_alias, n)) return false;
  if (n->op >= 0) {
    const op_info *info = &op_table[n->op];
    if (!(info->flags & OPF_DIFF)) return false;
    /* non-tensor arguments must be constants (they are copied in); a
     * scalar that changes between calls stays outside, generic */
    for (int i = 0; i < n->n_inputs; i++) {
      const ir_value *v = n->inputs[i];
      if (v->type->kind == IR_TYPE_TENSOR) continue;
      if (is_constant(v)) continue;
      if (v->node && (v->node->prim == IR_PRIM_LIST_CONSTRUCT)) continue; /* checked below */
      return false;
    }
    for (int i = 0; i < n->n_outputs; i++)
      if (n->outputs[i]->type->kind != IR_TYPE_TENSOR &&
          !(info->flags & OPF_LIST_OUT))
        return false;
    /* a list may not leave the group: only a ListUnpack right here may
     * read it (xs = x.unbind(0) indexed in a loop stays outside, and its
     * autograd node stacks the pieces' gradients) */
    if (info->flags & OPF_LIST_OUT)
      for (int u = 0; u < n->outputs[0]->n_uses; u++) {
        const ir_node *user = n->outputs[0]->uses[u].user;
        if (user->prim != IR_PRIM_LIST_UNPACK || user->owner != n->owner) return false;
      }
    return true;
  }
  if (n->prim == IR_PRIM_LIST_UNPACK) return true;
  if (n->prim == IR_PRIM_LIST_CONSTRUCT) {
    for (int i = 0; i < n->n_inputs; i++)
      if (n->inputs[i]->type->kind != IR_TYPE_TENSOR && !is_constant(n->inputs[i])) return false;
    return true;
  }
  return false;
}

typedef struct group {
  ir_node **v;
  int n, cap, n_ops;
} group;

static bool in_group(const group *g, const ir_node *n) {
  for (int i = 0; i < g->n; i++)
    if (g->v[i] == n) return true;
  return false;
}

static int group_add(group *g, ir_node *n) {
  if (g->n == g->cap) {
    int cap = g->cap ? g->cap * 2 : 16;
    ir_node **v = core_realloc(g->v, (size_t)cap * sizeof *v);
    if (!v) return KILN_ERR_NOMEM;
    g->v = v;
    g->cap = cap;
  }
  g->v[g->n++] = n;
  if (n->op >= 0) g->n_ops++;
  return 0;
}

/* A ListUnpack/ListConstruct only belongs with its producer/consumers:
 * ListUnpack needs its list made in the group. */
static bool fits(const group *g, const ir_node *n) {
  if (n->prim == IR_PRIM_LIST_UNPACK) return n->inputs[0]->node && in_group(g, n->inputs[0]->node);
  if (n->op >= 0)
    for (int i = 0; i < n->n_inputs; i++) {
      const ir_value *v = n->inputs[i];
      if (v->node && v->node->prim == IR_PRIM_LIST_CONSTRUCT && !in_group(g, v->node))
        return false;
    }
  return true;
}

static bool any_may_require_grad(const group *grp) {
  for (int i = 0; i < grp->n; i++)
    for (int k = 0; k < grp->v[i]->n_inputs; k++) {
      const ir_value *v = grp->v[i]->inputs[k];
      if (v->type->kind == IR_TYPE_TENSOR && (!v->type->seen || v->type->requires_grad != 0) &&
          !(v->node && in_group(grp, v->node)))
        return true;
    }
  return false;
}

/* A list made in the group and read after it too (DenseNet's feature list,
 * appended to later) would leave the group as an output, and outputs are
 * tensors: the readers outside get their own ListConstruct of the same
 * elements after the group (tensors made in it become its outputs). */
static int split_escaping_lists(ir_graph *g, const group *grp) {
  ir_node *last = grp->v[grp->n - 1];
  for (int i = 0; i < grp->n; i++) {
    ir_node *l = grp->v[i];
    if (l->prim != IR_PRIM_LIST_CONSTRUCT) continue;
    ir_value *lv = l->outputs[0];
    bool escapes = false;
    for (int u = 0; u < lv->n_uses && !escapes; u++) escapes = !in_group(grp, lv->uses[u].user);
    if (!escapes) continue;
    ir_node *c = ir_node_new_prim(g, IR_PRIM_LIST_CONSTRUCT);
    ir_value *cv = c ? ir_node_add_output(c, lv->type) : NULL;
    if (!cv) return KILN_ERR_NOMEM;
    for (int k = 0; k < l->n_inputs; k++)
      if (ir_node_add_input(c, l->inputs[k]) < 0) return KILN_ERR_NOMEM;
    ir_node_insert_after(c, last);
    last = c;
    for (int u = 0; u < lv->n_uses;) { /* set_input removes the use */
      ir_use use = lv->uses[u];
      if (in_group(grp, use.user)) {
        u++;
        continue;
      }
      if (!ir_node_set_input(use.user, use.index, cv)) return KILN_ERR_NOMEM;
    }
  }
  return 0;
}

static int group_block(ir_graph *g, ir_block *b, int min_size) {
  int made = 0, rc;
  group grp = {0};
  for (ir_node *n = b->first; n;) {
    ir_node *next = n->next;
    for (int i = 0; i < n->n_blocks; i++) {
      if ((rc = group_block(g, n->blocks[i], min_size)) < 0) goto fail;
      made += rc;
    }
    bool joins = groupable(n) && fits(&grp, n);
    if (joins) {
      if ((rc = group_add(&grp, n)) < 0) goto fail;
    } else if (n->prim != IR_PRIM_CONSTANT || !next) {
      /* a constant does not break a run; anything else ends it */
      if (grp.n_ops >= min_size && any_may_require_grad(&grp)) {
        if ((rc = split_escaping_lists(g, &grp)) < 0 ||
            (rc = pass_collapse(g, grp.v, grp.n, IR_PRIM_DIFFERENTIABLE_GRAPH)) < 0)
          goto fail;
        made += rc;
      }
      grp.n = grp.n_ops = 0;
      if (groupable(n) && fits(&grp, n)) { /* starts a new group */
        if ((rc = group_add(&grp, n)) < 0) goto fail;
      }
    }
    n = next;
  }
  if (grp.n_ops >= min_size && any_may_require_grad(&grp)) {
    if ((rc = split_escaping_lists(g, &grp)) < 0 ||
        (rc = pass_collapse(g, grp.v, grp.n, IR_PRIM_DIFFERENTIABLE_GRAPH)) < 0)
      goto fail;
    made += rc;
  }
  core_free(grp.v);
  return made;
fail:
  core_free(grp.v);
  return rc;
}

int pass_create_autodiff_subgraphs(ir_graph *g, int min_size) {
  pass_alias *a = pass_alias_new(g);
  if (!a) return KILN_ERR_NOMEM;
  group_alias = a;
  int rc = group_block(g, ir_graph_top(g), min_size < 1 ? 1 : min_size);
  group_alias = NULL;
  pass_alias_free(a);
  return rc;
}

/* ---- guards --------------------------------------------------------------- */

bool pass_assumes_requires_grad(const ir_type *t) {
  return t->kind == IR_TYPE_TENSOR && (!t->seen || t->requires_grad != 0);
}

static int guard_one(ir_graph *g, ir_node *dg) {
  int n_in = dg->n_inputs, rc = 0;
  ir_node *chk = ir_node_new_prim(g, IR_PRIM_REQUIRES_GRAD_CHECK);
  ir_node *iff = ir_node_new_prim(g, IR_PRIM_IF);
  ir_node *fb = ir_node_new_prim(g, IR_PRIM_FALLBACK_GRAPH);
  const ir_type **types = core_alloc((size_t)(n_in ? n_in : 1) * sizeof *types);
  ir_value **guarded = core_calloc((size_t)(n_in ? n_in : 1), sizeof *guarded);
  if (!chk || !iff || !fb || !types || !guarded) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  int n_types = 0;
  for (int i = 0; i < n_in; i++) {
    ir_value *v = dg->inputs[i];
    if (v->type->kind != IR_TYPE_TENSOR || !v->type->seen) continue; /* unseen: not guarded */
    types[n_types] = ir_type_tensor_new(g, -1, -1, NULL, NULL,
                                        pass_assumes_requires_grad(v->type) ? 1 : 0, NULL);
    if (!types[n_types] || ir_node_add_input(chk, v) < 0) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
    n_types++;
    if (!(guarded[i] = ir_node_add_output(chk, v->type))) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
  }
  ir_value *ok = ir_node_add_output(chk, ir_type_bool());
  if (!ok || ir_node_set_tys(chk, "types", types, n_types) < 0 || ir_node_add_input(iff, ok) < 0) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  ir_node_insert_before(chk, dg);
  ir_node_insert_before(iff, dg);
  /* the fallback: the same nodes, undifferentiated */
  const ir_attr *sa = ir_node_attr(dg, "Subgraph");
  ir_graph *copy = sa ? ir_graph_clone(sa->g) : NULL;
  if (!copy) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < n_in; i++)
    if (ir_node_add_input(fb, dg->inputs[i]) < 0) {
      ir_graph_free(copy);
      rc = KILN_ERR_NOMEM;
      goto done;
    }
  if ((rc = ir_node_set_g(fb, "Subgraph", copy)) < 0) goto done;
  ir_block *b0 = ir_node_add_block(iff), *b1 = ir_node_add_block(iff);
  if (!b0 || !b1) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int o = 0; o < dg->n_outputs; o++) {
    ir_value *io = ir_node_add_output(iff, dg->outputs[o]->type);
    ir_value *fo = ir_node_add_output(fb, dg->outputs[o]->type);
    if (!io || !fo || ir_value_replace_all_uses(dg->outputs[o], io) < 0) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
  }
  /* re-home dg into block0, reading the guarded inputs */
  for (int i = 0; i < n_in; i++)
    if (guarded[i] && !ir_node_set_input(dg, i, guarded[i])) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
  {
    /* ir has no "move into block": append a copy and remove the original */
    ir_value_map *map = ir_value_map_new();
    if (!map) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
    for (int i = 0; i < n_in && rc == 0; i++)
      rc = ir_value_map_set(map, dg->inputs[i], dg->inputs[i]);
    ir_node *moved = rc == 0 ? ir_node_copy_into(g, dg, map) : NULL;
    ir_value_map_free(map);
    if (!moved) {
      rc = rc < 0 ? rc : KILN_ERR_NOMEM;
      goto done;
    }
    ir_node_append(b0, moved);
    for (int o = 0; o < moved->n_outputs; o++)
      if (ir_block_add_return(b0, moved->outputs[o]) < 0) rc = KILN_ERR_NOMEM;
    ir_node_append(b1, fb);
    for (int o = 0; o < fb->n_outputs; o++)
      if (ir_block_add_return(b1, fb->outputs[o]) < 0) rc = KILN_ERR_NOMEM;
    if (rc == 0) rc = ir_node_remove(dg);
  }
done:
  core_free(types);
  core_free(guarded);
  return rc;
}

static int guard_block(ir_graph *g, ir_block *b) {
  int made = 0, rc;
  for (ir_node *n = b->first, *next; n; n = next) {
    next = n->next;
    for (int i = 0; i < n->n_blocks; i++) {
      if ((rc = guard_block(g, n->blocks[i])) < 0) return rc;
      made += rc;
    }
    if (n->prim != IR_PRIM_DIFFERENTIABLE_GRAPH) continue;
    if ((rc = guard_one(g, n)) < 0) return rc;
    made++;
  }
  return made;
}

int pass_guard_autodiff_subgraphs(ir_graph *g) { return guard_block(g, ir_graph_top(g)); }
