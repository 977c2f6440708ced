/* tests/ops/test_gradcheck.c: table-driven checks over every op.
 *
 * - every op has infer and cpu (or decomposes), and a grad formula when it
 *   says it is differentiable;
 * - every differentiable op has a sample (tests/ops/sample.h);
 * - gradcheck: analytic gradients (the engine, through the op's formula)
 *   equal central finite differences in float64, eps 1e-6, atol 1e-5,
 *   rtol 1e-3, as torch.autograd.gradcheck;
 * - gradgradcheck: for ops whose formula is itself differentiable (no
 *   OPF_NO_DOUBLE), the gradient of <grad, v> equals finite differences of
 *   the first-order analytic gradient;
 * - inference agrees with the kernel's output shapes and dtypes. */
#include <stdlib.h>

#include "sample.h"
#include "test.h"

#define GC_EPS 1e-6
#define GC_MAX_OUTS 16

typedef struct gc_case {
  const sample_entry *e;
  op_sample s;
  kiln_tensor *slots[SAMPLE_MAX_SLOTS];
  int n_slots;
  kiln_tensor *w[GC_MAX_OUTS]; /* random weights per output */
  int n_outs;
} gc_case;

/* Runs the op (reseeding the default generator so random ops repeat). */
static int run_op(gc_case *c, kiln_tensor **outs) {
  kiln_manual_seed(1234);
  return op_call(c->e->op, c->s.args, c->s.n_args, outs, GC_MAX_OUTS);
}

/* f = sum_k <out_k, w_k> over floating outputs, without autograd. */
static double eval_f(gc_case *c, bool *ok) {
  kiln_tensor *outs[GC_MAX_OUTS];
  double f = 0;
  kiln_scope_begin();
  kiln_no_grad_begin();
  int n = run_op(c, outs);
  kiln_no_grad_end();
  *ok = n == c->n_outs;
  for (int k = 0; *ok && k < n; k++) {
    if (!c->w[k]) continue;
    int64_t m = kiln_tensor_numel(outs[k]);
    for (int64_t i = 0; i < m; i++) f += core_get_flat(outs[k], i) * core_get_flat(c->w[k], i);
  }
  kiln_scope_end();
  return f;
}

static double *elem_ptr(kiln_tensor *t, int64_t i) {
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    off += (i % t->shape[d]) * t->strides[d];
    i /= t->shape[d];
  }
  return (double *)core_data(t) + off;
}

static bool checkable(const gc_case *c, int slot) {
  kiln_tensor *t = c->slots[slot];
  return t->dtype == KILN_DTYPE_F64 && !c->s.skip_slot[slot];
}

/* Builds the case: sample, slots, weights. Returns false (with a test
 * failure) if the sample cannot run. */
static bool setup(gc_case *c, const sample_entry *e, kiln_generator *g) {
  memset(c, 0, sizeof *c);
  c->e = e;
  e->fn(&c->s, g);
  c->n_slots = op_slots(c->s.args, c->s.n_args, c->slots, SAMPLE_MAX_SLOTS);
  for (int i = 0; i < c->n_slots; i++)
    if (checkable(c, i)) kiln_set_requires_grad(c->slots[i], true);
  kiln_tensor *outs[GC_MAX_OUTS];
  kiln_no_grad_begin();
  int n = run_op(c, outs);
  kiln_no_grad_end();
  if (n < 0) {
    test_fail(__FILE__, __LINE__, "%s: op failed: %s", e->name, kiln_last_error());
    return false;
  }
  c->n_outs = n;
  for (int k = 0; k < n && k < GC_MAX_OUTS; k++)
    if (core_dtype_is_floating(outs[k]->dtype) && !(c->s.skip_outs >> k & 1u))
      c->w[k] = kiln_randn(outs[k]->ndim, outs[k]->shape, KILN_DTYPE_F64, g);
  return true;
}

/* Analytic first-order gradients of f w.r.t. each checkable slot. */
static int analytic(gc_case *c, bool create_graph, kiln_tensor **grads) {
  kiln_tensor *outs[GC_MAX_OUTS], *fo[GC_MAX_OUTS], *fw[GC_MAX_OUTS], *ins[SAMPLE_MAX_SLOTS];
  int n = run_op(c, outs), n_f = 0, n_in = 0, idx[SAMPLE_MAX_SLOTS];
  if (n < 0) return n;
  for (int k = 0; k < n; k++)
    if (c->w[k] && kiln_requires_grad(outs[k])) {
      fo[n_f] = outs[k];
      fw[n_f++] = c->w[k];
    }
  for (int i = 0; i < c->n_slots; i++)
    if (checkable(c, i)) {
      idx[n_in] = i;
      ins[n_in++] = c->slots[i];
    }
  kiln_tensor *got[SAMPLE_MAX_SLOTS] = {0};
  kiln_backward_opts o = {.create_graph = create_graph};
  int rc = n_f ? kiln_grad(fo, fw, n_f, ins, n_in, &o, got) : 0;
  for (int j = 0; j < n_in; j++) grads[idx[j]] = got[j];
  return rc;
}

