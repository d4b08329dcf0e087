/* The recommendation layers (src/nn/cross.c, dot.c, attention.c, and the embedding bag's sequence combiner):
 * finite-difference gradient checks of every variable, the values they compute against a direct recomputation,
 * masking of short and empty histories and of ids past max_len, a table shared by two columns (one variable, the
 * union of their rows, read from the table or from the batch's rows alike), and the errors that name the layer and
 * the shapes (a shared table whose columns disagree, a layer reading a zero-width dense input). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"

#define BATCH 3

static uint64_t rng = 0x2545F4914F6CDD1DULL;

static double gauss(void) {
  double u[2];
  for (int i = 0; i < 2; i++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    u[i] = ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
  }
  return sqrt(-2 * log(u[0])) * cos(2 * M_PI * u[1]);
}

static int build(const char *model_json, tfx_model **m, tfx_err *err) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  char json[4096];
  snprintf(json, sizeof json, "{\"model\": %s}", model_json);
  int rc = tfx_config_parse(&cfg, json, "test", err);
  return rc ? rc : tfx_model_create(&cfg, BATCH, m, err);
}

/* The sparse batch of the attention model: hist (max_len 4) holds 2, 0 and 6 ids; item one id each. */
static const int64_t hist_off[] = {0, 2, 2, 8}, hist_ids[] = {1, 5, 2, 3, 1, 7, 8, 9};
static const int64_t item_off[] = {0, 1, 2, 3}, item_ids[] = {5, 2, 3};
static const tfx_csr fields[2] = {{BATCH, hist_off, hist_ids, NULL}, {BATCH, item_off, item_ids, NULL}};

typedef struct ctx {
  tfx_model *m;
  float *x;
  int32_t y[BATCH];
  int sparse;
} ctx;

static double loss_at(ctx *c, int grad) {
  tfx_step_stats st;
  if (c->sparse) {
    cr_assert_eq(tfx_model_set_csr(c->m, fields, 2, NULL), TFX_OK);
  }
  tfx_model_forward(c->m, c->x, BATCH, 1, 0);
  tfx_model_loss(c->m, c->y, BATCH, grad, &st);
  if (grad) {
    tfx_model_backward(c->m, c->x, BATCH);
  }
  return st.loss;
}

static double grad_of(const tfx_var *v, size_t j) {
  if (!v->sparse) {
    return v->grad[j];
  }
  size_t width = v->count / (size_t)v->shape[0], row = j / width;
  size_t k = tfx_rows_lower_bound(v->rows, v->n_rows, (int64_t)row);
  return k < v->n_rows && v->rows[k] == (int64_t)row ? v->grad[k * width + j % width] : 0.0;
}

/* Central differences of the mean loss against every variable's backward gradient (up to 60 elements each). */
static void check_grads(ctx *c) {
  loss_at(c, 1);
  for (int i = 0; i < tfx_model_nvars(c->m); i++) {
    tfx_var *v = tfx_model_var(c->m, i);
    double *g = malloc(sizeof(double) * v->count);
    for (size_t j = 0; j < v->count; j++) {
      g[j] = grad_of(v, j);
    }
    size_t stride = v->count > 60 ? v->count / 60 : 1;
    for (size_t j = 0; j < v->count; j += stride) {
      float w = v->value[j];
      v->value[j] = w + 1e-2f;
      double up = loss_at(c, 0);
      v->value[j] = w - 1e-2f;
      double down = loss_at(c, 0);
      v->value[j] = w;
      double fd = (up - down) / 2e-2;
      cr_assert(fabs(fd - g[j]) < 2e-3 + 2e-2 * fabs(fd), "%s[%zu]: backward %g, central difference %g", v->name, j,
                g[j], fd);
    }
    free(g);
  }
}

