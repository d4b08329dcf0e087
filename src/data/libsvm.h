/* LibSVM / SVMlight sparse text datasets: one example per line, "label idx:val idx:val ...".
 *
 * Indices are 1-based and strictly ascending within a line; absent features are 0. The label is an integer
 * (written "+1", "3" or "3.0") stored as is, a negative one refused (every negative int32 is a label set,
 * common/labelset.h: LibSVM's -1 would be a set of every class; map -1/+1 to 0/1). A "#" starts a comment to the
 * end of the line, "qid:N" tokens are skipped, blank lines are ignored. dim is the number of features: given,
 * then an index above it is an error; or 0, then it is the largest index in the file. The rows are kept sparse
 * while reading and made dense ([n, dim] floats) at the end.
 *
 * Ownership: the dataset is the caller's (tfx_dataset_destroy). Thread-safety: no shared state. Errors:
 * TFX_EINVAL (NULL arguments), TFX_ENOTFOUND / TFX_ESYS (open, read), TFX_ECORRUPT (a NUL byte, a line longer than
 * TFX_LIBSVM_MAX_LINE, a bad label, token, index or value, indices out of order, no rows; the message names the
 * file, the 1-based line and byte column, and at most a short escaped prefix of a bad token),
 * TFX_ESHAPE (an index above the given dim), TFX_ECONFIG (dim 0 and no index to infer it from), TFX_ENOMEM. */
#ifndef TFX_LIBSVM_H
#define TFX_LIBSVM_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "data/dataset.h"

/* The longest line read (bytes, its newline included): a longer one is refused, never held whole. */
#define TFX_LIBSVM_MAX_LINE (64 << 20)

typedef struct tfx_libsvm_reader tfx_libsvm_reader;

/* Opens a LibSVM file for reading in chunks (dim 0: each chunk's width is its largest index; give dim when
 * streaming); caller owns *out; close with tfx_libsvm_close. */
int tfx_libsvm_open(const char *path, size_t dim, tfx_libsvm_reader **out, tfx_err *err);
/* Reads up to max more examples into a new dataset; caller owns *out (NULL at the end of the file). */
int tfx_libsvm_read(tfx_libsvm_reader *r, size_t max, tfx_dataset **out, tfx_err *err);
/* Closes the file and frees the reader; NULL does nothing. */
void tfx_libsvm_close(tfx_libsvm_reader *r);
/* Counts the examples of a LibSVM file without parsing them: its lines with a token outside a comment (the
 * reader's rules); *n is written on success. */
int tfx_libsvm_count(const char *path, int64_t *n, tfx_err *err);
/* The 1-based line of example `index` (0-based, the reader's rules) into *line; TFX_ENOTFOUND past the end. */
int tfx_libsvm_line_of(const char *path, size_t index, size_t *line, tfx_err *err);
/* Loads a LibSVM file with dim features (0: inferred); caller owns *out; free with tfx_dataset_destroy. */
int tfx_libsvm_load(const char *path, size_t dim, tfx_dataset **out, tfx_err *err);
/* Reads up to max more examples into a new sparse dataset (as tfx_libsvm_load_sparse); caller owns *out (NULL
 * at the end of the file). */
int tfx_libsvm_read_sparse(tfx_libsvm_reader *r, size_t max, tfx_dataset **out, tfx_err *err);
/* Loads a LibSVM file as a sparse dataset (sp_off, sp_ids 0-based, sp_vals; x NULL) with dim features (0:
 * inferred): memory grows with the nonzeros, not with dim. Caller owns *out; free with tfx_dataset_destroy. */
int tfx_libsvm_load_sparse(const char *path, size_t dim, tfx_dataset **out, tfx_err *err);

#endif
