/* The embedding bag over sparse examples: forward against a hand-computed reference for each combiner (weights
 * from the LibSVM values, empty bags), the row-sparse backward (ascending unique rows, duplicates summed) checked
 * by finite differences, ids outside the table refused by name, untouched rows left bit for bit by the lazy
 * update, a lent batch's rows filled by the caller read instead of the table (a worker's, or gathered from the
 * model's own), the CSR data path (LibSVM kept sparse, the batcher's sparse batches), and what a lazy table adds to
 * the bound on a message's frames (tfx_model_extent). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "data/libsvm.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "tmpdir.h"
#include "train/step.h"

#define D 10
#define K 3

/* A bag model over D features with K outputs and the combiner given; variables drawn uniform in +-0.5. */
static tfx_model *bag_model(const char *combiner, int use_bias) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  char json[512];
  snprintf(json, sizeof json,
           "{\"model\": {\"input_shape\": [%d], \"layers\": [{\"type\": \"embedding_bag\", \"units\": %d, "
           "\"combiner\": \"%s\", \"use_bias\": %s, \"initializer\": \"uniform:0.5\"}]}}",
           D, K, combiner, use_bias ? "true" : "false");
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&cfg, json, "test", &err), TFX_OK, "%s", err.msg);
  cr_assert(tfx_config_sparse_input(&cfg));
  tfx_model *m = NULL;
  cr_assert_eq(tfx_model_create(&cfg, 4, &m, &err), TFX_OK, "%s", err.msg);
  tfx_model_init_vars(m, 3);
  for (int i = 0; use_bias && i < K; i++) {
    tfx_model_find_var(m, "embedding_bag_1/bias")->value[i] = 0.1f * (float)(i + 1);
  }
  return m;
}

/* Three examples: ids {1, 4, 4} weighted {0.5, 2, 1}, an empty bag, ids {9, 0} weighted {-1, 3}. */
static const int64_t off[] = {0, 3, 3, 5};
static const int64_t ids[] = {1, 4, 4, 9, 0};
static const float vals[] = {0.5f, 2.0f, 1.0f, -1.0f, 3.0f};

static const tfx_csr batch3 = {3, off, ids, vals};

/* out[b] of the reference: bias + f * sum_k w_k E[id_k], f by the combiner. */
static void reference(tfx_model *m, const char *combiner, float *out) {
  const float *e = tfx_model_find_var(m, "embedding_bag_1/embeddings")->value;
  tfx_var *bias = tfx_model_find_var(m, "embedding_bag_1/bias");
  for (int b = 0; b < 3; b++) {
    double s = 0, q = 0;
    for (int64_t k = off[b]; k < off[b + 1]; k++) {
      s += vals[k], q += vals[k] * vals[k];
    }
    double f = !strcmp(combiner, "sum") ? 1 : !strcmp(combiner, "mean") ? (s ? 1 / s : 0) : (q ? 1 / sqrt(q) : 0);
    for (int j = 0; j < K; j++) {
      double acc = 0;
      for (int64_t k = off[b]; k < off[b + 1]; k++) {
        acc += vals[k] * e[ids[k] * K + j];
      }
      out[b * K + j] = (float)((bias ? bias->value[j] : 0) + f * acc);
    }
  }
}

static void check_forward(const char *combiner, int use_bias) {
  tfx_model *m = bag_model(combiner, use_bias);
  cr_assert(tfx_model_sparse_input(m));
  cr_assert_eq(tfx_model_set_csr(m, &batch3, 1, NULL), TFX_OK);
  const float *got = tfx_model_forward(m, NULL, 3, 1, 0);
  float want[3 * K];
  reference(m, combiner, want);
  for (int i = 0; i < 3 * K; i++) {
    cr_assert_float_eq(got[i], want[i], 1e-5, "%s: output %d is %g, want %g", combiner, i, got[i], want[i]);
  }
  for (int j = 0; j < K; j++) { /* the empty bag: the bias alone, or zeros */
    cr_assert_float_eq(got[K + j], use_bias ? 0.1f * (float)(j + 1) : 0.0f, 1e-7);
  }
  tfx_model_destroy(m);
}

Test(embag, forward_matches_the_reference_for_every_combiner) {
  check_forward("sum", 1);
  check_forward("mean", 1);
  check_forward("sqrtn", 0);
}

