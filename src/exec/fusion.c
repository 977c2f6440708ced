/* src/exec/fusion.c: the fused-kernel executor for prim::FusionGroup.
 *
 * Note [Fused tiles]: a group is a chain of elementwise ops. Its output
 * index space (the broadcast of its tensor inputs) is walked in tiles of
 * EW_TILE elements; for each tile the inputs are gathered once into small
 * buffers and every op of the chain runs its own tile kernel from the op
 * table on them, so intermediates live only in L1/L2 and only the group's
 * outputs reach memory (numexpr's approach: most of a compiler's benefit,
 * no compiler). Tiles run in parallel. A kernel is keyed by the inputs'
 * dtypes only (shape-polymorphic): broadcasting is resolved per call. When
 * an input requires grad (with grad mode on) the group runs unfused through
 * the interpreter, so eager autograd records it; fusion then happens inside
 * DifferentiableGraphs, whose forward and backward run without recording.
 * A kernel met over large inputs is also compiled to one native loop from
 * the same tile expressions (Note [Native kernels] in fusion_cc.c); it
 * runs in place of the per-op passes, tile by tile, with the same values. */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <immintrin.h>

#include "fusion.h"
#include "fusion_cc.h"
#include "ir/scalar.h"
#include "ops/ew.h"

#define MAX_ARGS 8

static _Atomic int64_t kernels_compiled, kernels_native, native_failures;

int64_t kiln_fused_kernels_compiled(void) { return atomic_load(&kernels_compiled); }
int64_t kiln_fused_kernels_native(void) { return atomic_load(&kernels_native); }
int64_t exec_fusion_native_failures(void) { return atomic_load(&native_failures); }

/* An operand or argument of a step. */
typedef enum { SRC_INPUT, SRC_STEP, SRC_CONST } src_kind;

typedef struct fsrc {
  uint8_t kind;
  int index;       /* input or step */
  op_val k;        /* SRC_CONST */
} fsrc;

typedef struct fstep {
  int op;
  int n_args;
  fsrc args[MAX_ARGS];
} fstep;

typedef struct kstep {
  op_tile_fn tile;
  kiln_dtype compute, out;
  op_attrs attrs;
} kstep;

typedef struct fkernel {
  int8_t sig[64];  /* per input: dtype, or -1 for numbers (tier in sig_tier) */
  int8_t tier[64]; /* 0 wrapped number, 1 zero-dim, 2 dimensioned */
  kstep *steps;
  /* Note [Native kernels]: the group as one compiled loop, when every step
   * has tile text */
  _Atomic int8_t native_state; /* 0 not tried (or not eligible), 1 loaded, -1 failed */
  bool native_eligible;
  int64_t work; /* elements its tile runs covered (Note [Native kernels]); native_lock */
  fusion_cc_kernel *native;
  _Atomic int refs; /* the cache's and each running call's (Note [Kernel cache]) */
} fkernel;

static void fkernel_free(fkernel *k) {
  if (!k || atomic_fetch_sub(&k->refs, 1) > 1) return;
  exec_fusion_cc_free(k->native);
  core_free(k->steps);
  core_free(k);
}

struct fused_group {
  uint64_t hash;       /* the program's structure (ops, constants, wiring) */
  ir_graph *sub;
  int n_in, n_out;
  fstep *steps;
  int n_steps;
  int *out_step;
  exec_code *plain;
  bool dyn_attrs; /* a step reads an attribute (alpha, a slope) from an input */
};

void exec_fused_group_free(void *p) {
  fused_group *f = p;
  if (!f) return;
  for (int s = 0; s < f->n_steps; s++)
    for (int a = 0; a < f->steps[s].n_args; a++)
      if (f->steps[s].args[a].k.tag == OP_VAL_STR) core_free((void *)f->steps[s].args[a].k.s);
  core_free(f->steps);
  core_free(f->out_step);
  exec_code_free(f->plain);
  ir_graph_free(f->sub);
  core_free(f);
}

/* Note [Kernel cache]: kernels are cached process-wide by the program's
 * structure and the inputs' dtypes, so the same chain met again (another
 * batch size re-traced inside a DifferentiableGraph, another function)
 * reuses its kernel. Threads share it (Note [Threads] in include/kiln.h):
 * kcache_lock guards the table, a call holds a reference to its kernel
 * (refs) so an eviction by another thread frees it only after the call,
 * and native_lock guards each kernel's work count and native compile. */
static pthread_mutex_t kcache_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t native_lock = PTHREAD_MUTEX_INITIALIZER;
#define KCACHE 256
static struct {
  uint64_t hash;
  fkernel *k;
} kcache[KCACHE];
static int kcache_next;

static int const_of(const ir_node *n, op_val *out) {
  ir_const c;
  if (ir_constant_of(n, &c) < 0) return -1; /* Note [Constant values] */
  switch (c.tag) {
  case IR_CONST_NONE: *out = OPV_NONE; return 0;
  case IR_CONST_INT: *out = OPV_I(c.i); return 0;
  case IR_CONST_FLOAT: *out = OPV_F(c.f); return 0;
  case IR_CONST_BOOL: *out = OPV_B(c.b); return 0;
  case IR_CONST_STR: { /* the step owns its copy */
    char *s = core_strdup(c.s);
    if (!s) return KILN_ERR_NOMEM;
    *out = OPV_S(s);
    return 0;
  }
  default: return core_error(KILN_ERR_UNSUPPORTED, "FusionGroup: unsupported constant");
  }
}

