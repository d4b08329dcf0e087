/* Lazy tables: a plan shard marked lazy is an embedding table held by rows (ps/rowtable.h), never dense. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "nn/init.h"
#include "ps/ps_impl.h"
#include "ps/rowtable.h"
#include "store/ckpt.h"
#include "store/rowfile.h"

_Static_assert(TFX_ROWTABLE_SKETCH_BYTES == TFX_TABLE_SKETCH_BYTES, "the sketch size plan states is the ps's");

/* This process's resident memory in MiB (/proc/self/statm), or -1 where it cannot be read. */
static double rss_mib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = -1, resident = -1;
  int got = f ? fscanf(f, "%ld %ld", &pages, &resident) : 0;
  if (f) {
    fclose(f);
  }
  return got == 2 ? (double)resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0 : -1;
}

/* PS-TABLE-CAP: the cap, the most the table may hold (tfx_table_cap_bound, as plan states it), its age limit and
 * admission, and the ps's RSS before the table holds a row (what the cap's memory comes on top of). */
static void log_cap(const ps_state *p, const char *var, const tfx_layer_spec *l, int64_t dim, int n_slots) {
  size_t row = tfx_table_row_bytes(dim, n_slots);
  tfx_table_bound b = {0};
  if (l->max_rows) {
    tfx_table_cap_bound(l->max_rows, dim, n_slots, l->admit_min_count > 1, p->cfg.ckpt_incremental,
                        p->cfg.ckpt_background, &b);
  }
  const double mib = 1048576.0;
  tfx_log(TFX_LOG_INFO, "PS-TABLE-CAP",
          "table %s: max_rows %lld (about %.1f MiB of rows at %zu bytes a row, 0: no cap), ttl_steps %lld, "
          "admission sketch %zu KiB; at most %.2f MiB (rows %.2f, map %.2f, evicted ids %.2f, sketch %.2f, checkpoint "
          "copy %.2f) over an RSS of %.1f MiB now",
          var, (long long)l->max_rows, (double)l->max_rows * (double)row / mib, row, (long long)l->ttl_steps,
          l->admit_min_count > 1 ? TFX_ROWTABLE_SKETCH_BYTES / 1024 : (size_t)0, b.total / mib, b.rows / mib,
          b.map / mib, b.gone / mib, b.sketch / mib, b.copy / mib, rss_mib());
}

/* The row table of a lazy shard: the plan's shape and initializer, the layer's cap, age limit and admission. */
static int make_table(ps_state *p, shard *s, const Tfx__Shard *m, const char *init, tfx_err *err) {
  tfx_rowtable_spec spec = {.name = s->var,
                            .vocab = m->shape[0],
                            .dim = (int)m->shape[1],
                            .n_slots = tfx_optim_slots(&p->opt),
                            .init = init,
                            .seed = (uint64_t)p->cfg.seed,
                            .fan_in = m->fan_in,
                            .fan_out = m->fan_out,
                            .track_gone = p->cfg.ckpt_incremental};
  const tfx_layer_spec *l = tfx_config_table_layer(&p->cfg, s->var);
  if (l) {
    spec.max_rows = l->max_rows;
    spec.ttl_steps = l->ttl_steps;
    spec.admit_min_count = l->admit_min_count;
    spec.admit_probability = l->admit_probability;
  }
  if (l && (l->max_rows || l->admit_min_count > 1)) {
    log_cap(p, s->var, l, m->shape[1], spec.n_slots);
  }
  return tfx_rowtable_create(&spec, &s->table, err);
}

