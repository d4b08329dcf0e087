/* src/train/evaluate.c: aggregation of per-batch metrics over a validation set (one aggregation for all, or one
 * per metric as the "metrics" object of a validation set gives), the metric records model.metrics names, and
 * the config side of per-metric aggregation, and eval files holding a label or an embedding id the model cannot
 * score. The model is an identity matmul, so every loss is known exactly. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "data/csv.h"
#include "tmpdir.h"
#include "train/evaluate.h"

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
  cr_assert_eq(tfx_evaluate_agg(f.m, &f.d, 2, 0, "mean", NULL, &r, NULL), TFX_OK);
  double total = 0;
  for (int i = 0; i < 5; i++) {
    total += loss_of(i);
  }
  cr_assert_float_eq(r.loss, total / 5, 1e-5);
  cr_assert_float_eq(r.accuracy, 3.0 / 5, 1e-9);
  cr_assert_eq(r.examples, 5);
  cr_assert_eq(tfx_evaluate_agg(f.m, &f.d, 2, 0, "sum", NULL, &r, NULL), TFX_OK);
  cr_assert_float_eq(r.accuracy, 1.0 + 0.5 + 0.0, 1e-9);
  /* The first 4 examples: batches {0, 1} and {2, 3}. */
  cr_assert_eq(tfx_evaluate_agg(f.m, &f.d, 2, 4, "min", NULL, &r, NULL), TFX_OK);
  cr_assert_float_eq(r.accuracy, 0.5, 1e-9);
  cr_assert_float_eq(r.loss, (loss_of(0) + loss_of(1)) / 2, 1e-5);
  cr_assert_eq(r.examples, 4);
  tfx_model_destroy(f.m);
}

Test(evaluate, aggregation_per_metric) {
  fixture f;
  setup(&f, "loss,accuracy,top_5");
  tfx_eval_result r;
  cr_assert_eq(tfx_evaluate_agg(f.m, &f.d, 2, 0, "accuracy:min,loss:max", NULL, &r, NULL), TFX_OK);
  cr_assert_float_eq(r.accuracy, 0.0, 1e-9, "accuracy: min over batches");
  cr_assert_float_eq(r.loss, loss_of(4), 1e-5, "loss: max over batches (the last batch's)");
  cr_assert_float_eq(r.top5, 1.0, 1e-9, "top_5 unlisted: mean, and 2 classes are always in the top 5");
  cr_assert_eq(tfx_evaluate_agg(f.m, &f.d, 2, 0, "top_5:sum,accuracy:max", NULL, &r, NULL), TFX_OK);
  cr_assert_float_eq(r.top5, 3.0, 1e-9);
  cr_assert_float_eq(r.accuracy, 1.0, 1e-9);
  tfx_model_destroy(f.m);
}

Test(evaluate, records_name_the_metrics_of_the_experiment) {
  fixture f;
  setup(&f, "accuracy,top_1");
  tfx_eval_result r;
  cr_assert_eq(tfx_evaluate(f.m, &f.d, 2, &r, NULL), TFX_OK);
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
      " \"metrics\": {\"f2\": \"mean\"}}]}";
  cr_assert_eq(tfx_config_parse(&cfg, unknown, "t", &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "'f2:mean' (want loss, accuracy, top_K"), "%s", err.msg);
}

/* ---- data the model cannot score ---- */

static void tmp_init(void) {
  tmpdir_create("evaluate");
}

/* A CSV eval file in tmp (header x0,x1,label); the dataset is the caller's. */
static tfx_dataset *csv_file(const char *name, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", tmp, name);
  spit(path, text, strlen(text));
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_csv_load(path, "label", 1, &d, &err), TFX_OK, "%s", err.msg);
  return d;
}

/* The fourth row's label 7 is outside the 2 classes: it would count as a miss with no loss; both evaluations
 * refuse the file, name the label and its example (index 3, from 0), and leave the result alone. */
Test(evaluate, a_label_outside_the_classes_is_an_error_naming_it, .init = tmp_init, .fini = tmpdir_remove) {
  fixture f;
  setup(&f, "loss,accuracy");
  tfx_dataset *bad = csv_file("bad.csv", "x0,x1,label\n2,0,0\n1,0,1\n3,0,0\n-1,0,7\n-2,0,0\n");
  tfx_eval_result r = {.accuracy = -1, .examples = 99};
  tfx_err err = {0};
  cr_assert_eq(tfx_evaluate(f.m, bad, 2, &r, &err), TFX_EINVAL);
  cr_assert_str_eq(err.msg, "example 3: label 7 is outside the model's 2 classes [0, 2)");
  cr_assert(r.accuracy == -1 && r.examples == 99, "the result is written only on success");
  memset(&err, 0, sizeof err);
  cr_assert_eq(tfx_evaluate_agg(f.m, bad, 2, 0, "mean", NULL, &r, &err), TFX_EINVAL);
  cr_assert_str_eq(err.msg, "example 3: label 7 is outside the model's 2 classes [0, 2)", "agg names it too");
  cr_assert_eq(tfx_evaluate_agg(f.m, bad, 2, 3, "mean", NULL, &r, &err), TFX_OK, "the first 3 rows are fine: %s", err.msg);
  cr_assert_float_eq(r.accuracy, 2.0 / 3, 1e-9);
  tfx_dataset_destroy(bad);
  tfx_dataset *good = csv_file("good.csv", "x0,x1,label\n2,0,0\n1,0,1\n3,0,0\n-1,0,1\n-2,0,0\n");
  cr_assert_eq(tfx_evaluate(f.m, good, 2, &r, &err), TFX_OK, "%s", err.msg);
  cr_assert_float_eq(r.accuracy, 3.0 / 5, 1e-9, "rows 0, 2 and 3 are hits");
  tfx_dataset_destroy(good);
  tfx_model_destroy(f.m);
}

