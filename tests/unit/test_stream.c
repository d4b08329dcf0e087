/* Unit tests of src/data/stream.c: files written here (CSV, LibSVM, TFRecord of Examples) whose label is the
 * record's global id, so every test can tell exactly which records each shard saw; and the real Fashion-MNIST
 * IDX files streamed against the whole-file loader when they are installed. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/labelset.h"
#include "config/config.h"
#include "data/data_impl.h"
#include "data/dataset.h"
#include "data/example.h"
#include "data/idx.h"
#include "data/source.h"
#include "data/stream.h"
#include "data/tfrecord.h"
#include "tmpdir.h"

#define FILES 3
#define PER_FILE 40
#define TOTAL (FILES * PER_FILE)

/* Sets option `key` of cfg to its text `value`, as the experiment would. */
static void set_option(tfx_config *cfg, const char *key, const char *value) {
  char assignment[96];
  snprintf(assignment, sizeof assignment, "%s=%s", key, value);
  cr_assert_eq(tfx_config_set(cfg, assignment, NULL), TFX_OK, "%s", assignment);
}

static void setup(void) {
  tmpdir_create("stream");
}

TestSuite(stream, .init = setup, .fini = tmpdir_remove);

/* A config for the files written by the helpers below: format, pattern, window, sharding. */
static tfx_config config(const char *format, const char *pattern, int window, const char *shard_by) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  set_option(&cfg, "data.format", format);
  snprintf(cfg.train_images, sizeof cfg.train_images, "%s/%s", tmp, pattern);
  set_option(&cfg, "data.shard_by", shard_by);
  cfg.data_stream = 1, cfg.shuffle_buffer = window, cfg.data_scale = 1.0, cfg.data_header = 0;
  return cfg;
}

/* FILES CSV files part-K.csv: "id*0.5,id" per line (feature, label = the global record id). */
static void write_csv(void) {
  for (int f = 0; f < FILES; f++) {
    char path[128];
    snprintf(path, sizeof path, "%s/part-%d.csv", tmp, f);
    FILE *out = fopen(path, "w");
    cr_assert_not_null(out);
    for (int i = 0; i < PER_FILE; i++) {
      int id = f * PER_FILE + i;
      fprintf(out, "%g,%d\n", id * 0.5, id);
    }
    fclose(out);
  }
}

/* Takes n examples; checks each feature still matches its label (id * 0.5); counts the ids seen. */
static void take(tfx_stream *s, int n, int *seen) {
  float x[8];
  int32_t y[8];
  tfx_err err = {0};
  for (int i = 0; i < n; i++) {
    cr_assert_eq(tfx_stream_next(s, 1, x, y, &err), TFX_OK, "%s", err.msg);
    cr_assert(y[0] >= 0 && y[0] < TOTAL, "label %d", y[0]);
    cr_assert_float_eq(x[0], y[0] * 0.5f, 1e-6);
    seen[y[0]]++;
  }
}

Test(stream, record_sharding_splits_each_epoch_exactly) {
  write_csv();
  tfx_config cfg = config("csv", "part-*.csv", 7, "record");
  int seen[TOTAL] = {0};
  for (int w = 0; w < 2; w++) {
    tfx_stream *s = NULL;
    tfx_err err = {0};
    cr_assert_eq(tfx_stream_open(&cfg, w, 2, 1, &s, &err), TFX_OK, "%s", err.msg);
    cr_assert_eq(tfx_stream_files(s), FILES);
    take(s, TOTAL / 2, seen);
    cr_assert_eq(tfx_stream_epoch(s), 0);
    take(s, 1, (int[TOTAL]){0}); /* the next example starts epoch 1 */
    cr_assert_eq(tfx_stream_epoch(s), 1);
    tfx_stream_close(s);
  }
  for (int id = 0; id < TOTAL; id++) {
    cr_assert_eq(seen[id], 1, "record %d seen %d times in one epoch over two shards", id, seen[id]);
  }
}

Test(stream, file_sharding_gives_each_worker_whole_files) {
  write_csv();
  tfx_config cfg = config("csv", "part-0.csv", 1000, "file");
  snprintf(cfg.train_images, sizeof cfg.train_images, "%s/part-0.csv,%s/part-1.csv,%s/part-2.csv", tmp, tmp, tmp);
  for (int w = 0; w < 2; w++) {
    tfx_stream *s = NULL;
    tfx_err err = {0};
    cr_assert_eq(tfx_stream_open(&cfg, w, 2, 1, &s, &err), TFX_OK, "%s", err.msg);
    size_t want_files = w == 0 ? 2 : 1;
    cr_assert_eq(tfx_stream_files(s), want_files);
    int seen[TOTAL] = {0};
    take(s, (int)want_files * PER_FILE, seen);
    for (int id = 0; id < TOTAL; id++) {
      int file = id / PER_FILE, mine = file % 2 == w;
      cr_assert_eq(seen[id], mine, "worker %d saw record %d (file %d) %d times", w, id, file, seen[id]);
    }
    tfx_stream_close(s);
  }
}

Test(stream, shuffles_within_a_window_and_repeats_deterministically) {
  write_csv();
  tfx_config cfg = config("csv", "part-1.csv", 10, "record");
  float x[PER_FILE];
  int32_t a[PER_FILE], b[PER_FILE];
  tfx_err err = {0};
  for (int run = 0; run < 2; run++) {
    tfx_stream *s = NULL;
    cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 1, &s, &err), TFX_OK, "%s", err.msg);
    cr_assert_eq(tfx_stream_next(s, PER_FILE, x, run ? b : a, &err), TFX_OK, "%s", err.msg);
    tfx_stream_close(s);
  }
  int in_order = 1;
  for (int i = 0; i < PER_FILE; i++) {
    cr_assert_eq(a[i], b[i], "same seed, different order at %d", i);
    /* A window of 10 records: the i-th example comes from the i / 10-th window of the file. */
    cr_assert_eq((a[i] - PER_FILE) / 10, i / 10, "example %d is record %d, outside its window", i, a[i]);
    in_order &= a[i] == PER_FILE + i;
  }
  cr_assert(!in_order, "the window was not shuffled");
}

Test(stream, skip_continues_where_a_restart_left_off) {
  write_csv();
  tfx_config cfg = config("csv", "part-*.csv", 16, "record");
  float x[64];
  int32_t whole[50], rest[30];
  tfx_err err = {0};
  tfx_stream *s = NULL;
  cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 1, &s, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_stream_next(s, 50, x, whole, &err), TFX_OK, "%s", err.msg);
  tfx_stream_close(s);
  cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 1, &s, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_stream_skip(s, 20, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_stream_next(s, 30, x, rest, &err), TFX_OK, "%s", err.msg);
  tfx_stream_close(s);
  cr_assert_arr_eq(rest, whole + 20, sizeof rest);
}

