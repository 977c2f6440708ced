/* tests/nn/test_reader_errors.c: error paths and rare branches of the
 * readers that `make coverage` showed unreached (issue #20): .npy header
 * syntax errors, NULL buffers and paths, saving a lazy tensor; safetensors
 * F16 infinities and NaN, too many dims, bad save arguments; model loading
 * (kiln_model_*) with NULL paths, an unknown mode, a missing graph, weights
 * of another class, and the call/set_tensor/training checks. Each error
 * names what is wrong. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "kiln.h"
#include "test.h"

/* A version-1.0 .npy of header text hdr and nbytes zero data bytes. */
static size_t npy_bytes(uint8_t *buf, size_t cap, const char *hdr, size_t nbytes) {
  size_t hl = strlen(hdr), total = 10 + hl + 1;
  size_t pad = (64 - total % 64) % 64;
  size_t len = hl + pad + 1;
  if (10 + len + nbytes > cap) return 0;
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (uint8_t)(len & 0xff);
  buf[9] = (uint8_t)(len >> 8);
  memcpy(buf + 10, hdr, hl);
  memset(buf + 10 + hl, ' ', pad);
  buf[10 + hl + pad] = '\n';
  memset(buf + 10 + len, 0, nbytes);
  return 10 + len + nbytes;
}

static void npy_refused(const char *hdr, const char *msg) {
  uint8_t buf[512];
  size_t n = npy_bytes(buf, sizeof buf, hdr, 16);
  kiln_clear_error();
  kiln_tensor *t = kiln_npy_load_buffer(buf, n, "h.npy");
  CHECK_MSG(t == NULL, "accepted: %s", hdr);
  CHECK_STR_CONTAINS(kiln_last_error(), msg);
  CHECK_STR_CONTAINS(kiln_last_error(), "h.npy");
}

TEST(npy_header_syntax_errors_are_named) {
  kiln_scope_begin();
  /* the well-formed header first: the bytes are right */
  uint8_t buf[512];
  size_t n = npy_bytes(buf, sizeof buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 16);
  kiln_tensor *ok = kiln_npy_load_buffer(buf, n, "h.npy");
  CHECK_MSG(ok && kiln_tensor_numel(ok) == 4, "%s", kiln_last_error());
  npy_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (04,), }", "leading zero");
  npy_refused("['descr', '<f4']", "expected a dict starting with '{'");
  npy_refused("{3: '<f4'}", "expected a key string or '}'");
  npy_refused("{'descr' '<f4'}", "expected ':' after key 'descr'");
  npy_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (4,", "the end of the header");
  kiln_clear_error();
  CHECK(kiln_npy_load_buffer(NULL, 10, "nul") == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "buffer is NULL");
  kiln_scope_end();
}

TEST(npy_save_of_a_lazy_tensor_saves_its_value) {
  kiln_scope_begin();
  char path[64];
  snprintf(path, sizeof path, "/tmp/kiln-lazy-%ld.npy", (long)getpid());
  float v[3] = {1.5f, -2, 4};
  int64_t shape[1] = {3};
  kiln_tensor *x = kiln_to_lazy(kiln_from_data(v, 1, shape, KILN_DTYPE_F32));
  kiln_tensor *y = kiln_mul(x, x); /* pending: saving runs it */
  CHECK_MSG(kiln_npy_save(path, y) == 0, "%s", kiln_last_error());
  kiln_tensor *r = kiln_npy_load(path);
  float got[3] = {0};
  CHECK(r && kiln_tensor_copy_to(r, got, KILN_DTYPE_F32) == 0);
  CHECK_NEAR(got[0], 2.25, 0);
  CHECK_NEAR(got[1], 4, 0);
  CHECK_NEAR(got[2], 16, 0);
  unlink(path);
  kiln_scope_end();
}

/* A safetensors buffer of one tensor "t" (header JSON, then data). */
static size_t st_bytes(uint8_t *buf, size_t cap, const char *dtype, const char *shape,
                       const void *data, size_t nbytes) {
  char hdr[512];
  int hl = snprintf(hdr, sizeof hdr, "{\"t\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[0,%zu]}}",
                    dtype, shape, nbytes);
  if ((size_t)hl + 8 + nbytes > cap) return 0;
  for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)hl >> (8 * i));
  memcpy(buf + 8, hdr, (size_t)hl);
  memcpy(buf + 8 + hl, data, nbytes);
  return 8 + (size_t)hl + nbytes;
}

