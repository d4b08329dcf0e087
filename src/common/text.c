/* A growable text buffer. */
#include "common/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void tfx_text_put(tfx_text *t, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int n = t->s ? vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap) : -1;
    va_end(ap);
    if (n >= 0 && (size_t)n < t->cap - t->len) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = t->cap * 2 + 4096 + (n > 0 ? (size_t)n : 0);
    char *g = realloc(t->s, cap);
    if (!g) {
      return;
    }
    t->s = g;
    t->cap = cap;
  }
}
