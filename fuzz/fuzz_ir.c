/* fuzz/fuzz_ir.c: libFuzzer target for the IR text parser. Any input must
 * either fail with a message or parse into a graph that prints, parses
 * back to the same text (the printer/parser round trip), and compiles into
 * a function. Run with `make fuzz` (FUZZ_OOM=1: fuzz_oom.h; then a
 * failed print, re-parse or function is only an error). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_oom.h"

static int fuzz_one(const uint8_t *data, size_t size) {
  kiln_graph *g = kiln_graph_parse((const char *)data, size);
  if (!g) {
    if (!kiln_last_error()[0]) abort(); /* a failure always says why */
    return -1;
  }
  char *text = kiln_graph_print(g);
  kiln_graph *again = text ? kiln_graph_parse(text, strlen(text)) : NULL;
  char *text2 = again ? kiln_graph_print(again) : NULL;
  if (fuzz_oom && !text2) {
    int rc = kiln_last_error()[0] ? -1 : 0;
    kiln_free(text);
    kiln_graph_free(again);
    kiln_graph_free(g);
    return rc ? rc : (abort(), 0);
  }
  if (!text) abort();
  if (!again) {
    fprintf(stderr, "printed graph does not parse: %s\n%s", kiln_last_error(), text);
    abort();
  }
  if (!text2 || strcmp(text, text2) != 0) {
    fprintf(stderr, "round trip changed the text:\n%s---\n%s", text, text2 ? text2 : "(null)");
    abort();
  }
  kiln_function *f = kiln_function_new(g);
  kiln_function_free(f);
  kiln_free(text2);
  kiln_free(text);
  kiln_graph_free(again);
  kiln_graph_free(g);
  return 0;
}
