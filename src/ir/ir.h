/* src/ir/ir.h: the graph IR (modelled on TorchScript's torch/csrc/jit/ir):
 * Graph, Block, Node, Value, types and attributes; the mutators passes use;
 * the TorchScript-format printer and parser; the verifier.
 *
 * Note [Graph ownership]: an ir_graph owns everything reachable from it:
 * blocks, nodes, values, types, attribute payloads, interned strings and
 * the subgraphs held in `Subgraph` attributes. All of it lives in the
 * graph's arena and goes away in one ir_graph_free. A removed node is only
 * unlinked: its memory is reclaimed with the graph (graphs are rebuilt per
 * compilation, so this is bounded). Nothing here is reference counted, and
 * a pointer from one graph into another is a bug (copy with
 * ir_node_copy_into / ir_type_copy).
 *
 * Note [Blocks]: as in TorchScript, a block's parameters are the outputs of
 * its prim::Param node and its returns are the inputs of its prim::Return
 * node. Neither node is in the block's node list; both belong to the block.
 * So block returns are ordinary uses (replace_all_uses covers them) and
 * block parameters are ordinary definitions.
 *
 * Note [Use lists]: every input slot (node n, index i) holding value v
 * appears exactly once in v's use list as {n, i}, in insertion order, and
 * nothing else does. Every mutator keeps this; the verifier checks it.
 *
 * Note [Value names]: a value prints as %<name> if it has a debug name,
 * else as %<id>. Parsed values keep their printed names (also numeric
 * ones such as "3"), and the graph's id counter is moved past every
 * numeric name, so values created later never print like existing ones.
 * Names are unique within one graph (subgraphs have their own).
 *
 * Note [Dominance]: a value may be used by a node if it is defined earlier
 * in the same block, or in an enclosing block before the node that owns
 * the block (block parameters are defined at the start of their block).
 * A node's outputs are not visible inside its own sub-blocks. */
#ifndef KILN_IR_H
#define KILN_IR_H

#include "ops/op.h"

typedef struct ir_graph ir_graph;
typedef struct ir_block ir_block;
typedef struct ir_node ir_node;
typedef struct ir_value ir_value;
typedef struct ir_type ir_type;
typedef struct ir_ivalue ir_ivalue;

/* ======================================================================= */
/* types                                                                     */
/* ======================================================================= */

typedef enum ir_type_kind {
  IR_TYPE_TENSOR = 0,
  IR_TYPE_INT,
  IR_TYPE_FLOAT,
  IR_TYPE_BOOL,
  IR_TYPE_STR,
  IR_TYPE_NONE,     /* NoneType */
  IR_TYPE_DEVICE,
  IR_TYPE_NUMBER,   /* prints "Scalar" (TorchScript's NumberType) */
  IR_TYPE_FUNCTION,
  IR_TYPE_ANY,
  IR_TYPE_LIST,     /* elems[0][] */
  IR_TYPE_TUPLE,    /* (elems[0], ...) */
  IR_TYPE_OPTIONAL  /* elems[0]? */
} ir_type_kind;

/* Note [Tensor types]: every field is optional. dtype < 0, ndim < 0,
 * sizes[i] < 0, requires_grad < 0 and device == NULL mean "unknown";
 * strides are all known or absent. `seen` says a profile observed a tensor
 * here: an unseen type (nothing known) prints as plain `Tensor`. The
 * parser sets seen exactly when some field is known; profiles always
 * record the device, so seen types print at least `device=cpu` and the bit
 * round-trips through text.
 *
 * Note [Tensor type text]: TorchScript prints `Float(4, 3, strides=[3, 1],
 * requires_grad=0, device=cpu)`, `Float(*, 3)`, `Tensor(requires_grad=1)`,
 * and a 0-d tensor as `Float()` / `Float(requires_grad=0, device=cpu)`.
 * Its printer gives the same text for a dtype-known tensor of unknown rank
 * that has requires_grad or device; kiln parses such text as 0-d (as
 * TorchScript's parser does) and prints unknown rank with known dtype and
 * options as `Float(..., requires_grad=0)`, and a 0-d tensor of unknown
 * dtype with options as `Tensor(dim=0, requires_grad=0)`, so that its own
 * graphs round-trip. Everything TorchScript prints reads back unchanged. */
