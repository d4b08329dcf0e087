/* tf.train.Example encoding and decoding through protobuf-c, and the TFRecord-of-Examples dataset loader. */
#include "data/example.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/labelset.h"
#include "data/data_impl.h"
#include "data/tfrecord.h"
#include "example.pb-c.h"

typedef Tensorflow__Features__FeatureEntry entry_t;

struct tfx_example {
  Tensorflow__Example *msg;
};

/* A feature's values seen through its kind: n values (bytes: n bytes of its single value) at p. */
typedef struct view {
  tfx_feature_kind kind;
  size_t n;
  const void *p;
} view;

/* What the loader was asked for, and the dataset it grows. */
typedef struct loader {
  const char *path, *feature_key, *label_key;
  double scale;
  char where[320]; /* "path: record N at offset O", for messages */
  float *x;
  int32_t *y;
  size_t n, cap, dim;
} loader;

int tfx_example_unpack(const uint8_t *data, size_t len, tfx_example **out, tfx_err *err) {
  if (!data && len) {
    return tfx_err_set(err, TFX_EINVAL, "tf.train.Example: NULL data of %zu bytes", len);
  }
  tfx_example *ex = calloc(1, sizeof *ex);
  if (!ex) {
    return tfx_err_set(err, TFX_ENOMEM, "tf.train.Example: out of memory");
  }
  ex->msg = tensorflow__example__unpack(NULL, len, data);
  if (!ex->msg) {
    free(ex);
    return tfx_err_set(err, TFX_EPROTO, "tf.train.Example: unpack failed (%zu bytes)", len);
  }
  *out = ex;
  return TFX_OK;
}

void tfx_example_destroy(tfx_example *ex) {
  if (!ex) {
    return;
  }
  tensorflow__example__free_unpacked(ex->msg, NULL);
  free(ex);
}

size_t tfx_example_size(const tfx_example *ex) {
  return ex->msg->features ? ex->msg->features->n_feature : 0;
}

const char *tfx_example_key(const tfx_example *ex, size_t i) {
  if (i >= tfx_example_size(ex)) {
    return NULL;
  }
  return ex->msg->features->feature[i]->key;
}

/* The last entry called `name` (protobuf maps keep the last duplicate), or NULL. */
static const entry_t *lookup(const tfx_example *ex, const char *name) {
  for (size_t i = tfx_example_size(ex); i-- > 0;) {
    const entry_t *e = ex->msg->features->feature[i];
    if (e->key && strcmp(e->key, name) == 0) {
      return e;
    }
  }
  return NULL;
}

static void view_of(const Tensorflow__Feature *f, view *v) {
  *v = (view){TFX_FEATURE_KIND_NONE, 0, NULL};
  if (!f) {
    return;
  }
  switch (f->kind_case) {
    case TENSORFLOW__FEATURE__KIND_BYTES_LIST:
      *v = (view){TFX_FEATURE_KIND_BYTES, f->bytes_list->n_value, f->bytes_list->value};
      break;
    case TENSORFLOW__FEATURE__KIND_FLOAT_LIST:
      *v = (view){TFX_FEATURE_KIND_FLOAT, f->float_list->n_value, f->float_list->value};
      break;
    case TENSORFLOW__FEATURE__KIND_INT64_LIST:
      *v = (view){TFX_FEATURE_KIND_INT64, f->int64_list->n_value, f->int64_list->value};
      break;
    default:
      break;
  }
}

int tfx_example_find(const tfx_example *ex, const char *name, tfx_feature_kind *kind, size_t *count, tfx_err *err) {
  const entry_t *e = name ? lookup(ex, name) : NULL;
  if (!e) {
    return tfx_err_set(err, TFX_ENOTFOUND, "tf.train.Example: no feature '%s'", name ? name : "(null)");
  }
  view v = {0};
  view_of(e->value, &v);
  *kind = v.kind;
  *count = v.n;
  return TFX_OK;
}

/* The view of feature `name`, which must be of kind `want`; a Feature with no list set reads as an empty list
 * of any kind, as TensorFlow's parser treats it. */
static int get(const tfx_example *ex, const char *name, tfx_feature_kind want, view *v, tfx_err *err) {
  const entry_t *e = name ? lookup(ex, name) : NULL;
  if (!e) {
    return tfx_err_set(err, TFX_ENOTFOUND, "tf.train.Example: no feature '%s'", name ? name : "(null)");
  }
  view_of(e->value, v);
  if (v->kind != want && v->kind != TFX_FEATURE_KIND_NONE) {
    return tfx_err_set(err, TFX_EINVAL, "tf.train.Example: feature '%s' is a %s, not a %s", name,
                       tfx_feature_kind_name(v->kind), tfx_feature_kind_name(want));
  }
  return TFX_OK;
}

