/* Unit tests of src/data/epochs.c: the exact count of training examples per format (IDX plain and gzip, CSV,
 * LibSVM, TFRecord, streamed globs), written by the tests into a temporary directory, and the epoch budget's
 * arithmetic (sync with replicas, async, ssp, accumulate, the single-process trainer, the min with max_steps). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/epochs.h"
#include "data/example.h"
#include "data/tfrecord.h"
#include "tmpdir.h"

/* Sets option `key` of cfg to its text `value`, as the experiment would. */
static void set_option(tfx_config *cfg, const char *key, const char *value) {
  char assignment[96];
  snprintf(assignment, sizeof assignment, "%s=%s", key, value);
  cr_assert_eq(tfx_config_set(cfg, assignment, NULL), TFX_OK, "%s", assignment);
}

static void setup(void) {
  tmpdir_create("epochs");
}

TestSuite(epochs, .init = setup, .fini = tmpdir_remove);

/* An experiment reading data.train.images = tmp/name in the given format. */
static tfx_config config(const char *format, const char *name) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  set_option(&cfg, "data.format", format);
  snprintf(cfg.train_images, sizeof cfg.train_images, "%s/%s", tmp, name);
  return cfg;
}

static void write_text(const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", tmp, name);
  spit(path, text, strlen(text));
}

/* The big-endian IDX header of u8 data with the given dims, followed by `body` zero bytes. */
static void write_idx(const char *path, int rank, const uint32_t *dims, size_t body, int gz) {
  uint8_t head[20] = {0, 0, 0x08, (uint8_t)rank};
  for (int i = 0; i < rank; i++) {
    uint8_t *p = head + 4 + 4 * i;
    p[0] = (uint8_t)(dims[i] >> 24), p[1] = (uint8_t)(dims[i] >> 16), p[2] = (uint8_t)(dims[i] >> 8);
    p[3] = (uint8_t)dims[i];
  }
  uint8_t *buf = calloc(1, 4 + 4 * (size_t)rank + body);
  memcpy(buf, head, 4 + 4 * (size_t)rank);
  size_t n = 4 + 4 * (size_t)rank + body;
  if (gz) {
    gzFile f = gzopen(path, "wb6");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(gzwrite(f, buf, (unsigned)n), (int)n);
    cr_assert_eq(gzclose(f), Z_OK);
  } else {
    spit(path, buf, n);
  }
  free(buf);
}

static int64_t count(const tfx_config *cfg) {
  tfx_err err = {0};
  int64_t n = -1;
  cr_assert_eq(tfx_data_count_examples(cfg, &n, &err), TFX_OK, "%s", err.msg);
  return n;
}

Test(epochs, idx_plain_counts_the_header) {
  tfx_config cfg = config("idx", "img.idx");
  snprintf(cfg.train_labels, sizeof cfg.train_labels, "%s/lab.idx", tmp);
  const uint32_t di[3] = {7, 3, 2}, dl[1] = {7};
  write_idx(cfg.train_images, 3, di, 7 * 6, 0);
  write_idx(cfg.train_labels, 1, dl, 7, 0);
  cr_assert_eq(count(&cfg), 7);
}

Test(epochs, gzip_idx_reads_only_the_header) {
  /* The headers declare 60000 examples of 28x28; the bodies are cut short: only the headers are read. */
  tfx_config cfg = config("idx", "img.idx.gz");
  snprintf(cfg.train_labels, sizeof cfg.train_labels, "%s/lab.idx.gz", tmp);
  const uint32_t di[3] = {60000, 28, 28}, dl[1] = {60000};
  write_idx(cfg.train_images, 3, di, 100, 1);
  write_idx(cfg.train_labels, 1, dl, 10, 1);
  cr_assert_eq(count(&cfg), 60000);
}

Test(epochs, idx_labels_disagreeing_with_images) {
  tfx_config cfg = config("idx", "img.idx");
  snprintf(cfg.train_labels, sizeof cfg.train_labels, "%s/lab.idx", tmp);
  const uint32_t di[3] = {7, 3, 2}, dl[1] = {6};
  write_idx(cfg.train_images, 3, di, 7 * 6, 0);
  write_idx(cfg.train_labels, 1, dl, 6, 0);
  tfx_err err = {0};
  int64_t n = -1;
  cr_assert_eq(tfx_data_count_examples(&cfg, &n, &err), TFX_ESHAPE);
  cr_assert(strstr(err.msg, "6 labels for 7 images"), "%s", err.msg);
  cr_assert_eq(n, -1, "out-parameter written on failure");
}

