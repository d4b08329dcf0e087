/* Unit tests of the training loss's weights and label smoothing (src/nn/loss.c): model.class_weights and
 * data.weight_key scale each example's loss and gradient, label smoothing moves the targets (Keras's rules), the
 * gradient agrees with central differences of the loss, and with none of them set the step is bit for bit the
 * plain one. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/model.h"
#include "nn/nn_impl.h"

#define IN 4
#define OUT 3
#define B 4

static const float x[B * IN] = {0.5f, -1.0f, 0.25f, 2.0f, -0.5f, 0.75f, 1.5f, -2.0f,
                                1.0f, 1.0f,  -1.0f, 0.5f, 0.1f,  -0.3f, 0.2f, 0.4f};
static const int32_t y[B] = {0, 2, 1, 2};
static const int32_t y_bin[B] = {0, 1, 1, 0};

/* A dense IN -> units model with the given loss and extra options (--set assignments, NULL-ended). */
static tfx_model *make(int units, const char *loss, const char *const *sets) {
  tfx_config c;
  tfx_config_init(&c);
  c.input_rank = 1;
  c.input_shape[0] = IN, c.input_shape[1] = 1, c.input_shape[2] = 1;
  char a[128];
  snprintf(a, sizeof a, "model.loss=%s", loss);
  cr_assert_eq(tfx_config_set(&c, a, NULL), TFX_OK);
  for (int i = 0; sets && sets[i]; i++) {
    tfx_err err = {0};
    cr_assert_eq(tfx_config_set(&c, sets[i], &err), TFX_OK, "%s: %s", sets[i], err.msg);
  }
  c.n_layers = 0;
  snprintf(a, sizeof a, "{\"type\": \"dense\", \"units\": %d}", units);
  cr_assert_eq(tfx_config_add_layer_json(&c, a, NULL), TFX_OK);
  tfx_model *m = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_model_create(&c, B, &m, &err), TFX_OK, "%s", err.msg);
  tfx_model_init_vars(m, 7);
  for (int i = 0; i < tfx_model_nvars(m); i++) { /* biases too */
    tfx_var *v = tfx_model_var(m, i);
    for (size_t k = 0; k < v->count; k++) {
      v->value[k] += 0.1f * (float)((k * 7 + (size_t)i) % 5) - 0.2f;
    }
  }
  return m;
}

/* Forward and training loss of the fixed batch; the logits' gradient is left in the last layer. */
static double loss_of(tfx_model *m, const int32_t *labels) {
  tfx_step_stats st;
  tfx_model_forward(m, x, B, 1, 1);
  tfx_model_loss(m, labels, B, 1, &st);
  return st.loss;
}

static const layer *last(const tfx_model *m) {
  return &m->layers[m->n_layers - 1];
}

/* -log softmax(z)[label] of one row of logits. */
static double xent(const float *z, int label) {
  double mx = z[0], sum = 0;
  for (int j = 1; j < OUT; j++) {
    mx = fmax(mx, z[j]);
  }
  for (int j = 0; j < OUT; j++) {
    sum += exp(z[j] - mx);
  }
  return mx + log(sum) - z[label];
}

Test(loss, class_weights_scale_each_examples_loss_and_gradient) {
  static const char *const sets[] = {"model.class_weights=[1, 2, 0.5]", NULL};
  tfx_model *plain = make(OUT, "softmax_cross_entropy", NULL), *weighted = make(OUT, "softmax_cross_entropy", sets);
  loss_of(plain, y);
  double lw = loss_of(weighted, y), want = 0;
  static const float w[OUT] = {1, 2, 0.5f};
  for (int b = 0; b < B; b++) {
    want += w[y[b]] * xent(last(plain)->out + b * OUT, y[b]) / B;
    for (int j = 0; j < OUT; j++) {
      cr_expect_float_eq(last(weighted)->dout[b * OUT + j], w[y[b]] * last(plain)->dout[b * OUT + j], 1e-7,
                         "example %d, logit %d", b, j);
    }
  }
  cr_assert_float_eq(lw, want, 1e-6, "weighted loss %g, want %g", lw, want);
  tfx_model_destroy(plain);
  tfx_model_destroy(weighted);
}

Test(loss, example_weights_scale_each_examples_loss_and_gradient) {
  tfx_model *plain = make(OUT, "softmax_cross_entropy", NULL), *weighted = make(OUT, "softmax_cross_entropy", NULL);
  static const float w[B] = {0, 1, 2, 0.5f};
  loss_of(plain, y);
  tfx_model_set_example_weights(weighted, w);
  double lw = loss_of(weighted, y), want = 0;
  for (int b = 0; b < B; b++) {
    want += w[b] * xent(last(plain)->out + b * OUT, y[b]) / B;
    for (int j = 0; j < OUT; j++) {
      cr_expect_float_eq(last(weighted)->dout[b * OUT + j], w[b] * last(plain)->dout[b * OUT + j], 1e-7);
    }
  }
  cr_assert_float_eq(lw, want, 1e-6);
  tfx_step_stats st; /* evaluation (no grad) scores the plain loss */
  tfx_model_loss(weighted, y, B, 0, &st);
  cr_assert_float_eq(st.loss, loss_of(plain, y), 1e-9);
  tfx_model_destroy(plain);
  tfx_model_destroy(weighted);
}

