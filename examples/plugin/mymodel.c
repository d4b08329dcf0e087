/* An example tfx model plugin: each pixel intensity (0..255) looks up a learned embedding row (row-sparse
 * updates end to end), then an MLP. params: {"dim": 8, "hidden": 128, "stop_at": 0.0, "log": "/path"}.
 * The hook appends every event to params.log (when given) and asks to stop once an evaluation reaches
 * params.stop_at (when > 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tfx/plugin.h>

static double stop_at;
static char log_path[512];

/* The number after "key": in a flat JSON object (the params are ours, so a full parser is not needed). */
static double param(const char *json, const char *key, double fallback) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  return p ? atof(p + strlen(pat)) : fallback;
}

static void param_string(const char *json, const char *key, char *out, size_t n) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":\"", key);
  const char *p = strstr(json, pat);
  out[0] = '\0';
  if (p) snprintf(out, n, "%.*s", (int)strcspn(p + strlen(pat), "\""), p + strlen(pat));
}

static int build(tfx_builder *b, const char *params) {
  int shape[1] = {784}, dim = (int)param(params, "dim", 8), hidden = (int)param(params, "hidden", 128);
  char layer[256];
  stop_at = param(params, "stop_at", 0);
  param_string(params, "log", log_path, sizeof log_path);
  if (tfx_builder_input(b, 1, shape)) return 1;
  snprintf(layer, sizeof layer, "{\"type\": \"embedding\", \"input_dim\": 256, \"units\": %d}", dim);
  if (tfx_builder_layer(b, layer)) return 1;
  snprintf(layer, sizeof layer, "{\"type\": \"dense\", \"units\": %d, \"activation\": \"relu\"}", hidden);
  if (tfx_builder_layer(b, layer)) return 1;
  if (tfx_builder_layer(b, "{\"type\": \"dense\", \"units\": 10}")) return 1;
  return tfx_builder_loss(b, "softmax_cross_entropy");
}

static int hook(const tfx_hook_info *info) {
  static const char *const names[] = {"train_begin", "step", "eval", "checkpoint", "train_end"};
  if (log_path[0]) {
    FILE *f = fopen(log_path, "a");
    if (f) fprintf(f, "%s %lld %.4f\n", names[info->event], info->step, info->accuracy), fclose(f);
  }
  return info->event == TFX_HOOK_EVAL && stop_at > 0 && info->accuracy >= stop_at;
}

static const tfx_plugin plugin = {
#ifdef MYMODEL_WRONG_ABI
    TFX_PLUGIN_ABI_VERSION + 1,
#else
    TFX_PLUGIN_ABI_VERSION,
#endif
    "pixel-embedding-mlp", build, hook};

const tfx_plugin *tfx_plugin_entry(void) {
  return &plugin;
}
