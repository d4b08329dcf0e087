/* A growable text buffer for bodies built piece by piece (Prometheus pages, run listings). A tfx_text starts
 * zeroed; its owner frees t.s with free(). Not thread-safe. */
#ifndef TFX_TEXT_H
#define TFX_TEXT_H

#include <stddef.h>

typedef struct tfx_text {
  char *s;
  size_t len, cap;
} tfx_text;

/* Appends formatted text (grows the buffer; on out-of-memory the text stays as it was). */
void tfx_text_put(tfx_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
