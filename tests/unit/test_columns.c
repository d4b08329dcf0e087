/* Feature columns over CSV: identity, hash (xxHash XXH3-64 of the text, pinned by its published empty-input
 * value), crossed tuples, multi-valued cells with weights and numeric columns become the fields the model reads;
 * bad cells are refused naming file, line and column; and the fm layer computes the pairwise term of its field
 * embeddings, with gradients that match finite differences. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "data/columns.h"
#include "data/example.h"
#include "data/tfrecord.h"
#include "nn/model.h"
#include "tmpdir.h"

static const char *features_json =
    "{\"model\": {\"features\": ["
    "{\"key\": \"cat\", \"type\": \"identity\", \"num_buckets\": 5},"
    "{\"key\": \"words\", \"type\": \"hash\", \"hash_bucket_size\": 1000, \"separator\": \" \", \"weight_key\": \"w\"},"
    "{\"name\": \"cross\", \"type\": \"crossed\", \"keys\": \"cat,words\", \"separator\": \" \", "
    "\"hash_bucket_size\": 97},"
    "{\"key\": \"x\", \"type\": \"numeric\", \"default_value\": -1}],"
    " \"layers\": [{\"type\": \"embedding_bag\", \"inputs\": \"cat\", \"units\": 2}]},"
    " \"data\": {\"format\": \"csv\", \"label_column\": \"y\"}}";

/* Writes text to tmp/name and returns the path (static buffer). */
static const char *write_csv(const char *name, const char *text) {
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", tmp, name);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

static void load_config(tfx_config *cfg) {
  tfx_config_init(cfg);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(cfg, features_json, "test", &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_config_sparse_fields(cfg), 3);
  cr_assert_eq(tfx_config_numeric_features(cfg), 1);
}

static int64_t hashed(const char *s, uint64_t buckets) {
  return (int64_t)(XXH3_64bits(s, strlen(s)) % buckets);
}

Test(columns, csv_cells_become_fields_and_the_dense_part) {
  cr_assert_eq(XXH3_64bits("", 0), 0x2D06800538D394C2ULL, "XXH3-64 of the empty input, as xxHash publishes it");
  tmpdir_create("columns");
  const char *path = write_csv("d.csv", "y,cat,words,w,x\n1,3,a b,0.5 2,1.5\n0,0,,,\n2,4,\"c\",3,7\n");
  tfx_config cfg;
  load_config(&cfg);
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_columns_load_csv(&cfg, path, &d, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(d->n, 3);
  cr_assert_eq(d->n_fields, 3);
  cr_assert_eq(d->dim, 1);
  cr_assert(d->y[0] == 1 && d->y[1] == 0 && d->y[2] == 2);
  cr_assert(d->x[0] == 1.5f && d->x[1] == -1.0f && d->x[2] == 7.0f, "numeric, with the default for an empty cell");
  const tfx_field *cat = &d->fields[0], *words = &d->fields[1], *cross = &d->fields[2];
  cr_assert(cat->off[1] == 1 && cat->off[2] == 2 && cat->off[3] == 3);
  cr_assert(cat->ids[0] == 3 && cat->ids[1] == 0 && cat->ids[2] == 4);
  cr_assert(words->off[1] == 2 && words->off[2] == 2 && words->off[3] == 3, "an empty cell is an empty bag");
  cr_assert(words->ids[0] == hashed("a", 1000) && words->ids[1] == hashed("b", 1000));
  cr_assert(words->vals[0] == 0.5f && words->vals[1] == 2.0f && words->vals[2] == 3.0f);
  cr_assert_eq(cross->off[1], 2, "cat x words: 1 x 2 tuples");
  cr_assert_eq(cross->off[2], 2, "an empty key crosses into nothing");
  cr_assert_eq(cross->ids[0], (int64_t)(XXH3_64bits("3\0a", 4) % 97), "the tuple's values, each with its NUL");
  tfx_dataset_destroy(d);
  tmpdir_remove();
}

static void expect_bad(const char *text, int code, const char *want) {
  const char *path = write_csv("bad.csv", text);
  tfx_config cfg;
  load_config(&cfg);
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_columns_load_csv(&cfg, path, &d, &err), code, "%s: %s", text, err.msg);
  cr_assert(strstr(err.msg, want), "want '%s' in: %s", want, err.msg);
  cr_assert_null(d);
}

Test(columns, bad_cells_are_named_by_file_line_and_column) {
  tmpdir_create("columns-bad");
  expect_bad("y,cat,words,w,x\n1,3,a,1,0\n1,7,a,1,0\n", TFX_ECORRUPT,
             "bad.csv: line 3, column 'cat': '7' is outside the column's ids [0, 5)");
  expect_bad("y,cat,words,w,x\n1,-1,a,1,0\n", TFX_ECORRUPT, "line 2, column 'cat': '-1' is outside");
  expect_bad("y,cat,words,w,x\n1,two,a,1,0\n", TFX_ECORRUPT, "column 'cat': 'two' is not an integer id");
  expect_bad("y,cat,words,w,x\n1,1,a b,1 nan,0\n", TFX_ECORRUPT, "column 'w': 'nan' is not a finite weight");
  expect_bad("y,cat,words,w,x\n1,1,a b,1,0\n", TFX_ECORRUPT, "has fewer weights than the column has ids");
  expect_bad("y,cat,words,w,x\n1,1,a,1,abc\n", TFX_ECORRUPT, "column 'x': 'abc' is not a finite number");
  expect_bad("y,cat,words,w,x\nA,1,a,1,0\n", TFX_ECORRUPT, "column 'y': 'A' is not an integer label");
  expect_bad("y,cat,words,x\n1,1,a,0\n", TFX_ECONFIG, "no column 'w'");
  tmpdir_remove();
}

/* A model of three identity fields embedded in 3 dimensions, their fm term, and a dense layer of 2 classes. */
static tfx_model *fm_model(void) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  const char *json =
      "{\"model\": {\"features\": [{\"key\": \"a\", \"type\": \"identity\", \"num_buckets\": 4},"
      "{\"key\": \"b\", \"type\": \"identity\", \"num_buckets\": 4},"
      "{\"key\": \"c\", \"type\": \"identity\", \"num_buckets\": 4}],"
      " \"layers\": [{\"type\": \"embedding_bag\", \"name\": \"ea\", \"inputs\": \"a\", \"units\": 3, \"use_bias\": "
      "false},"
      "{\"type\": \"embedding_bag\", \"name\": \"eb\", \"inputs\": \"b\", \"units\": 3, \"use_bias\": false},"
      "{\"type\": \"embedding_bag\", \"name\": \"ec\", \"inputs\": \"c\", \"units\": 3, \"use_bias\": false},"
      "{\"type\": \"fm\", \"name\": \"fm\", \"inputs\": \"ea,eb,ec\"}, {\"type\": \"dense\", \"units\": 2}]}}";
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&cfg, json, "test", &err), TFX_OK, "%s", err.msg);
  tfx_model *m = NULL;
  cr_assert_eq(tfx_model_create(&cfg, 2, &m, &err), TFX_OK, "%s", err.msg);
  tfx_model_init_vars(m, 5);
  return m;
}

