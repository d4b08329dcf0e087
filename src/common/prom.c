/* Prometheus text exposition. */
#include "prom.h"

#include <math.h>
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
    t->s = g, t->cap = cap;
  }
}

void tfx_prom_metric(tfx_text *t, const char *name, const char *help, const char *type, const char *role, int index,
                     double value) {
  tfx_text_put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
  if (isnan(value)) {
    tfx_text_put(t, "%s{role=\"%s\",index=\"%d\"} NaN\n", name, role, index);
  } else {
    tfx_text_put(t, "%s{role=\"%s\",index=\"%d\"} %.17g\n", name, role, index, value);
  }
}
