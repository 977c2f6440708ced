/* src/exec/fusion_cc.c: native kernels for fusion groups: a group's chain
 * written as one C loop from its ops' tile texts, compiled by the system C
 * compiler into a shared object and loaded.
 *
 * Note [Native kernels]: the tile executor (fusion.c, Note [Fused tiles])
 * runs each op of a group as its own pass over an L1 tile. Every pass
 * stores a vector per 16 floats, and at two threads that store traffic,
 * not memory, bounds an arithmetic chain (y = x*a + b*x*x - 0.5: 5 passes
 * plus the copy-out, about 60% of copy bandwidth). Compiled as one loop,
 * intermediates stay in registers and only the outputs are stored. The
 * loop is made of the very expressions the tiles are compiled from (each
 * TILE_* macro keeps its expression as text, tile.h), so there is one
 * definition of every op; with contraction off (Note [Explicit FMA] in
 * vmath.h) and the library's own floating-point flags, a native kernel's
 * values equal the tiles' bit for bit. This is PyTorch's legacy CPU fuser
 * (fuser/cpu: C++ text, the system compiler, dlopen) on kiln's op table.
 * Compiling takes about 50 ms, so a kernel is compiled once its tile runs
 * have covered FUSION_CC_WORK elements in all (at once for a 4M-element
 * chain, after 128 calls for an LSTM cell over [32, 1024]; a test's small
 * groups never), or always in mode 2; when no compiler runs, or it rejects
 * the text, the group keeps its tile kernels and nothing else changes.
 * Measured at 2 threads: the arithmetic chain 63 -> 110-187 GB/s, the
 * transcendental chain 1.6-1.8 -> 1.2 ms, lstm_step_jit 9.1 -> 8.3 ms. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fusion_cc.h"

extern char **environ;

/* the text of src/ops/vmath.h, as a string (made by the Makefile) */
static const char vmath_text[] =
#include "vmath_text.h"
    ;

#ifndef KILN_NATIVE_CFLAGS
#define KILN_NATIVE_CFLAGS "-std=c11 -O2 -fno-math-errno -ffp-contract=off"
#endif

struct fusion_cc_kernel {
  void *dl;
  int fd; /* the checked library, open while loaded (Note [Kernel files]) */
  fusion_native_fn fn, fn_nt; /* fn_nt: NULL below the AVX2 level (or without the builtins) */
  fusion_native_fn fn_ip;     /* Note [In-place native loop] */
};

/* atomic: read and set by any thread (Note [Threads] in include/kiln.h) */
static atomic_int mode = -1;
static atomic_int cc_missing; /* the compiler could not be run: stop trying */

int exec_fusion_cc_mode(void) {
  if (mode < 0) {
    const char *e = getenv("KILN_NATIVE_FUSION");
    mode = !e || !*e ? 1 : !strcmp(e, "0") ? 0 : !strcmp(e, "2") ? 2 : 1;
  }
  return mode;
}

int exec_fusion_cc_set_mode(int m) {
  int prev = exec_fusion_cc_mode();
  mode = m < 0 ? 0 : m > 2 ? 2 : m;
  cc_missing = 0; /* try the compiler again */
  return prev;
}

/* ---- source -------------------------------------------------------------------- */

/* the many appends below */
#define put core_strbuf_printf

/* Operand a of step s, converted to the step's type: a step's value, a
 * scalar read before the loop, or the array of the first external operand
 * reading the same group input (one load per element however often an
 * input is used). */
static void put_operand(core_strbuf *b, const fusion_cc_step *steps, int s, int a, int k,
                        const int *first_k, const char *idx) {
  const fusion_cc_step *st = &steps[s];
  put(b, "(%s)", st->src->type);
  if (st->args[a] >= 0)
    put(b, "v%d", st->args[a]);
  else if (st->scalar[a])
    put(b, "s%d", k);
  else
    put(b, "x%d[%s]", first_k[k], idx);
}

