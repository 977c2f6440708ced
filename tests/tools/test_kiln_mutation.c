/* tests/tools/test_kiln_mutation.c: `kiln run` on graphs that write
 * tensors in place (tests/data/mutation, made by
 * scripts/golden/mutation.py with PyTorch 1.13): outputs, the inputs the
 * graph wrote (in<I>.npy, after 1 and after 5 calls: each call writes
 * exactly once) and gradients equal PyTorch's, interpreted (--runs 1),
 * through the optimized plan (--runs 5), and on lazy tensors (--lazy);
 * and in this process interpreted op by op on every call (eager; 1 and 5
 * calls). Cases cover every in-place variant the op table derives, the
 * aliasing cases of issue #15, indexing, and PyTorch's in-place dtype
 * rule (meta "error": every mode fails with PyTorch's message). Needs
 * $KILN_BIN (make test sets it). */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln.h"
#include "test.h"

#define DATA "tests/data/mutation"

static bool close_to(kiln_tensor *got, kiln_tensor *want, double rtol, double atol, char *why,
                     size_t n) {
  if (!got || !want) {
    snprintf(why, n, "missing (%s)", kiln_last_error());
    return false;
  }
  int64_t k = kiln_tensor_numel(want);
  if (kiln_tensor_numel(got) != k || kiln_tensor_ndim(got) != kiln_tensor_ndim(want)) {
    snprintf(why, n, "shape differs");
    return false;
  }
  kiln_scope_begin();
  kiln_tensor *a = kiln_contiguous(kiln_to_dtype(got, KILN_DTYPE_F64));
  kiln_tensor *b = kiln_contiguous(kiln_to_dtype(want, KILN_DTYPE_F64));
  const double *pa = kiln_tensor_data(a), *pb = kiln_tensor_data(b);
  bool ok = true;
  for (int64_t i = 0; i < k && ok; i++)
    if (!(fabs(pa[i] - pb[i]) <= atol + rtol * fabs(pb[i])) && !(isnan(pa[i]) && isnan(pb[i]))) {
      snprintf(why, n, "element %lld: %.8g vs PyTorch %.8g", (long long)i, pa[i], pb[i]);
      ok = false;
    }
  kiln_scope_end();
  return ok;
}

static bool compare(const char *what, const char *got_path, const char *want_path, double rtol,
                    double atol) {
  char why[200];
  kiln_scope_begin();
  bool ok = close_to(kiln_npy_load(got_path), kiln_npy_load(want_path), rtol, atol, why, sizeof why);
  kiln_scope_end();
  if (!ok) test_fail(__FILE__, __LINE__, "%s: %s", what, why);
  return ok;
}