static void setup(ctx *c, const char *model_json, int sparse) {
  tfx_err err = {0};
  c->m = NULL;
  cr_assert_eq(build(model_json, &c->m, &err), TFX_OK, "%s", err.msg);
  c->sparse = sparse;
  for (int i = 0; i < tfx_model_nvars(c->m); i++) {
    tfx_var *v = tfx_model_var(c->m, i);
    for (size_t j = 0; j < v->count; j++) {
      v->value[j] = (float)(0.5 * gauss());
    }
  }
  size_t n = tfx_model_input_size(c->m) * BATCH;
  c->x = malloc(sizeof(float) * n);
  for (size_t j = 0; j < n; j++) {
    c->x[j] = (float)gauss();
  }
  for (int b = 0; b < BATCH; b++) {
    c->y[b] = b % (int)tfx_model_output_size(c->m);
  }
}

static void teardown(ctx *c) {
  tfx_model_destroy(c->m);
  free(c->x);
}

Test(recsys, cross_full_rank_stack_gradients) {
  ctx c;
  setup(&c,
        "{\"input_shape\": [5], \"layers\": [{\"type\": \"cross\", \"name\": \"c1\", \"inputs\": \"input\"},"
        " {\"type\": \"cross\", \"name\": \"c2\", \"inputs\": \"input,c1\"}, {\"type\": \"dense\", \"units\": 2}]}",
        0);
  check_grads(&c);
  teardown(&c);
}

Test(recsys, cross_low_rank_gradients) {
  ctx c;
  setup(
      &c,
      "{\"input_shape\": [6], \"layers\": [{\"type\": \"dense\", \"name\": \"x0\", \"units\": 6, \"activation\": "
      "\"tanh\"}, {\"type\": \"cross\", \"name\": \"c1\", \"rank\": 2, \"inputs\": \"x0\"},"
      " {\"type\": \"cross\", \"name\": \"c2\", \"rank\": 3, \"inputs\": \"x0,c1\"}, {\"type\": \"dense\", \"units\": "
      "2}]}",
      0);
  check_grads(&c);
  teardown(&c);
}

Test(recsys, cross_computes_x0_times_affine_plus_xl) {
  ctx c;
  setup(&c,
        "{\"input_shape\": [3], \"layers\": [{\"type\": \"cross\", \"name\": \"c\"}, {\"type\": \"dense\", "
        "\"units\": 1}]}",
        0);
  tfx_var *w = tfx_model_find_var(c.m, "c/kernel"), *b = tfx_model_find_var(c.m, "c/bias");
  tfx_var *k = tfx_model_find_var(c.m, "dense_1/kernel"), *kb = tfx_model_find_var(c.m, "dense_1/bias");
  const float *out = tfx_model_forward(c.m, c.x, BATCH, 0, 0);
  for (int e = 0; e < BATCH; e++) {
    const float *x = c.x + e * 3;
    double want = kb->value[0];
    for (int j = 0; j < 3; j++) {
      double u = b->value[j];
      for (int i = 0; i < 3; i++) {
        u += x[i] * w->value[i * 3 + j];
      }
      want += (x[j] * u + x[j]) * k->value[j];
    }
    cr_assert_float_eq(out[e], (float)want, 1e-4, "example %d: %g vs %g", e, out[e], want);
  }
  teardown(&c);
}

