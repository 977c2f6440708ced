/* tests/nn/test_nn_train.c: kiln_nn_train end to end on small synthetic
 * data: the three modes agree step by step, resuming equals not stopping,
 * bad data files are named in the errors, the plot is well-formed XML with
 * one point per step, the metrics JSON holds the counters. */
#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

#include "nn_fixture.h"
#include "test.h"
#include "kiln.h"

static void opts_for(kiln_nn_train_opts *o, const char *dir) {
  kiln_nn_train_opts_default(o);
  o->data_dir = dir;
  o->batch = 16;
  o->eval_batch = 64;
  o->train_limit = 96; /* 6 batches an epoch */
  o->test_limit = 100;
  o->seed = 3;
  o->epochs = 2;
}

static bool close_f32(double a, double b) { return fabs(a - b) <= 2e-5 * (1 + fabs(a)); }

static void three_modes(const char *model, bool learns) {
  char dir[256];
  CHECK(nn_fixture_make(dir, sizeof dir, 400, 100, 1) == 0);
  kiln_nn_train_result r[3];
  for (int m = 0; m < 3; m++) {
    kiln_nn_train_opts o;
    opts_for(&o, dir);
    o.model = model;
    o.train_limit = 0;    /* 400 samples: 25 batches, no epoch end in 20 steps */
    o.max_steps = 20;
    o.mode = (kiln_nn_mode)m;
    int rc = kiln_nn_train(&o, &r[m]);
    CHECK_MSG(rc == KILN_OK, "%s: %s", kiln_nn_mode_name(o.mode), kiln_last_error());
    CHECK_EQ_INT(r[m].n_steps, 20);
  }
  for (int m = 1; m < 3; m++)
    for (int i = 0; i < 20 && r[m].n_steps == 20 && r[0].n_steps == 20; i++)
      CHECK_MSG(close_f32(r[0].losses[i], r[m].losses[i]), "step %d: eager %.8f, %s %.8f",
                i + 1, r[0].losses[i], kiln_nn_mode_name((kiln_nn_mode)m), r[m].losses[i]);
  /* the model learned something in 20 steps (the MLP does on this data) */
  if (learns && r[0].n_steps == 20) CHECK_MSG(r[0].losses[19] < r[0].losses[0], "%g -> %g", r[0].losses[0], r[0].losses[19]);
  for (int m = 0; m < 3; m++) kiln_nn_train_result_free(&r[m]);
  nn_fixture_remove(dir);
}

TEST(nn_train_three_modes_same_losses_mlp) { three_modes("mlp", true); }
/* the LSTM's input projection is one GEMM over all steps, unbound (a list
 * through the interpreter, a LIST_OUT node in lazy graphs) */
TEST(nn_train_three_modes_same_losses_lstm) { three_modes("lstm", false); }

static bool same_file_tensors(const char *a, const char *b) {
  kiln_safetensors *x = kiln_safetensors_load(a), *y = kiln_safetensors_load(b);
  bool same = x && y && kiln_safetensors_n_tensors(x) == kiln_safetensors_n_tensors(y);
  for (int i = 0; same && i < kiln_safetensors_n_tensors(x); i++) {
    kiln_tensor *tx = kiln_safetensors_tensor(x, i);
    kiln_tensor *ty = kiln_safetensors_find(y, kiln_safetensors_name(x, i));
    same = ty && kiln_tensor_numel(tx) == kiln_tensor_numel(ty) &&
           memcmp(kiln_tensor_data(tx), kiln_tensor_data(ty),
                  (size_t)kiln_tensor_numel(tx) * kiln_dtype_size(kiln_tensor_dtype(tx))) == 0;
  }
  kiln_safetensors_free(x);
  kiln_safetensors_free(y);
  return same;
}

/* 2 epochs == 1 epoch + resume; and a stop in mid-epoch resumes too. The
 * first needs a schedule that does not depend on the number of epochs
 * (cosine anneals over --epochs, so a 1-epoch run anneals faster); the
 * second holds for every schedule. */
