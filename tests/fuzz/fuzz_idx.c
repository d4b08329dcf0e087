/* Fuzzes the IDX reader (tfx_idx_read, through zlib: plain or gzip input) on the input as a file. */
#include <stdint.h>
#include <stdlib.h>

#include "data/dataset.h"
#include "data/idx.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  if (!path) {
    return 0;
  }
  uint8_t *bytes = NULL;
  int rank = 0;
  int64_t dims[4];
  tfx_err err = {0};
  if (tfx_idx_read(path, &bytes, &rank, dims, &err) == TFX_OK) {
    size_t count = 1;
    for (int i = 0; i < rank; i++) {
      count *= (size_t)dims[i];
    }
    volatile uint8_t last = count ? bytes[count - 1] : 0; /* the whole buffer is there */
    (void)last;
    free(bytes);
  } else if (!err.msg[0]) {
    abort();
  }
  return 0;
}
