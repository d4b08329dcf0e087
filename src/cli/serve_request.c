/* Predict bodies to datasets, through the run's own readers (serve.h). */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli/serve.h"
#include "common/text.h"
#include "data/source.h"

typedef enum form { FORM_DENSE, FORM_LINE, FORM_OBJECT } form;

static const char *const form_names[] = {"a list of numbers", "a LibSVM line (a string)", "an object of columns"};

/* The form of instance v, or -1. */
static int form_of(json_object *v) {
  switch (json_object_get_type(v)) {
    case json_type_array:
      return FORM_DENSE;
    case json_type_string:
      return FORM_LINE;
    case json_type_object:
      return FORM_OBJECT;
    default:
      return -1;
  }
}

/* The form the model reads: objects with feature columns, lines for a sparse (LibSVM) model, else dense lists
 * (or lines, read as the dense model's LibSVM rows). */
static int form_allowed(const tfx_config *cfg, form f) {
  if (cfg->n_features > 0) {
    return f == FORM_OBJECT;
  }
  if (tfx_config_sparse_input(cfg)) {
    return f == FORM_LINE;
  }
  return f == FORM_DENSE || f == FORM_LINE;
}

static int parse_dense(const tfx_config *cfg, size_t dim, json_object *list, tfx_dataset **out, tfx_err *err) {
  size_t n = json_object_array_length(list);
  tfx_dataset *d = calloc(1, sizeof *d);
  if (!d || !(d->x = malloc(sizeof(float) * dim * n + 1)) || !(d->y = calloc(n, sizeof(int32_t)))) {
    tfx_dataset_destroy(d);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory for %zu instances", n);
  }
  d->n = n;
  d->dim = dim;
  for (size_t i = 0; i < n; i++) {
    json_object *row = json_object_array_get_idx(list, i);
    size_t w = json_object_array_length(row);
    if (w != dim) {
      tfx_dataset_destroy(d);
      return tfx_err_set(err, TFX_EINVAL, "instances[%zu]: %zu values, the model takes %zu", i, w, dim);
    }
    for (size_t j = 0; j < dim; j++) {
      json_object *v = json_object_array_get_idx(row, j);
      if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double)) {
        tfx_dataset_destroy(d);
        return tfx_err_set(err, TFX_EINVAL, "instances[%zu][%zu]: not a number", i, j);
      }
      double x = json_object_get_double(v);
      if (!isfinite(x) || !isfinite((float)x)) { /* NaN, Infinity, 1e400: no input a model was trained on */
        tfx_dataset_destroy(d);
        return tfx_err_set(err, TFX_EINVAL, "instances[%zu][%zu]: %g is not a finite number", i, j, x);
      }
      d->x[i * dim + j] = (float)x;
    }
  }
  tfx_scorer_scale(cfg, d->x, n * dim);
  *out = d;
  return TFX_OK;
}

/* The reader's message about the memory file `path` as one about the request: "PATH: line N..." names
 * instances[N - 1 - header]. */
static int reword(int rc, const char *path, int header, const char *msg, tfx_err *err) {
  size_t plen = strlen(path);
  if (strncmp(msg, path, plen)) {
    return tfx_err_set(err, TFX_EINVAL, "instances: %s", msg);
  }
  msg += plen + (msg[plen] == ':') + (msg[plen] == ':' && msg[plen + 1] == ' ');
  long line = 0;
  int used = 0;
  if (sscanf(msg, "line %ld%n", &line, &used) == 1 && line > header) {
    return tfx_err_set(err, TFX_EINVAL, "instances[%ld]%s", line - 1 - header, msg + used);
  }
  (void)rc;
  return tfx_err_set(err, TFX_EINVAL, "instances: %s", msg);
}

/* Reads text (a file in `format`, header lines first) with the run's reader, as tfx_dataset_load_config reads
 * the eval set, from an anonymous memory file. */
