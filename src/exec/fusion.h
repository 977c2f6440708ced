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
fused_group *fused_group_new(const ir_graph *sub);
void fused_group_free(void *f);
/* Runs the group (Note [Fused tiles]). inputs borrowed; outputs new. */
int fused_group_run(fused_group *f, exec_value *in, exec_value *out);
/* Native kernels that failed to compile or load so far (the groups kept
 * their tile kernels; Note [Native kernels]). */
int64_t fusion_native_failures(void);
/* The last-level cache's size in bytes (Note [Native stores]). */
int64_t fusion_llc_bytes(void);
/* EXEC_I_PRIM entry: x->k.obj is the fused_group. */
int fused_group_prim(const exec_instr *x, exec_value *in, exec_value *out);

#endif
