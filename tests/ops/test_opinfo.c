/* tests/ops/test_opinfo.c: kiln's operator coverage measured by PyTorch's
 * OpInfo database. scripts/golden/opinfo.py (PyTorch 1.13) wrote, for each
 * OpInfo whose scripted graph uses only kinds kiln knows, a few small
 * samples (tests/data/opinfo/<op>.txt): the graph, its inputs, PyTorch's
 * outputs and gradients. Every sample runs
 *   - eagerly (an executor with bailout depth 0 interprets op by op),
 *   - through the profiling executor, 1 call and 5 calls (the optimized plan),
 *   - on lazy tensors (recorded, then synced),
 *   - with gradients (eager and 5 executor calls) against PyTorch's,
 *   - and, in float64, with gradients against central finite differences.
 * An op is covered when all its samples pass. The test prints `ops
 * covered: P/T` per family (T counts every scriptable OpInfo of the
 * manifest, tests/data/opinfo/manifest.txt), writes the per-op results for
 * `opinfo.py --report`, and fails when an op listed in
 * tests/data/opinfo/expected_pass.txt (the committed baseline) fails. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kiln.h"
#include "test.h"

#define DATA "tests/data/opinfo/"
#define MAX_IO 32
#define MAX_FAM 16

/* ---- sample files ----------------------------------------------------------- */
typedef struct ref_val {
  int kind;             /* 0 tensor, 1 int, 2 float, 3 bool */
  kiln_dtype dt;
  int ndim;
  int64_t shape[8];
  double *v;            /* numel values (malloc'd) */
  int64_t n;
  bool rg;              /* input: requires grad */
} ref_val;

typedef struct sample {
  char *graph;          /* malloc'd text */
  ref_val in[MAX_IO], out[MAX_IO], grad[MAX_IO];
  bool has_grad[MAX_IO];
  int n_in, n_out;
  bool any_grad;
} sample;

static void sample_clear(sample *s) {
  free(s->graph);
  for (int i = 0; i < MAX_IO; i++) {
    free(s->in[i].v);
    free(s->out[i].v);
    free(s->grad[i].v);
  }
  memset(s, 0, sizeof *s);
}

static bool parse_dtype(const char *w, kiln_dtype *dt) {
  if (!strcmp(w, "f32")) *dt = KILN_DTYPE_F32;
  else if (!strcmp(w, "f64")) *dt = KILN_DTYPE_F64;
  else if (!strcmp(w, "i64")) *dt = KILN_DTYPE_I64;
  else if (!strcmp(w, "b")) *dt = KILN_DTYPE_BOOL;
  else return false;
  return true;
}

/* "in 0 f32 1 2 3 4 : v..." (rg only for inputs), "out 0 int : 5". */
static bool parse_val(char *line, bool with_rg, ref_val *r, int *idx) {
  char *save = NULL, *w = strtok_r(line, " ", &save);
  w = strtok_r(NULL, " ", &save);
  if (!w) return false;
  *idx = atoi(w);
  if (*idx < 0 || *idx >= MAX_IO) return false;
  w = strtok_r(NULL, " ", &save);
  if (!w) return false;
  memset(r, 0, sizeof *r);
  if (!strcmp(w, "int") || !strcmp(w, "float") || !strcmp(w, "bool")) {
    r->kind = w[0] == 'i' ? 1 : w[0] == 'f' ? 2 : 3;
    strtok_r(NULL, " ", &save); /* ':' */
    w = strtok_r(NULL, " ", &save);
    if (!w) return false;
    r->v = malloc(sizeof *r->v);
    r->v[0] = strtod(w, NULL);
    r->n = 1;
    return true;
  }
  if (!parse_dtype(w, &r->dt)) return false;
  if (with_rg) {
    w = strtok_r(NULL, " ", &save);
    if (!w) return false;
    r->rg = atoi(w) != 0;
  }
  w = strtok_r(NULL, " ", &save);
  if (!w) return false;
  r->ndim = atoi(w);
  if (r->ndim < 0 || r->ndim > 8) return false;
  r->n = 1;
  for (int d = 0; d < r->ndim; d++) {
    w = strtok_r(NULL, " ", &save);
    if (!w) return false;
    r->shape[d] = atoll(w);
    r->n *= r->shape[d];
  }
  w = strtok_r(NULL, " ", &save);
  if (!w || strcmp(w, ":")) return false;
  r->v = malloc((size_t)(r->n ? r->n : 1) * sizeof *r->v);
  for (int64_t i = 0; i < r->n; i++) {
    w = strtok_r(NULL, " ", &save);
    if (!w) return false;
    r->v[i] = strtod(w, NULL);
  }
  return true;
}

