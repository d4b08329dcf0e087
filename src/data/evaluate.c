/* Whole-dataset evaluation. */
#include "evaluate.h"

#include <string.h>

void tfx_evaluate(tfx_model *m, const tfx_dataset *d, int batch, tfx_eval_result *out) {
  double loss = 0;
  size_t correct = 0, top5 = 0;
  for (size_t i = 0; i < d->n; i += (size_t)batch) {
    int b = (int)(d->n - i < (size_t)batch ? d->n - i : (size_t)batch);
    tfx_step_stats st;
    tfx_model_forward(m, d->x + i * d->dim, b, 0, 0);
    tfx_model_loss(m, d->y + i, b, 0, &st);
    loss += st.loss * b;
    correct += (size_t)st.correct;
    top5 += (size_t)st.top5;
  }
  out->examples = d->n;
  out->loss = d->n ? loss / (double)d->n : 0;
  out->accuracy = d->n ? (double)correct / (double)d->n : 0;
  out->top5 = d->n ? (double)top5 / (double)d->n : 0;
}

static void fold(const char *agg, double *acc, double v, int first) {
  if (first) {
    *acc = v;
  } else if (!strcmp(agg, "min")) {
    *acc = v < *acc ? v : *acc;
  } else if (!strcmp(agg, "max")) {
    *acc = v > *acc ? v : *acc;
  } else {
    *acc += v;
  }
}

void tfx_evaluate_agg(tfx_model *m, const tfx_dataset *d, int batch, size_t max_examples, const char *agg,
                      tfx_eval_result *out) {
  size_t n = max_examples && max_examples < d->n ? max_examples : d->n;
  int mean = !strcmp(agg, "mean");
  double loss = 0, acc = 0, top5 = 0;
  for (size_t i = 0; i < n; i += (size_t)batch) {
    int b = (int)(n - i < (size_t)batch ? n - i : (size_t)batch);
    tfx_step_stats st;
    tfx_model_forward(m, d->x + i * d->dim, b, 0, 0);
    tfx_model_loss(m, d->y + i, b, 0, &st);
    double w = mean ? (double)b : 1.0;
    fold(agg, &loss, st.loss * w, i == 0), fold(agg, &acc, (double)st.correct / b * w, i == 0),
        fold(agg, &top5, (double)st.top5 / b * w, i == 0);
  }
  out->examples = n;
  out->loss = mean && n ? loss / (double)n : loss;
  out->accuracy = mean && n ? acc / (double)n : acc;
  out->top5 = mean && n ? top5 / (double)n : top5;
}
