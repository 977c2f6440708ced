/* src/passes/fuse.c: the fusion pass: groups runs of elementwise ops (the
 * op table's OPF_FUSIBLE flag; never a list of names) into
 * prim::FusionGroup nodes run by the fused-kernel executor.
 *   before: %3 = aten::mul(%x, %a); %4 = aten::add(%3, %b, %1); %5 = aten::sigmoid(%4)
 *   after:  %5 = prim::FusionGroup_0(%x, %a, %b)
 *           with prim::FusionGroup_0 = graph(%x, %a, %b): ... return (%5)
 * A node joins when its operands are tensors or numbers, its other
 * arguments are constants (they are copied in), and it reads a result of
 * the run or a tensor the run reads (so a group is one broadcast family),
 * or its profiled shape is a run member's (Note [Horizontal fusion]). Runs of fewer than two ops
 * stay as they are. Fusion never changes what a graph computes: a group
 * whose inputs require grad runs unfused (Note [Fused tiles]). */
#include <string.h>

#include "autodiff.h"
#include "passes.h"

#define MAX_GROUP PASS_FUSION_MAX_NODES

static bool is_constant(const ir_value *v) { return v->node && v->node->prim == IR_PRIM_CONSTANT; }

/* The alias analysis of the graph being fused (Note [Alias analysis]):
 * nothing touching written memory joins a group, and no node sinks past
 * a node it conflicts with. */
static _Thread_local pass_alias *fuse_alias;

static bool fusible(const ir_node *n) {
  if (n->op < 0 || n->n_blocks || n->n_outputs != 1) return false;
  if (fuse_alias && pass_alias_has_writers(fuse_alias, n)) return false;
  const op_info *info = &op_table[n->op];
  if (!(info->flags & OPF_FUSIBLE) || (info->flags & OPF_RANDOM)) return false;
  if (n->outputs[0]->type->kind != IR_TYPE_TENSOR) return false;
  for (int i = 0; i < n->n_inputs; i++) {
    const ir_type *t = n->inputs[i]->type;
    if (i < info->n_operands) {
      if (t->kind != IR_TYPE_TENSOR && t->kind != IR_TYPE_INT && t->kind != IR_TYPE_FLOAT &&
          t->kind != IR_TYPE_BOOL && t->kind != IR_TYPE_NUMBER)
        return false;
    } else if (!is_constant(n->inputs[i]) && t->kind != IR_TYPE_INT &&
               t->kind != IR_TYPE_FLOAT && t->kind != IR_TYPE_NUMBER) {
      return false; /* a number read at run time (Note [Run-time attributes]) is fine */
    }
  }
  return true;
}

/* Note [Horizontal fusion]: independent ops join a run when their profiled
 * outputs have the same complete shape (the four gates of an LSTM cell):
 * they then share one index space and one pass. Nothing depends on the
 * profile being right: the fused executor computes each step's own shape
 * at run time and runs the group unfused when an output's shape differs
 * from the group's index space or the inputs do not broadcast. */
/* Do x and y have the same complete sizes (rank >= min_rank)? */
static bool same_sizes(const ir_type *x, const ir_type *y, int min_rank) {
  if (x->ndim < min_rank || x->ndim != y->ndim || !x->sizes || !y->sizes) return false;
  for (int d = 0; d < x->ndim; d++)
    if (x->sizes[d] < 0 || x->sizes[d] != y->sizes[d]) return false;
  return true;
}

static bool same_space(const ir_node *a, const ir_node *b) {
  return same_sizes(a->outputs[0]->type, b->outputs[0]->type, 1);
}

typedef struct run {
  ir_node *v[MAX_GROUP];
  int n;
} run;

static bool in_run(const run *r, const ir_node *n) {
  for (int i = 0; i < r->n; i++)
    if (r->v[i] == n) return true;
  return false;
}

/* How many distinct values from outside the run its nodes (plus n, if
 * not NULL) read: the group's inputs, constants aside. */
static int external_inputs(const run *r, const ir_node *n) {
  const ir_value *seen[MAX_GROUP * 4];
  int k = 0;
  for (int j = 0; j <= r->n; j++) {
    const ir_node *m = j < r->n ? r->v[j] : n;
    if (!m) continue;
    for (int i = 0; i < m->n_inputs; i++) {
      const ir_value *v = m->inputs[i];
      if (is_constant(v) || (v->node && (in_run(r, v->node) || v->node == n))) continue;
      bool dup = false;
      for (int s = 0; s < k && !dup; s++) dup = seen[s] == v;
      if (!dup && k < MAX_GROUP * 4) seen[k++] = v;
    }
  }
  return k;
}

