/* src/train/classes.c: per-class counts of an evaluation. Precision, recall and F1 per class and averaged
 * against sklearn's classification_report of y_true [0,0,1,1,2,2,2], y_pred [0,1,1,1,2,0,1] (computed by hand
 * below), the binary case (class 1, as Keras's Precision/Recall), metric names in records, watches and the config,
 * and an evaluation that counts its predictions (the identity-logit model of test_evaluate.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "common/labelset.h"
#include "config/config.h"
#include "train/classes.h"
#include "train/watch.h"

static const int32_t truth[7] = {0, 0, 1, 1, 2, 2, 2}, pred[7] = {0, 1, 1, 1, 2, 0, 1};

static tfx_eval_result *three_classes(void) {
  static tfx_eval_result r;
  tfx_confusion_init(&r, 3, 0);
  tfx_confusion_add(&r, truth, pred, 7);
  r.examples = 7;
  return &r;
}

Test(classes, per_class_precision_recall_f1_are_sklearns) {
  tfx_eval_result *r = three_classes();
  cr_assert_float_eq(r->confusion[2][1], 1, 0);
  cr_assert_float_eq(r->confusion[2][0], 1, 0);
  double p[3] = {0.5, 0.5, 1}, q[3] = {0.5, 1, 1.0 / 3}, f[3] = {0.5, 2.0 / 3, 0.5};
  for (int k = 0; k < 3; k++) {
    cr_assert_float_eq(tfx_class_metric(r, TFX_CLASS_PRECISION, k), p[k], 1e-12, "precision of %d", k);
    cr_assert_float_eq(tfx_class_metric(r, TFX_CLASS_RECALL, k), q[k], 1e-12, "recall of %d", k);
    cr_assert_float_eq(tfx_class_metric(r, TFX_CLASS_F1, k), f[k], 1e-12, "f1 of %d", k);
  }
  cr_assert_float_eq(tfx_class_metric(r, TFX_CLASS_PRECISION, -1), 2.0 / 3, 1e-12, "macro precision");
  cr_assert_float_eq(tfx_class_metric(r, TFX_CLASS_RECALL, -1), (0.5 + 1 + 1.0 / 3) / 3, 1e-12, "macro recall");
  cr_assert_float_eq(tfx_class_metric(r, TFX_CLASS_F1, -1), (0.5 + 2.0 / 3 + 0.5) / 3, 1e-12, "macro f1");
  cr_assert(isnan(tfx_class_metric(r, TFX_CLASS_F1, 3)), "no class 3");
}

Test(classes, binary_reports_class_1_and_a_class_never_predicted_scores_0) {
  tfx_eval_result r;
  const int32_t y[4] = {1, 1, 0, 0}, yhat[4] = {1, 0, 0, 0};
  tfx_confusion_init(&r, 2, 0);
  tfx_confusion_add(&r, y, yhat, 4);
  cr_assert_float_eq(tfx_class_metric(&r, TFX_CLASS_PRECISION, -1), 1, 1e-12);
  cr_assert_float_eq(tfx_class_metric(&r, TFX_CLASS_RECALL, -1), 0.5, 1e-12);
  const int32_t none[4] = {0, 0, 0, 0};
  tfx_confusion_init(&r, 2, 0);
  tfx_confusion_add(&r, y, none, 4);
  cr_assert_float_eq(tfx_class_metric(&r, TFX_CLASS_PRECISION, 1), 0, 0, "no prediction of 1: 0, not NaN");
  cr_assert_float_eq(tfx_class_metric(&r, TFX_CLASS_F1, -1), 0, 0);
  tfx_confusion_init(&r, TFX_EVAL_MAX_CLASSES + 1, 0);
  cr_assert_eq(r.classes, 0, "too many classes: no counts");
  cr_assert(isnan(tfx_class_metric(&r, TFX_CLASS_F1, -1)));
}

Test(classes, names_reach_records_and_watches) {
  tfx_eval_result *r = three_classes();
  double v = -1;
  cr_assert(tfx_class_metric_named(r, "f1_1", 4, &v));
  cr_assert_float_eq(v, 2.0 / 3, 1e-12);
  cr_assert(!tfx_class_metric_named(r, "f1x", 3, &v));
  cr_assert(!tfx_class_metric_named(r, "accuracy", 8, &v));
  cr_assert_float_eq(tfx_eval_metric(r, "recall_2"), 1.0 / 3, 1e-12);
  cr_assert_float_eq(tfx_eval_metric(r, "precision"), 2.0 / 3, 1e-12);
  tfx_eval_report rep;
  tfx_eval_report_init(&rep, "f1,per_class", r);
  cr_assert_eq(rep.n, 1 + 9 + 1, "f1, three of each of 3 classes, examples: %d", rep.n);
  cr_assert_str_eq(rep.names[0], "f1");
  cr_assert_str_eq(rep.names[1], "precision_0");
  cr_assert_str_eq(rep.names[9], "f1_2");
  cr_assert_float_eq(rep.values[9], 0.5, 1e-12);
  cr_assert_str_eq(rep.names[10], "examples");
  tfx_watch w;
  tfx_watch_init(&w, "f1", TFX_WATCH_AUTO, 0, 1);
  cr_assert(w.maximize, "f1 improves upwards");
}

/* Validates a one-layer experiment with the assignment `set`; the code, the message in err. */
static int validate_with(const char *set, tfx_err *err) {
  tfx_config c;
  tfx_config_init(&c);
  cr_assert_eq(tfx_config_parse(&c, "{\"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 3}]}}", "t", err),
               TFX_OK, "%s", err->msg);
  cr_assert_eq(tfx_config_set(&c, set, err), TFX_OK, "%s", err->msg);
  return tfx_config_validate(&c, err);
}

