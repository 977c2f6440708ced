/* tests/ops/test_dtypes.c: the ten dtypes against PyTorch 1.13's goldens
 * (tests/data/dtypes, written by scripts/golden/dtypes.py): promotion,
 * half conversions, Tensor.to between every pair, and the elementwise ops
 * and reductions that take the new dtypes; other ops refuse them. */
#include <stdlib.h>

#include "core/core.h"
#include "core/half.h"
#include "ops/op.h"
#include "test.h"
#include "dtype_data.h"

#define DATA "tests/data/dtypes/"

int test_dtype_by_name(const char *s, size_t n) {
  for (int d = 0; d < KILN_DTYPE_COUNT; d++)
    if (strlen(kiln_dtype_name((kiln_dtype)d)) == n && !strncmp(kiln_dtype_name((kiln_dtype)d), s, n))
      return d;
  return -1;
}

/* "T:<dtype>:<RxC | s>:<hex,hex,...>" -> a new tensor (autoreleased). */
kiln_tensor *test_dtype_parse_tensor(const char *tok) {
  if (strncmp(tok, "T:", 2)) return NULL;
  const char *p = tok + 2, *c = strchr(p, ':');
  if (!c) return NULL;
  int dt = test_dtype_by_name(p, (size_t)(c - p));
  if (dt < 0) return NULL;
  p = c + 1;
  int64_t shape[KILN_MAX_DIMS];
  int nd = 0;
  if (*p == 's') {
    p++;
  } else {
    while (nd < KILN_MAX_DIMS) {
      shape[nd++] = strtoll(p, (char **)&p, 10);
      if (*p != 'x') break;
      p++;
    }
  }
  if (*p++ != ':') return NULL;
  kiln_tensor *t = kiln_empty(nd, shape, (kiln_dtype)dt);
  if (!t) return NULL;
  size_t es = kiln_dtype_size((kiln_dtype)dt);
  int64_t n = kiln_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    uint64_t v = strtoull(p, (char **)&p, 16);
    memcpy((char *)core_data(t) + i * (int64_t)es, &v, es); /* little-endian */
    if (*p == ',') p++;
  }
  return t;
}

/* The element's bits, zero-extended. */
static uint64_t elem_bits(const kiln_tensor *t, int64_t i) {
  uint64_t v = 0;
  size_t es = kiln_dtype_size(t->dtype);
  memcpy(&v, (const char *)core_data(t) + i * (int64_t)es, es);
  return v;
}

/* got == want: same dtype and shape, every element's bits the same (NaN
 * equal to NaN); with loose, floating elements may differ by one unit in
 * the last place of the dtype (a transcendental function's float32 result,
 * or a sum's order, may round the other way). */
static bool same_tensor(const kiln_tensor *got, const kiln_tensor *want, bool loose, char *why,
                        size_t nw) {
  if (!got) return snprintf(why, nw, "no result: %s", kiln_last_error()), false;
  if (got->dtype != want->dtype)
    return snprintf(why, nw, "dtype %s, PyTorch's %s", kiln_dtype_name(got->dtype),
                    kiln_dtype_name(want->dtype)), false;
  if (got->ndim != want->ndim || memcmp(got->shape, want->shape, (size_t)got->ndim * 8))
    return snprintf(why, nw, "shape differs"), false;
  kiln_tensor *g = kiln_contiguous((kiln_tensor *)got);
  int64_t n = kiln_tensor_numel(want);
  for (int64_t i = 0; i < n; i++) {
    uint64_t a = elem_bits(g, i), b = elem_bits(want, i);
    if (a == b) continue;
    double x = core_get_flat(g, i), y = core_get_flat(want, i);
    if (isnan(x) && isnan(y)) continue;
    if (loose && core_dtype_is_floating(want->dtype)) {
      double eps = want->dtype == KILN_DTYPE_F16 ? 0x1p-10 : want->dtype == KILN_DTYPE_BF16 ? 0x1p-7
                   : want->dtype == KILN_DTYPE_F32 ? 0x1p-22 : 0x1p-50;
      if (fabs(x - y) <= eps * fabs(y) + 1e-30) continue;
    }
    return snprintf(why, nw, "element %lld: %.9g (bits %llx), PyTorch's %.9g (bits %llx)",
                    (long long)i, x, (unsigned long long)a, y, (unsigned long long)b), false;
  }
  return true;
}