static int flush(ir_graph *g, run *r) {
  int ops = r->n, rc = 0;
  if (ops >= 2) rc = pass_collapse(g, r->v, r->n, IR_PRIM_FUSION_GROUP); /* Note [Collapsing] */
  r->n = 0;
  return rc;
}

/* The node of block b that holds n (n itself, or the block-owning node
 * n is nested in), or NULL. */
static ir_node *ancestor_in(ir_block *b, ir_node *n) {
  while (n && n->owner != b) n = n->owner && n->owner->owner ? n->owner->owner : NULL;
  return n;
}

/* Note [Sinking]: recorded graphs (lazy, differentiated) often compute an
 * elementwise op long before its only consumer (an optimizer's
 * buf * momentum sits at the top of a lazy step, its add at the bottom).
 * Moving each fusible node down to just before its first use is always
 * legal (its inputs are already defined) and puts producer and consumer
 * next to each other, where the run-based grouping below sees them. */
static void sink_fusible(ir_block *b) {
  for (ir_node *n = b->last, *prev; n; n = prev) {
    prev = n->prev;
    if (!fusible(n)) continue;
    const ir_value *v = n->outputs[0];
    bool ok = v->n_uses > 0;
    for (int u = 0; u < v->n_uses && ok; u++) {
      ir_node *a = ancestor_in(b, v->uses[u].user);
      ok = a && a != b->ret; /* a use by the block's return: leave n */
    }
    if (!ok) continue;
    /* down to the first node that uses n (or holds a use), but never past
     * a node that might write a tensor n reads: an in-place op, or a block
     * (If/Loop) that might hold one */
    ir_node *first = n->next;
    for (; first; first = first->next) {
      bool uses = false;
      for (int u = 0; u < v->n_uses && !uses; u++) uses = ancestor_in(b, v->uses[u].user) == first;
      if (uses || first->n_blocks || !fuse_alias || pass_alias_conflict(fuse_alias, n, first))
        break;
    }
    if (first && first != n->next) ir_node_move_before(n, first);
  }
}

static int fuse_block(ir_graph *g, ir_block *b) {
  int made = 0, rc;
  run r = {.n = 0};
  sink_fusible(b);
  for (ir_node *n = b->first, *next; n; n = next) {
    next = n->next;
    for (int i = 0; i < n->n_blocks; i++) {
      if ((rc = fuse_block(g, n->blocks[i])) < 0) return rc;
      made += rc;
    }
    if (fusible(n)) {
      /* a group is connected (each op reads an earlier one's result), so
       * all of it shares one broadcast index space */
      bool connected = r.n == 0;
      for (int i = 0; i < n->n_inputs && !connected; i++) {
        const ir_value *v = n->inputs[i];
        if (v->node && in_run(&r, v->node)) connected = true; /* reads a result */
        else if (v->type->kind == IR_TYPE_TENSOR)              /* shares an input */
          for (int u = 0; u < v->n_uses && !connected; u++) connected = in_run(&r, v->uses[u].user);
      }
      for (int i = 0; i < r.n && !connected; i++) connected = same_space(r.v[i], n);
      if (!connected || r.n == MAX_GROUP || external_inputs(&r, n) > PASS_FUSION_MAX_IO) {
        if ((rc = flush(g, &r)) < 0) return rc;
        made += rc;
      }
      r.v[r.n++] = n;
    } else if (n->prim != IR_PRIM_CONSTANT) {
      if ((rc = flush(g, &r)) < 0) return rc;
      made += rc;
    }
  }
  if ((rc = flush(g, &r)) < 0) return rc;
  return made + rc;
}

int pass_fuse(ir_graph *g) {
  pass_alias *a = pass_alias_new(g);
  if (!a) return KILN_ERR_NOMEM;
  fuse_alias = a;
  int rc = fuse_block(g, ir_graph_top(g));
  fuse_alias = NULL;
  pass_alias_free(a);
  return rc;
}

/* ---- GEMM epilogues ------------------------------------------------------------ */