/* The loop body: every step's value at index idx, in locals v0, v1, ... */
static void put_body(core_strbuf *b, const fusion_cc_step *steps, int n_steps, const int *first_k,
                     const char *idx) {
  static const char *const names[4][3] = {{0}, {"a"}, {"a", "b"}, {"c", "a", "b"}};
  int ext = 0;
  for (int s = 0; s < n_steps; s++) {
    const op_tile_src *src = steps[s].src;
    put(b, "      %s v%d;\n      {\n        const op_attrs *at = &A%d;\n        (void)at;\n",
        src->out_type, s, s);
    for (int a = 0; a < src->arity; a++) {
      put(b, "        %s %s = ", src->type, names[src->arity][a]);
      put_operand(b, steps, s, a, steps[s].args[a] < 0 ? ext++ : -1, first_k, idx);
      put(b, ";\n");
    }
    put(b, "        v%d = (%s)(%s);\n      }\n", s, src->out_type, src->expr);
  }
}

/* Note [Restrict parameters]: the loop is a function of its own whose
 * arrays are restrict-qualified parameters. gcc 12 takes restrict on block
 * -scope pointers only partly: a 5-input, 7-output LSTM cell loop written
 * with such locals needed run-time alias checks beyond its limit and
 * stayed scalar (slower than the tiles); as parameters it vectorizes.
 * Scalars and attributes become locals, kept in registers. */

/* The loop's external operands, as its parameters (decl) or as the
 * entry's arguments to it: scalars by value, each input's array once. */
static void put_operand_list(core_strbuf *b, const fusion_cc_step *steps, int n_steps,
                             const int *first_k, bool decl, const char *qual) {
  int k = 0;
  for (int s = 0; s < n_steps; s++)
    for (int a = 0; a < steps[s].src->arity; a++) {
      if (steps[s].args[a] >= 0) continue;
      const char *T = steps[s].src->type;
      if (steps[s].scalar[a] && decl)
        put(b, ",\n    const %s s%d", T, k);
      else if (steps[s].scalar[a])
        put(b, ", ((const %s *)opnd[%d])[0]", T, k);
      else if (first_k[k] == k && decl)
        put(b, ",\n    const %s *%sx%d", steps[s].atype[a], qual, k);
      else if (first_k[k] == k)
        put(b, ", opnd[%d]", k);
      k++;
    }
}

/* qual: "restrict " (Note [Restrict parameters]), or "" for the in-place
 * loop, whose outputs may be its inputs' arrays. */
static void put_loop_head(core_strbuf *b, const char *name, const fusion_cc_step *steps,
                          int n_steps, const int *out_steps, int n_out, const int *first_k,
                          const char *qual) {
  put(b, "__attribute__((noinline)) static void %s(int64_t n, const op_attrs *restrict A", name);
  put_operand_list(b, steps, n_steps, first_k, true, qual);
  for (int o = 0; o < n_out; o++)
    put(b, ",\n    %s *%sy%d", steps[out_steps[o]].src->out_type, qual, o);
  put(b, ") {\n");
  for (int st = 0; st < n_steps; st++) put(b, "  const op_attrs A%d = A[%d];\n", st, st);
  put(b, "  int64_t i = 0;\n");
}

/* The exported entry: unpacks the operand and output arrays for the loop. */
static void put_entry(core_strbuf *b, const char *name, const char *loop,
                      const fusion_cc_step *steps, int n_steps, int n_out, const int *first_k) {
  put(b,
      "void %s(void *const *outs, const void *const *opnd, int64_t n, const op_attrs *A) {\n"
      "  %s(n, A",
      name, loop);
  put_operand_list(b, steps, n_steps, first_k, false, "");
  for (int o = 0; o < n_out; o++) put(b, ", outs[%d]", o);
  put(b, ");\n}\n");
}

