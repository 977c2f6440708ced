/* src/core/strbuf.c: a growing text buffer (appends and printf-style
 * appends), for every writer of text: the IR printer, the autograd graph's
 * DOT, lazy IR text, plots and metrics, native kernels' source. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

/* Room for need more bytes and a NUL; false (oom set) if memory ran out. */
static bool grow(core_strbuf *b, size_t need) {
  if (b->n + need + 1 <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->n + need + 1) cap *= 2;
  char *q = core_realloc(b->p, cap);
  if (!q) {
    b->oom = true;
    return false;
  }
  b->p = q;
  b->cap = cap;
  return true;
}

void core_strbuf_printf(core_strbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) {
      b->oom = true;
      return;
    }
    if (b->p && b->n + (size_t)k < b->cap) {
      b->n += (size_t)k;
      return;
    }
    if (!grow(b, (size_t)k)) return;
  }
}

void core_strbuf_append(core_strbuf *b, const char *s, size_t len) {
  if (b->oom || !grow(b, len)) return;
  memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = 0;
}