int tfx_example_floats(const tfx_example *ex, const char *name, const float **values, size_t *n, tfx_err *err) {
  view v = {0};
  int rc = get(ex, name, TFX_FEATURE_KIND_FLOAT, &v, err);
  if (rc) {
    return rc;
  }
  *values = v.n ? v.p : NULL;
  *n = v.n;
  return TFX_OK;
}

int tfx_example_int64s(const tfx_example *ex, const char *name, const int64_t **values, size_t *n, tfx_err *err) {
  view v = {0};
  int rc = get(ex, name, TFX_FEATURE_KIND_INT64, &v, err);
  if (rc) {
    return rc;
  }
  *values = v.n ? v.p : NULL;
  *n = v.n;
  return TFX_OK;
}

int tfx_example_bytes(const tfx_example *ex, const char *name, size_t i, const uint8_t **data, size_t *len,
                      tfx_err *err) {
  view v = {0};
  int rc = get(ex, name, TFX_FEATURE_KIND_BYTES, &v, err);
  if (rc) {
    return rc;
  }
  if (i >= v.n) {
    return tfx_err_set(err, TFX_EINVAL, "tf.train.Example: feature '%s' has %zu bytes values, no index %zu", name, v.n,
                       i);
  }
  const ProtobufCBinaryData *b = (const ProtobufCBinaryData *)v.p + i;
  *data = b->len ? b->data : (const uint8_t *)"";
  *len = b->len;
  return TFX_OK;
}

/* Checks one feature to encode: a key, a known kind, and its value arrays when it has values. */
static int check_feature(const tfx_feature *f, size_t i, tfx_err *err) {
  const char *key = f->key ? f->key : "(null)";
  if (!f->key) {
    return tfx_err_set(err, TFX_EINVAL, "tf.train.Example: feature %zu has no key", i);
  }
  if (f->kind < TFX_FEATURE_KIND_NONE || f->kind > TFX_FEATURE_KIND_INT64) {
    return tfx_err_set(err, TFX_EINVAL, "tf.train.Example: feature '%s': unknown kind %d", key, (int)f->kind);
  }
  int missing =
      f->n && ((f->kind == TFX_FEATURE_KIND_FLOAT && !f->floats) || (f->kind == TFX_FEATURE_KIND_INT64 && !f->int64s) ||
               (f->kind == TFX_FEATURE_KIND_BYTES && (!f->bytes || !f->bytes_len)));
  if (missing || (f->kind == TFX_FEATURE_KIND_NONE && f->n)) {
    return tfx_err_set(err, TFX_EINVAL, "tf.train.Example: feature '%s': %zu %s values but no array of them", key, f->n,
                       tfx_feature_kind_name(f->kind));
  }
  return TFX_OK;
}

/* The protobuf-c parts of one Example, all borrowed by the message until pack returns. */
typedef struct parts {
  Tensorflow__Feature *f;
  entry_t *en, **ens;
  Tensorflow__FloatList *fl;
  Tensorflow__Int64List *il;
  Tensorflow__BytesList *bl;
  ProtobufCBinaryData *bin;
} parts;

/* Points entry i of p at feature fe (its values borrowed); bin is where its bytes values go. */
static void fill_feature(parts *p, size_t i, const tfx_feature *fe, ProtobufCBinaryData *bin) {
  Tensorflow__Feature *f = &p->f[i];
  tensorflow__feature__init(f);
  tensorflow__features__feature_entry__init(&p->en[i]);
  p->en[i].key = (char *)fe->key;
  p->en[i].value = f;
  p->ens[i] = &p->en[i];
  if (fe->kind == TFX_FEATURE_KIND_FLOAT) {
    tensorflow__float_list__init(&p->fl[i]);
    p->fl[i].n_value = fe->n;
    p->fl[i].value = (float *)fe->floats;
    f->kind_case = TENSORFLOW__FEATURE__KIND_FLOAT_LIST;
    f->float_list = &p->fl[i];
  } else if (fe->kind == TFX_FEATURE_KIND_INT64) {
    tensorflow__int64_list__init(&p->il[i]);
    p->il[i].n_value = fe->n;
    p->il[i].value = (int64_t *)fe->int64s;
    f->kind_case = TENSORFLOW__FEATURE__KIND_INT64_LIST;
    f->int64_list = &p->il[i];
  } else if (fe->kind == TFX_FEATURE_KIND_BYTES) {
    for (size_t j = 0; j < fe->n; j++) {
      bin[j] = (ProtobufCBinaryData){fe->bytes_len[j], (uint8_t *)fe->bytes[j]};
    }
    tensorflow__bytes_list__init(&p->bl[i]);
    p->bl[i].n_value = fe->n;
    p->bl[i].value = bin;
    f->kind_case = TENSORFLOW__FEATURE__KIND_BYTES_LIST;
    f->bytes_list = &p->bl[i];
  }
}