static const int64_t one_off[] = {0, 1, 2};
static const int64_t ids_a[] = {1, 2}, ids_b[] = {0, 2}, ids_c[] = {3, 3};

/* The three fields of the fm tests' batch: static, since the model reads them until the next batch. */
static const tfx_csr fm_fields[3] = {{2, one_off, ids_a, NULL}, {2, one_off, ids_b, NULL}, {2, one_off, ids_c, NULL}};

static double fm_loss(tfx_model *m, const float *x, const int32_t *y, int train) {
  const tfx_csr *f = fm_fields;
  tfx_step_stats st;
  tfx_model_set_csr(m, f, 3, NULL);
  tfx_model_forward(m, x, 2, train, 0);
  tfx_model_loss(m, y, 2, train, &st);
  if (train) {
    tfx_model_backward(m, x, 2);
  }
  return st.loss;
}

Test(columns, fm_is_the_pairwise_term_and_its_gradient_matches) {
  tfx_model *m = fm_model();
  float x[2] = {0, 0};
  int32_t y[2] = {1, 0};
  fm_loss(m, x, y, 1);
  const float *ea = tfx_model_find_var(m, "ea/embeddings")->value, *eb = tfx_model_find_var(m, "eb/embeddings")->value,
              *ec = tfx_model_find_var(m, "ec/embeddings")->value;
  tfx_var *t = tfx_model_find_var(m, "eb/embeddings");
  /* The fm output of example 0 is the dense layer's input: recompute it as sum over pairs of dot products. */
  double want = 0;
  for (int j = 0; j < 3; j++) {
    want += ea[1 * 3 + j] * eb[0 * 3 + j] + ea[1 * 3 + j] * ec[3 * 3 + j] + eb[0 * 3 + j] * ec[3 * 3 + j];
  }
  tfx_var *k = tfx_model_find_var(m, "dense_1/kernel"), *b = tfx_model_find_var(m, "dense_1/bias");
  const float *logits = tfx_model_forward(m, x, 2, 0, 0);
  cr_assert_float_eq(logits[0], (float)(want * k->value[0] + b->value[0]), 1e-5);
  fm_loss(m, x, y, 1);
  cr_assert_eq(t->n_rows, 2);
  float grad[6];
  memcpy(grad, t->grad, sizeof grad);
  for (int r = 0; r < 2; r++) {
    for (int j = 0; j < 3; j++) {
      float *w = &t->value[t->rows[r] * 3 + j], keep = *w;
      *w = keep + 1e-2f;
      double up = fm_loss(m, x, y, 0);
      *w = keep - 1e-2f;
      double down = fm_loss(m, x, y, 0);
      *w = keep;
      cr_assert(fabs((up - down) / 2e-2 - grad[r * 3 + j]) < 2e-3, "row %d col %d", r, j);
    }
  }
  tfx_model_destroy(m);
}

