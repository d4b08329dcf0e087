/* Retrieval metrics: recall@K of a softmax model's ranking and of the popularity baseline. */
#include "train/recall.h"

#include <stdlib.h>
#include <string.h>

static const int recall_ks[TFX_RECALL_KS] = {1, 5, 10, 20, 50, 100};

void tfx_recall_init(const tfx_model *m, tfx_eval_result *r) {
  r->ranked =
      !tfx_model_multi_label(m) && tfx_model_label_classes(m) > TFX_EVAL_MAX_CLASSES && tfx_model_output_size(m) > 1;
  memset(r->rank_hits, 0, sizeof r->rank_hits);
  memset(r->pop_hits, 0, sizeof r->pop_hits);
}

void tfx_recall_add(const tfx_model *m, const int32_t *labels, int batch, tfx_eval_result *r) {
  if (!r->ranked) {
    return;
  }
  size_t width = tfx_model_output_size(m);
  const float *probs = tfx_model_probs(m);
  for (int b = 0; b < batch; b++) {
    const float *p = probs + (size_t)b * width;
    int32_t y = labels[b];
    if (y < 0 || (size_t)y >= width) {
      continue; /* the evaluation refuses such a label before it counts anything */
    }
    size_t above = 0; /* the label's rank: the classes scored higher (ties count for the label) */
    for (size_t j = 0; j < width; j++) {
      above += p[j] > p[y];
    }
    for (int k = 0; k < TFX_RECALL_KS; k++) {
      r->rank_hits[k] += above < (size_t)recall_ks[k];
      r->pop_hits[k] += y < recall_ks[k];
    }
  }
}

void tfx_recall_finish(tfx_eval_result *r, size_t n) {
  for (int k = 0; k < TFX_RECALL_KS && n; k++) {
    r->rank_hits[k] /= (double)n;
    r->pop_hits[k] /= (double)n;
  }
}

int tfx_recall_named(const tfx_eval_result *r, const char *name, size_t len, double *v) {
  int base = len > 16 && !strncmp(name, "baseline_recall_", 16);
  size_t at = base ? 16 : 7;
  if (!r->ranked || (!base && (len <= 7 || strncmp(name, "recall_", 7)))) {
    return 0;
  }
  char digits[8] = "";
  if (len - at >= sizeof digits || strspn(name + at, "0123456789") < len - at) {
    return 0;
  }
  memcpy(digits, name + at, len - at);
  for (int k = 0; k < TFX_RECALL_KS; k++) {
    if (atoi(digits) == recall_ks[k]) {
      *v = base ? r->pop_hits[k] : r->rank_hits[k];
      return 1;
    }
  }
  return 0;
}