/* Packs the Example whose features p holds; caller owns *out. */
static int pack_parts(parts *p, size_t n, uint8_t **out, size_t *len, tfx_err *err) {
  Tensorflow__Features fs = TENSORFLOW__FEATURES__INIT;
  fs.n_feature = n;
  fs.feature = p->ens;
  Tensorflow__Example ex = TENSORFLOW__EXAMPLE__INIT;
  ex.features = &fs;
  size_t size = tensorflow__example__get_packed_size(&ex);
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) {
    return tfx_err_set(err, TFX_ENOMEM, "tf.train.Example: out of memory for %zu bytes", size);
  }
  tensorflow__example__pack(&ex, buf);
  *out = buf;
  *len = size;
  return TFX_OK;
}

int tfx_example_pack(const tfx_feature *features, size_t n, uint8_t **out, size_t *len, tfx_err *err) {
  size_t n_bytes = 0;
  for (size_t i = 0; i < n; i++) {
    int rc = check_feature(&features[i], i, err);
    if (rc) {
      return rc;
    }
    n_bytes += features[i].kind == TFX_FEATURE_KIND_BYTES ? features[i].n : 0;
  }
  size_t m = n ? n : 1;
  parts p = {calloc(m, sizeof *p.f),
             calloc(m, sizeof *p.en),
             calloc(m, sizeof *p.ens),
             calloc(m, sizeof *p.fl),
             calloc(m, sizeof *p.il),
             calloc(m, sizeof *p.bl),
             calloc(n_bytes ? n_bytes : 1, sizeof *p.bin)};
  int rc = TFX_OK;
  if (!p.f || !p.en || !p.ens || !p.fl || !p.il || !p.bl || !p.bin) {
    rc = tfx_err_set(err, TFX_ENOMEM, "tf.train.Example: out of memory for %zu features", n);
  }
  for (size_t i = 0, b = 0; !rc && i < n; i++) {
    fill_feature(&p, i, &features[i], p.bin + b);
    b += features[i].kind == TFX_FEATURE_KIND_BYTES ? features[i].n : 0;
  }
  rc = rc ? rc : pack_parts(&p, n, out, len, err);
  free(p.f);
  free(p.en);
  free(p.ens);
  free(p.fl);
  free(p.il);
  free(p.bl);
  free(p.bin);
  return rc;
}

const char *tfx_feature_kind_name(tfx_feature_kind kind) {
  switch (kind) {
    case TFX_FEATURE_KIND_BYTES:
      return "bytes_list";
    case TFX_FEATURE_KIND_FLOAT:
      return "float_list";
    case TFX_FEATURE_KIND_INT64:
      return "int64_list";
    default:
      return "empty feature";
  }
}

/* TFX_ECONFIG naming a key that the record lacks, with the keys it has. */
static int missing(const loader *l, const tfx_example *ex, const char *what, const char *key, tfx_err *err) {
  char have[160] = "";
  size_t used = 0;
  for (size_t i = 0; i < tfx_example_size(ex) && used < sizeof have; i++) {
    int k = snprintf(have + used, sizeof have - used, "%s'%s'", i ? ", " : "", tfx_example_key(ex, i));
    used += k > 0 ? (size_t)k : 0;
  }
  return tfx_err_set(err, TFX_ECONFIG, "%s: no %s feature '%s' (it has %s)", l->where, what, key,
                     used ? have : "no features");
}

/* A float feature's values are finite, as the CSV and LibSVM readers require of theirs: one NaN record would
 * train NaN weights into the model. */
static int check_finite(const loader *l, const view *v, tfx_err *err) {
  for (size_t i = 0; v->kind == TFX_FEATURE_KIND_FLOAT && i < v->n; i++) {
    float x = ((const float *)v->p)[i];
    if (!isfinite(x)) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: feature '%s' value %zu (%g) is not a finite number", l->where,
                         l->feature_key, i, (double)x);
    }
  }
  return TFX_OK;
}

