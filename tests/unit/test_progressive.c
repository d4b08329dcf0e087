/* Unit tests of src/train/progressive.c: the rolling window of progressive validation holds the last N examples'
 * scores from the forward pass before their update, and gives their AUC and mean log loss. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "common/labelset.h"
#include "config/config.h"
#include "nn/model.h"
#include "train/evaluate.h"
#include "train/progressive.h"

/* The binary classifier of test_evaluate: logit 2x - 1. */
static tfx_model *binary_model(void) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  cr_assert_eq(tfx_config_parse(&cfg,
                                "{\"model\": {\"input_shape\": [1], \"loss\": \"sigmoid_cross_entropy\","
                                " \"layers\": [{\"type\": \"dense\"}]}}",
                                "t", NULL),
               TFX_OK);
  tfx_model *m = NULL;
  cr_assert_eq(tfx_model_create(&cfg, 4, &m, NULL), TFX_OK);
  tfx_model_find_var(m, "dense_1/kernel")->value[0] = 2.0f;
  tfx_model_find_var(m, "dense_1/bias")->value[0] = -1.0f;
  return m;
}

/* One batch through the window as the training step does: forward, scores, loss, add. */
static void step(tfx_progressive *p, tfx_model *m, float *x, int32_t *y, int n) {
  tfx_step_stats st;
  tfx_model_forward(m, x, n, 1, 0);
  tfx_progressive_score(p, m, n);
  tfx_model_loss(m, y, n, 1, &st);
  tfx_progressive_add(p, y, n, st.loss);
}

Test(progressive, rolls_over_the_last_n_examples) {
  tfx_model *m = binary_model();
  tfx_progressive *p = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_progressive_create(4, 4, 1, 0, &p, &err), TFX_OK, "%s", err.msg);
  double auc, log_loss;
  tfx_progressive_get(p, &auc, &log_loss);
  cr_assert(isnan(auc) && isnan(log_loss), "an empty window has neither");
  float bad_x[4] = {0.9f, 0.8f, 0.1f, 0.2f}, good_x[4] = {0.1f, 0.2f, 0.8f, 0.9f};
  int32_t y[4] = {0, 0, 1, 1};
  step(p, m, bad_x, y, 4);
  tfx_progressive_get(p, &auc, &log_loss);
  cr_assert_float_eq(auc, 0.0, 1e-12, "every positive scored below every negative");
  step(p, m, good_x, y, 4);
  tfx_progressive_get(p, &auc, &log_loss);
  cr_assert_float_eq(auc, 1.0, 1e-12, "the window holds only the last 4 examples");
  double want = 0;
  for (int i = 0; i < 4; i++) {
    double q = 1 / (1 + exp(-(2.0 * good_x[i] - 1)));
    want -= y[i] ? log(q) : log(1 - q);
  }
  cr_assert_float_eq(log_loss, want / 4, 1e-5);
  tfx_progressive_destroy(p);
  tfx_model_destroy(m);
}

Test(progressive, refuses_an_empty_window) {
  tfx_progressive *p = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_progressive_create(0, 4, 1, 0, &p, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "window of 0"), "%s", err.msg);
}

/* A multi-label model (#25): the window keeps every output's score; rolling_auc_K is output K's AUC against its
 * class's bit and rolling_auc their mean. Logits = inputs (an identity matmul over 2 outputs). */
Test(progressive, multi_label_auc_per_output) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  cr_assert_eq(tfx_config_parse(&cfg,
                                "{\"model\": {\"input_shape\": [2], \"loss\": \"sigmoid_cross_entropy\", \"multi_label\":"
                                " true, \"variables\": [{\"name\": \"eye\", \"shape\": [2, 2], \"initializer\": \"zeros\"}],"
                                " \"layers\": [{\"type\": \"matmul\", \"variable\": \"eye\"}]}}",
                                "t", NULL),
               TFX_OK);
  tfx_model *m = NULL;
  cr_assert_eq(tfx_model_create(&cfg, 4, &m, NULL), TFX_OK);
  float *eye = tfx_model_find_var(m, "eye")->value;
  eye[0] = eye[3] = 1;
  tfx_progressive *p = NULL;
  cr_assert_eq(tfx_progressive_create(8, 4, 2, 1, &p, NULL), TFX_OK);
  /* output 0 ranks class 0 perfectly, output 1 ranks class 1 backwards */
  float x[8] = {0.9f, 0.9f, 0.8f, 0.8f, 0.2f, 0.1f, 0.1f, 0.2f};
  int32_t y[4] = {TFX_LABEL_SET | 1, TFX_LABEL_SET | 1, TFX_LABEL_SET | 2, TFX_LABEL_SET | 2};
  step(p, m, x, y, 4);
  const char *names[2 + TFX_PROGRESSIVE_MAX_COLS];
  double v[2 + TFX_PROGRESSIVE_MAX_COLS];
  int n = tfx_progressive_report(p, names, v);
  cr_assert_eq(n, 4);
  cr_assert_str_eq(names[1], "rolling_auc");
  cr_assert_float_eq(v[1], 0.5, 1e-12);
  cr_assert_str_eq(names[2], "rolling_auc_0");
  cr_assert_float_eq(v[2], 1.0, 1e-12);
  cr_assert_str_eq(names[3], "rolling_auc_1");
  cr_assert_float_eq(v[3], 0.0, 1e-12);
  tfx_progressive_destroy(p);
  tfx_model_destroy(m);
}
