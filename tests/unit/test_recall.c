/* Retrieval metrics (src/train/recall.c): recall@K counts the examples whose label is among the K highest
 * scores, baseline_recall_K those whose label (numbered most popular first) is below K, and neither is counted
 * for a model with few classes, whose recall_K stays class K's recall. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "nn/model.h"
#include "train/recall.h"

static tfx_model *catalogue(int items) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  char json[512];
  snprintf(json, sizeof json,
           "{\"model\": {\"input_shape\": [2], \"layers\": [{\"type\": \"dense\", \"units\": %d}],"
           " \"metrics\": \"loss,recall_10,recall_50,baseline_recall_50\"}}",
           items);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&cfg, json, "test", &err), TFX_OK, "%s", err.msg);
  tfx_model *m = NULL;
  cr_assert_eq(tfx_model_create(&cfg, 4, &m, &err), TFX_OK, "%s", err.msg);
  return m;
}

Test(recall, ranks_against_the_labels_and_the_popularity_baseline) {
  tfx_model *m = catalogue(300);
  tfx_var *k = tfx_model_find_var(m, "dense_1/kernel"), *b = tfx_model_find_var(m, "dense_1/bias");
  memset(k->value, 0, sizeof(float) * k->count);
  for (int j = 0; j < 300; j++) {
    b->value[j] = (float)((j * 37) % 300); /* class c ranks by its bias: rank of c = 299 - bias */
  }
  float x[8] = {0};
  int32_t y[4] = {0, 3, 200, 299}; /* biases 0, 111, 200, 263: ranks 299, 188, 99, 36 */
  tfx_eval_result r;
  tfx_recall_init(m, &r);
  cr_assert(r.ranked);
  tfx_step_stats st;
  tfx_model_forward(m, x, 4, 0, 0);
  tfx_model_loss(m, y, 4, 0, &st);
  tfx_recall_add(m, y, 4, &r);
  tfx_recall_finish(&r, 4);
  double v = -1;
  cr_assert(tfx_recall_named(&r, "recall_50", 9, &v));
  cr_assert_float_eq(v, 0.25, 1e-9, "only label 299 (rank 36) is in the top 50");
  cr_assert(tfx_recall_named(&r, "recall_100", 10, &v));
  cr_assert_float_eq(v, 0.5, 1e-9, "labels 299 and 200 (rank 99) are in the top 100");
  cr_assert(tfx_recall_named(&r, "baseline_recall_5", 17, &v));
  cr_assert_float_eq(v, 0.5, 1e-9, "labels 0 and 3 are among the 5 most popular");
  cr_assert_not(tfx_recall_named(&r, "recall_7", 8, &v), "7 is not a counted K");
  tfx_model_destroy(m);
}

Test(recall, few_classes_are_not_ranked) {
  tfx_model *m = catalogue(20);
  tfx_eval_result r;
  tfx_recall_init(m, &r);
  double v;
  cr_assert_not(r.ranked);
  cr_assert_not(tfx_recall_named(&r, "recall_10", 9, &v), "recall_10 stays class 10's recall");
  tfx_model_destroy(m);
}
