/* Gathering variables from checkpoints and exports. */
#include "store/weights.h"

#include <ctype.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "nn/init.h"
#include "nn/optim.h"
#include "store/ckpt.h"
#include "store/rowfile.h"
#include "store/safetensors.h"

static void base_name(const char *key, char *out, size_t n) {
  snprintf(out, n, "%s", key);
  char *p = strrchr(out, '/');
  if (!p || strncmp(p, "/part_", 6) || !p[6]) {
    return;
  }
  for (const char *d = p + 6; *d; d++) {
    if (!isdigit((unsigned char)*d)) {
      return;
    }
  }
  *p = '\0';
}

static tfx_weight *find_or_add(tfx_weights *ws, const char *name, const tfx_ckpt_entry *e, tfx_err *err) {
  for (int i = 0; i < ws->n; i++) {
    if (!strcmp(ws->w[i].name, name)) {
      return &ws->w[i];
    }
  }
  tfx_weight *g = realloc(ws->w, sizeof *g * (size_t)(ws->n + 1));
  if (!g) {
    tfx_err_set(err, TFX_ENOMEM, "out of memory");
    return NULL;
  }
  ws->w = g;
  tfx_weight *w = &g[ws->n];
  memset(w, 0, sizeof *w);
  snprintf(w->name, sizeof w->name, "%s", name);
  w->rank = e->rank;
  w->count = 1;
  for (int d = 0; d < e->rank; d++) {
    w->count *= (size_t)(w->shape[d] = e->dims[d]);
  }
  if (!(w->data = calloc(w->count ? w->count : 1, sizeof(float)))) {
    tfx_err_set(err, TFX_ENOMEM, "out of memory");
    return NULL;
  }
  ws->n++;
  return w;
}

/* The whole variable an entry belongs to: "dense/kernel/part_1" -> "dense/kernel", and for an optimizer slot
 * "dense/kernel/part_1@m" -> "dense/kernel@m". */
static void whole_name(const char *entry, char *out, size_t n) {
  const char *at = strchr(entry, '@');
  char key[160];
  snprintf(key, sizeof key, "%.*s", at ? (int)(at - entry) : (int)strlen(entry), entry);
  base_name(key, out, n);
  if (at) {
    size_t len = strlen(out);
    snprintf(out + len, n - len, "%s", at);
  }
}

static int take_shard(tfx_weights *ws, const tfx_ckpt *c, int ps, int with_slots, tfx_err *err) {
  for (int i = 0; i < c->n; i++) {
    const tfx_ckpt_entry *e = &c->entries[i];
    if ((!with_slots && strchr(e->name, '@')) || e->rank < 1) {
      continue;
    }
    char name[160];
    whole_name(e->name, name, sizeof name);
    tfx_weight *w = find_or_add(ws, name, e, err);
    if (!w) {
      return TFX_ENOMEM;
    }
    size_t row = w->count / (size_t)(w->shape[0] ? w->shape[0] : 1);
    if (e->row_begin < 0 || e->row_end > w->shape[0] || e->count != row * (size_t)(e->row_end - e->row_begin)) {
      return tfx_err_set(err, TFX_ECORRUPT, "shard entry '%s': rows %lld..%lld do not fit %s", e->name,
                         (long long)e->row_begin, (long long)e->row_end, name);
    }
    memcpy(w->data + row * (size_t)e->row_begin, e->data, sizeof(float) * e->count);
    size_t len = strlen(w->holders);
    snprintf(w->holders + len, sizeof w->holders - len, "%s%d", len ? "," : "ps ", ps);
  }
  return TFX_OK;
}

/* Reading the row files of lazy tables into whole variables: every row the checkpoint holds, and every other row
 * at the value the ps would make it with (the variable's initializer, seeded as the run's), slots at zero. */
typedef struct rows_ctx {
  tfx_weights *ws;
  tfx_model *model; /* built from the run's config.json: each table's initializer and shape */
  uint64_t seed;
  int with_slots, n_slots, nps;
  tfx_err *err;
} rows_ctx;