int ps__lazy_make(ps_state *p, shard *s, const Tfx__Shard *m, tfx_err *err) {
  const char *init = m->init && *m->init ? m->init : "zeros";
  int whole = m->row_begin == 0 && m->row_end == m->shape[0];
  if (m->n_shape != 2 || m->row_begin < 0 || m->row_end > m->shape[0] || m->row_begin >= m->row_end || m->mod_n < 0 ||
      (m->mod_n > 1 && (!whole || m->mod_r < 0 || m->mod_r >= m->mod_n))) {
    return tfx_err_set(
        err, TFX_EPROTO, "plan shard '%.64s': a lazy table is [ids, dim], its ids %% %lld == %lld or ids %lld..%lld",
        m->key, (long long)m->mod_n, (long long)m->mod_r, (long long)m->row_begin, (long long)m->row_end);
  }
  if (tfx_init_check(init, err)) {
    return TFX_EPROTO;
  }
  tfx_rowtable_spec acc = {s->var, m->shape[0], (int)m->shape[1], 0, "zeros", 0, 1, 1, 0.0f};
  int rc = make_table(p, s, m, init, err);
  if (!rc) {
    rc = tfx_rowtable_create(&acc, &s->acc_rows, err);
  }
  s->mod_n = m->mod_n > 1 ? m->mod_n : 1;
  s->mod_r = m->mod_n > 1 ? m->mod_r : 0;
  s->count = 0;
  return rc;
}

void ps__lazy_free(shard *s) {
  tfx_rowtable_destroy(s->table);
  tfx_rowtable_destroy(s->acc_rows);
  s->table = s->acc_rows = NULL;
}

/* Whether every id of a request is this ps's, in range and strictly ascending: one pass without branches or a
 * division when mod_n is a power of two (every id of every push and want takes it). */
static int ids_fit(const shard *s, const int64_t *ids, size_t n) {
  int64_t mask = (s->mod_n & (s->mod_n - 1)) == 0 ? s->mod_n - 1 : -1, prev = -1;
  int64_t lo = s->row_begin > 0 ? s->row_begin : 0;
  int64_t hi = tfx_rowtable_vocab(s->table) < s->row_end ? tfx_rowtable_vocab(s->table) : s->row_end;
  int bad = 0;
  for (size_t k = 0; k < n && mask >= 0; k++) {
    int64_t id = ids[k];
    bad |= (id < lo) | (id >= hi) | (id <= prev) | ((id & mask) != s->mod_r);
    prev = id;
  }
  return mask >= 0 && !bad;
}

int ps__lazy_check(const shard *s, const Tfx__Tensor *t, tfx_err *err) {
  if (!t->n_rows) {
    return tfx_err_set(err, TFX_EINVAL, "table %s: pushed and pulled by rows only (a lazy table is never whole)",
                       s->var);
  }
  size_t want = t->n_rows * s->row_size * sizeof(float);
  if (ids_fit(s, t->rows, t->n_rows) && (!t->nbytes || t->nbytes == want)) {
    return TFX_OK;
  }
  int rc = tfx_rowtable_check_ids(s->table, t->rows, t->n_rows, err); /* which id is wrong, and how */
  for (size_t k = 0; k < t->n_rows && !rc; k++) {
    if (t->rows[k] % s->mod_n != s->mod_r || t->rows[k] < s->row_begin || t->rows[k] >= s->row_end) {
      rc = tfx_err_set(err, TFX_EINVAL,
                       "table %s: id %lld belongs to another ps (this one holds ids %% %lld == %lld in %lld..%lld)",
                       s->var, (long long)t->rows[k], (long long)s->mod_n, (long long)s->mod_r, (long long)s->row_begin,
                       (long long)s->row_end);
    }
  }
  if (!rc && t->nbytes && t->nbytes != want) {
    rc = tfx_err_set(err, TFX_ESHAPE, "table %s: %zu rows of %zu floats are %zu bytes, the frame has %llu", s->var,
                     t->n_rows, s->row_size, want, (unsigned long long)t->nbytes);
  }
  return rc;
}

/* One row's update: the row holds its values, then its optimizer slots. */
static void apply_row(const ps_state *p, const shard *s, float *row, const float *g, float scale) {
  float *slots[2] = {row + s->row_size, row + 2 * s->row_size};
  int64_t first = 0;
  tfx_optim_apply_rows(&p->opt, p->version, row, g, scale, slots, &first, 1, s->row_size);
}

