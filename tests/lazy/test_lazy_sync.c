/* tests/lazy/test_lazy_sync.c: kiln_mark_step, reads, the compile cache and
 * its counters, recompile reasons (PyTorch 1.13's micro-checks, B.5). */
#include "exec/fusion_cc.h"
#include "lazy/lazy.h"
#include "test.h"

static int64_t ctr(const char *n) { return kiln_lazy_counter(n); }

/* (x @ w).relu() + s on lazy tensors; returns the lazy result. */
static kiln_tensor *step(kiln_tensor *x, kiln_tensor *w, double s) {
  return kiln_add_scalar(kiln_relu(kiln_mm(x, w)), s);
}

TEST(lazy_mark_step_counters) {
  int64_t sh[2] = {4, 4}, sh2[2] = {6, 4};
  kiln_generator *g = kiln_generator_new(3);
  kiln_scope_begin();
  kiln_lazy_metrics_reset();
  kiln_tensor *xc = kiln_randn(2, sh, KILN_DTYPE_F32, g), *wc = kiln_randn(2, sh, KILN_DTYPE_F32, g);
  kiln_tensor *x = kiln_to_lazy(xc), *w = kiln_to_lazy(wc);
  kiln_tensor *y = step(x, w, 1.5);
  CHECK(kiln_mark_step() == KILN_OK);
  CHECK_EQ_INT(ctr("MarkStep"), 1);
  CHECK_EQ_INT(ctr("UncachedCompile"), 1);
  CHECK_EQ_INT(ctr("ExecuteGraph"), 1);
  CHECK(!lazy_is_pending(y));
  /* values equal eager */
  kiln_tensor *ye = step(xc, wc, 1.5), *yc = kiln_to_cpu(y);
  for (int i = 0; i < 16; i++) CHECK_NEAR(core_get_flat(yc, i), core_get_flat(ye, i), 1e-6);
  CHECK_EQ_INT(ctr("ExecuteGraph"), 1); /* reading device data runs nothing */
  /* repeat, new data with the same shape: cached */
  step(x, w, 1.5);
  kiln_mark_step();
  step(kiln_to_lazy(kiln_randn(2, sh, KILN_DTYPE_F32, g)), w, 1.5);
  kiln_mark_step();
  CHECK_EQ_INT(ctr("UncachedCompile"), 1);
  CHECK_EQ_INT(ctr("CachedCompile"), 2);
  /* a new Python scalar: cached, but a device-data cache miss */
  int64_t miss = ctr("DeviceDataCacheMiss");
  step(x, w, 2.5);
  kiln_mark_step();
  CHECK_EQ_INT(ctr("UncachedCompile"), 1);
  CHECK_EQ_INT(ctr("DeviceDataCacheMiss"), miss + 1);
  /* a new shape: compiles, and says why */
  step(kiln_to_lazy(kiln_randn(2, sh2, KILN_DTYPE_F32, g)), w, 1.5);
  kiln_mark_step();
  CHECK_EQ_INT(ctr("UncachedCompile"), 2);
  CHECK(kiln_lazy_n_recompile_reasons() == 1);
  CHECK_STR_CONTAINS(kiln_lazy_recompile_reason(0), "Float[4, 4] -> Float[6, 4]");
  char *report = kiln_lazy_metrics_report();
  CHECK_STR_CONTAINS(report, "UncachedCompile");
  CHECK_STR_CONTAINS(report, "-> Float[6, 4]");
  kiln_free(report);
  char *json = kiln_lazy_metrics_json();
  CHECK_STR_CONTAINS(json, "\"UncachedCompile\": 2");
  kiln_free(json);
  /* an empty mark_step only counts itself */
  int64_t exec = ctr("ExecuteGraph"), ms = ctr("MarkStep");
  kiln_mark_step();
  CHECK_EQ_INT(ctr("ExecuteGraph"), exec);
  CHECK_EQ_INT(ctr("MarkStep"), ms + 1);
  /* item syncs just that tensor and counts as an execution */
  kiln_tensor *s = kiln_sum(kiln_mul(x, x), NULL, 0, false);
  double v = 0, want = 0;
  CHECK(kiln_item(s, &v) == KILN_OK);
  for (int i = 0; i < 16; i++) want += core_get_flat(xc, i) * core_get_flat(xc, i);
  CHECK_NEAR(v, want, 1e-4);
  CHECK_EQ_INT(ctr("ExecuteGraph"), exec + 1);
  CHECK_EQ_INT(ctr("MarkStep"), ms + 1);
  kiln_scope_end();
  kiln_generator_free(g);
}

