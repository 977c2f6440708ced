/* tests/tools/test_kiln_run.c: `kiln run` on the PyTorch corpus
 * (tests/data/ir, made by scripts/gen_ir_corpus.py with PyTorch 1.13):
 * outputs and gradients equal PyTorch's, through 1 call and through 5
 * (the profiling executor's optimized plan), and bad invocations fail with
 * one clear line. Needs the kiln binary: $KILN_BIN (make test sets it). */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln.h"
#include "test.h"

#define CORPUS "tests/data/ir"

static const char *kiln_bin(void) {
  const char *b = getenv("KILN_BIN");
  return b && access(b, X_OK) == 0 ? b : NULL;
}

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
  kiln_tensor *a = kiln_to_dtype(got, KILN_DTYPE_F64), *b = kiln_to_dtype(want, KILN_DTYPE_F64);
  const double *pa = kiln_tensor_data(kiln_contiguous(a)), *pb = kiln_tensor_data(kiln_contiguous(b));
  bool ok = true;
  for (int64_t i = 0; i < k && ok; i++)
    if (!(fabs(pa[i] - pb[i]) <= atol + rtol * fabs(pb[i])) && !(isnan(pa[i]) && isnan(pb[i]))) {
      snprintf(why, n, "element %lld: %.8g vs PyTorch %.8g", (long long)i, pa[i], pb[i]);
      ok = false;
    }
  kiln_scope_end();
  return ok;
}

/* Runs one corpus case with --runs `runs`; returns false on failure. */
static bool run_case(const char *bin, const char *name, int runs, const char *tmp) {
  char meta_path[512], cmd[4096], out_dir[512];
  snprintf(meta_path, sizeof meta_path, CORPUS "/%s/meta.json", name);
  json_error_t err;
  json_t *meta = json_load_file(meta_path, 0, &err);
  if (!meta) {
    test_fail(__FILE__, __LINE__, "%s: %s", meta_path, err.text);
    return false;
  }
  snprintf(out_dir, sizeof out_dir, "%s/%s-%d", tmp, name, runs);
  size_t k = (size_t)snprintf(cmd, sizeof cmd, "%s run " CORPUS "/%s.ir", bin, name);
  json_t *args = json_object_get(meta, "args"), *rg = json_object_get(meta, "requires_grad");
  size_t i;
  json_t *v;
  json_array_foreach(args, i, v) {
    const char *a = json_string_value(v);
    if (a && strstr(a, ".npy"))
      k += (size_t)snprintf(cmd + k, sizeof cmd - k, " " CORPUS "/%s/%s", name, a);
    else if (a)
      k += (size_t)snprintf(cmd + k, sizeof cmd - k, " %s", a);
  }
  if (json_array_size(rg)) {
    k += (size_t)snprintf(cmd + k, sizeof cmd - k, " --requires-grad ");
    json_array_foreach(rg, i, v)
    k += (size_t)snprintf(cmd + k, sizeof cmd - k, "%s%lld", i ? "," : "", (long long)json_integer_value(v));
    k += (size_t)snprintf(cmd + k, sizeof cmd - k, " --grad");
  }
  snprintf(cmd + k, sizeof cmd - k, " --runs %d --out %s 2>%s.err", runs, out_dir, out_dir);
  int st = system(cmd);
  bool ok = st == 0;
  if (!ok) {
    char msg[512] = "";
    char ep[600];
    snprintf(ep, sizeof ep, "%s.err", out_dir);
    FILE *f = fopen(ep, "r");
    if (f) {
      if (!fgets(msg, sizeof msg, f)) msg[0] = 0;
      fclose(f);
    }
    test_fail(__FILE__, __LINE__, "%s --runs %d: exit %d: %s", name, runs, st, msg);
  }
  double rtol = json_real_value(json_object_get(meta, "rtol")), atol = json_real_value(json_object_get(meta, "atol"));
  int n_out = (int)json_integer_value(json_object_get(meta, "n_outputs"));
  for (int o = 0; o < n_out && ok; o++) {
    char gp[600], wp[600], why[160];
    snprintf(gp, sizeof gp, "%s/out%d.npy", out_dir, o);
    snprintf(wp, sizeof wp, CORPUS "/%s/out%d.npy", name, o);
    kiln_scope_begin();
    if (!close_to(kiln_npy_load(gp), kiln_npy_load(wp), rtol, atol, why, sizeof why)) {
      test_fail(__FILE__, __LINE__, "%s --runs %d: output %d: %s", name, runs, o, why);
      ok = false;
    }
    kiln_scope_end();
  }
  json_array_foreach(rg, i, v) {
    if (!ok) break;
    char gp[600], wp[600], why[160];
    long long ix = (long long)json_integer_value(v);
    snprintf(gp, sizeof gp, "%s/grad%lld.npy", out_dir, ix);
    snprintf(wp, sizeof wp, CORPUS "/%s/grad%lld.npy", name, ix);
    kiln_scope_begin();
    if (!close_to(kiln_npy_load(gp), kiln_npy_load(wp), rtol * 10, atol * 10, why, sizeof why)) {
      test_fail(__FILE__, __LINE__, "%s --runs %d: grad %lld: %s", name, runs, ix, why);
      ok = false;
    }
    kiln_scope_end();
  }
  json_decref(meta);
  return ok;
}