Test(recsys, dot_interaction_is_the_upper_triangle_and_its_gradients) {
  ctx c;
  setup(&c,
        "{\"input_shape\": [3], \"layers\": [{\"type\": \"dense\", \"name\": \"a\", \"units\": 4},"
        " {\"type\": \"dense\", \"name\": \"b\", \"units\": 4, \"inputs\": \"input\", \"activation\": \"tanh\"},"
        " {\"type\": \"dense\", \"name\": \"d\", \"units\": 4, \"inputs\": \"input\"},"
        " {\"type\": \"dot_interaction\", \"name\": \"dots\", \"inputs\": \"a,b,d,a\"},"
        " {\"type\": \"dense\", \"units\": 2}]}",
        0);
  check_grads(&c);
  /* the values: a model that ends at the dots of three inputs, pairs (0,1), (0,2), (1,2) */
  ctx e;
  setup(&e,
        "{\"input_shape\": [2], \"layers\": [{\"type\": \"dense\", \"name\": \"a\", \"units\": 2},"
        " {\"type\": \"dense\", \"name\": \"b\", \"units\": 2, \"inputs\": \"input\"},"
        " {\"type\": \"dense\", \"name\": \"d\", \"units\": 2, \"inputs\": \"input\"},"
        " {\"type\": \"dot_interaction\", \"inputs\": \"a,b,d\"}]}",
        0);
  const float *dots = tfx_model_forward(e.m, e.x, BATCH, 0, 0);
  cr_assert_eq(tfx_model_output_size(e.m), 3);
  float v[3][2];
  const char *names[3] = {"a", "b", "d"};
  for (int n = 0; n < 3; n++) {
    char kn[32], bn[32];
    snprintf(kn, sizeof kn, "%s/kernel", names[n]);
    snprintf(bn, sizeof bn, "%s/bias", names[n]);
    tfx_var *k = tfx_model_find_var(e.m, kn), *b = tfx_model_find_var(e.m, bn);
    for (int j = 0; j < 2; j++) {
      v[n][j] = b->value[j] + e.x[2] * k->value[j] + e.x[3] * k->value[2 + j];
    }
  }
  int pairs[3][2] = {{0, 1}, {0, 2}, {1, 2}};
  for (int p = 0; p < 3; p++) {
    float want2 = v[pairs[p][0]][0] * v[pairs[p][1]][0] + v[pairs[p][0]][1] * v[pairs[p][1]][1];
    cr_assert_float_eq(dots[3 + p], want2, 1e-4, "pair %d of example 1", p);
  }
  teardown(&e);
  teardown(&c);
}

static const char *din_json =
    "{\"features\": [{\"key\": \"hist\", \"type\": \"identity\", \"num_buckets\": 10, \"separator\": \"|\","
    " \"max_len\": 4}, {\"key\": \"item\", \"type\": \"identity\", \"num_buckets\": 10}],"
    " \"layers\": [{\"type\": \"embedding_bag\", \"name\": \"seq\", \"inputs\": \"hist\", \"units\": 3,"
    " \"combiner\": \"sequence\"},"
    " {\"type\": \"embedding_bag\", \"name\": \"tgt\", \"inputs\": \"item\", \"units\": 3, \"use_bias\": false},"
    " {\"type\": \"target_attention\", \"name\": \"att\", \"inputs\": \"seq,tgt\"},"
    " {\"type\": \"concat\", \"inputs\": \"att,tgt\"}, {\"type\": \"dense\", \"units\": 2}]}";

Test(recsys, target_attention_gradients_with_short_empty_and_long_histories) {
  ctx c;
  setup(&c, din_json, 1);
  check_grads(&c);
  /* ids past max_len (example 2's last two, 8 and 9) are never read: no gradient row */
  tfx_var *t = tfx_model_find_var(c.m, "seq/embeddings");
  loss_at(&c, 1);
  for (size_t r = 0; r < t->n_rows; r++) {
    cr_assert(t->rows[r] != 8 && t->rows[r] != 9, "row %lld has a gradient", (long long)t->rows[r]);
  }
  teardown(&c);
}

