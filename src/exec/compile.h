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

/* Kinds the interpreter does not implement itself (profile, guards,
 * DifferentiableGraph, FusionGroup, CallFunction) are handed to `custom`,
 * which fills the instruction (prim, k, ...) or fails. */
typedef struct exec_compile_opts {
  int (*custom)(void *ud, const ir_node *n, exec_instr *ins);
  void *ud;
} exec_compile_opts;

/* Compiles g's top block. The code owns nothing of g (constants are
 * copied), so g may be freed afterwards. NULL with the error set on a kind
 * that cannot run. opts may be NULL. */
exec_code *exec_compile(const ir_graph *g, const exec_compile_opts *opts);

/* Builds the exec_value of a prim::Constant node (new value). */
int exec_constant_value(const ir_node *n, exec_value *out);

#endif
