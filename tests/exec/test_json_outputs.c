/* tests/exec/test_json_outputs.c: the JSON kiln hands out (written with
 * jansson) parses, and says what the C API says: executor stats (counters,
 * the optimized graph's text with its newlines and quotes, guard-failure
 * reasons) and the lazy metrics (counters, timers, recompile reasons). */
#include <jansson.h>
#include <string.h>

#include "kiln.h"
#include "test.h"

static const char *IR = "graph(%x : Tensor, %w : Tensor):\n"
                        "  %y : Tensor = aten::mul(%x, %w)\n"
                        "  %z : Tensor = aten::tanh(%y)\n"
                        "  return (%z)\n";

TEST(json_function_stats_round_trip) {
  kiln_scope_begin();
  kiln_graph *g = kiln_graph_parse(IR, strlen(IR));
  kiln_function *f = kiln_function_new(g);
  int64_t shape[1] = {4};
  kiln_tensor *x = kiln_ones(1, shape, KILN_DTYPE_F32), *w = kiln_ones(1, shape, KILN_DTYPE_F32);
  kiln_value in[2] = {{.kind = KILN_VALUE_TENSOR, .t = x}, {.kind = KILN_VALUE_TENSOR, .t = w}};
  kiln_value out[1];
  for (int r = 0; r < 3; r++) CHECK_EQ_INT(kiln_function_call(f, in, 2, out, 1), 1);
  kiln_set_requires_grad(w, true); /* requires grad now: the plan changes */
  CHECK_EQ_INT(kiln_function_call(f, in, 2, out, 1), 1);
  char *text = kiln_function_stats_json(f);
  json_error_t err;
  json_t *j = text ? json_loads(text, 0, &err) : NULL;
  CHECK_MSG(j != NULL, "stats JSON does not parse: %s", text ? err.text : "NULL");
  kiln_function_stats st;
  kiln_function_get_stats(f, &st);
  CHECK_EQ_INT(json_integer_value(json_object_get(j, "profiling_runs")), st.profiling_runs);
  CHECK_EQ_INT(json_integer_value(json_object_get(j, "optimizations")), st.optimizations);
  CHECK_EQ_INT(json_integer_value(json_object_get(j, "guard_failures")), st.guard_failures);
  json_t *reasons = json_object_get(j, "guard_failure_reasons");
  CHECK_EQ_INT(json_array_size(reasons), kiln_function_n_guard_failure_reasons(f));
  if (json_array_size(reasons) > 0)
    CHECK(strcmp(json_string_value(json_array_get(reasons, 0)),
                 kiln_function_guard_failure_reason(f, 0)) == 0);
  char *graph = kiln_function_last_optimized_graph(f);
  const char *jg = json_string_value(json_object_get(j, "optimized_graph"));
  CHECK(graph && jg && strcmp(graph, jg) == 0 && strchr(jg, '\n'));
  json_decref(j);
  kiln_free(graph);
  kiln_free(text);
  kiln_function_free(f);
  kiln_graph_free(g);
  kiln_scope_end();
}

TEST(json_lazy_metrics_round_trip) {
  kiln_lazy_metrics_reset();
  kiln_scope_begin();
  int64_t shape[1] = {3};
  kiln_tensor *a = kiln_to_lazy(kiln_ones(1, shape, KILN_DTYPE_F32));
  kiln_tensor *b = kiln_mul_scalar(a, 2);
  CHECK(kiln_mark_step() == KILN_OK);
  (void)b;
  kiln_scope_end();
  char *text = kiln_lazy_metrics_json();
  json_error_t err;
  json_t *j = text ? json_loads(text, 0, &err) : NULL;
  CHECK_MSG(j != NULL, "lazy metrics JSON does not parse: %s", text ? err.text : "NULL");
  json_t *c = json_object_get(j, "counters");
  CHECK_EQ_INT(json_integer_value(json_object_get(c, "MarkStep")), kiln_lazy_counter("MarkStep"));
  CHECK_EQ_INT(json_integer_value(json_object_get(c, "UncachedCompile")),
               kiln_lazy_counter("UncachedCompile"));
  CHECK(kiln_lazy_counter("MarkStep") == 1);
  json_t *t = json_object_get(json_object_get(j, "timers_ns"), "CompileTime");
  CHECK_EQ_INT(json_integer_value(json_object_get(t, "total")), kiln_lazy_counter("CompileTime"));
  CHECK(json_is_array(json_object_get(j, "recompile_reasons")));
  json_decref(j);
  kiln_free(text);
}
