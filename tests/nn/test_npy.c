/* tests/nn/test_npy.c: .npy reading and writing: round trips of every
 * dtype and rank, strided tensors saved in C order, files numpy wrote
 * (tests/data/npy, from scripts/golden/npy.py) read correctly and written
 * back byte for byte, malformed files rejected with clear messages, and
 * every truncation of a valid file rejected without a crash or a leak. */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/core.h"
#include "test.h"

#define DATA "tests/data/npy/"

/* ---- helpers --------------------------------------------------------------- */

static void write_bytes(const char *path, const void *buf, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return;
  if (n) fwrite(buf, 1, n, f);
  fclose(f);
}

/* A fresh directory under /tmp; rm_dir removes it and what it holds. */
static void make_dir(char *dir) {
  strcpy(dir, "/tmp/kiln_npy_XXXXXX");
  if (!mkdtemp(dir)) dir[0] = 0;
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;
  if (!d) return -1;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static void rm_dir(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[512];
  if (!d) return;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

static bool same_shape(const kiln_tensor *t, int ndim, const int64_t *shape) {
  if (kiln_tensor_ndim(t) != ndim) return false;
  for (int i = 0; i < ndim; i++)
    if (kiln_tensor_shape(t)[i] != shape[i]) return false;
  return true;
}

/* Builds a version-1.0 (or 2.0/3.0) file from header text and data: the
 * prefix, the text padded with spaces and '\n' to 64 bytes, the data. */
static size_t make_npy(char *out, int major, const char *text, const void *data,
                       size_t nd) {
  size_t pre = major == 1 ? 10 : 12, tl = strlen(text);
  size_t total_hdr = pre + tl + 1;
  size_t pad = (64 - total_hdr % 64) % 64, hl = tl + pad + 1;
  memcpy(out, "\x93NUMPY", 6);
  out[6] = (char)major;
  out[7] = 0;
  for (size_t i = 0; i < pre - 8; i++) out[8 + i] = (char)((hl >> (8 * i)) & 0xff);
  memcpy(out + pre, text, tl);
  memset(out + pre + tl, ' ', pad);
  out[pre + hl - 1] = '\n';
  if (nd) memcpy(out + pre + hl, data, nd);
  return pre + hl + nd;
}

static void fill_pattern(kiln_tensor *t) {
  int64_t n = kiln_tensor_numel(t);
  void *d = kiln_tensor_data(t);
  for (int64_t i = 0; i < n; i++) switch (kiln_tensor_dtype(t)) {
    case KILN_DTYPE_F32: ((float *)d)[i] = 0.5f * (float)i - 3.25f; break;
    case KILN_DTYPE_F64: ((double *)d)[i] = 1.0 / (double)(i + 3) - 7; break;
    case KILN_DTYPE_I64: ((int64_t *)d)[i] = (i - 5) * 123456789012345LL + 1; break;
    case KILN_DTYPE_BOOL: ((bool *)d)[i] = i % 3 == 0; break;
    default: /* the narrow dtypes: any bit pattern round-trips */
      for (size_t b = 0; b < kiln_dtype_size(kiln_tensor_dtype(t)); b++)
        ((unsigned char *)d)[(size_t)i * kiln_dtype_size(kiln_tensor_dtype(t)) + b] =
            (unsigned char)(37 * i + 11 * (int64_t)b + 5);
      break;
    }
}

/* ---- round trips -------------------------------------------------------------- */

TEST(npy_round_trip_all_dtypes_and_ranks) {
  char dir[64], path[128];
  make_dir(dir);
  snprintf(path, sizeof path, "%s/x.npy", dir);
  static const int64_t s1[1] = {5}, s3[3] = {2, 3, 4}, s0x3[2] = {0, 3};
  struct { int ndim; const int64_t *shape; } shapes[] = {{0, NULL}, {1, s1}, {3, s3}, {2, s0x3}};
  kiln_scope_begin();
  for (int dt = 0; dt < KILN_DTYPE_COUNT; dt++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      kiln_tensor *t = kiln_empty(shapes[s].ndim, shapes[s].shape, (kiln_dtype)dt);
      fill_pattern(t);
      if (dt == KILN_DTYPE_BF16) { /* numpy has no bfloat16 */
        CHECK(kiln_npy_save(path, t) == KILN_ERR_UNSUPPORTED);
        CHECK_STR_CONTAINS(kiln_last_error(), "no bfloat16");
        continue;
      }
      CHECK_MSG(kiln_npy_save(path, t) == KILN_OK, "save %s: %s", kiln_dtype_name(dt),
                kiln_last_error());
      CHECK_EQ_INT(count_entries(dir), 1); /* no temporary left behind */
      kiln_tensor *u = kiln_npy_load_stored(path);
      CHECK_MSG(u != NULL, "load %s: %s", kiln_dtype_name(dt), kiln_last_error());
      if (!u) continue;
      CHECK_EQ_INT(kiln_tensor_dtype(u), dt);
      CHECK(same_shape(u, shapes[s].ndim, shapes[s].shape));
      CHECK(kiln_tensor_is_contiguous(u));
      size_t nb = (size_t)kiln_tensor_numel(t) * kiln_dtype_size(dt);
      CHECK(nb == 0 || memcmp(kiln_tensor_data(t), kiln_tensor_data(u), nb) == 0);
    }
  kiln_scope_end();
  rm_dir(dir);
}

TEST(npy_save_non_contiguous_in_c_order) {
  char dir[64], path[128];
  size_t n_ref = 0, n_out = 0;
  make_dir(dir);
  snprintf(path, sizeof path, "%s/v.npy", dir);
  kiln_scope_begin();
  /* transposed: a [4, 3] storage viewed as [3, 4] with strides [1, 3];
   * logical [i, j] = 4i + j, which is golden f4_3x4.npy */
  int64_t bs[2] = {4, 3}, vs[2] = {3, 4}, vst[2] = {1, 3};
  kiln_tensor *base = kiln_empty(2, bs, KILN_DTYPE_F32);
  float *bd = kiln_tensor_data(base);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) bd[j * 3 + i] = (float)(4 * i + j);
  kiln_tensor *tr = core_autorelease(core_tensor_view(base->storage, KILN_DTYPE_F32, 2, vs, vst, 0));
  CHECK(!kiln_tensor_is_contiguous(tr));
  CHECK(kiln_npy_save(path, tr) == KILN_OK);
  char *ref = test_read_file(DATA "f4_3x4.npy", &n_ref), *out = test_read_file(path, &n_out);
  CHECK_MSG(ref && out && n_ref == n_out && memcmp(ref, out, n_ref) == 0,
            "transposed save differs from numpy's f4_3x4.npy (%zu vs %zu bytes)", n_out,
            n_ref);
  free(ref);
  free(out);
  /* sliced with an offset and a step: [i, j] = 1 + 7i + 2j of arange(20) */
  int64_t n20 = 20, ss[2] = {2, 3}, sst[2] = {7, 2};
  kiln_tensor *ar = kiln_arange(0, 20, 1, KILN_DTYPE_F64);
  (void)n20;
  kiln_tensor *sl = core_autorelease(core_tensor_view(ar->storage, KILN_DTYPE_F64, 2, ss, sst, 1));
  CHECK(kiln_npy_save(path, sl) == KILN_OK);
  kiln_tensor *u = kiln_npy_load(path);
  CHECK(u && same_shape(u, 2, ss));
  if (u)
    for (int i = 0; i < 6; i++)
      CHECK_NEAR(((double *)kiln_tensor_data(u))[i], 1 + 7 * (i / 3) + 2 * (i % 3), 0);
  /* expanded (stride 0): rows repeat; int64 values beyond 2^53 stay exact */
  int64_t v3[3] = {5, -6, (1LL << 60) + 7}, es[2] = {2, 3}, est[2] = {0, 1}, s3 = 3;
  kiln_tensor *row = kiln_from_data(v3, 1, &s3, KILN_DTYPE_I64);
  kiln_tensor *ex = core_autorelease(core_tensor_view(row->storage, KILN_DTYPE_I64, 2, es, est, 0));
  CHECK(kiln_npy_save(path, ex) == KILN_OK);
  u = kiln_npy_load(path);
  CHECK(u && same_shape(u, 2, es));
  if (u)
    for (int i = 0; i < 6; i++) CHECK(((int64_t *)kiln_tensor_data(u))[i] == v3[i % 3]);
  /* a transposed bool tensor */
  bool bv[6] = {1, 0, 0, 1, 1, 0};
  int64_t b23[2] = {2, 3}, b32[2] = {3, 2}, bst[2] = {1, 3};
  kiln_tensor *bb = kiln_from_data(bv, 2, b23, KILN_DTYPE_BOOL);
  kiln_tensor *bt = core_autorelease(core_tensor_view(bb->storage, KILN_DTYPE_BOOL, 2, b32, bst, 0));
  CHECK(kiln_npy_save(path, bt) == KILN_OK);
  u = kiln_npy_load(path);
  CHECK(u && same_shape(u, 2, b32));
  if (u)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 2; j++) CHECK(((bool *)kiln_tensor_data(u))[i * 2 + j] == bv[j * 3 + i]);
  kiln_scope_end();
  CHECK_EQ_INT(count_entries(dir), 1);
  rm_dir(dir);
}

