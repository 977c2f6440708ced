/* tests/autograd/fd_grads.h: finite-difference gradient checks for tests
 * (fd_grads.c). */
#ifndef KILN_TESTS_FD_GRADS_H
#define KILN_TESTS_FD_GRADS_H

#include <stdint.h>

#include "kiln.h"

typedef kiln_tensor *(*test_loss_fn)(kiln_tensor *const *p);

/* Checks d f(p) / d p[k] (k < n <= 4, float64 tensors, f a scalar) by
 * kiln_grad against central differences (h = 1e-6, tolerance 1e-6
 * relative), reporting failures under the name what; p's requires_grad is
 * set for the check and cleared after. */
void test_fd_check_grads(const char *what, test_loss_fn f, kiln_tensor *const *p, int n);
/* A float64 tensor of N(0, 1) draws from a generator seeded with seed, in
 * the caller's scope. */
kiln_tensor *test_randn_f64(int ndim, const int64_t *shape, uint64_t seed);

#endif