Test(classes, the_config_takes_the_names_and_refuses_others) {
  /* classes 0 .. TFX_MAX_CLASSES - 1 (127; 31 before #25); per_class and confusion are many values, not one */
  const char *good[] = {"precision", "recall_3", "f1_127", "per_class", "confusion"};
  const char *bad[] = {"f1_128", "precision_", "f2"};
  tfx_err err = {0};
  char set[64];
  for (size_t i = 0; i < 5; i++) {
    snprintf(set, sizeof set, "model.metrics=loss,%s", good[i]);
    cr_assert_eq(validate_with(set, &err), TFX_OK, "%s: %s", good[i], err.msg);
    snprintf(set, sizeof set, "training.early_stopping.metric=%s", good[i]);
    cr_assert_eq(validate_with(set, &err), i >= 3 ? TFX_ECONFIG : TFX_OK, "watch %s: %s", good[i], err.msg);
  }
  cr_assert(strstr(err.msg, "training.early_stopping.metric: 'confusion'"), "many values, not one: %s", err.msg);
  for (size_t i = 0; i < 3; i++) {
    snprintf(set, sizeof set, "model.metrics=%s", bad[i]);
    cr_assert_eq(validate_with(set, &err), TFX_ECONFIG, "%s accepted", bad[i]);
    cr_assert(strstr(err.msg, bad[i]), "%s", err.msg);
  }
}

/* The identity-logit model of test_evaluate.c: example (t, 0) is predicted as class 0 when t > 0, else 1. */
Test(classes, an_evaluation_counts_its_predictions) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  cr_assert_eq(tfx_config_parse(&cfg,
                                "{\"model\": {\"input_shape\": [2], \"variables\": [{\"name\": \"eye\", \"shape\":"
                                " [2, 2], \"initializer\": \"zeros\"}], \"layers\": [{\"type\": \"matmul\","
                                " \"variable\": \"eye\"}]}}",
                                "test", NULL),
               TFX_OK);
  tfx_model *m = NULL;
  cr_assert_eq(tfx_model_create(&cfg, 2, &m, NULL), TFX_OK);
  tfx_var *eye = tfx_model_find_var(m, "eye");
  memset(eye->value, 0, sizeof(float) * 4);
  eye->value[0] = eye->value[3] = 1;
  float x[10] = {2, 0, 1, 0, 3, 0, -1, 0, -2, 0};
  int32_t y[5] = {0, 0, 1, 1, 0};
  tfx_dataset d = {5, 2, x, y};
  tfx_eval_result r;
  cr_assert_eq(tfx_evaluate(m, &d, 2, &r, NULL), TFX_OK);
  cr_assert_eq(r.classes, 2);
  cr_assert_float_eq(r.confusion[0][0], 2, 0);
  cr_assert_float_eq(r.confusion[0][1], 1, 0);
  cr_assert_float_eq(r.confusion[1][0], 1, 0);
  cr_assert_float_eq(r.confusion[1][1], 1, 0);
  cr_assert_float_eq(r.accuracy, 3.0 / 5, 1e-12, "the counts agree with the hits");
  tfx_eval_result v;
  cr_assert_eq(tfx_evaluate_agg(m, &d, 2, 0, "max", NULL, &v, NULL), TFX_OK);
  cr_assert_eq(memcmp(v.confusion, r.confusion, sizeof r.confusion), 0, "validation sets count the same");
  tfx_model_destroy(m);
}

