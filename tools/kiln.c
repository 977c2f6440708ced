/* tools/kiln.c: the `kiln` command: run IR graphs from files, print them,
 * and dispatch train, eval and bench. Every subcommand's options but
 * bench's (parsed by bench/bench_main.c) are one table (tools/cli.h);
 * `kiln help COMMAND` and `kiln COMMAND --help` print it. Uses the public API only. */
#include <errno.h>
#include <limits.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "kiln.h"

static const char *const COMMANDS =
    "usage: kiln COMMAND [options] (kiln help COMMAND, kiln COMMAND --help)\n"
    "commands:\n"
    "  run GRAPH.ir [INPUT ...] --out DIR   call a TorchScript graph, write outputs (.npy)\n"
    "  ir GRAPH.ir                          parse a graph and print it back\n"
    "  train [options]                      train a model on Fashion-MNIST\n"
    "  eval CHECKPOINT                      evaluate a checkpoint on the test set\n"
    "  bench [options]                      kiln's benchmarks\n"
    "  help [COMMAND]                       this list, or a command's options\n"
    "  --version                            kiln's and the library's versions\n";

static int fail(const char *what) {
  fprintf(stderr, "kiln: %s%s%s\n", what, kiln_last_error()[0] ? ": " : "", kiln_last_error());
  return 1;
}

static const cli_cmd ir_cmd = {"ir", "GRAPH.ir", "Parses a TorchScript graph and prints it back.",
                                NULL, NULL, 0, 1, 1};

static int cmd_ir(int argc, char **argv) {
  char **pos;
  int n_pos, rc = cli_parse(&ir_cmd, argc, argv, &pos, &n_pos);
  if (rc != CLI_OK) return rc == CLI_HELP ? 0 : 2;
  kiln_graph *g = kiln_graph_load(pos[0]);
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
  case KILN_VALUE_TENSOR: t = kiln_tensor_is_lazy(v->t) ? kiln_to_cpu(v->t) : v->t; break;
  case KILN_VALUE_INT: t = kiln_scalar((double)v->i, KILN_DTYPE_I64); break;
  case KILN_VALUE_FLOAT: t = kiln_scalar(v->f, KILN_DTYPE_F64); break;
  case KILN_VALUE_BOOL: t = kiln_scalar(v->b, KILN_DTYPE_BOOL); break;
  default: fprintf(stderr, "kiln: output %d is None; writing nothing for it\n", k); return 0;
  }
  if (v->kind == KILN_VALUE_INT) *(int64_t *)kiln_tensor_data(t) = v->i; /* exact */
  return kiln_npy_save(path, t) < 0 ? -1 : 0;
}

/* At most (strlen(s) + 1) / 2 indices: room for them all is given. */
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

typedef struct phase {
  int calls;
  int *rg, n_rg; /* rg points into the spec's index buffer */
} phase;

/* "3:1,2;2:;3:1,2": ph has room for one phase per ';' plus one, idx for
 * strlen(spec) indices. */
static int parse_phases(const char *spec, phase *ph, int max, int *idx) {
  int n = 0;
  size_t len = strlen(spec);
  char *list = malloc(len + 1);
  if (!list) return -1;
  while (*spec) {
    if (n == max) goto bad;
    char *end;
    long calls = strtol(spec, &end, 10);
    if (end == spec || calls < 1 || *end != ':') goto bad;
    spec = end + 1;
    size_t k = 0;
    while (*spec && *spec != ';') list[k++] = *spec++;
    list[k] = 0;
    if (*spec == ';') spec++;
    ph[n].calls = (int)calls;
    ph[n].rg = idx;
    ph[n].n_rg = list[0] ? parse_index_list(list, idx, (int)len) : 0;
    if (ph[n].n_rg < 0) goto bad;
    idx += ph[n].n_rg;
    n++;
  }
  free(list);
  return n;
bad:
  free(list);
  return -1;
}

/* Do a (CPU) and b (lazy) hold different values? (bitwise, after sync) */
static bool changed(kiln_tensor *a, kiln_tensor *b) {
  kiln_tensor *c = kiln_to_cpu(b);
  int64_t n = kiln_tensor_numel(a);
  size_t es = kiln_dtype_size(kiln_tensor_dtype(a));
  bool diff = !c || kiln_tensor_numel(c) != n || kiln_tensor_dtype(c) != kiln_tensor_dtype(a);
  kiln_tensor *ca = kiln_contiguous(a), *cc = diff ? NULL : kiln_contiguous(c);
  if (!diff) diff = !ca || !cc || memcmp(kiln_tensor_data(ca), kiln_tensor_data(cc), (size_t)n * es) != 0;
  return diff;
}

