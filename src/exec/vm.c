/* src/exec/vm.c: building and running instruction code: the register
 * machine that runs what compile.c makes, for the executor, the
 * DifferentiableGraph op, fusion fallbacks and the lazy compile cache. */
#include <stdio.h>
#include <string.h>

#include "code.h"

exec_code *exec_code_new(void) { return core_calloc(1, sizeof(exec_code)); }

void exec_code_free(exec_code *c) {
  if (!c) return;
  for (int i = 0; i < c->n_instr; i++) {
    exec_instr *x = &c->instr[i];
    core_free(x->in);
    core_free(x->out);
    core_free(x->free);
    exec_value_clear(&x->k);
  }
  for (int i = 0; i < c->n_owned; i++) c->owned[i].free_fn(c->owned[i].obj);
  core_free(c->owned);
  core_free(c->instr);
  core_free(c->input_regs);
  core_free(c->output_regs);
  core_free(c);
}

int exec_code_own(exec_code *c, void *obj, void (*free_fn)(void *obj)) {
  exec_owned *v = core_realloc(c->owned, (size_t)(c->n_owned + 1) * sizeof *v);
  if (!v) {
    free_fn(obj);
    return KILN_ERR_NOMEM;
  }
  c->owned = v;
  v[c->n_owned++] = (exec_owned){obj, free_fn};
  return 0;
}

int exec_code_add(exec_code *c, exec_opcode code, int n_in, int n_out) {
  if (c->n_instr == c->cap_instr) {
    int cap = c->cap_instr ? c->cap_instr * 2 : 32;
    exec_instr *v = core_realloc(c->instr, (size_t)cap * sizeof *v);
    if (!v) return KILN_ERR_NOMEM;
    c->instr = v;
    c->cap_instr = cap;
  }
  exec_instr *x = &c->instr[c->n_instr];
  memset(x, 0, sizeof *x);
  x->code = (uint8_t)code;
  x->n_in = n_in;
  x->n_out = n_out;
  x->in = core_calloc((size_t)(n_in ? n_in : 1), sizeof *x->in);
  x->out = core_calloc((size_t)(n_out ? n_out : 1), sizeof *x->out);
  if (!x->in || !x->out) {
    core_free(x->in);
    core_free(x->out);
    return KILN_ERR_NOMEM;
  }
  return c->n_instr++;
}

int exec_code_set_frees(exec_code *c, const int *last) {
  for (int r = 0; r < c->n_regs; r++) {
    int i = last[r];
    if (i < 0 || i >= c->n_instr) continue;
    exec_instr *x = &c->instr[i];
    int *f = core_realloc(x->free, (size_t)(x->n_free + 1) * sizeof *f);
    if (!f) return KILN_ERR_NOMEM;
    x->free = f;
    f[x->n_free++] = r;
  }
  return 0;
}

bool exec_buffer_reusable(const kiln_tensor *t) {
  return t->refcount == 1 && t->storage && t->storage->refcount == 1 && !t->ag &&
         core_is_contiguous(t) && !t->wrapped_number;
}

static bool truthy(const exec_value *v) {
  switch (v->tag) {
  case EXEC_V_BOOL: return v->b;
  case EXEC_V_INT: return v->i != 0;
  case EXEC_V_FLOAT: return v->f != 0;
  default: return v->tag != EXEC_V_NONE;
  }
}

#define MAX_OP_ARGS 24 /* _transformer_encoder_layer_fwd has 20 */

