/* src/passes/passes.h: graph-to-graph passes over the IR (src/ir), as
 * TorchScript's torch/csrc/jit/passes: the cleanup passes (dead code
 * elimination, common subexpression elimination, constant folding,
 * peepholes) that the profiling executor (src/exec) and lazy compilation
 * (kiln_mark_step) run, plus what they share: logging, side-effect and
 * mutation queries, and reading/writing prim::Constant values.
 *
 * Every pass takes a graph it may change in place and returns the number
 * of changes it made (>= 0), or a negative kiln_status with the error set
 * (only on OOM: a pass never fails on a valid graph). A pass keeps the
 * graph valid: ir_graph_verify passes after it whenever it passed before,
 * also after a failure (each mutation is complete or not done). Passes
 * also run inside the subgraphs held by prim::DifferentiableGraph,
 * prim::FusionGroup and prim::FallbackGraph nodes, never changing their
 * parameters or returns.
 *
 * Note [Side effects]: a node must stay, even with no used outputs, when
 * its prims.def kind has IR_PF_SIDE_EFFECT (RaiseException, profile,
 * append, warn), when it calls a function (prim::CallFunction: the callee
 * is opaque), when it holds a subgraph that contains such a node, or when
 * one of its blocks contains one (then the If/Loop stays; its unused
 * outputs may still go). Random op-table ops (OPF_RANDOM: dropout) are
 * not side effects: an unused dropout is removed (TorchScript does the
 * same). They are, however, never merged by CSE.
 *
 * Note [List mutation]: tensors may be written in place (aten::relu_,
 * add_, batch_norm's running statistics): the alias analysis (Note [Alias
 * analysis], alias.c) says which values share written memory, and every
 * pass consults it (DCE keeps writes to live or caller-visible memory,
 * CSE, peepholes, fusion and autodiff grouping leave nodes touching
 * written memory alone and never move a node past a conflicting write).
 * Lists are handled separately: aten::append changes its list
 * in place, and a prim::Constant list is one object shared by every run
 * of the compiled code. So when a graph may mutate lists (it has an
 * aten::append, or a prim::CallFunction that could), no pass merges,
 * folds into a constant, or looks through a node that reads or makes a
 * list: CSE skips nodes with list-typed inputs or outputs, constant
 * folding leaves ListConstruct alone, and the list peepholes do not fire.
 *
 * Note [Pass logging]: when KILN_JIT_LOG (Note [Log variables] in
 * core.h: a comma-separated list such as "dce,cse", or "all") names a pass
 * or a pipeline, the graph is printed to stderr after each run of that
 * pass, under a header line "[kiln-jit] after <pass>:", and before and
 * after each run of that pipeline ("[kiln-jit] before <pipeline>:"). The
 * passes do not log themselves: pass_pipeline_run (pipeline.c) and
 * pass_run do, under the step's name. */
#ifndef KILN_PASSES_H
#define KILN_PASSES_H

#include "ir/ir.h"

/* ======================================================================= */
/* the cleanup passes                                                        */
/* ======================================================================= */

/* Dead code elimination: removes every node none of whose outputs is
 * needed and that has no side effect (Note [Side effects]), in all blocks;
 * removes the unneeded outputs of live prim::If nodes (and the matching
 * block returns) and the unneeded loop-carried values of live prim::Loop
 * nodes (output, input, block parameter and block return together; a
 * carried value is needed when its output or its block parameter is).
 * Graph inputs stay. Returns the number of nodes, outputs and carried
 * values removed, or < 0 on OOM.
 *   before: graph(%x : Tensor, %c : bool):
 *             %1 : int = prim::Constant[value=1]()
 *             %2 : Tensor = aten::relu(%x)
 *             %3 : Tensor, %4 : int = prim::If(%c)
 *               block0():
 *                 %5 : Tensor = aten::neg(%x)
 *                 -> (%5, %1)
 *               block1():
 *                  = prim::RaiseException(%s)   (a str constant %s)
 *                 -> (%x, %1)
 *             return (%3)
 *   after:  %1 and %2 are gone; the If keeps its raise and loses output
 *           %4:  %3 : Tensor = prim::If(%c) ... -> (%5) ... -> (%x)     */
int pass_dce(ir_graph *g);

/* Common subexpression elimination: a node equal to an earlier one that
 * dominates it (same kind, the very same input values, equal attributes,
 * equal output types) is removed and its outputs replaced by the earlier
 * node's. Scoped by blocks: a block sees the expressions of its enclosing
 * blocks before its owner node, never those of a sibling block. Never
 * merges random ops (OPF_RANDOM), side-effecting or function-calling
 * prims, nodes with blocks or subgraphs, or (Note [List mutation]) list
 * readers and makers in a graph that mutates lists. Returns the number of
 * nodes removed, or < 0 on OOM.
 *   before: %a : Tensor = aten::mul(%x, %y)
 *           %b : Tensor = aten::mul(%x, %y)
 *           %c : Tensor = aten::add(%a, %b, %1)
 *   after:  %a : Tensor = aten::mul(%x, %y)
 *           %c : Tensor = aten::add(%a, %a, %1)                          */
