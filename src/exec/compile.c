/* src/exec/compile.c: IR graph -> instruction code (run by vm.c).
 *
 * Note [Registers and liveness]: every IR value gets one register. A
 * register is cleared right after its last use, where a use inside an If
 * or Loop of a value defined outside it counts as a use at the end of
 * that If/Loop (a loop body runs again; the other branch may still need
 * it). Values never used are cleared right after they are made. So a
 * tensor's memory goes back as soon as the program no longer needs it. */
#include <string.h>

#include "compile.h"
#include "ir/scalar.h"

typedef struct region {
  int start, end;
} region;

typedef struct compiler {
  exec_code *c;
  const exec_compile_opts *opts;
  int *reg;           /* value id -> register */
  int n_values;
  int *def_pos;       /* register -> defining instruction (-1: input) */
  int *use_pos;       /* flat list of (register, position) pairs */
  int n_uses, cap_uses;
  region *regions;
  int n_regions, cap_regions;
} compiler;

static int reg_of(compiler *k, const ir_value *v) {
  if (v->id < 0 || v->id >= k->n_values)
    return core_error(KILN_ERR_STATE, "interp: value id %d out of range", v->id);
  if (k->reg[v->id] < 0) {
    k->reg[v->id] = k->c->n_regs++;
    int *d = core_realloc(k->def_pos, (size_t)k->c->n_regs * sizeof *d);
    if (!d) return KILN_ERR_NOMEM;
    k->def_pos = d;
    d[k->c->n_regs - 1] = -1;
  }
  return k->reg[v->id];
}

static int note_use(compiler *k, int r, int pos) {
  if (k->n_uses + 2 > k->cap_uses) {
    int cap = k->cap_uses ? k->cap_uses * 2 : 256;
    int *u = core_realloc(k->use_pos, (size_t)cap * sizeof *u);
    if (!u) return KILN_ERR_NOMEM;
    k->use_pos = u;
    k->cap_uses = cap;
  }
  k->use_pos[k->n_uses++] = r;
  k->use_pos[k->n_uses++] = pos;
  return 0;
}

/* Adds an instruction reading ins[] and defining outs[] (IR values). */
static int emit(compiler *k, exec_opcode code, ir_value *const *ins, int n_in,
                ir_value *const *outs, int n_out) {
  int ix = exec_code_add(k->c, code, n_in, n_out);
  if (ix < 0) return ix;
  for (int i = 0; i < n_in; i++) {
    int r = reg_of(k, ins[i]);
    if (r < 0) return r;
    k->c->instr[ix].in[i] = r;
    if (note_use(k, r, ix) < 0) return KILN_ERR_NOMEM;
  }
  for (int i = 0; i < n_out; i++) {
    int r = reg_of(k, outs[i]);
    if (r < 0) return r;
    k->c->instr[ix].out[i] = r;
    if (k->def_pos[r] < 0) k->def_pos[r] = ix;
  }
  return ix;
}

/* An instruction on raw registers (loop counters). */
static int emit_raw(compiler *k, exec_opcode code, const int *ins, int n_in, const int *outs,
                    int n_out) {
  int ix = exec_code_add(k->c, code, n_in, n_out);
  if (ix < 0) return ix;
  for (int i = 0; i < n_in; i++) {
    k->c->instr[ix].in[i] = ins[i];
    if (note_use(k, ins[i], ix) < 0) return KILN_ERR_NOMEM;
  }
  for (int i = 0; i < n_out; i++) {
    k->c->instr[ix].out[i] = outs[i];
    if (k->def_pos[outs[i]] < 0) k->def_pos[outs[i]] = ix;
  }
  return ix;
}

static int new_raw_reg(compiler *k) {
  int r = k->c->n_regs++;
  int *d = core_realloc(k->def_pos, (size_t)k->c->n_regs * sizeof *d);
  if (!d) return KILN_ERR_NOMEM;
  k->def_pos = d;
  d[r] = -1;
  return r;
}

