/* tests/nn/nn_fixture.c: synthetic MNIST-format data (see nn_fixture.h). */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "nn_fixture.h"

int nn_fixture_write_idx(const char *path, bool gz, int type, int ndim, const uint32_t *shape,
                         const void *data, size_t nbytes) {
  unsigned char head[4 + 4 * 8] = {0, 0, (unsigned char)type, (unsigned char)ndim};
  for (int d = 0; d < ndim; d++)
    for (int b = 0; b < 4; b++) head[4 + 4 * d + b] = (unsigned char)(shape[d] >> (24 - 8 * b));
  size_t hn = 4 + 4 * (size_t)ndim;
  if (gz) {
    gzFile f = gzopen(path, "wb");
    if (!f) return -1;
    int ok = gzwrite(f, head, (unsigned)hn) == (int)hn &&
             (nbytes == 0 || gzwrite(f, data, (unsigned)nbytes) == (int)nbytes);
    return gzclose(f) == Z_OK && ok ? 0 : -1;
  }
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fwrite(head, 1, hn, f) == hn && (nbytes == 0 || fwrite(data, 1, nbytes, f) == nbytes);
  return fclose(f) == 0 && ok ? 0 : -1;
}

static uint64_t next(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

static int write_split(const char *dir, const char *split, int n, uint64_t *s) {
  unsigned char *img = malloc((size_t)n * 784), *lab = malloc((size_t)n);
  if (!img || !lab) {
    free(img);
    free(lab);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    int k = (int)(next(s) % 10);
    lab[i] = (unsigned char)k;
    for (int p = 0; p < 784; p++) {
      int row = p / 28, v = (int)(next(s) % 90);
      if (row >= 2 * k + 3 && row <= 2 * k + 5) v += 140;
      img[(size_t)i * 784 + p] = (unsigned char)v;
    }
  }
  char path[512];
  uint32_t ish[3] = {(uint32_t)n, 28, 28}, lsh[1] = {(uint32_t)n};
  snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", dir, split);
  int rc = nn_fixture_write_idx(path, true, 0x08, 3, ish, img, (size_t)n * 784);
  snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte.gz", dir, split);
  if (rc == 0) rc = nn_fixture_write_idx(path, true, 0x08, 1, lsh, lab, (size_t)n);
  free(img);
  free(lab);
  return rc;
}

int nn_fixture_make(char *dir, size_t cap, int n_train, int n_test, uint64_t seed) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, cap, "%s/kiln-nn-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return -1;
  uint64_t s = seed * 2654435761u + 1;
  if (write_split(dir, "train", n_train, &s) < 0 || write_split(dir, "t10k", n_test, &s) < 0)
    return -1;
  return 0;
}

void nn_fixture_remove(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[1024];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}
