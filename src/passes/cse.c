/* src/passes/cse.c: common subexpression elimination (TorchScript's
 * EliminateCommonSubexpression) with a scoped hash table.
 *
 * Note [CSE scopes]: the table holds the candidate nodes seen so far on
 * the path from the top block to the current node: entering a block
 * remembers the table's size, leaving it drops every entry added since.
 * So a node is matched only against nodes that dominate it (earlier in
 * its block, or earlier in an enclosing block than the owner of its
 * block), never against a node of a sibling block, which may not have
 * run. Entries are chained per bucket newest first, so dropping the
 * newest entries is popping bucket heads. */
#include <string.h>

#include "passes.h"

typedef struct entry {
  uint64_t hash;
  ir_node *n;
  int next;  /* older entry in the same bucket, or -1 */
} entry;

typedef struct cse {
  entry *entries;
  int n_entries, cap_entries;
  int *buckets;  /* bucket -> newest entry, or -1 */
  int n_buckets; /* a power of two */
  bool lists_mutable;
  pass_alias *alias; /* Note [Alias analysis]: nothing touching written memory merges */
} cse;

/* ---- hashing and equality ----------------------------------------------------- */

static uint64_t hash_ivalue(uint64_t h, const ir_ivalue *v) {
  h = core_hash_mix(h, v->tag);
  switch (v->tag) {
  case IR_IV_INT: return core_hash_mix(h, (uint64_t)v->i);
  case IR_IV_FLOAT: return core_hash_bytes(h, &v->f, sizeof v->f);
  case IR_IV_BOOL: return core_hash_mix(h, v->b);
  case IR_IV_STR: return core_hash_bytes(h, v->s, strlen(v->s));
  case IR_IV_LIST:
  case IR_IV_TUPLE:
    for (int i = 0; i < v->items.n; i++) h = hash_ivalue(h, &v->items.v[i]);
    return core_hash_mix(h, (uint64_t)v->items.n);
  default: return h;
  }
}

static uint64_t hash_attr(uint64_t h, const ir_attr *a) {
  h = core_hash_bytes(h, a->name, strlen(a->name));
  h = core_hash_mix(h, a->kind);
  switch (a->kind) {
  case IR_ATTR_INT: return core_hash_mix(h, (uint64_t)a->i);
  case IR_ATTR_FLOAT: return core_hash_bytes(h, &a->f, sizeof a->f);
  case IR_ATTR_STR: return core_hash_bytes(h, a->s, strlen(a->s));
  case IR_ATTR_INTS: return core_hash_bytes(core_hash_mix(h, (uint64_t)a->ints.n), a->ints.v, (size_t)a->ints.n * sizeof *a->ints.v);
  case IR_ATTR_FLOATS: return core_hash_bytes(core_hash_mix(h, (uint64_t)a->floats.n), a->floats.v, (size_t)a->floats.n * sizeof *a->floats.v);
  case IR_ATTR_IVALUE: return hash_ivalue(h, a->iv);
  default: return h; /* types: compared, not hashed */
  }
}

static uint64_t hash_node(const ir_node *n) {
  uint64_t h = core_hash_mix(core_hash_mix(0, (uint64_t)(int64_t)n->op), (uint64_t)(int64_t)n->prim);
  h = core_hash_mix(h, (uint64_t)n->n_inputs);
  for (int i = 0; i < n->n_inputs; i++) h = core_hash_mix(h, (uint64_t)n->inputs[i]->id);
  h = core_hash_mix(h, (uint64_t)n->n_outputs);
  for (int i = 0; i < n->n_attrs; i++) h ^= hash_attr(0x1234, &n->attrs[i]); /* order-free */
  return h;
}

static bool ivalue_equal(const ir_ivalue *a, const ir_ivalue *b) {
  if (a->tag != b->tag) return false;
  switch (a->tag) {
  case IR_IV_NONE: return true;
  case IR_IV_INT: return a->i == b->i;
  case IR_IV_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0; /* -0. and NaNs differ */
  case IR_IV_BOOL: return a->b == b->b;
  case IR_IV_STR: return strcmp(a->s, b->s) == 0;
  default:
    if (a->items.n != b->items.n) return false;
    for (int i = 0; i < a->items.n; i++)
      if (!ivalue_equal(&a->items.v[i], &b->items.v[i])) return false;
    return true;
  }
}

static bool attr_equal(const ir_attr *a, const ir_attr *b) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
  case IR_ATTR_INT: return a->i == b->i;
  case IR_ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0;
  case IR_ATTR_STR: return strcmp(a->s, b->s) == 0;
  case IR_ATTR_INTS:
    return a->ints.n == b->ints.n &&
           (a->ints.n == 0 || memcmp(a->ints.v, b->ints.v, (size_t)a->ints.n * sizeof *a->ints.v) == 0);
  case IR_ATTR_FLOATS:
    return a->floats.n == b->floats.n &&
           (a->floats.n == 0 ||
            memcmp(a->floats.v, b->floats.v, (size_t)a->floats.n * sizeof *a->floats.v) == 0);
  case IR_ATTR_TYPE: return ir_type_equal(a->ty, b->ty);
  case IR_ATTR_TYPES:
    if (a->types.n != b->types.n) return false;
    for (int i = 0; i < a->types.n; i++)
      if (!ir_type_equal(a->types.v[i], b->types.v[i])) return false;
    return true;
  case IR_ATTR_IVALUE: return ivalue_equal(a->iv, b->iv);
  default: return a->g == b->g;
  }
}

