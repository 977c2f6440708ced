/* src/nn/import.c: imported PyTorch modules (kiln_model): a module graph
 * (tools/kiln-export's NAME.ir) bound against a weights file (NAME.safetensors)
 * into a kiln_function per training flag, with the state_dict's tensors as
 * named parameters (a kiln_nn_module, so optimizers and checkpoints work)
 * and buffers. Checks the weights against the graph's manifest (Note
 * [Export manifest]).
 *
 * Note [Model modes]: the three modes run the same bound graph. jit gives
 * it to the profiling executor (profile, specialize, differentiate, fuse);
 * eager and lazy build the function with bailout depth 0, which interprets
 * the graph node by node through the op table: on CPU tensors that is
 * eager execution with autograd recording each op, on LAZY tensors
 * (kiln_model_to_lazy, lazy inputs) it records the step's IR for
 * kiln_mark_step. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "bind.h"
#include "nn.h"

/* Note [Export manifest]: kiln-export appends comment lines to NAME.ir,
 *   # kiln: class __torch__.mlp.MLP
 *   # kiln: tensor fc1.weight Float [256, 784] parameter
 * one per state_dict entry. Any IR reader skips them; kiln checks a
 * weights file against them (every entry present, of that shape, of a
 * dtype that loads as that dtype), so a wrong file is an error naming the
 * path and both shapes rather than a failing op. A graph without a
 * manifest (printed by hand) takes the weights file as it is. */
typedef struct manifest_entry {
  char path[256];
  int dtype;            /* kiln dtype, or -1 (unknown name) */
  char dtype_name[16];
  int ndim;
  int64_t shape[KILN_MAX_DIMS];
  bool param;
} manifest_entry;

struct kiln_model {
  char *graph_name, *weights_name;
  char *text;                 /* the module graph text */
  size_t len;
  kiln_model_opts opts;
  kiln_function_options fopts;
  kiln_safetensors *st;       /* the weights file (metadata read from it) */
  manifest_entry *man;
  int n_man;
  char klass[256];            /* the manifest's class, "" if none */
  /* named tensors, state_dict order: parameters live in module (index
   * param_ix), buffers here */
  int n;
  char **names;
  bool *is_param;
  int *param_ix;
  int *buffer_ix;             /* [n]: index into module's buffers (-1 for parameters) */
  kiln_nn_module *module;
  /* per training flag (0, 1): the bound graph and its function */
  nn_bound bound[2];
  bool have[2];
  kiln_graph *graph[2];
  kiln_function *fn[2];
  int *input_ix[2];           /* per bound tensor input: index into names */
  int *set_ix[2];             /* per written-back path: index into names */
  /* example inputs (kiln.example) */
  int n_examples;
  int ex_ndim[8];
  int64_t ex_shape[8][KILN_MAX_DIMS];
  kiln_dtype ex_dtype[8];
};

void kiln_model_opts_default(kiln_model_opts *o) {
  memset(o, 0, sizeof *o);
  o->mode = KILN_NN_JIT;
  o->training = -1;
}

static char *read_text(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    core_error(KILN_ERR_IO, "model: cannot open '%s': %s", path, strerror(errno));
    return NULL;
  }
  core_strbuf b = {0};
  char buf[65536];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, f)) > 0) core_strbuf_append(&b, buf, k);
  bool err = ferror(f);
  fclose(f);
  if (err || b.oom || !b.p) {
    core_free(b.p);
    core_error(err ? KILN_ERR_IO : b.oom ? KILN_ERR_NOMEM : KILN_ERR_FORMAT, "model: '%s': %s",
               path, err ? "read error" : b.oom ? "out of memory" : "empty file");
    return NULL;
  }
  *len = b.n;
  return b.p;
}

static int dtype_by_torch_name(const char *s) {
  static const struct { const char *n; int dt; } names[] = {
      {"Float", KILN_DTYPE_F32}, {"Half", KILN_DTYPE_F32}, {"BFloat16", KILN_DTYPE_F32},
      {"Double", KILN_DTYPE_F64}, {"Long", KILN_DTYPE_I64}, {"Bool", KILN_DTYPE_BOOL}};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (strcmp(s, names[i].n) == 0) return names[i].dt;
  return -1;
}

