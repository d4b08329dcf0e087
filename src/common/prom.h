/* Building Prometheus text-format (0.0.4) bodies: a growable text buffer and one-sample metric families with
 * role and index labels. The text is owned by the caller (free()). */
#ifndef TFX_PROM_H
#define TFX_PROM_H

#include <stddef.h>

typedef struct tfx_text {
  char *s;
  size_t len, cap;
} tfx_text;

/* Appends formatted text (grows the buffer; on out-of-memory the text stays as it was). */
void tfx_text_put(tfx_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends "# HELP", "# TYPE" and one sample {role,index} of a gauge or counter ("counter" names end in _total);
 * NaN is written as NaN. */
void tfx_prom_metric(tfx_text *t, const char *name, const char *help, const char *type, const char *role, int index,
                     double value);

#endif
