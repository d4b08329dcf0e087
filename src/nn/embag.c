/* The embedding bag over sparse examples (tfx_csr): TensorFlow's embedding_lookup_sparse and PyTorch's
 * EmbeddingBag with per-sample weights. Forward combines the weighted rows of each example's ids; backward gives
 * the gradient of the touched rows only, ascending and with duplicates summed, and never touches the others.
 * The model lends each bag its field of the batch here (tfx_model_set_csr); with TFX_ROWS_BATCH it lists the rows
 * of each lazy table the batch touches, which the caller fills before forward (nn does no I/O). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"

/* One valid id of the batch: its row, its position in the batch's id list and its example. */
typedef struct bag_pair {
  int64_t id;
  int32_t pos, example;
} bag_pair;

/* Grows row_of to cap ids, and, for a table's owner, the batch's rows of its table (batch_ids and batch_vals, as
 * many as the gradient's rows); -1 when memory runs out. */
static int reserve_batch(layer *l, size_t cap, size_t rows) {
  int32_t *of = realloc(l->row_of, sizeof *of * cap);
  l->row_of = of ? of : l->row_of;
  if (!of || l->owner != l) {
    l->batch_cap = of ? cap : l->batch_cap;
    return of ? 0 : -1;
  }
  tfx_var *v = l->w;
  int64_t *ids = realloc(v->batch_ids, sizeof *ids * rows);
  v->batch_ids = ids ? ids : v->batch_ids;
  float *vals = ids ? realloc(v->batch_vals, sizeof *vals * rows * (size_t)l->oc) : NULL;
  v->batch_vals = vals ? vals : v->batch_vals;
  l->batch_cap = vals ? cap : l->batch_cap;
  return vals ? 0 : -1;
}

int nn__embag_reserve(layer *l, size_t nnz) {
  if (nnz <= l->pairs_cap && (!l->from_batch || l->batch_cap >= l->pairs_cap)) {
    return 0;
  }
  size_t cap = nnz * 2 > l->pairs_cap ? nnz * 2 : l->pairs_cap;
  bag_pair *p = realloc(l->pairs, sizeof *p * cap * 2); /* the second half: the radix sort's buffer */
  tfx_var *v = l->w;
  size_t width = (size_t)l->oc, rows = cap < (size_t)v->shape[0] ? cap : (size_t)v->shape[0];
  if (!p) {
    return -1;
  }
  l->pairs = p;
  l->pairs_cap = cap;
  if (l->owner != l) { /* a bag sharing another's table: the owner sizes the table's buffers for every bag */
    return !l->from_batch || !reserve_batch(l, cap, rows) ? 0 : -1;
  }
  int64_t *r = realloc(v->rows, sizeof(int64_t) * rows);
  v->rows = r ? r : v->rows;
  float *g = r ? realloc(v->grad, sizeof(float) * rows * width) : NULL;
  v->grad = g ? g : v->grad;
  return r && g && (!l->from_batch || !reserve_batch(l, cap, rows)) ? 0 : -1;
}

/* The combiner's factor for weights w[0..n) (NULL: all 1): 1 (sum), 1/sum (mean), 1/sqrt(sum of squares)
 * (sqrtn); 0 for an empty or all-zero bag, which then gives zeros. */
static float bag_factor(int combiner, const float *w, int64_t n) {
  if (combiner == 0) {
    return 1.0f;
  }
  double s = 0;
  for (int64_t k = 0; k < n; k++) {
    double x = w ? w[k] : 1.0;
    s += combiner == 1 ? x : x * x;
  }
  if (s == 0) {
    return 0.0f;
  }
  return (float)(combiner == 1 ? 1.0 / s : 1.0 / sqrt(s));
}

/* Adds a * row into out[0..d). */
static void axpy(float a, const float *row, float *out, int d) {
  for (int j = 0; j < d; j++) {
    out[j] += a * row[j];
  }
}