int pass_cse(ir_graph *g);

/* Constant folding (TorchScript's constant propagation, without tensor
 * constants: kiln's prim::Constant holds no tensors, so no op producing a
 * tensor is folded). Folds into a new prim::Constant (inserted just before
 * the folded node, which is removed):
 *   - int/float/bool builtins of prims.def whose inputs are all constants
 *     (arithmetic, comparisons, __not__/__and__/__or__/__xor__, int(),
 *     float(), bool(), min/max, math functions, len/__getitem__ of
 *     constant lists, __is__/__isnot__), with the interpreter's semantics
 *     (src/passes/const.c); a node the interpreter would fail on
 *     (division by zero, ...) is left to fail at run time;
 *   - prim::ListConstruct of int (or float) constants into a list
 *     constant (unless the graph mutates lists: Note [List mutation]);
 *   - aten::size/dim/numel/len, aten::is_floating_point and prim::dtype
 *     of a tensor whose type gives the answer (complete sizes for size()
 *     and numel, ndim for dim, ...); prim::is_cuda; `x is None` where x's
 *     type cannot hold None;
 *   - prim::If with a constant condition: the taken block's nodes move in
 *     front of the If, its outputs become the block's returns;
 *   - prim::Loop that runs no iteration (constant false condition or a
 *     constant max trip count <= 0): its outputs become its inputs.
 * Returns the number of nodes folded, or < 0 on OOM.
 *   before: %1 : int = prim::Constant[value=2]()
 *           %2 : int = aten::mul(%1, %1)
 *           %3 : bool = aten::gt(%2, %1)
 *           %4 : int = prim::If(%3)
 *             block0():
 *               -> (%2)
 *             block1():
 *               -> (%1)
 *           return (%4)
 *   after:  %1 : int = prim::Constant[value=2]()
 *           %5 : int = prim::Constant[value=4]()
 *           %6 : bool = prim::Constant[value=1]()
 *           return (%5)                                                  */
int pass_constant_fold(ir_graph *g);

/* Algebraic and structural peepholes that hold exactly (up to the sign of
 * a zero for `x + 0`) and keep the result's dtype and shape:
 *   x * 1, 1 * x, x / 1, x + 0, x - 0 (any int alpha, or a finite float
 *   alpha on a floating x), 0 + x (alpha 1)  -> x, when the constant is a
 *   Python number (a scalar never changes the shape by broadcasting) that
 *   cannot promote x's dtype: an int constant needs x's dtype known and
 *   not Bool, a float constant (and any division) needs it known and
 *   floating;
 *   aten::t(aten::t(x)) -> x (unless x is known to have more than 2 dims);
 *   prim::TupleUnpack / prim::TupleIndex (constant index) of a
 *   prim::TupleConstruct -> its elements; prim::ListUnpack,
 *   aten::__getitem__ (constant index) and aten::len of a
 *   prim::ListConstruct -> its elements / its length (Note [List mutation]);
 *   aten::to(x, dtype) to x's known dtype with copy=False -> x;
 *   aten::expand(x, size) to x's own known shape -> x.
 * The rewritten node is removed; its inputs' producers are left to DCE.
 * Returns the number of rewrites, or < 0 on OOM.
 *   before: %1 : int = prim::Constant[value=1]()
 *           %y : Float(2, 3) = aten::mul(%x, %1)      (%x : Float(2, 3))
 *           return (%y)
 *   after:  %1 : int = prim::Constant[value=1]()
 *           return (%x)                                                  */
int pass_peephole(ir_graph *g);

/* Rewrites in-place ops whose self nothing else aliases into their
 * functional forms (TorchScript's RemoveMutation; Note
 * [Functionalization] in functionalize.c has the conditions and an
 * example). Needs profiled (complete) tensor types to prove the
 * functional op gives self's shape and dtype. Returns the number of
 * rewrites, or < 0 on OOM. */
int pass_functionalize(ir_graph *g);

