/* src/nn/safetensors.c: the safetensors format: a validating reader that
 * applies every rule of the reference implementation (huggingface/
 * safetensors, tensor.rs) with its own message, and a crash-safe writer.
 * The JSON header is parsed by jansson with JSON_REJECT_DUPLICATES (it
 * keeps 64-bit integers exact and tells integers from reals). */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nn.h"

#define ST_MAX_HEADER 100000000u

typedef struct st_entry {
  char *name;
  int dtype_code;            /* index into st_dtypes */
  int ndim;
  int64_t shape[KILN_MAX_DIMS];
  uint64_t begin, end;
  kiln_tensor *t;            /* owned */
} st_entry;

struct kiln_safetensors {
  int n;
  st_entry *e;               /* sorted by offset */
  int n_meta;
  char **meta_keys, **meta_values;  /* sorted by key */
  unsigned char *buf;        /* the whole file */
  size_t data_off, data_len; /* the data section */
};

/* Every dtype the format defines, with its width in bits; kiln reads the
 * ones with a kiln dtype: as stored (kiln_safetensors_load_stored), or
 * with F16 and BF16 widened to float32, I32 to int64 (Note [Widened
 * dtypes]). */
static const struct {
  const char *name;
  int bits;
  int kiln;                  /* kiln_dtype when widening, or -1 */
  int stored;                /* kiln_dtype as stored, or -1 */
} st_dtypes[] = {
    {"BOOL", 8, KILN_DTYPE_BOOL, KILN_DTYPE_BOOL}, {"F4", 4, -1, -1},
    {"F6_E2M3", 6, -1, -1}, {"F6_E3M2", 6, -1, -1},
    {"U8", 8, KILN_DTYPE_U8, KILN_DTYPE_U8}, {"I8", 8, KILN_DTYPE_I8, KILN_DTYPE_I8},
    {"F8_E5M2", 8, -1, -1}, {"F8_E4M3", 8, -1, -1}, {"F8_E8M0", 8, -1, -1},
    {"F8_E4M3FNUZ", 8, -1, -1}, {"F8_E5M2FNUZ", 8, -1, -1},
    {"I16", 16, KILN_DTYPE_I16, KILN_DTYPE_I16}, {"U16", 16, -1, -1},
    {"F16", 16, KILN_DTYPE_F32, KILN_DTYPE_F16}, {"BF16", 16, KILN_DTYPE_F32, KILN_DTYPE_BF16},
    {"I32", 32, KILN_DTYPE_I64, KILN_DTYPE_I32}, {"U32", 32, -1, -1},
    {"F32", 32, KILN_DTYPE_F32, KILN_DTYPE_F32}, {"C64", 64, -1, -1},
    {"F64", 64, KILN_DTYPE_F64, KILN_DTYPE_F64}, {"I64", 64, KILN_DTYPE_I64, KILN_DTYPE_I64},
    {"U64", 64, -1, -1},
};
enum { N_ST_DTYPES = sizeof st_dtypes / sizeof st_dtypes[0] };

/* Note [Widened dtypes]: PyTorch saves half-precision weights (F16, BF16)
 * and int32 counters; kiln's model import computes in float32 and int64,
 * so kiln_safetensors_load converts them exactly (every F16/BF16 value is
 * a float32, every int32 an int64). kiln_safetensors_load_stored keeps
 * every dtype as the file has it. Files kiln writes hold the tensors'
 * own dtypes. */
static int widen(void *dst, kiln_dtype dd, const unsigned char *src, kiln_dtype sd, size_t nb) {
  void *tmp = core_alloc(nb ? nb : 1); /* src may be unaligned */
  if (!tmp) return KILN_ERR_NOMEM;
  memcpy(tmp, src, nb);
  core_convert_run(dst, dd, tmp, sd, 1, (int64_t)(nb / kiln_dtype_size(sd)));
  core_free(tmp);
  return 0;
}

