/* Feature columns (model.features) over CSV records with a header (or TFRecord Examples, below): each categorical
 * column (identity, hash, crossed; one value or a bag of values split at its separator, optionally weighted by a second
 * column) becomes one sparse field of the dataset, in the order declared; the numeric columns are its dense part, in
 * order. Hashes are xxHash's XXH3-64 with seed 0 of the value's text (a crossed tuple: of each value with its NUL),
 * modulo hash_bucket_size: the same on every machine and every run.
 *
 * Ownership: the dataset is the caller's (tfx_dataset_destroy). Errors: TFX_ENOTFOUND / TFX_ESYS (open, read),
 * TFX_ECONFIG (a column the features or the label name is not in the header), TFX_ECORRUPT naming the file, line
 * and column (an id that is not an integer or is outside num_buckets, a weight or number that is not finite, an
 * empty required cell, a label that is not an integer, a row of another width, no rows), TFX_ENOMEM. */
#ifndef TFX_COLUMNS_H
#define TFX_COLUMNS_H

#include "config/config.h"
#include "data/dataset.h"

/* Loads path (CSV with a header) through cfg's feature columns; caller owns *out. */
int tfx_columns_load_csv(const tfx_config *cfg, const char *path, tfx_dataset **out, tfx_err *err);
/* Loads path (TFRecord of tf.train.Example) through cfg's feature columns: each column's key names a feature,
 * whose list is always a bag (bytes_list values hashed as their bytes, int64_list as decimal text, identity ids
 * from int64_list; float_list as weights or the one value of a numeric column; a missing feature is an empty
 * bag, or default_value); the label is data.label_key's int64. Errors name the record (1-based). Caller owns
 * *out. */
int tfx_columns_load_tfrecord(const tfx_config *cfg, const char *path, tfx_dataset **out, tfx_err *err);

/* Feature columns read a chunk at a time (streaming): the file's format is cfg's data.format (csv or tfrecord). */
typedef struct tfx_columns_reader tfx_columns_reader;

/* Opens path and resolves the columns (checked now); caller owns *out; close with tfx_columns_close. */
int tfx_columns_open(const tfx_config *cfg, const char *path, tfx_columns_reader **out, tfx_err *err);
/* Reads up to max more records into a new dataset; caller owns *out (NULL at the end of the file). */
int tfx_columns_read(tfx_columns_reader *c, size_t max, tfx_dataset **out, tfx_err *err);
/* Closes the file and frees the reader; NULL does nothing. */
void tfx_columns_close(tfx_columns_reader *c);

#endif