fused_group *exec_fused_group_new(const ir_graph *sub) {
  fused_group *f = core_calloc(1, sizeof *f);
  if (!f) return NULL;
  f->sub = ir_graph_clone(sub);
  if (!f->sub) goto fail;
  const ir_block *top = ir_graph_top(f->sub);
  f->n_in = ir_block_n_params(top);
  f->n_out = ir_block_n_returns(top);
  int n_nodes = 0;
  for (const ir_node *n = top->first; n; n = n->next) n_nodes++;
  f->steps = core_calloc((size_t)(n_nodes ? n_nodes : 1), sizeof *f->steps);
  f->out_step = core_calloc((size_t)(f->n_out ? f->n_out : 1), sizeof *f->out_step);
  int n_vals = ir_graph_value_count(f->sub);
  int *step_of = core_alloc((size_t)(n_vals ? n_vals : 1) * sizeof *step_of);
  int *input_of = core_alloc((size_t)(n_vals ? n_vals : 1) * sizeof *input_of);
  const ir_node **const_of_val = core_calloc((size_t)(n_vals ? n_vals : 1), sizeof *const_of_val);
  if (!f->steps || !f->out_step || !step_of || !input_of || !const_of_val) {
    core_free(step_of);
    core_free(input_of);
    core_free(const_of_val);
    goto fail;
  }
  for (int i = 0; i < n_vals; i++) step_of[i] = input_of[i] = -1;
  for (int i = 0; i < f->n_in; i++) input_of[ir_block_param(top, i)->id] = i;
  int rc = 0;
  for (const ir_node *n = top->first; n && rc == 0; n = n->next) {
    if (n->prim == IR_PRIM_CONSTANT) {
      const_of_val[n->outputs[0]->id] = n;
      continue;
    }
    if (n->op < 0 || !(op_table[n->op].flags & OPF_ELEMENTWISE) || n->n_outputs != 1 ||
        n->n_inputs > MAX_ARGS) {
      rc = core_error(KILN_ERR_UNSUPPORTED, "FusionGroup: %s cannot be fused", ir_node_kind(n));
      break;
    }
    fstep *s = &f->steps[f->n_steps];
    s->op = n->op;
    s->n_args = n->n_inputs;
    for (int a = 0; a < n->n_inputs && rc == 0; a++) {
      int id = n->inputs[a]->id;
      if (input_of[id] >= 0) {
        s->args[a] = (fsrc){.kind = SRC_INPUT, .index = input_of[id]};
        if (a >= op_table[n->op].n_operands) f->dyn_attrs = true;
      }
      else if (step_of[id] >= 0) s->args[a] = (fsrc){.kind = SRC_STEP, .index = step_of[id]};
      else if (const_of_val[id]) {
        s->args[a].kind = SRC_CONST;
        rc = const_of(const_of_val[id], &s->args[a].k);
      } else
        rc = core_error(KILN_ERR_INVALID, "FusionGroup: an input of %s is undefined", ir_node_kind(n));
    }
    step_of[n->outputs[0]->id] = f->n_steps++;
  }
  uint64_t h = core_hash_mix(0xf05e, (uint64_t)f->n_in);
  for (int st = 0; st < f->n_steps; st++) {
    h = core_hash_mix(h, (uint64_t)f->steps[st].op);
    for (int a = 0; a < f->steps[st].n_args; a++) {
      const fsrc *src = &f->steps[st].args[a];
      h = core_hash_mix(core_hash_mix(h, src->kind), (uint64_t)src->index);
      if (src->kind == SRC_CONST) {
        double d = op_val_num(&src->k);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        h = core_hash_mix(core_hash_mix(h, src->k.tag), bits);
        if (src->k.tag == OP_VAL_STR)
          for (const char *c = src->k.s; *c; c++) h = core_hash_mix(h, (unsigned char)*c);
      }
    }
  }
  for (int o = 0; o < f->n_out && rc == 0; o++) {
    int id = ir_block_return(top, o)->id;
    if (step_of[id] < 0) rc = core_error(KILN_ERR_UNSUPPORTED, "FusionGroup: output %d is not computed", o);
    f->out_step[o] = step_of[id];
  }
  core_free(step_of);
  core_free(input_of);
  core_free(const_of_val);
  if (rc < 0) goto fail;
  for (int o = 0; o < f->n_out; o++) h = core_hash_mix(h, (uint64_t)f->out_step[o]);
  f->hash = h;
  return f;
fail:
  exec_fused_group_free(f);
  return NULL;
}

/* ---- kernels (per input dtypes) ------------------------------------------------ */

static int input_sig(const exec_value *v, int8_t *dt, int8_t *tier) {
  switch (v->tag) {
  case EXEC_V_TENSOR:
    *dt = (int8_t)v->t->dtype;
    *tier = v->t->wrapped_number ? 0 : v->t->ndim == 0 ? 1 : 2;
    return 0;
  case EXEC_V_INT: *dt = KILN_DTYPE_I64; *tier = 0; return 0;
  case EXEC_V_FLOAT: *dt = KILN_DTYPE_F64; *tier = 0; return 0;
  case EXEC_V_BOOL: *dt = KILN_DTYPE_BOOL; *tier = 0; return 0;
  default: return core_error(KILN_ERR_INVALID, "FusionGroup: a %s input", exec_tag_name(v->tag));
  }
}

static const char *const c_type[KILN_DTYPE_COUNT] = {"float", "double", "int64_t", "bool"};

/* Whether a tile text's type names dtype dt ("_Bool" where a macro
 * expanded bool before stringizing it, as compare.c's CMP_TILES does). */
static bool names_dtype(const char *type, kiln_dtype dt) {
  return !strcmp(type, c_type[dt]) || (dt == KILN_DTYPE_BOOL && !strcmp(type, "_Bool"));
}

/* A kernel may be compiled natively when every step has tile text (tile.h)
 * for its compute dtype that reads and gives the dtypes the step computes
 * in and gives. Operands are converted by C casts, as the tile executor's
 * conversions (op_ew_convert) are. */
static void native_eligibility(const fused_group *f, fkernel *kn) {
  kn->native_eligible = false;
  for (int s = 0; s < f->n_steps; s++) {
    const op_info *op = &op_table[f->steps[s].op];
    const kstep *ks = &kn->steps[s];
    const op_tile_src *src = op_tile_text(f->steps[s].op, ks->compute);
    if (!src || src->arity != op->n_operands || src->arity > 3 ||
        !names_dtype(src->type, ks->compute) || !names_dtype(src->out_type, ks->out))
      return;
    /* a float operand of an int64 step would need core_f2i, which the
     * kernel's source lacks (promotion never makes one: float wins) */
    for (int a = 0; a < op->n_operands && ks->compute == KILN_DTYPE_I64; a++) {
      const fsrc *fs = &f->steps[s].args[a];
      int from = -1;
      if (fs->kind == SRC_STEP) from = (int)kn->steps[fs->index].out;
      if (fs->kind == SRC_INPUT && kn->tier[fs->index] == 2) from = kn->sig[fs->index];
      if (from == KILN_DTYPE_F32 || from == KILN_DTYPE_F64) return;
    }
  }
  kn->native_eligible = f->n_steps > 0;
}

