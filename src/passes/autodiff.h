/* src/passes/autodiff.h: differentiation by tracing (differentiate.c,
 * Note [Shape-polymorphic differentiation] in exec/diffgraph.c), the
 * lazy-to-IR bridge it rests on, and
 * the profiling executor's graph rewrites (profiles, autodiff subgraphs,
 * guards). */
#ifndef KILN_PASSES_AUTODIFF_H
#define KILN_PASSES_AUTODIFF_H

#include "ir/ir.h"
#include "lazy/lazy.h"

/* ---- lazy -> IR -------------------------------------------------------- */
enum {
  PASS_LAZY_SCALARS_AS_INPUTS = 1 << 0, /* Scalar device data become graph
                                           inputs (lazy steps: a new lr must
                                           not recompile) instead of constants */
  PASS_LAZY_ALLOW_SYMBOLIC = 1 << 1,    /* data-less data nodes may become
                                           extra inputs */
  PASS_LAZY_RECORDED_ORDER = 1 << 2     /* nodes in the order they were
                                           recorded, not the outputs'
                                           post-order (Note [Recorded order]) */
};

typedef struct pass_lazy_graph {
  ir_graph *g;         /* owned by the caller */
  lazy_node **extra;   /* device-data nodes that became inputs after the
                          explicit ones, in order (core_alloc'd array) */
  int n_extra;
} pass_lazy_graph;

/* Builds the IR computing outputs from inputs: graph inputs are the
 * explicit inputs (lazy values) in order, then any other device data met
 * (res->extra), except Scalars, which become constants unless
 * PASS_LAZY_SCALARS_AS_INPUTS. Returns 0 or a negative status. */
int pass_lazy_to_ir(const lazy_value *inputs, int n_inputs, const lazy_value *outputs,
                    int n_outputs, unsigned flags, pass_lazy_graph *res);

/* ---- differentiate ------------------------------------------------------- */
/* What TorchScript calls a Gradient: a forward graph f and a backward graph
 * df with the index maps that connect them.
 *   f:  inputs = the subgraph's inputs, then `f_consts` (constant tensors
 *       ops made from constants while tracing, e.g. adaptive_avg_pool2d's
 *       averaging weights: functions of the plan's shapes, which key it);
 *       outputs = the f_real_outputs real
 *       outputs, then the captured temporaries.
 *   df: inputs = one vjp per f output listed in df_input_vjps, then the f
 *       inputs listed in df_input_captured_inputs, then the f outputs listed
 *       in df_input_captured_outputs, then `consts` (constant tensors the
 *       derivative formulas made, e.g. zeros); outputs = the gradients of
 *       the f inputs listed in df_output_vjps. */
typedef struct pass_gradient {
  ir_graph *f, *df;
  int n_inputs;
  int f_real_outputs;
  int *df_input_vjps, n_vjps;
  int *df_input_captured_inputs, n_captured_inputs;
  int *df_input_captured_outputs, n_captured_outputs;
  int *df_output_vjps, n_output_vjps;
  kiln_tensor **consts;
  int n_consts;
  kiln_tensor **f_consts;
  int n_f_consts;
  int *factor_of; /* NULL, or per df output i < n_output_vjps: -1, or the df
                     output y such that the gradient is out[i]^T @ out[y]
                     (pass_factor_grads) */
} pass_gradient;

/* Differentiates subgraph s (straight-line: op-table nodes, constants and
 * lists) for inputs whose types are in_meta (every input a tensor), the
 * inputs marked in rg requiring grad. Traces s and the autograd engine over
 * symbolic lazy tensors (the same derivative formulas as eager autograd)
 * and splits the joint graph. Only gradients of rg inputs are computed.
 * 0, or a negative status with the error set (a node that cannot be traced). */
int pass_differentiate(const ir_graph *s, const op_meta *in_meta, const bool *rg,
                       pass_gradient *out);
void pass_gradient_free(pass_gradient *gr);
/* Note [Factored weight gradients] (src/autograd/factored.c): rewrites
 * gr->df so that each gradient it returns as mm(t(x), y) (x, y 2-d) is
 * returned as x, with y appended to the returns, and records the pair in
 * gr->factor_of; dead nodes are then removed. Returns the number of
 * gradients factored, or < 0 on OOM (df unchanged or still valid).
 *   before: %t = aten::t(%g); %w = aten::mm(%t, %h); return (%d, %w)
 *   after:  return (%d, %g, %h)          factor_of = {-1, 2}            */
