/* Lazy embedding tables: a table declares up to 2^40 ids but holds only the rows that were touched. A row is made
 * on first touch with its initial values computed from (seed, table name, id) by the experiment's initializer at
 * the element offset id * dim, so any ps can recreate any row, and a row that was never touched reads as exactly
 * those values without being stored. Memory grows with the rows used: an open-addressing id -> row map (linear
 * probing, backward-shift deletion) over slabs of rows that never move (row pointers stay valid until the row is
 * evicted or the table destroyed). Each row holds its values and then n_slots optimizer slots of dim floats.
 *
 * A tfx_rowtable is owned by the ps thread that made it; not thread-safe. Errors: TFX_EINVAL (an id outside the
 * table, ids not strictly ascending), TFX_ENOMEM, naming the table and the id. */
#ifndef TFX_ROWTABLE_H
#define TFX_ROWTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define TFX_ROWTABLE_MAX_IDS ((int64_t)1 << 40)

typedef struct tfx_rowtable tfx_rowtable;

typedef struct tfx_rowtable_spec {
  const char *name;        /* the variable's name: part of every row's initial values */
  int64_t vocab;           /* ids are [0, vocab), vocab <= TFX_ROWTABLE_MAX_IDS */
  int dim;                 /* floats a row */
  int n_slots;             /* optimizer slots a row (0..2) */
  const char *init;        /* initializer spec (nn/init.h) */
  uint64_t seed;           /* the experiment seed */
  int64_t fan_in, fan_out; /* as the plan gives them for the whole table */
  float slot_init;         /* every slot element's initial value (Adagrad's initial accumulator, else 0) */
  int64_t max_rows;        /* a hard cap, at most vocab: a new row past it evicts the least recently used (0: none) */
  int track_gone;          /* remember the ids evicted since tfx_rowtable_mark (incremental checkpoints) */
  int64_t ttl_steps;       /* tfx_rowtable_expire drops rows untouched for this many steps (0: never) */
  int admit_min_count;     /* tfx_rowtable_update makes a row once its id came this many times (<= 1: at once) */
  double admit_probability; /* else with this probability per coming (>= 1: always) */
} tfx_rowtable_spec;

/* The admission sketch, fixed memory whatever the ids: a doorkeeper of two Bloom filters of
 * TFX_ROWTABLE_DOOR_BITS bits (8 hashes) takes an id's first coming (the current filter is cleared into the other's
 * place every DOOR_BITS / 12 new ids: an id is remembered for between that many and twice as many new ids on its
 * ps, about 0.5% false positives), then with admit_min_count > 2 a count-min of TFX_ROWTABLE_SKETCH_DEPTH rows of
 * TFX_ROWTABLE_SKETCH_WIDTH saturating 16-bit counters counts the comings after it. */
#define TFX_ROWTABLE_DOOR_BITS ((size_t)1 << 21)
#define TFX_ROWTABLE_SKETCH_DEPTH 4
#define TFX_ROWTABLE_SKETCH_WIDTH 16384
#define TFX_ROWTABLE_SKETCH_BYTES \
  (2 * TFX_ROWTABLE_DOOR_BITS / 8 + TFX_ROWTABLE_SKETCH_DEPTH * TFX_ROWTABLE_SKETCH_WIDTH * 2)

/* What a table did in its life: rows made and rows evicted (by the cap or by age). */
typedef struct tfx_rowtable_counts {
  uint64_t made, evicted, refused; /* refused: updates of ids not (yet) admitted, dropped */
} tfx_rowtable_counts;

/* Makes an empty table; the spec's strings are copied. Caller owns *out; free with tfx_rowtable_destroy. */
int tfx_rowtable_create(const tfx_rowtable_spec *spec, tfx_rowtable **out, tfx_err *err);
/* Frees the table and every row; NULL does nothing. */
void tfx_rowtable_destroy(tfx_rowtable *t);
/* Checks a push's or pull's ids: each in [0, vocab) and strictly ascending (no duplicate); names table and id. */
int tfx_rowtable_check_ids(const tfx_rowtable *t, const int64_t *ids, size_t n, tfx_err *err);
/* The row of id (values, then the slots), made with its initial values on first touch, marked as touched at step.
 * Borrowed: valid until the row is evicted or the table destroyed. NULL when out of memory. */
float *tfx_rowtable_touch(tfx_rowtable *t, int64_t id, int64_t step);
/* The row of id for an update at step, as tfx_rowtable_touch, but a new id is admitted first (admit_min_count,
 * admit_probability): NULL with *refused 1 while it is not (the update is dropped), NULL with *refused 0 when out
 * of memory. */
float *tfx_rowtable_update(tfx_rowtable *t, int64_t id, int64_t step, int *refused);
/* With ttl_steps, drops the rows untouched for ttl_steps at step `now` (the scan runs every ttl_steps / 4 steps at
 * most); returns how many were dropped. */
