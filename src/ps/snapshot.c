/* A checkpoint's copy: the ps's dense shards (values and slots) and lazy tables' rows as of one step, taken in the
 * ps's thread (memcpy) and written from the copy by the checkpoint writer thread (ckpt.c), so the ps goes on
 * stepping while the files are checksummed, written and fsync'ed. The files are the bytes the ps would have
 * written in place at that step (the same entries, the same rows in the same order). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "common/log.h"
#include "ps/ps_impl.h"
#include "ps/rowtable.h"
#include "store/ckpt.h"
#include "store/rowfile.h"

/* One lazy table's rows as of the step: all of them, or (a delta) those touched since the parent and the ids
 * evicted since it. */
typedef struct snap_table {
  char key[128];
  int64_t ids;
  int row_floats;
  size_t n_rows, n_gone;
  int64_t *row_ids; /* n_rows */
  float *rows;      /* n_rows x row_floats */
  int64_t *gone;    /* n_gone */
  size_t n_live;    /* the table's rows (logged) */
  tfx_rowtable_counts counts;
} snap_table;

struct ps_snap {
  int64_t step, parent; /* parent: the step the row file is a delta of, or -1 */
  int index, fp16;
  char dir[1100];
  tfx_ckpt_entry *e; /* the dense entries, their data in dense */
  int n;
  float *dense;
  snap_table *t;
  int n_tables;
};

void ps__snap_free(ps_snap *s) {
  if (!s) {
    return;
  }
  for (int i = 0; i < s->n_tables; i++) {
    free(s->t[i].row_ids);
    free(s->t[i].rows);
    free(s->t[i].gone);
  }
  free(s->t);
  free(s->e);
  free(s->dense);
  free(s);
}

/* The dense shards' entries, their values and slots copied into one buffer. */
static int take_dense(const ps_state *p, ps_snap *s) {
  int ns = tfx_optim_slots(&p->opt);
  size_t floats = 0;
  for (int i = 0; i < p->n_shards; i++) {
    floats += p->shards[i].table ? 0 : p->shards[i].count * (size_t)(1 + ns);
  }
  s->e = calloc((size_t)p->n_shards * 3 + 1, sizeof *s->e);
  s->dense = malloc(floats ? floats * sizeof(float) : 4);
  if (!s->e || !s->dense) {
    return TFX_ENOMEM;
  }
  float *at = s->dense;
  for (int i = 0; i < p->n_shards; i++) {
    const shard *h = &p->shards[i];
    if (h->table) {
      continue; /* lazy tables go to the row file */
    }
    float *copy[3] = {at, NULL, NULL};
    for (int k = 0; k <= ns; k++) {
      copy[k] = at + (size_t)k * h->count;
      const float *from = k ? h->slots[k - 1] : h->value->data;
      if (h->count && from) {
        memcpy(copy[k], from, h->count * sizeof(float));
      }
    }
    at += h->count * (size_t)(1 + ns);
    tfx_ckpt_slice slice = {.key = h->key,
                            .rank = h->rank,
                            .dims = h->shape,
                            .row_begin = h->row_begin,
                            .row_end = h->row_end,
                            .version = (uint64_t)p->version,
                            .count = h->count,
                            .value = copy[0],
                            .slots = copy + 1,
                            .n_slots = ns};
    s->n += tfx_ckpt_slice_entries(&s->e[s->n], &slice);
  }
  return TFX_OK;
}

static int copy_row(int64_t id, const float *row, void *ctx) {
  snap_table *t = ctx;
  t->row_ids[t->n_rows] = id;
  memcpy(t->rows + t->n_rows * (size_t)t->row_floats, row, (size_t)t->row_floats * sizeof(float));
  t->n_rows++;
  return 0;
}

/* One lazy table's rows (all, or since parent with the evicted ids) into t. */
static int take_table(const shard *h, int64_t parent, snap_table *t) {
  const tfx_rowtable *rt = h->table;
  snprintf(t->key, sizeof t->key, "%s", h->key);
  t->ids = h->shape[0];
  t->row_floats = (int)tfx_rowtable_row_floats(rt);
  t->n_live = tfx_rowtable_rows(rt);
  t->counts = tfx_rowtable_get_counts(rt);
  size_t n = parent < 0 ? t->n_live : tfx_rowtable_rows_since(rt, parent);
  const int64_t *gone = NULL;
  if (parent >= 0) {
    tfx_rowtable_gone(rt, &gone, &t->n_gone);
  }
  t->row_ids = malloc(n ? n * sizeof(int64_t) : 8);
  t->rows = malloc(n ? n * (size_t)t->row_floats * sizeof(float) : 4);
  t->gone = malloc(t->n_gone ? t->n_gone * sizeof(int64_t) : 8);
  if (!t->row_ids || !t->rows || !t->gone) {
    return TFX_ENOMEM;
  }
  if (t->n_gone) {
    memcpy(t->gone, gone, t->n_gone * sizeof(int64_t));
  }
  return parent < 0 ? tfx_rowtable_each(rt, copy_row, t) : tfx_rowtable_each_since(rt, parent, copy_row, t);
}