Test(recsys, target_attention_pools_by_softmax_and_an_empty_history_gives_zeros) {
  ctx c;
  setup(&c,
        "{\"features\": [{\"key\": \"hist\", \"type\": \"identity\", \"num_buckets\": 10, \"separator\": \"|\","
        " \"max_len\": 4}, {\"key\": \"item\", \"type\": \"identity\", \"num_buckets\": 10}],"
        " \"layers\": [{\"type\": \"embedding_bag\", \"name\": \"seq\", \"inputs\": \"hist\", \"units\": 2,"
        " \"combiner\": \"sequence\"},"
        " {\"type\": \"embedding_bag\", \"name\": \"tgt\", \"inputs\": \"item\", \"units\": 2, \"use_bias\": false},"
        " {\"type\": \"target_attention\", \"name\": \"att\", \"inputs\": \"seq,tgt\"}]}",
        1);
  cr_assert_eq(tfx_model_set_csr(c.m, fields, 2, NULL), TFX_OK);
  const float *y = tfx_model_forward(c.m, c.x, BATCH, 0, 0);
  const float *E = tfx_model_find_var(c.m, "seq/embeddings")->value,
              *T = tfx_model_find_var(c.m, "tgt/embeddings")->value;
  const float *W = tfx_model_find_var(c.m, "att/kernel")->value;
  /* example 0: hist 1, 5; target 5 */
  float q[2] = {T[10] * W[0] + T[11] * W[2], T[10] * W[1] + T[11] * W[3]};
  float s1 = (E[2] * q[0] + E[3] * q[1]) / sqrtf(2), s5 = (E[10] * q[0] + E[11] * q[1]) / sqrtf(2);
  float a1 = 1 / (1 + expf(s5 - s1)), a5 = 1 - a1;
  for (int j = 0; j < 2; j++) {
    float p = a1 * E[2 + j] + a5 * E[10 + j];
    cr_assert_float_eq(y[j], p, 1e-5, "pooled[%d]", j);
    cr_assert_float_eq(y[2 + j], p * q[j], 1e-5, "pooled*q[%d]", j);
    cr_assert_eq(y[4 + j], 0.0f, "an empty history pools to zeros");
    cr_assert_eq(y[6 + j], 0.0f);
    cr_assert(isfinite(y[8 + j]) && isfinite(y[10 + j]));
  }
  teardown(&c);
}

static void expect_error(const char *json, int code, const char *fragment);

/* din_json with the target item's bag reading the history's table (one id space). */
static const char *shared_json =
    "{\"features\": [{\"key\": \"hist\", \"type\": \"identity\", \"num_buckets\": 10, \"separator\": \"|\","
    " \"max_len\": 4}, {\"key\": \"item\", \"type\": \"identity\", \"num_buckets\": 10}],"
    " \"layers\": [{\"type\": \"embedding_bag\", \"name\": \"seq\", \"inputs\": \"hist\", \"units\": 3,"
    " \"combiner\": \"sequence\"},"
    " {\"type\": \"embedding_bag\", \"name\": \"tgt\", \"inputs\": \"item\", \"units\": 3, \"use_bias\": false,"
    " \"table\": \"seq\"},"
    " {\"type\": \"target_attention\", \"name\": \"att\", \"inputs\": \"seq,tgt\"},"
    " {\"type\": \"concat\", \"inputs\": \"att,tgt\"}, {\"type\": \"dense\", \"units\": 2}]}";

Test(recsys, a_shared_table_is_one_variable_and_sums_both_columns_gradients) {
  ctx c;
  setup(&c, shared_json, 1);
  cr_assert_null(tfx_model_find_var(c.m, "tgt/embeddings"), "the target bag declares no table of its own");
  check_grads(&c); /* finite differences on the one table see both columns' uses of a row */
  tfx_var *t = tfx_model_find_var(c.m, "seq/embeddings");
  loss_at(&c, 1);
  /* rows read: hist 1, 5 | - | 2, 3, 1, 7 (8, 9 past max_len) and items 5, 2, 3, each once, ascending */
  const int64_t want[] = {1, 2, 3, 5, 7};
  cr_assert_eq(t->n_rows, 5, "rows %zu", t->n_rows);
  for (size_t r = 0; r < 5; r++) {
    cr_assert_eq(t->rows[r], want[r], "row %zu is %lld", r, (long long)t->rows[r]);
  }
  teardown(&c);
}