/* An embedding id outside the table would read a zero row: the evaluation names the layer, the id and the rows. */
Test(evaluate, an_embedding_id_outside_its_table_is_an_error_naming_it, .init = tmp_init, .fini = tmpdir_remove) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&cfg,
                                "{\"model\": {\"input_shape\": [2], \"layers\": [{\"type\": \"embedding\", "
                                "\"input_dim\": 4, \"units\": 2}, {\"type\": \"dense\", \"units\": 2}]}}",
                                "embedding", &err),
               TFX_OK, "%s", err.msg);
  tfx_model *m = NULL;
  cr_assert_eq(tfx_model_create(&cfg, 2, &m, &err), TFX_OK, "%s", err.msg);
  tfx_model_init_vars(m, 3);
  tfx_dataset *d = csv_file("ids.csv", "x0,x1,label\n0,1,0\n2,3,1\n1,1,0\n3,9,1\n");
  tfx_eval_result r;
  cr_assert_eq(tfx_evaluate(m, d, 2, &r, &err), TFX_EINVAL);
  cr_assert_str_eq(err.msg, "example 3: embedding_1: id 9 is outside the table's 4 rows [0, 4)");
  d->n = 2;
  cr_assert_eq(tfx_evaluate(m, d, 2, &r, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(r.examples, 2);
  tfx_dataset_destroy(d);
  tfx_model_destroy(m);
}

Test(evaluate, auc_is_exact_with_ties_at_half) {
  float s[4] = {0.1f, 0.4f, 0.35f, 0.8f};
  int32_t y[4] = {0, 0, 1, 1};
  cr_assert_float_eq(tfx_auc(s, y, 4), 0.75, 1e-12, "the textbook example: 3 of 4 pairs ordered");
  cr_assert(s[1] == 0.4f && y[2] == 1, "inputs left as they are");
  float t[4] = {0.5f, 0.5f, 0.9f, 0.1f};
  int32_t z[4] = {0, 1, 1, 0};
  cr_assert_float_eq(tfx_auc(t, z, 4), 0.875, 1e-12, "pairs: (0.5+,0.5-) ties count half, 3.5 of 4");
  int32_t none[4] = {0, 0, 0, 0};
  cr_assert(isnan(tfx_auc(t, none, 4)), "no positive: no AUC");
}

/* The pairwise definition: positives ranked above negatives, ties half. */
static double auc_by_pairs(const float *s, const int32_t *y, size_t n) {
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < n; j++) {
      if (y[i] == 1 && y[j] != 1) {
        wins += s[i] > s[j] ? 1 : s[i] == s[j] ? 0.5 : 0;
        pairs++;
      }
    }
  }
  return wins / pairs;
}

Test(evaluate, auc_sorts_negative_zero_and_coarse_scores_as_the_pairwise_count) {
  enum { N = 3000 };
  static float s[N];
  static int32_t y[N];
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < N; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s[i] = (float)((int)(x % 201) - 100) / 8.0f; /* negatives, many ties */
    s[i] = i % 97 == 0 ? -0.0f : i % 89 == 0 ? 1e30f : i % 83 == 0 ? -1e-38f : s[i];
    y[i] = (int32_t)((x >> 20) % 3 == 0 || s[i] > 5);
  }
  cr_assert_float_eq(tfx_auc(s, y, N), auc_by_pairs(s, y, N), 1e-12);
}

