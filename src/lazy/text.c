/* src/lazy/text.c: kiln_lazy_tensors_text, the pending IR of lazy tensors
 * in the style of PyTorch 1.13's torch._C._lazy._get_tensors_text:
 *
 *   IR {
 *     %0 = [Float[4,4]] lazy_tensors::device_data(), device=CPU0
 *     %1 = [Float[4,4]] aten::mm(%0, %0), ROOT=0
 *   }
 */
#include <stdio.h>
#include <string.h>

#include "lazy.h"

/* text accumulates in a core_strbuf */
typedef core_strbuf sbuf;
#define put core_strbuf_printf

static void put_meta(sbuf *b, const op_meta *m) {
  put(b, "%s[", kiln_dtype_name(m->dtype));
  for (int i = 0; i < m->ndim; i++) put(b, "%s%lld", i ? "," : "", (long long)m->shape[i]);
  put(b, "]");
}

static void put_const(sbuf *b, const op_val *v) {
  switch (v->tag) {
  case OP_VAL_INT: put(b, "%lld", (long long)v->i); break;
  case OP_VAL_FLOAT: put(b, "%g", v->f); break;
  case OP_VAL_BOOL: put(b, "%d", v->b ? 1 : 0); break;
  case OP_VAL_STR: put(b, "%s", v->s); break;
  case OP_VAL_INTS:
    if (v->ints.n == 1) {
      put(b, "%lld", (long long)v->ints.v[0]);
    } else {
      put(b, "(");
      for (int i = 0; i < v->ints.n; i++) put(b, "%s%lld", i ? ", " : "", (long long)v->ints.v[i]);
      put(b, ")");
    }
    break;
  default: put(b, "null"); break;
  }
}

static void put_node(sbuf *b, lazy_node *x, kiln_tensor *const *ts, int n_ts) {
  put(b, "  %%%d = [", x->post_id);
  for (int i = 0; i < x->n_outs; i++) {
    if (i) put(b, ", ");
    put_meta(b, &x->metas[i]);
  }
  if (x->op == LAZY_DATA) {
    put(b, "] lazy_tensors::device_data(), device=CPU0");
  } else {
    put(b, "] %s(", op_table[x->op].name);
    for (int i = 0; i < x->n_operands; i++) {
      lazy_value *v = &x->operands[i];
      put(b, "%s%%%d", i ? ", " : "", v->node->post_id);
      if (v->node->n_outs > 1) put(b, ".%d", v->index);
    }
    put(b, ")");
    for (int k = 0; k < x->n_args; k++) {
      if (x->arg_kind[k] != LAZY_ARG_CONST) continue;
      put(b, ", %s=", op_arg_name(x->op, k));
      put_const(b, &x->args[k]);
    }
  }
  for (int r = 0; r < n_ts; r++)
    if (ts[r] && ts[r]->device == CORE_DEVICE_LAZY && lazy_of(ts[r])->value.node == x)
      put(b, ", ROOT=%d", r);
  put(b, "\n");
}

char *kiln_lazy_tensors_text(kiln_tensor *const *ts, int n) {
  sbuf b = {0};
  lazy_node **roots = core_calloc((size_t)(n ? n : 1), sizeof *roots);
  int n_order = 0;
  if (!roots) return NULL;
  for (int i = 0; i < n; i++)
    if (ts[i] && ts[i]->device == CORE_DEVICE_LAZY) roots[i] = lazy_of(ts[i])->value.node;
  lazy_node **order = lazy_post_order(roots, n, &n_order);
  core_free(roots);
  if (!order) return NULL;
  put(&b, "IR {\n");
  for (int i = 0; i < n_order; i++) put_node(&b, order[i], ts, n);
  put(&b, "}\n");
  core_free(order);
  if (b.oom) {
    core_free(b.p);
    core_error(KILN_ERR_NOMEM, "lazy_tensors_text: out of memory");
    return NULL;
  }
  return b.p;
}