static void resume_case(kiln_nn_mode mode, const char *optimizer, const char *schedule) {
  char dir[256], full[300], half[300], mid[300], cont[300];
  CHECK(nn_fixture_make(dir, sizeof dir, 96, 100, 2) == 0);
  snprintf(full, sizeof full, "%s/full.safetensors", dir);
  snprintf(half, sizeof half, "%s/half.safetensors", dir);
  snprintf(mid, sizeof mid, "%s/mid.safetensors", dir);
  snprintf(cont, sizeof cont, "%s/cont.safetensors", dir);
  kiln_nn_train_opts o;
  kiln_nn_train_result a, b, c, d, e;
  opts_for(&o, dir);
  o.mode = mode;
  o.optimizer = optimizer;
  o.schedule = schedule;
  o.save_path = full;
  CHECK_MSG(kiln_nn_train(&o, &a) == KILN_OK, "%s", kiln_last_error());
  CHECK_EQ_INT(a.n_steps, 12);
  CHECK_EQ_INT(a.n_epochs, 2);
  bool whole = strcmp(schedule, "cosine") != 0;
  o.epochs = whole ? 1 : 2;
  o.max_steps = whole ? 0 : 6;
  o.save_path = half;
  CHECK_MSG(kiln_nn_train(&o, &b) == KILN_OK, "%s", kiln_last_error());
  o.epochs = 2;
  o.max_steps = 0;
  o.save_path = cont;
  o.resume_path = half;
  CHECK_MSG(kiln_nn_train(&o, &c) == KILN_OK, "%s", kiln_last_error());
  CHECK_EQ_INT(c.n_steps, 6);
  CHECK_EQ_INT(c.first_step, 7);
  for (int i = 0; i < 6 && c.n_steps == 6 && a.n_steps == 12; i++)
    CHECK_MSG(a.losses[6 + i] == c.losses[i], "step %d: %.9g != %.9g", 7 + i, a.losses[6 + i],
              c.losses[i]);
  CHECK_NEAR(a.final_accuracy, c.final_accuracy, 0);
  CHECK_MSG(same_file_tensors(full, cont), "the final checkpoints differ");
  /* stop after 9 steps (mid-epoch 2), resume to the end */
  o.resume_path = NULL;
  o.save_path = mid;
  o.max_steps = 9;
  CHECK_MSG(kiln_nn_train(&o, &d) == KILN_OK, "%s", kiln_last_error());
  CHECK_EQ_INT(d.n_steps, 9);
  o.max_steps = 0;
  o.resume_path = mid;
  o.save_path = cont;
  CHECK_MSG(kiln_nn_train(&o, &e) == KILN_OK, "%s", kiln_last_error());
  CHECK_EQ_INT(e.n_steps, 3);
  for (int i = 0; i < 3 && e.n_steps == 3 && a.n_steps == 12; i++)
    CHECK_MSG(a.losses[9 + i] == e.losses[i], "step %d: %.9g != %.9g", 10 + i, a.losses[9 + i],
              e.losses[i]);
  CHECK_MSG(same_file_tensors(full, cont), "the checkpoints after a mid-epoch resume differ");
  double acc = -1;
  CHECK_MSG(kiln_nn_eval_checkpoint(full, dir, 100, NULL, &acc) == KILN_OK, "%s", kiln_last_error());
  CHECK_NEAR(acc, a.final_accuracy, 1e-12);
  kiln_nn_train_result_free(&a);
  kiln_nn_train_result_free(&b);
  kiln_nn_train_result_free(&c);
  kiln_nn_train_result_free(&d);
  kiln_nn_train_result_free(&e);
  nn_fixture_remove(dir);
}

TEST(nn_train_resume_equals_uninterrupted_eager_sgd) { resume_case(KILN_NN_EAGER, "sgd", "step"); }
TEST(nn_train_resume_equals_uninterrupted_eager_adam) { resume_case(KILN_NN_EAGER, "adam", "none"); }
TEST(nn_train_resume_equals_uninterrupted_eager_cosine) {
  resume_case(KILN_NN_EAGER, "sgd", "cosine");
}
TEST(nn_train_resume_equals_uninterrupted_lazy) { resume_case(KILN_NN_LAZY, "sgd", "step"); }

