/* Pushes of the parameter server: validated whole, then accumulated (sync) or applied (async, ssp), and answered. */
#include <cblas.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "ps/ps_impl.h"

void ps__sync_reset(ps_state *p, int n_workers) {
  ps__sync_start(p, n_workers);
  for (int i = 0; i < p->n_shards; i++) {
    shard *s = &p->shards[i];
    if (s->table) {
      ps__lazy_clear_sum(s);
    } else {
      memset(s->acc, 0, sizeof(float) * s->count);
      memset(s->touched, 0, (size_t)(s->row_end - s->row_begin));
    }
    s->acc_dense = 0;
  }
}

void ps__push_free_scratch(ps_state *p) {
  free(p->scratch);
  p->scratch = NULL;
  p->scratch_size = 0;
}

/* The gradient bytes of tensor i, 4-byte aligned (copied to scratch only if the frame is not). */
static const float *grad_data(ps_state *p, const tfx_inmsg *m, int part) {
  size_t size;
  const void *data = tfx_inmsg_part(m, part, &size);
  if (((uintptr_t)data & 3) == 0) {
    return data;
  }
  if (p->scratch_size < size) {
    free(p->scratch);
    p->scratch = malloc(size);
    p->scratch_size = p->scratch ? size : 0;
  }
  if (!p->scratch) {
    return NULL;
  }
  memcpy(p->scratch, data, size);
  return p->scratch;
}

