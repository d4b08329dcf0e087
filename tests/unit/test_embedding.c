/* The embedding layer: gather forward, row-sparse backward (only touched rows, ascending, summed), checked by
 * finite differences on the table; and the lazy row-sparse optimizer update. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "data/dataset.h"
#include "nn/model.h"
#include "nn/nn_impl.h"
#include "nn/optim.h"
#include "step_check.h"
#include "train/step.h"

static void embed_config(tfx_config *cfg) {
  tfx_config_init(cfg);
  const char *json =
      "{\"model\": {\"input_shape\": [4], \"layers\": [{\"type\": \"embedding\", \"input_dim\": 6, \"units\": 3},"
      " {\"type\": \"dense\", \"units\": 2}]}}";
  cr_assert_eq(tfx_config_parse(cfg, json, "test", NULL), TFX_OK);
}

/* The embed_config model with its variables initialized; the test owns it. */
static tfx_model *embed_model(void) {
  tfx_config cfg;
  embed_config(&cfg);
  tfx_model *m;
  cr_assert_eq(tfx_model_create(&cfg, 2, &m, NULL), TFX_OK);
  tfx_model_init_vars(m, 7);
  return m;
}

static double loss_at(tfx_model *m, const float *x, const int32_t *y) {
  tfx_step_stats st;
  tfx_model_forward(m, x, 2, 0, 0);
  tfx_model_loss(m, y, 2, 0, &st);
  return st.loss;
}

Test(embedding, sparse_gradient_matches_finite_differences) {
  tfx_model *m = embed_model();
  tfx_var *t = tfx_model_find_var(m, "embedding_1/embeddings");
  cr_assert(t && t->sparse && t->shape[0] == 6 && t->shape[1] == 3);
  float x[8] = {1, 4, 4, 0, 5, 1, 5, 0};
  int32_t y[2] = {0, 1};
  tfx_step_stats st;
  tfx_model_forward(m, x, 2, 1, 0);
  tfx_model_loss(m, y, 2, 1, &st);
  tfx_model_backward(m, x, 2);
  int64_t want_rows[] = {0, 1, 4, 5};
  cr_assert_eq(t->n_rows, 4, "touched rows: %zu", t->n_rows);
  for (int k = 0; k < 4; k++) {
    cr_assert_eq(t->rows[k], want_rows[k]);
  }
  float saved[18];
  memcpy(saved, t->grad, sizeof(float) * 12);
  for (int k = 0; k < 4; k++) {
    for (int d = 0; d < 3; d++) {
      float *w = &t->value[want_rows[k] * 3 + d], keep = *w;
      *w = keep + 1e-2f;
      double up = loss_at(m, x, y);
      *w = keep - 1e-2f;
      double down = loss_at(m, x, y);
      *w = keep;
      double fd = (up - down) / 2e-2, g = saved[k * 3 + d];
      cr_assert(fabs(fd - g) < 2e-3 + 1e-2 * fabs(fd), "row %lld dim %d: backward %g, finite difference %g",
                (long long)want_rows[k], d, g, fd);
    }
  }
  /* Rows 2 and 3 were not touched: moving them must not change the loss. */
  double base = loss_at(m, x, y);
  t->value[2 * 3] += 1.0f;
  cr_assert_float_eq(loss_at(m, x, y), base, 1e-12);
  tfx_model_destroy(m);
}

Test(embedding, ids_outside_the_table_are_an_error_not_a_clamped_row) {
  tfx_model *m = embed_model();
  tfx_var *t = tfx_model_find_var(m, "embedding_1/embeddings");
  const float good[8] = {1, 4, 4, 0, 5, 1, 5, 0}, high[8] = {1, 4, 4, 0, 3, 1, 9, 2},
              neg[8] = {-2, 1, 1, 1, 1, 1, 1, 1};
  const int32_t y[2] = {0, 1};
  tfx_err err = {0};
  tfx_model_forward(m, good, 2, 1, 0);
  int at = -1;
  cr_assert_eq(tfx_model_input_status(m, &at, &err), TFX_OK);
  tfx_step_stats st;
  tfx_model_forward(m, high, 2, 1, 0);
  cr_assert_eq(tfx_model_input_status(m, &at, &err), TFX_EINVAL);
  cr_assert_str_eq(err.msg, "embedding_1: id 9 is outside the table's 6 rows [0, 6)");
  cr_assert_eq(at, 1, "id 9 is in example 1 of the batch: %d", at);
  tfx_model_loss(m, y, 2, 1, &st);
  tfx_model_backward(m, high, 2);
  cr_assert_eq(t->n_rows, 5, "rows 0 to 4 and not the clamped row 5: %zu rows", t->n_rows);
  const int64_t want[5] = {0, 1, 2, 3, 4};
  for (int k = 0; k < 5; k++) {
    cr_assert_eq(t->rows[k], want[k], "row %d: %lld", k, (long long)t->rows[k]);
  }
  tfx_model_forward(m, high, 2, 0, 0);
  const float *out = m->layers[0].out; /* the embedding's output: example 1, position 2 read id 9 */
  for (int k = 0; k < 3; k++) {
    cr_assert_eq(out[(4 + 2) * 3 + k], 0.0f, "the bad id's embedding is zeros, not row 5");
  }
  tfx_model_forward(m, neg, 2, 0, 0);
  cr_assert_eq(tfx_model_input_status(m, &at, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "id -2") && strstr(err.msg, "6 rows"), "msg: %s", err.msg);
  cr_assert_eq(at, 0, "id -2 is in example 0: %d", at);
  tfx_model_forward(m, good, 2, 0, 0);
  cr_assert_eq(tfx_model_input_status(m, NULL, &err), TFX_OK, "a good batch clears it");
  tfx_model_destroy(m);
}

Test(embedding, a_training_step_on_a_bad_id_fails_the_batcher) {
  tfx_model *m = embed_model();
  float xs[8] = {1, 2, 3, 4, 0, 6, 1, 2};
  tfx_dataset d = {2, 4, xs, (int32_t[2]){0, 1}};
  expect_step_fails(m, &d, "embedding_1: id 6", "6 rows");
  tfx_model_destroy(m);
}

Test(embedding, lazy_row_update_leaves_other_rows) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  cfg.optimizer = TFX_OPT_ADAM;
  tfx_optim o;
  tfx_optim_init(&o, &cfg);
  float w[12] = {0}, m[12] = {0}, v[12] = {0}, g[6] = {1, 1, 1, 2, 2, 2};
  float *slots[2] = {m, v};
  int64_t rows[2] = {1, 3};
  tfx_optim_apply_rows(&o, 0, w, g, 1.0f, slots, rows, 2, 3);
  for (int i = 0; i < 12; i++) {
    int touched = i / 3 == 1 || i / 3 == 3;
    cr_assert(touched ? w[i] < 0 : w[i] == 0, "w[%d] = %g", i, w[i]);
    cr_assert(touched ? m[i] > 0 : m[i] == 0, "slot m[%d] = %g", i, m[i]);
  }
}

Test(embedding, rejects_rank3_input) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  const char *json =
      "{\"model\": {\"input_shape\": [2, 2, 1], \"layers\": [{\"type\": \"embedding\", \"input_dim\": 4, \"units\": "
      "2}]}}";
  cr_assert_eq(tfx_config_parse(&cfg, json, "test", NULL), TFX_OK);
  tfx_model *m = NULL;
  tfx_err err;
  cr_assert_eq(tfx_model_create(&cfg, 1, &m, &err), TFX_ESHAPE);
  cr_assert(strstr(err.msg, "embedding_1"), "%s", err.msg);
}