static void shape_text(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* Reads the `# kiln:` lines of the graph text. */
static int read_manifest(kiln_model *m) {
  const char *p = m->text, *e = m->text + m->len;
  while (p < e) {
    const char *le = memchr(p, '\n', (size_t)(e - p));
    if (!le) le = e;
    char line[1024];
    size_t n = (size_t)(le - p) < sizeof line - 1 ? (size_t)(le - p) : sizeof line - 1;
    memcpy(line, p, n);
    line[n] = 0;
    p = le < e ? le + 1 : e;
    if (strncmp(line, "# kiln: ", 8) != 0) continue;
    if (strncmp(line + 8, "class ", 6) == 0) {
      snprintf(m->klass, sizeof m->klass, "%.255s", line + 14);
      continue;
    }
    if (strncmp(line + 8, "tensor ", 7) != 0) continue;
    manifest_entry *me = core_realloc(m->man, (size_t)(m->n_man + 1) * sizeof *me);
    if (!me) return KILN_ERR_NOMEM;
    m->man = me;
    manifest_entry *x = &me[m->n_man];
    memset(x, 0, sizeof *x);
    char kind[16] = "";
    const char *lb = strchr(line, '['), *rb = lb ? strchr(lb, ']') : NULL;
    if (!lb || !rb || sscanf(line + 15, "%255s %15s", x->path, x->dtype_name) != 2 ||
        sscanf(rb + 1, " %15s", kind) != 1)
      return core_error(KILN_ERR_FORMAT, "model: '%s': bad manifest line '%s'", m->graph_name,
                        line);
    x->dtype = dtype_by_torch_name(x->dtype_name);
    x->param = strcmp(kind, "parameter") == 0;
    for (const char *s = lb + 1; s < rb;) {
      char *end;
      long long v = strtoll(s, &end, 10);
      if (end == s) break;
      if (x->ndim == KILN_MAX_DIMS)
        return core_error(KILN_ERR_FORMAT, "model: '%s': %s has more than %d dims",
                          m->graph_name, x->path, KILN_MAX_DIMS);
      x->shape[x->ndim++] = v;
      s = end;
      while (s < rb && (*s == ',' || *s == ' ')) s++;
    }
    m->n_man++;
  }
  return 0;
}

static int add_tensor(kiln_model *m, const char *name, kiln_tensor *t, bool param) {
  int i = m->n;
  char **names = core_realloc(m->names, (size_t)(i + 1) * sizeof *names);
  if (names) m->names = names;
  bool *ip = core_realloc(m->is_param, (size_t)(i + 1) * sizeof *ip);
  if (ip) m->is_param = ip;
  int *px = core_realloc(m->param_ix, (size_t)(i + 1) * sizeof *px);
  if (px) m->param_ix = px;
  int *bs = core_realloc(m->buffer_ix, (size_t)(i + 1) * sizeof *bs);
  if (bs) m->buffer_ix = bs;
  if (!names || !ip || !px || !bs || !(names[i] = core_strdup(name))) return KILN_ERR_NOMEM;
  m->n++;
  ip[i] = param && core_dtype_is_floating(t->dtype);
  px[i] = -1;
  bs[i] = -1;
  int rc = 0;
  kiln_scope_begin(); /* the clones' references: the module's, or kept */
  kiln_tensor *c = kiln_clone(t); /* the file's tensors stay the file's */
  if (!c) rc = KILN_ERR_NOMEM;
  else if (ip[i]) rc = kiln_nn_module_add_param(m->module, name, c);
  else if ((rc = nn_module_add_buffer(m->module, name, c)) >= 0) bs[i] = rc;
  if (rc >= 0 && ip[i]) px[i] = m->module->n_params - 1;
  if (rc > 0) rc = 0;
  kiln_scope_end();
  return rc;
}

static int find_name(const kiln_model *m, const char *name) {
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->names[i], name) == 0) return i;
  return -1;
}

