/* tests/nn/test_nn_data.c: IDX files (every element type, gzipped or
 * not, and every malformation named with the file), MNIST-format data
 * sets, normalisation, seeded shuffling and batches with a partial last
 * one. */
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"
#include "nn/nn.h"
#include "nn_fixture.h"
#include "test.h"

typedef struct tmp {
  char dir[256];
  char path[320];
} tmp;

static void tmp_make(tmp *t) {
  snprintf(t->dir, sizeof t->dir, "/tmp/kiln-idx-XXXXXX");
  CHECK(mkdtemp(t->dir) != NULL);
}

static const char *tmp_file(tmp *t, const char *name) {
  snprintf(t->path, sizeof t->path, "%s/%s", t->dir, name);
  return t->path;
}

TEST(nn_idx_reads_every_type_gz_and_plain) {
  tmp t;
  tmp_make(&t);
  /* big-endian encodings of -2, 300 (i16), -70000 (i32), 1.5f, -0.25 */
  unsigned char u8[6] = {0, 1, 2, 250, 255, 7};
  unsigned char i8[2] = {0xFE, 0x05};
  unsigned char i16[4] = {0xFF, 0xFE, 0x01, 0x2C};
  unsigned char i32[8] = {0xFF, 0xFE, 0xEE, 0x90, 0, 0, 0, 9};
  unsigned char f32[4] = {0x3F, 0xC0, 0, 0};
  unsigned char f64[8] = {0xBF, 0xD0, 0, 0, 0, 0, 0, 0};
  for (int gz = 0; gz < 2; gz++) {
    kiln_scope_begin();
    const char *p = tmp_file(&t, gz ? "u8.gz" : "u8");
    CHECK(nn_fixture_write_idx(p, gz, 0x08, 2, (uint32_t[]){2, 3}, u8, 6) == 0);
    kiln_tensor *x = kiln_data_idx_load(p, KILN_DTYPE_I64);
    CHECK_MSG(x && kiln_tensor_ndim(x) == 2 && kiln_tensor_size(x, 1) == 3, "%s", kiln_last_error());
    const int64_t *xv = x ? kiln_tensor_data(x) : NULL;
    for (int i = 0; xv && i < 6; i++) CHECK_EQ_INT(xv[i], u8[i]);
    p = tmp_file(&t, "i8");
    CHECK(nn_fixture_write_idx(p, gz, 0x09, 1, (uint32_t[]){2}, i8, 2) == 0);
    double v[2];
    x = kiln_data_idx_load(p, KILN_DTYPE_F64);
    CHECK(x && kiln_tensor_copy_to(x, v, KILN_DTYPE_F64) == 0 && v[0] == -2 && v[1] == 5);
    p = tmp_file(&t, "i16");
    CHECK(nn_fixture_write_idx(p, gz, 0x0B, 1, (uint32_t[]){2}, i16, 4) == 0);
    x = kiln_data_idx_load(p, KILN_DTYPE_F64);
    CHECK(x && kiln_tensor_copy_to(x, v, KILN_DTYPE_F64) == 0 && v[0] == -2 && v[1] == 300);
    p = tmp_file(&t, "i32");
    CHECK(nn_fixture_write_idx(p, gz, 0x0C, 1, (uint32_t[]){2}, i32, 8) == 0);
    x = kiln_data_idx_load(p, KILN_DTYPE_F64);
    CHECK(x && kiln_tensor_copy_to(x, v, KILN_DTYPE_F64) == 0 && v[0] == -70000 && v[1] == 9);
    p = tmp_file(&t, "f32");
    CHECK(nn_fixture_write_idx(p, gz, 0x0D, 1, (uint32_t[]){1}, f32, 4) == 0);
    x = kiln_data_idx_load(p, KILN_DTYPE_F32);
    CHECK(x && ((float *)kiln_tensor_data(x))[0] == 1.5f);
    p = tmp_file(&t, "f64");
    CHECK(nn_fixture_write_idx(p, gz, 0x0E, 1, (uint32_t[]){1}, f64, 8) == 0);
    x = kiln_data_idx_load(p, KILN_DTYPE_F64);
    CHECK(x && ((double *)kiln_tensor_data(x))[0] == -0.25);
    kiln_scope_end();
  }
  nn_fixture_remove(t.dir);
}

static void expect_idx_error(const char *path, const char *what) {
  kiln_scope_begin();
  CHECK(kiln_data_idx_load(path, KILN_DTYPE_F32) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), path);
  CHECK_STR_CONTAINS(kiln_last_error(), what);
  kiln_scope_end();
}

static void write_raw(const char *path, const void *buf, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(buf, 1, n, f) == n);
  if (f) fclose(f);
}