/* Rows are scattered over a table larger than the caches: the map cells of the id 8 ahead and the row 4 ahead are
 * fetched while row k is worked on (its values and slots for an update, stage 1; its values for a read, 2). */
static void prefetch_ahead(const tfx_rowtable *t, const int64_t *ids, size_t n, size_t k, int stage) {
  if (k + 8 < n) {
    tfx_rowtable_prefetch(t, ids[k + 8], 0);
  }
  if (k + 4 < n) {
    tfx_rowtable_prefetch(t, ids[k + 4], stage);
  }
}

int ps__lazy_apply(ps_state *p, shard *s, const float *g, const Tfx__Tensor *t) {
  for (size_t k = 0; k < t->n_rows; k++) {
    prefetch_ahead(s->table, t->rows, t->n_rows, k, 1);
    int refused = 0;
    float *row = tfx_rowtable_update(s->table, t->rows[k], p->version, &refused);
    if (!row && !refused) {
      return -1;
    }
    if (row) {
      apply_row(p, s, row, g + k * s->row_size, 1.0f);
    }
  }
  tfx_rowtable_expire(s->table, p->version);
  s->changed = p->version + 1;
  return 0;
}

int ps__lazy_accumulate(shard *s, const float *g, const Tfx__Tensor *t) {
  for (size_t k = 0; k < t->n_rows; k++) {
    if (k + 8 < t->n_rows) { /* the sum table's map is cold by the time a push comes: its cells fetched ahead */
      tfx_rowtable_prefetch(s->acc_rows, t->rows[k + 8], 0);
    }
    if (tfx_rowtable_add(s->acc_rows, t->rows[k], g + k * s->row_size)) {
      return -1;
    }
  }
  return 0;
}

/* A sync step's update: the summed rows in the order the sum table lists them, each applied 8 rows after it was
 * listed (its map cell fetched then, its row 4 rows later), so the misses of a large table overlap. */
typedef struct acc_job {
  ps_state *p;
  shard *s;
  float scale;
  int64_t ids[8];
  const float *sums[8];
  size_t n; /* rows listed so far */
} acc_job;

/* Applies the k-th listed row (an id not admitted yet: its update is dropped). */
static int apply_listed(acc_job *a, size_t k) {
  int refused = 0;
  float *row = tfx_rowtable_update(a->s->table, a->ids[k % 8], a->p->version, &refused);
  if (!row) {
    return refused ? 0 : -1; /* not admitted yet: the update is dropped */
  }
  apply_row(a->p, a->s, row, a->sums[k % 8], a->scale);
  return 0;
}

static int apply_sum(int64_t id, const float *sum, void *ctx) {
  acc_job *a = ctx;
  tfx_rowtable_prefetch(a->s->table, id, 0);
  if (a->n >= 4) {
    tfx_rowtable_prefetch(a->s->table, a->ids[(a->n - 4) % 8], 1);
  }
  int rc = a->n >= 8 ? apply_listed(a, a->n - 8) : 0; /* frees the ring place this row takes */
  a->ids[a->n % 8] = id;
  a->sums[a->n % 8] = sum;
  a->n++;
  return rc;
}

/* A summed row listed for an update in id order. */
typedef struct id_sum {
  int64_t id;
  const float *sum;
} id_sum;

static int list_sum(int64_t id, const float *sum, void *ctx) {
  id_sum **at = ctx;
  *(*at)++ = (id_sum){id, sum};
  return 0;
}

static int by_id(const void *a, const void *b) {
  int64_t x = ((const id_sum *)a)->id, y = ((const id_sum *)b)->id;
  return (x > y) - (x < y);
}

/* Feeds the summed rows to apply_sum in id order: a capped table evicts by the order rows come, and the sum table
 * lists them as the pushes arrived, so without it two runs of one seed evict different rows. */