static int run_op(const exec_instr *x, exec_value *regs) {
  const op_info *info = &op_table[x->op];
  op_val args[MAX_OP_ARGS];
  kiln_tensor *small[8], **outs = small;
  int n, rc = 0, max_outs = 8;
  if (x->n_in > MAX_OP_ARGS)
    return core_error(KILN_ERR_INVALID, "%s: too many arguments", info->name);
  for (int k = 0; k < x->n_in; k++)
    if ((rc = exec_value_as_op(&regs[x->in[k]], &args[k])) < 0) return rc;
  /* Note [Buffer reuse]: an elementwise op whose input dies here, held by
   * nothing but its register, writes its result into that input's buffer
   * (same shape and dtype, contiguous), unless autograd or lazy recording
   * would need the input. Saves an allocation and a pass over memory. An
   * OPF_SELF_OUT op (addmm: a GEMM reading self as its addend) may do the
   * same with its self alone. */
  bool self_out = info->flags & OPF_SELF_OUT;
  if ((info->flags & OPF_ELEMENTWISE || self_out) && x->n_out == 1 && x->n_free) {
    bool plain = true;
    for (int k = 0; k < x->n_in && plain; k++)
      if (args[k].tag == OP_VAL_TENSOR)
        plain = args[k].t->device == CORE_DEVICE_CPU &&
                !(args[k].t->requires_grad && kiln_is_grad_enabled());
    for (int f = 0; f < x->n_free && plain; f++) {
      exec_value *v = &regs[x->free[f]];
      if (v->tag != EXEC_V_TENSOR) continue;
      kiln_tensor *t = v->t;
      if (!exec_buffer_reusable(t)) continue;
      bool is_input = false;
      for (int k = 0; k < (self_out ? 1 : x->n_in); k++) is_input |= x->in[k] == x->free[f];
      if (!is_input) continue;
      kiln_clear_error();
      if (op_call_into(x->op, args, x->n_in, t) == 0) {
        kiln_retain(t);
        exec_value_clear(&regs[x->out[0]]);
        regs[x->out[0]] = (exec_value){.tag = EXEC_V_TENSOR, .t = t};
        return 0;
      }
    }
    kiln_clear_error();
  }
  if (info->flags & OPF_LIST_OUT) {
    max_outs = OP_MAX_OUTS;
    outs = core_alloc((size_t)max_outs * sizeof *outs);
    if (!outs) return KILN_ERR_NOMEM;
  }
  /* outputs go to registers, not to a scope */
  kiln_scope_begin();
  n = op_call(x->op, args, x->n_in, outs, max_outs);
  if (n >= 0) {
    for (int i = 0; i < n; i++) kiln_retain(outs[i]);
  }
  kiln_scope_end();
  if (n < 0) {
    rc = n;
    goto done;
  }
  if (info->flags & OPF_LIST_OUT) {
    exec_value *items = core_alloc((size_t)(n ? n : 1) * sizeof *items);
    if (!items) {
      rc = KILN_ERR_NOMEM;
      for (int i = 0; i < n; i++) kiln_release(outs[i]);
      goto done;
    }
    for (int i = 0; i < n; i++) items[i] = (exec_value){.tag = EXEC_V_TENSOR, .t = outs[i]};
    exec_value_clear(&regs[x->out[0]]);
    regs[x->out[0]] = exec_list_make(EXEC_V_LIST, items, n);
    for (int i = 0; i < n; i++) kiln_release(outs[i]);
    core_free(items);
    if (regs[x->out[0]].tag == EXEC_V_NONE) rc = KILN_ERR_NOMEM;
    goto done;
  }
  if (n != x->n_out) {
    rc = core_error(KILN_ERR_INVALID, "%s: produced %d outputs, the graph expects %d",
                    info->name, n, x->n_out);
    for (int i = 0; i < n; i++) kiln_release(outs[i]);
    goto done;
  }
  for (int i = 0; i < n; i++) {
    exec_value_clear(&regs[x->out[i]]);
    regs[x->out[i]] = (exec_value){.tag = EXEC_V_TENSOR, .t = outs[i]};
  }
done:
  if (outs != small) core_free(outs);
  return rc;
}

/* Note [Run progress] in code.h */
static _Thread_local void (*run_progress)(void *ud);
static _Thread_local void *run_progress_ud;

void exec_set_run_progress(void (*fn)(void *ud), void *ud) {
  run_progress = fn;
  run_progress_ud = ud;
}