/* Runs the cleanup pipeline (pass_pipeline_cleanup in pipeline.c:
 * constant_fold, peephole, cse and dce in rounds until a round changes
 * nothing, at most 4 rounds). Returns the total number of changes, or < 0
 * on OOM.
 *   before: %1 : int = prim::Constant[value=1]()
 *           %a : Float(2) = aten::mul(%x, %1)
 *           %b : Float(2) = aten::relu(%a)
 *           %c : Float(2) = aten::relu(%x)
 *           %d : Float(2) = aten::add(%b, %c, %1)
 *           return (%d)
 *   after:  %1 : int = prim::Constant[value=1]()
 *           %b : Float(2) = aten::relu(%x)
 *           %d : Float(2) = aten::add(%b, %b, %1)
 *           return (%d)                                                  */
int pass_cleanup(ir_graph *g);

/* Fuses conv2d + eval-mode batch_norm (+ a residual add_) (+ relu) of the
 * top block into aten::_conv_bn_eval nodes (Note [Conv bn fusion] in
 * fuse_conv_bn.c). Returns the number of fusions, or < 0 on OOM. */
int pass_fuse_conv_bn(ir_graph *g);

/* Runs the pass called name ("dce", "cse", "constant_fold", "peephole",
 * "cleanup") on g. Returns what the pass returns, or KILN_ERR_INVALID
 * (naming the known passes) for an unknown name, changing nothing.
 *   before: %a : Tensor = aten::relu(%x); %b : Tensor = aten::relu(%x)
 *           return (%a)                      pass_run(g, "dce") == 1
 *   after:  %a : Tensor = aten::relu(%x); return (%a)                     */
int pass_run(ir_graph *g, const char *name);

/* ======================================================================= */
/* logging (Note [Pass logging])                                             */
/* ======================================================================= */

/* Does KILN_JIT_LOG name pass or pipeline `name`? */
bool pass_log_enabled(const char *name);
/* Prints "[kiln-jit] <when> <name>:" and g (without source comments) to
 * stderr. */
void pass_log_graph(const ir_graph *g, const char *when, const char *name);
/* pass_log_graph(g, "after", name) if pass_log_enabled(name). */
void pass_log(const ir_graph *g, const char *name);

/* ======================================================================= */
/* helpers shared by passes                                                  */
/* ======================================================================= */

/* Must n stay although its outputs are unused (Note [Side effects])? With
 * nested = false only n's own kind (and subgraph) counts, not its blocks. */
bool pass_has_side_effects(const ir_node *n, bool nested);
/* May g (its blocks and subgraphs) mutate lists (Note [List mutation])? */
bool pass_graph_mutates_lists(const ir_graph *g);
/* Does t hold a list (itself, or inside a tuple or optional)? */
bool pass_type_has_list(const ir_type *t);
/* Calls fn on every subgraph held (IR_ATTR_GRAPH attributes) by a node of
 * g, in all blocks; sums what fn returns, stopping at the first < 0. */
int pass_for_each_subgraph(ir_graph *g, int (*fn)(ir_graph *));

/* ---- alias analysis (src/passes/alias.c, Note [Alias analysis]) ---------- */

typedef struct pass_alias pass_alias;
/* Analyses g (all blocks; subgraphs count as the nodes holding them). The
 * result describes g as it is now: a pass that adds values or changes
 * aliasing builds a new one. NULL on OOM (error set). */
pass_alias *pass_alias_new(const ir_graph *g);
void pass_alias_free(pass_alias *a);
/* The alias set of v (>= 0), or -1 when v cannot hold a tensor. */
int pass_alias_set(const pass_alias *a, const ir_value *v);
bool pass_alias_may_alias(const pass_alias *a, const ir_value *x, const ir_value *y);
/* Does some node of the graph write memory v may share? */
bool pass_alias_is_written(const pass_alias *a, const ir_value *v);
/* May v share memory with the caller's (a graph input, a function's)? */
bool pass_alias_is_external(const pass_alias *a, const ir_value *v);
/* Does n write its input i (schema `(a!)`, a subgraph holding writers,
 * CallFunction)? Does n (or a node in its blocks) write anything? */
bool pass_alias_input_written(const ir_node *n, int i);
bool pass_alias_writes(const ir_node *n);
/* Do n's inputs or outputs share memory that some node writes
 * (TorchScript's hasWriters)? Such a node is never merged, folded or
 * looked through, fused or pulled into a DifferentiableGraph. */
bool pass_alias_has_writers(const pass_alias *a, const ir_node *n);
/* Does one of x and y (nested nodes included) write memory the other
 * reads or writes? */
bool pass_alias_conflict(const pass_alias *a, const ir_node *x, const ir_node *y);
/* May n move to just before pos (an earlier node of its block) without
 * changing what the graph computes: no node from pos up to n defines one
 * of n's inputs or conflicts with n (TorchScript's
 * couldMoveBeforeTopologically)? */
bool pass_alias_could_move_before(const pass_alias *a, const ir_node *n, const ir_node *pos);

/* ---- constants (src/passes/const.c) -------------------------------------- */