static const char *st_name_of(kiln_dtype dt) {
  for (int i = 0; i < N_ST_DTYPES; i++)
    if (st_dtypes[i].stored == (int)dt) return st_dtypes[i].name;
  return "BOOL";
}

void kiln_safetensors_free(kiln_safetensors *st) {
  if (!st) return;
  for (int i = 0; i < st->n; i++) {
    core_free(st->e[i].name);
    kiln_release(st->e[i].t);
  }
  for (int i = 0; i < st->n_meta; i++) {
    core_free(st->meta_keys[i]);
    core_free(st->meta_values[i]);
  }
  core_free(st->e);
  core_free(st->meta_keys);
  core_free(st->meta_values);
  core_free(st->buf);
  core_free(st);
}

static bool utf8_valid(const unsigned char *s, size_t n, size_t *bad) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || i + (size_t)len > n) goto fail;
    for (int k = 1; k < len; k++)
      if ((s[i + k] & 0xC0) != 0x80) goto fail;
    if (len == 2 && c < 0xC2) goto fail;                       /* overlong */
    if (len == 3 && c == 0xE0 && s[i + 1] < 0xA0) goto fail;
    if (len == 3 && c == 0xED && s[i + 1] >= 0xA0) goto fail;  /* surrogates */
    if (len == 4 && ((c == 0xF0 && s[i + 1] < 0x90) || c > 0xF4 || (c == 0xF4 && s[i + 1] >= 0x90)))
      goto fail;
    i += (size_t)len;
  }
  return true;
fail:
  *bad = i;
  return false;
}

/* A non-negative JSON integer. */
static bool get_u64(const json_t *v, uint64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
  *out = (uint64_t)json_integer_value(v);
  return true;
}

/* metadata (key, value) pairs by key */
static int cmp_pair(const void *a, const void *b) {
  return strcmp(((char *const *)a)[0], ((char *const *)b)[0]);
}

