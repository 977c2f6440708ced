/* tests/ir/test_ir_corpus.c: the TorchScript corpus (tests/data/ir, from
 * scripts/gen_ir_corpus.py): every graph parses, verifies, prints back
 * byte for byte, round-trips, clones; and parsing any truncation or
 * corruption of a graph fails cleanly (no crash, no leak under SAN). */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/ir.h"
#include "test.h"

#define CORPUS "tests/data/ir/"

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the corpus graphs (without ".ir"); returns the count. */
static int corpus_names(char names[][64], int max) {
  DIR *d = opendir(CORPUS);
  int n = 0;
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < max) {
    size_t l = strlen(e->d_name);
    if (l > 3 && l < 60 && strcmp(e->d_name + l - 3, ".ir") == 0) {
      memcpy(names[n], e->d_name, l - 3);
      names[n++][l - 3] = 0;
    }
  }
  closedir(d);
  char *ptrs[256];
  for (int i = 0; i < n; i++) ptrs[i] = names[i];
  qsort(ptrs, (size_t)n, sizeof *ptrs, cmp_str);
  char tmp[256][64];
  for (int i = 0; i < n; i++) strcpy(tmp[i], ptrs[i]);
  memcpy(names, tmp, (size_t)n * 64);
  return n;
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

TEST(ir_corpus_round_trip) {
  static char names[256][64];
  int n = corpus_names(names, 256);
  CHECK_MSG(n >= 40, "only %d graphs in " CORPUS, n);
  int exact = 0;
  for (int i = 0; i < n; i++) {
    char path[256];
    size_t len;
    snprintf(path, sizeof path, CORPUS "%.63s.ir", names[i]);
    char *text = test_read_file(path, &len);
    if (!text) {
      CHECK_MSG(0, "cannot read %s", path);
      continue;
    }
    ir_graph *g = ir_graph_parse(text, len);
    CHECK_MSG(g, "%s: %s", names[i], kiln_last_error());
    if (!g) {
      free(text);
      continue;
    }
    CHECK_MSG(ir_graph_verify(g) == 0, "%s: %s", names[i], kiln_last_error());
    /* print(parse(text)) is PyTorch's text itself, comments included */
    char *p1 = ir_graph_print(g, 0);
    if (p1 && strcmp(p1, text) == 0) exact++;
    else CHECK_MSG(0, "%s: printed text differs from PyTorch's", names[i]);
    /* parse(print(g)) prints the same again */
    ir_graph *g2 = p1 ? ir_graph_parse(p1, strlen(p1)) : NULL;
    CHECK_MSG(g2, "%s: reparse: %s", names[i], kiln_last_error());
    char *p2 = g2 ? ir_graph_print(g2, 0) : NULL;
    CHECK_MSG(p2 && strcmp(p1, p2) == 0, "%s: print(parse(print)) differs", names[i]);
    /* without source comments it is still stable */
    char *q1 = ir_graph_print(g, IR_PRINT_NO_SOURCE);
    ir_graph *g3 = q1 ? ir_graph_parse(q1, strlen(q1)) : NULL;
    char *q2 = g3 ? ir_graph_print(g3, 0) : NULL;
    CHECK_MSG(q2 && strcmp(q1, q2) == 0, "%s: no-source round trip differs", names[i]);
    CHECK(!q1 || !strchr(q1, '#'));
    /* a clone prints identically and verifies */
    ir_graph *c = ir_graph_clone(g);
    char *pc = c ? ir_graph_print(c, 0) : NULL;
    CHECK_MSG(pc && strcmp(pc, text) == 0, "%s: clone prints differently", names[i]);
    CHECK_MSG(c && ir_graph_verify(c) == 0, "%s: clone: %s", names[i], kiln_last_error());
    /* the generator wrote one .npy per tensor input and a literal otherwise */
    const ir_block *top = ir_graph_top(g);
    for (int k = 0; k < ir_block_n_params(top); k++) {
      char in[256];
      snprintf(in, sizeof in, CORPUS "%.63s/in%d.npy", names[i], k);
      CHECK_MSG(file_exists(in) == ir_type_is_tensor(ir_block_param(top, k)->type),
                "%s: input %d and %s disagree", names[i], k, in);
    }
    char meta[256];
    snprintf(meta, sizeof meta, CORPUS "%.63s/meta.json", names[i]);
    CHECK_MSG(file_exists(meta), "%s missing", meta);
    core_free(p1);
    core_free(p2);
    core_free(q1);
    core_free(q2);
    core_free(pc);
    ir_graph_free(g);
    ir_graph_free(g2);
    ir_graph_free(g3);
    ir_graph_free(c);
    free(text);
  }
  test_note("%d graphs, %d printed back byte for byte", n, exact);
}

