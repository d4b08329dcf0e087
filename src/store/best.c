/* RUN/checkpoints/best.json, the best checkpoint by a watched eval metric: written atomically, read back. */
#include "store/best.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs.h"

void tfx_best_path(const char *run_dir, char *out, size_t n) {
  snprintf(out, n, "%s/checkpoints/best.json", run_dir);
}

int tfx_best_write(const char *run_dir, const tfx_best *b, tfx_err *err) {
  char path[1100], text[512];
  tfx_best_path(run_dir, path, sizeof path);
  snprintf(text, sizeof text,
           "{\"metric\": \"%s\", \"mode\": \"%s\", \"value\": %.9g, \"step\": %lld, \"eval_step\": %lld}\n", b->metric,
           b->maximize ? "max" : "min", b->value, (long long)b->step, (long long)b->eval_step);
  return tfx_write_file(path, text, err);
}

/* The integer or number field key of obj into *out; 0 when absent or of another type. */
static int get_number(json_object *obj, const char *key, double *out) {
  json_object *v;
  if (!json_object_object_get_ex(obj, key, &v) ||
      !(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double))) {
    return 0;
  }
  *out = json_object_get_double(v);
  return 1;
}

int tfx_best_read(const char *run_dir, tfx_best *b, tfx_err *err) {
  char path[1100];
  tfx_best_path(run_dir, path, sizeof path);
  struct stat st;
  if (stat(path, &st) != 0) {
    return errno == ENOENT ? tfx_err_set(err, TFX_ENOTFOUND, "%s: no best checkpoint recorded", path)
                           : tfx_err_sys(err, TFX_ESYS, "%s", path);
  }
  json_object *root = json_object_from_file(path), *metric, *direction;
  double value, step, eval_step;
  int ok = root && json_object_object_get_ex(root, "metric", &metric) &&
           json_object_object_get_ex(root, "mode", &direction) && get_number(root, "value", &value) &&
           get_number(root, "step", &step) && get_number(root, "eval_step", &eval_step) && step >= 0;
  if (ok) {
    const char *way = json_object_get_string(direction); /* the file's "max" | "min", as tfx_best_write wrote it */
    tfx_best r = {.maximize = way[0] == 'm' && way[1] == 'a',
                  .value = value,
                  .step = (int64_t)step,
                  .eval_step = (int64_t)eval_step};
    snprintf(r.metric, sizeof r.metric, "%s", json_object_get_string(metric));
    *b = r;
  }
  json_object_put(root);
  return ok ? TFX_OK
            : tfx_err_set(err, TFX_ECORRUPT, "%s: not a best-checkpoint record (metric, mode, value, step)", path);
}

int64_t tfx_best_step(const char *run_dir) {
  tfx_best b;
  return tfx_best_read(run_dir, &b, NULL) == TFX_OK ? b.step : -1;
}
