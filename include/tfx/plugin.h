/* tfx plugin API: write a model in C the way tensorfx's ModelBuilder or Determined's trials let you, and hooks
 * into the training life cycle (Estimator's SessionRunHooks).
 *
 * A plugin is a shared object that exports `tfx_plugin_entry`. The experiment names it:
 *   "model": {"plugin": "libmymodel.so", "params": {...}}
 * tfx loads it with dlopen in the process that reads the experiment (the chief, or `tfx-node train`), calls
 * `build` with the params as JSON text to declare the model from tfx's layers (backward is derived by tfx:
 * every layer has its gradient), and sends the resulting model to the workers like any other. `hook`, when not
 * NULL, is called at train begin/end, after every metrics report, after every evaluation and after every
 * checkpoint; returning nonzero asks the run to stop (it checkpoints and ends normally).
 * A plugin built against another TFX_PLUGIN_ABI_VERSION is refused with a clear error. */
#ifndef TFX_PLUGIN_API_H
#define TFX_PLUGIN_API_H

#define TFX_PLUGIN_ABI_VERSION 1

typedef struct tfx_builder tfx_builder;

/* Sets the input shape of one example: 1 to 3 dimensions (height, width, channels for images). 0 on success. */
int tfx_builder_input(tfx_builder *b, int rank, const int *shape);
/* Appends a layer given as a JSON object, exactly as in the experiment's model.layers, e.g.
 * {"type": "dense", "units": 128, "activation": "relu"}. 0 on success; the error is reported by tfx. */
int tfx_builder_layer(tfx_builder *b, const char *layer_json);
/* Sets the loss: softmax_cross_entropy, sigmoid_cross_entropy or mse. 0 on success. */
int tfx_builder_loss(tfx_builder *b, const char *loss);

typedef enum tfx_hook_event {
  TFX_HOOK_TRAIN_BEGIN,
  TFX_HOOK_STEP,       /* a training metrics report: step, loss, accuracy */
  TFX_HOOK_EVAL,       /* an evaluation: step, loss, accuracy on the eval set */
  TFX_HOOK_CHECKPOINT, /* a complete checkpoint at step */
  TFX_HOOK_TRAIN_END,
} tfx_hook_event;

typedef struct tfx_hook_info {
  tfx_hook_event event;
  long long step;
  double loss, accuracy;
  const char *run_dir;
} tfx_hook_info;

typedef struct tfx_plugin {
  int abi_version; /* TFX_PLUGIN_ABI_VERSION */
  const char *name;
  /* Declares the model from params_json (the experiment's model.params, "{}" if absent); 0 on success. */
  int (*build)(tfx_builder *b, const char *params_json);
  /* Optional: sees every event; returns nonzero to request a stop. */
  int (*hook)(const tfx_hook_info *info);
} tfx_plugin;

/* The one symbol a plugin exports. */
const tfx_plugin *tfx_plugin_entry(void);

#endif
