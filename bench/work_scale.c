/* bench/work_scale.c: readers and passes on large inputs, pinning that
 * their work grows as O(n log n) or better (issue #20: the IR verifier
 * took 56 s on a 1.2 MB graph, the checkpoint reader 23 s sorting the
 * metadata keys of a 1.7 MB file; both were quadratic).
 *   verify_100k_nodes: ir_graph_verify of a parsed graph of 100,000 nodes
 *     that all use one input (timed: the verifier alone).
 *   checkpoint_load_10k_keys: kiln_safetensors_load of a file with 10,000
 *     metadata keys (in reverse order) and 10,000 one-element tensors.
 *   checkpoint_plain_guess_10k: kiln_checkpoint_read_info of a plain
 *     state_dict (no kiln metadata: the model is guessed from the tensor
 *     names) holding the MLP's parameters and 10,000 "optim." tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "ir/ir.h"

#define N_NODES 100000
#define N_KEYS 10000

static char *graph_text;
static size_t graph_len;
static ir_graph *graph;

static int setup_verify(void) {
  size_t cap = (size_t)N_NODES * 64 + 256, k = 0;
  graph_text = malloc(cap);
  if (!graph_text) return -1;
  k += (size_t)snprintf(graph_text + k, cap - k,
                        "graph(%%x : Tensor):\n  %%one : int = prim::Constant[value=1]()\n");
  for (int i = 0; i < N_NODES; i++)
    k += (size_t)snprintf(graph_text + k, cap - k, "  %%v%d : Tensor = aten::add(%%x, %%x, %%one)\n",
                          i);
  k += (size_t)snprintf(graph_text + k, cap - k, "  return (%%v%d)\n", N_NODES - 1);
  graph_len = k;
  graph = ir_graph_parse(graph_text, graph_len);
  return graph ? 0 : -1;
}

static double run_verify(int iters) {
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    if (ir_graph_verify(graph) < 0) return bench_fail("verify_100k_nodes", "verify");
  }
  return bench_now() - t0;
}

static void teardown_verify(void) {
  ir_graph_free(graph);
  graph = NULL;
  free(graph_text);
  graph_text = NULL;
}

static char ckpt_path[64];

static int setup_ckpt(void) {
  char **names = calloc(N_KEYS, sizeof *names), **keys = calloc(N_KEYS, sizeof *keys),
       **values = calloc(N_KEYS, sizeof *values);
  kiln_tensor **ts = calloc(N_KEYS, sizeof *ts);
  int rc = -1;
  snprintf(ckpt_path, sizeof ckpt_path, "/tmp/kiln-bench-ckpt-%ld.st", (long)getpid());
  kiln_scope_begin();
  if (!names || !keys || !values || !ts) goto done;
  for (int i = 0; i < N_KEYS; i++) {
    char b[64];
    snprintf(b, sizeof b, "layer%05d.weight", i);
    names[i] = strdup(b);
    snprintf(b, sizeof b, "key%05d", N_KEYS - 1 - i); /* reverse order: the worst for a naive sort */
    keys[i] = strdup(b);
    values[i] = strdup("value");
    ts[i] = kiln_scalar(i, KILN_DTYPE_F32);
    if (!names[i] || !keys[i] || !values[i] || !ts[i]) goto done;
  }
  rc = kiln_safetensors_save(ckpt_path, N_KEYS, (const char *const *)names, ts, N_KEYS,
                             (const char *const *)keys, (const char *const *)values);
done:
  kiln_scope_end();
  for (int i = 0; i < N_KEYS; i++) {
    if (names) free(names[i]);
    if (keys) free(keys[i]);
    if (values) free(values[i]);
  }
  free(names), free(keys), free(values), free(ts);
  return rc < 0 ? -1 : 0;
}

static double run_ckpt(int iters) {
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    kiln_safetensors *st = kiln_safetensors_load(ckpt_path);
    if (!st) return bench_fail("checkpoint_load_10k_keys", "load");
    kiln_safetensors_free(st);
  }
  return bench_now() - t0;
}

static void teardown_ckpt(void) { unlink(ckpt_path); }

static char plain_path[64];

static int setup_plain(void) {
  enum { N_OPT = 10000 };
  kiln_generator *g = kiln_generator_new(1);
  kiln_nn_module *m = g ? kiln_nn_model_new("mlp", g) : NULL;
  int np = m ? kiln_nn_module_n_params(m) : 0, n = np + N_OPT, rc = -1;
  char **names = calloc((size_t)n, sizeof *names);
  kiln_tensor **ts = calloc((size_t)n, sizeof *ts);
  snprintf(plain_path, sizeof plain_path, "/tmp/kiln-bench-plain-%ld.st", (long)getpid());
  kiln_scope_begin();
  if (!m || !names || !ts) goto done;
  for (int i = 0; i < n; i++) {
    char b[64];
    if (i < np) snprintf(b, sizeof b, "%s", kiln_nn_module_param_name(m, i));
    else snprintf(b, sizeof b, "optim.state%06d", N_OPT - i); /* sorted after the model's */
    names[i] = strdup(b);
    ts[i] = i < np ? kiln_nn_module_param(m, i) : kiln_scalar(i, KILN_DTYPE_F32);
    if (!names[i] || !ts[i]) goto done;
  }
  rc = kiln_safetensors_save(plain_path, n, (const char *const *)names, ts, 0, NULL, NULL);
done:
  kiln_scope_end();
  for (int i = 0; names && i < n; i++) free(names[i]);
  free(names), free(ts);
  kiln_nn_module_free(m);
  kiln_generator_free(g);
  return rc < 0 ? -1 : 0;
}

static double run_plain(int iters) {
  double t0 = bench_now();
  for (int i = 0; i < iters; i++) {
    kiln_checkpoint_info info;
    if (kiln_checkpoint_read_info(plain_path, &info) < 0 || strcmp(info.model, "mlp") != 0)
      return bench_fail("checkpoint_plain_guess_10k", "read_info");
  }
  return bench_now() - t0;
}

static void teardown_plain(void) { unlink(plain_path); }

static const bench_workload scale[] = {
    {"verify_100k_nodes", "ms", BENCH_TIME, 1e3, 0, 1, 20, setup_verify, run_verify,
     teardown_verify},
    {"checkpoint_load_10k_keys", "ms", BENCH_TIME, 1e3, 0, 1, 20, setup_ckpt, run_ckpt,
     teardown_ckpt},
    {"checkpoint_plain_guess_10k", "ms", BENCH_TIME, 1e3, 0, 1, 20, setup_plain, run_plain,
     teardown_plain},
};

const bench_workload *bench_scale_workloads(int *n) {
  *n = (int)(sizeof scale / sizeof *scale);
  return scale;
}
