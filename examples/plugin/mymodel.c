/* An example tfx model plugin: a wide-and-deep classifier for 28x28 images of raw intensities (data.scale 1).
 *
 *   wide:  the pixels scaled to [0, 1] times a declared [784, 10] kernel (a linear model)
 *   deep:  each pixel intensity (0..255) looks up a row of a declared [256, dim] embedding table (row-sparse
 *          updates end to end), then a relu layer of `hidden` units and a dense layer of 10
 *   logits = wide + deep + a declared bias
 *
 * params: {"dim": 8, "hidden": 128, "vocab": 256, "stop_at": 0.0, "log": "/path", "fail": ""}; a vocab above 256
 * leaves table rows no pixel ever looks up, which row-sparse (lazy) updates never touch. The hook appends every event
 * to params.log (when given) and asks to stop once an evaluation reaches params.stop_at (when > 0).
 * params.fail shows how tfx refuses a plugin that misbehaves: "build" (build returns an error), "zero_dim" (a
 * variable with a 0 dimension), "mismatch" (a wide kernel whose shape does not fit the input). */
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

/* The variables the ops below use; a failure here is reported by tfx with the variable's name. */
static int declare(tfx_builder *b, int dim, int vocab, const char *fail) {
  int wide[2] = {strcmp(fail, "mismatch") ? 784 : 100, 10}, table[2] = {vocab, strcmp(fail, "zero_dim") ? dim : 0};
  int bias[1] = {10};
  if (tfx_builder_variable(b, "wide/kernel", 2, wide, "zeros", 1)) return 1;
  if (tfx_builder_variable(b, "deep/embeddings", 2, table, "uniform:0.05", 1)) return 1;
  return tfx_builder_variable(b, "logits/bias", 1, bias, "zeros", 1);
}

static int build(tfx_builder *b, const char *params) {
  int shape[1] = {784}, dim = (int)param(params, "dim", 8), hidden = (int)param(params, "hidden", 128);
  int vocab = (int)param(params, "vocab", 256);
  char layer[256], fail[32];
  stop_at = param(params, "stop_at", 0);
  param_string(params, "log", log_path, sizeof log_path);
  param_string(params, "fail", fail, sizeof fail);
  if (!strcmp(fail, "build")) return 7;
  if (tfx_builder_input(b, 1, shape) || declare(b, dim, vocab, fail)) return 1;
  /* wide: a linear model of the scaled pixels */
  if (tfx_builder_layer(b, "{\"type\": \"scale\", \"name\": \"scaled\", \"rate\": 0.00392156862745098}")) return 1;
  if (tfx_builder_op(b, "matmul", "wide", "scaled", "wide/kernel")) return 1;
  /* deep: an embedding of the raw intensities, then an MLP */
  if (tfx_builder_op(b, "lookup", "embed", "input", "deep/embeddings")) return 1;
  snprintf(layer, sizeof layer, "{\"type\": \"dense\", \"name\": \"hidden\", \"units\": %d, \"activation\": \"relu\"}",
           hidden);
  if (tfx_builder_layer(b, layer)) return 1;
  if (tfx_builder_layer(b, "{\"type\": \"dense\", \"name\": \"deep\", \"units\": 10}")) return 1;
  /* logits = wide + deep + bias */
  if (tfx_builder_op(b, "add", "wide_plus_deep", "wide,deep", NULL)) return 1;
  if (tfx_builder_op(b, "bias_add", "logits", NULL, "logits/bias")) return 1;
  if (tfx_builder_metrics(b, "loss,accuracy,top_3")) return 1;
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
    "wide-and-deep", build, hook};

const tfx_plugin *tfx_plugin_entry(void) {
  return &plugin;
}