static int load_text(const tfx_config *cfg, tfx_format format, int header, const tfx_text *t, size_t dim,
                     tfx_dataset **out, tfx_err *err) {
  int fd = memfd_create("tfx-serve-request", MFD_CLOEXEC);
  tfx_config *c = malloc(sizeof *c);
  if (fd < 0 || !c || !t->s || write(fd, t->s, t->len) != (ssize_t)t->len) {
    int rc = tfx_err_sys(err, TFX_ESYS, "a memory file for the request");
    free(c);
    if (fd >= 0) {
      close(fd);
    }
    return rc;
  }
  *c = *cfg;
  c->data_format = format;
  c->data_header = header;
  snprintf(c->eval_images, sizeof c->eval_images, "/proc/self/fd/%d", fd);
  tfx_err e = {0};
  int rc = tfx_dataset_load_config(c, 1, dim, out, &e);
  if (rc) {
    rc = rc == TFX_ENOMEM || rc == TFX_ESYS ? tfx_err_set(err, rc, "%s", e.msg)
                                            : reword(rc, c->eval_images, header, e.msg, err);
  }
  free(c);
  close(fd);
  return rc;
}

static int parse_lines(const tfx_config *cfg, size_t dim, json_object *list, tfx_dataset **out, tfx_err *err) {
  tfx_text t = {0};
  int rc = TFX_OK;
  for (size_t i = 0; !rc && i < json_object_array_length(list); i++) {
    const char *s = json_object_get_string(json_object_array_get_idx(list, i));
    size_t len = (size_t)json_object_get_string_len(json_object_array_get_idx(list, i));
    const char *first = s + strspn(s, " \t");
    if (strlen(s) != len || strpbrk(s, "\r\n") || !*first || *first == '#') {
      rc = tfx_err_set(err, TFX_EINVAL, "instances[%zu]: not one LibSVM line (empty, a comment, a newline or NUL)", i);
      break;
    }
    size_t tok = strcspn(first, " \t");
    int labelled = !memchr(first, ':', tok); /* a TensorFlow Serving instance has no label: read as label 0 */
    tfx_text_put(&t, "%s%s\n", labelled ? "" : "0 ", s);
  }
  if (!rc) {
    rc = load_text(cfg, TFX_FORMAT_LIBSVM, 0, &t, dim, out, err);
  }
  free(t.s);
  return rc;
}

/* The columns of the records feature columns read: each feature's key (a crossed one's keys) and weight column,
 * then the label column; as CSV header names. */
typedef struct columns {
  char names[2 * TFX_MAX_FEATURES + 8][64];
  const char *separator[2 * TFX_MAX_FEATURES + 8]; /* a bag's separator, or "" */
  int n, label;                                     /* label: the label column's index, or -1 */
} columns;

/* Adds a column (once); returns its index, or -1 for an empty name or no room. */
static int add_column(columns *c, const char *name, size_t len, const char *separator) {
  for (int i = 0; i < c->n; i++) {
    if (strlen(c->names[i]) == len && !strncmp(c->names[i], name, len)) {
      return i;
    }
  }
  if (!len || len >= sizeof c->names[0] || c->n == (int)(sizeof c->names / sizeof c->names[0])) {
    return -1;
  }
  snprintf(c->names[c->n], sizeof c->names[0], "%.*s", (int)len, name);
  c->separator[c->n] = separator;
  return c->n++;
}

static void columns_of(const tfx_config *cfg, columns *c) {
  c->n = 0;
  for (int i = 0; i < cfg->n_features; i++) {
    const tfx_feature_spec *f = &cfg->features[i];
    if (!strcmp(f->type, "crossed")) {
      for (const char *k = f->keys; *k; k += strcspn(k, ",") + (k[strcspn(k, ",")] == ',')) {
        add_column(c, k, strcspn(k, ","), "");
      }
    } else {
      add_column(c, f->key, strlen(f->key), f->separator);
    }
    add_column(c, f->weight_key, strlen(f->weight_key), f->separator);
  }
  c->label = add_column(c, cfg->label_column, strlen(cfg->label_column), "");
}

/* One value of a cell: a string as it is, a number as JSON writes it; into t, quoted as RFC 4180 quotes. */
static int put_value(tfx_text *t, json_object *v) {
  if (!json_object_is_type(v, json_type_string) && !json_object_is_type(v, json_type_int) &&
      !json_object_is_type(v, json_type_double)) {
    return TFX_EINVAL;
  }
  for (const char *s = json_object_get_string(v); *s; s++) {
    tfx_text_put(t, *s == '"' ? "\"\"" : "%c", *s);
  }
  return TFX_OK;
}