Test(stream, libsvm_and_tfrecord_files_stream_too) {
  char path[128];
  snprintf(path, sizeof path, "%s/a.svm", tmp);
  FILE *f = fopen(path, "w");
  for (int i = 0; i < 30; i++) {
    fprintf(f, "%d 1:%g 3:1\n", i, i * 0.5);
  }
  fclose(f);
  tfx_config cfg = config("libsvm", "a.svm", 8, "record");
  tfx_stream *s = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 3, &s, &err), TFX_OK, "%s", err.msg);
  int seen[TOTAL] = {0};
  float x[3];
  int32_t y;
  for (int i = 0; i < 30; i++) {
    cr_assert_eq(tfx_stream_next(s, 1, x, &y, &err), TFX_OK, "%s", err.msg);
    cr_assert(x[0] == y * 0.5f && x[1] == 0 && x[2] == 1, "record %d: %g %g %g", y, x[0], x[1], x[2]);
    seen[y]++;
  }
  for (int i = 0; i < 30; i++) {
    cr_assert_eq(seen[i], 1);
  }
  tfx_stream_close(s);

  snprintf(path, sizeof path, "%s/a.tfrecord", tmp);
  tfx_tfrecord_writer *w = NULL;
  cr_assert_eq(tfx_tfrecord_writer_open(path, &w, &err), TFX_OK, "%s", err.msg);
  for (int i = 0; i < 25; i++) {
    float xv[2] = {(float)i, 2.0f * (float)i};
    int64_t yv = i;
    const tfx_feature f[2] = {{.key = "image", .kind = TFX_FEATURE_KIND_FLOAT, .n = 2, .floats = xv},
                              {.key = "label", .kind = TFX_FEATURE_KIND_INT64, .n = 1, .int64s = &yv}};
    uint8_t *buf = NULL;
    size_t len = 0;
    cr_assert_eq(tfx_example_pack(f, 2, &buf, &len, &err), TFX_OK, "%s", err.msg);
    cr_assert_eq(tfx_tfrecord_writer_write(w, buf, len, &err), TFX_OK, "%s", err.msg);
    free(buf);
  }
  cr_assert_eq(tfx_tfrecord_writer_close(w, &err), TFX_OK, "%s", err.msg);
  cfg = config("tfrecord", "*.tfrecord", 6, "record");
  snprintf(cfg.feature_key, sizeof cfg.feature_key, "image");
  snprintf(cfg.label_key, sizeof cfg.label_key, "label");
  cfg.data_scale = 0.5;
  cr_assert_eq(tfx_stream_open(&cfg, 1, 2, 2, &s, &err), TFX_OK, "%s", err.msg);
  for (int i = 0; i < 12; i++) {
    float xx[2];
    cr_assert_eq(tfx_stream_next(s, 1, xx, &y, &err), TFX_OK, "%s", err.msg);
    cr_assert(y % 2 == 1, "shard 1 of 2 got record %d", y);
    cr_assert(xx[0] == 0.5f * (float)y && xx[1] == (float)y, "record %d: %g %g (scaled by 0.5)", y, xx[0], xx[1]);
  }
  tfx_stream_close(s);
}

/* (x * scale - mean) / std for a CSV feature id * 0.5, with data.scale 2, data.mean 10, data.std 4. */
static float normalized(int id) {
  return (float)((id * 0.5 * 2 - 10) / 4);
}

static void set(tfx_config *cfg, const char *assignment) {
  tfx_err err = {0};
  cr_assert_eq(tfx_config_set(cfg, assignment, &err), TFX_OK, "%s: %s", assignment, err.msg);
}

Test(stream, mean_and_std_normalize_after_scale_in_memory_and_streaming) {
  write_csv();
  tfx_config cfg = config("csv", "part-*.csv", 16, "record");
  set(&cfg, "data.scale=2"), set(&cfg, "data.mean=10"), set(&cfg, "data.std=4");
  tfx_stream *s = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 1, &s, &err), TFX_OK, "%s", err.msg);
  for (int i = 0; i < TOTAL; i++) {
    float x;
    int32_t y;
    cr_assert_eq(tfx_stream_next(s, 1, &x, &y, &err), TFX_OK, "%s", err.msg);
    cr_assert_float_eq(x, normalized(y), 1e-6, "streamed record %d: %g, want %g", y, x, normalized(y));
  }
  tfx_stream_close(s);
  cfg.data_stream = 0;
  snprintf(cfg.train_images, sizeof cfg.train_images, "%s/part-1.csv", tmp);
  tfx_dataset *d = NULL;
  tfx_batcher *b = NULL;
  cr_assert_eq(tfx_train_input_open(&cfg, 0, 1, 1, &d, &b, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(d->n, PER_FILE);
  for (size_t i = 0; i < d->n; i++) {
    cr_assert_float_eq(d->x[i], normalized(d->y[i]), 1e-6, "loaded record %d: %g", d->y[i], d->x[i]);
  }
  cr_assert_float_eq(d->x[0], normalized(PER_FILE), 1e-6, "record 40: (40 * 0.5 * 2 - 10) / 4 = 7.5");
  tfx_batcher_destroy(b);
  tfx_dataset_destroy(d);
}

/* Opens a stream that must fail with `code` and a message containing `frag`: at open (the files), or when it
 * starts with its label check and reads its first window (the first file's contents), as a trainer starts it. */
static void open_fails(const tfx_config *cfg, int count, size_t dim, int code, const char *frag) {
  tfx_stream *s = NULL;
  tfx_err err = {0};
  int rc = tfx_stream_open(cfg, 0, count, dim, &s, &err);
  if (!rc) {
    rc = tfx_stream_check_labels(s, 0, 0, &err);
    tfx_stream_close(s);
  } else {
    cr_assert_null(s);
  }
  cr_assert_eq(rc, code, "rc %d (%s), want %d", rc, err.msg, code);
  cr_assert(strstr(err.msg, frag), "'%s' lacks '%s'", err.msg, frag);
}

Test(stream, bad_inputs_are_named) {
  write_csv();
  tfx_config cfg = config("csv", "nothing-*.csv", 10, "record");
  open_fails(&cfg, 1, 1, TFX_ENOTFOUND, "no file matches");
  cfg = config("csv", "part-0.csv", 10, "file");
  snprintf(cfg.train_images, sizeof cfg.train_images, "%s/part-0.csv,%s/part-1.csv", tmp, tmp);
  open_fails(&cfg, 3, 1, TFX_ECONFIG, "2 file(s) for 3 workers");
  cfg = config("csv", "part-0.csv", 10, "record");
  open_fails(&cfg, 1, 4, TFX_ESHAPE, "part-0.csv: 1 values per example, the model's input takes 4");
  char path[128];
  snprintf(path, sizeof path, "%s/part-9.csv", tmp);
  spit(path, "1,2\n3,x\n", 8);
  cfg = config("csv", "part-9.csv", 10, "record");
  open_fails(&cfg, 1, 1, TFX_ECORRUPT, "line 2");
}

Test(stream, a_file_that_goes_bad_mid_run_fails_the_batch_not_the_process) {
  write_csv();
  char path[128];
  snprintf(path, sizeof path, "%s/part-1.csv", tmp);
  FILE *f = fopen(path, "a");
  fprintf(f, "oops\n");
  fclose(f);
  tfx_config cfg = config("csv", "part-1.csv", 10, "record");
  tfx_batcher *b = NULL;
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_train_input_open(&cfg, 0, 1, 1, &d, &b, &err), TFX_OK, "%s", err.msg);
  cr_assert_null(d, "streaming loads no dataset");
  float x[PER_FILE + 1];
  int32_t y[PER_FILE + 1];
  tfx_batcher_next(b, PER_FILE, x, y);
  cr_assert_eq(tfx_batcher_status(b, &err), TFX_OK, "%s", err.msg);
  tfx_batcher_next(b, 1, x, y);
  cr_assert_eq(tfx_batcher_status(b, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "part-1.csv: line 41"), "%s", err.msg);
  tfx_batcher_destroy(b);
}