static int add_region(compiler *k, int start, int end) {
  if (k->n_regions == k->cap_regions) {
    int cap = k->cap_regions ? k->cap_regions * 2 : 16;
    region *r = core_realloc(k->regions, (size_t)cap * sizeof *r);
    if (!r) return KILN_ERR_NOMEM;
    k->regions = r;
    k->cap_regions = cap;
  }
  k->regions[k->n_regions++] = (region){start, end};
  return 0;
}

/* ---- constants ----------------------------------------------------------- */

static int ivalue_to_exec(const ir_ivalue *iv, exec_value *out) {
  switch (iv->tag) {
  case IR_IV_NONE: *out = EXEC_NONE; return 0;
  case IR_IV_INT: *out = (exec_value){.tag = EXEC_V_INT, .i = iv->i}; return 0;
  case IR_IV_FLOAT: *out = (exec_value){.tag = EXEC_V_FLOAT, .f = iv->f}; return 0;
  case IR_IV_BOOL: *out = (exec_value){.tag = EXEC_V_BOOL, .b = iv->b}; return 0;
  case IR_IV_STR:
    *out = (exec_value){.tag = EXEC_V_STR, .s = exec_str_dup(iv->s)};
    return out->s ? 0 : KILN_ERR_NOMEM;
  default: {
    int n = iv->items.n;
    exec_value *items = core_calloc((size_t)(n ? n : 1), sizeof *items);
    if (!items) return KILN_ERR_NOMEM;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) rc = ivalue_to_exec(&iv->items.v[i], &items[i]);
    if (rc == 0) {
      *out = exec_list_make(iv->tag == IR_IV_TUPLE ? EXEC_V_TUPLE : EXEC_V_LIST, items, n);
      if (out->tag == EXEC_V_NONE) rc = KILN_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++) exec_value_clear(&items[i]);
    core_free(items);
    return rc;
  }
  }
}

/* A list value of n items made by item(i). */
static int make_list(int n, exec_value (*item)(const ir_const *c, int i), const ir_const *c,
                     exec_value *out) {
  exec_value *items = core_alloc((size_t)(n ? n : 1) * sizeof *items);
  if (!items) return KILN_ERR_NOMEM;
  for (int i = 0; i < n; i++) items[i] = item(c, i);
  *out = exec_list_make(EXEC_V_LIST, items, n);
  core_free(items);
  return out->tag == EXEC_V_NONE ? KILN_ERR_NOMEM : 0;
}
static exec_value int_item(const ir_const *c, int i) {
  return (exec_value){.tag = EXEC_V_INT, .i = c->ints[i]};
}
static exec_value bool_item(const ir_const *c, int i) {
  return (exec_value){.tag = EXEC_V_BOOL, .b = c->ints[i] != 0};
}
static exec_value float_item(const ir_const *c, int i) {
  return (exec_value){.tag = EXEC_V_FLOAT, .f = c->floats[i]};
}

int exec_constant_value(const ir_node *n, exec_value *out) {
  ir_const c;
  *out = EXEC_NONE;
  if (ir_constant_of(n, &c) < 0) return -1; /* Note [Constant values] */
  switch (c.tag) {
  case IR_CONST_NONE: return 0;
  case IR_CONST_INT: *out = (exec_value){.tag = EXEC_V_INT, .i = c.i}; return 0;
  case IR_CONST_BOOL: *out = (exec_value){.tag = EXEC_V_BOOL, .b = c.b}; return 0;
  case IR_CONST_FLOAT: *out = (exec_value){.tag = EXEC_V_FLOAT, .f = c.f}; return 0;
  case IR_CONST_STR:
  case IR_CONST_DEVICE:
    *out = (exec_value){.tag = c.tag == IR_CONST_DEVICE ? EXEC_V_DEVICE : EXEC_V_STR,
                        .s = exec_str_dup(c.s)};
    return out->s ? 0 : KILN_ERR_NOMEM;
  case IR_CONST_INTS: return make_list(c.n, int_item, &c, out);
  case IR_CONST_BOOLS: return make_list(c.n, bool_item, &c, out);
  case IR_CONST_FLOATS: return make_list(c.n, float_item, &c, out);
  default: return ivalue_to_exec(c.iv, out);
  }
}

