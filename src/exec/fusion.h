/* src/exec/fusion.h: prim::FusionGroup's run-time object (fusion.c). */
#ifndef KILN_EXEC_FUSION_H
#define KILN_EXEC_FUSION_H

#include "compile.h"
#include "passes/autodiff.h"

/* Most ops, and most inputs or outputs, a fusion group may hold (the
 * fusion pass respects them). */
#define FUSION_MAX_STEPS PASS_FUSION_MAX_NODES
#define FUSION_MAX_IO PASS_FUSION_MAX_IO

typedef struct fused_group fused_group;

/* Builds the group from its Subgraph (elementwise ops and constants).
 * NULL with the error set if it holds anything else. */
fused_group *exec_fused_group_new(const ir_graph *sub);
void exec_fused_group_free(void *f);
/* Runs the group (Note [Fused tiles]). inputs borrowed; outputs new. */
int exec_fused_group_run(fused_group *f, exec_value *in, exec_value *out);
/* The same, where each input whose bit is set in reusable (input i: bit i)
 * may become an output of its shape and dtype, written over (Note [Fused
 * buffer reuse] in fusion.c): the caller must hold it only to give it up. */
int exec_fused_group_run_reuse(fused_group *f, exec_value *in, uint64_t reusable,
                               exec_value *out);
/* Native kernels that failed to compile or load so far (the groups kept
 * their tile kernels; Note [Native kernels]). */
int64_t exec_fusion_native_failures(void);
/* The last-level cache's size in bytes (Note [Native stores]). */
int64_t exec_fusion_llc_bytes(void);
/* The compile hook (exec_compile_opts.custom) that installs
 * prim::FusionGroup: builds the node's group (owned by c) and points the
 * instruction at it; other kinds are left alone. < 0 with the error set if
 * the Subgraph is not a fusible chain. */
int exec_fusion_compile_hook(void *ud, exec_code *c, const ir_node *n, exec_instr *x);
/* exec_compile options with only that hook: what every graph that may hold
 * FusionGroups compiles with outside the profiling executor. */
extern const exec_compile_opts exec_fusion_compile_opts;

#endif