Test(stream, real_fashion_mnist_streams_like_the_whole_file_loader) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  if (access(cfg.train_images, R_OK) != 0) {
    cr_skip_test("Fashion-MNIST is not installed (%s)", cfg.train_images);
  }
  tfx_dataset *whole = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_dataset_load_idx(cfg.eval_images, cfg.eval_labels, cfg.data_scale, 784, &whole, &err), TFX_OK);
  snprintf(cfg.train_images, sizeof cfg.train_images, "%s", cfg.eval_images);
  snprintf(cfg.train_labels, sizeof cfg.train_labels, "%s", cfg.eval_labels);
  cfg.data_stream = 1, cfg.shuffle_buffer = 1000;
  tfx_stream *s = NULL;
  cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 784, &s, &err), TFX_OK, "%s", err.msg);
  static float x[100 * 784];
  int32_t y[100];
  long hist_stream[10] = {0}, hist_whole[10] = {0};
  double sum_stream = 0, sum_whole = 0;
  for (int b = 0; b < 100; b++) {
    cr_assert_eq(tfx_stream_next(s, 100, x, y, &err), TFX_OK, "%s", err.msg);
    for (int i = 0; i < 100; i++) {
      hist_stream[y[i]]++;
    }
    for (int i = 0; i < 100 * 784; i++) {
      sum_stream += x[i];
    }
  }
  cr_assert_eq(tfx_stream_epoch(s), 0);
  for (size_t i = 0; i < whole->n; i++) {
    hist_whole[whole->y[i]]++;
  }
  for (size_t i = 0; i < whole->n * whole->dim; i++) {
    sum_whole += whole->x[i];
  }
  for (int c = 0; c < 10; c++) {
    cr_assert_eq(hist_stream[c], hist_whole[c], "class %d: %ld streamed, %ld loaded", c, hist_stream[c], hist_whole[c]);
  }
  cr_assert_float_eq(sum_stream, sum_whole, 1e-6 * sum_whole, "pixel sums differ");
  tfx_stream_close(s);
  tfx_dataset_destroy(whole);
}

/* Writes CSV file DIR/name with records [first, first + n) as write_csv does, through a dot name renamed into
 * place (what a producer landing files does). */
static void land_csv(const char *dir, const char *name, int first, int n) {
  char tmp_path[256], path[256];
  snprintf(tmp_path, sizeof tmp_path, "%s/.%s.tmp", dir, name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *out = fopen(tmp_path, "w");
  cr_assert_not_null(out);
  for (int i = first; i < first + n; i++) {
    fprintf(out, "%g,%d\n", i * 0.5, i);
  }
  fclose(out);
  cr_assert_eq(rename(tmp_path, path), 0);
}

/* The idle function of a test: counts its calls and stops the wait at once. */
static int stop_at_once(void *ctx) {
  ++*(int *)ctx;
  return 1;
}

/* Takes examples of a followed stream until it waits for a file (TFX_EINTR from stop_at_once); counts the ids. */
static int take_until_dry(tfx_stream *s, int *seen, int32_t *order, int *n_order) {
  float x;
  int32_t y;
  tfx_err err = {0};
  int rc;
  while ((rc = tfx_stream_next(s, 1, &x, &y, &err)) == TFX_OK) {
    cr_assert_float_eq(x, y * 0.5f, 1e-6);
    seen[y]++;
    order[(*n_order)++] = y;
  }
  cr_assert(strstr(err.msg, "waiting for a file"), "%s", err.msg);
  return rc;
}

Test(stream, follow_reads_landed_files_in_name_order_each_once_across_workers) {
  char dir[128];
  snprintf(dir, sizeof dir, "%s/in", tmp);
  cr_assert_eq(mkdir(dir, 0755), 0);
  tfx_config cfg = config("csv", "unused", 16, "record");
  snprintf(cfg.train_follow, sizeof cfg.train_follow, "%s", dir);
  land_csv(dir, "part-1.csv", 40, 40);
  land_csv(dir, "part-0.csv", 0, 40);
  char writing[256]; /* a file still being written: invisible under its dot name */
  snprintf(writing, sizeof writing, "%s/.part-2.csv.tmp", dir);
  FILE *w = fopen(writing, "w");
  fprintf(w, "999,999\n");
  fclose(w);
  int seen[TOTAL] = {0}, idles[2] = {0}, n_order[2] = {0};
  int32_t order[2][TOTAL];
  tfx_stream *s[2] = {NULL, NULL};
  tfx_err err = {0};
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(tfx_stream_open(&cfg, k, 2, 1, &s[k], &err), TFX_OK, "%s", err.msg);
    tfx_stream_set_idle(s[k], stop_at_once, &idles[k]);
    cr_assert_eq(take_until_dry(s[k], seen, order[k], &n_order[k]), TFX_EINTR);
  }
  cr_assert_eq(n_order[0] + n_order[1], 80, "the two workers share the 80 records landed");
  for (int i = 0; i < 80; i++) {
    cr_assert_eq(seen[i], 1, "record %d read %d times", i, seen[i]);
  }
  cr_assert_lt(order[0][0], 40, "part-0.csv comes first by name, though it landed second");
  land_csv(dir, "a-late.csv", 100, 10); /* sorts before files already read: never read */
  land_csv(dir, "part-2.csv", 80, 40);
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(take_until_dry(s[k], seen, order[k], &n_order[k]), TFX_EINTR);
  }
  for (int i = 0; i < TOTAL; i++) {
    cr_assert_eq(seen[i], 1, "record %d read %d times", i, seen[i]);
  }
  /* A restart of worker 1 skips what it took and reads nothing twice (its position is a count of examples over the
   * directory's files in name order: the late file must not be there, docs/experiment.md says why). */
  char late[256];
  snprintf(late, sizeof late, "%s/a-late.csv", dir);
  cr_assert_eq(unlink(late), 0);
  tfx_stream *again = NULL;
  cr_assert_eq(tfx_stream_open(&cfg, 1, 2, 1, &again, &err), TFX_OK, "%s", err.msg);
  tfx_stream_set_idle(again, stop_at_once, &idles[1]);
  cr_assert_eq(tfx_stream_skip(again, n_order[1] - 5, &err), TFX_OK, "%s", err.msg);
  float x[5];
  int32_t y[5];
  cr_assert_eq(tfx_stream_next(again, 5, x, y, &err), TFX_OK, "%s", err.msg);
  cr_assert_arr_eq(y, order[1] + n_order[1] - 5, sizeof y, "the resumed worker goes on where it stood");
  cr_assert_eq(tfx_stream_next(again, 1, x, y, &err), TFX_EINTR, "then waits for the next file");
  tfx_stream_close(again);
  tfx_stream_close(s[0]);
  tfx_stream_close(s[1]);
}