/* Reads the next sample from f into s; false at EOF or on a malformed file
 * (*bad set). */
static bool read_sample(FILE *f, sample *s, bool *bad) {
  static char line[1 << 16];
  memset(s, 0, sizeof *s);
  *bad = false;
  bool started = false;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (!strncmp(line, "sample ", 7)) {
      started = true;
    } else if (!started || line[0] == '#') {
      continue;
    } else if (!strncmp(line, "graph ", 6)) {
      int n = atoi(line + 6);
      size_t cap = 4096, len = 0;
      s->graph = malloc(cap);
      for (int i = 0; i < n; i++) {
        if (!fgets(line, sizeof line, f)) {
          *bad = true;
          return false;
        }
        size_t l = strlen(line);
        while (len + l + 1 > cap) s->graph = realloc(s->graph, cap *= 2);
        memcpy(s->graph + len, line, l + 1);
        len += l;
      }
    } else if (!strncmp(line, "in ", 3) || !strncmp(line, "out ", 4) ||
               !strncmp(line, "grad ", 5)) {
      ref_val r = {0};
      int idx = 0;
      char c = line[0];
      if (!parse_val(line, c == 'i', &r, &idx)) {
        free(r.v);
        *bad = true;
        return false;
      }
      if (c == 'i') {
        s->in[idx] = r;
        if (idx + 1 > s->n_in) s->n_in = idx + 1;
      } else if (c == 'o') {
        s->out[idx] = r;
        if (idx + 1 > s->n_out) s->n_out = idx + 1;
      } else {
        s->grad[idx] = r;
        s->has_grad[idx] = true;
        s->any_grad = true;
      }
    } else if (!strcmp(line, "end")) {
      if (!s->graph) *bad = true;
      return s->graph != NULL;
    }
  }
  if (started) *bad = true;
  return false;
}

/* ---- running ------------------------------------------------------------------ */
static kiln_tensor *make_tensor(const ref_val *r, kiln_dtype dt) {
  kiln_tensor *t = kiln_zeros(r->ndim, r->shape, KILN_DTYPE_F64);
  if (!t) return NULL;
  double *p = kiln_tensor_data(t);
  for (int64_t i = 0; i < r->n; i++) p[i] = r->v[i];
  return kiln_to_dtype(t, dt);
}

/* The cotangent the generator used: w[j] = ((7 j) % 11 + 1) / 4. */
static kiln_tensor *cotangent(kiln_tensor *like) {
  int64_t n = kiln_tensor_numel(like);
  kiln_tensor *w = kiln_zeros(kiln_tensor_ndim(like), kiln_tensor_shape(like),
                              kiln_tensor_dtype(like));
  if (!w) return NULL;
  kiln_tensor *d = kiln_zeros(1, &n, KILN_DTYPE_F64);
  if (!d) return NULL;
  double *p = kiln_tensor_data(d);
  for (int64_t j = 0; j < n; j++) p[j] = (double)((7 * j) % 11 + 1) / 4.0;
  kiln_tensor *r = kiln_reshape(d, kiln_tensor_ndim(like), kiln_tensor_shape(like));
  if (!r || kiln_copy_(w, r) < 0) return NULL;
  return w;
}

static bool is_float(kiln_dtype dt) { return dt == KILN_DTYPE_F32 || dt == KILN_DTYPE_F64; }