Test(recsys, a_shared_table_read_from_the_batchs_rows_gives_the_tables_outputs) {
  ctx c;
  setup(&c, shared_json, 1);
  size_t n = tfx_model_output_size(c.m) * BATCH;
  cr_assert_eq(tfx_model_set_csr(c.m, fields, 2, NULL), TFX_OK);
  float *direct = malloc(sizeof(float) * n);
  memcpy(direct, tfx_model_forward(c.m, c.x, BATCH, 0, 0), sizeof(float) * n);
  tfx_model_set_rows(c.m, TFX_ROWS_BATCH);
  cr_assert_eq(tfx_model_set_csr(c.m, fields, 2, NULL), TFX_OK);
  tfx_var *t = tfx_model_find_var(c.m, "seq/embeddings");
  const int64_t want[] = {1, 2, 3, 5, 7, 8, 9}; /* every valid id of both columns, once */
  cr_assert_eq(t->n_batch, 7, "batch rows %zu", t->n_batch);
  for (size_t r = 0; r < 7; r++) {
    cr_assert_eq(t->batch_ids[r], want[r], "batch row %zu is %lld", r, (long long)t->batch_ids[r]);
  }
  tfx_model_gather_rows(c.m);
  const float *y = tfx_model_forward(c.m, c.x, BATCH, 0, 0);
  for (size_t j = 0; j < n; j++) {
    cr_assert_eq(y[j], direct[j], "output %zu: %g from the batch's rows, %g from the table", j, y[j], direct[j]);
  }
  free(direct);
  teardown(&c);
}

Test(recsys, a_shared_table_whose_columns_disagree_is_a_named_error) {
  static const char *head =
      "{\"features\": [{\"key\": \"hist\", \"type\": \"hash\", \"hash_bucket_size\": 16, \"separator\": \"|\","
      " \"max_len\": 4}, {\"key\": \"item\", \"type\": \"hash\", \"hash_bucket_size\": %d}],"
      " \"layers\": [{\"type\": \"embedding_bag\", \"name\": \"seq\", \"inputs\": \"hist\", \"units\": 3,"
      " \"combiner\": \"sequence\"}, {\"type\": \"%s\", \"name\": \"tgt\", \"inputs\": \"%s\", \"units\": %d,"
      " \"table\": \"%s\"}]}";
  char json[2048];
  snprintf(json, sizeof json, head, 16, "embedding_bag", "item", 2, "seq");
  expect_error(json, TFX_ECONFIG,
               "layer tgt: shares the table of seq (16 rows x 3 units), its own column and units "
               "give 16 rows x 2 units");
  snprintf(json, sizeof json, head, 32, "embedding_bag", "item", 3, "seq");
  expect_error(json, TFX_ECONFIG,
               "layer tgt: shares the table of seq (16 rows x 3 units), its own column and units "
               "give 32 rows x 3 units");
  snprintf(json, sizeof json, head, 16, "embedding_bag", "item", 3, "nothing");
  expect_error(json, TFX_ECONFIG, "layer tgt: table 'nothing' is not an earlier embedding_bag");
  snprintf(json, sizeof json, head, 16, "dense", "seq", 3, "seq");
  expect_error(json, TFX_ECONFIG, "layer tgt: only embedding_bag takes a table");
}

static void expect_error(const char *json, int code, const char *fragment) {
  tfx_model *m = NULL;
  tfx_err err = {0};
  int rc = build(json, &m, &err);
  cr_assert_eq(rc, code, "%s: got %d (%s)", fragment, rc, err.msg);
  cr_assert(strstr(err.msg, fragment), "want '%s' in '%s'", fragment, err.msg);
  cr_assert_null(m);
}