static char *next_line(char **p) {
  while (**p) {
    char *l = *p, *e = strchr(l, '\n');
    if (e) *e = 0, *p = e + 1;
    else *p = l + strlen(l);
    if (*l && *l != '#') return l;
  }
  return NULL;
}

TEST(dtypes_names_sizes_codes) {
  static const char *names[] = {"Float", "Double", "Long", "Bool", "Int",
                                "Short", "Char", "Byte", "Half", "BFloat16"};
  static const size_t sizes[] = {4, 8, 8, 1, 4, 2, 1, 1, 2, 2};
  static const int codes[] = {6, 7, 4, 11, 3, 2, 1, 0, 5, 15}; /* c10::ScalarType */
  for (int d = 0; d < KILN_DTYPE_COUNT; d++) {
    CHECK(!strcmp(kiln_dtype_name((kiln_dtype)d), names[d]));
    CHECK_EQ_INT(kiln_dtype_size((kiln_dtype)d), sizes[d]);
    CHECK_EQ_INT(op_dtype_code((kiln_dtype)d), codes[d]);
    kiln_dtype back;
    CHECK(op_dtype_from_code(codes[d], &back) == 0 && back == (kiln_dtype)d);
  }
  kiln_dtype x;
  CHECK(op_dtype_from_code(8, &x) < 0); /* ComplexHalf */
  CHECK_STR_CONTAINS(kiln_last_error(), "dtype code 8");
}

TEST(dtypes_promotion_matches_torch) {
  char *buf = test_read_file(DATA "promote.txt", NULL), *p = buf, *l;
  CHECK(buf != NULL);
  if (!buf) return;
  int n = 0;
  while ((l = next_line(&p))) {
    char a[16], b[16], r[16];
    CHECK(sscanf(l, "promote %15s %15s %15s", a, b, r) == 3);
    int da = test_dtype_by_name(a, strlen(a)), db = test_dtype_by_name(b, strlen(b));
    int dr = test_dtype_by_name(r, strlen(r));
    CHECK(da >= 0 && db >= 0 && dr >= 0);
    if (da < 0 || db < 0 || dr < 0) continue;
    kiln_dtype got = kiln_promote_types((kiln_dtype)da, (kiln_dtype)db);
    CHECK_MSG(got == (kiln_dtype)dr, "promote(%s, %s) = %s, PyTorch's %s", a, b,
              kiln_dtype_name(got), r);
    n++;
  }
  CHECK_EQ_INT(n, KILN_DTYPE_COUNT * KILN_DTYPE_COUNT);
  free(buf);
}

