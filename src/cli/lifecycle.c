/* export, inspect and predict: the trainer's life cycle on a run directory or an export. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/scorer.h"
#include "common/fs.h"
#include "common/log.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/source.h"
#include "nn/model.h"
#include "observe/metrics.h"
#include "store/best.h"
#include "store/ckpt.h"
#include "store/export.h"
#include "store/safetensors.h"
#include "store/weights.h"
#include "train/classes.h"
#include "train/evaluate.h"
#include "train/labels.h"

/* The checkpoint directory a command asked for: --checkpoint best (best.json's), STEP or a directory, into dir;
 * "" without --checkpoint (the run's newest usable one). */
static int chosen_dir(const tfx_node *n, const tfx_cli_opts *o, char *dir, size_t size, tfx_err *err) {
  dir[0] = '\0';
  if (!o->checkpoint[0]) {
    return TFX_OK;
  }
  char *end;
  tfx_best best;
  int rc = strcmp(o->checkpoint, "best") ? TFX_EINVAL : tfx_best_read(n->run_dir, &best, err);
  if (!rc) { /* --best: the checkpoint best.json names (checkpoint.keep_best) */
    tfx_ckpt_dir(n->run_dir, best.step, dir, size);
    return TFX_OK;
  }
  if (rc != TFX_EINVAL) {
    return rc;
  }
  long long step = strtoll(o->checkpoint, &end, 10);
  if (*end) {
    snprintf(dir, size, "%s", o->checkpoint);
  } else {
    tfx_ckpt_dir(n->run_dir, step, dir, size);
  }
  return TFX_OK;
}

/* Loads the weights a command asked for: --checkpoint best, STEP or a checkpoint directory, else the run's newest. */
static int load_chosen(const tfx_node *n, const tfx_cli_opts *o, tfx_weights *ws, tfx_err *err) {
  char dir[1100];
  int rc = chosen_dir(n, o, dir, sizeof dir, err);
  if (rc) {
    return rc;
  }
  return dir[0] ? tfx_weights_from_checkpoint(dir, ws, err) : tfx_weights_from_run(n->run_dir, ws, err);
}

/* Makes a new export directory OUT/<unix time> (OUT/<unix time>-K when an export of the same second exists: an
 * earlier export is never written over) into dir[n]. */
static int new_export_dir(const char *out, char *dir, size_t n, tfx_err *err) {
  int rc = tfx_mkdirs(out, err);
  long long now = (long long)time(NULL);
  snprintf(dir, n, "%s/%lld", out, now);
  for (int k = 2; !rc && mkdir(dir, 0755) != 0; k++) {
    if (errno != EEXIST || k > 1000) {
      return tfx_err_sys(err, TFX_ESYS, "mkdir %s", dir);
    }
    snprintf(dir, n, "%s/%lld-%d", out, now, k);
  }
  return rc;
}

int tfx_export_run(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err) {
  if (!o->out_dir[0]) {
    return tfx_err_set(err, TFX_EINVAL, "export needs --out DIR");
  }
  char cfgpath[1100], dir[1200];
  snprintf(cfgpath, sizeof cfgpath, "%s/config.json", n->run_dir);
  char *config = tfx_read_text(cfgpath, SIZE_MAX / 4, TFX_ENOTFOUND, NULL);
  if (!config) {
    return tfx_err_sys(err, TFX_ENOTFOUND, "%s", cfgpath);
  }
  tfx_weights ws;
  int rc = load_chosen(n, o, &ws, err); /* --checkpoint STEP ships that step, not the newest */
  if (!rc && !(rc = new_export_dir(o->out_dir, dir, sizeof dir, err)) &&
      !(rc = tfx_export_write(&ws, config, dir, n->run_dir, err))) {
    printf("exported step %lld (%d variables) to %s\n", (long long)ws.step, ws.n, dir);
  }
  tfx_weights_fini(&ws); /* zeroed by a failed read, so always safe */
  free(config);
  return rc;
}

static void print_values(const tfx_weight *w) {
  for (size_t i = 0; i < w->count; i++) {
    printf("%.7g%s", w->data[i], (i + 1) % 8 == 0 || i + 1 == w->count ? "\n" : " ");
  }
}