static double loss_of(tfx_model *m, const int32_t *y) {
  tfx_step_stats st;
  tfx_model_set_csr(m, &batch3, 1, NULL);
  tfx_model_forward(m, NULL, 3, 0, 0);
  tfx_model_loss(m, y, 3, 0, &st);
  return st.loss;
}

Test(embag, backward_gives_touched_rows_that_match_finite_differences) {
  tfx_model *m = bag_model("sqrtn", 1);
  tfx_var *t = tfx_model_find_var(m, "embedding_bag_1/embeddings");
  int32_t y[3] = {0, 2, 1};
  tfx_step_stats st;
  cr_assert_eq(tfx_model_set_csr(m, &batch3, 1, NULL), TFX_OK);
  tfx_model_forward(m, NULL, 3, 1, 0);
  tfx_model_loss(m, y, 3, 1, &st);
  tfx_model_backward(m, NULL, 3);
  const int64_t want_rows[] = {0, 1, 4, 9}; /* ascending, 4 once though it occurs twice */
  cr_assert_eq(t->n_rows, 4, "touched rows: %zu", t->n_rows);
  float grad[4 * K];
  memcpy(grad, t->grad, sizeof grad);
  for (int r = 0; r < 4; r++) {
    cr_assert_eq(t->rows[r], want_rows[r]);
    for (int j = 0; j < K; j++) {
      float *w = &t->value[want_rows[r] * K + j], keep = *w;
      *w = keep + 1e-2f;
      double up = loss_of(m, y);
      *w = keep - 1e-2f;
      double down = loss_of(m, y);
      *w = keep;
      double fd = (up - down) / 2e-2;
      cr_assert(fabs(fd - grad[r * K + j]) < 2e-3, "row %lld col %d: fd %g backward %g", (long long)want_rows[r], j, fd,
                grad[r * K + j]);
    }
  }
  tfx_model_destroy(m);
}

/* A worker's ps: checks the lent batch's ids and copies their rows from a table that holds the values into the
 * batch's rows, counting its calls. */
typedef struct fake_ps {
  const tfx_var *table;
  const int64_t *want;
  size_t n_want;
  int calls;
} fake_ps;

static void fake_rows(fake_ps *ps, tfx_model *m) {
  tfx_var *v = tfx_model_find_var(m, "embedding_bag_1/embeddings");
  ps->calls++;
  cr_assert_eq(v->n_batch, ps->n_want, "the batch's rows: %zu", v->n_batch);
  for (size_t k = 0; k < v->n_batch; k++) {
    cr_assert_eq(v->batch_ids[k], ps->want[k], "row %zu is id %lld", k, (long long)v->batch_ids[k]);
    memcpy(v->batch_vals + k * K, ps->table->value + v->batch_ids[k] * K, sizeof(float) * K);
  }
}

/* One forward/backward of batch c with labels y; the logits into out. The batch's rows, between lending it and
 * forward: from ps (a worker's), or gathered from the model's own table (gather), or none (read in place). */
static void bag_step(tfx_model *m, const tfx_csr *c, const int32_t *y, float *out, fake_ps *ps, int gather) {
  tfx_step_stats st;
  cr_assert_eq(tfx_model_set_csr(m, c, 1, NULL), TFX_OK);
  if (ps) {
    fake_rows(ps, m);
  }
  if (gather) {
    tfx_model_gather_rows(m);
  }
  memcpy(out, tfx_model_forward(m, NULL, (int)c->n, 1, 0), sizeof(float) * (size_t)c->n * K);
  tfx_model_loss(m, y, (int)c->n, 1, &st);
  tfx_model_backward(m, NULL, (int)c->n);
}