/* The row of the batch's k-th id (valid): the table's own (one process) or its copy in the lent batch's rows. */
static inline const float *bag_row(const layer *l, int64_t k, int64_t id) {
  if (l->from_batch) {
    return l->w->batch_vals + (size_t)l->row_of[k - l->csr->off[0]] * (size_t)l->oc;
  }
  return l->w->value + (size_t)id * (size_t)l->oc;
}

/* The sequence combiner: position j of example b is the row of its j-th id (zeros past its ids, or for an id
 * outside the table, reported as a bag's); ids past max_len (l->ow) are not read. */
static void sequence_forward(layer *l, int batch) {
  const tfx_csr *c = l->csr;
  int d = l->oc, len = l->ow;
  memset(l->out, 0, sizeof(float) * (size_t)batch * len * d);
  for (int b = 0; b < batch; b++) {
    for (int64_t k = c->off[b]; k < c->off[b + 1] && k - c->off[b] < len; k++) {
      int64_t id = c->ids[k];
      if (id < 0 || id >= l->vocab) {
        l->bad_id = l->n_bad_ids++ ? l->bad_id : (float)id;
        l->bad_example = l->n_bad_ids == 1 ? b : l->bad_example;
        continue;
      }
      memcpy(l->out + ((size_t)b * len + (size_t)(k - c->off[b])) * d, bag_row(l, k, id), sizeof(float) * d);
    }
  }
}

void nn__embag_forward(layer *l, int batch) {
  const tfx_csr *c = l->csr;
  int d = l->oc;
  l->n_bad_ids = 0;
  if (l->combiner == NN_COMBINER_SEQUENCE) {
    sequence_forward(l, batch);
    return;
  }
  for (int b = 0; b < batch; b++) {
    float *out = l->out + (size_t)b * d;
    memset(out, 0, sizeof(float) * (size_t)d);
    int64_t from = c->off[b], to = c->off[b + 1];
    float f = l->bag_scale[b] = bag_factor(l->combiner, c->vals ? c->vals + from : NULL, to - from);
    for (int64_t k = from; k < to; k++) {
      int64_t id = c->ids[k];
      /* a scattered row of the table, four ahead (a batch's rows are few and at hand) */
      if (!l->from_batch && k + 4 < to && c->ids[k + 4] >= 0 && c->ids[k + 4] < l->vocab) {
        const float *ahead = bag_row(l, k + 4, c->ids[k + 4]);
        __builtin_prefetch(ahead);
        __builtin_prefetch(ahead + d - 1);
      }
      if (id < 0 || id >= l->vocab) {
        if (!l->n_bad_ids++) {
          l->bad_id = (float)id;
          l->bad_example = b;
        }
        continue; /* an id outside the table: no row, no gradient (tfx_model_input_status reports it) */
      }
      axpy(f * (c->vals ? c->vals[k] : 1.0f), bag_row(l, k, id), out, d);
    }
    if (l->b) {
      axpy(1.0f, l->b->value, out, d);
    }
  }
}

#define RADIX_BITS 11
#define RADIX (1 << RADIX_BITS)

/* Sorts p[0..n) by id, stably (positions stay ascending within an id), with tmp[0..n) as the buffer: an LSD radix
 * sort over as many 11-bit digits as the largest id needs. Returns where the result is (p or tmp). */
static bag_pair *radix_sort(bag_pair *p, bag_pair *tmp, size_t n, int64_t max_id) {
  static _Thread_local size_t count[RADIX];
  for (int shift = 0; shift == 0 || (max_id >> shift) > 0; shift += RADIX_BITS) {
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++) {
      count[(p[i].id >> shift) & (RADIX - 1)]++;
    }
    size_t sum = 0;
    for (int d = 0; d < RADIX; d++) {
      size_t c = count[d];
      count[d] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; i++) {
      tmp[count[(p[i].id >> shift) & (RADIX - 1)]++] = p[i];
    }
    bag_pair *t = p;
    p = tmp;
    tmp = t;
  }
  return p;
}

/* The batch's valid ids as (id, position, example), sorted by id then position, into *out; returns how many.
 * Sorted once per lent batch (tfx_model_set_csr clears l->sorted): the batch's rows and backward share it. */
