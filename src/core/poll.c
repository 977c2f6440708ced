/* src/core/poll.c: the thread's kernel poll function (Note [Kernel poll]
 * in core.h), which long kernels call between their blocks so that the
 * distributed layer's pending all-reduces move on. */
#include "core.h"

_Thread_local void (*core_poll_fn)(void *ud);
_Thread_local void *core_poll_ud;

void core_set_poll(void (*fn)(void *ud), void *ud) {
  core_poll_fn = fn;
  core_poll_ud = fn ? ud : NULL;
}