static bool close_vals(kiln_tensor *got, const ref_val *want, double rtol, double atol,
                       bool check_dtype, char *why, size_t nw) {
  if (!got) {
    snprintf(why, nw, "missing");
    return false;
  }
  if (check_dtype && kiln_tensor_dtype(got) != want->dt) {
    snprintf(why, nw, "dtype %s, PyTorch's %s", kiln_dtype_name(kiln_tensor_dtype(got)),
             kiln_dtype_name(want->dt));
    return false;
  }
  bool shape_ok = kiln_tensor_ndim(got) == want->ndim;
  for (int d = 0; shape_ok && d < want->ndim; d++)
    shape_ok = kiln_tensor_shape(got)[d] == want->shape[d];
  if (!shape_ok) {
    char b[96];
    snprintf(why, nw, "shape %s differs", kiln_shape_str(got, b, sizeof b));
    return false;
  }
  kiln_tensor *c = kiln_contiguous(kiln_to_dtype(got, KILN_DTYPE_F64));
  if (!c) {
    snprintf(why, nw, "cannot read: %s", kiln_last_error());
    return false;
  }
  const double *p = kiln_tensor_data(c);
  for (int64_t i = 0; i < want->n; i++) {
    double a = p[i], b = want->v[i];
    if (isnan(a) && isnan(b)) continue;
    if (a == b) continue;
    if (!(fabs(a - b) <= atol + rtol * fabs(b))) {
      snprintf(why, nw, "element %lld: %.9g, PyTorch %.9g", (long long)i, a, b);
      return false;
    }
  }
  return true;
}

static bool check_out(const kiln_value *got, const ref_val *want, char *why, size_t nw) {
  if (want->kind == 0) {
    if (got->kind != KILN_VALUE_TENSOR) {
      snprintf(why, nw, "not a tensor");
      return false;
    }
    kiln_tensor *t = kiln_tensor_is_lazy(got->t) ? kiln_to_cpu(got->t) : got->t;
    if (!t) {
      snprintf(why, nw, "to cpu: %s", kiln_last_error());
      return false;
    }
    double tol = is_float(want->dt) ? 1e-4 : 0;
    return close_vals(t, want, tol, tol * 0.1, true, why, nw);
  }
  double v;
  if (got->kind == KILN_VALUE_INT) v = (double)got->i;
  else if (got->kind == KILN_VALUE_FLOAT) v = got->f;
  else if (got->kind == KILN_VALUE_BOOL) v = got->b;
  else if (got->kind == KILN_VALUE_TENSOR && kiln_tensor_numel(got->t) == 1 &&
           kiln_item(got->t, &v) == 0)
    ;
  else {
    snprintf(why, nw, "not a number");
    return false;
  }
  if (v == want->v[0] || (isnan(v) && isnan(want->v[0])) ||
      (want->kind == 2 && fabs(v - want->v[0]) <= 1e-5 * (1 + fabs(want->v[0]))))
    return true;
  snprintf(why, nw, "%.9g, PyTorch %.9g", v, want->v[0]);
  return false;
}

typedef struct run_opts {
  int bailout;          /* 0: interpret (eager); else the profiling executor */
  int calls;
  bool lazy, grads, f64;
} run_opts;

/* sum_k sum(out_k * w_k) over floating outputs that require grad; NULL if none. */
static kiln_tensor *loss_of(const kiln_value *outs, int n) {
  kiln_tensor *l = NULL;
  for (int k = 0; k < n; k++) {
    if (outs[k].kind != KILN_VALUE_TENSOR || !is_float(kiln_tensor_dtype(outs[k].t)) ||
        !kiln_requires_grad(outs[k].t))
      continue;
    kiln_tensor *w = cotangent(outs[k].t), *m = w ? kiln_mul(outs[k].t, w) : NULL;
    kiln_tensor *s = m ? kiln_sum(m, NULL, 0, false) : NULL;
    if (s && l) s = kiln_to_dtype(s, kiln_tensor_dtype(l));
    if (!s) return NULL;
    l = l ? kiln_add(l, s) : s;
    if (!l) return NULL;
  }
  return l;
}

/* One mode: runs the sample, compares outputs (and gradients). Writes
 * the failure into why; true on success. */
