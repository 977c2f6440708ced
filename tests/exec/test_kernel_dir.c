/* tests/exec/test_kernel_dir.c: kept native kernels are loaded only from a
 * directory nobody else can write (Note [Kernel files]): a library planted
 * through a world-writable HOME, a symlinked ~/.cache/kiln, a world-
 * writable or another user's KILN_CACHE_DIR, or swapped after the check,
 * is never run. The planted library is a real kernel (x / y) filed under
 * the name and beside the source of the victim's kernel (x * y), as an
 * attacker would; the victim's kernel must compute x * y. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/fusion_cc.h"
#include "ops/op.h"
#include "test.h"

static char *kernel_source(int op) {
  fusion_cc_step st = {op_table[op].tile_srcs[KILN_DTYPE_F32],
                       {-1, -1, -1},
                       {0, 1, -1},
                       {0},
                       {"float", "float", NULL}};
  int out_step = 0;
  return exec_fusion_cc_source(&st, 1, &out_step, 1);
}

/* The kept file of dir ending in suffix (one kernel there) in path. */
static bool kept(const char *dir, const char *suffix, char *path, size_t cap) {
  char cmd[700];
  snprintf(cmd, sizeof cmd, "ls %s/*%s 2>/dev/null | grep -v '[.]tmp' | head -1", dir, suffix);
  FILE *p = popen(cmd, "r");
  bool ok = p && fgets(path, (int)cap, p) != NULL;
  if (p) pclose(p);
  if (ok) path[strcspn(path, "\n")] = 0;
  return ok && path[0];
}

static void sh(const char *fmt, const char *a, const char *b) {
  char cmd[2000];
  snprintf(cmd, sizeof cmd, fmt, a, b);
  if (system(cmd) != 0) test_fail(__FILE__, __LINE__, "%s failed", cmd);
}

static void run(const char *cmd) {
  if (system(cmd) != 0) test_fail(__FILE__, __LINE__, "%s failed", cmd);
}

/* Builds the planted pair in `dir`: the victim's source under its own name,
 * and beside it, under its library's name, the x / y library. */
static void plant(const char *dir, const char *victim_src, const char *planted_src) {
  char legit[] = "/tmp/kiln-kd-legit-XXXXXX", vc[700], vso[700], pso[700], cmd[3000];
  if (!mkdtemp(legit)) return;
  setenv("KILN_CACHE_DIR", legit, 1);
  exec_fusion_cc_set_mode(2);
  fusion_cc_kernel *k = exec_fusion_cc_compile(victim_src);
  CHECK_MSG(k != NULL, "compile: %s", kiln_last_error());
  exec_fusion_cc_free(k);
  CHECK(kept(legit, ".c", vc, sizeof vc) && kept(legit, ".so", vso, sizeof vso));
  snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s %s/ && rm -f %s/*", dir, vc, dir, legit);
  run(cmd);
  exec_fusion_cc_free(exec_fusion_cc_compile(planted_src));
  CHECK(kept(legit, ".so", pso, sizeof pso));
  snprintf(cmd, sizeof cmd, "cp %s %s/%s && rm -rf %s", pso, dir, strrchr(vso, '/') + 1, legit);
  run(cmd);
}

/* Compiles victim_src with the environment as set; true if the kernel it
 * gives computes x * y (not the planted x / y). */
static bool victim_runs_its_own(const char *victim_src) {
  exec_fusion_cc_set_mode(2);
  fusion_cc_kernel *k = exec_fusion_cc_compile(victim_src);
  CHECK_MSG(k != NULL, "compile: %s", kiln_last_error());
  if (!k) return false;
  float x[8], y[8], z[8];
  for (int i = 0; i < 8; i++) x[i] = 1.5f + (float)i, y[i] = 2.0f;
  const void *in[2] = {x, y};
  void *out[1] = {z};
  op_attrs at[1] = {{{0}}};
  exec_fusion_cc_fn(k)(out, in, 8, at);
  exec_fusion_cc_free(k);
  bool ok = true;
  for (int i = 0; i < 8; i++) ok = ok && z[i] == x[i] * y[i];
  return ok;
}

typedef struct saved_env {
  char *v[3];
} saved_env;
static const char *const env_names[3] = {"KILN_CACHE_DIR", "HOME", "XDG_CACHE_HOME"};
static saved_env save_env(void) {
  saved_env s;
  for (int i = 0; i < 3; i++) s.v[i] = getenv(env_names[i]) ? strdup(getenv(env_names[i])) : NULL;
  return s;
}
static void restore_env(saved_env *s) {
  for (int i = 0; i < 3; i++) {
    if (s->v[i]) setenv(env_names[i], s->v[i], 1);
    else unsetenv(env_names[i]);
    free(s->v[i]);
  }
}

TEST(kernel_dir_world_writable_home_is_refused) {
  saved_env env = save_env();
  char *mul = kernel_source(KILN_OP_MUL), *div = kernel_source(KILN_OP_DIV);
  char home[] = "/tmp/kiln-kd-home-XXXXXX", kdir[600];
  CHECK(mkdtemp(home) != NULL);
  snprintf(kdir, sizeof kdir, "%s/.cache/kiln", home);
  plant(kdir, mul, div);
  /* the attacker's directory, in a HOME anyone can write */
  sh("chmod 0777 %s && chown -R 65534 %s/.cache", home, home);
  unsetenv("KILN_CACHE_DIR");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", home, 1);
  int64_t loaded = exec_fusion_cc_files_loaded();
  CHECK(victim_runs_its_own(mul));
  CHECK_EQ_INT(exec_fusion_cc_files_loaded(), loaded);
  CHECK_STR_CONTAINS(exec_fusion_cc_refusal(), "writable by other users");
  /* even with HOME private, a directory of another user's is refused */
  sh("chmod 0700 %s %s", home, "");
  CHECK(victim_runs_its_own(mul));
  CHECK_EQ_INT(exec_fusion_cc_files_loaded(), loaded);
  CHECK_STR_CONTAINS(exec_fusion_cc_refusal(), "owned by another user");
  restore_env(&env);
  sh("rm -rf %s %s", home, "");
  core_free(mul), core_free(div);
  kiln_clear_error();
}

TEST(kernel_dir_symlinked_cache_is_refused) {
  saved_env env = save_env();
  char *mul = kernel_source(KILN_OP_MUL), *div = kernel_source(KILN_OP_DIV);
  char home[] = "/tmp/kiln-kd-home-XXXXXX", elsewhere[] = "/tmp/kiln-kd-else-XXXXXX";
  CHECK(mkdtemp(home) != NULL && mkdtemp(elsewhere) != NULL);
  plant(elsewhere, mul, div);
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "mkdir -p %s/.cache && ln -sfn %s %s/.cache/kiln", home, elsewhere,
           home);
  CHECK(system(cmd) == 0);
  unsetenv("KILN_CACHE_DIR");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", home, 1);
  int64_t loaded = exec_fusion_cc_files_loaded();
  CHECK(victim_runs_its_own(mul));
  CHECK_EQ_INT(exec_fusion_cc_files_loaded(), loaded);
  CHECK_STR_CONTAINS(exec_fusion_cc_refusal(), "symbolic link");
  restore_env(&env);
  sh("rm -rf %s %s", home, elsewhere);
  core_free(mul), core_free(div);
  kiln_clear_error();
}

