/* src/core/tensor.c: tensor and storage lifetime, metadata accessors,
 * creation of plain (non-op) tensors. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

void (*core_ag_meta_free_hook)(kiln_tensor *t);
void (*core_lazy_free_hook)(kiln_tensor *t);
void (*core_lazy_share_hook)(kiln_tensor *dst, const kiln_tensor *src);
kiln_tensor *(*core_lazy_materialize_hook)(const kiln_tensor *t);
void (*core_frozen_drop_hook)(uint64_t uid);

int64_t core_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

void core_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i] > 1 ? shape[i] : 1;
  }
}

bool core_is_contiguous(const kiln_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] == 1) continue;
    if (t->strides[i] != s) return false;
    s *= t->shape[i];
  }
  return true;
}

char *core_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

char *core_tensor_desc(const kiln_tensor *t, char *buf, size_t n) {
  char sh[160];
  if (!t) {
    snprintf(buf, n, "None");
    return buf;
  }
  snprintf(buf, n, "%s%s", kiln_dtype_name(t->dtype),
           core_shape_str(t->ndim, t->shape, sh, sizeof sh));
  return buf;
}

int core_check_shape(const char *fn, int ndim, const int64_t *shape) {
  char sh[160];
  if (ndim < 0 || ndim > KILN_MAX_DIMS)
    return core_error(KILN_ERR_INVALID, "%s: %d dims, at most %d are supported", fn,
                      ndim, KILN_MAX_DIMS);
  if (ndim > 0 && !shape)
    return core_error(KILN_ERR_INVALID, "%s: shape is NULL", fn);
  int64_t span = 1; /* the contiguous strides' largest, times its size */
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return core_error(KILN_ERR_INVALID, "%s: negative size in shape %s", fn,
                        core_shape_str(ndim, shape, sh, sizeof sh));
    if (__builtin_mul_overflow(span, shape[i] > 1 ? shape[i] : 1, &span))
      return core_error(KILN_ERR_INVALID, "%s: shape %s is too large (its strides overflow)",
                        fn, core_shape_str(ndim, shape, sh, sizeof sh));
  }
  return 0;
}

int core_wrap_dim(const char *fn, int64_t dim, int ndim) {
  int64_t n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n)
    return core_error(KILN_ERR_INVALID,
                      "%s: dim %lld out of range for a tensor of %d dims (expected "
                      "[-%lld, %lld])",
                      fn, (long long)dim, ndim, (long long)n, (long long)n - 1),
           -1;
  return (int)(dim < 0 ? dim + n : dim);
}

static kiln_tensor *header_new(kiln_dtype dt, int ndim, const int64_t *shape) {
  kiln_tensor *t = core_alloc(sizeof *t);
  if (!t) return NULL;
  /* zeroed by 16-byte stores of a zero the compiler cannot see: it makes
   * a constant-size memset (or a copy of a zero template) `rep stos`, whose
   * start-up was 16% of a one-element add's time */
  typedef long long zero16 __attribute__((vector_size(16)));
  zero16 z = {0, 0};
#if defined(__x86_64__)
  __asm__("" : "+x"(z));
#endif
  for (size_t i = 0; i + 16 <= sizeof *t; i += 16) memcpy((char *)t + i, &z, 16);
  if (sizeof *t % 16) memset((char *)t + sizeof *t / 16 * 16, 0, sizeof *t % 16);
  t->refcount = 1;
  t->dtype = dt;
  t->ndim = (uint8_t)ndim;
  if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
  core_contiguous_strides(ndim, shape, t->strides);
  return t;
}

int core_nbytes(const char *fn, int ndim, const int64_t *shape, kiln_dtype dt, size_t *nbytes) {
  char sh[160];
  uint64_t n = kiln_dtype_size(dt);
  for (int i = 0; i < ndim; i++)
    if (shape[i] >= 0 && __builtin_mul_overflow(n, (uint64_t)shape[i], &n)) {
      n = UINT64_MAX;
      break;
    }
  for (int i = 0; i < ndim; i++)
    if (shape[i] == 0) n = 0; /* an empty tensor holds no bytes, whatever its other sizes */
  if (n > CORE_MAX_NBYTES)
    return core_error(KILN_ERR_INVALID,
                      "%s: a %s tensor of shape %s needs %s%llu bytes, more than the %llu "
                      "the allocator can give",
                      fn, kiln_dtype_name(dt), core_shape_str(ndim, shape, sh, sizeof sh),
                      n == UINT64_MAX ? "over " : "", (unsigned long long)n,
                      (unsigned long long)CORE_MAX_NBYTES);
  *nbytes = (size_t)n;
  return 0;
}