static int cmp_entry(const void *a, const void *b) {
  const st_entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

#define FAIL(status, ...)                                   \
  do {                                                      \
    rc = core_error(status, "safetensors: '%s': " __VA_ARGS__); \
    goto fail;                                              \
  } while (0)

static int parse_metadata(kiln_safetensors *st, json_t *md, const char *name) {
  int rc = 0;
  if (!json_is_object(md)) FAIL(KILN_ERR_FORMAT, "__metadata__ is not an object", name);
  size_t n = json_object_size(md);
  st->meta_keys = core_calloc(n ? n : 1, sizeof *st->meta_keys);
  st->meta_values = core_calloc(n ? n : 1, sizeof *st->meta_values);
  if (!st->meta_keys || !st->meta_values) return KILN_ERR_NOMEM;
  const char *k;
  json_t *v;
  json_object_foreach(md, k, v) {
    if (!json_is_string(v))
      FAIL(KILN_ERR_FORMAT, "__metadata__ value of \"%s\" is not a string", name, k);
    char *key = core_strdup(k), *value = core_strdup(json_string_value(v));
    if (!key || !value) {
      core_free(key);
      core_free(value);
      return KILN_ERR_NOMEM;
    }
    st->meta_keys[st->n_meta] = key;
    st->meta_values[st->n_meta++] = value;
  }
  /* sort keys (values follow): O(n log n), an insertion sort took 23 s on
   * a 1.7 MB file of keys (issue #20) */
  if (st->n_meta > 1) {
    char *(*pairs)[2] = core_alloc((size_t)st->n_meta * sizeof *pairs);
    if (!pairs) return KILN_ERR_NOMEM;
    for (int i = 0; i < st->n_meta; i++) pairs[i][0] = st->meta_keys[i], pairs[i][1] = st->meta_values[i];
    qsort(pairs, (size_t)st->n_meta, sizeof *pairs, cmp_pair);
    for (int i = 0; i < st->n_meta; i++) st->meta_keys[i] = pairs[i][0], st->meta_values[i] = pairs[i][1];
    core_free(pairs);
  }
  return 0;
fail:
  return rc;
}

static int parse_entry(st_entry *e, const char *key, json_t *v, const char *name) {
  int rc = 0;
  if (!json_is_object(v)) FAIL(KILN_ERR_FORMAT, "\"%s\": not an object", name, key);
  json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"),
         *offs = json_object_get(v, "data_offsets");
  if (!dt || !shape || !offs || json_object_size(v) != 3)
    FAIL(KILN_ERR_FORMAT,
         "\"%s\": expected exactly the fields dtype, shape and data_offsets", name, key);
  if (!json_is_string(dt)) FAIL(KILN_ERR_FORMAT, "\"%s\": dtype is not a string", name, key);
  e->dtype_code = -1;
  for (int i = 0; i < N_ST_DTYPES; i++)
    if (strcmp(json_string_value(dt), st_dtypes[i].name) == 0) e->dtype_code = i;
  if (e->dtype_code < 0)
    FAIL(KILN_ERR_FORMAT, "\"%s\": unknown dtype \"%s\"", name, key, json_string_value(dt));
  if (!json_is_array(shape)) FAIL(KILN_ERR_FORMAT, "\"%s\": shape is not a list", name, key);
  if (json_array_size(shape) > KILN_MAX_DIMS)
    FAIL(KILN_ERR_UNSUPPORTED, "\"%s\": %zu dims (kiln holds at most %d)", name, key,
         json_array_size(shape), KILN_MAX_DIMS);
  e->ndim = (int)json_array_size(shape);
  uint64_t nbits = (uint64_t)st_dtypes[e->dtype_code].bits;
  for (int d = 0; d < e->ndim; d++) {
    uint64_t s;
    if (!get_u64(json_array_get(shape, (size_t)d), &s))
      FAIL(KILN_ERR_FORMAT, "\"%s\": shape[%d] is not a non-negative integer", name, key, d);
    e->shape[d] = (int64_t)s;
    if (__builtin_mul_overflow(nbits, s, &nbits))
      FAIL(KILN_ERR_FORMAT, "\"%s\": the size of shape overflows", name, key);
  }
  if (nbits % 8 != 0)
    FAIL(KILN_ERR_FORMAT, "\"%s\": %s data of this shape does not fill whole bytes", name, key,
         st_dtypes[e->dtype_code].name);
  if (!json_is_array(offs) || json_array_size(offs) != 2 ||
      !get_u64(json_array_get(offs, 0), &e->begin) || !get_u64(json_array_get(offs, 1), &e->end))
    FAIL(KILN_ERR_FORMAT, "\"%s\": data_offsets is not two non-negative integers", name, key);
  if (e->end < e->begin)
    FAIL(KILN_ERR_FORMAT, "\"%s\": data_offsets [%llu, %llu] end before they begin", name, key,
         (unsigned long long)e->begin, (unsigned long long)e->end);
  if (e->end - e->begin != nbits / 8) {
    char s[96];
    FAIL(KILN_ERR_FORMAT, "\"%s\": data_offsets [%llu, %llu] hold %llu bytes but %s%s needs %llu",
         name, key, (unsigned long long)e->begin, (unsigned long long)e->end,
         (unsigned long long)(e->end - e->begin), st_dtypes[e->dtype_code].name,
         core_shape_str(e->ndim, e->shape, s, sizeof s), (unsigned long long)(nbits / 8));
  }
  e->name = core_strdup(key);
  return e->name ? 0 : KILN_ERR_NOMEM;
fail:
  return rc;
}

/* Validates buf (n bytes; st takes ownership of it). */
static kiln_safetensors *st_parse(unsigned char *buf, size_t n, const char *name, bool stored) {
  int rc = 0;
  json_t *root = NULL;
  kiln_safetensors *st = core_calloc(1, sizeof *st);
  if (!st) {
    core_free(buf);
    return NULL;
  }
  st->buf = buf;
  if (n < 8) FAIL(KILN_ERR_FORMAT, "%zu bytes: too short for the 8-byte header size", name, n);
  uint64_t hn = 0;
  for (int i = 7; i >= 0; i--) hn = hn << 8 | buf[i];
  if (hn > ST_MAX_HEADER)
    FAIL(KILN_ERR_FORMAT, "header size %llu is over the limit of %u bytes", name,
         (unsigned long long)hn, ST_MAX_HEADER);
  if (hn > n - 8)
    FAIL(KILN_ERR_FORMAT, "header size %llu runs past the end of the file (%zu bytes)", name,
         (unsigned long long)hn, n);
  size_t bad;
  if (!utf8_valid(buf + 8, (size_t)hn, &bad))
    FAIL(KILN_ERR_FORMAT, "the header is not valid UTF-8 (at byte %zu)", name, 8 + bad);
  json_error_t jerr;
  root = json_loadb((const char *)buf + 8, (size_t)hn, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) FAIL(KILN_ERR_FORMAT, "the header is not valid JSON: %s", name, jerr.text);
  if (!json_is_object(root)) FAIL(KILN_ERR_FORMAT, "the header is not a JSON object", name);
  size_t count = json_object_size(root);
  st->e = core_calloc(count ? count : 1, sizeof *st->e);
  if (!st->e) goto oom;
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    if (strcmp(key, "__metadata__") == 0) {
      if ((rc = parse_metadata(st, v, name)) < 0) goto fail;
      continue;
    }
    if ((rc = parse_entry(&st->e[st->n], key, v, name)) < 0) {
      core_free(st->e[st->n].name);
      st->e[st->n].name = NULL;
      goto fail;
    }
    st->n++;
  }
  qsort(st->e, (size_t)st->n, sizeof *st->e, cmp_entry);
  uint64_t pos = 0;
  for (int i = 0; i < st->n; i++) {
    if (st->e[i].begin != pos && i == 0)
      FAIL(KILN_ERR_FORMAT, "\"%s\": data_offsets begin at %llu but the first tensor must begin "
           "at 0 (gap)", name, st->e[i].name, (unsigned long long)st->e[i].begin);
    if (st->e[i].begin != pos)
      FAIL(KILN_ERR_FORMAT, "\"%s\": data_offsets begin at %llu but \"%s\" ends at %llu (%s)",
           name, st->e[i].name, (unsigned long long)st->e[i].begin, st->e[i - 1].name,
           (unsigned long long)pos, st->e[i].begin < pos ? "overlap" : "gap");
    pos = st->e[i].end;
  }
  st->data_off = 8 + (size_t)hn;
  if (pos != n - st->data_off)
    FAIL(KILN_ERR_FORMAT, "the tensors hold %llu data bytes but the file has %zu after the header",
         name, (unsigned long long)pos, n - st->data_off);
  st->data_len = (size_t)pos;
  for (int i = 0; i < st->n; i++) {
    st_entry *e = &st->e[i];
    int kd = stored ? st_dtypes[e->dtype_code].stored : st_dtypes[e->dtype_code].kiln;
    if (kd < 0)
      FAIL(KILN_ERR_UNSUPPORTED,
           "\"%s\": dtype %s is not supported (BOOL, U8, I8, I16, I32, I64, F16, BF16, F32, "
           "F64 are)",
           name, e->name, st_dtypes[e->dtype_code].name);
    e->t = core_tensor_new(e->ndim, e->shape, (kiln_dtype)kd);
    if (!e->t) goto oom;
    size_t nb = (size_t)(e->end - e->begin);
    if (kd != st_dtypes[e->dtype_code].stored) {
      if (widen(core_data(e->t), (kiln_dtype)kd, buf + st->data_off + e->begin,
                (kiln_dtype)st_dtypes[e->dtype_code].stored, nb) < 0)
        goto oom;
      continue;
    }
    if (nb) memcpy(core_data(e->t), buf + st->data_off + e->begin, nb);
    if (kd == KILN_DTYPE_BOOL) {
      unsigned char *b = core_data(e->t);
      for (size_t k = 0; k < nb; k++) b[k] = b[k] != 0;
    }
  }
  json_decref(root);
  return st;
oom:
  rc = core_error(KILN_ERR_NOMEM, "safetensors: '%s': out of memory", name);
fail:
  json_decref(root);
  kiln_safetensors_free(st);
  return NULL;
}