size_t tfx_rowtable_expire(tfx_rowtable *t, int64_t now);
/* The step id's row was last touched, or -1 when it is not stored. */
int64_t tfx_rowtable_touched(const tfx_rowtable *t, int64_t id);
/* The step of the table's last age scan (ttl_steps), and its setter (a backup takes its primary's). */
int64_t tfx_rowtable_scanned(const tfx_rowtable *t);
void tfx_rowtable_set_scanned(tfx_rowtable *t, int64_t step);
/* The stored row of id, or NULL when it was never touched (or evicted). Borrowed as for tfx_rowtable_touch. */
float *tfx_rowtable_find(const tfx_rowtable *t, int64_t id);
/* Adds g (row_floats of them) into the row of id, made on first touch as zeros plus g, bit for bit what
 * tfx_rowtable_touch of a zeros table and a sum would give, without filling it first (a sync step's sums).
 * -1 when out of memory. */
int tfx_rowtable_add(tfx_rowtable *t, int64_t id, const float *g);
/* Writes id's dim values into out: the stored row's, else its initial values (nothing is stored); with admission,
 * an id without a row reads as zeros (the empty bag). */
void tfx_rowtable_read(const tfx_rowtable *t, int64_t id, float *out);
/* The ids the table declares: [0, vocab). */
int64_t tfx_rowtable_vocab(const tfx_rowtable *t);
/* Rows stored now. */
size_t tfx_rowtable_rows(const tfx_rowtable *t);
/* Bytes held by rows, the map and the slabs' bookkeeping. */
size_t tfx_rowtable_bytes(const tfx_rowtable *t);
/* Floats a row holds: dim * (1 + n_slots). */
size_t tfx_rowtable_row_floats(const tfx_rowtable *t);
/* Calls fn(id, row, ctx) for every stored row, in no particular order; stops at and returns fn's first nonzero. */
int tfx_rowtable_each(const tfx_rowtable *t, int (*fn)(int64_t id, const float *row, void *ctx), void *ctx);
/* Stores a whole row (values and slots, row_floats of them) for id, as a restore does; id must be in range. */
int tfx_rowtable_put(tfx_rowtable *t, int64_t id, const float *row, tfx_err *err);
/* Drops every row last touched before step `before`; returns how many. An evicted row reads as its initial
 * values again. */
size_t tfx_rowtable_evict(tfx_rowtable *t, int64_t before);
/* Rows made and evicted so far. */
tfx_rowtable_counts tfx_rowtable_get_counts(const tfx_rowtable *t);
/* Calls fn(id, row, ctx) for every stored row touched at step `since` or later (the rows changed since a
 * checkpoint taken at `since`); stops at and returns fn's first nonzero. */
int tfx_rowtable_each_since(const tfx_rowtable *t, int64_t since, int (*fn)(int64_t id, const float *row, void *ctx),
                            void *ctx);
/* Rows stored now that were touched at step `since` or later. */
size_t tfx_rowtable_rows_since(const tfx_rowtable *t, int64_t since);
/* The ids evicted since the last tfx_rowtable_mark (with track_gone) into *ids (borrowed until the next change)
 * and *n; -1 when memory ran out remembering one or a capped table evicted more than max_rows / 2 since (a delta
 * cannot be written: the next checkpoint must be full). */
int tfx_rowtable_gone(const tfx_rowtable *t, const int64_t **ids, size_t *n);
/* A checkpoint of the table was written at step (full, or a delta): forgets the evicted ids remembered so far. */
void tfx_rowtable_mark(tfx_rowtable *t, int64_t step, int full);
/* The step of the last checkpoint marked (-1: none since the table was made) and the deltas written since the last
 * full one, into *deltas. */
int64_t tfx_rowtable_marked(const tfx_rowtable *t, int *deltas);
/* Drops the row of id if stored (a checkpoint delta's deletion); nothing otherwise. */
void tfx_rowtable_drop(tfx_rowtable *t, int64_t id);
/* Stores a whole row as tfx_rowtable_put does, marked as touched at step. */
int tfx_rowtable_put_at(tfx_rowtable *t, int64_t id, const float *row, int64_t step, tfx_err *err);
/* Drops every row at once, keeping the memory for the rows made next (a sync step's sums: O(map), not O(rows)
 * probes). */
void tfx_rowtable_clear(tfx_rowtable *t);
/* A hint for a loop over known ids: stage 0 asks the memory system for id's map cell; a few ids later, with that
 * cell at hand, stage 1 (an update) for every cache line of its row and its touch mark, stage 2 (a read) for the
 * lines of its values only. Changes nothing; any id may be given. */
void tfx_rowtable_prefetch(const tfx_rowtable *t, int64_t id, int stage);

#endif
