/* Checkpoint shard files and checkpoint directories.
 *
 * A shard file (one per ps per checkpoint, RUN/checkpoints/ckpt-NNNNNNNNNNNN/ps-<index>.shard) is binary, every
 * integer and float little-endian. The writer stores them as they are in memory, so ckpt.c refuses to compile
 * on a big-endian host (#error) rather than write files no other host could read.
 *   header  "TFXSHRD1" (8 bytes), u32 format version (1), u32 entry count, i64 step (the step the master asked
 *           for; a restore sets the ps's version to it)
 *   entry   u16 name length, name bytes (no NUL), u32 rank, i64 dims[rank] (the whole variable's shape, not the
 *           slice's), i64 row_begin, i64 row_end (the axis-0 slice this ps holds), u64 version, u64 nbytes,
 *           u32 crc32 (zlib) of the data, data
 *   trailer "TFXEND\0\0", u32 crc32 of every byte before the trailer
 * data holds only the slice, float32: nbytes = (row_end - row_begin) x dims[1] x ... x dims[rank-1] x 4.
 * version is the ps's version (updates applied to its variables) when it wrote the file, the same for every
 * entry; in async mode it may be past the header's step. The reader uses it for nothing.
 * Names are variable keys ("dense_1/kernel", "dense_1/kernel/part_1") or optimizer slots ("KEY@m", "KEY@v"),
 * each slot with its variable's rank, dims and rows. A ps restores an entry only into a shard of the same rank,
 * dims and rows; a missing slot starts at zero (PS-RESTORE-NO-SLOT).
 * The reader refuses (TFX_ECORRUPT, naming file and offset) a name of 160 bytes or more, a rank above 8, more
 * than 1,000,000 entries (or more than the file can hold), nbytes not a multiple of 4 or past the end, a data
 * or trailer checksum mismatch, and bytes after the trailer.
 * Files are written to NAME.tmp, fsync'ed and renamed, so a reader never sees a partial file.
 *
 * A checkpoint directory RUN/checkpoints/ckpt-%012lld/ (the step zero-padded to 12 digits, e.g.
 * ckpt-000000000200, so names sort by step) holds the shards and manifest.json, written last and atomically by
 * the master: {"step": S, "shards": [{"file": "ps-0.shard", "crc32": C, "bytes": B}, ...]}, where C and B are
 * the crc32 and size of the whole shard file, trailer included.
 * A checkpoint of lazy tables also holds ps-K.rows files (rowfile.h), listed under "rows" in the same form.
 * A checkpoint exists if and only if its manifest exists and every file it lists matches its size and checksum. */
#ifndef TFX_CKPT_H
#define TFX_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct tfx_ckpt_entry {
  char name[160];
  int rank;
  int64_t dims[8];
  int64_t row_begin, row_end;
  uint64_t version;
  size_t count; /* float32 elements */
  float *data;  /* borrowed when writing; owned by the tfx_ckpt when read */
} tfx_ckpt_entry;

typedef struct tfx_ckpt {
  int64_t step;
  int n;
  tfx_ckpt_entry *entries;
} tfx_ckpt;

/* One slice of a variable (rows [row_begin, row_end) of a tensor of `dims`) as it goes into a checkpoint: its
 * values and the optimizer's n_slots slot arrays, each of count floats (all borrowed). */
typedef struct tfx_ckpt_slice {
  const char *key;
  int rank;
  const int64_t *dims;
  int64_t row_begin, row_end;
  uint64_t version;
  size_t count;
  float *value;
  float *const *slots;
  int n_slots;
} tfx_ckpt_slice;

/* Fills e[0..1 + s->n_slots) with the slice's entries: its values named KEY, then each slot named KEY@SLOT (the
 * optimizer's slot names); the one place a checkpoint's list of tensors is built. Data borrowed. Returns the
 * number of entries filled. */
int tfx_ckpt_slice_entries(tfx_ckpt_entry *e, const tfx_ckpt_slice *s);
/* Writes a shard atomically (tmp, fsync, rename); entries are borrowed. *crc gets the file checksum. */
int tfx_ckpt_write(const char *path, int64_t step, const tfx_ckpt_entry *entries, int n, uint32_t *crc, uint64_t *bytes,
                   tfx_err *err);
/* Reads and verifies a shard; caller owns *out; free with tfx_ckpt_destroy. Errors name file and offset. */
int tfx_ckpt_read(const char *path, tfx_ckpt **out, tfx_err *err);
/* Frees a shard read by tfx_ckpt_read; NULL does nothing. */
void tfx_ckpt_destroy(tfx_ckpt *c);
/* Finds an entry by name (borrowed from c), or NULL. */
const tfx_ckpt_entry *tfx_ckpt_find(const tfx_ckpt *c, const char *name);
/* The crc32 and size of a whole file. */
int tfx_file_crc32(const char *path, uint32_t *crc, uint64_t *bytes, tfx_err *err);

