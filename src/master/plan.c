/* Round-robin and greedy placement with axis-0 partitioning. */
#include "master/plan.h"

#include <stdlib.h>
#include <string.h>

/* The shards of a variable: one per ps for a lazy table (ids spread by id mod n_ps, so Zipf's hot ids do not
 * pile onto one ps), else its axis-0 slices. */
static int parts_of(const tfx_config *cfg, const tfx_var *v, int n_ps) {
  if (v->lazy) {
    return n_ps;
  }
  size_t bytes = v->count * sizeof(float);
  if (cfg->min_slice_bytes <= 0 || bytes <= (size_t)cfg->min_slice_bytes) {
    return 1;
  }
  size_t parts = (bytes + (size_t)cfg->min_slice_bytes - 1) / (size_t)cfg->min_slice_bytes;
  if (parts > (size_t)cfg->max_shards) {
    parts = (size_t)cfg->max_shards;
  }
  if (parts > (size_t)v->shape[0]) {
    parts = (size_t)v->shape[0];
  }
  return (int)parts;
}

static int least_loaded(const size_t *load, int n_ps) {
  int best = 0;
  for (int p = 1; p < n_ps; p++) {
    best = load[p] < load[best] ? p : best;
  }
  return best;
}

/* Fills shard record k for part `part` of `parts` of variable v (range: a lazy table cut into id ranges). */
static void fill(tfx_plan *plan, int k, const tfx_var *v, int part, int parts, int ps, int range) {
  Tfx__Shard *s = &plan->shards[k];
  tfx__shard__init(s);
  int64_t rows = v->shape[0];
  s->var = strdup(v->name);
  if (v->lazy) { /* this ps makes the rows of its ids (id % parts == part, or a range) as they are touched */
    char key[160];
    snprintf(key, sizeof key, "%s/%s_%d", v->name, range ? "range" : "mod", part);
    s->key = strdup(key);
    s->lazy = 1;
    s->mod_n = range ? 0 : parts;
    s->mod_r = range ? 0 : part;
    if (!range) {
      part = 0;
      parts = 1;
    }
  } else if (parts == 1) {
    s->key = strdup(v->name);
  } else {
    char key[160];
    snprintf(key, sizeof key, "%s/part_%d", v->name, part);
    s->key = strdup(key);
  }
  s->ps = ps;
  s->shape = plan->shapes + 4 * k;
  s->n_shape = (size_t)v->rank;
  memcpy(s->shape, v->shape, sizeof(int64_t) * (size_t)v->rank);
  s->row_begin = rows * part / parts;
  s->row_end = rows * (part + 1) / parts;
  s->trainable = v->trainable;
  s->init = strdup(v->init);
  s->fan_in = v->fan_in;
  s->fan_out = v->fan_out;
  s->dtype = (char *)"float32"; /* every variable is float32; a static string the plan does not free */
  plan->ptrs[k] = s;
}

static int order_by_bytes(const void *a, const void *b) {
  const tfx_var *x = *(tfx_var *const *)a, *y = *(tfx_var *const *)b;
  if (x->count != y->count) {
    return x->count < y->count ? 1 : -1;
  }
  return strcmp(x->name, y->name);
}

/* A shard's bytes on its ps: a slice's values, or a lazy table's expected share if every id is used (values
 * only; the ps adds the optimizer's slots per row it makes). */
static size_t shard_load(const Tfx__Shard *s) {
  size_t row = 1;
  for (size_t d = 1; d < s->n_shape; d++) {
    row *= (size_t)s->shape[d];
  }
  int64_t rows = s->row_end - s->row_begin;
  if (s->lazy && s->mod_n > 1) {
    rows = (rows - s->mod_r + s->mod_n - 1) / s->mod_n;
  }
  return row * (size_t)rows * sizeof(float);
}

