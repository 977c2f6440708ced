/* src/exec/prims.h: the interpreter's builtin functions (everything a graph
 * calls that is not an op-table op). */
#ifndef KILN_EXEC_PRIMS_H
#define KILN_EXEC_PRIMS_H

#include "code.h"

int exec_prim_list_construct(const exec_instr *x, exec_value *in, exec_value *out);
int exec_prim_tuple_construct(const exec_instr *x, exec_value *in, exec_value *out);
int exec_prim_unpack(const exec_instr *x, exec_value *in, exec_value *out);
int exec_prim_getitem(const exec_instr *x, exec_value *in, exec_value *out);
int exec_prim_len(const exec_instr *x, exec_value *in, exec_value *out);
int exec_prim_list_slice(const exec_instr *x, exec_value *in, exec_value *out);
int exec_prim_all_list(const exec_instr *x, exec_value *in, exec_value *out);
int exec_prim_any_list(const exec_instr *x, exec_value *in, exec_value *out);
/* src/exec/prim_math.c */
int exec_prim_equal(const exec_instr *x, exec_value *in, exec_value *out);
int exec_prim_allclose(const exec_instr *x, exec_value *in, exec_value *out);

#endif