/* The parameters named by kiln.parameters (a JSON list), or NULL. */
static json_t *param_list(const kiln_model *m) {
  const char *s = kiln_safetensors_metadata(m->st, "kiln.parameters");
  json_t *j = s ? json_loads(s, 0, NULL) : NULL;
  if (j && !json_is_array(j)) {
    json_decref(j);
    j = NULL;
  }
  return j;
}

static bool listed(json_t *list, const char *name) {
  size_t i;
  json_t *v;
  json_array_foreach(list, i, v) if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
      return true;
  return false;
}

/* Checks the weights file against the manifest, then takes its tensors. */
static int load_weights(kiln_model *m) {
  const char *wn = m->weights_name;
  const char *wclass = kiln_safetensors_metadata(m->st, "kiln.class");
  if (m->klass[0] && wclass && strcmp(m->klass, wclass) != 0)
    return core_error(KILN_ERR_INVALID,
                      "model: weights '%s' are for %s, but the graph '%s' is %s", wn, wclass,
                      m->graph_name, m->klass);
  char a[128], b[128];
  for (int i = 0; i < m->n_man; i++) {
    const manifest_entry *x = &m->man[i];
    kiln_tensor *t = kiln_safetensors_find(m->st, x->path);
    shape_text(x->ndim, x->shape, a, sizeof a);
    if (!t)
      return core_error(KILN_ERR_INVALID,
                        "model: weights '%s' have no entry '%s' (the graph '%s' expects %s %s)",
                        wn, x->path, m->graph_name, x->dtype_name, a);
    shape_text(t->ndim, t->shape, b, sizeof b);
    bool same = t->ndim == x->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == x->shape[d];
    if (!same)
      return core_error(KILN_ERR_INVALID,
                        "model: weights '%s': '%s' has shape %s, the graph '%s' expects %s", wn,
                        x->path, b, m->graph_name, a);
    if (x->dtype >= 0 && (int)t->dtype != x->dtype)
      return core_error(KILN_ERR_INVALID,
                        "model: weights '%s': '%s' is %s, the graph '%s' expects %s", wn, x->path,
                        kiln_dtype_name(t->dtype), m->graph_name, x->dtype_name);
  }
  json_t *plist = param_list(m);
  int rc = 0;
  if (m->n_man) {
    for (int i = 0; i < m->n_man && rc == 0; i++)
      rc = add_tensor(m, m->man[i].path, kiln_safetensors_find(m->st, m->man[i].path),
                      m->man[i].param);
    /* tensors the graph reads beyond the state_dict (non-persistent buffers) */
    for (int i = 0; i < kiln_safetensors_n_tensors(m->st) && rc == 0; i++)
      if (find_name(m, kiln_safetensors_name(m->st, i)) < 0)
        rc = add_tensor(m, kiln_safetensors_name(m->st, i), kiln_safetensors_tensor(m->st, i),
                        false);
  } else {
    for (int i = 0; i < kiln_safetensors_n_tensors(m->st) && rc == 0; i++) {
      const char *name = kiln_safetensors_name(m->st, i);
      kiln_tensor *t = kiln_safetensors_tensor(m->st, i);
      rc = add_tensor(m, name, t, plist ? listed(plist, name) : core_dtype_is_floating(t->dtype));
    }
  }
  json_decref(plist);
  return rc;
}

static void read_examples(kiln_model *m) {
  const char *s = kiln_safetensors_metadata(m->st, "kiln.example");
  json_t *j = s ? json_loads(s, 0, NULL) : NULL;
  size_t i;
  json_t *v;
  if (j && json_is_array(j)) {
    json_array_foreach(j, i, v) {
      if (m->n_examples == 8) break;
      json_t *sh = json_object_get(v, "shape"), *dt = json_object_get(v, "dtype");
      int k = m->n_examples;
      if (!json_is_array(sh) || json_array_size(sh) > KILN_MAX_DIMS) break;
      m->ex_ndim[k] = (int)json_array_size(sh);
      for (int d = 0; d < m->ex_ndim[k]; d++)
        m->ex_shape[k][d] = json_integer_value(json_array_get(sh, (size_t)d));
      const char *dn = json_is_string(dt) ? json_string_value(dt) : "float";
      m->ex_dtype[k] = strcmp(dn, "long") == 0   ? KILN_DTYPE_I64
                       : strcmp(dn, "bool") == 0 ? KILN_DTYPE_BOOL
                                                 : KILN_DTYPE_F32;
      m->n_examples++;
    }
  }
  json_decref(j);
}