TEST(nn_idx_malformed_files_named_in_errors) {
  tmp t;
  tmp_make(&t);
  unsigned char data[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  expect_idx_error(tmp_file(&t, "missing.gz"), "cannot open");
  const char *p = tmp_file(&t, "short");
  write_raw(p, "\0\0", 2);
  expect_idx_error(p, "truncated: 2 bytes");
  write_raw(p, "\1\0\x08\x01\0\0\0\1x", 9);
  expect_idx_error(p, "bad IDX magic 01 00 08 01");
  write_raw(p, "\0\0\x0A\x01\0\0\0\1x", 9);
  expect_idx_error(p, "unknown IDX data type 0x0a");
  write_raw(p, "\0\0\x08\x00", 4);
  expect_idx_error(p, "0 dims");
  write_raw(p, "\0\0\x08\x02\0\0\0\1", 8);
  expect_idx_error(p, "truncated in the header");
  for (int gz = 0; gz < 2; gz++) {
    p = tmp_file(&t, gz ? "trunc.gz" : "trunc");
    CHECK(nn_fixture_write_idx(p, gz, 0x08, 2, (uint32_t[]){3, 5}, data, 12) == 0);
    expect_idx_error(p, "truncated: shape [3, 5] needs 15 data bytes, the file has 12");
    CHECK(nn_fixture_write_idx(p, gz, 0x08, 2, (uint32_t[]){2, 5}, data, 12) == 0);
    expect_idx_error(p, "more data than shape [2, 5] holds (10 bytes)");
  }
  /* a 12-byte file whose header claims 4 x 2^16 x 2^16 doubles (128 GiB):
   * found by the IDX fuzz target, which saw the reader allocate it all
   * before reading. Memory grows with the data actually there (with the
   * data limit raised past it; by default the limit refuses it first). */
  size_t old_max = kiln_data_set_max_bytes((size_t)1 << 40);
  for (int gz = 0; gz < 2; gz++) {
    p = tmp_file(&t, gz ? "huge.gz" : "huge");
    CHECK(nn_fixture_write_idx(p, gz, 0x0E, 3, (uint32_t[]){4, 65536, 65536}, data, 12) == 0);
    expect_idx_error(p, "truncated: shape [4, 65536, 65536] needs 137438953472 data bytes, "
                        "the file has 12");
  }
  kiln_data_set_max_bytes(old_max);
  p = tmp_file(&t, "huge.gz");
  expect_idx_error(p, "137438953472 bytes of data, more than the limit of 1073741824");
  /* a corrupt gzip stream: flip bytes in the compressed data */
  p = tmp_file(&t, "bad.gz");
  unsigned char big[4000];
  for (int i = 0; i < 4000; i++) big[i] = (unsigned char)(i * 7 % 251);
  CHECK(nn_fixture_write_idx(p, true, 0x08, 1, (uint32_t[]){4000}, big, 4000) == 0);
  FILE *f = fopen(p, "r+b");
  long n = 0;
  if (f) {
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, n / 2, SEEK_SET);
    fwrite("\xff\x00\xff\x00", 1, 4, f);
    fclose(f);
  }
  expect_idx_error(p, "corrupt gzip data");
  /* a gzip file cut short */
  CHECK(nn_fixture_write_idx(p, true, 0x08, 1, (uint32_t[]){4000}, big, 4000) == 0);
  CHECK(truncate(p, n / 2) == 0);
  kiln_scope_begin();
  CHECK(kiln_data_idx_load(p, KILN_DTYPE_F32) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), p);
  kiln_scope_end();
  nn_fixture_remove(t.dir);
}