static size_t sorted_pairs(layer *l, int batch, const bag_pair **out) {
  if (l->sorted) {
    *out = l->sorted;
    return l->n_sorted;
  }
  const tfx_csr *c = l->csr;
  size_t n = 0;
  int64_t base = c->off[0], max_id = 0;
  for (int b = 0; b < batch; b++) {
    for (int64_t k = c->off[b]; k < c->off[b + 1]; k++) {
      int64_t id = c->ids[k];
      if (id >= 0 && id < l->vocab) {
        l->pairs[n++] = (bag_pair){id, (int32_t)(k - base), b};
        max_id = id > max_id ? id : max_id;
      }
    }
  }
  *out = l->sorted = radix_sort(l->pairs, l->pairs + l->pairs_cap, n, max_id);
  return l->n_sorted = n;
}

/* The bags reading one table (its owner's mates, itself first) walked together by id: each bag's valid ids sorted,
 * and a cursor per bag, so a table shared by several columns sees one ascending list of the batch's ids. */
typedef struct mate_walk {
  const bag_pair *pairs[NN_MAX_SHARE];
  size_t n[NN_MAX_SHARE], at[NN_MAX_SHARE];
  int count;
} mate_walk;

static void walk_start(layer *owner, mate_walk *w) {
  w->count = owner->n_mates;
  for (int i = 0; i < w->count; i++) {
    layer *l = owner->mates[i];
    w->n[i] = sorted_pairs(l, l->csr->n, &w->pairs[i]);
    w->at[i] = 0;
  }
}

/* The bag holding the smallest id not walked yet (the first such bag on a tie), or -1 when all are walked. */
static int walk_next(const mate_walk *w) {
  int best = -1;
  for (int i = 0; i < w->count; i++) {
    if (w->at[i] < w->n[i] && (best < 0 || w->pairs[i][w->at[i]].id < w->pairs[best][w->at[best]].id)) {
      best = i;
    }
  }
  return best;
}

void nn__embag_batch_rows(layer *l, int batch) {
  (void)batch; /* each bag's own lent batch (l->csr) gives its ids */
  mate_walk w;
  walk_start(l, &w);
  tfx_var *v = l->w;
  v->n_batch = 0;
  for (int i = walk_next(&w); i >= 0; i = walk_next(&w)) {
    const bag_pair *p = &w.pairs[i][w.at[i]++];
    if (!v->n_batch || v->batch_ids[v->n_batch - 1] != p->id) {
      v->batch_ids[v->n_batch++] = p->id;
    }
    l->mates[i]->row_of[p->pos] = (int32_t)(v->n_batch - 1);
  }
}

/* Adds the gradient of bag l's pair p into g (the row of p's id). */
static void pair_grad(const layer *l, const bag_pair *p, float *g) {
  const tfx_csr *c = l->csr;
  int d = l->oc;
  if (l->combiner == NN_COMBINER_SEQUENCE) {
    size_t slot = (size_t)(c->off[0] + p->pos - c->off[p->example]); /* its position in the example's cell */
    axpy(1.0f, l->dout + ((size_t)p->example * l->ow + slot) * d, g, d);
    return;
  }
  float a = l->bag_scale[p->example] * (c->vals ? c->vals[c->off[0] + p->pos] : 1.0f);
  axpy(a, l->dout + (size_t)p->example * d, g, d);
}

/* 1 when bag l reads pair p: a sequence reads no id past max_len. */
static int pair_read(const layer *l, const bag_pair *p) {
  const tfx_csr *c = l->csr;
  return l->combiner != NN_COMBINER_SEQUENCE || c->off[0] + p->pos - c->off[p->example] < l->ow;
}

/* The table's row gradient, one row per id the batch touched in any of the bags reading it, ascending, summed. A
 * table's owner computes it when its own backward comes, after every other bag's (they come later in the layer
 * list, and backward runs from the last layer). */
