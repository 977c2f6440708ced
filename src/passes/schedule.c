/* src/passes/schedule.c: pass_schedule_collectives, the lazy pipeline's
 * last step: the execution order of a graph's all-reduces.
 *
 * Note [Collective schedule]: the instruction code runs nodes in block
 * order, so the order of a graph's nodes is its schedule. In the order
 * pass_lazy_to_ir gives (Note [Recorded order]) an aten::kiln_all_reduce_wait
 * can come right after its aten::kiln_all_reduce_start: the all-reduce would
 * run with nothing to overlap. This pass reorders the top block by a list schedule
 * (Kahn's topological sort, choosing among the ready nodes):
 *   1. a ready start first: it runs right after its last producer;
 *   2. then the other nodes, those that feed the earliest start first
 *      (starts ranked by how many nodes they depend on, fewest first: the
 *      bucket the backward finishes first), then in their old order;
 *   3. a wait only when nothing else is ready (starts in rank order): it
 *      runs as late as its consumers allow, after every node that does not
 *      depend on an all-reduce.
 * Only data dependencies order nodes, plus the old order between any two
 * nodes where one writes memory the other uses (pass_alias_conflict) or
 * both have side effects. A top block with If/Loop nodes is left as it is
 * (lazy graphs have none). Deterministic: every rank compiles the same
 * graph and so starts the collectives in the same order. */
#include <limits.h>

#include "autodiff.h"
#include "passes.h"

static bool is_op(const ir_node *n, int op) { return n->op == op; }

/* The ready list: a binary min-heap of node positions ordered by (class,
 * key, position), the list schedule's choice (Note [Collective schedule]). */
typedef struct rd_heap {
  int *v, n;
  const int *cls, *key;
} rd_heap;

static bool before(const rd_heap *h, int i, int j) {
  if (h->cls[i] != h->cls[j]) return h->cls[i] < h->cls[j];
  if (h->key[i] != h->key[j]) return h->key[i] < h->key[j];
  return i < j;
}

static void heap_push(rd_heap *h, int x) {
  int c = h->n++;
  while (c > 0 && before(h, x, h->v[(c - 1) / 2])) {
    h->v[c] = h->v[(c - 1) / 2];
    c = (c - 1) / 2;
  }
  h->v[c] = x;
}

static int heap_pop(rd_heap *h) {
  int top = h->v[0], x = h->v[--h->n], c = 0;
  for (;;) {
    int l = 2 * c + 1, m = l;
    if (l >= h->n) break;
    if (l + 1 < h->n && before(h, h->v[l + 1], h->v[l])) m = l + 1;
    if (!before(h, h->v[m], x)) break;
    h->v[c] = h->v[m];
    c = m;
  }
  if (h->n) h->v[c] = x;
  return top;
}

/* Marks the not-yet-marked ancestors of node s (itself included) with
 * `mark`, counting them: a DFS through pred lists (CSR). */
static int ancestors(int s, const int *pstart, const int *preds, int *mark, int stamp, int *stack) {
  int top = 0, count = 0;
  stack[top++] = s;
  mark[s] = stamp;
  while (top) {
    int v = stack[--top];
    count++;
    for (int e = pstart[v]; e < pstart[v + 1]; e++)
      if (mark[preds[e]] != stamp) {
        mark[preds[e]] = stamp;
        stack[top++] = preds[e];
      }
  }
  return count;
}

