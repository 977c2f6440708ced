/* src/core/scope.c: scopes (autorelease pools). A thread-local stack of
 * tensor lists; core_autorelease registers a new tensor with the innermost
 * scope, kiln_scope_end releases everything registered in it.
 *
 * The stack of frames is a fixed array (nesting deeper than SCOPE_MAX is a
 * bug in the caller: those levels are counted and ignored, so begin/end
 * still pair up); each frame's list grows on demand, and when it cannot,
 * the op that made the tensor fails (core_autorelease returns NULL). */
#include "core.h"

#define SCOPE_MAX 256

typedef struct scope_frame {
  kiln_tensor **items;
  int n, cap;
} scope_frame;

static _Thread_local scope_frame frames[SCOPE_MAX];
static _Thread_local int n_frames, n_overflow;

void kiln_scope_begin(void) {
  if (n_frames == SCOPE_MAX) {
    n_overflow++;
    return;
  }
  frames[n_frames++].n = 0;
}

void kiln_scope_end(void) {
  if (n_overflow > 0) {
    n_overflow--;
    return;
  }
  if (n_frames == 0) return;
  scope_frame *f = &frames[n_frames - 1];
  /* Release in reverse creation order: later tensors may hold earlier ones. */
  for (int i = f->n - 1; i >= 0; i--) kiln_release(f->items[i]);
  f->n = 0;
  n_frames--;
  if (n_frames == 0)
    for (int i = 0; i < SCOPE_MAX && frames[i].cap; i++) {
      core_free(frames[i].items);
      frames[i] = (scope_frame){0};
    }
}

int core_scope_reserve(int n) {
  /* (scopes past SCOPE_MAX fold into the deepest frame, which still takes
   * their tensors: skipping the growth then overran its array) */
  if (n_frames == 0 || n <= 0) return 0;
  scope_frame *f = &frames[n_frames - 1];
  if (f->cap - f->n >= n) return 0;
  int cap = f->cap ? f->cap : 64;
  while (cap - f->n < n) {
    if (cap > (1 << 29))
      return core_error(KILN_ERR_NOMEM, "out of memory: a scope cannot hold %d more tensors", n);
    cap *= 2;
  }
  kiln_tensor **items = core_realloc(f->items, (size_t)cap * sizeof *items);
  if (!items) return KILN_ERR_NOMEM;
  f->items = items;
  f->cap = cap;
  return 0;
}

kiln_tensor *core_autorelease(kiln_tensor *t) {
  if (!t || n_frames == 0) return t;
  scope_frame *f = &frames[n_frames - 1];
  if (f->n == f->cap && core_scope_reserve(1) < 0) {
    /* Cannot track it: the caller would leak; fail the op instead. */
    kiln_release(t);
    return NULL;
  }
  f->items[f->n++] = t;
  return t;
}

kiln_tensor *kiln_keep(kiln_tensor *t) { return kiln_retain(t); }

int core_scope_depth(void) { return n_frames; }