/* The directory of the checkpoint at step (into out). */
void tfx_ckpt_dir(const char *run_dir, int64_t step, char *out, size_t n);
/* The directory of the checkpoint at step beside checkpoint directory dir (into out). */
void tfx_ckpt_sibling(const char *dir, int64_t step, char *out, size_t n);
/* Whether checkpoint directory dir was completed once (its manifest was written). */
int tfx_ckpt_has_manifest(const char *dir);
/* The least of `floor` and the steps of the checkpoints dir's row files are deltas of, link by link (a kept
 * checkpoint needs them all). */
int64_t tfx_ckpt_chain_floor(const char *dir, int64_t floor);
/* Writes dir/manifest.json atomically for n_ps shards named ps-K.shard, with their checksums. */
int tfx_ckpt_write_manifest(const char *dir, int64_t step, int n_ps, const uint32_t *crc, const uint64_t *bytes,
                            tfx_err *err);
/* The parts of a checkpoint directory, one of each per ps: a dense shard and the rows of lazy tables. */
typedef enum tfx_ckpt_part { TFX_CKPT_SHARD, TFX_CKPT_ROWS } tfx_ckpt_part;
/* Writes into out[n] the path of ps `ps`'s part in checkpoint dir ("DIR/ps-K.shard"; dir NULL: the bare file
 * name); the one place those names are made. Returns snprintf's length (>= n: cut). */
int tfx_ckpt_part_path(char *out, size_t n, const char *dir, int ps, tfx_ckpt_part part);
/* The ps whose part a file is, from its name (a path's last part, "ps-K.shard" or "ps-K.rows"), or -1 when the
 * name is not such a part. */
int tfx_ckpt_part_owner(const char *path, tfx_ckpt_part part);
/* As tfx_ckpt_write_manifest, with the row files of lazy tables (rowfile.h): "rows": [{"file": "ps-K.rows", ...}]
 * for every ps whose rows_bytes is nonzero; a checkpoint then exists only if they match too. */
int tfx_ckpt_write_manifest_rows(const char *dir, int64_t step, int n_ps, const uint32_t *crc, const uint64_t *bytes,
                                 const uint32_t *rows_crc, const uint64_t *rows_bytes, tfx_err *err);
/* Checks dir/manifest.json and every shard it lists; *n_ps gets the shard count. */
int tfx_ckpt_verify(const char *dir, int64_t *step, int *n_ps, tfx_err *err);
/* As tfx_ckpt_verify with full 1; with full 0 only each file's size is checked against the manifest, not its
 * bytes (a checkpoint whose manifest this process wrote from its writers' checksums: tfx_ckpt_memo_accept). */
int tfx_ckpt_check(const char *dir, int full, int64_t *step, int *n_ps, tfx_err *err);
/* The checkpoint a run resumes from: the newest complete one; each newer unusable one is named in a CKPT-SKIP
 * warning and set aside as ckpt-STEP.unusable (byte for byte, never written again). TFX_ENOTFOUND when the run has
 * none; TFX_ECORRUPT when it has some and none is usable (the run must not start over on top of them). */
int tfx_ckpt_resume_point(const char *run_dir, int64_t *step, char *dir, size_t n, tfx_err *err);
/* As tfx_ckpt_resume_point, without logging or moving anything: whether a resume would find a usable checkpoint
 * (TFX_OK, its step and dir), none (TFX_ENOTFOUND) or only unusable ones (TFX_ECORRUPT, naming the newest's fault). */
int tfx_ckpt_usable(const char *run_dir, int64_t *step, char *dir, size_t n, tfx_err *err);
/* The checkpoint a command that only reads (evaluate, export, predict, inspect) uses: as tfx_ckpt_usable, and each
 * newer unusable one named in a CKPT-SKIP warning, kept where it is; nothing on disk changes. */
int tfx_ckpt_read_point(const char *run_dir, int64_t *step, char *dir, size_t n, tfx_err *err);
/* The newest complete checkpoint of a run: its step and directory. TFX_ENOTFOUND when there is none. */
int tfx_ckpt_latest(const char *run_dir, int64_t *step, char *dir, size_t n, tfx_err *err);
/* As tfx_ckpt_verify (without the error), but a directory this process verified before and whose files (names,
 * inodes, sizes, mtimes) have not changed since is not read again (store/ckptmemo.h; pruning uses it). */
int tfx_ckpt_verify_once(const char *dir, int64_t *step, int *n_ps);
/* Removes all but the newest keep complete checkpoints (and the best one best.json names), and any incomplete
 * one older than a kept one that no kept checkpoint's chain of deltas needs. */
void tfx_ckpt_prune(const char *run_dir, int keep);

#endif