static uint64_t fnv(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

/* This CPU, as /proc/cpuinfo names its first processor (vendor, family,
 * model, feature flags), hashed: part of every kernel's source, so a kept
 * kernel (Note [Kernel files]) built with one CPU level's -march for one
 * CPU is never loaded on another (a home directory shared by a cluster's
 * machines). */
static uint64_t cpu_key(void) {
  static _Atomic uint64_t key; /* computed once; racing threads compute the same */
  if (key) return key;
  uint64_t h = 0xcbf29ce484222325ull;
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[8192];
  while (f && fgets(line, sizeof line, f) && line[0] != '\n') {
    static const char *const keep[] = {"vendor_id", "cpu family", "model", "flags"};
    for (size_t i = 0; i < sizeof keep / sizeof *keep; i++)
      if (!strncmp(line, keep[i], strlen(keep[i]))) h = fnv(h, line);
  }
  if (f) fclose(f);
  key = h | 1;
  return h | 1;
}

/* kiln_fused_nt for blocks of w elements (16: AVX-512, 8: AVX), each
 * block of outputs written with streaming stores of w * 4 bytes. */
static void put_nt(core_strbuf *b, int w, const fusion_cc_step *steps, int n_steps,
                   const int *out_steps, int n_out, const int *first_k) {
  int vb = w * 4; /* bytes per store */
  put(b,
      "typedef float kiln_vsf __attribute__((vector_size(%d)));\n"
      "typedef double kiln_vdf __attribute__((vector_size(%d)));\n",
      vb, vb);
  put_loop_head(b, "kiln_loop_nt", steps, n_steps, out_steps, n_out, first_k, "restrict ");
  put(b, "  for (; i + %d <= n; i += %d) {\n", w, w);
  for (int o = 0; o < n_out; o++)
    put(b, "    %s r%d[%d] __attribute__((aligned(%d)));\n", steps[out_steps[o]].src->out_type, o,
        w, vb);
  /* a constant trip count: the block is one vector iteration, and r
   * stays in a register (with j from i to i + 16, gcc 12 kept a guard and
   * went through the stack, a second store per vector) */
  put(b, "    for (int j = 0; j < %d; j++) {\n", w);
  put_body(b, steps, n_steps, first_k, "i + j");
  for (int o = 0; o < n_out; o++) put(b, "      r%d[j] = v%d;\n", o, out_steps[o]);
  put(b, "    }\n");
  const char *ps = w == 16 ? "__builtin_ia32_movntps512" : "__builtin_ia32_movntps256";
  const char *pd = w == 16 ? "__builtin_ia32_movntpd512" : "__builtin_ia32_movntpd256";
  for (int o = 0; o < n_out; o++) {
    if (!strcmp(steps[out_steps[o]].src->out_type, "double"))
      put(b,
          "    %s(y%d + i, *(const kiln_vdf *)r%d);\n"
          "    %s(y%d + i + %d, *(const kiln_vdf *)(r%d + %d));\n",
          pd, o, o, pd, o, w / 2, o, w / 2);
    else
      put(b, "    %s(y%d + i, *(const kiln_vsf *)r%d);\n", ps, o, o);
  }
  put(b, "  }\n  for (; i < n; i++) {\n");
  put_body(b, steps, n_steps, first_k, "i");
  for (int o = 0; o < n_out; o++) put(b, "      y%d[i] = v%d;\n", o, out_steps[o]);
  put(b, "  }\n}\n");
  put_entry(b, "kiln_fused_nt", "kiln_loop_nt", steps, n_steps, n_out, first_k);
}

/* Note [In-place native loop]: kiln_fused_ip serves a group whose outputs
 * took dying inputs' buffers (Note [Fused buffer reuse] in fusion.c), so an
 * output array may be an input array, always at the same index. The plain
 * loop's restrict parameters would make that undefined, so this loop has
 * none, and computes each block of 16 elements into local arrays before it
 * stores any: every load of a block precedes its stores in the program, a
 * store never meets a later load of its own address, and gcc still
 * vectorizes the block (its locals cannot alias the parameters). The tail
 * computes each element's values before storing them. So in-place groups
 * write their outputs directly, with plain stores (the lines were just
 * read), instead of through a tile buffer and a copy. */
static void put_inplace(core_strbuf *b, const fusion_cc_step *steps, int n_steps,
                        const int *out_steps, int n_out, const int *first_k) {
  enum { W = 16 };
  put_loop_head(b, "kiln_loop_ip", steps, n_steps, out_steps, n_out, first_k, "");
  put(b, "  for (; i + %d <= n; i += %d) {\n", W, W);
  for (int o = 0; o < n_out; o++)
    put(b, "    %s r%d[%d];\n", steps[out_steps[o]].src->out_type, o, W);
  put(b, "    for (int j = 0; j < %d; j++) {\n", W);
  put_body(b, steps, n_steps, first_k, "i + j");
  for (int o = 0; o < n_out; o++) put(b, "      r%d[j] = v%d;\n", o, out_steps[o]);
  put(b, "    }\n");
  for (int o = 0; o < n_out; o++)
    put(b, "    for (int j = 0; j < %d; j++) y%d[i + j] = r%d[j];\n", W, o, o);
  put(b, "  }\n  for (; i < n; i++) {\n");
  put_body(b, steps, n_steps, first_k, "i");
  for (int o = 0; o < n_out; o++) put(b, "      y%d[i] = v%d;\n", o, out_steps[o]);
  put(b, "  }\n}\n");
  put_entry(b, "kiln_fused_ip", "kiln_loop_ip", steps, n_steps, n_out, first_k);
}

char *exec_fusion_cc_source(const fusion_cc_step *steps, int n_steps, const int *out_steps, int n_out) {
  core_strbuf b = {0};
  put(&b, "/* kiln native fused kernel (src/exec/fusion_cc.c), cpu %016llx, level %s */\n",
      (unsigned long long)cpu_key(), core_cpu_level_name(core_cpu_level()));
  put(&b,
      "#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n"
      "typedef struct op_attrs { double s[%d]; } op_attrs;\n%s\n",
      OP_MAX_ATTRS, vmath_text);
  /* first_k[k]: the first array operand reading the same input as k */
  int first_k[FUSION_CC_MAX_OPERANDS], in_of[FUSION_CC_MAX_OPERANDS], n_ext = 0;
  for (int s = 0; s < n_steps; s++)
    for (int a = 0; a < steps[s].src->arity; a++) {
      if (steps[s].args[a] >= 0) continue;
      if (n_ext == FUSION_CC_MAX_OPERANDS) {
        core_free(b.p);
        core_error(KILN_ERR_UNSUPPORTED, "native fusion: more than %d operands", n_ext);
        return NULL;
      }
      int k = n_ext++;
      in_of[k] = steps[s].scalar[a] ? -1 : steps[s].in[a];
      first_k[k] = k;
      for (int j = 0; j < k; j++)
        if (in_of[k] >= 0 && in_of[j] == in_of[k]) {
          first_k[k] = j;
          break;
        }
    }
  /* kiln_fused: plain stores */
  put_loop_head(&b, "kiln_loop", steps, n_steps, out_steps, n_out, first_k, "restrict ");
  put(&b, "  for (; i < n; i++) {\n");
  put_body(&b, steps, n_steps, first_k, "i");
  for (int o = 0; o < n_out; o++) put(&b, "      y%d[i] = v%d;\n", o, out_steps[o]);
  put(&b, "  }\n}\n");
  put_entry(&b, "kiln_fused", "kiln_loop", steps, n_steps, n_out, first_k);
  put_inplace(&b, steps, n_steps, out_steps, n_out, first_k);
  /* kiln_fused_nt: streaming stores of whole blocks (outputs float or
   * double, 64-byte aligned), Note [Streaming stores] in fusion.c: 64-byte
   * stores of 16-element blocks with AVX-512, else 32-byte stores of
   * 8-element blocks with AVX (the AVX2 level) */
  bool nt = true;
  for (int o = 0; o < n_out; o++) {
    const char *ot = steps[out_steps[o]].src->out_type;
    nt = nt && (!strcmp(ot, "float") || !strcmp(ot, "double"));
  }
  if (nt) {
    /* the builtins behind _mm512_stream_ps/pd and _mm256_stream_ps/pd:
     * immintrin.h is 60,000 lines, most of a kernel's compile time */
    put(&b,
        "#if defined(__AVX512F__) && defined(__has_builtin)\n"
        "#if __has_builtin(__builtin_ia32_movntps512) && __has_builtin(__builtin_ia32_movntpd512)\n"
        "#define KILN_NT_DONE\n");
    put_nt(&b, 16, steps, n_steps, out_steps, n_out, first_k);
    put(&b,
        "#endif\n#endif\n"
        "#if !defined(KILN_NT_DONE) && defined(__AVX__) && defined(__has_builtin)\n"
        "#if __has_builtin(__builtin_ia32_movntps256) && __has_builtin(__builtin_ia32_movntpd256)\n");
    put_nt(&b, 8, steps, n_steps, out_steps, n_out, first_k);
    put(&b, "#endif\n#endif\n");
  }
  if (b.oom) {
    core_free(b.p);
    core_error(KILN_ERR_NOMEM, "native fusion: out of memory for the source");
    return NULL;
  }
  return b.p;
}

/* ---- compiling and loading ----------------------------------------------------- */

/* Runs the compiler: argv from KILN_CC and KILN_NATIVE_CFLAGS, stderr to
 * err_path. The exit status, or -1 when it could not be started. */
static int run_cc(const char *cc, const char *c_path, const char *so_path, const char *err_path) {
  char flags[] = KILN_NATIVE_CFLAGS, *save = NULL;
  char *argv[64];
  int argc = 0;
  argv[argc++] = (char *)cc;
  for (char *tok = strtok_r(flags, " ", &save); tok && argc < 54; tok = strtok_r(NULL, " ", &save))
    argv[argc++] = tok;
  /* the CPU level in use (Note [CPU levels]; named in the source, so in the
   * kernel file's key too): the kernel runs wherever the tiles do */
  static const char *const march[CORE_CPU_LEVELS] = {"-march=x86-64", "-march=x86-64-v3",
                                                     "-march=x86-64-v4"};
  argv[argc++] = (char *)march[core_cpu_level()];
  argv[argc++] = "-shared";
  argv[argc++] = "-fPIC";
  argv[argc++] = "-o";
  argv[argc++] = (char *)so_path;
  argv[argc++] = (char *)c_path;
  argv[argc] = NULL;
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa) != 0) return -1;
  posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawnp(&pid, cc, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return -1; /* exec failed */
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* The compiler's first message lines, for the error. */
static void read_err(const char *path, char *buf, size_t cap) {
  buf[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return;
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = 0;
  fclose(f);
  for (char *c = buf; *c; c++)
    if (*c == '\n') *c = ' ';
}

/* Note [Kernel files]: a compiled kernel is kept as
 * <dir>/fused-<hash>.so beside its source <dir>/fused-<hash>.c, where
 * <dir> is $KILN_CACHE_DIR (empty or "off": none), else
 * $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; the hash covers the compiler's
 * name, its flags and the source, whose first line names this CPU
 * (cpu_key: code built for one CPU must not run on another). A later process (the next training run,
 * each bench workload) loads the file instead of paying the compiler's
 * 50 ms again, as Inductor and numba's cache=True do. A file is used only
 * when the source beside it equals this kernel's, byte for byte (a hash
 * collision or a stale file is never loaded); files are written under a
 * temporary name and renamed, so a concurrent reader never sees half a
 * file; one that will not load is removed and rebuilt.
 *
 * Loading a library runs its code as this user, so nobody else may be able
 * to place or swap one (issue #20: another user's library was loaded from
 * a world-writable HOME, a symlinked ~/.cache/kiln, a world-writable
 * KILN_CACHE_DIR). The directory is used only when it is not a symbolic
 * link, is owned by this user with mode 0700 (it is created so), and no
 * directory above it is writable by others without the sticky bit or owned
 * by a user other than this one or root; it is opened once (O_NOFOLLOW) and
 * its descriptor checked with fstat. Files are opened relative to that
 * descriptor with O_NOFOLLOW, must be regular, ours, and not group- or
 * world-writable (fstat of the opened descriptor), and a library is loaded
 * through /proc/self/fd/N of the descriptor that was checked, never by a
 * path that could be swapped between the check and dlopen. glibc's dlopen
 * returns an already loaded library whose name matches, so that
 * descriptor stays open while its kernel is loaded (no two loaded kernels
 * share a /proc/self/fd name), and each library defines kiln_kernel_id,
 * the hash of its source, which is checked after dlopen. A directory
 * that fails a check is not used (the reason is printed once, and kept for
 * exec_fusion_cc_refusal): the kernel is compiled in a private mkdtemp
 * directory and nothing is kept. */
static _Thread_local char refusal[600];
const char *exec_fusion_cc_refusal(void) { return refusal[0] ? refusal : NULL; }
void (*exec_fusion_cc_before_load_hook)(const char *path);

static bool refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool refuse(const char *fmt, ...) {
  static atomic_int warned;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(refusal, sizeof refusal, fmt, ap);
  va_end(ap);
  if (!atomic_exchange(&warned, 1))
    fprintf(stderr, "kiln: warning: native fusion: %s; compiling in a private temporary "
                    "directory, nothing kept\n", refusal);
  return false;
}

/* out is a directory path; fails (with the reason) if one of its ancestors
 * lets another user replace what lies below it. From the root down, so the
 * message names the highest such directory. */
static bool ancestors_safe(const char *out) {
  char p[512];
  size_t n = strlen(out);
  for (size_t i = 1; i <= n && i < sizeof p; i++) {
    if (i < n && out[i] != '/') continue;
    if (i == n) break; /* the directory itself: checked by its descriptor */
    memcpy(p, out, i);
    p[i] = 0;
    if (i == 1 && out[0] == '/') p[1] = 0; /* never empty */
    struct stat st;
    if (stat(p, &st) != 0) return refuse("cannot inspect %s: %s", p, strerror(errno));
    if (st.st_uid != geteuid() && st.st_uid != 0)
      return refuse("not keeping kernels under %s: it is owned by another user (uid %ld)", p,
                    (long)st.st_uid);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
      return refuse("not keeping kernels under %s: it is writable by other users (mode %04o)",
                    p, (unsigned)(st.st_mode & 07777));
  }
  struct stat st;
  if (stat("/", &st) == 0 && (st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
    return refuse("not keeping kernels: / is writable by other users");
  return true;
}

/* The kernel directory's path in out and an open descriptor of it in *dfd
 * (the caller closes it), or false: none configured, or refused (reason in
 * exec_fusion_cc_refusal, see Note [Kernel files]). */
static bool cache_dir(char *out, size_t cap, int *dfd) {
  const char *d = getenv("KILN_CACHE_DIR");
  refusal[0] = 0;
  if (d) {
    if (!*d || !strcmp(d, "off")) return false;
    snprintf(out, cap, "%s", d);
  } else {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
      snprintf(out, cap, "%s/kiln", xdg);
    else if (home && *home)
      snprintf(out, cap, "%s/.cache/kiln", home);
    else
      return false;
  }
  if (out[0] != '/') return refuse("not keeping kernels in %s: not an absolute path", out);
  size_t n = strlen(out);
  while (n > 1 && out[n - 1] == '/') out[--n] = 0;
  /* mkdir -p, private */
  for (char *c = out + 1; *c; c++)
    if (*c == '/') {
      *c = 0;
      mkdir(out, 0700);
      *c = '/';
    }
  if (mkdir(out, 0700) != 0 && errno != EEXIST)
    return refuse("cannot make %s: %s", out, strerror(errno));
  if (!ancestors_safe(out)) return false;
  int fd = open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return refuse("not keeping kernels in %s: %s", out,
                  errno == ELOOP || errno == ENOTDIR ? "it is a symbolic link or not a directory"
                                                     : strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
    close(fd);
    if (st.st_uid != geteuid())
      return refuse("not keeping kernels in %s: it is owned by another user (uid %ld)", out,
                    (long)st.st_uid);
    return refuse("not keeping kernels in %s: its mode is %04o, not 0700", out,
                  (unsigned)(st.st_mode & 07777));
  }
  *dfd = fd;
  return true;
}

/* name in the directory dfd, opened for reading if it is a regular file of
 * ours that nobody else can write (fstat of the opened descriptor); -1
 * otherwise. */
static int open_trusted(int dfd, const char *name) {
  int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0) return -1;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & (S_IWGRP | S_IWOTH))) {
    close(fd);
    return -1;
  }
  return fd;
}

/* The whole of a small file (an open descriptor, which this closes) as a
 * core_alloc'd string, or NULL. */
static char *slurp_fd(int fd, size_t *len) {
  FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    if (fd >= 0) close(fd);
    return NULL;
  }
  char *buf = NULL;
  size_t n = 0, cap = 0;
  bool oom = false;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 16384;
      char *q = core_alloc(cap);
      if (!q) {
        oom = true; /* never a partial file taken for the whole */
        break;
      }
      if (buf) memcpy(q, buf, n);
      core_free(buf);
      buf = q;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
  }
  bool ok = buf && !oom && !ferror(f);
  fclose(f);
  if (!ok) {
    core_free(buf);
    return NULL;
  }
  buf[n] = 0;
  if (len) *len = n;
  return buf;
}