static int apply_sums_by_id(acc_job *job) {
  size_t n = tfx_rowtable_rows(job->s->acc_rows);
  id_sum *list = malloc(n * sizeof *list), *at = list;
  if (!list) {
    return -1;
  }
  tfx_rowtable_each(job->s->acc_rows, list_sum, &at);
  qsort(list, n, sizeof *list, by_id);
  int rc = 0;
  for (size_t k = 0; k < n && !rc; k++) {
    rc = apply_sum(list[k].id, list[k].sum, job);
  }
  free(list);
  return rc;
}

int ps__lazy_apply_accumulated(ps_state *p, shard *s, float scale) {
  if (!tfx_rowtable_rows(s->acc_rows)) {
    return 0; /* nobody looked a row up this step: the table keeps its version */
  }
  acc_job job = {.p = p, .s = s, .scale = scale};
  const tfx_layer_spec *l = tfx_config_table_layer(&p->cfg, s->var);
  int rc = l && l->max_rows ? apply_sums_by_id(&job) : tfx_rowtable_each(s->acc_rows, apply_sum, &job);
  for (size_t k = job.n > 8 ? job.n - 8 : 0; k < job.n && !rc; k++) {
    rc = apply_listed(&job, k);
  }
  ps__lazy_clear_sum(s); /* the sum starts empty next step */
  tfx_rowtable_expire(s->table, p->version);
  s->changed = p->version + 1;
  return rc ? -1 : 0;
}

void ps__lazy_clear_sum(shard *s) {
  tfx_rowtable_clear(s->acc_rows);
}

void ps__lazy_gather(const shard *s, const Tfx__Tensor *t, float *out) {
  for (size_t k = 0; k < t->n_rows; k++) {
    prefetch_ahead(s->table, t->rows, t->n_rows, k, 2);
    tfx_rowtable_read(s->table, t->rows[k], out + k * s->row_size);
  }
}

void ps__lazy_usage(const ps_state *p, size_t *rows, size_t *bytes) {
  *rows = 0;
  *bytes = 0;
  for (int i = 0; i < p->n_shards; i++) {
    if (p->shards[i].table) {
      *rows += tfx_rowtable_rows(p->shards[i].table);
      *bytes += tfx_rowtable_bytes(p->shards[i].table) + tfx_rowtable_bytes(p->shards[i].acc_rows);
    }
  }
}

typedef struct save_job {
  tfx_rowfile *w;
  tfx_err *err;
} save_job;

static int save_row(int64_t id, const float *row, void *ctx) {
  save_job *j = ctx;
  return tfx_rowfile_row(j->w, id, row, j->err);
}

/* The step the ps's checkpoint into dir of its lazy tables is a delta of, or -1 for a full one: checkpoint.incremental,
 * every table marked at the same step, fewer than checkpoint.full_every deltas since the full one, every evicted
 * id remembered, fewer rows changed than the tables hold (else a full one costs no more), and a parent before
 * step whose row file this ps wrote is still there (its manifest may come later: the ps write every multiple of
 * every_steps by themselves and the master collects them; pruning keeps every link a kept checkpoint needs). */
int64_t ps__lazy_parent(const ps_state *p, const char *dir, int64_t step) {
  int64_t parent = -2;
  if (p->ckpt_full_next) {
    return -1;
  }
  size_t changed = 0, rows = 0;
  for (int i = 0; i < p->n_shards && p->cfg.ckpt_incremental; i++) {
    const tfx_rowtable *t = p->shards[i].table;
    int deltas = 0;
    const int64_t *gone;
    size_t n_gone = 0;
    int64_t marked = t ? tfx_rowtable_marked(t, &deltas) : parent;
    if (t && (marked < 0 || deltas >= p->cfg.ckpt_full_every || tfx_rowtable_gone(t, &gone, &n_gone) ||
              (parent != -2 && marked != parent))) {
      return -1;
    }
    parent = marked;
    changed += t ? tfx_rowtable_rows_since(t, marked) + n_gone : 0;
    rows += t ? tfx_rowtable_rows(t) : 0;
  }
  char parent_dir[1200], parent_rows[1300];
  if (parent >= 0) {
    tfx_ckpt_sibling(dir, parent, parent_dir, sizeof parent_dir);
    tfx_ckpt_part_path(parent_rows, sizeof parent_rows, parent_dir, p->index, TFX_CKPT_ROWS);
  }
  /* a parent of the other precision (checkpoint.fp16 changed at a restart) starts a new chain */
  return parent >= 0 && parent < step && changed < rows && tfx_rowfile_is_fp16(parent_rows) == p->cfg.ckpt_fp16
             ? parent
             : -1;
}