static bool run_mode(const kiln_graph *g, const sample *s, run_opts ro, char *why, size_t nw) {
  kiln_function_options o;
  kiln_function_options_default(&o);
  if (ro.bailout == 0) {
    o.bailout_depth = 0;
    o.fusion = false;
  }
  kiln_function *f = kiln_function_new_ex(g, &o);
  if (!f) {
    snprintf(why, nw, "%s", kiln_last_error());
    return false;
  }
  bool ok = true;
  for (int call = 0; call < ro.calls && ok; call++) {
    kiln_scope_begin();
    kiln_value in[MAX_IO], out[MAX_IO];
    kiln_tensor *leaves[MAX_IO] = {0};
    for (int i = 0; i < s->n_in && ok; i++) {
      kiln_dtype dt = s->in[i].dt;
      if (ro.f64 && dt == KILN_DTYPE_F32) dt = KILN_DTYPE_F64;
      kiln_tensor *t = make_tensor(&s->in[i], dt);
      if (t && ro.grads && s->in[i].rg) {
        kiln_set_requires_grad(t, true);
        leaves[i] = t;
      }
      if (t && ro.lazy) t = kiln_to_lazy(t);
      if (!t) {
        snprintf(why, nw, "input %d: %s", i, kiln_last_error());
        ok = false;
      }
      in[i] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = t};
    }
    int n = ok ? kiln_function_call(f, in, s->n_in, out, MAX_IO) : -1;
    if (ok && n < 0) {
      snprintf(why, nw, "%s", kiln_last_error());
      ok = false;
    }
    if (ok && n != s->n_out) {
      snprintf(why, nw, "%d outputs, PyTorch %d", n, s->n_out);
      ok = false;
    }
    for (int k = 0; ok && !ro.f64 && k < n; k++) {
      char w[200];
      if (!check_out(&out[k], &s->out[k], w, sizeof w)) {
        snprintf(why, nw, "output %d: %s", k, w);
        ok = false;
      }
    }
    if (ok && ro.grads) {
      kiln_tensor *l = loss_of(out, n);
      if (!l) {
        snprintf(why, nw, "no output requires grad%s%s", kiln_last_error()[0] ? ": " : "",
                 kiln_last_error());
        ok = false;
      } else if (kiln_backward(l, NULL) < 0) {
        snprintf(why, nw, "backward: %s", kiln_last_error());
        ok = false;
      }
      for (int i = 0; ok && i < s->n_in; i++) {
        if (!s->has_grad[i] || !leaves[i]) continue;
        kiln_tensor *gr = kiln_tensor_grad(leaves[i]);
        if (!gr) gr = kiln_zeros(s->in[i].ndim, s->in[i].shape, kiln_tensor_dtype(leaves[i]));
        if (gr && kiln_tensor_is_lazy(gr)) gr = kiln_to_cpu(gr);
        char w[200];
        if (!gr) {
          snprintf(why, nw, "grad %d: %s", i, kiln_last_error());
          ok = false;
        } else if (!close_vals(gr, &s->grad[i], ro.f64 ? 1e-3 : 1e-3, ro.f64 ? 1e-4 : 1e-4, false, w,
                        sizeof w)) {
          snprintf(why, nw, "grad %d: %s", i, w);
          ok = false;
        }
      }
    }
    kiln_scope_end();
  }
  kiln_function_free(f);
  return ok;
}

/* The floating outputs of one call, flattened to float64 (into *v, n_out
 * values, caller frees); -1 on failure. */
static int64_t outs_at(kiln_function *f, kiln_value *in, int n_in, double **v) {
  kiln_value out[MAX_IO];
  int n = kiln_function_call(f, in, n_in, out, MAX_IO);
  *v = NULL;
  if (n < 0) return -1;
  int64_t total = 0;
  for (int k = 0; k < n; k++)
    if (out[k].kind == KILN_VALUE_TENSOR && is_float(kiln_tensor_dtype(out[k].t)))
      total += kiln_tensor_numel(out[k].t);
  *v = malloc(sizeof(double) * (size_t)(total ? total : 1));
  if (!*v) return -1;
  int64_t at = 0;
  for (int k = 0; k < n; k++) {
    if (out[k].kind != KILN_VALUE_TENSOR || !is_float(kiln_tensor_dtype(out[k].t))) continue;
    kiln_tensor *w = cotangent(out[k].t);
    kiln_tensor *c = kiln_contiguous(kiln_mul(kiln_to_dtype(out[k].t, KILN_DTYPE_F64),
                                              kiln_to_dtype(w, KILN_DTYPE_F64)));
    if (!c) return -1;
    int64_t m = kiln_tensor_numel(c);
    memcpy(*v + at, kiln_tensor_data(c), sizeof(double) * (size_t)m);
    at += m;
  }
  return total;
}

/* L(x + h) - L(x - h) for the input element *x, summed as the weighted
 * differences of each output element (a sum of differences, not a
 * difference of sums: huge outputs elsewhere do not swamp it); NAN on
 * failure. */