/* Compiles kn's native kernel (once): on failure the group keeps its tile
 * kernels, the failure is counted, and no error is left set. */
static void native_compile(const fused_group *f, fkernel *kn) {
  fusion_cc_step cs[FUSION_MAX_STEPS];
  for (int s = 0; s < f->n_steps; s++) {
    const fstep *st = &f->steps[s];
    cs[s].src = op_tile_text(st->op, kn->steps[s].compute);
    for (int a = 0; a < cs[s].src->arity; a++) {
      const fsrc *src = &st->args[a];
      cs[s].args[a] = src->kind == SRC_STEP ? src->index : -1;
      cs[s].in[a] = src->kind == SRC_INPUT ? src->index : -1;
      /* pre-filled in the compute dtype (Note [Scalar tiles]) for every
       * shape this kernel meets; other inputs arrive in their own dtype */
      cs[s].scalar[a] =
          src->kind == SRC_CONST || (src->kind == SRC_INPUT && kn->tier[src->index] < 2);
      cs[s].atype[a] = src->kind == SRC_INPUT ? c_type[kn->sig[src->index]] : cs[s].src->type;
    }
  }
  char *text = exec_fusion_cc_source(cs, f->n_steps, f->out_step, f->n_out);
  kn->native = text ? exec_fusion_cc_compile(text) : NULL;
  core_free(text);
  kn->native_state = kn->native ? 1 : -1;
  if (kn->native) {
    atomic_fetch_add(&kernels_native, 1);
  } else {
    atomic_fetch_add(&native_failures, 1);
    kiln_clear_error();
  }
}

static fkernel *kernel_build(fused_group *f, const exec_value *in);

/* The kernel for f's inputs, with a reference the caller drops with
 * fkernel_free; NULL with the error set. */
static fkernel *kernel_for(fused_group *f, const exec_value *in) {
  pthread_mutex_lock(&kcache_lock);
  fkernel *kn = kernel_build(f, in);
  if (kn) atomic_fetch_add(&kn->refs, 1);
  pthread_mutex_unlock(&kcache_lock);
  return kn;
}

/* kernel_for under kcache_lock: the cached kernel or a new one, cached. */
static fkernel *kernel_build(fused_group *f, const exec_value *in) {
  int8_t sig[64], tier[64];
  if (f->n_in > 64) {
    core_error(KILN_ERR_UNSUPPORTED, "FusionGroup: more than 64 inputs");
    return NULL;
  }
  for (int i = 0; i < f->n_in; i++)
    if (input_sig(&in[i], &sig[i], &tier[i]) < 0) return NULL;
  uint64_t key = f->hash;
  for (int i = 0; i < f->n_in; i++) key = core_hash_mix(core_hash_mix(key, (uint64_t)(sig[i] + 1)), (uint64_t)tier[i]);
  for (int k = 0; k < KCACHE; k++)
    if (kcache[k].k && kcache[k].hash == key && !memcmp(kcache[k].k->sig, sig, (size_t)f->n_in) &&
        !memcmp(kcache[k].k->tier, tier, (size_t)f->n_in))
      return kcache[k].k;
  fkernel *kn = core_calloc(1, sizeof *kn);
  if (kn) kn->steps = core_calloc((size_t)(f->n_steps ? f->n_steps : 1), sizeof *kn->steps);
  kiln_tensor *fakes = core_calloc((size_t)(f->n_steps + f->n_in + 1), sizeof *fakes);
  if (!kn || !kn->steps || !fakes) goto fail; /* core_calloc set the error */
  kn->refs = 1; /* the cache's */
  memcpy(kn->sig, sig, (size_t)f->n_in);
  memcpy(kn->tier, tier, (size_t)f->n_in);
  /* Simulate dtype promotion on data-less stand-ins: one per input and
   * per step result, of the right dtype and tier. */
  kiln_tensor *fin = fakes + f->n_steps;
  for (int i = 0; i < f->n_in; i++) {
    fin[i].dtype = (kiln_dtype)sig[i];
    fin[i].ndim = tier[i] == 2 ? 1 : 0;
    fin[i].shape[0] = 1;
    fin[i].wrapped_number = tier[i] == 0;
  }
  int8_t step_tier[FUSION_MAX_STEPS];
  for (int s = 0; s < f->n_steps; s++) {
    const fstep *st = &f->steps[s];
    op_val args[MAX_ARGS];
    int t = 0;
    for (int a = 0; a < st->n_args; a++) {
      const fsrc *src = &st->args[a];
      if (src->kind == SRC_CONST) {
        args[a] = src->k;
      } else if (src->kind == SRC_INPUT) {
        if (in[src->index].tag == EXEC_V_TENSOR)
          args[a] = OPV_T(&fin[src->index]);
        else if (exec_value_as_op((exec_value *)&in[src->index], &args[a]) < 0)
          goto fail;
        if (tier[src->index] > t) t = tier[src->index];
      } else {
        args[a] = OPV_T(&fakes[src->index]);
        if (step_tier[src->index] > t) t = step_tier[src->index];
      }
    }
    ew_plan p;
    if (op_ew_plan(st->op, args, st->n_args, &p) < 0) goto fail;
    kn->steps[s] = (kstep){op_table[st->op].tiles[p.compute], p.compute, p.out_dtype, p.attrs};
    fakes[s].dtype = p.out_dtype;
    fakes[s].ndim = t == 2 ? 1 : 0;
    fakes[s].shape[0] = 1;
    step_tier[s] = (int8_t)(t == 0 ? 1 : t); /* a result is a tensor, never a wrapped number */
  }
  core_free(fakes);
  native_eligibility(f, kn);
  int slot = kcache_next++ % KCACHE;
  fkernel_free(kcache[slot].k);
  kcache[slot].hash = key;
  kcache[slot].k = kn;
  atomic_fetch_add(&kernels_compiled, 1);
  return kn;
fail:
  core_free(fakes);
  fkernel_free(kn);
  return NULL;
}