Test(recsys, errors_name_the_layer_and_the_shapes) {
  expect_error(
      "{\"input_shape\": [5], \"layers\": [{\"type\": \"dense\", \"name\": \"a\", \"units\": 3},"
      " {\"type\": \"cross\", \"name\": \"c\", \"inputs\": \"input,a\"}]}",
      TFX_ESHAPE, "layer c: cross of 'a' (rank 1, 3 values) with x0 'input' of 5 values");
  expect_error("{\"input_shape\": [4], \"layers\": [{\"type\": \"cross\", \"name\": \"c\", \"rank\": 4}]}", TFX_ECONFIG,
               "layer c: rank 4, want 0 (full) or 1..3");
  expect_error("{\"input_shape\": [2, 2, 1], \"layers\": [{\"type\": \"cross\", \"name\": \"c\"}]}", TFX_ESHAPE,
               "layer c: cross of 'input' (rank 3");
  expect_error(
      "{\"input_shape\": [4], \"layers\": [{\"type\": \"dense\", \"name\": \"a\", \"units\": 3},"
      " {\"type\": \"cross\", \"name\": \"c\", \"inputs\": \"input,a,a\"}]}",
      TFX_ECONFIG, "layer c: 3 inputs (a cross takes x0, or x0 and xl)");
  expect_error(
      "{\"input_shape\": [4], \"layers\": [{\"type\": \"dense\", \"name\": \"a\", \"units\": 3},"
      " {\"type\": \"dot_interaction\", \"name\": \"d\", \"inputs\": \"a,input\"}]}",
      TFX_ESHAPE, "layer d: dot_interaction of 'input' (rank 1, 4 values) with 'a' of 3");
  expect_error(
      "{\"input_shape\": [4], \"layers\": [{\"type\": \"dense\", \"name\": \"a\", \"units\": 4},"
      " {\"type\": \"target_attention\", \"name\": \"t\", \"inputs\": \"a,input\"}]}",
      TFX_ECONFIG, "layer t: its first input 'a' is not an embedding_bag with combiner sequence");
  expect_error(
      "{\"features\": [{\"key\": \"h\", \"type\": \"hash\", \"hash_bucket_size\": 8, \"separator\": \"|\"}],"
      " \"layers\": [{\"type\": \"embedding_bag\", \"name\": \"s\", \"inputs\": \"h\", \"units\": 2,"
      " \"combiner\": \"sequence\"}, {\"type\": \"flatten\"}]}",
      TFX_ECONFIG, "layer s: combiner sequence reads a column with max_len (h has none)");
  expect_error(
      "{\"features\": [{\"key\": \"h\", \"type\": \"hash\", \"hash_bucket_size\": 8, \"max_len\": 3},"
      " {\"key\": \"t\", \"type\": \"hash\", \"hash_bucket_size\": 8}],"
      " \"layers\": [{\"type\": \"embedding_bag\", \"name\": \"s\", \"inputs\": \"h\", \"units\": 2,"
      " \"combiner\": \"sequence\"}, {\"type\": \"embedding_bag\", \"name\": \"e\", \"inputs\": \"t\","
      " \"units\": 3}, {\"type\": \"target_attention\", \"name\": \"att\", \"inputs\": \"s,e\"}]}",
      TFX_ESHAPE, "layer att: target 'e' has 3 values (rank 1), the sequence's rows 2");
  /* a model of categorical columns only has no dense input: a layer reading it is refused, not fed a placeholder */
  expect_error(
      "{\"features\": [{\"key\": \"c\", \"type\": \"hash\", \"hash_bucket_size\": 8}],"
      " \"layers\": [{\"type\": \"embedding_bag\", \"name\": \"e\", \"inputs\": \"c\", \"units\": 2},"
      " {\"type\": \"cross\", \"name\": \"x\", \"inputs\": \"input\"}, {\"type\": \"concat\", \"inputs\": \"e,x\"}]}",
      TFX_ESHAPE, "layer x: reads a zero-width input 'input' (model.features has no numeric column)");
  expect_error(
      "{\"features\": [{\"key\": \"c\", \"type\": \"hash\", \"hash_bucket_size\": 8}],"
      " \"layers\": [{\"type\": \"dense\", \"name\": \"d\", \"units\": 2}]}",
      TFX_ESHAPE, "layer d: reads a zero-width input 'input'");
  expect_error(
      "{\"features\": [{\"key\": \"n\", \"type\": \"numeric\", \"max_len\": 3}],"
      " \"layers\": [{\"type\": \"dense\", \"units\": 1}]}",
      TFX_ECONFIG, "model.features[0] (n): max_len is for identity and hash columns");
}