/* Which kinds the corpus exercises: every one must be an op-table op or a
 * prims.def entry (parsing guarantees that); count both for the note. */
TEST(ir_corpus_kinds) {
  static char names[256][64];
  int n = corpus_names(names, 256);
  bool ops[OP_INDEX_COUNT] = {0}, prims[IR_PRIM_COUNT] = {0}; /* in-place forms too */
  for (int i = 0; i < n; i++) {
    char path[256];
    size_t len;
    snprintf(path, sizeof path, CORPUS "%.63s.ir", names[i]);
    char *text = test_read_file(path, &len);
    ir_graph *g = text ? ir_graph_parse(text, len) : NULL;
    if (!g) {
      free(text);
      continue;
    }
    /* walk every node (blocks included) */
    const ir_node *stack[512];
    int sp = 0;
    for (const ir_node *m = ir_graph_top(g)->first; m; m = m->next) stack[sp++] = m;
    while (sp > 0) {
      const ir_node *m = stack[--sp];
      if (m->op >= 0) ops[m->op] = true;
      else prims[m->prim] = true;
      for (int b = 0; b < m->n_blocks; b++)
        for (const ir_node *k = m->blocks[b]->first; k && sp < 512; k = k->next) stack[sp++] = k;
    }
    ir_graph_free(g);
    free(text);
  }
  int n_ops = 0, n_prims = 0;
  for (int i = 0; i < KILN_OP_COUNT; i++) n_ops += ops[i];
  for (int i = 0; i < IR_PRIM_COUNT; i++) n_prims += prims[i];
  CHECK(ops[KILN_OP_LINEAR] && ops[KILN_OP_CROSS_ENTROPY] && ops[KILN_OP_NLL_LOSS] &&
        ops[KILN_OP_MSE_LOSS] && ops[KILN_OP_SOFTMAX] && ops[KILN_OP_LOG_SOFTMAX] &&
        ops[KILN_OP_MATMUL] && ops[KILN_OP_CHUNK] && ops[KILN_OP_CAT] && ops[KILN_OP_STACK] &&
        ops[KILN_OP_WHERE] && ops[KILN_OP_CLAMP] && ops[KILN_OP_GELU] && ops[KILN_OP_POW]);
  CHECK(prims[IR_PRIM_IF] && prims[IR_PRIM_LOOP] && prims[IR_PRIM_LIST_CONSTRUCT] &&
        prims[IR_PRIM_LIST_UNPACK] && prims[IR_PRIM_TUPLE_CONSTRUCT] &&
        prims[IR_PRIM_TUPLE_UNPACK] && prims[IR_PRIM_RAISE_EXCEPTION] && prims[IR_PRIM_SIZE] &&
        prims[IR_PRIM_GETITEM] && prims[IR_PRIM_FLOAT]);
  test_note("%d op-table ops and %d builtins used", n_ops, n_prims);
}

/* Parses text[0, n) from a buffer of exactly n bytes (so ASan sees any
 * read past the end). Returns the graph or NULL. */
static ir_graph *parse_exact(const char *text, size_t n) {
  char *buf = malloc(n ? n : 1);
  if (n) memcpy(buf, text, n);
  ir_graph *g = ir_graph_parse(buf, n);
  free(buf);
  return g;
}

/* "12:34: ..." */
static bool has_position(const char *msg) {
  int line, col;
  char c;
  return sscanf(msg, "%d:%d%c", &line, &col, &c) == 3 && c == ':' && line > 0 && col > 0;
}

