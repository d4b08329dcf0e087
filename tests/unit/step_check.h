/* A training step on data the model cannot take (a label outside its classes, an id outside a table) must fail
 * the batcher with a message naming it: shared by the model and embedding suites. */
#ifndef TFX_TEST_STEP_CHECK_H
#define TFX_TEST_STEP_CHECK_H

#include <criterion/criterion.h>
#include <string.h>

#include "data/dataset.h"
#include "nn/model.h"
#include "train/step.h"

/* Runs one step of the whole dataset d (d->n examples of d->dim values) through m, then checks that the batcher
 * failed with TFX_EINVAL and a message holding want and also (NULL: not checked). */
static inline void expect_step_fails(tfx_model *m, tfx_dataset *d, const char *want, const char *also) {
  tfx_batcher *bt = NULL;
  cr_assert_eq(tfx_batcher_create(d, 0, 1, 1, 0, &bt, NULL), TFX_OK);
  float *x = calloc(d->n * d->dim, sizeof *x), *acc[2] = {NULL, NULL};
  int32_t *y = calloc(d->n, sizeof *y);
  tfx_grad_step g = {(int)d->n, 1, 0, 0, x, y, acc};
  tfx_step_stats st;
  tfx_compute_gradients(m, bt, &g, 1, &st);
  tfx_err err = {0};
  cr_assert_eq(tfx_batcher_status(bt, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "training input") && strstr(err.msg, want), "msg: %s", err.msg);
  cr_assert(!also || strstr(err.msg, also), "msg: %s", err.msg);
  free(x), free(y);
  tfx_batcher_destroy(bt);
}

#endif
