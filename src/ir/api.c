/* src/ir/api.c: the public graph text API: kiln_graph, an owned IR graph
 * parsed from TorchScript text or a file, printed back, and counted. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ir.h"

kiln_graph *kiln_graph_parse(const char *text, size_t len) {
  ir_graph *ig = ir_graph_parse(text, len);
  if (!ig) return NULL;
  kiln_graph *g = core_alloc(sizeof *g);
  if (!g) {
    ir_graph_free(ig);
    return NULL;
  }
  g->g = ig;
  return g;
}

kiln_graph *kiln_graph_load(const char *path) {
  FILE *f = core_fopen_regular(path, "graph_load"); /* a FIFO or directory is refused */
  if (!f) return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : 65536;
      char *b2 = core_realloc(buf, cap);
      if (!b2) {
        core_free(buf);
        fclose(f);
        return NULL;
      }
      buf = b2;
    }
    size_t k = fread(buf + n, 1, cap - n, f);
    n += k;
    if (k == 0) break;
  }
  bool bad = ferror(f);
  fclose(f);
  if (bad) {
    core_free(buf);
    core_error(KILN_ERR_IO, "%s: read error", path);
    return NULL;
  }
  kiln_graph *g = kiln_graph_parse(buf, n);
  core_free(buf);
  if (!g) core_error_prefix("%s:", path);
  return g;
}

void kiln_graph_free(kiln_graph *g) {
  if (!g) return;
  ir_graph_free(g->g);
  core_free(g);
}

char *kiln_graph_print(const kiln_graph *g) { return ir_graph_print(g->g, 0); }

int kiln_graph_n_inputs(const kiln_graph *g) { return ir_block_n_params(ir_graph_top(g->g)); }
int kiln_graph_n_outputs(const kiln_graph *g) { return ir_block_n_returns(ir_graph_top(g->g)); }