TEST(nn_train_resume_refuses_other_optimizer_or_model) {
  char dir[256], ck[300];
  CHECK(nn_fixture_make(dir, sizeof dir, 32, 20, 3) == 0);
  snprintf(ck, sizeof ck, "%s/a.safetensors", dir);
  kiln_nn_train_opts o;
  opts_for(&o, dir);
  o.epochs = 1;
  o.save_path = ck;
  CHECK(kiln_nn_train(&o, NULL) == KILN_OK);
  o.save_path = NULL;
  o.resume_path = ck;
  o.optimizer = "adam";
  CHECK(kiln_nn_train(&o, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "sgd optimizer state, the optimizer is adam");
  o.optimizer = "sgd";
  o.model = "cnn";
  CHECK(kiln_nn_train(&o, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "it holds a 'mlp' model, not 'cnn'");
  nn_fixture_remove(dir);
}

TEST(nn_train_bad_data_names_the_file) {
  char dir[256], path[320];
  CHECK(nn_fixture_make(dir, sizeof dir, 32, 20, 4) == 0);
  kiln_nn_train_opts o;
  opts_for(&o, dir);
  o.max_steps = 1;
  /* labels out of range */
  unsigned char lab[20];
  for (int i = 0; i < 20; i++) lab[i] = (unsigned char)(i % 10);
  lab[7] = 12;
  snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", dir);
  CHECK(nn_fixture_write_idx(path, true, 0x08, 1, (uint32_t[]){20}, lab, 20) == 0);
  CHECK(kiln_nn_train(&o, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), path);
  CHECK_STR_CONTAINS(kiln_last_error(), "label 12 at index 7");
  /* count mismatch */
  CHECK(nn_fixture_write_idx(path, true, 0x08, 1, (uint32_t[]){19}, lab, 19) == 0);
  CHECK(kiln_nn_train(&o, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), "holds 19 labels but");
  /* truncated images */
  snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
  unsigned char img[784 * 2] = {0};
  CHECK(nn_fixture_write_idx(path, true, 0x08, 3, (uint32_t[]){32, 28, 28}, img, sizeof img) == 0);
  CHECK(kiln_nn_train(&o, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), path);
  CHECK_STR_CONTAINS(kiln_last_error(), "truncated");
  /* missing */
  unlink(path);
  CHECK(kiln_nn_train(&o, NULL) < 0);
  CHECK_STR_CONTAINS(kiln_last_error(), path);
  CHECK_STR_CONTAINS(kiln_last_error(), "cannot open");
  nn_fixture_remove(dir);
}

/* ---- a small XML well-formedness check ------------------------------------- */

static bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_' || c == ':' || c == '.';
}

/* An entity or character reference at s ("&amp;" ...): its length, or 0. */
static int entity_len(const char *s) {
  static const char *const ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
  for (int i = 0; i < 5; i++)
    if (strncmp(s, ents[i], strlen(ents[i])) == 0) return (int)strlen(ents[i]);
  if (s[1] == '#') {
    int k = 2;
    while (is_name_char(s[k])) k++;
    return s[k] == ';' && k > 2 ? k + 1 : 0;
  }
  return 0;
}

/* Well-formed XML: one root element, matched tags, quoted attributes with
 * unique names, escaped text. On failure writes a reason into err. */
static bool xml_well_formed(const char *s, char *err, size_t cap) {
  const char *stack[64];
  size_t lens[64];
  int depth = 0, roots = 0;
  const char *p = s;
  if (strncmp(p, "<?xml", 5) == 0) {
    p = strstr(p, "?>");
    if (!p) return snprintf(err, cap, "unterminated declaration"), false;
    p += 2;
  }
  while (*p) {
    if (*p != '<') {
      if (*p == '&') {
        int k = entity_len(p);
        if (!k) return snprintf(err, cap, "bad entity at %d", (int)(p - s)), false;
        p += k;
        continue;
      }
      if (depth == 0 && !(*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        return snprintf(err, cap, "text outside the root at %d", (int)(p - s)), false;
      p++;
      continue;
    }
    if (strncmp(p, "<!--", 4) == 0) {
      p = strstr(p + 4, "-->");
      if (!p) return snprintf(err, cap, "unterminated comment"), false;
      p += 3;
      continue;
    }
    if (p[1] == '/') {
      const char *n = p + 2, *q = n;
      while (is_name_char(*q)) q++;
      if (depth == 0 || (size_t)(q - n) != lens[depth - 1] || strncmp(n, stack[depth - 1], lens[depth - 1]))
        return snprintf(err, cap, "mismatched end tag at %d", (int)(p - s)), false;
      while (*q == ' ') q++;
      if (*q != '>') return snprintf(err, cap, "bad end tag at %d", (int)(p - s)), false;
      depth--;
      p = q + 1;
      continue;
    }
    const char *n = p + 1, *q = n;
    while (is_name_char(*q)) q++;
    if (q == n) return snprintf(err, cap, "bad tag name at %d", (int)(p - s)), false;
    size_t nlen = (size_t)(q - n);
    const char *attrs[64];
    size_t alen[64];
    int na = 0;
    for (;;) {
      while (*q == ' ' || *q == '\n' || *q == '\t') q++;
      if (*q == '>' || (q[0] == '/' && q[1] == '>')) break;
      const char *an = q;
      while (is_name_char(*q)) q++;
      if (q == an || q[0] != '=' || (q[1] != '"' && q[1] != '\''))
        return snprintf(err, cap, "bad attribute at %d", (int)(an - s)), false;
      for (int i = 0; i < na; i++)
        if (alen[i] == (size_t)(q - an) && strncmp(attrs[i], an, alen[i]) == 0)
          return snprintf(err, cap, "duplicate attribute at %d", (int)(an - s)), false;
      if (na < 64) {
        attrs[na] = an;
        alen[na++] = (size_t)(q - an);
      }
      char quote = q[1];
      q += 2;
      while (*q && *q != quote) {
        if (*q == '<') return snprintf(err, cap, "'<' in an attribute at %d", (int)(q - s)), false;
        if (*q == '&') {
          int k = entity_len(q);
          if (!k) return snprintf(err, cap, "bad entity at %d", (int)(q - s)), false;
          q += k;
        } else {
          q++;
        }
      }
      if (!*q) return snprintf(err, cap, "unterminated attribute"), false;
      q++;
    }
    if (depth == 0 && roots++ > 0) return snprintf(err, cap, "a second root element"), false;
    if (*q == '/') {
      p = q + 2;
      continue;
    }
    if (depth == 64) return snprintf(err, cap, "too deep"), false;
    stack[depth] = n;
    lens[depth++] = nlen;
    p = q + 1;
  }
  if (depth) return snprintf(err, cap, "%d unclosed elements", depth), false;
  if (roots != 1) return snprintf(err, cap, "no root element"), false;
  return true;
}

/* Number of "x,y" pairs in the points attribute of the element whose class
 * attribute is cls; -1 if there is none. */
static int count_points(const char *svg, const char *cls) {
  char key[64];
  snprintf(key, sizeof key, "class=\"%s\"", cls);
  const char *e = strstr(svg, key);
  if (!e) return -1;
  const char *end = strchr(e, '>');
  const char *pts = strstr(e, "points=\"");
  if (!pts || pts > end) return -1;
  pts += 8;
  int n = 0;
  while (*pts && *pts != '"') {
    double x, y;
    int used = 0;
    if (sscanf(pts, "%lf,%lf%n", &x, &y, &used) != 2) return -1;
    n++;
    pts += used;
    while (*pts == ' ') pts++;
  }
  return n;
}

TEST(nn_xml_checker_rejects_broken_xml) {
  char err[128];
  CHECK(xml_well_formed("<a x=\"1\"><b/>t &amp; u</a>", err, sizeof err));
  CHECK(!xml_well_formed("<a><b></a></b>", err, sizeof err));
  CHECK(!xml_well_formed("<a x=\"1\" x=\"2\"/>", err, sizeof err));
  CHECK(!xml_well_formed("<a>&nope;</a>", err, sizeof err));
  CHECK(!xml_well_formed("<a/><b/>", err, sizeof err));
  CHECK(!xml_well_formed("<a x=1/>", err, sizeof err));
  CHECK(!xml_well_formed("<a>", err, sizeof err));
}

TEST(nn_train_plot_and_metrics) {
  char dir[256], svg[300], js[300];
  CHECK(nn_fixture_make(dir, sizeof dir, 96, 40, 5) == 0);
  snprintf(svg, sizeof svg, "%s/plot.svg", dir);
  snprintf(js, sizeof js, "%s/metrics.json", dir);
  kiln_nn_train_opts o;
  opts_for(&o, dir);
  o.mode = KILN_NN_LAZY;
  o.plot_path = svg;
  o.metrics_path = js;
  o.model = "mlp";
  kiln_nn_train_result r;
  CHECK_MSG(kiln_nn_train(&o, &r) == KILN_OK, "%s", kiln_last_error());
  char *text = test_read_file(svg, NULL), err[128] = "";
  CHECK(text != NULL);
  if (text) {
    CHECK_MSG(xml_well_formed(text, err, sizeof err), "plot: %s", err);
    CHECK_EQ_INT(count_points(text, "loss"), r.n_steps);
    CHECK_EQ_INT(count_points(text, "accuracy"), r.n_epochs);
    CHECK(strstr(text, "<svg xmlns=\"http://www.w3.org/2000/svg\"") != NULL);
  }
  free(text);
  json_error_t je;
  json_t *root = json_load_file(js, JSON_REJECT_DUPLICATES, &je);
  CHECK_MSG(root != NULL, "metrics: %s", je.text);
  if (root) {
    CHECK(strcmp(json_string_value(json_object_get(root, "mode")), "lazy") == 0);
    json_t *steps = json_object_get(root, "steps");
    CHECK_EQ_INT(json_array_size(steps), r.n_steps);
    json_t *last = json_array_get(steps, json_array_size(steps) - 1);
    CHECK_EQ_INT(json_integer_value(json_object_get(last, "step")), 12);
    CHECK_NEAR(json_real_value(json_object_get(last, "loss")), r.losses[11], 1e-6);
    /* one graph per step once warm: no compile between steps 3 and 6
     * (the first epoch's evaluation comes after step 6) */
    json_t *c3 = json_object_get(json_array_get(steps, 2), "counters");
    json_t *c6 = json_object_get(json_array_get(steps, 5), "counters");
    CHECK(json_integer_value(json_object_get(c6, "MarkStep")) -
              json_integer_value(json_object_get(c3, "MarkStep")) == 3);
    CHECK_EQ_INT(json_integer_value(json_object_get(c6, "UncachedCompile")),
                 json_integer_value(json_object_get(c3, "UncachedCompile")));
    CHECK(json_integer_value(json_object_get(c6, "CachedCompile")) -
              json_integer_value(json_object_get(c3, "CachedCompile")) == 3);
    CHECK_EQ_INT(json_array_size(json_object_get(root, "epochs")), 2);
    json_decref(root);
  }
  kiln_nn_train_result_free(&r);
  nn_fixture_remove(dir);
}

TEST(nn_train_lazy_sync_phases_three_graphs_per_step) {
  char dir[256], js[300];
  CHECK(nn_fixture_make(dir, sizeof dir, 96, 40, 6) == 0);
  snprintf(js, sizeof js, "%s/metrics.json", dir);
  kiln_nn_train_opts o;
  opts_for(&o, dir);
  o.mode = KILN_NN_LAZY;
  o.sync_phases = true;
  o.max_steps = 5;
  o.metrics_path = js;
  CHECK_MSG(kiln_nn_train(&o, NULL) == KILN_OK, "%s", kiln_last_error());
  json_error_t je;
  json_t *root = json_load_file(js, 0, &je);
  json_t *steps = json_object_get(root, "steps");
  CHECK_EQ_INT(json_array_size(steps), 5);
  int64_t prev[3] = {0, 0, 0};
  for (size_t i = 0; i < json_array_size(steps); i++) {
    json_t *c = json_object_get(json_array_get(steps, i), "counters");
    int64_t ms = json_integer_value(json_object_get(c, "MarkStep"));
    int64_t un = json_integer_value(json_object_get(c, "UncachedCompile"));
    int64_t ca = json_integer_value(json_object_get(c, "CachedCompile"));
    CHECK_EQ_INT(ms - prev[0], 3);
    if (i == 0) CHECK_EQ_INT(un, 3);
    if (i >= 1) CHECK_MSG(un - prev[1] == 0, "step %zu compiled %lld graphs", i + 1,
                          (long long)(un - prev[1]));
    if (i >= 1) CHECK_EQ_INT(ca - prev[2], 3);
    prev[0] = ms;
    prev[1] = un;
    prev[2] = ca;
  }
  json_decref(root);
  nn_fixture_remove(dir);
}

TEST(nn_train_rejects_bad_options) {
  kiln_nn_train_opts o;
  kiln_nn_train_opts_default(&o);
  o.model = "resnet";
  CHECK(kiln_nn_train(&o, NULL) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "unknown model 'resnet'");
  kiln_nn_train_opts_default(&o);
  o.optimizer = "lbfgs";
  CHECK(kiln_nn_train(&o, NULL) == KILN_ERR_INVALID);
  CHECK_STR_CONTAINS(kiln_last_error(), "unknown optimizer 'lbfgs'");
  kiln_nn_train_opts_default(&o);
  o.schedule = "linear";
  CHECK(kiln_nn_train(&o, NULL) == KILN_ERR_INVALID);
  CHECK_EQ_INT(kiln_nn_mode_parse("lazy"), KILN_NN_LAZY);
  CHECK_EQ_INT(kiln_nn_mode_parse("fast"), -1);
}