int pass_schedule_collectives(ir_graph *g) {
  ir_block *b = ir_graph_top(g);
  int n = 0, n_start = 0, rc = 0, changes = 0;
  bool writes = false;
  for (ir_node *x = b->first; x; x = x->next) {
    if (x->n_blocks > 0) return 0;
    n_start += is_op(x, KILN_OP_KILN_ALL_REDUCE_START);
    writes |= pass_alias_writes(x) || pass_has_side_effects(x, false);
    n++;
  }
  if (n_start == 0) return 0;
  int max_id = 0;
  for (ir_node *x = b->first; x; x = x->next)
    if (x->id > max_id) max_id = x->id;
  ir_node **nodes = core_alloc((size_t)n * sizeof *nodes);
  int *pos_of = core_alloc((size_t)(max_id + 1) * sizeof *pos_of);
  int *pstart = core_calloc((size_t)n + 1, sizeof *pstart), *preds = NULL;
  int *cls = core_alloc((size_t)n * sizeof *cls), *key = core_alloc((size_t)n * sizeof *key);
  int *mark = core_calloc((size_t)n, sizeof *mark), *stack = core_alloc((size_t)n * sizeof *stack);
  int *indeg = core_calloc((size_t)n, sizeof *indeg), *order = core_alloc((size_t)n * sizeof *order);
  int *sstart = core_calloc((size_t)n + 1, sizeof *sstart), *succs = NULL, *fill = NULL;
  int *starts = core_alloc((size_t)n_start * sizeof *starts);
  int *cost = core_alloc((size_t)n_start * sizeof *cost);
  bool *done = core_calloc((size_t)n, sizeof *done), *eff = core_calloc((size_t)n, sizeof *eff);
  int *effs = core_alloc((size_t)n * sizeof *effs);
  pass_alias *a = NULL;
  if (!nodes || !pos_of || !pstart || !cls || !key || !mark || !stack || !indeg || !order ||
      !sstart || !starts || !cost || !done || !eff || !effs)
    goto oom;
  for (int i = 0; i <= max_id; i++) pos_of[i] = -1;
  int k = 0;
  for (ir_node *x = b->first; x; x = x->next, k++) {
    nodes[k] = x;
    pos_of[x->id] = k;
  }
  int n_eff = 0;
  for (int i = 0; i < n; i++) {
    eff[i] = pass_alias_writes(nodes[i]) || pass_has_side_effects(nodes[i], false);
    if (eff[i]) effs[n_eff++] = i;
  }
  if (writes && !(a = pass_alias_new(g))) {
    rc = -1;
    goto done;
  }
  /* predecessors: producers in this block, and ordered conflicts; counted
   * first, then filled (duplicates are harmless: indegree counts them) */
  for (int pass = 0; pass < 2; pass++) {
    int e = 0;
    for (int i = 0; i < n; i++) {
      ir_node *x = nodes[i];
      if (pass) pstart[i] = e;
      for (int j = 0; j < x->n_inputs; j++) {
        ir_node *p = x->inputs[j]->node;
        if (p->owner == b && p->linked && p != b->param && pos_of[p->id] >= 0) {
          if (pass) preds[e] = pos_of[p->id];
          e++;
        }
      }
      /* ordered conflicts need a write or side effect on one side: an
       * effectful node is paired with every earlier node, another only
       * with the earlier effectful ones (n times the effectful, not n^2) */
      if (a)
        for (int q = 0, h; eff[i] ? q < i : q < n_eff && effs[q] < i; q++) {
          h = eff[i] ? q : effs[q];
          ir_node *y = nodes[h];
          if (!eff[i] && !eff[h]) continue;
          if ((pass_has_side_effects(x, false) && pass_has_side_effects(y, false)) ||
              pass_alias_conflict(a, x, y)) {
            if (pass) preds[e] = h;
            e++;
          }
        }
    }
    if (pass) pstart[n] = e;
    else if (!(preds = core_alloc((size_t)(e ? e : 1) * sizeof *preds)))
      goto oom;
  }
  /* starts ranked by their number of ancestors (Note [Collective schedule]) */
  int ns = 0;
  for (int i = 0; i < n; i++) {
    cls[i] = 1;
    key[i] = INT_MAX;
    if (is_op(nodes[i], KILN_OP_KILN_ALL_REDUCE_START)) {
      cls[i] = 0;
      starts[ns] = i;
      cost[ns] = ancestors(i, pstart, preds, mark, ns + 1, stack);
      ns++;
    }
  }
  for (int s = 1; s < ns; s++) /* insertion sort by (cost, position): stable */
    for (int t = s; t > 0 && cost[t - 1] > cost[t]; t--) {
      int c = cost[t], p = starts[t];
      cost[t] = cost[t - 1], starts[t] = starts[t - 1];
      cost[t - 1] = c, starts[t - 1] = p;
    }
  for (int i = 0; i < n; i++) mark[i] = 0;
  for (int s = 0; s < ns; s++) { /* each node keyed by the earliest start it feeds */
    int stamp = -(s + 1), top = 0;
    if (mark[starts[s]]) continue;
    mark[starts[s]] = stamp; /* marked when pushed: the stack holds each node once */
    stack[top++] = starts[s];
    while (top) {
      int v = stack[--top];
      key[v] = s;
      for (int e = pstart[v]; e < pstart[v + 1]; e++)
        if (!mark[preds[e]]) {
          mark[preds[e]] = stamp;
          stack[top++] = preds[e];
        }
    }
  }
  for (int i = 0; i < n; i++)
    if (is_op(nodes[i], KILN_OP_KILN_ALL_REDUCE_WAIT)) {
      cls[i] = 2;
      ir_node *p = nodes[i]->inputs[0]->node;
      key[i] = is_op(p, KILN_OP_KILN_ALL_REDUCE_START) && p->owner == b ? key[pos_of[p->id]]
                                                                         : INT_MAX;
    }
  /* successors (CSR) and the list schedule */
  for (int e = 0; e < pstart[n]; e++) sstart[preds[e] + 1]++;
  for (int i = 0; i < n; i++) sstart[i + 1] += sstart[i];
  succs = core_alloc((size_t)(pstart[n] ? pstart[n] : 1) * sizeof *succs);
  fill = core_alloc((size_t)n * sizeof *fill);
  if (!succs || !fill) goto oom;
  for (int i = 0; i < n; i++) fill[i] = sstart[i];
  for (int i = 0; i < n; i++)
    for (int e = pstart[i]; e < pstart[i + 1]; e++) {
      succs[fill[preds[e]]++] = i;
      indeg[i]++;
    }
  /* the ready nodes in a binary heap (stack reused): O(n log n) */
  rd_heap h = {stack, 0, cls, key};
  for (int i = 0; i < n; i++)
    if (!indeg[i]) heap_push(&h, i);
  for (int step = 0; step < n; step++) {
    KILN_ASSERT(h.n > 0); /* the block was in topological order */
    int best = heap_pop(&h);
    done[best] = true;
    order[step] = best;
    for (int e = sstart[best]; e < sstart[best + 1]; e++)
      if (--indeg[succs[e]] == 0) heap_push(&h, succs[e]);
  }
  for (int i = 0; i < n; i++) {
    ir_node *x = nodes[order[i]];
    if (order[i] != i) changes++;
    if (i == 0) {
      if (b->first != x) ir_node_move_before(x, b->first);
    } else if (nodes[order[i - 1]]->next != x) {
      ir_node_move_after(x, nodes[order[i - 1]]);
    }
  }
  rc = changes;
  goto done;
oom:
  rc = core_error(KILN_ERR_NOMEM, "schedule_collectives: out of memory");
done:
  pass_alias_free(a);
  core_free(nodes);
  core_free(pos_of);
  core_free(pstart);
  core_free(preds);
  core_free(cls);
  core_free(key);
  core_free(mark);
  core_free(stack);
  core_free(indeg);
  core_free(order);
  core_free(sstart);
  core_free(succs);
  core_free(fill);
  core_free(starts);
  core_free(cost);
  core_free(done);
  core_free(eff);
  core_free(effs);
  return rc;
}