static double loss_diff(kiln_function *f, kiln_value *in, int n_in, double *x, double h) {
  double x0 = *x, *vp, *vm, d = 0;
  *x = x0 + h;
  int64_t np = outs_at(f, in, n_in, &vp);
  *x = x0 - h;
  int64_t nm = outs_at(f, in, n_in, &vm);
  *x = x0;
  if (np < 0 || np != nm) d = NAN;
  for (int64_t i = 0; i < np && np == nm; i++) d += vp[i] - vm[i];
  free(vp);
  free(vm);
  return d;
}

/* Gradients in float64 against central differences of L. */
static bool finite_differences(const kiln_graph *g, const sample *s, char *why, size_t nw) {
  kiln_function_options o;
  kiln_function_options_default(&o);
  o.bailout_depth = 0;
  o.fusion = false;
  kiln_function *f = kiln_function_new_ex(g, &o);
  if (!f) {
    snprintf(why, nw, "%s", kiln_last_error());
    return false;
  }
  bool ok = true;
  kiln_scope_begin();
  kiln_value in[MAX_IO], out[MAX_IO];
  kiln_tensor *leaves[MAX_IO] = {0};
  for (int i = 0; i < s->n_in; i++) {
    kiln_dtype dt = s->in[i].dt == KILN_DTYPE_F32 ? KILN_DTYPE_F64 : s->in[i].dt;
    kiln_tensor *t = make_tensor(&s->in[i], dt);
    if (t && s->in[i].rg) {
      kiln_set_requires_grad(t, true);
      leaves[i] = t;
    }
    in[i] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = t};
  }
  int n = kiln_function_call(f, in, s->n_in, out, MAX_IO);
  kiln_tensor *l = n > 0 ? loss_of(out, n) : NULL;
  if (!l || kiln_backward(l, NULL) < 0) {
    snprintf(why, nw, "float64 backward: %s", kiln_last_error());
    ok = false;
  }
  /* the outputs must be float64 too, else differences are float32 noise */
  for (int k = 0; ok && k < n; k++)
    if (out[k].kind == KILN_VALUE_TENSOR && kiln_tensor_dtype(out[k].t) == KILN_DTYPE_F32)
      goto done;
  kiln_set_grad_enabled(false);
  for (int i = 0; ok && i < s->n_in; i++) {
    if (!leaves[i]) continue;
    kiln_tensor *gr = kiln_tensor_grad(leaves[i]);
    const double *ga = gr ? kiln_tensor_data(kiln_contiguous(gr)) : NULL;
    double *x = kiln_tensor_data(leaves[i]);
    for (int64_t j = 0; ok && j < kiln_tensor_numel(leaves[i]); j++) {
      double x0 = x[j], h = 1e-6 * (1 + fabs(x0));
      double fd = loss_diff(f, in, s->n_in, &x[j], h) / (2 * h), an = ga ? ga[j] : 0;
      if (isnan(fd) && isnan(an)) continue;
      if (!(fabs(fd - an) <= 1e-4 + 1e-3 * fabs(fd))) {
        snprintf(why, nw, "grad %d element %lld: %.9g, finite differences %.9g", i,
                 (long long)j, an, fd);
        ok = false;
      }
    }
  }
  kiln_set_grad_enabled(true);
done:
  kiln_scope_end();
  kiln_function_free(f);
  return ok;
}

/* Runs every sample of one op file; the first failure in *why. */
static bool run_op_file(const char *path, char *why, size_t nw, int *n_samples) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(why, nw, "cannot open");
    return false;
  }
  bool ok = true, bad;
  sample s;
  *n_samples = 0;
  while (ok && read_sample(f, &s, &bad)) {
    (*n_samples)++;
    kiln_graph *g = kiln_graph_parse(s.graph, strlen(s.graph));
    char w[400] = "";
    if (!g) {
      snprintf(why, nw, "sample %d: parse: %s", *n_samples - 1, kiln_last_error());
      ok = false;
    }
    static const struct {
      const char *name;
      run_opts ro;
    } modes[] = {
        {"eager", {0, 1, false, false, false}},
        {"jit 1 run", {20, 1, false, false, false}},
        {"jit 5 runs", {20, 5, false, false, false}},
        {"lazy", {0, 1, true, false, false}},
        {"eager grad", {0, 1, false, true, false}},
        {"jit 5 runs grad", {20, 5, false, true, false}},
    };
    for (size_t m = 0; ok && m < sizeof modes / sizeof *modes; m++) {
      if (modes[m].ro.grads && !s.any_grad) continue;
      kiln_clear_error();
      if (!run_mode(g, &s, modes[m].ro, w, sizeof w)) {
        snprintf(why, nw, "sample %d %s: %s", *n_samples - 1, modes[m].name, w);
        ok = false;
      }
    }
    if (ok && s.any_grad && !finite_differences(g, &s, w, sizeof w)) {
      snprintf(why, nw, "sample %d gradcheck: %s", *n_samples - 1, w);
      ok = false;
    }
    kiln_graph_free(g);
    sample_clear(&s);
  }
  if (bad) {
    snprintf(why, nw, "malformed sample file");
    ok = false;
  }
  fclose(f);
  return ok;
}