Test(loss, label_smoothing_moves_the_softmax_targets) {
  static const char *const sets[] = {"model.label_smoothing=0.1", NULL};
  tfx_model *m = make(OUT, "softmax_cross_entropy", sets);
  double l = loss_of(m, y), want = 0;
  for (int b = 0; b < B; b++) {
    const float *z = last(m)->out + b * OUT;
    double mx = fmax(fmax(z[0], z[1]), z[2]), sum = 0, p[OUT];
    for (int j = 0; j < OUT; j++) {
      sum += exp(z[j] - mx);
    }
    for (int j = 0; j < OUT; j++) {
      p[j] = exp(z[j] - mx) / sum;
      double t = (j == y[b]) * 0.9 + 0.1 / OUT;
      want -= t * log(p[j]) / B;
      cr_expect_float_eq(last(m)->dout[b * OUT + j], (p[j] - t) / B, 1e-6, "example %d, logit %d", b, j);
    }
  }
  cr_assert_float_eq(l, want, 1e-5, "smoothed loss %g, want %g", l, want);
  tfx_model_destroy(m);
}

Test(loss, label_smoothing_moves_a_sigmoid_target_halfway) {
  static const char *const sets[] = {"model.label_smoothing=0.2", NULL};
  tfx_model *m = make(1, "sigmoid_cross_entropy", sets);
  loss_of(m, y_bin);
  for (int b = 0; b < B; b++) {
    double z = last(m)->out[b], t = y_bin[b] * 0.8 + 0.1;
    cr_expect_float_eq(last(m)->dout[b], (1 / (1 + exp(-z)) - t) / B, 1e-6, "example %d", b);
  }
  tfx_model_destroy(m);
}

/* The kernel's gradient from backward against central differences of the training loss. */
static void check_gradient(tfx_model *m, const int32_t *labels) {
  loss_of(m, labels);
  tfx_model_backward(m, x, B);
  tfx_var *k = tfx_model_var(m, 0);
  float grad[IN * OUT];
  memcpy(grad, k->grad, sizeof(float) * k->count);
  for (size_t i = 0; i < k->count; i++) {
    float keep = k->value[i];
    k->value[i] = keep + 1e-2f;
    double up = loss_of(m, labels);
    k->value[i] = keep - 1e-2f;
    double down = loss_of(m, labels);
    k->value[i] = keep;
    cr_expect_float_eq(grad[i], (up - down) / 2e-2, 2e-3, "kernel[%zu]: backward %g, differences %g", i, grad[i],
                       (up - down) / 2e-2);
  }
}

Test(loss, weighted_and_smoothed_gradients_agree_with_differences) {
  static const char *const sets[] = {"model.class_weights=[0.5, 3, 1]", "model.label_smoothing=0.15", NULL};
  static const float w[B] = {1, 0.25f, 2, 1.5f};
  tfx_model *m = make(OUT, "softmax_cross_entropy", sets);
  tfx_model_set_example_weights(m, w);
  check_gradient(m, y);
  tfx_model_destroy(m);
  static const char *const bin[] = {"model.class_weights=[1, 4]", "model.label_smoothing=0.1", NULL};
  m = make(1, "sigmoid_cross_entropy", bin);
  check_gradient(m, y_bin);
  tfx_model_destroy(m);
}

Test(loss, unit_weights_and_no_smoothing_are_bit_identical) {
  static const char *const sets[] = {"model.class_weights=[1, 1, 1]", NULL};
  static const float ones[B] = {1, 1, 1, 1};
  tfx_model *plain = make(OUT, "softmax_cross_entropy", NULL), *unit = make(OUT, "softmax_cross_entropy", sets);
  tfx_model_set_example_weights(unit, ones);
  double a = loss_of(plain, y), b = loss_of(unit, y);
  cr_assert(memcmp(&a, &b, sizeof a) == 0, "loss %.17g vs %.17g", a, b);
  cr_assert(memcmp(last(plain)->dout, last(unit)->dout, sizeof(float) * B * OUT) == 0);
  tfx_model_destroy(plain);
  tfx_model_destroy(unit);
}

