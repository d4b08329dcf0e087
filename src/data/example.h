/* tf.train.Example, the protobuf record inside most TFRecord datasets: encoding one from named features,
 * decoding one record, reading a feature by name as floats, int64s or bytes, and a loader that turns a TFRecord
 * file of Examples into a tfx_dataset.
 *
 * An Example maps feature names to one list each: bytes_list, float_list or int64_list (proto/example.proto,
 * copied from TensorFlow). Packed and unpacked list encodings both decode. When a name occurs twice on the wire,
 * the last occurrence wins, as protobuf map semantics require. This module alone calls protobuf-c for Examples.
 *
 * Key types: tfx_example (opaque, one decoded record), tfx_feature_kind. Ownership: the caller owns a
 * tfx_example; every pointer a getter returns is borrowed from it until tfx_example_destroy. Thread-safety: an
 * Example may be read from several threads; the loader shares nothing. Errors: TFX_EPROTO (tfx_example_unpack: not an
 * Example), TFX_ENOTFOUND (no such feature), TFX_EINVAL (feature of another kind, index out of range), and from the
 * loader also TFX_ECONFIG (a key is missing or of an unusable kind), TFX_ESHAPE (values per example differ),
 * TFX_ECORRUPT (framing, a record that is no Example, a label that is not an int32) naming file, record, offset. */
#ifndef TFX_EXAMPLE_H
#define TFX_EXAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "data/dataset.h"

typedef enum tfx_feature_kind {
  TFX_FEATURE_KIND_NONE,  /* a Feature with no list set */
  TFX_FEATURE_KIND_BYTES, /* bytes_list */
  TFX_FEATURE_KIND_FLOAT, /* float_list */
  TFX_FEATURE_KIND_INT64, /* int64_list */
} tfx_feature_kind;

typedef struct tfx_example tfx_example;

/* One named feature to encode: n values of its kind (arrays borrowed; NONE encodes a Feature with no list). */
typedef struct tfx_feature {
  const char *key;
  tfx_feature_kind kind;
  size_t n;
  const float *floats;         /* FLOAT: n values */
  const int64_t *int64s;       /* INT64: n values */
  const uint8_t *const *bytes; /* BYTES: n values of bytes_len[i] bytes each */
  const size_t *bytes_len;
} tfx_feature;

/* Encodes a tf.train.Example of features[0..n) in that order (borrowed until return); caller owns *out (free())
 * and *len is its size. TFX_EINVAL naming the feature when a key or a value array is missing or a kind unknown. */
int tfx_example_pack(const tfx_feature *features, size_t n, uint8_t **out, size_t *len, tfx_err *err);

/* Decodes a serialized tf.train.Example (data borrowed until return); caller owns *out; free with
 * tfx_example_destroy. */
int tfx_example_unpack(const uint8_t *data, size_t len, tfx_example **out, tfx_err *err);
/* Frees an Example; NULL does nothing. */
void tfx_example_destroy(tfx_example *ex);
/* The number of features as serialized (map entries in wire order, duplicates included). */
size_t tfx_example_size(const tfx_example *ex);
/* The name of the i-th serialized feature (i < tfx_example_size); borrowed from ex. */
const char *tfx_example_key(const tfx_example *ex, size_t i);
/* Looks up a feature: its kind and number of values. TFX_ENOTFOUND if there is none by that name. */
int tfx_example_find(const tfx_example *ex, const char *name, tfx_feature_kind *kind, size_t *count, tfx_err *err);
/* The values of a float_list feature; *values borrowed from ex (NULL when *n is 0). */
int tfx_example_floats(const tfx_example *ex, const char *name, const float **values, size_t *n, tfx_err *err);
/* The values of an int64_list feature; *values borrowed from ex (NULL when *n is 0). */
int tfx_example_int64s(const tfx_example *ex, const char *name, const int64_t **values, size_t *n, tfx_err *err);
/* The i-th value of a bytes_list feature; *data borrowed from ex (never NULL, not NUL-terminated). */
int tfx_example_bytes(const tfx_example *ex, const char *name, size_t i, const uint8_t **data, size_t *len,
                      tfx_err *err);
/* The proto name of a kind ("float_list"); static. */
const char *tfx_feature_kind_name(tfx_feature_kind kind);

typedef struct tfx_example_reader tfx_example_reader;

/* Opens a TFRecord file of Examples for reading in chunks (keys and scale as tfx_example_load); caller owns
 * *out; close with tfx_example_close. */
int tfx_example_open(const char *path, const char *feature_key, const char *label_key, double scale,
                     tfx_example_reader **out, tfx_err *err);
/* Reads up to max more Examples into a new dataset; caller owns *out (NULL at the end of the file). */
int tfx_example_read(tfx_example_reader *er, size_t max, tfx_dataset **out, tfx_err *err);
/* Closes the file and frees the reader; NULL does nothing. */
void tfx_example_close(tfx_example_reader *er);
/* Loads every Example of a TFRecord file into a dataset; caller owns *out; free with tfx_dataset_destroy.
 * x comes from `feature_key` (float_list or int64_list values, or the bytes of a one-value bytes_list read as
 * u8, e.g. raw pixels), multiplied by `scale`; every record must give as many values as the first. y comes from
 * `label_key`: one int64 (or integral float) value that fits in int32. */
int tfx_example_load(const char *path, const char *feature_key, const char *label_key, double scale, tfx_dataset **out,
                     tfx_err *err);

#endif