/* The whole variable (and, with slots, VAR@SLOT) of a lazy table's row, made and initialized on first use. */
static tfx_weight *lazy_weight(rows_ctx *x, const char *name, int64_t ids, int width, int slot) {
  char full[200];
  snprintf(full, sizeof full, "%s%s%s", name, slot < 0 ? "" : "@", slot < 0 ? "" : tfx_optim_slot_name(slot));
  for (int i = 0; i < x->ws->n; i++) {
    if (!strcmp(x->ws->w[i].name, full)) {
      return &x->ws->w[i];
    }
  }
  tfx_var *v = tfx_model_find_var(x->model, name);
  if (!v || v->rank != 2 || v->shape[0] != ids || v->shape[1] != width) {
    tfx_err_set(x->err, TFX_ESHAPE, "row file table %s: [%lld, %d] is not a variable of the run's model", name,
                (long long)ids, width);
    return NULL;
  }
  tfx_ckpt_entry e = {.rank = 2, .dims = {ids, width}};
  tfx_weight *w = find_or_add(x->ws, full, &e, x->err);
  if (w && slot < 0) {
    tfx_init_fill(v->init, v->name, x->seed, v->fan_in, v->fan_out, 0, w->count, w->data);
  }
  if (w) {
    snprintf(w->holders, sizeof w->holders, "ps 0..%d by id (lazy)", x->nps - 1);
  }
  return w;
}

static int take_row(const char *table, int64_t ids, int row_floats, int64_t id, const float *row, void *ctx) {
  rows_ctx *x = ctx;
  char name[160];
  snprintf(name, sizeof name, "%s", table);
  char *mod = strstr(name, "/mod_") ? strstr(name, "/mod_") : strstr(name, "/range_");
  if (mod) {
    *mod = '\0';
  }
  int width = row_floats / (1 + x->n_slots);
  for (int k = -1; k < (x->with_slots ? x->n_slots : 0); k++) {
    tfx_weight *w = lazy_weight(x, name, ids, width, k);
    if (!w) {
      return x->err->code ? x->err->code : TFX_ENOMEM;
    }
    float *dst = w->data + (size_t)id * (size_t)width;
    if (row) {
      memcpy(dst, row + (size_t)(k + 1) * (size_t)width, sizeof(float) * (size_t)width);
    } else if (k < 0) { /* a delta's deleted (evicted) row: as the ps would make it again */
      const tfx_var *v = tfx_model_find_var(x->model, name);
      tfx_init_fill(v->init, v->name, x->seed, v->fan_in, v->fan_out, (size_t)id * (size_t)width, (size_t)width, dst);
    } else {
      memset(dst, 0, sizeof(float) * (size_t)width);
    }
  }
  return TFX_OK;
}

/* Reads the checkpoint's row files (ps-K.rows), if it has any, into whole variables. */
static int gather_rows(const char *dir, int nps, int with_slots, tfx_weights *ws, tfx_err *err) {
  char path[1200], run_config[1200];
  int any = 0;
  for (int p = 0; p < nps && !any; p++) {
    tfx_ckpt_part_path(path, sizeof path, dir, p, TFX_CKPT_ROWS);
    any = access(path, F_OK) == 0;
  }
  if (!any) {
    return TFX_OK;
  }
  snprintf(run_config, sizeof run_config, "%s/../../config.json", dir);
  tfx_config cfg;
  tfx_config_init(&cfg);
  rows_ctx x = {ws, NULL, 0, with_slots, 0, nps, err};
  int rc = tfx_config_load_saved(&cfg, run_config, err);
  if (!rc && !(rc = tfx_model_create(&cfg, 1, &x.model, err))) {
    tfx_optim o;
    tfx_optim_init(&o, &cfg);
    x.seed = (uint64_t)cfg.seed;
    x.n_slots = tfx_optim_slots(&o);
  }
  for (int p = 0; !rc && p < nps; p++) {
    tfx_ckpt_part_path(path, sizeof path, dir, p, TFX_CKPT_ROWS);
    rc = access(path, F_OK) ? TFX_OK : tfx_rowfile_read_chain(dir, p, take_row, &x, err);
  }
  tfx_model_destroy(x.model);
  return rc;
}

/* with_rows: also the row files of lazy tables (whole); 0 leaves them to a tfx_rowindex. */
static int gather(const char *dir, int with_slots, int with_rows, tfx_weights *ws, tfx_err *err) {
  memset(ws, 0, sizeof *ws);
  int64_t step;
  int nps, rc = tfx_ckpt_verify(dir, &step, &nps, err);
  for (int p = 0; !rc && p < nps; p++) {
    char path[1200];
    tfx_ckpt *c;
    tfx_ckpt_part_path(path, sizeof path, dir, p, TFX_CKPT_SHARD);
    if ((rc = tfx_ckpt_read(path, &c, err))) {
      break;
    }
    rc = take_shard(ws, c, p, with_slots, err);
    tfx_ckpt_destroy(c);
  }
  if (!rc && with_rows) {
    rc = gather_rows(dir, nps, with_slots, ws, err);
  }
  if (rc) {
    tfx_weights_fini(ws);
    return rc;
  }
  ws->step = step;
  snprintf(ws->source, sizeof ws->source, "%s", dir);
  return TFX_OK;
}