static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  bool ok = fputs(text, f) >= 0;
  ok &= fclose(f) == 0;
  return ok ? 0 : -1;
}

static struct {
  const char *out, *phases, *stats, *requires_grad, *weights, *save_weights, *mode;
  long long runs;
  bool grad, lazy, eval;
} ra;

/* One row per option; tools/cli.h says how to add one. */
static const cli_opt run_opts[] = {
    {"out", 'o', CLI_OUT_DIR, &ra.out, "DIR", 0, "write out<K>.npy (and grad<I>.npy) here"},
    {"requires-grad", 0, CLI_STR, &ra.requires_grad, "I,J,...", 0,
     "inputs that require grad (0-based)"},
    {"runs", 0, CLI_INT, &ra.runs, "N", 1, "call the graph N times (default 1)"},
    {"grad", 0, CLI_FLAG, &ra.grad, NULL, 0, "backward from the outputs; write grad<I>.npy"},
    {"phases", 0, CLI_STR, &ra.phases, "SPEC", 0,
     "'3:1,2;2:' = 3 calls with inputs 1,2 requiring grad, then 2 with none"},
    {"stats", 0, CLI_OUT_FILE, &ra.stats, "FILE.json", 0,
     "the executor's counters and optimized graph"},
    {"lazy", 0, CLI_FLAG, &ra.lazy, NULL, 0,
     "inputs become lazy tensors; each call ends with a mark_step"},
    {"weights", 0, CLI_IN_FILE, &ra.weights, "W.safetensors", 0,
     "GRAPH.ir is a module graph from tools/kiln-export, bound to these weights"},
    {"save-weights", 0, CLI_OUT_FILE, &ra.save_weights, "FILE", 0,
     "--weights: write the weights after the run (mutated buffers included)"},
    {"mode", 0, CLI_CHOICE, &ra.mode, "eager|jit|lazy", 0, "--weights: how the model runs"},
    {"eval", 0, CLI_FLAG, &ra.eval, NULL, 0, "--weights: the model in eval mode"},
};

static const cli_cmd run_cmd = {
    "run", "GRAPH.ir [INPUT ...]",
    "Calls a TorchScript graph through the profiling executor and writes its outputs.",
    "INPUT: a .npy file or a literal scalar (3, -2.5, true, false), one per graph input.\n"
    "Outputs and grads written are the last call's. Each input tensor the graph wrote\n"
    "in place (batch norm's running statistics) is written as in<I>.npy, its value\n"
    "after the last call (with --lazy: an input whose values changed).\n",
    run_opts, sizeof run_opts / sizeof *run_opts, 1, -1};

