/* src/nn/data.c: IDX files (gzipped through zlib), MNIST-format data sets
 * held as bytes, normalisation, seeded shuffling and batching. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "nn.h"

/* ---- IDX ---------------------------------------------------------------- */

typedef struct idx_file {
  int type;                  /* 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64 */
  size_t elsize;
  int ndim;
  int64_t shape[KILN_MAX_DIMS];
  int64_t numel;
  unsigned char *data;       /* numel * elsize bytes, big-endian as in the file */
} idx_file;

static size_t idx_elsize(int type) {
  switch (type) {
  case 0x08: case 0x09: return 1;
  case 0x0B: return 2;
  case 0x0C: case 0x0D: return 4;
  case 0x0E: return 8;
  default: return 0;
  }
}

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads exactly n bytes; the number read, or -1 with *zerr set. */
static int64_t gz_read_all(gzFile f, void *buf, size_t n, const char **zerr) {
  size_t got = 0;
  while (got < n) {
    size_t want = n - got > (1u << 30) ? (1u << 30) : n - got;
    int k = gzread(f, (char *)buf + got, (unsigned)want);
    if (k < 0) {
      int code;
      /* zlib's message may start with the path, which ours already names */
      *zerr = gzerror(f, &code);
      const char *colon = strstr(*zerr, ": ");
      if (colon) *zerr = colon + 2;
      return -1;
    }
    if (k == 0) break;
    got += (size_t)k;
  }
  return (int64_t)got;
}

static size_t max_data_bytes = (size_t)1 << 30;

size_t kiln_data_set_max_bytes(size_t max_bytes) {
  size_t old = max_data_bytes;
  if (max_bytes) max_data_bytes = max_bytes;
  return old;
}

static int idx_read(const char *path, idx_file *out) {
  memset(out, 0, sizeof *out);
  int fd = core_open_regular(path, "data");
  if (fd < 0) return fd;
  gzFile f = gzdopen(fd, "rb");
  if (!f) {
    close(fd);
    return core_error(KILN_ERR_NOMEM, "'%s': cannot open: out of memory", path);
  }
  int rc = 0;
  const char *zerr = NULL;
  unsigned char head[4 + 4 * KILN_MAX_DIMS];
  int64_t k = gz_read_all(f, head, 4, &zerr);
  if (k < 0) {
    rc = core_error(KILN_ERR_FORMAT, "'%s': corrupt gzip data: %s", path, zerr);
    goto done;
  }
  if (k < 4) {
    rc = core_error(KILN_ERR_FORMAT, "'%s': truncated: %lld bytes, an IDX header needs 4", path,
                    (long long)k);
    goto done;
  }
  if (head[0] != 0 || head[1] != 0) {
    rc = core_error(KILN_ERR_FORMAT,
                    "'%s': bad IDX magic %02x %02x %02x %02x (expected 00 00 type dims)", path,
                    head[0], head[1], head[2], head[3]);
    goto done;
  }
  out->type = head[2];
  out->elsize = idx_elsize(out->type);
  out->ndim = head[3];
  if (!out->elsize) {
    rc = core_error(KILN_ERR_FORMAT, "'%s': unknown IDX data type 0x%02x", path, out->type);
    goto done;
  }
  if (out->ndim < 1 || out->ndim > KILN_MAX_DIMS) {
    rc = core_error(KILN_ERR_FORMAT, "'%s': %d dims (kiln reads 1 to %d)", path, out->ndim,
                    KILN_MAX_DIMS);
    goto done;
  }
  k = gz_read_all(f, head + 4, 4 * (size_t)out->ndim, &zerr);
  if (k < 0) {
    rc = core_error(KILN_ERR_FORMAT, "'%s': corrupt gzip data: %s", path, zerr);
    goto done;
  }
  if (k < 4 * out->ndim) {
    rc = core_error(KILN_ERR_FORMAT, "'%s': truncated in the header (%d sizes expected)", path,
                    out->ndim);
    goto done;
  }
  uint64_t nbytes = out->elsize;
  out->numel = 1;
  for (int d = 0; d < out->ndim; d++) {
    const unsigned char *p = head + 4 + 4 * d;
    out->shape[d] = (int64_t)be32(p);
    if (__builtin_mul_overflow(nbytes, (uint64_t)out->shape[d], &nbytes) ||
        nbytes > (uint64_t)1 << 40) {
      rc = core_error(KILN_ERR_FORMAT, "'%s': sizes too large", path);
      goto done;
    }
    out->numel *= out->shape[d];
  }
  if (nbytes > max_data_bytes) {
    rc = core_error(KILN_ERR_FORMAT,
                    "'%s': %llu bytes of data, more than the limit of %zu "
                    "(kiln_data_set_max_bytes; kiln train --max-data-mb)",
                    path, (unsigned long long)nbytes, max_data_bytes);
    goto done;
  }
  /* The buffer grows with the data actually read (doubling from 1 MiB),
   * so a short file whose header claims terabytes fails as truncated
   * instead of allocating them (found by fuzz/fuzz_idx.c). */
  size_t cap = nbytes < ((uint64_t)1 << 20) ? (size_t)nbytes : (size_t)1 << 20;
  out->data = core_alloc(cap ? cap : 1);
  if (!out->data) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  k = 0;
  for (;;) {
    int64_t got = gz_read_all(f, out->data + k, cap - (size_t)k, &zerr);
    if (got < 0) {
      rc = core_error(KILN_ERR_FORMAT, "'%s': corrupt gzip data: %s", path, zerr);
      goto done;
    }
    k += got;
    if ((size_t)k < cap || (uint64_t)k == nbytes) break; /* the end, or all of it */
    size_t grow = (uint64_t)cap * 2 < nbytes ? cap * 2 : (size_t)nbytes;
    unsigned char *d = core_realloc(out->data, grow);
    if (!d) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
    out->data = d;
    cap = grow;
  }
  if ((uint64_t)k < nbytes) {
    char s[96];
    rc = core_error(KILN_ERR_FORMAT,
                    "'%s': truncated: shape %s needs %llu data bytes, the file has %lld", path,
                    core_shape_str(out->ndim, out->shape, s, sizeof s),
                    (unsigned long long)nbytes, (long long)k);
    goto done;
  }
  unsigned char extra;
  k = gz_read_all(f, &extra, 1, &zerr);
  if (k < 0) {
    rc = core_error(KILN_ERR_FORMAT, "'%s': corrupt gzip data: %s", path, zerr);
    goto done;
  }
  if (k > 0) {
    char s[96];
    rc = core_error(KILN_ERR_FORMAT, "'%s': more data than shape %s holds (%llu bytes)", path,
                    core_shape_str(out->ndim, out->shape, s, sizeof s),
                    (unsigned long long)nbytes);
    goto done;
  }
done:;
  int zrc = gzclose(f);
  if (rc == 0 && zrc != Z_OK)
    rc = core_error(KILN_ERR_FORMAT, "'%s': corrupt gzip data (%s)",
                    path, zrc == Z_BUF_ERROR ? "truncated" : "close failed");
  if (rc < 0) {
    core_free(out->data);
    out->data = NULL;
  }
  return rc;
}