/* ---- files numpy wrote ------------------------------------------------------------ */

static kiln_tensor *load_golden(const char *name, kiln_dtype dt, int ndim,
                                const int64_t *shape) {
  char path[256];
  snprintf(path, sizeof path, DATA "%s", name);
  kiln_tensor *t = kiln_npy_load(path);
  CHECK_MSG(t != NULL, "%s: %s", name, kiln_last_error());
  if (!t) return NULL;
  CHECK_MSG(kiln_tensor_dtype(t) == dt, "%s: dtype %s", name,
            kiln_dtype_name(kiln_tensor_dtype(t)));
  CHECK_MSG(same_shape(t, ndim, shape), "%s: wrong shape", name);
  CHECK(kiln_tensor_is_contiguous(t));
  return same_shape(t, ndim, shape) && kiln_tensor_dtype(t) == dt ? t : NULL;
}

TEST(npy_reads_files_numpy_wrote) {
  kiln_scope_begin();
  int64_t s23[2] = {2, 3}, s234[3] = {2, 3, 4}, s5 = 5, s7 = 7, s22[2] = {2, 2}, s4 = 4,
          s03[2] = {0, 3}, s34[2] = {3, 4};
  kiln_tensor *t;
  const char *f4_files[3] = {"f4_2x3.npy", "f4_v2_2x3.npy", "f4_v3_2x3.npy"};
  for (int k = 0; k < 3; k++)
    if ((t = load_golden(f4_files[k], KILN_DTYPE_F32, 2, s23)))
      for (int i = 0; i < 6; i++) CHECK_NEAR(((float *)kiln_tensor_data(t))[i], 0.5 * i - 1, 0);
  if ((t = load_golden("f8_2x3x4.npy", KILN_DTYPE_F64, 3, s234)))
    for (int i = 0; i < 24; i++) CHECK_NEAR(((double *)kiln_tensor_data(t))[i], 0.25 * i - 3, 0);
  if ((t = load_golden("i8_5.npy", KILN_DTYPE_I64, 1, &s5))) {
    const int64_t want[5] = {0, -1, (1LL << 40) + 1, -(1LL << 62) - 3, INT64_MAX};
    for (int i = 0; i < 5; i++) CHECK(((int64_t *)kiln_tensor_data(t))[i] == want[i]);
  }
  if ((t = load_golden("b1_7.npy", KILN_DTYPE_BOOL, 1, &s7))) {
    const bool want[7] = {1, 0, 1, 1, 0, 0, 1};
    for (int i = 0; i < 7; i++) CHECK(((bool *)kiln_tensor_data(t))[i] == want[i]);
  }
  if ((t = load_golden("i4_2x2.npy", KILN_DTYPE_I64, 2, s22))) {
    const int64_t want[4] = {INT32_MIN, INT32_MAX, 0, -5};
    for (int i = 0; i < 4; i++) CHECK(((int64_t *)kiln_tensor_data(t))[i] == want[i]);
  }
  if ((t = load_golden("u1_4.npy", KILN_DTYPE_I64, 1, &s4))) {
    const int64_t want[4] = {0, 1, 128, 255};
    for (int i = 0; i < 4; i++) CHECK(((int64_t *)kiln_tensor_data(t))[i] == want[i]);
  }
  if ((t = load_golden("f8_0d.npy", KILN_DTYPE_F64, 0, NULL))) {
    double v = 0;
    CHECK(kiln_item(t, &v) == KILN_OK);
    CHECK_NEAR(v, 3.25, 0);
  }
  load_golden("f4_0x3.npy", KILN_DTYPE_F32, 2, s03);
  if ((t = load_golden("f4_3x4.npy", KILN_DTYPE_F32, 2, s34)))
    for (int i = 0; i < 12; i++) CHECK_NEAR(((float *)kiln_tensor_data(t))[i], i, 0);
  /* Fortran order comes back in C order */
  if ((t = load_golden("f4_fortran_3x4.npy", KILN_DTYPE_F32, 2, s34)))
    for (int i = 0; i < 12; i++) CHECK_NEAR(((float *)kiln_tensor_data(t))[i], i, 0);
  if ((t = load_golden("i8_fortran_2x3x4.npy", KILN_DTYPE_I64, 3, s234)))
    for (int i = 0; i < 24; i++) CHECK_EQ_INT(((int64_t *)kiln_tensor_data(t))[i], i);
  if ((t = load_golden("b1_fortran_2x3.npy", KILN_DTYPE_BOOL, 2, s23))) {
    const bool want[6] = {1, 0, 0, 1, 1, 0};
    for (int i = 0; i < 6; i++) CHECK(((bool *)kiln_tensor_data(t))[i] == want[i]);
  }
  kiln_scope_end();
}

