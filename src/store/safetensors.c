/* safetensors reader and writer (json-c for the header). */
#include "store/safetensors.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"

size_t tfx_st_dtype_size(const char *dtype) {
  static const struct {
    const char *name;
    size_t size;
  } sizes[] = {{"F64", 8}, {"F32", 4},  {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},     {"I16", 2},    {"I8", 1},
               {"U8", 1},  {"BOOL", 1}, {"U64", 8}, {"U32", 4},  {"U16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    if (!strcmp(dtype, sizes[i].name)) {
      return sizes[i].size;
    }
  }
  return 0;
}

static json_object *header_json(const char *const *names, const int *ranks, const int64_t *const *shapes, int n,
                                const char *const *meta_kv, int n_meta, size_t *total) {
  json_object *root = json_object_new_object();
  if (n_meta > 0) {
    json_object *meta = json_object_new_object();
    for (int i = 0; i < n_meta; i++) {
      json_object_object_add(meta, meta_kv[2 * i], json_object_new_string(meta_kv[2 * i + 1]));
    }
    json_object_object_add(root, "__metadata__", meta);
  }
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    json_object *t = json_object_new_object(), *shape = json_object_new_array(), *offs = json_object_new_array();
    size_t count = 1;
    for (int d = 0; d < ranks[i]; d++) {
      count *= (size_t)shapes[i][d];
      json_object_array_add(shape, json_object_new_int64(shapes[i][d]));
    }
    json_object_array_add(offs, json_object_new_int64((int64_t)off));
    json_object_array_add(offs, json_object_new_int64((int64_t)(off + count * 4)));
    off += count * 4;
    json_object_object_add(t, "dtype", json_object_new_string("F32"));
    json_object_object_add(t, "shape", shape);
    json_object_object_add(t, "data_offsets", offs);
    json_object_object_add(root, names[i], t);
  }
  *total = off;
  return root;
}

int tfx_st_write(const char *path, const char *const *names, const int *ranks, const int64_t *const *shapes,
                 const float *const *data, int n, const char *const *meta_kv, int n_meta, tfx_err *err) {
  size_t total;
  json_object *root = header_json(names, ranks, shapes, n, meta_kv, n_meta, &total);
  const char *text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
  size_t hl = strlen(text), padded = (hl + 7) / 8 * 8;
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = tfx_fopen_write(tmp, "wb");
  int rc = f ? TFX_OK : tfx_err_sys(err, TFX_ESYS, "open %s", tmp);
  if (f) {
    uint64_t len = padded;
    int bad = fwrite(&len, 8, 1, f) != 1 || fwrite(text, 1, hl, f) != hl;
    for (size_t i = hl; i < padded; i++) {
      bad |= fputc(' ', f) == EOF;
    }
    for (int i = 0; i < n; i++) {
      size_t count = 1;
      for (int d = 0; d < ranks[i]; d++) {
        count *= (size_t)shapes[i][d];
      }
      bad |= fwrite(data[i], 4, count, f) != count;
    }
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
      rc = tfx_err_sys(err, TFX_ESYS, "write %s", path);
    }
  }
  json_object_put(root);
  return rc;
}