Test(epochs, csv_follows_the_reader) {
  /* A header, a BOM, CRLF, a blank line and a quoted cell: 4 rows. */
  write_text("a.csv",
             "\xEF\xBB\xBF"
             "x,y,label\r\n1,2,0\r\n\r\n3,\"4\",1\n5,6,2\n7,8,0");
  tfx_config cfg = config("csv", "a.csv");
  cfg.data_header = 1;
  cr_assert_eq(count(&cfg), 4);
  cfg.data_header = 0;
  write_text("b.csv", "1,0\n2,1\n3,0\n");
  snprintf(cfg.train_images, sizeof cfg.train_images, "%s/b.csv", tmp);
  cr_assert_eq(count(&cfg), 3);
}

Test(epochs, csv_of_many_rows) {
  char path[256];
  snprintf(path, sizeof path, "%s/big.csv", tmp);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fprintf(f, "a,label\n");
  for (int i = 0; i < 10007; i++) {
    fprintf(f, "%d,%d\n", i, i % 3);
  }
  fclose(f);
  tfx_config cfg = config("csv", "big.csv");
  cr_assert_eq(count(&cfg), 10007);
}

Test(epochs, csv_empty_or_header_only) {
  write_text("empty.csv", "\n  \t\n\r\n");
  tfx_config cfg = config("csv", "empty.csv");
  tfx_err err = {0};
  int64_t n = -1, budget = -1;
  cr_assert_eq(tfx_data_count_examples(&cfg, &n, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "empty.csv: empty file"), "%s", err.msg);
  write_text("head.csv", "a,label\n\n");
  snprintf(cfg.train_images, sizeof cfg.train_images, "%s/head.csv", tmp);
  cr_assert_eq(count(&cfg), 0);
  cfg.epochs = 1;
  cr_assert_eq(tfx_epochs_apply(&cfg, 1, &budget, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "training.epochs 1: the training set") && strstr(err.msg, "has no examples"), "%s",
            err.msg);
  cr_assert_eq(budget, -1);
}

Test(epochs, libsvm_skips_comments_and_blank_lines) {
  write_text("a.svm",
             "# a comment line\n1 1:0.5 3:2\n\n-1 2:1 # trailing comment\r\n  \t# indented comment\n"
             "+1 qid:3 1:1\n0 4:1");
  tfx_config cfg = config("libsvm", "a.svm");
  cr_assert_eq(count(&cfg), 4);
}