TEST(npy_writes_what_numpy_writes) {
  static const char *names[] = {"f4_2x3.npy", "f8_2x3x4.npy", "i8_5.npy", "b1_7.npy",
                                "f8_0d.npy",  "f4_0x3.npy",   "f4_3x4.npy"};
  char dir[64], path[128], src[128];
  make_dir(dir);
  snprintf(path, sizeof path, "%s/w.npy", dir);
  kiln_scope_begin();
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    size_t n_ref = 0, n_out = 0;
    snprintf(src, sizeof src, DATA "%s", names[k]);
    char *ref = test_read_file(src, &n_ref);
    kiln_tensor *t = kiln_npy_load_buffer(ref, n_ref, names[k]);
    CHECK_MSG(t != NULL, "%s: %s", names[k], kiln_last_error());
    if (t) CHECK(kiln_npy_save(path, t) == KILN_OK);
    char *out = test_read_file(path, &n_out);
    CHECK_MSG(ref && out && n_ref == n_out && memcmp(ref, out, n_ref) == 0,
              "%s: kiln's file differs from numpy's (%zu vs %zu bytes)", names[k], n_out,
              n_ref);
    free(ref);
    free(out);
  }
  kiln_scope_end();
  rm_dir(dir);
}

/* ---- malformed input -------------------------------------------------------------- */