int tfx_inspect_run(const tfx_cli_opts *o, tfx_err *err) {
  if (!o->target[0]) {
    return tfx_err_set(err, TFX_EINVAL, "inspect needs RUN_DIR, CHECKPOINT_DIR or EXPORT_DIR");
  }
  tfx_weights ws;
  int rc = tfx_weights_from_any(o->target, &ws, err), found = 0;
  if (rc) {
    return rc;
  }
  if (!o->var[0]) {
    printf("source %s step %lld\n%-36s %-20s %-6s %12s  %s\n", ws.source, (long long)ws.step, "variable", "shape",
           "dtype", "bytes", "held by");
  }
  for (int i = 0; i < ws.n; i++) {
    const tfx_weight *w = &ws.w[i];
    char shape[96] = "[";
    for (int d = 0; d < w->rank && strlen(shape) < sizeof shape - 2; d++) {
      snprintf(shape + strlen(shape), sizeof shape - strlen(shape) - 1, "%s%lld", d ? ", " : "",
               (long long)w->shape[d]);
    }
    strncat(shape, "]", sizeof shape - strlen(shape) - 1);
    if (!o->var[0]) {
      printf("%-36s %-20s %-6s %12zu  %s\n", w->name, shape, "F32", w->count * 4, w->holders);
    } else if (!strcmp(o->var, w->name)) {
      found = 1;
      printf("%s %s float32\n", w->name, shape);
      print_values(w);
    }
  }
  if (o->var[0] && !found) {
    rc = tfx_err_set(err, TFX_ENOTFOUND, "%s: no variable '%s'", ws.source, o->var);
  }
  tfx_weights_fini(&ws);
  return rc;
}

/* The classes of a multi-label prediction (each probability above 0.5) as "0|2" (CSV) or "0, 2" (JSON). */
static void write_set(FILE *out, int csv, const float *p, int classes) {
  for (int j = 0, n = 0; j < classes; j++) {
    if (p[j] > 0.5f) {
      fprintf(out, "%s%d", n++ ? (csv ? "|" : ", ") : "", j);
    }
  }
}

/* One prediction row as a JSON line, or a CSV row (index,class,p0,...); want_class 2: the multi-label set. */
static void write_row(FILE *out, int csv, size_t index, const float *p, int classes, int want_probs, int want_class) {
  int best = 0;
  for (int j = 1; j < classes; j++) {
    best = p[j] > p[best] ? j : best;
  }
  fprintf(out, csv ? "%zu" : "{\"index\": %zu", index);
  if (want_class == 2) {
    fputs(csv ? "," : ", \"classes\": [", out);
    write_set(out, csv, p, classes);
    fputs(csv ? "" : "]", out);
  } else if (want_class) {
    fprintf(out, csv ? ",%d" : ", \"class\": %d", best);
  }
  if (want_probs) {
    fputs(csv ? "" : ", \"probabilities\": [", out);
    for (int j = 0; j < classes; j++) {
      fprintf(out, "%s%.6g", csv ? "," : j ? ", " : "", p[j]);
    }
    fputs(csv ? "" : "]", out);
  }
  fputs(csv ? "\n" : "}\n", out);
}

/* The input examples, scaled as in training: IDX images (no labels needed) or, when the run's data.format says
 * so, CSV / LibSVM / TFRecord files (their label column or feature is read and ignored). */
static int load_inputs(const tfx_config *cfg, const char *input, size_t dim, tfx_dataset **out, tfx_err *err) {
  if (cfg->data_format != TFX_FORMAT_IDX) {
    tfx_config c = *cfg;
    snprintf(c.eval_images, sizeof c.eval_images, "%s", input);
    return tfx_dataset_load_config(&c, 1, dim, out, err);
  }
  uint8_t *raw;
  int rank;
  int64_t dims[4];
  int rc = tfx_idx_read(input, &raw, &rank, dims, err);
  if (rc) {
    return rc;
  }
  size_t per = 1;
  for (int i = 1; i < rank; i++) {
    per *= (size_t)dims[i];
  }
  tfx_dataset *d = calloc(1, sizeof *d);
  if (per != dim) {
    rc = tfx_err_set(err, TFX_ESHAPE, "%s: %zu values per example, the model's input takes %zu", input, per, dim);
  } else if (!d || !(d->x = malloc(sizeof(float) * per * (size_t)dims[0])) ||
             !(d->y = calloc((size_t)dims[0], sizeof(int32_t)))) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  if (!rc) {
    d->n = (size_t)dims[0];
    d->dim = per;
    for (size_t i = 0; i < d->n * per; i++) {
      d->x[i] = raw[i];
    }
    tfx_scorer_scale(cfg, d->x, d->n * per);
    *out = d;
  } else {
    tfx_dataset_destroy(d);
  }
  free(raw);
  return rc;
}

/* --keys: a comma-separated list of probabilities and classes (empty: both) into *probs and *cls. TFX_EINVAL
 * naming a key that is neither (a typo used to leave only the indices, with exit 0). */
static int parse_keys(const char *keys, int *probs, int *cls, tfx_err *err) {
  int p = !keys[0], c = !keys[0];
  for (const char *k = keys; *k;) {
    size_t n = strcspn(k, ",");
    if (n == 13 && !strncmp(k, "probabilities", n)) {
      p = 1;
    } else if (n == 7 && !strncmp(k, "classes", n)) {
      c = 1;
    } else {
      return tfx_err_set(err, TFX_EINVAL, "--keys: unknown key '%.*s' (want probabilities, classes)", (int)n, k);
    }
    k += n + (k[n] == ',');
  }
  *probs = p;
  *cls = c;
  return TFX_OK;
}

