/* tests/nn/test_nn_checkpoint.c: safetensors reading (each rule of the
 * reference reader with its own message) and writing, and checkpoints:
 * round trips, CRC, refusal of truncated, corrupted and foreign files
 * with the model untouched, and crash-safe saving. */
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "nn/nn.h"
#include "nn_fixture.h"
#include "test.h"

/* A file image: the 8-byte length, the header text, then data bytes. */
static size_t st_image(unsigned char *out, const char *header, const void *data, size_t nd) {
  size_t hn = strlen(header);
  for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)hn >> (8 * i));
  memcpy(out + 8, header, hn);
  if (nd) memcpy(out + 8 + hn, data, nd);
  return 8 + hn + nd;
}

static void expect_st_error(const char *header, const void *data, size_t nd, int status,
                            const char *what) {
  unsigned char buf[1024];
  size_t n = st_image(buf, header, data, nd);
  kiln_safetensors *st = kiln_safetensors_load_buffer(buf, n, "x.st");
  CHECK_MSG(st == NULL, "accepted: %s", header);
  kiln_safetensors_free(st);
  CHECK_STR_CONTAINS(kiln_last_error(), "'x.st'");
  CHECK_STR_CONTAINS(kiln_last_error(), what);
  (void)status;
}

TEST(nn_safetensors_rejects_each_malformation) {
  float eight[4] = {1, 2, 3, 4};
  unsigned char buf[512];
  kiln_safetensors *st = kiln_safetensors_load_buffer("abc", 3, "x.st");
  CHECK(st == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "3 bytes: too short");
  memset(buf, 0, sizeof buf);
  buf[3] = 0x10; /* 268 MB header */
  CHECK(kiln_safetensors_load_buffer(buf, 16, "x.st") == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "over the limit of 100000000 bytes");
  buf[3] = 0;
  buf[0] = 100;
  CHECK(kiln_safetensors_load_buffer(buf, 50, "x.st") == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "header size 100 runs past the end of the file (50 bytes)");
  expect_st_error("{\"a\xff\": 1}", NULL, 0, KILN_ERR_FORMAT, "not valid UTF-8");
  expect_st_error("{abc", NULL, 0, KILN_ERR_FORMAT, "not valid JSON");
  expect_st_error("[1, 2]", NULL, 0, KILN_ERR_FORMAT, "not a JSON object");
  expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                  eight, 8, KILN_ERR_FORMAT, "duplicate object key");
  expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", NULL, 0, KILN_ERR_FORMAT,
                  "\"w\": expected exactly the fields dtype, shape and data_offsets");
  expect_st_error("{\"w\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,4]}}", eight, 4,
                  KILN_ERR_FORMAT, "\"w\": unknown dtype \"F128\"");
  expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", eight, 4,
                  KILN_ERR_FORMAT, "\"w\": shape[0] is not a non-negative integer");
  expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.0]}}", eight, 4,
                  KILN_ERR_FORMAT, "data_offsets is not two non-negative integers");
  expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551615]}}",
                  eight, 4, KILN_ERR_FORMAT, "not valid JSON");
  expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", eight, 4,
                  KILN_ERR_FORMAT, "\"w\": data_offsets [0, 4] hold 4 bytes but F32[2] needs 8");
  expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", eight, 4,
                  KILN_ERR_FORMAT, "end before they begin");
  expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", eight, 8,
                  KILN_ERR_FORMAT, "\"w\": data_offsets begin at 4 but the first tensor must begin at 0");
  expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                  eight, 12, KILN_ERR_FORMAT, "\"b\": data_offsets begin at 4 but \"a\" ends at 8 (overlap)");
  expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                  eight, 12, KILN_ERR_FORMAT, "(gap)");
  expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", eight, 12,
                  KILN_ERR_FORMAT, "the tensors hold 4 data bytes but the file has 12");
  expect_st_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
                  "\"data_offsets\":[0,4]}}", eight, 4, KILN_ERR_FORMAT, "the size of shape overflows");
  expect_st_error("{\"w\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", eight, 2,
                  KILN_ERR_FORMAT, "F4 data of this shape does not fill whole bytes");
  expect_st_error("{\"w\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[0,4]}}", eight, 4,
                  KILN_ERR_UNSUPPORTED, "dtype U16 is not supported");
  expect_st_error("{\"__metadata__\":{\"step\":3}}", NULL, 0, KILN_ERR_FORMAT,
                  "__metadata__ value of \"step\" is not a string");
  /* the smallest valid files */
  size_t n = st_image(buf, "{}", NULL, 0);
  st = kiln_safetensors_load_buffer(buf, n, "x.st");
  CHECK(st && kiln_safetensors_n_tensors(st) == 0);
  kiln_safetensors_free(st);
  n = st_image(buf, "{\"w\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                    "\"e\":{\"dtype\":\"I64\",\"shape\":[0,3],\"data_offsets\":[0,0]}}      ",
               eight, 4);
  st = kiln_safetensors_load_buffer(buf, n, "x.st");
  CHECK_MSG(st != NULL, "%s", kiln_last_error());
  if (st) {
    CHECK(kiln_tensor_ndim(kiln_safetensors_find(st, "w")) == 0);
    CHECK(((float *)kiln_tensor_data(kiln_safetensors_find(st, "w")))[0] == 1.0f);
    CHECK(kiln_tensor_numel(kiln_safetensors_find(st, "e")) == 0);
  }
  kiln_safetensors_free(st);
}

