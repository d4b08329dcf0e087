/* Fuzzes the predict body parser of tfx-node serve (tfx_serve_parse, cli/serve_request.c: a hand-written scanner
 * for dense bodies, then json-c and the run's LibSVM and CSV readers), which faces the network. The first byte
 * picks the model the body is parsed for: dense (4 inputs, scaled by 0.5), sparse (LibSVM lines) or feature
 * columns (objects); the rest is the body. Checked on success: 1 to TFX_SERVE_MAX_INSTANCES instances of the
 * model's width with finite values, and, for the dense model, that json-c reads the same body as the same numbers
 * (the scanner never accepts what is not JSON, nor reads a number differently; LibSVM lines are the reader's); on
 * failure, a message. */
#include <json-c/json.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/serve.h"
#include "config/config.h"
#include "data/dataset.h"

static const char *const models[3] = {
    "{\"model\": {\"input_shape\": [4], \"layers\": [{\"type\": \"dense\", \"units\": 3}]}, \"data\": {\"scale\": 0.5}}",
    "{\"model\": {\"input_shape\": [1000], \"loss\": \"softmax_cross_entropy\","
    " \"layers\": [{\"type\": \"embedding_bag\", \"units\": 3, \"combiner\": \"sum\"}]},"
    " \"data\": {\"format\": \"libsvm\", \"scale\": 1}}",
    "{\"model\": {\"features\": ["
    "{\"key\": \"cat\", \"type\": \"identity\", \"num_buckets\": 5},"
    "{\"key\": \"words\", \"type\": \"hash\", \"hash_bucket_size\": 1000, \"separator\": \" \"},"
    "{\"key\": \"x\", \"type\": \"numeric\", \"default_value\": -1}],"
    " \"layers\": [{\"type\": \"embedding_bag\", \"inputs\": \"cat\", \"units\": 2}, {\"type\": \"dense\", \"units\": 3}]},"
    " \"data\": {\"format\": \"csv\", \"label_column\": \"y\"}}"};
static const size_t dims[3] = {4, 1000, 0};

/* The dense body's numbers as json-c reads them must be the parsed ones (times the scale 0.5), row by row. */
static void same_as_json(const char *body, size_t len, const tfx_dataset *d) {
  json_tokener *tok = json_tokener_new();
  json_object *root = json_tokener_parse_ex(tok, body, (int)len), *list = NULL;
  if (json_tokener_get_error(tok) != json_tokener_success || !json_object_object_get_ex(root, "instances", &list) ||
      json_object_array_length(list) != d->n) {
    abort(); /* the scanner accepted a body json-c refuses, or read another number of instances */
  }
  if (json_object_is_type(json_object_array_get_idx(list, 0), json_type_string)) {
    json_object_put(root); /* LibSVM lines, read by the LibSVM reader */
    json_tokener_free(tok);
    return;
  }
  for (size_t i = 0; i < d->n; i++) {
    json_object *row = json_object_array_get_idx(list, i);
    if (!json_object_is_type(row, json_type_array) || json_object_array_length(row) != d->dim) {
      abort();
    }
    for (size_t j = 0; j < d->dim; j++) {
      float want = (float)json_object_get_double(json_object_array_get_idx(row, j)) * 0.5f;
      if (memcmp(&want, &d->x[i * d->dim + j], sizeof want) && !(want == 0 && d->x[i * d->dim + j] == 0)) {
        abort();
      }
    }
  }
  json_object_put(root);
  json_tokener_free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static tfx_config cfg[3];
  static size_t dim[3];
  static int ready;
  if (!ready) {
    for (int m = 0; m < 3; m++) {
      tfx_err err = {0};
      tfx_config_init(&cfg[m]);
      if (tfx_config_parse(&cfg[m], models[m], "fuzz_serve", &err)) {
        abort();
      }
      dim[m] = dims[m] ? dims[m] : (size_t)cfg[m].n_features;
    }
    ready = 1;
  }
  if (size < 1) {
    return 0;
  }
  int m = data[0] % 3;
  const char *body = (const char *)data + 1;
  size_t len = size - 1;
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  int top_k = -1;
  if (tfx_serve_parse(&cfg[m], dim[m], body, len, &d, &top_k, &err) != TFX_OK) {
    if (!err.msg[0] || d) {
      abort();
    }
    return 0;
  }
  if (!d || d->n < 1 || d->n > TFX_SERVE_MAX_INSTANCES || top_k < 0 || top_k > TFX_SERVE_MAX_TOP_K) {
    abort(); /* top_k: 0 when absent, else an integer in 1..TFX_SERVE_MAX_TOP_K */
  }
  if (d->x && d->dim) {
    for (size_t i = 0; i < d->n * d->dim; i++) {
      if (!isfinite(d->x[i])) {
        abort();
      }
    }
  }
  if (m == 0) {
    if (d->dim != dim[0]) {
      abort();
    }
    same_as_json(body, len, d);
  }
  tfx_dataset_destroy(d);
  return 0;
}