struct ir_type {
  uint8_t kind;          /* ir_type_kind */
  /* IR_TYPE_TENSOR */
  int8_t dtype;          /* kiln_dtype, or -1 */
  int8_t ndim;           /* -1 = unknown rank */
  int8_t requires_grad;  /* -1, 0 or 1 */
  bool seen;
  bool has_strides;
  const char *device;    /* "cpu", or NULL */
  const int64_t *sizes;  /* ndim entries (-1 = unknown), or NULL */
  const int64_t *strides;/* ndim entries if has_strides */
  /* LIST, OPTIONAL: one elem; TUPLE: n_elems */
  int n_elems;
  const ir_type *const *elems;
};

/* Shared immutable instances of the simple types (no graph needed). */
const ir_type *ir_type_tensor(void);  /* plain, unseen `Tensor` */
const ir_type *ir_type_int(void);
const ir_type *ir_type_float(void);
const ir_type *ir_type_bool(void);
const ir_type *ir_type_str(void);
const ir_type *ir_type_none(void);
const ir_type *ir_type_device(void);
const ir_type *ir_type_number(void);
const ir_type *ir_type_function(void);
const ir_type *ir_type_any(void);
/* The simple type of a kind (not LIST/TUPLE/OPTIONAL), else NULL. */
const ir_type *ir_type_simple(ir_type_kind k);

/* A refined tensor type allocated in g (see Note [Tensor types]): sizes
 * and strides (ndim entries each, may be NULL) are copied; device is
 * interned. seen is set when any field is known. NULL on OOM or bad ndim. */
const ir_type *ir_type_tensor_new(ir_graph *g, int dtype, int ndim,
                                  const int64_t *sizes, const int64_t *strides,
                                  int requires_grad, const char *device);
/* T[], T? and (T0, T1, ...) allocated in g. NULL on OOM. */
const ir_type *ir_type_list(ir_graph *g, const ir_type *elem);
const ir_type *ir_type_optional(ir_graph *g, const ir_type *elem);
const ir_type *ir_type_tuple(ir_graph *g, int n, const ir_type *const *elems);
/* A deep copy of t owned by g (simple types are returned as is). */
const ir_type *ir_type_copy(ir_graph *g, const ir_type *t);

/* Structural equality (all tensor fields, including seen). */
bool ir_type_equal(const ir_type *a, const ir_type *b);
/* May a value of type `actual` flow where `decl` is expected? Tensor
 * refinements are interchangeable (profiles refine and merge them); T
 * fits T?, None fits T?, int and float fit Scalar, everything fits Any;
 * lists and tuples compare elementwise. */
bool ir_type_accepts(const ir_type *decl, const ir_type *actual);
static inline bool ir_type_is_tensor(const ir_type *t) {
  return t->kind == IR_TYPE_TENSOR;
}
/* Writes TorchScript's spelling of t into buf (truncated to n, always
 * NUL-terminated); returns buf. */
char *ir_type_text(const ir_type *t, char *buf, size_t n);

/* ======================================================================= */
/* node kinds                                                                */
/* ======================================================================= */

/* prims.def: every node kind that is not an op-table op (prim:: kinds and
 * the non-tensor aten:: builtins), with property bits. */
enum {
  IR_PF_BLOCKS = 1 << 0,     /* has sub-blocks (If, Loop) */
  IR_PF_SUBGRAPH = 1 << 1,   /* holds a `Subgraph` graph attribute; prints as
                                a group (prim::DifferentiableGraph_0) */
  IR_PF_SIDE_EFFECT = 1 << 2,/* must not be removed even if unused */
  IR_PF_INTERNAL = 1 << 3,   /* never appears in text (Param, Return) */
};

#define PRIM(ENUM, name, sig, flags, doc) IR_PRIM_##ENUM,
enum ir_prim {
#include "prims.def"
  IR_PRIM_COUNT
};
#undef PRIM

typedef struct ir_prim_info {
  const char *name;  /* "prim::If", "aten::size" */
  const char *sig;   /* see prims.def; NULL = checked in code */
  unsigned flags;
  const char *doc;
} ir_prim_info;

extern const ir_prim_info ir_prim_table[IR_PRIM_COUNT];

/* ======================================================================= */
/* attributes                                                                */
/* ======================================================================= */

