/* Label sets of multi-label examples. */
#include "common/labelset.h"

#include <stdlib.h>
#include <string.h>

int tfx_label_set_parse(const char *text, char sep, int32_t *out) {
  uint32_t bits = 0;
  const char *p = text + strspn(text, " \t");
  while (*p) {
    char *end;
    long k = strtol(p, &end, 10);
    if (end == p || k < 0 || k >= TFX_LABEL_SET_MAX) {
      return -1;
    }
    bits |= 1u << k;
    p = end + strspn(end, " \t");
    if (*p && *p != sep) {
      return -1;
    }
    p += *p == sep;
  }
  *out = (int32_t)(bits | 0x80000000u);
  return 0;
}