static bool run_case(const char *bin, const char *name, int runs, bool lazy, const char *tmp) {
  char path[600], cmd[4096], dir[600], what[700];
  snprintf(path, sizeof path, DATA "/%s/meta.json", name);
  json_error_t err;
  json_t *meta = json_load_file(path, 0, &err);
  if (!meta) {
    test_fail(__FILE__, __LINE__, "%s: %s", path, err.text);
    return false;
  }
  snprintf(dir, sizeof dir, "%s/%s-%d%s", tmp, name, runs, lazy ? "-lazy" : "");
  snprintf(what, sizeof what, "%s --runs %d%s", name, runs, lazy ? " --lazy" : "");
  size_t k = (size_t)snprintf(cmd, sizeof cmd, "%s run " DATA "/%s.ir", bin, name);
  json_t *args = json_object_get(meta, "args"), *rg = json_object_get(meta, "requires_grad");
  json_t *written = json_object_get(meta, "written");
  size_t i;
  json_t *v;
  json_array_foreach(args, i, v) {
    const char *a = json_string_value(v);
    if (a && strstr(a, ".npy")) k += (size_t)snprintf(cmd + k, sizeof cmd - k, " " DATA "/%s/%s", name, a);
    else if (a) k += (size_t)snprintf(cmd + k, sizeof cmd - k, " %s", a);
  }
  if (json_array_size(rg)) {
    k += (size_t)snprintf(cmd + k, sizeof cmd - k, " --grad --requires-grad ");
    json_array_foreach(rg, i, v)
    k += (size_t)snprintf(cmd + k, sizeof cmd - k, "%s%lld", i ? "," : "", (long long)json_integer_value(v));
  }
  snprintf(cmd + k, sizeof cmd - k, " --runs %d%s --out %s 2>%s.err", runs, lazy ? " --lazy" : "",
           dir, dir);
  bool ok = system(cmd) == 0;
  /* "error": PyTorch's message, which every mode must fail with too */
  const char *lazy_error = json_string_value(json_object_get(meta, "error"));
  if (!lazy_error && lazy) lazy_error = json_string_value(json_object_get(meta, "lazy_error"));
  if (!ok || lazy_error) {
    char msg[512] = "", ep[700];
    snprintf(ep, sizeof ep, "%s.err", dir);
    FILE *f = fopen(ep, "r");
    if (f) {
      if (!fgets(msg, sizeof msg, f)) msg[0] = 0;
      fclose(f);
    }
    if (lazy_error) { /* a clear error, not a silently missed write */
      CHECK_MSG(!ok && strstr(msg, lazy_error), "%s: want the error '%s', got: %s", what,
                lazy_error, ok ? "success" : msg);
      json_decref(meta);
      return !ok;
    }
    test_fail(__FILE__, __LINE__, "%s: failed: %s", what, msg);
  }
  double rtol = json_real_value(json_object_get(meta, "rtol"));
  double atol = json_real_value(json_object_get(meta, "atol"));
  int n_out = (int)json_integer_value(json_object_get(meta, "n_outputs"));
  for (int o = 0; o < n_out && ok; o++) {
    char g[700], w[700], wh[800];
    snprintf(g, sizeof g, "%s/out%d.npy", dir, o);
    snprintf(w, sizeof w, DATA "/%s/r%d_out%d.npy", name, runs, o);
    snprintf(wh, sizeof wh, "%s: output %d", what, o);
    ok &= compare(wh, g, w, rtol, atol);
  }
  /* exactly the written inputs come back, with PyTorch's values */
  for (int in = 0; in < (int)json_array_size(args) && ok; in++) {
    bool is_written = false;
    json_array_foreach(written, i, v) is_written |= json_integer_value(v) == in;
    char g[700], w[700], wh[800];
    snprintf(g, sizeof g, "%s/in%d.npy", dir, in);
    struct stat sb;
    bool there = stat(g, &sb) == 0;
    if (there != is_written) {
      test_fail(__FILE__, __LINE__, "%s: in%d.npy %s", what, in,
                there ? "written, but the graph does not write it" : "missing");
      ok = false;
      break;
    }
    if (!is_written) continue;
    snprintf(w, sizeof w, DATA "/%s/r%d_in%d.npy", name, runs, in);
    snprintf(wh, sizeof wh, "%s: input %d after the calls", what, in);
    ok &= compare(wh, g, w, rtol, atol);
  }
  json_array_foreach(rg, i, v) {
    if (!ok) break;
    char g[700], w[700], wh[800];
    long long ix = (long long)json_integer_value(v);
    snprintf(g, sizeof g, "%s/grad%lld.npy", dir, ix);
    snprintf(w, sizeof w, DATA "/%s/grad%lld.npy", name, ix);
    snprintf(wh, sizeof wh, "%s: grad %lld", what, ix);
    ok &= compare(wh, g, w, rtol * 10, atol * 10);
  }
  json_decref(meta);
  return ok;
}