/* half-precision weights and int32 counters load widened, exactly */
TEST(safetensors_widens_f16_bf16_i32) {
  /* F16 1.0, -2.5, 65504 (max), 2^-24 (smallest subnormal); BF16 1.0, -3.0;
   * I32 -7, 2^31 - 1 */
  const unsigned char data[] = {0x00, 0x3c, 0x00, 0xc1, 0xff, 0x7b, 0x01, 0x00,
                                0x80, 0x3f, 0x40, 0xc0,
                                0xf9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
  unsigned char buf[512];
  size_t n = st_image(buf,
                      "{\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
                      "\"i\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
                      data, sizeof data);
  kiln_safetensors *st = kiln_safetensors_load_buffer(buf, n, "half.st");
  CHECK(st != NULL);
  if (!st) return;
  kiln_tensor *h = kiln_safetensors_find(st, "h"), *b = kiln_safetensors_find(st, "b"),
              *i = kiln_safetensors_find(st, "i");
  CHECK(kiln_tensor_dtype(h) == KILN_DTYPE_F32 && kiln_tensor_dtype(b) == KILN_DTYPE_F32);
  CHECK(kiln_tensor_dtype(i) == KILN_DTYPE_I64);
  const float *ph = kiln_tensor_data(h), *pb = kiln_tensor_data(b);
  const int64_t *pi = kiln_tensor_data(i);
  CHECK(ph[0] == 1.0f && ph[1] == -2.5f && ph[2] == 65504.0f && ph[3] == 0x1p-24f);
  CHECK(pb[0] == 1.0f && pb[1] == -3.0f);
  CHECK(pi[0] == -7 && pi[1] == 2147483647);
  kiln_safetensors_free(st);
}

TEST(nn_safetensors_round_trip) {
  char dir[] = "/tmp/kiln-st-XXXXXX", path[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/t.safetensors", dir);
  kiln_scope_begin();
  kiln_tensor *a = kiln_t(kiln_arange(0, 6, 1, KILN_DTYPE_F32) ? kiln_reshape(kiln_arange(0, 6, 1, KILN_DTYPE_F32), 2, (int64_t[]){2, 3}) : NULL);
  kiln_tensor *b = kiln_scalar(-2.5, KILN_DTYPE_F64);
  kiln_tensor *c = kiln_arange(-2, 2, 1, KILN_DTYPE_I64);
  kiln_tensor *d = kiln_gt(c, kiln_scalar(0, KILN_DTYPE_I64));
  kiln_tensor *e = kiln_zeros(2, (int64_t[]){0, 5}, KILN_DTYPE_F32);
  const char *names[5] = {"a.t", "b", "c", "d", "empty"};
  kiln_tensor *ts[5] = {a, b, c, d, e};
  const char *keys[2] = {"who", "note"}, *vals[2] = {"kiln", "ünïcode"};
  CHECK_MSG(kiln_safetensors_save(path, 5, names, ts, 2, keys, vals) == KILN_OK, "%s", kiln_last_error());
  kiln_safetensors *st = kiln_safetensors_load(path);
  CHECK_MSG(st != NULL, "%s", kiln_last_error());
  if (st) {
    CHECK_EQ_INT(kiln_safetensors_n_tensors(st), 5);
    for (int i = 0; i < 5; i++) {
      kiln_tensor *r = kiln_safetensors_find(st, names[i]);
      CHECK(r && kiln_tensor_dtype(r) == kiln_tensor_dtype(ts[i]) &&
            kiln_tensor_ndim(r) == kiln_tensor_ndim(ts[i]));
      for (int64_t k = 0; r && k < kiln_tensor_numel(r); k++) {
        double x[6], y[6];
        kiln_tensor_copy_to(r, x, KILN_DTYPE_F64);
        kiln_tensor_copy_to(ts[i], y, KILN_DTYPE_F64);
        CHECK(x[k] == y[k]);
      }
    }
    CHECK(strcmp(kiln_safetensors_metadata(st, "note"), "ünïcode") == 0);
    CHECK(kiln_safetensors_metadata(st, "nope") == NULL);
  }
  kiln_safetensors_free(st);
  /* the header is padded to 8 bytes and starts with '{' */
  FILE *f = fopen(path, "rb");
  unsigned char head[9];
  CHECK(f && fread(head, 1, 9, f) == 9);
  if (f) fclose(f);
  CHECK(head[0] % 8 == 0 && head[8] == '{');
  const char *dup[2] = {"x", "x"};
  kiln_tensor *two[2] = {b, b};
  CHECK(kiln_safetensors_save(path, 2, dup, two, 0, NULL, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "duplicate name 'x'");
  kiln_scope_end();
  nn_fixture_remove(dir);
}

/* ---- checkpoints ------------------------------------------------------------- */

static unsigned char *snapshot(const kiln_nn_module *m, size_t *n) {
  size_t total = 0;
  for (int i = 0; i < kiln_nn_module_n_params(m); i++)
    total += (size_t)kiln_tensor_numel(kiln_nn_module_param(m, i)) * 4;
  unsigned char *buf = malloc(total), *p = buf;
  for (int i = 0; i < kiln_nn_module_n_params(m); i++) {
    kiln_tensor *t = kiln_nn_module_param(m, i);
    kiln_tensor_copy_to(t, p, KILN_DTYPE_F32);
    p += kiln_tensor_numel(t) * 4;
  }
  *n = total;
  return buf;
}

static bool unchanged(const kiln_nn_module *m, const unsigned char *before, size_t n) {
  size_t k;
  unsigned char *now = snapshot(m, &k);
  bool same = k == n && memcmp(now, before, n) == 0;
  free(now);
  return same;
}

static long file_size(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

static void copy_prefix(const char *src, const char *dst, long n, long flip_at, int xor) {
  FILE *f = fopen(src, "rb"), *g = fopen(dst, "wb");
  for (long i = 0; f && g && i < n; i++) {
    int c = fgetc(f);
    if (c == EOF) break;
    if (i == flip_at) c ^= xor;
    fputc(c, g);
  }
  if (f) fclose(f);
  if (g) fclose(g);
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

TEST(nn_checkpoint_round_trip_and_refusals) {
  char dir[] = "/tmp/kiln-ck-XXXXXX", good[64], bad[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(good, sizeof good, "%s/good.safetensors", dir);
  snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
  kiln_generator *g = kiln_generator_new(1);
  kiln_nn_module *m = kiln_nn_model_new("mlp", g), *m2 = kiln_nn_model_new("mlp", g);
  kiln_optim_opts oo = {.kind = KILN_OPTIM_SGD, .lr = 0.1, .momentum = 0.9};
  kiln_optim *o = kiln_optim_new(m, &oo), *o2 = kiln_optim_new(m2, &oo);
  kiln_scope_begin();
  /* one step so the momentum buffers are not zero */
  kiln_tensor *x = kiln_randn(4, (int64_t[]){4, 1, 28, 28}, KILN_DTYPE_F32, g);
  kiln_tensor *y = kiln_zeros(1, (int64_t[]){4}, KILN_DTYPE_I64);
  CHECK(kiln_backward(kiln_cross_entropy(kiln_nn_module_forward(m, x), y, KILN_REDUCTION_MEAN), NULL) == 0);
  CHECK(kiln_optim_step(o) == KILN_OK);
  kiln_checkpoint_info info = {.model = "mlp", .lr = 0.1, .step = 1, .epoch = 0, .batch = 1,
                               .rng = {1, 2, 3, 0xffffffffffffffffull}};
  snprintf(info.optimizer, sizeof info.optimizer, "sgd");
  CHECK_MSG(kiln_checkpoint_save(good, m, o, &info) == KILN_OK, "%s", kiln_last_error());
  kiln_checkpoint_info back;
  CHECK(kiln_checkpoint_read_info(good, &back) == KILN_OK);
  CHECK(back.step == 1 && back.batch == 1 && back.rng[3] == 0xffffffffffffffffull &&
        strcmp(back.model, "mlp") == 0 && strcmp(back.optimizer, "sgd") == 0 && back.lr == 0.1);
  CHECK(kiln_checkpoint_load(good, m2, o2, NULL) == KILN_OK);
  size_t n;
  unsigned char *snap = snapshot(m, &n);
  CHECK(unchanged(m2, snap, n));
  free(snap);
  double d;
  CHECK(kiln_item(kiln_amax(kiln_abs(kiln_sub(kiln_optim_state(o, 0), kiln_optim_state(o2, 0))), NULL, 0, false), &d) == 0);
  CHECK(d == 0);
  CHECK_EQ_INT(kiln_optim_steps(o2), 1);

  /* refusals, each leaving the fresh model untouched */
  kiln_nn_module *fresh = kiln_nn_model_new("mlp", g);
  snap = snapshot(fresh, &n);
  long size = file_size(good);
  copy_prefix(good, bad, size / 2, -1, 0);
  CHECK(kiln_checkpoint_load(bad, fresh, NULL, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "bad.safetensors");
  CHECK_STR_CONTAINS(kiln_last_error(), "data bytes but the file has");
  CHECK(unchanged(fresh, snap, n));
  copy_prefix(good, bad, size, size - 100, 0x20); /* a byte of the data */
  CHECK(kiln_checkpoint_load(bad, fresh, NULL, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "CRC-32 mismatch");
  CHECK(unchanged(fresh, snap, n));
  /* a metadata value: "step":"1" -> "step":"2" is caught by the CRC too */
  FILE *f = fopen(good, "rb");
  char *img = malloc((size_t)size);
  CHECK(f && fread(img, 1, (size_t)size, f) == (size_t)size);
  if (f) fclose(f);
  char *step = img ? memmem(img, (size_t)size, "\"step\":\"1\"", 10) : NULL;
  CHECK(step != NULL);
  if (step) copy_prefix(good, bad, size, step - img + 8, 0x03);
  CHECK(kiln_checkpoint_load(bad, fresh, NULL, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "CRC-32 mismatch");
  free(img);
  CHECK(unchanged(fresh, snap, n));
  /* another model */
  kiln_nn_module *cnn = kiln_nn_model_new("cnn", g);
  info.model[0] = 0;
  CHECK(kiln_checkpoint_save(bad, cnn, NULL, &info) == KILN_OK);
  CHECK(kiln_checkpoint_load(bad, fresh, NULL, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "it holds a 'cnn' model, not 'mlp'");
  CHECK(unchanged(fresh, snap, n));
  /* hand-built modules: a shape, a missing and an extra parameter */
  kiln_nn_module *h1 = kiln_nn_module_new(), *h2 = kiln_nn_module_new();
  kiln_nn_linear_new(h1, "fc", 4, 3, true, g);
  kiln_nn_linear_new(h2, "fc", 5, 3, true, g);
  CHECK(kiln_checkpoint_save(bad, h1, NULL, &info) == KILN_OK);
  CHECK(kiln_checkpoint_load(bad, h2, NULL, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "'fc.weight' is Float[3, 4] in the file but Float[3, 5] in the model");
  kiln_nn_linear_new(h1, "extra", 2, 2, false, g);
  CHECK(kiln_checkpoint_save(bad, h1, NULL, &info) == KILN_OK);
  kiln_nn_module *h3 = kiln_nn_module_new();
  kiln_nn_linear_new(h3, "fc", 4, 3, true, g);
  CHECK(kiln_checkpoint_load(bad, h3, NULL, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "it holds 'extra.weight', which the model lacks");
  kiln_nn_linear_new(h3, "more", 2, 2, false, g);
  kiln_nn_linear_new(h3, "extra", 2, 2, false, g);
  CHECK(kiln_checkpoint_load(bad, h3, NULL, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "'more.weight' is missing");
  /* optimizer state without an optimizer is ignored; with another one it is refused */
  CHECK(kiln_checkpoint_load(good, fresh, NULL, NULL) == KILN_OK);
  kiln_optim_opts ao = {.kind = KILN_OPTIM_ADAM, .lr = 1e-3};
  kiln_optim *adam = kiln_optim_new(m2, &ao);
  CHECK(kiln_checkpoint_load(good, m2, adam, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "it holds sgd optimizer state, the optimizer is adam");
  /* a plain safetensors state_dict loads only when it holds every parameter
   * (tests/nn/test_torch_checkpoint.c has the rest) */
  const char *nm[1] = {"fc1.weight"};
  kiln_tensor *w1 = kiln_nn_module_param(m, 0);
  CHECK(kiln_safetensors_save(bad, 1, nm, &w1, 0, NULL, NULL) == KILN_OK);
  CHECK(kiln_checkpoint_load(bad, fresh, NULL, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "is missing");
  free(snap);
  kiln_scope_end();
  kiln_optim_free(adam);
  kiln_nn_module_free(h1);
  kiln_nn_module_free(h2);
  kiln_nn_module_free(h3);
  kiln_nn_module_free(cnn);
  kiln_nn_module_free(fresh);
  kiln_optim_free(o);
  kiln_optim_free(o2);
  kiln_nn_module_free(m);
  kiln_nn_module_free(m2);
  kiln_generator_free(g);
  nn_fixture_remove(dir);
}

TEST(nn_checkpoint_failed_save_keeps_the_old_file) {
  char dir[] = "/tmp/kiln-ck-XXXXXX", path[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/ck.safetensors", dir);
  kiln_generator *g = kiln_generator_new(2);
  kiln_nn_module *m = kiln_nn_model_new("lstm", g), *m2 = kiln_nn_model_new("lstm", g);
  kiln_checkpoint_info info = {.step = 7};
  CHECK(kiln_checkpoint_save(path, m, NULL, &info) == KILN_OK);
  size_t n;
  unsigned char *snap = snapshot(m, &n);
  /* change the model, then fail each of the first writes of a new save */
  kiln_scope_begin();
  kiln_no_grad_begin();
  kiln_copy_(kiln_nn_module_param(m, 0), kiln_scalar(0.5, KILN_DTYPE_F32));
  kiln_no_grad_end();
  kiln_scope_end();
  for (int k = 1; k <= 4; k++) {
    nn_write_fail_at(k);
    info.step = 100 + k;
    CHECK(kiln_checkpoint_save(path, m, NULL, &info) < 0);
    CHECK_STR_CONTAINS(kiln_last_error(), "write failed");
    CHECK_STR_CONTAINS(kiln_last_error(), "the file was not changed");
    nn_write_fail_at(0);
    CHECK_EQ_INT(count_files(dir), 1); /* no temp file left behind */
    kiln_checkpoint_info back;
    CHECK(kiln_checkpoint_load(path, m2, NULL, &back) == KILN_OK);
    CHECK_EQ_INT(back.step, 7);
    CHECK(unchanged(m2, snap, n));
  }
  /* a directory that does not exist */
  CHECK(kiln_checkpoint_save("/nonexistent-dir/ck.safetensors", m, NULL, &info) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "cannot create a temporary file");
  free(snap);
  kiln_nn_module_free(m);
  kiln_nn_module_free(m2);
  kiln_generator_free(g);
  nn_fixture_remove(dir);
}

TEST(nn_checkpoint_loads_into_lazy_parameters) {
  char dir[] = "/tmp/kiln-ck-XXXXXX", path[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/ck.safetensors", dir);
  kiln_generator *g = kiln_generator_new(3);
  kiln_nn_module *m = kiln_nn_model_new("mlp", g), *lz = kiln_nn_model_new("mlp", g);
  kiln_checkpoint_info info = {.step = 1};
  CHECK(kiln_checkpoint_save(path, m, NULL, &info) == KILN_OK);
  CHECK(kiln_nn_module_to_lazy(lz) == KILN_OK);
  CHECK_MSG(kiln_checkpoint_load(path, lz, NULL, NULL) == KILN_OK, "%s", kiln_last_error());
  size_t n;
  unsigned char *snap = snapshot(m, &n);
  CHECK(unchanged(lz, snap, n));
  /* and saving lazy parameters syncs them */
  CHECK(kiln_checkpoint_save(path, lz, NULL, &info) == KILN_OK);
  kiln_nn_module *back = kiln_nn_model_new("mlp", g);
  CHECK(kiln_checkpoint_load(path, back, NULL, NULL) == KILN_OK);
  CHECK(unchanged(back, snap, n));
  free(snap);
  kiln_nn_module_free(m);
  kiln_nn_module_free(lz);
  kiln_nn_module_free(back);
  kiln_generator_free(g);
  nn_fixture_remove(dir);
}

/* Every allocation of a load may fail: each failure is an error, never a
 * crash or a leak (ASan checks the latter). */
TEST(nn_checkpoint_load_survives_allocation_failures) {
  char dir[] = "/tmp/kiln-ck-XXXXXX", path[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/ck.safetensors", dir);
  kiln_generator *g = kiln_generator_new(4);
  kiln_nn_module *m = kiln_nn_model_new("cnn", g), *m2 = kiln_nn_model_new("cnn", g);
  kiln_optim_opts oo = {.kind = KILN_OPTIM_ADAM, .lr = 1e-3};
  kiln_optim *o = kiln_optim_new(m, &oo), *o2 = kiln_optim_new(m2, &oo);
  kiln_checkpoint_info info = {.step = 3};
  CHECK(kiln_checkpoint_save(path, m, o, &info) == KILN_OK);
  int failures = 0;
  bool done = false;
  for (long n = 1; n < 2000 && !done; n++) {
    core_alloc_fail_at(n);
    int rc = kiln_checkpoint_load(path, m2, o2, NULL);
    core_alloc_fail_at(0);
    if (rc == KILN_OK) done = true;
    else failures++;
  }
  CHECK(done && failures > 5);
  for (long n = 1; n < 2000; n++) {
    core_alloc_fail_at(n);
    int rc = kiln_checkpoint_save(path, m, o, &info);
    core_alloc_fail_at(0);
    if (rc == KILN_OK) break;
    kiln_checkpoint_info back;
    CHECK(kiln_checkpoint_read_info(path, &back) == KILN_OK); /* the old file is intact */
  }
  kiln_optim_free(o);
  kiln_optim_free(o2);
  kiln_nn_module_free(m);
  kiln_nn_module_free(m2);
  kiln_generator_free(g);
  nn_fixture_remove(dir);
}
