/* src/exec/lazy_sync.c: kiln_mark_step and reads of lazy tensors: take the
 * pending graph of some lazy tensors, look its hash up in an LRU compile
 * cache, compile on a miss, run, and turn the tensors into device data.
 *
 * Note [Graph hash]: the key combines, over the post-order of the graph,
 * each node's hash (op, constants, device-data shapes/dtypes: Note [Lazy
 * hashing]) and its wiring (which earlier node each operand is), then the
 * roots. Values never enter it, so each step of a loop hits the cache; a
 * new shape, a new op, or a different set of roots misses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compile.h"
#include "exec/lazy_anomaly.h"
#include "fusion.h"
#include "passes/autodiff.h"
#include "passes/passes.h"
#include "passes/pipeline.h"

typedef struct sig_input {
  op_meta meta;
  uint8_t scalar_tag;
} sig_input;

typedef struct cache_entry {
  uint64_t hash, structure, nodes; /* nodes: the structure without the roots */
  int *root_ids;                   /* post-order ids of the roots */
  exec_code *code;
  uint64_t last_used;
  int n_inputs, n_roots;
  sig_input *inputs;
} cache_entry;

/* The compile cache, the history and the last graph are the calling
 * thread's lazy device's (Note [Threads] in include/kiln.h): thread-local,
 * freed when the thread exits (release_device). */
static _Thread_local cache_entry *cache;
static _Thread_local int n_cache, cache_cap = 1024;
static _Thread_local uint64_t use_clock;

/* Signatures of the last graph compiled per structure (survive eviction),
 * for recompile reasons. */
#define HISTORY 64
static _Thread_local cache_entry history[HISTORY];
static _Thread_local int n_history;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void evict_lru(void) {
  int lru = 0;
  for (int i = 1; i < n_cache; i++)
    if (cache[i].last_used < cache[lru].last_used) lru = i;
  exec_code_free(cache[lru].code);
  core_free(cache[lru].inputs);
  cache[lru] = cache[--n_cache];
}

void kiln_lazy_set_cache_size(int n) {
  cache_cap = n < 1 ? 1 : n;
  while (n_cache > cache_cap) evict_lru();
}

/* The graph being synced. */
typedef struct sync_graph {
  lazy_node **order;
  int n_order;
  lazy_node **inputs;  /* device-data nodes, in post-order */
  int n_inputs;
  lazy_value *roots;
  int n_roots;
  uint64_t hash, structure, nodes;
} sync_graph;

static void graph_free(sync_graph *g) {
  core_free(g->order);
  core_free(g->inputs);
  core_free(g->roots);
}

static int graph_build(sync_graph *g, kiln_tensor *const *ts, int n) {
  memset(g, 0, sizeof *g);
  lazy_node **rn = core_calloc((size_t)(n ? n : 1), sizeof *rn);
  g->roots = core_calloc((size_t)(n ? n : 1), sizeof *g->roots);
  if (!rn || !g->roots) {
    core_free(rn);
    return KILN_ERR_NOMEM;
  }
  for (int i = 0; i < n; i++) {
    g->roots[i] = lazy_of(ts[i])->value;
    rn[i] = g->roots[i].node;
  }
  g->n_roots = n;
  g->order = lazy_post_order(rn, n, &g->n_order);
  core_free(rn);
  if (!g->order) return KILN_ERR_NOMEM;
  g->inputs = core_alloc((size_t)(g->n_order ? g->n_order : 1) * sizeof *g->inputs);
  if (!g->inputs) return KILN_ERR_NOMEM;
  uint64_t h = 0x6b696c6e, s = h;
  for (int i = 0; i < g->n_order; i++) {
    lazy_node *x = g->order[i];
    if (x->op == LAZY_DATA) g->inputs[g->n_inputs++] = x;
    h = core_hash_mix(h, x->hash);
    s = core_hash_mix(s, x->shape_free_hash);
    for (int k = 0; k < x->n_operands; k++) {
      h = core_hash_mix(core_hash_mix(h, (uint64_t)x->operands[k].node->post_id), (uint64_t)x->operands[k].index);
      s = core_hash_mix(core_hash_mix(s, (uint64_t)x->operands[k].node->post_id), (uint64_t)x->operands[k].index);
    }
  }
  g->nodes = s;
  for (int i = 0; i < n; i++) {
    h = core_hash_mix(core_hash_mix(h, (uint64_t)g->roots[i].node->post_id), (uint64_t)g->roots[i].index);
    s = core_hash_mix(core_hash_mix(s, (uint64_t)g->roots[i].node->post_id), (uint64_t)g->roots[i].index);
  }
  g->hash = core_hash_mix(h, (uint64_t)n);
  g->structure = s;
  return 0;
}