TEST(nn_mnist_load_checks_the_pair) {
  tmp t;
  tmp_make(&t);
  unsigned char img[2 * 784] = {0}, lab[2] = {3, 9};
  img[0] = 255;
  img[784 + 5] = 51;
  CHECK(nn_fixture_write_idx(tmp_file(&t, "t10k-images-idx3-ubyte.gz"), true, 0x08, 3,
                             (uint32_t[]){2, 28, 28}, img, sizeof img) == 0);
  /* labels without .gz: found too */
  CHECK(nn_fixture_write_idx(tmp_file(&t, "t10k-labels-idx1-ubyte"), false, 0x08, 1,
                             (uint32_t[]){2}, lab, 2) == 0);
  kiln_data *d = kiln_data_mnist_load(t.dir, false);
  CHECK_MSG(d && kiln_data_size(d) == 2, "%s", kiln_last_error());
  kiln_scope_begin();
  kiln_tensor *x, *y;
  int64_t idx[2] = {1, 0};
  CHECK(d && kiln_data_get(d, idx, 2, &x, &y) == KILN_OK);
  if (d) {
    const float *xv = kiln_tensor_data(x);
    const int64_t *yv = kiln_tensor_data(y);
    CHECK(kiln_tensor_ndim(x) == 4 && kiln_tensor_size(x, 1) == 1 && kiln_tensor_size(x, 3) == 28);
    CHECK(yv[0] == 9 && yv[1] == 3);
    CHECK_NEAR(xv[5], (0.2 - 0.2860) / 0.3530, 1e-6);
    CHECK_NEAR(xv[784], (1.0 - 0.2860) / 0.3530, 1e-6);
    CHECK(kiln_data_set_normalization(d, 0, 1) == KILN_OK);
    CHECK(kiln_data_get(d, idx, 2, &x, &y) == KILN_OK);
    CHECK_NEAR(((const float *)kiln_tensor_data(x))[5], 0.2, 1e-6);
    CHECK(kiln_data_set_normalization(d, 0, 0) < 0);
    CHECK(kiln_data_get(d, (int64_t[]){2}, 1, &x, &y) < 0);
    CHECK_STR_CONTAINS(kiln_last_error(), "index 2 out of range [0, 2)");
  }
  kiln_scope_end();
  kiln_data_free(d);
  /* wrong dims, wrong type, missing train files */
  CHECK(nn_fixture_write_idx(tmp_file(&t, "t10k-images-idx3-ubyte.gz"), true, 0x08, 2,
                             (uint32_t[]){2, 784}, img, sizeof img) == 0);
  CHECK(kiln_data_mnist_load(t.dir, false) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "t10k-images-idx3-ubyte.gz': 2 dims, expected 3");
  CHECK(nn_fixture_write_idx(tmp_file(&t, "t10k-images-idx3-ubyte.gz"), true, 0x09, 3,
                             (uint32_t[]){2, 28, 28}, img, sizeof img) == 0);
  CHECK(kiln_data_mnist_load(t.dir, false) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "expected 0x08 (unsigned byte)");
  CHECK(kiln_data_mnist_load(t.dir, true) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "train-images-idx3-ubyte.gz': cannot open");
  nn_fixture_remove(t.dir);
}

