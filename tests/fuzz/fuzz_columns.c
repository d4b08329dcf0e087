/* Fuzzes feature columns over CSV (tfx_columns_load_csv, data/columns.c): the input is the CSV file (with its
 * header), read through a fixed set of columns: identity, hashed multi-valued with a weight column, a cross of
 * the two, and numeric columns with a default and with log1p. */
#include <stdint.h>
#include <stdlib.h>

#include "config/config.h"
#include "data/columns.h"
#include "data/dataset.h"
#include "fuzz.h"

static const char *features_json =
    "{\"model\": {\"features\": ["
    "{\"key\": \"cat\", \"type\": \"identity\", \"num_buckets\": 5},"
    "{\"key\": \"words\", \"type\": \"hash\", \"hash_bucket_size\": 1000, \"separator\": \" \", \"weight_key\": \"w\"},"
    "{\"name\": \"cross\", \"type\": \"crossed\", \"keys\": \"cat,words\", \"separator\": \" \", "
    "\"hash_bucket_size\": 97},"
    "{\"key\": \"x\", \"type\": \"numeric\", \"default_value\": -1},"
    "{\"key\": \"n\", \"type\": \"numeric\", \"normalizer\": \"log1p\"}],"
    " \"layers\": [{\"type\": \"embedding_bag\", \"inputs\": \"cat\", \"units\": 2}]},"
    " \"data\": {\"format\": \"csv\", \"label_column\": \"y\"}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static tfx_config cfg;
  static int ready;
  if (!ready) {
    tfx_err err = {0};
    tfx_config_init(&cfg);
    if (tfx_config_parse(&cfg, features_json, "fuzz_columns", &err)) {
      abort();
    }
    ready = 1;
  }
  const char *path = fuzz_file(data, size);
  if (!path) {
    return 0;
  }
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  if (tfx_columns_load_csv(&cfg, path, &d, &err) == TFX_OK) {
    tfx_dataset_destroy(d);
  } else if (!err.msg[0]) {
    abort();
  }
  return 0;
}