TEST(kiln_run_reproduces_pytorch_corpus) {
  const char *bin = kiln_bin();
  if (!bin) {
    test_fail(__FILE__, __LINE__, "KILN_BIN is not set to the kiln binary (make test sets it)");
    return;
  }
  char tmp[] = "/tmp/kiln-run-XXXXXX";
  if (!mkdtemp(tmp)) {
    test_fail(__FILE__, __LINE__, "mkdtemp failed");
    return;
  }
  DIR *d = opendir(CORPUS);
  CHECK(d != NULL);
  int n_cases = 0, n_ok = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 4 || strcmp(e->d_name + len - 3, ".ir") != 0) continue;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(len - 3), e->d_name);
    char meta[600];
    struct stat sb;
    snprintf(meta, sizeof meta, CORPUS "/%s/meta.json", name);
    if (stat(meta, &sb) != 0) continue;
    n_cases++;
    bool a = run_case(bin, name, 1, tmp), b = run_case(bin, name, 5, tmp);
    n_ok += a && b;
  }
  if (d) closedir(d);
  CHECK(n_cases >= 40);
  char rm[600];
  snprintf(rm, sizeof rm, "rm -rf %s", tmp);
  if (system(rm) != 0) test_fail(__FILE__, __LINE__, "cannot remove %s", tmp);
  test_note("%d/%d PyTorch graphs reproduced with 1 and 5 runs", n_ok, n_cases);
}

TEST(kiln_run_bad_invocations_fail_with_one_line) {
  const char *bin = kiln_bin();
  if (!bin) {
    test_fail(__FILE__, __LINE__, "KILN_BIN is not set");
    return;
  }
  struct {
    const char *args, *expect;
  } cases[] = {
      {"run /nonexistent.ir --out /tmp/kiln-bad", "/nonexistent.ir"},
      {"run " CORPUS "/addmm_scaled.ir --out /tmp/kiln-bad", "takes 3 inputs"},
      {"run " CORPUS "/addmm_scaled.ir /nonexistent.npy a b --out /tmp/kiln-bad", "nonexistent.npy"},
      {"frobnicate", "unknown command"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>/tmp/kiln-bad.err >/dev/null", bin, cases[i].args);
    int st = system(cmd);
    CHECK_MSG(st != 0, "'%s' exited 0", cases[i].args);
    char msg[512] = "";
    FILE *f = fopen("/tmp/kiln-bad.err", "r");
    if (f) {
      if (!fgets(msg, sizeof msg, f)) msg[0] = 0;
      fclose(f);
    }
    CHECK_STR_CONTAINS(msg, cases[i].expect);
  }
  if (system("rm -rf /tmp/kiln-bad /tmp/kiln-bad.err") != 0) test_fail(__FILE__, __LINE__, "cleanup");
}
