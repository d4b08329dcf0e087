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
 * mismatch and bytes after the trailer. Files are written to NAME.tmp, fsync'ed and renamed.
 *
 * Format 2 is a delta (checkpoint.incremental): the rows changed since the checkpoint at the parent step and the
 * ids dropped since (evicted), to apply on top of that checkpoint's file of the same ps:
 *   header  "TFXROWS1", u32 format version (2), u32 table count, i64 step, i64 parent step
 *   table   as format 1, with u64 deleted count and that many i64 ids between the row size and the row count
 * A reader gives each deleted id to its function with no row (NULL), before the table's rows.
 *
 * checkpoint.fp16 (TFX_ROWFILE_FP16): the format word has bit 0x100 set (0x101, 0x102) and each row's floats are
 * IEEE half, 2 bytes each (round to nearest even, saturating at +-65504); readers widen them to float. */
#ifndef TFX_STORE_ROWFILE_H
#define TFX_STORE_ROWFILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct tfx_rowfile tfx_rowfile;

/* Starts writing path (as path.tmp) for n_tables tables at step. Caller owns *out: end it with
 * tfx_rowfile_finish or tfx_rowfile_abort. */
int tfx_rowfile_create(const char *path, int64_t step, int n_tables, tfx_rowfile **out, tfx_err *err);
/* Starts the next table: its key, declared ids, floats a row and the number of rows that follow. */
int tfx_rowfile_table(tfx_rowfile *w, const char *name, int64_t ids, int row_floats, uint64_t n_rows, tfx_err *err);
/* As tfx_rowfile_create, a delta (format 2) of the checkpoint at step `parent` (parent < 0: a full file). */
int tfx_rowfile_create_delta(const char *path, int64_t step, int64_t parent, int n_tables, tfx_rowfile **out,
                             tfx_err *err);
/* As tfx_rowfile_table, with the ids deleted since the parent (borrowed; a delta only). */
int tfx_rowfile_table_delta(tfx_rowfile *w, const char *name, int64_t ids, int row_floats, const int64_t *deleted,
                            uint64_t n_deleted, uint64_t n_rows, tfx_err *err);
/* tfx_rowfile_create_as flags: rows stored as IEEE half. */
#define TFX_ROWFILE_FP16 1u
/* As tfx_rowfile_create_delta, with flags (TFX_ROWFILE_FP16 or 0). */
int tfx_rowfile_create_as(const char *path, int64_t step, int64_t parent, int n_tables, unsigned flags,
                          tfx_rowfile **out, tfx_err *err);
/* Converts n floats to IEEE half: round to nearest even, saturating at +-65504, NaN kept. */
void tfx_rowfile_to_half(const float *in, uint16_t *out, size_t n);
/* Widens n IEEE halves to floats (exactly). */
void tfx_rowfile_from_half(const uint16_t *in, float *out, size_t n);
/* 1 when path is a row file of halves, 0 when of floats, -1 when it cannot be read. */
int tfx_rowfile_is_fp16(const char *path);
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
/* A row file's step and parent step (-1: a full file), from its header. */
int tfx_rowfile_parent(const char *path, int64_t *step, int64_t *parent, tfx_err *err);
/* Reads ps `ps`'s row file of checkpoint dir as tfx_rowfile_read does, after those of the checkpoints it is a delta
 * of (base first), so fn sees the rows as they stood at dir's step. TFX_ECORRUPT when a link is gone. */
int tfx_rowfile_read_chain(const char *dir, int ps, tfx_rowfile_fn fn, void *ctx, tfx_err *err);
/* The oldest parent step any row file of checkpoint dir names (-1: every file is full); what it needs kept. */
int64_t tfx_rowfile_base(const char *dir);
/* Reads path as a stream, calling fn for each row (row NULL: a delta's deleted id); the checksum is checked at the end, so a caller that must not
 * act on a corrupt file applies the rows to state it drops on error. *step gets the header's step. */
int tfx_rowfile_read(const char *path, tfx_rowfile_fn fn, void *ctx, int64_t *step, tfx_err *err);

#endif