/* Nonzero when no value is NaN or Inf (exponent bits all ones); vectorizes on aligned data. */
static int all_finite(const void *data, size_t n) {
  uint32_t bad = 0;
  if (((uintptr_t)data & 3) == 0) {
    const uint32_t *u = data;
    for (size_t i = 0; i < n; i++) {
      bad |= (u[i] & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t v;
    memcpy(&v, (const char *)data + 4 * i, 4);
    bad |= (v & 0x7f800000u) == 0x7f800000u;
  }
  return !bad;
}

typedef struct finite_job {
  const char *data;
  atomic_int bad;
} finite_job;

static void finite_range(void *ctx, size_t begin, size_t end) {
  finite_job *f = ctx;
  if (!all_finite(f->data + 4 * begin, end - begin)) {
    atomic_store(&f->bad, 1);
  }
}

/* The helper thread for a job of n floats, or NULL when this thread alone should do it. */
static ps_helper *helper_for(ps_state *p, size_t n) {
  if (p->cfg.ps_apply_threads < 2 || n < PS_PARALLEL_MIN) {
    return NULL;
  }
  if (!p->helper) {
    p->helper = ps__helper_create(); /* NULL (no thread): this thread does every chunk */
  }
  return p->helper;
}

/* all_finite over a tensor, a large one shared with the helper. */
static int all_finite_split(ps_state *p, const void *data, size_t n) {
  ps_helper *h = helper_for(p, n);
  if (!h) {
    return all_finite(data, n);
  }
  finite_job job = {data, 0};
  ps__helper_run(h, finite_range, &job, n);
  return !atomic_load(&job.bad);
}

/* Whether a pushed tensor takes the one-pass path (push_fused): an async or ssp dense update of a trainable
 * shard by a rule without slots (SGD), from an aligned frame, for a large shard or one whose buffer a reply is
 * still sending. Only the first tensor of a push naming the shard (a second applies over the first, the usual
 * way). Decided once per push, by validate_push, since a send may end meanwhile. */
static int fusable(const ps_state *p, const shard *s, const Tfx__Tensor *t, const void *g) {
  size_t bytes = s->count * sizeof(float);
  return !ps__is_sync(p) && s->trainable && !t->n_rows && !tfx_optim_slots(&p->opt) && ((uintptr_t)g & 3) == 0 &&
         bytes >= TFX_WIRE_SMALL && (bytes >= PS_FUSE_MIN || atomic_load(&s->value->refs) > 1);
}

/* Whether targets[i] is the first tensor of the push naming its shard. */
static int first_use(shard *const *targets, size_t i, const shard *s) {
  for (size_t j = 0; j < i; j++) {
    if (targets[j] == s) {
      return 0;
    }
  }
  return 1;
}

/* The name of a wire dtype, for error texts. */
static const char *dtype_name(int dtype) {
  return dtype == TFX__DTYPE__DTYPE_FLOAT32 ? "float32" : dtype == TFX__DTYPE__DTYPE_INT64 ? "int64" : "unknown";
}

/* Checks a push sent in parts: async or ssp mode, and every tensor a dense range of a trainable shard. */
static int validate_part(const ps_state *p, const tfx_envelope *e, const shard *s, const Tfx__Tensor *t, tfx_err *err) {
  if (ps__is_sync(p)) {
    return tfx_err_set(err, TFX_EINVAL, "push in parts: the ps runs sync mode, which takes whole pushes only");
  }
  if (e->part >= e->parts) {
    return tfx_err_set(err, TFX_EINVAL, "push in parts: part %u of %u", e->part, e->parts);
  }
  size_t n = (size_t)(t->nbytes / sizeof(float));
  if (t->dtype != TFX__DTYPE__DTYPE_FLOAT32) {
    return tfx_err_set(err, TFX_EINVAL, "push part: '%s' has dtype %s (%d); the ps holds float32 only", s->key,
                       dtype_name(t->dtype), t->dtype);
  }
  if (!s->trainable || t->n_rows || !t->nbytes || t->nbytes % sizeof(float) || t->offset > s->count ||
      n > s->count - t->offset) {
    return tfx_err_set(err, TFX_ESHAPE,
                       "push part: '%s' range of %llu bytes at element %llu does not fit its %zu "
                       "float32 values (dense and trainable only)",
                       s->key, (unsigned long long)t->nbytes, (unsigned long long)t->offset, s->count);
  }
  return TFX_OK;
}

/* Checks a whole tensor of a push: dtype, offset, size and rows against its shard. */
static int validate_whole(const shard *s, const Tfx__Tensor *t, tfx_err *err) {
  if (s->table) {
    return t->dtype != TFX__DTYPE__DTYPE_FLOAT32 || !t->nbytes
               ? tfx_err_set(err, TFX_EINVAL, "push: table %s takes float32 row gradients", s->var)
               : ps__lazy_check(s, t, err);
  }
  if (!s->trainable && t->n_rows) {
    return tfx_err_set(err, TFX_EINVAL, "push: '%s' is assigned whole, not by rows", s->key);
  }
  if (t->dtype != TFX__DTYPE__DTYPE_FLOAT32) {
    return tfx_err_set(err, TFX_EINVAL, "push: '%s' has dtype %s (%d); the ps holds float32 only", s->key,
                       dtype_name(t->dtype), t->dtype);
  }
  if (t->offset) {
    return tfx_err_set(err, TFX_ESHAPE,
                       "push: '%s' range at element %llu out of range: a whole push starts at 0 (ranges only in a "
                       "push in parts)",
                       s->key, (unsigned long long)t->offset);
  }
  size_t want = t->n_rows ? t->n_rows * s->row_size * sizeof(float) : s->count * sizeof(float);
  if (t->nbytes != want || t->n_rows > (size_t)(s->row_end - s->row_begin)) {
    return tfx_err_set(err, TFX_ESHAPE, "push: '%s' expects %zu float32 values (%lld rows), got %llu bytes", s->key,
                       s->count, (long long)(s->row_end - s->row_begin), (unsigned long long)t->nbytes);
  }
  for (size_t k = 0; k < t->n_rows; k++) {
    if (t->rows[k] < s->row_begin || t->rows[k] >= s->row_end || (k && t->rows[k] <= t->rows[k - 1])) {
      return tfx_err_set(err, TFX_ESHAPE, "push: '%s' row %lld is outside rows %lld..%lld or out of order", s->key,
                         (long long)t->rows[k], (long long)s->row_begin, (long long)s->row_end);
    }
  }
  return TFX_OK;
}

/* Fails a push whose tensor `key` carries NaN or Inf with TFX_ENAN; ps__push then applies training.nan_policy. */
static int nan_found(const ps_state *p, const char *key, tfx_err *err) {
  return tfx_err_set(err, TFX_ENAN, "push: '%s' carries NaN or Inf; %s (training.nan_policy)", key,
                     p->cfg.nan_policy != TFX_NAN_SKIP ? "rejected" : "skipped");
}

/* Checks every tensor of a push before anything changes (NaN/Inf of fusable ones: in push_fused). */
static int validate_push(ps_state *p, const tfx_inmsg *m, shard **targets, tfx_err *err) {
  const tfx_envelope *e = m->env;
  int part = 0;
  for (size_t i = 0; i < e->n_tensors; i++) {
    const Tfx__Tensor *t = e->tensors[i];
    shard *s = ps__find(p, t->name);
    if (!s) {
      return tfx_err_set(err, TFX_ENOTFOUND, "push: unknown variable '%.64s'", t->name);
    }
    int rc = ps__is_part(e) ? validate_part(p, e, s, t, err) : validate_whole(s, t, err);
    if (rc) {
      return rc;
    }
    size_t size;
    const void *g = tfx_inmsg_part(m, part++, &size);
    int fuse = !ps__is_part(e) && first_use(targets, i, s) && fusable(p, s, t, g);
    if (first_use(targets, i, s)) {
      s->fuse = fuse;
    }
    if (!fuse && !all_finite_split(p, g, size / 4)) {
      return nan_found(p, s->key, err);
    }
    targets[i] = s;
  }
  return TFX_OK;
}

/* One update of the elements base .. base + n of a shard, run in ranges (on the helper too for large ones). */
typedef struct apply_job {
  const tfx_optim *opt;
  int64_t step;
  shard *s;
  size_t base;
  const float *g;
  float scale;
} apply_job;

static void apply_range(void *ctx, size_t begin, size_t end) {
  apply_job *a = ctx;
  size_t at = a->base + begin;
  float *slots[2] = {a->s->slots[0] ? a->s->slots[0] + at : NULL, a->s->slots[1] ? a->s->slots[1] + at : NULL};
  tfx_optim_apply(a->opt, a->step, a->s->value->data + at, a->g + begin, a->scale, slots, end - begin);
}

/* Applies g to n elements of a shard from element base; elements are independent, so a large range is shared
 * with the helper (the cores are otherwise idle while the workers wait for this reply). A whole update first
 * makes the buffer private if a reply is still sending it; a part's range is updated in place (copying the
 * whole shard for each part would cost more than the parts save): a reply of the same range to another worker
 * still on its way then carries some updated values, which async SGD tolerates (TensorFlow's optimizers read
 * and write without locks by default too); the replies of one worker's own parts never overlap. */
static int apply_span(ps_state *p, shard *s, size_t base, size_t n, const float *g, float scale) {
  if (n == s->count && ps__own_value(p, s)) {
    return -1;
  }
  apply_job job = {&p->opt, p->version, s, base, g, scale};
  ps__helper_run(helper_for(p, n), apply_range, &job, n);
  ps__touch(p, s);
  return 0;
}

/* Applies g to a whole shard. */
static int apply_one(ps_state *p, shard *s, const float *g, float scale) {
  return apply_span(p, s, 0, s->count, g, scale);
}

/* A push to a non-trainable shard (batch-norm moving statistics) carries values: they are assigned. */
static int assign_values(ps_state *p, shard *s, const float *values) {
  if (ps__own_value(p, s)) {
    return -1;
  }
  s->assigned = 1;
  memcpy(s->value->data, values, sizeof(float) * s->count);
  ps__touch(p, s);
  return 0;
}

/* Applies a row-sparse gradient to the listed rows only (lazy update of the slots too). */
static int apply_rows(ps_state *p, shard *s, const float *g, const Tfx__Tensor *t) {
  if (ps__own_value(p, s)) {
    return -1;
  }
  for (size_t k = 0; k < t->n_rows; k++) {
    int64_t local = t->rows[k] - s->row_begin;
    tfx_optim_apply_rows(&p->opt, p->version, s->value->data, g + k * s->row_size, 1.0f, s->slots, &local, 1,
                         s->row_size);
  }
  ps__touch(p, s);
  return 0;
}

/* The step's row-sparse sum applied to the rows that were looked up only (as async does): rows nobody
 * touched keep their values and slots, even under weight decay. */
static int apply_touched_rows(ps_state *p, shard *s, float scale) {
  if (ps__own_value(p, s)) {
    return -1;
  }
  for (int64_t r = 0; r < s->row_end - s->row_begin; r++) {
    if (s->touched[r]) {
      float *acc = s->acc + (size_t)r * s->row_size;
      tfx_optim_apply_rows(&p->opt, p->version, s->value->data, acc, scale, s->slots, &r, 1, s->row_size);
      memset(acc, 0, sizeof(float) * s->row_size);
      s->touched[r] = 0;
      ps__touch(p, s); /* only when a row was looked up: an untouched table keeps its version */
    }
  }
  return 0;
}

/* Ends a sync step: applies the average of the gradients accumulated (none when every arrival was skipped). */
static void apply_accumulated(ps_state *p) {
  ps__forward_step(p); /* replicas: the backup gets the step as summed here, before the sums are emptied */
  float scale = ps__sync_scale(p->n_grads);
  for (int i = 0; p->n_grads && i < p->n_shards; i++) {
    shard *s = &p->shards[i];
    if (!s->trainable) {
      continue;
    }
    if (s->table) {
      if (ps__lazy_apply_accumulated(p, s, scale)) {
        tfx_log(TFX_LOG_ERROR, "PS-NOMEM", "table %s: out of memory for new rows; some not applied", s->var);
        p->stats.update_failures++;
      }
      continue;
    }
    int sparse = !s->acc_dense;
    if (sparse ? apply_touched_rows(p, s, scale) : apply_one(p, s, s->acc, scale)) {
      tfx_log(TFX_LOG_ERROR, "PS-NOMEM", "'%s': out of memory copying for an update; not applied", s->key);
      p->stats.update_failures++;
    }
    if (!sparse) {
      memset(s->acc, 0, sizeof(float) * s->count);
      memset(s->touched, 0, (size_t)(s->row_end - s->row_begin));
    }
    s->acc_dense = 0;
  }
  ps__sync_end_step(p);
  ps__forward_snapshot(p);
}

/* Counts worker w's arrival in the current sync step (its gradient, if any, already accumulated); the arrival
 * that completes replicas_to_aggregate applies the step. */
static void sync_arrive(ps_state *p, int w) {
  if (ps__sync_arrive(p, w)) {
    apply_accumulated(p);
  }
}

/* Adds one tensor of a fresh sync push into its shard's sum for the step (dense, or the rows it names); a
 * non-trainable shard's values are assigned instead. */
static int accumulate(ps_state *p, shard *s, const float *g, const Tfx__Tensor *t, tfx_err *err) {
  if (!s->trainable) {
    s->step_assigned = 1;
    return assign_values(p, s, g) ? tfx_err_set(err, TFX_ENOMEM, "out of memory") : TFX_OK;
  }
  if (s->table) {
    return ps__lazy_accumulate(s, g, t)
               ? tfx_err_set(err, TFX_ENOMEM, "table %s: out of memory for the step's rows", s->var)
               : TFX_OK;
  }
  if (!t->n_rows) {
    cblas_saxpy((int)s->count, 1.0f, g, 1, s->acc, 1);
    s->acc_dense = 1;
  }
  for (size_t k = 0; k < t->n_rows; k++) {
    cblas_saxpy((int)s->row_size, 1.0f, g + k * s->row_size, 1,
                s->acc + (size_t)(t->rows[k] - s->row_begin) * s->row_size, 1);
    s->touched[t->rows[k] - s->row_begin] = 1;
  }
  return TFX_OK;
}

static int push_sync(ps_state *p, const tfx_inmsg *m, shard **targets, int *stale, tfx_err *err) {
  const tfx_envelope *e = m->env;
  int w = ps__worker_of(e);
  ps_sync_verdict verdict = ps__sync_verdict(p, e->step, w);
  if (verdict == PS_SYNC_VERDICT_AHEAD) {
    return tfx_err_set(err, TFX_ESTATE, "push from worker %d for step %lld, but the ps is at step %lld", w,
                       (long long)e->step, (long long)p->version);
  }
  if (verdict == PS_SYNC_VERDICT_STALE) {
    p->stats.stale++;
    *stale = 1;
    p->stats.ledger += ps__ledger_counts(p, e, 1);
    return TFX_OK;
  }
  for (size_t i = 0; i < e->n_tensors; i++) {
    const float *g = grad_data(p, m, (int)i);
    int rc = g ? accumulate(p, targets[i], g, e->tensors[i], err) : tfx_err_set(err, TFX_ENOMEM, "out of memory");
    if (rc) {
      return rc;
    }
  }
  p->n_grads++;
  p->stats.ledger += ps__ledger_counts(p, e, 0); /* before the arrival that completes a step sends its snapshot */
  sync_arrive(p, w);
  return TFX_OK;
}

/* Checks tensor t of a forwarded step against its shard: the frame's size, and dense rows in range (the
 * primary checked the workers' pushes; this keeps a bad peer from writing out of bounds). */
static int check_step_tensor(const ps_state *p, const tfx_inmsg *m, size_t i, shard **s, tfx_err *err) {
  const Tfx__Tensor *t = m->env->tensors[i];
  size_t size = 0;
  tfx_inmsg_part(m, (int)i, &size);
  *s = ps__find((ps_state *)p, t->name);
  size_t want = *s ? (t->n_rows ? t->n_rows * (*s)->row_size : (*s)->count) * sizeof(float) : 0;
  if (!*s || t->nbytes != want || size != want || ((*s)->table && !t->n_rows)) {
    return tfx_err_set(err, TFX_EPROTO, "forwarded step: tensor '%.64s' does not fit this backup's shard", t->name);
  }
  for (size_t k = 0; !(*s)->table && k < t->n_rows; k++) {
    if (t->rows[k] < (*s)->row_begin || t->rows[k] >= (*s)->row_end) {
      return tfx_err_set(err, TFX_EPROTO, "forwarded step: '%.64s' row %lld out of range", t->name,
                         (long long)t->rows[k]);
    }
  }
  return TFX_OK;
}

/* Checks a forwarded batch of sync steps whole (a bad one changes nothing): its first step is the backup's, one
 * gradient count per step, and each tensor fits its shard and names a step of the batch, in order. */
static int check_batch(const ps_state *p, const tfx_inmsg *m, tfx_err *err) {
  const tfx_envelope *e = m->env;
  if (e->step != p->version || !e->n_stats) {
    return tfx_err_set(err, TFX_ESTATE, "forwarded step %lld: the backup is at step %lld", (long long)e->step,
                       (long long)p->version);
  }
  shard *s = NULL;
  uint64_t last = (uint64_t)e->step;
  for (size_t i = 0; i < e->n_tensors; i++) {
    int rc = check_step_tensor(p, m, i, &s, err);
    uint64_t v = e->tensors[i]->version;
    if (rc || v < last || v >= (uint64_t)e->step + e->n_stats) {
      return rc ? rc
                : tfx_err_set(err, TFX_EPROTO, "forwarded steps %lld..%lld: tensor '%.64s' of step %llu",
                              (long long)e->step, (long long)(e->step + (int64_t)e->n_stats - 1),
                              e->tensors[i]->name, (unsigned long long)v);
    }
    last = v;
  }
  return TFX_OK;
}

/* Applies tensors *i.. of step `step` of a forwarded batch: its sums are accumulated (0 + sum is the sum, bit for
 * bit) and applied with the primary's gradient count, by the code the primary ran. */
static int batch_step(ps_state *p, const tfx_inmsg *m, int64_t step, int n_grads, size_t *i, tfx_err *err) {
  const tfx_envelope *e = m->env;
  p->n_grads = n_grads;
  float scale = ps__sync_scale(p->n_grads);
  shard *s = NULL;
  for (; *i < e->n_tensors && e->tensors[*i]->version == (uint64_t)step; (*i)++) {
    check_step_tensor(p, m, *i, &s, err);
    const float *g = grad_data(p, m, (int)*i);
    int whole = s->trainable && !s->table && !e->tensors[*i]->n_rows;
    int rc = !g    ? tfx_err_set(err, TFX_ENOMEM, "out of memory")
             : whole /* a dense sum is applied from its frame: the bits the primary applied from its accumulator */
                 ? (apply_one(p, s, g, scale) ? tfx_err_set(err, TFX_ENOMEM, "out of memory") : TFX_OK)
                 : accumulate(p, s, g, e->tensors[*i], err);
    if (rc) {
      return rc;
    }
  }
  apply_accumulated(p); /* the rows and lazy tables, and the step's end */
  return TFX_OK;
}

/* A batch of sync steps forwarded by the primary (REPLICATE_STEPS, repbatch.c), applied step by step. */
static int push_step(ps_state *p, const tfx_inmsg *m, tfx_err *err) {
  int rc = check_batch(p, m, err);
  size_t i = 0;
  for (size_t j = 0; !rc && j < m->env->n_stats; j++) {
    rc = batch_step(p, m, m->env->step + (int64_t)j, (int)m->env->stats[j]->value, &i, err);
    if (rc) { /* out of memory part way: this copy is no longer the primary's */
      ps__fall_behind(p, TFX_LOG_ERROR, "PS-BACKUP-BROKEN", "backup of ps instance %d: step %lld applied in part: %s",
                      p->index, (long long)p->version, err ? err->msg : "out of memory"); /* no promotion */
      ps__sync_reset(p, p->n_workers);
    }
  }
  return rc;
}

/* The one-pass update of a fusable tensor (SGD, the only rule without slots): each 4 KiB block of the gradient
 * is checked for NaN/Inf while it is overwritten with the new values, w - lr * (g + wd * w) (a rejected push
 * leaves only this frame changed, never the shard): the arithmetic of
 * tfx_optim_apply's SGD, so the result is the same bit for bit (scale stays a variable for the same reason). */
typedef struct fuse_job {
  const float *w;
  float *g;
  float lr, wd, scale;
  atomic_int bad;
} fuse_job;

static void fuse_range(void *ctx, size_t begin, size_t end) {
  enum { BLOCK = 1024 };
  fuse_job *f = ctx;
  for (size_t b = begin; b < end && !atomic_load_explicit(&f->bad, memory_order_relaxed); b += BLOCK) {
    size_t n = end - b < BLOCK ? end - b : BLOCK;
    float *restrict g = f->g + b;
    const float *restrict w = f->w + b;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
      uint32_t bits;
      memcpy(&bits, &g[i], sizeof bits);
      bad |= (bits & 0x7f800000u) == 0x7f800000u; /* checked in the same pass: the frame is ours to overwrite */
      g[i] = w[i] - f->lr * (f->scale * g[i] + f->wd * w[i]);
    }
    if (bad) {
      atomic_store(&f->bad, 1);
      return;
    }
  }
}

/* Computes the new values of every fusable tensor into its gradient frame and wraps the frame as a value
 * buffer (adopted[i]); the shards are not touched, so a NaN/Inf or a failed allocation rejects the push whole. */
static int push_fused(ps_state *p, tfx_inmsg *m, shard **targets, vbuf **adopted, tfx_err *err) {
  const tfx_envelope *e = m->env;
  int rc = TFX_OK;
  memset(adopted, 0, sizeof *adopted * e->n_tensors);
  for (size_t i = 0; i < e->n_tensors && !rc; i++) {
    size_t size;
    float *g = (float *)tfx_inmsg_part(m, (int)i, &size);
    if (!first_use(targets, i, targets[i]) || !targets[i]->fuse) {
      continue;
    }
    fuse_job job = {.w = targets[i]->value->data,
                    .g = g,
                    .lr = (float)tfx_optim_lr(&p->opt, p->version),
                    .wd = (float)p->opt.weight_decay,
                    .scale = 1.0f};
    ps__helper_run(helper_for(p, targets[i]->count), fuse_range, &job, targets[i]->count);
    if (atomic_load(&job.bad)) {
      rc = nan_found(p, targets[i]->key, err);
    } else if (!(adopted[i] = ps__vbuf_adopt(&m->parts[i]))) {
      rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
    }
  }
  for (size_t i = 0; rc && i < e->n_tensors; i++) {
    ps__vbuf_release(NULL, adopted[i]); /* its frame was computed over: it goes, the push is rejected */
    adopted[i] = NULL;
  }
  return rc;
}

static int push_async(ps_state *p, tfx_inmsg *m, shard **targets, tfx_err *err) {
  const tfx_envelope *e = m->env;
  vbuf *stack[64], **adopted = e->n_tensors <= 64 ? stack : calloc(e->n_tensors, sizeof *adopted);
  int rc = adopted ? push_fused(p, m, targets, adopted, err) : tfx_err_set(err, TFX_ENOMEM, "out of memory");
  for (size_t i = 0; i < e->n_tensors && !rc; i++) {
    if (adopted[i]) { /* the frame holds the new values: it becomes the shard's value buffer */
      ps__vbuf_release(NULL, targets[i]->value);
      targets[i]->value = adopted[i];
      adopted[i] = NULL;
      ps__touch(p, targets[i]);
      continue;
    }
    const float *g = grad_data(p, m, (int)i);
    const Tfx__Tensor *t = e->tensors[i];
    int bad = !g || (!targets[i]->trainable ? assign_values(p, targets[i], g)
                     : targets[i]->table    ? ps__lazy_apply(p, targets[i], g, t)
                     : t->n_rows            ? apply_rows(p, targets[i], g, t)
                                            : apply_span(p, targets[i], t->offset, t->nbytes / 4, g, 1.0f));
    if (bad) {
      rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
    }
  }
  for (size_t i = 0; adopted && i < e->n_tensors; i++) {
    ps__vbuf_release(NULL, adopted[i]); /* left after an out-of-memory stop */
  }
  if (adopted != stack) {
    free(adopted);
  }
  if (rc || !ps__completes_step(e)) {
    return rc;
  }
  p->version++;
  p->stats.applied++;
  p->stats.ledger += ps__ledger_counts(p, e, 0);
  ps__clock_tick(p, ps__worker_of(e));
  return TFX_OK;
}

/* A push with flag 1 is a push-pull: its reply carries every value at version >= step + 1 (sync) or the
 * latest (async, ssp), parked like a pull until then; a part's reply carries the updated ranges it pushed (the
 * last part's, when ssp parks it, every value). Otherwise the reply is a bare acknowledgement. */
static int answer_push(ps_state *p, tfx_inmsg *m, int stale, tfx_err *err) {
  const tfx_envelope *e = m->env;
  if (e->type == TFX__MSG_TYPE__MSG_REPLICATE) {
    return TFX_OK; /* a backup acknowledges a batch of steps on receipt (ps.c) */
  }
  if ((e->flag & 1) && ps__is_part(e) && (!ps__completes_step(e) || ps__pull_ready(p, 0, ps__worker_of(e)))) {
    return ps__send_ranges(p, m, err);
  }
  if (e->flag & 1) {
    int64_t want = ps__push_pull_version(p, e);
    if (ps__pull_ready(p, want, ps__worker_of(e))) {
      return ps__send_values(p, &m->identity, e->request_id, ps__worker_of(e), NULL, 0, 1, ps__since(e), e->want,
                             e->n_want, err);
    }
    return ps__park(p, m, want, 1, err);
  }
  tfx_envelope env;
  tfx_reply_init(&env, m);
  env.step = p->version;
  env.flag = stale;
  Tfx__Since acked;
  env.acked = ps__acked(p, ps__worker_of(e), &acked);
  return tfx_wire_send(p->sock, &m->identity, &env, NULL, 0, err);
}

/* A skipped push (training.nan_policy = skip) still ends its worker's step, so nobody waits on it: in sync mode
 * it counts as the worker's arrival (its gradient left out of the average; a step of skips only leaves the values
 * as they are); in async and ssp the worker's clock moves, and the version too when it is the last part of a push
 * whose other parts were applied. */
static void skip_step(ps_state *p, const tfx_envelope *e) {
  int w = ps__worker_of(e);
  p->stats.ledger += ps__ledger_counts(p, e, 0); /* answered as taken */
  if (ps__is_sync(p)) {
    if (ps__sync_verdict(p, e->step, w) == PS_SYNC_VERDICT_FRESH) {
      sync_arrive(p, w);
    }
    return;
  }
  if (ps__completes_step(e)) {
    p->version += ps__is_part(e);
    p->stats.applied += ps__is_part(e);
    ps__clock_tick(p, w);
  }
}

/* Applies training.nan_policy to a push refused with TFX_ENAN: reject answers TFX_EINVAL (the code a worker
 * has always got for it, the message naming the variable); skip drops the push, logs it and returns TFX_OK (a
 * normal reply follows). Each is counted. */
static int nan_outcome(ps_state *p, const tfx_inmsg *m, tfx_err *err) {
  if (p->cfg.nan_policy != TFX_NAN_SKIP) {
    p->stats.nan_rejected++;
    if (err) {
      err->code = TFX_EINVAL;
    }
    return TFX_EINVAL;
  }
  if (p->stats.nan_skipped++ < 20 && err) {
    tfx_log(TFX_LOG_WARN, "PS-NAN-SKIP", "worker %d, step %lld: %s", ps__worker_of(m->env), (long long)m->env->step,
            err->msg);
  }
  skip_step(p, m->env);
  return TFX_OK;
}

int ps__push(ps_state *p, tfx_inmsg *m, tfx_err *err) {
  if (m->env->type == TFX__MSG_TYPE__MSG_REPLICATE) { /* a batch of steps its log held (ps__log_apply) */
    return push_step(p, m, err);
  }
  shard *stack[64], **targets = m->env->n_tensors <= 64 ? stack : calloc(m->env->n_tensors, sizeof *targets);
  if (!targets) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  int stale = 0, rc = validate_push(p, m, targets, err);
  if (!rc && ps__async_duplicate(p, m->env)) {
    p->stats.stale++; /* resent after a failover, and already applied: once only */
    stale = 1;
  } else if (!rc && !ps__past_the_end(p, m->env)) {
    ps__keep_measure(p, m);
    rc = ps__is_sync(p) ? push_sync(p, m, targets, &stale, err) : push_async(p, m, targets, err);
    ps__async_applied(p, m->env);
  } else if (!rc) {
    p->reply_not_applied = 1; /* past max_steps: the reply says so, and neither side's ledger counts it */
  }
  if (targets != stack) {
    free(targets);
  }
  if (rc == TFX_ENAN) {
    rc = nan_outcome(p, m, err);
  }
  p->stats.update_failures += rc == TFX_ENOMEM;
  if (rc) {
    return rc;
  }
  rc = answer_push(p, m, stale, err);
  p->reply_not_applied = 0;
  ps__async_snapshot(p, 0); /* replicas, async and ssp: every cluster.replica_batch_steps pushes */
  ps__service(p);
  return rc;
}
