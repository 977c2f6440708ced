/* tests/autograd/test_dot.c: the autograd graph dump: parameters' and
 * unnamed leaves' AccumulateGrad nodes, execution order equal to what the
 * engine really does (checked with hooks), escaping, errors, and that
 * Graphviz's dot accepts the text. */
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"
#include "test.h"

/* Does Graphviz's dot accept text (exit 0, nothing on stderr)? When dot is
 * not installed the check is skipped with a note (scripts/deps.sh --test
 * installs it). */
static bool dot_accepts(const char *text) {
  if (system("command -v dot >/dev/null 2>&1") != 0) {
    test_note("dot not on PATH: Graphviz parse check skipped");
    return true;
  }
  char path[] = "/tmp/kiln_dot_XXXXXX", cmd[160], out[2048] = "";
  int fd = mkstemp(path);
  if (fd < 0) return false;
  size_t n = strlen(text);
  bool ok = write(fd, text, n) == (ssize_t)n;
  close(fd);
  snprintf(cmd, sizeof cmd, "dot -Tsvg -o /dev/null %s 2>&1", path);
  FILE *p = popen(cmd, "r");
  if (!p) ok = false;
  size_t got = p ? fread(out, 1, sizeof out - 1, p) : 0;
  out[got] = 0;
  int status = p ? pclose(p) : -1;
  unlink(path);
  CHECK_MSG(ok && status == 0 && got == 0, "dot rejected the text (status %d): %s", status,
            out);
  return ok && status == 0 && got == 0;
}

static kiln_tensor *param(int ndim, const int64_t *shape, const char *name, double scale) {
  kiln_tensor *t = kiln_mul_scalar(kiln_rand(ndim, shape, KILN_DTYPE_F32, NULL), scale);
  if (!t) return NULL;
  t = kiln_detach(t);
  if (!t) return NULL;
  kiln_set_requires_grad(t, true);
  if (name) kiln_tensor_set_name(t, name);
  return t;
}

TEST(dot_mlp_names_every_parameter) {
  kiln_scope_begin();
  kiln_manual_seed(1);
  int64_t xs[2] = {4, 3}, w1s[2] = {3, 5}, b1s[1] = {5}, w2s[2] = {5, 2}, b2s[1] = {2};
  kiln_tensor *x = kiln_randn(2, xs, KILN_DTYPE_F32, NULL);
  kiln_tensor *w1 = param(2, w1s, "w1", 1), *b1 = param(1, b1s, "b1", 1);
  kiln_tensor *w2 = param(2, w2s, "w2", 1), *b2 = param(1, b2s, "b2", 1);
  kiln_tensor *h = kiln_relu(kiln_add(kiln_mm(x, w1), b1));
  kiln_tensor *loss = kiln_sum(kiln_add(kiln_mm(h, w2), b2), NULL, 0, false);
  CHECK_MSG(loss != NULL, "building the MLP failed: %s", kiln_last_error());
  char *dot = loss ? kiln_autograd_dot(loss) : NULL;
  CHECK_MSG(!loss || dot, "%s", kiln_last_error());
  if (dot) {
    CHECK(strncmp(dot, "digraph autograd {\n", 19) == 0);
    CHECK_STR_CONTAINS(dot, "AccumulateGrad\\nw1\\nFloat[3, 5]");
    CHECK_STR_CONTAINS(dot, "AccumulateGrad\\nb1\\nFloat[5]");
    CHECK_STR_CONTAINS(dot, "AccumulateGrad\\nw2\\nFloat[5, 2]");
    CHECK_STR_CONTAINS(dot, "AccumulateGrad\\nb2\\nFloat[2]");
    CHECK_STR_CONTAINS(dot, "aten::mm\\nFloat[4, 5]");
    CHECK_STR_CONTAINS(dot, "aten::relu");
    CHECK_STR_CONTAINS(dot, "aten::sum\\nFloat[]");
    /* root first: the sum runs at step 1 */
    CHECK_STR_CONTAINS(dot, "n0 [label=\"aten::sum\\nFloat[]\", xlabel=\"#1\"]");
    /* x needs no grad: no node for it */
    CHECK(!strstr(dot, "Float[4, 3]\""));
    dot_accepts(dot);
  }
  kiln_free(dot);
  kiln_scope_end();
}