/* ---- running ------------------------------------------------------------------------ */

/* Note [Scratch]: tile buffers are per-thread scratch kept between calls
 * (grown, never shrunk): a group called once per time step would otherwise
 * map and unmap a few hundred KB every call. */
static _Thread_local char *scratch_mem[2];
static _Thread_local size_t scratch_cap[2];

/* Note [Thread exit] (core/thread.c): the exiting thread's scratch (a
 * program's own threads, not only OpenMP's, run fused groups). */
static void release_scratch(void) {
  for (int i = 0; i < 2; i++) {
    core_free_aligned(scratch_mem[i]);
    scratch_mem[i] = NULL;
    scratch_cap[i] = 0;
  }
}
__attribute__((constructor)) static void scratch_ctor(void) { core_thread_on_exit(release_scratch); }

static char *scratch(int which, size_t n) {
  if (n > scratch_cap[which]) {
    char *p = core_alloc_aligned(n);
    if (!p) return NULL;
    core_thread_arm();
    core_free_aligned(scratch_mem[which]);
    scratch_mem[which] = p;
    scratch_cap[which] = n;
  }
  return scratch_mem[which];
}

/* Note [Streaming stores]: a group's outputs are computed into a tile
 * buffer and then copied out; when they are bigger than the caches, the
 * copy uses non-temporal stores, which skip the read-for-ownership of
 * every output line (a third of the memory traffic of x -> f(x)). With
 * AVX-512 each store writes a whole 64-byte line; the store width follows
 * the CPU level (Note [CPU levels]), SSE2's 16 bytes at the baseline. */
CORE_TARGET_AVX512 static void stream_512(char *dst, const char *src, size_t nbytes) {
  for (size_t k = 0; k < nbytes; k += 64)
    _mm512_stream_ps((float *)(dst + k), _mm512_load_ps((const float *)(src + k)));
}
CORE_TARGET_AVX2 static void stream_256(char *dst, const char *src, size_t nbytes) {
  for (size_t k = 0; k < nbytes; k += 32)
    _mm256_stream_ps((float *)(dst + k), _mm256_load_ps((const float *)(src + k)));
}
static void stream_128(char *dst, const char *src, size_t nbytes) {
  for (size_t k = 0; k < nbytes; k += 16)
    _mm_stream_ps((float *)(dst + k), _mm_load_ps((const float *)(src + k)));
}

static void store_tile(char *dst, const char *src, size_t nbytes, bool stream) {
  int level = core_cpu_level();
  size_t width = level == CORE_CPU_AVX512 ? 64 : level == CORE_CPU_AVX2 ? 32 : 16;
  if (stream && ((uintptr_t)dst & (width - 1)) == 0) {
    size_t k = nbytes / width * width;
    if (level == CORE_CPU_AVX512) stream_512(dst, src, k);
    else if (level == CORE_CPU_AVX2) stream_256(dst, src, k);
    else stream_128(dst, src, k);
    memcpy(dst + k, src + k, nbytes - k);
    return;
  }
  memcpy(dst, src, nbytes);
}

#define PREFETCH_AHEAD 4

/* The last-level cache's size as this CPU sees it: sysfs's index3 (the
 * L3 shared by this core's complex), else sysconf, else 32 MiB. glibc's
 * sysconf can report every L3 of the package together (384 MiB on this
 * VM, whose cores share 32 MiB). */
int64_t exec_fusion_llc_bytes(void) {
  static _Atomic int64_t bytes; /* threads racing here compute the same */
  int64_t n = bytes;
  if (!n) {
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    long long v = 0;
    char unit = 0;
    if (f) {
      if (fscanf(f, "%lld%c", &v, &unit) < 1) v = 0;
      fclose(f);
    }
    v *= unit == 'K' ? 1024 : unit == 'M' ? 1 << 20 : 1;
    if (v <= 0) v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    n = v > 0 ? v : 32 << 20;
    bytes = n;
  }
  return n;
}

static void store_fence(void) { _mm_sfence(); }


static int run_plain(fused_group *f, exec_value *in, exec_value *out) {
  if (!f->plain && !(f->plain = exec_compile(f->sub, NULL))) return -1;
  return exec_code_run(f->plain, in, out);
}

/* One call's state, shared by its phases and by every tile. */
typedef struct fused_call {
  fused_group *f;
  fkernel *kn;
  exec_value *in;
  const kstep *ksteps;          /* kn->steps, or the call's copy (Note [Run-time attributes]) */
  kstep dyn[FUSION_MAX_STEPS];
  int ndim;
  int64_t shape[KILN_MAX_DIMS], numel, n_tiles;
  size_t slot;                  /* bytes of one tile buffer */
  int n_bufs;                   /* tile buffers per thread */
  ew_operand ops[64];
  const void *pre[FUSION_MAX_STEPS][EW_MAX_OPERANDS]; /* Note [Scalar tiles] */
  fusion_native_fn native, native_nt, native_ip;
  op_attrs natt[FUSION_MAX_STEPS];
  bool stream;
  uint64_t reusable; /* inputs whose buffers outputs may take (Note [Fused buffer reuse]) */
  bool aliased;      /* an output took an input's buffer */
  kiln_tensor *outs[64];
} fused_call;

/* Phase 1: the call's index space (the inputs' broadcast). 0, or 1 when
 * the group must run unfused: an input requires grad or is not on the
 * CPU, the inputs do not broadcast, the group exceeds the kernel's arrays,
 * or an output is narrower than the index space. */