typedef enum ir_attr_kind {
  IR_ATTR_INT = 0,  /* i */
  IR_ATTR_FLOAT,    /* f */
  IR_ATTR_STR,      /* s */
  IR_ATTR_INTS,     /* is */
  IR_ATTR_FLOATS,   /* fs */
  IR_ATTR_TYPE,     /* ty */
  IR_ATTR_TYPES,    /* tys */
  IR_ATTR_GRAPH,    /* g: owned by the node's graph (Note [Graph ownership]) */
  IR_ATTR_IVALUE    /* any other constant: bool/str lists, tuples, nesting */
} ir_attr_kind;

/* A constant value tree (TorchScript's IValue, without tensors). */
typedef enum ir_ivalue_tag {
  IR_IV_NONE = 0, IR_IV_INT, IR_IV_FLOAT, IR_IV_BOOL, IR_IV_STR, IR_IV_LIST,
  IR_IV_TUPLE
} ir_ivalue_tag;

struct ir_ivalue {
  uint8_t tag;
  union {
    int64_t i;
    double f;
    bool b;
    const char *s;
    struct { ir_ivalue *v; int n; } items;  /* LIST, TUPLE */
  };
};

typedef struct ir_attr {
  const char *name;  /* "value", "name", "Subgraph", ... */
  uint8_t kind;      /* ir_attr_kind */
  union {
    int64_t i;
    double f;
    const char *s;
    struct { const int64_t *v; int n; } ints;
    struct { const double *v; int n; } floats;
    const ir_type *ty;
    struct { const ir_type *const *v; int n; } types;
    ir_graph *g;
    const ir_ivalue *iv;
  };
} ir_attr;

/* ======================================================================= */
/* graph, block, node, value                                                 */
/* ======================================================================= */

typedef struct ir_use {
  ir_node *user;
  int index;  /* which input of user */
} ir_use;

struct ir_value {
  int id;               /* unique in its graph */
  const char *name;     /* debug name without '%', or NULL (Note [Value names]) */
  const ir_type *type;
  ir_node *node;        /* defining node (prim::Param for block parameters) */
  int index;            /* which output of node */
  ir_use *uses;         /* Note [Use lists] */
  int n_uses, cap_uses;
};

struct ir_node {
  int id;               /* unique in its graph (creation order) */
  int op;               /* op-table index, or -1 */
  int prim;             /* ir_prim, or -1 (exactly one of op/prim is >= 0) */
  const char *overload; /* "int" of `aten::add.int` as written, or NULL */
  const char *src;      /* source location ("f.py:3:9") or NULL */
  int line, col;        /* position of the kind in the parsed text, or 0 */
  ir_value **inputs;
  int n_inputs, cap_inputs;
  ir_value **outputs;
  int n_outputs, cap_outputs;
  ir_attr *attrs;       /* in insertion order (the printed order) */
  int n_attrs, cap_attrs;
  ir_block **blocks;
  int n_blocks, cap_blocks;
  ir_block *owner;      /* block this node belongs to (NULL when unlinked) */
  ir_node *prev, *next; /* within owner's node list */
  ir_graph *graph;
  bool linked;          /* in a node list (Param/Return nodes: always) */
};

struct ir_block {
  ir_graph *graph;
  ir_node *owner;       /* the node this block belongs to; NULL for the top */
  ir_node *param;       /* prim::Param: outputs = parameters (Note [Blocks]) */
  ir_node *ret;         /* prim::Return: inputs = returns */
  ir_node *first, *last;
};

/* A new empty graph (top block without params or returns). NULL on OOM. */
ir_graph *ir_graph_new(void);
/* Frees g and everything it owns (Note [Graph ownership]). NULL is fine.
 * Must not be called on a subgraph held by a node's attribute. */
void ir_graph_free(ir_graph *g);
ir_block *ir_graph_top(const ir_graph *g);
/* One past the largest value id in g (for arrays indexed by id). */
int ir_graph_value_count(const ir_graph *g);
int ir_graph_node_count(const ir_graph *g);
/* Allocates n zeroed bytes owned by g (aligned for any type); NULL on OOM.
 * For passes that hang data off a graph. */