/* ---- binding ---------------------------------------------------------------- */

typedef struct resolve_ctx {
  kiln_model *m;
  bool training;
} resolve_ctx;

static bool is_tensor_type(const char *t) {
  if (strncmp(t, "Tensor", 6) == 0) return t[6] == 0 || t[6] == '?' || t[6] == '(';
  return dtype_by_torch_name(t) >= 0 || strncmp(t, "Float(", 6) == 0 ||
         strncmp(t, "Long(", 5) == 0 || strncmp(t, "Double(", 7) == 0 ||
         strncmp(t, "Bool(", 5) == 0;
}

static bool simple_type(const char *t) {
  static const char *ok[] = {"int",    "float",   "bool",   "str",    "int[]",  "float[]",
                             "bool[]", "str[]",   "int?",   "float?", "bool?",  "str?",
                             "int[]?", "float[]?", "NoneType", "Tensor?", "Tensor[]"};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
    if (strcmp(t, ok[i]) == 0) return true;
  return false;
}

static int const_of(const char *path, const char *decl, json_t *v, nn_bind_attr *out) {
  out->kind = NN_BIND_CONST;
  char base[64];
  snprintf(base, sizeof base, "%s", decl);
  size_t bl = strlen(base);
  if (bl && base[bl - 1] == '?') base[--bl] = 0;
  if (json_is_null(v)) {
    snprintf(out->type, sizeof out->type, "NoneType");
    snprintf(out->text, sizeof out->text, "prim::Constant()");
    return 0;
  }
  if (json_is_boolean(v) && strcmp(base, "bool") == 0) {
    snprintf(out->type, sizeof out->type, "bool");
    snprintf(out->text, sizeof out->text, "prim::Constant[value=%d]()", json_is_true(v));
    return 0;
  }
  if (json_is_integer(v) && strcmp(base, "int") == 0) {
    snprintf(out->type, sizeof out->type, "int");
    snprintf(out->text, sizeof out->text, "prim::Constant[value=%lld]()",
             (long long)json_integer_value(v));
    return 0;
  }
  if (json_is_number(v) && strcmp(base, "float") == 0) {
    char num[64];
    snprintf(num, sizeof num, "%.17g", json_number_value(v));
    if (!strpbrk(num, ".eninf")) strcat(num, ".");
    snprintf(out->type, sizeof out->type, "float");
    snprintf(out->text, sizeof out->text, "prim::Constant[value=%s]()", num);
    return 0;
  }
  if (json_is_string(v) && strcmp(base, "str") == 0) {
    core_strbuf b = {0};
    core_strbuf_append(&b, "prim::Constant[value=\"", 22);
    for (const char *s = json_string_value(v); *s; s++) {
      if (*s == '"' || *s == '\\') core_strbuf_append(&b, "\\", 1);
      core_strbuf_append(&b, s, 1);
    }
    core_strbuf_append(&b, "\"]()", 4);
    int ok = !b.oom && b.n < sizeof out->text;
    if (ok) memcpy(out->text, b.p, b.n + 1);
    core_free(b.p);
    if (!ok)
      return core_error(KILN_ERR_UNSUPPORTED, "model: the string attribute %s is too long", path);
    snprintf(out->type, sizeof out->type, "str");
    return 0;
  }
  if (json_is_array(v) && bl > 2 && strcmp(base + bl - 2, "[]") == 0) {
    char elem[16];
    snprintf(elem, sizeof elem, "%.*s", (int)(bl - 2), base);
    core_strbuf b = {0};
    core_strbuf_append(&b, "prim::Constant[value=[", 22);
    size_t i;
    json_t *x;
    bool good = strcmp(elem, "int") == 0 || strcmp(elem, "float") == 0 ||
                strcmp(elem, "bool") == 0;
    json_array_foreach(v, i, x) {
      if (i) core_strbuf_append(&b, ", ", 2);
      if (strcmp(elem, "int") == 0 && json_is_integer(x))
        core_strbuf_printf(&b, "%lld", (long long)json_integer_value(x));
      else if (strcmp(elem, "float") == 0 && json_is_number(x))
        core_strbuf_printf(&b, "%.17g%s", json_number_value(x), json_is_integer(x) ? "." : "");
      else if (strcmp(elem, "bool") == 0 && json_is_boolean(x))
        core_strbuf_printf(&b, "%d", json_is_true(x));
      else
        good = false;
    }
    core_strbuf_append(&b, "]]()", 4);
    int ok = good && !b.oom && b.n < sizeof out->text;
    if (ok) memcpy(out->text, b.p, b.n + 1);
    core_free(b.p);
    if (!ok)
      return core_error(KILN_ERR_UNSUPPORTED,
                        "model: the attribute %s (%s) is not a list kiln can bind (int[], "
                        "float[], bool[])",
                        path, decl);
    snprintf(out->type, sizeof out->type, "%s[]", elem);
    return 0;
  }
  char *txt = json_dumps(v, JSON_ENCODE_ANY);
  core_error(KILN_ERR_INVALID, "model: the attribute %s is declared %s but its value is %s",
             path, decl, txt ? txt : "?");
  free(txt);
  return KILN_ERR_INVALID;
}

