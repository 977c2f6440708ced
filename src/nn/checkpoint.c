/* src/nn/checkpoint.c: training checkpoints: a module's parameters, an
 * optimizer's state and the training position (step, epoch, batch, RNG)
 * in one safetensors file, with a CRC-32 the loader verifies, loaded only
 * after everything was checked against the model. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"

#define CKPT_FORMAT "kiln-checkpoint-1"
#define OPTIM_PREFIX "optim."

enum { N_META = 9 };

/* Note [Checkpoint CRC]: crc32 covers the data section (every tensor's
 * bytes, in file order) and then every metadata pair but crc32 itself,
 * sorted by key, as "key\0value\0". A flipped byte in the data or in the
 * metadata (step, rng, ...) is caught; one in a tensor's header entry is
 * caught by the format's own checks or by the comparison with the model. */
static uint32_t meta_crc(uint32_t crc, int n, const char *const *keys,
                         const char *const *values) {
  for (int i = 0; i < n; i++) {
    if (strcmp(keys[i], "crc32") == 0) continue;
    crc = nn_crc32(crc, keys[i], strlen(keys[i]) + 1);
    crc = nn_crc32(crc, values[i], strlen(values[i]) + 1);
  }
  return crc;
}

/* Saved tensor i of m and o: parameters, buffers, optimizer state. Its
 * kiln name into *kname, and into *prefix what goes before its name in
 * the file ("" or OPTIM_PREFIX). */
static kiln_tensor *slot(const kiln_nn_module *m, const kiln_optim *o, int i, const char **kname,
                         const char **prefix) {
  *prefix = "";
  if (i < m->n_params) {
    *kname = m->names[i];
    return m->params[i];
  }
  if ((i -= m->n_params) < m->n_buffers) {
    *kname = m->buffer_names[i];
    return m->buffers[i];
  }
  i -= m->n_buffers;
  *prefix = OPTIM_PREFIX;
  *kname = kiln_optim_state_name(o, i);
  return kiln_optim_state(o, i);
}

kiln_status kiln_checkpoint_save(const char *path, const kiln_nn_module *m, const kiln_optim *o,
                                 const kiln_checkpoint_info *info) {
  if (!path || !m || !info)
    return core_error(KILN_ERR_INVALID, "checkpoint_save: NULL path, module or info");
  int n_st = kiln_optim_n_state(o), nb = m->n_buffers, n = m->n_params + nb + n_st, rc = 0;
  const char **names = core_calloc((size_t)(n ? n : 1), sizeof *names);
  char **owned = core_calloc((size_t)(n ? n : 1), sizeof *owned);
  kiln_tensor **ts = core_calloc((size_t)(n ? n : 1), sizeof *ts);
  kiln_scope_begin();
  if (!names || !owned || !ts) {
    rc = KILN_ERR_NOMEM;
    goto done;
  }
  uint32_t crc = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    /* PyTorch's names (Note [PyTorch names]), optimizer state under "optim." */
    kiln_tensor *t;
    const char *kn, *prefix;
    t = slot(m, o, i, &kn, &prefix);
    char tn[512];
    nn_torch_name(m->arch, kn, tn, sizeof tn);
    size_t len = strlen(prefix) + strlen(tn) + 1;
    owned[i] = core_alloc(len);
    if (!owned[i]) {
      rc = KILN_ERR_NOMEM;
      break;
    }
    snprintf(owned[i], len, "%s%s", prefix, tn);
    names[i] = owned[i];
    /* CPU and contiguous now, so that the CRC sees the bytes written */
    kiln_tensor *c = kiln_to_cpu(t);
    if (c && !kiln_tensor_is_contiguous(c)) c = kiln_contiguous(c);
    if (!c) {
      core_error_prefix("checkpoint_save: '%s': '%s':", path, names[i]);
      rc = KILN_ERR_STATE;
      break;
    }
    ts[i] = c;
    crc = nn_crc32(crc, core_data(c), (size_t)kiln_tensor_numel(c) * kiln_dtype_size(c->dtype));
  }
  if (rc < 0) goto done;
  char v_lr[40], v_step[24], v_epoch[24], v_batch[24], v_rng[80], v_crc[16];
  snprintf(v_lr, sizeof v_lr, "%.17g", info->lr);
  snprintf(v_step, sizeof v_step, "%" PRId64, info->step);
  snprintf(v_epoch, sizeof v_epoch, "%" PRId64, info->epoch);
  snprintf(v_batch, sizeof v_batch, "%" PRId64, info->batch);
  snprintf(v_rng, sizeof v_rng, "%016" PRIx64 ",%016" PRIx64 ",%016" PRIx64 ",%016" PRIx64,
           info->rng[0], info->rng[1], info->rng[2], info->rng[3]);
  const char *model = info->model[0] ? info->model : m->arch ? m->arch : "";
  /* sorted by key (Note [Checkpoint CRC]) */
  const char *keys[N_META] = {"batch", "crc32", "epoch", "format", "lr",
                              "model", "optimizer", "rng", "step"};
  const char *values[N_META] = {v_batch, v_crc, v_epoch, CKPT_FORMAT, v_lr,
                                model, o ? kiln_optim_name(o) : "", v_rng, v_step};
  crc = meta_crc(crc, N_META, keys, values);
  snprintf(v_crc, sizeof v_crc, "%08" PRIx32, crc);
  rc = kiln_safetensors_save(path, n, names, ts, N_META, keys, values);
  if (rc < 0) core_error_prefix("checkpoint_save:");
