/* src/data/evaluate.c: aggregation of per-batch metrics over a validation set (one aggregation for all, or one
 * per metric as the "metrics" object of a validation set gives), the metric records model.metrics names, and
 * the config side of per-metric aggregation. The model is an identity matmul, so every loss is known exactly. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "evaluate.h"

/* Logits = inputs: example (t, 0) with label 0 has loss log(1 + e^-t) and is a hit when t > 0. */
static const float ts[5] = {2, 1, 3, -1, -2};

typedef struct fixture {
  tfx_model *m;
  tfx_dataset d;
  float x[10];
  int32_t y[5];
} fixture;

static void setup(fixture *f, const char *metrics) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  cr_assert_eq(tfx_config_parse(&cfg,
                                "{\"model\": {\"input_shape\": [2], \"variables\": [{\"name\": \"eye\", \"shape\":"
                                " [2, 2], \"initializer\": \"zeros\"}], \"layers\": [{\"type\": \"matmul\","
                                " \"variable\": \"eye\"}]}}",
                                "test", NULL),
               TFX_OK);
  snprintf(cfg.metrics, sizeof cfg.metrics, "%s", metrics);
  cr_assert_eq(tfx_model_create(&cfg, 2, &f->m, NULL), TFX_OK);
  tfx_var *eye = tfx_model_find_var(f->m, "eye");
  memset(eye->value, 0, sizeof(float) * 4);
  eye->value[0] = eye->value[3] = 1;
  for (int i = 0; i < 5; i++) {
    f->x[2 * i] = ts[i], f->x[2 * i + 1] = 0, f->y[i] = 0;
  }
  f->d = (tfx_dataset){5, 2, f->x, f->y};
}

static double loss_of(int i) {
  return log1p(exp(-(double)ts[i]));
}

/* Batches of 2: {0, 1} (2 hits), {2, 3} (1 hit), {4} (none). */
Test(evaluate, one_aggregation_for_every_metric) {
  fixture f;
  setup(&f, "loss,accuracy,top_5");
  tfx_eval_result r;
  tfx_evaluate_agg(f.m, &f.d, 2, 0, "mean", &r);
  double total = 0;
  for (int i = 0; i < 5; i++) {
    total += loss_of(i);
  }
  cr_assert_float_eq(r.loss, total / 5, 1e-5);
  cr_assert_float_eq(r.accuracy, 3.0 / 5, 1e-9);
  cr_assert_eq(r.examples, 5);
  tfx_evaluate_agg(f.m, &f.d, 2, 0, "sum", &r);
  cr_assert_float_eq(r.accuracy, 1.0 + 0.5 + 0.0, 1e-9);
  tfx_evaluate_agg(f.m, &f.d, 2, 4, "min", &r); /* the first 4 examples: batches {0, 1} and {2, 3} */
  cr_assert_float_eq(r.accuracy, 0.5, 1e-9);
  cr_assert_float_eq(r.loss, (loss_of(0) + loss_of(1)) / 2, 1e-5);
  cr_assert_eq(r.examples, 4);
  tfx_model_destroy(f.m);
}

Test(evaluate, aggregation_per_metric) {
  fixture f;
  setup(&f, "loss,accuracy,top_5");
  tfx_eval_result r;
  tfx_evaluate_agg(f.m, &f.d, 2, 0, "accuracy:min,loss:max", &r);
  cr_assert_float_eq(r.accuracy, 0.0, 1e-9, "accuracy: min over batches");
  cr_assert_float_eq(r.loss, loss_of(4), 1e-5, "loss: max over batches (the last batch's)");
  cr_assert_float_eq(r.top5, 1.0, 1e-9, "top_5 unlisted: mean, and 2 classes are always in the top 5");
  tfx_evaluate_agg(f.m, &f.d, 2, 0, "top_5:sum,accuracy:max", &r);
  cr_assert_float_eq(r.top5, 3.0, 1e-9);
  cr_assert_float_eq(r.accuracy, 1.0, 1e-9);
  tfx_model_destroy(f.m);
}

Test(evaluate, records_name_the_metrics_of_the_experiment) {
  fixture f;
  setup(&f, "accuracy,top_1");
  tfx_eval_result r;
  tfx_evaluate(f.m, &f.d, 2, &r);
  cr_assert_eq(r.top_k, 1);
  cr_assert_float_eq(r.top5, r.accuracy, 1e-9, "top-1 is accuracy");
  tfx_eval_report rep;
  tfx_eval_report_init(&rep, "accuracy,top_1", &r);
  cr_assert_eq(rep.n, 3);
  cr_assert_str_eq(rep.names[0], "accuracy");
  cr_assert_str_eq(rep.names[1], "top1_accuracy");
  cr_assert_str_eq(rep.names[2], "examples");
  cr_assert_float_eq(rep.values[2], 5, 0);
  tfx_valset v = {.agg = "loss:max,accuracy:mean"};
  tfx_eval_report_init(&rep, tfx_valset_metrics(&v, "accuracy,top_1"), &r);
  cr_assert_eq(rep.n, 3);
  cr_assert_str_eq(rep.names[0], "loss");
  cr_assert_str_eq(rep.names[1], "accuracy");
  snprintf(v.agg, sizeof v.agg, "max");
  cr_assert_str_eq(tfx_valset_metrics(&v, "accuracy,top_1"), "accuracy,top_1");
  tfx_model_destroy(f.m);
}

Test(evaluate, config_reads_the_metrics_object_of_a_validation_set) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  tfx_err err = {0};
  const char *ok =
      "{\"validation\": [{\"name\": \"v\", \"images\": \"i\", \"labels\": \"l\","
      " \"metrics\": {\"accuracy\": \"mean\", \"loss\": \"max\", \"top_3\": \"min\"}}]}";
  cr_assert_eq(tfx_config_parse(&cfg, ok, "t", &err), TFX_OK, "%s", err.msg);
  cr_assert_str_eq(cfg.valsets[0].agg, "accuracy:mean,loss:max,top_3:min");
  char *json = tfx_config_to_json(&cfg);
  tfx_config back;
  tfx_config_init(&back);
  cr_assert_eq(tfx_config_parse(&back, json, "round trip", &err), TFX_OK, "%s", err.msg);
  free(json);
  cr_assert_str_eq(back.valsets[0].agg, cfg.valsets[0].agg);
  const char *bad =
      "{\"validation\": [{\"name\": \"v\", \"images\": \"i\", \"labels\": \"l\","
      " \"metrics\": {\"accuracy\": \"median\"}}]}";
  cr_assert_eq(tfx_config_parse(&cfg, bad, "t", &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "validation[0].metrics: 'accuracy:median'"), "%s", err.msg);
  const char *unknown =
      "{\"validation\": [{\"name\": \"v\", \"images\": \"i\", \"labels\": \"l\","
      " \"metrics\": {\"f1\": \"mean\"}}]}";
  cr_assert_eq(tfx_config_parse(&cfg, unknown, "t", &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "'f1:mean' (want loss, accuracy or top_K"), "%s", err.msg);
}
