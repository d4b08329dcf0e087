/* The rows of a checkpoint's lazy tables read in place: the row files (rowfile.h) of a checkpoint directory mapped
 * read-only and indexed by table and id, so a reader (predict, serve) copies only the rows a batch touches and never
 * holds a table whole. A checkpoint of checkpoint.incremental is read with its chain: the full files first, then each
 * delta's changed rows over them and its deleted ids taken out (every file of the chain stays mapped). Resident memory: the index, 16 bytes a stored row, plus the file pages read (clean, so the
 * kernel can drop them under pressure).
 *
 * A table is named by its variable: the shard keys of its partitions ("VAR/mod_K", "VAR/range_K"), on any ps, are
 * one table. Ownership: the caller owns the index (tfx_rowindex_close); rows are copied out. Thread-safety: read-only
 * after open, so any thread may look rows up. Errors: TFX_ESYS (open, mmap), TFX_ECORRUPT naming the file and what
 * does not fit (checked again here, although tfx_ckpt_verify checks the files' checksums), TFX_ENOMEM. */
#ifndef TFX_STORE_ROWINDEX_H
#define TFX_STORE_ROWINDEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct tfx_rowindex tfx_rowindex;

/* Maps and indexes the row files of checkpoint dir (ps-K.rows for K < n_ps, each with the chain of checkpoints it is
 * a delta of; a ps without one holds no rows); caller
 * owns *out (an index of no rows when there are none); close with tfx_rowindex_close. */
int tfx_rowindex_open(const char *dir, int n_ps, tfx_rowindex **out, tfx_err *err);
/* Copies the first width values of row id of the lazy table of variable var into out (width floats); 1 when the
 * checkpoint holds the row, 0 when it does not (out untouched: the row was never trained). */
int tfx_rowindex_get(const tfx_rowindex *x, const char *var, int64_t id, int width, float *out);
/* The number of rows indexed, and the bytes of the index (what the index costs beside the mapped files). */
size_t tfx_rowindex_rows(const tfx_rowindex *x);
size_t tfx_rowindex_bytes(const tfx_rowindex *x);
/* Unmaps the files and frees the index; NULL does nothing. */
void tfx_rowindex_close(tfx_rowindex *x);

#endif