/* ---- the test ------------------------------------------------------------------- */
static bool in_list(char *const *list, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(list[i], name)) return true;
  return false;
}

TEST(opinfo_coverage) {
  FILE *man = fopen(DATA "manifest.txt", "r");
  CHECK_MSG(man, "cannot open " DATA "manifest.txt");
  if (!man) return;
  /* the baseline: ops that must pass */
  static char *expected[2048];
  int n_expected = 0;
  FILE *ef = fopen(DATA "expected_pass.txt", "r");
  char line[4096];
  while (ef && fgets(line, sizeof line, ef) && n_expected < 2048) {
    line[strcspn(line, "\n")] = 0;
    if (line[0] && line[0] != '#') expected[n_expected++] = strdup(line);
  }
  if (ef) fclose(ef);
  /* results for opinfo.py --report, next to the kiln binary */
  char res_path[512] = "build/opinfo_results.txt";
  const char *bin = getenv("KILN_BIN");
  if (bin && strrchr(bin, '/'))
    snprintf(res_path, sizeof res_path, "%.*s/opinfo_results.txt", (int)(strrchr(bin, '/') - bin),
             bin);
  FILE *res = fopen(res_path, "w");
  char fam_name[MAX_FAM][64];
  int fam_p[MAX_FAM] = {0}, fam_t[MAX_FAM] = {0}, n_fam = 0, tot_p = 0, tot_t = 0, n_samples = 0;
  int regressions = 0, new_passes = 0;
  while (fgets(line, sizeof line, man)) {
    if (line[0] == '#') continue;
    char fam[64], name[256], status[32];
    if (sscanf(line, "%63s %255s %31s", fam, name, status) != 3) continue;
    if (!strcmp(status, "excluded")) continue;
    int fi = 0;
    while (fi < n_fam && strcmp(fam_name[fi], fam)) fi++;
    if (fi == n_fam && n_fam < MAX_FAM) snprintf(fam_name[n_fam++], 64, "%s", fam);
    if (fi >= MAX_FAM) continue;
    fam_t[fi]++;
    tot_t++;
    bool pass = false;
    char why[600] = "missing kinds";
    if (!strcmp(status, "kiln")) {
      char path[512];
      int ns = 0;
      snprintf(path, sizeof path, DATA "%s.txt", name);
      pass = run_op_file(path, why, sizeof why, &ns);
      n_samples += ns;
    }
    if (pass) {
      fam_p[fi]++;
      tot_p++;
      if (!in_list(expected, n_expected, name)) new_passes++;
    } else if (in_list(expected, n_expected, name)) {
      regressions++;
      test_fail(__FILE__, __LINE__, "%s no longer passes: %s", name, why);
    }
    if (res) fprintf(res, "%s %s %s\n", name, pass ? "pass" : "fail", pass ? "" : why);
  }
  fclose(man);
  if (res) fclose(res);
  for (int i = 0; i < n_expected; i++) free(expected[i]);
  char note[1024];
  size_t k = 0;
  for (int i = 0; i < n_fam; i++)
    k += (size_t)snprintf(note + k, sizeof note - k, "%s %d/%d, ", fam_name[i], fam_p[i],
                          fam_t[i]);
  test_note("ops covered: %d/%d (%.1f%%) over %d samples; %s%d new passes (%s)", tot_p, tot_t,
            tot_t ? 100.0 * tot_p / tot_t : 0.0, n_samples, note, new_passes, res_path);
  CHECK(tot_t > 400);
  CHECK(regressions == 0);
}

