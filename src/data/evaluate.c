/* Whole-dataset evaluation. */
#include "evaluate.h"

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