TEST(lazy_backward_and_update) {
  /* one SGD step on lazy tensors equals eager */
  int64_t sx[2] = {8, 3}, sw[2] = {3, 2};
  kiln_generator *g = kiln_generator_new(9);
  kiln_scope_begin();
  kiln_tensor *xc = kiln_randn(2, sx, KILN_DTYPE_F32, g), *wc = kiln_randn(2, sw, KILN_DTYPE_F32, g);
  kiln_tensor *we = kiln_clone(wc);
  kiln_set_requires_grad(we, true);
  kiln_tensor *w = kiln_to_lazy(wc);
  kiln_set_requires_grad(w, true);
  kiln_tensor *x = kiln_to_lazy(xc);
  for (int it = 0; it < 3; it++) {
    kiln_tensor *ps[2] = {we, w}, *xs[2] = {xc, x};
    for (int m = 0; m < 2; m++) {
      kiln_tensor *loss = kiln_sum(kiln_tanh(kiln_mm(xs[m], ps[m])), NULL, 0, false);
      CHECK(kiln_backward(loss, NULL) == KILN_OK);
      kiln_no_grad_begin();
      CHECK(kiln_copy_(ps[m], kiln_sub(ps[m], kiln_mul_scalar(kiln_tensor_grad(ps[m]), 0.1))) == KILN_OK);
      kiln_no_grad_end();
      kiln_tensor_set_grad(ps[m], NULL);
    }
    kiln_mark_step();
  }
  kiln_tensor *wl = kiln_to_cpu(w);
  for (int i = 0; i < 6; i++) CHECK_NEAR(core_get_flat(wl, i), core_get_flat(we, i), 1e-5);
  kiln_scope_end();
  kiln_generator_free(g);
}

/* Note [Recorded order]: the compiled graph runs nodes in the order they
 * were recorded, not the output's post-order. s = (x W2) W3 - x W1 visits
 * x W2 first; x W1 was recorded first and runs first. */
TEST(lazy_graph_keeps_the_recorded_order) {
  kiln_generator *g = kiln_generator_new(33);
  kiln_scope_begin();
  kiln_tensor *xc = kiln_randn(2, (int64_t[]){4, 3}, KILN_DTYPE_F32, g);
  kiln_tensor *w1c = kiln_randn(2, (int64_t[]){3, 5}, KILN_DTYPE_F32, g);
  kiln_tensor *w2c = kiln_randn(2, (int64_t[]){3, 6}, KILN_DTYPE_F32, g);
  kiln_tensor *w3c = kiln_randn(2, (int64_t[]){6, 5}, KILN_DTYPE_F32, g);
  kiln_tensor *x = kiln_to_lazy(xc), *w1 = kiln_to_lazy(w1c), *w2 = kiln_to_lazy(w2c),
              *w3 = kiln_to_lazy(w3c);
  kiln_tensor *p = kiln_mm(x, w1);                  /* recorded first */
  kiln_tensor *r = kiln_mm(kiln_mm(x, w2), w3);
  kiln_tensor *sc = kiln_to_cpu(kiln_sub(r, p)); /* r is the first operand */
  char *t = kiln_lazy_last_compiled_graph();
  const char *first = t ? strstr(t, "Float(4, 5, device=cpu) = aten::mm(") : NULL;
  const char *second = t ? strstr(t, "Float(4, 6, device=cpu) = aten::mm(") : NULL;
  CHECK(first && second && first < second);
  kiln_free(t);
  kiln_tensor *want = kiln_sub(kiln_mm(kiln_mm(xc, w2c), w3c), kiln_mm(xc, w1c));
  for (int64_t i = 0; sc && i < 20; i++) CHECK_NEAR(core_get_flat(sc, i), core_get_flat(want, i), 1e-5);
  kiln_scope_end();
  kiln_generator_free(g);
}