static int resolve(void *ud, const char *path, const char *decl, nn_bind_attr *out) {
  resolve_ctx *c = ud;
  kiln_model *m = c->m;
  int i = find_name(m, path);
  const char *leaf = strrchr(path, '.');
  leaf = leaf ? leaf + 1 : path;
  if (strcmp(leaf, "training") == 0 && strcmp(decl, "bool") == 0) {
    out->kind = NN_BIND_CONST;
    snprintf(out->type, sizeof out->type, "bool");
    snprintf(out->text, sizeof out->text, "prim::Constant[value=%d]()", c->training);
    return 0;
  }
  if (is_tensor_type(decl) && i >= 0) {
    out->kind = NN_BIND_TENSOR;
    return 0;
  }
  if (!is_tensor_type(decl) && !simple_type(decl))
    return core_error(KILN_ERR_UNSUPPORTED,
                      "model: '%s': prim::GetAttr of %s has type %s, which kiln does not bind "
                      "(tensors, int, float, bool, str, lists of them, None)",
                      m->graph_name, path, decl);
  char key[300];
  snprintf(key, sizeof key, "attr:%s", path);
  const char *s = kiln_safetensors_metadata(m->st, key);
  if (!s) {
    if (is_tensor_type(decl))
      return core_error(KILN_ERR_INVALID,
                        "model: weights '%s' have no entry '%s' (the graph '%s' reads it as %s)",
                        m->weights_name, path, m->graph_name, decl);
    return core_error(KILN_ERR_INVALID,
                      "model: weights '%s' have no metadata '%s' (the graph '%s' reads %s as %s)",
                      m->weights_name, key, m->graph_name, path, decl);
  }
  json_error_t jerr;
  json_t *v = json_loads(s, JSON_DECODE_ANY, &jerr);
  if (!v)
    return core_error(KILN_ERR_FORMAT, "model: weights '%s': metadata '%s' is not JSON: %s",
                      m->weights_name, key, jerr.text);
  json_t *tl = json_is_object(v) ? json_object_get(v, "tensors") : NULL;
  if (strcmp(decl, "Tensor[]") == 0 && json_is_array(tl)) {
    size_t k;
    json_t *x;
    int rc = 0;
    out->kind = NN_BIND_TENSOR_LIST;
    json_array_foreach(tl, k, x) {
      const char *p = json_is_string(x) ? json_string_value(x) : "";
      if (k >= NN_BIND_MAX_LIST || strlen(p) >= sizeof out->list[0] || find_name(m, p) < 0) {
        rc = core_error(KILN_ERR_INVALID,
                        "model: weights '%s': %s lists '%s', which is not one of its tensors",
                        m->weights_name, path, p);
        break;
      }
      snprintf(out->list[out->n_list++], sizeof out->list[0], "%s", p);
    }
    json_decref(v);
    return rc;
  }
  if (is_tensor_type(decl) && !json_is_null(v)) {
    json_decref(v);
    return core_error(KILN_ERR_INVALID,
                      "model: weights '%s' have no entry '%s' (the graph '%s' reads it as %s)",
                      m->weights_name, path, m->graph_name, decl);
  }
  int rc = const_of(path, decl, v, out);
  json_decref(v);
  return rc;
}