/* The cell of column k of instance i (obj): its value, a bag's values joined by the separator, or empty. */
static int put_cell(tfx_text *t, const columns *c, int k, json_object *obj, size_t i, tfx_err *err) {
  json_object *v = NULL;
  tfx_text_put(t, "%s\"", k ? "," : "");
  int label = k == c->label;
  if (!label && json_object_object_get_ex(obj, c->names[k], &v) && v) {
    int bag = json_object_is_type(v, json_type_array), rc = TFX_OK;
    if (bag && !c->separator[k][0]) {
      return tfx_err_set(err, TFX_EINVAL, "instances[%zu].%s: a list, the column takes one value", i, c->names[k]);
    }
    for (size_t j = 0; !rc && j < (bag ? json_object_array_length(v) : 1); j++) {
      tfx_text_put(t, "%s", j ? c->separator[k] : "");
      rc = put_value(t, bag ? json_object_array_get_idx(v, j) : v);
    }
    if (rc) {
      return tfx_err_set(err, TFX_EINVAL, "instances[%zu].%s: not a string or a number", i, c->names[k]);
    }
  } else if (label) {
    tfx_text_put(t, "0");
  }
  tfx_text_put(t, "\"");
  return TFX_OK;
}

/* A key of obj that names no column the model reads, or NULL. */
static const char *unknown_key(const columns *c, json_object *obj) {
  json_object_object_foreach(obj, key, val) {
    (void)val;
    int known = 0;
    for (int k = 0; k < c->n && !known; k++) {
      known = k != c->label && !strcmp(c->names[k], key);
    }
    if (!known) {
      return key;
    }
  }
  return NULL;
}

static int parse_objects(const tfx_config *cfg, size_t dim, json_object *list, tfx_dataset **out, tfx_err *err) {
  columns c;
  columns_of(cfg, &c);
  tfx_text t = {0};
  int rc = TFX_OK;
  for (int k = 0; k < c.n; k++) {
    tfx_text_put(&t, "%s\"%s\"", k ? "," : "", c.names[k]);
  }
  tfx_text_put(&t, "\n");
  for (size_t i = 0; !rc && i < json_object_array_length(list); i++) {
    json_object *obj = json_object_array_get_idx(list, i);
    const char *bad = unknown_key(&c, obj);
    if (bad) {
      rc = tfx_err_set(err, TFX_EINVAL, "instances[%zu]: no column '%.64s' among the model's features", i, bad);
    }
    for (int k = 0; !rc && k < c.n; k++) {
      rc = put_cell(&t, &c, k, obj, i, err);
    }
    tfx_text_put(&t, "\n");
  }
  if (!rc) {
    rc = load_text(cfg, TFX_FORMAT_CSV, 1, &t, dim, out, err);
  }
  free(t.s);
  return rc;
}

static int parse_instances(const tfx_config *cfg, size_t dim, json_object *list, tfx_dataset **out, tfx_err *err) {
  size_t n = json_object_array_length(list);
  if (n == 0 || n > TFX_SERVE_MAX_INSTANCES) {
    return tfx_err_set(err, TFX_EINVAL, "\"instances\" holds %zu instances (want 1..%d)", n, TFX_SERVE_MAX_INSTANCES);
  }
  int f = form_of(json_object_array_get_idx(list, 0));
  for (size_t i = 0; i < n; i++) {
    if (form_of(json_object_array_get_idx(list, i)) != f || f < 0) {
      return tfx_err_set(err, TFX_EINVAL, "instances[%zu]: not %s as instances[0] is", i,
                         f < 0 ? "a list, a string or an object" : form_names[f]);
    }
  }
  if (!form_allowed(cfg, (form)f)) {
    return tfx_err_set(err, TFX_EINVAL, "instances are %s; this model reads %s", form_names[f],
                       cfg->n_features > 0            ? form_names[FORM_OBJECT]
                       : tfx_config_sparse_input(cfg) ? form_names[FORM_LINE]
                                                      : "lists of numbers or LibSVM lines");
  }
  return f == FORM_DENSE  ? parse_dense(cfg, dim, list, out, err)
         : f == FORM_LINE ? parse_lines(cfg, dim, list, out, err)
                          : parse_objects(cfg, dim, list, out, err);
}

