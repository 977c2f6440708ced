/* tests/nn/test_dtype_io.c: the extended dtypes in files and graphs:
 * safetensors and .npy round trips of every dtype, .npy files numpy wrote
 * (tests/data/dtypes, scripts/golden/dtypes.py), and IR types
 * (Half(2, 3)) and ScalarType codes run by the profiling executor. */
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"
#include "core/half.h"
#include "test.h"

#define DATA "tests/data/dtypes/"

/* Element i of a tensor of dtype dt: distinct bit patterns (no NaNs in the
 * half types, so values compare too). */
static void fill_bits(kiln_tensor *t) {
  size_t es = kiln_dtype_size(t->dtype);
  unsigned char *d = core_data(t);
  for (int64_t i = 0; i < kiln_tensor_numel(t); i++)
    for (size_t b = 0; b < es; b++)
      d[(size_t)i * es + b] = (unsigned char)(t->dtype == KILN_DTYPE_BOOL ? i % 2 : (29 * i + 7 * (int64_t)b + 3) & 0x3f);
}

TEST(dtype_io_safetensors_round_trip_every_dtype) {
  char path[] = "/tmp/kiln_dtio_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  close(fd);
  kiln_scope_begin();
  kiln_tensor *ts[KILN_DTYPE_COUNT];
  char names[KILN_DTYPE_COUNT][16];
  const char *np[KILN_DTYPE_COUNT];
  int64_t sh[2] = {3, 5};
  for (int d = 0; d < KILN_DTYPE_COUNT; d++) {
    ts[d] = kiln_empty(2, sh, (kiln_dtype)d);
    fill_bits(ts[d]);
    snprintf(names[d], sizeof names[d], "t%d", d);
    np[d] = names[d];
  }
  CHECK(kiln_safetensors_save(path, KILN_DTYPE_COUNT, np, ts, 0, NULL, NULL) == KILN_OK);
  kiln_safetensors *st = kiln_safetensors_load_stored(path);
  CHECK_MSG(st != NULL, "%s", kiln_last_error());
  for (int d = 0; st && d < KILN_DTYPE_COUNT; d++) {
    kiln_tensor *u = kiln_safetensors_find(st, names[d]);
    CHECK(u && u->dtype == (kiln_dtype)d);
    CHECK(u && !memcmp(core_data(u), core_data(ts[d]), 15 * kiln_dtype_size((kiln_dtype)d)));
  }
  kiln_safetensors_free(st);
  /* the widening loader (model import): Half/BFloat16 as float32, Int as
   * int64, exactly; the other new dtypes as stored */
  st = kiln_safetensors_load(path);
  CHECK(st != NULL);
  for (int d = 0; st && d < KILN_DTYPE_COUNT; d++) {
    kiln_tensor *u = kiln_safetensors_find(st, names[d]);
    kiln_dtype want = d == KILN_DTYPE_F16 || d == KILN_DTYPE_BF16 ? KILN_DTYPE_F32
                      : d == KILN_DTYPE_I32                        ? KILN_DTYPE_I64
                                                                   : (kiln_dtype)d;
    CHECK(u && u->dtype == want);
    for (int64_t i = 0; u && i < 15; i++)
      CHECK_NEAR(core_get_flat(u, i), core_get_flat(ts[d], i), 0);
  }
  kiln_safetensors_free(st);
  kiln_scope_end();
  unlink(path);
}