/* ---- execution order equals the engine's ------------------------------------------ */

typedef struct order_log {
  char labels[16][128];
  int n;
} order_log;

static order_log seen;

/* Records the DOT label the node running now should have. */
static kiln_tensor *record(kiln_tensor *grad, void *ud) {
  if (seen.n < 16) snprintf(seen.labels[seen.n++], 128, "%s", (const char *)ud);
  return NULL;
}

/* The labels of DOT nodes sorted by their xlabel (execution step). */
static int dot_order(const char *dot, char out[][128], int max) {
  int n = 0;
  for (const char *line = dot; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char buf[512];
    if (len >= sizeof buf) continue;
    memcpy(buf, line, len);
    buf[len] = 0;
    if (strstr(buf, " -> ") || !strstr(buf, "[label=\"")) continue;
    char *lab = strstr(buf, "[label=\"") + 8, *q = lab;
    while (*q && !(*q == '"' && q[-1] != '\\')) q++;
    *q = 0;
    char *xl = strstr(q + 1, "xlabel=\"");
    if (!xl) continue;
    int step = xl[8] == '#' ? atoi(xl + 9) : 0;
    if (step >= 1 && step <= max) {
      snprintf(out[step - 1], 128, "%s", lab);
      if (step > n) n = step;
    }
  }
  return n;
}

TEST(dot_order_matches_the_engine) {
  kiln_scope_begin();
  int64_t s3 = 3;
  double av[3] = {1, 2, 3}, bv[3] = {0.5, -1, 2};
  kiln_tensor *a = kiln_from_data(av, 1, &s3, KILN_DTYPE_F64);
  kiln_tensor *b = kiln_from_data(bv, 1, &s3, KILN_DTYPE_F64);
  kiln_set_requires_grad(a, true);
  kiln_set_requires_grad(b, true);
  kiln_tensor_set_name(a, "a");
  kiln_tensor_set_name(b, "b");
  /* u is used twice and both leaves twice: dependency counts and the
   * AccumulateGrad tie decide the order. */
  kiln_tensor *u = kiln_mul(a, b), *v = kiln_add(u, a), *w = kiln_mul(v, u),
              *r = kiln_add(w, b);
  CHECK(r != NULL);
  if (!r) {
    kiln_scope_end();
    return;
  }
  char *dot = kiln_autograd_dot(r);
  CHECK(dot != NULL);
  seen.n = 0;
  kiln_register_hook(r, record, "aten::add\\nDouble[3]");
  kiln_register_hook(w, record, "aten::mul\\nDouble[3]");
  kiln_register_hook(v, record, "aten::add\\nDouble[3]");
  kiln_register_hook(u, record, "aten::mul\\nDouble[3]");
  kiln_register_hook(a, record, "AccumulateGrad\\na\\nDouble[3]");
  kiln_register_hook(b, record, "AccumulateGrad\\nb\\nDouble[3]");
  CHECK(kiln_backward(r, kiln_ones(1, &s3, KILN_DTYPE_F64)) == KILN_OK);
  char want[16][128];
  int n = dot ? dot_order(dot, want, 16) : 0;
  CHECK_EQ_INT(n, 6);
  CHECK_EQ_INT(seen.n, 6);
  for (int i = 0; i < n && i < seen.n; i++)
    CHECK_MSG(strcmp(want[i], seen.labels[i]) == 0, "step %d: dot says %s, engine ran %s",
              i + 1, want[i], seen.labels[i]);
  /* edges: 8 gradient deliveries, numbered 1..8 once each */
  if (dot) {
    char lab[32];
    for (int k = 1; k <= 8; k++) {
      snprintf(lab, sizeof lab, "[label=\"%d\"]", k);
      const char *p = strstr(dot, lab);
      CHECK_MSG(p && !strstr(p + 1, lab), "edge label %d missing or repeated", k);
    }
    CHECK(!strstr(dot, "[label=\"9\"]"));
    dot_accepts(dot);
  }
  kiln_free(dot);
  /* the graph is freed now, but its structure can still be drawn */
  dot = kiln_autograd_dot(r);
  CHECK(dot != NULL);
  kiln_free(dot);
  kiln_scope_end();
}

