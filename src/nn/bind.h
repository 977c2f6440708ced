/* src/nn/bind.h: module graph text -> function graph text (bind.c, Note
 * [Module binding]); used by the model importer (import.c). */
#ifndef KILN_NN_BIND_H
#define KILN_NN_BIND_H

#include "core/core.h"

/* What a GetAttr chain ending at a path stands for. */
typedef enum { NN_BIND_TENSOR = 1, NN_BIND_CONST = 2, NN_BIND_TENSOR_LIST = 3 } nn_bind_kind;

enum { NN_BIND_MAX_LIST = 64 };

typedef struct nn_bind_attr {
  nn_bind_kind kind;
  char type[64];    /* CONST: the value's IR type ("bool", "NoneType", "int[]") */
  char text[512];   /* CONST: the node ("prim::Constant[value=1]()") */
  int n_list;       /* TENSOR_LIST: the paths of its tensors (nn.LSTM's _flat_weights) */
  char list[NN_BIND_MAX_LIST][160];
} nn_bind_attr;

/* Says what path (declared type decl_type in the graph) is; returns 0, or
 * a negative status with the error set (a missing entry, a kind kiln does
 * not support). */
typedef int (*nn_bind_resolve)(void *ud, const char *path, const char *decl_type,
                               nn_bind_attr *out);

/* The bound graph: inputs are the module's own n_inputs inputs, then one
 * tensor per tensor_paths[i]; outputs are the module's n_outputs outputs,
 * then the values SetAttr wrote to set_paths[i] (to write back). */
typedef struct nn_bound {
  char *text;
  char *self_class;     /* "__torch__.X", or NULL for a graph without %self */
  int n_inputs, n_outputs;
  int n_tensors;
  char **tensor_paths;
  int n_sets;
  char **set_paths;
} nn_bound;

/* Binds text (len bytes; name used in messages) into *out (zeroed first;
 * free with nn_bound_free). Returns 0 or a negative status with the error
 * set naming the line. */
int nn_bind_module_graph(const char *text, size_t len, const char *name, nn_bind_resolve resolve,
                         void *ud, nn_bound *out);
void nn_bound_free(nn_bound *b);

#endif
