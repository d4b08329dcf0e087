/* Batch norm: finite-difference gradients for gamma, beta and the input; moving statistics move toward the
 * batch statistics in training and are what evaluation uses; they are non-trainable and assigned. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "nn/model.h"

static tfx_model *bn_model(const char *shape, int lead) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  char json[512];
  snprintf(json, sizeof json,
           "{\"model\": {\"input_shape\": %s, \"layers\": [%s{\"type\": \"batch_norm\"}, {\"type\": \"flatten\"},"
           " {\"type\": \"dense\", \"units\": 3, \"activation\": \"tanh\"}, {\"type\": \"dense\", \"units\": 2}]}}",
           shape,
           !lead                ? ""
           : strchr(shape, ',') ? "{\"type\": \"conv2d\", \"filters\": 3, \"kernel_size\": 1}, "
                                : "{\"type\": \"dense\", \"units\": 4}, ");
  cr_assert_eq(tfx_config_parse(&cfg, json, "test", NULL), TFX_OK);
  tfx_model *m;
  cr_assert_eq(tfx_model_create(&cfg, 4, &m, NULL), TFX_OK);
  tfx_model_init_vars(m, 3);
  return m;
}

static double loss_of(tfx_model *m, const float *x, const int32_t *y) {
  tfx_step_stats st;
  tfx_model_forward(m, x, 4, 1, 0);
  tfx_model_loss(m, y, 4, 0, &st);
  return st.loss;
}

static void check_param(tfx_model *m, tfx_var *v, const float *x, const int32_t *y) {
  for (size_t i = 0; i < v->count; i++) {
    float keep = v->value[i];
    v->value[i] = keep + 1e-2f;
    double up = loss_of(m, x, y);
    v->value[i] = keep - 1e-2f;
    double down = loss_of(m, x, y);
    v->value[i] = keep;
    double fd = (up - down) / 2e-2;
    cr_assert(fabs(fd - v->grad[i]) < 2e-3 + 2e-2 * fabs(fd), "%s[%zu]: backward %g, finite difference %g", v->name, i,
              v->grad[i], fd);
  }
}

static void gradient_check(const char *shape, int n_in) {
  tfx_model *m = bn_model(shape, 1);
  float x[4 * 8];
  int32_t y[4] = {0, 1, 1, 0};
  for (int i = 0; i < 4 * n_in; i++) {
    x[i] = sinf((float)i * 1.7f) * 2 + (float)(i % 3);
  }
  tfx_step_stats st;
  tfx_model_forward(m, x, 4, 1, 0);
  tfx_model_loss(m, y, 4, 1, &st);
  tfx_model_backward(m, x, 4);
  check_param(m, tfx_model_find_var(m, "batch_norm_1/gamma"), x, y);
  check_param(m, tfx_model_find_var(m, "batch_norm_1/beta"), x, y);
  /* The first layer's kernel gradient flows through batch norm's input gradient. */
  tfx_var *first = tfx_model_var(m, 0);
  check_param(m, first, x, y);
  tfx_model_destroy(m);
}

Test(batchnorm, gradients_rank1) {
  gradient_check("[6]", 6);
}

Test(batchnorm, gradients_rank3) {
  gradient_check("[2, 2, 2]", 8);
}

Test(batchnorm, moving_statistics_are_assigned_not_trained) {
  tfx_model *m = bn_model("[2]", 0);
  tfx_var *mm = tfx_model_find_var(m, "batch_norm_1/moving_mean"),
          *mv = tfx_model_find_var(m, "batch_norm_1/moving_variance");
  cr_assert(mm && mv && !mm->trainable && mm->assign && !mv->trainable && mv->assign);
  cr_assert(tfx_model_find_var(m, "batch_norm_1/gamma")->trainable);
  float x[8] = {10, 0, 12, 0, 14, 0, 16, 0};
  for (int i = 0; i < 500; i++) {
    tfx_model_forward(m, x, 4, 1, (uint64_t)i);
  }
  double decay = pow(0.99, 500);
  cr_assert_float_eq(mm->value[0], 13.0 * (1 - decay), 1e-2, "moving mean %g", mm->value[0]);
  cr_assert_float_eq(mv->value[0], decay + 5.0 * (1 - decay), 1e-2, "moving variance %g", mv->value[0]);
  tfx_model_destroy(m);
}

/* A model of one batch_norm layer over 2 features: its output is the logits. */
static tfx_model *bn_only(void) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  const char *json = "{\"model\": {\"input_shape\": [2], \"layers\": [{\"type\": \"batch_norm\"}]}}";
  cr_assert_eq(tfx_config_parse(&cfg, json, "test", NULL), TFX_OK);
  tfx_model *m;
  cr_assert_eq(tfx_model_create(&cfg, 4, &m, NULL), TFX_OK);
  tfx_model_init_vars(m, 3);
  return m;
}

static void set(tfx_model *m, const char *name, float a, float b) {
  tfx_var *v = tfx_model_find_var(m, name);
  cr_assert(v && v->count == 2, "%s", name);
  v->value[0] = a, v->value[1] = b;
}

Test(batchnorm, evaluation_normalizes_with_the_moving_statistics) {
  tfx_model *m = bn_only();
  const float gamma[2] = {1.5f, -0.5f}, beta[2] = {0.25f, 2.0f}, mmean[2] = {3.0f, -1.0f}, mvar[2] = {4.0f, 0.25f};
  set(m, "batch_norm_1/gamma", gamma[0], gamma[1]), set(m, "batch_norm_1/beta", beta[0], beta[1]);
  set(m, "batch_norm_1/moving_mean", mmean[0], mmean[1]);
  set(m, "batch_norm_1/moving_variance", mvar[0], mvar[1]);
  const float x[8] = {1, 2, 5, -3, 0.5f, 0, 7, 1};
  const float *out = tfx_model_forward(m, x, 4, 0, 0);
  float eval[8];
  memcpy(eval, out, sizeof eval);
  for (int i = 0; i < 8; i++) {
    int k = i % 2; /* eps is Keras's default, 1e-3 */
    double want = (x[i] - mmean[k]) / sqrt(mvar[k] + 1e-3) * gamma[k] + beta[k];
    cr_assert_float_eq(eval[i], want, 1e-5 * (1 + fabs(want)), "eval out[%d] = %g, want %g", i, eval[i], want);
  }
  cr_assert_eq(tfx_model_find_var(m, "batch_norm_1/moving_mean")->value[0], mmean[0], "evaluation leaves them");
  out = tfx_model_forward(m, x, 4, 1, 0);
  for (int i = 0; i < 8; i++) {
    int k = i % 2; /* training: the batch's own mean and (biased) variance */
    double mu = (x[k] + x[k + 2] + x[k + 4] + x[k + 6]) / 4, var = 0;
    for (int r = 0; r < 4; r++) {
      var += (x[2 * r + k] - mu) * (x[2 * r + k] - mu) / 4;
    }
    double want = (x[i] - mu) / sqrt(var + 1e-3) * gamma[k] + beta[k];
    cr_assert_float_eq(out[i], want, 1e-5 * (1 + fabs(want)), "train out[%d] = %g, want %g", i, out[i], want);
    cr_assert(fabs(out[i] - eval[i]) > 0.1, "out[%d]: training %g and evaluation %g must differ", i, out[i], eval[i]);
  }
  tfx_model_destroy(m);
}