TEST(dot_escapes_names_and_shows_unnamed_leaves) {
  kiln_scope_begin();
  int64_t s23[2] = {2, 3};
  kiln_tensor *p = kiln_ones(2, s23, KILN_DTYPE_F32), *q = kiln_ones(2, s23, KILN_DTYPE_F32);
  kiln_set_requires_grad(p, true);
  kiln_set_requires_grad(q, true);
  kiln_tensor_set_name(p, "we\"ird\\name\nl2 \xc3\xa9 \xff}");
  kiln_tensor *y = kiln_mul(p, q);
  char *dot = kiln_autograd_dot(y);
  CHECK(dot != NULL);
  if (dot) {
    CHECK_STR_CONTAINS(dot, "AccumulateGrad\\nwe\\\"ird\\\\name\\nl2 \xc3\xa9 ?}\\nFloat[2, 3]");
    CHECK_STR_CONTAINS(dot, "AccumulateGrad\\nFloat[2, 3]\""); /* q, unnamed */
    dot_accepts(dot);
  }
  kiln_free(dot);
  kiln_scope_end();
}

TEST(dot_errors_and_leaf_roots) {
  kiln_scope_begin();
  int64_t s2 = 2;
  kiln_tensor *c = kiln_ones(1, &s2, KILN_DTYPE_F32);
  CHECK(kiln_autograd_dot(NULL) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "root is NULL");
  CHECK(kiln_autograd_dot(c) == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "does not require grad");
  CHECK(kiln_autograd_dot_write(c, "/tmp/x.dot") == KILN_ERR_INVALID);
  /* a leaf root: one AccumulateGrad node, made and dropped for the dump */
  kiln_set_requires_grad(c, true);
  kiln_tensor_set_name(c, "c");
  char *dot = kiln_autograd_dot(c);
  CHECK(dot != NULL);
  if (dot) {
    CHECK_STR_CONTAINS(dot, "n0 [label=\"AccumulateGrad\\nc\\nFloat[2]\"");
    CHECK(!strstr(dot, "->"));
    dot_accepts(dot);
  }
  /* the file form writes the same text; a bad path names itself */
  char path[] = "/tmp/kiln_dotw_XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  kiln_tensor *y = kiln_mul(c, c);
  char *text = kiln_autograd_dot(y);
  CHECK(kiln_autograd_dot_write(y, path) == KILN_OK);
  FILE *f = fopen(path, "rb");
  char back[4096] = "";
  size_t n = f ? fread(back, 1, sizeof back - 1, f) : 0;
  back[n] = 0;
  if (f) fclose(f);
  CHECK(text && strcmp(text, back) == 0);
  /* mul(c, c): two edges into one AccumulateGrad, numbered 1 and 2 */
  CHECK_STR_CONTAINS(text, "n0 -> n1 [label=\"1\"]");
  CHECK_STR_CONTAINS(text, "n0 -> n1 [label=\"2\"]");
  unlink(path);
  CHECK(kiln_autograd_dot_write(y, "/nonexistent-dir/g.dot") == KILN_ERR_IO);
  CHECK_STR_CONTAINS(kiln_last_error(), "/nonexistent-dir/g.dot");
  kiln_free(text);
  kiln_free(dot);
  kiln_scope_end();
}

/* Every allocation of the dump may fail: NULL, no leak, no crash. */
TEST(dot_allocation_failures) {
  kiln_scope_begin();
  int64_t s2 = 2;
  kiln_tensor *a = kiln_ones(1, &s2, KILN_DTYPE_F32);
  kiln_set_requires_grad(a, true);
  kiln_tensor *y = kiln_mul(kiln_add(a, a), a);
  int failed = 0;
  for (long k = 1; y && k < 200; k++) {
    core_alloc_fail_at(k);
    char *s = kiln_autograd_dot(y);
    core_alloc_fail_at(0);
    if (s) {
      kiln_free(s);
      break;
    }
    failed++;
  }
  CHECK(failed >= 3);
  kiln_scope_end();
}