static void write_header(FILE *out, size_t classes, int probs, int cls) {
  fputs("index", out);
  if (cls) {
    fputs(cls == 2 ? ",classes" : ",class", out);
  }
  for (size_t j = 0; probs && j < classes; j++) {
    fprintf(out, ",p%zu", j);
  }
  fputc('\n', out);
}

static int predict_all(tfx_scorer *s, const tfx_cli_opts *o, FILE *out, tfx_err *err) {
  size_t classes = tfx_scorer_classes(s), batch = (size_t)tfx_scorer_max_batch(s);
  tfx_dataset *d = NULL;
  int rc = load_inputs(tfx_scorer_config(s), o->input, tfx_scorer_inputs(s), &d, err);
  if (rc) {
    return rc;
  }
  float *p = malloc(sizeof(float) * classes * batch);
  if (!p) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  int probs = 1, cls = 1;
  parse_keys(o->keys, &probs, &cls, NULL); /* checked by tfx_predict_run */
  cls = cls && tfx_scorer_config(s)->multi_label ? 2 : cls; /* a set of classes */
  size_t len = strlen(o->output);
  int csv = len > 4 && !strcmp(o->output + len - 4, ".csv");
  if (!rc && csv) {
    write_header(out, classes, probs, cls);
  }
  for (size_t i = 0; !rc && i < d->n; i += batch) {
    int b = (int)(d->n - i < batch ? d->n - i : batch);
    tfx_err e = {0};
    int at = 0;
    if ((rc = tfx_scorer_run(s, d, i, b, p, &at, &e))) {
      rc = tfx_err_set(err, rc, "%s: example %zu: %s", o->input, i + (size_t)at, e.msg);
      break;
    }
    for (int r = 0; r < b; r++) {
      write_row(out, csv, i + (size_t)r, p + (size_t)r * classes, (int)classes, probs, cls);
    }
  }
  tfx_dataset_destroy(d);
  free(p);
  return rc;
}

/* Creates tmp, a new file beside path (path.XXXXXX, with the mode fopen(path, "w") would give), open in *out. */
static int open_beside(const char *path, char *tmp, size_t size, FILE **out, tfx_err *err) {
  snprintf(tmp, size, "%s.XXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    return tfx_err_sys(err, TFX_ESYS, "create a temporary file beside %s", path);
  }
  mode_t mask = umask(0);
  umask(mask);
  FILE *f = fchmod(fd, 0666 & ~mask) ? NULL : fdopen(fd, "w");
  if (!f) {
    int rc = tfx_err_sys(err, TFX_ESYS, "open %s", tmp);
    close(fd);
    unlink(tmp);
    return rc;
  }
  *out = f;
  return TFX_OK;
}