/* One table into the row file: every row, or (a delta of parent) the ids evicted and the rows touched since. */
static int save_table(tfx_rowfile *w, const shard *s, int64_t parent, save_job *job, tfx_err *err) {
  int rf = (int)tfx_rowtable_row_floats(s->table);
  if (parent < 0) {
    int rc = tfx_rowfile_table(w, s->key, s->shape[0], rf, tfx_rowtable_rows(s->table), err);
    return rc ? rc : tfx_rowtable_each(s->table, save_row, job);
  }
  const int64_t *gone;
  size_t n_gone;
  tfx_rowtable_gone(s->table, &gone, &n_gone);
  int rc = tfx_rowfile_table_delta(w, s->key, s->shape[0], rf, gone, n_gone,
                                   tfx_rowtable_rows_since(s->table, parent), err);
  return rc ? rc : tfx_rowtable_each_since(s->table, parent, save_row, job);
}

/* After a checkpoint's row file is in place: the tables' next delta starts from it; their counts logged, with the
 * row file's bytes and the milliseconds it took to write (what bench/ckpt_delta compares). */
static void mark_tables(ps_state *p, int64_t step, int64_t parent, uint64_t bytes, double ms) {
  for (int i = 0; i < p->n_shards; i++) {
    tfx_rowtable *t = p->shards[i].table;
    if (!t) {
      continue;
    }
    tfx_rowtable_mark(t, step, parent < 0);
    tfx_rowtable_counts c = tfx_rowtable_get_counts(t);
    tfx_log(TFX_LOG_INFO, "PS-TABLE",
            "table %s at step %lld: %zu rows, %llu made, %llu evicted, %llu updates of ids not admitted; "
            "checkpoint %s, row file %llu bytes written in %.3f ms",
            p->shards[i].key, (long long)step, tfx_rowtable_rows(t), (unsigned long long)c.made,
            (unsigned long long)c.evicted, (unsigned long long)c.refused, parent < 0 ? "full" : "delta",
            (unsigned long long)bytes, ms);
  }
}

int ps__lazy_save(ps_state *p, const char *dir, int64_t step, uint32_t *crc, uint64_t *bytes, tfx_err *err) {
  int n = 0;
  *crc = 0;
  *bytes = 0;
  for (int i = 0; i < p->n_shards; i++) {
    n += p->shards[i].table != NULL;
  }
  if (!n) {
    return TFX_OK;
  }
  char path[1300];
  tfx_ckpt_part_path(path, sizeof path, dir, p->index, TFX_CKPT_ROWS);
  double t0 = tfx_now_us();
  int64_t parent = ps__lazy_parent(p, dir, step);
  tfx_rowfile *w;
  int rc = tfx_rowfile_create_as(path, step, parent, n, p->cfg.ckpt_fp16 ? TFX_ROWFILE_FP16 : 0, &w, err);
  save_job job = {rc ? NULL : w, err};
  for (int i = 0; i < p->n_shards && !rc; i++) {
    rc = p->shards[i].table ? save_table(w, &p->shards[i], parent, &job, err) : TFX_OK;
  }
  if (rc) {
    tfx_rowfile_abort(job.w);
    return rc;
  }
  rc = tfx_rowfile_finish(w, crc, bytes, err);
  if (!rc) {
    mark_tables(p, step, parent, *bytes, (tfx_now_us() - t0) / 1000.0);
  }
  return rc;
}

