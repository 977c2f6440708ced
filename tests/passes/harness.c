/* tests/passes/harness.c: shared helpers of the pass tests (see harness.h). */
#include <stdlib.h>

#include "harness.h"

#define TH_MAX_IO 32

ir_graph *th_parse(const char *text) {
  ir_graph *g = ir_graph_parse(text, strlen(text));
  CHECK_MSG(g != NULL, "parse: %s\n%s", kiln_last_error(), text);
  if (g && ir_graph_verify(g) != 0) {
    CHECK_MSG(0, "verify: %s\n%s", kiln_last_error(), text);
    ir_graph_free(g);
    return NULL;
  }
  return g;
}

char *th_print(const ir_graph *g) { return ir_graph_print(g, IR_PRINT_NO_SOURCE); }

void th_expect(const char *what, int (*pass)(ir_graph *), const char *before,
               const char *after, int changes) {
  ir_graph *g = th_parse(before), *orig = th_parse(before), *want = th_parse(after);
  if (!g || !orig || !want) goto done;
  int rc = pass(g);
  if (changes < 0)
    CHECK_MSG(rc > 0, "%s: pass returned %d (%s)", what, rc, rc < 0 ? kiln_last_error() : "");
  else
    CHECK_MSG(rc == changes, "%s: pass returned %d, expected %d", what, rc, changes);
  CHECK_MSG(ir_graph_verify(g) == 0, "%s: verify after the pass: %s", what, kiln_last_error());
  char *got = th_print(g), *exp = th_print(want);
  CHECK_MSG(got && exp && strcmp(got, exp) == 0, "%s: got\n%s\nexpected\n%s", what,
            got ? got : "(null)", exp ? exp : "(null)");
  /* the result reads back as itself */
  ir_graph *again = got ? ir_graph_parse(got, strlen(got)) : NULL;
  CHECK_MSG(again != NULL, "%s: the result does not parse: %s", what, kiln_last_error());
  ir_graph_free(again);
  core_free(got);
  core_free(exp);
  th_check_same_random(what, orig, g, 3);
done:
  ir_graph_free(g);
  ir_graph_free(orig);
  ir_graph_free(want);
}

/* ---- inputs -------------------------------------------------------------------------- */

static exec_value random_tensor(const ir_type *t, kiln_generator *gen) {
  kiln_tensor *x = core_tensor_new(t->ndim, t->sizes, (kiln_dtype)t->dtype);
  if (!x) return EXEC_NONE;
  int64_t n = core_numel(t->ndim, t->sizes);
  void *d = core_data(x);
  for (int64_t i = 0; i < n; i++) {
    switch (t->dtype) {
    case KILN_DTYPE_F32: ((float *)d)[i] = (float)core_rand_normal(gen); break;
    case KILN_DTYPE_F64: ((double *)d)[i] = core_rand_normal(gen); break;
    case KILN_DTYPE_I64: ((int64_t *)d)[i] = (int64_t)(core_rand_u64(gen) % 7) - 3; break;
    default: ((bool *)d)[i] = core_rand_u64(gen) & 1; break;
    }
  }
  return (exec_value){.tag = EXEC_V_TENSOR, .t = x};
}

bool th_random_inputs(const ir_graph *g, kiln_generator *gen, exec_value *in) {
  const ir_block *top = ir_graph_top(g);
  int n = ir_block_n_params(top);
  for (int i = 0; i < n; i++) in[i] = EXEC_NONE;
  for (int i = 0; i < n; i++) {
    const ir_type *t = ir_block_param(top, i)->type;
    switch (t->kind) {
    case IR_TYPE_TENSOR: {
      bool concrete = t->dtype >= 0 && t->ndim >= 0;
      for (int k = 0; concrete && k < t->ndim; k++) concrete = t->sizes[k] >= 0;
      if (!concrete) goto fail;
      in[i] = random_tensor(t, gen);
      if (in[i].tag != EXEC_V_TENSOR) goto fail;
      break;
    }
    case IR_TYPE_INT: in[i] = (exec_value){.tag = EXEC_V_INT, .i = (int64_t)(core_rand_u64(gen) % 4)}; break;
    case IR_TYPE_FLOAT: in[i] = (exec_value){.tag = EXEC_V_FLOAT, .f = core_rand_normal(gen)}; break;
    case IR_TYPE_BOOL: in[i] = (exec_value){.tag = EXEC_V_BOOL, .b = core_rand_u64(gen) & 1}; break;
    default: goto fail;
    }
  }
  return true;
fail:
  for (int i = 0; i < n; i++) exec_value_clear(&in[i]);
  return false;
}

/* ---- running and comparing ------------------------------------------------------------- */