/* Makes a rename in path's directory durable. */
static void sync_dir_of(const char *path) {
  char copy[1100];
  snprintf(copy, sizeof copy, "%s", path);
  int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

/* Closes f; if rc is TFX_OK flushes it to disk and renames tmp over path, else (or if that fails) removes tmp,
 * leaving any file at path as it was. Returns rc or the write error. */
static int close_beside(FILE *f, const char *tmp, const char *path, int rc, tfx_err *err) {
  if (!rc && (fflush(f) || fsync(fileno(f)))) {
    rc = tfx_err_sys(err, TFX_ESYS, "write %s", tmp);
  }
  if (fclose(f) && !rc) {
    rc = tfx_err_sys(err, TFX_ESYS, "write %s", tmp);
  }
  if (!rc && rename(tmp, path)) {
    rc = tfx_err_sys(err, TFX_ESYS, "rename %s to %s", tmp, path);
  }
  if (rc) {
    unlink(tmp);
  } else {
    sync_dir_of(path);
  }
  return rc;
}

/* Writes the predictions to stdout, in place to a device or FIFO, or else atomically to o->output: rows reach it
 * only when every example was predicted, so a refused input leaves no file (or the previous one untouched). */
static int predict_to(tfx_scorer *m, const tfx_cli_opts *o, tfx_err *err) {
  struct stat st;
  if (!o->output[0]) {
    return predict_all(m, o, stdout, err);
  }
  if (!stat(o->output, &st) && !S_ISREG(st.st_mode)) {
    FILE *out = fopen(o->output, "w");
    int rc = out ? predict_all(m, o, out, err) : tfx_err_sys(err, TFX_ESYS, "open %s", o->output);
    if (out && fclose(out) && !rc) {
      rc = tfx_err_sys(err, TFX_ESYS, "write %s", o->output);
    }
    return rc;
  }
  char tmp[600];
  FILE *out = NULL;
  int rc = open_beside(o->output, tmp, sizeof tmp, &out, err);
  return rc ? rc : close_beside(out, tmp, o->output, predict_all(m, o, out, err), err);
}

int tfx_predict_run(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err) {
  if (!o->input[0]) {
    return tfx_err_set(err, TFX_EINVAL, "predict needs --input FILE (IDX images)");
  }
  int probs, cls;
  if (parse_keys(o->keys, &probs, &cls, err)) {
    return TFX_EINVAL;
  }
  if (o->target[0] && o->checkpoint[0]) {
    return tfx_err_set(err, TFX_EINVAL, "predict: --checkpoint picks a run's checkpoint; an export has one step");
  }
  char dir[1100] = "";
  tfx_scorer *s = NULL;
  int rc = o->target[0] ? tfx_scorer_open_export(o->target, 1000, &s, err) : chosen_dir(n, o, dir, sizeof dir, err);
  if (!rc && !o->target[0]) {
    rc = tfx_scorer_open_run(n->run_dir, dir, 1000, &s, err);
  }
  if (!rc) {
    rc = predict_to(s, o, err);
  }
  tfx_scorer_close(s);
  return rc;
}

/* Evaluates m on d, prints the result and appends it to the run's metrics; data the model cannot score (a label
 * outside its classes, an id outside a table) is an error naming the file and the examples, with nothing recorded. */
static int score(const tfx_node *n, const tfx_config *cfg, tfx_model *m, const tfx_dataset *d, const tfx_weights *ws,
                 tfx_err *err) {
  tfx_eval_result r;
  tfx_err bad = {0};
  tfx_pmetrics *pm = NULL; /* the plugin's own metrics, as in training */
  int rc = tfx_pmetrics_open(cfg, &pm, err);
  if (rc) {
    return rc;
  }
  if ((rc = tfx_evaluate_range(m, d, 1000, 0, d->n, pm, &r, &bad))) {
    tfx_pmetrics_close(pm);
    return tfx_err_set(err, rc, "eval data %s: %s", tfx_config_eval_file(cfg), bad.msg);
  }
  printf("step %lld: eval loss %.4f accuracy %.4f top%d %.4f over %zu examples (%s)\n", (long long)ws->step, r.loss,
         r.accuracy, r.top_k, r.top5, r.examples, ws->source);
  tfx_confusion_print(&r, stdout);
  tfx_eval_report rep;
  tfx_eval_report_init(&rep, cfg->metrics, &r);
  tfx_eval_report_add_plugin(&rep, pm, &r, "evaluate"); /* names borrowed from pm until it closes */
  tfx_metrics *mt = NULL;
  char *json = tfx_eval_confusion_json(cfg->metrics, &r);
  if (!(rc = tfx_metrics_open(n->run_dir, &mt, err))) {
    tfx_metrics_write_json(mt, "eval", ws->step, rep.names, rep.values, rep.n, json);
  }
  tfx_pmetrics_close(pm);
  free(json);
  tfx_metrics_close(mt);
  return rc;
}

int tfx_evaluate_run(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err) {
  char cfgpath[1100];
  snprintf(cfgpath, sizeof cfgpath, "%s/config.json", n->run_dir);
  tfx_config cfg;
  tfx_config_init(&cfg);
  int rc = tfx_config_load_saved(&cfg, cfgpath, err);
  for (int i = 0; !rc && o->data[0] && strcmp(o->data, "eval"); i++) {
    if (i == cfg.n_valsets) {
      return tfx_err_set(err, TFX_ENOTFOUND, "--data %s: the run has no such validation set", o->data);
    }
    if (strcmp(cfg.valsets[i].name, o->data)) {
      continue;
    }
    snprintf(cfg.eval_images, sizeof cfg.eval_images, "%s", cfg.valsets[i].images);
    snprintf(cfg.eval_labels, sizeof cfg.eval_labels, "%s", cfg.valsets[i].labels);
    break;
  }
  tfx_weights ws;
  if (rc || (rc = load_chosen(n, o, &ws, err))) {
    return rc;
  }
  tfx_model *m = NULL;
  tfx_dataset *d = NULL;
  if (!(rc = tfx_model_create(&cfg, 1000, &m, err)) && !(rc = tfx_weights_load_model(&ws, m, err)) &&
      !(rc = tfx_labels_load(m, &cfg, 1, &d, err))) {
    if (o->steps > 0 && (size_t)o->steps * 1000 < d->n) {
      d->n = (size_t)o->steps * 1000; /* N batches of 1000 */
    }
    rc = score(n, &cfg, m, d, &ws, err);
  }
  tfx_dataset_destroy(d);
  tfx_model_destroy(m);
  tfx_weights_fini(&ws);
  return rc;
}