/* Is n `aten::gelu(%z, "tanh")`? (The epilogue's gelu is the tanh form.) */
static bool is_tanh_gelu(const ir_node *n) {
  if (n->op != KILN_OP_GELU || n->n_inputs != 2 || !is_constant(n->inputs[1])) return false;
  const ir_attr *a = ir_node_attr(n->inputs[1]->node, "value");
  return a && a->kind == IR_ATTR_STR && strcmp(a->s, "tanh") == 0;
}

/* Are a and b complete tensor types of one dtype and shape? */
static bool same_tensor_type(const ir_type *a, const ir_type *b) {
  return a->kind == IR_TYPE_TENSOR && b->kind == IR_TYPE_TENSOR && a->dtype >= 0 &&
         a->dtype == b->dtype && same_sizes(a, b, 0);
}

/* Note [Add epilogue]: `aten::add(%x, aten::mm(%a, %b), 1)` (either
 * order; an LSTM step's input gates plus h W_hh^T) becomes
 * `aten::addmm(%x, %a, %b)`: the GEMM accumulates onto %x's copy instead
 * of writing a product that one more pass adds to %x. Only when the mm's
 * one use is this add and the profiled types say no broadcasting or
 * promotion is involved. It relies on the types: a top-level graph's are
 * only what profiling saw (another call may bring x with more dims, which
 * add broadcasts and addmm refuses), so it runs only on graphs whose types
 * are exact: DifferentiableGraph plans (keyed by their input shapes) and
 * lazy graphs (compiled per shape).
 *
 * When %x is `aten::mul(%y, %s)` for a number %s, used only here (an
 * optimizer's buf * momentum + grad), the scale goes into addmm's beta and
 * the mul's pass disappears: addmm(%y, %a, %b, beta=%s). addmm ignores
 * self when beta is 0, where 0 * y would carry y's NaNs, so %s must be
 * known nonzero: a constant, or in a lazy graph any number input (Note
 * [Special scalars]: 0 and 1 are recorded as constants, so a run-time
 * number never is 0). The result is rounded once (beta * y + product in
 * one FMA) instead of twice.
 *
 * The addmm takes the mm's place when it can (Note [GEMM at its
 * product's place]), else the add's. Returns 1 if n was rewritten. */
static bool nonzero_number(const ir_value *s, bool numbers_nonzero) {
  if (s->type->kind != IR_TYPE_FLOAT && s->type->kind != IR_TYPE_INT) return false;
  pass_const c;
  if (pass_const_of(s, &c))
    return (c.tag == PASS_C_INT && c.i != 0) || (c.tag == PASS_C_FLOAT && c.f != 0);
  return numbers_nonzero;
}

/* Note [GEMM at its product's place]: an optimizer's add comes after the
 * whole backward, so an addmm at the add would run there, reading its
 * operands (an output gradient, an activation: megabytes) back from DRAM
 * long after they were made; the mm ran in the backward, right after them.
 * So the addmm goes where the mm was when everything it reads that the mm
 * did not (the addend, beta, alpha) is defined before the mm and no node
 * between the two writes memory or has side effects. Is that so? (The
 * add reads them, so each is defined before it: after the mm means
 * between the two.) */
static bool at_product(const ir_node *mm, const ir_node *add, ir_value *const *extra, int n) {
  for (const ir_node *x = mm->next; x && x != add; x = x->next) {
    if (pass_has_side_effects(x, true) || pass_alias_writes(x)) return false;
    for (int i = 0; i < n; i++)
      if (extra[i]->node == x) return false;
  }
  return true;
}