static int index_space(fused_call *c) {
  fused_group *f = c->f;
  exec_value *in = c->in;
  bool grad_on = kiln_is_grad_enabled();
  c->ndim = 0;
  /* the kernel's fixed arrays; the fusion pass keeps groups within them */
  if (f->n_in > FUSION_MAX_IO || f->n_out > FUSION_MAX_IO) return 1;
  for (int i = 0; i < f->n_in; i++) {
    if (in[i].tag != EXEC_V_TENSOR) continue;
    const kiln_tensor *t = in[i].t;
    if (t->device != CORE_DEVICE_CPU || (grad_on && t->requires_grad)) return 1;
    if (op_broadcast_shapes("prim::FusionGroup", c->ndim, c->shape, t->ndim, t->shape, &c->ndim,
                            c->shape) < 0) {
      kiln_clear_error(); /* inputs of independent parts: let the ops decide */
      return 1;
    }
  }
  c->numel = core_numel(c->ndim, c->shape);
  /* every output must span the whole index space: all steps are computed
   * over it (inputs broadcast), which is right for the steps themselves,
   * but an output narrower than it must keep its own shape: run unfused */
  int8_t sh_nd[FUSION_MAX_STEPS];
  int64_t sh[FUSION_MAX_STEPS][KILN_MAX_DIMS];
  if (f->n_steps > FUSION_MAX_STEPS || c->numel == 0) return 1;
  for (int s = 0; s < f->n_steps; s++) {
    int nd = 0;
    int64_t cur[KILN_MAX_DIMS];
    for (int a = 0; a < f->steps[s].n_args; a++) {
      const fsrc *src = &f->steps[s].args[a];
      if (src->kind == SRC_INPUT && in[src->index].tag == EXEC_V_TENSOR) {
        const kiln_tensor *t = in[src->index].t;
        op_broadcast_shapes("prim::FusionGroup", nd, cur, t->ndim, t->shape, &nd, cur);
      } else if (src->kind == SRC_STEP) {
        op_broadcast_shapes("prim::FusionGroup", nd, cur, sh_nd[src->index], sh[src->index], &nd,
                            cur);
      }
    }
    sh_nd[s] = (int8_t)nd;
    memcpy(sh[s], cur, (size_t)nd * sizeof *cur);
  }
  for (int o = 0; o < f->n_out; o++) {
    int s = f->out_step[o];
    if (sh_nd[s] != c->ndim || memcmp(sh[s], c->shape, (size_t)c->ndim * sizeof *c->shape))
      return 1;
  }
  return 0;
}

/* Phase 2: the steps as this call runs them. Note [Run-time attributes]:
 * a number input in an attribute position (lazy tensors record add's
 * alpha = -lr as data) is read per call; the cached kernel holds the values
 * of the call that built it. < 0 with the error set. */
static int call_steps(fused_call *c) {
  fused_group *f = c->f;
  c->ksteps = c->kn->steps;
  if (!f->dyn_attrs) return 0;
  memcpy(c->dyn, c->kn->steps, (size_t)f->n_steps * sizeof *c->dyn);
  for (int s = 0; s < f->n_steps; s++) {
    int nin = op_table[f->steps[s].op].n_operands;
    for (int a = nin; a < f->steps[s].n_args && a - nin < OP_MAX_ATTRS; a++) {
      const fsrc *src = &f->steps[s].args[a];
      if (src->kind != SRC_INPUT) continue;
      op_val v;
      if (exec_value_as_op(&c->in[src->index], &v) < 0 || !op_val_is_num(&v))
        return core_error(KILN_ERR_INVALID, "FusionGroup: %s expects a number for argument %d",
                          op_table[f->steps[s].op].name, a);
      c->dyn[s].attrs.s[a - nin] = op_val_num(&v);
    }
  }
  c->ksteps = c->dyn;
  return 0;
}

/* Phase 3: the native kernel (compiled once it is due, Note [Native
 * kernels]) or none, and how outputs are stored. */
static void choose_kernel(fused_call *c) {
  fused_group *f = c->f;
  fkernel *kn = c->kn;
  int cc_mode = exec_fusion_cc_mode();
  if (kn->native_eligible && kn->native_state == 0) {
    pthread_mutex_lock(&native_lock);
    if (kn->native_state == 0 &&
        (cc_mode == 2 || (cc_mode == 1 && (kn->work += c->numel) >= FUSION_CC_WORK)))
      native_compile(f, kn);
    pthread_mutex_unlock(&native_lock);
  }
  c->native = kn->native_state == 1 && cc_mode ? exec_fusion_cc_fn(kn->native) : NULL;
  c->native_nt = c->native ? exec_fusion_cc_fn_stream(kn->native) : NULL;
  c->native_ip = c->native ? exec_fusion_cc_fn_inplace(kn->native) : NULL;
  if (c->native)
    for (int s = 0; s < f->n_steps; s++) c->natt[s] = c->ksteps[s].attrs;
  /* outputs larger than the caches are written with streaming stores */
  c->stream = c->numel * 4 >= (4 << 20);
  /* Note [Native stores]: a native kernel computes fast enough that where
   * its outputs go decides its speed. Streaming stores send them to
   * memory; plain stores leave them in the last-level cache, where the
   * next op (or call) reads them, but read each line before writing it.
   * Measured on the arithmetic chain (16 MB in, 16 MB out, L3-resident;
   * kiln's copy_4m alongside):
   *   2 threads: plain 110-118 GB/s, streaming 83 (copy 101-125);
   *   1 thread:  plain 57-60 GB/s,  streaming 72-77 (copy 68-74).
   * Two cores together write memory slower than they reach the cache; one
   * core's own link is the limit, and plain stores' extra read costs it.
   * So with several threads native kernels stream only outputs larger than
   * the cache, and a lone thread streams as the tiles do. (The tile
   * executor keeps its threshold at any thread count: its passes, not
   * memory, bound it, and it measured faster streaming, 69-84 against
   * 43-68 GB/s.) */
  if (c->native && omp_get_max_threads() > 1 && c->numel >= OP_PARALLEL_MIN) {
    int64_t out_bytes = 0;
    for (int o = 0; o < f->n_out; o++)
      out_bytes += c->numel * (int64_t)kiln_dtype_size(c->ksteps[f->out_step[o]].out);
    c->stream = out_bytes >= exec_fusion_llc_bytes();
  }
}

/* Phase 4: the outputs, the inputs' operand walkers, and Note [Scalar
 * tiles]: constants, number inputs and one-element tensors are spread over
 * a tile once per run, in each consuming step's compute dtype, and shared
 * read-only by every tile: per tile they cost nothing. < 0 on OOM. */