/* Packs one Example (label, cat as int64, words as bytes, w as floats, x as one float) into the writer. */
static void write_example(tfx_tfrecord_writer *w, int64_t label, int64_t cat, const char *const *words, size_t nw,
                          const float *weights, float x) {
  const uint8_t *bytes[4];
  size_t lens[4];
  for (size_t i = 0; i < nw; i++) {
    bytes[i] = (const uint8_t *)words[i], lens[i] = strlen(words[i]);
  }
  tfx_feature f[5] = {
      {.key = "y", .kind = TFX_FEATURE_KIND_INT64, .n = 1, .int64s = &label},
      {.key = "cat", .kind = TFX_FEATURE_KIND_INT64, .n = 1, .int64s = &cat},
      {.key = "words", .kind = TFX_FEATURE_KIND_BYTES, .n = nw, .bytes = bytes, .bytes_len = lens},
      {.key = "w", .kind = TFX_FEATURE_KIND_FLOAT, .n = nw, .floats = weights},
      {.key = "x", .kind = TFX_FEATURE_KIND_FLOAT, .n = 1, .floats = &x},
  };
  uint8_t *buf;
  size_t len;
  cr_assert_eq(tfx_example_pack(f, nw ? 5 : 2, &buf, &len, NULL), TFX_OK);
  cr_assert_eq(tfx_tfrecord_writer_write(w, buf, len, NULL), TFX_OK);
  free(buf);
}

Test(columns, tfrecord_examples_give_the_fields_csv_gives) {
  tmpdir_create("columns-tfrecord");
  char path[128];
  snprintf(path, sizeof path, "%s/d.tfrecord", tmp);
  tfx_tfrecord_writer *w = NULL;
  cr_assert_eq(tfx_tfrecord_writer_open(path, &w, NULL), TFX_OK);
  const char *ab[] = {"a", "b"}, *c[] = {"c"};
  const float wab[] = {0.5f, 2.0f}, wc[] = {3.0f};
  write_example(w, 1, 3, ab, 2, wab, 1.5f);
  write_example(w, 0, 0, NULL, 0, NULL, 0); /* words, w and x absent: an empty bag and the default */
  write_example(w, 2, 4, c, 1, wc, 7.0f);
  cr_assert_eq(tfx_tfrecord_writer_close(w, NULL), TFX_OK);
  tfx_config cfg;
  load_config(&cfg);
  snprintf(cfg.label_key, sizeof cfg.label_key, "y");
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_columns_load_tfrecord(&cfg, path, &d, &err), TFX_OK, "%s", err.msg);
  const char *csv = write_csv("d.csv", "y,cat,words,w,x\n1,3,a b,0.5 2,1.5\n0,0,,,\n2,4,c,3,7\n");
  tfx_dataset *e = NULL;
  cr_assert_eq(tfx_columns_load_csv(&cfg, csv, &e, &err), TFX_OK, "%s", err.msg);
  cr_assert(d->n == e->n && d->n_fields == e->n_fields && d->dim == e->dim);
  cr_assert(!memcmp(d->y, e->y, sizeof(int32_t) * d->n) && !memcmp(d->x, e->x, sizeof(float) * d->n));
  for (int f = 0; f < d->n_fields; f++) {
    int64_t nnz = d->fields[f].off[d->n];
    cr_assert(!memcmp(d->fields[f].off, e->fields[f].off, sizeof(int64_t) * (d->n + 1)), "field %d offsets", f);
    cr_assert(!memcmp(d->fields[f].ids, e->fields[f].ids, sizeof(int64_t) * (size_t)nnz), "field %d ids", f);
    cr_assert(!memcmp(d->fields[f].vals, e->fields[f].vals, sizeof(float) * (size_t)nnz), "field %d weights", f);
  }
  tfx_dataset_destroy(d);
  tfx_dataset_destroy(e);
  tmpdir_remove();
}