int pass_factor_grads(pass_gradient *gr);

/* ---- profiling executor rewrites (profile.c, autodiff_groups.c) ---------- */
/* Inserts prim::profile before every tensor input of op-table nodes.
 * Returns the number inserted or a negative status. */
int pass_insert_profiles(ir_graph *g);
/* The merge of two profiled tensor types (TensorType::merge): equal
 * fields stay, differing ones become unknown; unseen is the identity.
 * Allocated in g; NULL on OOM. */
const ir_type *pass_merge_types(ir_graph *g, const ir_type *a, const ir_type *b);
/* Gives every profiled value the merge of all its profiles' types and
 * removes the profiles. Returns the number removed. */
int pass_specialize_from_profiles(ir_graph *g);
/* Does any value (as profiled) possibly require grad? */
bool pass_graph_needs_gradient(const ir_graph *g);
/* Note [Requires-grad guard] in autodiff_groups.c. */
bool pass_assumes_requires_grad(const ir_type *t);
/* Groups runs of >= min_size differentiable op nodes into
 * prim::DifferentiableGraph nodes. Returns how many were made. */
int pass_create_autodiff_subgraphs(ir_graph *g, int min_size);
/* Puts each DifferentiableGraph behind RequiresGradCheck + If with a
 * prim::FallbackGraph else-branch. Returns how many were guarded. */
int pass_guard_autodiff_subgraphs(ir_graph *g);
/* Groups runs of >= 2 fusible elementwise ops into prim::FusionGroup nodes
 * (fuse.c). Returns how many groups were made. */
int pass_fuse(ir_graph *g);
/* The most ops, and the most inputs or outputs, one FusionGroup holds: the
 * fused executor's fixed arrays (src/exec/fusion.c) are this big. */
#define PASS_FUSION_MAX_NODES 64
#define PASS_FUSION_MAX_IO 64
/* Rewrites relu(addmm(...)) and tanh-gelu(addmm(...)), where addmm's result
 * has no other use, into aten::_addmm_activation: the activation runs on
 * each slice of the product right after its GEMM.
 *   before: %z = aten::addmm(%b, %x, %w, %1, %1); %y = aten::relu(%z)
 *   after:  %f = prim::Constant[value=0](); %y = aten::_addmm_activation(%b, %x, %w, %1, %1, %f)
 * Note [Epilogue through a reshape]: a 3-d linear is an addmm on a 2-d view
 * reshaped back (src/ops/matmul.c), so relu(reshape(addmm(...), s)), where
 * neither the addmm's nor the reshape's result has another use, becomes
 * reshape(_addmm_activation(...), s): elementwise, the activation commutes
 * with the reshape (view likewise).
 * Returns how many were rewritten. */
int pass_gemm_epilogue(ir_graph *g);
/* Note [Add epilogue] in fuse.c: add(x, mm(a, b)) -> addmm(x, a, b) where
 * the types show no broadcasting, and add(mul(y, s), mm(a, b)) -> addmm(y,
 * a, b, beta=s) where the number s cannot be 0: a constant, or any number
 * input when numbers_nonzero (lazy graphs: Note [Special scalars] keeps 0
 * and 1 constants). Only for graphs whose types are exact
 * (DifferentiableGraph plans, lazy graphs). Returns how many were
 * rewritten, or < 0 on OOM. */
int pass_add_epilogue(ir_graph *g, bool numbers_nonzero);
/* Note [Threshold epilogue] in fuse.c: a relu's backward on a product,
 * where(le(y, t), 0, mm(a, b)) (the mm possibly reshaped), with no
 * broadcasting, becomes kiln_mm_threshold_backward(a, b, y, t) (reshaped
 * likewise). Only for graphs whose types are exact. Returns how many were
 * rewritten, or < 0 on OOM.
 *   before: %p = aten::mm(%a, %b); %c = aten::le(%y, %0); %g = aten::where(%c, %0, %p)
 *   after:  %g = aten::kiln_mm_threshold_backward(%a, %b, %y, %0) */
int pass_threshold_epilogue(ir_graph *g);

#endif
