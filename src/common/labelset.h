/* Multi-label examples (model.multi_label): the classes of an example ride in its int32 label, so every path a
 * label takes (readers, shuffling, batches, the wire) carries them unchanged. A single class k stays k; a set is
 * TFX_LABEL_SET plus a bit per class (classes 0 to TFX_LABEL_SET_MAX - 1). data's readers write sets ("1|4" in a
 * CSV cell, an empty cell: no class; "1,4" as a LibSVM label) and nn's loss reads them. Pure functions. */
#ifndef TFX_COMMON_LABELSET_H
#define TFX_COMMON_LABELSET_H

#include <stdint.h>

#define TFX_LABEL_SET INT32_MIN
#define TFX_LABEL_SET_MAX 31 /* classes a set can name */

/* Parses text, class ids in [0, TFX_LABEL_SET_MAX) separated by sep (an empty text: the empty set), into *out as
 * TFX_LABEL_SET | bits; 0 on success, -1 (*out untouched) when text is not such a set. */
int tfx_label_set_parse(const char *text, char sep, int32_t *out);

/* The classes of label y as bits: 1 << y for a single class in [0, TFX_LABEL_SET_MAX), a set's bits, else 0. */
static inline uint32_t tfx_label_bits(int32_t y) {
  if (y < 0) {
    return y == TFX_LABEL_SET ? 0 : (uint32_t)y & 0x7fffffffu;
  }
  return y < TFX_LABEL_SET_MAX ? 1u << y : 0;
}

#endif