static void expect_bad(const void *buf, size_t n, const char *what) {
  kiln_clear_error();
  kiln_tensor *t = kiln_npy_load_buffer(buf, n, "bad.npy");
  CHECK_MSG(t == NULL, "accepted a file with %s", what);
  CHECK_STR_CONTAINS(kiln_last_error(), "'bad.npy'");
  CHECK_STR_CONTAINS(kiln_last_error(), what);
  kiln_release(t);
}

static void expect_bad_header(const char *text, const char *what) {
  char buf[12000];
  float data[6] = {0};
  size_t n = make_npy(buf, 1, text, data, sizeof data);
  expect_bad(buf, n, what);
}

TEST(npy_malformed_files_have_clear_errors) {
  size_t n = 0;
  char *good = test_read_file(DATA "f4_2x3.npy", &n);
  char buf[12000];
  CHECK(good && n == 152);
  if (!good) return;
  memcpy(buf, good, n);
  buf[1] = 'X';
  expect_bad(buf, n, "bad magic");
  expect_bad(buf, 0, "empty");
  memcpy(buf, good, n);
  buf[6] = 4;
  expect_bad(buf, n, "version 4.0");
  buf[6] = 1;
  buf[7] = 1;
  expect_bad(buf, n, "version 1.1");
  /* the header */
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1, }",
                    "unknown key 'extra'");
  expect_bad_header("{'descr': '<f4', 'shape': (2, 3), }", "missing key 'fortran_order'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'");
  expect_bad_header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",
                    "duplicate key 'descr'");
  expect_bad_header("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
                    "unsupported dtype '>f4' (big-endian");
  expect_bad_header("{'descr': '|O', 'fortran_order': False, 'shape': (2, 3), }",
                    "object arrays");
  expect_bad_header("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }",
                    "unsupported dtype '<c8'");
  expect_bad_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }",
                    "structured dtypes");
  expect_bad_header("{'descr': 4, 'fortran_order': False, 'shape': (2, 3), }",
                    "'descr' must be a dtype string");
  expect_bad_header("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }",
                    "'fortran_order' must be True or False");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (6), }",
                    "an int, not a tuple");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }",
                    "'shape' must be a tuple");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }",
                    "negative dimension -3");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': ('2', 3), }",
                    "'shape' must be a tuple of ints, got '2'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,2,3,1), }",
                    "more than 8 dims");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, "
                    "'shape': (4611686018427387904, 4611686018427387904), }",
                    "too many elements");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
                    "does not fit in 64 bits");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }",
                    "expected ',' or ')'");
  expect_bad_header("['descr', '<f4']", "expected a dict");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x",
                    "after the closing '}'");
  expect_bad_header("{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3), }",
                    "expected ',' or '}' after the value of 'descr'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x", "unterminated");
  expect_bad_header("{'descr': '<\\x66', 'fortran_order': False, 'shape': (2, 3), }",
                    "escape sequences");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False; 'shape': (2, 3), }",
                    "unexpected character ';'");
  expect_bad_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\x01",
                    "unexpected byte 0x01");
  /* truncated header / data, trailing data */
  expect_bad(good, 50, "truncated header: it is 118 bytes but the file ends after 40");
  expect_bad(good, 140, "truncated: the data is 12 bytes, expected 24");
  memcpy(buf, good, n);
  memset(buf + n, 0, 4);
  expect_bad(buf, n + 4, "trailing bytes: the data is 28 bytes, expected 24");
  /* header too long: 10001 bytes in version 1.0, 20000 in 2.0 */
  memcpy(buf, good, n);
  buf[8] = (char)(10001 & 0xff);
  buf[9] = (char)(10001 >> 8);
  expect_bad(buf, n, "header is 10001 bytes, longer than the 10000");
  kiln_scope_begin();
  size_t m = make_npy(buf, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", good + 128, 24);
  CHECK_MSG(kiln_npy_load_buffer(buf, m, "v2.npy") != NULL, "%s", kiln_last_error());
  buf[8] = (char)(20000 & 0xff);
  buf[9] = (char)(20000 >> 8);
  expect_bad(buf, m, "header is 20000 bytes");
  /* Python-literal spellings numpy accepts are accepted */
  m = make_npy(buf, 1, "{\"descr\":\"<f4\",\n \"shape\":(2,3,),\"fortran_order\":False}", good + 128, 24);
  kiln_tensor *t = kiln_npy_load_buffer(buf, m, "spelled.npy");
  CHECK_MSG(t != NULL, "%s", kiln_last_error());
  if (t) CHECK_NEAR(((float *)kiln_tensor_data(t))[5], 1.5, 0);
  m = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", good + 128, 24);
  CHECK_MSG(kiln_npy_load_buffer(buf, m, "py2.npy") != NULL, "%s", kiln_last_error());
  m = make_npy(buf, 3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", good + 128, 24);
  expect_bad(buf, m, "malformed number");
  kiln_scope_end();
  free(good);
}

TEST(npy_file_errors_name_the_file) {
  char dir[64], path[128];
  make_dir(dir);
  kiln_scope_begin();
  snprintf(path, sizeof path, "%s/missing.npy", dir);
  CHECK(kiln_npy_load(path) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), path);
  CHECK_STR_CONTAINS(kiln_last_error(), "cannot open");
  CHECK(kiln_npy_load(dir) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "is a directory");
  snprintf(path, sizeof path, "%s/zip.npy", dir);
  write_bytes(path, "PK\x03\x04rest", 8);
  CHECK(kiln_npy_load(path) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), path);
  CHECK_STR_CONTAINS(kiln_last_error(), "bad magic (expected \\x93NUMPY = 93 4e 55 4d 50 59, got 50 4b 03 04 72 65)");
  size_t n = 0;
  char *good = test_read_file(DATA "f8_2x3x4.npy", &n);
  write_bytes(path, good, n - 1);
  CHECK(kiln_npy_load(path) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "data is 191 bytes, expected 192");
  free(good);
  /* saving into a missing directory */
  snprintf(path, sizeof path, "%s/no/such/dir.npy", dir);
  kiln_tensor *t = kiln_zeros(0, NULL, KILN_DTYPE_F32);
  CHECK(kiln_npy_save(path, t) == KILN_ERR_IO);
  CHECK_STR_CONTAINS(kiln_last_error(), path);
  /* a tensor without data */
  int64_t s2 = 2;
  kiln_tensor *meta = core_tensor_meta(1, &s2, KILN_DTYPE_F32);
  snprintf(path, sizeof path, "%s/meta.npy", dir);
  CHECK(kiln_npy_save(path, meta) == KILN_ERR_STATE);
  CHECK_STR_CONTAINS(kiln_last_error(), "no data");
  kiln_release(meta);
  CHECK(kiln_npy_save(NULL, t) == KILN_ERR_INVALID);
  CHECK(kiln_npy_save(path, NULL) == KILN_ERR_INVALID);
  CHECK(kiln_npy_load(NULL) == NULL);
  kiln_scope_end();
  rm_dir(dir);
}