static int parse_entry(const char *path, const char *name, json_object *v, size_t data_size, tfx_st_tensor *t,
                       tfx_err *err) {
  json_object *dt, *shape, *offs;
  if (!json_object_object_get_ex(v, "dtype", &dt) || !json_object_object_get_ex(v, "shape", &shape) ||
      !json_object_object_get_ex(v, "data_offsets", &offs) || !json_object_is_type(shape, json_type_array) ||
      !json_object_is_type(offs, json_type_array) || json_object_array_length(offs) != 2 ||
      json_object_array_length(shape) > 8 || strlen(name) >= sizeof t->name) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: tensor '%.64s': malformed header entry", path, name);
  }
  snprintf(t->name, sizeof t->name, "%s", name);
  snprintf(t->dtype, sizeof t->dtype, "%s", json_object_get_string(dt));
  size_t es = tfx_st_dtype_size(t->dtype), count = 1;
  t->rank = (int)json_object_array_length(shape);
  for (int d = 0; d < t->rank; d++) {
    t->shape[d] = json_object_get_int64(json_object_array_get_idx(shape, (size_t)d));
    if (t->shape[d] < 0) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: tensor '%s': negative dim", path, name);
    }
    if (t->shape[d] > 0 && count > data_size / (size_t)t->shape[d]) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: tensor '%s': shape larger than the %zu data bytes", path, name,
                         data_size);
    }
    count *= (size_t)t->shape[d];
  }
  int64_t b = json_object_get_int64(json_object_array_get_idx(offs, 0)),
          e = json_object_get_int64(json_object_array_get_idx(offs, 1));
  if (!es || b < 0 || e < b || (size_t)e > data_size || (size_t)(e - b) != count * es) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: tensor '%s': %s%s offsets %lld..%lld do not fit %zu data bytes", path,
                       name, t->dtype, es ? "" : " (unknown dtype)", (long long)b, (long long)e, data_size);
  }
  t->begin = (size_t)b;
  t->end = (size_t)e;
  return TFX_OK;
}

static int parse_header(const char *path, const char *text, size_t len, tfx_st_file *f, tfx_err *err) {
  json_tokener *tok = json_tokener_new();
  json_object *root = tok ? json_tokener_parse_ex(tok, text, (int)len) : NULL;
  json_tokener_free(tok);
  if (!root || !json_object_is_type(root, json_type_object)) {
    json_object_put(root);
    return tfx_err_set(err, TFX_ECORRUPT, "%s: header at offset 8 is not a JSON object", path);
  }
  int rc = TFX_OK, cap = json_object_object_length(root);
  f->tensors = calloc((size_t)cap + 1, sizeof *f->tensors);
  json_object_object_foreach(root, name, v) {
    if (rc || !f->tensors) {
      break;
    }
    if (!strcmp(name, "__metadata__")) {
      f->metadata_json = strdup(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
      continue;
    }
    rc = parse_entry(path, name, v, f->data_size, &f->tensors[f->n], err);
    if (!rc) {
      f->n++;
    }
  }
  json_object_put(root);
  if (!f->tensors) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  return rc;
}

int tfx_st_read(const char *path, tfx_st_file **out, tfx_err *err) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    return tfx_err_sys(err, TFX_ENOTFOUND, "open %s", path);
  }
  fseek(fp, 0, SEEK_END);
  long size = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  uint64_t hl = 0;
  tfx_st_file *f = calloc(1, sizeof *f);
  char *hdr = NULL;
  int rc = TFX_OK;
  if (!f) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
  } else if (size < 8 || fread(&hl, 8, 1, fp) != 1 || hl > (uint64_t)size - 8 || hl > (1u << 27)) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: header length %llu does not fit a %ld-byte file", path,
                     (unsigned long long)hl, size);
  } else if (!(hdr = malloc(hl + 1)) || fread(hdr, 1, hl, fp) != hl) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: truncated header", path);
  }
  if (!rc) {
    f->data_size = (size_t)size - 8 - hl;
    f->data = malloc(f->data_size ? f->data_size : 1);
    if (!f->data || fread(f->data, 1, f->data_size, fp) != f->data_size) {
      rc = tfx_err_set(err, TFX_ECORRUPT, "%s: truncated data", path);
    }
  }
  fclose(fp);
  if (!rc) {
    rc = parse_header(path, hdr, hl, f, err);
  }
  free(hdr);
  if (rc) {
    tfx_st_destroy(f);
    return rc;
  }
  *out = f;
  return TFX_OK;
}

void tfx_st_destroy(tfx_st_file *f) {
  if (!f) {
    return;
  }
  free(f->tensors);
  free(f->data);
  free(f->metadata_json);
  free(f);
}

const tfx_st_tensor *tfx_st_find(const tfx_st_file *f, const char *name) {
  for (int i = 0; i < f->n; i++) {
    if (!strcmp(f->tensors[i].name, name)) {
      return &f->tensors[i];
    }
  }
  return NULL;
}
