/* src/exec/function.c: the public graph and function API: parse/print
 * graphs, and kiln_function, which runs a graph through its executor. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "interp.h"

struct kiln_graph {
  ir_graph *g;
};

struct kiln_function {
  ir_graph *g;
  exec_code *code;
};

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
  FILE *f = fopen(path, "rb");
  if (!f) {
    core_error(KILN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
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

kiln_function *kiln_function_new(const kiln_graph *g) {
  kiln_function *f = core_calloc(1, sizeof *f);
  if (!f) return NULL;
  f->g = ir_graph_clone(g->g);
  if (!f->g || ir_graph_verify(f->g) < 0) goto fail;
  f->code = exec_compile(f->g, NULL);
  if (!f->code) goto fail;
  return f;
fail:
  kiln_function_free(f);
  return NULL;
}

void kiln_function_free(kiln_function *f) {
  if (!f) return;
  exec_code_free(f->code);
  ir_graph_free(f->g);
  core_free(f);
}

static int to_exec(const kiln_value *v, exec_value *out) {
  switch (v->kind) {
  case KILN_VALUE_TENSOR:
    if (!v->t) return core_error(KILN_ERR_INVALID, "function call: a tensor input is NULL");
    *out = (exec_value){.tag = EXEC_V_TENSOR, .t = v->t};
    return 0;
  case KILN_VALUE_INT: *out = (exec_value){.tag = EXEC_V_INT, .i = v->i}; return 0;
  case KILN_VALUE_FLOAT: *out = (exec_value){.tag = EXEC_V_FLOAT, .f = v->f}; return 0;
  case KILN_VALUE_BOOL: *out = (exec_value){.tag = EXEC_V_BOOL, .b = v->b}; return 0;
  default: *out = EXEC_NONE; return 0;
  }
}

/* Flattens v into outputs[*n...]; tensors get new refs (autoreleased). */
static int from_exec(const exec_value *v, kiln_value *outputs, int max, int *n) {
  if (v->tag == EXEC_V_TUPLE || v->tag == EXEC_V_LIST) {
    for (int i = 0; i < v->list->n; i++) {
      int rc = from_exec(&v->list->items[i], outputs, max, n);
      if (rc < 0) return rc;
    }
    return 0;
  }
  if (*n >= max)
    return core_error(KILN_ERR_INVALID, "function call: more than %d outputs", max);
  kiln_value *o = &outputs[(*n)++];
  switch (v->tag) {
  case EXEC_V_TENSOR: *o = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = core_autorelease(kiln_retain(v->t))}; break;
  case EXEC_V_INT: *o = (kiln_value){.kind = KILN_VALUE_INT, .i = v->i}; break;
  case EXEC_V_FLOAT: *o = (kiln_value){.kind = KILN_VALUE_FLOAT, .f = v->f}; break;
  case EXEC_V_BOOL: *o = (kiln_value){.kind = KILN_VALUE_BOOL, .b = v->b}; break;
  case EXEC_V_NONE: *o = (kiln_value){.kind = KILN_VALUE_NONE}; break;
  default:
    return core_error(KILN_ERR_UNSUPPORTED, "function call: a %s output cannot be returned",
                      exec_tag_name(v->tag));
  }
  return 0;
}

int kiln_function_call(kiln_function *f, const kiln_value *inputs, int n_inputs,
                       kiln_value *outputs, int max_outputs) {
  exec_value small_in[16], small_out[16], *in = small_in, *out = small_out;
  int rc = 0, n = 0;
  if (!f) return core_error(KILN_ERR_INVALID, "function call: NULL function");
  if (n_inputs != f->code->n_inputs)
    return core_error(KILN_ERR_INVALID, "function call: the graph takes %d inputs, got %d",
                      f->code->n_inputs, n_inputs);
  if (n_inputs > 16) in = core_calloc((size_t)n_inputs, sizeof *in);
  if (f->code->n_outputs > 16) out = core_calloc((size_t)f->code->n_outputs, sizeof *out);
  if (!in || !out) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  memset(out, 0, (size_t)f->code->n_outputs * sizeof *out);
  for (int i = 0; i < n_inputs && rc == 0; i++) rc = to_exec(&inputs[i], &in[i]);
  if (rc < 0) goto done;
  rc = exec_code_run(f->code, in, out);
  if (rc < 0) goto done;
  for (int i = 0; i < f->code->n_outputs && rc == 0; i++) rc = from_exec(&out[i], outputs, max_outputs, &n);
done:
  if (out)
    for (int i = 0; i < f->code->n_outputs; i++) exec_value_clear(&out[i]);
  if (in != small_in) core_free(in);
  if (out != small_out) core_free(out);
  return rc < 0 ? rc : n;
}
