/* tests/nn/nn_fixture.h: small MNIST-format data sets written as gzipped
 * IDX files into a fresh temporary directory, so nn tests need neither the
 * Debian data package nor much time. */
#ifndef KILN_TESTS_NN_FIXTURE_H
#define KILN_TESTS_NN_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Writes an IDX file (gzipped when gz): magic 00 00 type ndim, big-endian
 * u32 sizes, then nbytes of data as given. Returns 0 or -1. */
int nn_fixture_write_idx(const char *path, bool gz, int type, int ndim, const uint32_t *shape,
                         const void *data, size_t nbytes);

/* Creates a temp dir holding train-{images,labels} (n_train) and t10k-*
 * (n_test) gzipped: 28x28 images whose class k (0..9) shows as a bright
 * bar in rows 2k+3..2k+5 over noise, so models learn them quickly. The
 * directory's path goes into dir (cap >= 64). Returns 0 or -1. */
int nn_fixture_make(char *dir, size_t cap, int n_train, int n_test, uint64_t seed);

/* Removes the directory and every file in it. */
void nn_fixture_remove(const char *dir);

#endif
