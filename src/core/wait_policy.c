/* src/core/wait_policy.c: the OpenMP wait policy of a program linked with
 * kiln's objects or static library (Note [Thread waits] in threads.c): a
 * re-exec from .preinit_array with a bounded GOMP_SPINCOUNT. An object of
 * its own so the shared library leaves it out (a DSO has no .preinit_array;
 * the Makefile links it into executables and libkiln.a only). */
#include <stdbool.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#define KILN_SPINCOUNT "30000" /* Note [Busy cores] in threads.c */

/* ---- the wait policy: a re-exec before anything runs ---------------------- */
static bool env_has(char **envp, const char *prefix) {
  size_t n = strlen(prefix);
  for (char **e = envp; e && *e; e++)
    if (!strncmp(*e, prefix, n)) return true;
  return false;
}

/* Under valgrind (its preload library in LD_PRELOAD) an exec would leave
 * the tool behind. */
static bool under_valgrind(char **envp) {
  for (char **e = envp; e && *e; e++)
    if (!strncmp(*e, "LD_PRELOAD=", 11) && strstr(*e, "vgpreload")) return true;
  return false;
}

static void set_wait_policy(int argc, char **argv, char **envp) {
  (void)argc;
  static char *env[1024]; /* static: preinit runs before anything could free it */
  static char spin[] = "GOMP_SPINCOUNT=" KILN_SPINCOUNT;
  if (!argv || !envp || env_has(envp, "OMP_WAIT_POLICY=") || env_has(envp, "GOMP_SPINCOUNT=") ||
      env_has(envp, "KILN_OMP_ENV=keep") || getauxval(AT_SECURE) || under_valgrind(envp))
    return;
  size_t n = 0;
  while (envp[n]) {
    if (n + 2 >= sizeof env / sizeof *env) return; /* an environment this large: leave it */
    env[n] = envp[n];
    n++;
  }
  env[n++] = spin;
  env[n] = NULL;
  /* By the program's own path, not /proc/self/exe: the kernel names a
   * process after the file it executes, and "exe" in ps, top and pkill
   * would hide which program it is. */
  static char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0 || (size_t)len >= sizeof self - 1) return;
  self[len] = 0;
  execve(self, argv, env); /* returns only on failure: carry on as we are */
}

__attribute__((section(".preinit_array"), used)) static void (*const kiln_preinit)(
    int, char **, char **) = set_wait_policy;
