/* src/passes/pass.c: what the passes share: running a pass by name,
 * logging (Note [Pass logging]), and the side-effect and list-mutation
 * queries (Note [Side effects], Note [List mutation]). The pipelines are in
 * pipeline.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* ---- logging ---------------------------------------------------------------- */

bool pass_log_enabled(const char *name) { return core_log_enabled("KILN_JIT_LOG", name); }

void pass_log_graph(const ir_graph *g, const char *when, const char *name) {
  char *text = ir_graph_print(g, IR_PRINT_NO_SOURCE);
  fprintf(stderr, "[kiln-jit] %s %s:\n%s", when, name, text ? text : "(out of memory)\n");
  core_free(text);
}

void pass_log(const ir_graph *g, const char *name) {
  if (pass_log_enabled(name)) pass_log_graph(g, "after", name);
}

/* ---- side effects and mutation ------------------------------------------------- */

static bool block_has_side_effects(const ir_block *b) {
  for (const ir_node *m = b->first; m; m = m->next)
    if (pass_has_side_effects(m, true)) return true;
  return false;
}

static bool graph_has_side_effects(const ir_graph *g) {
  return block_has_side_effects(ir_graph_top(g));
}

bool pass_has_side_effects(const ir_node *n, bool nested) {
  if (n->op >= 0) return false; /* OPF_RANDOM is not a side effect (Note [Side effects]) */
  if ((ir_prim_table[n->prim].flags & IR_PF_SIDE_EFFECT) || n->prim == IR_PRIM_CALL_FUNCTION)
    return true;
  for (int i = 0; i < n->n_attrs; i++)
    if (n->attrs[i].kind == IR_ATTR_GRAPH && graph_has_side_effects(n->attrs[i].g)) return true;
  if (nested)
    for (int b = 0; b < n->n_blocks; b++)
      if (block_has_side_effects(n->blocks[b])) return true;
  return false;
}

static bool block_mutates_lists(const ir_block *b) {
  for (const ir_node *m = b->first; m; m = m->next) {
    if (m->prim == IR_PRIM_APPEND || m->prim == IR_PRIM_CALL_FUNCTION) return true;
    for (int i = 0; i < m->n_attrs; i++)
      if (m->attrs[i].kind == IR_ATTR_GRAPH && pass_graph_mutates_lists(m->attrs[i].g))
        return true;
    for (int k = 0; k < m->n_blocks; k++)
      if (block_mutates_lists(m->blocks[k])) return true;
  }
  return false;
}

bool pass_graph_mutates_lists(const ir_graph *g) { return block_mutates_lists(ir_graph_top(g)); }

bool pass_type_has_list(const ir_type *t) {
  switch (t->kind) {
  case IR_TYPE_LIST:
  case IR_TYPE_ANY: /* could be a list at run time */
    return true;
  case IR_TYPE_TUPLE:
  case IR_TYPE_OPTIONAL:
    for (int i = 0; i < t->n_elems; i++)
      if (pass_type_has_list(t->elems[i])) return true;
    return false;
  default:
    return false;
  }
}

/* ---- subgraphs ---------------------------------------------------------------------- */

static int block_subgraphs(ir_block *b, int (*fn)(ir_graph *)) {
  int total = 0;
  for (ir_node *m = b->first; m; m = m->next) {
    for (int i = 0; i < m->n_attrs; i++) {
      if (m->attrs[i].kind != IR_ATTR_GRAPH) continue;
      int rc = fn(m->attrs[i].g);
      if (rc < 0) return rc;
      total += rc;
    }
    for (int k = 0; k < m->n_blocks; k++) {
      int rc = block_subgraphs(m->blocks[k], fn);
      if (rc < 0) return rc;
      total += rc;
    }
  }
  return total;
}

int pass_for_each_subgraph(ir_graph *g, int (*fn)(ir_graph *)) {
  return block_subgraphs(ir_graph_top(g), fn);
}

/* ---- passes by name ----------------------------------------------------------------- */

static const struct {
  const char *name;
  int (*fn)(ir_graph *);
} pass_table[] = {
    {"dce", pass_dce},
    {"cse", pass_cse},
    {"constant_fold", pass_constant_fold},
    {"peephole", pass_peephole},
    {"cleanup", pass_cleanup},
    {"functionalize", pass_functionalize},
};

int pass_run(ir_graph *g, const char *name) {
  for (size_t i = 0; i < sizeof pass_table / sizeof *pass_table; i++)
    if (name && strcmp(pass_table[i].name, name) == 0) {
      int rc = pass_table[i].fn(g);
      if (rc >= 0 && pass_table[i].fn != pass_cleanup) pass_log(g, name); /* cleanup logs itself */
      return rc;
    }
  return core_error(KILN_ERR_INVALID, "pass_run: unknown pass '%s' (known: dce, cse, "
                                      "constant_fold, peephole, cleanup, functionalize)",
                    name ? name : "(null)");
}
