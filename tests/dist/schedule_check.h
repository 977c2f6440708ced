/* tests/dist/schedule_check.h: checks the execution order of a compiled
 * lazy graph's all-reduces (Note [Collective schedule] in
 * src/passes/schedule.c) from its printed text, for make test
 * (test_dist_schedule.c, one process) and make test-mpi (dist_mpi.c).
 * Header-only: each test file includes it once. */
#ifndef KILN_TESTS_SCHEDULE_CHECK_H
#define KILN_TESTS_SCHEDULE_CHECK_H

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sched_line {
  char kind[64];
  int n_defs, n_uses;
  char defs[8][16];
  int uses[96]; /* producing line of each operand defined in the block */
} sched_line;

/* Reads the top block of `text` (ir_graph_print output): one entry per
 * node line, up to the return. Returns the count, or -1. */
static int sched_parse(const char *text, sched_line **out) {
  int cap = 64, n = 0;
  sched_line *v = calloc((size_t)cap, sizeof *v);
  const char *p = strstr(text, "):\n"); /* end of the graph's parameters */
  if (!v || !p) goto fail;
  p += 3;
  while (*p && strncmp(p, "  return", 8) != 0) {
    const char *eol = strchr(p, '\n');
    if (!eol) goto fail;
    const char *eq = strstr(p, " = ");
    if (eq && eq < eol) {
      if (n == cap && !(v = realloc(v, (size_t)(cap *= 2) * sizeof *v))) goto fail;
      sched_line *L = &v[n];
      memset(L, 0, sizeof *L);
      for (const char *q = p; q < eq; q++)
        if (*q == '%' && L->n_defs < 8) {
          int k = 0;
          for (q++; q < eq && k < 15 && (isalnum((unsigned char)*q) || *q == '_' || *q == '.'); q++)
            L->defs[L->n_defs][k++] = *q;
          L->n_defs++;
        }
      const char *q = eq + 3;
      int k = 0;
      while (q < eol && *q != '(' && *q != '[' && k < 63) L->kind[k++] = *q++;
      for (; q < eol; q++)
        if (*q == '%') {
          char name[16] = {0};
          int m = 0;
          for (q++; q < eol && m < 15 && (isalnum((unsigned char)*q) || *q == '_' || *q == '.'); q++)
            name[m++] = *q;
          q--;
          for (int j = n - 1; j >= 0; j--) {
            bool hit = false;
            for (int d = 0; d < v[j].n_defs && !hit; d++) hit = strcmp(v[j].defs[d], name) == 0;
            if (hit && L->n_uses < 96) {
              L->uses[L->n_uses++] = j;
              break;
            }
          }
        }
      n++;
    }
    p = eol + 1;
  }
  *out = v;
  return n;
fail:
  free(v);
  return -1;
}

static bool sched_is(const sched_line *L, const char *kind) { return strcmp(L->kind, kind) == 0; }

/* Checks the order (0, or -1 with the reason in why):
 *   - n_buckets starts and as many waits, each wait reading a start;
 *   - each start right after its last producer (only other starts between);
 *   - every node that does not depend on a wait before the first wait;
 *   - at least one aten::mm (a backward GEMM) between the first start and
 *     the first wait: the all-reduce overlaps the rest of the backward. */
static int schedule_check(const char *text, int n_buckets, char *why, size_t wn) {
  sched_line *v = NULL;
  int n = text ? sched_parse(text, &v) : -1, rc = -1;
  bool *dep = NULL;
  if (n < 0) {
    snprintf(why, wn, "cannot read the graph");
    return -1;
  }
  int starts = 0, waits = 0, first_start = -1, first_wait = -1;
  dep = calloc((size_t)n + 1, sizeof *dep);
  if (!dep) goto done;
  for (int i = 0; i < n; i++) {
    sched_line *L = &v[i];
    bool s = sched_is(L, "aten::kiln_all_reduce_start"), w = sched_is(L, "aten::kiln_all_reduce_wait");
    dep[i] = w;
    for (int u = 0; u < L->n_uses; u++) dep[i] |= dep[L->uses[u]];
    if (s) {
      starts++;
      if (first_start < 0) first_start = i;
      int last = -1;
      for (int u = 0; u < L->n_uses; u++)
        if (L->uses[u] > last) last = L->uses[u];
      for (int j = last + 1; j < i; j++)
        if (!sched_is(&v[j], "aten::kiln_all_reduce_start")) {
          snprintf(why, wn, "line %d (%s) between start %d and its last producer %d", j, v[j].kind,
                   i, last);
          goto done;
        }
    }
    if (w) {
      waits++;
      if (first_wait < 0) first_wait = i;
      if (L->n_uses < 1 || !sched_is(&v[L->uses[0]], "aten::kiln_all_reduce_start")) {
        snprintf(why, wn, "wait %d does not read a start", i);
        goto done;
      }
    }
  }
  if (starts != n_buckets || waits != n_buckets) {
    snprintf(why, wn, "%d starts and %d waits, expected %d each", starts, waits, n_buckets);
    goto done;
  }
  for (int i = first_wait + 1; i < n; i++)
    if (!dep[i]) {
      snprintf(why, wn, "node %d (%s) depends on no all-reduce but runs after the first wait %d",
               i, v[i].kind, first_wait);
      goto done;
    }
  int mm = 0;
  for (int i = first_start + 1; i < first_wait; i++) mm += sched_is(&v[i], "aten::mm");
  if (mm == 0) {
    snprintf(why, wn, "no aten::mm between the first start (%d) and the first wait (%d)",
             first_start, first_wait);
    goto done;
  }
  rc = 0;
done:
  free(dep);
  free(v);
  return rc;
}

#endif
