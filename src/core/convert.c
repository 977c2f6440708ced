/* src/core/convert.c: element conversions between every pair of dtypes,
 * as strided runs (the elementwise driver's gathers, copies, to) and one
 * element at a time through double (item, fills). */
#include "core.h"
#include "cpu.h"
#include "half.h"

/* Note [Conversions]: as PyTorch's static_cast between its C++ types: a
 * floating value to an integer truncates toward zero (core_f2i, then the
 * integer wraps to the narrower width); an integer to a narrower one
 * wraps; anything to bool is != 0 (NaN is true); to a half type through
 * float32 (Note [Half conversions]); a half type to anything through
 * float32, which it converts to exactly. Integer to integer never passes
 * through double, so int64 values stay exact. */
#define FROM_f32(x) (x)
#define FROM_f64(x) (x)
#define FROM_i64(x) (x)
#define FROM_b(x) (x)
#define FROM_i32(x) (x)
#define FROM_i16(x) (x)
#define FROM_i8(x) (x)
#define FROM_u8(x) (x)
#define FROM_f16(x) core_f16_to_f32(x)
#define FROM_bf16(x) core_bf16_to_f32(x)
#define TO_i64(v) _Generic((v), float: core_f2i(v), double: core_f2i(v), default: (int64_t)(v))
#define TO_f32(v) ((float)(v))
#define TO_f64(v) ((double)(v))
#define TO_b(v) ((v) != 0)
#define TO_i32(v) ((int32_t)TO_i64(v))
#define TO_i16(v) ((int16_t)TO_i64(v))
#define TO_i8(v) ((int8_t)TO_i64(v))
#define TO_u8(v) ((uint8_t)TO_i64(v))
#define TO_f16(v) core_f32_to_f16((float)(v))
#define TO_bf16(v) core_f32_to_bf16((float)(v))

typedef void (*run_fn)(void *dst, const void *src, int64_t stride, int64_t n);
#define RUN(SN, ST, DN, DT)                                                              \
  CORE_CLONES(run_##SN##_##DN, (void *dst_, const void *src_, int64_t stride, int64_t n), \
              (dst_, src_, stride, n)) {                                                 \
    DT *restrict dst = dst_;                                                             \
    const ST *restrict src = src_;                                                       \
    if (stride == 1)                                                                     \
      for (int64_t j = 0; j < n; j++) dst[j] = TO_##DN(FROM_##SN(src[j]));               \
    else if (stride == 0) {                                                              \
      DT v = TO_##DN(FROM_##SN(src[0]));                                                 \
      for (int64_t j = 0; j < n; j++) dst[j] = v;                                        \
    } else                                                                               \
      for (int64_t j = 0; j < n; j++) dst[j] = TO_##DN(FROM_##SN(src[j * stride]));      \
  }
/* in kiln_dtype order */
#define EACH_DTYPE(X, A, B)                                                             \
  X(A, B, f32, float) X(A, B, f64, double) X(A, B, i64, int64_t) X(A, B, b, bool)       \
  X(A, B, i32, int32_t) X(A, B, i16, int16_t) X(A, B, i8, int8_t) X(A, B, u8, uint8_t) \
  X(A, B, f16, uint16_t) X(A, B, bf16, uint16_t)
/* the same list again: a macro does not expand inside its own expansion */
#define EACH_DTYPE_INNER(X, A, B)                                                       \
  X(A, B, f32, float) X(A, B, f64, double) X(A, B, i64, int64_t) X(A, B, b, bool)       \
  X(A, B, i32, int32_t) X(A, B, i16, int16_t) X(A, B, i8, int8_t) X(A, B, u8, uint8_t) \
  X(A, B, f16, uint16_t) X(A, B, bf16, uint16_t)
#define RUNS_FROM(u1, u2, SN, ST) EACH_DTYPE_INNER(RUN, SN, ST)
EACH_DTYPE(RUNS_FROM, _, _)
#define ENTRY(SN, ST, DN, DT) run_##SN##_##DN,
#define ROW(u1, u2, SN, ST) {EACH_DTYPE_INNER(ENTRY, SN, ST)},
static const run_fn runs[KILN_DTYPE_COUNT][KILN_DTYPE_COUNT] = {EACH_DTYPE(ROW, _, _)};

