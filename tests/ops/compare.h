/* tests/ops/compare.h: compares a result with a golden tensor (PyTorch's),
 * element by element in float64, for the model and attention tests
 * (compare.c). */
#ifndef KILN_TESTS_COMPARE_H
#define KILN_TESTS_COMPARE_H

#include <stdbool.h>
#include <stddef.h>

#include "kiln.h"

/* True when got and want have as many elements and every element satisfies
 * |got - want| <= atol + rtol * (|want| + scale * max|want|), or both are the
 * same infinity. got may live on a lazy device (it is copied to the CPU).
 * Otherwise false with the first failure (or "missing" for a NULL tensor)
 * written to why[0..n). Intermediates are released in a scope of its own. */
bool test_close_to(kiln_tensor *got, kiln_tensor *want, double rtol, double atol, double scale,
                   char *why, size_t n);

#endif