Test(loss, class_weights_must_match_the_classes) {
  tfx_config c;
  tfx_config_init(&c);
  c.input_rank = 1;
  c.input_shape[0] = IN, c.input_shape[1] = 1, c.input_shape[2] = 1;
  c.n_layers = 0;
  cr_assert_eq(tfx_config_add_layer_json(&c, "{\"type\": \"dense\", \"units\": 3}", NULL), TFX_OK);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_set(&c, "model.class_weights=[1, 2]", &err), TFX_OK, "%s", err.msg);
  tfx_model *m = NULL;
  cr_assert_eq(tfx_model_create(&c, B, &m, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "model.class_weights: 2 weights for the model's 3 classes"), "%s", err.msg);
  cr_assert_eq(tfx_config_set(&c, "model.class_weights=[1, -2, 1]", &err), TFX_OK);
  cr_assert_eq(tfx_config_validate(&c, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "model.class_weights[1]"), "%s", err.msg);
}

/* ---- multi-label (model.multi_label): labels are sets, one sigmoid output per class ---- */

#include "common/labelset.h"

/* Label sets of the fixed batch: {0, 2}, {}, 1 (a single class), {0, 1, 2}. */
static int32_t sets_of_batch(int b) {
  static const char *const text[B] = {"0|2", "", "", "2|1|0"};
  int32_t y = 0;
  if (b == 2) {
    return 1;
  }
  cr_assert_eq(tfx_label_set_parse(text[b], '|', &y), 0, "'%s'", text[b]);
  return y;
}

Test(loss, multi_label_is_the_mean_sigmoid_cross_entropy_over_outputs) {
  static const char *const sets[] = {"model.multi_label=true", NULL};
  tfx_model *m = make(OUT, "sigmoid_cross_entropy", sets);
  int32_t ys[B];
  for (int b = 0; b < B; b++) {
    ys[b] = sets_of_batch(b);
  }
  cr_assert_eq(tfx_model_check_labels(m, ys, B, NULL, NULL), TFX_OK);
  double got = loss_of(m, ys), want = 0;
  for (int b = 0; b < B; b++) {
    for (int j = 0; j < OUT; j++) {
      double z = last(m)->out[b * OUT + j], t = (tfx_label_bits(ys[b]) >> j) & 1u;
      want += (fmax(z, 0) - z * t + log1p(exp(-fabs(z)))) / OUT / B; /* Keras's binary_crossentropy, mean */
    }
  }
  cr_assert_float_eq(got, want, 1e-6);
  check_gradient(m, ys);
  int32_t pred[B];
  cr_assert_eq(tfx_model_predictions(m, B, pred), OUT);
  for (int b = 0; b < B; b++) {
    uint32_t bits = 0;
    for (int j = 0; j < OUT; j++) {
      bits |= (uint32_t)(last(m)->out[b * OUT + j] > 0) << j;
    }
    cr_assert_eq(tfx_label_bits(pred[b]), bits, "example %d: predicted set", b);
  }
  int32_t bad[B] = {ys[0], ys[1], ys[2], (int32_t)(TFX_LABEL_SET | 8)}; /* class 3 of 3 outputs */
  tfx_err err = {0};
  int at = -1;
  cr_assert_eq(tfx_model_check_labels(m, bad, B, &at, &err), TFX_EINVAL);
  cr_assert_eq(at, 3);
  cr_assert(strstr(err.msg, "outside the model's 3 outputs"), "%s", err.msg);
  tfx_model_destroy(m);
}

Test(loss, a_set_for_a_single_label_model_names_multi_label) {
  tfx_model *m = make(OUT, "softmax_cross_entropy", NULL);
  int32_t ys[B] = {0, 1, sets_of_batch(0), 2};
  tfx_err err = {0};
  cr_assert_eq(tfx_model_check_labels(m, ys, B, NULL, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "needs model.multi_label"), "%s", err.msg);
  tfx_model_destroy(m);
}

Test(loss, label_sets_parse_and_refuse) {
  int32_t y = 7;
  cr_assert_eq(tfx_label_set_parse("3|0 | 30", '|', &y), 0);
  cr_assert_eq(tfx_label_bits(y), (1u << 3) | 1u | (1u << 30));
  cr_assert_eq(tfx_label_set_parse("", '|', &y), 0);
  cr_assert_eq(y, TFX_LABEL_SET, "the empty set");
  cr_assert_eq(tfx_label_bits(y), 0);
  cr_assert_eq(tfx_label_bits(5), 1u << 5, "a single class");
  const char *bad[] = {"31", "1|x", "-1", "1,2", "1||"};
  for (int i = 0; i < 5; i++) {
    y = 7;
    cr_assert_eq(tfx_label_set_parse(bad[i], '|', &y), -1, "'%s' accepted", bad[i]);
    cr_assert_eq(y, 7, "untouched");
  }
  cr_assert_eq(tfx_label_set_parse("1,2", ',', &y), 0, "LibSVM's separator");
}

Test(loss, multi_label_needs_sigmoid_cross_entropy) {
  tfx_config c;
  tfx_config_init(&c);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&c, "{\"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 3}], \"multi_label\": true}}",
                                "t", &err),
               TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_config_validate(&c, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "model.multi_label: needs model.loss sigmoid_cross_entropy"), "%s", err.msg);
}
