/* tests/exec/randgraph.h: a random well-typed op program run three ways:
 * eager (op_call on CPU tensors), jit (the same program as TorchScript
 * graph text through a kiln_function, called several times so it
 * profiles, optimizes and falls back) and lazy (op_call on lazy tensors,
 * then kiln_mark_step), with a backward where an output requires grad.
 * The differential oracle: the three agree (shapes and dtypes exactly,
 * values within a tolerance for fusion and GEMM rounding) or all fail
 * with an error. Used by the `make test` property test (seeded) and by
 * fuzz/fuzz_exec.c (the fuzz input is the random stream). */
#ifndef KILN_TESTS_RANDGRAPH_H
#define KILN_TESTS_RANDGRAPH_H

#include <stddef.h>
#include <stdint.h>

/* The random stream: bytes of a fuzz input (data != NULL; 0 once used
 * up) or a splitmix64 sequence from seed. */
typedef struct rg_rand {
  const uint8_t *data;
  size_t size, at;
  uint64_t s;
} rg_rand;

/* Result of rg_run: RG_AGREE (all ran and agreed), RG_ALL_FAILED (the
 * program is ill-typed and every mode refused it with a message) or
 * RG_MISMATCH (a disagreement, described in msg). */
enum { RG_AGREE = 0, RG_ALL_FAILED = 1, RG_MISMATCH = -1 };

/* Generates a program of at most max_steps ops from r and runs it three
 * ways. On RG_MISMATCH, msg (n bytes) says what differed and holds the
 * graph text. Opens and closes its own kiln scope; leaks nothing. */
int rg_run(rg_rand *r, int max_steps, char *msg, size_t n);

#endif
