/* src/exec/lazy_anomaly.c: anomaly mode (kiln_set_anomaly_enabled, `kiln
 * train --detect-anomaly`) for lazy tensors. A lazy step runs as one
 * compiled graph, forward and backward together, so the autograd engine's
 * per-node check never sees a value. Instead, when a step's results hold a
 * NaN or Inf, the pending graph is replayed eagerly node by node (the same
 * op-table kernels, on the step's inputs) and the first node in the
 * graph's order whose output is not finite is named: its op and its line
 * in the lazy graph text (`%7 = [f32[3]] aten::log(%6)`, numbered as
 * kiln_lazy_tensors_text numbers the pending graph). */
#include <math.h>
#include <stdio.h>

#include "exec/lazy_anomaly.h"
#include "ops/op.h"

static bool nonfinite(const kiln_tensor *t) {
  if (!t || !core_data(t) || !core_dtype_is_floating(t->dtype)) return false;
  int64_t n = kiln_tensor_numel(t);
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(core_get_flat(t, i))) return true;
  return false;
}

bool exec_lazy_any_nonfinite(kiln_tensor *const *ts, int n) {
  for (int i = 0; i < n; i++)
    if (nonfinite(ts[i])) return true;
  return false;
}

/* "%7 = [f32[3]] aten::log(%6)" for node x into buf. */
static void node_text(const lazy_node *x, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "%%%d = [", x->post_id);
  for (int i = 0; i < x->n_outs && k < n; i++) {
    const op_meta *m = &x->metas[i];
    k += (size_t)snprintf(buf + k, n - k, "%s%s[", i ? ", " : "", kiln_dtype_name(m->dtype));
    for (int d = 0; d < m->ndim && k < n; d++)
      k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)m->shape[d]);
    if (k < n) k += (size_t)snprintf(buf + k, n - k, "]");
  }
  if (k >= n) return;
  if (x->op == LAZY_DATA) {
    snprintf(buf + k, n - k, "] lazy_tensors::device_data()");
    return;
  }
  k += (size_t)snprintf(buf + k, n - k, "] %s(", op_table[x->op].name);
  for (int i = 0; i < x->n_operands && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%%%d", i ? ", " : "", x->operands[i].node->post_id);
  if (k < n) snprintf(buf + k, n - k, ")");
}

/* The replayed value of operand v (vals per post_id). */
static kiln_tensor *operand(kiln_tensor ***vals, const lazy_value *v) {
  kiln_tensor **o = vals[v->node->post_id];
  return o ? o[v->index] : NULL;
}

int exec_lazy_anomaly(lazy_node *const *order, int n_order) {
  int rc = 0;
  kiln_tensor ***vals = core_calloc((size_t)(n_order ? n_order : 1), sizeof *vals);
  if (!vals) return KILN_ERR_NOMEM;
  bool prev = kiln_set_grad_enabled(false);
  kiln_scope_begin(); /* the replay's tensors */
  for (int i = 0; i < n_order && rc == 0; i++) {
    lazy_node *x = order[i];
    char text[512];
    vals[i] = core_calloc((size_t)(x->n_outs ? x->n_outs : 1), sizeof *vals[i]);
    if (!vals[i]) {
      rc = KILN_ERR_NOMEM;
      break;
    }
    if (x->op == LAZY_DATA) {
      vals[i][0] = x->data;
      if (x->scalar_tag == 0 && nonfinite(x->data)) {
        node_text(x, text, sizeof text);
        rc = core_error(KILN_ERR_STATE,
                        "anomaly: the lazy step's input %s already holds NaN or Inf "
                        "(it came from an earlier step or from the caller)", text);
      }
      continue;
    }
    op_val args[32];
    kiln_tensor *lists[32][8];
    if (x->n_args > 32) break; /* not replayable: no diagnosis */
    bool ok = true;
    for (int k = 0; k < x->n_args && ok; k++) {
      int kind = x->arg_kind[k];
      const lazy_value *v = kind == LAZY_ARG_CONST ? NULL : &x->operands[x->arg_operand[k]];
      switch (kind) {
      case LAZY_ARG_TENSOR: args[k] = OPV_T(operand(vals, v)); ok = args[k].t != NULL; break;
      case LAZY_ARG_SCALAR: {
        kiln_tensor *s = operand(vals, v);
        double d;
        ok = s && kiln_item(s, &d) == 0;
        args[k] = x->args[k].tag == OP_VAL_INT    ? OPV_I((int64_t)d)
                  : x->args[k].tag == OP_VAL_BOOL ? OPV_B(d != 0)
                                                  : OPV_F(d);
        break;
      }
      case LAZY_ARG_TENSORS: {
        int m = x->args[k].ts.n;
        ok = m <= 8;
        for (int j = 0; ok && j < m; j++) ok = (lists[k][j] = operand(vals, v + j)) != NULL;
        args[k] = OPV_TS(lists[k], m);
        break;
      }
      default: args[k] = x->args[k]; break;
      }
    }
    if (!ok) break;
    int got = op_call(x->op, args, x->n_args, vals[i], x->n_outs);
    if (got < 0) {
      kiln_clear_error(); /* the compiled step ran it: no diagnosis */
      break;
    }
    for (int j = 0; j < got; j++)
      if (nonfinite(vals[i][j])) {
        node_text(x, text, sizeof text);
        rc = core_error(KILN_ERR_STATE,
                        "anomaly: %s made the first NaN or Inf of the lazy step (output %d of "
                        "graph node %s; its inputs are finite)",
                        op_table[x->op].name, j, text);
        break;
      }
  }
  kiln_scope_end();
  kiln_set_grad_enabled(prev);
  for (int i = 0; i < n_order; i++) core_free(vals[i]);
  core_free(vals);
  if (rc == 0)
    rc = core_error(KILN_ERR_STATE, "anomaly: the lazy step's results hold NaN or Inf (the graph "
                                    "node that made it could not be replayed)");
  return rc;
}
