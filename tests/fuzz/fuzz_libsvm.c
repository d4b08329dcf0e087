/* Fuzzes the LibSVM reader (tfx_libsvm_load). Byte 0 is the feature count (0 = inferred from the file); the
 * rest is the file. */
#include <stdint.h>
#include <stdlib.h>

#include "data/libsvm.h"
#include "fuzz.h"

/* Whether some "INDEX:" in the text names a feature above 2^20. The dense matrix of such a file is allocated as
 * designed (n x max index floats; TFX_ENOMEM when it cannot be had), but ASan writes shadow memory for every
 * multi-GiB chunk, which would exceed the RSS limit without the product using that memory: skipped. */
static int huge_index(const uint8_t *data, size_t size) {
  unsigned long long v = 0;
  for (size_t i = 0; i < size; i++) {
    if (data[i] >= '0' && data[i] <= '9') {
      v = v > (1ULL << 40) ? v : v * 10 + (data[i] - '0');
    } else {
      if (data[i] == ':' && v > (1ULL << 20)) {
        return 1;
      }
      v = 0;
    }
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || huge_index(data + 1, size - 1)) {
    return 0;
  }
  const char *path = fuzz_file(data + 1, size - 1);
  if (!path) {
    return 0;
  }
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  if (tfx_libsvm_load(path, data[0], &d, &err) == TFX_OK) {
    tfx_dataset_destroy(d);
  } else if (!err.msg[0]) {
    abort();
  }
  return 0;
}