/* inputs are copied, or moved (and cleared) when owned */
static int run_code(const exec_code *c, exec_value *inputs, bool owned, exec_value *outputs) {
  exec_value small[64], *regs = small;
  int rc = 0, pc = 0;
  if (c->n_regs > 64) {
    regs = core_calloc((size_t)c->n_regs, sizeof *regs);
    if (!regs) {
      for (int i = 0; owned && i < c->n_inputs; i++) exec_value_clear(&inputs[i]);
      return KILN_ERR_NOMEM;
    }
  } else {
    memset(small, 0, sizeof small);
  }
  for (int i = 0; i < c->n_inputs; i++) {
    regs[c->input_regs[i]] = owned ? inputs[i] : exec_value_copy(&inputs[i]);
    if (owned) inputs[i] = (exec_value){.tag = EXEC_V_NONE};
  }
  while (pc < c->n_instr) {
    const exec_instr *x = &c->instr[pc++];
    switch (x->code) {
    case EXEC_I_OP: rc = run_op(x, regs); break;
    case EXEC_I_CONST:
      exec_value_clear(&regs[x->out[0]]);
      regs[x->out[0]] = exec_value_copy(&x->k);
      break;
    case EXEC_I_MOVE: {
      /* through temporaries: outputs may overlap inputs (loop-carried) */
      exec_value small_tmp[16], *tmp = small_tmp;
      if (x->n_in > 16 && !(tmp = core_alloc((size_t)x->n_in * sizeof *tmp))) {
        rc = KILN_ERR_NOMEM;
        break;
      }
      for (int i = 0; i < x->n_in; i++) tmp[i] = exec_value_copy(&regs[x->in[i]]);
      for (int i = 0; i < x->n_in; i++) {
        exec_value_clear(&regs[x->out[i]]);
        regs[x->out[i]] = tmp[i];
      }
      if (tmp != small_tmp) core_free(tmp);
      break;
    }
    case EXEC_I_JUMP: pc = x->target; break;
    case EXEC_I_JUMP_IF_NOT:
      if (!truthy(&regs[x->in[0]])) pc = x->target;
      break;
    case EXEC_I_PRIM: {
      exec_value ins_small[16], outs_small[16], *ins = ins_small, *outs = outs_small;
      if (x->n_in > 16) ins = core_alloc((size_t)x->n_in * sizeof *ins);
      if (x->n_out > 16) outs = core_alloc((size_t)x->n_out * sizeof *outs);
      if (ins && outs) {
        for (int i = 0; i < x->n_in; i++) ins[i] = regs[x->in[i]];
        memset(outs, 0, (size_t)(x->n_out > 16 ? x->n_out : 16) * sizeof *outs);
        rc = x->prim(x, ins, outs);
        if (rc >= 0)
          for (int i = 0; i < x->n_out; i++) {
            exec_value_clear(&regs[x->out[i]]);
            regs[x->out[i]] = outs[i];
          }
      } else {
        rc = KILN_ERR_NOMEM;
      }
      if (ins != ins_small) core_free(ins);
      if (outs != outs_small) core_free(outs);
      break;
    }
    default: rc = core_error(KILN_ERR_STATE, "exec: bad instruction %d", x->code); break;
    }
    if (rc < 0) {
      if (x->line > 0) core_error_prefix("line %d: %s: ", x->line, x->name ? x->name : "");
      break;
    }
    for (int i = 0; i < x->n_free; i++) exec_value_clear(&regs[x->free[i]]);
    if (run_progress) run_progress(run_progress_ud);
  }
  if (rc >= 0)
    for (int i = 0; i < c->n_outputs; i++) outputs[i] = exec_value_copy(&regs[c->output_regs[i]]);
  for (int r = 0; r < c->n_regs; r++) exec_value_clear(&regs[r]);
  if (regs != small) core_free(regs);
  return rc;
}

int exec_code_run(const exec_code *c, const exec_value *inputs, exec_value *outputs) {
  return run_code(c, (exec_value *)inputs, false, outputs);
}

int exec_code_run_owned(const exec_code *c, exec_value *inputs, exec_value *outputs) {
  return run_code(c, inputs, true, outputs);
}