int core_buf_bytes(const char *fn, uint64_t a, uint64_t b, uint64_t c, size_t *out) {
  uint64_t n;
  if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, c, &n) ||
      n > CORE_MAX_NBYTES)
    return core_error(KILN_ERR_INVALID,
                      "%s: a scratch buffer of %llu x %llu x %llu bytes is more than the %llu "
                      "the allocator can give",
                      fn, (unsigned long long)a, (unsigned long long)b, (unsigned long long)c,
                      (unsigned long long)CORE_MAX_NBYTES);
  *out = (size_t)n;
  return 0;
}

static _Atomic uint64_t next_storage_uid = 1; /* atomic: Note [Threads] in kiln.h */

uint64_t core_storage_uid(void) {
  return atomic_fetch_add_explicit(&next_storage_uid, 1, memory_order_relaxed);
}

kiln_tensor *core_tensor_new(int ndim, const int64_t *shape, kiln_dtype dt) {
  size_t nbytes;
  if (core_check_shape("empty", ndim, shape) < 0) return NULL;
  if ((unsigned)dt >= KILN_DTYPE_COUNT) {
    core_error(KILN_ERR_INVALID, "empty: invalid dtype %d", (int)dt);
    return NULL;
  }
  if (core_nbytes("empty", ndim, shape, dt, &nbytes) < 0) return NULL;
  kiln_tensor *t = header_new(dt, ndim, shape);
  if (!t) return NULL;
  /* One allocation for the storage header and its data: one malloc per
   * tensor instead of two keeps small-op overhead low. */
  size_t head = (sizeof(core_storage) + 63) & ~(size_t)63, block = 0;
  char *mem = core_block_alloc(head + nbytes, &block);
  if (!mem) {
    core_free(t);
    return NULL;
  }
  core_storage *s = (core_storage *)mem;
  s->block = block;
  s->refcount = 1;
  s->version = 0;
  s->uid = core_storage_uid();
  s->ag_rebases = 0;
  s->frozen = false;
  s->nbytes = nbytes;
  s->data = mem + head;
  s->owns_data = false;
  s->release = NULL;
  s->release_ctx = NULL;
  t->storage = s;
  return t;
}

kiln_tensor *core_tensor_view(core_storage *s, kiln_dtype dt, int ndim,
                              const int64_t *shape, const int64_t *strides,
                              int64_t offset) {
  kiln_tensor *t = header_new(dt, ndim, shape);
  if (!t) return NULL;
  if (ndim) memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
  t->offset = offset;
  t->storage = s;
  if (s) s->refcount++;
  return t;
}

kiln_tensor *core_alias(const kiln_tensor *t, bool with_data) {
  kiln_tensor *a = core_tensor_view(with_data ? t->storage : NULL, t->dtype, t->ndim,
                                    t->shape, t->strides, t->offset);
  if (!a) return NULL;
  if (with_data && t->device == CORE_DEVICE_LAZY && core_lazy_share_hook) {
    core_lazy_share_hook(a, t);
    if (a->device != CORE_DEVICE_LAZY) { /* out of memory (error set): not a storage-less CPU tensor */
      kiln_release(a);
      return NULL;
    }
  }
  return a;
}

kiln_tensor *core_tensor_meta(int ndim, const int64_t *shape, kiln_dtype dt) {
  if (core_check_shape("meta", ndim, shape) < 0) return NULL;
  return header_new(dt, ndim, shape);
}

void core_storage_freeze(core_storage *s) {
  if (s && s->data) s->frozen = true;
}

void core_storage_thaw(core_storage *s) {
  if (!s || !s->frozen) return;
  s->frozen = false;
  if (core_frozen_drop_hook) core_frozen_drop_hook(s->uid);
}

void core_storage_release(core_storage *s) {
  if (!s || --s->refcount > 0) return;
  core_storage_thaw(s);
  if (s->owns_data) core_free_aligned(s->data);
  if (s->release) s->release(s->release_ctx);
  core_block_free(s, s->block);
}