Test(embag, the_batch_rows_filled_after_lending_are_what_forward_reads_instead_of_the_table) {
  tfx_model *local = bag_model("mean", 1), *worker = bag_model("mean", 1);
  tfx_var *lt = tfx_model_find_var(local, "embedding_bag_1/embeddings");
  tfx_var *wt = tfx_model_find_var(worker, "embedding_bag_1/embeddings");
  for (size_t i = 0; i < wt->count; i++) {
    wt->value[i] = NAN; /* the worker's own table is never read: its rows come from the ps */
  }
  const int64_t want3[] = {0, 1, 4, 9};
  fake_ps ps = {lt, want3, 4, 0};
  tfx_model_set_rows(worker, TFX_ROWS_BATCH);
  int32_t y[4] = {0, 2, 1, 1};
  float a[4 * K], b[4 * K];
  bag_step(local, &batch3, y, a, NULL, 0);
  bag_step(worker, &batch3, y, b, &ps, 0);
  cr_assert_eq(ps.calls, 1);
  cr_assert_eq(memcmp(a, b, sizeof(float) * 3 * K), 0, "the logits differ from the table's");
  cr_assert_eq(wt->n_rows, lt->n_rows);
  cr_assert_eq(memcmp(wt->rows, lt->rows, sizeof(int64_t) * lt->n_rows), 0);
  cr_assert_eq(memcmp(wt->grad, lt->grad, sizeof(float) * lt->n_rows * K), 0, "the row gradients differ");
  /* A larger batch next (the rows grow) with ids in another order: the same again. */
  static const int64_t off4[] = {0, 4, 6, 9, 10};
  static const int64_t ids4[] = {9, 8, 7, 6, 5, 9, 3, 2, 2, 1};
  const tfx_csr batch4 = {4, off4, ids4, NULL};
  const int64_t want4[] = {1, 2, 3, 5, 6, 7, 8, 9};
  ps.want = want4;
  ps.n_want = 8;
  bag_step(local, &batch4, y, a, NULL, 0);
  bag_step(worker, &batch4, y, b, &ps, 0);
  cr_assert_eq(ps.calls, 2);
  cr_assert_eq(memcmp(a, b, sizeof a), 0, "the second batch's logits differ from the table's");
  cr_assert_eq(memcmp(wt->grad, lt->grad, sizeof(float) * lt->n_rows * K), 0);
  tfx_model_destroy(local);
  tfx_model_destroy(worker);
}

Test(embag, rows_gathered_from_the_models_own_table_train_as_the_table_read_in_place) {
  tfx_model *local = bag_model("sqrtn", 1), *one = bag_model("sqrtn", 1);
  tfx_var *lt = tfx_model_find_var(local, "embedding_bag_1/embeddings");
  tfx_var *ot = tfx_model_find_var(one, "embedding_bag_1/embeddings");
  tfx_model_set_rows(one, TFX_ROWS_BATCH);
  int32_t y[3] = {0, 2, 1};
  float a[3 * K], b[3 * K];
  bag_step(local, &batch3, y, a, NULL, 0);
  cr_assert_eq(tfx_model_set_csr(one, &batch3, 1, NULL), TFX_OK);
  cr_assert_eq(ot->n_batch, 4, "the batch's rows listed: %zu", ot->n_batch);
  bag_step(one, &batch3, y, b, NULL, 1);
  cr_assert_eq(memcmp(a, b, sizeof a), 0, "the logits of the gathered rows differ from the table's");
  cr_assert_eq(ot->n_rows, lt->n_rows);
  cr_assert_eq(memcmp(ot->grad, lt->grad, sizeof(float) * lt->n_rows * K), 0, "the row gradients differ");
  tfx_model_destroy(local);
  tfx_model_destroy(one);
}

Test(embag, an_id_outside_the_table_is_named) {
  tfx_model *m = bag_model("sum", 1);
  const int64_t o[] = {0, 1, 2};
  const int64_t bad[] = {3, D};
  const tfx_csr c = {2, o, bad, NULL};
  cr_assert_eq(tfx_model_set_csr(m, &c, 1, NULL), TFX_OK);
  tfx_model_forward(m, NULL, 2, 1, 0);
  tfx_err err = {0};
  int at = -1;
  cr_assert_eq(tfx_model_input_status(m, &at, &err), TFX_EINVAL);
  cr_assert_eq(at, 1);
  cr_assert(strstr(err.msg, "embedding_bag_1") && strstr(err.msg, "id 10"), "msg: %s", err.msg);
  tfx_model_destroy(m);
}