static kiln_safetensors *load_buffer(const void *buf, size_t n, const char *name, bool stored) {
  if (!buf && n) {
    core_error(KILN_ERR_INVALID, "safetensors: NULL buffer");
    return NULL;
  }
  unsigned char *copy = core_alloc(n ? n : 1);
  if (!copy) return NULL;
  if (n) memcpy(copy, buf, n);
  return st_parse(copy, n, name ? name : "(buffer)", stored);
}

kiln_safetensors *kiln_safetensors_load_buffer(const void *buf, size_t n, const char *name) {
  return load_buffer(buf, n, name, false);
}

kiln_safetensors *kiln_safetensors_load_buffer_stored(const void *buf, size_t n,
                                                      const char *name) {
  return load_buffer(buf, n, name, true);
}

static kiln_safetensors *load_file(const char *path, bool stored) {
  if (!path) {
    core_error(KILN_ERR_INVALID, "safetensors: NULL path");
    return NULL;
  }
  FILE *f = core_fopen_regular(path, "safetensors");
  if (!f) return NULL;
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fclose(f);
    core_error(KILN_ERR_IO, "safetensors: '%s': not a regular file", path);
    return NULL;
  }
  size_t n = (size_t)sb.st_size;
  unsigned char *buf = core_alloc(n ? n : 1);
  if (!buf) {
    fclose(f);
    return NULL;
  }
  size_t got = n ? fread(buf, 1, n, f) : 0;
  bool err = ferror(f);
  fclose(f);
  if (err || got != n) {
    core_free(buf);
    core_error(KILN_ERR_IO, "safetensors: '%s': read error (%zu of %zu bytes)", path, got, n);
    return NULL;
  }
  return st_parse(buf, n, path, stored);
}

