/* Fuzzes the experiment parser: tfx_config_parse on the input as a JSON file, then validation and printing of
 * what was accepted (the printed JSON must parse again). */
#include <stdint.h>
#include <stdlib.h>

#include "config/config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_cstr(data, size);
  if (!text) {
    return 0;
  }
  static tfx_config cfg; /* large; static keeps it off the fuzzer's stack */
  tfx_config_init(&cfg);
  tfx_err err = {0};
  if (tfx_config_parse(&cfg, text, "fuzz.json", &err) == TFX_OK) {
    tfx_config_validate(&cfg, NULL);
    char *json = tfx_config_to_json(&cfg);
    static tfx_config again;
    tfx_config_init(&again);
    if (json && tfx_config_parse(&again, json, "printed", &err) != TFX_OK) {
      abort(); /* what we print must read back */
    }
    free(json);
  } else if (!err.msg[0]) {
    abort();
  }
  free(text);
  return 0;
}