static void compare(const gc_case *c, const char *what, int slot, int64_t i, double num,
                    double ana) {
  double atol = c->s.atol > 0 ? c->s.atol : 1e-5, rtol = c->s.rtol > 0 ? c->s.rtol : 1e-3;
  if (!(fabs(num - ana) <= atol + rtol * fabs(num)))
    test_fail(__FILE__, __LINE__, "%s %s: input %d element %lld: numeric %.8g analytic %.8g",
              c->e->name, what, slot, (long long)i, num, ana);
}

static void gradcheck_one(const sample_entry *e, kiln_generator *g, bool second) {
  gc_case c;
  kiln_scope_begin();
  if (!setup(&c, e, g)) goto done;
  kiln_tensor *grads[SAMPLE_MAX_SLOTS] = {0};
  if (analytic(&c, second, grads) < 0) {
    test_fail(__FILE__, __LINE__, "%s: backward failed: %s", e->name, kiln_last_error());
    goto done;
  }
  if (!second) {
    for (int s = 0; s < c.n_slots; s++) {
      if (!checkable(&c, s)) continue;
      int64_t m = kiln_tensor_numel(c.slots[s]);
      for (int64_t i = 0; i < m; i++) {
        double *p = elem_ptr(c.slots[s], i), x0 = *p;
        bool ok1, ok2;
        *p = x0 + GC_EPS;
        double fp = eval_f(&c, &ok1);
        *p = x0 - GC_EPS;
        double fm = eval_f(&c, &ok2);
        *p = x0;
        double ana = grads[s] ? core_get_flat(grads[s], i) : 0.0;
        compare(&c, "grad", s, i, (fp - fm) / (2 * GC_EPS), ana);
      }
    }
    goto done;
  }
  /* second order: h(x) = sum_s <grad_s(x), v_s>; dh/dx analytic vs numeric */
  kiln_tensor *v[SAMPLE_MAX_SLOTS] = {0}, *terms[SAMPLE_MAX_SLOTS], *ins[SAMPLE_MAX_SLOTS];
  int n_terms = 0, n_in = 0, idx[SAMPLE_MAX_SLOTS];
  for (int s = 0; s < c.n_slots; s++) {
    if (!checkable(&c, s)) continue;
    v[s] = kiln_randn(c.slots[s]->ndim, c.slots[s]->shape, KILN_DTYPE_F64, g);
    idx[n_in] = s;
    ins[n_in++] = c.slots[s];
    if (grads[s] && kiln_requires_grad(grads[s]))
      terms[n_terms++] = kiln_sum(kiln_mul(grads[s], v[s]), NULL, 0, false);
  }
  kiln_tensor *gg[SAMPLE_MAX_SLOTS] = {0};
  if (n_terms) {
    kiln_tensor *h = terms[0];
    for (int k = 1; k < n_terms; k++) h = kiln_add(h, terms[k]);
    if (kiln_grad(&h, NULL, 1, ins, n_in, NULL, gg) < 0) {
      test_fail(__FILE__, __LINE__, "%s: double backward failed: %s", e->name,
                kiln_last_error());
      goto done;
    }
  }
  for (int j = 0; j < n_in; j++) {
    int s = idx[j];
    int64_t m = kiln_tensor_numel(c.slots[s]);
    for (int64_t i = 0; i < m; i++) {
      double *p = elem_ptr(c.slots[s], i), x0 = *p, hp = 0, hm = 0;
      for (int sign = 0; sign < 2; sign++) {
        *p = sign == 0 ? x0 + GC_EPS : x0 - GC_EPS;
        kiln_scope_begin();
        kiln_tensor *gs[SAMPLE_MAX_SLOTS] = {0};
        double h = 0;
        if (analytic(&c, false, gs) == 0)
          for (int s2 = 0; s2 < c.n_slots; s2++) {
            if (!gs[s2] || !v[s2]) continue;
            int64_t m2 = kiln_tensor_numel(gs[s2]);
            for (int64_t k = 0; k < m2; k++)
              h += core_get_flat(gs[s2], k) * core_get_flat(v[s2], k);
          }
        kiln_scope_end();
        if (sign == 0) hp = h;
        else hm = h;
      }
      *p = x0;
      double ana = gg[j] ? core_get_flat(gg[j], i) : 0.0;
      compare(&c, "gradgrad", s, i, (hp - hm) / (2 * GC_EPS), ana);
    }
  }
done:
  kiln_scope_end();
}

static bool has_sample(int op) {
  int n;
  const sample_entry *e = sample_all(&n);
  for (int i = 0; i < n; i++)
    if (e[i].op == op) return true;
  return false;
}