static int prepare(fused_call *c) {
  fused_group *f = c->f;
  exec_value *in = c->in;
  if (f->n_out > 64) return core_error(KILN_ERR_UNSUPPORTED, "FusionGroup: more than 64 outputs");
  uint64_t free_in = c->reusable;
  for (int o = 0; o < f->n_out; o++) {
    kiln_dtype dt = c->ksteps[f->out_step[o]].out;
    for (int i = 0; i < f->n_in && i < 64 && !c->outs[o]; i++) {
      const kiln_tensor *t = in[i].t;
      if (!(free_in >> i & 1) || t->dtype != dt || t->ndim != c->ndim ||
          memcmp(t->shape, c->shape, (size_t)c->ndim * sizeof *c->shape))
        continue;
      for (int j = 0; j < f->n_in && j < 64; j++) /* the same tensor passed twice */
        if (in[j].tag == EXEC_V_TENSOR && in[j].t == t) free_in &= ~(1ull << j);
      c->outs[o] = kiln_retain(in[i].t);
      core_bump_version(c->outs[o]); /* an in-place write (Note [Packed B cache]) */
      c->aliased = true;
    }
    if (!c->outs[o] && !(c->outs[o] = core_tensor_new(c->ndim, c->shape, dt)))
      return KILN_ERR_NOMEM;
  }
  for (int i = 0; i < f->n_in; i++)
    if (in[i].tag == EXEC_V_TENSOR) op_ew_operand_init(&c->ops[i], in[i].t, c->ndim, c->shape);
  c->n_tiles = (c->numel + EW_TILE - 1) / EW_TILE;
  c->slot = EW_TILE * 8;
  c->n_bufs = f->n_in + f->n_steps + EW_MAX_OPERANDS;
  int64_t fill = c->numel < EW_TILE ? c->numel : EW_TILE;
  char *pre_mem = scratch(0, c->slot * (size_t)(f->n_steps * EW_MAX_OPERANDS) + 64);
  if (!pre_mem) return KILN_ERR_NOMEM;
  for (int s = 0; s < f->n_steps; s++) {
    const fstep *st = &f->steps[s];
    for (int a = 0; a < op_table[st->op].n_operands && a < EW_MAX_OPERANDS; a++) {
      const fsrc *src = &st->args[a];
      char *b = pre_mem + c->slot * (size_t)(s * EW_MAX_OPERANDS + a);
      op_val v;
      c->pre[s][a] = NULL;
      if (src->kind == SRC_CONST) {
        v = src->k;
      } else if (src->kind == SRC_INPUT && in[src->index].tag != EXEC_V_TENSOR) {
        exec_value_as_op(&in[src->index], &v);
      } else if (src->kind == SRC_INPUT && kiln_tensor_numel(in[src->index].t) == 1) {
        const kiln_tensor *t = in[src->index].t;
        v = t->dtype == KILN_DTYPE_I64    ? OPV_I(*(const int64_t *)core_data(t))
            : t->dtype == KILN_DTYPE_BOOL ? OPV_B(*(const bool *)core_data(t))
                                          : OPV_F(core_get_flat(t, 0));
      } else {
        continue;
      }
      op_ew_fill(b, c->ksteps[s].compute, &v, fill);
      c->pre[s][a] = b;
    }
  }
  return 0;
}

/* Phase 5a: a tile's input pointers (gathered into inbuf where not direct);
 * NULL for pre-filled ones and numbers. Note [Tile prefetch]: a lone
 * thread also asks for its tile PREFETCH_AHEAD tiles on (static schedule:
 * its tiles are consecutive), so its inputs arrive from memory while this
 * one computes: +20-60% for the arithmetic chain on one thread. Two
 * threads do 2-5% better without (A/B runs: the hardware streams both, and
 * the prefetches only hold fill buffers). A native kernel (Note [Native
 * kernels]) reads its inputs in one pass at a steady rate the hardware
 * prefetcher follows, and there the prefetches only stall it (samples pile
 * up on prefetcht0): without them, on one thread, the arithmetic chain
 * went from 17-25 to 32-42 GB/s and the transcendental chain 0.74-0.96x
 * the time (A/B runs under load, at both the AVX2 and AVX-512 levels). */
static void tile_inputs(const fused_call *c, int64_t tix, int64_t i0, int64_t n, char *inbuf,
                        bool prefetch, const void **inptr) {
  const fused_group *f = c->f;
  const exec_value *in = c->in;
  for (int i = 0; i < f->n_in; i++) {
    char *b = inbuf + c->slot * (size_t)i;
    if (in[i].tag == EXEC_V_TENSOR && kiln_tensor_numel(in[i].t) == 1) {
      inptr[i] = NULL; /* pre-filled (Note [Scalar tiles]) */
    } else if (in[i].tag == EXEC_V_TENSOR) {
      if (c->ops[i].direct)
        inptr[i] = c->ops[i].base + i0 * (int64_t)kiln_dtype_size(c->ops[i].dtype);
      else {
        op_ew_gather(&c->ops[i], c->ndim, c->shape, i0, n, b, c->ops[i].dtype);
        inptr[i] = b;
      }
    } else {
      inptr[i] = NULL; /* numbers: filled per use */
    }
  }
  if (prefetch && tix + PREFETCH_AHEAD < c->n_tiles)
    for (int i = 0; i < f->n_in; i++)
      if (in[i].tag == EXEC_V_TENSOR && c->ops[i].direct && kiln_tensor_numel(in[i].t) > 1) {
        size_t es = kiln_dtype_size(c->ops[i].dtype);
        int64_t j0 = (tix + PREFETCH_AHEAD) * EW_TILE;
        int64_t m = c->numel - j0 < EW_TILE ? c->numel - j0 : EW_TILE;
        const char *pb = c->ops[i].base + j0 * (int64_t)es;
        for (size_t off = 0; off < (size_t)m * es; off += 64) __builtin_prefetch(pb + off, 0, 3);
      }
}

/* Phase 5b, native: Note [Native kernels]: operands as the tiles would see
 * them, outputs straight to memory unless streamed from a tile. */