/* The x values of one record: a float or int64 list, or the bytes of a one-value bytes_list. */
static int feature_view(const loader *l, const tfx_example *ex, view *v, tfx_err *err) {
  const entry_t *e = lookup(ex, l->feature_key);
  if (!e) {
    return missing(l, ex, "input", l->feature_key, err);
  }
  view_of(e->value, v);
  if (v->kind == TFX_FEATURE_KIND_BYTES) {
    if (v->n != 1) {
      return tfx_err_set(err, TFX_ESHAPE, "%s: bytes feature '%s' has %zu values, want 1", l->where, l->feature_key,
                         v->n);
    }
    const ProtobufCBinaryData *b = v->p;
    v->n = b->len;
    v->p = b->data;
  }
  if (v->n == 0) {
    return tfx_err_set(err, TFX_ESHAPE, "%s: feature '%s' is empty", l->where, l->feature_key);
  }
  if (l->dim && v->n != l->dim) {
    return tfx_err_set(err, TFX_ESHAPE, "%s: feature '%s' has %zu values, the first record had %zu", l->where,
                       l->feature_key, v->n, l->dim);
  }
  return check_finite(l, v, err);
}

/* A label int64_list of n != 1 classes as a set (common/labelset.h: model.multi_label), each in [0, 31). */
static int label_set(const loader *l, const int64_t *v, size_t n, int32_t *y, tfx_err *err) {
  int32_t set = TFX_LABEL_SET;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < 0 || v[i] >= TFX_LABEL_SET_MAX) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: label feature '%s' value %zu is class %lld: a set of classes (a "
                         "list, model.multi_label) names classes 0 to %d", l->where, l->label_key, i, (long long)v[i],
                         TFX_LABEL_SET_MAX - 1);
    }
    set |= (int32_t)(1u << v[i]);
  }
  *y = set;
  return TFX_OK;
}

/* The label of one record: a single int64, or a single integral float, within int32; an int64_list of another
 * length is a set of classes (model.multi_label; the empty list: no class). */
static int label_value(const loader *l, const tfx_example *ex, int32_t *y, tfx_err *err) {
  const entry_t *e = lookup(ex, l->label_key);
  if (!e) {
    return missing(l, ex, "label", l->label_key, err);
  }
  view v = {0};
  view_of(e->value, &v);
  if (v.kind != TFX_FEATURE_KIND_INT64 && v.kind != TFX_FEATURE_KIND_FLOAT) {
    return tfx_err_set(err, TFX_ECONFIG, "%s: label feature '%s' is a %s, want an int64_list or float_list", l->where,
                       l->label_key, tfx_feature_kind_name(v.kind));
  }
  if (v.n != 1 && v.kind == TFX_FEATURE_KIND_INT64) {
    return label_set(l, v.p, v.n, y, err);
  }
  if (v.n != 1) {
    return tfx_err_set(err, TFX_ESHAPE, "%s: label feature '%s' has %zu values, want 1 (or an int64_list of classes "
                       "for model.multi_label)", l->where, l->label_key, v.n);
  }
  int ok;
  double d;
  if (v.kind == TFX_FEATURE_KIND_INT64) {
    int64_t i = *(const int64_t *)v.p;
    ok = i >= INT32_MIN && i <= INT32_MAX;
    d = (double)i;
  } else {
    d = *(const float *)v.p;
    ok = d == floor(d) && d >= INT32_MIN && d <= INT32_MAX;
  }
  if (!ok) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: label %g is not an int32", l->where, d);
  }
  *y = (int32_t)d;
  return TFX_OK;
}

/* Makes room for one more example of l->dim floats. */
static int grow(loader *l, tfx_err *err) {
  if (l->n < l->cap) {
    return TFX_OK;
  }
  size_t cap = l->cap ? 2 * l->cap : 64;
  if (cap > SIZE_MAX / sizeof(float) / l->dim) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: dataset too large", l->path);
  }
  float *x = realloc(l->x, sizeof(float) * cap * l->dim);
  if (x) {
    l->x = x;
  }
  int32_t *y = x ? realloc(l->y, sizeof(int32_t) * cap) : NULL;
  if (!y) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory at %zu examples", l->path, l->n);
  }
  l->y = y;
  l->cap = cap;
  return TFX_OK;
}

static void copy_values(const view *v, double scale, float *dst) {
  for (size_t i = 0; i < v->n; i++) {
    double d = v->kind == TFX_FEATURE_KIND_FLOAT   ? ((const float *)v->p)[i]
               : v->kind == TFX_FEATURE_KIND_INT64 ? (double)((const int64_t *)v->p)[i]
                                                   : ((const uint8_t *)v->p)[i];
    dst[i] = (float)(d * scale);
  }
}

