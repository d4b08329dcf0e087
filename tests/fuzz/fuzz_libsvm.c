/* Fuzzes the LibSVM reader (tfx_libsvm_load). Byte 0 is the feature count (0 = inferred from the file); the
 * rest is the file. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz.h"
#include "libsvm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) {
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
