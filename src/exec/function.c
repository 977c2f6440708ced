/* src/exec/function.c: the public function API: kiln_function, which runs
 * a graph (src/ir/api.c makes them) through its executor. */
#include <pthread.h>
#include <stdio.h>
#include <jansson.h>
#include <string.h>

#include "executor.h"
#include "fusion.h"


/* lock: Note [Threads] in include/kiln.h: calls of one function from
 * several threads serialize on it (the executor's profiles, plans and
 * fallbacks are the function's own state); backwards through its outputs
 * run outside it (the compiled code is reentrant: registers are per run). */
struct kiln_function {
  exec_function *ex;
  int n_inputs, n_outputs;
  pthread_mutex_t lock;
};

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
  exec_code *probe = exec_compile(g->g, &exec_fusion_compile_opts);
  if (!probe) return NULL;
  exec_code_free(probe);
  kiln_function *f = core_calloc(1, sizeof *f);
  if (!f) return NULL;
  f->ex = exec_function_new(g->g, o, o->bailout_depth, 0, NULL);
  if (!f->ex) {
    core_free(f);
    return NULL;
  }
  pthread_mutex_init(&f->lock, NULL);
  f->n_inputs = ir_block_n_params(ir_graph_top(g->g));
  f->n_outputs = ir_block_n_returns(ir_graph_top(g->g));
  return f;
}

kiln_function *kiln_function_new(const kiln_graph *g) { return kiln_function_new_ex(g, NULL); }

void kiln_function_free(kiln_function *f) {
  if (!f) return;
  exec_function_free(f->ex);
  pthread_mutex_destroy(&f->lock);
  core_free(f);
}

void kiln_function_get_stats(const kiln_function *f, kiln_function_stats *s) {
  pthread_mutex_t *lock = (pthread_mutex_t *)&f->lock;
  pthread_mutex_lock(lock);
  exec_function_stats(f->ex, s);
  pthread_mutex_unlock(lock);
}

int kiln_function_n_guard_failure_reasons(const kiln_function *f) { return f->ex->n_reasons; }

const char *kiln_function_guard_failure_reason(const kiln_function *f, int i) {
  return i >= 0 && i < f->ex->n_reasons ? f->ex->reasons[i] : NULL;
}

char *kiln_function_last_optimized_graph(const kiln_function *f) {
  pthread_mutex_t *lock = (pthread_mutex_t *)&f->lock;
  pthread_mutex_lock(lock);
  char *text = f->ex->ran_optimized ? exec_function_describe(f->ex) : NULL;
  pthread_mutex_unlock(lock);
  return text;
}

char *kiln_function_stats_json(const kiln_function *f) {
  kiln_function_stats st;
  kiln_function_get_stats(f, &st);
  char *g = kiln_function_last_optimized_graph(f);
  json_t *reasons = json_array();
  bool ok = reasons != NULL;
  for (int i = 0; i < f->ex->n_reasons && ok; i++)
    ok = json_array_append_new(reasons, json_string_nocheck(f->ex->reasons[i])) == 0;
  json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:i, s:o, s:o}", "profiling_runs",
                        (json_int_t)st.profiling_runs, "optimizations",
                        (json_int_t)st.optimizations, "guard_passes", (json_int_t)st.guard_passes,
                        "guard_failures", (json_int_t)st.guard_failures, "fallback_calls",
                        (json_int_t)st.fallback_calls, "bailout_depth_reached",
                        st.bailout_depth_reached, "guard_failure_reasons",
                        ok ? reasons : json_null(), "optimized_graph",
                        g ? json_string_nocheck(g) : json_null());
  core_free(g);
  char *text = core_json_take(j, ok && j, NULL);
  if (text) text[strlen(text) - 1] = 0; /* as before: no final newline */
  return text;
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
  pthread_mutex_lock(&f->lock);
  op_pack_scope_begin(); /* Note [Packed B cache] */
  rc = exec_function_run(f->ex, in, out);
  op_pack_scope_end();
  pthread_mutex_unlock(&f->lock);
  if (rc < 0) goto done;
  for (int i = 0; i < f->n_outputs && rc == 0; i++) rc = from_exec(&out[i], outputs, max_outputs, &n);
done:
  if (out)
    for (int i = 0; i < f->n_outputs; i++) exec_value_clear(&out[i]);
  if (in && in != small_in) core_free(in);
  if (out && out != small_out) core_free(out);
  return rc < 0 ? rc : n;
}