/* The lazy table of key `key` on this ps, or NULL. */
/* The lazy shard of this ps a row file's table belongs to: the same key, or, for a table saved under another
 * partitioning ("VAR/mod_K" of another ps count), this ps's share of the same variable. */
static shard *lazy_table(ps_state *p, const char *key) {
  const char *mod = strstr(key, "/mod_") ? strstr(key, "/mod_") : strstr(key, "/range_");
  size_t var_len = mod ? (size_t)(mod - key) : strlen(key);
  for (int i = 0; i < p->n_shards; i++) {
    if (p->shards[i].table && !strcmp(p->shards[i].key, key)) {
      return &p->shards[i];
    }
  }
  for (int i = 0; mod && i < p->n_shards; i++) {
    const shard *s = &p->shards[i];
    if (s->table && strlen(s->var) == var_len && !strncmp(s->var, key, var_len)) {
      return &p->shards[i];
    }
  }
  return NULL;
}

typedef struct restore_job {
  ps_state *p;
  tfx_err *err;
  size_t taken;
  int64_t step; /* the checkpoint's: restored rows count as touched just before it */
} restore_job;

/* One row of a checkpoint: into the lazy table of that key when this ps holds the id. The table must exist here
 * with the same ids and row size, else the restore is refused naming table and id. */
static int restore_row(const char *table, int64_t ids, int row_floats, int64_t id, const float *row, void *ctx) {
  restore_job *j = ctx;
  shard *s = lazy_table(j->p, table);
  if (!s || s->shape[0] != ids || (int)tfx_rowtable_row_floats(s->table) != row_floats) {
    return tfx_err_set(j->err, TFX_ESHAPE,
                       "restore: table %s (id %lld) is %lld ids x %d floats in the checkpoint, which this plan does "
                       "not hold as a lazy table of that shape",
                       table, (long long)id, (long long)ids, row_floats);
  }
  if (id % s->mod_n != s->mod_r || id < s->row_begin || id >= s->row_end) {
    return TFX_OK; /* another ps's share under this plan */
  }
  if (!row) { /* a delta's eviction */
    tfx_rowtable_drop(s->table, id);
    return TFX_OK;
  }
  j->taken++;
  return tfx_rowtable_put_at(s->table, id, row, j->step > 0 ? j->step - 1 : 0, j->err);
}

int ps__lazy_restore(ps_state *p, const char *dir, tfx_err *err) {
  int lazy = 0;
  for (int i = 0; i < p->n_shards; i++) {
    lazy |= p->shards[i].table != NULL;
  }
  DIR *d = lazy ? opendir(dir) : NULL;
  if (!lazy) {
    return TFX_OK;
  }
  if (!d) {
    return tfx_err_sys(err, TFX_ENOTFOUND, "restore: open %s", dir);
  }
  restore_job job = {p, err, 0, 0};
  int rc = TFX_OK, files = 0;
  for (struct dirent *e; !rc && (e = readdir(d));) {
    int owner = tfx_ckpt_part_owner(e->d_name, TFX_CKPT_ROWS);
    if (owner < 0) {
      continue;
    }
    char path[1400];
    int64_t parent;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    rc = tfx_rowfile_parent(path, &job.step, &parent, err);
    rc = rc ? rc : tfx_rowfile_read_chain(dir, owner, restore_row, &job, err);
    files++;
  }
  closedir(d);
  for (int i = 0; !rc && i < p->n_shards; i++) {
    if (p->shards[i].table) {
      tfx_rowtable_mark(p->shards[i].table, -1, 1); /* the next checkpoint is full: a new chain on this plan */
    }
  }
  if (!rc) {
    tfx_log(TFX_LOG_INFO, "PS-RESTORE-ROWS", "%zu rows of lazy tables restored from %d row file(s) in %s", job.taken,
            files, dir);
  }
  return rc;
}
