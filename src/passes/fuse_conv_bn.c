/* src/passes/fuse_conv_bn.c: a convolution followed by eval-mode batch norm
 * (and a residual add_, and relu) becomes one aten::_conv_bn_eval node,
 * whose kernel applies them as the convolution's epilogue (Note [Conv
 * epilogue] in src/ops/conv_fused.c).
 *
 * Note [Conv bn fusion]: in one block,
 *   %c = aten::conv2d(%x, %w, %b, %s, %p, %d, %g)            (%c used once)
 *   %y = aten::batch_norm(%c, %bw, %bb, %rm, %rv, %t, %m, %eps, %cu)
 *                                                 (%t the constant False)
 *   %z = aten::add_(%y, %r, %one)       optional: %y used once, as its self;
 *                                       %one the constant 1
 *   %o = aten::relu(%z) or aten::relu_(%z)      optional: %z used once
 * becomes %o = aten::_conv_bn_eval(%x, %w, %b, %s, %p, %d, %g, %bw, %bb,
 * %rm, %rv, %eps, %r or None, relu) at the last matched node's place. Each
 * matched value has that one use, and nothing else aliases a fresh conv
 * result, so nothing else can see the values in between. The node moves
 * the convolution's reads later, so every other node between the conv and
 * the last matched node must write nothing, have no side effects and no
 * blocks. The block is walked backwards, so a later match (resnet's
 * downsample conv and batch norm, between a block's second batch norm and
 * its add_) is fused first and no longer counts as a writer (batch_norm's
 * schema marks its running statistics written). Training-mode batch norm
 * (the statistics of the batch, the running ones updated) never matches. */
#include "passes.h"

static bool const_is(const ir_value *v, int tag, double num) {
  pass_const c;
  if (!pass_const_of(v, &c)) return false;
  if (tag == PASS_C_BOOL) return c.tag == PASS_C_BOOL && c.b == (num != 0);
  return (c.tag == PASS_C_INT && (double)c.i == num) || (c.tag == PASS_C_FLOAT && c.f == num);
}

/* The one node using v (as input index), or NULL. */
static ir_node *only_user(const ir_value *v, int index) {
  if (v->n_uses != 1 || v->uses[0].index != index) return NULL;
  return v->uses[0].user;
}

/* May the conv's reads move from c down to last (Note [Conv bn fusion])? */
static bool path_clear(const ir_node *c, const ir_node *last, ir_node *const *pat, int np) {
  for (const ir_node *n = c->next; n && n != last; n = n->next) {
    bool mine = false;
    for (int i = 0; i < np; i++) mine |= pat[i] == n;
    if (mine) continue;
    if (n->n_blocks > 0 || pass_alias_writes(n) || pass_has_side_effects(n, true)) return false;
  }
  return true;
}

/* Fuses the pattern ending at batch norm node bn, if it is one: 1, 0, < 0. */
static int fuse_at(ir_graph *g, ir_node *bn) {
  if (bn->n_inputs != 9 || !const_is(bn->inputs[5], PASS_C_BOOL, 0)) return 0;
  ir_node *conv = bn->inputs[0]->node;
  if (!conv || conv->op != KILN_OP_CONV2D || conv->n_inputs != 7 || conv->owner != bn->owner ||
      bn->inputs[0]->n_uses != 1)
    return 0;
  ir_node *pat[4] = {conv, bn, NULL, NULL}, *last = bn, *u;
  ir_value *res = NULL;
  bool relu = false;
  int np = 2;
  if ((u = only_user(bn->outputs[0], 0)) && u->op == KILN_OP_INPLACE(KILN_OP_ADD) && u->n_inputs == 3 &&
      u->owner == bn->owner && ir_type_is_tensor(u->inputs[1]->type) &&
      const_is(u->inputs[2], PASS_C_INT, 1)) {
    res = u->inputs[1];
    pat[np++] = last = u;
  }
  if ((u = only_user(last->outputs[0], 0)) && (u->op == KILN_OP_RELU || u->op == KILN_OP_INPLACE(KILN_OP_RELU)) &&
      u->n_inputs == 1 && u->owner == bn->owner) {
    relu = true;
    pat[np++] = last = u;
  }
  if (!path_clear(conv, last, pat, np)) return 0;
  pass_const none = {.tag = PASS_C_NONE}, flag = {.tag = PASS_C_BOOL, .b = relu};
  ir_value *rv = res ? res : pass_const_insert(g, &none, last);
  ir_value *fv = pass_const_insert(g, &flag, last);
  ir_node *f = ir_node_new_op(g, KILN_OP_CONV_BN_EVAL);
  if (!rv || !fv || !f) return KILN_ERR_NOMEM;
  for (int i = 0; i < 7; i++)
    if (ir_node_add_input(f, conv->inputs[i]) < 0) return KILN_ERR_NOMEM;
  ir_value *more[7] = {bn->inputs[1], bn->inputs[2], bn->inputs[3], bn->inputs[4],
                       bn->inputs[7], rv, fv};
  for (int i = 0; i < 7; i++)
    if (ir_node_add_input(f, more[i]) < 0) return KILN_ERR_NOMEM;
  ir_value *out = ir_node_add_output(f, last->outputs[0]->type);
  if (!out) return KILN_ERR_NOMEM;
  ir_node_insert_before(f, last);
  int rc = ir_value_replace_all_uses(last->outputs[0], out);
  for (int i = np - 1; rc >= 0 && i >= 0; i--) rc = ir_node_remove(pat[i]);
  return rc < 0 ? rc : 1;
}

int pass_fuse_conv_bn(ir_graph *g) {
  int changed = 0;
  ir_block *top = ir_graph_top(g);
  for (ir_node *n = top->last, *prev; n; n = prev) {
    prev = n->prev;
    if (n->op != KILN_OP_BATCH_NORM) continue;
    ir_node *conv = n->n_inputs > 0 ? n->inputs[0]->node : NULL;
    ir_node *before = conv ? conv->prev : NULL; /* read while conv is linked */
    int rc = fuse_at(g, n);
    if (rc < 0) return rc;
    changed += rc;
    if (rc) prev = before; /* conv and bn are gone: go on before them */
  }
  return changed;
}