TEST(safetensors_f16_infinities_nan_and_limits) {
  kiln_scope_begin();
  /* F16: +inf 0x7c00, -inf 0xfc00, NaN 0x7e00, 1.0 0x3c00, smallest subnormal 0x0001 */
  uint16_t h[5] = {0x7c00, 0xfc00, 0x7e00, 0x3c00, 0x0001};
  uint8_t buf[1024];
  size_t n = st_bytes(buf, sizeof buf, "F16", "[5]", h, sizeof h);
  kiln_safetensors *st = kiln_safetensors_load_buffer(buf, n, "f16.st");
  CHECK_MSG(st != NULL, "%s", kiln_last_error());
  kiln_tensor *t = st ? kiln_safetensors_find(st, "t") : NULL;
  float v[5] = {0};
  CHECK(t && kiln_tensor_copy_to(t, v, KILN_DTYPE_F32) == 0);
  CHECK(isinf(v[0]) && v[0] > 0);
  CHECK(isinf(v[1]) && v[1] < 0);
  CHECK(isnan(v[2]));
  CHECK_NEAR(v[3], 1, 0);
  CHECK_NEAR(v[4], ldexp(1.0, -24), 0);
  kiln_safetensors_free(st);
  /* 9 dims: more than kiln holds */
  float one = 1;
  n = st_bytes(buf, sizeof buf, "F32", "[1,1,1,1,1,1,1,1,1]", &one, 4);
  kiln_clear_error();
  CHECK(kiln_safetensors_load_buffer(buf, n, "dims.st") == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "9 dims (kiln holds at most 8)");
  kiln_clear_error();
  CHECK(kiln_safetensors_load_buffer(NULL, 16, "nul") == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "NULL buffer");
  kiln_clear_error();
  CHECK(kiln_safetensors_load(NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "NULL path");
  /* save: NULL arguments, a NULL metadata key */
  kiln_tensor *x = kiln_scalar(1, KILN_DTYPE_F32);
  const char *names[1] = {"x"}, *keys[1] = {NULL}, *vals[1] = {"v"};
  CHECK(kiln_safetensors_save(NULL, 1, names, &x, 0, NULL, NULL) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "NULL argument");
  char path[64];
  snprintf(path, sizeof path, "/tmp/kiln-meta-%ld.st", (long)getpid());
  CHECK(kiln_safetensors_save(path, 1, names, &x, 1, keys, vals) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "bad metadata pair 0");
  CHECK(access(path, F_OK) != 0); /* nothing written */
  kiln_scope_end();
}

#define MODELS "tests/data/models/"

TEST(model_load_and_call_errors_are_named) {
  kiln_scope_begin();
  kiln_model_opts o;
  kiln_model_opts_default(&o);
  CHECK(kiln_model_load(NULL, MODELS "mlp.safetensors", NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "NULL graph or weights path");
  o.mode = (kiln_nn_mode)99;
  CHECK(kiln_model_load(MODELS "mlp.ir", MODELS "mlp.safetensors", &o) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "unknown mode 99");
  CHECK(kiln_model_load("/nonexistent/m.ir", MODELS "mlp.safetensors", NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "/nonexistent/m.ir");
  /* weights whose kiln.class is another class */
  kiln_safetensors *st = kiln_safetensors_load(MODELS "mlp.safetensors");
  CHECK(st != NULL);
  char path[64];
  snprintf(path, sizeof path, "/tmp/kiln-other-%ld.safetensors", (long)getpid());
  if (st) {
    int n = kiln_safetensors_n_tensors(st);
    const char *names[16];
    kiln_tensor *ts[16];
    for (int i = 0; i < n && i < 16; i++) {
      names[i] = kiln_safetensors_name(st, i);
      ts[i] = kiln_safetensors_tensor(st, i);
    }
    const char *keys[4] = {"kiln.format", "kiln.class", "kiln.parameters", "kiln.example"};
    const char *vals[4];
    for (int i = 0; i < 4; i++) vals[i] = kiln_safetensors_metadata(st, keys[i]);
    vals[1] = "__torch__.NotMLP";
    CHECK(kiln_safetensors_save(path, n, names, ts, 4, keys, vals) == 0);
    kiln_safetensors_free(st);
    CHECK(kiln_model_load(MODELS "mlp.ir", path, NULL) == NULL);
    CHECK_STR_CONTAINS(kiln_last_error(), "are for __torch__.NotMLP");
    unlink(path);
  }
  kiln_model *m = kiln_model_load(MODELS "mlp.ir", MODELS "mlp.safetensors", NULL);
  CHECK_MSG(m != NULL, "%s", kiln_last_error());
  if (m) {
    int64_t shape[2] = {2, 784};
    kiln_tensor *x = kiln_zeros(2, shape, KILN_DTYPE_F32);
    kiln_value in[2] = {{.kind = KILN_VALUE_TENSOR, .t = x}, {.kind = KILN_VALUE_TENSOR, .t = x}};
    kiln_value out[2];
    CHECK(kiln_model_call(m, in, 2, out, 2) < 0);
    CHECK_STR_CONTAINS(kiln_last_error(), "takes 1 inputs, got 2");
    CHECK(kiln_model_set_tensor(m, "nope", x) == KILN_ERR_INVALID);
    CHECK_STR_CONTAINS(kiln_last_error(), "no tensor 'nope'");
    CHECK(kiln_model_set_tensor(m, "fc1.bias", x) == KILN_ERR_INVALID);
    CHECK_STR_CONTAINS(kiln_last_error(), "'fc1.bias' is [");
    /* with every bias zero, a zero input gives exactly zero outputs */
    const char *biases[3] = {"fc1.bias", "fc2.bias", "fc3.bias"};
    for (int i = 0; i < 3; i++) {
      kiln_tensor *b = kiln_model_find(m, biases[i]);
      CHECK(b && kiln_model_set_tensor(m, biases[i], kiln_zeros(1, kiln_tensor_shape(b), KILN_DTYPE_F32)) == 0);
    }
    CHECK(kiln_model_set_training(m, false) == 0);
    CHECK(!kiln_model_is_training(m));
    CHECK(kiln_model_set_training(m, true) == 0);
    CHECK(kiln_model_is_training(m));
    int k = kiln_model_call(m, in, 1, out, 2);
    CHECK_MSG(k == 1, "%s", kiln_last_error());
    if (k == 1) {
      double s = -1;
      kiln_tensor *a = kiln_sum(kiln_abs(out[0].t), NULL, 0, false);
      CHECK(a && kiln_item(a, &s) == 0);
      CHECK_NEAR(s, 0, 0);
      CHECK_EQ_INT(kiln_tensor_size(out[0].t, 0), 2);
    }
    kiln_model_free(m);
  }
  CHECK(!kiln_model_is_training(NULL));
  kiln_scope_end();
}
