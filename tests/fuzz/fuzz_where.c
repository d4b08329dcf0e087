/* Fuzzes the `tfx-node runs --where` parser (tfx_runindex_parse_where): the input is the text. Accepted text gives
 * between 1 and TFX_RUN_FILTERS_MAX conditions, each with a NUL-terminated name and an operator in range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "store/runindex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_cstr(data, size);
  if (!text) {
    return 0;
  }
  tfx_run_filter f[TFX_RUN_FILTERS_MAX];
  int n = -1;
  tfx_err err = {0};
  if (tfx_runindex_parse_where(text, f, TFX_RUN_FILTERS_MAX, &n, &err) == TFX_OK) {
    if (n < 0 || n > TFX_RUN_FILTERS_MAX) {
      abort();
    }
    for (int i = 0; i < n; i++) {
      if (!memchr(f[i].name, '\0', sizeof f[i].name) || !memchr(f[i].kind, '\0', sizeof f[i].kind) || f[i].op < 0) {
        abort();
      }
    }
  } else if (!err.msg[0]) {
    abort();
  }
  free(text);
  return 0;
}