/* Binds the graph for training flag tr (once). */
static int ensure_bound(kiln_model *m, bool tr) {
  int k = tr;
  if (m->have[k]) return 0;
  resolve_ctx c = {m, tr};
  nn_bound *b = &m->bound[k];
  int rc = nn_bind_module_graph(m->text, m->len, m->graph_name, resolve, &c, b);
  if (rc < 0) return rc;
  const char *wclass = kiln_safetensors_metadata(m->st, "kiln.class");
  if (!m->klass[0] && wclass && b->self_class && strcmp(wclass, b->self_class) != 0)
    return core_error(KILN_ERR_INVALID, "model: weights '%s' are for %s, but the graph '%s' is %s",
                      m->weights_name, wclass, m->graph_name, b->self_class);
  m->input_ix[k] = core_calloc((size_t)(b->n_tensors + 1), sizeof(int));
  m->set_ix[k] = core_calloc((size_t)(b->n_sets + 1), sizeof(int));
  if (!m->input_ix[k] || !m->set_ix[k]) return KILN_ERR_NOMEM;
  for (int i = 0; i < b->n_tensors; i++) m->input_ix[k][i] = find_name(m, b->tensor_paths[i]);
  for (int i = 0; i < b->n_sets; i++) {
    m->set_ix[k][i] = find_name(m, b->set_paths[i]);
    if (m->set_ix[k][i] < 0)
      return core_error(KILN_ERR_INVALID, "model: the graph sets %s, which is not a tensor",
                        b->set_paths[i]);
  }
  m->graph[k] = kiln_graph_parse(b->text, strlen(b->text));
  if (!m->graph[k]) {
    core_error_prefix("model: the graph '%s' (bound):", m->graph_name);
    return KILN_ERR_UNSUPPORTED;
  }
  m->fn[k] = kiln_function_new_ex(m->graph[k], &m->fopts);
  if (!m->fn[k]) {
    core_error_prefix("model: the graph '%s':", m->graph_name);
    return KILN_ERR_UNSUPPORTED;
  }
  m->have[k] = true;
  return 0;
}

/* ---- public API ----------------------------------------------------------- */

kiln_model *kiln_model_load(const char *graph_path, const char *weights_path,
                            const kiln_model_opts *o) {
  if (!graph_path || !weights_path) {
    core_error(KILN_ERR_INVALID, "model_load: NULL graph or weights path");
    return NULL;
  }
  kiln_model *m = core_calloc(1, sizeof *m);
  if (!m) return NULL;
  if (o) m->opts = *o;
  else kiln_model_opts_default(&m->opts);
  if ((unsigned)m->opts.mode > KILN_NN_LAZY) {
    core_error(KILN_ERR_INVALID, "model_load: unknown mode %d", (int)m->opts.mode);
    goto fail;
  }
  if (m->opts.jit) m->fopts = *m->opts.jit;
  else kiln_function_options_default(&m->fopts);
  /* eager and lazy interpret the graph node by node (Note [Model modes]) */
  if (m->opts.mode != KILN_NN_JIT) m->fopts.bailout_depth = 0;
  m->graph_name = core_strdup(graph_path);
  m->weights_name = core_strdup(weights_path);
  m->module = kiln_nn_module_new();
  if (!m->graph_name || !m->weights_name || !m->module) goto fail;
  m->module->arch = "graph";
  if (!(m->text = read_text(graph_path, &m->len))) goto fail;
  if (read_manifest(m) < 0) goto fail;
  if (!(m->st = kiln_safetensors_load(weights_path))) goto fail;
  if (load_weights(m) < 0) goto fail;
  read_examples(m);
  bool tr = true;
  if (m->opts.training >= 0) {
    tr = m->opts.training;
  } else {
    const char *s = kiln_safetensors_metadata(m->st, "attr:training");
    if (s) tr = strcmp(s, "true") == 0;
  }
  m->module->training = tr;
  if (ensure_bound(m, tr) < 0) goto fail;
  if (m->opts.mode == KILN_NN_LAZY && kiln_model_to_lazy(m) < 0) goto fail;
  return m;
fail:
  kiln_model_free(m);
  return NULL;
}