/* ---- loop helpers ----------------------------------------------------------- */

/* in: i, max_trips, cond -> i < max_trips && cond */
static int p_loop_test(const exec_instr *x, exec_value *in, exec_value *out) {
  bool cond = in[2].tag == EXEC_V_BOOL ? in[2].b : in[2].tag != EXEC_V_NONE;
  bool trips = in[1].tag != EXEC_V_INT || in[0].i < in[1].i;
  out[0] = (exec_value){.tag = EXEC_V_BOOL, .b = cond && trips};
  return 0;
}

static int p_increment(const exec_instr *x, exec_value *in, exec_value *out) {
  out[0] = (exec_value){.tag = EXEC_V_INT, .i = in[0].i + 1};
  return 0;
}

/* ---- blocks -------------------------------------------------------------------- */

static int compile_block(compiler *k, const ir_block *b);

static int compile_if(compiler *k, const ir_node *n) {
  int jf = emit(k, EXEC_I_JUMP_IF_NOT, n->inputs, 1, NULL, 0);
  if (jf < 0) return jf;
  int rc;
  for (int bi = 0; bi < 2; bi++) {
    const ir_block *b = n->blocks[bi];
    if (bi == 1) k->c->instr[jf].target = k->c->n_instr;
    if ((rc = compile_block(k, b)) < 0) return rc;
    int mv = emit(k, EXEC_I_MOVE, b->ret->inputs, b->ret->n_inputs, n->outputs, n->n_outputs);
    if (mv < 0) return mv;
    k->c->instr[mv].name = "prim::If";
    if (bi == 0) {
      int j = exec_code_add(k->c, EXEC_I_JUMP, 0, 0);
      if (j < 0) return j;
      k->c->instr[j].target = -1; /* patched below */
      k->c->instr[j].name = "prim::If";
    }
  }
  /* join point (a no-op that carries the frees of values used inside) */
  int join = exec_code_add(k->c, EXEC_I_MOVE, 0, 0);
  if (join < 0) return join;
  k->c->instr[join].name = "prim::If";
  for (int i = jf; i < join; i++)
    if (k->c->instr[i].code == EXEC_I_JUMP && k->c->instr[i].target == -1)
      k->c->instr[i].target = join;
  return add_region(k, jf, join);
}