static int add_epilogue(ir_graph *g, ir_node *n, bool numbers_nonzero) {
  if (n->op != KILN_OP_ADD || n->n_inputs != 3) return 0;
  double alpha;
  pass_const c;
  if (!pass_const_of(n->inputs[2], &c) || (c.tag != PASS_C_INT && c.tag != PASS_C_FLOAT)) return 0;
  alpha = c.tag == PASS_C_INT ? (double)c.i : c.f;
  if (alpha != 1) return 0;
  for (int k = 0; k < 2; k++) {
    ir_value *prod = n->inputs[k], *x = n->inputs[1 - k], *beta = n->inputs[2];
    ir_node *mm = prod->node, *scale = x->node;
    if (!mm || mm->op != KILN_OP_MM || prod->n_uses != 1 || mm->owner != n->owner) continue;
    if (!same_tensor_type(x->type, prod->type) || !same_tensor_type(n->outputs[0]->type, prod->type))
      continue;
    if (scale && scale->op == KILN_OP_MUL && scale->n_inputs == 2 && x->n_uses == 1 &&
        scale->owner == n->owner && same_tensor_type(scale->inputs[0]->type, prod->type) &&
        nonzero_number(scale->inputs[1], numbers_nonzero)) {
      beta = scale->inputs[1];
      x = scale->inputs[0];
    } else {
      scale = NULL;
    }
    ir_node *am = ir_node_new_op(g, KILN_OP_ADDMM);
    if (!am) return KILN_ERR_NOMEM;
    ir_value *ins[5] = {x, mm->inputs[0], mm->inputs[1], beta, n->inputs[2]};
    for (int i = 0; i < 5; i++)
      if (ir_node_add_input(am, ins[i]) < 0) return KILN_ERR_NOMEM;
    ir_value *y = ir_node_add_output(am, n->outputs[0]->type);
    if (!y) return KILN_ERR_NOMEM;
    ir_value *extra[3] = {x, beta, n->inputs[2]};
    ir_node_insert_before(am, at_product(mm, n, extra, 3) ? mm : n);
    if (ir_value_replace_all_uses(n->outputs[0], y) < 0) return KILN_ERR_NOMEM;
    int rc = ir_node_remove(n);
    if (rc == 0) rc = ir_node_remove(mm);
    if (rc == 0 && scale) rc = ir_node_remove(scale);
    return rc < 0 ? rc : 1;
  }
  return 0;
}

static int epilogue_block(ir_graph *g, ir_block *b) {
  int made = 0, rc;
  for (ir_node *n = b->first, *next; n; n = next) {
    next = n->next;
    for (int i = 0; i < n->n_blocks; i++) {
      if ((rc = epilogue_block(g, n->blocks[i])) < 0) return rc;
      made += rc;
    }
    bool relu = n->op == KILN_OP_RELU, gelu = is_tanh_gelu(n);
    if (!relu && !gelu) continue;
    ir_value *z = n->inputs[0];
    ir_node *mm = z->node, *shape = NULL;
    /* a 3-d linear's addmm on the [B*T, in] view, reshaped back: the
     * activation commutes with the reshape (Note [Epilogue through a
     * reshape] in autodiff.h) */
    if (mm && (mm->op == KILN_OP_VIEW || mm->op == KILN_OP_RESHAPE) && z->n_uses == 1 &&
        mm->owner == b && mm->inputs[0]->node && mm->inputs[0]->node->op == KILN_OP_ADDMM) {
      shape = mm;
      z = mm->inputs[0];
      mm = z->node;
    }
    if (!mm || mm->op != KILN_OP_ADDMM || z->n_uses != 1 || mm->owner != b) continue;
    ir_node *c = ir_node_new_prim(g, IR_PRIM_CONSTANT);
    ir_node *ep = ir_node_new_op(g, KILN_OP_ADDMM_ACTIVATION);
    if (!c || !ep || ir_node_set_i(c, "value", gelu) < 0) return KILN_ERR_NOMEM;
    ir_value *flag = ir_node_add_output(c, ir_type_bool());
    if (!flag) return KILN_ERR_NOMEM;
    for (int i = 0; i < mm->n_inputs; i++)
      if (ir_node_add_input(ep, mm->inputs[i]) < 0) return KILN_ERR_NOMEM;
    if (ir_node_add_input(ep, flag) < 0) return KILN_ERR_NOMEM;
    ir_value *y = ir_node_add_output(ep, shape ? z->type : n->outputs[0]->type);
    if (!y) return KILN_ERR_NOMEM;
    ir_node_insert_before(c, shape ? mm : n);
    ir_node_insert_before(ep, shape ? mm : n);
    if (shape) { /* the reshape now reads the activation's result and stands for relu's */
      if (ir_value_replace_all_uses(z, y) < 0 ||
          ir_value_replace_all_uses(n->outputs[0], shape->outputs[0]) < 0)
        return KILN_ERR_NOMEM;
    } else if (ir_value_replace_all_uses(n->outputs[0], y) < 0) {
      return KILN_ERR_NOMEM;
    }
    if ((rc = ir_node_remove(n)) < 0 || (rc = ir_node_remove(mm)) < 0) return rc;
    made++;
  }
  return made;
}

int pass_gemm_epilogue(ir_graph *g) { return epilogue_block(g, ir_graph_top(g)); }