kiln_tensor *kiln_retain(kiln_tensor *t) {
  if (t) t->refcount++;
  return t;
}

void kiln_release(kiln_tensor *t) {
  if (!t) return;
  KILN_ASSERT(t->refcount > 0);
  if (--t->refcount > 0) return;
  if (t->ag && core_ag_meta_free_hook) core_ag_meta_free_hook(t);
  if (t->lazy && core_lazy_free_hook) core_lazy_free_hook(t);
  core_storage_release(t->storage);
  core_free(t);
}

int kiln_tensor_ndim(const kiln_tensor *t) { return t->ndim; }
const int64_t *kiln_tensor_shape(const kiln_tensor *t) { return t->shape; }
const int64_t *kiln_tensor_strides(const kiln_tensor *t) { return t->strides; }
int64_t kiln_tensor_numel(const kiln_tensor *t) { return core_numel(t->ndim, t->shape); }
kiln_dtype kiln_tensor_dtype(const kiln_tensor *t) { return t->dtype; }
int64_t kiln_tensor_offset(const kiln_tensor *t) { return t->offset; }
bool kiln_tensor_is_contiguous(const kiln_tensor *t) { return core_is_contiguous(t); }
void *kiln_tensor_data(const kiln_tensor *t) { return core_data(t); }

int64_t kiln_tensor_size(const kiln_tensor *t, int dim) {
  if (dim < 0) dim += t->ndim;
  return dim >= 0 && dim < t->ndim ? t->shape[dim] : -1;
}

char *kiln_shape_str(const kiln_tensor *t, char *buf, size_t n) {
  return core_shape_str(t->ndim, t->shape, buf, n);
}

/* Element offset (in elements, from the data pointer) of flat index i. */
static int64_t flat_offset(const kiln_tensor *t, int64_t i) {
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t sz = t->shape[d];
    off += (i % sz) * t->strides[d];
    i /= sz;
  }
  return off;
}

static double load_as_double(const void *p, kiln_dtype dt) { return core_load_double(p, dt); }

static void store_from_double(void *p, kiln_dtype dt, double v) { core_store_double(p, dt, v); }

double core_get_flat(const kiln_tensor *t, int64_t i) {
  const char *base = core_data(t);
  size_t es = kiln_dtype_size(t->dtype);
  return load_as_double(base + flat_offset(t, i) * (int64_t)es, t->dtype);
}

kiln_status kiln_item(const kiln_tensor *t, double *out) {
  char d[200];
  if (!t) return core_error(KILN_ERR_INVALID, "item: tensor is NULL");
  if (kiln_tensor_numel(t) != 1)
    return core_error(KILN_ERR_INVALID,
                      "item: a tensor with %lld elements (%s) cannot be converted to "
                      "a scalar; expected exactly 1",
                      (long long)kiln_tensor_numel(t), core_tensor_desc(t, d, sizeof d));
  if (t->device == CORE_DEVICE_LAZY && core_lazy_materialize_hook) {
    kiln_tensor *c = core_lazy_materialize_hook(t);
    if (!c) return KILN_ERR_STATE;
    *out = core_get_flat(c, 0);
    kiln_release(c);
    return KILN_OK;
  }
  if (!core_data(t))
    return core_error(KILN_ERR_STATE, "item: tensor has no data on this device");
  *out = core_get_flat(t, 0);
  return KILN_OK;
}

kiln_status kiln_tensor_copy_to(const kiln_tensor *t, void *buf, kiln_dtype dt) {
  if (!t || !buf) return core_error(KILN_ERR_INVALID, "copy_to: NULL argument");
  if (t->device == CORE_DEVICE_LAZY && core_lazy_materialize_hook) {
    kiln_tensor *c = core_lazy_materialize_hook(t);
    if (!c) return KILN_ERR_STATE;
    kiln_status rc = kiln_tensor_copy_to(c, buf, dt);
    kiln_release(c);
    return rc;
  }
  if (!core_data(t) && kiln_tensor_numel(t) > 0)
    return core_error(KILN_ERR_STATE, "copy_to: tensor has no data on this device");
  int64_t n = kiln_tensor_numel(t);
  size_t es = kiln_dtype_size(dt);
  if (dt == t->dtype && core_is_contiguous(t)) {
    memcpy(buf, core_data(t), (size_t)n * es);
    return KILN_OK;
  }
  for (int64_t i = 0; i < n; i++)
    store_from_double((char *)buf + i * (int64_t)es, dt, core_get_flat(t, i));
  return KILN_OK;
}