/* ---- allocation failure --------------------------------------------------------- */
/* Found by `make fuzz FUZZ_OOM=1` (fuzz_run): grid_sampler's bilinear
 * corners went on with the NULL of a failed weight product (UBSan: member
 * access within a null pointer, src/ops/grid_sample.c). The fuzzer had
 * found such decompositions one at a time; this sweeps them all. The first
 * sample of every op of the baseline runs in three modes: eagerly, with
 * gradients when it has them; through the profiling executor, a profiling
 * call and an optimized one (gradients likewise); on lazy tensors. In each,
 * allocation k fails, for every k the run reaches: the run gives PyTorch's
 * values, or fails saying "out of memory". The sweep found, besides
 * grid_sampler, a string register copy that became None when it failed
 * (div's rounding_mode, pad's mode: wrong values; Note [Shared strings] in
 * src/exec/value.c) and histc and index_reduce reporting a failed
 * reduction as a bad argument. Under `make test SAN=1` ASan and UBSan
 * watch every point. OPINFO_OOM=a,b limits it to those ops,
 * OPINFO_OOM_FROM=name starts the list at it, SWEEP_K=k starts each sweep
 * at allocation k. */
static const struct {
  const char *name;
  run_opts ro;     /* grads: when the sample has them */
} oom_modes[] = {
    {"eager", {0, 1, false, true, false}},
    {"jit", {20, 2, false, true, false}},
    {"lazy", {0, 1, true, false, false}},
};

static bool oom_sweep_op(const char *name, int *points, char *why, size_t nw) {
  char path[512];
  snprintf(path, sizeof path, DATA "%.400s.txt", name);
  FILE *f = fopen(path, "r");
  sample s;
  bool bad, ok = true;
  if (!f || !read_sample(f, &s, &bad)) {
    snprintf(why, nw, "cannot read %s", path);
    if (f) fclose(f);
    return false;
  }
  fclose(f);
  kiln_graph *g = kiln_graph_parse(s.graph, strlen(s.graph));
  if (!g) {
    snprintf(why, nw, "parse: %s", kiln_last_error());
    ok = false;
  }
  for (size_t m = 0; ok && m < sizeof oom_modes / sizeof *oom_modes; m++) {
    run_opts ro = oom_modes[m].ro;
    ro.grads = ro.grads && s.any_grad;
    char w[400];
    if (!run_mode(g, &s, ro, w, sizeof w)) {
      snprintf(why, nw, "%s, the run without failures: %s", oom_modes[m].name, w);
      ok = false;
    }
    for (long k = getenv("SWEEP_K") ? atol(getenv("SWEEP_K")) : 1; ok && k < 100000; k++) {
      kiln_clear_error();
      core_alloc_fail_at(k);
      bool ran = run_mode(g, &s, ro, w, sizeof w);
      long made = core_alloc_fail_at(0);
      if (!ran && (made < k || !strstr(w, "out of memory"))) {
        snprintf(why, nw, "%s, allocation %ld of %ld failing: %s", oom_modes[m].name, k, made, w);
        ok = false;
      }
      if (made < k) break;
      (*points)++;
    }
  }
  kiln_graph_free(g);
  sample_clear(&s);
  return ok;
}

/* name is one of the comma-separated names of csv */
static bool in_csv(const char *csv, const char *name) {
  size_t n = strlen(name);
  for (const char *p = csv; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (!strncmp(p, name, n) && (p[n] == ',' || !p[n])) return true;
  return false;
}

TEST(opinfo_samples_fail_cleanly_at_every_allocation) {
  FILE *ef = fopen(DATA "expected_pass.txt", "r");
  CHECK_MSG(ef, "cannot open " DATA "expected_pass.txt");
  if (!ef) return;
  const char *only = getenv("OPINFO_OOM"), *from = getenv("OPINFO_OOM_FROM");
  char line[4096];
  int ops = 0, points = 0;
  while (fgets(line, sizeof line, ef)) {
    line[strcspn(line, "\n")] = 0;
    if (from && !strcmp(from, line)) from = NULL;
    if (!line[0] || line[0] == '#' || (only && !in_csv(only, line)) || from) continue;
    char why[600];
    if (!oom_sweep_op(line, &points, why, sizeof why))
      test_fail(__FILE__, __LINE__, "%s: %s", line, why);
    ops++;
  }
  fclose(ef);
  test_note("%d ops, %d failure points", ops, points);
  CHECK(only || getenv("OPINFO_OOM_FROM") || ops > 300);
}