/* data.shuffle false: a stream serves its files by name and each window as read, and the in-memory batcher its
 * records in file order (true, the default, shuffles both: the test above). */
Test(stream, shuffle_false_keeps_file_order_streaming_and_in_memory) {
  write_csv();
  for (int streaming = 0; streaming < 2; streaming++) {
    tfx_config cfg = config("csv", "part-1.csv", 10, "record");
    cfg.data_stream = streaming;
    int shuffled = 0;
    for (int shuffle = 0; shuffle < 2; shuffle++) {
      set_option(&cfg, "data.shuffle", shuffle ? "true" : "false");
      tfx_dataset *d = NULL;
      tfx_batcher *b = NULL;
      tfx_err err = {0};
      cr_assert_eq(tfx_train_input_open(&cfg, 0, 1, 1, &d, &b, &err), TFX_OK, "%s", err.msg);
      float x[PER_FILE];
      int32_t y[PER_FILE];
      tfx_batcher_next(b, PER_FILE, x, y);
      for (int i = 0; i < PER_FILE; i++) {
        cr_assert(shuffle || y[i] == PER_FILE + i, "streaming %d, shuffle off: example %d is record %d", streaming, i, y[i]);
        shuffled |= shuffle && y[i] != PER_FILE + i;
      }
      tfx_batcher_destroy(b);
      tfx_dataset_destroy(d);
    }
    cr_assert(shuffled, "streaming %d: data.shuffle true served the records in file order", streaming);
  }
}

/* A streamed label outside the model's classes is named by its file and record as the window is read (#30: it
 * was found only at the batch, as "example N of the batch"). Labels here are the record ids 0..119: with 100
 * classes the first bad one is id 100, record 21 of part-2.csv. */
Test(stream, a_bad_label_is_named_by_file_and_record) {
  write_csv();
  tfx_config cfg = config("csv", "part-*.csv", 7, "record");
  tfx_stream *s = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 1, &s, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_stream_check_labels(s, 100, 0, &err), TFX_OK, "%s", err.msg);
  float x[1];
  int32_t y[1];
  int rc = TFX_OK, taken = 0;
  while (taken <= TOTAL && (rc = tfx_stream_next(s, 1, x, y, &err)) == TFX_OK) {
    cr_assert(y[0] < 100, "label %d served", y[0]);
    taken++;
  }
  cr_assert_eq(rc, TFX_EINVAL, "rc %d after %d examples", rc, taken);
  cr_assert(strstr(err.msg, "part-2.csv: record 21: label 100 is outside the model's 100 classes") != NULL, "%s",
            err.msg);
  tfx_stream_close(s);
}

/* A followed directory of CSV files with a bad line in part-1 (line 5) and a label outside the classes in part-2
 * (record 3), read by worker `index` of 2 sharding by `shard_by` under data.on_error `policy`. */
static tfx_stream *bad_stream(const char *policy, const char *shard_by, int index) {
  char dir[128], path[256];
  snprintf(dir, sizeof dir, "%s/in", tmp);
  mkdir(dir, 0755);
  for (int f = 1; f <= 2; f++) {
    snprintf(path, sizeof path, "%s/part-%d.csv", dir, f);
    FILE *out = fopen(path, "w");
    cr_assert_not_null(out);
    for (int i = (f - 1) * 40; i < f * 40; i++) {
      if (i == 4) {
        fprintf(out, "oops,%d\n", i);
      } else {
        fprintf(out, "%g,%d\n", i * 0.5, i == 42 ? 500 : i);
      }
    }
    fclose(out);
  }
  tfx_config cfg = config("csv", "unused", 16, shard_by);
  snprintf(cfg.train_follow, sizeof cfg.train_follow, "%s", dir);
  set_option(&cfg, "data.on_error", policy);
  tfx_stream *s = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_stream_open(&cfg, index, 2, 1, &s, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_stream_check_labels(s, 100, 0, &err), TFX_OK, "%s", err.msg);
  return s;
}

Test(stream, on_error_skip_passes_over_bad_records_named_and_counted_once) {
  int seen[TOTAL] = {0}, calls = 0, n = 0;
  int32_t order[TOTAL];
  uint64_t bad = 0;
  for (int w = 0; w < 2; w++) {
    tfx_stream *s = bad_stream("skip", "record", w);
    tfx_stream_set_idle(s, stop_at_once, &calls);
    cr_assert_eq(take_until_dry(s, seen, order, &n), TFX_EINTR);
    bad += tfx_stream_bad_records(s);
    tfx_stream_close(s);
  }
  for (int id = 0; id < 80; id++) {
    cr_assert_eq(seen[id], id == 4 || id == 42 ? 0 : 1, "id %d seen %d times", id, seen[id]);
  }
  cr_assert_eq(bad, 2, "bad records counted %llu times across the workers", (unsigned long long)bad);
}

