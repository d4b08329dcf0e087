/* IDX files (the MNIST family, plain or gzip through zlib): a whole file, an images/labels pair as a dataset,
 * the pair in chunks (streaming), or one worker's shard kept as bytes. Errors (TFX_ENOTFOUND, TFX_ESYS,
 * TFX_ECORRUPT, TFX_ESHAPE, TFX_ENOMEM) name the file and the byte offset. A reader is used by one thread. */
#ifndef TFX_IDX_H
#define TFX_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "data/dataset.h"

/* Reads an IDX file (u8 data, any rank); caller owns *data (free()); dims[0..*rank) get the shape. */
int tfx_idx_read(const char *path, uint8_t **data, int *rank, int64_t dims[4], tfx_err *err);
/* Loads images and labels IDX files, scaling pixels by `scale`; caller owns *out; free with
 * tfx_dataset_destroy. The images' per-example size must equal expect_dim (0: any). */
int tfx_dataset_load_idx(const char *images, const char *labels, double scale, size_t expect_dim, tfx_dataset **out,
                         tfx_err *err);
typedef struct tfx_idx_reader tfx_idx_reader;

/* Opens an images/labels IDX pair for reading in chunks (headers checked now); caller owns *out; close with
 * tfx_idx_close. */
int tfx_idx_open(const char *images, const char *labels, double scale, size_t expect_dim, tfx_idx_reader **out,
                 tfx_err *err);
/* Reads up to max more examples into a new dataset; caller owns *out (NULL after the last example). */
int tfx_idx_read_chunk(tfx_idx_reader *r, size_t max, tfx_dataset **out, tfx_err *err);
/* The number of examples the headers declare (only the headers are read, gzip or not). */
size_t tfx_idx_count(const tfx_idx_reader *r);
/* Closes both files and frees the reader; NULL does nothing. */
void tfx_idx_close(tfx_idx_reader *r);
/* Loads a worker's shard of an IDX training set (records i with i % count == index) as bytes (x8), converted per
 * batch with data.scale, data.mean and data.std: a quarter of float32's memory, and only the shard's. Caller
 * owns *out; feed it to tfx_batcher_create_shard with the same index and count. */
int tfx_dataset_load_idx_shard(const char *images, const char *labels, double scale, double mean, double std,
                               size_t expect_dim, int index, int count, tfx_dataset **out, tfx_err *err);

#endif