void *ir_graph_alloc(ir_graph *g, size_t n);
/* A copy of s (n bytes, NUL added) owned by g; NULL on OOM. */
const char *ir_graph_strdup(ir_graph *g, const char *s, size_t n);

/* Parameters and returns of a block (views, valid until the next change). */
static inline int ir_block_n_params(const ir_block *b) { return b->param->n_outputs; }
static inline ir_value *ir_block_param(const ir_block *b, int i) { return b->param->outputs[i]; }
static inline int ir_block_n_returns(const ir_block *b) { return b->ret->n_inputs; }
static inline ir_value *ir_block_return(const ir_block *b, int i) { return b->ret->inputs[i]; }

/* Appends a parameter of type t (name may be NULL) to b. NULL on OOM.
 *   before: graph(%x : Tensor):            after: graph(%x : Tensor,
 *                                                       %n : int):        */
ir_value *ir_block_add_param(ir_block *b, const ir_type *t, const char *name);
/* Appends v to b's returns. v must belong to b's graph. < 0 on OOM.
 *   before: return (%4)                    after: return (%4, %x)          */
int ir_block_add_return(ir_block *b, ir_value *v);
/* Removes return i of b (dropping that use).
 *   before: -> (%a, %b)    ir_block_remove_return(b, 0)    after: -> (%b) */
void ir_block_remove_return(ir_block *b, int i);
/* Removes parameter i of b; it must have no uses (else KILN_ERR_STATE).
 *   before: block0(%i : int, %y : Tensor)   (remove 1)   after: block0(%i : int) */
int ir_block_remove_param(ir_block *b, int i);

/* A new, unlinked node of op-table op `op` / builtin `prim`, no inputs or
 * outputs. NULL on OOM. Link it with ir_node_append / insert_before/after.
 *   n = ir_node_new_op(g, KILN_OP_RELU); ir_node_add_input(n, x);
 *   y = ir_node_add_output(n, ir_type_tensor()); ir_node_append(b, n);
 *   after: %5 : Tensor = aten::relu(%x)                                  */
ir_node *ir_node_new_op(ir_graph *g, int op);
ir_node *ir_node_new_prim(ir_graph *g, int prim);
/* "aten::add" / "prim::If" (without overload). */
const char *ir_node_kind(const ir_node *n);
static inline bool ir_node_is(const ir_node *n, int prim) { return n->prim == prim; }

/* Appends input v (recording the use). < 0 on OOM.
 *   before: aten::add(%x, %y)    (add %1)    after: aten::add(%x, %y, %1) */
int ir_node_add_input(ir_node *n, ir_value *v);
/* Replaces input i with v (moving the use). Returns the old value, or
 * NULL (changing nothing) on OOM.
 *   before: aten::mul(%a, %b)    (set 1 to %c)    after: aten::mul(%a, %c) */
ir_value *ir_node_set_input(ir_node *n, int i, ir_value *v);
/* Removes input i (later inputs shift down; their uses are renumbered).
 *   before: prim::ListConstruct(%a, %b, %c)  (remove 0)  after: (%b, %c) */
void ir_node_remove_input(ir_node *n, int i);
/* Appends an output of type t (unnamed). NULL on OOM.
 *   before: = prim::If(%c)     after: %3 : int = prim::If(%c)            */
ir_value *ir_node_add_output(ir_node *n, const ir_type *t);
/* Removes output i; it must have no uses (else KILN_ERR_STATE).
 *   before: %a : int, %b : int = prim::If(%c)  (remove 0)  after: %b : int = ... */
int ir_node_remove_output(ir_node *n, int i);
/* Adds an empty sub-block (prim::If / prim::Loop). NULL on OOM.
 *   before: %y : int = prim::If(%c)     after: ... block0():\n -> ()     */
ir_block *ir_node_add_block(ir_node *n);

/* Links an unlinked node n into a block. n must belong to the same graph.
 * pos may be a block's Return node (insert_before = append) or Param node
 * (insert_after = prepend).
 *   append:        block0(): %a = f()          -> block0(): %a = f(); n
 *   insert_before: %a = f(); %b = g()  (pos %b) -> %a = f(); n; %b = g()
 *   insert_after:  %a = f(); %b = g()  (pos %a) -> %a = f(); n; %b = g()  */