/* Writes data to name in the directory dfd (AT_FDCWD: name is a path)
 * through a temporary name and a rename. */
static bool put_file(int dfd, const char *name, const char *data, size_t len) {
  char tmp[700];
  snprintf(tmp, sizeof tmp, "%s.tmp-%ld", name, (long)getpid());
  int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!f && fd >= 0) close(fd);
  bool ok = f && fwrite(data, 1, len, f) == len;
  if (f && fclose(f) != 0) ok = false;
  if (ok && renameat(dfd, tmp, dfd, name) != 0) ok = false;
  if (!ok) unlinkat(dfd, tmp, 0);
  return ok;
}

/* dlopens the library open at fd (checked by the caller; owned by the
 * result, closed here on failure) through /proc/self/fd, checks that it is
 * the kernel of source hash id, and finds its entries; NULL with the error
 * set. path names it in messages and for the test hook. */
static fusion_cc_kernel *load_fd(int fd, const char *path, uint64_t id) {
  char proc[64];
  if (fd < 0) {
    core_error(KILN_ERR_UNSUPPORTED, "native fusion: %s is not a file of this user's", path);
    return NULL;
  }
  if (exec_fusion_cc_before_load_hook) exec_fusion_cc_before_load_hook(path);
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  void *dl = dlopen(proc, RTLD_NOW | RTLD_LOCAL);
  void *sym = dl ? dlsym(dl, "kiln_fused") : NULL;
  const unsigned long long *kid = dl ? dlsym(dl, "kiln_kernel_id") : NULL;
  if (!sym || !kid || *kid != id) {
    if (sym && kid)
      core_error(KILN_ERR_UNSUPPORTED, "native fusion: %s is another kernel", path);
    else
      core_error(KILN_ERR_UNSUPPORTED, "native fusion: cannot load the kernel: %s", dlerror());
    if (dl) dlclose(dl);
    close(fd);
    return NULL;
  }
  fusion_cc_kernel *k = core_calloc(1, sizeof *k);
  if (!k) {
    dlclose(dl);
    close(fd);
    core_error(KILN_ERR_NOMEM, "native fusion: out of memory");
    return NULL;
  }
  k->dl = dl;
  k->fd = fd;
  memcpy(&k->fn, &sym, sizeof sym); /* object to function pointer (POSIX) */
  void *nt = dlsym(dl, "kiln_fused_nt");
  if (nt) memcpy(&k->fn_nt, &nt, sizeof nt);
  void *ip = dlsym(dl, "kiln_fused_ip");
  if (ip) memcpy(&k->fn_ip, &ip, sizeof ip);
  return k;
}