/* A write that fails half-way (the file size limit) leaves the old file
 * intact and no temporary behind. */
TEST(npy_failed_save_leaves_old_file) {
  char dir[64], path[128];
  size_t n_before = 0, n_after = 0;
  make_dir(dir);
  snprintf(path, sizeof path, "%s/keep.npy", dir);
  kiln_scope_begin();
  CHECK(kiln_npy_save(path, kiln_scalar(1.5, KILN_DTYPE_F64)) == KILN_OK);
  char *before = test_read_file(path, &n_before);
  int64_t s = 4000;
  kiln_tensor *big = kiln_ones(1, &s, KILN_DTYPE_F64);
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = 1000;
  void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
  setrlimit(RLIMIT_FSIZE, &lim);
  kiln_status rc = kiln_npy_save(path, big);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, prev);
  CHECK_EQ_INT(rc, KILN_ERR_IO);
  CHECK_STR_CONTAINS(kiln_last_error(), "write failed");
  CHECK_STR_CONTAINS(kiln_last_error(), path);
  char *after = test_read_file(path, &n_after);
  CHECK(before && after && n_before == n_after && memcmp(before, after, n_before) == 0);
  CHECK_EQ_INT(count_entries(dir), 1);
  free(before);
  free(after);
  kiln_scope_end();
  rm_dir(dir);
}

