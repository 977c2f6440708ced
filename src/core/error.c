/* src/core/error.c: the thread-local error message behind kiln_last_error,
 * and the log variables (Note [Log variables] in core.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

static _Thread_local char err_buf[1024];
static _Thread_local int err_status;

int core_verror(int status, const char *fmt, va_list ap) {
  vsnprintf(err_buf, sizeof err_buf, fmt, ap);
  err_status = status;
  return status;
}

int core_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  core_verror(status, fmt, ap);
  va_end(ap);
  return status;
}

void core_error_prefix(const char *fmt, ...) {
  char head[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(head, sizeof head, fmt, ap);
  va_end(ap);
  size_t h = strlen(head), o = strlen(err_buf);
  if (h + o + 1 > sizeof err_buf) o = sizeof err_buf - 1 - h;
  memmove(err_buf + h, err_buf, o);
  memcpy(err_buf, head, h);
  err_buf[h + o] = 0;
}

const char *kiln_last_error(void) { return err_buf; }
kiln_status kiln_last_status(void) { return err_buf[0] ? (kiln_status)err_status : KILN_OK; }
void kiln_clear_error(void) {
  err_buf[0] = 0;
  err_status = KILN_OK;
}

bool core_log_enabled(const char *var, const char *name) {
  const char *env = getenv(var);
  if (!env || !*env || !name) return false;
  size_t len = strlen(name);
  for (const char *p = env; *p;) {
    while (*p == ',' || *p == ' ') p++;
    const char *start = p;
    while (*p && *p != ',') p++;
    const char *end = p;
    while (end > start && end[-1] == ' ') end--;
    size_t n = (size_t)(end - start);
    if ((n == len && strncmp(start, name, n) == 0) || (n == 3 && strncmp(start, "all", 3) == 0))
      return true;
  }
  return false;
}