TEST(lazy_compile_runs_the_jit_passes) {
  int64_t sh[2] = {64, 32};
  kiln_generator *g = kiln_generator_new(31);
  kiln_scope_begin();
  kiln_tensor *xc = kiln_randn(2, sh, KILN_DTYPE_F32, g);
  kiln_tensor *x = kiln_to_lazy(xc);
  /* tanh(x * 1) + x * 0.5: the peephole removes x * 1; the elementwise
   * rest is one FusionGroup */
  kiln_tensor *y = kiln_add(kiln_tanh(kiln_mul_scalar(x, 1.0)), kiln_mul_scalar(x, 0.5));
  kiln_tensor *yc = kiln_to_cpu(y);
  char *t = kiln_lazy_last_compiled_graph();
  CHECK(t != NULL);
  CHECK_STR_CONTAINS(t, "prim::FusionGroup");
  const char *sub = t ? strstr(t, "with prim::FusionGroup") : NULL;
  /* inside the group: tanh, one mul (by the 0.5 input), add; no mul by 1 */
  int muls = 0;
  for (const char *p = sub; p && (p = strstr(p, "aten::mul(")); p++) muls++;
  CHECK_EQ_INT(muls, 1);
  kiln_free(t);
  kiln_tensor *ye = kiln_add(kiln_tanh(xc), kiln_mul_scalar(xc, 0.5));
  for (int64_t i = 0; i < 64 * 32; i += 97) CHECK_NEAR(core_get_flat(yc, i), core_get_flat(ye, i), 1e-6);
  kiln_scope_end();
  kiln_generator_free(g);
}

TEST(lazy_linear_relu_gets_a_gemm_epilogue) {
  kiln_generator *g = kiln_generator_new(2);
  kiln_scope_begin();
  kiln_tensor *xc = kiln_randn(2, (int64_t[]){8, 5}, KILN_DTYPE_F32, g);
  kiln_tensor *wc = kiln_randn(2, (int64_t[]){6, 5}, KILN_DTYPE_F32, g);
  kiln_tensor *bc = kiln_randn(1, (int64_t[]){6}, KILN_DTYPE_F32, g);
  kiln_tensor *y = kiln_relu(kiln_linear(kiln_to_lazy(xc), kiln_to_lazy(wc), kiln_to_lazy(bc)));
  kiln_tensor *yc = kiln_to_cpu(y);
  char *t = kiln_lazy_last_compiled_graph();
  CHECK_STR_CONTAINS(t, "aten::_addmm_activation");
  CHECK(t && !strstr(t, "aten::relu("));
  kiln_free(t);
  kiln_tensor *ye = kiln_relu(kiln_linear(xc, wc, bc));
  for (int i = 0; i < 48; i++) CHECK_NEAR(core_get_flat(yc, i), core_get_flat(ye, i), 0);
  kiln_scope_end();
  kiln_generator_free(g);
}

/* A 3-d linear is an addmm on a 2-d view reshaped back (src/ops/matmul.c);
 * relu after it still runs as the GEMM's epilogue (Note [Epilogue through
 * a reshape]), with the values and gradients of eager mode. */
TEST(lazy_linear3d_relu_gets_a_gemm_epilogue) {
  kiln_generator *g = kiln_generator_new(3);
  kiln_scope_begin();
  kiln_tensor *xc = kiln_randn(3, (int64_t[]){2, 4, 5}, KILN_DTYPE_F32, g);
  kiln_tensor *wc = kiln_randn(2, (int64_t[]){6, 5}, KILN_DTYPE_F32, g);
  kiln_tensor *bc = kiln_randn(1, (int64_t[]){6}, KILN_DTYPE_F32, g);
  kiln_tensor *wl = kiln_to_lazy(wc);
  kiln_set_requires_grad(wl, true);
  kiln_tensor *y = kiln_relu(kiln_linear(kiln_to_lazy(xc), wl, kiln_to_lazy(bc)));
  kiln_tensor *l = kiln_sum(kiln_mul(y, y), NULL, 0, false);
  CHECK(l && kiln_backward(l, NULL) == 0);
  kiln_tensor *yc = kiln_to_cpu(y), *gw = kiln_to_cpu(kiln_tensor_grad(wl));
  char *t = kiln_lazy_last_compiled_graph();
  CHECK_STR_CONTAINS(t, "aten::_addmm_activation");
  CHECK(t && !strstr(t, "aten::relu("));
  kiln_free(t);
  kiln_tensor *we = kiln_detach(wc);
  kiln_set_requires_grad(we, true);
  kiln_tensor *ye = kiln_relu(kiln_linear(xc, we, bc));
  kiln_tensor *le = kiln_sum(kiln_mul(ye, ye), NULL, 0, false);
  CHECK(le && kiln_backward(le, NULL) == 0);
  kiln_tensor *ge = kiln_tensor_grad(we);
  CHECK(yc && gw && ge);
  int zeros = 0;
  for (int i = 0; yc && ye && i < 48; i++) {
    CHECK_NEAR(core_get_flat(yc, i), core_get_flat(ye, i), 0);
    zeros += core_get_flat(ye, i) == 0;
  }
  CHECK(zeros > 0 && zeros < 48); /* the relu clips some, not all */
  for (int i = 0; gw && ge && i < 30; i++) CHECK_NEAR(core_get_flat(gw, i), core_get_flat(ge, i), 1e-6);
  kiln_scope_end();
  kiln_generator_free(g);
}

