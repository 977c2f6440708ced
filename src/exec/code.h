/* src/exec/code.h: flat instruction code with registers, what graphs
 * compile to (compile.c, run by vm.c) and what the lazy compile cache stores. One
 * instruction per node; jumps for If/Loop; each register released right
 * after its last use (the free list of the instruction that last reads it).
 */
#ifndef KILN_EXEC_CODE_H
#define KILN_EXEC_CODE_H

#include "value.h"

typedef enum exec_opcode {
  EXEC_I_OP = 0,     /* out = op_table[op](in...); a LIST_OUT op's out[0] is a list */
  EXEC_I_CONST,      /* out[0] = k */
  EXEC_I_MOVE,       /* out[i] = in[i] (copies; block outputs, loop-carried values) */
  EXEC_I_JUMP,       /* pc = target */
  EXEC_I_JUMP_IF_NOT,/* if (!in[0]) pc = target */
  EXEC_I_PRIM        /* out = prim(in...) */
} exec_opcode; /* after the last instruction the outputs are output_regs' values */

struct exec_instr;
/* A builtin (non-op-table) function: reads n_in values, writes n_out new
 * values. Returns < 0 with the error set. */
typedef int (*exec_prim_fn)(const struct exec_instr *ins, exec_value *in, exec_value *out);

typedef struct exec_instr {
  uint8_t code;
  int op;               /* EXEC_I_OP: op-table index */
  exec_prim_fn prim;    /* EXEC_I_PRIM */
  const char *name;     /* node kind, for error messages */
  int n_in, n_out;
  int *in, *out;        /* register indices */
  int target;           /* jumps */
  exec_value k;         /* EXEC_I_CONST; PRIM's extra constant (e.g. index) */
  int n_free;
  int *free;            /* registers to clear after this instruction */
  int line;             /* source line in the graph text, 0 if none */
} exec_instr;

typedef struct exec_owned {
  void *obj;
  void (*free_fn)(void *obj);
} exec_owned;

typedef struct exec_code {
  int n_instr, cap_instr;
  exec_owned *owned;     /* run-time objects instructions point at */
  int n_owned;
  exec_instr *instr;
  int n_regs;
  int n_inputs;
  int *input_regs;
  int n_outputs;
  int *output_regs;
} exec_code;

/* An empty code object (NULL on OOM). */
exec_code *exec_code_new(void);
void exec_code_free(exec_code *c);
/* Appends an instruction with room for n_in/n_out registers; returns its
 * index (< 0 on OOM). The instruction's arrays are owned by the code. */
int exec_code_add(exec_code *c, exec_opcode code, int n_in, int n_out);
/* Makes c own obj (freed with free_fn when c is freed). On OOM frees obj
 * at once and returns < 0. */
int exec_code_own(exec_code *c, void *obj, void (*free_fn)(void *obj));
/* Adds register r to the free list of instruction last[r] (for each r;
 * last[r] outside [0, n_instr) means never). The compiler computes last
 * uses (Note [Registers and liveness] in compile.c). < 0 on OOM. */
int exec_code_set_frees(exec_code *c, const int *last);
/* Note [Buffer reuse] (vm.c): may an op write its result into t, a value
 * dying at its instruction? Only when the register is t's sole holder, t's
 * storage is t's alone, and t is contiguous, not a wrapped number, with no
 * autograd history. */
bool exec_buffer_reusable(const kiln_tensor *t);
/* Runs c on inputs (borrowed) and writes n_outputs new values to outputs.
 * Returns < 0 with the error set; a failing instruction is named. */
int exec_code_run(const exec_code *c, const exec_value *inputs, exec_value *outputs);
/* exec_code_run taking the inputs' references (each inputs[i] is cleared,
 * on success and on failure): an input held by nothing else dies at its
 * last use, so an elementwise op may write into its buffer (Note [Buffer
 * reuse]). */
int exec_code_run_owned(const exec_code *c, exec_value *inputs, exec_value *outputs);

/* Note [Run progress]: fn(ud), when set, is called after every
 * instruction that code run on the calling thread executes; the dist layer
 * sets it while non-blocking all-reduces that a graph started are pending
 * (Note [All-reduce start and wait] in src/ops/collective.c), to test them
 * (MPI progresses them only inside MPI calls), and clears it (NULL) when
 * none is. fn rate-limits itself; it must not fail or run code. The
 * setting is the calling thread's. */
void exec_set_run_progress(void (*fn)(void *ud), void *ud);

#endif