int th_run(const ir_graph *g, const exec_value *in, exec_value *out, int max_out) {
  exec_code *c = exec_compile(g, &exec_fusion_compile_opts);
  if (!c) return -1;
  int n = c->n_outputs;
  if (n > max_out) {
    exec_code_free(c);
    return core_error(KILN_ERR_INVALID, "th_run: %d outputs", n);
  }
  kiln_manual_seed(1234);
  kiln_scope_begin();
  int rc = exec_code_run(c, in, out);
  kiln_scope_end();
  exec_code_free(c);
  return rc < 0 ? rc : n;
}

bool th_values_equal(const exec_value *a, const exec_value *b, double tol, char *why, size_t n) {
  if (a->tag != b->tag) {
    snprintf(why, n, "%s vs %s", exec_tag_name(a->tag), exec_tag_name(b->tag));
    return false;
  }
  switch (a->tag) {
  case EXEC_V_NONE: return true;
  case EXEC_V_INT:
    if (a->i == b->i) return true;
    snprintf(why, n, "int %lld vs %lld", (long long)a->i, (long long)b->i);
    return false;
  case EXEC_V_FLOAT:
    if (a->f == b->f || (isnan(a->f) && isnan(b->f)) || fabs(a->f - b->f) <= tol) return true;
    snprintf(why, n, "float %.17g vs %.17g", a->f, b->f);
    return false;
  case EXEC_V_BOOL:
    if (a->b == b->b) return true;
    snprintf(why, n, "bool %d vs %d", a->b, b->b);
    return false;
  case EXEC_V_STR:
  case EXEC_V_DEVICE:
    if (strcmp(a->s, b->s) == 0) return true;
    snprintf(why, n, "'%s' vs '%s'", a->s, b->s);
    return false;
  case EXEC_V_LIST:
  case EXEC_V_TUPLE:
    if (a->list->n != b->list->n) {
      snprintf(why, n, "lengths %d vs %d", a->list->n, b->list->n);
      return false;
    }
    for (int i = 0; i < a->list->n; i++)
      if (!th_values_equal(&a->list->items[i], &b->list->items[i], tol, why, n)) return false;
    return true;
  case EXEC_V_TENSOR: {
    const kiln_tensor *x = a->t, *y = b->t;
    if (x->dtype != y->dtype || x->ndim != y->ndim) {
      snprintf(why, n, "tensor dtype/ndim %d/%d vs %d/%d", x->dtype, x->ndim, y->dtype, y->ndim);
      return false;
    }
    for (int i = 0; i < x->ndim; i++)
      if (x->shape[i] != y->shape[i]) {
        snprintf(why, n, "tensor shapes differ in dim %d", i);
        return false;
      }
    int64_t numel = core_numel(x->ndim, x->shape);
    for (int64_t i = 0; i < numel; i++) {
      double u = core_get_flat(x, i), v = core_get_flat(y, i);
      if (!(u == v || (isnan(u) && isnan(v)) || fabs(u - v) <= tol * (1 + fabs(u)))) {
        snprintf(why, n, "tensor element %lld: %.17g vs %.17g", (long long)i, u, v);
        return false;
      }
    }
    return true;
  }
  default:
    snprintf(why, n, "cannot compare %s", exec_tag_name(a->tag));
    return false;
  }
}

bool th_check_same(const char *what, const ir_graph *a, const ir_graph *b, const exec_value *in) {
  exec_value oa[TH_MAX_IO], ob[TH_MAX_IO];
  int na = th_run(a, in, oa, TH_MAX_IO);
  if (na < 0) return false;
  int nb = th_run(b, in, ob, TH_MAX_IO);
  CHECK_MSG(nb == na, "%s: after the pass the graph gives %d outputs, not %d (%s)", what, nb,
            na, nb < 0 ? kiln_last_error() : "");
  for (int i = 0; i < na && i < nb; i++) {
    char why[256] = "";
    CHECK_MSG(th_values_equal(&oa[i], &ob[i], 1e-12, why, sizeof why),
              "%s: output %d differs after the pass: %s", what, i, why);
  }
  for (int i = 0; i < na; i++) exec_value_clear(&oa[i]);
  for (int i = 0; i < nb; i++) exec_value_clear(&ob[i]);
  return true;
}

void th_check_same_random(const char *what, const ir_graph *a, const ir_graph *b, int runs) {
  exec_value in[TH_MAX_IO];
  if (ir_block_n_params(ir_graph_top(a)) > TH_MAX_IO) return;
  kiln_generator *gen = kiln_generator_new(42);
  for (int r = 0; r < runs; r++) {
    if (!th_random_inputs(a, gen, in)) break;
    th_check_same(what, a, b, in);
    for (int i = 0; i < ir_block_n_params(ir_graph_top(a)); i++) exec_value_clear(&in[i]);
  }
  kiln_generator_free(gen);
}