TEST(lazy_recompile_reason_names_an_added_root) {
  kiln_scope_begin();
  kiln_tensor *x = kiln_to_lazy(kiln_ones(2, (int64_t[]){3, 3}, KILN_DTYPE_F32));
  kiln_mark_step();
  kiln_lazy_metrics_reset();
  for (int keep_h = 0; keep_h < 2; keep_h++) {
    kiln_tensor *h = NULL, *y;
    kiln_scope_begin();
    kiln_tensor *t = kiln_tanh(x);
    y = kiln_keep(kiln_sum(kiln_exp(t), NULL, 0, false));
    if (keep_h) h = kiln_keep(t); /* a live intermediate: an extra root */
    kiln_scope_end();
    kiln_mark_step();
    kiln_release(y);
    kiln_release(h);
  }
  CHECK_EQ_INT(kiln_lazy_counter("UncachedCompile"), 2);
  CHECK_EQ_INT(kiln_lazy_n_recompile_reasons(), 1);
  CHECK_STR_CONTAINS(kiln_lazy_recompile_reason(0), "roots: 1 -> 2");
  CHECK_STR_CONTAINS(kiln_lazy_recompile_reason(0), "added root");
  CHECK_STR_CONTAINS(kiln_lazy_recompile_reason(0), "aten::tanh");
  kiln_scope_end();
}

/* The CPU buffer behind synced lazy tensor t (its device data's address;
 * kiln_to_cpu would return a copy). */
static uintptr_t buffer_of(kiln_tensor *t) {
  const lazy_node *d = lazy_of(t)->value.node;
  return d->op == LAZY_DATA && d->data ? (uintptr_t)core_data(d->data) : 0;
}

/* Note [Buffer donation]: p.add_(g) writes p's new value into its old
 * buffer when nothing else holds it; a held CPU value keeps its values. */
TEST(lazy_mark_step_donates_dead_inputs) {
  kiln_scope_begin();
  int64_t n = 1000;
  kiln_tensor *p = kiln_to_lazy(kiln_arange(0, (double)n, 1, KILN_DTYPE_F32));
  kiln_tensor *g = kiln_to_lazy(kiln_full(1, &n, 0.5, KILN_DTYPE_F32));
  CHECK(p && g && kiln_mark_step() == KILN_OK);
  uintptr_t before = buffer_of(p);
  CHECK(before != 0);
  int64_t d0 = ctr("DonatedBuffers");
  for (int it = 0; it < 3; it++) {
    /* a step's temporaries (add_'s result tensor) die with its scope */
    kiln_scope_begin();
    CHECK(kiln_add_(p, g, -2.0) == KILN_OK);
    kiln_scope_end();
    CHECK(kiln_mark_step() == KILN_OK);
  }
  /* p's old buffer each step (g is held by its tensor: never donated) */
  CHECK_EQ_INT(ctr("DonatedBuffers") - d0, 3);
  CHECK(buffer_of(p) == before);
  kiln_tensor *held = kiln_detach(p); /* a second tensor holding p's present value */
  kiln_scope_begin();
  CHECK(kiln_add_(p, g, -2.0) == KILN_OK);
  kiln_scope_end();
  CHECK(kiln_mark_step() == KILN_OK);
  CHECK_EQ_INT(ctr("DonatedBuffers") - d0, 3);
  kiln_tensor *old = kiln_to_cpu(held), *now = kiln_to_cpu(p);
  for (int64_t i = 0; old && now && i < n; i += 111) {
    CHECK_NEAR(core_get_flat(old, i), i - 3.0, 0); /* untouched */
    CHECK_NEAR(core_get_flat(now, i), i - 4.0, 0);
  }
  kiln_scope_end();
}