Test(columns, weight_key_reads_each_examples_weight_and_the_batcher_hands_them_on) {
  tmpdir_create("columns");
  const char *path = write_csv("w.csv", "y,cat,words,w,x,sw\n1,3,a,1,1.5,0.25\n0,0,b,1,2,2\n2,4,c,3,7,0\n");
  tfx_config cfg;
  load_config(&cfg);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_set(&cfg, "data.weight_key=sw", &err), TFX_OK, "%s", err.msg);
  tfx_dataset *d = NULL;
  cr_assert_eq(tfx_columns_load_csv(&cfg, path, &d, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(d->dim, 1, "the weight column is not a feature");
  cr_assert(d->w && d->w[0] == 0.25f && d->w[1] == 2.0f && d->w[2] == 0.0f);
  tfx_batcher *b = NULL;
  cr_assert_eq(tfx_batcher_create(d, 0, 1, 1, 0, &b, &err), TFX_OK, "%s", err.msg);
  float x[3];
  int32_t y[3];
  cr_assert_null(tfx_batcher_weights(b), "no batch yet");
  tfx_batcher_next_csr(b, 3, x, y);
  const float *w = tfx_batcher_weights(b);
  cr_assert(w && w[0] == 0.25f && w[1] == 2.0f && w[2] == 0.0f, "unshuffled: the file's order");
  tfx_batcher_destroy(b);
  tfx_dataset_destroy(d);
  path = write_csv("bad_w.csv", "y,cat,words,w,x,sw\n1,3,a,1,1.5,-1\n");
  cr_assert_eq(tfx_columns_load_csv(&cfg, path, &d, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "line 2, column 'sw': '-1' is not an example weight"), "%s", err.msg);
  cr_assert_eq(tfx_config_set(&cfg, "data.weight_key=nope", &err), TFX_OK);
  cr_assert_eq(tfx_columns_load_csv(&cfg, path, &d, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "nope"), "%s", err.msg);
  tmpdir_remove();
}

Test(columns, weight_key_needs_feature_columns) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_add_layer_json(&cfg, "{\"type\": \"dense\", \"units\": 10}", &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_config_validate(&cfg, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_config_set(&cfg, "data.weight_key=w", &err), TFX_OK);
  cr_assert_eq(tfx_config_validate(&cfg, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "data.weight_key 'w'") && strstr(err.msg, "model.features"), "%s", err.msg);
}

Test(columns, a_sequence_keeps_its_first_max_len_ids_in_order) {
  tmpdir_create("columns-seq");
  const char *path = write_csv("s.csv", "y,hist\n1,5|3|9|3|7\n0,\n1,2\n");
  tfx_config cfg;
  tfx_config_init(&cfg);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&cfg,
                                "{\"model\": {\"features\": [{\"key\": \"hist\", \"type\": \"identity\", "
                                "\"num_buckets\": 10, \"separator\": \"|\", \"max_len\": 3}],"
                                " \"layers\": [{\"type\": \"embedding_bag\", \"inputs\": \"hist\", \"units\": 2}]},"
                                " \"data\": {\"format\": \"csv\", \"label_column\": \"y\"}}",
                                "test", &err),
               TFX_OK, "%s", err.msg);
  tfx_dataset *d = NULL;
  cr_assert_eq(tfx_columns_load_csv(&cfg, path, &d, &err), TFX_OK, "%s", err.msg);
  const tfx_field *h = &d->fields[0];
  cr_assert(h->off[1] == 3 && h->off[2] == 3 && h->off[3] == 4, "3 of 5 ids, none, one");
  cr_assert(h->ids[0] == 5 && h->ids[1] == 3 && h->ids[2] == 9 && h->ids[3] == 2, "the cell's order, repeats kept");
  tfx_dataset_destroy(d);
  tmpdir_remove();
}
