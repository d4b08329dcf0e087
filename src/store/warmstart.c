/* Warm start from another run's weights. */
#include "store/warmstart.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "store/weights.h"

/* Nonzero when name starts with one of the comma-separated prefixes (or the list is empty). */
static int selected(const char *name, const char *prefixes) {
  if (!*prefixes) {
    return 1;
  }
  for (const char *p = prefixes; *p;) {
    size_t n = strcspn(p, ",");
    if (n && strncmp(name, p, n) == 0) {
      return 1;
    }
    p += n + (p[n] == ',');
  }
  return 0;
}

/* The source name of model variable `name` under "src:dst,..." renames (itself when not renamed). */
static void source_name(const char *name, const char *renames, char *out, size_t n) {
  snprintf(out, n, "%s", name);
  for (const char *p = renames; *p;) {
    size_t len = strcspn(p, ","), colon = strcspn(p, ":");
    if (colon < len && strlen(name) == len - colon - 1 && strncmp(p + colon + 1, name, len - colon - 1) == 0) {
      snprintf(out, n, "%.*s", (int)colon, p);
    }
    p += len + (p[len] == ',');
  }
}

static const tfx_weight *find(const tfx_weights *ws, const char *name) {
  for (int i = 0; i < ws->n; i++) {
    if (!strcmp(ws->w[i].name, name)) {
      return &ws->w[i];
    }
  }
  return NULL;
}

int tfx_warm_start(const tfx_config *cfg, tfx_model *m, int *taken, tfx_err *err) {
  tfx_weights ws;
  int rc = tfx_weights_from_any(cfg->warm_from, &ws, err), count = 0;
  if (rc) {
    return rc;
  }
  for (int i = 0; i < tfx_model_nvars(m) && !rc; i++) {
    tfx_var *v = tfx_model_var(m, i);
    char src[160];
    source_name(v->name, cfg->warm_rename, src, sizeof src);
    const tfx_weight *w = selected(v->name, cfg->warm_restore) ? find(&ws, src) : NULL;
    if (!w) {
      continue;
    }
    if (w->count != v->count) {
      rc = tfx_err_set(err, TFX_ESHAPE, "warm_start: %s has %zu values in %s, the model's %s has %zu", src, w->count,
                       ws.source, v->name, v->count);
      break;
    }
    memcpy(v->value, w->data, sizeof(float) * v->count);
    count++;
  }
  if (!rc && cfg->warm_restore[0] && count == 0) {
    rc = tfx_err_set(err, TFX_ENOTFOUND, "warm_start: no variable of %s matches to_restore '%s'", ws.source,
                     cfg->warm_restore);
  }
  if (!rc) {
    tfx_log(TFX_LOG_INFO, "WARM-START", "took %d variable(s) from %s (step %lld)", count, ws.source,
            (long long)ws.step);
  }
  if (!rc && taken) {
    *taken = count;
  }
  tfx_weights_fini(&ws);
  return rc;
}