static double idx_get(const idx_file *f, int64_t i) {
  const unsigned char *p = f->data + (size_t)i * f->elsize;
  switch (f->type) {
  case 0x08: return p[0];
  case 0x09: return (int8_t)p[0];
  case 0x0B: return (int16_t)(uint16_t)(p[0] << 8 | p[1]);
  case 0x0C: return (int32_t)be32(p);
  case 0x0D: {
    uint32_t u = be32(p);
    float v;
    memcpy(&v, &u, 4);
    return v;
  }
  default: {
    uint64_t u = 0;
    for (int b = 0; b < 8; b++) u = u << 8 | p[b];
    double v;
    memcpy(&v, &u, 8);
    return v;
  }
  }
}

kiln_tensor *kiln_data_idx_load(const char *path, kiln_dtype dt) {
  if (!path || dt < 0 || dt >= KILN_DTYPE_COUNT) {
    core_error(KILN_ERR_INVALID, "data_idx_load: NULL path or bad dtype");
    return NULL;
  }
  idx_file f;
  if (idx_read(path, &f) < 0) return NULL;
  kiln_tensor *t = core_tensor_new(f.ndim, f.shape, dt);
  if (t) {
    void *d = core_data(t);
    for (int64_t i = 0; i < f.numel; i++) {
      double v = idx_get(&f, i);
      switch (dt) {
      case KILN_DTYPE_F32: ((float *)d)[i] = (float)v; break;
      case KILN_DTYPE_F64: ((double *)d)[i] = v; break;
      case KILN_DTYPE_I64: ((int64_t *)d)[i] = (int64_t)v; break;
      case KILN_DTYPE_BOOL: ((bool *)d)[i] = v != 0; break;
      default: core_store_double((char *)d + i * (int64_t)kiln_dtype_size(dt), dt, v); break;
      }
    }
    t = core_autorelease(t);
  }
  core_free(f.data);
  return t;
}

/* ---- data sets ---------------------------------------------------------- */