static void tile_native(const fused_call *c, int64_t i0, int64_t n, char *inbuf, char *stepbuf,
                        size_t out_slot, const void **inptr) {
  const fused_group *f = c->f;
  const fkernel *kn = c->kn;
  const void *np[FUSION_MAX_STEPS * EW_MAX_OPERANDS], *arr[FUSION_MAX_IO] = {0};
  void *op_out[FUSION_MAX_IO];
  /* a dimensioned input is an array of its own dtype to the kernel, also
   * when it has one element (the tiles spread those in each step's
   * compute dtype instead) */
  for (int i = 0; i < f->n_in; i++)
    if (c->in[i].tag == EXEC_V_TENSOR && kn->tier[i] == 2) {
      arr[i] = inptr[i];
      if (!arr[i]) {
        op_ew_gather(&c->ops[i], c->ndim, c->shape, i0, n, inbuf + c->slot * (size_t)i,
                     c->ops[i].dtype);
        arr[i] = inbuf + c->slot * (size_t)i;
      }
    }
  int k = 0;
  for (int s = 0; s < f->n_steps; s++)
    for (int a = 0; a < op_table[f->steps[s].op].n_operands; a++) {
      const fsrc *src = &f->steps[s].args[a];
      if (src->kind == SRC_STEP) continue;
      np[k++] = src->kind == SRC_INPUT && kn->tier[src->index] == 2 ? arr[src->index] : c->pre[s][a];
    }
  bool aligned = true;
  for (int o = 0; o < f->n_out; o++) {
    size_t es = kiln_dtype_size(c->ksteps[f->out_step[o]].out);
    op_out[o] = (char *)core_data(c->outs[o]) + i0 * (int64_t)es;
    aligned = aligned && ((uintptr_t)op_out[o] & 63) == 0;
  }
  if (!c->stream && !c->aliased) {
    c->native(op_out, np, n, c->natt);
  } else if (c->aliased && c->native_ip) { /* Note [In-place native loop] in fusion_cc.c */
    c->native_ip(op_out, np, n, c->natt);
  } else if (c->native_nt && aligned && !c->aliased) {
    c->native_nt(op_out, np, n, c->natt);
  } else { /* through a tile, then stored (streamed, or over an input it reused) */
    void *tile_out[FUSION_MAX_IO];
    for (int o = 0; o < f->n_out; o++) tile_out[o] = stepbuf + out_slot * (size_t)o;
    c->native(tile_out, np, n, c->natt);
    for (int o = 0; o < f->n_out; o++)
      store_tile(op_out[o], tile_out[o],
                 (size_t)n * kiln_dtype_size(c->ksteps[f->out_step[o]].out), c->stream);
  }
}

/* Phase 5b, tiles: every step's tile kernel in turn (Note [Fused tiles]),
 * operands converted to its compute dtype, then the outputs stored. */
static void tile_steps(const fused_call *c, int64_t i0, int64_t n, char *stepbuf, char *conv,
                       const void **inptr) {
  const fused_group *f = c->f;
  for (int s = 0; s < f->n_steps; s++) {
    const fstep *st = &f->steps[s];
    const kstep *ks = &c->ksteps[s];
    const void *opnd[EW_MAX_OPERANDS];
    int nin = op_table[st->op].n_operands;
    for (int a = 0; a < nin; a++) {
      const fsrc *src = &st->args[a];
      char *cb = conv + c->slot * (size_t)a;
      if (c->pre[s][a]) {
        opnd[a] = c->pre[s][a];
        continue;
      }
      const void *p;
      kiln_dtype dt;
      if (src->kind == SRC_INPUT) {
        p = inptr[src->index];
        dt = c->ops[src->index].dtype;
      } else {
        p = stepbuf + c->slot * (size_t)src->index;
        dt = c->ksteps[src->index].out;
      }
      if (dt != ks->compute) {
        op_ew_convert(cb, ks->compute, p, dt, n);
        p = cb;
      }
      opnd[a] = p;
    }
    ks->tile(stepbuf + c->slot * (size_t)s, opnd, n, &ks->attrs);
  }
  for (int o = 0; o < f->n_out; o++) {
    size_t es = kiln_dtype_size(c->ksteps[f->out_step[o]].out);
    store_tile((char *)core_data(c->outs[o]) + i0 * (int64_t)es,
               stepbuf + c->slot * (size_t)f->out_step[o], (size_t)n * es, c->stream);
  }
}

/* Note [Native chunks]: a native kernel whose array inputs are all read in
 * place (contiguous over the index space) needs no tile buffers: each call
 * covers NATIVE_CHUNK elements instead of EW_TILE. Per tile, finding the
 * inputs and calling the kernel cost about a fifth of the arithmetic
 * chain's time (`perf`: run_tiles 19%, the kernel 57%, at 2 threads); per
 * 16 tiles it is noise. Where an output is written over an input (Note
 * [Fused buffer reuse]) the kernel's in-place loop writes it directly
 * (Note [In-place native loop] in fusion_cc.c; a kept kernel file without
 * that loop writes a chunk-sized buffer per output, in L2: 64 KiB of
 * floats, copied out after it). Not when streamed
 * outputs would go through a tile buffer otherwise (no streaming variant,
 * or an output not 64-byte aligned). */
#define NATIVE_CHUNK (16 * EW_TILE)

static bool native_chunks(const fused_call *c) {
  const fused_group *f = c->f;
  if (!c->native) return false;
  for (int i = 0; i < f->n_in; i++)
    if (c->in[i].tag == EXEC_V_TENSOR && c->kn->tier[i] == 2 &&
        !(c->ops[i].direct && kiln_tensor_numel(c->in[i].t) == c->numel))
      return false;
  if (c->aliased || !c->stream) return true;
  if (!c->native_nt) return false;
  for (int o = 0; o < f->n_out; o++)
    if ((uintptr_t)core_data(c->outs[o]) & 63) return false;
  return true;
}

/* Phase 5: the tiles, in parallel. < 0 when a thread's buffers could not
 * be had. */