/* Every prefix of every reference file is rejected cleanly. Each prefix is
 * copied into a buffer of exactly its size so the sanitizers catch any
 * read past the end. */
TEST(npy_truncated_at_every_offset) {
  static const char *names[] = {"f4_2x3.npy", "f8_2x3x4.npy", "i8_5.npy", "b1_7.npy",
                                "i4_2x2.npy", "u1_4.npy", "f8_0d.npy", "f4_fortran_3x4.npy",
                                "i8_fortran_2x3x4.npy", "f4_v2_2x3.npy", "f4_v3_2x3.npy"};
  char dir[64], path[128];
  make_dir(dir);
  snprintf(path, sizeof path, "%s/cut.npy", dir);
  int rejected = 0;
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    char src[128];
    size_t n = 0;
    snprintf(src, sizeof src, DATA "%s", names[k]);
    char *full = test_read_file(src, &n);
    CHECK_MSG(full != NULL, "cannot read %s", src);
    if (!full) continue;
    for (size_t cut = 0; cut < n; cut++) {
      char *b = malloc(cut ? cut : 1);
      memcpy(b, full, cut);
      kiln_clear_error();
      kiln_tensor *t = kiln_npy_load_buffer(cut ? b : NULL, cut, names[k]);
      CHECK_MSG(t == NULL, "%s cut at %zu was accepted", names[k], cut);
      CHECK_MSG(strstr(kiln_last_error(), names[k]) != NULL, "%s cut at %zu: message '%s'",
                names[k], cut, kiln_last_error());
      kiln_release(t);
      free(b);
      rejected++;
      if (k == 0) { /* the file path too, for one file */
        write_bytes(path, full, cut);
        t = kiln_npy_load(path);
        CHECK_MSG(t == NULL, "file cut at %zu was accepted", cut);
        kiln_release(t);
      }
    }
    kiln_tensor *t = kiln_npy_load_buffer(full, n, names[k]);
    CHECK_MSG(t != NULL, "%s: %s", names[k], kiln_last_error());
    kiln_release(t);
    free(full);
  }
  rm_dir(dir);
  test_note("%d truncations rejected", rejected);
}