int tfx_weights_from_checkpoint(const char *dir, tfx_weights *ws, tfx_err *err) {
  return gather(dir, 0, 1, ws, err);
}

int tfx_weights_dense_from_checkpoint(const char *dir, tfx_weights *ws, tfx_err *err) {
  return gather(dir, 0, 0, ws, err);
}

int tfx_weights_with_slots(const char *dir, tfx_weights *ws, tfx_err *err) {
  return gather(dir, 1, 1, ws, err);
}

int tfx_weights_from_run(const char *run_dir, tfx_weights *ws, tfx_err *err) {
  char dir[1100];
  int64_t step;
  int rc = tfx_ckpt_read_point(run_dir, &step, dir, sizeof dir, err);
  return rc ? rc : tfx_weights_from_checkpoint(dir, ws, err);
}

/* The step an export holds: its safetensors metadata's tfx_step (written by export), or 0 when it has none. */
static int64_t export_step(const tfx_st_file *f) {
  json_object *meta = f->metadata_json ? json_tokener_parse(f->metadata_json) : NULL, *step;
  int64_t at = 0;
  if (meta && json_object_object_get_ex(meta, "tfx_step", &step)) {
    at = strtoll(json_object_get_string(step), NULL, 10);
  }
  json_object_put(meta);
  return at;
}

int tfx_weights_from_export(const char *dir, tfx_weights *ws, tfx_err *err) {
  memset(ws, 0, sizeof *ws);
  char path[1100];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  tfx_st_file *f;
  int rc = tfx_st_read(path, &f, err);
  if (rc) {
    return rc;
  }
  ws->w = calloc((size_t)f->n + 1, sizeof *ws->w);
  for (int i = 0; ws->w && i < f->n && !rc; i++) {
    const tfx_st_tensor *t = &f->tensors[i];
    tfx_weight *w = &ws->w[ws->n];
    if (strcmp(t->dtype, "F32")) {
      continue;
    }
    snprintf(w->name, sizeof w->name, "%s", t->name);
    w->rank = t->rank;
    w->count = (t->end - t->begin) / 4;
    memcpy(w->shape, t->shape, sizeof t->shape);
    snprintf(w->holders, sizeof w->holders, "export");
    if (!(w->data = malloc(w->count * 4 + 4))) {
      rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
    } else {
      memcpy(w->data, f->data + t->begin, w->count * 4);
      ws->n++;
    }
  }
  if (!ws->w) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  ws->step = export_step(f);
  tfx_st_destroy(f);
  if (rc) {
    tfx_weights_fini(ws);
    return rc;
  }
  snprintf(ws->source, sizeof ws->source, "%s", path);
  return TFX_OK;
}

void tfx_weights_fini(tfx_weights *ws) {
  for (int i = 0; i < ws->n; i++) {
    free(ws->w[i].data);
  }
  free(ws->w);
  memset(ws, 0, sizeof *ws);
}

/* Copies the model's variables from ws; skip_lazy: lazy tables ws does not hold are left to a row source. */
static int load_model(const tfx_weights *ws, tfx_model *m, int skip_lazy, tfx_err *err) {
  for (int i = 0; i < tfx_model_nvars(m); i++) {
    tfx_var *v = tfx_model_var(m, i);
    const tfx_weight *w = NULL;
    for (int k = 0; k < ws->n && !w; k++) {
      w = !strcmp(ws->w[k].name, v->name) ? &ws->w[k] : NULL;
    }
    if (!w && skip_lazy && v->lazy) {
      continue;
    }
    if (!w) {
      return tfx_err_set(err, TFX_ESHAPE, "%s: no variable %s", ws->source, v->name);
    }
    if (w->count != v->count) {
      return tfx_err_set(err, TFX_ESHAPE, "%s: %s has %zu values, the model wants %zu", ws->source, v->name, w->count,
                         v->count);
    }
    memcpy(v->value, w->data, sizeof(float) * v->count);
  }
  return TFX_OK;
}

int tfx_weights_load_model(const tfx_weights *ws, tfx_model *m, tfx_err *err) {
  return load_model(ws, m, 0, err);
}

int tfx_weights_load_dense(const tfx_weights *ws, tfx_model *m, tfx_err *err) {
  return load_model(ws, m, 1, err);
}

static int has_file(const char *dir, const char *file) {
  char p[1200];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", dir, file);
  return stat(p, &st) == 0;
}

int tfx_weights_from_any(const char *path, tfx_weights *ws, tfx_err *err) {
  if (has_file(path, "model.safetensors")) {
    return tfx_weights_from_export(path, ws, err);
  }
  if (has_file(path, "manifest.json")) {
    return tfx_weights_from_checkpoint(path, ws, err);
  }
  return tfx_weights_from_run(path, ws, err);
}