/* Note [Fused buffer reuse] (exec/fusion.c): a momentum SGD step
 * (buf = 0.9 buf + g; p -= lr buf) is one FusionGroup with two outputs;
 * with p and buf donated it writes both over their old buffers, as the
 * eager update does, through the tile kernels and through a native one
 * (over several chunks: Note [Native chunks]), with the eager values (n
 * not a multiple of the tile or the chunk). */
TEST(lazy_sgd_step_fusion_writes_in_place) {
  int64_t n = 3 * 16384 + 5003;
  for (int native = 0; native < 2; native++) {
    int prev = exec_fusion_cc_set_mode(native ? 2 : 0);
    kiln_scope_begin();
    kiln_generator *gen = kiln_generator_new(21 + native);
    kiln_tensor *p0 = kiln_randn(1, &n, KILN_DTYPE_F32, gen);
    kiln_tensor *g0 = kiln_randn(1, &n, KILN_DTYPE_F32, gen);
    kiln_tensor *pe = kiln_clone(p0), *be = kiln_zeros(1, &n, KILN_DTYPE_F32);
    kiln_tensor *p = kiln_to_lazy(p0), *buf = kiln_to_lazy(kiln_zeros(1, &n, KILN_DTYPE_F32));
    kiln_tensor *g = kiln_to_lazy(g0);
    CHECK(p && buf && g && kiln_mark_step() == KILN_OK);
    uintptr_t bp = buffer_of(p), bb = buffer_of(buf);
    CHECK(bp && bb && bp != bb);
    for (int it = 0; it < 3; it++) {
      kiln_scope_begin();
      CHECK(kiln_mul_scalar_(buf, 0.9) == KILN_OK && kiln_add_(buf, g, 1.0) == KILN_OK);
      CHECK(kiln_add_(p, buf, -0.1) == KILN_OK);
      CHECK(kiln_mul_scalar_(be, 0.9) == KILN_OK && kiln_add_(be, g0, 1.0) == KILN_OK);
      CHECK(kiln_add_(pe, be, -0.1) == KILN_OK);
      kiln_scope_end();
      CHECK(kiln_mark_step() == KILN_OK);
      CHECK_MSG(buffer_of(p) == bp && buffer_of(buf) == bb, "step %d (native %d): new buffers",
                it, native);
    }
    char *t = kiln_lazy_last_compiled_graph();
    CHECK_STR_CONTAINS(t, "prim::FusionGroup");
    kiln_free(t);
    kiln_tensor *pc = kiln_to_cpu(p), *bc = kiln_to_cpu(buf);
    for (int64_t i = 0; pc && bc && i < n; i++) {
      CHECK_NEAR(core_get_flat(pc, i), core_get_flat(pe, i), 1e-6);
      CHECK_NEAR(core_get_flat(bc, i), core_get_flat(be, i), 1e-6);
    }
    kiln_generator_free(gen);
    kiln_scope_end();
    exec_fusion_cc_set_mode(prev);
  }
}

/* Note [Fused buffer reuse] and Note [Packed B cache]: a group that writes
 * its result over a tensor raises the tensor's version, so a GEMM later in
 * the same graph never reads the old value's packed panels. acc (the
 * first live tensor, so its products come first in the graph) takes two
 * products with p as B (cached the second time); p is then updated in
 * place by one FusionGroup (p dies there) and is the B of a third. */