void core_convert_run(void *dst, kiln_dtype dd, const void *src, kiln_dtype sd, int64_t stride,
                      int64_t n) {
  if (stride == 1 && core_cpu_level() >= CORE_CPU_AVX2) { /* Note [F16C] in half_f16c.c */
    if (sd == KILN_DTYPE_F32 && dd == KILN_DTYPE_F16) {
      core_f16c_from_f32(dst, src, n);
      return;
    }
    if (sd == KILN_DTYPE_F16 && dd == KILN_DTYPE_F32) {
      core_f16c_to_f32(dst, src, n);
      return;
    }
  }
  runs[sd][dd](dst, src, stride, n);
}

double core_load_double(const void *p, kiln_dtype dt) {
  switch (dt) {
  case KILN_DTYPE_F32: return *(const float *)p;
  case KILN_DTYPE_F64: return *(const double *)p;
  case KILN_DTYPE_I64: return (double)*(const int64_t *)p;
  case KILN_DTYPE_BOOL: return *(const bool *)p ? 1.0 : 0.0;
  case KILN_DTYPE_I32: return *(const int32_t *)p;
  case KILN_DTYPE_I16: return *(const int16_t *)p;
  case KILN_DTYPE_I8: return *(const int8_t *)p;
  case KILN_DTYPE_U8: return *(const uint8_t *)p;
  case KILN_DTYPE_F16: return core_f16_to_f32(*(const uint16_t *)p);
  case KILN_DTYPE_BF16: return core_bf16_to_f32(*(const uint16_t *)p);
  default: KILN_ASSERT(!"dtype"); return 0;
  }
}

void core_store_double(void *p, kiln_dtype dt, double v) {
  switch (dt) {
  case KILN_DTYPE_F32: *(float *)p = (float)v; break;
  case KILN_DTYPE_F64: *(double *)p = v; break;
  case KILN_DTYPE_I64: *(int64_t *)p = core_f2i(v); break;
  case KILN_DTYPE_BOOL: *(bool *)p = v != 0; break;
  case KILN_DTYPE_I32: *(int32_t *)p = TO_i32(v); break;
  case KILN_DTYPE_I16: *(int16_t *)p = TO_i16(v); break;
  case KILN_DTYPE_I8: *(int8_t *)p = TO_i8(v); break;
  case KILN_DTYPE_U8: *(uint8_t *)p = TO_u8(v); break;
  case KILN_DTYPE_F16: *(uint16_t *)p = TO_f16(v); break;
  case KILN_DTYPE_BF16: *(uint16_t *)p = TO_bf16(v); break;
  default: KILN_ASSERT(!"dtype");
  }
}

int64_t core_load_int(const void *p, kiln_dtype dt) {
  switch (dt) {
  case KILN_DTYPE_I64: return *(const int64_t *)p;
  case KILN_DTYPE_BOOL: return *(const bool *)p;
  case KILN_DTYPE_I32: return *(const int32_t *)p;
  case KILN_DTYPE_I16: return *(const int16_t *)p;
  case KILN_DTYPE_I8: return *(const int8_t *)p;
  case KILN_DTYPE_U8: return *(const uint8_t *)p;
  default: return core_f2i(core_load_double(p, dt));
  }
}

void core_store_int(void *p, kiln_dtype dt, int64_t v) {
  switch (dt) {
  case KILN_DTYPE_I64: *(int64_t *)p = v; break;
  case KILN_DTYPE_BOOL: *(bool *)p = v != 0; break;
  case KILN_DTYPE_I32: *(int32_t *)p = (int32_t)v; break;
  case KILN_DTYPE_I16: *(int16_t *)p = (int16_t)v; break;
  case KILN_DTYPE_I8: *(int8_t *)p = (int8_t)v; break;
  case KILN_DTYPE_U8: *(uint8_t *)p = (uint8_t)v; break;
  case KILN_DTYPE_F16: *(uint16_t *)p = TO_f16(v); break;
  case KILN_DTYPE_BF16: *(uint16_t *)p = TO_bf16(v); break;
  default: core_store_double(p, dt, (double)v); break;
  }
}