/* ---- compile: lazy graph -> IR -> passes -> instruction code ------------ */

static _Thread_local char *last_graph; /* text of the last compiled graph (debugging) */

/* Note [Lazy compile]: a pending graph becomes an IR graph whose inputs are
 * its device data (Scalars too: they are inputs, so a new learning rate
 * reuses the compiled graph), then goes through the lazy pipeline
 * (pass_pipeline_lazy in passes/pipeline.c) and the compiler. */
static int compile(const sync_graph *g, exec_code **out) {
  lazy_value *ins = core_alloc((size_t)(g->n_inputs ? g->n_inputs : 1) * sizeof *ins);
  pass_lazy_graph lg = {0};
  int rc;
  if (!ins) return KILN_ERR_NOMEM;
  for (int i = 0; i < g->n_inputs; i++) ins[i] = (lazy_value){g->inputs[i], 0};
  rc = pass_lazy_to_ir(ins, g->n_inputs, g->roots, g->n_roots,
                       PASS_LAZY_SCALARS_AS_INPUTS | PASS_LAZY_RECORDED_ORDER, &lg);
  core_free(ins);
  if (rc < 0) return rc;
  if (lg.n_extra) {
    rc = core_error(KILN_ERR_STATE, "lazy compile: %d device data outside the graph's inputs",
                    lg.n_extra);
    goto done;
  }
  if ((rc = pass_pipeline_run(lg.g, &pass_pipeline_lazy, NULL)) < 0) goto done;
  {
    char *t = ir_graph_print(lg.g, IR_PRINT_NO_SOURCE);
    if (t) {
      core_free(last_graph);
      last_graph = t;
    }
  }
  *out = exec_compile(lg.g, &exec_fusion_compile_opts);
  rc = *out ? 0 : -1;
done:
  ir_graph_free(lg.g);
  core_free(lg.extra);
  return rc;
}

char *kiln_lazy_last_compiled_graph(void) { return last_graph ? core_strdup(last_graph) : NULL; }

/* ---- cache --------------------------------------------------------------- */

static void fill_signature(cache_entry *e, const sync_graph *g) {
  e->n_inputs = g->n_inputs;
  e->n_roots = g->n_roots;
  e->structure = g->structure;
  e->nodes = g->nodes;
  e->root_ids = core_alloc((size_t)(g->n_roots ? g->n_roots : 1) * sizeof *e->root_ids);
  if (e->root_ids)
    for (int i = 0; i < g->n_roots; i++) e->root_ids[i] = g->roots[i].node->post_id;
  e->inputs = core_alloc((size_t)(g->n_inputs ? g->n_inputs : 1) * sizeof *e->inputs);
  if (!e->inputs) return;
  for (int i = 0; i < g->n_inputs; i++) {
    e->inputs[i].meta = g->inputs[i]->metas[0];
    e->inputs[i].scalar_tag = g->inputs[i]->scalar_tag;
  }
}