static int cmd_run(int argc, char **argv) {
  const char *graph_path = NULL, *out_dir = NULL, *phases_arg = NULL, *stats_path = NULL;
  const char *weights = NULL, *save_weights = NULL;
  kiln_model_opts mo;
  kiln_model_opts_default(&mo);
  kiln_model *model = NULL;
  /* Every array is sized from argv (no fixed limits: real models have
   * hundreds of parameters): no list is longer than the arguments. */
  size_t arg_chars = 1;
  for (int i = 0; i < argc; i++) arg_chars += strlen(argv[i]) + 1;
  phase *phases = calloc(arg_chars, sizeof *phases);
  int *idx = calloc(arg_chars, sizeof *idx), *rg = calloc(arg_chars, sizeof *rg);
  const char **inputs_arg = calloc((size_t)argc + 1, sizeof *inputs_arg);
  kiln_value *in = NULL, *out = NULL;
  uint64_t *version = NULL;
  int n_phases = 0, n_out_cap = 0;
  int n_in = 0, runs = 1, n_rg = 0, rc = 1;
  bool want_grad = false, lazy = false;
  kiln_graph *g = NULL;
  kiln_tensor **before = NULL; /* --lazy: the inputs' CPU values */
  kiln_tensor **kept = NULL;   /* the last call's output tensors */
  int n_kept = 0;
  kiln_function *f = NULL;
  if (!phases || !idx || !rg || !inputs_arg) {
    fprintf(stderr, "kiln: out of memory\n");
    goto out;
  }
  memset(&ra, 0, sizeof ra); /* a second call in one process starts afresh */
  ra.runs = 1;
  char **pos;
  int n_pos, prc = cli_parse(&run_cmd, argc, argv, &pos, &n_pos);
  if (prc != CLI_OK) {
    rc = prc == CLI_HELP ? 0 : 2;
    goto out;
  }
  if (!ra.out) {
    rc = cli_bad(&run_cmd, "--out DIR is required");
    goto out;
  }
  if ((ra.save_weights || ra.mode || ra.eval) && !ra.weights) {
    rc = cli_bad(&run_cmd, "--save-weights, --mode and --eval go with --weights");
    goto out;
  }
  if (ra.runs > 1000000) {
    rc = cli_bad(&run_cmd, "--runs: at most 1000000");
    goto out;
  }
  graph_path = pos[0];
  for (int i = 1; i < n_pos; i++) inputs_arg[n_in++] = pos[i];
  out_dir = ra.out;
  phases_arg = ra.phases;
  stats_path = ra.stats;
  want_grad = ra.grad;
  lazy = ra.lazy;
  weights = ra.weights;
  save_weights = ra.save_weights;
  if (ra.mode) mo.mode = (kiln_nn_mode)kiln_nn_mode_parse(ra.mode);
  if (ra.eval) mo.training = 0;
  runs = (int)ra.runs;
  if (ra.requires_grad) {
    n_rg = parse_index_list(ra.requires_grad, rg, (int)arg_chars);
    if (n_rg < 0) {
      rc = cli_bad(&run_cmd, "--requires-grad: expected indices like 0,2, got '%s'",
                   ra.requires_grad);
      goto out;
    }
  }
  if (phases_arg) {
    n_phases = parse_phases(phases_arg, phases, (int)arg_chars, idx);
    if (n_phases <= 0) {
      rc = cli_bad(&run_cmd, "--phases: expected CALLS:I,J;CALLS:;... (e.g. 3:1,2;2:), got '%s'",
                   phases_arg);
      goto out;
    }
  } else {
    phases[0].calls = runs;
    phases[0].n_rg = n_rg;
    phases[0].rg = rg;
    n_phases = 1;
  }
  if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "kiln: cannot create %s: %s\n", out_dir, strerror(errno));
    goto out;
  }
  kiln_scope_begin();
  int n_out = 0;
  if (weights) {
    if (!(model = kiln_model_load(graph_path, weights, &mo))) {
      rc = fail("cannot load the model");
      goto done;
    }
  } else if (!(g = kiln_graph_load(graph_path))) {
    rc = fail("cannot load the graph");
    goto done;
  }
  int n_want = model ? kiln_model_n_inputs(model) : kiln_graph_n_inputs(g);
  /* outputs: the graph's, with room for tuples flattened (a call that
   * needs more fails saying so) */
  n_out_cap = 16 * ((model ? 1 : kiln_graph_n_outputs(g)) + 4);
  in = calloc((size_t)n_in + 1, sizeof *in);
  out = calloc((size_t)n_out_cap, sizeof *out);
  version = calloc((size_t)n_in + 1, sizeof *version);
  kept = calloc((size_t)n_out_cap, sizeof *kept);
  if (!in || !out || !version || !kept) {
    fprintf(stderr, "kiln: out of memory\n");
    goto done;
  }
  if (n_want != n_in) {
    fprintf(stderr, "kiln: %s takes %d inputs, %d given\n", graph_path, n_want, n_in);
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
  if (model && mo.mode == KILN_NN_LAZY)
    for (int i = 0; i < n_in; i++)
      if (in[i].kind == KILN_VALUE_TENSOR && !(in[i].t = kiln_to_lazy(in[i].t))) {
        rc = fail("to lazy");
        goto done;
      }
  f = model ? kiln_model_function(model) : kiln_function_new(g);
  if (!f) {
    rc = fail("cannot build the function");
    goto done;
  }
  for (int i = 0; i < n_in; i++)
    if (in[i].kind == KILN_VALUE_TENSOR) version[i] = kiln_tensor_version(in[i].t);
  if (lazy) {
    before = calloc((size_t)n_in + 1, sizeof *before);
    if (!before) {
      fprintf(stderr, "kiln: out of memory\n");
      goto done;
    }
    for (int i = 0; i < n_in; i++) {
      if (in[i].kind != KILN_VALUE_TENSOR) continue;
      before[i] = in[i].t;
      bool rgi = kiln_requires_grad(in[i].t);
      in[i].t = kiln_to_lazy(in[i].t);
      if (!in[i].t || (rgi && kiln_set_requires_grad(in[i].t, true) < 0)) {
        rc = fail("--lazy");
        goto done;
      }
    }
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
      n_out = model ? kiln_model_call(model, in, n_in, out, n_out_cap)
                    : kiln_function_call(f, in, n_in, out, n_out_cap);
      if (n_out >= 0 && (lazy || (model && mo.mode == KILN_NN_LAZY)) && kiln_mark_step() < 0)
        n_out = -1;
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
  memmove(rg, phases[n_phases - 1].rg, (size_t)n_rg * sizeof *rg);
  for (int k = 0; k < n_out; k++)
    if (save_value(out_dir, "out", k, &out[k]) < 0) {
      rc = fail("cannot write an output");
      goto done;
    }
  /* inputs the graph wrote in place (their version moved) */
  for (int i = 0; i < n_in; i++)
    if (in[i].kind == KILN_VALUE_TENSOR &&
        (lazy ? changed(before[i], in[i].t) : kiln_tensor_version(in[i].t) != version[i]) &&
        save_value(out_dir, "in", i, &in[i]) < 0) {
      rc = fail("cannot write a written input");
      goto done;
    }
  if (want_grad && n_rg > 0) {
    kiln_tensor **roots = calloc((size_t)n_out + 1, sizeof *roots);
    kiln_tensor **seeds = calloc((size_t)n_out + 1, sizeof *seeds);
    if (!roots || !seeds) {
      free(roots);
      free(seeds);
      fprintf(stderr, "kiln: out of memory\n");
      goto done;
    }
    int n_roots = 0;
    for (int k = 0; k < n_out; k++) {
      kiln_tensor *t = out[k].kind == KILN_VALUE_TENSOR ? out[k].t : NULL;
      if (!t || !kiln_requires_grad(t)) continue;
      roots[n_roots] = t;
      seeds[n_roots++] = kiln_ones(kiln_tensor_ndim(t), kiln_tensor_shape(t), kiln_tensor_dtype(t));
    }
    int brc = n_roots ? kiln_backward_ex(roots, seeds, n_roots, NULL) : 0;
    free(roots);
    free(seeds);
    if (brc < 0) {
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
  if (save_weights && kiln_model_save(model, save_weights) < 0) {
    rc = fail("cannot save the weights");
    goto done;
  }
  rc = 0;
done:
  /* inputs (kiln_npy_load) belong to the scope; the last outputs are kept */
  for (int k = 0; k < n_kept; k++) kiln_release(kept[k]);
  if (model) kiln_model_free(model);
  else kiln_function_free(f);
  kiln_graph_free(g);
  kiln_scope_end();
out:
  free(phases);
  free(idx);
  free(rg);
  free(inputs_arg);
  free(in);
  free(out);
  free(version);
  free(before);
  free(kept);
  return rc;
}

static const char *const BENCH_HELP[] = {"bench", "--help", NULL};

static int help(const char *cmd) {
  char **pos;
  int n;
  char *hv[] = {(char *)cmd, "--help", NULL};
  if (!cmd) {
    fputs(COMMANDS, stdout);
    return 0;
  }
  if (strcmp(cmd, "run") == 0) return cli_parse(&run_cmd, 2, hv, &pos, &n) == CLI_HELP ? 0 : 2;
  if (strcmp(cmd, "ir") == 0) return cli_parse(&ir_cmd, 2, hv, &pos, &n) == CLI_HELP ? 0 : 2;
  if (strcmp(cmd, "train") == 0) return kiln_cmd_train(2, hv);
  if (strcmp(cmd, "eval") == 0) return kiln_cmd_eval(2, hv);
  if (strcmp(cmd, "bench") == 0) return kiln_bench_main(1, (char **)BENCH_HELP + 1);
  if (strcmp(cmd, "help") == 0) return help(NULL);
  fprintf(stderr, "kiln help: unknown command '%s' (kiln --help lists the commands)\n", cmd);
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(COMMANDS, stderr);
    return 2;
  }
  const char *c = argv[1];
  if (strcmp(c, "run") == 0) return cmd_run(argc - 1, argv + 1);
  if (strcmp(c, "ir") == 0) return cmd_ir(argc - 1, argv + 1);
  if (strcmp(c, "train") == 0) return kiln_cmd_train(argc - 1, argv + 1);
  if (strcmp(c, "eval") == 0) return kiln_cmd_eval(argc - 1, argv + 1);
  if (strcmp(c, "bench") == 0) return kiln_bench_main(argc - 2, argv + 2);
  if (strcmp(c, "--version") == 0 || strcmp(c, "-V") == 0) {
    /* kiln's own version (the header it was built with) and the running
     * library's (the same for this static binary; a program linking
     * libkiln.so may run a newer minor). */
    printf("kiln %s (cpu level %s)\n", KILN_VERSION_STRING, kiln_cpu_level());
    printf("library %s\n", kiln_version());
    return 0;
  }
  if (strcmp(c, "help") == 0 || strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0) {
    if (argc > 3) {
      fprintf(stderr, "kiln help: expected at most one COMMAND\n");
      return 2;
    }
    return help(argc == 3 ? argv[2] : NULL);
  }
  fprintf(stderr, "kiln: unknown command '%s' (kiln --help lists the commands)\n", c);
  return 2;
}