Test(stream, on_error_stop_fails_naming_the_file_and_line) {
  tfx_stream *s = bad_stream("stop", "file", 0);
  float x;
  int32_t y;
  tfx_err err = {0};
  int rc;
  while ((rc = tfx_stream_next(s, 1, &x, &y, &err)) == TFX_OK) {
  }
  cr_assert_eq(rc, TFX_ECORRUPT, "%s", err.msg);
  cr_assert(strstr(err.msg, "part-1.csv: line 5") != NULL, "%s", err.msg);
  cr_assert_eq(tfx_stream_bad_records(s), 0);
  tfx_stream_close(s);
}

/* A LibSVM row refused mid-line (its first pair read) leaves no pair behind: the rows around it are exact. */
Test(stream, on_error_skip_drops_a_bad_libsvm_row_whole) {
  char path[256];
  snprintf(path, sizeof path, "%s/part-0.svm", tmp);
  FILE *out = fopen(path, "w");
  cr_assert_not_null(out);
  for (int i = 0; i < 20; i++) {
    fprintf(out, i == 7 ? "%d 1:0.25 2:zz\n" : "%d 1:%g\n", i, i * 0.5);
  }
  fclose(out);
  tfx_config cfg = config("libsvm", "part-0.svm", 64, "record");
  set_option(&cfg, "data.on_error", "skip");
  tfx_stream *s = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 1, &s, &err), TFX_OK, "%s", err.msg);
  int seen[TOTAL] = {0};
  take(s, 19, seen); /* each feature checked against its label */
  for (int id = 0; id < 20; id++) {
    cr_assert_eq(seen[id], id != 7, "id %d seen %d times", id, seen[id]);
  }
  cr_assert_eq(tfx_stream_bad_records(s), 1);
  tfx_stream_close(s);
}

/* Streamed multi-label data (#25): each set's classes are checked against the model's outputs as the window is
 * read (the first window too, which the stream used to read at open, before the check was set): a set naming class
 * 5 of a 4-output model fails naming its file and record, or under data.on_error skip is dropped while the empty
 * set (no class: a label like any other, whose value a marker must not take) is kept. */
static int multi_label_stream(const char *policy, tfx_stream **s, tfx_err *err) {
  char path[128];
  snprintf(path, sizeof path, "%s/ml.csv", tmp);
  FILE *out = fopen(path, "w");
  cr_assert_not_null(out);
  fputs("0.5,0|2\n1.5,\n2.5,1|5\n3.5,3\n", out);
  fclose(out);
  tfx_config cfg = config("csv", "ml.csv", 4, "record");
  set_option(&cfg, "data.on_error", policy);
  cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 1, s, err), TFX_OK, "%s", err->msg);
  return tfx_stream_check_labels(*s, 4, 1, err);
}

Test(stream, multi_label_sets_checked_against_the_outputs) {
  tfx_stream *s = NULL;
  tfx_err err = {0};
  cr_assert_eq(multi_label_stream("stop", &s, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "ml.csv: record 3: its label set names class 5, outside the model's 4 outputs"), "%s",
            err.msg);
  tfx_stream_close(s);
  cr_assert_eq(multi_label_stream("skip", &s, &err), TFX_OK, "%s", err.msg);
  float x[1];
  int32_t y[1];
  int empty = 0;
  for (int i = 0; i < 6; i++) { /* two epochs of the three good records */
    cr_assert_eq(tfx_stream_next(s, 1, x, y, &err), TFX_OK, "%s", err.msg);
    cr_assert(x[0] != 2.5f, "the bad record was served");
    empty += y[0] == TFX_LABEL_SET;
  }
  cr_assert_eq(empty, 2, "the empty set was dropped as if bad");
  cr_assert_eq(tfx_stream_bad_records(s), 2, "named once a pass over the file");
  tfx_stream_close(s);
}

/* A followed stream says a batch is at hand only while the window it read holds it: the worker lends such a batch
 * before its push (its rows come with the reply), never one that would wait for a file with the push unsent. */
Test(stream, buffered_says_whether_a_batch_needs_no_file) {
  char dir[128];
  snprintf(dir, sizeof dir, "%s/in", tmp);
  cr_assert_eq(mkdir(dir, 0755), 0);
  tfx_config cfg = config("csv", "unused", 16, "record");
  snprintf(cfg.train_follow, sizeof cfg.train_follow, "%s", dir);
  land_csv(dir, "part-0.csv", 0, 10);
  tfx_stream *s = NULL;
  tfx_err err = {0};
  int idles = 0;
  cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 1, &s, &err), TFX_OK, "%s", err.msg);
  tfx_stream_set_idle(s, stop_at_once, &idles);
  cr_assert(!tfx_stream_buffered(s, 1), "nothing is read before the first take");
  float x[10];
  int32_t y[10];
  cr_assert_eq(tfx_stream_next(s, 4, x, y, &err), TFX_OK, "%s", err.msg);
  cr_assert(tfx_stream_buffered(s, 6), "the file's other 6 records are in the window");
  cr_assert(!tfx_stream_buffered(s, 7), "a 7th needs the next file");
  cr_assert_eq(tfx_stream_next(s, 6, x, y, &err), TFX_OK, "%s", err.msg);
  cr_assert(!tfx_stream_buffered(s, 1));
  cr_assert_eq(idles, 0, "no take waited");
  cr_assert_eq(tfx_stream_next(s, 1, x, y, &err), TFX_EINTR, "the next one waits for a file");
  tfx_stream_close(s);
}

/* A followed stream reads ahead on its reader thread (#28): after the first take the next two files' windows are
 * parsed while the caller does something else, queued at most two windows ahead (the memory bound), served in order
 * even once their files are deleted, and the take that finds the directory dry still waits for a file. */