/* In-batch softmax (model.in_batch_negatives): example b's loss is -log softmax over the batch's distinct labels
 * only, each logit less log Q(label) (Q: the label's share of the labels trained so far, this batch's included),
 * and no other class gets a gradient; evaluation (no gradient) scores every class. */
static double in_batch_case(int logq) {
  char json[512];
  snprintf(json, sizeof json,
           "{\"input_shape\": [3], \"layers\": [{\"type\": \"dense\", \"name\": \"d\", \"units\": 6}],"
           " \"loss\": \"softmax_cross_entropy\", \"in_batch_negatives\": true, \"logq_correction\": %s}",
           logq ? "true" : "false");
  ctx c;
  setup(&c, json, 0);
  c.y[0] = 1, c.y[1] = 4, c.y[2] = 1;
  const float *z = tfx_model_forward(c.m, c.x, BATCH, 1, 0);
  double want = 0, lq[6] = {0};
  lq[1] = logq ? log(2.0 / 3.0) : 0, lq[4] = logq ? log(1.0 / 3.0) : 0;
  for (int b = 0; b < BATCH; b++) {
    const float *zb = z + b * 6;
    double s1 = zb[1] - lq[1], s4 = zb[4] - lq[4], own = c.y[b] == 1 ? s1 : s4;
    want += log(exp(s1) + exp(s4)) - own;
  }
  want /= BATCH;
  tfx_step_stats st;
  tfx_model_loss(c.m, c.y, BATCH, 1, &st);
  tfx_model_backward(c.m, c.x, BATCH);
  cr_assert(fabs(st.loss - want) < 1e-5, "in-batch loss %g, want %g", st.loss, want);
  const tfx_var *k = tfx_model_find_var(c.m, "d/kernel"), *bias = tfx_model_find_var(c.m, "d/bias");
  for (int j = 0; j < 6; j++) {
    int in_batch = j == 1 || j == 4;
    cr_assert_eq(bias->grad[j] != 0.0f, in_batch, "class %d: bias gradient %g", j, bias->grad[j]);
    for (int i = 0; i < 3; i++) {
      cr_assert(in_batch || k->grad[i * 6 + j] == 0.0f, "class %d: kernel gradient %g", j, k->grad[i * 6 + j]);
    }
  }
  tfx_model_loss(c.m, c.y, BATCH, 0, &st); /* evaluation: the full softmax */
  double full = 0;
  for (int b = 0; b < BATCH; b++) {
    double sum = 0;
    for (int j = 0; j < 6; j++) {
      sum += exp(z[b * 6 + j]);
    }
    full += log(sum) - z[b * 6 + c.y[b]];
  }
  cr_assert(fabs(st.loss - full / BATCH) < 1e-5, "evaluation loss %g, want the full softmax's %g", st.loss,
            full / BATCH);
  teardown(&c);
  return want;
}

Test(recsys, in_batch_softmax_scores_the_batchs_labels_less_log_q) {
  double with = in_batch_case(1), without = in_batch_case(0);
  cr_assert(fabs(with - without) > 1e-4, "the log-Q correction changes nothing (%g)", with);
  expect_error("{\"input_shape\": [3], \"layers\": [{\"type\": \"dense\", \"units\": 1}],"
               " \"loss\": \"sigmoid_cross_entropy\", \"in_batch_negatives\": true}",
               TFX_ECONFIG, "model.in_batch_negatives: for a softmax_cross_entropy over 2 or more classes");
}