/* numpy's files: element i is i * 37 - 90 (wrapped) or i * 0.375 - 1 */
TEST(dtype_io_npy_files_numpy_wrote) {
  static const struct { const char *file; kiln_dtype stored, widened; } files[] = {
      {"i4_2x3.npy", KILN_DTYPE_I32, KILN_DTYPE_I64}, {"i2_2x3.npy", KILN_DTYPE_I16, KILN_DTYPE_I64},
      {"i1_2x3.npy", KILN_DTYPE_I8, KILN_DTYPE_I64},  {"u1_2x3.npy", KILN_DTYPE_U8, KILN_DTYPE_I64},
      {"f2_2x3.npy", KILN_DTYPE_F16, KILN_DTYPE_F32}};
  char dir[] = "/tmp/kiln_dtio_XXXXXX", path[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/x.npy", dir);
  kiln_scope_begin();
  for (size_t k = 0; k < sizeof files / sizeof *files; k++) {
    char src[128];
    snprintf(src, sizeof src, DATA "%s", files[k].file);
    kiln_tensor *s = kiln_npy_load_stored(src), *w = kiln_npy_load(src);
    CHECK_MSG(s && w, "%s: %s", files[k].file, kiln_last_error());
    if (!s || !w) continue;
    CHECK(s->dtype == files[k].stored && w->dtype == files[k].widened);
    CHECK(s->ndim == 2 && s->shape[0] == 2 && s->shape[1] == 3);
    for (int64_t i = 0; i < 6; i++) {
      double want = files[k].stored == KILN_DTYPE_F16 ? i * 0.375 - 1 : (double)(i * 37 - 90);
      if (files[k].stored == KILN_DTYPE_I8) want = (double)(int8_t)(i * 37 - 90);
      if (files[k].stored == KILN_DTYPE_U8) want = (double)(uint8_t)(i * 37 - 90);
      CHECK_NEAR(core_get_flat(s, i), want, 0);
      CHECK_NEAR(core_get_flat(w, i), want, 0);
    }
    /* kiln writes the file numpy wrote, byte for byte */
    CHECK(kiln_npy_save(path, s) == KILN_OK);
    size_t na = 0, nb = 0;
    char *a = test_read_file(src, &na), *b = test_read_file(path, &nb);
    CHECK_MSG(a && b && na == nb && !memcmp(a, b, na), "%s differs from kiln's save", files[k].file);
    free(a);
    free(b);
  }
  kiln_scope_end();
  unlink(path);
  rmdir(dir);
}

/* IR types of the new dtypes parse and print as TorchScript's, and a
 * graph converting with ScalarType codes runs the same in every run of
 * the profiling executor (whose fused groups run such inputs unfused). */
TEST(dtype_io_graph_half_and_codes) {
  static const char *text =
      "graph(%x : Half(2, 3),\n"
      "      %y : Char(2, 3)):\n"
      "  %c5 : int = prim::Constant[value=5]()\n"
      "  %c15 : int = prim::Constant[value=15]()\n"
      "  %c3 : int = prim::Constant[value=3]()\n"
      "  %f : bool = prim::Constant[value=0]()\n"
      "  %none : NoneType = prim::Constant()\n"
      "  %one : int = prim::Constant[value=1]()\n"
      "  %a : Tensor = aten::mul(%x, %x)\n"
      "  %b : Tensor = aten::add(%a, %y, %one)\n"
      "  %c : Tensor = aten::to(%b, %c15, %f, %f, %none)\n"
      "  %d : Tensor = aten::to(%y, %c3, %f, %f, %none)\n"
      "  %e : Tensor = aten::mul(%d, %d)\n"
      "  %g : Tensor = aten::to(%e, %c5, %f, %f, %none)\n"
      "  return (%b, %c, %g)\n";
  kiln_graph *g = kiln_graph_parse(text, strlen(text));
  CHECK_MSG(g != NULL, "parse: %s", kiln_last_error());
  if (!g) return;
  char *printed = kiln_graph_print(g);
  CHECK_STR_CONTAINS(printed, "%x : Half(2, 3)");
  CHECK_STR_CONTAINS(printed, "%y : Char(2, 3)");
  kiln_free(printed);
  kiln_function *f = kiln_function_new(g);
  kiln_graph_free(g);
  CHECK(f != NULL);
  if (!f) return;
  kiln_scope_begin();
  int64_t sh[2] = {2, 3};
  kiln_tensor *x = kiln_empty(2, sh, KILN_DTYPE_F16), *y = kiln_empty(2, sh, KILN_DTYPE_I8);
  for (int i = 0; i < 6; i++) {
    ((uint16_t *)core_data(x))[i] = core_f32_to_f16(1.5f * (float)i - 2.2f);
    ((int8_t *)core_data(y))[i] = (int8_t)(40 * i - 100);
  }
  for (int run = 0; run < 5; run++) {
    kiln_value in[2] = {{.kind = KILN_VALUE_TENSOR, .t = x}, {.kind = KILN_VALUE_TENSOR, .t = y}};
    kiln_value out[3];
    int k = kiln_function_call(f, in, 2, out, 3);
    CHECK_MSG(k == 3, "run %d: %s", run, kiln_last_error());
    if (k != 3) break;
    CHECK(out[0].t->dtype == KILN_DTYPE_F16 && out[1].t->dtype == KILN_DTYPE_BF16 &&
          out[2].t->dtype == KILN_DTYPE_F16);
    for (int i = 0; i < 6; i++) {
      /* x*x in float32 rounded to half; + y (Char -> Half) rounded again */
      float xv = core_f16_to_f32(core_f32_to_f16(1.5f * (float)i - 2.2f));
      float a = core_f16_to_f32(core_f32_to_f16(xv * xv));
      float b = core_f16_to_f32(core_f32_to_f16(a + (float)(int8_t)(40 * i - 100)));
      CHECK_NEAR(core_get_flat(out[0].t, i), b, 0);
      CHECK_NEAR(core_get_flat(out[1].t, i), core_bf16_to_f32(core_f32_to_bf16(b)), 0);
      int32_t d = (int8_t)(40 * i - 100);
      CHECK_NEAR(core_get_flat(out[2].t, i), core_f16_to_f32(core_f32_to_f16((float)(d * d))), 0);
    }
  }
  kiln_function_free(f);
  kiln_scope_end();
}

/* Lazy tensors of the new dtypes: recorded, compiled and run like eager
 * ones (same bits), widened ops too, and an op that refuses them refuses
 * when recording. */
TEST(dtype_io_lazy_matches_eager) {
  kiln_scope_begin();
  int64_t n = 7;
  for (int d = KILN_DTYPE_I32; d < KILN_DTYPE_COUNT; d++) {
    kiln_tensor *a = kiln_arange(-3, 4, 1, (kiln_dtype)d);
    kiln_tensor *b = kiln_full(1, &n, 5, (kiln_dtype)d);
    kiln_tensor *e = kiln_mul(kiln_add(a, b), a);
    kiln_tensor *la = kiln_to_lazy(a), *lb = kiln_to_lazy(b);
    CHECK(la && lb);
    if (!la || !lb) continue;
    kiln_tensor *l = kiln_mul(kiln_add(la, lb), la);
    CHECK_MSG(l != NULL, "%s: %s", kiln_dtype_name((kiln_dtype)d), kiln_last_error());
    double got[7], want[7];
    CHECK(l && kiln_tensor_dtype(l) == (kiln_dtype)d);
    CHECK(l && kiln_tensor_copy_to(l, got, KILN_DTYPE_F64) == KILN_OK); /* runs the graph */
    CHECK(kiln_tensor_copy_to(e, want, KILN_DTYPE_F64) == KILN_OK);
    for (int64_t i = 0; l && i < n; i++) CHECK_NEAR(got[i], want[i], 0);
    /* (-3 + 5) * -3 = -6 exactly in every dtype */
    CHECK_NEAR(want[0], d == KILN_DTYPE_U8 ? (double)(uint8_t)-6 : -6, 0);
    /* a widened op (Note [Widening]): recorded with the narrow dtype, the
     * same bits as eager */
    kiln_tensor *lm = kiln_matmul(kiln_reshape(la, 2, (int64_t[]){1, 7}), kiln_reshape(lb, 2, (int64_t[]){7, 1}));
    kiln_tensor *em = kiln_matmul(kiln_reshape(a, 2, (int64_t[]){1, 7}), kiln_reshape(b, 2, (int64_t[]){7, 1}));
    CHECK_MSG(lm && em && kiln_tensor_dtype(lm) == (kiln_dtype)d && kiln_tensor_dtype(em) == (kiln_dtype)d,
              "matmul %s: %s", kiln_dtype_name((kiln_dtype)d), kiln_last_error());
    if (lm && em) {
      CHECK(kiln_tensor_copy_to(lm, got, KILN_DTYPE_F64) == KILN_OK);
      CHECK(kiln_tensor_copy_to(em, want, KILN_DTYPE_F64) == KILN_OK);
      CHECK_NEAR(got[0], want[0], 0);
    }
    /* an op that refuses the dtype refuses when recording */
    if (d < KILN_DTYPE_F16) {
      CHECK(kiln_softmax(la, 0) == NULL);
      CHECK_STR_CONTAINS(kiln_last_error(), "not implemented for dtype");
    }
  }
  kiln_scope_end();
}

/* Half tensors take gradients through the ops that take them: d/da
 * sum(a * a + a) = 2a + 1, in Half. */
TEST(dtype_io_half_autograd) {
  kiln_scope_begin();
  for (int d = KILN_DTYPE_F16; d <= KILN_DTYPE_BF16; d++) {
    kiln_tensor *a = kiln_arange(-2, 3, 0.5, (kiln_dtype)d);
    CHECK(kiln_set_requires_grad(a, true) == KILN_OK);
    kiln_tensor *loss = kiln_sum(kiln_add(kiln_mul(a, a), a), NULL, 0, false);
    CHECK_MSG(loss && kiln_backward(loss, NULL) == KILN_OK, "%s", kiln_last_error());
    kiln_tensor *g = kiln_tensor_grad(a);
    CHECK(g && kiln_tensor_dtype(g) == (kiln_dtype)d);
    for (int64_t i = 0; g && i < 10; i++) CHECK_NEAR(core_get_flat(g, i), 2 * (-2 + 0.5 * i) + 1, 0);
  }
  kiln_scope_end();
}

/* The JIT's write-into-a-dead-input path (op_call_into, addmm writing its
 * self) refuses a widened op (Note [Widening]), and the graph runs it
 * through op_call instead, in Half, on every run: x*x + x@w = 1 + 2. */
TEST(dtype_io_graph_addmm_half_widened) {
  static const char *text =
      "graph(%x : Tensor, %w : Tensor):\n"
      "  %one : int = prim::Constant[value=1]()\n"
      "  %s : Tensor = aten::mul(%x, %x)\n"
      "  %y : Tensor = aten::addmm(%s, %x, %w, %one, %one)\n"
      "  return (%y)\n";
  kiln_graph *g = kiln_graph_parse(text, strlen(text));
  kiln_function *f = g ? kiln_function_new(g) : NULL;
  kiln_graph_free(g);
  CHECK(f != NULL);
  if (!f) return;
  kiln_scope_begin();
  int64_t sh[2] = {2, 2};
  for (int run = 0; run < 3; run++) {
    kiln_value in[2] = {{.kind = KILN_VALUE_TENSOR, .t = kiln_ones(2, sh, KILN_DTYPE_F16)},
                        {.kind = KILN_VALUE_TENSOR, .t = kiln_ones(2, sh, KILN_DTYPE_F16)}};
    kiln_value out[1];
    CHECK_MSG(kiln_function_call(f, in, 2, out, 1) == 1, "run %d: %s", run, kiln_last_error());
    CHECK(out[0].kind == KILN_VALUE_TENSOR && kiln_tensor_dtype(out[0].t) == KILN_DTYPE_F16);
    for (int i = 0; out[0].kind == KILN_VALUE_TENSOR && i < 4; i++) CHECK_NEAR(core_get_flat(out[0].t, i), 3, 0);
  }
  kiln_function_free(f);
  kiln_scope_end();
}