static void explain_miss(const sync_graph *g) {
  char buf[512], a[128], b[128];
  for (int h = n_history - 1; h >= 0; h--) {
    cache_entry *e = &history[h];
    if (e->structure != g->structure) continue;
    if (e->n_roots != g->n_roots) {
      snprintf(buf, sizeof buf, "roots: %d -> %d (a live tensor was added or removed)",
               e->n_roots, g->n_roots);
      lazy_note_recompile(buf);
      return;
    }
    for (int i = 0; i < g->n_inputs && i < e->n_inputs && e->inputs; i++) {
      const op_meta *old = &e->inputs[i].meta, *now = &g->inputs[i]->metas[0];
      if (old->dtype != now->dtype || old->ndim != now->ndim ||
          memcmp(old->shape, now->shape, (size_t)now->ndim * sizeof *now->shape)) {
        snprintf(buf, sizeof buf, "input %d: %s%s -> %s%s", i, kiln_dtype_name(old->dtype),
                 core_shape_str(old->ndim, old->shape, a, sizeof a), kiln_dtype_name(now->dtype),
                 core_shape_str(now->ndim, now->shape, b, sizeof b));
        lazy_note_recompile(buf);
        return;
      }
    }
    lazy_note_recompile("same inputs, a constant argument changed (e.g. a view size)");
    return;
  }
  /* the same nodes with other roots: a live tensor was added or removed */
  for (int h = n_history - 1; h >= 0; h--) {
    cache_entry *e = &history[h];
    if (e->nodes != g->nodes || !e->root_ids) continue;
    size_t k = (size_t)snprintf(buf, sizeof buf, "roots: %d -> %d", e->n_roots, g->n_roots);
    for (int i = 0; i < g->n_roots && k < sizeof buf; i++) {
      const lazy_node *x = g->roots[i].node;
      bool old = false;
      for (int j = 0; j < e->n_roots; j++) old |= e->root_ids[j] == x->post_id;
      if (old) continue;
      const op_meta *m = &x->metas[g->roots[i].index];
      k += (size_t)snprintf(buf + k, sizeof buf - k, "; added root %d: %s%s from %s", i,
                            kiln_dtype_name(m->dtype), core_shape_str(m->ndim, m->shape, a, sizeof a),
                            x->op == LAZY_DATA ? "device data" : op_table[x->op].name);
    }
    for (int j = 0; j < e->n_roots && k < sizeof buf; j++) {
      bool still = false;
      for (int i = 0; i < g->n_roots; i++) still |= g->roots[i].node->post_id == e->root_ids[j];
      if (!still)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "; removed the root at node %%%d",
                              e->root_ids[j]);
    }
    lazy_note_recompile(buf);
    return;
  }
  /* a structure never compiled before: a new graph, not a recompile */
}

static void remember(const sync_graph *g) {
  int slot = -1;
  for (int i = 0; i < n_history; i++)
    if (history[i].structure == g->structure) slot = i;
  if (slot < 0) {
    if (n_history == HISTORY) {
      core_free(history[0].inputs);
      core_free(history[0].root_ids);
      memmove(history, history + 1, (HISTORY - 1) * sizeof *history);
      n_history--;
    }
    slot = n_history++;
  } else {
    core_free(history[slot].inputs);
    core_free(history[slot].root_ids);
  }
  memset(&history[slot], 0, sizeof history[slot]);
  fill_signature(&history[slot], g);
}

static exec_code *lookup_or_compile(const sync_graph *g) {
  for (int i = 0; i < n_cache; i++)
    if (cache[i].hash == g->hash) {
      cache[i].last_used = ++use_clock;
      lazy_metric_add(LAZY_M_CACHED_COMPILE, 1);
      return cache[i].code;
    }
  lazy_metric_add(LAZY_M_UNCACHED_COMPILE, 1);
  explain_miss(g);
  int64_t t0 = now_ns();
  exec_code *code = NULL;
  if (compile(g, &code) < 0) return NULL;
  lazy_metric_add(LAZY_M_COMPILE_TIME, now_ns() - t0);
  while (n_cache >= cache_cap) evict_lru();
  if (n_cache == 0 || n_cache % 16 == 0) {
    cache_entry *c2 = core_realloc(cache, (size_t)(n_cache + 16) * sizeof *c2);
    if (!c2) {
      exec_code_free(code);
      return NULL;
    }
    cache = c2;
  }
  cache_entry *e = &cache[n_cache++];
  core_thread_arm();
  memset(e, 0, sizeof *e);
  e->hash = g->hash;
  e->code = code;
  e->last_used = ++use_clock;
  remember(g);
  return code;
}

/* ---- sync ---------------------------------------------------------------------- */

/* Note [Buffer donation]: a training step's graph reads each parameter
 * and momentum buffer once more at the end, to write its new value: the
 * old buffer is dead after that read, as XLA's donated buffers are. When
 * kiln_mark_step syncs every pending tensor, a device-data input that
 * nothing but this graph's nodes refers to (no tensor holds it, its CPU
 * tensor and storage are private) can be handed to the graph: the
 * interpreter owns it, frees it at its last use, and an elementwise op
 * there writes its result into it (Note [Buffer reuse]) instead of a fresh
 * buffer. So p.add_(buf, alpha=-lr) updates p in place, as eagerly. A read
 * of one tensor (materialize) never donates: other pending tensors may
 * still need the inputs. If the run fails, a donated input may have been
 * overwritten; its node is left without data and a later sync of a graph
 * that reads it fails with an error saying so. */
