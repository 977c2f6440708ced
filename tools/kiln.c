/* tools/kiln.c: the `kiln` command: run IR graphs from files, print them,
 * and (in later subcommands) train and benchmark. Uses the public API only. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "kiln.h"

#define MAX_IO 64

static int usage(void) {
  fprintf(stderr,
          "usage:\n"
          "  kiln run GRAPH.ir [INPUT ...] [--requires-grad I,J,...] [--runs N] [--grad]\n"
          "           [--phases SPEC] [--stats FILE.json] --out DIR\n"
          "      INPUT: a .npy file or a literal scalar (3, 2.5, true, false)\n"
          "      --phases '3:1,2;2:;3:1,2': 3 calls with inputs 1,2 requiring grad, 2 with\n"
          "        none, 3 with 1,2 again (outputs and grads are the last call's)\n"
          "  kiln ir GRAPH.ir\n"
          "  kiln train [--model mlp|cnn|lstm] [--mode eager|jit|lazy] [--epochs N] ...\n"
          "      (kiln train --help lists every option)\n"
          "  kiln eval CHECKPOINT [--data DIR]\n"
          "  kiln bench [--json] [--filter SUBSTR]\n");
  return 2;
}

static int fail(const char *what) {
  fprintf(stderr, "kiln: %s%s%s\n", what, kiln_last_error()[0] ? ": " : "", kiln_last_error());
  return 1;
}

static int cmd_ir(int argc, char **argv) {
  if (argc != 1) return usage();
  kiln_graph *g = kiln_graph_load(argv[0]);
  if (!g) return fail("cannot load the graph");
  char *text = kiln_graph_print(g);
  if (!text) {
    kiln_graph_free(g);
    return fail("cannot print the graph");
  }
  fputs(text, stdout);
  kiln_free(text);
  kiln_graph_free(g);
  return 0;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* A literal scalar, else a .npy file. */
static int parse_input(const char *arg, kiln_value *v) {
  char *end;
  if (strcmp(arg, "true") == 0 || strcmp(arg, "false") == 0) {
    *v = (kiln_value){.kind = KILN_VALUE_BOOL, .b = arg[0] == 't'};
    return 0;
  }
  if (!ends_with(arg, ".npy")) {
    errno = 0;
    long long i = strtoll(arg, &end, 10);
    if (*arg && !*end && errno == 0) {
      *v = (kiln_value){.kind = KILN_VALUE_INT, .i = i};
      return 0;
    }
    double d = strtod(arg, &end);
    if (*arg && !*end) {
      *v = (kiln_value){.kind = KILN_VALUE_FLOAT, .f = d};
      return 0;
    }
  }
  kiln_tensor *t = kiln_npy_load(arg);
  if (!t) return -1;
  *v = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = t};
  return 0;
}

static int save_value(const char *dir, const char *stem, int k, const kiln_value *v) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s%d.npy", dir, stem, k);
  kiln_tensor *t = NULL;
  switch (v->kind) {
  case KILN_VALUE_TENSOR: t = v->t; break;
  case KILN_VALUE_INT: t = kiln_scalar((double)v->i, KILN_DTYPE_I64); break;
  case KILN_VALUE_FLOAT: t = kiln_scalar(v->f, KILN_DTYPE_F64); break;
  case KILN_VALUE_BOOL: t = kiln_scalar(v->b, KILN_DTYPE_BOOL); break;
  default: fprintf(stderr, "kiln: output %d is None; writing nothing for it\n", k); return 0;
  }
  if (v->kind == KILN_VALUE_INT) *(int64_t *)kiln_tensor_data(t) = v->i; /* exact */
  return kiln_npy_save(path, t) < 0 ? -1 : 0;
}

static int parse_index_list(const char *s, int *idx, int max) {
  int n = 0;
  while (*s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 0 || v > INT_MAX || n == max) return -1;
    idx[n++] = (int)v;
    s = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return -1;
  }
  return n;
}

#define MAX_PHASES 32

typedef struct phase {
  int calls;
  int rg[MAX_IO], n_rg;
} phase;