static bool nodes_equal(const ir_node *a, const ir_node *b) {
  if (a->op != b->op || a->prim != b->prim || a->n_inputs != b->n_inputs ||
      a->n_outputs != b->n_outputs || a->n_attrs != b->n_attrs)
    return false;
  for (int i = 0; i < a->n_inputs; i++)
    if (a->inputs[i] != b->inputs[i]) return false;
  for (int i = 0; i < a->n_outputs; i++)
    if (!ir_type_equal(a->outputs[i]->type, b->outputs[i]->type)) return false;
  for (int i = 0; i < a->n_attrs; i++) {
    const ir_attr *o = ir_node_attr(b, a->attrs[i].name);
    if (!o || !attr_equal(&a->attrs[i], o)) return false;
  }
  return true;
}

/* May n be merged with an equal node? (see pass_cse in passes.h) */
static bool candidate(const cse *c, const ir_node *n) {
  if (n->n_blocks || n->n_outputs == 0) return false;
  if (pass_alias_has_writers(c->alias, n)) return false; /* Note [Alias analysis] */
  if (n->op >= 0) {
    if (op_table[n->op].flags & OPF_RANDOM) return false;
  } else {
    unsigned f = ir_prim_table[n->prim].flags;
    if (f & (IR_PF_SIDE_EFFECT | IR_PF_SUBGRAPH | IR_PF_BLOCKS | IR_PF_INTERNAL)) return false;
    if (n->prim == IR_PRIM_CALL_FUNCTION) return false;
  }
  for (int i = 0; i < n->n_attrs; i++)
    if (n->attrs[i].kind == IR_ATTR_GRAPH) return false;
  if (c->lists_mutable) { /* Note [List mutation] */
    for (int i = 0; i < n->n_inputs; i++)
      if (pass_type_has_list(n->inputs[i]->type)) return false;
    for (int i = 0; i < n->n_outputs; i++)
      if (pass_type_has_list(n->outputs[i]->type)) return false;
  }
  return true;
}

/* ---- the scoped table (Note [CSE scopes]) --------------------------------------- */

static int rehash(cse *c, int n_buckets) {
  int *b = core_alloc((size_t)n_buckets * sizeof *b);
  if (!b) return core_error(KILN_ERR_NOMEM, "pass_cse: out of memory");
  for (int i = 0; i < n_buckets; i++) b[i] = -1;
  for (int i = 0; i < c->n_entries; i++) { /* oldest first: chains stay newest first */
    int k = (int)(c->entries[i].hash & (uint64_t)(n_buckets - 1));
    c->entries[i].next = b[k];
    b[k] = i;
  }
  core_free(c->buckets);
  c->buckets = b;
  c->n_buckets = n_buckets;
  return 0;
}

static ir_node *lookup(const cse *c, const ir_node *n, uint64_t h) {
  for (int i = c->buckets[h & (uint64_t)(c->n_buckets - 1)]; i >= 0; i = c->entries[i].next)
    if (c->entries[i].hash == h && nodes_equal(c->entries[i].n, n)) return c->entries[i].n;
  return NULL;
}

static int insert(cse *c, ir_node *n, uint64_t h) {
  if (c->n_entries == c->cap_entries) {
    int cap = c->cap_entries ? c->cap_entries * 2 : 64;
    entry *e = core_realloc(c->entries, (size_t)cap * sizeof *e);
    if (!e) return core_error(KILN_ERR_NOMEM, "pass_cse: out of memory");
    c->entries = e;
    c->cap_entries = cap;
  }
  if ((c->n_entries + 1) * 4 > c->n_buckets * 3) {
    int rc = rehash(c, c->n_buckets * 2);
    if (rc < 0) return rc;
  }
  int k = (int)(h & (uint64_t)(c->n_buckets - 1));
  c->entries[c->n_entries] = (entry){h, n, c->buckets[k]};
  c->buckets[k] = c->n_entries++;
  return 0;
}

static void pop_to(cse *c, int n_entries) {
  while (c->n_entries > n_entries) {
    entry *e = &c->entries[--c->n_entries];
    int k = (int)(e->hash & (uint64_t)(c->n_buckets - 1));
    KILN_ASSERT(c->buckets[k] == c->n_entries);
    c->buckets[k] = e->next;
  }
}

/* ---- the pass --------------------------------------------------------------------- */

static int cse_block(cse *c, ir_block *b) {
  int changes = 0, rc;
  int mark = c->n_entries;
  for (ir_node *n = b->first, *next; n; n = next) {
    next = n->next;
    for (int k = 0; k < n->n_blocks; k++) {
      if ((rc = cse_block(c, n->blocks[k])) < 0) goto done;
      changes += rc;
    }
    if (!candidate(c, n)) continue;
    uint64_t h = hash_node(n);
    ir_node *same = lookup(c, n, h);
    if (!same) {
      if ((rc = insert(c, n, h)) < 0) goto done;
      continue;
    }
    for (int i = 0; i < n->n_outputs; i++)
      if ((rc = ir_value_replace_all_uses(n->outputs[i], same->outputs[i])) < 0) goto done;
    if ((rc = ir_node_remove(n)) < 0) goto done;
    changes++;
  }
  rc = changes;
done:
  pop_to(c, mark);
  return rc;
}

static int cse_graph(ir_graph *g) {
  cse c = {0};
  c.lists_mutable = pass_graph_mutates_lists(g);
  c.alias = pass_alias_new(g);
  int rc = c.alias ? rehash(&c, 64) : KILN_ERR_NOMEM;
  if (rc >= 0) rc = cse_block(&c, ir_graph_top(g));
  core_free(c.entries);
  core_free(c.buckets);
  pass_alias_free(c.alias);
  if (rc < 0) return rc;
  int sub = pass_for_each_subgraph(g, cse_graph);
  return sub < 0 ? sub : rc + sub;
}

int pass_cse(ir_graph *g) {
  return cse_graph(g);
}
