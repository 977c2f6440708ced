/* src/exec/function.c: the public graph and function API: parse/print
 * graphs, and kiln_function, which runs a graph through its executor. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "executor.h"

struct kiln_graph {
  ir_graph *g;
};

struct kiln_function {
  exec_function *ex;
  int n_inputs, n_outputs;
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
  FILE *f = core_fopen_regular(path, "graph_load");
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

kiln_function *kiln_function_new_ex(const kiln_graph *g, const kiln_function_options *o) {
  kiln_function_options d;
  if (!g) {
    core_error(KILN_ERR_INVALID, "function_new: graph is NULL");
    return NULL;
  }
  if (!o) {
    kiln_function_options_default(&d);
    o = &d;
  }
  if (o->profiling_runs < 0 || o->bailout_depth < 0 || o->min_subgraph_size < 1) {
    core_error(KILN_ERR_INVALID,
               "function_new: profiling_runs and bailout_depth must be >= 0 and "
               "min_subgraph_size >= 1");
    return NULL;
  }
  if (ir_graph_verify(g->g) < 0) return NULL;
  /* check up front that the plain graph can run (unknown kinds fail here,
   * not on the Nth call) */
  exec_code *probe = exec_compile(g->g, NULL);
  if (!probe) return NULL;
  exec_code_free(probe);
  kiln_function *f = core_calloc(1, sizeof *f);
  if (!f) return NULL;
  f->ex = exec_function_new(g->g, o, o->bailout_depth, 0, NULL);
  if (!f->ex) {
    core_free(f);
    return NULL;
  }
  f->n_inputs = ir_block_n_params(ir_graph_top(g->g));
  f->n_outputs = ir_block_n_returns(ir_graph_top(g->g));
  return f;
}

kiln_function *kiln_function_new(const kiln_graph *g) { return kiln_function_new_ex(g, NULL); }

void kiln_function_free(kiln_function *f) {
  if (!f) return;
  exec_function_free(f->ex);
  core_free(f);
}

void kiln_function_get_stats(const kiln_function *f, kiln_function_stats *s) {
  exec_function_stats(f->ex, s);
}

int kiln_function_n_guard_failure_reasons(const kiln_function *f) { return f->ex->n_reasons; }

const char *kiln_function_guard_failure_reason(const kiln_function *f, int i) {
  return i >= 0 && i < f->ex->n_reasons ? f->ex->reasons[i] : NULL;
}

char *kiln_function_last_optimized_graph(const kiln_function *f) {
  return f->ex->ran_optimized ? exec_function_describe(f->ex) : NULL;
}

static size_t json_escape(char *dst, size_t cap, const char *s) {
  size_t k = 0;
  if (k < cap) dst[k++] = '"';
  for (; s && *s && k + 8 < cap; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') {
      dst[k++] = '\\';
      dst[k++] = (char)ch;
    } else if (ch == '\n') {
      dst[k++] = '\\';
      dst[k++] = 'n';
    } else if (ch < 0x20) {
      k += (size_t)snprintf(dst + k, cap - k, "\\u%04x", ch);
    } else {
      dst[k++] = (char)ch;
    }
  }
  if (k < cap) dst[k++] = '"';
  if (k < cap) dst[k] = 0;
  return k;
}

char *kiln_function_stats_json(const kiln_function *f) {
  kiln_function_stats st;
  exec_function_stats(f->ex, &st);
  char *g = kiln_function_last_optimized_graph(f);
  size_t cap = 1024 + (g ? strlen(g) * 2 : 0), k = 0;
  for (int i = 0; i < f->ex->n_reasons; i++) cap += strlen(f->ex->reasons[i]) * 2 + 8;
  char *s = core_alloc(cap);
  if (!s) {
    core_free(g);
    return NULL;
  }
  k += (size_t)snprintf(s + k, cap - k,
                        "{\"profiling_runs\": %lld, \"optimizations\": %lld, \"guard_passes\": "
                        "%lld, \"guard_failures\": %lld, \"fallback_calls\": %lld, "
                        "\"bailout_depth_reached\": %d, \"guard_failure_reasons\": [",
                        (long long)st.profiling_runs, (long long)st.optimizations,
                        (long long)st.guard_passes, (long long)st.guard_failures,
                        (long long)st.fallback_calls, st.bailout_depth_reached);
  for (int i = 0; i < f->ex->n_reasons && k < cap; i++) {
    if (i) k += (size_t)snprintf(s + k, cap - k, ", ");
    k += json_escape(s + k, cap - k, f->ex->reasons[i]);
  }
  k += (size_t)snprintf(s + k, cap - k, "], \"optimized_graph\": ");
  if (g) k += json_escape(s + k, cap - k, g);
  else k += (size_t)snprintf(s + k, cap - k, "null");
  if (k < cap) snprintf(s + k, cap - k, "}");
  core_free(g);
  return s;
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
  case EXEC_V_TENSOR:
    *o = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = core_autorelease(kiln_retain(v->t))};
    if (!o->t) return KILN_ERR_NOMEM; /* the scope could not hold it: released */
    break;
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
  if (n_inputs != f->n_inputs)
    return core_error(KILN_ERR_INVALID, "function call: the graph takes %d inputs, got %d",
                      f->n_inputs, n_inputs);
  if (n_inputs > 16) in = core_calloc((size_t)n_inputs, sizeof *in);
  if (f->n_outputs > 16) out = core_calloc((size_t)f->n_outputs, sizeof *out);
  if (!in || !out) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  memset(out, 0, (size_t)f->n_outputs * sizeof *out);
  for (int i = 0; i < n_inputs && rc == 0; i++) rc = to_exec(&inputs[i], &in[i]);
  if (rc < 0) goto done;
  rc = exec_function_run(f->ex, in, out);
  if (rc < 0) goto done;
  for (int i = 0; i < f->n_outputs && rc == 0; i++) rc = from_exec(&out[i], outputs, max_outputs, &n);
done:
  if (out)
    for (int i = 0; i < f->n_outputs; i++) exec_value_clear(&out[i]);
  if (in && in != small_in) core_free(in);
  if (out && out != small_out) core_free(out);
  return rc < 0 ? rc : n;
}
