/* tests/passes/harness.h: what the pass tests share: parsing, running a
 * pass and comparing the printed result with an expected text, and
 * running graphs through the interpreter to check that a pass kept their
 * meaning. */
#ifndef KILN_TESTS_PASSES_HARNESS_H
#define KILN_TESTS_PASSES_HARNESS_H

#include "exec/fusion.h"
#include "passes/passes.h"
#include "test.h"

/* Parses text and checks that it verifies (test failure otherwise; NULL). */
ir_graph *th_parse(const char *text);

/* The printed text of g without source comments (malloc'd via core). */
char *th_print(const ir_graph *g);

/* Parses `before`, runs pass on it, checks the graph verifies, that the
 * pass returned `changes` (-1: any number > 0), and that it prints as
 * `after` does (after is parsed and printed first, so only its layout is
 * free). Then runs both graphs on random inputs (th_check_same) when
 * their input types allow. Failures name `what`. */
void th_expect(const char *what, int (*pass)(ir_graph *), const char *before,
               const char *after, int changes);

/* Fills in[] for g's inputs: tensors of known dtype and sizes get random
 * values, int/float/bool inputs random numbers. Returns false (in[]
 * untouched beyond what it cleared) if some input type is not concrete. */
bool th_random_inputs(const ir_graph *g, kiln_generator *gen, exec_value *in);

/* Runs g on inputs (borrowed), writing n_outputs new values to out.
 * Returns the number of outputs or < 0 (error set). The default
 * generator is reseeded first, so random ops repeat. */
int th_run(const ir_graph *g, const exec_value *in, exec_value *out, int max_out);

/* Are two run-time values equal (tensors: same dtype, shape and values
 * within tol, NaN equal to NaN)? Writes a reason into why if not. */
bool th_values_equal(const exec_value *a, const exec_value *b, double tol, char *why,
                     size_t n);

/* Runs a and b (same signature) on the inputs and checks that both give
 * equal outputs. If a fails, nothing is checked (a dead failing op may
 * be gone from b). Returns true if a comparison was made. */
bool th_check_same(const char *what, const ir_graph *a, const ir_graph *b,
                   const exec_value *in);

/* th_check_same on `runs` sets of random inputs (if the types allow). */
void th_check_same_random(const char *what, const ir_graph *a, const ir_graph *b, int runs);

#endif