void ir_node_append(ir_block *b, ir_node *n);
void ir_node_prepend(ir_block *b, ir_node *n);
void ir_node_insert_before(ir_node *n, ir_node *pos);
void ir_node_insert_after(ir_node *n, ir_node *pos);
/* Moves a linked node to just before/after pos (possibly another block).
 *   before: %a = f(); %b = g(%x); %c = h()   move_after(%b's node, %c's node)
 *   after:  %a = f(); %c = h(); %b = g(%x)                               */
void ir_node_move_before(ir_node *n, ir_node *pos);
void ir_node_move_after(ir_node *n, ir_node *pos);

/* Makes every use of v a use of with (including block returns). < 0 on
 * OOM (changing nothing).
 *   before: %b = aten::relu(%a); return (%a, %b)   (replace %a by %z)
 *   after:  %b = aten::relu(%z); return (%z, %b)                          */
int ir_value_replace_all_uses(ir_value *v, ir_value *with);
/* Replaces the uses of v that come after node `after` in program order
 * (in after's block and blocks nested in later nodes); for passes that
 * insert a refined copy (profile, guard outputs).
 *   before: %b = f(%a); %c = g(%a)   (after %b's node, with %z)
 *   after:  %b = f(%a); %c = g(%z)                                        */
int ir_value_replace_uses_after(ir_value *v, ir_value *with, const ir_node *after);
/* Is u after a in program order (u, or the node holding u's block, follows
 * a in a's block; the block's return is after every node)? Nodes inside
 * a's own blocks are not. */
bool ir_node_is_after(const ir_node *u, const ir_node *a);
/* Sets v's debug name (copied). A name already used by another value of
 * the graph gets a ".N" suffix (TorchScript would rename the other value
 * instead; kiln never changes existing names); NULL clears it.
 * An empty or purely numeric name is an id, not a name (TorchScript
 * prints unnamed values that way): v is left unnamed and prints with its
 * own id. < 0 on OOM. */
int ir_value_set_name(ir_value *v, const char *name);
/* The value named name in g (without '%'), or NULL. */
ir_value *ir_graph_find_value(const ir_graph *g, const char *name);

/* Removes n from its block and drops its input uses (and those of nodes in
 * its sub-blocks). Fails with KILN_ERR_STATE, changing nothing, if any
 * output of n (or of a nested node) still has uses outside n.
 *   before: %a = f(); %b = aten::relu(%a); return (%a)   (remove %b's node)
 *   after:  %a = f(); return (%a)                                         */
int ir_node_remove(ir_node *n);

/* ---- attributes ---------------------------------------------------------- */
/* The attribute named name, or NULL. */
const ir_attr *ir_node_attr(const ir_node *n, const char *name);
/* Set (add or replace) an attribute; payloads are copied into n's graph.
 * < 0 on OOM.
 *   before: = aten::warn(%m, %s)   (set_i "warn_id", 0)
 *   after:  = aten::warn[warn_id=0](%m, %s)                               */
int ir_node_set_i(ir_node *n, const char *name, int64_t v);
int ir_node_set_f(ir_node *n, const char *name, double v);
int ir_node_set_s(ir_node *n, const char *name, const char *v);
int ir_node_set_is(ir_node *n, const char *name, const int64_t *v, int count);
int ir_node_set_fs(ir_node *n, const char *name, const double *v, int count);
int ir_node_set_ty(ir_node *n, const char *name, const ir_type *t);
int ir_node_set_tys(ir_node *n, const char *name, const ir_type *const *t, int count);
int ir_node_set_iv(ir_node *n, const char *name, const ir_ivalue *v);
/* Takes ownership of sub (Note [Graph ownership]); sub must not be owned
 * by anything else. On failure sub is freed.
 *   before: %y = prim::DifferentiableGraph(%x)
 *   after:  %y = prim::DifferentiableGraph_0(%x)  ... with prim::DifferentiableGraph_0 = graph(...)
 */
int ir_node_set_g(ir_node *n, const char *name, ir_graph *sub);
/* Removes an attribute if present.
 *   before: = aten::warn[warn_id=0](%m, %s)   after: = aten::warn(%m, %s) */
void ir_node_remove_attr(ir_node *n, const char *name);
/* A deep copy of an ivalue tree owned by g; NULL on OOM. */
const ir_ivalue *ir_ivalue_copy(ir_graph *g, const ir_ivalue *v);