struct kiln_data {
  int64_t n, h, w;
  unsigned char *images;   /* n * h * w */
  unsigned char *labels;   /* n */
  double mean, std;
  float lut[256];          /* pixel byte -> normalised value */
};

const char *kiln_data_default_dir(void) { return "/usr/share/datasets/fashion-mnist"; }

void kiln_data_free(kiln_data *d) {
  if (!d) return;
  core_free(d->images);
  core_free(d->labels);
  core_free(d);
}

int64_t kiln_data_size(const kiln_data *d) { return d ? d->n : 0; }

kiln_status kiln_data_set_normalization(kiln_data *d, double mean, double std) {
  if (!d || !(std > 0) || !isfinite(mean))
    return core_error(KILN_ERR_INVALID, "data_set_normalization: std %g must be > 0", std);
  d->mean = mean;
  d->std = std;
  for (int i = 0; i < 256; i++) d->lut[i] = (float)((i / 255.0 - mean) / std);
  return KILN_OK;
}

kiln_status kiln_data_truncate(kiln_data *d, int64_t n) {
  if (!d || n < 0 || n > d->n)
    return core_error(KILN_ERR_INVALID, "data_truncate: %lld samples requested, %lld available",
                      (long long)n, d ? (long long)d->n : 0LL);
  d->n = n;
  return KILN_OK;
}

/* dir/name.gz, else dir/name; an IDX file of type u8. */
static int read_named(const char *dir, const char *name, idx_file *f, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s.gz", dir, name);
  /* probed by name only: opening a FIFO would block (idx_read refuses one) */
  if (access(path, F_OK) != 0) {
    char plain[4096];
    snprintf(plain, sizeof plain, "%s/%s", dir, name);
    if (access(plain, F_OK) != 0)
      return core_error(KILN_ERR_IO, "'%s': cannot open: %s (nor '%s')", path, strerror(errno),
                        plain);
    snprintf(path, cap, "%s", plain);
  }
  int rc = idx_read(path, f);
  if (rc < 0) return rc;
  if (f->type != 0x08) {
    core_free(f->data);
    f->data = NULL;
    return core_error(KILN_ERR_FORMAT, "'%s': IDX data type 0x%02x, expected 0x08 (unsigned byte)",
                      path, f->type);
  }
  return 0;
}

kiln_data *kiln_data_mnist_load(const char *dir, bool train) {
  if (!dir) dir = kiln_data_default_dir();
  const char *split = train ? "train" : "t10k";
  char name[64], ipath[4096], lpath[4096];
  idx_file im = {0}, lb = {0};
  kiln_data *d = NULL;
  snprintf(name, sizeof name, "%s-images-idx3-ubyte", split);
  if (read_named(dir, name, &im, ipath, sizeof ipath) < 0) goto fail;
  if (im.ndim != 3) {
    core_error(KILN_ERR_FORMAT, "'%s': %d dims, expected 3 (images, rows, columns)", ipath,
               im.ndim);
    goto fail;
  }
  snprintf(name, sizeof name, "%s-labels-idx1-ubyte", split);
  if (read_named(dir, name, &lb, lpath, sizeof lpath) < 0) goto fail;
  if (lb.ndim != 1) {
    core_error(KILN_ERR_FORMAT, "'%s': %d dims, expected 1 (labels)", lpath, lb.ndim);
    goto fail;
  }
  if (lb.shape[0] != im.shape[0]) {
    core_error(KILN_ERR_FORMAT, "'%s' holds %lld labels but '%s' holds %lld images", lpath,
               (long long)lb.shape[0], ipath, (long long)im.shape[0]);
    goto fail;
  }
  for (int64_t i = 0; i < lb.numel; i++)
    if (lb.data[i] > 9) {
      core_error(KILN_ERR_FORMAT, "'%s': label %d at index %lld (labels must be 0..9)", lpath,
                 lb.data[i], (long long)i);
      goto fail;
    }
  d = core_calloc(1, sizeof *d);
  if (!d) goto fail;
  d->n = im.shape[0];
  d->h = im.shape[1];
  d->w = im.shape[2];
  d->images = im.data;
  d->labels = lb.data;
  kiln_data_set_normalization(d, 0.2860, 0.3530);
  return d;
fail:
  core_free(im.data);
  core_free(lb.data);
  return NULL;
}