done:
  kiln_scope_end();
  for (int i = 0; owned && i < n; i++) core_free(owned[i]);
  core_free(owned);
  core_free(names);
  core_free(ts);
  return rc;
}

static int parse_i64(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = s && *s ? strtoll(s, &end, 10) : 0;
  /* below 2^62: a counter a resumed run keeps incrementing must not wrap */
  if (!s || !*s || *end || errno || v < 0 || v >= (1LL << 62)) return -1;
  *out = v;
  return 0;
}

static _Thread_local const kiln_safetensors *sort_st;
static int cmp_name(const void *a, const void *b) {
  return strcmp(kiln_safetensors_name(sort_st, *(const int *)a),
                kiln_safetensors_name(sort_st, *(const int *)b));
}

/* The index in the file of the tensor called name (order: the sorted
 * indices), or -1. */
static int find_name(const kiln_safetensors *st, const int *order, int n, const char *name) {
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2, c = strcmp(kiln_safetensors_name(st, order[mid]), name);
    if (c == 0) return order[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

/* The tensor of st named as PyTorch names the module's tensor kiln_name,
 * or (checkpoints before PyTorch names) as kiln names it; its index in
 * *k. NULL if neither is there. order: st's indices sorted by name (a
 * binary search), or NULL (a scan; for a few lookups). */
static kiln_tensor *find_tensor(const kiln_safetensors *st, const int *order, int n_file,
                                const char *arch, const char *prefix, const char *kiln_name,
                                int *k) {
  char tn[512], want[600];
  nn_torch_name(arch, kiln_name, tn, sizeof tn);
  for (int pass = 0; pass < 2; pass++) {
    snprintf(want, sizeof want, "%s%s", prefix, pass == 0 ? tn : kiln_name);
    int i = -1;
    if (order) i = find_name(st, order, n_file, want);
    else
      for (int j = 0; j < kiln_safetensors_n_tensors(st) && i < 0; j++)
        if (strcmp(kiln_safetensors_name(st, j), want) == 0) i = j;
    if (i >= 0) {
      *k = i;
      return kiln_safetensors_tensor(st, i);
    }
  }
  return NULL;
}

/* A plain state_dict (no kiln metadata): the built-in model whose every
 * parameter it holds with the model's dtype and shape, and nothing else
 * outside "optim.", into *found (NULL if none). The models' parameters come
 * from a table (nn_model_params): building the three models to compare
 * initialized 1.5 MB of random weights per read, work unrelated to the
 * file's size (seconds a read under the checkpoint fuzzer; issue #20).
 * < 0 when out of memory. */
static int guess_arch(const kiln_safetensors *st, const char **found) {
  static const char *const archs[] = {"mlp", "cnn", "lstm"};
  int n_model = 0, n_file = kiln_safetensors_n_tensors(st);
  *found = NULL;
  for (int i = 0; i < n_file; i++)
    n_model += strncmp(kiln_safetensors_name(st, i), OPTIM_PREFIX, strlen(OPTIM_PREFIX)) != 0;
  /* names looked up in a sorted index: O(n log n) in the file's tensors
   * (a linear search per parameter was quadratic: issue #20) */
  int *order = core_alloc((size_t)(n_file ? n_file : 1) * sizeof *order);
  if (!order) return KILN_ERR_NOMEM;
  for (int k = 0; k < n_file; k++) order[k] = k;
  sort_st = st;
  qsort(order, (size_t)n_file, sizeof *order, cmp_name);
  sort_st = NULL;
  for (size_t a = 0; a < sizeof archs / sizeof *archs && !*found; a++) {
    int n_p = 0;
    const nn_param_spec *p = nn_model_params(archs[a], &n_p);
    bool ok = p && n_p == n_model;
    for (int i = 0; ok && i < n_p; i++) {
      int k;
      kiln_tensor *t = find_tensor(st, order, n_file, archs[a], "", p[i].name, &k);
      ok = t && t->dtype == KILN_DTYPE_F32 && t->ndim == p[i].ndim &&
           memcmp(t->shape, p[i].shape, (size_t)p[i].ndim * sizeof *t->shape) == 0;
    }
    if (ok) *found = archs[a];
  }
  core_free(order);
  return 0;
}

/* Checks format and CRC; fills info from the metadata. A file without
 * kiln's metadata is a plain state_dict (PyTorch's): info->plain, the
 * model guessed from its tensors, step 0; nothing to verify it with. */
static int read_info(const kiln_safetensors *st, const char *path, kiln_checkpoint_info *info) {
  const char *fmt = kiln_safetensors_metadata(st, "format");
  if (!fmt && !kiln_safetensors_metadata(st, "crc32")) {
    memset(info, 0, sizeof *info);
    info->plain = true;
    const char *arch;
    if (guess_arch(st, &arch) < 0) return KILN_ERR_NOMEM;
    if (arch) snprintf(info->model, sizeof info->model, "%s", arch);
    return 0;
  }
  if (!fmt || strcmp(fmt, CKPT_FORMAT) != 0)
    return core_error(KILN_ERR_FORMAT,
                      "checkpoint: '%s': not a kiln checkpoint (__metadata__ format is %s%s%s, "
                      "expected \"" CKPT_FORMAT "\")",
                      path, fmt ? "\"" : "", fmt ? fmt : "missing", fmt ? "\"" : "");
  const char *crc_s = kiln_safetensors_metadata(st, "crc32");
  size_t dn;
  const void *data = nn_st_data(st, &dn);
  int nm = nn_st_n_meta(st);
  const char *keys[64], *values[64];
  if (nm > 64) return core_error(KILN_ERR_FORMAT, "checkpoint: '%s': too many metadata keys", path);
  for (int i = 0; i < nm; i++) {
    keys[i] = nn_st_meta_key(st, i);
    values[i] = nn_st_meta_value(st, i);
  }
  uint32_t crc = meta_crc(nn_crc32(0, data, dn), nm, keys, values);
  char want[16];
  snprintf(want, sizeof want, "%08" PRIx32, crc);
  if (!crc_s || strcmp(crc_s, want) != 0)
    return core_error(KILN_ERR_FORMAT,
                      "checkpoint: '%s': CRC-32 mismatch: the file says %s, its contents give %s "
                      "(the file is corrupt)",
                      path, crc_s ? crc_s : "nothing", want);
  memset(info, 0, sizeof *info);
  const char *model = kiln_safetensors_metadata(st, "model");
  const char *opt = kiln_safetensors_metadata(st, "optimizer");
  const char *lr = kiln_safetensors_metadata(st, "lr");
  const char *rng = kiln_safetensors_metadata(st, "rng");
  char *end = NULL;
  if (!model || strlen(model) >= sizeof info->model || !opt ||
      strlen(opt) >= sizeof info->optimizer || !lr || (info->lr = strtod(lr, &end), *end) ||
      parse_i64(kiln_safetensors_metadata(st, "step"), &info->step) < 0 ||
      parse_i64(kiln_safetensors_metadata(st, "epoch"), &info->epoch) < 0 ||
      parse_i64(kiln_safetensors_metadata(st, "batch"), &info->batch) < 0 || !rng ||
      sscanf(rng, "%16" SCNx64 ",%16" SCNx64 ",%16" SCNx64 ",%16" SCNx64, &info->rng[0],
             &info->rng[1], &info->rng[2], &info->rng[3]) != 4)
    return core_error(KILN_ERR_FORMAT,
                      "checkpoint: '%s': __metadata__ lacks or mangles model, optimizer, lr, "
                      "step, epoch, batch or rng (counters must be in [0, 2^62))",
                      path);
  if (!isfinite(info->lr) || info->lr < 0)
    return core_error(KILN_ERR_FORMAT,
                      "checkpoint: '%s': __metadata__ lr is %s, not a finite rate >= 0", path, lr);
  snprintf(info->model, sizeof info->model, "%s", model);
  snprintf(info->optimizer, sizeof info->optimizer, "%s", opt);
  return 0;
}

kiln_status kiln_checkpoint_read_info(const char *path, kiln_checkpoint_info *info) {
  if (!path || !info) return core_error(KILN_ERR_INVALID, "checkpoint_read_info: NULL argument");
  kiln_safetensors *st = kiln_safetensors_load(path);
  if (!st) return kiln_last_status() < 0 ? kiln_last_status() : KILN_ERR_NOMEM; /* IO, FORMAT */
  int rc = read_info(st, path, info);
  kiln_safetensors_free(st);
  return rc;
}

/* Does the file's tensor match the model's (dtype and shape)? */
static int check_match(const char *path, const char *name, const kiln_tensor *want,
                       const kiln_tensor *got) {
  char a[96], b[96];
  if (!got)
    return core_error(KILN_ERR_FORMAT, "checkpoint: '%s': '%s' is missing (the model has %s)",
                      path, name, core_tensor_desc(want, a, sizeof a));
  if (got->dtype != want->dtype || got->ndim != want->ndim ||
      memcmp(got->shape, want->shape, (size_t)want->ndim * sizeof *want->shape) != 0)
    return core_error(KILN_ERR_FORMAT,
                      "checkpoint: '%s': '%s' is %s in the file but %s in the model", path,
                      name, core_tensor_desc(got, a, sizeof a), core_tensor_desc(want, b, sizeof b));
  return 0;
}

/* The file's tensor names sorted, for binary search (a model of n
 * parameters is matched in O(n log n), not n x names). */
kiln_status kiln_checkpoint_load(const char *path, kiln_nn_module *m, kiln_optim *o,
                                 kiln_checkpoint_info *info) {
  if (!path || !m) return core_error(KILN_ERR_INVALID, "checkpoint_load: NULL path or module");
  kiln_safetensors *st = kiln_safetensors_load(path);
  if (!st) return kiln_last_status() < 0 ? kiln_last_status() : KILN_ERR_NOMEM; /* IO, FORMAT */
  kiln_checkpoint_info inf;
  int n_st = kiln_optim_n_state(o), rc = read_info(st, path, &inf);
  int n_file = kiln_safetensors_n_tensors(st);
  bool *used = core_calloc((size_t)(n_file ? n_file : 1), sizeof *used);
  int nb = m->n_buffers, n_all = m->n_params + nb + n_st;
  kiln_tensor **src = core_calloc((size_t)(n_all + 1), sizeof *src);
  int *order = core_alloc((size_t)(n_file ? n_file : 1) * sizeof *order);
  char name[512];
  if (rc == 0 && (!used || !src || !order)) rc = KILN_ERR_NOMEM;
  if (rc < 0) goto done;
  for (int k = 0; k < n_file; k++) order[k] = k;
  sort_st = st; /* qsort has no context argument in C11 */
  qsort(order, (size_t)n_file, sizeof *order, cmp_name);
  sort_st = NULL;
  /* a plain state_dict: the tensor checks below say what differs */
  if (m->arch && !inf.plain && strcmp(inf.model, m->arch) != 0) {
    rc = core_error(KILN_ERR_FORMAT, "checkpoint: '%s': it holds a '%s' model, not '%s'", path,
                    inf.model[0] ? inf.model : "(unnamed)", m->arch);
    goto done;
  }
  if (o && inf.plain) { /* a plain state_dict: the optimizer starts fresh */
    n_st = 0;
    n_all = m->n_params + nb;
  }
  if (o && !inf.plain && strcmp(inf.optimizer, kiln_optim_name(o)) != 0) {
    rc = core_error(KILN_ERR_FORMAT,
                    "checkpoint: '%s': it holds %s%s optimizer state, the optimizer is %s", path,
                    inf.optimizer[0] ? inf.optimizer : "no", inf.optimizer[0] ? "" : "",
                    kiln_optim_name(o));
    goto done;
  }
  for (int i = 0; i < n_all && rc == 0; i++) {
    const char *kn, *prefix;
    kiln_tensor *want = slot(m, o, i, &kn, &prefix);
    char tn[512];
    snprintf(name, sizeof name, "%s%s", prefix, nn_torch_name(m->arch, kn, tn, sizeof tn));
    int k = -1;
    src[i] = find_tensor(st, order, n_file, m->arch, prefix, kn, &k);
    if (k >= 0) used[k] = true;
    rc = check_match(path, name, want, src[i]);
  }
  for (int k = 0; k < n_file && rc == 0; k++) {
    const char *fn = kiln_safetensors_name(st, k);
    bool is_optim = strncmp(fn, OPTIM_PREFIX, strlen(OPTIM_PREFIX)) == 0;
    if (!used[k] && !((o == NULL || inf.plain) && is_optim))
      rc = core_error(KILN_ERR_FORMAT, "checkpoint: '%s': it holds '%s', which the %s lacks", path,
                      fn, is_optim ? "optimizer" : "model");
  }
  if (rc < 0) goto done;
  /* everything checked: now write */
  bool was = kiln_set_grad_enabled(false);
  for (int i = 0; i < n_all && rc == 0; i++) {
    const char *kn, *prefix;
    rc = kiln_copy_(slot(m, o, i, &kn, &prefix), src[i]);
  }
  kiln_set_grad_enabled(was);
  if (rc == 0 && o && !inf.plain) {
    kiln_optim_set_steps(o, inf.step);
    kiln_optim_set_lr(o, inf.lr);
  }
  if (rc == 0 && inf.plain && m->arch) snprintf(inf.model, sizeof inf.model, "%s", m->arch);
  if (rc == 0 && info) *info = inf;
done:
  core_free(used);
  core_free(order);
  core_free(src);
  kiln_safetensors_free(st);
  return rc;
}
