/* src/exec/compile.h: the compiler: an IR graph to instruction code (one
 * instruction per node, jumps for If/Loop, registers released after their
 * last use); src/exec/vm.c runs the code on eager tensors. */
#ifndef KILN_EXEC_COMPILE_H
#define KILN_EXEC_COMPILE_H

#include "code.h"
#include "ir/ir.h"

/* Run-time implementations of prims.def builtins (NULL where the kind is
 * structural or belongs to the profiling executor). */
extern const exec_prim_fn exec_prim_impl[IR_PRIM_COUNT];

/* Group kinds the compiler does not implement itself (FusionGroup,
 * DifferentiableGraph, FallbackGraph, profile, guards) are handed to
 * `custom` for every EXEC_I_PRIM node; it fills the instruction (prim,
 * k, ...), may make `c` own the run-time object it builds, leaves kinds it
 * does not know alone, and returns < 0 with the error set on failure.
 * exec_fusion_compile_opts (fusion.h) installs FusionGroup; the profiling
 * executor's hook installs its own kinds and hands FusionGroup on to it. */
typedef struct exec_compile_opts {
  int (*custom)(void *ud, exec_code *c, const ir_node *n, exec_instr *ins);
  void *ud;
} exec_compile_opts;

/* Compiles g's top block. The code owns nothing of g (constants are
 * copied), so g may be freed afterwards. NULL with the error set on a kind
 * that cannot run (with opts NULL, every group kind). */
exec_code *exec_compile(const ir_graph *g, const exec_compile_opts *opts);

/* Builds the exec_value of a prim::Constant node (new value). */
int exec_constant_value(const ir_node *n, exec_value *out);

#endif
