/* src/nn/npy.c: reading and writing .npy files (NEP 1, as numpy 1.24's
 * lib/format.py): a strict tokenizer and parser for the header dict, data
 * decoding (int32/uint8 widened to int64, Fortran order reordered to C
 * order), and crash-safe writing (temp file, fsync, rename). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn.h"
#include "npy.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c assumes a little-endian host ('<' data is copied as is)"
#endif

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* Sets "ctx: <message>" and returns status. */
__attribute__((format(printf, 3, 4))) static int npy_error(int status, const char *ctx,
                                                          const char *fmt, ...) {
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return core_error(status, "%s: %s", ctx, msg);
}

/* ---- prefix ---------------------------------------------------------------- */

int nn_npy_parse_prefix(const void *buf, size_t n, const char *ctx, nn_npy_header *h) {
  const unsigned char *p = buf;
  memset(h, 0, sizeof *h);
  if (n == 0)
    return npy_error(KILN_ERR_FORMAT, ctx, "not a .npy file: it is empty");
  if (n < sizeof npy_magic || memcmp(p, npy_magic, sizeof npy_magic) != 0) {
    char got[40] = "";
    size_t k = 0;
    for (size_t i = 0; i < n && i < 6; i++)
      k += (size_t)snprintf(got + k, sizeof got - k, "%s%02x", i ? " " : "", p[i]);
    if (n < sizeof npy_magic && memcmp(p, npy_magic, n) == 0)
      return npy_error(KILN_ERR_FORMAT, ctx,
                       "not a .npy file: only %zu bytes, too short for the magic "
                       "string \\x93NUMPY",
                       n);
    return npy_error(KILN_ERR_FORMAT, ctx,
                     "not a .npy file: bad magic (expected \\x93NUMPY = 93 4e 55 4d 50 "
                     "59, got %s)",
                     got);
  }
  if (n < 8)
    return npy_error(KILN_ERR_FORMAT, ctx,
                     "truncated: the file ends after the magic string, before the "
                     "format version");
  h->major = p[6];
  h->minor = p[7];
  if (h->minor != 0 || h->major < 1 || h->major > 3)
    return npy_error(KILN_ERR_FORMAT, ctx,
                     "unsupported .npy format version %d.%d (kiln reads 1.0, 2.0 and "
                     "3.0)",
                     h->major, h->minor);
  h->prefix_len = h->major == 1 ? 10 : 12;
  if (n < h->prefix_len)
    return npy_error(KILN_ERR_FORMAT, ctx,
                     "truncated: the file ends inside the header length field (%zu of "
                     "%zu prefix bytes present)",
                     n, h->prefix_len);
  if (h->major == 1)
    h->header_len = (size_t)p[8] | (size_t)p[9] << 8;
  else
    h->header_len = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 |
                    (size_t)p[11] << 24;
  if (h->header_len > NN_NPY_MAX_HEADER)
    return npy_error(KILN_ERR_FORMAT, ctx,
                     "header is %zu bytes, longer than the %d numpy allows (a corrupt "
                     "or hostile file)",
                     h->header_len, NN_NPY_MAX_HEADER);
  h->data_offset = h->prefix_len + h->header_len;
  return 0;
}

/* ---- header tokenizer -------------------------------------------------------- */

typedef enum { TK_END, TK_PUNCT, TK_STR, TK_INT, TK_NAME } tk_kind;

typedef struct tk {
  tk_kind kind;
  char c;             /* TK_PUNCT */
  const char *s;      /* TK_STR: contents; TK_NAME: the word */
  size_t len;
  int64_t i;          /* TK_INT */
  size_t at;          /* byte offset in the header text */
} tk;

typedef struct lexer {
  const char *s;
  size_t n, pos;
  int major;
  const char *ctx;
} lexer;

static bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident(char c) {
  return c == '_' || is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* A printable description of a token for messages. */
static const char *tk_desc(const tk *t, char *buf, size_t n) {
  switch (t->kind) {
  case TK_END: snprintf(buf, n, "the end of the header"); break;
  case TK_PUNCT: snprintf(buf, n, "'%c'", t->c); break;
  case TK_INT: snprintf(buf, n, "%lld", (long long)t->i); break;
  case TK_STR:
    snprintf(buf, n, "'%.*s'%s", (int)(t->len > 40 ? 40 : t->len), t->s,
             t->len > 40 ? "..." : "");
    break;
  case TK_NAME:
    snprintf(buf, n, "%.*s%s", (int)(t->len > 40 ? 40 : t->len), t->s,
             t->len > 40 ? "..." : "");
    break;
  }
  return buf;
}

/* Reads the next token; < 0 with the message set on a lexical error. */
static int lex(lexer *L, tk *t) {
  while (L->pos < L->n && is_space(L->s[L->pos])) L->pos++;
  memset(t, 0, sizeof *t);
  t->at = L->pos;
  if (L->pos == L->n) {
    t->kind = TK_END;
    return 0;
  }
  char c = L->s[L->pos];
  if (c && strchr("{}()[]:,", c)) {
    t->kind = TK_PUNCT;
    t->c = c;
    L->pos++;
    return 0;
  }
  if (c == '\'' || c == '"') {
    size_t start = ++L->pos;
    while (L->pos < L->n && L->s[L->pos] != c) {
      char d = L->s[L->pos];
      if (d == '\\')
        return npy_error(KILN_ERR_FORMAT, L->ctx,
                         "header: escape sequences in strings are not supported (byte "
                         "%zu)",
                         L->pos);
      if (d == '\n' || d == '\0') break;
      L->pos++;
    }
    if (L->pos == L->n || L->s[L->pos] != c)
      return npy_error(KILN_ERR_FORMAT, L->ctx,
                       "header: unterminated string starting at byte %zu", t->at);
    t->kind = TK_STR;
    t->s = L->s + start;
    t->len = L->pos - start;
    L->pos++;
    return 0;
  }
  if (is_digit(c) || (c == '-' && L->pos + 1 < L->n && is_digit(L->s[L->pos + 1]))) {
    bool neg = c == '-';
    uint64_t v = 0;
    size_t start;
    if (neg) L->pos++;
    start = L->pos;
    while (L->pos < L->n && is_digit(L->s[L->pos])) {
      uint64_t d = (uint64_t)(L->s[L->pos] - '0');
      if (v > (UINT64_MAX - d) / 10 || v * 10 + d > (uint64_t)INT64_MAX)
        return npy_error(KILN_ERR_FORMAT, L->ctx,
                         "header: integer at byte %zu does not fit in 64 bits", t->at);
      v = v * 10 + d;
      L->pos++;
    }
    if (L->pos - start > 1 && L->s[start] == '0' && v != 0)
      return npy_error(KILN_ERR_FORMAT, L->ctx,
                       "header: integer with a leading zero at byte %zu (not a Python "
                       "literal)",
                       t->at);
    /* Python 2 longs ("3L"); numpy filters them out of 1.0/2.0 headers. */
    if (L->major < 3 && L->pos < L->n && (L->s[L->pos] == 'L' || L->s[L->pos] == 'l'))
      L->pos++;
    if (L->pos < L->n && is_ident(L->s[L->pos]))
      return npy_error(KILN_ERR_FORMAT, L->ctx,
                       "header: malformed number at byte %zu", t->at);
    t->kind = TK_INT;
    t->i = neg ? -(int64_t)v : (int64_t)v;
    return 0;
  }
  if (is_ident(c)) {
    size_t start = L->pos;
    while (L->pos < L->n && is_ident(L->s[L->pos])) L->pos++;
    t->kind = TK_NAME;
    t->s = L->s + start;
    t->len = L->pos - start;
    return 0;
  }
  unsigned char u = (unsigned char)c;
  if (u >= 0x20 && u < 0x7f)
    return npy_error(KILN_ERR_FORMAT, L->ctx, "header: unexpected character '%c' at byte %zu",
                     c, L->pos);
  return npy_error(KILN_ERR_FORMAT, L->ctx, "header: unexpected byte 0x%02x at byte %zu", u,
                   L->pos);
}

static bool tk_is(const tk *t, char c) { return t->kind == TK_PUNCT && t->c == c; }
static bool tk_word(const tk *t, const char *w) {
  return (t->kind == TK_NAME || t->kind == TK_STR) && t->len == strlen(w) &&
         memcmp(t->s, w, t->len) == 0;
}

/* ---- header parser ------------------------------------------------------------ */

#define NPY_KEYS "exactly the keys 'descr', 'fortran_order' and 'shape'"

static const struct {
  const char *descr;
  nn_npy_code code;
  size_t itemsize;
  kiln_dtype dtype;  /* widened (kiln_npy_load) */
  kiln_dtype stored; /* as stored (kiln_npy_load_stored) */
} npy_types[] = {
    {"<f4", NN_NPY_F4, 4, KILN_DTYPE_F32, KILN_DTYPE_F32},
    {"<f8", NN_NPY_F8, 8, KILN_DTYPE_F64, KILN_DTYPE_F64},
    {"<i8", NN_NPY_I8, 8, KILN_DTYPE_I64, KILN_DTYPE_I64},
    {"|b1", NN_NPY_B1, 1, KILN_DTYPE_BOOL, KILN_DTYPE_BOOL},
    {"<i4", NN_NPY_I4, 4, KILN_DTYPE_I64, KILN_DTYPE_I32},
    {"|u1", NN_NPY_U1, 1, KILN_DTYPE_I64, KILN_DTYPE_U8},
    {"<i2", NN_NPY_I2, 2, KILN_DTYPE_I64, KILN_DTYPE_I16},
    {"|i1", NN_NPY_I1, 1, KILN_DTYPE_I64, KILN_DTYPE_I8},
    {"<f2", NN_NPY_F2, 2, KILN_DTYPE_F32, KILN_DTYPE_F16},
};

static int parse_descr(lexer *L, nn_npy_header *h) {
  tk t;
  char d[64];
  if (lex(L, &t) < 0) return -1;
  if (tk_is(&t, '['))
    return npy_error(KILN_ERR_UNSUPPORTED, L->ctx,
                     "header: structured dtypes (a list 'descr') are not supported");
  if (t.kind != TK_STR)
    return npy_error(KILN_ERR_FORMAT, L->ctx,
                     "header: 'descr' must be a dtype string such as '<f4', got %s at "
                     "byte %zu",
                     tk_desc(&t, d, sizeof d), t.at);
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
    if (tk_word(&t, npy_types[i].descr)) {
      h->code = npy_types[i].code;
      h->file_itemsize = npy_types[i].itemsize;
      h->dtype = npy_types[i].dtype;
      h->stored = npy_types[i].stored;
      return 0;
    }
  const char *why = "";
  if (t.len && t.s[0] == '>') why = " (big-endian data is not supported)";
  if (t.len && memchr(t.s, 'O', t.len)) why = " (object arrays are never loaded)";
  return npy_error(KILN_ERR_UNSUPPORTED, L->ctx,
                   "header: unsupported dtype %s%s; kiln reads '<f4', '<f8', '<i8', "
                   "'|b1', '<i4', '<i2', '|i1', '|u1' and '<f2'",
                   tk_desc(&t, d, sizeof d), why);
}

static int parse_fortran(lexer *L, nn_npy_header *h) {
  tk t;
  char d[64];
  if (lex(L, &t) < 0) return -1;
  if (t.kind == TK_NAME && tk_word(&t, "True")) h->fortran_order = true;
  else if (t.kind == TK_NAME && tk_word(&t, "False")) h->fortran_order = false;
  else
    return npy_error(KILN_ERR_FORMAT, L->ctx,
                     "header: 'fortran_order' must be True or False, got %s at byte %zu",
                     tk_desc(&t, d, sizeof d), t.at);
  return 0;
}

static int parse_shape(lexer *L, nn_npy_header *h) {
  tk t;
  char d[64];
  bool last_comma = false;
  if (lex(L, &t) < 0) return -1;
  if (!tk_is(&t, '('))
    return npy_error(KILN_ERR_FORMAT, L->ctx,
                     "header: 'shape' must be a tuple of ints such as (3, 4), got %s at "
                     "byte %zu",
                     tk_desc(&t, d, sizeof d), t.at);
  h->ndim = 0;
  if (lex(L, &t) < 0) return -1;
  while (!tk_is(&t, ')')) {
    if (t.kind != TK_INT)
      return npy_error(KILN_ERR_FORMAT, L->ctx,
                       "header: 'shape' must be a tuple of ints, got %s at byte %zu",
                       tk_desc(&t, d, sizeof d), t.at);
    if (t.i < 0)
      return npy_error(KILN_ERR_FORMAT, L->ctx,
                       "header: negative dimension %lld in 'shape' at byte %zu",
                       (long long)t.i, t.at);
    if (h->ndim == KILN_MAX_DIMS)
      return npy_error(KILN_ERR_UNSUPPORTED, L->ctx,
                       "header: 'shape' has more than %d dims (kiln's limit)",
                       KILN_MAX_DIMS);
    h->shape[h->ndim++] = t.i;
    if (lex(L, &t) < 0) return -1;
    last_comma = tk_is(&t, ',');
    if (last_comma) {
      if (lex(L, &t) < 0) return -1;
    } else if (!tk_is(&t, ')')) {
      return npy_error(KILN_ERR_FORMAT, L->ctx,
                       "header: expected ',' or ')' in 'shape', got %s at byte %zu",
                       tk_desc(&t, d, sizeof d), t.at);
    }
  }
  if (h->ndim == 1 && !last_comma)
    return npy_error(KILN_ERR_FORMAT, L->ctx,
                     "header: 'shape' is (%lld), an int, not a tuple; a 1-d shape is "
                     "written (%lld,)",
                     (long long)h->shape[0], (long long)h->shape[0]);
  return 0;
}

int nn_npy_parse_header(const char *text, const char *ctx, nn_npy_header *h) {
  lexer L = {text, h->header_len, 0, h->major, ctx};
  static const char *const keys[3] = {"descr", "fortran_order", "shape"};
  bool seen[3] = {false, false, false};
  char d[64];
  tk t;
  if (lex(&L, &t) < 0) return -1;
  if (!tk_is(&t, '{'))
    return npy_error(KILN_ERR_FORMAT, ctx,
                     "header: expected a dict starting with '{', got %s at byte %zu",
                     tk_desc(&t, d, sizeof d), t.at);
  for (;;) {
    if (lex(&L, &t) < 0) return -1;
    if (tk_is(&t, '}')) break;
    if (t.kind != TK_STR)
      return npy_error(KILN_ERR_FORMAT, ctx,
                       "header: expected a key string or '}', got %s at byte %zu",
                       tk_desc(&t, d, sizeof d), t.at);
    int k = -1;
    for (int i = 0; i < 3; i++)
      if (tk_word(&t, keys[i])) k = i;
    if (k < 0)
      return npy_error(KILN_ERR_FORMAT, ctx, "header: unknown key %s (a .npy header has "
                       NPY_KEYS ")", tk_desc(&t, d, sizeof d));
    if (seen[k])
      return npy_error(KILN_ERR_FORMAT, ctx, "header: duplicate key '%s'", keys[k]);
    seen[k] = true;
    if (lex(&L, &t) < 0) return -1;
    if (!tk_is(&t, ':'))
      return npy_error(KILN_ERR_FORMAT, ctx,
                       "header: expected ':' after key '%s', got %s at byte %zu", keys[k],
                       tk_desc(&t, d, sizeof d), t.at);
    int rc = k == 0 ? parse_descr(&L, h) : k == 1 ? parse_fortran(&L, h) : parse_shape(&L, h);
    if (rc < 0) return rc;
    if (lex(&L, &t) < 0) return -1;
    if (tk_is(&t, '}')) break;
    if (!tk_is(&t, ','))
      return npy_error(KILN_ERR_FORMAT, ctx,
                       "header: expected ',' or '}' after the value of '%s', got %s at "
                       "byte %zu",
                       keys[k], tk_desc(&t, d, sizeof d), t.at);
  }
  if (lex(&L, &t) < 0) return -1;
  if (t.kind != TK_END)
    return npy_error(KILN_ERR_FORMAT, ctx,
                     "header: unexpected %s after the closing '}' at byte %zu",
                     tk_desc(&t, d, sizeof d), t.at);
  for (int i = 0; i < 3; i++)
    if (!seen[i])
      return npy_error(KILN_ERR_FORMAT, ctx,
                       "header: missing key '%s' (a .npy header has " NPY_KEYS ")", keys[i]);
  /* Sizes, overflow-checked: elements, bytes in the file, bytes in memory. */
  int64_t numel = 1, nbytes, mem;
  for (int i = 0; i < h->ndim; i++)
    if (__builtin_mul_overflow(numel, h->shape[i], &numel)) goto too_big;
  if (__builtin_mul_overflow(numel, (int64_t)h->file_itemsize, &nbytes) ||
      __builtin_mul_overflow(numel, (int64_t)kiln_dtype_size(h->dtype), &mem) ||
      (uint64_t)mem > (uint64_t)SIZE_MAX / 2)
    goto too_big;
  h->numel = numel;
  h->data_nbytes = (size_t)nbytes;
  return 0;
too_big: {
  char sh[200];
  return npy_error(KILN_ERR_FORMAT, ctx, "header: shape %s has too many elements",
                   core_shape_str(h->ndim, h->shape, sh, sizeof sh));
}
}

/* ---- data ---------------------------------------------------------------------- */

/* Stores file element src (of h->stored, unaligned) into dst (of h->dtype). */
static inline void convert_one(void *dst, const unsigned char *src, const nn_npy_header *h) {
  if (h->code == NN_NPY_B1) {
    *(bool *)dst = *src != 0;
  } else if (h->stored == h->dtype) {
    memcpy(dst, src, h->file_itemsize);
  } else {
    uint64_t e = 0;
    memcpy(&e, src, h->file_itemsize);
    core_convert_run(dst, h->dtype, &e, h->stored, 1, 1);
  }
}

void nn_npy_decode(const nn_npy_header *h, const void *src, kiln_tensor *out) {
  const unsigned char *s = src;
  unsigned char *d = core_data(out);
  size_t es = kiln_dtype_size(h->dtype), fs = h->file_itemsize;
  int64_t n = h->numel;
  if (n == 0) return;
  if (!h->fortran_order) {
    if (es == fs && h->code != NN_NPY_B1) {
      memcpy(d, s, h->data_nbytes);
      return;
    }
    for (int64_t i = 0; i < n; i++) convert_one(d + i * (int64_t)es, s + i * (int64_t)fs, h);
    return;
  }
  /* Fortran order: element (i0, ..., ik) is at sum(i_d * fstride_d) with
   * fstride_0 = 1. Walk the C-order index and track that offset. */
  int nd = h->ndim;
  int64_t fstr[KILN_MAX_DIMS], idx[KILN_MAX_DIMS] = {0}, off = 0, acc = 1;
  for (int i = 0; i < nd; i++) {
    fstr[i] = acc;
    acc *= h->shape[i];
  }
  for (int64_t i = 0; i < n; i++) {
    convert_one(d + i * (int64_t)es, s + off * (int64_t)fs, h);
    for (int k = nd - 1; k >= 0; k--) {
      off += fstr[k];
      if (++idx[k] < h->shape[k]) break;
      off -= idx[k] * fstr[k];
      idx[k] = 0;
    }
  }
}

static int data_size_error(const char *ctx, const nn_npy_header *h, size_t actual) {
  char sh[200];
  return npy_error(KILN_ERR_FORMAT, ctx,
                   "%s: the data is %zu bytes, expected %zu (%lld elements of '%s', "
                   "shape %s)",
                   actual < h->data_nbytes ? "truncated" : "trailing bytes", actual,
                   h->data_nbytes, (long long)h->numel, npy_types[h->code].descr,
                   core_shape_str(h->ndim, h->shape, sh, sizeof sh));
}

static int header_truncated(const char *ctx, const nn_npy_header *h, size_t total) {
  return npy_error(KILN_ERR_FORMAT, ctx,
                   "truncated header: it is %zu bytes but the file ends after %zu of them",
                   h->header_len, total - h->prefix_len);
}

static kiln_tensor *load_buffer(const void *buf, size_t n, const char *name, bool stored) {
  char ctx[300];
  nn_npy_header h;
  snprintf(ctx, sizeof ctx, "npy_load_buffer: '%s'", name ? name : "<buffer>");
  if (!buf && n) {
    core_error(KILN_ERR_INVALID, "%s: buffer is NULL", ctx);
    return NULL;
  }
  if (nn_npy_parse_prefix(buf, n, ctx, &h) < 0) return NULL;
  if (n < h.data_offset) {
    header_truncated(ctx, &h, n);
    return NULL;
  }
  if (nn_npy_parse_header((const char *)buf + h.prefix_len, ctx, &h) < 0) return NULL;
  if (stored) h.dtype = h.stored;
  if (n - h.data_offset != h.data_nbytes) {
    data_size_error(ctx, &h, n - h.data_offset);
    return NULL;
  }
  kiln_tensor *t = core_tensor_new(h.ndim, h.shape, h.dtype);
  if (!t) return NULL;
  nn_npy_decode(&h, (const char *)buf + h.data_offset, t);
  return core_autorelease(t);
}

/* Reads exactly n bytes; < 0 with the message set otherwise. */
static int read_exact(FILE *f, void *buf, size_t n, const char *ctx) {
  if (n && fread(buf, 1, n, f) != n)
    return npy_error(KILN_ERR_IO, ctx, "read failed: %s",
                     ferror(f) ? strerror(errno) : "the file shrank while being read");
  return 0;
}

kiln_tensor *kiln_npy_load_buffer(const void *buf, size_t n, const char *name) {
  return load_buffer(buf, n, name, false);
}

kiln_tensor *kiln_npy_load_buffer_stored(const void *buf, size_t n, const char *name) {
  return load_buffer(buf, n, name, true);
}

static kiln_tensor *load_file(const char *path, bool stored) {
  char ctx[300];
  unsigned char pre[NN_NPY_PREFIX_MAX];
  char *text = NULL;
  void *raw = NULL;
  kiln_tensor *t = NULL;
  nn_npy_header h;
  struct stat st;
  FILE *f = NULL;
  if (!path) {
    core_error(KILN_ERR_INVALID, "npy_load: path is NULL");
    return NULL;
  }
  snprintf(ctx, sizeof ctx, "npy_load: '%s'", path);
  f = core_fopen_regular(path, "npy_load");
  if (!f) return NULL;
  if (fstat(fileno(f), &st) != 0) {
    npy_error(KILN_ERR_IO, ctx, "cannot stat: %s", strerror(errno));
    goto fail;
  }
  if (!S_ISREG(st.st_mode)) {
    npy_error(KILN_ERR_IO, ctx, "%s", S_ISDIR(st.st_mode) ? "is a directory"
                                                          : "not a regular file");
    goto fail;
  }
  size_t size = (size_t)st.st_size;
  size_t got = fread(pre, 1, sizeof pre < size ? sizeof pre : size, f);
  if (ferror(f)) {
    npy_error(KILN_ERR_IO, ctx, "read failed: %s", strerror(errno));
    goto fail;
  }
  if (nn_npy_parse_prefix(pre, got, ctx, &h) < 0) goto fail;
  if (size < h.data_offset) {
    header_truncated(ctx, &h, size);
    goto fail;
  }
  text = core_alloc(h.header_len);
  if (!text || fseek(f, (long)h.prefix_len, SEEK_SET) != 0 ||
      read_exact(f, text, h.header_len, ctx) < 0)
    goto fail;
  if (nn_npy_parse_header(text, ctx, &h) < 0) goto fail;
  if (stored) h.dtype = h.stored;
  if (size - h.data_offset != h.data_nbytes) {
    data_size_error(ctx, &h, size - h.data_offset);
    goto fail;
  }
  t = core_tensor_new(h.ndim, h.shape, h.dtype);
  if (!t) goto fail;
  if (!h.fortran_order && h.file_itemsize == kiln_dtype_size(h.dtype) &&
      h.code != NN_NPY_B1) {
    /* The common case reads straight into the tensor: no second copy. */
    if (read_exact(f, core_data(t), h.data_nbytes, ctx) < 0) goto fail;
  } else {
    raw = core_alloc(h.data_nbytes);
    if (!raw || read_exact(f, raw, h.data_nbytes, ctx) < 0) goto fail;
    nn_npy_decode(&h, raw, t);
  }
  core_free(raw);
  core_free(text);
  fclose(f);
  return core_autorelease(t);
fail:
  kiln_release(t);
  core_free(raw);
  core_free(text);
  if (f) fclose(f);
  return NULL;
}

kiln_tensor *kiln_npy_load(const char *path) { return load_file(path, false); }

kiln_tensor *kiln_npy_load_stored(const char *path) { return load_file(path, true); }

/* ---- writing --------------------------------------------------------------------- */

size_t nn_npy_format_header(const kiln_tensor *t, char *buf, size_t cap) {
  static const char *const descr[KILN_DTYPE_COUNT] = {"<f4", "<f8", "<i8", "|b1", "<i4",
                                                      "<i2", "|i1", "|u1", "<f2", NULL};
  if (!descr[t->dtype]) return 0; /* bfloat16: numpy has none */
  char dict[400];
  size_t k = (size_t)snprintf(dict, sizeof dict,
                              "{'descr': '%s', 'fortran_order': False, 'shape': (",
                              descr[t->dtype]);
  for (int i = 0; i < t->ndim; i++)
    k += (size_t)snprintf(dict + k, sizeof dict - k, "%s%lld", i ? ", " : "",
                          (long long)t->shape[i]);
  k += (size_t)snprintf(dict + k, sizeof dict - k, "%s), }", t->ndim == 1 ? "," : "");
  /* numpy >= 1.24 leaves room to grow the first dim in place: 21 digits. */
  if (t->ndim > 0) {
    int digits = snprintf(NULL, 0, "%lld", (long long)t->shape[0]);
    for (int i = digits; i < 21; i++) dict[k++] = ' ';
  }
  /* Then spaces and a '\n' up to a multiple of 64 (at least one space). */
  size_t pad = 64 - (10 + k + 1) % 64, total = 10 + k + pad + 1;
  if (total > cap) return 0;
  size_t hl = k + pad + 1;
  memcpy(buf, npy_magic, 6);
  buf[6] = 1;
  buf[7] = 0;
  buf[8] = (char)(hl & 0xff);
  buf[9] = (char)(hl >> 8);
  memcpy(buf + 10, dict, k);
  memset(buf + 10 + k, ' ', pad);
  buf[total - 1] = '\n';
  return total;
}

/* Writes the header and t's elements in C order through w. */
static int write_npy(nn_writer *w, void *ud) {
  const kiln_tensor *t = ud;
  char hdr[512];
  size_t hn = nn_npy_format_header(t, hdr, sizeof hdr), es = kiln_dtype_size(t->dtype);
  KILN_ASSERT(hn > 0);
  int rc = nn_write(w, hdr, hn);
  int64_t n = kiln_tensor_numel(t);
  if (rc < 0 || n == 0) return rc;
  if (core_is_contiguous(t)) return nn_write(w, core_data(t), (size_t)n * es);
  /* Strided (transposed, sliced, expanded): gather into a chunk. */
  enum { CHUNK = 1 << 16 };
  char *chunk = core_alloc(CHUNK);
  if (!chunk) return KILN_ERR_NOMEM;
  const char *base = core_data(t);
  int64_t idx[KILN_MAX_DIMS] = {0}, off = 0;
  size_t used = 0;
  for (int64_t i = 0; i < n && rc == 0; i++) {
    memcpy(chunk + used, base + off * (int64_t)es, es);
    used += es;
    if (used + es > CHUNK) {
      rc = nn_write(w, chunk, used);
      used = 0;
    }
    for (int d = t->ndim - 1; d >= 0; d--) {
      off += t->strides[d];
      if (++idx[d] < t->shape[d]) break;
      off -= idx[d] * t->strides[d];
      idx[d] = 0;
    }
  }
  if (rc == 0 && used) rc = nn_write(w, chunk, used);
  core_free(chunk);
  return rc;
}

/* Note [Atomic save] (fileio.c): the file at path is either the old one or
 * the whole new one. */
static int save_cpu(const char *path, const kiln_tensor *t) {
  return nn_atomic_write(path, "npy_save", write_npy, (void *)t);
}

kiln_status kiln_npy_save(const char *path, const kiln_tensor *t) {
  char desc[200];
  if (!path || !t)
    return core_error(KILN_ERR_INVALID, "npy_save: %s is NULL", !path ? "path" : "tensor");
  if ((unsigned)t->dtype >= KILN_DTYPE_COUNT)
    return core_error(KILN_ERR_INVALID, "npy_save: '%s': invalid dtype %d", path,
                      (int)t->dtype);
  if (t->dtype == KILN_DTYPE_BF16)
    return core_error(KILN_ERR_UNSUPPORTED,
                      "npy_save: '%s': numpy has no bfloat16 dtype (convert to Float first)",
                      path);
  if (t->device == CORE_DEVICE_LAZY && core_lazy_materialize_hook) {
    /* A lazy tensor: run what it needs, save its CPU value. */
    kiln_tensor *c = core_lazy_materialize_hook(t);
    if (!c) {
      core_error_prefix("npy_save: '%s': ", path);
      return KILN_ERR_STATE;
    }
    int rc = save_cpu(path, c);
    kiln_release(c);
    return rc;
  }
  if (kiln_tensor_numel(t) > 0 && !core_data(t))
    return core_error(KILN_ERR_STATE,
                      "npy_save: '%s': tensor %s has no data (a symbolic tensor)", path,
                      core_tensor_desc(t, desc, sizeof desc));
  return save_cpu(path, t);
}

