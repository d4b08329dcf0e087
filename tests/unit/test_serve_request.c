/* serve's request parsing (TensorFlow Serving's {"instances": [...]}): dense lists scaled as training scales them,
 * LibSVM lines and feature-column objects read by the run's own readers, every malformed body refused with
 * TFX_EINVAL naming what is wrong; and the joining of parsed requests into one batch. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/serve.h"
#include "data/columns.h"
#include "tmpdir.h"

static const char *dense_json = "{\"model\": {\"input_shape\": [4], \"layers\": [{\"type\": \"dense\", \"units\": 3}]},"
                                " \"data\": {\"scale\": 0.5, \"mean\": 1, \"std\": 2}}";
static const char *sparse_json =
    "{\"model\": {\"input_shape\": [100], \"layers\": [{\"type\": \"embedding_bag\", \"units\": 3}]},"
    " \"data\": {\"format\": \"libsvm\", \"scale\": 2}}";
static const char *columns_json =
    "{\"model\": {\"features\": ["
    "{\"key\": \"cat\", \"type\": \"identity\", \"num_buckets\": 5},"
    "{\"key\": \"words\", \"type\": \"hash\", \"hash_bucket_size\": 1000, \"separator\": \" \", \"weight_key\": \"w\"},"
    "{\"name\": \"cross\", \"type\": \"crossed\", \"keys\": \"cat,words\", \"separator\": \" \", "
    "\"hash_bucket_size\": 97},"
    "{\"key\": \"x\", \"type\": \"numeric\", \"default_value\": -1}],"
    " \"layers\": [{\"type\": \"embedding_bag\", \"inputs\": \"cat\", \"units\": 2}]},"
    " \"data\": {\"format\": \"csv\", \"label_column\": \"y\"}}";

static void config(tfx_config *cfg, const char *json) {
  tfx_config_init(cfg);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(cfg, json, "test", &err), TFX_OK, "%s", err.msg);
}

static int top_k = -1; /* the last parse's top_k (-1: not written) */

/* Parses body for the model of json (dim dense inputs); returns the code, the dataset in *out and the body's top_k
 * in top_k on success. */
static int parse(const char *json, size_t dim, const char *body, tfx_dataset **out, tfx_err *err) {
  tfx_config cfg;
  config(&cfg, json);
  *out = NULL;
  top_k = -1;
  return tfx_serve_parse(&cfg, dim, body, strlen(body), out, &top_k, err);
}

static void refused(const char *json, size_t dim, const char *body, const char *fragment) {
  tfx_dataset *d;
  tfx_err err = {0};
  cr_assert_eq(parse(json, dim, body, &d, &err), TFX_EINVAL, "%s: %s", body, err.msg);
  cr_assert_null(d);
  cr_assert(strstr(err.msg, fragment), "%s: '%s' lacks '%s'", body, err.msg, fragment);
}

Test(serve, dense_lists_are_scaled_as_training_scales_them) {
  tfx_dataset *d;
  tfx_err err = {0};
  cr_assert_eq(parse(dense_json, 4, "{\"instances\": [[1, 2, 3, 4], [0, 0.5, 8, -2]]}", &d, &err), TFX_OK, "%s",
               err.msg);
  cr_assert_eq(d->n, 2);
  cr_assert_eq(d->dim, 4);
  float want[] = {-0.25f, 0, 0.25f, 0.5f, -0.5f, -0.375f, 1.5f, -1};
  for (int i = 0; i < 8; i++) {
    cr_assert_float_eq(d->x[i], want[i], 1e-7, "x[%d] = %g", i, d->x[i]);
  }
  tfx_dataset_destroy(d);
}