kiln_status kiln_data_get(const kiln_data *d, const int64_t *idx, int64_t n, kiln_tensor **x,
                          kiln_tensor **y) {
  if (!d || !x || !y || (n > 0 && !idx) || n < 0)
    return core_error(KILN_ERR_INVALID, "data_get: NULL argument or negative count");
  *x = *y = NULL;
  for (int64_t i = 0; i < n; i++)
    if (idx[i] < 0 || idx[i] >= d->n)
      return core_error(KILN_ERR_INVALID, "data_get: index %lld out of range [0, %lld)",
                        (long long)idx[i], (long long)d->n);
  int64_t px = d->h * d->w;
  kiln_tensor *xt = core_tensor_new(4, (int64_t[]){n, 1, d->h, d->w}, KILN_DTYPE_F32);
  kiln_tensor *yt = core_tensor_new(1, &n, KILN_DTYPE_I64);
  if (!xt || !yt) {
    kiln_release(xt);
    kiln_release(yt);
    return KILN_ERR_NOMEM;
  }
  float *xs = core_data(xt);
  int64_t *ys = core_data(yt);
  for (int64_t i = 0; i < n; i++) {
    const unsigned char *src = d->images + idx[i] * px;
    float *dst = xs + i * px;
    for (int64_t k = 0; k < px; k++) dst[k] = d->lut[src[k]];
    ys[i] = d->labels[idx[i]];
  }
  *x = core_autorelease(xt);
  *y = core_autorelease(yt);
  return KILN_OK;
}

/* ---- loaders ------------------------------------------------------------ */

struct kiln_data_loader {
  const kiln_data *d;
  int64_t batch, n_batches;
  int64_t *order;
};

kiln_data_loader *kiln_data_loader_new(const kiln_data *d, int64_t batch, bool drop_last) {
  if (!d || batch < 1) {
    core_error(KILN_ERR_INVALID, "data_loader_new: NULL data set or batch %lld < 1",
               (long long)batch);
    return NULL;
  }
  kiln_data_loader *l = core_calloc(1, sizeof *l);
  if (!l) return NULL;
  l->order = core_alloc((size_t)(d->n ? d->n : 1) * sizeof *l->order);
  if (!l->order) {
    core_free(l);
    return NULL;
  }
  for (int64_t i = 0; i < d->n; i++) l->order[i] = i;
  l->d = d;
  l->batch = batch;
  l->n_batches = drop_last ? d->n / batch : (d->n + batch - 1) / batch;
  return l;
}

void kiln_data_loader_free(kiln_data_loader *l) {
  if (!l) return;
  core_free(l->order);
  core_free(l);
}

int64_t kiln_data_loader_n_batches(const kiln_data_loader *l) { return l ? l->n_batches : 0; }

void kiln_data_loader_shuffle(kiln_data_loader *l, kiln_generator *gen) {
  if (!l) return;
  if (!gen) gen = kiln_default_generator();
  int64_t n = l->d->n;
  for (int64_t i = 0; i < n; i++) l->order[i] = i;
  /* Fisher-Yates from the end; the bound's modulo bias is below 2^-40 for
   * any data set that fits in memory. */
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(core_rand_u64(gen) % (uint64_t)(i + 1));
    int64_t t = l->order[i];
    l->order[i] = l->order[j];
    l->order[j] = t;
  }
}

kiln_status kiln_data_loader_batch(const kiln_data_loader *l, int64_t i, kiln_tensor **x,
                                   kiln_tensor **y) {
  if (!l || i < 0 || i >= l->n_batches)
    return core_error(KILN_ERR_INVALID, "data_loader_batch: batch %lld out of range [0, %lld)",
                      (long long)i, l ? (long long)l->n_batches : 0LL);
  int64_t start = i * l->batch, n = l->d->n - start;
  if (n > l->batch) n = l->batch;
  return kiln_data_get(l->d, l->order + start, n, x, y);
}

int64_t nn_data_loader_batch_rows(const kiln_data_loader *l, int64_t i) {
  if (!l || i < 0 || i >= l->n_batches) return 0;
  int64_t n = l->d->n - i * l->batch;
  return n > l->batch ? l->batch : n;
}

int nn_data_loader_rows(const kiln_data_loader *l, int64_t i, int64_t lo, int64_t n,
                        kiln_tensor **x, kiln_tensor **y) {
  int64_t rows = nn_data_loader_batch_rows(l, i);
  if (rows == 0 || lo < 0 || n < 0 || lo > rows - n)
    return core_error(KILN_ERR_INVALID,
                      "data_loader_rows: rows [%lld, +%lld) of batch %lld (of %lld rows) out "
                      "of range",
                      (long long)lo, (long long)n, (long long)i, (long long)rows);
  return kiln_data_get(l->d, l->order + i * l->batch + lo, n, x, y);
}