/* Whether body[from, len) is only blanks. */
static int only_blanks(const char *body, size_t from, size_t len) {
  for (size_t i = from; i < len; i++) {
    if (!strchr(" \t\r\n", body[i]) || !body[i]) {
      return 0;
    }
  }
  return 1;
}

/* The fast path for the common body, {"instances": [[number, ...], ...]} and nothing else: a scanner that reads the
 * numbers as json-c would (strtod; integers of up to 15 digits, which a double holds exactly) without building an
 * object per number. Returns 0 when the body is anything else (other forms, a fault, a width the model does not
 * take), and json-c then parses it and names what is wrong. */
typedef struct scan {
  const char *p, *end;
} scan;

static void ws(scan *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\r' || *s->p == '\n')) {
    s->p++;
  }
}

static int eat(scan *s, char c) {
  ws(s);
  if (s->p < s->end && *s->p == c) {
    s->p++;
    return 1;
  }
  return 0;
}

/* One JSON number into *v; 0 when the text is not one (or an integer too long to be sure of). The token is copied
 * out, so strtod never reads past the body. */
static int number(scan *s, float *v) {
  ws(s);
  size_t len = 0;
  while (s->p + len < s->end && strchr("0123456789+-.eE", s->p[len]) && s->p[len]) {
    len++;
  }
  char tok[64];
  const char *dot = memchr(s->p, '.', len);
  size_t sign = len && s->p[0] == '-', digits = 0;
  while (sign + digits < len && s->p[sign + digits] >= '0' && s->p[sign + digits] <= '9') {
    digits++; /* within the token: at the body's end, strspn read past it (the body has no NUL) */
  }
  if (!len || len >= sizeof tok || !digits || (digits > 1 && s->p[sign] == '0') || (digits > 15 && len == sign + digits) ||
      (dot && (dot + 1 == s->p + len || !strchr("0123456789", dot[1])))) {
    return 0;
  }
  memcpy(tok, s->p, len);
  tok[len] = '\0';
  char *stop;
  double d = strtod(tok, &stop);
  if (stop != tok + len || !isfinite((float)d)) { /* 1e400: json-c's path names it */
    return 0;
  }
  *v = (float)d;
  s->p += len;
  return 1;
}

static int scan_rows(scan *s, size_t dim, float *x, size_t max, size_t *n) {
  size_t rows = 0;
  do {
    if (rows == max || !eat(s, '[')) {
      return 0;
    }
    for (size_t j = 0; j < dim; j++) {
      if ((j && !eat(s, ',')) || !number(s, &x[rows * dim + j])) {
        return 0;
      }
    }
    if (!eat(s, ']')) {
      return 0;
    }
    rows++;
  } while (eat(s, ','));
  *n = rows;
  return eat(s, ']') && eat(s, '}') && (ws(s), s->p == s->end);
}

static int fast_dense(const tfx_config *cfg, size_t dim, const char *body, size_t len, tfx_dataset **out) {
  scan s = {body, body + len};
  if (!form_allowed(cfg, FORM_DENSE) || !dim || !eat(&s, '{') || !eat(&s, '"') || s.end - s.p < 10 ||
      strncmp(s.p, "instances\"", 10)) {
    return 0;
  }
  s.p += 10;
  size_t max = len / (2 * dim) + 1, n = 0; /* each value takes at least 2 bytes ("0,") */
  max = max < TFX_SERVE_MAX_INSTANCES ? max : TFX_SERVE_MAX_INSTANCES;
  tfx_dataset *d = eat(&s, ':') && eat(&s, '[') ? calloc(1, sizeof *d) : NULL;
  if (!d || !(d->x = malloc(sizeof(float) * dim * max)) || !scan_rows(&s, dim, d->x, max, &n) || !n ||
      !(d->y = calloc(n, sizeof(int32_t)))) {
    tfx_dataset_destroy(d);
    return 0;
  }
  d->n = n;
  d->dim = dim;
  tfx_scorer_scale(cfg, d->x, n * dim);
  *out = d;
  return 1;
}