/* Decodes one record and appends its example. */
static int add_record(loader *l, const uint8_t *data, size_t len, tfx_err *err) {
  tfx_example *ex = NULL;
  tfx_err e = {0};
  int rc = tfx_example_unpack(data, len, &ex, &e);
  if (rc) { /* the framing checked out, the bytes are no Example: a bad file (exit 2), nothing a retry mends */
    return tfx_err_set(err, TFX_ECORRUPT, "%s: %s", l->where, e.msg);
  }
  view v = {0};
  int32_t y = 0;
  if ((rc = feature_view(l, ex, &v, err)) || (rc = label_value(l, ex, &y, err))) {
    goto done;
  }
  if (!l->dim) {
    l->dim = v.n;
  }
  if ((rc = grow(l, err))) {
    goto done;
  }
  copy_values(&v, l->scale, l->x + l->n * l->dim);
  l->y[l->n++] = y;
done:
  tfx_example_destroy(ex);
  return rc;
}

/* Streams records of the open reader into the loader until it holds `max` examples or the file ends. */
static int read_rows(loader *l, tfx_tfrecord_reader *r, size_t max, tfx_err *err) {
  while (l->n < max) {
    const uint8_t *data = NULL;
    size_t len = 0;
    uint64_t at = tfx_tfrecord_reader_offset(r), index = tfx_tfrecord_reader_count(r);
    int rc = tfx_tfrecord_reader_next(r, &data, &len, err);
    if (rc || !data) {
      return rc;
    }
    snprintf(l->where, sizeof l->where, "%s: record %llu at offset %llu", l->path, (unsigned long long)index,
             (unsigned long long)at);
    if ((rc = add_record(l, data, len, err))) {
      return rc;
    }
  }
  return TFX_OK;
}

struct tfx_example_reader {
  loader l;
  tfx_tfrecord_reader *r;
};

int tfx_example_open(const char *path, const char *feature_key, const char *label_key, double scale,
                     tfx_example_reader **out, tfx_err *err) {
  if (!path || !feature_key || !label_key || !out) {
    return tfx_err_set(err, TFX_EINVAL, "example open: NULL path, feature key, label key or out");
  }
  FILE *f = NULL;
  int rc = data__file_open(path, &f, err);
  return rc ? rc : data__example_open_file(f, path, feature_key, label_key, scale, out, err);
}

int data__example_open_file(FILE *f, const char *path, const char *feature_key, const char *label_key, double scale,
                            tfx_example_reader **out, tfx_err *err) {
  tfx_example_reader *er = calloc(1, sizeof *er);
  char *name = strdup(path), *fk = strdup(feature_key), *lk = strdup(label_key);
  if (!er || !name || !fk || !lk) {
    fclose(f);
    free(er);
    free(name);
    free(fk);
    free(lk);
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", path);
  }
  er->l = (loader){.path = name, .feature_key = fk, .label_key = lk, .scale = scale};
  int rc = data__tfrecord_open_file(f, path, &er->r, err);
  if (rc) {
    tfx_example_close(er);
    return rc;
  }
  *out = er;
  return TFX_OK;
}

int tfx_example_read(tfx_example_reader *er, size_t max, tfx_dataset **out, tfx_err *err) {
  loader *l = &er->l;
  *out = NULL;
  int rc = read_rows(l, er->r, max, err);
  if (rc || l->n == 0) {
    return rc;
  }
  if ((rc = data__dataset_take(l->n, l->dim, &l->x, &l->y, l->path, out, err))) {
    return rc;
  }
  l->n = l->cap = 0; /* dim stays: every chunk has the first record's width */
  return TFX_OK;
}

void tfx_example_close(tfx_example_reader *er) {
  if (!er) {
    return;
  }
  tfx_tfrecord_reader_close(er->r);
  free((char *)er->l.path);
  free((char *)er->l.feature_key);
  free((char *)er->l.label_key);
  free(er->l.x);
  free(er->l.y);
  free(er);
}

int tfx_example_load(const char *path, const char *feature_key, const char *label_key, double scale, tfx_dataset **out,
                     tfx_err *err) {
  tfx_example_reader *er = NULL;
  int rc = tfx_example_open(path, feature_key, label_key, scale, &er, err);
  if (!rc && !(rc = tfx_example_read(er, SIZE_MAX, out, err)) && !*out) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: no records", path);
  }
  tfx_example_close(er);
  return rc;
}
