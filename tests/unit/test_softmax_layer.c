/* The softmax layer: the gradient through it matches finite differences; softmax as a
 * fused activation is refused with a message pointing to the layer. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "nn/model.h"

static tfx_model *make(const char *layers, tfx_err *err, int *rc) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  char json[512];
  snprintf(json, sizeof json, "{\"model\": {\"input_shape\": [5], \"layers\": %s}}", layers);
  cr_assert_eq(tfx_config_parse(&cfg, json, "test", NULL), TFX_OK);
  tfx_model *m = NULL;
  *rc = tfx_model_create(&cfg, 3, &m, err);
  if (!*rc) {
    tfx_model_init_vars(m, 11);
  }
  return m;
}

static double loss_of(tfx_model *m, const float *x, const int32_t *y) {
  tfx_step_stats st;
  tfx_model_forward(m, x, 3, 0, 0);
  tfx_model_loss(m, y, 3, 0, &st);
  return st.loss;
}

Test(softmax_layer, gradient_matches_finite_differences) {
  int rc;
  tfx_model *m = make(
      "[{\"type\": \"dense\", \"units\": 4}, {\"type\": \"softmax\"}, {\"type\": \"dense\", \"units\": 3}]", NULL, &rc);
  cr_assert_eq(rc, TFX_OK);
  float x[15];
  int32_t y[3] = {0, 2, 1};
  for (int i = 0; i < 15; i++) {
    x[i] = cosf((float)i) * 2;
  }
  tfx_step_stats st;
  tfx_model_forward(m, x, 3, 1, 0);
  tfx_model_loss(m, y, 3, 1, &st);
  tfx_model_backward(m, x, 3);
  tfx_var *k = tfx_model_find_var(m, "dense_1/kernel");
  for (size_t i = 0; i < k->count; i++) {
    float keep = k->value[i];
    k->value[i] = keep + 1e-2f;
    double up = loss_of(m, x, y);
    k->value[i] = keep - 1e-2f;
    double down = loss_of(m, x, y);
    k->value[i] = keep;
    double fd = (up - down) / 2e-2;
    cr_assert(fabs(fd - k->grad[i]) < 1e-3 + 2e-2 * fabs(fd), "kernel[%zu]: backward %g, finite difference %g", i,
              k->grad[i], fd);
  }
  tfx_model_destroy(m);
}

Test(softmax_layer, fused_softmax_activation_refused) {
  int rc;
  tfx_err err;
  tfx_model *m = make("[{\"type\": \"dense\", \"units\": 4, \"activation\": \"softmax\"}]", &err, &rc);
  cr_assert_eq(rc, TFX_ECONFIG);
  cr_assert(strstr(err.msg, "softmax is a layer of its own"), "%s", err.msg);
  cr_assert_null(m);
}