TEST(kernel_dir_world_writable_cache_dir_is_refused) {
  saved_env env = save_env();
  char *mul = kernel_source(KILN_OP_MUL), *div = kernel_source(KILN_OP_DIV);
  char dir[] = "/tmp/kiln-kd-dir-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  plant(dir, mul, div);
  sh("chmod 0777 %s %s", dir, "");
  setenv("KILN_CACHE_DIR", dir, 1);
  int64_t loaded = exec_fusion_cc_files_loaded();
  CHECK(victim_runs_its_own(mul));
  CHECK_EQ_INT(exec_fusion_cc_files_loaded(), loaded);
  CHECK_STR_CONTAINS(exec_fusion_cc_refusal(), "0777");
  /* the same directory made private is used: the kept kernel loads */
  sh("chmod 0700 %s && rm -f %s/*", dir, dir);
  CHECK(victim_runs_its_own(mul)); /* compiled and kept */
  CHECK(victim_runs_its_own(mul)); /* loaded */
  CHECK_EQ_INT(exec_fusion_cc_files_loaded(), loaded + 1);
  CHECK(exec_fusion_cc_refusal() == NULL);
  restore_env(&env);
  sh("rm -rf %s %s", dir, "");
  core_free(mul), core_free(div);
  kiln_clear_error();
}

static const char *swap_from;
/* exec_fusion_cc_before_load_hook: another library renamed over the checked one */
static void swap_library(const char *path) {
  char cmd[1500];
  snprintf(cmd, sizeof cmd, "cp %s %s.swap && mv -f %s.swap %s", swap_from, path, path, path);
  if (swap_from) run(cmd);
}

TEST(kernel_dir_library_swapped_after_the_check_is_not_loaded) {
  saved_env env = save_env();
  char *mul = kernel_source(KILN_OP_MUL), *div = kernel_source(KILN_OP_DIV);
  char dir[] = "/tmp/kiln-kd-dir-XXXXXX", other[] = "/tmp/kiln-kd-other-XXXXXX", pso[700];
  CHECK(mkdtemp(dir) != NULL && mkdtemp(other) != NULL);
  setenv("KILN_CACHE_DIR", other, 1);
  exec_fusion_cc_set_mode(2);
  exec_fusion_cc_free(exec_fusion_cc_compile(div));
  CHECK(kept(other, ".so", pso, sizeof pso));
  setenv("KILN_CACHE_DIR", dir, 1);
  CHECK(victim_runs_its_own(mul)); /* kept */
  int64_t loaded = exec_fusion_cc_files_loaded();
  swap_from = pso;
  exec_fusion_cc_before_load_hook = swap_library;
  CHECK(victim_runs_its_own(mul)); /* the checked file, not the one swapped in */
  exec_fusion_cc_before_load_hook = NULL;
  swap_from = NULL;
  CHECK_EQ_INT(exec_fusion_cc_files_loaded(), loaded + 1);
  restore_env(&env);
  sh("rm -rf %s %s", dir, other);
  core_free(mul), core_free(div);
  kiln_clear_error();
}