/* Note [Retry]: what a failed kiln_mark_step leaves (issue #20). Before
 * the graph runs (building, compiling, allocating, reading the inputs) a
 * failure changes nothing: every tensor keeps its pre-step device data
 * and its pending graph, and calling kiln_mark_step again applies the
 * step exactly once (recording the step again instead would apply it
 * twice, as repeating an eager update would). Once the run has started,
 * only donated inputs can be lost: the error says how many ("the values
 * of N donated inputs are lost"), and a later read of a tensor whose
 * pending graph needs one fails with "... value was lost ...". A run that
 * fails without donated inputs loses nothing, and the retry applies the
 * step once. Nothing allocates after the run: the roots' data nodes are
 * made before it, so every root is rebound to its new value, or none. */
static bool donatable(const lazy_node *x, const int *uses) {
  const kiln_tensor *t = x->data;
  return x->scalar_tag == 0 && t && x->refcount == uses[x->post_id] && t->refcount == 1 &&
         t->storage && t->storage->refcount == 1 && !t->ag && !t->requires_grad;
}

/* Runs the pending graph of ts (all LAZY with pending IR) and turns each
 * into device data; with donate, inputs only the graph refers to are
 * handed over (Note [Buffer donation]). */
static int sync_tensors(kiln_tensor *const *ts, int n, bool donate) {
  sync_graph g;
  int rc = graph_build(&g, ts, n);
  exec_value *ins = NULL, *outs = NULL;
  int *uses = NULL;
  lazy_node **made = NULL; /* the roots' data nodes, made before the run (Note [Retry]) */
  if (rc < 0) goto done;
  exec_code *code = lookup_or_compile(&g);
  if (!code) {
    rc = -1;
    goto done;
  }
  ins = core_calloc((size_t)(g.n_inputs ? g.n_inputs : 1), sizeof *ins);
  outs = core_calloc((size_t)(n ? n : 1), sizeof *outs);
  uses = core_calloc((size_t)(g.n_order ? g.n_order : 1), sizeof *uses);
  made = core_calloc((size_t)(n ? n : 1), sizeof *made);
  if (!ins || !outs || !uses || !made) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < n; i++) {
    const lazy_value *v = &lazy_of(ts[i])->value;
    if (!(made[i] = lazy_symbolic_node(&v->node->metas[v->index]))) {
      rc = KILN_ERR_NOMEM;
      goto done;
    }
  }
  for (int i = 0; i < g.n_order; i++)
    for (int k = 0; k < g.order[i]->n_operands; k++) uses[g.order[i]->operands[k].node->post_id]++;
  for (int i = 0; i < g.n_inputs; i++)
    if (!g.inputs[i]->data) {
      rc = core_error(KILN_ERR_STATE, "lazy graph execution: an input's value was lost (it was "
                                      "donated to a graph execution that failed)");
      goto done;
    }
  int donated = 0;
  /* anomaly mode replays the graph on its inputs if the step makes a NaN */
  bool anomaly = kiln_is_anomaly_enabled();
  if (anomaly) donate = false;
  for (int i = 0; i < g.n_inputs; i++) {
    lazy_node *x = g.inputs[i];
    double v;
    switch (x->scalar_tag) {
    case OP_VAL_FLOAT:
      kiln_item(x->data, &v);
      ins[i] = (exec_value){.tag = EXEC_V_FLOAT, .f = v};
      break;
    case OP_VAL_INT:
      ins[i] = (exec_value){.tag = EXEC_V_INT, .i = *(int64_t *)core_data(x->data)};
      break;
    case OP_VAL_BOOL:
      ins[i] = (exec_value){.tag = EXEC_V_BOOL, .b = *(bool *)core_data(x->data)};
      break;
    default:
      if (donate && donatable(x, uses)) { /* the node's reference moves to the run */
        core_storage_thaw(x->data->storage); /* the run may write it: Note [Frozen storage] */
        ins[i] = (exec_value){.tag = EXEC_V_TENSOR, .t = x->data};
        x->data = NULL;
        donated++;
      } else {
        ins[i] = (exec_value){.tag = EXEC_V_TENSOR, .t = kiln_retain(x->data)};
      }
      break;
    }
  }
  lazy_metric_add(LAZY_M_DONATED_BUFFERS, donated);
  int64_t t0 = now_ns();
  bool prev = kiln_set_grad_enabled(false); /* the graph already holds the backward */
  op_pack_scope_begin(); /* Note [Packed B cache] */
  rc = exec_code_run_owned(code, ins, outs);
  op_pack_scope_end();
  kiln_set_grad_enabled(prev);
  lazy_metric_add(LAZY_M_EXECUTE_TIME, now_ns() - t0);
  lazy_metric_add(LAZY_M_EXECUTE_GRAPH, 1);
  if (rc < 0) {
    if (donated)
      core_error_prefix("lazy graph execution (the values of %d donated inputs are lost): ",
                        donated);
    else
      core_error_prefix("lazy graph execution: ");
    goto done;
  }
  for (int i = 0; i < n; i++)
    if (outs[i].tag != EXEC_V_TENSOR) {
      rc = core_error(KILN_ERR_STATE, "lazy graph execution: root %d is not a tensor%s", i,
                      donated ? " (the values of its donated inputs are lost)" : "");
      goto done;
    }
  if (anomaly) { /* Note in lazy_anomaly.c; the tensors stay pending */
    bool bad = false;
    for (int i = 0; i < n && !bad; i++) bad = exec_lazy_any_nonfinite(&outs[i].t, 1);
    if (bad) {
      rc = exec_lazy_anomaly(g.order, g.n_order);
      goto done;
    }
  }
  /* nothing below allocates: every root is rebound, or none was */
  for (int i = 0; i < n; i++) {
    /* a result no other tensor shares is the device's alone: Note [Frozen
     * storage] (a view of an input, a constant of the code, or a root
     * given twice is not) */
    kiln_tensor *r = outs[i].t;
    if (r->refcount == 1 && r->storage && r->storage->refcount == 1)
      core_storage_freeze(r->storage);
    lazy_data_node_fill(made[i], outs[i].t);
    lazy_rebind(ts[i], made[i], 0);
  }