kiln_safetensors *kiln_safetensors_load(const char *path) { return load_file(path, false); }

kiln_safetensors *kiln_safetensors_load_stored(const char *path) { return load_file(path, true); }

int kiln_safetensors_n_tensors(const kiln_safetensors *st) { return st ? st->n : 0; }

const char *kiln_safetensors_name(const kiln_safetensors *st, int i) {
  return st && i >= 0 && i < st->n ? st->e[i].name : NULL;
}

kiln_tensor *kiln_safetensors_tensor(const kiln_safetensors *st, int i) {
  return st && i >= 0 && i < st->n ? st->e[i].t : NULL;
}

kiln_tensor *kiln_safetensors_find(const kiln_safetensors *st, const char *name) {
  for (int i = 0; st && name && i < st->n; i++)
    if (strcmp(st->e[i].name, name) == 0) return st->e[i].t;
  return NULL;
}

const char *kiln_safetensors_metadata(const kiln_safetensors *st, const char *key) {
  int lo = 0, hi = st && key ? st->n_meta : 0; /* keys are sorted: binary search */
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2, c = strcmp(st->meta_keys[mid], key);
    if (c == 0) return st->meta_values[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

const void *nn_st_data(const kiln_safetensors *st, size_t *n) {
  *n = st->data_len;
  return st->buf + st->data_off;
}

int nn_st_n_meta(const kiln_safetensors *st) { return st->n_meta; }
const char *nn_st_meta_key(const kiln_safetensors *st, int i) { return st->meta_keys[i]; }
const char *nn_st_meta_value(const kiln_safetensors *st, int i) { return st->meta_values[i]; }

/* ---- writing -------------------------------------------------------------- */

typedef struct st_save {
  const char *header;
  size_t header_len;         /* padded */
  int n;
  kiln_tensor *const *ts;    /* CPU, contiguous */
} st_save;

static int write_st(nn_writer *w, void *ud) {
  st_save *s = ud;
  unsigned char len[8];
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)s->header_len >> (8 * i));
  int rc = nn_write(w, len, 8);
  if (rc == 0) rc = nn_write(w, s->header, s->header_len);
  for (int i = 0; i < s->n && rc == 0; i++) {
    size_t nb = (size_t)kiln_tensor_numel(s->ts[i]) * kiln_dtype_size(s->ts[i]->dtype);
    if (nb) rc = nn_write(w, core_data(s->ts[i]), nb);
  }
  return rc;
}

