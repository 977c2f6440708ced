/* src/core/scope.c: scopes (autorelease pools). A thread-local stack of
 * tensor lists; core_autorelease registers a new tensor with the innermost
 * scope, kiln_scope_end releases everything registered in it. */
#include "core.h"

typedef struct scope_frame {
  kiln_tensor **items;
  int n, cap;
} scope_frame;

static _Thread_local scope_frame *frames;
static _Thread_local int n_frames, cap_frames;

void kiln_scope_begin(void) {
  if (n_frames == cap_frames) {
    int cap = cap_frames ? cap_frames * 2 : 8;
    scope_frame *f = core_realloc(frames, (size_t)cap * sizeof *f);
    KILN_ASSERT(f && "out of memory growing the scope stack");
    frames = f;
    for (int i = cap_frames; i < cap; i++) frames[i] = (scope_frame){0};
    cap_frames = cap;
  }
  frames[n_frames++].n = 0;
}

void kiln_scope_end(void) {
  if (n_frames == 0) return;
  scope_frame *f = &frames[n_frames - 1];
  /* Release in reverse creation order: later tensors may hold earlier ones. */
  for (int i = f->n - 1; i >= 0; i--) kiln_release(f->items[i]);
  f->n = 0;
  n_frames--;
  if (n_frames == 0) {
    for (int i = 0; i < cap_frames; i++) core_free(frames[i].items);
    core_free(frames);
    frames = NULL;
    cap_frames = 0;
  }
}

kiln_tensor *core_autorelease(kiln_tensor *t) {
  if (!t || n_frames == 0) return t;
  scope_frame *f = &frames[n_frames - 1];
  if (f->n == f->cap) {
    int cap = f->cap ? f->cap * 2 : 64;
    kiln_tensor **items = core_realloc(f->items, (size_t)cap * sizeof *items);
    if (!items) {
      /* Cannot track it: the caller would leak; fail the op instead. */
      kiln_release(t);
      return NULL;
    }
    f->items = items;
    f->cap = cap;
  }
  f->items[f->n++] = t;
  return t;
}

kiln_tensor *kiln_keep(kiln_tensor *t) { return kiln_retain(t); }

int core_scope_depth(void) { return n_frames; }