Test(stream, follow_reads_two_windows_ahead_on_its_thread) {
  char dir[128], path[256];
  snprintf(dir, sizeof dir, "%s/in", tmp);
  cr_assert_eq(mkdir(dir, 0755), 0);
  tfx_config cfg = config("csv", "unused", 16, "record");
  snprintf(cfg.train_follow, sizeof cfg.train_follow, "%s", dir);
  set_option(&cfg, "data.shuffle", "false");
  for (int f = 0; f < 5; f++) {
    snprintf(path, sizeof path, "part-%d.csv", f);
    land_csv(dir, path, f * 10, 10);
  }
  tfx_stream *s = NULL;
  tfx_err err = {0};
  int idles = 0;
  cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 1, &s, &err), TFX_OK, "%s", err.msg);
  tfx_stream_set_idle(s, stop_at_once, &idles);
  float x[50];
  int32_t y[50];
  cr_assert_eq(tfx_stream_next(s, 1, x, y, &err), TFX_OK, "%s", err.msg);
  for (int tries = 0; tries < 500 && !tfx_stream_buffered(s, 29); tries++) { /* the reader's progress, 10 ms a look */
    usleep(10000);
  }
  cr_assert(tfx_stream_buffered(s, 29), "the 9 left of part-0 and two files ahead were not read");
  usleep(100000);
  cr_assert(!tfx_stream_buffered(s, 30), "more than two windows queued ahead");
  for (int f = 0; f < 3; f++) { /* read already: what a deleted file held is served */
    snprintf(path, sizeof path, "%s/part-%d.csv", dir, f);
    cr_assert_eq(unlink(path), 0);
  }
  cr_assert_eq(tfx_stream_next(s, 49, x + 1, y + 1, &err), TFX_OK, "%s", err.msg);
  for (int i = 0; i < 50; i++) {
    cr_assert_eq(y[i], i, "example %d is record %d", i, y[i]);
  }
  cr_assert_eq(idles, 0, "no take waited");
  cr_assert_eq(tfx_stream_next(s, 1, x, y, &err), TFX_EINTR, "the directory is dry: %s", err.msg);
  tfx_stream_close(s);
}

/* A file taken from a followed directory is opened once, without following a link and without blocking, and
 * checked on that descriptor: a FIFO (which would block the reader thread in open) and a link (which could lead out
 * of the directory) are refused by name, as a bad file (TFX_EINVAL); a regular file is handed over open, with its
 * size. */
Test(stream, a_followed_file_must_be_a_regular_file_opened_without_blocking) {
  char fifo[512], link[512], file[512];
  snprintf(fifo, sizeof fifo, "%s/fifo", tmp);
  snprintf(link, sizeof link, "%s/link", tmp);
  snprintf(file, sizeof file, "%s/file", tmp);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  FILE *f = fopen(file, "w");
  cr_assert_not_null(f);
  fputs("1,2\n", f);
  fclose(f);
  cr_assert_eq(symlink(file, link), 0);
  tfx_err err = {0};
  int64_t size = -1;
  f = NULL;
  cr_assert_eq(data__follow_open(file, &f, &size, &err), TFX_OK, "%s", err.msg);
  cr_assert(f != NULL && size == 4, "size %lld", (long long)size);
  fclose(f);
  cr_assert_eq(data__follow_open(fifo, &f, &size, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "fifo: not a regular file"), "%s", err.msg);
  cr_assert_eq(data__follow_open(link, &f, &size, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "link: a symbolic link, not followed"), "%s", err.msg);
  snprintf(file, sizeof file, "%s/gone", tmp);
  cr_assert_eq(data__follow_open(file, &f, &size, &err), TFX_ENOTFOUND);
  cr_assert(strstr(err.msg, "gone: cannot be opened"), "%s", err.msg);
}

/* Records 0..n-1 (feature id * 0.5, label id) into path as CSV, LibSVM or TFRecord Examples ("image", "label"). */
static void write_records(const char *path, const char *format, int n) {
  tfx_err err = {0};
  if (strcmp(format, "tfrecord") == 0) {
    tfx_tfrecord_writer *w = NULL;
    cr_assert_eq(tfx_tfrecord_writer_open(path, &w, &err), TFX_OK, "%s", err.msg);
    for (int i = 0; i < n; i++) {
      float xv = (float)(i * 0.5);
      int64_t yv = i;
      const tfx_feature f[2] = {{.key = "image", .kind = TFX_FEATURE_KIND_FLOAT, .n = 1, .floats = &xv},
                                {.key = "label", .kind = TFX_FEATURE_KIND_INT64, .n = 1, .int64s = &yv}};
      uint8_t *buf = NULL;
      size_t len = 0;
      cr_assert_eq(tfx_example_pack(f, 2, &buf, &len, &err), TFX_OK, "%s", err.msg);
      cr_assert_eq(tfx_tfrecord_writer_write(w, buf, len, &err), TFX_OK, "%s", err.msg);
      free(buf);
    }
    cr_assert_eq(tfx_tfrecord_writer_close(w, &err), TFX_OK, "%s", err.msg);
    return;
  }
  FILE *out = fopen(path, "w");
  cr_assert_not_null(out);
  for (int i = 0; i < n; i++) {
    fprintf(out, strcmp(format, "csv") == 0 ? "%g,%d\n" : "%2$d 1:%1$g\n", i * 0.5, i);
  }
  fclose(out);
}

/* The opens of files named `name` in the directory watched by inotify fd `watch` since the last call. */
static int opens_of(int watch, const char *name) {
  char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
  int n = 0;
  for (ssize_t len; (len = read(watch, buf, sizeof buf)) > 0;) {
    for (char *p = buf; p < buf + len; p += sizeof(struct inotify_event) + ((struct inotify_event *)p)->len) {
      const struct inotify_event *e = (const struct inotify_event *)p;
      n += (e->mask & IN_OPEN) && e->len && strcmp(e->name, name) == 0;
    }
  }
  return n;
}

/* A followed file is opened once (the kernel's count of its opens, through inotify), CSV, LibSVM or TFRecord:
 * checked and read through that one open, so no flip of its name can come between a check and a read (#47, item
 * 11: the check's open and then the reader's, a FIFO put there between the two blocked the reader thread). */
Test(stream, a_followed_file_is_opened_once) {
  char dir[128], path[256];
  snprintf(dir, sizeof dir, "%s/in", tmp);
  cr_assert_eq(mkdir(dir, 0755), 0);
  const char *formats[] = {"csv", "libsvm", "tfrecord"};
  for (int k = 0; k < 3; k++) {
    int watch = inotify_init1(IN_NONBLOCK);
    /* closes watched too: inotify merges an event with the unread one before it when they are the same */
    cr_assert(watch >= 0 && inotify_add_watch(watch, dir, IN_OPEN | IN_CLOSE) >= 0);
    snprintf(path, sizeof path, "%s/part-%d", dir, k);
    write_records(path, formats[k], 5);
    opens_of(watch, "");
    tfx_config cfg = config(formats[k], "unused", 16, "record");
    snprintf(cfg.train_follow, sizeof cfg.train_follow, "%s", dir);
    snprintf(cfg.feature_key, sizeof cfg.feature_key, "image");
    tfx_stream *s = NULL;
    tfx_err err = {0};
    int idles = 0, seen[TOTAL] = {0}, n = 0;
    int32_t order[TOTAL];
    cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 1, &s, &err), TFX_OK, "%s", err.msg);
    tfx_stream_set_idle(s, stop_at_once, &idles);
    cr_assert_eq(take_until_dry(s, seen, order, &n), TFX_EINTR);
    cr_assert_eq(n, 5, "%s: %d records", formats[k], n);
    snprintf(path, sizeof path, "part-%d", k);
    cr_assert_eq(opens_of(watch, path), 1, "%s: the followed file was not opened once", formats[k]);
    tfx_stream_close(s);
    close(watch);
    snprintf(path, sizeof path, "%s/part-%d", dir, k);
    cr_assert_eq(unlink(path), 0);
  }
}