Test(evaluate, a_binary_sigmoid_classifier_takes_labels_0_and_1_and_reports_auc) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  cr_assert_eq(tfx_config_parse(&cfg,
                                "{\"model\": {\"input_shape\": [1], \"loss\": \"sigmoid_cross_entropy\","
                                " \"metrics\": \"loss,accuracy,auc,log_loss\", \"layers\": [{\"type\": \"dense\"}]}}",
                                "t", NULL),
               TFX_OK);
  tfx_model *m = NULL;
  cr_assert_eq(tfx_model_create(&cfg, 8, &m, NULL), TFX_OK);
  tfx_model_find_var(m, "dense_1/kernel")->value[0] = 2.0f;
  tfx_model_find_var(m, "dense_1/bias")->value[0] = -1.0f;
  float x[6] = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
  int32_t y[6] = {0, 0, 1, 0, 1, 1};
  tfx_dataset d = {.n = 6, .dim = 1, .x = x, .y = y};
  tfx_eval_result r;
  tfx_err err = {0};
  cr_assert_eq(tfx_evaluate(m, &d, 8, &r, &err), TFX_OK, "%s", err.msg);
  cr_assert(r.has_auc);
  cr_assert_float_eq(r.auc, 8.0 / 9.0, 1e-9, "8 of the 9 positive-negative pairs ordered by the logit 2x - 1");
  cr_assert_float_eq(r.accuracy, 4.0 / 6.0, 1e-9, "hits where the logit's sign is the label's");
  double want = 0;
  for (int i = 0; i < 6; i++) {
    double p = 1 / (1 + exp(-(2.0 * x[i] - 1)));
    want -= y[i] ? log(p) : log(1 - p);
  }
  cr_assert_float_eq(r.loss, want / 6, 1e-5, "the binary cross-entropy, mean over examples");
  tfx_eval_report rep;
  tfx_eval_report_init(&rep, cfg.metrics, &r);
  cr_assert(rep.n == 5 && !strcmp(rep.names[2], "auc") && !strcmp(rep.names[3], "log_loss"));
  int32_t two[1] = {2};
  cr_assert_eq(tfx_model_check_labels(m, two, 1, NULL, NULL), TFX_EINVAL, "a binary label is 0 or 1");
  tfx_model_destroy(m);
}

/* An embedding bag over 10 ids with 3 outputs, its table drawn uniform in +-0.5, reading its rows as `rows` says. */
static tfx_model *bag_model(tfx_rows rows) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&cfg,
                                "{\"model\": {\"input_shape\": [10], \"layers\": [{\"type\": \"embedding_bag\", "
                                "\"units\": 3, \"initializer\": \"uniform:0.5\"}]}}",
                                "bag", &err),
               TFX_OK, "%s", err.msg);
  tfx_model *m = NULL;
  cr_assert_eq(tfx_model_create(&cfg, 2, &m, &err), TFX_OK, "%s", err.msg);
  tfx_model_init_vars(m, 5);
  tfx_model_set_rows(m, rows);
  return m;
}

/* The master's and the workers' evaluation: a pass whose caller fills each lent batch's rows of the lazy table (from
 * its ps; here from another model's table) between next and score scores what tfx_evaluate scores on the table read
 * in place, bit for bit; score without a lent batch is refused. */
Test(evaluate, a_pass_whose_caller_fills_each_batchs_rows_scores_as_the_table_read_in_place) {
  tfx_model *local = bag_model(TFX_ROWS_TABLE), *remote = bag_model(TFX_ROWS_BATCH);
  tfx_var *lt = tfx_model_find_var(local, "embedding_bag_1/embeddings");
  tfx_var *rt = tfx_model_find_var(remote, "embedding_bag_1/embeddings");
  for (size_t i = 0; i < rt->count; i++) {
    rt->value[i] = NAN; /* never read: the rows come from the caller */
  }
  int64_t off[] = {0, 2, 2, 5, 6, 8}, ids[] = {1, 7, 3, 3, 9, 0, 7, 2};
  int32_t y[] = {0, 2, 1, 1, 0};
  tfx_dataset d = {.n = 5, .y = y, .n_fields = 1};
  d.fields[0] = (tfx_field){off, ids, NULL};
  tfx_eval_result a, b;
  tfx_err err = {0};
  cr_assert_eq(tfx_evaluate(local, &d, 2, &a, &err), TFX_OK, "%s", err.msg);
  tfx_eval_span span = {2, 0, d.n, NULL, NULL, NULL};
  tfx_eval_pass *p = NULL;
  cr_assert_eq(tfx_eval_pass_create(remote, &d, &span, &p, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_eval_pass_score(p, &err), TFX_ESTATE, "no batch lent yet");
  int lent = 0, batches = 0;
  while (tfx_eval_pass_next(p, &lent, &err) == TFX_OK && lent) {
    for (size_t k = 0; k < rt->n_batch; k++) {
      memcpy(rt->batch_vals + k * 3, lt->value + rt->batch_ids[k] * 3, sizeof(float) * 3);
    }
    cr_assert_eq(tfx_eval_pass_score(p, &err), TFX_OK, "%s", err.msg);
    batches++;
  }
  cr_assert_eq(batches, 3, "5 examples in batches of 2");
  tfx_eval_pass_result(p, &b);
  tfx_eval_pass_destroy(p);
  cr_assert_eq(b.examples, 5);
  cr_assert(a.loss == b.loss && a.accuracy == b.accuracy, "loss %g/%g accuracy %g/%g", a.loss, b.loss, a.accuracy,
            b.accuracy);
  tfx_model_destroy(local);
  tfx_model_destroy(remote);
}