/* Each allocation in load and save may fail: clean error, nothing leaked. */
TEST(npy_allocation_failures) {
  char dir[64], path[128];
  make_dir(dir);
  snprintf(path, sizeof path, "%s/a.npy", dir);
  int failures = 0;
  for (long k = 1; k < 100; k++) {
    core_alloc_fail_at(k);
    kiln_tensor *t = kiln_npy_load(DATA "i8_fortran_2x3x4.npy");
    core_alloc_fail_at(0);
    if (t) {
      kiln_release(t);
      break;
    }
    CHECK_STR_CONTAINS(kiln_last_error(), "out of memory");
    failures++;
  }
  CHECK(failures >= 2);
  int64_t s[2] = {30, 40}, st[2] = {1, 30};
  kiln_tensor *base = kiln_zeros(2, (int64_t[]){40, 30}, KILN_DTYPE_F32);
  kiln_tensor *tr = core_tensor_view(base->storage, KILN_DTYPE_F32, 2, s, st, 0);
  for (long k = 1; k < 100; k++) {
    core_alloc_fail_at(k);
    kiln_status rc = kiln_npy_save(path, tr);
    core_alloc_fail_at(0);
    if (rc == KILN_OK) break;
    CHECK_EQ_INT(rc, KILN_ERR_NOMEM);
    CHECK_EQ_INT(count_entries(dir), 0);
  }
  kiln_release(tr);
  kiln_release(base);
  rm_dir(dir);
}