static uint64_t fnv(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

TEST(dtypes_half_conversions_bit_exact) {
  char *buf = test_read_file(DATA "half.txt", NULL), *p = buf, *l;
  CHECK(buf != NULL);
  if (!buf) return;
  int n = 0;
  int saved = core_cpu_level();
  while ((l = next_line(&p))) {
    char name[16];
    unsigned long long want;
    long count;
    if (sscanf(l, "to_float %15s %llx", name, &want) == 2) {
      bool bf = !strcmp(name, "BFloat16");
      uint64_t h = 0xcbf29ce484222325ull;
      for (uint32_t i = 0; i < 65536; i++)
        h = fnv(h, core_f32_bits(bf ? core_bf16_to_f32((uint16_t)i) : core_f16_to_f32((uint16_t)i)));
      CHECK_MSG(h == want, "%s -> float hash %llx, PyTorch's %llx", name, (unsigned long long)h, want);
      n++;
    } else if (sscanf(l, "from_float %15s %ld %llx", name, &count, &want) == 3) {
      bool bf = !strcmp(name, "BFloat16");
      /* through the strided conversion runs, at every CPU level */
      float *src = malloc((size_t)count * 4);
      uint16_t *dst = malloc((size_t)count * 2);
      for (long i = 0; i < count; i++) src[i] = core_f32_from_bits((uint32_t)((uint64_t)i * 2654435761u));
      for (int lv = 0; lv <= saved; lv++) {
        core_cpu_set_level(lv);
        core_convert_run(dst, bf ? KILN_DTYPE_BF16 : KILN_DTYPE_F16, src, KILN_DTYPE_F32, 1, count);
        uint64_t h = 0xcbf29ce484222325ull;
        for (long i = 0; i < count; i++) h = fnv(h, dst[i]);
        CHECK_MSG(h == want, "float -> %s hash %llx at CPU level %d, PyTorch's %llx", name,
                  (unsigned long long)h, lv, want);
      }
      core_cpu_set_level(saved);
      free(src);
      free(dst);
      n++;
    }
  }
  CHECK_EQ_INT(n, 4);
  free(buf);
}

TEST(dtypes_to_between_every_pair) {
  char *buf = test_read_file(DATA "convert.txt", NULL), *p = buf, *l;
  CHECK(buf != NULL);
  if (!buf) return;
  int n = 0;
  kiln_scope_begin();
  while ((l = next_line(&p))) {
    char *a = strchr(l, ' '), *b = a ? strchr(a + 1, ' ') : NULL;
    if (!a || !b) continue;
    *b = 0;
    kiln_tensor *src = test_dtype_parse_tensor(a + 1), *want = test_dtype_parse_tensor(b + 1);
    CHECK(src && want);
    if (!src || !want) continue;
    char why[300];
    kiln_tensor *got = kiln_to_dtype(src, want->dtype);
    CHECK_MSG(same_tensor(got, want, false, why, sizeof why), "to %s -> %s: %s",
              kiln_dtype_name(src->dtype), kiln_dtype_name(want->dtype), why);
    /* strided both ways through copy_: src into every other element of a
     * buffer of its dtype, then from there into want's dtype */
    int64_t len = src->shape[0], twice = 2 * len;
    kiln_tensor *wide = kiln_zeros(1, &twice, src->dtype);
    kiln_tensor *every2 = kiln_slice(wide, 0, 0, twice, 2);
    kiln_tensor *dst = kiln_zeros(1, &len, want->dtype);
    CHECK(every2 && kiln_copy_(every2, src) == KILN_OK && kiln_copy_(dst, every2) == KILN_OK);
    CHECK_MSG(same_tensor(dst, want, false, why, sizeof why), "copy_ %s -> %s: %s",
              kiln_dtype_name(src->dtype), kiln_dtype_name(want->dtype), why);
    n++;
    if (n % 10 == 0) {
      kiln_scope_end();
      kiln_scope_begin();
    }
  }
  kiln_scope_end();
  CHECK_EQ_INT(n, KILN_DTYPE_COUNT * KILN_DTYPE_COUNT);
  free(buf);
}

/* One argument token of ops.txt: T:..., I:<int>, F:<float>, B:<0|1>,
 * L:<int,...>, N. */
bool test_dtype_parse_arg(const char *tok, op_val *v, int64_t *ints) {
  switch (tok[0]) {
  case 'T': v->tag = OP_VAL_TENSOR; v->t = test_dtype_parse_tensor(tok); return v->t != NULL;
  case 'I': *v = OPV_I(strtoll(tok + 2, NULL, 10)); return true;
  case 'F': *v = OPV_F(strtod(tok + 2, NULL)); return true;
  case 'B': *v = OPV_B(tok[2] == '1'); return true;
  case 'N': *v = (op_val){.tag = OP_VAL_NONE}; return true;
  case 'L': {
    int n = 0;
    const char *p = tok + 2;
    while (*p && n < KILN_MAX_DIMS) {
      ints[n++] = strtoll(p, (char **)&p, 10);
      if (*p == ',') p++;
    }
    v->tag = OP_VAL_INTS;
    v->ints.n = n;
    v->ints.v = ints;
    return true;
  }
  default: return false;
  }
}

/* Each op line runs eagerly and must give PyTorch's dtype, shape and
 * bits (within one unit in the last place for transcendental functions
 * and reductions). `opf` lines are ops PyTorch 1.13's CPU build has no
 * Half kernel for; their reference is the float32 op rounded back. */
TEST(dtypes_ops_match_torch) {
  char *buf = test_read_file(DATA "ops.txt", NULL), *p = buf, *l;
  CHECK(buf != NULL);
  if (!buf) return;
  int n = 0, per_dtype[KILN_DTYPE_COUNT] = {0};
  while ((l = next_line(&p))) {
    kiln_scope_begin();
    char *save = NULL, *tag = strtok_r(l, " ", &save), *aten = strtok_r(NULL, " ", &save);
    int nargs = atoi(strtok_r(NULL, " ", &save));
    op_val args[8];
    int64_t ints[8][KILN_MAX_DIMS];
    bool ok = nargs <= 8;
    for (int i = 0; ok && i < nargs; i++) ok = test_dtype_parse_arg(strtok_r(NULL, " ", &save), &args[i], ints[i]);
    strtok_r(NULL, " ", &save); /* -> */
    kiln_tensor *want = test_dtype_parse_tensor(strtok_r(NULL, " ", &save));
    int op = op_find_arity(aten, nargs);
    CHECK_MSG(ok && want && op >= 0, "bad line for %s", aten);
    if (ok && want && op >= 0) {
      kiln_tensor *out = NULL;
      int rc = op_call(op, args, nargs, &out, 1); /* out is autoreleased */
      bool loose = strstr("aten::sin aten::exp aten::tanh aten::sigmoid aten::sum aten::mean", aten) != NULL;
      char why[300];
      CHECK_MSG(same_tensor(rc >= 0 ? out : NULL, want, loose, why, sizeof why), "%s %s(%s%s): %s",
                tag, aten, kiln_dtype_name(args[0].t->dtype), nargs > 1 && args[1].tag == OP_VAL_TENSOR ? ", tensor" : "", why);
      per_dtype[args[0].t->dtype]++;
      n++;
    }
    kiln_scope_end();
  }
  test_note("%d op cases on Int/Short/Char/Byte/Half/BFloat16: %d/%d/%d/%d/%d/%d", n,
            per_dtype[KILN_DTYPE_I32], per_dtype[KILN_DTYPE_I16], per_dtype[KILN_DTYPE_I8],
            per_dtype[KILN_DTYPE_U8], per_dtype[KILN_DTYPE_F16], per_dtype[KILN_DTYPE_BF16]);
  CHECK(n > 300);
  free(buf);
}

/* An op whose NARROW row (Note [Widening] in widen.c) does not take a new
 * dtype refuses it with one line naming the op and the dtype, eagerly and
 * before any kernel reads the data: softmax of an integer tensor (PyTorch
 * has none); any op given a new dtype as a ScalarType code. */
TEST(dtypes_other_ops_refuse) {
  kiln_scope_begin();
  int64_t sh[2] = {2, 3};
  for (int d = KILN_DTYPE_I32; d < KILN_DTYPE_COUNT; d++) {
    kiln_tensor *a = kiln_ones(2, sh, (kiln_dtype)d);
    CHECK(a != NULL);
    if (!core_dtype_is_floating((kiln_dtype)d)) {
      CHECK(kiln_softmax(a, 1) == NULL);
      CHECK_STR_CONTAINS(kiln_last_error(), "aten::softmax: not implemented for dtype");
      CHECK_STR_CONTAINS(kiln_last_error(), kiln_dtype_name((kiln_dtype)d));
    } else {
      kiln_tensor *s = kiln_softmax(a, 1);
      CHECK_MSG(s && s->dtype == (kiln_dtype)d, "softmax(%s): %s", kiln_dtype_name((kiln_dtype)d),
                s ? kiln_dtype_name(s->dtype) : kiln_last_error());
    }
    /* an op given the dtype as a ScalarType code */
    int op = op_find_arity("aten::arange", 5);
    kiln_tensor *out = NULL;
    CHECK(op >= 0 && op_call(op, (op_val[]){OPV_I(4), OPV_I(op_dtype_code((kiln_dtype)d)),
                                            {.tag = OP_VAL_NONE}, {.tag = OP_VAL_NONE},
                                            {.tag = OP_VAL_NONE}}, 5, &out, 1) < 0);
    CHECK_STR_CONTAINS(kiln_last_error(), "aten::arange: not implemented for dtype");
  }
  kiln_scope_end();
}