TEST(lazy_in_place_group_invalidates_packed_panels) {
  kiln_scope_begin();
  kiln_generator *gen = kiln_generator_new(31);
  int64_t sp[2] = {256, 256}, sx[2] = {64, 256};
  kiln_tensor *acc = kiln_to_lazy(kiln_zeros(2, sx, KILN_DTYPE_F32));
  kiln_tensor *p0 = kiln_randn(2, sp, KILN_DTYPE_F32, gen), *g0 = kiln_randn(2, sp, KILN_DTYPE_F32, gen);
  kiln_tensor *x0 = kiln_randn(2, sx, KILN_DTYPE_F32, gen);
  kiln_tensor *p = kiln_to_lazy(kiln_clone(p0)), *g = kiln_to_lazy(g0), *x = kiln_to_lazy(x0);
  CHECK(acc && p && g && x && kiln_mark_step() == KILN_OK);
  kiln_tensor *acc_e = kiln_zeros(2, sx, KILN_DTYPE_F32), *pe = kiln_clone(p0);
  for (int it = 0; it < 2; it++) {
    kiln_scope_begin();
    CHECK(kiln_add_(acc, kiln_mm(x, p), 1.0) == KILN_OK);
    CHECK(kiln_add_(acc, kiln_mm(kiln_mul_scalar(x, 2.0), p), 1.0) == KILN_OK);
    CHECK(kiln_add_(p, kiln_mul_scalar(g, 0.5), -1.0) == KILN_OK); /* one FusionGroup */
    kiln_tensor *y3 = kiln_keep(kiln_mm(x, p));
    CHECK(kiln_add_(acc_e, kiln_mm(x0, pe), 1.0) == KILN_OK);
    CHECK(kiln_add_(acc_e, kiln_mm(kiln_mul_scalar(x0, 2.0), pe), 1.0) == KILN_OK);
    CHECK(kiln_add_(pe, kiln_mul_scalar(g0, 0.5), -1.0) == KILN_OK);
    kiln_tensor *y3e = kiln_keep(kiln_mm(x0, pe)); /* read after the scope */
    kiln_scope_end();
    CHECK(kiln_mark_step() == KILN_OK);
    kiln_scope_begin();
    char *t = kiln_lazy_last_compiled_graph();
    CHECK_STR_CONTAINS(t, "prim::FusionGroup");
    kiln_free(t);
    kiln_tensor *got = kiln_to_cpu(y3), *got_acc = kiln_to_cpu(acc);
    double worst = 0, worst_acc = 0;
    for (int64_t i = 0; got && got_acc && i < 64 * 256; i++) {
      worst = fmax(worst, fabs(core_get_flat(got, i) - core_get_flat(y3e, i)));
      worst_acc = fmax(worst_acc, fabs(core_get_flat(got_acc, i) - core_get_flat(acc_e, i)));
    }
    CHECK_MSG(worst < 1e-3 && worst_acc < 1e-3, "step %d: x @ p off by %g, acc by %g", it, worst,
              worst_acc);
    kiln_scope_end();
    kiln_release(y3);
    kiln_release(y3e);
  }
  kiln_generator_free(gen);
  kiln_scope_end();
}

/* Note [Buffer donation], a failing run: the step updates p in place, then
 * the loss meets a label out of range. mark_step fails and says the donated
 * inputs are lost; a later read of p fails with an error, never a crash or
 * a half-updated value. */
TEST(lazy_failed_run_reports_donated_inputs_lost) {
  kiln_scope_begin();
  int64_t sp[2] = {4, 3}, n = 2;
  kiln_tensor *p = kiln_to_lazy(kiln_full(2, sp, 1.0, KILN_DTYPE_F32));
  kiln_tensor *logits = NULL;
  CHECK(p && kiln_mark_step() == KILN_OK);
  int64_t labels[2] = {1, 7}; /* 7: out of range for 3 classes */
  kiln_scope_begin();
  kiln_tensor *y = kiln_to_lazy(kiln_from_data(labels, 1, &n, KILN_DTYPE_I64));
  CHECK(kiln_add_(p, p, 1.0) == KILN_OK); /* p = 2p, in place on the donated buffer */
  logits = kiln_keep(kiln_cross_entropy(kiln_narrow(p, 0, 0, 2), y, KILN_REDUCTION_MEAN));
  kiln_scope_end();
  CHECK(logits);
  CHECK(kiln_mark_step() < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "out of bounds");
  CHECK_STR_CONTAINS(kiln_last_error(), "donated");
  kiln_tensor *c = kiln_to_cpu(p);
  CHECK(c == NULL);
  CHECK_STR_CONTAINS(kiln_last_error(), "lost");
  kiln_release(logits);
  kiln_scope_end();
}