/* "3:1,2;2:;3:1,2" */
static int parse_phases(const char *spec, phase *ph, int max) {
  int n = 0;
  while (*spec) {
    if (n == max) return -1;
    char *end;
    long calls = strtol(spec, &end, 10);
    if (end == spec || calls < 1 || *end != ':') return -1;
    spec = end + 1;
    char list[256];
    size_t k = 0;
    while (*spec && *spec != ';' && k < sizeof list - 1) list[k++] = *spec++;
    list[k] = 0;
    if (*spec == ';') spec++;
    ph[n].calls = (int)calls;
    ph[n].n_rg = list[0] ? parse_index_list(list, ph[n].rg, MAX_IO) : 0;
    if (ph[n].n_rg < 0) return -1;
    n++;
  }
  return n;
}

static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  bool ok = fputs(text, f) >= 0;
  ok &= fclose(f) == 0;
  return ok ? 0 : -1;
}

static int cmd_run(int argc, char **argv) {
  const char *graph_path = NULL, *out_dir = NULL, *phases_arg = NULL, *stats_path = NULL;
  phase phases[MAX_PHASES];
  int n_phases = 0;
  const char *inputs_arg[MAX_IO];
  int n_in = 0, runs = 1, rg[MAX_IO], n_rg = 0, rc = 1;
  bool want_grad = false;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) out_dir = argv[++i];
    else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = atoi(argv[++i]);
    else if (strcmp(argv[i], "--grad") == 0) want_grad = true;
    else if (strcmp(argv[i], "--phases") == 0 && i + 1 < argc) phases_arg = argv[++i];
    else if (strcmp(argv[i], "--stats") == 0 && i + 1 < argc) stats_path = argv[++i];
    else if (strcmp(argv[i], "--requires-grad") == 0 && i + 1 < argc) {
      n_rg = parse_index_list(argv[++i], rg, MAX_IO);
      if (n_rg < 0) {
        fprintf(stderr, "kiln: --requires-grad: expected indices like 0,2\n");
        return 2;
      }
    } else if (strncmp(argv[i], "--", 2) == 0) {
      fprintf(stderr, "kiln: unknown option %s\n", argv[i]);
      return usage();
    } else if (!graph_path) graph_path = argv[i];
    else if (n_in < MAX_IO) inputs_arg[n_in++] = argv[i];
  }
  if (!graph_path || !out_dir || runs < 1) return usage();
  if (phases_arg) {
    n_phases = parse_phases(phases_arg, phases, MAX_PHASES);
    if (n_phases <= 0) {
      fprintf(stderr, "kiln: --phases: expected CALLS:I,J;CALLS:;... (e.g. 3:1,2;2:)\n");
      return 2;
    }
  } else {
    phases[0].calls = runs;
    phases[0].n_rg = n_rg;
    memcpy(phases[0].rg, rg, sizeof rg);
    n_phases = 1;
  }
  if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "kiln: cannot create %s: %s\n", out_dir, strerror(errno));
    return 1;
  }
  kiln_scope_begin();
  kiln_graph *g = kiln_graph_load(graph_path);
  kiln_function *f = NULL;
  kiln_value in[MAX_IO], out[MAX_IO];
  int n_out = 0, n_kept = 0;
  kiln_tensor *kept[MAX_IO];
  if (!g) {
    rc = fail("cannot load the graph");
    goto done;
  }
  if (kiln_graph_n_inputs(g) != n_in) {
    fprintf(stderr, "kiln: %s takes %d inputs, %d given\n", graph_path, kiln_graph_n_inputs(g), n_in);
    goto done;
  }
  for (int i = 0; i < n_in; i++)
    if (parse_input(inputs_arg[i], &in[i]) < 0) {
      rc = fail("bad input");
      goto done;
    }
  for (int p = 0; p < n_phases; p++)
    for (int k = 0; k < phases[p].n_rg; k++) {
      int ix = phases[p].rg[k];
      if (ix >= n_in || in[ix].kind != KILN_VALUE_TENSOR) {
        fprintf(stderr, "kiln: input %d cannot require grad: not a tensor input\n", ix);
        goto done;
      }
    }
  f = kiln_function_new(g);
  if (!f) {
    rc = fail("cannot build the function");
    goto done;
  }
  for (int p = 0; p < n_phases; p++) {
    for (int i = 0; i < n_in; i++) {
      if (in[i].kind != KILN_VALUE_TENSOR) continue;
      bool want = false;
      for (int k = 0; k < phases[p].n_rg; k++) want |= phases[p].rg[k] == i;
      if (kiln_set_requires_grad(in[i].t, want) < 0) {
        rc = fail("--requires-grad");
        goto done;
      }
    }
    for (int r = 0; r < phases[p].calls; r++) {
      /* Only the last call's outputs are kept: each call runs in its own
       * scope, which releases the one before (1,000 runs of a 1 MiB output
       * would hold 1 GB). */
      kiln_scope_begin();
      n_out = kiln_function_call(f, in, n_in, out, MAX_IO);
      for (int k = 0; k < n_out; k++)
        if (out[k].kind == KILN_VALUE_TENSOR) kiln_keep(out[k].t);
      kiln_scope_end();
      for (int k = 0; k < n_kept; k++) kiln_release(kept[k]);
      n_kept = 0;
      for (int k = 0; k < n_out; k++)
        if (out[k].kind == KILN_VALUE_TENSOR) kept[n_kept++] = out[k].t;
      if (n_out < 0) {
        rc = fail("run failed");
        goto done;
      }
    }
  }
  n_rg = phases[n_phases - 1].n_rg;
  memcpy(rg, phases[n_phases - 1].rg, sizeof rg);
  for (int k = 0; k < n_out; k++)
    if (save_value(out_dir, "out", k, &out[k]) < 0) {
      rc = fail("cannot write an output");
      goto done;
    }
  if (want_grad && n_rg > 0) {
    kiln_tensor *roots[MAX_IO], *seeds[MAX_IO];
    int n_roots = 0;
    for (int k = 0; k < n_out; k++) {
      kiln_tensor *t = out[k].kind == KILN_VALUE_TENSOR ? out[k].t : NULL;
      if (!t || !kiln_requires_grad(t)) continue;
      roots[n_roots] = t;
      seeds[n_roots++] = kiln_ones(kiln_tensor_ndim(t), kiln_tensor_shape(t), kiln_tensor_dtype(t));
    }
    if (n_roots && kiln_backward_ex(roots, seeds, n_roots, NULL) < 0) {
      rc = fail("backward failed");
      goto done;
    }
    for (int k = 0; k < n_rg; k++) {
      kiln_tensor *x = in[rg[k]].t, *gx = kiln_tensor_grad(x);
      kiln_value v = {.kind = KILN_VALUE_TENSOR,
                      .t = gx ? gx : kiln_zeros(kiln_tensor_ndim(x), kiln_tensor_shape(x),
                                                kiln_tensor_dtype(x))};
      if (save_value(out_dir, "grad", rg[k], &v) < 0) {
        rc = fail("cannot write a gradient");
        goto done;
      }
    }
  }
  if (stats_path) {
    char *json = kiln_function_stats_json(f);
    if (!json || write_text(stats_path, json) < 0) {
      kiln_free(json);
      fprintf(stderr, "kiln: cannot write %s\n", stats_path);
      goto done;
    }
    kiln_free(json);
  }
  rc = 0;
done:
  /* inputs (kiln_npy_load) belong to the scope; the last outputs are kept */
  for (int k = 0; k < n_kept; k++) kiln_release(kept[k]);
  kiln_function_free(f);
  kiln_graph_free(g);
  kiln_scope_end();
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  if (strcmp(argv[1], "run") == 0) return cmd_run(argc - 2, argv + 2);
  if (strcmp(argv[1], "ir") == 0) return cmd_ir(argc - 2, argv + 2);
  if (strcmp(argv[1], "train") == 0) return kiln_cmd_train(argc - 2, argv + 2);
  if (strcmp(argv[1], "eval") == 0) return kiln_cmd_eval(argc - 2, argv + 2);
  if (strcmp(argv[1], "bench") == 0) return kiln_bench_main(argc - 2, argv + 2);
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
    usage();
    return 0;
  }
  fprintf(stderr, "kiln: unknown command '%s'\n", argv[1]);
  return usage();
}