TEST(op_table_complete) {
  int n_ops = 0;
  for (int op = 0; op < KILN_OP_COUNT; op++) {
    const op_info *info = &op_table[op];
    n_ops++;
    CHECK_MSG(strncmp(info->name, "aten::", 6) == 0, "%s: not an aten name", info->name);
    /* passes that move nodes (Note [Sinking]) rely on the flag */
    CHECK_MSG(!(info->flags & OPF_INPLACE) == !op_writes_arg(op, 0),
              "%s: OPF_INPLACE must mark exactly the schemas that write self", info->name);
    /* Note [Buffer reuse]: the interpreter hands such an op its self as the output */
    if (info->flags & OPF_SELF_OUT)
      CHECK_MSG(!(info->flags & (OPF_ELEMENTWISE | OPF_ALLOCS | OPF_VIEW | OPF_DECOMPOSES |
                                 OPF_LIST_OUT | OPF_INPLACE)) &&
                    strstr(info->schema, "(Tensor self,") && strstr(info->schema, ") -> Tensor") &&
                    !strstr(info->schema, "-> Tensor,"),
                "%s: OPF_SELF_OUT needs a Tensor self, one Tensor result and a kernel that "
                "fills a given output", info->name);
    if (info->flags & OPF_DECOMPOSES) {
      CHECK_MSG(info->decompose != NULL, "%s: decomposes but has no _decompose", info->name);
      continue;
    }
    CHECK_MSG(info->infer && info->cpu, "%s: missing infer or cpu", info->name);
    if (info->flags & OPF_ELEMENTWISE)
      CHECK_MSG(info->tiles != NULL, "%s: elementwise without tiles", info->name);
    if (info->flags & OPF_DIFF)
      CHECK_MSG(info->grad != NULL, "%s: differentiable but has no _grad", info->name);
    else
      CHECK_MSG(info->grad == NULL, "%s: has a _grad but no OPF_DIFF flag", info->name);
  }
  test_note("%d ops", n_ops);
}

TEST(gradcheck_all_ops) {
  int n, covered = 0;
  const sample_entry *e = sample_all(&n);
  kiln_generator *g = kiln_generator_new(7);
  for (int op = 0; op < KILN_OP_COUNT; op++)
    if ((op_table[op].flags & OPF_DIFF) && !has_sample(op))
      test_fail(__FILE__, __LINE__, "%s is differentiable but has no gradcheck sample",
                op_table[op].name);
  for (int op = 0; op < KILN_OP_COUNT; op++) {
    if (!(op_table[op].flags & OPF_DIFF)) continue;
    bool any = false;
    for (int i = 0; i < n; i++)
      if (e[i].op == op) {
        gradcheck_one(&e[i], g, false);
        any = true;
      }
    covered += any;
  }
  kiln_generator_free(g);
  test_note("gradcheck covered %d differentiable ops", covered);
}

TEST(gradgradcheck_all_ops) {
  int n, covered = 0;
  const sample_entry *e = sample_all(&n);
  kiln_generator *g = kiln_generator_new(11);
  for (int op = 0; op < KILN_OP_COUNT; op++) {
    unsigned f = op_table[op].flags;
    if (!(f & OPF_DIFF) || (f & OPF_NO_DOUBLE)) continue;
    bool any = false;
    for (int i = 0; i < n; i++)
      if (e[i].op == op) {
        gradcheck_one(&e[i], g, true);
        any = true;
      }
    covered += any;
  }
  kiln_generator_free(g);
  test_note("gradgradcheck covered %d ops", covered);
}

TEST(infer_matches_kernel) {
  int n;
  const sample_entry *e = sample_all(&n);
  kiln_generator *g = kiln_generator_new(3);
  for (int i = 0; i < n; i++) {
    const op_info *info = &op_table[e[i].op];
    if (!info->infer) continue;
    kiln_scope_begin();
    op_sample s;
    memset(&s, 0, sizeof s);
    e[i].fn(&s, g);
    op_meta metas[GC_MAX_OUTS];
    kiln_tensor *outs[GC_MAX_OUTS];
    int ni = info->infer(s.args, s.n_args, metas, GC_MAX_OUTS);
    kiln_manual_seed(1);
    int nk = op_call(e[i].op, s.args, s.n_args, outs, GC_MAX_OUTS);
    CHECK_MSG(ni == nk, "%s: infer says %d outputs, kernel made %d", e[i].name, ni, nk);
    for (int k = 0; k < ni && k < nk; k++) {
      CHECK_MSG(metas[k].dtype == outs[k]->dtype && metas[k].ndim == outs[k]->ndim &&
                    !memcmp(metas[k].shape, outs[k]->shape,
                            (size_t)metas[k].ndim * sizeof(int64_t)),
                "%s: output %d: inferred meta differs from the kernel's", e[i].name, k);
    }
    kiln_scope_end();
  }
  kiln_generator_free(g);
}