static _Atomic int64_t files_loaded;
int64_t exec_fusion_cc_files_loaded(void) { return files_loaded; }

fusion_cc_kernel *exec_fusion_cc_compile(const char *source) {
  if (exec_fusion_cc_mode() == 0) {
    core_error(KILN_ERR_UNSUPPORTED, "native fusion: off");
    return NULL;
  }
  const char *cc = getenv("KILN_CC");
  if (!cc || !*cc) cc = "cc";
  char cdir[512], cached_c[64] = "", cached_so[64] = "";
  int dfd = -1;
  fusion_cc_kernel *k = NULL;
  uint64_t h = fnv(fnv(fnv(0xcbf29ce484222325ull, cc), KILN_NATIVE_CFLAGS), source);
  if (cache_dir(cdir, sizeof cdir, &dfd)) {
    snprintf(cached_c, sizeof cached_c, "fused-%016llx.c", (unsigned long long)h);
    snprintf(cached_so, sizeof cached_so, "fused-%016llx.so", (unsigned long long)h);
    char *text = slurp_fd(open_trusted(dfd, cached_c), NULL);
    bool same = text && !strcmp(text, source);
    core_free(text);
    if (same) {
      char shown[700];
      snprintf(shown, sizeof shown, "%s/%s", cdir, cached_so);
      k = load_fd(open_trusted(dfd, cached_so), shown, h);
      if (k) {
        files_loaded++;
        close(dfd);
        return k;
      }
      kiln_clear_error();
      unlinkat(dfd, cached_so, 0); /* will not load: rebuilt below */
    }
  }
  if (cc_missing) {
    if (dfd >= 0) close(dfd);
    core_error(KILN_ERR_UNSUPPORTED, "native fusion: no C compiler runs");
    return NULL;
  }
  /* Built beside its kept file when there is a kernel directory (renamed
   * into place, and loaded from there: a /tmp mounted noexec cannot load
   * it), else in a private temporary directory. */
  const char *tmp = getenv("TMPDIR");
  char dir[512] = "", c_path[700], so_path[700], err_path[700];
  if (dfd >= 0) {
    snprintf(dir, sizeof dir, "%s", cdir);
    snprintf(c_path, sizeof c_path, "%s.tmp-%ld.c", cached_so, (long)getpid());
    snprintf(so_path, sizeof so_path, "%s.tmp-%ld", cached_so, (long)getpid());
    snprintf(err_path, sizeof err_path, "%s.tmp-%ld.err", cached_so, (long)getpid());
  } else {
    snprintf(dir, sizeof dir, "%s/kiln-fuse-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
      core_error(KILN_ERR_IO, "native fusion: cannot make a directory in %s: %s",
                 tmp && *tmp ? tmp : "/tmp", strerror(errno));
      return NULL;
    }
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
      core_error(KILN_ERR_IO, "native fusion: cannot open %s: %s", dir, strerror(errno));
      rmdir(dir);
      return NULL;
    }
    snprintf(c_path, sizeof c_path, "kernel.c");
    snprintf(so_path, sizeof so_path, "kernel.so");
    snprintf(err_path, sizeof err_path, "cc.err");
  }
  /* the compiler is given full paths inside the checked directory */
  char c_full[1300], so_full[1300], err_full[1300];
  snprintf(c_full, sizeof c_full, "%s/%s", dir, c_path);
  snprintf(so_full, sizeof so_full, "%s/%s", dir, so_path);
  snprintf(err_full, sizeof err_full, "%s/%s", dir, err_path);
  /* the source as compiled: with its id (checked by load_fd) */
  size_t n_src = strlen(source);
  char *text = core_alloc(n_src + 96);
  if (!text) goto out;
  memcpy(text, source, n_src);
  n_src += (size_t)snprintf(text + n_src, 96,
                            "\nconst unsigned long long kiln_kernel_id = 0x%016llxull;\n",
                            (unsigned long long)h);
  bool wrote = put_file(dfd, c_path, text, n_src);
  core_free(text);
  if (!wrote) {
    core_error(KILN_ERR_IO, "native fusion: cannot write %s", c_full);
    goto out;
  }
  int rc = run_cc(cc, c_full, so_full, err_full);
  if (rc != 0) {
    char msg[400];
    read_err(err_full, msg, sizeof msg);
    if (rc < 0) cc_missing = 1;
    core_error(KILN_ERR_UNSUPPORTED, "native fusion: %s",
               rc < 0 ? "the C compiler did not run" : msg);
    goto out;
  }
  /* kept (Note [Kernel files]): the library renamed into place, then its
   * source beside it, which is what makes a later process trust it */
  if (cached_so[0] && renameat(dfd, so_path, dfd, cached_so) == 0) {
    char shown[700];
    snprintf(shown, sizeof shown, "%s/%s", cdir, cached_so);
    k = load_fd(open_trusted(dfd, cached_so), shown, h);
    if (k) put_file(dfd, cached_c, source, strlen(source));
  } else {
    k = load_fd(open_trusted(dfd, so_path), so_full, h);
  }
out:
  unlinkat(dfd, c_path, 0);
  unlinkat(dfd, so_path, 0);
  unlinkat(dfd, err_path, 0);
  close(dfd);
  if (!cached_so[0]) rmdir(dir);
  return k;
}

fusion_native_fn exec_fusion_cc_fn(const fusion_cc_kernel *k) { return k ? k->fn : NULL; }
fusion_native_fn exec_fusion_cc_fn_stream(const fusion_cc_kernel *k) { return k ? k->fn_nt : NULL; }
fusion_native_fn exec_fusion_cc_fn_inplace(const fusion_cc_kernel *k) { return k ? k->fn_ip : NULL; }

void exec_fusion_cc_free(fusion_cc_kernel *k) {
  if (!k) return;
  dlclose(k->dl);
  close(k->fd);
  core_free(k);
}
