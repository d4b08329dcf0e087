/* Dataset readers: CSV, LibSVM, TFRecord framing and CRC32C, tf.train.Example decoding and loading. Files are
 * written by the tests into a fresh temporary directory; the real TFRecord files in testdata/realworld/ (written
 * by TensorFlow) are checked against their expected.json, read with json-c. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/labelset.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/example.h"
#include "data/libsvm.h"
#include "data/tfrecord.h"

#define REALWORLD TFX_TESTDATA "/realworld"

/* ---------------------------------------------------------------------------------------------------------- */
/* Temporary files                                                                                            */

static char tmp_dir[64];

static void make_tmp(void) {
  strcpy(tmp_dir, "/tmp/tfx-readers-XXXXXX");
  cr_assert_not_null(mkdtemp(tmp_dir));
}

static int remove_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(p);
}

static void remove_tmp(void) {
  nftw(tmp_dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* A path inside the test's directory, in a static buffer of two slots (enough for one call's arguments). */
static const char *tmp(const char *name) {
  static char buf[2][256];
  static int slot;
  slot ^= 1;
  snprintf(buf[slot], sizeof buf[slot], "%s/%s", tmp_dir, name);
  return buf[slot];
}

static void write_bytes(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "create %s", path);
  cr_assert_eq(fwrite(data, 1, len, f), len);
  cr_assert_eq(fclose(f), 0);
}

static void write_text(const char *path, const char *text) {
  write_bytes(path, text, strlen(text));
}

static long file_size(const char *path) {
  struct stat st;
  cr_assert_eq(stat(path, &st), 0, "stat %s", path);
  return (long)st.st_size;
}

/* Overwrites one byte of a file with its bitwise complement. */
static void flip_byte(const char *path, long off) {
  FILE *f = fopen(path, "r+b");
  cr_assert_not_null(f);
  cr_assert_eq(fseek(f, off, SEEK_SET), 0);
  int c = fgetc(f);
  cr_assert_neq(c, EOF);
  cr_assert_eq(fseek(f, off, SEEK_SET), 0);
  fputc(~c & 0xff, f);
  cr_assert_eq(fclose(f), 0);
}

static void assert_msg(const tfx_err *e, const char *fragment) {
  cr_assert_not_null(strstr(e->msg, fragment), "message '%s' lacks '%s'", e->msg, fragment);
}

static void assert_fails(int rc, const tfx_err *e, int code, const char *frag1, const char *frag2) {
  cr_assert_eq(rc, code, "rc %s, want %s (%s)", tfx_errname(rc), tfx_errname(code), e->msg);
  cr_assert_eq(e->code, code);
  if (frag1) {
    assert_msg(e, frag1);
  }
  if (frag2) {
    assert_msg(e, frag2);
  }
}

/* ---------------------------------------------------------------------------------------------------------- */
/* CSV                                                                                                        */

TestSuite(csv, .init = make_tmp, .fini = remove_tmp);

static tfx_dataset *csv_ok(const char *text, const char *label, int header) {
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  write_text(tmp("d.csv"), text);
  int rc = tfx_csv_load(tmp("d.csv"), label, header, &d, &e);
  cr_assert_eq(rc, TFX_OK, "%s", e.msg);
  return d;
}

static int csv_fail(const char *text, const char *label, int header, tfx_err *e) {
  tfx_dataset *d = NULL;
  write_text(tmp("d.csv"), text);
  int rc = tfx_csv_load(tmp("d.csv"), label, header, &d, e);
  cr_assert_null(d, "out-parameter written on failure");
  return rc;
}

Test(csv, header_label_by_name) {
  tfx_dataset *d = csv_ok("a,label,b\n1,0,2\n3.5,1,-4e-1\n-0,7,1e3\n", "label", 1);
  cr_assert_eq(d->n, 3);
  cr_assert_eq(d->dim, 2);
  const float x[] = {1, 2, 3.5f, -0.4f, 0, 1000};
  const int32_t y[] = {0, 1, 7};
  for (int i = 0; i < 6; i++) {
    cr_assert_float_eq(d->x[i], x[i], 0, "x[%d] = %g", i, d->x[i]);
  }
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(d->y[i], y[i]);
  }
  tfx_dataset_destroy(d);
}

Test(csv, no_header_label_by_index_and_negative_index) {
  tfx_dataset *d = csv_ok("5,1.5,2.5\n6,3.5,4.5\n", "0", 0);
  cr_assert_eq(d->n, 2);
  cr_assert_eq(d->dim, 2);
  cr_assert_eq(d->y[0], 5);
  cr_assert_eq(d->y[1], 6);
  cr_assert_float_eq(d->x[3], 4.5f, 0);
  tfx_dataset_destroy(d);
  d = csv_ok("1.5,2.5,5\n3.5,4.5,6.0\n", "-1", 0);
  cr_assert_eq(d->y[1], 6);
  cr_assert_float_eq(d->x[0], 1.5f, 0);
  tfx_dataset_destroy(d);
}

Test(csv, quotes_blanks_crlf_bom_and_blank_lines) {
  const char *text =
      "\xEF\xBB\xBF\"x 1\", \"y\" ,cls\r\n"
      "\r\n"
      " 1 ,\"2\", 3\r\n"
      "  \t \n"
      "\"4.25\" , 5,\"0\"\n";
  tfx_dataset *d = csv_ok(text, "cls", 1);
  cr_assert_eq(d->n, 2);
  cr_assert_eq(d->dim, 2);
  cr_assert_float_eq(d->x[0], 1, 0);
  cr_assert_float_eq(d->x[1], 2, 0);
  cr_assert_float_eq(d->x[2], 4.25f, 0);
  cr_assert_eq(d->y[0], 3);
  cr_assert_eq(d->y[1], 0);
  tfx_dataset_destroy(d);
  d = csv_ok("\"a \"\"q\"\"\",b\n1,2\n", "a \"q\"", 1); /* "" inside quotes is a quote */
  cr_assert_eq(d->y[0], 1);
  tfx_dataset_destroy(d);
  d = csv_ok("\"x,y\",b\n1,2\n", "x,y", 1); /* a comma inside quotes */
  cr_assert_eq(d->dim, 1);
  cr_assert_eq(d->y[0], 1);
  tfx_dataset_destroy(d);
}

Test(csv, dataset_feeds_the_batcher) {
  tfx_dataset *d = csv_ok("f,l\n0,0\n1,1\n2,0\n3,1\n", "l", 1);
  tfx_batcher *b = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_batcher_create(d, 0, 1, 7, 0, &b, &e), TFX_OK, "%s", e.msg);
  float x[4];
  int32_t y[4];
  tfx_batcher_next(b, 4, x, y);
  for (int i = 0; i < 4; i++) {
    cr_assert_float_eq(x[i], (float)i, 0);
    cr_assert_eq(y[i], i % 2);
  }
  tfx_batcher_destroy(b);
  tfx_dataset_destroy(d);
}

Test(csv, bad_cell_names_file_line_and_column) {
  tfx_err e = {0};
  int rc = csv_fail("a,b,label\n1,2,0\n\n3,x7,1\n", "label", 1, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, tmp("d.csv"), "line 4, column 2 ('b'): 'x7' is not a finite number");
  rc = csv_fail("1,2,0\n1,,0\n", "2", 0, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "d.csv: line 2, column 2: '' is not a finite number", NULL);
  rc = csv_fail("1,2,0\n1,1e99,0\n", "2", 0, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "line 2, column 2: '1e99'", NULL);
  rc = csv_fail("1,nan,0\n", "2", 0, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "line 1, column 2: 'nan'", NULL);
}

Test(csv, bad_label_cell) {
  tfx_err e = {0};
  int rc = csv_fail("a,label\n1,0\n2,0.5\n", "label", 1, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "d.csv: line 3, column 2 ('label'): '0.5' is not an int32 label", NULL);
  rc = csv_fail("a,label\n1,3000000000\n", "label", 1, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "line 2, column 2 ('label')", NULL);
}

/* A multi-label example's classes (model.multi_label): "0|2" and an empty cell are sets (common/labelset.h). */
Test(csv, label_sets) {
  tfx_dataset *d = csv_ok("a,label\n1,0|2\n2,\n3,1\n", "label", 1);
  cr_assert_eq(d->n, 3);
  cr_assert_eq(tfx_label_bits(d->y[0]), 5u);
  cr_assert_eq(d->y[1], TFX_LABEL_SET, "an empty cell: no class");
  cr_assert_eq(d->y[2], 1);
  tfx_dataset_destroy(d);
  tfx_err e = {0};
  int rc = csv_fail("a,label\n1,0|x\n", "label", 1, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "'0|x' is not an int32 label or a set of classes (1|4)", NULL);
}

Test(csv, ragged_rows_and_quotes) {
  tfx_err e = {0};
  int rc = csv_fail("a,b,c\n1,2,3\n4,5\n", "c", 1, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "d.csv: line 3: 2 columns, expected 3", NULL);
  rc = csv_fail("1,2\n\"3,4\n", "0", 0, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "line 2, column 1: unterminated quote", NULL);
  rc = csv_fail("1,2\n\"3\"x,4\n", "0", 0, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "line 2, column 1: text after a closing quote", NULL);
}

/* A newline inside a quoted cell is part of the cell (RFC 4180): the row goes on at the next line, and rows after
 * it are named by their own first line; counting and finding rows go by the same rule (#30, item 18). */