static int compile_loop(compiler *k, const ir_node *n) {
  const ir_block *b = n->blocks[0];
  int n_carried = n->n_inputs - 2;
  int rc, start = k->c->n_instr;
  /* carried initial values -> the block's carried parameters */
  if (n_carried > 0) {
    int mv = emit(k, EXEC_I_MOVE, n->inputs + 2, n_carried, b->param->outputs + 1, n_carried);
    if (mv < 0) return mv;
    k->c->instr[mv].name = "prim::Loop";
  }
  int i_reg = new_raw_reg(k), cond_reg = new_raw_reg(k), t_reg = new_raw_reg(k);
  int max_reg = reg_of(k, n->inputs[0]), cin = reg_of(k, n->inputs[1]);
  if (i_reg < 0 || cond_reg < 0 || t_reg < 0 || max_reg < 0 || cin < 0) return KILN_ERR_NOMEM;
  int z = emit_raw(k, EXEC_I_CONST, NULL, 0, &i_reg, 1);
  if (z < 0) return z;
  k->c->instr[z].k = (exec_value){.tag = EXEC_V_INT, .i = 0};
  int mc = emit_raw(k, EXEC_I_MOVE, &cin, 1, &cond_reg, 1);
  if (mc < 0) return mc;
  int top = k->c->n_instr;
  int test_in[3] = {i_reg, max_reg, cond_reg};
  int t = emit_raw(k, EXEC_I_PRIM, test_in, 3, &t_reg, 1);
  if (t < 0) return t;
  k->c->instr[t].prim = p_loop_test;
  k->c->instr[t].name = "prim::Loop";
  int jf = emit_raw(k, EXEC_I_JUMP_IF_NOT, &t_reg, 1, NULL, 0);
  if (jf < 0) return jf;
  int p0 = reg_of(k, b->param->outputs[0]);
  if (p0 < 0) return p0;
  if ((rc = emit_raw(k, EXEC_I_MOVE, &i_reg, 1, &p0, 1)) < 0) return rc;
  if ((rc = compile_block(k, b)) < 0) return rc;
  /* block returns (cond, carried...) -> (cond_reg, carried params) */
  int *dst = core_alloc((size_t)(n_carried + 1) * sizeof *dst);
  int *src = core_alloc((size_t)(n_carried + 1) * sizeof *src);
  if (!dst || !src) {
    core_free(dst);
    core_free(src);
    return KILN_ERR_NOMEM;
  }
  dst[0] = cond_reg;
  for (int i = 0; i < n_carried; i++) dst[i + 1] = reg_of(k, b->param->outputs[i + 1]);
  for (int i = 0; i <= n_carried; i++) src[i] = reg_of(k, b->ret->inputs[i]);
  rc = emit_raw(k, EXEC_I_MOVE, src, n_carried + 1, dst, n_carried + 1);
  core_free(dst);
  core_free(src);
  if (rc < 0) return rc;
  int inc = emit_raw(k, EXEC_I_PRIM, &i_reg, 1, &i_reg, 1);
  if (inc < 0) return inc;
  k->c->instr[inc].prim = p_increment;
  k->c->instr[inc].name = "prim::Loop";
  int j = exec_code_add(k->c, EXEC_I_JUMP, 0, 0);
  if (j < 0) return j;
  k->c->instr[j].target = top;
  k->c->instr[jf].target = k->c->n_instr;
  int ex = emit(k, EXEC_I_MOVE, b->param->outputs + 1, n_carried, n->outputs, n->n_outputs);
  if (ex < 0) return ex;
  k->c->instr[ex].name = "prim::Loop";
  /* the counter and condition live for the whole loop (the increment both
   * reads and writes i: its last use must not be inside the body) */
  if (note_use(k, i_reg, ex) < 0 || note_use(k, cond_reg, ex) < 0) return KILN_ERR_NOMEM;
  return add_region(k, start, ex);
}

static int compile_node(compiler *k, const ir_node *n) {
  if (n->op >= 0) {
    int ix = emit(k, EXEC_I_OP, n->inputs, n->n_inputs, n->outputs, n->n_outputs);
    if (ix < 0) return ix;
    k->c->instr[ix].op = n->op;
    k->c->instr[ix].name = op_table[n->op].name;
    return 0;
  }
  switch (n->prim) {
  case IR_PRIM_CONSTANT: {
    int ix = emit(k, EXEC_I_CONST, NULL, 0, n->outputs, n->n_outputs);
    if (ix < 0) return ix;
    k->c->instr[ix].name = "prim::Constant";
    return exec_constant_value(n, &k->c->instr[ix].k);
  }
  case IR_PRIM_IF: return compile_if(k, n);
  case IR_PRIM_LOOP: return compile_loop(k, n);
  default: break;
  }
  int ix = emit(k, EXEC_I_PRIM, n->inputs, n->n_inputs, n->outputs, n->n_outputs);
  if (ix < 0) return ix;
  exec_instr *x = &k->c->instr[ix];
  x->name = ir_prim_table[n->prim].name;
  if (n->prim == IR_PRIM_ISNOT) x->k = (exec_value){.tag = EXEC_V_BOOL, .b = true};
  x->prim = exec_prim_impl[n->prim];
  if (k->opts && k->opts->custom) {
    int rc = k->opts->custom(k->opts->ud, k->c, n, x);
    if (rc < 0) return rc;
  }
  if (!x->prim)
    return core_error(KILN_ERR_UNSUPPORTED, "interp: %s cannot run in the interpreter",
                      ir_prim_table[n->prim].name);
  return 0;
}