/* ---- copying --------------------------------------------------------------- */
/* Maps values of one graph to values of another (for copying nodes).
 * ir_value_map_new: NULL on OOM; free with ir_value_map_free (NULL is
 * fine). set: adds or replaces, < 0 on OOM. get: NULL if unmapped. */
typedef struct ir_value_map ir_value_map;
ir_value_map *ir_value_map_new(void);
void ir_value_map_free(ir_value_map *m);
int ir_value_map_set(ir_value_map *m, const ir_value *from, ir_value *to);
ir_value *ir_value_map_get(const ir_value_map *m, const ir_value *from);

/* A copy of n (attributes, sub-blocks and all nested nodes) owned by
 * dst's graph, unlinked; n's inputs are translated through map (each must
 * be mapped: KILN_ERR_INVALID otherwise) and n's outputs (and nested
 * values) are added to map. Debug names are copied (made unique in the
 * destination; numeric ones, being ids, are not); types are deep-copied.
 * NULL on error: the partial copy is unhooked from dst's values (map may
 * keep entries for it).
 *   src: %3 : Tensor = aten::mul(%x, %2)    map {%x -> %a, %2 -> %k}
 *   dst: %5 : Tensor = aten::mul(%a, %k)    map += {%3 -> %5}            */
ir_node *ir_node_copy_into(ir_graph *dst, const ir_node *n, ir_value_map *map);
/* An exact copy of g (same names and value ids, subgraphs included, so it
 * prints identically), owned by the caller. NULL on OOM. */
ir_graph *ir_graph_clone(const ir_graph *g);

/* ======================================================================= */
/* text                                                                      */
/* ======================================================================= */

enum {
  IR_PRINT_NO_SOURCE = 1 << 0,  /* omit the "# file:line:col" comments */
};

/* TorchScript's text for g (what `print(graph)` shows), as a new
 * NUL-terminated string the caller frees with core_free. NULL on OOM. */
char *ir_graph_print(const ir_graph *g, unsigned flags);
/* One node as text (its line and its blocks, no indent; a group node shows
 * Subgraph=<Graph>), for messages. Caller frees with core_free; NULL on
 * OOM. */
char *ir_node_print(const ir_node *n, unsigned flags);

/* Parses the text that `print(torch.jit.script(f).graph)` prints (after
 * torch._C._jit_pass_inline), or kiln's own printed graphs. `# ...`
 * comments are skipped (a node's source location is kept); len is the
 * text's length (it need not be NUL-terminated). Every node kind must be
 * an op-table op or in prims.def, with arguments and outputs of fitting
 * types. On error returns NULL with the message "line:col: ..." set
 * (KILN_ERR_FORMAT); never crashes on malformed text. The caller frees the
 * graph with ir_graph_free. */
ir_graph *ir_graph_parse(const char *text, size_t len);

/* ======================================================================= */
/* checks                                                                    */
/* ======================================================================= */

/* Checks one node's inputs, outputs, attributes and blocks against its
 * kind (op schema or prims.def signature). 0, or KILN_ERR_INVALID with a
 * message naming the kind and the offending argument. */
int ir_node_check(const ir_node *n);
/* Checks g: SSA (each value defined exactly once, by the node that lists
 * it), Note [Dominance], Note [Use lists], node list links, block arities
 * of If and Loop, subgraph arities, and ir_node_check for every node
 * (recursing into subgraphs). 0, or KILN_ERR_INVALID with a message. */
int ir_graph_verify(const ir_graph *g);

/* Looks up a kind spelled name (qualified, without overload) for these
 * inputs: a prims.def entry whose signature accepts their types first,
 * else the op-table entry with that name and arity. Sets *op or *prim
 * (the other to -1) and returns 0, or KILN_ERR_FORMAT with a message
 * (unknown op, wrong arity, no builtin overload for the types). */
int ir_kind_resolve(const char *name, ir_value *const *inputs, int n_inputs,
                    int *op, int *prim);
/* The prims.def entry named name (first one), or -1. */
int ir_prim_find(const char *name);

/* The public graph handle (include/kiln.h): one owned IR graph. Made and
 * freed by the graph text API (src/ir/api.c); exec's kiln_function reads g. */
struct kiln_graph {
  ir_graph *g;
};

#endif
