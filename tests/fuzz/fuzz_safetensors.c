/* Fuzzes the safetensors reader (tfx_st_read, store/safetensors.c): the input is the file. A file it accepts
 * must hold tensors whose byte ranges lie inside the data section, and each tensor must be found by its name. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz.h"
#include "store/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  if (!path) {
    return 0;
  }
  tfx_st_file *f = NULL;
  tfx_err err = {0};
  if (tfx_st_read(path, &f, &err) != TFX_OK) {
    if (!err.msg[0]) {
      abort();
    }
    return 0;
  }
  for (int i = 0; i < f->n; i++) {
    if (tfx_st_find(f, f->tensors[i].name) == NULL) {
      abort();
    }
  }
  tfx_st_destroy(f);
  return 0;
}
