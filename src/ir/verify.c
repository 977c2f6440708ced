/* src/ir/verify.c: the verifier: SSA, Note [Dominance], Note [Use lists],
 * node-list links, and every node's kind check (If/Loop block arities,
 * subgraph arities, op schemas), recursing into subgraphs. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "irimpl.h"

typedef struct verifier {
  const ir_graph *g;
  uint8_t *state;    /* per value id: 0 not defined yet, 1 in scope, 2 out of scope */
  uint8_t *live;     /* per node id: reached by the walk */
  int n_values, n_nodes;
  int64_t *slot_base; /* per node id: its first input slot in `seen` */
  uint8_t *seen;      /* per input slot: its use-list entry was found */
  int64_t n_slots;
} verifier;

static const char *label(const ir_value *v, char *buf, size_t n) {
  if (v->name) snprintf(buf, n, "%%%s", v->name);
  else snprintf(buf, n, "%%%d", v->id);
  return buf;
}

/* "verify: <what> (in node %y = aten::relu, line 3)" */
static int fail_at(const ir_node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail_at(const ir_node *n, const char *fmt, ...) {
  char msg[512], where[160] = "", lb[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n && n->prim == IR_PRIM_RETURN)
    snprintf(where, sizeof where, " (in the returns of a block)");
  else if (n && n->prim == IR_PRIM_PARAM)
    snprintf(where, sizeof where, " (in the parameters of a block)");
  else if (n)
    snprintf(where, sizeof where, " (in %s%s%s, line %d)",
             n->n_outputs ? label(n->outputs[0], lb, sizeof lb) : "", n->n_outputs ? " = " : "",
             ir_node_kind(n), n->line);
  return core_error(KILN_ERR_INVALID, "verify: %s%s", msg, where);
}

static int check_value_id(verifier *w, const ir_node *n, const ir_value *v) {
  if (v->id < 0 || v->id >= w->n_values || v->node->graph != w->g)
    return fail_at(n, "value %d belongs to another graph or has a bad id", v->id);
  return 0;
}

static int check_inputs(verifier *w, const ir_node *n) {
  char lb[64];
  for (int i = 0; i < n->n_inputs; i++) {
    const ir_value *v = n->inputs[i];
    int rc = check_value_id(w, n, v);
    if (rc < 0) return rc;
    if (w->state[v->id] != 1)
      return fail_at(n, "input %d (%s) is %s", i, label(v, lb, sizeof lb),
                     w->state[v->id] ? "defined in a block that does not enclose this use"
                                     : "used before its definition");
    /* Its use-list entry is matched to the slot by check_uses: scanning
     * v's uses here cost O(uses^2) for a much-used value (56 s on a
     * 1.2 MB graph, issue #20). */
  }
  return 0;
}

static int define(verifier *w, const ir_node *n, int i) {
  char lb[64];
  const ir_value *v = n->outputs[i];
  int rc = check_value_id(w, n, v);
  if (rc < 0) return rc;
  if (v->node != n || v->index != i)
    return fail_at(n, "output %d (%s) records a different definition", i, label(v, lb, sizeof lb));
  if (!v->type) return fail_at(n, "output %d has no type", i);
  if (w->state[v->id]) return fail_at(n, "%s is defined more than once", label(v, lb, sizeof lb));
  w->state[v->id] = 1;
  return 0;
}

static int mark_live(verifier *w, const ir_node *n) {
  if (n->id < 0 || n->id >= w->n_nodes || n->graph != w->g)
    return fail_at(n, "node belongs to another graph or has a bad id");
  if (w->live[n->id]) return fail_at(n, "node appears twice");
  w->live[n->id] = 1;
  w->slot_base[n->id] = w->n_slots;
  w->n_slots += n->n_inputs;
  return 0;
}

static int verify_block(verifier *w, const ir_block *b, const ir_node *owner) {
  int rc;
  if (b->graph != w->g || b->owner != owner) return fail_at(owner, "block has a wrong owner");
  if (b->param->prim != IR_PRIM_PARAM || b->ret->prim != IR_PRIM_RETURN ||
      b->param->owner != b || b->ret->owner != b)
    return fail_at(owner, "block's Param/Return nodes are broken");
  if ((rc = mark_live(w, b->param)) < 0 || (rc = mark_live(w, b->ret)) < 0) return rc;
  for (int i = 0; i < b->param->n_outputs; i++)
    if ((rc = define(w, b->param, i)) < 0) return rc;
  const ir_node *prev = NULL;
  for (const ir_node *n = b->first; n; prev = n, n = n->next) {
    if (n->owner != b || n->prev != prev || !n->linked)
      return fail_at(n, "node list links are broken");
    if (n->prim == IR_PRIM_PARAM || n->prim == IR_PRIM_RETURN)
      return fail_at(n, "%s inside a node list", ir_node_kind(n));
    if ((rc = mark_live(w, n)) < 0 || (rc = check_inputs(w, n)) < 0) return rc;
    for (int k = 0; k < n->n_blocks; k++)
      if ((rc = verify_block(w, n->blocks[k], n)) < 0) return rc;
    for (int i = 0; i < n->n_outputs; i++)
      if ((rc = define(w, n, i)) < 0) return rc;
    if ((rc = ir_node_check(n)) < 0) {
      char msg[768];
      snprintf(msg, sizeof msg, "%s", kiln_last_error());
      return fail_at(n, "%s", msg);
    }
  }
  if (b->last != prev) return fail_at(owner, "block's last node is wrong");
  if ((rc = check_inputs(w, b->ret)) < 0) return rc;
  /* Note [Dominance]: the block's definitions end with it */
  for (int i = 0; i < b->param->n_outputs; i++) w->state[b->param->outputs[i]->id] = 2;
  for (const ir_node *n = b->first; n; n = n->next)
    for (int i = 0; i < n->n_outputs; i++) w->state[n->outputs[i]->id] = 2;
  return 0;
}

/* Every use recorded must be an input slot of a live node holding v. */
static int check_uses(verifier *w, const ir_block *b) {
  char lb[64];
  for (int pass = 0; pass < 2; pass++) {
    const ir_node *n = pass == 0 ? b->param : b->first;
    for (; n; n = pass == 0 ? NULL : n->next) {
      for (int i = 0; i < n->n_outputs; i++) {
        const ir_value *v = n->outputs[i];
        for (int k = 0; k < v->n_uses; k++) {
          const ir_use *u = &v->uses[k];
          if (!u->user || u->user->id < 0 || u->user->id >= w->n_nodes || !w->live[u->user->id] ||
              u->user->graph != w->g)
            return fail_at(n, "%s has a use by a node that is not in the graph",
                           label(v, lb, sizeof lb));
          if (u->index < 0 || u->index >= u->user->n_inputs || u->user->inputs[u->index] != v)
            return fail_at(n, "%s has a use (input %d of %s) that does not hold it",
                           label(v, lb, sizeof lb), u->index, ir_node_kind(u->user));
          uint8_t *s = &w->seen[w->slot_base[u->user->id] + u->index];
          if (*s)
            return fail_at(u->user, "use list of %s has 2 entries for input %d",
                           label(v, lb, sizeof lb), u->index);
          *s = 1;
        }
      }
      if (pass == 1)
        for (int k = 0; k < n->n_blocks; k++) {
          int rc = check_uses(w, n->blocks[k]);
          if (rc < 0) return rc;
        }
    }
  }
  return 0;
}

/* Note [Use lists]: every input slot of a live node has its entry in its
 * value's use list (check_uses marked the ones found). */
static int check_slots(verifier *w, const ir_block *b) {
  char lb[64];
  for (const ir_node *n = b->first;; n = n->next) {
    const ir_node *x = n ? n : b->ret;
    for (int i = 0; i < x->n_inputs; i++)
      if (!w->seen[w->slot_base[x->id] + i])
        return fail_at(x, "use list of %s has 0 entries for input %d",
                       label(x->inputs[i], lb, sizeof lb), i);
    if (!n) break;
    for (int k = 0; k < n->n_blocks; k++) {
      int rc = check_slots(w, n->blocks[k]);
      if (rc < 0) return rc;
    }
  }
  return 0;
}

static int verify_graph(const ir_graph *g, int depth) {
  if (depth > 64) return core_error(KILN_ERR_INVALID, "verify: subgraphs nested too deeply");
  verifier w = {g, NULL, NULL, ir_graph_value_count(g), ir_graph_node_count(g), NULL, NULL, 0};
  w.state = core_calloc((size_t)(w.n_values ? w.n_values : 1), 1);
  w.live = core_calloc((size_t)(w.n_nodes ? w.n_nodes : 1), 1);
  w.slot_base = core_calloc((size_t)(w.n_nodes ? w.n_nodes : 1), sizeof *w.slot_base);
  int rc = KILN_ERR_NOMEM;
  if (!w.state || !w.live || !w.slot_base) goto done;
  if ((rc = verify_block(&w, g->top, NULL)) < 0) goto done;
  rc = KILN_ERR_NOMEM;
  if (!(w.seen = core_calloc((size_t)(w.n_slots ? w.n_slots : 1), 1))) goto done;
  if ((rc = check_uses(&w, g->top)) < 0 || (rc = check_slots(&w, g->top)) < 0) goto done;
  /* subgraphs held by nodes */
  for (int i = 0; i < g->n_subgraphs && rc >= 0; i++) {
    rc = verify_graph(g->subgraphs[i], depth + 1);
    if (rc < 0) core_error_prefix("in a subgraph: ");
  }
done:
  core_free(w.state);
  core_free(w.live);
  core_free(w.slot_base);
  core_free(w.seen);
  return rc;
}

int ir_graph_verify(const ir_graph *g) { return verify_graph(g, 0); }
