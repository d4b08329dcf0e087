/* Row files: the rows of lazy embedding tables in a checkpoint (RUN/checkpoints/ckpt-N/ps-K.rows), written and
 * read as a stream, so a ps never holds a second copy of a table to save or restore it.
 *
 * Little-endian, as shard files (ckpt.h):
 *   header  "TFXROWS1", u32 format version (1), u32 table count, i64 step
 *   table   u16 name length, name (the shard key, no NUL), i64 ids (the ids the table declares), u32 row floats
 *           (values then optimizer slots), u64 row count, then that many rows: i64 id, float32[row floats]
 *   trailer "TFXEND\0\0", u32 crc32 (zlib) of every byte before the trailer
 * The reader refuses (TFX_ECORRUPT, naming the file and what is wrong) a name of 160 bytes or more, a row of
 * more than 2^20 floats, more rows than the file holds or the table declares, an id outside [0, ids), a checksum
 * mismatch and bytes after the trailer. Files are written to NAME.tmp, fsync'ed and renamed. */
#ifndef TFX_STORE_ROWFILE_H
#define TFX_STORE_ROWFILE_H

#include <stdint.h>

#include "common/err.h"

typedef struct tfx_rowfile tfx_rowfile;

/* Starts writing path (as path.tmp) for n_tables tables at step. Caller owns *out: end it with
 * tfx_rowfile_finish or tfx_rowfile_abort. */
int tfx_rowfile_create(const char *path, int64_t step, int n_tables, tfx_rowfile **out, tfx_err *err);
/* Starts the next table: its key, declared ids, floats a row and the number of rows that follow. */
int tfx_rowfile_table(tfx_rowfile *w, const char *name, int64_t ids, int row_floats, uint64_t n_rows, tfx_err *err);
/* Appends one row (row_floats floats, borrowed) of the current table. */
int tfx_rowfile_row(tfx_rowfile *w, int64_t id, const float *row, tfx_err *err);
/* Writes the trailer, fsyncs and renames into place; *crc and *bytes get the whole file's checksum and size.
 * Frees w whatever happens (on failure the .tmp is removed). */
int tfx_rowfile_finish(tfx_rowfile *w, uint32_t *crc, uint64_t *bytes, tfx_err *err);
/* Drops a file being written (the .tmp is removed) and frees w; NULL does nothing. */
void tfx_rowfile_abort(tfx_rowfile *w);

/* Called for every row read: the table's key, declared ids and floats a row, the row's id and values
 * (borrowed until the call returns). A nonzero return stops the read with that code. */
typedef int (*tfx_rowfile_fn)(const char *table, int64_t ids, int row_floats, int64_t id, const float *row, void *ctx);
/* Reads path as a stream, calling fn for each row; the checksum is checked at the end, so a caller that must not
 * act on a corrupt file applies the rows to state it drops on error. *step gets the header's step. */
int tfx_rowfile_read(const char *path, tfx_rowfile_fn fn, void *ctx, int64_t *step, tfx_err *err);

#endif