Test(epochs, tfrecord_counts_records) {
  tfx_config cfg = config("tfrecord", "a.tfrecord");
  tfx_err err = {0};
  tfx_tfrecord_writer *w = NULL;
  cr_assert_eq(tfx_tfrecord_writer_open(cfg.train_images, &w, &err), TFX_OK, "%s", err.msg);
  for (int i = 0; i < 25; i++) {
    float xv[2] = {(float)i, 1.0f};
    int64_t yv = i % 2;
    const tfx_feature feat[2] = {{.key = "image", .kind = TFX_FEATURE_KIND_FLOAT, .n = 2, .floats = xv},
                                 {.key = "label", .kind = TFX_FEATURE_KIND_INT64, .n = 1, .int64s = &yv}};
    uint8_t *buf = NULL;
    size_t len = 0;
    cr_assert_eq(tfx_example_pack(feat, 2, &buf, &len, &err), TFX_OK, "%s", err.msg);
    cr_assert_eq(tfx_tfrecord_writer_write(w, buf, len, &err), TFX_OK, "%s", err.msg);
    free(buf);
  }
  cr_assert_eq(tfx_tfrecord_writer_close(w, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(count(&cfg), 25);
}

Test(epochs, truncated_tfrecord_is_corrupt) {
  const uint8_t half[6] = {9, 0, 0, 0, 0, 0};
  char path[256];
  snprintf(path, sizeof path, "%s/t.tfrecord", tmp);
  spit(path, half, sizeof half);
  tfx_config cfg = config("tfrecord", "t.tfrecord");
  tfx_err err = {0};
  int64_t n = -1;
  cr_assert_eq(tfx_data_count_examples(&cfg, &n, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "t.tfrecord"), "%s", err.msg);
}

Test(epochs, streamed_glob_sums_every_file) {
  write_text("part-0.csv", "1,0\n2,1\n");
  write_text("part-1.csv", "3,0\n4,1\n5,0\n");
  write_text("part-2.csv", "6,1\n");
  tfx_config cfg = config("csv", "part-*.csv");
  cfg.data_header = 0, cfg.data_stream = 1;
  cr_assert_eq(count(&cfg), 6);
  cfg.shard_by = TFX_SHARD_BY_FILE;
  cfg.data_stream = 0; /* sharding by file streams too: still every file of the set */
  cr_assert_eq(count(&cfg), 6);
  snprintf(cfg.train_images, sizeof cfg.train_images, "%s/part-0.csv,%s/part-2.csv", tmp, tmp);
  cr_assert_eq(count(&cfg), 3);
}

Test(epochs, streamed_idx_lists_must_pair) {
  tfx_config cfg = config("idx", "img-*.idx");
  cfg.data_stream = 1;
  snprintf(cfg.train_labels, sizeof cfg.train_labels, "%s/lab-*.idx", tmp);
  const uint32_t d1[3] = {4, 2, 2}, l1[1] = {4}, d2[3] = {3, 2, 2}, l2[1] = {3};
  char p[256];
  snprintf(p, sizeof p, "%s/img-1.idx", tmp), write_idx(p, 3, d1, 16, 0);
  snprintf(p, sizeof p, "%s/lab-1.idx", tmp), write_idx(p, 1, l1, 4, 0);
  snprintf(p, sizeof p, "%s/img-2.idx", tmp), write_idx(p, 3, d2, 12, 0);
  tfx_err err = {0};
  int64_t n = -1;
  cr_assert_eq(tfx_data_count_examples(&cfg, &n, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "2 image files but 1 label files"), "%s", err.msg);
  snprintf(p, sizeof p, "%s/lab-2.idx", tmp), write_idx(p, 1, l2, 3, 0);
  cr_assert_eq(count(&cfg), 7);
}

Test(epochs, missing_file_is_named) {
  tfx_config cfg = config("csv", "nope.csv");
  tfx_err err = {0};
  int64_t n = -1;
  cr_assert_eq(tfx_data_count_examples(&cfg, &n, &err), TFX_ENOTFOUND);
  cr_assert(strstr(err.msg, "nope.csv"), "%s", err.msg);
  cfg.data_stream = 1;
  snprintf(cfg.train_images, sizeof cfg.train_images, "%s/none-*.csv", tmp);
  cr_assert_eq(tfx_data_count_examples(&cfg, &n, &err), TFX_ENOTFOUND);
  cr_assert(strstr(err.msg, "none-*.csv"), "%s", err.msg);
}

/* An experiment in the given mode with batch, accumulate and replicas_to_aggregate. */
static tfx_config budget_config(const char *mode, int batch, int accumulate, int replicas) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  set_option(&cfg, "training.mode", mode);
  cfg.batch_size = batch, cfg.accumulate = accumulate, cfg.replicas_to_aggregate = replicas;
  return cfg;
}

Test(epochs, examples_per_global_step) {
  tfx_config sync = budget_config("sync", 32, 2, 3), all = budget_config("sync", 32, 1, 0);
  cr_assert_eq(tfx_epochs_examples_per_step(&sync, 4), 32 * 2 * 3); /* the ps aggregates 3 pushes a step */
  cr_assert_eq(tfx_epochs_examples_per_step(&all, 4), 32 * 4);      /* 0: every worker's push */
  cr_assert_eq(tfx_epochs_examples_per_step(&all, 0), 32);          /* the single-process trainer */
  tfx_config async = budget_config("async", 50, 4, 3), ssp = budget_config("ssp", 16, 1, 0);
  cr_assert_eq(tfx_epochs_examples_per_step(&async, 4), 200); /* every push is a global step */
  cr_assert_eq(tfx_epochs_examples_per_step(&ssp, 8), 16);
}

Test(epochs, steps_round_up) {
  cr_assert_eq(tfx_epochs_steps(2, 100, 32), 7);       /* 200 / 32 = 6.25 */
  cr_assert_eq(tfx_epochs_steps(1, 64, 32), 2);        /* exact */
  cr_assert_eq(tfx_epochs_steps(3, 60000, 128), 1407); /* 180000 / 128 = 1406.25 */
  cr_assert_eq(tfx_epochs_steps(1, 5, 1000), 1);       /* a batch larger than the set */
  cr_assert_eq(tfx_epochs_steps(0, 60000, 128), 0);    /* no budget */
  cr_assert_eq(tfx_epochs_steps(1000000, INT64_MAX / 2, 1), INT64_MAX);
}

Test(epochs, apply_caps_max_steps) {
  write_text("d.csv", "a,label\n");
  char path[256];
  snprintf(path, sizeof path, "%s/d.csv", tmp);
  FILE *f = fopen(path, "a");
  for (int i = 0; i < 100; i++) {
    fprintf(f, "%d,%d\n", i, i % 2);
  }
  fclose(f);
  tfx_config cfg = config("csv", "d.csv");
  cfg.batch_size = 16, cfg.epochs = 2, cfg.max_steps = 1000;
  tfx_err err = {0};
  int64_t budget = -1;
  cr_assert_eq(tfx_epochs_apply(&cfg, 2, &budget, &err), TFX_OK, "%s", err.msg); /* sync, 2 workers: 32 a step */
  cr_assert_eq(budget, 7);
  cr_assert_eq(cfg.max_steps, 7);
  cr_assert_eq(tfx_epochs_apply(&cfg, 2, &budget, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(cfg.max_steps, 7, "applying the budget twice changes nothing");
  cfg.max_steps = 5; /* a max_steps the user did not give: the epochs decide, as Keras's fit(epochs=N) */
  cr_assert_eq(tfx_epochs_apply(&cfg, 0, &budget, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(budget, 13);
  cr_assert_eq(cfg.max_steps, 13);
  cfg.max_steps = 5, cfg.max_steps_given = 1; /* a max_steps given (file, --set, --max-steps) caps them */
  cr_assert_eq(tfx_epochs_apply(&cfg, 0, &budget, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(budget, 13);
  cr_assert_eq(cfg.max_steps, 5);
}

Test(epochs, max_steps_from_the_experiment_counts_as_given) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  tfx_err err = {0};
  cr_assert_eq(cfg.max_steps_given, 0);
  cr_assert_eq(tfx_config_parse(&cfg, "{\"training\": {\"epochs\": 2}}", "t", &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(cfg.max_steps_given, 0, "epochs alone: max_steps is only the default");
  cr_assert_eq(tfx_config_set(&cfg, "training.max_steps=40", &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(cfg.max_steps_given, 1);
}

Test(epochs, apply_without_epochs_reads_nothing) {
  tfx_config cfg = config("csv", "absent.csv");
  cfg.max_steps = 123;
  tfx_err err = {0};
  int64_t budget = -1;
  cr_assert_eq(tfx_epochs_apply(&cfg, 3, &budget, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(budget, 0);
  cr_assert_eq(cfg.max_steps, 123);
  cfg.epochs = 1;
  cr_assert_eq(tfx_epochs_apply(&cfg, 3, &budget, &err), TFX_ENOTFOUND);
  cr_assert(strstr(err.msg, "absent.csv"), "%s", err.msg);
  cr_assert_eq(cfg.max_steps, 123);
}

Test(epochs, option_is_parsed_and_bounded) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  cr_assert_eq(cfg.epochs, 0);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&cfg, "{\"training\": {\"epochs\": 3}}", "t", &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(cfg.epochs, 3);
  cr_assert_eq(tfx_config_set(&cfg, "training.epochs=5", &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(cfg.epochs, 5);
  cr_assert_neq(tfx_config_parse(&cfg, "{\"training\": {\"epochs\": -1}}", "t", &err), TFX_OK);
  cr_assert(strstr(err.msg, "training.epochs"), "%s", err.msg);
  char *json = tfx_config_to_json(&cfg);
  cr_assert(strstr(json, "\"epochs\": 5"), "%s", json);
  free(json);
}