kiln_status kiln_safetensors_save(const char *path, int n, const char *const *names,
                                  kiln_tensor *const *ts, int n_meta, const char *const *keys,
                                  const char *const *values) {
  if (!path || n < 0 || (n && (!names || !ts)) || n_meta < 0 || (n_meta && (!keys || !values)))
    return core_error(KILN_ERR_INVALID, "safetensors_save: NULL argument");
  int rc = 0;
  json_t *root = json_object(), *md = n_meta ? json_object() : NULL;
  char *text = NULL, *padded = NULL;
  kiln_tensor **cpu = core_calloc((size_t)(n ? n : 1), sizeof *cpu);
  kiln_scope_begin();
  if (!root || (n_meta && !md) || !cpu) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < n_meta; i++)
    if (!keys[i] || !values[i] || json_object_set_new(md, keys[i], json_string(values[i])) != 0) {
      rc = core_error(KILN_ERR_INVALID, "safetensors_save: '%s': bad metadata pair %d", path, i);
      goto done;
    }
  if (md && json_object_set(root, "__metadata__", md) != 0) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  uint64_t off = 0;
  for (int i = 0; i < n; i++) {
    if (!names[i] || !ts[i] || !*names[i] || strcmp(names[i], "__metadata__") == 0 ||
        json_object_get(root, names[i])) {
      rc = core_error(KILN_ERR_INVALID, "safetensors_save: '%s': tensor %d: %s name '%s'", path,
                      i, names[i] && json_object_get(root, names[i]) ? "duplicate" : "bad",
                      names[i] ? names[i] : "(null)");
      goto done;
    }
    kiln_tensor *c = kiln_to_cpu(ts[i]);
    if (c && !kiln_tensor_is_contiguous(c)) c = kiln_contiguous(c);
    if (!c || (kiln_tensor_numel(c) > 0 && !core_data(c))) {
      rc = core_error(KILN_ERR_STATE, "safetensors_save: '%s': '%s' has no data", path, names[i]);
      goto done;
    }
    cpu[i] = c;
    uint64_t nb = (uint64_t)kiln_tensor_numel(c) * kiln_dtype_size(c->dtype);
    json_t *shape = json_array(), *e = json_object();
    for (int d = 0; d < c->ndim; d++) json_array_append_new(shape, json_integer(c->shape[d]));
    json_t *offs = json_array();
    json_array_append_new(offs, json_integer((json_int_t)off));
    json_array_append_new(offs, json_integer((json_int_t)(off + nb)));
    json_object_set_new(e, "dtype", json_string(st_name_of(c->dtype)));
    json_object_set_new(e, "shape", shape);
    json_object_set_new(e, "data_offsets", offs);
    if (json_object_set_new(root, names[i], e) != 0) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
    off += nb;
  }
  text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
  if (!text) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  size_t tl = strlen(text), pl = (tl + 7) / 8 * 8;
  padded = core_alloc(pl);
  if (!padded) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  memcpy(padded, text, tl);
  memset(padded + tl, ' ', pl - tl);
  st_save s = {padded, pl, n, cpu};
  rc = nn_atomic_write(path, "safetensors_save", write_st, &s);
done:
  kiln_scope_end();
  core_free(cpu);
  core_free(padded);
  free(text);
  json_decref(md);
  json_decref(root);
  return rc;
}