TEST(kiln_run_mutation_matches_pytorch) {
  const char *bin = getenv("KILN_BIN");
  if (!bin || access(bin, X_OK) != 0) {
    test_fail(__FILE__, __LINE__, "KILN_BIN is not set to the kiln binary (make test sets it)");
    return;
  }
  char tmp[] = "/tmp/kiln-mut-XXXXXX";
  if (!mkdtemp(tmp)) {
    test_fail(__FILE__, __LINE__, "mkdtemp failed");
    return;
  }
  DIR *d = opendir(DATA);
  CHECK(d != NULL);
  int n_cases = 0, n_ok = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 4 || strcmp(e->d_name + len - 3, ".ir") != 0) continue;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(len - 3), e->d_name);
    n_cases++;
    bool ok = true;
    for (int lazy = 0; lazy < 2; lazy++)
      for (int runs = 1; runs <= 5; runs += 4) ok &= run_case(bin, name, runs, lazy, tmp);
    n_ok += ok;
  }
  if (d) closedir(d);
  CHECK(n_cases >= 100);
  char rm[600];
  snprintf(rm, sizeof rm, "rm -rf %s", tmp);
  if (system(rm) != 0) test_fail(__FILE__, __LINE__, "cannot remove %s", tmp);
  test_note("%d/%d mutating graphs reproduced (runs 1 and 5, eager and lazy)", n_ok, n_cases);
}

/* One case interpreted op by op on every call (profiling_runs past the
 * calls made: eager ops through the interpreter, no optimized plan), in
 * this process: call 1's outputs and written inputs, and those after 5
 * calls, equal PyTorch's. Cases with gradients or an expected error are
 * left to kiln run above. */
static int eager_case(const char *name) { /* 1 reproduced, 0 not, -1 left to kiln run */
  char path[600], why[200];
  snprintf(path, sizeof path, DATA "/%s/meta.json", name);
  json_error_t err;
  json_t *meta = json_load_file(path, 0, &err);
  if (!meta) return false;
  json_t *args = json_object_get(meta, "args"), *written = json_object_get(meta, "written");
  bool ok = true;
  if (json_array_size(json_object_get(meta, "requires_grad")) || json_object_get(meta, "error")) {
    json_decref(meta);
    return -1;
  }
  double rtol = json_real_value(json_object_get(meta, "rtol"));
  double atol = json_real_value(json_object_get(meta, "atol"));
  int n_out = (int)json_integer_value(json_object_get(meta, "n_outputs"));
  int n_in = (int)json_array_size(args);
  snprintf(path, sizeof path, DATA "/%s.ir", name);
  kiln_graph *g = kiln_graph_load(path);
  kiln_function_options o;
  kiln_function_options_default(&o);
  o.profiling_runs = 100;
  kiln_function *f = g ? kiln_function_new_ex(g, &o) : NULL;
  kiln_graph_free(g);
  if (!f || n_in > 8 || n_out > 8) {
    test_fail(__FILE__, __LINE__, "%s eager: %s", name, f ? "too many values" : kiln_last_error());
    kiln_function_free(f);
    json_decref(meta);
    return false;
  }
  kiln_scope_begin();
  kiln_value in[8], out[8];
  for (int i = 0; i < n_in && ok; i++) {
    const char *a = json_string_value(json_array_get(args, (size_t)i));
    if (strstr(a, ".npy")) {
      snprintf(path, sizeof path, DATA "/%s/%s", name, a);
      in[i] = (kiln_value){.kind = KILN_VALUE_TENSOR, .t = kiln_npy_load(path)};
      ok = in[i].t != NULL;
    } else if (!strcmp(a, "true") || !strcmp(a, "false")) {
      in[i] = (kiln_value){.kind = KILN_VALUE_BOOL, .b = a[0] == 't'};
    } else if (strpbrk(a, ".e")) {
      in[i] = (kiln_value){.kind = KILN_VALUE_FLOAT, .f = atof(a)};
    } else {
      in[i] = (kiln_value){.kind = KILN_VALUE_INT, .i = atoll(a)};
    }
  }
  for (int call = 1; call <= 5 && ok; call++) {
    kiln_scope_begin();
    int k = kiln_function_call(f, in, n_in, out, 8);
    if (k != n_out) {
      test_fail(__FILE__, __LINE__, "%s eager call %d: %d outputs (%s)", name, call, k,
                k < 0 ? kiln_last_error() : "");
      ok = false;
    }
    for (int r = 1; r <= 5 && ok; r += 4) {
      if (call != r) continue;
      for (int o2 = 0; o2 < n_out && ok; o2++) {
        snprintf(path, sizeof path, DATA "/%s/r%d_out%d.npy", name, r, o2);
        ok = out[o2].kind == KILN_VALUE_TENSOR &&
             close_to(out[o2].t, kiln_npy_load(path), rtol, atol, why, sizeof why);
        if (!ok) test_fail(__FILE__, __LINE__, "%s eager, %d calls: output %d: %s", name, r, o2,
                           out[o2].kind == KILN_VALUE_TENSOR ? why : "not a tensor");
      }
      size_t w;
      json_t *v;
      json_array_foreach(written, w, v) {
        if (!ok) break;
        int i = (int)json_integer_value(v);
        snprintf(path, sizeof path, DATA "/%s/r%d_in%d.npy", name, r, i);
        ok = i < n_in && close_to(in[i].t, kiln_npy_load(path), rtol, atol, why, sizeof why);
        if (!ok) test_fail(__FILE__, __LINE__, "%s eager, %d calls: input %d: %s", name, r, i, why);
      }
    }
    kiln_scope_end();
  }
  kiln_function_stats st;
  kiln_function_get_stats(f, &st);
  if (ok && st.optimizations != 0) {
    test_fail(__FILE__, __LINE__, "%s eager: an optimized plan was built", name);
    ok = false;
  }
  kiln_scope_end();
  kiln_function_free(f);
  json_decref(meta);
  return ok;
}