Test(serve, the_fast_scanner_reads_numbers_as_json_c_does) {
  /* The first body takes the scanner's path; the second, with a key besides "instances", takes json-c's. */
  const char *fast = "{\"instances\": [[1.5e2, -0.25, 3, 0], [1234567890123456789, 0.1, -7e-3, 2.50]]}";
  const char *slow = "{\"instances\": [[1.5e2, -0.25, 3, 0], [1234567890123456789, 0.1, -7e-3, 2.50]], \"x\": 1}";
  tfx_dataset *a, *b;
  tfx_err err = {0};
  cr_assert_eq(parse(dense_json, 4, fast, &a, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(parse(dense_json, 4, slow, &b, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(a->n, 2);
  cr_assert_arr_eq(a->x, b->x, sizeof(float) * 8, "the two paths read other floats");
  tfx_dataset_destroy(a);
  tfx_dataset_destroy(b);
  refused(dense_json, 4, "{\"instances\": [[1, 2, 3, 4]]", "not JSON");
}

Test(serve, malformed_bodies_are_refused_naming_what_is_wrong) {
  refused(dense_json, 4, "not json", "not JSON");
  refused(dense_json, 4, "{\"instances\": ", "ends early");
  refused(dense_json, 4, "{\"instances\": [[1,2,3,4]]} trailing", "bytes after the value");
  refused(dense_json, 4, "{\"nothing\": 1}", "no \"instances\" list");
  refused(dense_json, 4, "{\"instances\": 3}", "no \"instances\" list");
  refused(dense_json, 4, "{\"instances\": []}", "holds 0 instances");
  refused(dense_json, 4, "{\"instances\": [[1,2,3]]}", "instances[0]: 3 values, the model takes 4");
  refused(dense_json, 4, "{\"instances\": [[1,2,3,4], [1,\"a\",3,4]]}", "instances[1][1]: not a number");
  refused(dense_json, 4, "{\"instances\": [[1,2,3,4], \"1:2\"]}", "instances[1]: not a list of numbers");
  refused(dense_json, 4, "{\"instances\": [{\"a\": 1}]}", "this model reads lists of numbers or LibSVM lines");
  refused(dense_json, 4, "{\"instances\": [true]}", "not a list, a string or an object");
  refused(dense_json, 4, "{\"instances\": [[1,2,3,4], [1,NaN,3,4]]}", "instances[1][1]: nan is not a finite number");
  refused(dense_json, 4, "{\"instances\": [[1,2,Infinity,4]]}", "instances[0][2]: inf is not a finite number");
  refused(dense_json, 4, "{\"instances\": [[1,2,3,1e400]]}", "instances[0][3]");
  refused(dense_json, 4, "{\"instances\": [[1,2,3,1e39]]}", "instances[0][3]: 1e+39 is not a finite number");
}

/* A body is measured before json-c builds an object of ~100 bytes per value: a dense list of the wrong width
 * holding 2^21 numbers (4 MB; 64 MB took serve to 2.4 GB) is refused by its count. Strings count once. */
Test(serve, a_body_of_more_values_than_a_request_holds_is_refused_before_parsing) {
  size_t n = (size_t)1 << 21;
  char *body = malloc(n * 2 + 32);
  size_t at = (size_t)sprintf(body, "{\"instances\": [[0");
  for (size_t i = 1; i < n; i++) {
    memcpy(body + at, ",0", 2);
    at += 2;
  }
  sprintf(body + at, "]]}");
  tfx_dataset *d = NULL;
  tfx_err err = {0};
  cr_assert_eq(parse(dense_json, 4, body, &d, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "JSON values, more than 1048576"), "%.200s", err.msg); /* (not the 4 MB body) */
  at = (size_t)sprintf(body, "{\"instances\": [\"");
  for (size_t i = 1; i < n; i++) {
    memcpy(body + at, "[,", 2); /* inside a string: no values */
    at += 2;
  }
  sprintf(body + at, "\"]}");
  cr_assert_eq(parse(sparse_json, 100, body, &d, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "instances[0]"), "%.200s", err.msg);
  free(body);
}

Test(serve, too_many_instances_are_refused) {
  size_t n = TFX_SERVE_MAX_INSTANCES + 1;
  char *body = malloc(n * 2 + 32);
  size_t at = (size_t)sprintf(body, "{\"instances\": [1");
  for (size_t i = 1; i < n; i++) {
    at += (size_t)sprintf(body + at, ",1");
  }
  sprintf(body + at, "]}");
  refused(dense_json, 4, body, "holds 10001 instances (want 1..10000)");
  free(body);
}

Test(serve, libsvm_lines_go_through_the_reader_with_or_without_a_label) {
  tfx_dataset *d;
  tfx_err err = {0};
  cr_assert_eq(parse(sparse_json, 100, "{\"instances\": [\"3 1:0.5 7:1\", \"2:1.5\"]}", &d, &err), TFX_OK, "%s",
               err.msg);
  cr_assert_eq(d->n, 2);
  cr_assert_eq(d->n_fields, 1);
  const tfx_field *f = &d->fields[0];
  cr_assert_eq(f->off[1], 2);
  cr_assert_eq(f->off[2], 3);
  cr_assert_eq(f->ids[0], 0);
  cr_assert_eq(f->ids[1], 6);
  cr_assert_eq(f->ids[2], 1);
  cr_assert_float_eq(f->vals[0], 1.0f, 1e-7, "data.scale 2 applies to a line's values");
  cr_assert_float_eq(f->vals[2], 3.0f, 1e-7);
  tfx_dataset_destroy(d);
  refused(sparse_json, 100, "{\"instances\": [\"1 1:0.5\", \"1 2:x\"]}", "instances[1]");
  refused(sparse_json, 100, "{\"instances\": [\"1 1:0.5\\n1 2:1\"]}", "not one LibSVM line");
  refused(sparse_json, 100, "{\"instances\": [\"\"]}", "not one LibSVM line");
  refused(sparse_json, 100, "{\"instances\": [[1, 2]]}", "this model reads a LibSVM line");
}

Test(serve, column_objects_read_as_the_csv_reader_reads_their_row) {
  tmpdir_create("serve");
  char path[256];
  snprintf(path, sizeof path, "%s/d.csv", tmp);
  FILE *f = fopen(path, "w");
  fputs("y,cat,words,w,x\n1,3,a b,0.5 2,1.5\n0,0,,,\n", f);
  fclose(f);
  tfx_config cfg;
  config(&cfg, columns_json);
  tfx_dataset *want = NULL, *got = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_columns_load_csv(&cfg, path, &want, &err), TFX_OK, "%s", err.msg);
  const char *body =
      "{\"instances\": [{\"cat\": 3, \"words\": [\"a\", \"b\"], \"w\": [0.5, 2], \"x\": 1.5},"
      " {\"cat\": \"0\"}]}";
  cr_assert_eq(tfx_serve_parse(&cfg, 1, body, strlen(body), &got, NULL, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(got->n, 2);
  cr_assert_eq(got->n_fields, want->n_fields);
  for (int k = 0; k < got->n_fields; k++) {
    int64_t nnz = want->fields[k].off[2];
    cr_assert_eq(got->fields[k].off[2], nnz, "field %d", k);
    cr_assert_arr_eq(got->fields[k].ids, want->fields[k].ids, sizeof(int64_t) * (size_t)nnz, "field %d ids", k);
  }
  tfx_scorer_scale(&cfg, want->x, 2); /* as training scales the numeric columns (data.scale) */
  cr_assert_float_eq(got->x[0], want->x[0], 0);
  cr_assert_float_eq(got->x[1], want->x[1], 0, "an absent numeric column reads as its default_value");
  tfx_dataset_destroy(want);
  tfx_dataset_destroy(got);
  refused(columns_json, 1, "{\"instances\": [{\"cat\": 3, \"zzz\": 1}]}", "no column 'zzz'");
  refused(columns_json, 1, "{\"instances\": [{\"cat\": [1, 2]}]}", "instances[0].cat: a list, the column takes one");
  refused(columns_json, 1, "{\"instances\": [{\"cat\": {\"a\": 1}}]}", "instances[0].cat: not a string or a number");
  refused(columns_json, 1, "{\"instances\": [{\"cat\": 9}]}", "instances[0]");
  refused(columns_json, 1, "{\"instances\": [[1]]}", "this model reads an object of columns");
  tmpdir_remove();
}

Test(serve, parsed_requests_join_into_one_batch_in_order) {
  tfx_dataset *a, *b, *s1, *s2, *joined;
  tfx_err err = {0};
  cr_assert_eq(parse(dense_json, 4, "{\"instances\": [[1, 2, 3, 4]]}", &a, &err), TFX_OK);
  cr_assert_eq(parse(dense_json, 4, "{\"instances\": [[5, 6, 7, 8], [9, 9, 9, 9]]}", &b, &err), TFX_OK);
  tfx_dataset *parts[] = {a, b};
  cr_assert_eq(tfx_serve_join(parts, 2, &joined, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(joined->n, 3);
  cr_assert_arr_eq(joined->x, a->x, sizeof(float) * 4);
  cr_assert_arr_eq(joined->x + 4, b->x, sizeof(float) * 8);
  tfx_dataset_destroy(joined);
  cr_assert_eq(parse(sparse_json, 100, "{\"instances\": [\"1:1 3:1\"]}", &s1, &err), TFX_OK);
  cr_assert_eq(parse(sparse_json, 100, "{\"instances\": [\"5:1\", \"2:1 4:1 9:1\"]}", &s2, &err), TFX_OK);
  tfx_dataset *sparts[] = {s1, s2};
  cr_assert_eq(tfx_serve_join(sparts, 2, &joined, &err), TFX_OK, "%s", err.msg);
  int64_t off[] = {0, 2, 3, 6}, ids[] = {0, 2, 4, 1, 3, 8};
  cr_assert_arr_eq(joined->fields[0].off, off, sizeof off);
  cr_assert_arr_eq(joined->fields[0].ids, ids, sizeof ids);
  tfx_dataset_destroy(joined);
  tfx_dataset *mixed[] = {a, s1};
  cr_assert_eq(tfx_serve_join(mixed, 2, &joined, &err), TFX_EINVAL);
  tfx_dataset_destroy(a);
  tfx_dataset_destroy(b);
  tfx_dataset_destroy(s1);
  tfx_dataset_destroy(s2);
}

Test(serve, top_k_is_read_checked_and_refused_where_not_taken) {
  tfx_dataset *d;
  tfx_err err = {0};
  cr_assert_eq(parse(dense_json, 4, "{\"instances\": [[1, 2, 3, 4]], \"top_k\": 7}", &d, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(top_k, 7);
  cr_assert_eq(d->n, 1);
  tfx_dataset_destroy(d);
  cr_assert_eq(parse(dense_json, 4, "{\"instances\": [[1, 2, 3, 4]]}", &d, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(top_k, 0, "no top_k: every probability");
  tfx_dataset_destroy(d);
  refused(dense_json, 4, "{\"instances\": [[1, 2, 3, 4]], \"top_k\": 0}", "\"top_k\" is 0: want an integer in 1..1000");
  refused(dense_json, 4, "{\"instances\": [[1, 2, 3, 4]], \"top_k\": 1001}", "\"top_k\" is 1001");
  refused(dense_json, 4, "{\"instances\": [[1, 2, 3, 4]], \"top_k\": 2.5}", "\"top_k\" is 2.5");
  refused(dense_json, 4, "{\"instances\": [[1, 2, 3, 4]], \"top_k\": \"3\"}", "\"top_k\" is \"3\"");
  cr_assert_eq(top_k, -1, "a refused body writes no top_k");
  tfx_config cfg;
  config(&cfg, dense_json);
  const char *body = "{\"instances\": [[1, 2, 3, 4]], \"top_k\": 3}";
  d = NULL;
  cr_assert_eq(tfx_serve_parse(&cfg, 4, body, strlen(body), &d, NULL, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "\"top_k\" is not taken here"), "%s", err.msg);
  cr_assert_null(d);
}