typedef enum pass_const_tag {
  PASS_C_NONE = 0,
  PASS_C_INT,
  PASS_C_FLOAT,
  PASS_C_BOOL,
  PASS_C_STR,
  PASS_C_DEVICE,
  PASS_C_INTS,    /* int[] */
  PASS_C_FLOATS   /* float[] */
} pass_const_tag;

/* A constant value as passes see it. Strings and lists point into a
 * graph's arena (or the caller's memory) and are never owned. */
typedef struct pass_const {
  uint8_t tag;  /* pass_const_tag */
  int64_t i;
  double f;
  bool b;
  const char *s;
  const int64_t *ints;
  const double *floats;
  int n;        /* list length */
} pass_const;

/* If v is the output of a prim::Constant whose value passes understand
 * (None, int, float, bool, str, Device, int[], float[]), fills *out and
 * returns true; else false (not a constant, a Function, nested lists...). */
bool pass_const_of(const ir_value *v, pass_const *out);
/* Inserts `%k : T = prim::Constant[value=...]()` just before pos (T the
 * constant's own type: int, float, bool, str, Device, NoneType, int[],
 * float[]) and returns %k, or NULL on OOM (nothing inserted). List
 * payloads are copied into the graph.
 *   before: %y : int = aten::mul(%a, %b)   (insert 6 before %y's node)
 *   after:  %k : int = prim::Constant[value=6]()
 *           %y : int = aten::mul(%a, %b)                                 */
ir_value *pass_const_insert(ir_graph *g, const pass_const *c, ir_node *pos);
/* The type of a constant (list types allocated in g); NULL on OOM. */
const ir_type *pass_const_type(ir_graph *g, const pass_const *c);
/* Evaluates builtin `prim` (an ir_prim) on constant inputs with the
 * interpreter's semantics (src/exec/prims.c, the same run-time meaning).
 * Returns 1 with *out set (list results allocated in g), 0 when the kind
 * or the input tags are not folded here or the interpreter would raise
 * an error (the node then stays and fails at run time), < 0 on OOM. */
int pass_const_eval(ir_graph *g, int prim, const pass_const *in, int n_in, pass_const *out);

/* Note [Collapsing]: replaces nodes v[0..n) of one block (in block order,
 * n >= 1) by one node of kind prim (FusionGroup, DifferentiableGraph)
 * placed after v[n-1], whose "Subgraph" holds copies of them. A value they
 * read from outside becomes a Subgraph parameter and a node input (a
 * constant is copied in instead); an output used outside becomes a
 * Subgraph return and a node output that takes over its uses. Returns 1,
 * or < 0 on OOM (the graph may then be half changed; callers discard it).
 *   before: %a = aten::mul(%x, %y); %b = aten::relu(%a); return (%b)
 *   after:  %b = prim::FusionGroup_0(%x, %y); return (%b)
 *           with prim::FusionGroup_0 = graph(%x, %y):
 *             %a = aten::mul(%x, %y); %b = aten::relu(%a); return (%b)     */
int pass_collapse(ir_graph *g, ir_node *const *v, int n, int prim);

/* ======================================================================= */
/* scheduling (src/passes/schedule.c)                                        */
/* ======================================================================= */

/* Reorders the top block so that each aten::kiln_all_reduce_start runs
 * right after its producers and each aten::kiln_all_reduce_wait as late as
 * its consumers allow (Note [Collective schedule]); a graph without starts
 * or with If/Loop nodes in its top block is left alone. Returns the number
 * of nodes that moved, or < 0 on OOM.
 *   before: %g1 = mm(..); %s1 = start(%g1); %w1 = wait(%s1); %u1 = sub(%p1, %w1)
 *           %g2 = mm(..); %s2 = start(%g2); %w2 = wait(%s2); %u2 = sub(%p2, %w2)
 *   after:  %g1; %s1; %g2; %s2; %w1; %u1; %w2; %u2                       */
int pass_schedule_collectives(ir_graph *g);

/* Moves each node of the top block whose outputs are used only by the
 * return, and which reads last a tensor made in the block, up to just
 * after the last node that defines one of its inputs,
 * reads one of its tensor inputs, or writes memory (Note [Hoisting
 * results], src/passes/hoist.c); a top block with If/Loop nodes is left
 * alone. Returns the number of nodes moved, or < 0 on OOM (the graph
 * unchanged).
 *   before: %g1 = mm(..); %g2 = mm(%g1, ..); %u1 = sub(%p1, %g1); return (%u1, %g2)
 *   after:  %g1 = mm(..); %u1 = sub(%p1, %g1); %g2 = mm(%g1, ..); return (%u1, %g2) */
int pass_hoist_results(ir_graph *g);

#endif