/* The lazy tables' rows; once copied, the tables' next delta starts from this step (as after a write in place). */
static int take_tables(ps_state *p, ps_snap *s) {
  for (int i = 0; i < p->n_shards; i++) {
    s->n_tables += p->shards[i].table != NULL;
  }
  if (!s->n_tables) {
    return TFX_OK;
  }
  s->parent = ps__lazy_parent(p, s->dir, s->step);
  s->t = calloc((size_t)s->n_tables, sizeof *s->t);
  if (!s->t) {
    return TFX_ENOMEM;
  }
  for (int i = 0, k = 0; i < p->n_shards; i++) {
    if (p->shards[i].table && take_table(&p->shards[i], s->parent, &s->t[k++])) {
      return TFX_ENOMEM;
    }
  }
  for (int i = 0; i < p->n_shards; i++) {
    if (p->shards[i].table) {
      tfx_rowtable_mark(p->shards[i].table, s->step, s->parent < 0);
    }
  }
  p->ckpt_full_next = 0;
  return TFX_OK;
}

int ps__snap_take(ps_state *p, const char *dir, int64_t step, ps_snap **out, tfx_err *err) {
  *out = NULL;
  ps_snap *s = calloc(1, sizeof *s);
  if (!s) {
    return tfx_err_set(err, TFX_ENOMEM, "checkpoint at step %lld: out of memory for its copy", (long long)step);
  }
  s->step = step;
  s->parent = -1;
  s->index = p->index;
  s->fp16 = p->cfg.ckpt_fp16;
  snprintf(s->dir, sizeof s->dir, "%s", dir);
  if (take_dense(p, s) || take_tables(p, s)) {
    ps__snap_free(s); /* nothing marked: tables are marked only once every copy was made */
    return tfx_err_set(err, TFX_ENOMEM, "checkpoint at step %lld: out of memory for its copy", (long long)step);
  }
  *out = s;
  return TFX_OK;
}

/* One table's rows into the row file w. */
static int write_table(tfx_rowfile *w, const snap_table *t, int64_t parent, tfx_err *err) {
  int rc = parent < 0 ? tfx_rowfile_table(w, t->key, t->ids, t->row_floats, t->n_rows, err)
                      : tfx_rowfile_table_delta(w, t->key, t->ids, t->row_floats, t->gone, t->n_gone, t->n_rows, err);
  for (size_t r = 0; r < t->n_rows && !rc; r++) {
    rc = tfx_rowfile_row(w, t->row_ids[r], t->rows + r * (size_t)t->row_floats, err);
  }
  return rc;
}

static int write_rows(const ps_snap *s, ps_ckpt_sums *sums, tfx_err *err) {
  char path[1300];
  tfx_ckpt_part_path(path, sizeof path, s->dir, s->index, TFX_CKPT_ROWS);
  tfx_rowfile *w;
  int rc = tfx_rowfile_create_as(path, s->step, s->parent, s->n_tables, s->fp16 ? TFX_ROWFILE_FP16 : 0, &w, err);
  if (rc) {
    return rc;
  }
  for (int i = 0; i < s->n_tables && !rc; i++) {
    rc = write_table(w, &s->t[i], s->parent, err);
  }
  if (rc) {
    tfx_rowfile_abort(w);
    return rc;
  }
  return tfx_rowfile_finish(w, &sums->rows_crc, &sums->rows_bytes, err);
}

int ps__snap_write(const ps_snap *s, char *path, size_t n, ps_ckpt_sums *sums, tfx_err *err) {
  tfx_ckpt_part_path(path, n, s->dir, s->index, TFX_CKPT_SHARD);
  int rc = tfx_mkdirs(s->dir, err);
  if (!rc) {
    rc = tfx_ckpt_write(path, s->step, s->e, s->n, &sums->crc, &sums->bytes, err);
  }
  if (!rc && s->n_tables) {
    rc = write_rows(s, sums, err);
  }
  return rc;
}

void ps__snap_log(const ps_snap *s, const ps_ckpt_sums *sums, double ms) {
  for (int i = 0; i < s->n_tables; i++) {
    const snap_table *t = &s->t[i];
    tfx_log(TFX_LOG_INFO, "PS-TABLE",
            "table %s at step %lld: %zu rows, %llu made, %llu evicted, %llu updates of ids not admitted; "
            "checkpoint %s, row file %llu bytes written in %.3f ms (by the writer thread)",
            t->key, (long long)s->step, t->n_live, (unsigned long long)t->counts.made,
            (unsigned long long)t->counts.evicted, (unsigned long long)t->counts.refused,
            s->parent < 0 ? "full" : "delta", (unsigned long long)sums->rows_bytes, ms);
  }
}