TEST(mutation_goldens_eager_interpreted_1_and_5_calls) {
  DIR *d = opendir(DATA);
  CHECK(d != NULL);
  int n_cases = 0, n_ok = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 4 || strcmp(e->d_name + len - 3, ".ir") != 0) continue;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(len - 3), e->d_name);
    int r = eager_case(name);
    n_cases += r >= 0;
    n_ok += r > 0;
  }
  if (d) closedir(d);
  CHECK(n_cases >= 90);
  test_note("%d/%d mutating graphs without gradients reproduced interpreted op by op (1 and 5 "
            "calls)", n_ok, n_cases);
}

/* Issue #15, no fixed limits: kiln run takes a graph of 70 inputs (it
 * silently kept the first 64). */
TEST(kiln_run_takes_70_inputs) {
  const char *bin = getenv("KILN_BIN");
  if (!bin || access(bin, X_OK) != 0) {
    test_fail(__FILE__, __LINE__, "KILN_BIN is not set");
    return;
  }
  char tmp[] = "/tmp/kiln-70-XXXXXX";
  if (!mkdtemp(tmp)) {
    test_fail(__FILE__, __LINE__, "mkdtemp failed");
    return;
  }
  char gp[600], cmd[8192], op[700];
  snprintf(gp, sizeof gp, "%s/g.ir", tmp);
  FILE *f = fopen(gp, "w");
  CHECK(f != NULL);
  if (!f) return;
  fprintf(f, "graph(");
  for (int i = 0; i < 70; i++) fprintf(f, "%s%%a%d : int", i ? ", " : "", i);
  fprintf(f, "):\n  %%s0 : int = aten::add(%%a0, %%a0)\n");
  for (int i = 1; i < 70; i++) fprintf(f, "  %%s%d : int = aten::add(%%s%d, %%a%d)\n", i, i - 1, i);
  fprintf(f, "  return (%%s69)\n");
  fclose(f);
  size_t k = (size_t)snprintf(cmd, sizeof cmd, "%s run %s", bin, gp);
  for (int i = 0; i < 70; i++) k += (size_t)snprintf(cmd + k, sizeof cmd - k, " %d", i + 1);
  snprintf(cmd + k, sizeof cmd - k, " --out %s/o 2>/dev/null", tmp);
  CHECK(system(cmd) == 0);
  snprintf(op, sizeof op, "%s/o/out0.npy", tmp);
  kiln_scope_begin();
  kiln_tensor *o = kiln_npy_load(op);
  /* a0 + a0 + a1 + ... + a69 = 1 + (1 + ... + 70) */
  CHECK(o && kiln_tensor_dtype(o) == KILN_DTYPE_I64 &&
        *(const int64_t *)kiln_tensor_data(o) == 1 + 70 * 71 / 2);
  kiln_scope_end();
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  if (system(cmd) != 0) test_fail(__FILE__, __LINE__, "cannot remove %s", tmp);
}