TEST(nn_loader_batches_shuffles_and_keeps_the_remainder) {
  char dir[256];
  CHECK(nn_fixture_make(dir, sizeof dir, 10, 3, 9) == 0);
  kiln_data *d = kiln_data_mnist_load(dir, true);
  CHECK(d != NULL);
  kiln_data_loader *l = kiln_data_loader_new(d, 4, false);
  kiln_data_loader *ld = kiln_data_loader_new(d, 4, true);
  CHECK_EQ_INT(kiln_data_loader_n_batches(l), 3);
  CHECK_EQ_INT(kiln_data_loader_n_batches(ld), 2);
  kiln_scope_begin();
  /* in order: labels are the data set's, the last batch holds 2 */
  int64_t all[10], sizes[3];
  kiln_tensor *x, *y;
  int k = 0;
  for (int b = 0; b < 3; b++) {
    CHECK(kiln_data_loader_batch(l, b, &x, &y) == KILN_OK);
    sizes[b] = kiln_tensor_size(y, 0);
    CHECK_EQ_INT(kiln_tensor_size(x, 0), sizes[b]);
    for (int i = 0; i < sizes[b]; i++) all[k++] = ((int64_t *)kiln_tensor_data(y))[i];
  }
  CHECK(sizes[0] == 4 && sizes[1] == 4 && sizes[2] == 2);
  CHECK(kiln_data_loader_batch(l, 3, &x, &y) < 0);
  int64_t idx[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  CHECK(kiln_data_get(d, idx, 10, &x, &y) == KILN_OK);
  CHECK(memcmp(all, kiln_tensor_data(y), sizeof all) == 0);
  /* shuffled: a permutation of the images, the same for the same seed */
  kiln_generator *g1 = kiln_generator_new(5), *g2 = kiln_generator_new(5), *g3 = kiln_generator_new(6);
  float first[3][784];
  kiln_data_loader_shuffle(l, g1);
  CHECK(kiln_data_loader_batch(l, 0, &x, &y) == KILN_OK);
  memcpy(first[0], kiln_tensor_data(x), sizeof first[0]);
  kiln_data_loader_shuffle(l, g2);
  CHECK(kiln_data_loader_batch(l, 0, &x, &y) == KILN_OK);
  memcpy(first[1], kiln_tensor_data(x), sizeof first[1]);
  CHECK(memcmp(first[0], first[1], sizeof first[0]) == 0);
  /* each image exactly once per epoch: compare pixel sums */
  double sums_in[10], sums_sh[10];
  kiln_data_get(d, idx, 10, &x, &y);
  for (int i = 0; i < 10; i++) {
    kiln_item(kiln_sum(kiln_select(x, 0, i), NULL, 0, false), &sums_in[i]);
  }
  kiln_data_loader_shuffle(l, g3);
  k = 0;
  for (int b = 0; b < 3; b++) {
    kiln_data_loader_batch(l, b, &x, &y);
    for (int i = 0; i < kiln_tensor_size(x, 0); i++)
      kiln_item(kiln_sum(kiln_select(x, 0, i), NULL, 0, false), &sums_sh[k++]);
  }
  CHECK_EQ_INT(k, 10);
  int moved = 0;
  for (int i = 0; i < 10; i++) {
    int found = 0;
    for (int j = 0; j < 10; j++) found += sums_sh[j] == sums_in[i];
    CHECK(found >= 1);
    moved += sums_sh[i] != sums_in[i];
  }
  CHECK(moved > 0);
  kiln_scope_end();
  kiln_generator_free(g1);
  kiln_generator_free(g2);
  kiln_generator_free(g3);
  kiln_data_loader_free(l);
  kiln_data_loader_free(ld);
  CHECK(kiln_data_loader_new(d, 0, false) == NULL);
  CHECK(kiln_data_truncate(d, 11) < 0);
  CHECK(kiln_data_truncate(d, 4) == KILN_OK && kiln_data_size(d) == 4);
  kiln_data_free(d);
  nn_fixture_remove(dir);
}

/* A data-parallel rank's shard (src/nn/train.c): rows [lo, lo + n) of a
 * shuffled batch, read alone, are those rows of the whole batch. */
TEST(nn_loader_rows_are_the_batch_rows) {
  char dir[256];
  CHECK(nn_fixture_make(dir, sizeof dir, 10, 3, 9) == 0);
  kiln_data *d = kiln_data_mnist_load(dir, true);
  CHECK(d != NULL);
  kiln_data_loader *l = kiln_data_loader_new(d, 4, false);
  kiln_generator *g = kiln_generator_new(7);
  CHECK(l && g);
  kiln_data_loader_shuffle(l, g);
  CHECK_EQ_INT(nn_data_loader_batch_rows(l, 0), 4);
  CHECK_EQ_INT(nn_data_loader_batch_rows(l, 2), 2);
  CHECK_EQ_INT(nn_data_loader_batch_rows(l, 3), 0);
  kiln_scope_begin();
  kiln_tensor *x, *y, *xs, *ys;
  for (int b = 0; b < 3; b++) {
    int64_t rows = nn_data_loader_batch_rows(l, b);
    CHECK(kiln_data_loader_batch(l, b, &x, &y) == KILN_OK);
    for (int64_t lo = 0; lo < rows; lo++)
      for (int64_t n = 1; lo + n <= rows; n++) {
        CHECK(nn_data_loader_rows(l, b, lo, n, &xs, &ys) == KILN_OK);
        CHECK_EQ_INT(kiln_tensor_size(xs, 0), n);
        CHECK(memcmp(kiln_tensor_data(xs), (const float *)kiln_tensor_data(x) + lo * 784,
                     (size_t)n * 784 * sizeof(float)) == 0);
        CHECK(memcmp(kiln_tensor_data(ys), (const int64_t *)kiln_tensor_data(y) + lo,
                     (size_t)n * sizeof(int64_t)) == 0);
      }
  }
  CHECK(nn_data_loader_rows(l, 2, 1, 2, &xs, &ys) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "rows [1, +2) of batch 2 (of 2 rows) out of range");
  CHECK(nn_data_loader_rows(l, 3, 0, 1, &xs, &ys) < 0);
  CHECK(nn_data_loader_rows(l, 0, -1, 1, &xs, &ys) < 0);
  kiln_scope_end();
  kiln_generator_free(g);
  kiln_data_loader_free(l);
  kiln_data_free(d);
  nn_fixture_remove(dir);
}

TEST(nn_data_load_survives_allocation_failures) {
  char dir[256];
  CHECK(nn_fixture_make(dir, sizeof dir, 20, 10, 11) == 0);
  bool done = false;
  for (long n = 1; n < 500 && !done; n++) {
    core_alloc_fail_at(n);
    kiln_data *d = kiln_data_mnist_load(dir, true);
    kiln_data_loader *l = d ? kiln_data_loader_new(d, 8, false) : NULL;
    kiln_scope_begin();
    kiln_tensor *x, *y;
    int rc = l ? kiln_data_loader_batch(l, 2, &x, &y) : -1;
    kiln_scope_end();
    core_alloc_fail_at(0);
    done = rc == KILN_OK;
    kiln_data_loader_free(l);
    kiln_data_free(d);
  }
  CHECK(done);
  nn_fixture_remove(dir);
}