static int add_epilogue_block(ir_graph *g, ir_block *b, bool numbers_nonzero) {
  int made = 0, rc;
  for (ir_node *n = b->first, *next; n; n = next) {
    next = n->next;
    for (int i = 0; i < n->n_blocks; i++) {
      if ((rc = add_epilogue_block(g, n->blocks[i], numbers_nonzero)) < 0) return rc;
      made += rc;
    }
    if ((rc = add_epilogue(g, n, numbers_nonzero)) < 0) return rc;
    made += rc;
  }
  return made;
}

int pass_add_epilogue(ir_graph *g, bool numbers_nonzero) {
  return add_epilogue_block(g, ir_graph_top(g), numbers_nonzero);
}

/* Note [Threshold epilogue] (src/ops/matmul.c): where(le(%y, t), 0, g),
 * where g is mm(%a, %b), or a reshape or view of it, with no other use,
 * becomes kiln_mm_threshold_backward(%a, %b, %y, t) (reshaped back as g
 * was): the mask is applied to each block of the product as its GEMM
 * finishes it. t is a constant number; the 0 a constant +0 (where keeps
 * its sign, the epilogue writes +0); y, g and the result of one type (no
 * broadcasting, no promotion), so only for graphs whose types are exact. */
static bool positive_zero(const ir_value *v) {
  pass_const c;
  if (!pass_const_of(v, &c)) return false;
  return (c.tag == PASS_C_INT && c.i == 0) || (c.tag == PASS_C_FLOAT && c.f == 0 && !signbit(c.f));
}

static int threshold_epilogue(ir_graph *g, ir_node *n) {
  if (n->op != KILN_OP_WHERE || n->n_inputs != 3 || !positive_zero(n->inputs[1])) return 0;
  ir_value *c = n->inputs[0], *gv = n->inputs[2];
  ir_node *le = c->node, *shape = NULL, *mm = gv->node;
  pass_const t;
  if (!le || le->op != KILN_OP_LE || le->n_inputs != 2 || le->owner != n->owner ||
      !pass_const_of(le->inputs[1], &t) || (t.tag != PASS_C_INT && t.tag != PASS_C_FLOAT))
    return 0;
  ir_value *y = le->inputs[0];
  if (mm && (mm->op == KILN_OP_RESHAPE || mm->op == KILN_OP_VIEW) && gv->n_uses == 1 &&
      mm->owner == n->owner) {
    shape = mm;
    mm = shape->inputs[0]->node;
  }
  ir_value *prod = shape ? shape->inputs[0] : gv;
  if (!mm || mm->op != KILN_OP_MM || mm->owner != n->owner || prod->n_uses != 1 ||
      prod->type->kind != IR_TYPE_TENSOR || prod->type->dtype < 0 ||
      !same_tensor_type(y->type, gv->type) || !same_tensor_type(n->outputs[0]->type, gv->type))
    return 0;
  ir_node *k = ir_node_new_op(g, KILN_OP_KILN_MM_THRESHOLD_BACKWARD);
  if (!k) return KILN_ERR_NOMEM;
  ir_value *ins[4] = {mm->inputs[0], mm->inputs[1], y, le->inputs[1]};
  for (int i = 0; i < 4; i++)
    if (ir_node_add_input(k, ins[i]) < 0) return KILN_ERR_NOMEM;
  ir_value *out = ir_node_add_output(k, prod->type);
  if (!out) return KILN_ERR_NOMEM;
  ir_node_insert_before(k, n);
  if (ir_value_replace_all_uses(prod, out) < 0) return KILN_ERR_NOMEM;
  if (shape) ir_node_move_after(shape, k); /* the reshape now reads k's result */
  if (ir_value_replace_all_uses(n->outputs[0], shape ? shape->outputs[0] : out) < 0)
    return KILN_ERR_NOMEM;
  int rc = ir_node_remove(n);
  if (rc == 0) rc = ir_node_remove(mm);
  if (rc == 0 && c->n_uses == 0) rc = ir_node_remove(le);
  return rc < 0 ? rc : 1;
}

static int threshold_block(ir_graph *g, ir_block *b) {
  int made = 0, rc;
  for (ir_node *n = b->first, *next; n; n = next) {
    next = n->next;
    for (int i = 0; i < n->n_blocks; i++) {
      if ((rc = threshold_block(g, n->blocks[i])) < 0) return rc;
      made += rc;
    }
    if ((rc = threshold_epilogue(g, n)) < 0) return rc;
    made += rc;
  }
  return made;
}

int pass_threshold_epilogue(ir_graph *g) { return threshold_block(g, ir_graph_top(g)); }