static void table_backward(layer *owner) {
  tfx_var *v = owner->w;
  int d = owner->oc;
  mate_walk w;
  walk_start(owner, &w);
  v->n_rows = 0;
  for (int i = walk_next(&w); i >= 0; i = walk_next(&w)) {
    const bag_pair *p = &w.pairs[i][w.at[i]++];
    if (!pair_read(owner->mates[i], p)) {
      continue; /* past max_len: not read, no gradient */
    }
    if (!v->n_rows || v->rows[v->n_rows - 1] != p->id) {
      v->rows[v->n_rows++] = p->id;
      memset(v->grad + (v->n_rows - 1) * (size_t)d, 0, sizeof(float) * (size_t)d);
    }
    pair_grad(owner->mates[i], p, v->grad + (v->n_rows - 1) * (size_t)d);
  }
}

void nn__embag_backward(layer *l, int batch) {
  int d = l->oc;
  if (l->owner == l) {
    table_backward(l);
  }
  if (l->b) {
    memset(l->b->grad, 0, sizeof(float) * (size_t)d);
    for (int b = 0; b < batch; b++) {
      axpy(1.0f, l->dout + (size_t)b * d, l->b->grad, d);
    }
  }
}

/* The model's sparse input: which models read it, and lending each bag its field of the step's batch. */

int tfx_model_sparse_input(const tfx_model *m) {
  for (int i = 0; i < m->n_layers; i++) {
    if (m->layers[i].kind == L_EMBAG) {
      return 1;
    }
  }
  return 0;
}

/* The ids of field f of the lent batch. */
static size_t field_nnz(const tfx_csr *fields, int f) {
  const tfx_csr *c = &fields[f];
  return (size_t)(c->off[c->n] - c->off[0]);
}

int tfx_model_set_csr(tfx_model *m, const tfx_csr *fields, int n_fields, tfx_err *err) {
  for (int i = 0; i < m->n_layers; i++) {
    layer *l = &m->layers[i];
    if (l->kind == L_EMBAG && l->field >= n_fields) {
      return tfx_err_set(err, TFX_EINVAL, "layer %s: the data has %d sparse fields, it reads field %d", l->name,
                         n_fields, l->field);
    }
  }
  for (int i = 0; i < m->n_layers; i++) {
    layer *l = &m->layers[i];
    if (l->kind != L_EMBAG) {
      continue;
    }
    l->from_batch = m->rows == TFX_ROWS_BATCH;
    size_t nnz = field_nnz(fields, l->field);
    for (int k = 1; l->owner == l && k < l->n_mates; k++) { /* a table's owner holds every reader's rows */
      nnz += field_nnz(fields, l->mates[k]->field);
    }
    if (nn__embag_reserve(l, nnz)) {
      return tfx_err_set(err, TFX_ENOMEM, "layer %s: out of memory for a batch of %zu ids", l->name, nnz);
    }
    l->csr = &fields[l->field];
    l->sorted = NULL; /* a new batch: its ids are sorted when first needed */
  }
  for (int i = 0; i < m->n_layers; i++) { /* every bag has its batch: the owners list their tables' rows */
    layer *l = &m->layers[i];
    if (l->kind == L_EMBAG && l->from_batch && l->owner == l) {
      nn__embag_batch_rows(l, l->csr->n);
    }
  }
  return TFX_OK;
}

void tfx_model_set_rows(tfx_model *m, tfx_rows rows) {
  m->rows = rows;
}

void tfx_model_gather_rows(tfx_model *m) {
  for (int i = 0; m->rows == TFX_ROWS_BATCH && i < m->n_layers; i++) {
    const layer *l = &m->layers[i];
    if (l->kind != L_EMBAG || !l->from_batch || l->owner != l) {
      continue;
    }
    const tfx_var *v = l->w;
    size_t width = (size_t)l->oc;
    for (size_t k = 0; k < v->n_batch; k++) {
      if (k + 4 < v->n_batch) { /* a scattered row of the table, four ahead */
        __builtin_prefetch(v->value + (size_t)v->batch_ids[k + 4] * width);
      }
      memcpy(v->batch_vals + k * width, v->value + (size_t)v->batch_ids[k] * width, sizeof(float) * width);
    }
  }
}
