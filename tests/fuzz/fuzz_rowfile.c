/* Fuzzes the row-file reader (tfx_rowfile_read, store/rowfile.c: the rows of lazy embedding tables in a
 * checkpoint): the input is the file. Every row handed to the callback must have a name, a width in range and
 * an id inside the declared ids; the callback reads every float (ASan sees an out-of-bounds row); a delta's
 * deleted id comes with no values. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz.h"
#include "store/rowfile.h"

static int row(const char *table, int64_t ids, int row_floats, int64_t id, const float *values, void *ctx) {
  float *sum = ctx;
  if (!table || row_floats <= 0 || id < 0 || id >= ids) {
    abort();
  }
  for (int i = 0; values && i < row_floats; i++) {
    *sum += values[i];
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  if (!path) {
    return 0;
  }
  float sum = 0;
  int64_t step = 0;
  tfx_err err = {0};
  if (tfx_rowfile_read(path, row, &sum, &step, &err) != TFX_OK && !err.msg[0]) {
    abort();
  }
  return 0;
}