done:
  for (int i = 0; made && i < n; i++) lazy_node_release(made[i]);
  core_free(made);
  if (outs)
    for (int i = 0; i < n; i++) exec_value_clear(&outs[i]);
  core_free(ins);
  core_free(outs);
  core_free(uses);
  graph_free(&g);
  return rc;
}

kiln_status kiln_mark_step(void) {
  int n = 0, cap = 0, rc = 0;
  kiln_tensor **ts = NULL;
  lazy_metric_add(LAZY_M_MARK_STEP, 1);
  for (lazy_state *s = lazy_live_first(); s; s = s->next) {
    if (!lazy_is_pending(s->owner)) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      kiln_tensor **t2 = core_realloc(ts, (size_t)cap * sizeof *t2);
      if (!t2) {
        core_free(ts);
        return KILN_ERR_NOMEM;
      }
      ts = t2;
    }
    ts[n++] = s->owner;
  }
  if (n) {
    /* hold them: running the graph must not free a root */
    for (int i = 0; i < n; i++) kiln_retain(ts[i]);
    rc = sync_tensors(ts, n, true);
    for (int i = 0; i < n; i++) kiln_release(ts[i]);
  }
  core_free(ts);
  return rc;
}

static kiln_tensor *materialize(const kiln_tensor *t) {
  kiln_tensor *tt = (kiln_tensor *)t;
  if (lazy_is_pending(tt) && sync_tensors(&tt, 1, false) < 0) return NULL;
  lazy_node *d = lazy_of(t)->value.node;
  return kiln_retain(d->data);
}

/* Note [Thread exit] (core/thread.c): the exiting thread's lazy device. */
static void release_device(void) {
  while (n_cache) evict_lru();
  core_free(cache);
  cache = NULL;
  for (int i = 0; i < n_history; i++) {
    core_free(history[i].inputs);
    core_free(history[i].root_ids);
  }
  n_history = 0;
  core_free(last_graph);
  last_graph = NULL;
}

__attribute__((constructor)) static void lazy_sync_ctor(void) {
  core_lazy_materialize_hook = materialize;
  core_thread_on_exit(release_device);
}

kiln_tensor *kiln_to_cpu(kiln_tensor *t) {
  if (!t) {
    core_error(KILN_ERR_INVALID, "to_cpu: tensor is NULL");
    return NULL;
  }
  if (t->device != CORE_DEVICE_LAZY) return core_autorelease(kiln_retain(t));
  kiln_tensor *c = materialize(t);
  if (!c) return NULL;
  /* a private handle: the caller may write to it without touching the
   * lazy tensor's device data */
  kiln_tensor *r = core_tensor_new(c->ndim, c->shape, c->dtype);
  if (r) op_copy_into(r, c);
  kiln_release(c);
  return core_autorelease(r);
}