static int run_tiles(const fused_call *c) {
  const fused_group *f = c->f;
  int failed = 0;
  if (native_chunks(c)) { /* Note [Native chunks] */
    int64_t n_chunks = (c->numel + NATIVE_CHUNK - 1) / NATIVE_CHUNK;
    size_t out_slot = NATIVE_CHUNK * 8; /* any output dtype */
#pragma omp parallel if (c->numel >= OP_PARALLEL_MIN)
    {
      bool buffered = c->aliased && !c->native_ip; /* through a tile buffer */
      char *outbuf = buffered ? scratch(1, out_slot * (size_t)f->n_out) : NULL;
      if (buffered && !outbuf) {
#pragma omp atomic write
        failed = 1;
      }
#pragma omp for schedule(static)
      for (int64_t ch = 0; ch < n_chunks; ch++) {
        if (buffered && !outbuf) continue;
        int64_t i0 = ch * NATIVE_CHUNK, n = c->numel - i0 < NATIVE_CHUNK ? c->numel - i0 : NATIVE_CHUNK;
        const void *inptr[64];
        for (int i = 0; i < f->n_in; i++)
          inptr[i] = c->in[i].tag == EXEC_V_TENSOR && c->kn->tier[i] == 2
                         ? c->ops[i].base + i0 * (int64_t)kiln_dtype_size(c->ops[i].dtype)
                         : NULL;
        tile_native(c, i0, n, NULL, outbuf, out_slot, inptr);
      }
      store_fence();
    }
    return failed ? core_error(KILN_ERR_NOMEM, "FusionGroup: out of memory for tile buffers") : 0;
  }
#pragma omp parallel if (c->numel >= OP_PARALLEL_MIN)
  {
    char *mem = scratch(1, c->slot * (size_t)c->n_bufs);
    bool prefetch = omp_get_num_threads() == 1 && !c->native; /* Note [Tile prefetch] */
    if (!mem) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(static)
    for (int64_t tix = 0; tix < c->n_tiles; tix++) {
      if (!mem) continue;
      int64_t i0 = tix * EW_TILE, n = c->numel - i0 < EW_TILE ? c->numel - i0 : EW_TILE;
      char *inbuf = mem, *stepbuf = mem + c->slot * (size_t)f->n_in,
           *conv = mem + c->slot * (size_t)(f->n_in + f->n_steps);
      const void *inptr[64];
      tile_inputs(c, tix, i0, n, inbuf, prefetch, inptr);
      if (c->native) tile_native(c, i0, n, inbuf, stepbuf, c->slot, inptr);
      else tile_steps(c, i0, n, stepbuf, conv, inptr);
    }
    store_fence();
  }
  return failed ? core_error(KILN_ERR_NOMEM, "FusionGroup: out of memory for tile buffers") : 0;
}

int exec_fused_group_run_reuse(fused_group *f, exec_value *in, uint64_t reusable,
                               exec_value *out) {
  fused_call call, *c = &call; /* on the stack, as the per-call arrays always were */
  int rc;
  c->f = f;
  c->in = in;
  c->reusable = reusable;
  c->aliased = false;
  memset(c->outs, 0, sizeof c->outs);
  for (int i = 0; i < f->n_in; i++) /* Note [Extended dtypes]: not fused */
    if (in[i].tag == EXEC_V_TENSOR && core_dtype_is_extended(in[i].t->dtype))
      return run_plain(f, in, out);
  if (index_space(c)) return run_plain(f, in, out);
  if (!(c->kn = kernel_for(f, in))) return -1;
  if ((rc = call_steps(c)) < 0) goto done;
  choose_kernel(c);
  if ((rc = prepare(c)) < 0 || (rc = run_tiles(c)) < 0) goto done;
  for (int o = 0; o < f->n_out; o++) {
    out[o] = (exec_value){.tag = EXEC_V_TENSOR, .t = c->outs[o]};
    c->outs[o] = NULL;
  }
done:
  for (int o = 0; o < f->n_out && o < 64; o++) kiln_release(c->outs[o]);
  fkernel_free(c->kn); /* this call's reference */
  return rc;
}

int exec_fused_group_run(fused_group *f, exec_value *in, exec_value *out) {
  return exec_fused_group_run_reuse(f, in, 0, out);
}

/* Note [Fused buffer reuse]: as an elementwise op does (Note [Buffer
 * reuse] in vm.c), a group writes an output into an input that dies at
 * this instruction and that nothing else holds: its register is freed
 * here, the tensor and its storage are the register's alone, contiguous,
 * of the output's shape and dtype, not a wrapped number, with no autograd
 * history. A lazy training step's SGD update (Note [Buffer donation] in
 * lazy_sync.c) so writes the new parameter and momentum over the old, as
 * the eager update does, instead of into fresh pages. Every tile reads its
 * inputs before it stores its outputs, over the same elements, so the
 * overlap is exact; a native kernel (restrict-qualified arrays) writes
 * into its tile buffers then, and the tile is copied out. The written
 * tensor's version is raised, as an in-place op's is, so a later GEMM in
 * the same graph never takes the old value's packed panels. */
static uint64_t reusable_inputs(const exec_instr *x, const exec_value *in) {
  uint64_t m = 0;
  bool grad_on = kiln_is_grad_enabled();
  for (int i = 0; i < x->n_in && i < 64; i++) {
    if (in[i].tag != EXEC_V_TENSOR) continue;
    const kiln_tensor *t = in[i].t;
    bool dies = false;
    for (int k = 0; k < x->n_free && !dies; k++) dies = x->free[k] == x->in[i];
    if (!dies || !exec_buffer_reusable(t) || (grad_on && t->requires_grad) ||
        t->device != CORE_DEVICE_CPU)
      continue;
    m |= 1ull << i;
  }
  return m;
}

static int p_fusion_group(const exec_instr *x, exec_value *in, exec_value *out) {
  return exec_fused_group_run_reuse(x->k.obj, in, reusable_inputs(x, in), out);
}

int exec_fusion_compile_hook(void *ud, exec_code *c, const ir_node *n, exec_instr *x) {
  if (n->prim != IR_PRIM_FUSION_GROUP) return 0;
  const ir_attr *a = ir_node_attr(n, "Subgraph");
  fused_group *fg = a && a->kind == IR_ATTR_GRAPH ? exec_fused_group_new(a->g) : NULL;
  if (!fg || exec_code_own(c, fg, exec_fused_group_free) < 0) return -1;
  x->prim = p_fusion_group;
  x->k = (exec_value){.tag = EXEC_V_OBJ, .obj = fg};
  return 0;
}

const exec_compile_opts exec_fusion_compile_opts = {exec_fusion_compile_hook, NULL};