void kiln_model_free(kiln_model *m) {
  if (!m) return;
  for (int k = 0; k < 2; k++) {
    kiln_function_free(m->fn[k]);
    kiln_graph_free(m->graph[k]);
    nn_bound_free(&m->bound[k]);
    core_free(m->input_ix[k]);
    core_free(m->set_ix[k]);
  }
  for (int i = 0; i < m->n; i++) core_free(m->names[i]);
  core_free(m->names);
  core_free(m->is_param);
  core_free(m->param_ix);
  core_free(m->buffer_ix);
  kiln_nn_module_free(m->module);
  kiln_safetensors_free(m->st);
  core_free(m->man);
  core_free(m->text);
  core_free(m->graph_name);
  core_free(m->weights_name);
  core_free(m);
}

int kiln_model_n_tensors(const kiln_model *m) { return m ? m->n : 0; }

const char *kiln_model_tensor_name(const kiln_model *m, int i) {
  return m && i >= 0 && i < m->n ? m->names[i] : NULL;
}

bool kiln_model_tensor_is_param(const kiln_model *m, int i) {
  return m && i >= 0 && i < m->n && m->is_param[i];
}

kiln_tensor *kiln_model_tensor(const kiln_model *m, int i) {
  if (!m || i < 0 || i >= m->n) return NULL;
  return m->is_param[i] ? m->module->params[m->param_ix[i]] : m->module->buffers[m->buffer_ix[i]];
}

kiln_tensor *kiln_model_find(const kiln_model *m, const char *name) {
  return m && name ? kiln_model_tensor(m, find_name(m, name)) : NULL;
}

kiln_status kiln_model_set_tensor(kiln_model *m, const char *name, kiln_tensor *value) {
  kiln_tensor *t = kiln_model_find(m, name);
  if (!t || !value)
    return core_error(KILN_ERR_INVALID, "model_set_tensor: no tensor '%s'", name ? name : "");
  char a[128], b[128];
  shape_text(t->ndim, t->shape, a, sizeof a);
  shape_text(value->ndim, value->shape, b, sizeof b);
  if (strcmp(a, b) != 0)
    return core_error(KILN_ERR_INVALID, "model_set_tensor: '%s' is %s, the value is %s", name, a,
                      b);
  bool was = kiln_set_grad_enabled(false);
  int rc = kiln_copy_(t, value);
  kiln_set_grad_enabled(was);
  return rc;
}

kiln_nn_module *kiln_model_module(const kiln_model *m) { return m ? m->module : NULL; }

kiln_function *kiln_model_function(kiln_model *m) {
  if (!m) return NULL;
  bool tr = m->module->training;
  return ensure_bound(m, tr) < 0 ? NULL : m->fn[tr];
}

int kiln_model_n_inputs(const kiln_model *m) {
  return m && m->have[m->module->training] ? m->bound[m->module->training].n_inputs
         : m && m->have[!m->module->training] ? m->bound[!m->module->training].n_inputs
                                              : -1;
}

int kiln_model_input_shape(const kiln_model *m, int i, int64_t *shape, kiln_dtype *dtype) {
  if (!m || i < 0 || i >= m->n_examples) return -1;
  if (shape) memcpy(shape, m->ex_shape[i], (size_t)m->ex_ndim[i] * sizeof *shape);
  if (dtype) *dtype = m->ex_dtype[i];
  return m->ex_ndim[i];
}

