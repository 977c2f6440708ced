/* src/core/json.c: JSON text from jansson values, for the writers that
 * hand JSON to users (executor stats, lazy metrics, training metrics):
 * jansson does the escaping; these helpers turn its output into a kiln
 * string. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "core.h"

json_t *core_json_num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

char *core_json_take(json_t *j, bool ok, size_t *len) {
  char *text = ok && j ? json_dumps(j, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
  json_decref(j);
  if (!text) {
    core_error(KILN_ERR_NOMEM, "json: out of memory");
    return NULL;
  }
  size_t n = strlen(text);
  char *out = core_alloc(n + 2);
  if (out) {
    memcpy(out, text, n);
    out[n] = '\n';
    out[n + 1] = 0;
    if (len) *len = n + 1;
  } else {
    core_error(KILN_ERR_NOMEM, "json: out of memory");
  }
  free(text);
  return out;
}
