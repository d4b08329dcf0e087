/* src/train/labels.c: a set's labels checked against the model's classes when it is loaded, named by the file
 * and its line (CSV, LibSVM) or record (TFRecord, IDX), before anything trains or is written (#30, item 16). */
#include <criterion/criterion.h>
#include <string.h>

#include "data/example.h"
#include "data/tfrecord.h"
#include "tmpdir.h"
#include "train/labels.h"

static void init(void) {
  tmpdir_create("labels");
}

TestSuite(labels, .init = init, .fini = tmpdir_remove);

/* A 3-class softmax model over 2 inputs, reading `format` from `file` as its eval set. */
static tfx_model *model(tfx_config *cfg, const char *format, const char *file) {
  tfx_config_init(cfg);
  char json[512];
  snprintf(json, sizeof json,
           "{\"model\": {\"input_shape\": [2], \"layers\": [{\"type\": \"dense\", \"units\": 3}]},"
           " \"data\": {\"format\": \"%s\", \"scale\": 1}}",
           format);
  tfx_err e = {0};
  cr_assert_eq(tfx_config_parse(cfg, json, "test", &e), TFX_OK, "%s", e.msg);
  snprintf(cfg->eval_images, sizeof cfg->eval_images, "%s", file);
  snprintf(cfg->train_images, sizeof cfg->train_images, "%s", file);
  tfx_model *m = NULL;
  cr_assert_eq(tfx_model_create(cfg, 4, &m, &e), TFX_OK, "%s", e.msg);
  return m;
}

static void refused(const char *format, const char *file, const char *want) {
  tfx_config cfg;
  tfx_model *m = model(&cfg, format, file);
  tfx_dataset *d = NULL;
  tfx_batcher *b = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_labels_load(m, &cfg, 1, &d, &e), TFX_EINVAL, "%s", e.msg);
  cr_assert_null(d);
  cr_assert(strstr(e.msg, want), "%s", e.msg);
  memset(&e, 0, sizeof e);
  cr_assert_eq(tfx_labels_train_input(m, &cfg, 0, 1, &d, &b, &e), TFX_EINVAL, "%s", e.msg);
  cr_assert(strstr(e.msg, want), "%s", e.msg);
  cr_assert_null(d);
  cr_assert_null(b);
  tfx_model_destroy(m);
}

/* A text file of `format` written as `text`, refused with "FILE: " + where. */
static void text_refused(const char *format, const char *name, const char *text, const char *where) {
  char path[128], want[192];
  snprintf(path, sizeof path, "%s/%s", tmp, name);
  spit(path, text, strlen(text));
  snprintf(want, sizeof want, "%s: %s", path, where);
  refused(format, path, want);
}

Test(labels, libsvm_line_named) {
  text_refused("libsvm", "a.svm", "# a comment\n1 1:0.5\n\n7 2:1\n",
               "line 4: label 7 is outside the model's 3 classes");
}

Test(labels, csv_line_named) {
  text_refused("csv", "a.csv", "a,b,label\n\n0.5,0.5,1\n1,1,99\n", "line 4: label 99 is outside");
}

Test(labels, tfrecord_record_named) {
  char path[128];
  snprintf(path, sizeof path, "%s/a.tfrecord", tmp);
  tfx_tfrecord_writer *w = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_tfrecord_writer_open(path, &w, &e), TFX_OK, "%s", e.msg);
  for (int r = 0; r < 3; r++) {
    const float x[2] = {0.5f, 1};
    const int64_t y = r == 2 ? 9 : r;
    tfx_feature f[2] = {{.key = "image", .kind = TFX_FEATURE_KIND_FLOAT, .n = 2, .floats = x},
                        {.key = "label", .kind = TFX_FEATURE_KIND_INT64, .n = 1, .int64s = &y}};
    uint8_t *buf = NULL;
    size_t len = 0;
    cr_assert_eq(tfx_example_pack(f, 2, &buf, &len, &e), TFX_OK, "%s", e.msg);
    cr_assert_eq(tfx_tfrecord_writer_write(w, buf, len, &e), TFX_OK, "%s", e.msg);
    free(buf);
  }
  cr_assert_eq(tfx_tfrecord_writer_close(w, &e), TFX_OK, "%s", e.msg);
  char want[192];
  snprintf(want, sizeof want, "%s: record 2: label 9 is outside", path);
  refused("tfrecord", path, want);
}

Test(labels, good_labels_load) {
  char path[128];
  snprintf(path, sizeof path, "%s/b.svm", tmp);
  const char text[] = "0 1:0.5\n2 2:1\n";
  spit(path, text, strlen(text));
  tfx_config cfg;
  tfx_model *m = model(&cfg, "libsvm", path);
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_labels_load(m, &cfg, 1, &d, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(d->n, 2);
  tfx_dataset_destroy(d);
  tfx_model_destroy(m);
}