/* Multi-label: each class counted on its own (its output against its bit), the mean over the classes. */
Test(classes, sets_are_counted_per_class) {
  tfx_eval_result r;
  tfx_confusion_init(&r, 3, 1);
  /* labels {0,2}, {}, {1}; predictions {0}, {1}, {1,2} */
  const int32_t y[3] = {(int32_t)(TFX_LABEL_SET | 5), TFX_LABEL_SET, 1};
  const int32_t p[3] = {(int32_t)(TFX_LABEL_SET | 1), (int32_t)(TFX_LABEL_SET | 2), (int32_t)(TFX_LABEL_SET | 6)};
  tfx_confusion_add(&r, y, p, 3);
  r.examples = 3;
  cr_assert_eq(tfx_confusion_cols(&r), 4);
  cr_assert_float_eq(tfx_class_metric(&r, TFX_CLASS_PRECISION, 0), 1, 0);
  cr_assert_float_eq(tfx_class_metric(&r, TFX_CLASS_PRECISION, 1), 0.5, 1e-12, "1 of its 2 predictions");
  cr_assert_float_eq(tfx_class_metric(&r, TFX_CLASS_RECALL, 2), 0, 0, "class 2's one example missed");
  cr_assert_float_eq(tfx_class_metric(&r, TFX_CLASS_RECALL, -1), (1 + 1 + 0) / 3.0, 1e-12, "mean of 3, not class 1");
  cr_assert_float_eq(r.confusion[2][1], 1, 0, "class 2: one false positive");
  cr_assert_float_eq(r.confusion[2][3], 1, 0, "and one true negative");
}

/* A multi-label model's AUC: each output's against its class's bit, and their mean over the outputs that have
 * both classes (Keras's AUC(multi_label=True)); an output whose class is in every set has none. */
Test(classes, multi_label_auc_is_each_outputs_and_their_mean) {
  /* 4 examples x 2 outputs; output 0: labels 1,0,1,0 scored .9,.8,.7,.1 -> 3 of 4 pairs right; output 1: always */
  const float scores[8] = {0.9f, 1, 0.8f, 2, 0.7f, 3, 0.1f, 4};
  const int32_t y[4] = {(int32_t)(TFX_LABEL_SET | 3), 1, (int32_t)(TFX_LABEL_SET | 3), 1};
  tfx_eval_result r = {0};
  tfx_eval_auc(scores, y, 4, 2, &r);
  cr_assert_eq(r.n_auc, 2);
  cr_assert_float_eq(r.auc_k[0], 0.75, 1e-12);
  cr_assert(isnan(r.auc_k[1]), "class 1 in every set: no AUC");
  cr_assert_float_eq(r.auc, 0.75, 1e-12, "the mean of the defined ones");
  cr_assert(r.has_auc);
  cr_assert_float_eq(tfx_eval_metric(&r, "auc_0"), 0.75, 1e-12);
  tfx_eval_report rep;
  tfx_eval_report_init(&rep, "auc_0,auc_1,auc_2", &r);
  cr_assert_eq(rep.n, 2, "auc_0 and examples: undefined ones left out");
  tfx_eval_auc(scores, y, 4, 0, &r);
  cr_assert(!r.has_auc && r.n_auc == 0 && r.scored == 0);
}