kiln_status kiln_model_set_training(kiln_model *m, bool training) {
  if (!m) return core_error(KILN_ERR_INVALID, "model_set_training: NULL model");
  m->module->training = training;
  return ensure_bound(m, training);
}

bool kiln_model_is_training(const kiln_model *m) { return m && m->module->training; }

int kiln_model_call(kiln_model *m, const kiln_value *inputs, int n_inputs, kiln_value *outputs,
                    int max_outputs) {
  if (!m) return core_error(KILN_ERR_INVALID, "model_call: NULL model");
  bool tr = m->module->training;
  int rc = ensure_bound(m, tr);
  if (rc < 0) return rc;
  const nn_bound *b = &m->bound[tr];
  if (n_inputs != b->n_inputs)
    return core_error(KILN_ERR_INVALID, "model_call: '%s' takes %d inputs, got %d",
                      m->graph_name, b->n_inputs, n_inputs);
  int n_all = n_inputs + b->n_tensors, max_all = max_outputs + b->n_sets;
  kiln_value *in = core_calloc((size_t)n_all + 1, sizeof *in);
  kiln_value *out = core_calloc((size_t)max_all + 1, sizeof *out);
  if (!in || !out) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < n_inputs; i++) in[i] = inputs[i];
  for (int i = 0; i < b->n_tensors; i++)
    in[n_inputs + i] =
        (kiln_value){.kind = KILN_VALUE_TENSOR, .t = kiln_model_tensor(m, m->input_ix[tr][i])};
  rc = kiln_function_call(m->fn[tr], in, n_all, out, max_all);
  if (rc < 0) goto done;
  int n_user = rc - b->n_sets;
  for (int i = 0; i < b->n_sets && rc >= 0; i++) {
    kiln_value *v = &out[n_user + i];
    int ix = m->set_ix[tr][i];
    if (v->kind != KILN_VALUE_TENSOR) {
      rc = core_error(KILN_ERR_INVALID, "model_call: the graph set %s to a non-tensor",
                      m->names[ix]);
      break;
    }
    kiln_tensor *dst = kiln_model_tensor(m, ix);
    if (dst != v->t) {
      bool was = kiln_set_grad_enabled(false);
      int r = kiln_copy_(dst, v->t);
      kiln_set_grad_enabled(was);
      if (r < 0) rc = r;
    }
  }
  if (rc >= 0) {
    memcpy(outputs, out, (size_t)n_user * sizeof *out);
    rc = n_user;
  }
done:
  core_free(in);
  core_free(out);
  return rc;
}

kiln_status kiln_model_to_lazy(kiln_model *m) {
  if (!m) return core_error(KILN_ERR_INVALID, "model_to_lazy: NULL model");
  return kiln_nn_module_to_lazy(m->module); /* parameters and buffers */
}

kiln_status kiln_model_save(const kiln_model *m, const char *path) {
  if (!m || !path) return core_error(KILN_ERR_INVALID, "model_save: NULL model or path");
  int n_meta = nn_st_n_meta(m->st);
  const char **names = core_calloc((size_t)m->n + 1, sizeof *names);
  kiln_tensor **ts = core_calloc((size_t)m->n + 1, sizeof *ts);
  const char **keys = core_calloc((size_t)n_meta + 1, sizeof *keys);
  const char **vals = core_calloc((size_t)n_meta + 1, sizeof *vals);
  int rc = KILN_ERR_NOMEM;
  if (names && ts && keys && vals) {
    for (int i = 0; i < m->n; i++) {
      names[i] = m->names[i];
      ts[i] = kiln_model_tensor(m, i);
    }
    for (int i = 0; i < n_meta; i++) {
      keys[i] = nn_st_meta_key(m->st, i);
      vals[i] = nn_st_meta_value(m->st, i);
    }
    rc = kiln_safetensors_save(path, m->n, names, ts, n_meta, keys, vals);
  }
  core_free(names);
  core_free(ts);
  core_free(keys);
  core_free(vals);
  return rc;
}
