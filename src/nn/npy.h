/* src/nn/npy.h: the .npy format (NEP 1), internal view: parsing the
 * fixed prefix and the header dict, decoding the data into a tensor, and
 * formatting the header numpy writes. kiln_npy_load / _save / _load_buffer
 * (kiln.h) are built on these; checkpoints and data loaders may reuse them. */
#ifndef KILN_NN_NPY_H
#define KILN_NN_NPY_H

#include "core/core.h"

/* numpy's _MAX_HEADER_SIZE: longer headers are refused (numpy refuses them
 * too unless told the file is trusted). */
#define NN_NPY_MAX_HEADER 10000
/* Bytes of the prefix before the header text: magic (6), version (2) and
 * the header length (2 bytes in version 1.0, 4 in 2.0 and 3.0). */
#define NN_NPY_PREFIX_MAX 12

/* How elements are stored in the file. */
typedef enum nn_npy_code {
  NN_NPY_F4, NN_NPY_F8, NN_NPY_I8, NN_NPY_B1, NN_NPY_I4, NN_NPY_U1, NN_NPY_I2, NN_NPY_I1,
  NN_NPY_F2
} nn_npy_code;

typedef struct nn_npy_header {
  int major, minor;        /* format version: 1.0, 2.0 or 3.0 */
  size_t prefix_len;       /* 10 or 12 */
  size_t header_len;       /* bytes of header text after the prefix */
  size_t data_offset;      /* prefix_len + header_len */
  nn_npy_code code;        /* the file's element type ('descr') */
  size_t file_itemsize;    /* bytes per element in the file */
  kiln_dtype stored;       /* the file's dtype as a kiln dtype */
  kiln_dtype dtype;        /* the tensor's dtype: stored, or widened (integers to
                              int64, f2 to float32) for kiln_npy_load */
  bool fortran_order;
  int ndim;
  int64_t shape[KILN_MAX_DIMS];
  int64_t numel;
  size_t data_nbytes;      /* numel * file_itemsize (overflow-checked) */
} nn_npy_header;

/* Parses the prefix of a .npy file from its first n bytes (n may be
 * anything; pass up to NN_NPY_PREFIX_MAX): magic, version, header length.
 * Fills major, minor, prefix_len, header_len, data_offset. ctx starts
 * every error message (e.g. "npy_load: 'x.npy'"). Returns 0, or
 * KILN_ERR_FORMAT with the message set. */
int nn_npy_parse_prefix(const void *buf, size_t n, const char *ctx, nn_npy_header *h);

/* Parses the header text (h->header_len bytes at text, NOT NUL-terminated):
 * a Python dict literal with exactly the keys 'descr', 'fortran_order' and
 * 'shape'. Fills the remaining fields of h. Returns 0, or KILN_ERR_FORMAT /
 * KILN_ERR_UNSUPPORTED with a message naming what is wrong. */
int nn_npy_parse_header(const char *text, const char *ctx, nn_npy_header *h);

/* Decodes h->data_nbytes bytes of file data at src into out, a contiguous
 * tensor of h->dtype and h->shape: converts h->stored to it, normalises
 * bools to 0/1 and reorders Fortran-order data to C order. src needs no
 * alignment. */
void nn_npy_decode(const nn_npy_header *h, const void *src, kiln_tensor *out);

/* Writes the prefix and header numpy 1.24 writes for t (version 1.0,
 * padded with spaces and a '\n' to a multiple of 64 bytes) into buf.
 * Returns its length, or 0 if cap is too small (512 bytes always do). */
size_t nn_npy_format_header(const kiln_tensor *t, char *buf, size_t cap);

#endif