Test(csv, quoted_newline_continues_the_row) {
  const char text[] = "a,note,label\n1,\"two\nlines, \"\"quoted\"\"\n\nend\",0\n2,x,1\n3,\"y\"\n";
  tfx_err e = {0};
  tfx_csv_rows *r = NULL;
  write_text(tmp("d.csv"), text);
  cr_assert_eq(tfx_csv_rows_open(tmp("d.csv"), &r, &e), TFX_OK, "%s", e.msg);
  char **cells = NULL;
  size_t line = 0;
  cr_assert_eq(tfx_csv_rows_next(r, &cells, &line, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(line, 2);
  cr_assert_str_eq(cells[1], "two\nlines, \"quoted\"\n\nend");
  cr_assert_eq(tfx_csv_rows_next(r, &cells, &line, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(line, 6);
  cr_assert_str_eq(cells[1], "x");
  assert_fails(tfx_csv_rows_next(r, &cells, &line, &e), &e, TFX_ECORRUPT, "d.csv: line 7: 2 cells, the header has 3", NULL);
  tfx_csv_rows_close(r);
  int64_t n = 0;
  cr_assert_eq(tfx_csv_count(tmp("d.csv"), 1, &n, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(n, 3);
  size_t at = 0;
  cr_assert_eq(tfx_csv_line_of(tmp("d.csv"), 1, 2, &at, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(at, 7);
}

Test(csv, label_column_errors) {
  tfx_err e = {0};
  int rc = csv_fail("a,b\n1,2\n", "label", 1, &e);
  assert_fails(rc, &e, TFX_ECONFIG, "label column 'label': no such name in the header", tmp("d.csv"));
  rc = csv_fail("1,2\n", "label", 0, &e);
  assert_fails(rc, &e, TFX_ECONFIG, "not an index, and the file has no header", NULL);
  rc = csv_fail("1,2\n", "2", 0, &e);
  assert_fails(rc, &e, TFX_ECONFIG, "label column 2 is out of range: line 1 has 2 columns", NULL);
  rc = csv_fail("1,2\n", "-3", 0, &e);
  assert_fails(rc, &e, TFX_ECONFIG, "label column -3 is out of range", NULL);
  rc = csv_fail("label\n1\n", "label", 1, &e);
  assert_fails(rc, &e, TFX_ECONFIG, "want a label and at least one feature", NULL);
}

/* A header naming two columns alike is refused naming both (the label or a feature named by it was silently the
 * first of them: #30, item 18), for the plain reader and the feature-column rows reader alike. */
Test(csv, duplicate_header_names) {
  tfx_err e = {0};
  int rc = csv_fail("\xEF\xBB\xBFw, label ,h,\"label\"\n1,0,2,1\n", "label", 1, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "d.csv: line 1: column 4 ('label') has the name of column 2", NULL);
  tfx_csv_rows *r = NULL;
  write_text(tmp("d.csv"), "a,b,c,b,a\n1,2,3,4,5\n");
  assert_fails(tfx_csv_rows_open(tmp("d.csv"), &r, &e), &e, TFX_ECORRUPT, "column 4 ('b') has the name of column 2",
               NULL);
  cr_assert_null(r);
  tfx_dataset_destroy(csv_ok("a,b,label\n1,2,0\n", "label", 1));
}

Test(csv, empty_inputs_and_bad_arguments) {
  tfx_err e = {0};
  int rc = csv_fail("", "0", 0, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "d.csv: empty file", NULL);
  rc = csv_fail("a,b\n\n", "a", 1, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "d.csv: no data rows", NULL);
  tfx_dataset *d = NULL;
  rc = tfx_csv_load(tmp("missing.csv"), "0", 0, &d, &e);
  assert_fails(rc, &e, TFX_ENOTFOUND, "missing.csv", NULL);
  cr_assert_eq(tfx_csv_load(tmp("d.csv"), NULL, 0, &d, NULL), TFX_EINVAL);
}

/* ---------------------------------------------------------------------------------------------------------- */
/* LibSVM                                                                                                     */

TestSuite(libsvm, .init = make_tmp, .fini = remove_tmp);

static int svm_load(const char *text, size_t dim, tfx_dataset **d, tfx_err *e) {
  write_text(tmp("d.svm"), text);
  *d = NULL;
  return tfx_libsvm_load(tmp("d.svm"), dim, d, e);
}

Test(libsvm, inferred_dim_comments_qid_and_blank_lines) {
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  int rc = svm_load("1 1:0.5 3:2\n2 2:1 # a comment\n\n# only a comment\n+1 qid:3 4:-1.5\r\n0\n", 0, &d, &e);
  cr_assert_eq(rc, TFX_OK, "%s", e.msg);
  cr_assert_eq(d->n, 4);
  cr_assert_eq(d->dim, 4);
  const float x[] = {0.5f, 0, 2, 0, 0, 1, 0, 0, 0, 0, 0, -1.5f, 0, 0, 0, 0};
  const int32_t y[] = {1, 2, 1, 0};
  for (int i = 0; i < 16; i++) {
    cr_assert_float_eq(d->x[i], x[i], 0, "x[%d] = %g", i, d->x[i]);
  }
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(d->y[i], y[i]);
  }
  tfx_dataset_destroy(d);
}

Test(libsvm, label_sets) {
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  cr_assert_eq(svm_load("1,3 1:1\n2 2:1\n", 0, &d, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(tfx_label_bits(d->y[0]), (1u << 1) | (1u << 3));
  cr_assert_eq(d->y[1], 2);
  tfx_dataset_destroy(d);
}

/* Integer values take a short path past strtof: every value must read as strtof reads it, bit for bit. */
Test(libsvm, values_read_as_strtof_reads_them) {
  static const char *vals[] = {"1", "0", "7", "0007", "9999999", "16777217", "123456789", "1.5", "-2", "1e3", "3."};
  enum { N = sizeof vals / sizeof vals[0] };
  char text[512] = "0";
  for (int i = 0; i < N; i++) {
    snprintf(text + strlen(text), sizeof text - strlen(text), " %d:%s", i + 1, vals[i]);
  }
  strcat(text, "\n");
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  cr_assert_eq(svm_load(text, 0, &d, &e), TFX_OK, "%s", e.msg);
  for (int i = 0; i < N; i++) {
    float want = strtof(vals[i], NULL);
    cr_assert(memcmp(&d->x[i], &want, sizeof want) == 0, "%s read as %.9g, strtof says %.9g", vals[i], d->x[i], want);
  }
  tfx_dataset_destroy(d);
  cr_assert_neq(svm_load("0 1:12x\n", 0, &d, &e), TFX_OK, "a value with a tail is still refused");
  tfx_dataset_destroy(d);
}

Test(libsvm, given_dim_pads_and_rejects_larger_indices) {
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  cr_assert_eq(svm_load("2 1:1 2:2\n3 2:4\n", 5, &d, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(d->dim, 5);
  cr_assert_float_eq(d->x[5 + 1], 4, 0);
  cr_assert_float_eq(d->x[5 + 4], 0, 0);
  tfx_dataset_destroy(d);
  int rc = svm_load("2 1:1 2:2\n3 2:4 6:1\n", 5, &d, &e);
  assert_fails(rc, &e, TFX_ESHAPE, "d.svm: line 2, column 7: index 6 exceeds dim 5", NULL);
  cr_assert_null(d);
}

Test(libsvm, bad_tokens_name_line_and_column) {
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  int rc = svm_load("1 1:1\n1 3:0.5 x:1\n", 0, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, tmp("d.svm"), "line 2, column 9: 'x:1': want index:value with a 1-based index");
  rc = svm_load("1 0:1\n", 0, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "line 1, column 3: '0:1'", NULL);
  rc = svm_load("1 3:1 2:1\n", 0, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "line 1, column 7: '2:1': indices must ascend", NULL);
  rc = svm_load("1 3:1 3:1\n", 0, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "indices must ascend", NULL);
  rc = svm_load("1 2:abc\n", 0, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "line 1, column 3: '2:abc': the value is not a finite number", NULL);
  rc = svm_load("1 2:\n", 0, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "the value is not a finite number", NULL);
  rc = svm_load("1 1:1\n-1 1:1\n", 0, &d, &e); /* a negative int32 is a label set: -1 all 31 classes */
  assert_fails(rc, &e, TFX_ECORRUPT, "line 2, column 1: '-1': a negative label", NULL);
  rc = svm_load("1 1:1\nyes 1:1\n", 0, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "line 2, column 1: 'yes': the label is not an int32", NULL);
  rc = svm_load("1 99999999999:1\n", 0, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "index too large", NULL);
  rc = svm_load("1 99999999999999999999999999:1\n", 0, &d, &e); /* past 64 bits too */
  assert_fails(rc, &e, TFX_ECORRUPT, "index too large", NULL);
  rc = svm_load("1 :1\n", 0, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "want index:value", NULL);
  cr_assert_null(d);
}

/* A bad token is shown by a short escaped prefix, never whole: the data may be a file others can read only through
 * the run's logs. */
Test(libsvm, a_bad_token_is_shown_by_a_short_escaped_prefix) {
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  int rc = svm_load("1 1:1\nsecret\x1b[31mAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA 1:1\n", 0, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "line 2, column 1: 'secret\\x1b[31mAAAAAAAAAAAAA...': the label", NULL);
  cr_assert_null(d);
}

/* A line longer than TFX_LIBSVM_MAX_LINE is refused by its number, never held whole (a 2 GB file without a newline
 * took 1.7 GB a worker). */
Test(libsvm, a_line_past_the_bound_is_refused) {
  FILE *f = fopen(tmp("long.svm"), "wb");
  cr_assert_not_null(f);
  fputs("1 1:1\n2 ", f);
  static char chunk[1 << 16];
  memset(chunk, '7', sizeof chunk);
  for (size_t at = 0; at <= TFX_LIBSVM_MAX_LINE; at += sizeof chunk) {
    cr_assert_eq(fwrite(chunk, 1, sizeof chunk, f), sizeof chunk);
  }
  fclose(f);
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  int rc = tfx_libsvm_load(tmp("long.svm"), 0, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "long.svm: line 2: longer than 67108864 bytes", NULL);
  cr_assert_null(d);
  unlink(tmp("long.svm"));
}

/* A NUL byte inside a line is refused naming the line and column: the parser stopped at it and dropped the rest of
 * the line unread (#30, item 18). */
Test(libsvm, nul_byte_names_line_and_column) {
  static const char text[] = "1 1:1\n2 1:1 2:5\0 3:7\n";
  FILE *f = fopen(tmp("nul.svm"), "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(text, 1, sizeof text - 1, f), sizeof text - 1);
  fclose(f);
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  int rc = tfx_libsvm_load(tmp("nul.svm"), 0, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "nul.svm: line 2, column 10: a NUL byte", NULL);
  cr_assert_null(d);
}

Test(libsvm, empty_and_featureless_files) {
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  int rc = svm_load("\n# nothing\n", 0, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "d.svm: no examples", NULL);
  rc = svm_load("1\n0\n", 0, &d, &e);
  assert_fails(rc, &e, TFX_ECONFIG, "no feature index in any line and no dim given", NULL);
  cr_assert_eq(svm_load("1\n0\n", 3, &d, &e), TFX_OK, "%s", e.msg); /* all-zero rows are fine with a dim */
  cr_assert_eq(d->n, 2);
  tfx_dataset_destroy(d);
  rc = tfx_libsvm_load(tmp("nope.svm"), 0, &d, &e);
  assert_fails(rc, &e, TFX_ENOTFOUND, "nope.svm", NULL);
}

/* ---------------------------------------------------------------------------------------------------------- */
/* TFRecord framing and CRC32C                                                                                */

TestSuite(tfrecord, .init = make_tmp, .fini = remove_tmp);

Test(tfrecord, crc32c_test_vectors) {
  uint8_t buf[32];
  cr_assert_eq(tfx_crc32c(0, "123456789", 9), 0xE3069283u);
  memset(buf, 0, sizeof buf); /* RFC 3720, B.4 */
  cr_assert_eq(tfx_crc32c(0, buf, 32), 0x8A9136AAu);
  memset(buf, 0xff, sizeof buf);
  cr_assert_eq(tfx_crc32c(0, buf, 32), 0x62A8AB43u);
  for (int i = 0; i < 32; i++) {
    buf[i] = (uint8_t)i;
  }
  cr_assert_eq(tfx_crc32c(0, buf, 32), 0x46DD794Eu);
  for (int i = 0; i < 32; i++) {
    buf[i] = (uint8_t)(31 - i);
  }
  cr_assert_eq(tfx_crc32c(0, buf, 32), 0x113FDB5Cu);
  cr_assert_eq(tfx_crc32c(tfx_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u); /* extends */
  cr_assert_eq(tfx_crc32c(0, NULL, 0), 0);
}

Test(tfrecord, crc32c_mask) {
  uint32_t crc = tfx_crc32c(0, "foo", 3);
  cr_assert_neq(tfx_crc32c_mask(crc), crc);
  cr_assert_neq(tfx_crc32c_mask(tfx_crc32c_mask(crc)), crc);
  cr_assert_eq(tfx_crc32c_unmask(tfx_crc32c_mask(crc)), crc);
  cr_assert_eq(tfx_crc32c_unmask(tfx_crc32c_mask(tfx_crc32c_mask(crc))), tfx_crc32c_mask(crc));
  cr_assert_eq(tfx_crc32c_mask(0), 0xa282ead8u);
  cr_assert_eq(tfx_crc32c_mask(1), (1u << 17) + 0xa282ead8u);
}

/* Writes records of the given sizes, record i filled with bytes (i * 31 + j) & 0xff; returns the file's path. */
static const char *write_records(const char *name, const size_t *sizes, int n) {
  tfx_tfrecord_writer *w = NULL;
  tfx_err e = {0};
  const char *path = tmp(name);
  cr_assert_eq(tfx_tfrecord_writer_open(path, &w, &e), TFX_OK, "%s", e.msg);
  for (int i = 0; i < n; i++) {
    uint8_t *buf = malloc(sizes[i] + 1);
    for (size_t j = 0; j < sizes[i]; j++) {
      buf[j] = (uint8_t)(i * 31 + j);
    }
    cr_assert_eq(tfx_tfrecord_writer_write(w, buf, sizes[i], &e), TFX_OK, "%s", e.msg);
    free(buf);
  }
  cr_assert_eq(tfx_tfrecord_writer_close(w, &e), TFX_OK, "%s", e.msg);
  return path;
}

Test(tfrecord, writer_and_reader_round_trip) {
  const size_t sizes[] = {5, 0, 1, 5000, 100000, 3};
  const char *path = write_records("r.tfrecord", sizes, 6);
  long expect_size = 0;
  for (int i = 0; i < 6; i++) {
    expect_size += 16 + (long)sizes[i];
  }
  cr_assert_eq(file_size(path), expect_size);
  tfx_tfrecord_reader *r = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_tfrecord_reader_open(path, &r, &e), TFX_OK, "%s", e.msg);
  cr_assert_str_eq(tfx_tfrecord_reader_path(r), path);
  uint64_t off = 0;
  for (int i = 0; i < 6; i++) {
    const uint8_t *data = NULL;
    size_t len = 99;
    cr_assert_eq(tfx_tfrecord_reader_offset(r), off);
    cr_assert_eq(tfx_tfrecord_reader_next(r, &data, &len, &e), TFX_OK, "%s", e.msg);
    cr_assert_not_null(data, "record %d", i);
    cr_assert_eq(len, sizes[i]);
    for (size_t j = 0; j < len; j++) {
      cr_assert_eq(data[j], (uint8_t)(i * 31 + j));
    }
    off += 16 + sizes[i];
  }
  for (int again = 0; again < 2; again++) { /* a clean end stays the end */
    const uint8_t *data = (const uint8_t *)"x";
    size_t len = 99;
    cr_assert_eq(tfx_tfrecord_reader_next(r, &data, &len, &e), TFX_OK, "%s", e.msg);
    cr_assert_null(data);
    cr_assert_eq(len, 0);
  }
  cr_assert_eq(tfx_tfrecord_reader_count(r), 6);
  cr_assert_eq(tfx_tfrecord_reader_offset(r), (uint64_t)expect_size);
  tfx_tfrecord_reader_close(r);
  tfx_tfrecord_reader_close(NULL);
  cr_assert_eq(tfx_tfrecord_writer_close(NULL, NULL), TFX_OK);
}

Test(tfrecord, framing_matches_the_format) {
  const size_t sizes[] = {3};
  const char *path = write_records("f.tfrecord", sizes, 1);
  uint8_t raw[19];
  FILE *f = fopen(path, "rb");
  cr_assert_eq(fread(raw, 1, sizeof raw, f), sizeof raw);
  fclose(f);
  const uint8_t len_le[8] = {3, 0, 0, 0, 0, 0, 0, 0};
  cr_assert_eq(memcmp(raw, len_le, 8), 0);
  uint32_t lcrc = raw[8] | raw[9] << 8 | raw[10] << 16 | (uint32_t)raw[11] << 24;
  uint32_t dcrc = raw[15] | raw[16] << 8 | raw[17] << 16 | (uint32_t)raw[18] << 24;
  cr_assert_eq(lcrc, tfx_crc32c_mask(tfx_crc32c(0, len_le, 8)));
  cr_assert_eq(dcrc, tfx_crc32c_mask(tfx_crc32c(0, raw + 12, 3)));
}

/* Reads records until one fails; returns that code (TFX_OK if none did) and how many were read first. */
static int read_until_error(const char *path, int *good, tfx_err *e) {
  tfx_tfrecord_reader *r = NULL;
  int rc = tfx_tfrecord_reader_open(path, &r, e);
  cr_assert_eq(rc, TFX_OK, "%s", e->msg);
  const uint8_t *data = NULL;
  size_t len = 0;
  *good = 0;
  while (!(rc = tfx_tfrecord_reader_next(r, &data, &len, e)) && data) {
    (*good)++;
  }
  if (rc) { /* the reader stays failed */
    tfx_err again = {0};
    cr_assert_eq(tfx_tfrecord_reader_next(r, &data, &len, &again), TFX_ESTATE);
  }
  tfx_tfrecord_reader_close(r);
  return rc;
}

Test(tfrecord, bad_data_crc) {
  const size_t sizes[] = {10, 20, 30};
  const char *path = write_records("c.tfrecord", sizes, 3);
  flip_byte(path, 26 + 12 + 7); /* record 1 starts at 26; a byte of its data */
  tfx_err e = {0};
  int good = 0;
  int rc = read_until_error(path, &good, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, path, "record 1 at offset 26: data crc mismatch");
  cr_assert_eq(good, 1);
}

Test(tfrecord, bad_stored_data_crc) {
  const size_t sizes[] = {10, 20};
  const char *path = write_records("c.tfrecord", sizes, 2);
  flip_byte(path, 26 + 12 + 20 + 1); /* record 1's footer */
  tfx_err e = {0};
  int good = 0;
  assert_fails(read_until_error(path, &good, &e), &e, TFX_ECORRUPT, "record 1 at offset 26: data crc mismatch", NULL);
}

Test(tfrecord, bad_length_crc) {
  const size_t sizes[] = {10, 20};
  const char *path = write_records("l.tfrecord", sizes, 2);
  flip_byte(path, 26 + 2); /* record 1's length: a huge length must be caught by its CRC, not allocated */
  tfx_err e = {0};
  int good = 0;
  int rc = read_until_error(path, &good, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, path, "record 1 at offset 26: length crc mismatch");
  cr_assert_eq(good, 1);
  flip_byte(path, 26 + 2);
  flip_byte(path, 9); /* record 0's length CRC itself */
  rc = read_until_error(path, &good, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "record 0 at offset 0: length crc mismatch", NULL);
}

Test(tfrecord, truncated_record_and_header) {
  const size_t sizes[] = {10, 200};
  const char *path = write_records("t.tfrecord", sizes, 2);
  tfx_err e = {0};
  int good = 0;
  cr_assert_eq(truncate(path, 26 + 12 + 200 + 2), 0); /* all but the last 2 bytes of the footer */
  int rc = read_until_error(path, &good, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, path, "record 1 at offset 26: truncated record (length 200, 202 bytes left)");
  cr_assert_eq(good, 1);
  cr_assert_eq(truncate(path, 26 + 16 + 100), 0);
  rc = read_until_error(path, &good, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "record 1 at offset 26: truncated record (length 200, 104 bytes left)", NULL);
  cr_assert_eq(truncate(path, 26 + 5), 0);
  rc = read_until_error(path, &good, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "record 1 at offset 26: truncated header (5 of 12 bytes)", NULL);
  cr_assert_eq(good, 1);
}

Test(tfrecord, truncated_record_from_a_pipe) {
  /* Without a file size the length is only known to be wrong when the data runs out. */
  const size_t sizes[] = {10, 200};
  const char *path = write_records("p.tfrecord", sizes, 2);
  cr_assert_eq(truncate(path, 26 + 16 + 100), 0);
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  uint8_t buf[142];
  FILE *f = fopen(path, "rb");
  cr_assert_eq(fread(buf, 1, sizeof buf, f), sizeof buf);
  fclose(f);
  cr_assert_eq(write(fds[1], buf, sizeof buf), (ssize_t)sizeof buf);
  close(fds[1]);
  char dev[64];
  snprintf(dev, sizeof dev, "/dev/fd/%d", fds[0]);
  tfx_err e = {0};
  int good = 0;
  int rc = read_until_error(dev, &good, &e);
  close(fds[0]);
  assert_fails(rc, &e, TFX_ECORRUPT, "record 1 at offset 26: truncated record (104 of 204 bytes after the header)",
               NULL);
  cr_assert_eq(good, 1);
}

Test(tfrecord, open_errors) {
  tfx_tfrecord_reader *r = NULL;
  tfx_tfrecord_writer *w = NULL;
  tfx_err e = {0};
  assert_fails(tfx_tfrecord_reader_open(tmp("none.tfrecord"), &r, &e), &e, TFX_ENOTFOUND, "none.tfrecord", NULL);
  cr_assert_null(r);
  assert_fails(tfx_tfrecord_writer_open(tmp("no/such/dir.tfrecord"), &w, &e), &e, TFX_ENOTFOUND, "dir.tfrecord", NULL);
  cr_assert_null(w);
  assert_fails(tfx_tfrecord_reader_open(NULL, &r, &e), &e, TFX_EINVAL, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------------------------- */
/* tf.train.Example: building with protobuf-c, decoding and loading                                           */

TestSuite(example, .init = make_tmp, .fini = remove_tmp);

/* One feature to pack: a float, int64 or bytes list of n values. */
typedef struct spec {
  const char *key;
  tfx_feature_kind kind;
  const float *f;
  const int64_t *i;
  const char *const *b;
  size_t n;
} spec;

#define MAX_SPECS 8

/* Packs an Example of the given features with tfx_example_pack; caller frees the result. */
static uint8_t *pack_example(const spec *s, size_t ns, size_t *len) {
  tfx_feature f[MAX_SPECS];
  const uint8_t *bytes[MAX_SPECS][8];
  size_t lens[MAX_SPECS][8];
  cr_assert_leq(ns, MAX_SPECS);
  for (size_t k = 0; k < ns; k++) {
    cr_assert_leq(s[k].n, 8);
    for (size_t j = 0; s[k].b && j < s[k].n; j++) {
      bytes[k][j] = (const uint8_t *)s[k].b[j], lens[k][j] = strlen(s[k].b[j]);
    }
    f[k] = (tfx_feature){s[k].key, s[k].kind, s[k].n, s[k].f, s[k].i, bytes[k], lens[k]};
  }
  uint8_t *buf = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_example_pack(f, ns, &buf, len, &e), TFX_OK, "%s", e.msg);
  return buf;
}

static tfx_example *unpack_ok(const uint8_t *data, size_t len) {
  tfx_example *ex = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_example_unpack(data, len, &ex, &e), TFX_OK, "%s", e.msg);
  return ex;
}

Test(example, getters_by_name) {
  const float fv[] = {0.5f, -2.25f, 1e-30f};
  const int64_t iv[] = {INT64_MIN, 0, INT64_MAX, 42};
  const char *bv[] = {"cat", "", "dog"};
  const spec s[] = {{"floats", TFX_FEATURE_KIND_FLOAT, fv, NULL, NULL, 3},
                    {"ints", TFX_FEATURE_KIND_INT64, NULL, iv, NULL, 4},
                    {"words", TFX_FEATURE_KIND_BYTES, NULL, NULL, bv, 3},
                    {"empty", TFX_FEATURE_KIND_NONE, NULL, NULL, NULL, 0}};
  size_t len = 0;
  uint8_t *buf = pack_example(s, 4, &len);
  tfx_example *ex = unpack_ok(buf, len);
  free(buf);
  cr_assert_eq(tfx_example_size(ex), 4);
  cr_assert_str_eq(tfx_example_key(ex, 2), "words");
  cr_assert_null(tfx_example_key(ex, 4));
  const float *f = NULL;
  const int64_t *i = NULL;
  size_t n = 0;
  tfx_err e = {0};
  cr_assert_eq(tfx_example_floats(ex, "floats", &f, &n, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(n, 3);
  for (size_t k = 0; k < 3; k++) {
    cr_assert_eq(f[k], fv[k]);
  }
  cr_assert_eq(tfx_example_int64s(ex, "ints", &i, &n, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(n, 4);
  for (size_t k = 0; k < 4; k++) {
    cr_assert_eq(i[k], iv[k]);
  }
  for (size_t k = 0; k < 3; k++) {
    const uint8_t *data = NULL;
    size_t blen = 9;
    cr_assert_eq(tfx_example_bytes(ex, "words", k, &data, &blen, &e), TFX_OK, "%s", e.msg);
    cr_assert_eq(blen, strlen(bv[k]));
    cr_assert_eq(memcmp(data, bv[k], blen), 0);
  }
  tfx_feature_kind kind;
  cr_assert_eq(tfx_example_find(ex, "words", &kind, &n, &e), TFX_OK);
  cr_assert_eq(kind, TFX_FEATURE_KIND_BYTES);
  cr_assert_eq(n, 3);
  cr_assert_eq(tfx_example_find(ex, "empty", &kind, &n, &e), TFX_OK);
  cr_assert_eq(kind, TFX_FEATURE_KIND_NONE);
  cr_assert_eq(tfx_example_floats(ex, "empty", &f, &n, &e), TFX_OK); /* no list set: empty of any kind */
  cr_assert_eq(n, 0);
  cr_assert_null(f);
  tfx_example_destroy(ex);
  tfx_example_destroy(NULL);
}

Test(example, getter_errors) {
  const int64_t iv[] = {1};
  const char *bv[] = {"x"};
  const spec s[] = {{"ints", TFX_FEATURE_KIND_INT64, NULL, iv, NULL, 1},
                    {"words", TFX_FEATURE_KIND_BYTES, NULL, NULL, bv, 1}};
  size_t len = 0;
  uint8_t *buf = pack_example(s, 2, &len);
  tfx_example *ex = unpack_ok(buf, len);
  free(buf);
  const float *f = NULL;
  const uint8_t *data = NULL;
  size_t n = 0;
  tfx_err e = {0};
  assert_fails(tfx_example_floats(ex, "ints", &f, &n, &e), &e, TFX_EINVAL,
               "feature 'ints' is a int64_list, not a float_list", NULL);
  assert_fails(tfx_example_floats(ex, "nope", &f, &n, &e), &e, TFX_ENOTFOUND, "no feature 'nope'", NULL);
  assert_fails(tfx_example_bytes(ex, "words", 1, &data, &n, &e), &e, TFX_EINVAL, "has 1 bytes values, no index 1",
               NULL);
  tfx_feature_kind kind;
  assert_fails(tfx_example_find(ex, "nope", &kind, &n, &e), &e, TFX_ENOTFOUND, "nope", NULL);
  cr_assert_str_eq(tfx_feature_kind_name(TFX_FEATURE_KIND_FLOAT), "float_list");
  tfx_example_destroy(ex);
}

Test(example, unpacked_lists_duplicates_and_empty) {
  /* Example{features{feature{key:"f" value{float_list{value:1.5 value:-2}}}}} with the floats NOT packed
   * (two fixed32 fields), as old writers may emit; then an int64_list, also unpacked. */
  const uint8_t unpacked[] = {0x0a, 0x13, 0x0a, 0x11, 0x0a, 0x01, 'f',  0x12, 0x0c, 0x12, 0x0a,
                              0x0d, 0x00, 0x00, 0xc0, 0x3f, 0x0d, 0x00, 0x00, 0x00, 0xc0};
  tfx_example *ex = unpack_ok(unpacked, sizeof unpacked);
  const float *f = NULL;
  size_t n = 0;
  cr_assert_eq(tfx_example_floats(ex, "f", &f, &n, NULL), TFX_OK);
  cr_assert_eq(n, 2);
  cr_assert_eq(f[0], 1.5f);
  cr_assert_eq(f[1], -2.0f);
  tfx_example_destroy(ex);
  const uint8_t ints[] = {0x0a, 0x0d, 0x0a, 0x0b, 0x0a, 0x01, 'i', 0x12, 0x06, 0x1a, 0x04, 0x08, 0x07, 0x08, 0x7f};
  ex = unpack_ok(ints, sizeof ints);
  const int64_t *iv = NULL;
  cr_assert_eq(tfx_example_int64s(ex, "i", &iv, &n, NULL), TFX_OK);
  cr_assert_eq(n, 2);
  cr_assert_eq(iv[0], 7);
  cr_assert_eq(iv[1], 127);
  tfx_example_destroy(ex);
  const int64_t one[] = {1}, two[] = {2}; /* a key twice: the last one wins, as in protobuf maps */
  const spec s[] = {{"k", TFX_FEATURE_KIND_INT64, NULL, one, NULL, 1},
                    {"k", TFX_FEATURE_KIND_INT64, NULL, two, NULL, 1}};
  size_t len = 0;
  uint8_t *buf = pack_example(s, 2, &len);
  ex = unpack_ok(buf, len);
  free(buf);
  cr_assert_eq(tfx_example_size(ex), 2);
  cr_assert_eq(tfx_example_int64s(ex, "k", &iv, &n, NULL), TFX_OK);
  cr_assert_eq(iv[0], 2);
  tfx_example_destroy(ex);
  ex = unpack_ok((const uint8_t *)"", 0); /* the empty Example */
  cr_assert_eq(tfx_example_size(ex), 0);
  tfx_example_destroy(ex);
}

/* Record r of the round trip: raw bytes with a NUL and 0xff, floats, extreme int64s, an empty feature. */
static size_t round_trip_features(int r, tfx_feature f[4], float fv[3], int64_t iv[2], const uint8_t **bp,
                                  size_t *blen) {
  static const uint8_t raw[5] = {0, 255, 'a', 0, 7};
  fv[0] = (float)r, fv[1] = -(float)r / 4, fv[2] = 1e-30f;
  iv[0] = INT64_MIN + r, iv[1] = INT64_MAX - r;
  *bp = raw, *blen = (size_t)r; /* record 0: one empty bytes value */
  f[0] = (tfx_feature){.key = "pixels", .kind = TFX_FEATURE_KIND_BYTES, .n = 1, .bytes = bp, .bytes_len = blen};
  f[1] = (tfx_feature){.key = "x", .kind = TFX_FEATURE_KIND_FLOAT, .n = 3, .floats = fv};
  f[2] = (tfx_feature){.key = "id", .kind = TFX_FEATURE_KIND_INT64, .n = 2, .int64s = iv};
  f[3] = (tfx_feature){.key = "none", .kind = TFX_FEATURE_KIND_NONE};
  return r == 5 ? 0 : 4; /* the last record is the empty Example */
}

/* Checks that a decoded record holds exactly what round_trip_features gave for record r. */
static void check_round_trip(int r, const tfx_example *ex) {
  tfx_feature f[4];
  float fv[3];
  int64_t iv[2];
  const uint8_t *bp;
  size_t blen, n = 0;
  size_t nf = round_trip_features(r, f, fv, iv, &bp, &blen);
  cr_assert_eq(tfx_example_size(ex), nf, "record %d", r);
  for (size_t k = 0; k < nf; k++) {
    cr_assert_str_eq(tfx_example_key(ex, k), f[k].key, "record %d: key order", r);
  }
  if (!nf) {
    return;
  }
  const uint8_t *data = NULL;
  cr_assert_eq(tfx_example_bytes(ex, "pixels", 0, &data, &n, NULL), TFX_OK);
  cr_assert(n == blen && !memcmp(data, bp, n), "record %d: %zu bytes, want %zu", r, n, blen);
  const float *fo = NULL;
  cr_assert_eq(tfx_example_floats(ex, "x", &fo, &n, NULL), TFX_OK);
  cr_assert(n == 3 && !memcmp(fo, fv, sizeof fv), "record %d: floats differ", r);
  const int64_t *io = NULL;
  cr_assert_eq(tfx_example_int64s(ex, "id", &io, &n, NULL), TFX_OK);
  cr_assert(n == 2 && io[0] == iv[0] && io[1] == iv[1], "record %d: int64s differ", r);
  tfx_feature_kind kind;
  cr_assert_eq(tfx_example_find(ex, "none", &kind, &n, NULL), TFX_OK);
  cr_assert(kind == TFX_FEATURE_KIND_NONE && n == 0);
}

Test(example, pack_round_trips_through_the_tfrecord_writer_and_reader) {
  const char *path = tmp("round.tfrecord");
  tfx_tfrecord_writer *w = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_tfrecord_writer_open(path, &w, &e), TFX_OK, "%s", e.msg);
  for (int r = 0; r < 6; r++) {
    tfx_feature f[4];
    float fv[3];
    int64_t iv[2];
    const uint8_t *bp;
    size_t blen, len = 0;
    uint8_t *buf = NULL;
    cr_assert_eq(tfx_example_pack(f, round_trip_features(r, f, fv, iv, &bp, &blen), &buf, &len, &e), TFX_OK, "%s",
                 e.msg);
    cr_assert_eq(tfx_tfrecord_writer_write(w, buf, len, &e), TFX_OK, "%s", e.msg);
    free(buf);
  }
  cr_assert_eq(tfx_tfrecord_writer_close(w, &e), TFX_OK, "%s", e.msg);
  tfx_tfrecord_reader *rd = NULL;
  cr_assert_eq(tfx_tfrecord_reader_open(path, &rd, &e), TFX_OK, "%s", e.msg);
  const uint8_t *data = NULL;
  size_t len = 0;
  int r = 0;
  while (!tfx_tfrecord_reader_next(rd, &data, &len, &e) && data) {
    tfx_example *ex = unpack_ok(data, len);
    check_round_trip(r++, ex);
    tfx_example_destroy(ex);
  }
  cr_assert_eq(e.code, TFX_OK, "%s", e.msg);
  cr_assert_eq(r, 6, "records read back: %d", r);
  tfx_tfrecord_reader_close(rd);
}

Test(example, pack_errors_name_the_feature) {
  const float fv[1] = {1};
  const size_t lens[1] = {1};
  const uint8_t *values[1] = {(const uint8_t *)"a"};
  uint8_t *buf = (uint8_t *)&buf;
  size_t len = 77;
  tfx_err e = {0};
  tfx_feature f[2] = {{.key = "ok", .kind = TFX_FEATURE_KIND_FLOAT, .n = 1, .floats = fv},
                      {.key = NULL, .kind = TFX_FEATURE_KIND_FLOAT, .n = 1, .floats = fv}};
  assert_fails(tfx_example_pack(f, 2, &buf, &len, &e), &e, TFX_EINVAL, "feature 1 has no key", NULL);
  f[1] = (tfx_feature){.key = "x", .kind = TFX_FEATURE_KIND_FLOAT, .n = 2};
  assert_fails(tfx_example_pack(f, 2, &buf, &len, &e), &e, TFX_EINVAL, "feature 'x': 2 float_list values", NULL);
  f[1] = (tfx_feature){.key = "b", .kind = TFX_FEATURE_KIND_BYTES, .n = 1, .bytes = values};
  assert_fails(tfx_example_pack(f, 2, &buf, &len, &e), &e, TFX_EINVAL, "feature 'b': 1 bytes_list values", NULL);
  f[1] = (tfx_feature){.key = "k", .kind = (tfx_feature_kind)9, .n = 1, .bytes = values, .bytes_len = lens};
  assert_fails(tfx_example_pack(f, 2, &buf, &len, &e), &e, TFX_EINVAL, "feature 'k': unknown kind 9", NULL);
  cr_assert(buf == (uint8_t *)&buf && len == 77, "outputs written on failure");
  cr_assert_eq(tfx_example_pack(f, 0, &buf, &len, &e), TFX_OK, "%s", e.msg);
  tfx_example *ex = unpack_ok(buf, len);
  free(buf);
  cr_assert_eq(len, 2, "no features: an empty Features message, %zu bytes", len);
  cr_assert_eq(tfx_example_size(ex), 0);
  tfx_example_destroy(ex);
}

Test(example, not_an_example) {
  const uint8_t junk[] = {0x0a, 0x20, 0x01, 0x02}; /* field 1 claims 32 bytes, 2 follow */
  tfx_example *ex = NULL;
  tfx_err e = {0};
  assert_fails(tfx_example_unpack(junk, sizeof junk, &ex, &e), &e, TFX_EPROTO,
               "tf.train.Example: unpack failed (4 bytes)", NULL);
  cr_assert_null(ex);
}

/* Writes n Examples with "pixels" (dim floats, or dim u8 bytes when as_bytes) and "label" (int64 i % 3). */
static const char *write_examples(const char *name, int n, size_t dim, int as_bytes) {
  tfx_tfrecord_writer *w = NULL;
  tfx_err e = {0};
  const char *path = tmp(name);
  cr_assert_eq(tfx_tfrecord_writer_open(path, &w, &e), TFX_OK, "%s", e.msg);
  for (int r = 0; r < n; r++) {
    float x[16];
    char raw[17] = {0};
    const char *rawp[] = {raw};
    int64_t y = r % 3;
    for (size_t j = 0; j < dim; j++) {
      x[j] = (float)(r * 10 + (int)j), raw[j] = (char)('a' + r + (int)j);
    }
    spec s[2] = {{"pixels", TFX_FEATURE_KIND_FLOAT, x, NULL, NULL, dim},
                 {"label", TFX_FEATURE_KIND_INT64, NULL, &y, NULL, 1}};
    if (as_bytes) {
      s[0] = (spec){"pixels", TFX_FEATURE_KIND_BYTES, NULL, NULL, rawp, 1};
    }
    size_t len = 0;
    uint8_t *buf = pack_example(s, 2, &len);
    cr_assert_eq(tfx_tfrecord_writer_write(w, buf, len, &e), TFX_OK, "%s", e.msg);
    free(buf);
  }
  cr_assert_eq(tfx_tfrecord_writer_close(w, &e), TFX_OK, "%s", e.msg);
  return path;
}

Test(example, load_float_features) {
  const char *path = write_examples("x.tfrecord", 100, 4, 0);
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_example_load(path, "pixels", "label", 0.5, &d, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(d->n, 100);
  cr_assert_eq(d->dim, 4);
  for (size_t r = 0; r < 100; r++) {
    cr_assert_eq(d->y[r], (int32_t)(r % 3));
    for (size_t j = 0; j < 4; j++) {
      cr_assert_float_eq(d->x[r * 4 + j], (float)(r * 10 + j) * 0.5f, 0);
    }
  }
  tfx_dataset_destroy(d);
}

Test(example, load_bytes_features_as_u8) {
  const char *path = write_examples("b.tfrecord", 3, 5, 1);
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_example_load(path, "pixels", "label", 1.0 / 255, &d, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(d->n, 3);
  cr_assert_eq(d->dim, 5);
  cr_assert_float_eq(d->x[2 * 5 + 4], (float)(('a' + 2 + 4) * (1.0 / 255)), 1e-7);
  tfx_dataset_destroy(d);
}

Test(example, load_errors_name_file_record_and_offset) {
  const char *path = write_examples("x.tfrecord", 3, 4, 0);
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  int rc = tfx_example_load(path, "image", "label", 1, &d, &e);
  assert_fails(rc, &e, TFX_ECONFIG, path, "record 0 at offset 0: no input feature 'image' (it has 'pixels', 'label')");
  rc = tfx_example_load(path, "pixels", "y", 1, &d, &e);
  assert_fails(rc, &e, TFX_ECONFIG, "no label feature 'y'", NULL);
  rc = tfx_example_load(path, "label", "pixels", 1, &d, &e);
  assert_fails(rc, &e, TFX_ESHAPE, "record 0 at offset 0: label feature 'pixels' has 4 values, want 1", NULL);
  cr_assert_null(d);
}

/* Writes one Example per spec pair; offs[i] gets record i's offset. */
static void write_spec_records(const char *path, const spec *const *recs, int n, size_t *offs) {
  tfx_tfrecord_writer *w = NULL;
  tfx_err e = {0};
  size_t off = 0;
  cr_assert_eq(tfx_tfrecord_writer_open(path, &w, &e), TFX_OK, "%s", e.msg);
  for (int r = 0; r < n; r++) {
    size_t len = 0;
    uint8_t *buf = pack_example(recs[r], 2, &len);
    cr_assert_eq(tfx_tfrecord_writer_write(w, buf, len, &e), TFX_OK, "%s", e.msg);
    offs[r] = off, off += 16 + len;
    free(buf);
  }
  cr_assert_eq(tfx_tfrecord_writer_close(w, &e), TFX_OK, "%s", e.msg);
}

Test(example, load_rejects_unusable_labels) {
  const float x[] = {1, 2, 3};
  const char *word[] = {"w"};
  const spec r0[] = {{"x", TFX_FEATURE_KIND_FLOAT, x, NULL, NULL, 3},
                     {"y", TFX_FEATURE_KIND_BYTES, NULL, NULL, word, 1}};
  const spec *all[] = {r0};
  size_t offs[1];
  const char *path = tmp("labels.tfrecord");
  write_spec_records(path, all, 1, offs);
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  int rc = tfx_example_load(path, "x", "x", 1, &d, &e);
  assert_fails(rc, &e, TFX_ESHAPE, "record 0 at offset 0: label feature 'x' has 3 values, want 1", NULL);
  rc = tfx_example_load(path, "x", "y", 1, &d, &e);
  assert_fails(rc, &e, TFX_ECONFIG, "label feature 'y' is a bytes_list, want an int64_list or float_list", NULL);
  cr_assert_null(d);
}

Test(example, load_checks_dims_across_records_and_float_labels) {
  tfx_err e = {0};
  const char *path = tmp("dims.tfrecord");
  const float x[] = {1, 2, 3};
  const float good[] = {2.0f}, bad[] = {1.5f};
  const spec r0[] = {{"x", TFX_FEATURE_KIND_FLOAT, x, NULL, NULL, 3},
                     {"y", TFX_FEATURE_KIND_FLOAT, good, NULL, NULL, 1}};
  const spec r1[] = {{"x", TFX_FEATURE_KIND_FLOAT, x, NULL, NULL, 2},
                     {"y", TFX_FEATURE_KIND_FLOAT, good, NULL, NULL, 1}};
  const spec r2[] = {{"x", TFX_FEATURE_KIND_FLOAT, x, NULL, NULL, 3},
                     {"y", TFX_FEATURE_KIND_FLOAT, bad, NULL, NULL, 1}};
  const spec *all[] = {r0, r2, r1};
  size_t offs[3];
  write_spec_records(path, all, 3, offs);
  tfx_dataset *d = NULL;
  char where[96];
  snprintf(where, sizeof where, "record 1 at offset %zu: label 1.5 is not an int32", offs[1]);
  assert_fails(tfx_example_load(path, "x", "y", 1, &d, &e), &e, TFX_ECORRUPT, path, where);
  cr_assert_eq(truncate(path, (off_t)offs[1]), 0); /* only record 0: float label 2.0 is fine */
  cr_assert_eq(tfx_example_load(path, "x", "y", 1, &d, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(d->y[0], 2);
  tfx_dataset_destroy(d);
  d = NULL;
  const spec *ragged[] = {r0, r1}; /* 3 values, then 2 */
  write_spec_records(path, ragged, 2, offs);
  snprintf(where, sizeof where, "record 1 at offset %zu: feature 'x' has 2 values, the first record had 3", offs[1]);
  assert_fails(tfx_example_load(path, "x", "y", 1, &d, &e), &e, TFX_ESHAPE, where, NULL);
  cr_assert_null(d);
}

Test(example, load_reports_framing_and_payload_errors) {
  const char *path = write_examples("x.tfrecord", 3, 4, 0);
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  flip_byte(path, file_size(path) - 6); /* last record's data */
  int rc = tfx_example_load(path, "pixels", "label", 1, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, path, "record 2 at offset");
  assert_msg(&e, "data crc mismatch");
  const char *junk = tmp("junk.tfrecord");
  tfx_tfrecord_writer *w = NULL;
  cr_assert_eq(tfx_tfrecord_writer_open(junk, &w, &e), TFX_OK);
  cr_assert_eq(tfx_tfrecord_writer_write(w, "\x0a\x20\x01", 3, &e), TFX_OK);
  cr_assert_eq(tfx_tfrecord_writer_close(w, &e), TFX_OK);
  rc = tfx_example_load(junk, "pixels", "label", 1, &d, &e);
  /* A good checksum around bytes that are no Example: bad input (exit 2), not a protocol error (#30, item 15). */
  assert_fails(rc, &e, TFX_ECORRUPT, junk, "record 0 at offset 0: tf.train.Example: unpack failed (3 bytes)");
  cr_assert_eq(tfx_tfrecord_writer_open(junk, &w, &e), TFX_OK);
  cr_assert_eq(tfx_tfrecord_writer_close(w, &e), TFX_OK);
  assert_fails(tfx_example_load(junk, "pixels", "label", 1, &d, &e), &e, TFX_ECORRUPT, "junk.tfrecord: no records",
               NULL);
  assert_fails(tfx_example_load(tmp("none"), "pixels", "label", 1, &d, &e), &e, TFX_ENOTFOUND, "none", NULL);
  cr_assert_null(d);
}

/* ---------------------------------------------------------------------------------------------------------- */
/* Real TFRecord files written by TensorFlow, checked against expected.json                                   */

TestSuite(realworld);

static json_object *jget(json_object *o, const char *key) {
  json_object *v = NULL;
  cr_assert(json_object_object_get_ex(o, key, &v), "expected.json lacks '%s'", key);
  return v;
}

static int64_t jint(json_object *o, const char *key) {
  return json_object_get_int64(jget(o, key));
}

static void hex(const uint8_t *p, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) {
    sprintf(out + 2 * i, "%02x", p[i]);
  }
  out[2 * n] = '\0';
}

/* The frame (SOFn) of a JPEG: returns the marker, or -1 if none is found. */
static int jpeg_sof(const uint8_t *p, size_t n, int *h, int *w, int *comp) {
  if (n < 4 || p[0] != 0xff || p[1] != 0xd8) {
    return -1;
  }
  size_t i = 2;
  while (i + 4 <= n && p[i] == 0xff) {
    int m = p[i + 1];
    if (m == 0xff) {
      i++;
      continue;
    }
    if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
      if (i + 10 > n) {
        return -1;
      }
      *h = p[i + 5] << 8 | p[i + 6], *w = p[i + 7] << 8 | p[i + 8], *comp = p[i + 9];
      return m;
    }
    i += 2 + (size_t)(p[i + 2] << 8 | p[i + 3]);
  }
  return -1;
}

/* Checks value i of a bytes feature: its length and its UTF-8 text, head bytes or JPEG frame. */
static void check_bytes(const tfx_example *ex, const char *name, size_t i, json_object *want) {
  const uint8_t *data = NULL;
  size_t len = 0;
  json_object *v = NULL;
  cr_assert_eq(tfx_example_bytes(ex, name, i, &data, &len, NULL), TFX_OK);
  cr_assert_eq(len, (size_t)jint(want, "nbytes"), "%s[%zu]", name, i);
  if (json_object_object_get_ex(want, "utf8", &v)) {
    cr_assert_eq(memcmp(data, json_object_get_string(v), len), 0, "%s[%zu]", name, i);
  }
  if (json_object_object_get_ex(want, "head_hex", &v)) {
    char got[64];
    size_t k = strlen(json_object_get_string(v)) / 2;
    cr_assert_leq(k, 31);
    hex(data, k, got);
    cr_assert_str_eq(got, json_object_get_string(v));
  }
  if (json_object_object_get_ex(want, "jpeg_sof", &v)) {
    int h = 0, w = 0, c = 0;
    cr_assert_eq(jpeg_sof(data, len, &h, &w, &c), (int)strtol(json_object_get_string(jget(v, "sof_marker")), NULL, 16));
    cr_assert_eq(h, jint(v, "height"));
    cr_assert_eq(w, jint(v, "width"));
    cr_assert_eq(c, jint(v, "components"));
  }
}

/* Checks one feature of an Example against expected.json: kind, length and every value. */
static void check_feature(const tfx_example *ex, const char *name, json_object *want) {
  tfx_feature_kind kind;
  size_t n = 0, m = 0;
  const float *f = NULL;
  const int64_t *iv = NULL;
  cr_assert_eq(tfx_example_find(ex, name, &kind, &n, NULL), TFX_OK, "no feature %s", name);
  cr_assert_str_eq(tfx_feature_kind_name(kind), json_object_get_string(jget(want, "type")), "%s", name);
  cr_assert_eq(n, (size_t)jint(want, "len"), "%s", name);
  json_object *vals = jget(want, "values");
  cr_assert_eq(json_object_array_length(vals), n);
  if (kind == TFX_FEATURE_KIND_FLOAT) {
    cr_assert_eq(tfx_example_floats(ex, name, &f, &m, NULL), TFX_OK);
  }
  if (kind == TFX_FEATURE_KIND_INT64) {
    cr_assert_eq(tfx_example_int64s(ex, name, &iv, &m, NULL), TFX_OK);
  }
  for (size_t i = 0; i < n; i++) {
    json_object *v = json_object_array_get_idx(vals, i);
    if (kind == TFX_FEATURE_KIND_FLOAT) {
      cr_assert_eq(f[i], (float)json_object_get_double(v), "%s[%zu]", name, i);
    }
    if (kind == TFX_FEATURE_KIND_INT64) {
      cr_assert_eq(iv[i], json_object_get_int64(v), "%s[%zu]", name, i);
    }
    if (kind == TFX_FEATURE_KIND_BYTES) {
      check_bytes(ex, name, i, v);
    }
  }
}

/* Checks the first record: size, the wire order of the feature names, and every feature. */
static void check_first(const tfx_example *ex, size_t len, json_object *first) {
  cr_assert_eq(len, (size_t)jint(first, "payload_bytes"));
  json_object *order = jget(first, "serialized_feature_key_order");
  cr_assert_eq(tfx_example_size(ex), json_object_array_length(order));
  for (size_t i = 0; i < tfx_example_size(ex); i++) {
    cr_assert_str_eq(tfx_example_key(ex, i), json_object_get_string(json_object_array_get_idx(order, i)));
  }
  json_object_object_foreach(jget(first, "features"), name, want) {
    check_feature(ex, name, want);
  }
}

/* The feature schema over all records: kind, length range and how many records have each feature. */
typedef struct seen {
  const char *name;
  tfx_feature_kind kind;
  size_t min, max, present;
} seen;

typedef struct walk {
  json_object *j;
  int is_example;
  size_t count, total, last;
  seen schema[16];
  size_t nschema;
} walk;

static void schema_add(walk *w, const tfx_example *ex) {
  for (size_t k = 0; k < tfx_example_size(ex); k++) {
    const char *key = tfx_example_key(ex, k);
    size_t s = 0;
    while (s < w->nschema && strcmp(w->schema[s].name, key) != 0) {
      s++;
    }
    cr_assert_lt(s, w->nschema, "record %zu: feature '%s' is not in the schema", w->count, key);
    tfx_feature_kind kind;
    size_t n = 0;
    cr_assert_eq(tfx_example_find(ex, key, &kind, &n, NULL), TFX_OK);
    seen *f = &w->schema[s];
    if (f->present == 0 || n < f->min) {
      f->min = n;
    }
    if (f->present == 0 || n > f->max) {
      f->max = n;
    }
    cr_assert(f->present == 0 || f->kind == kind, "record %zu: '%s' changed kind", w->count, key);
    f->kind = kind;
    f->present++;
  }
}

static void schema_init(walk *w) {
  json_object *schema = NULL;
  if (!json_object_object_get_ex(w->j, "feature_schema_over_all_records", &schema)) {
    return;
  }
  json_object_object_foreach(schema, name, want) {
    (void)want;
    cr_assert_lt(w->nschema, 16);
    w->schema[w->nschema++] = (seen){.name = name};
  }
}

static void schema_check(const walk *w) {
  json_object *schema = NULL;
  if (!json_object_object_get_ex(w->j, "feature_schema_over_all_records", &schema)) {
    return;
  }
  for (size_t s = 0; s < w->nschema; s++) {
    json_object *want = jget(schema, w->schema[s].name);
    json_object *types = jget(want, "types");
    cr_assert_eq(json_object_array_length(types), 1);
    cr_assert_str_eq(tfx_feature_kind_name(w->schema[s].kind),
                     json_object_get_string(json_object_array_get_idx(types, 0)));
    cr_assert_eq(w->schema[s].min, (size_t)jint(want, "min_len"), "%s", w->schema[s].name);
    cr_assert_eq(w->schema[s].max, (size_t)jint(want, "max_len"), "%s", w->schema[s].name);
    cr_assert_eq(w->schema[s].present, (size_t)jint(want, "present_in_records"), "%s", w->schema[s].name);
  }
}

/* One record: sizes, then either the Example checks or, for a file of other payloads, the payload bytes. */
static void walk_record(walk *w, const uint8_t *data, size_t len) {
  json_object *sizes = NULL;
  if (json_object_object_get_ex(w->j, "record_payload_sizes_first10", &sizes) && w->count < 10) {
    cr_assert_eq(len, (size_t)json_object_get_int64(json_object_array_get_idx(sizes, w->count)), "record %zu",
                 w->count);
  }
  w->total += len, w->last = len;
  tfx_example *ex = NULL;
  tfx_err e = {0};
  int rc = tfx_example_unpack(data, len, &ex, &e);
  if (!w->is_example) {
    json_object *rec = json_object_array_get_idx(jget(w->j, "records"), w->count);
    char got[512];
    cr_assert_eq(len, (size_t)jint(rec, "payload_bytes"));
    cr_assert_lt(len, sizeof got / 2);
    hex(data, len, got);
    cr_assert_str_eq(got, json_object_get_string(jget(rec, "payload_hex")));
    assert_fails(rc, &e, TFX_EPROTO, "tf.train.Example: unpack failed", NULL);
    return;
  }
  cr_assert_eq(rc, TFX_OK, "record %zu: %s", w->count, e.msg);
  if (w->count == 0) {
    check_first(ex, len, jget(w->j, "first_record"));
  }
  schema_add(w, ex);
  tfx_example_destroy(ex);
}

/* Streams a real file through the reader and checks everything its expected.json states. */
static void check_real(const char *dir, size_t records) {
  char path[512], jpath[512];
  snprintf(jpath, sizeof jpath, REALWORLD "/tfrecord/%s/expected.json", dir);
  walk w = {.j = json_object_from_file(jpath)};
  cr_assert_not_null(w.j, "%s", jpath);
  snprintf(path, sizeof path, REALWORLD "/tfrecord/%s/%s", dir, json_object_get_string(jget(w.j, "file")));
  w.is_example = strcmp(json_object_get_string(jget(w.j, "payload_type")), "tf.train.Example") == 0;
  schema_init(&w);
  tfx_tfrecord_reader *r = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_tfrecord_reader_open(path, &r, &e), TFX_OK, "%s", e.msg);
  const uint8_t *data = NULL;
  size_t len = 0;
  while (tfx_tfrecord_reader_next(r, &data, &len, &e) == TFX_OK && data) {
    walk_record(&w, data, len);
    w.count++;
  }
  cr_assert_null(data, "%s", e.msg);
  cr_assert_eq(w.count, records);
  cr_assert_eq(w.count, (size_t)jint(w.j, "num_records"));
  cr_assert_eq(tfx_tfrecord_reader_offset(r), (uint64_t)jint(w.j, "file_size_bytes"));
  json_object *v = NULL;
  if (json_object_object_get_ex(w.j, "total_payload_bytes", &v)) {
    cr_assert_eq(w.total, (size_t)json_object_get_int64(v));
  }
  if (json_object_object_get_ex(w.j, "last_record", &v)) {
    cr_assert_eq(w.last, (size_t)jint(v, "payload_bytes"));
  }
  schema_check(&w);
  tfx_tfrecord_reader_close(r);
  json_object_put(w.j);
}

Test(realworld, tfrecord_lite_tutorial_examples) {
  check_real("tfrecord_lite_test", 42);
}

Test(realworld, tfrecord_lite_jpeg_images) {
  check_real("tfrecord_lite_images", 2);
}

Test(realworld, lingvo_wmt14_all_three_list_kinds) {
  check_real("lingvo_wmt14_test", 100);
}

Test(realworld, lingvo_t2t_shard_8941_records, .timeout = 120) {
  check_real("lingvo_t2t_shard", 8941);
}

Test(realworld, lingvo_non_example_payloads_still_frame_parse) {
  check_real("lingvo_en_fr_nonexample", 2);
}

/* Counts the records of a file through the reader; every CRC must verify. */
static size_t count_records(const char *path) {
  tfx_tfrecord_reader *r = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_tfrecord_reader_open(path, &r, &e), TFX_OK, "%s", e.msg);
  const uint8_t *data = NULL;
  size_t len = 0;
  int rc;
  while (!(rc = tfx_tfrecord_reader_next(r, &data, &len, &e)) && data) {
  }
  cr_assert_eq(rc, TFX_OK, "%s", e.msg);
  size_t n = (size_t)tfx_tfrecord_reader_count(r);
  tfx_tfrecord_reader_close(r);
  return n;
}

Test(realworld, tensorboard_event_files_frame_parse) {
  cr_assert_eq(count_records(REALWORLD "/events/lingvo_tf1_scalars/events.out.tfevents.test"), 361);
  cr_assert_eq(count_records(REALWORLD "/events/go_tensorboard_tf2_scalars/"
                                       "events.out.tfevents.1585499054.Jaakkos-Mac-mini.local.11684.5.v2"),
               101);
}

Test(realworld, jpeg_frames_agree_with_height_width_depth) {
  tfx_tfrecord_reader *r = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_tfrecord_reader_open(REALWORLD "/tfrecord/tfrecord_lite_images/images.tfrecord", &r, &e), TFX_OK);
  const uint8_t *data = NULL, *jpeg = NULL;
  size_t len = 0, jlen = 0, n = 0;
  while (tfx_tfrecord_reader_next(r, &data, &len, &e) == TFX_OK && data) {
    tfx_example *ex = unpack_ok(data, len);
    const int64_t *h, *w, *c, *label;
    cr_assert_eq(tfx_example_int64s(ex, "height", &h, &n, &e), TFX_OK);
    cr_assert_eq(tfx_example_int64s(ex, "width", &w, &n, &e), TFX_OK);
    cr_assert_eq(tfx_example_int64s(ex, "depth", &c, &n, &e), TFX_OK);
    cr_assert_eq(tfx_example_int64s(ex, "label", &label, &n, &e), TFX_OK);
    cr_assert_eq(tfx_example_bytes(ex, "image_raw", 0, &jpeg, &jlen, &e), TFX_OK);
    int jh = 0, jw = 0, jc = 0;
    cr_assert_geq(jpeg_sof(jpeg, jlen, &jh, &jw, &jc), 0xc0);
    cr_assert_eq(jh, h[0]);
    cr_assert_eq(jw, w[0]);
    cr_assert_eq(jc, c[0]);
    tfx_example_destroy(ex);
  }
  cr_assert_eq(tfx_tfrecord_reader_count(r), 2);
  tfx_tfrecord_reader_close(r);
}

Test(realworld, t2t_sequences_end_in_eos) {
  tfx_tfrecord_reader *r = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_tfrecord_reader_open(
                   REALWORLD "/tfrecord/lingvo_t2t_shard/translate_ende_wmt32k-train-00511-of-00512", &r, &e),
               TFX_OK);
  const uint8_t *data = NULL;
  size_t len = 0;
  while (tfx_tfrecord_reader_next(r, &data, &len, &e) == TFX_OK && data) {
    tfx_example *ex = unpack_ok(data, len);
    const int64_t *v = NULL;
    size_t n = 0;
    cr_assert_eq(tfx_example_int64s(ex, "inputs", &v, &n, &e), TFX_OK);
    cr_assert_eq(v[n - 1], 1);
    cr_assert_eq(tfx_example_int64s(ex, "targets", &v, &n, &e), TFX_OK);
    cr_assert_eq(v[n - 1], 1);
    tfx_example_destroy(ex);
  }
  cr_assert_eq(tfx_tfrecord_reader_count(r), 8941);
  tfx_tfrecord_reader_close(r);
}

Test(realworld, load_tutorial_file_as_dataset) {
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  const char *path = REALWORLD "/tfrecord/tfrecord_lite_test/test.tfrecord";
  cr_assert_eq(tfx_example_load(path, "feature3", "feature1", 1, &d, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(d->n, 42);
  cr_assert_eq(d->dim, 1);
  cr_assert_eq(d->x[0], (float)-1.1237505674362183);
  cr_assert_eq(d->y[0], 2);
  for (size_t i = 0; i < d->n; i++) {
    cr_assert(d->y[i] >= 0 && d->y[i] <= 4, "y[%zu] = %d", i, d->y[i]);
  }
  tfx_dataset_destroy(d);
  d = NULL;
  cr_assert_eq(tfx_example_load(path, "feature2", "feature0", 1, &d, &e), TFX_ESHAPE); /* words of other lengths */
  assert_msg(&e, "test.tfrecord: record ");
  cr_assert_null(d);
}

Test(realworld, load_jpeg_bytes_of_different_lengths_is_a_shape_error) {
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  int rc =
      tfx_example_load(REALWORLD "/tfrecord/tfrecord_lite_images/images.tfrecord", "image_raw", "label", 1, &d, &e);
  assert_fails(rc, &e, TFX_ESHAPE, "images.tfrecord: record 1 at offset 17972: feature 'image_raw' has ",
               "values, the first record had 17858");
  cr_assert_null(d);
}

/* A NaN or an Inf among a record's float features is refused naming the file, the record and the value (#30:
 * one such record trained NaN weights into a model, exit 0), as the CSV and LibSVM readers refuse theirs. */
Test(example, load_refuses_non_finite_features) {
  tfx_err e = {0};
  const char *path = tmp("nan.tfrecord");
  const float x[] = {1, 2, 3}, nan_x[] = {1, NAN, 3}, inf_x[] = {INFINITY, 2, 3};
  const int64_t y[] = {1};
  const spec r0[] = {{"x", TFX_FEATURE_KIND_FLOAT, x, NULL, NULL, 3}, {"y", TFX_FEATURE_KIND_INT64, NULL, y, NULL, 1}};
  const spec r1[] = {{"x", TFX_FEATURE_KIND_FLOAT, nan_x, NULL, NULL, 3},
                     {"y", TFX_FEATURE_KIND_INT64, NULL, y, NULL, 1}};
  const spec r2[] = {{"x", TFX_FEATURE_KIND_FLOAT, inf_x, NULL, NULL, 3},
                     {"y", TFX_FEATURE_KIND_INT64, NULL, y, NULL, 1}};
  const spec *all[] = {r0, r1, r2};
  size_t offs[3];
  write_spec_records(path, all, 3, offs);
  tfx_dataset *d = NULL;
  char where[128];
  snprintf(where, sizeof where, "record 1 at offset %zu: feature 'x' value 1 (nan) is not a finite number", offs[1]);
  assert_fails(tfx_example_load(path, "x", "y", 1, &d, &e), &e, TFX_ECORRUPT, path, where);
  const spec *inf_first[] = {r0, r2};
  write_spec_records(path, inf_first, 2, offs);
  snprintf(where, sizeof where, "record 1 at offset %zu: feature 'x' value 0 (inf) is not a finite number", offs[1]);
  assert_fails(tfx_example_load(path, "x", "y", 1, &d, &e), &e, TFX_ECORRUPT, path, where);
  cr_assert_null(d);
}

/* An int64_list label of other than one value is a set of classes (model.multi_label, #25): [0, 2] the set {0, 2},
 * [] the empty set, [3] the single class 3; a class a set cannot hold is refused naming the record and value. */
Test(example, load_int64_list_labels_as_sets) {
  const float x[] = {1, 2};
  const int64_t two[] = {0, 2}, one[] = {3}, far[] = {1, 40};
  const spec r0[] = {{"x", TFX_FEATURE_KIND_FLOAT, x, NULL, NULL, 2}, {"y", TFX_FEATURE_KIND_INT64, NULL, two, NULL, 2}};
  const spec r1[] = {{"x", TFX_FEATURE_KIND_FLOAT, x, NULL, NULL, 2}, {"y", TFX_FEATURE_KIND_INT64, NULL, two, NULL, 0}};
  const spec r2[] = {{"x", TFX_FEATURE_KIND_FLOAT, x, NULL, NULL, 2}, {"y", TFX_FEATURE_KIND_INT64, NULL, one, NULL, 1}};
  const spec r3[] = {{"x", TFX_FEATURE_KIND_FLOAT, x, NULL, NULL, 2}, {"y", TFX_FEATURE_KIND_INT64, NULL, far, NULL, 2}};
  const spec *good[] = {r0, r1, r2}, *bad[] = {r0, r3};
  size_t offs[3];
  const char *path = tmp("sets.tfrecord");
  write_spec_records(path, good, 3, offs);
  tfx_dataset *d = NULL;
  tfx_err e = {0};
  cr_assert_eq(tfx_example_load(path, "x", "y", 1, &d, &e), TFX_OK, "%s", e.msg);
  cr_assert_eq(d->y[0], TFX_LABEL_SET | 5);
  cr_assert_eq(d->y[1], TFX_LABEL_SET);
  cr_assert_eq(d->y[2], 3);
  tfx_dataset_destroy(d);
  d = NULL;
  write_spec_records(path, bad, 2, offs);
  int rc = tfx_example_load(path, "x", "y", 1, &d, &e);
  assert_fails(rc, &e, TFX_ECORRUPT, "record 1 at offset", "label feature 'y' value 1 is class 40: a set of classes");
  cr_assert_null(d);
}