Test(embag, the_lazy_update_leaves_untouched_rows_bit_for_bit) {
  tfx_model *m = bag_model("sum", 1);
  tfx_var *t = tfx_model_find_var(m, "embedding_bag_1/embeddings");
  float before[D * K], *slot = calloc(D * K, sizeof(float));
  memcpy(before, t->value, sizeof before);
  int32_t y[3] = {1, 1, 0};
  tfx_step_stats st;
  tfx_model_set_csr(m, &batch3, 1, NULL);
  tfx_model_forward(m, NULL, 3, 1, 0);
  tfx_model_loss(m, y, 3, 1, &st);
  tfx_model_backward(m, NULL, 3);
  tfx_config cfg;
  tfx_config_init(&cfg);
  cfg.optimizer = TFX_OPT_ADAGRAD;
  tfx_optim o;
  tfx_optim_init(&o, &cfg);
  float *slots[2] = {slot, NULL};
  tfx_optim_apply_rows(&o, 0, t->value, t->grad, 1.0f, slots, t->rows, t->n_rows, K);
  for (int r = 0; r < D; r++) {
    int touched = r == 0 || r == 1 || r == 4 || r == 9;
    int same = !memcmp(&before[r * K], &t->value[r * K], sizeof(float) * K);
    cr_assert(touched ? !same : same, "row %d: touched %d, unchanged %d", r, touched, same);
  }
  free(slot);
  tfx_model_destroy(m);
}

Test(embag, libsvm_stays_sparse_and_batches_carry_their_rows) {
  tmpdir_create("embag");
  char path[128];
  snprintf(path, sizeof path, "%s/d.libsvm", tmp);
  FILE *f = fopen(path, "w");
  for (int i = 0; i < 7; i++) { /* example i: label i, ids i and i + 3 (1-based i + 1, i + 4), values i + 1 */
    fprintf(f, "%d %d:%d %d:%g\n", i, i + 1, i + 1, i + 4, 0.5 * i);
  }
  fclose(f);
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_libsvm_load_sparse(path, 1u << 30, &d, &err), TFX_OK, "%s", err.msg);
  cr_assert(d->x == NULL && d->n_fields == 1 && d->n == 7 && d->dim == 1u << 30, "a 2^30-wide set is held as CSR");
  cr_assert_eq(d->fields[0].off[7], 14);
  tfx_batcher *b = NULL;
  cr_assert_eq(tfx_batcher_create(d, 0, 1, 5, 1, &b, &err), TFX_OK);
  int32_t y[5];
  for (int round = 0; round < 4; round++) { /* wraps into the next epoch */
    const tfx_csr *c = tfx_batcher_next_csr(b, 5, NULL, y);
    cr_assert_eq(tfx_batcher_status(b, NULL), TFX_OK);
    for (int r = 0; r < 5; r++) {
      cr_assert_eq(c->off[r + 1] - c->off[r], 2);
      cr_assert_eq(c->ids[c->off[r]], y[r]);
      cr_assert_eq(c->ids[c->off[r] + 1], y[r] + 3);
      cr_assert_float_eq(c->vals[c->off[r] + 1], 0.5f * (float)y[r], 1e-7);
    }
  }
  tfx_batcher_destroy(b);
  tfx_dataset_destroy(d);
  cr_assert_eq(tfx_libsvm_load_sparse(path, 5, &d, &err), TFX_ESHAPE, "an index past dim is refused");
  cr_assert(strstr(err.msg, "line 3") && strstr(err.msg, "index 6 exceeds dim 5"), "msg: %s", err.msg);
  tmpdir_remove();
}

/* What bounds a message's frames (tfx_model_extent): a lazy table counts the rows an evaluation batch may touch
 * (1000 examples at 1024 ids each) and no more than the table; a dense variable counts whole. */
Test(embag, extent_counts_a_lazy_tables_batch_rows_and_dense_variables_whole) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  const char *json =
      "{\"model\": {\"input_shape\": [1048576], \"layers\": [{\"type\": \"embedding_bag\", \"units\": 4},"
      " {\"type\": \"dense\", \"units\": 300}]}, \"training\": {\"batch_size\": 32}}";
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&cfg, json, "test", &err), TFX_OK, "%s", err.msg);
  size_t largest = 0, ids = 0;
  cr_assert_eq(tfx_model_extent(&cfg, &largest, &ids, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(ids, 1024000, "ids %zu: 1000 examples x 1024, below the table's 2^20", ids);
  cr_assert_eq(largest, 1024000 * 4 * sizeof(float), "largest %zu: the table's rows, above the dense 4x300", largest);
  cfg.input_shape[0] = 1000; /* a table smaller than a batch's rows counts whole */
  cr_assert_eq(tfx_model_extent(&cfg, &largest, &ids, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(ids, 1000);
  cr_assert_eq(largest, 1000 * 4 * sizeof(float));
}
