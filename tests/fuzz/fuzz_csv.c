/* Fuzzes the CSV reader (tfx_csv_load). Byte 0 picks the options: bit 0 = has a header row, bits 1-2 = the
 * label column ("0", "1", "label", "-1"); the rest is the file. */
#include <stdint.h>
#include <stdlib.h>

#include "data/csv.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const labels[] = {"0", "1", "label", "-1"};
  if (size < 1) {
    return 0;
  }
  const char *path = fuzz_file(data + 1, size - 1);
  if (!path) {
    return 0;
  }
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  if (tfx_csv_load(path, labels[(data[0] >> 1) & 3], data[0] & 1, &d, &err) == TFX_OK) {
    tfx_dataset_destroy(d);
  } else if (!err.msg[0]) {
    abort();
  }
  return 0;
}