/* ---- creation ----------------------------------------------------------- */

kiln_tensor *kiln_empty(int ndim, const int64_t *shape, kiln_dtype dt) {
  return core_autorelease(core_tensor_new(ndim, shape, dt));
}

kiln_tensor *kiln_full(int ndim, const int64_t *shape, double value, kiln_dtype dt) {
  kiln_tensor *t = core_tensor_new(ndim, shape, dt);
  if (!t) return NULL;
  int64_t n = kiln_tensor_numel(t);
  void *d = core_data(t);
  switch (dt) {
  case KILN_DTYPE_F32: for (int64_t i = 0; i < n; i++) ((float *)d)[i] = (float)value; break;
  case KILN_DTYPE_F64: for (int64_t i = 0; i < n; i++) ((double *)d)[i] = value; break;
  case KILN_DTYPE_I64: {
    int64_t iv = core_f2i(value);
    for (int64_t i = 0; i < n; i++) ((int64_t *)d)[i] = iv;
    break;
  }
  case KILN_DTYPE_BOOL: memset(d, value != 0, (size_t)n); break;
  default: {
    size_t es = kiln_dtype_size(dt);
    char one[8];
    core_store_double(one, dt, value);
    for (int64_t i = 0; i < n; i++) memcpy((char *)d + i * (int64_t)es, one, es);
    break;
  }
  }
  return core_autorelease(t);
}

kiln_tensor *kiln_zeros(int ndim, const int64_t *shape, kiln_dtype dt) {
  kiln_tensor *t = core_tensor_new(ndim, shape, dt);
  if (!t) return NULL;
  memset(core_data(t), 0, t->storage->nbytes);
  return core_autorelease(t);
}

kiln_tensor *kiln_ones(int ndim, const int64_t *shape, kiln_dtype dt) {
  return kiln_full(ndim, shape, 1.0, dt);
}

kiln_tensor *kiln_scalar(double value, kiln_dtype dt) {
  return kiln_full(0, NULL, value, dt);
}

kiln_tensor *kiln_arange(double start, double end, double step, kiln_dtype dt) {
  if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step) ||
      (step > 0 && end < start) || (step < 0 && end > start)) {
    core_error(KILN_ERR_INVALID,
               "arange: cannot go from %g to %g by step %g (step must be non-zero "
               "and point from start to end)",
               start, end, step);
    return NULL;
  }
  int64_t n = (int64_t)ceil((end - start) / step);
  kiln_tensor *t = core_tensor_new(1, &n, dt);
  if (!t) return NULL;
  for (int64_t i = 0; i < n; i++)
    store_from_double((char *)core_data(t) + i * (int64_t)kiln_dtype_size(dt), dt,
                      start + (double)i * step);
  return core_autorelease(t);
}

kiln_tensor *kiln_from_data(const void *data, int ndim, const int64_t *shape,
                            kiln_dtype dt) {
  kiln_tensor *t = core_tensor_new(ndim, shape, dt);
  if (!t) return NULL;
  if (t->storage->nbytes) {
    if (!data) {
      kiln_release(t);
      core_error(KILN_ERR_INVALID, "from_data: data is NULL");
      return NULL;
    }
    memcpy(core_data(t), data, t->storage->nbytes);
  }
  return core_autorelease(t);
}