/* What the check passed is what is read (#47, item 11): once a followed file is open, its name turned into a FIFO
 * or a link to a file outside changes nothing; every reader reads the descriptor checked, none opens the name again
 * (the name opened twice, a FIFO put there between the two opens blocked the reader thread for good). */
Test(stream, a_followed_file_flipped_after_its_open_is_read_as_checked, .timeout = 30) {
  char dir[128], path[256], fifo[256], outside[256];
  snprintf(dir, sizeof dir, "%s/in", tmp);
  cr_assert_eq(mkdir(dir, 0755), 0);
  snprintf(outside, sizeof outside, "%s/outside.csv", tmp);
  land_csv(tmp, "outside.csv", 100, 10);
  const char *formats[] = {"csv", "libsvm", "tfrecord"};
  for (int k = 0; k < 3; k++) {
    snprintf(path, sizeof path, "%s/part-%d", dir, k);
    write_records(path, formats[k], 5);
    FILE *f = NULL;
    int64_t size = 0;
    tfx_err err = {0};
    cr_assert_eq(data__follow_open(path, &f, &size, &err), TFX_OK, "%s", err.msg);
    snprintf(fifo, sizeof fifo, "%s/.fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_eq(rename(fifo, path), 0, "the name is a FIFO now");
    tfx_dataset *d = NULL;
    int rc;
    if (k == 0) {
      tfx_csv_reader *r = NULL;
      cr_assert_eq(data__csv_open_file(f, path, "-1", 0, &r, &err), TFX_OK, "%s", err.msg);
      cr_assert_eq(unlink(path), 0);
      cr_assert_eq(symlink(outside, path), 0, "and a link out of the directory");
      rc = tfx_csv_read(r, 100, &d, &err);
      tfx_csv_close(r);
    } else if (k == 1) {
      tfx_libsvm_reader *r = NULL;
      cr_assert_eq(data__libsvm_open_file(f, path, 1, &r, &err), TFX_OK, "%s", err.msg);
      rc = tfx_libsvm_read(r, 100, &d, &err);
      tfx_libsvm_close(r);
    } else {
      tfx_example_reader *r = NULL;
      cr_assert_eq(data__example_open_file(f, path, "image", "label", 1.0, &r, &err), TFX_OK, "%s", err.msg);
      rc = tfx_example_read(r, 100, &d, &err);
      tfx_example_close(r);
    }
    cr_assert_eq(rc, TFX_OK, "%s: %s", formats[k], err.msg);
    cr_assert(d && d->n == 5, "%s: %zu records read", formats[k], d ? d->n : 0);
    for (int i = 0; i < 5; i++) {
      cr_assert_eq(d->y[i], i, "%s: record %d is the checked file's", formats[k], i);
    }
    tfx_dataset_destroy(d);
    cr_assert_eq(unlink(path), 0);
  }
}

/* The flipper of the test below: lands part-000, part-001, ... one at a time, each a regular file of one record
 * (label i), and flips it between a FIFO, that and a link out of the directory until the stream has taken it (read
 * its record, or skipped it as a bad file), leaving it regular. */
typedef struct flipper {
  const char *dir, *outside;
  int names;
  tfx_stream *s;
  atomic_int read; /* records the consumer read */
  atomic_int done;
} flipper;

/* Puts a regular file of record i (turn 0), a FIFO (1) or a link to the outside file (2) at path, through a rename. */
static void flip_to(const flipper *fl, const char *path, int i, int turn) {
  char tmp_path[256];
  snprintf(tmp_path, sizeof tmp_path, "%s/.flip", fl->dir);
  if (turn == 1) {
    mkfifo(tmp_path, 0600);
  } else if (turn == 2) {
    symlink(fl->outside, tmp_path);
  } else {
    FILE *out = fopen(tmp_path, "w");
    fprintf(out, "%g,%d\n", i * 0.5, i);
    fclose(out);
  }
  rename(tmp_path, path);
}

static void *flip(void *arg) {
  flipper *fl = arg;
  char path[256];
  for (int i = 0; i < fl->names; i++) {
    snprintf(path, sizeof path, "%s/part-%03d", fl->dir, i);
    for (int turn = 0; (uint64_t)atomic_load(&fl->read) + tfx_stream_bad_records(fl->s) <= (uint64_t)i; turn++) {
      flip_to(fl, path, i, turn % 2 ? 0 : 1 + turn / 2 % 2); /* FIFO, file, link, file, ... */
    }
    flip_to(fl, path, i, 0);
  }
  atomic_store(&fl->done, 1);
  return NULL;
}

/* The idle function of the test below: waits on while the flipper runs. */
static int until_flipped(void *ctx) {
  return atomic_load(&((flipper *)ctx)->done);
}

/* A followed directory whose names flip between a regular file, a FIFO and a link out of it as they are taken
 * (data.on_error skip): the reader never blocks (the test's timeout), never reads the linked file, and each name is
 * either read, its one record whole, or skipped as a bad file. This is a guard, not the regression test: with the
 * name opened twice (the check, then the reader), a flip to a FIFO between the two blocked the reader thread in open
 * for good, but that window is microseconds wide and this test missed it 3 times in 3; a_followed_file_is_opened_once
 * is the one that fails with two opens. */
Test(stream, a_followed_directory_of_flipping_names_never_blocks_nor_leaves_it, .timeout = 60) {
  char dir[128], outside[256];
  snprintf(dir, sizeof dir, "%s/in", tmp);
  cr_assert_eq(mkdir(dir, 0755), 0);
  land_csv(tmp, "outside.csv", 1000, 10);
  snprintf(outside, sizeof outside, "%s/outside.csv", tmp);
  tfx_config cfg = config("csv", "unused", 16, "record");
  snprintf(cfg.train_follow, sizeof cfg.train_follow, "%s", dir);
  set_option(&cfg, "data.on_error", "skip");
  flipper fl = {.dir = dir, .outside = outside, .names = 12}; /* ~0.4 s each: looks at the directory 100 ms apart */
  tfx_err err = {0};
  cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 1, &fl.s, &err), TFX_OK, "%s", err.msg);
  tfx_stream_set_idle(fl.s, until_flipped, &fl);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, flip, &fl), 0);
  int seen[12] = {0}, rc;
  float x;
  int32_t y;
  while ((rc = tfx_stream_next(fl.s, 1, &x, &y, &err)) == TFX_OK) {
    cr_assert(y >= 0 && y < 12, "record %d is not one of the directory's", y);
    cr_assert_float_eq(x, y * 0.5f, 1e-6);
    cr_assert_eq(++seen[y], 1, "record %d read twice", y);
    atomic_fetch_add(&fl.read, 1);
  }
  pthread_join(t, NULL);
  int n = atomic_load(&fl.read);
  uint64_t bad = tfx_stream_bad_records(fl.s);
  cr_assert_eq(rc, TFX_EINTR, "%s", err.msg);
  cr_assert_eq((uint64_t)n + bad, 12, "%d read, %llu skipped as bad files", n, (unsigned long long)bad);
  cr_log_info("flipping names: %d read, %llu skipped as a FIFO or a link", n, (unsigned long long)bad);
  tfx_stream_close(fl.s);
}