static int compile_block(compiler *k, const ir_block *b) {
  for (const ir_node *n = b->first; n; n = n->next) {
    int rc = compile_node(k, n);
    if (rc < 0) return rc;
  }
  return 0;
}

/* Note [Registers and liveness]. */
static int plan_frees(compiler *k) {
  exec_code *c = k->c;
  int *last = core_alloc((size_t)(c->n_regs ? c->n_regs : 1) * sizeof *last);
  if (!last) return KILN_ERR_NOMEM;
  for (int r = 0; r < c->n_regs; r++) last[r] = k->def_pos[r];
  for (int u = 0; u < k->n_uses; u += 2) {
    int r = k->use_pos[u], p = k->use_pos[u + 1], d = k->def_pos[r];
    /* move the use to the end of every region that holds it but not the
     * definition; regions nest, so repeat until stable */
    for (bool moved = true; moved;) {
      moved = false;
      for (int g = 0; g < k->n_regions; g++) {
        region *R = &k->regions[g];
        if (R->start <= p && p < R->end && !(R->start <= d && d <= R->end)) {
          p = R->end;
          moved = true;
        }
      }
    }
    if (p > last[r]) last[r] = p;
  }
  for (int i = 0; i < c->n_outputs; i++) last[c->output_regs[i]] = c->n_instr; /* never */
  for (int i = 0; i < c->n_inputs; i++)
    if (last[c->input_regs[i]] < 0) last[c->input_regs[i]] = c->n_instr; /* unused input */
  /* a value defined inside a loop body survives to the next iteration only
   * through the carried moves: clearing it after its last use there is safe */
  int rc = exec_code_set_frees(c, last);
  core_free(last);
  return rc;
}

exec_code *exec_compile(const ir_graph *g, const exec_compile_opts *opts) {
  compiler k = {0};
  const ir_block *top = ir_graph_top(g);
  int rc = 0;
  k.opts = opts;
  k.c = exec_code_new();
  k.n_values = ir_graph_value_count(g);
  k.reg = core_alloc((size_t)(k.n_values ? k.n_values : 1) * sizeof *k.reg);
  if (!k.c || !k.reg) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < k.n_values; i++) k.reg[i] = -1;
  int n_in = ir_block_n_params(top), n_out = ir_block_n_returns(top);
  k.c->input_regs = core_alloc((size_t)(n_in ? n_in : 1) * sizeof(int));
  k.c->output_regs = core_alloc((size_t)(n_out ? n_out : 1) * sizeof(int));
  if (!k.c->input_regs || !k.c->output_regs) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < n_in; i++) {
    int r = reg_of(&k, ir_block_param(top, i));
    if (r < 0) {
      rc = r;
      goto done;
    }
    k.c->input_regs[k.c->n_inputs++] = r;
  }
  if ((rc = compile_block(&k, top)) < 0) goto done;
  for (int i = 0; i < n_out; i++) {
    int r = reg_of(&k, ir_block_return(top, i));
    if (r < 0) {
      rc = r;
      goto done;
    }
    k.c->output_regs[k.c->n_outputs++] = r;
  }
  rc = plan_frees(&k);
done:
  core_free(k.reg);
  core_free(k.def_pos);
  core_free(k.use_pos);
  core_free(k.regions);
  if (rc < 0) {
    exec_code_free(k.c);
    return NULL;
  }
  return k.c;
}
