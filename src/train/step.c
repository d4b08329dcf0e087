/* Gradient computation over one or more minibatches. */
#include "train/step.h"

#include <cblas.h>
#include <string.h>

#include "data/dataset.h"
#include "train/pmetrics.h"
#include "train/progressive.h"

/* Adds grads / k into acc; the last of the k minibatches copies the mean back into the grads. */
static void accumulate(tfx_model *m, float **acc, int a, int k) {
  for (int i = 0; i < tfx_model_nvars(m); i++) {
    tfx_var *v = tfx_model_var(m, i);
    if (a == 0) {
      memset(acc[i], 0, sizeof(float) * v->count);
    }
    cblas_saxpy((int)v->count, 1.0f / (float)k, v->grad, 1, acc[i], 1);
    if (a == k - 1) {
      memcpy(v->grad, acc[i], sizeof(float) * v->count);
    }
  }
}

/* A label outside the model's classes fails the batcher, which the caller checks (tfx_batcher_status). */
static int bad_labels(const tfx_model *m, tfx_batcher *b, const tfx_grad_step *g) {
  tfx_err e = {0};
  int at = 0;
  int rc = tfx_batcher_status(b, NULL) ? 0 : tfx_model_check_labels(m, g->y, g->batch, &at, &e);
  if (rc) {
    tfx_batcher_fail(b, rc, "training input: example %d of the batch: %s", at, e.msg);
  }
  return rc;
}

/* An embedding id outside its table fails the batcher, which the caller checks (tfx_batcher_status). */
static int bad_ids(const tfx_model *m, tfx_batcher *b) {
  tfx_err e = {0};
  int at = 0;
  int rc = tfx_model_input_status(m, &at, &e);
  if (rc) {
    tfx_batcher_fail(b, rc, "training input: example %d of the batch: %s", at, e.msg);
  }
  return rc;
}

/* The next minibatch into g's scratch (dense) or lent to the model (sparse), its example weights lent to the
 * model; nonzero when the input failed. */
static int next_batch(tfx_model *m, tfx_batcher *b, const tfx_grad_step *g) {
  if (!tfx_model_sparse_input(m)) {
    tfx_batcher_next(b, g->batch, g->x, g->y);
    tfx_model_set_example_weights(m, tfx_batcher_weights(b));
    return tfx_batcher_status(b, NULL);
  }
  const tfx_csr *c = tfx_batcher_next_csr(b, g->batch, g->x, g->y);
  tfx_model_set_example_weights(m, tfx_batcher_weights(b));
  tfx_err e = {0};
  int rc = tfx_batcher_status(b, NULL);
  if (!rc && (rc = tfx_model_set_csr(m, c, tfx_batcher_fields(b), &e))) {
    tfx_batcher_fail(b, rc, "training input: %s", e.msg);
  }
  return rc;
}

int tfx_lend_batch(tfx_model *m, tfx_batcher *b, const tfx_grad_step *g) {
  return next_batch(m, b, g) || bad_labels(m, b, g);
}

/* Forward, loss and backward of the lent minibatch into the model's grads; nonzero (the batcher failed) when an
 * id was outside its table. */
static int lent_gradients(tfx_model *m, tfx_batcher *b, const tfx_grad_step *g, uint64_t seed, tfx_step_stats *st) {
  tfx_model_forward(m, g->x, g->batch, 1, seed);
  if (bad_ids(m, b)) {
    return 1;
  }
  if (g->pv) { /* progressive validation: the batch scored before its update */
    tfx_progressive_score(g->pv, m, g->batch);
  }
  tfx_model_loss(m, g->y, g->batch, 1, st);
  if (g->pv) {
    tfx_progressive_add(g->pv, g->y, g->batch, st->loss);
  }
  if (g->pm) {
    tfx_pmetrics_update(g->pm, g->pm_state, m, g->y, tfx_batcher_weights(b), g->batch, 1);
  }
  tfx_model_backward(m, g->x, g->batch);
  return 0;
}

static void clip(tfx_model *m, const tfx_grad_step *g) {
  if (g->clip_value > 0 || g->clip_norm > 0) {
    tfx_model_clip(m, g->clip_value, g->clip_norm);
  }
}

void tfx_compute_lent(tfx_model *m, tfx_batcher *b, const tfx_grad_step *g, uint64_t seed, tfx_step_stats *st) {
  tfx_step_stats one = {0};
  if (!tfx_batcher_status(b, NULL)) {
    lent_gradients(m, b, g, seed, &one);
  }
  clip(m, g);
  *st = one;
}

void tfx_compute_gradients(tfx_model *m, tfx_batcher *b, const tfx_grad_step *g, uint64_t seed, tfx_step_stats *st) {
  int k = g->accumulate;
  tfx_step_stats one, sum = {0};
  for (int a = 0; a < k; a++) {
    if (tfx_lend_batch(m, b, g)) {
      break;
    }
    tfx_model_gather_rows(m); /* the lazy tables' rows from the model's own tables (TFX_ROWS_BATCH) */
    if (lent_gradients(m, b, g, seed * (uint64_t)k + (uint64_t)a, &one)) {
      break;
    }
    sum.loss += one.loss / k;
    sum.correct += one.correct;
    sum.top5 += one.top5;
    sum.count += one.count;
    if (k > 1) {
      accumulate(m, g->acc, a, k);
    }
  }
  clip(m, g);
  *st = sum;
}