/* The most JSON values (and object members) body can hold: one more than its commas and opening brackets outside
 * strings. json-c makes an object of ~100 bytes for each, so a body is measured before it is parsed. */
static size_t values_at_most(const char *body, size_t len) {
  size_t n = 1;
  int in_string = 0;
  for (size_t i = 0; i < len; i++) {
    char c = body[i];
    if (in_string) {
      i += c == '\\';
      in_string = c != '"';
    } else {
      in_string = c == '"';
      n += c == ',' || c == '[' || c == '{';
    }
  }
  return n;
}

/* The most values a request the model reads may hold: its instances, each a dense list, a line or an object of
 * columns (some of which are lists). A dense request within it never reaches json-c (fast_dense). */
static size_t values_budget(const tfx_config *cfg) {
  size_t per = cfg->n_features > 0 ? 16 * (size_t)cfg->n_features + 2 : 2, budget = TFX_SERVE_MAX_INSTANCES * per;
  return budget > TFX_SERVE_MAX_JSON_VALUES ? budget : TFX_SERVE_MAX_JSON_VALUES;
}

/* The body's "top_k" (absent: 0) into *k. */
static int read_top_k(json_object *root, int *k, tfx_err *err) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(root, "top_k", &v)) {
    *k = 0;
    return TFX_OK;
  }
  int64_t n = json_object_get_int64(v);
  if (!json_object_is_type(v, json_type_int) || n < 1 || n > TFX_SERVE_MAX_TOP_K) {
    return tfx_err_set(err, TFX_EINVAL, "\"top_k\" is %s: want an integer in 1..%d",
                       json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN), TFX_SERVE_MAX_TOP_K);
  }
  *k = (int)n;
  return TFX_OK;
}

int tfx_serve_parse(const tfx_config *cfg, size_t dim, const char *body, size_t len, tfx_dataset **out, int *top_k,
                    tfx_err *err) {
  if (fast_dense(cfg, dim, body, len, out)) {
    if (top_k) {
      *top_k = 0;
    }
    return TFX_OK;
  }
  size_t values = values_at_most(body, len), budget = values_budget(cfg);
  if (values > budget) { /* a 64 MB body of one-byte numbers took 2.4 GB as json-c objects */
    return tfx_err_set(err, TFX_EINVAL,
                       "the body holds up to %zu JSON values, more than %zu: a request holds at most %d instances "
                       "the model reads (a dense one as lists of exactly %zu numbers)",
                       values, budget, TFX_SERVE_MAX_INSTANCES, dim);
  }
  json_tokener *tok = json_tokener_new();
  if (!tok) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  json_object *root = json_tokener_parse_ex(tok, body, (int)len), *list = NULL;
  int k = 0;
  enum json_tokener_error je = json_tokener_get_error(tok);
  size_t used = json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  int rc = TFX_OK;
  if (!root || je != json_tokener_success) {
    rc = tfx_err_set(err, TFX_EINVAL, "the body is not JSON: %s at byte %zu",
                     je == json_tokener_continue ? "it ends early" : json_tokener_error_desc(je), used);
  } else if (!only_blanks(body, used, len)) {
    rc = tfx_err_set(err, TFX_EINVAL, "the body is not JSON: bytes after the value at byte %zu", used);
  } else if (!json_object_object_get_ex(root, "instances", &list) || !json_object_is_type(list, json_type_array)) {
    rc = tfx_err_set(err, TFX_EINVAL, "the body has no \"instances\" list (want {\"instances\": [...]})");
  } else if (!top_k && json_object_object_get_ex(root, "top_k", NULL)) {
    rc = tfx_err_set(err, TFX_EINVAL, "\"top_k\" is not taken here");
  } else if (!top_k || !(rc = read_top_k(root, &k, err))) {
    rc = parse_instances(cfg, dim, list, out, err);
  }
  if (!rc && top_k) {
    *top_k = k;
  }
  json_object_put(root);
  return rc;
}