/* Note [Add epilogue], scaled: a momentum update buf.mul_(0.9).add_(a @ b)
 * is one GEMM into the donated buffer: addmm with the momentum as beta, no
 * mul left in the graph. */
TEST(lazy_momentum_update_is_one_gemm) {
  kiln_scope_begin();
  kiln_generator *g = kiln_generator_new(12);
  int64_t sb[2] = {6, 5}, sa[2] = {6, 4}, sw[2] = {4, 5};
  kiln_tensor *b0 = kiln_randn(2, sb, KILN_DTYPE_F32, g), *a = kiln_randn(2, sa, KILN_DTYPE_F32, g);
  kiln_tensor *w = kiln_randn(2, sw, KILN_DTYPE_F32, g);
  kiln_tensor *buf = kiln_to_lazy(b0), *la = kiln_to_lazy(a), *lw = kiln_to_lazy(w);
  CHECK(kiln_mark_step() == KILN_OK);
  kiln_scope_begin();
  CHECK(kiln_mul_scalar_(buf, 0.9) == KILN_OK);
  CHECK(kiln_add_(buf, kiln_mm(la, lw), 1.0) == KILN_OK);
  kiln_scope_end();
  CHECK(kiln_mark_step() == KILN_OK);
  char *t = kiln_lazy_last_compiled_graph();
  CHECK_STR_CONTAINS(t, "= aten::addmm(");
  CHECK(t && !strstr(t, "aten::mul("));
  kiln_free(t);
  kiln_tensor *got = kiln_to_cpu(buf), *want = kiln_add(kiln_mul_scalar(b0, 0.9), kiln_mm(a, w));
  for (int64_t i = 0; got && i < 30; i++)
    CHECK_NEAR(core_get_flat(got, i), core_get_flat(want, i), 1e-6);
  kiln_generator_free(g);
  kiln_scope_end();
}

/* Note [Threshold epilogue]: in a two-layer MLP's backward, relu's mask on
 * the second layer's input gradient (dZ @ W2) runs as that GEMM's
 * epilogue; the first layer's gradients are eager mode's. */
TEST(lazy_relu_backward_on_a_product_gets_a_gemm_epilogue) {
  kiln_generator *g = kiln_generator_new(4);
  kiln_scope_begin();
  kiln_tensor *xc = kiln_randn(2, (int64_t[]){40, 5}, KILN_DTYPE_F32, g);
  kiln_tensor *w1c = kiln_randn(2, (int64_t[]){36, 5}, KILN_DTYPE_F32, g);
  kiln_tensor *w2c = kiln_randn(2, (int64_t[]){3, 36}, KILN_DTYPE_F32, g);
  kiln_tensor *grads[2] = {0};
  for (int lazy = 0; lazy < 2; lazy++) {
    kiln_tensor *w1 = lazy ? kiln_to_lazy(w1c) : kiln_detach(w1c);
    kiln_set_requires_grad(w1, true);
    kiln_tensor *x = lazy ? kiln_to_lazy(xc) : xc, *w2 = lazy ? kiln_to_lazy(w2c) : w2c;
    kiln_tensor *z = kiln_linear(kiln_relu(kiln_linear(x, w1, NULL)), w2, NULL);
    kiln_tensor *l = kiln_sum(kiln_mul(z, z), NULL, 0, false);
    CHECK(l && kiln_backward(l, NULL) == 0);
    grads[lazy] = lazy ? kiln_to_cpu(kiln_tensor_grad(w1)) : kiln_tensor_grad(w1);
  }
  char *t = kiln_lazy_last_compiled_graph();
  CHECK_STR_CONTAINS(t, "aten::kiln_mm_threshold_backward");
  CHECK(t && !strstr(t, "aten::where("));
  kiln_free(t);
  CHECK(grads[0] && grads[1]);
  for (int i = 0; grads[0] && grads[1] && i < 36 * 5; i++)
    CHECK_NEAR(core_get_flat(grads[1], i), core_get_flat(grads[0], i),
               1e-5 * (1 + fabs(core_get_flat(grads[0], i))));
  kiln_scope_end();
  kiln_generator_free(g);
}