kiln_tensor *kiln_from_blob(void *data, int ndim, const int64_t *shape, const int64_t *strides,
                            kiln_dtype dt, void (*release)(void *ctx), void *ctx) {
  if (core_check_shape("from_blob", ndim, shape) < 0) return NULL;
  if ((unsigned)dt >= KILN_DTYPE_COUNT) {
    core_error(KILN_ERR_INVALID, "from_blob: invalid dtype %d", (int)dt);
    return NULL;
  }
  if (!data || (uintptr_t)data % kiln_dtype_size(dt) != 0) {
    core_error(KILN_ERR_INVALID, "from_blob: data %p is not aligned to its %zu-byte elements",
               data, kiln_dtype_size(dt));
    return NULL;
  }
  int64_t span = 1; /* elements addressed: 1 + sum (size - 1) * stride */
  bool empty = false;
  for (int i = 0; i < ndim; i++) {
    int64_t st = strides ? strides[i] : 0, step;
    if (st < 0) {
      core_error(KILN_ERR_INVALID, "from_blob: negative stride %lld", (long long)st);
      return NULL;
    }
    empty |= shape[i] == 0;
    if (shape[i] > 0 && (__builtin_mul_overflow(shape[i] - 1, st, &step) ||
                         __builtin_add_overflow(span, step, &span))) {
      core_error(KILN_ERR_INVALID, "from_blob: strides overflow");
      return NULL;
    }
  }
  if (!strides) span = core_numel(ndim, shape);
  if (empty) span = 0;
  size_t nbytes;
  if (__builtin_mul_overflow((size_t)span, kiln_dtype_size(dt), &nbytes)) {
    core_error(KILN_ERR_INVALID, "from_blob: size overflows");
    return NULL;
  }
  size_t block = 0;
  core_storage *s = core_block_alloc(sizeof *s, &block);
  if (!s) {
    core_error(KILN_ERR_NOMEM, "from_blob: out of memory");
    return NULL;
  }
  memset(s, 0, sizeof *s);
  s->uid = core_storage_uid();
  s->block = block;
  s->refcount = 1;
  s->nbytes = nbytes;
  s->data = data;
  s->owns_data = false;
  int64_t cs[KILN_MAX_DIMS];
  core_contiguous_strides(ndim, shape, cs);
  kiln_tensor *t = core_tensor_view(s, dt, ndim, shape, strides ? strides : cs, 0);
  if (!t) {
    core_block_free(s, block);
    core_error(KILN_ERR_NOMEM, "from_blob: out of memory");
    return NULL;
  }
  s->refcount = 1; /* the view retained it; the tensor is its only owner */
  s->release = release;
  s->release_ctx = ctx;
  return core_autorelease(t);
}

static kiln_tensor *random_tensor(const char *fn, int ndim, const int64_t *shape,
                                  kiln_dtype dt, kiln_generator *g, bool normal) {
  if (!core_dtype_is_floating(dt)) {
    core_error(KILN_ERR_INVALID, "%s: dtype %s is not floating point", fn,
               kiln_dtype_name(dt));
    return NULL;
  }
  if (dt != KILN_DTYPE_F32 && dt != KILN_DTYPE_F64) { /* Note [Extended dtypes] */
    core_error(KILN_ERR_UNSUPPORTED, "%s: not implemented for dtype %s", fn, kiln_dtype_name(dt));
    return NULL;
  }
  kiln_tensor *t = core_tensor_new(ndim, shape, dt);
  if (!t) return NULL;
  if (!g) g = kiln_default_generator();
  int64_t n = kiln_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    double v = normal ? core_rand_normal(g) : core_rand_double(g);
    if (dt == KILN_DTYPE_F32) {
      float f = (float)v;
      if (!normal && f >= 1.0f) f = nextafterf(1.0f, 0.0f);
      ((float *)core_data(t))[i] = f;
    } else {
      ((double *)core_data(t))[i] = v;
    }
  }
  return core_autorelease(t);
}

kiln_tensor *kiln_rand(int ndim, const int64_t *shape, kiln_dtype dt, kiln_generator *g) {
  return random_tensor("rand", ndim, shape, dt, g, false);
}

kiln_tensor *kiln_randn(int ndim, const int64_t *shape, kiln_dtype dt, kiln_generator *g) {
  return random_tensor("randn", ndim, shape, dt, g, true);
}

kiln_status kiln_fill_(kiln_tensor *t, double value) {
  if (!t || !core_data(t)) return core_error(KILN_ERR_INVALID, "fill_: no data");
  int64_t n = kiln_tensor_numel(t);
  size_t es = kiln_dtype_size(t->dtype);
  char *base = core_data(t);
  for (int64_t i = 0; i < n; i++)
    store_from_double(base + flat_offset(t, i) * (int64_t)es, t->dtype, value);
  core_bump_version(t);
  return KILN_OK;
}

uint64_t kiln_tensor_version(const kiln_tensor *t) {
  return t && t->storage ? t->storage->version : 0;
}
