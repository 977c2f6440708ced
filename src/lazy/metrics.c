/* src/lazy/metrics.c: lazy-tensor counters and timers with stable names,
 * the recompile-reason log, and their text and JSON reports.
 * (The first design put metrics in exec; they live here, one layer lower,
 * because recording already counts CreateLazyTensor and exec can reach
 * down to them but lazy cannot reach up.) */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lazy.h"

static const char *const metric_names[LAZY_M_COUNT] = {
    "MarkStep",          "UncachedCompile",  "CachedCompile",     "ExecuteGraph",
    "DeviceDataCacheMiss", "CreateLazyTensor", "DestroyLazyTensor", "SyncTensorsToData",
    "DonatedBuffers",    "CompileTime",       "ExecuteTime"};
/* Per thread, as the lazy device is (Note [Threads] in include/kiln.h). */
static _Thread_local int64_t metric_vals[LAZY_M_COUNT];
static _Thread_local int64_t metric_samples[LAZY_M_COUNT];

#define MAX_REASONS 256
static _Thread_local char *reasons[MAX_REASONS];
static _Thread_local int n_reasons;

void lazy_metric_add(lazy_metric m, int64_t v) {
  metric_vals[m] += v;
  metric_samples[m]++;
}


void lazy_note_recompile(const char *reason) {
  if (n_reasons == MAX_REASONS) {
    core_free(reasons[0]);
    memmove(reasons, reasons + 1, (MAX_REASONS - 1) * sizeof *reasons);
    n_reasons--;
  }
  reasons[n_reasons] = core_strdup(reason);
  if (reasons[n_reasons]) n_reasons++;
  core_thread_arm();
  if (core_log_enabled("KILN_LOG", "recompiles"))
    fprintf(stderr, "kiln: recompile: %s\n", reason);
}

int64_t kiln_lazy_counter(const char *name) {
  for (int i = 0; i < LAZY_M_COUNT; i++)
    if (strcmp(metric_names[i], name) == 0) return metric_vals[i];
  return -1;
}

void kiln_lazy_metrics_reset(void) {
  memset(metric_vals, 0, sizeof metric_vals);
  memset(metric_samples, 0, sizeof metric_samples);
  for (int i = 0; i < n_reasons; i++) core_free(reasons[i]);
  n_reasons = 0;
}

/* Note [Thread exit] (core/thread.c): the exiting thread's reasons. */
static void release_reasons(void) {
  for (int i = 0; i < n_reasons; i++) core_free(reasons[i]);
  n_reasons = 0;
}
__attribute__((constructor)) static void metrics_ctor(void) { core_thread_on_exit(release_reasons); }

int kiln_lazy_n_recompile_reasons(void) { return n_reasons; }

const char *kiln_lazy_recompile_reason(int i) {
  return i >= 0 && i < n_reasons ? reasons[i] : NULL;
}

static bool is_timer(int i) { return i == LAZY_M_COMPILE_TIME || i == LAZY_M_EXECUTE_TIME; }

char *kiln_lazy_metrics_report(void) {
  size_t cap = 4096 + (size_t)n_reasons * 256, k = 0;
  char *s = core_alloc(cap);
  if (!s) return NULL;
  k += (size_t)snprintf(s + k, cap - k, "kiln lazy metrics\n");
  for (int i = 0; i < LAZY_M_COUNT; i++) {
    if (is_timer(i))
      k += (size_t)snprintf(s + k, cap - k, "  %-20s %12.3f ms total, %lld samples\n",
                            metric_names[i], (double)metric_vals[i] / 1e6,
                            (long long)metric_samples[i]);
    else
      k += (size_t)snprintf(s + k, cap - k, "  %-20s %12lld\n", metric_names[i],
                            (long long)metric_vals[i]);
  }
  k += (size_t)snprintf(s + k, cap - k, "recompile reasons: %d\n", n_reasons);
  for (int i = 0; i < n_reasons && k < cap; i++)
    k += (size_t)snprintf(s + k, cap - k, "  %s\n", reasons[i]);
  return s;
}

char *kiln_lazy_metrics_json(void) {
  json_t *counters = json_object(), *timers = json_object(), *rs = json_array();
  bool ok = counters && timers && rs;
  for (int i = 0; i < LAZY_M_COUNT && ok; i++) {
    if (is_timer(i))
      ok = json_object_set_new(timers, metric_names[i],
                               json_pack("{s:I, s:I}", "total", (json_int_t)metric_vals[i],
                                         "samples", (json_int_t)metric_samples[i])) == 0;
    else
      ok = json_object_set_new(counters, metric_names[i], json_integer(metric_vals[i])) == 0;
  }
  for (int i = 0; i < n_reasons && ok; i++)
    ok = json_array_append_new(rs, json_string_nocheck(reasons[i])) == 0;
  json_t *j = ok ? json_pack("{s:o, s:o, s:o}", "counters", counters, "timers_ns", timers,
                             "recompile_reasons", rs)
                 : NULL;
  if (!ok) {
    json_decref(counters);
    json_decref(timers);
    json_decref(rs);
  }
  char *text = core_json_take(j, ok && j, NULL);
  if (text) text[strlen(text) - 1] = 0; /* as before: no final newline */
  return text;
}