TEST(ir_parse_truncated_everywhere) {
  static const char *graphs[] = {"while_loop", "cross_entropy", "lstm_cell", "loop_with_if"};
  int bad = 0, total = 0;
  for (size_t gi = 0; gi < sizeof graphs / sizeof *graphs; gi++) {
    char path[256];
    size_t len;
    snprintf(path, sizeof path, CORPUS "%s.ir", graphs[gi]);
    char *text = test_read_file(path, &len);
    if (!text) {
      CHECK_MSG(0, "cannot read %s", path);
      continue;
    }
    /* the graph is complete once its return line is */
    const char *ret = strstr(text, "\n  return (");
    size_t complete = ret ? (size_t)(strchr(ret + 1, ')') - text) + 1 : len;
    for (size_t k = 0; k < len; k++) {
      ir_graph *g = parse_exact(text, k);
      total++;
      if (k < complete) {
        if (g || !has_position(kiln_last_error())) {
          bad++;
          CHECK_MSG(0, "%s cut at %zu: %s", graphs[gi], k, g ? "parsed" : kiln_last_error());
        }
      } else {
        CHECK_MSG(g && ir_graph_verify(g) == 0, "%s cut at %zu (complete): %s", graphs[gi], k,
                  kiln_last_error());
      }
      ir_graph_free(g);
    }
    free(text);
  }
  test_note("%d truncations, %d bad", total, bad);
}

TEST(ir_parse_corrupted_everywhere) {
  /* Replace each byte by characters that matter to the grammar: whatever
   * happens, no crash; a graph that still parses must verify. */
  static const char subst[] = {'(', ')', '%', '"', '#', '\0', ':', '[', '-', '9', '.', ',', 'x'};
  size_t len;
  char *text = test_read_file(CORPUS "loop_with_if.ir", &len);
  if (!text) {
    CHECK_MSG(0, "cannot read loop_with_if.ir");
    return;
  }
  int parsed = 0, failed = 0;
  char *buf = malloc(len);
  for (size_t k = 0; k < len; k++)
    for (size_t s = 0; s < sizeof subst; s++) {
      if (text[k] == subst[s]) continue;
      memcpy(buf, text, len);
      buf[k] = subst[s];
      ir_graph *g = ir_graph_parse(buf, len);
      if (g) {
        parsed++;
        CHECK_MSG(ir_graph_verify(g) == 0, "byte %zu -> 0x%02x parsed but fails to verify: %s", k,
                  (unsigned char)subst[s], kiln_last_error());
        char *p = ir_graph_print(g, 0);
        ir_graph *g2 = p ? ir_graph_parse(p, strlen(p)) : NULL;
        CHECK_MSG(g2, "byte %zu -> 0x%02x: printed graph does not reparse: %s", k,
                  (unsigned char)subst[s], kiln_last_error());
        ir_graph_free(g2);
        core_free(p);
      } else {
        failed++;
        CHECK_MSG(has_position(kiln_last_error()), "byte %zu -> 0x%02x: message without "
                  "position: %s", k, (unsigned char)subst[s], kiln_last_error());
      }
      ir_graph_free(g);
    }
  free(buf);
  free(text);
  test_note("%d corruptions parsed (and verified), %d rejected", parsed, failed);
}

TEST(ir_parse_out_of_memory) {
  /* Every allocation of a parse fails in turn: a clean NOMEM each time. */
  size_t len;
  char *text = test_read_file(CORPUS "cross_entropy.ir", &len);
  if (!text) {
    CHECK_MSG(0, "cannot read cross_entropy.ir");
    return;
  }
  core_alloc_fail_at(0);
  ir_graph *g = ir_graph_parse(text, len);
  long needed = core_alloc_fail_at(0);
  CHECK(g);
  ir_graph_free(g);
  int failures = 0;
  for (long k = 1; k <= needed; k++) {
    core_alloc_fail_at(k);
    g = ir_graph_parse(text, len);
    core_alloc_fail_at(0);
    if (!g) {
      failures++;
      CHECK_MSG(strstr(kiln_last_error(), "out of memory"), "alloc %ld: %s", k, kiln_last_error());
    }
    ir_graph_free(g);
  }
  /* and the same for printing and cloning */
  g = ir_graph_parse(text, len);
  for (long k = 1; g && k <= 64; k++) {
    core_alloc_fail_at(k);
    char *p = ir_graph_print(g, 0);
    ir_graph *c = ir_graph_clone(g);
    core_alloc_fail_at(0);
    core_free(p);
    ir_graph_free(c);
  }
  ir_graph_free(g);
  CHECK(failures == needed);
  test_note("%ld allocations per parse, each failure handled", needed);
  free(text);
}