int tfx_plan_build(const tfx_config *cfg, tfx_model *m, int n_ps, tfx_plan *plan, tfx_err *err) {
  memset(plan, 0, sizeof *plan);
  if (n_ps < 1) {
    return tfx_err_set(err, TFX_ECONFIG, "placement: the cluster has no ps");
  }
  int nv = tfx_model_nvars(m), total = 0, greedy = cfg->strategy == TFX_STRATEGY_GREEDY_BYTES;
  tfx_var **order = calloc((size_t)nv, sizeof *order);
  size_t *load = calloc((size_t)n_ps, sizeof *load);
  for (int i = 0; order && i < nv; i++) {
    order[i] = tfx_model_var(m, i);
    total += parts_of(cfg, order[i], n_ps);
  }
  plan->shards = calloc((size_t)total + 1, sizeof *plan->shards);
  plan->ptrs = calloc((size_t)total + 1, sizeof *plan->ptrs);
  plan->shapes = calloc((size_t)total * 4 + 4, sizeof *plan->shapes);
  if (!order || !load || !plan->shards || !plan->ptrs || !plan->shapes) {
    free(order);
    free(load);
    tfx_plan_fini(plan);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  if (greedy) {
    qsort(order, (size_t)nv, sizeof *order, order_by_bytes);
  }
  int k = 0, next = 0;
  for (int i = 0; i < nv; i++) {
    int parts = parts_of(cfg, order[i], n_ps);
    for (int part = 0; part < parts; part++, k++) {
      int ps = order[i]->lazy ? part : greedy ? least_loaded(load, n_ps) : next++ % n_ps;
      fill(plan, k, order[i], part, parts, ps, cfg->table_partition == TFX_PARTITION_RANGE);
      load[ps] += shard_load(&plan->shards[k]);
    }
  }
  plan->n = k;
  plan->n_ps = n_ps;
  plan->replicas = tfx_plan_backup(0, n_ps, cfg->ps_replicas) >= 0;
  plan->replica_batch = cfg->replica_batch_steps > 1 ? cfg->replica_batch_steps : 1;
  free(order);
  free(load);
  return TFX_OK;
}

void tfx_plan_fini(tfx_plan *plan) {
  for (int i = 0; plan->shards && i < plan->n; i++) {
    free(plan->shards[i].key);
    free(plan->shards[i].var);
    free(plan->shards[i].init);
  }
  free(plan->shards);
  free(plan->ptrs);
  free(plan->shapes);
  memset(plan, 0, sizeof *plan);
}

Tfx__Shard **tfx_plan_for_ps(const tfx_plan *plan, int ps, size_t *n) {
  Tfx__Shard **out = calloc((size_t)plan->n + 1, sizeof *out);
  *n = 0;
  for (int i = 0; out && i < plan->n; i++) {
    if (plan->shards[i].ps == ps) {
      out[(*n)++] = &plan->shards[i];
    }
  }
  return out;
}

int tfx_plan_backup(int ps, int n_ps, int replicas) {
  return replicas > 0 && n_ps >= 2 && ps >= 0 && ps < n_ps ? (ps + 1) % n_ps : -1;
}

/* Prints one shard's line (with its backup ps, or -1 for none). */
static void print_shard(const Tfx__Shard *s, int backup, FILE *f) {
  char also[32] = "";
  if (backup >= 0) {
    snprintf(also, sizeof also, "  backup: ps %d", backup);
  }
  if (s->lazy && s->mod_n <= 1 && s->row_end - s->row_begin < s->shape[0]) {
    fprintf(f, "  %-32s ids %lld..%lld of %lld (lazy: rows made when touched)  <= %zu bytes%s\n", s->key,
            (long long)s->row_begin, (long long)s->row_end, (long long)s->shape[0], shard_load(s), also);
  } else if (s->lazy) {
    fprintf(f, "  %-32s ids %% %lld == %lld of %lld (lazy: rows made when touched)  <= %zu bytes%s\n", s->key,
            (long long)(s->mod_n > 1 ? s->mod_n : 1), (long long)s->mod_r, (long long)s->row_end, shard_load(s), also);
  } else {
    fprintf(f, "  %-32s rows %lld..%lld  %10zu bytes%s\n", s->key, (long long)s->row_begin, (long long)s->row_end,
            shard_load(s), also);
  }
}

/* The bytes of ps p's own shards. */
static size_t ps_bytes(const tfx_plan *plan, int p) {
  size_t bytes = 0;
  for (int i = 0; i < plan->n; i++) {
    bytes += plan->shards[i].ps == p ? shard_load(&plan->shards[i]) : 0;
  }
  return bytes;
}

/* With replicas, sync: what each worker keeps for ps p until its backup holds it (2 x K + 2 pushes, each the dense
 * trainable bytes of p's shards and the rows of its lazy tables in one batch). */
static void print_kept(const tfx_plan *plan, int p, FILE *f) {
  size_t dense = 0;
  int lazy = 0;
  for (int i = 0; i < plan->n; i++) {
    const Tfx__Shard *s = &plan->shards[i];
    lazy |= s->ps == p && s->lazy;
    dense += s->ps == p && s->trainable && !s->lazy ? shard_load(s) : 0;
  }
  int n = 2 * plan->replica_batch + 2;
  fprintf(f, "  each worker keeps (sync) up to %d pushes for it until its backup holds them: <= %zu bytes%s\n", n,
          (size_t)n * dense, lazy ? " and the rows of its lazy tables in as many batches" : "");
}

/* With replicas, sync: the log ps p keeps as the backup of ps `of`'s lazy tables until a checkpoint holds it. */
static void print_log(const tfx_plan *plan, int of, FILE *f) {
  for (int i = 0; i < plan->n; i++) {
    if (plan->shards[i].ps == of && plan->shards[i].lazy) {
      fprintf(f, "  its log of ps %d's summed steps (sync, lazy tables) until a checkpoint holds them: <= %zu bytes\n",
              of, TFX_REPLICA_LOG_BYTES);
      return;
    }
  }
}

void tfx_plan_print(const tfx_plan *plan, FILE *f) {
  size_t max = 0, sum = 0;
  for (int p = 0; p < plan->n_ps; p++) {
    int backup = tfx_plan_backup(p, plan->n_ps, plan->replicas);
    fprintf(f, "ps %d:\n", p);
    for (int i = 0; i < plan->n; i++) {
      if (plan->shards[i].ps == p) {
        print_shard(&plan->shards[i], backup, f);
      }
    }
    size_t bytes = ps_bytes(plan, p);
    fprintf(f, "  total %zu bytes\n", bytes);
    if (backup >= 0) {
      int of = (p + plan->n_ps - 1) % plan->n_ps; /* the ps whose backup p holds */
      fprintf(f, "  as the backup of ps %d: %zu bytes; held in all: %zu bytes\n", of, ps_bytes(plan, of),
              bytes + ps_bytes(plan, of));
      print_kept(plan, p, f);
      print_log(plan, of, f);
    }
    max = bytes > max ? bytes : max;
    sum += bytes;
  }
  double mean = (double)sum / plan->n_ps;
  fprintf(f, "imbalance (max/mean): %.3f\n", mean > 0 ? (double)max / mean : 1.0);
}