/* fd 2 into a file while a test watches the log (start_log), and back (stop_log: the text, caller frees). */
static int saved_stderr = -1;
static void start_log(const char *path) {
  fflush(stderr);
  saved_stderr = dup(2);
  int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
  cr_assert(saved_stderr >= 0 && fd >= 0);
  dup2(fd, 2);
  close(fd);
}
static char *stop_log(const char *path) {
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  char *text = calloc(1, 1 << 20);
  size_t n = fread(text, 1, (1 << 20) - 1, f);
  text[n] = '\0';
  fclose(f);
  return text;
}

/* The number of times needle occurs in text. */
static int count_of(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p++) {
    n++;
  }
  return n;
}

/* A file landing late (sorting before one already taken) is never read, and named, once whatever the looks at the
 * directory after (#47): each by its own name, a link or a dot name never. */
Test(stream, a_file_landing_late_is_named_once) {
  char dir[128], logp[256], link[256];
  snprintf(dir, sizeof dir, "%s/in", tmp);
  snprintf(logp, sizeof logp, "%s/log.txt", tmp);
  cr_assert_eq(mkdir(dir, 0755), 0);
  tfx_config cfg = config("csv", "unused", 16, "record");
  snprintf(cfg.train_follow, sizeof cfg.train_follow, "%s", dir);
  land_csv(dir, "part-0.csv", 0, 40);
  land_csv(dir, "part-2.csv", 40, 40);
  int seen[TOTAL] = {0}, idles = 0, n_order = 0;
  int32_t order[TOTAL];
  tfx_stream *s = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 1, &s, &err), TFX_OK, "%s", err.msg);
  tfx_stream_set_idle(s, stop_at_once, &idles);
  start_log(logp);
  cr_assert_eq(take_until_dry(s, seen, order, &n_order), TFX_EINTR);
  land_csv(dir, "part-1.csv", 100, 10);  /* late: never read */
  land_csv(dir, "part-0a.csv", 100, 10); /* late too */
  snprintf(link, sizeof link, "%s/part-00.csv", dir);
  cr_assert_eq(symlink("part-2.csv", link), 0); /* not a file of the directory: never named */
  land_csv(dir, "part-3.csv", 80, 40);
  for (int look = 0; look < 3; look++) {
    cr_assert_eq(take_until_dry(s, seen, order, &n_order), TFX_EINTR);
  }
  char *text = stop_log(logp);
  cr_assert_eq(n_order, 120, "%d records read", n_order);
  for (int i = 0; i < 120; i++) {
    cr_assert_eq(seen[i], 1, "record %d read %d times", i, seen[i]);
  }
  cr_assert_eq(count_of(text, "DATA-FOLLOW-LATE"), 2, "%s", text);
  cr_assert_eq(count_of(text, "in/part-1.csv landed after 'part-2.csv' was taken"), 1, "%s", text);
  cr_assert_eq(count_of(text, "in/part-0a.csv landed after 'part-2.csv' was taken"), 1, "%s", text);
  free(text);
  tfx_stream_close(s);
}

/* A followed file cut while it is read (its reader some windows into it) is named at its end, with the sizes: its
 * rows past the cut were not read, and the positions after it shift (#47). A file read whole is not named. */
Test(stream, a_followed_file_cut_while_read_is_named) {
  char dir[128], logp[256], path[256];
  snprintf(dir, sizeof dir, "%s/in", tmp);
  snprintf(logp, sizeof logp, "%s/log.txt", tmp);
  cr_assert_eq(mkdir(dir, 0755), 0);
  tfx_config cfg = config("csv", "unused", 10, "record");
  snprintf(cfg.train_follow, sizeof cfg.train_follow, "%s", dir);
  set_option(&cfg, "data.shuffle", "false");
  enum { ROWS = 40000, CUT = 20000 };
  land_csv(dir, "part-0.csv", 0, ROWS);
  land_csv(dir, "part-1.csv", 0, 10);
  snprintf(path, sizeof path, "%s/part-0.csv", dir);
  long cut = 0;
  for (int i = 0; i < CUT; i++) { /* the bytes of the first CUT lines, as land_csv wrote them */
    cut += snprintf(NULL, 0, "%g,%d\n", i * 0.5, i);
  }
  tfx_stream *s = NULL;
  tfx_err err = {0};
  int idles = 0;
  cr_assert_eq(tfx_stream_open(&cfg, 0, 1, 1, &s, &err), TFX_OK, "%s", err.msg);
  tfx_stream_set_idle(s, stop_at_once, &idles);
  start_log(logp);
  float x;
  int32_t y;
  cr_assert_eq(tfx_stream_next(s, 1, &x, &y, &err), TFX_OK, "%s", err.msg);
  usleep(200000); /* the reader reads ahead at most three windows (30 rows) of 40 000, then waits for the take */
  cr_assert_eq(truncate(path, cut), 0);
  int n = 1, rc;
  while ((rc = tfx_stream_next(s, 1, &x, &y, &err)) == TFX_OK) {
    n++;
  }
  char *text = stop_log(logp);
  cr_assert_eq(rc, TFX_EINTR, "%s", err.msg);
  cr_assert_eq(n, CUT + 10, "the rows before the cut and part-1's: %d", n);
  char want[512];
  snprintf(want, sizeof want, "DATA-FOLLOW-TRUNCATED %s was cut from", path);
  cr_assert_eq(count_of(text, want), 1, "%s", text);
  snprintf(want, sizeof want, "to %ld bytes while it was read", cut);
  cr_assert(strstr(text, want), "%s", text);
  cr_assert_eq(count_of(text, "DATA-FOLLOW-TRUNCATED"), 1, "part-1.csv, read whole, was named: %s", text);
  free(text);
  tfx_stream_close(s);
}
