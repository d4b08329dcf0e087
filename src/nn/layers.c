/* Forward and backward of every layer kind, on OpenBLAS sgemm. */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/init.h"
#include "nn/nn_impl.h"

/* dx = y * (dy - sum(dy * y)) per row, in place in dy. */
static void softmax_backward(const float *y, float *dy, size_t rows, size_t width) {
  for (size_t r = 0; r < rows; r++) {
    const float *v = y + r * width;
    float *g = dy + r * width, dot = 0;
    for (size_t j = 0; j < width; j++) {
      dot += g[j] * v[j];
    }
    for (size_t j = 0; j < width; j++) {
      g[j] = v[j] * (g[j] - dot);
    }
  }
}

static void act_forward(act a, float alpha, float *y, size_t n) {
  switch (a) {
    case A_RELU:
      for (size_t i = 0; i < n; i++) {
        y[i] = y[i] > 0 ? y[i] : 0;
      }
      break;
    case A_TANH:
      for (size_t i = 0; i < n; i++) {
        y[i] = tanhf(y[i]);
      }
      break;
    case A_SIGMOID:
      for (size_t i = 0; i < n; i++) {
        y[i] = 1.0f / (1.0f + expf(-y[i]));
      }
      break;
    case A_LEAKY:
      for (size_t i = 0; i < n; i++) {
        y[i] = y[i] > 0 ? y[i] : alpha * y[i];
      }
      break;
    default:
      break;
  }
}

/* dy *= f'(x), written in terms of the output y. */
static void act_backward(act a, float alpha, const float *y, float *dy, size_t n) {
  switch (a) {
    case A_RELU:
      for (size_t i = 0; i < n; i++) {
        dy[i] = y[i] > 0 ? dy[i] : 0;
      }
      break;
    case A_TANH:
      for (size_t i = 0; i < n; i++) {
        dy[i] *= 1 - y[i] * y[i];
      }
      break;
    case A_SIGMOID:
      for (size_t i = 0; i < n; i++) {
        dy[i] *= y[i] * (1 - y[i]);
      }
      break;
    case A_LEAKY:
      for (size_t i = 0; i < n; i++) {
        dy[i] = y[i] > 0 ? dy[i] : alpha * dy[i];
      }
      break;
    default:
      break;
  }
}

/* Rows per block of the fused bias/activation passes: a block stays in L1 between its two sub-passes. */
#define ROW_BLOCK_FLOATS 2048

/* What one part of a split loop works on; each part function reads the fields it needs. */
typedef struct job {
  const layer *l;
  const float *in;
  float *out;
  float *db;
  const float *mask;
  int rows, cols;
  uint64_t key; /* dropout: the step's random key */
} job;

/* y = act(y + b) on rows [r0, r1) in L1-sized blocks: one trip through memory instead of two. */
static void bias_act_part(void *ctx, size_t r0, size_t r1) {
  const job *j = ctx;
  const layer *l = j->l;
  int cols = j->cols, step = cols < ROW_BLOCK_FLOATS ? ROW_BLOCK_FLOATS / cols : 1;
  for (size_t b0 = r0; b0 < r1; b0 += (size_t)step) {
    size_t n = r1 - b0 < (size_t)step ? r1 - b0 : (size_t)step;
    float *blk = j->out + b0 * cols;
    for (size_t r = 0; l->b && r < n; r++) {
      float *row = blk + r * cols;
      const float *b = l->b->value;
      for (int c = 0; c < cols; c++) {
        row[c] += b[c];
      }
    }
    act_forward(l->act, l->alpha, blk, n * cols);
  }
}

/* y = act(y + b) over [rows, cols], split over rows. */
static void bias_act_forward(layer *l, float *y, int rows, int cols) {
  job j = {.l = l, .out = y, .cols = cols};
  tfx_par_for(l->par, (size_t)rows, nn__grain_rows((size_t)cols), bias_act_part, &j);
}

/* Chunks [c0, c1) of TFX_NN_CHUNKS: dy *= act'(y) on the chunk's rows, and (with db) the chunk's column sums
 * into l->dbpart, in L1-sized blocks of rows. */
static void act_bias_back_part(void *ctx, size_t c0, size_t c1) {
  const job *j = ctx;
  const layer *l = j->l;
  int cols = j->cols, step = cols < ROW_BLOCK_FLOATS ? ROW_BLOCK_FLOATS / cols : 1;
  for (size_t k = c0; k < c1; k++) {
    size_t r0 = (size_t)j->rows * k / TFX_NN_CHUNKS, r1 = (size_t)j->rows * (k + 1) / TFX_NN_CHUNKS;
    float *part = j->db ? l->dbpart + k * cols : NULL;
    for (int c = 0; j->db && c < cols; c++) {
      part[c] = 0;
    }
    for (size_t b0 = r0; b0 < r1; b0 += (size_t)step) {
      size_t n = r1 - b0 < (size_t)step ? r1 - b0 : (size_t)step;
      float *blk = j->out + b0 * cols;
      act_backward(l->act, l->alpha, l->out + b0 * cols, blk, n * cols);
      for (size_t r = 0; j->db && r < n; r++) {
        for (int c = 0; c < cols; c++) {
          part[c] += blk[r * cols + c];
        }
      }
    }
  }
}

/* dy *= act'(y), then db = column sums of dy (if db): the chunks are split over the pool and summed in order. */
static void act_bias_backward(layer *l, float *dy, float *db, int rows, int cols) {
  if (l->act == A_NONE && !db) {
    return;
  }
  job j = {.l = l, .out = dy, .db = db, .rows = rows, .cols = cols};
  size_t whole = (size_t)rows * cols;
  tfx_par_for(l->par, TFX_NN_CHUNKS, whole >= 2 * PAR_GRAIN_FLOATS ? 1 : TFX_NN_CHUNKS, act_bias_back_part, &j);
  for (int c = 0; db && c < cols; c++) {
    db[c] = 0;
  }
  for (int k = 0; db && k < TFX_NN_CHUNKS; k++) {
    const float *part = l->dbpart + (size_t)k * cols;
    for (int c = 0; c < cols; c++) {
      db[c] += part[c];
    }
  }
}

/* y = act(x W + b) (matmul: no b); a matrix product over the whole batch. */
static void dense_forward(layer *l, const float *in, int batch) {
  int n_in = layer_in_size(l), n_out = l->oc;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, n_out, n_in, 1.0f, in, n_in, l->w->value, n_out, 0.0f,
              l->out, n_out);
  bias_act_forward(l, l->out, batch, n_out);
}

static void dense_backward(layer *l, const float *in, float *din, int batch) {
  int n_in = layer_in_size(l), n_out = l->oc;
  act_bias_backward(l, l->dout, l->b ? l->b->grad : NULL, batch, n_out);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n_in, n_out, batch, 1.0f, in, n_in, l->dout, n_out, 0.0f,
              l->w->grad, n_out);
  if (din) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, n_in, n_out, 1.0f, l->dout, n_out, l->w->value, n_out,
                0.0f, din, n_in);
  }
}

/* The kernel columns [kx0, kx1) of output column ox that fall inside the image (the rest is padding), and the
 * input column of kx = 0. Within one kernel row those columns are contiguous in NHWC memory. */
static int kx_range(const layer *l, int ox, int *kx0, int *kx1) {
  int x0 = ox * l->stride - l->pad_l;
  *kx0 = x0 < 0 ? -x0 : 0;
  *kx1 = x0 + l->k > l->iw ? l->iw - x0 : l->k;
  return x0;
}

/* Unfolds the NHWC input patches of samples [b0, b1) (j->in into l->cols): one row per output pixel, columns
 * (ky, kx, c); each kernel row is one copy of its in-image run and zeros for the padding. */
static void im2col_part(void *ctx, size_t b0, size_t b1) {
  const job *j = ctx;
  const layer *l = j->l;
  const float *in = j->in;
  float *cols = l->cols;
  int k = l->k, ic = l->ic, kc = k * ic;
  for (int b = (int)b0; b < (int)b1; b++) {
    const float *img = in + (size_t)b * layer_in_size(l);
    for (int oy = 0; oy < l->oh; oy++) {
      for (int ox = 0; ox < l->ow; ox++) {
        float *row = cols + ((size_t)(b * l->oh + oy) * l->ow + ox) * k * kc;
        int kx0, kx1, x0 = kx_range(l, ox, &kx0, &kx1);
        for (int ky = 0; ky < k; ky++) {
          int iy = oy * l->stride + ky - l->pad_t;
          float *dst = row + ky * kc;
          if (iy < 0 || iy >= l->ih || kx1 <= kx0) {
            memset(dst, 0, sizeof(float) * (size_t)kc);
            continue;
          }
          const float *src = img + ((size_t)iy * l->iw + x0) * ic;
          for (int j = 0; j < kx0 * ic; j++) {
            dst[j] = 0;
          }
          for (int j = kx0 * ic; j < kx1 * ic; j++) {
            dst[j] = src[j];
          }
          for (int j = kx1 * ic; j < kc; j++) {
            dst[j] = 0;
          }
        }
      }
    }
  }
}

/* Folds the column gradients (l->cols) of samples [b0, b1) back onto their input gradient (j->out),
 * accumulating overlaps, one in-image run per kernel row. */
static void col2im_part(void *ctx, size_t b0, size_t b1) {
  const job *j = ctx;
  const layer *l = j->l;
  const float *cols = l->cols;
  float *din = j->out;
  int k = l->k, ic = l->ic, kc = k * ic;
  memset(din + b0 * layer_in_size(l), 0, sizeof(float) * (b1 - b0) * layer_in_size(l));
  for (int b = (int)b0; b < (int)b1; b++) {
    float *img = din + (size_t)b * layer_in_size(l);
    for (int oy = 0; oy < l->oh; oy++) {
      for (int ox = 0; ox < l->ow; ox++) {
        const float *row = cols + ((size_t)(b * l->oh + oy) * l->ow + ox) * k * kc;
        int kx0, kx1, x0 = kx_range(l, ox, &kx0, &kx1);
        for (int ky = 0; ky < k; ky++) {
          int iy = oy * l->stride + ky - l->pad_t;
          if (iy < 0 || iy >= l->ih) {
            continue;
          }
          const float *src = row + ky * kc;
          float *dst = img + ((size_t)iy * l->iw + x0) * ic;
          for (int j = kx0 * ic; j < kx1 * ic; j++) {
            dst[j] += src[j];
          }
        }
      }
    }
  }
}

static void conv_forward(layer *l, const float *in, int batch) {
  int rows = batch * l->oh * l->ow, kkc = l->k * l->k * l->ic;
  job j = {.l = l, .in = in};
  tfx_par_for(l->par, (size_t)batch, nn__grain_rows((size_t)l->oh * l->ow * kkc), im2col_part, &j);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, l->oc, kkc, 1.0f, l->cols, kkc, l->w->value, l->oc, 0.0f,
              l->out, l->oc);
  bias_act_forward(l, l->out, rows, l->oc);
}

static void conv_backward(layer *l, const float *in, float *din, int batch) {
  int rows = batch * l->oh * l->ow, kkc = l->k * l->k * l->ic;
  (void)in; /* l->cols still holds the forward pass's im2col of in */
  act_bias_backward(l, l->dout, l->b->grad, rows, l->oc);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kkc, l->oc, rows, 1.0f, l->cols, kkc, l->dout, l->oc, 0.0f,
              l->w->grad, l->oc);
  if (!din) {
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, kkc, l->oc, 1.0f, l->dout, l->oc, l->w->value, l->oc, 0.0f,
              l->cols, kkc);
  job j = {.l = l, .out = din};
  tfx_par_for(l->par, (size_t)batch, nn__grain_rows((size_t)l->oh * l->ow * kkc), col2im_part, &j);
}

/* Elements [i0, i1) of a training dropout: a counter-based mask, so any split draws the same one. */
static void dropout_part(void *ctx, size_t i0, size_t i1) {
  const job *j = ctx;
  const layer *l = j->l;
  float keep = 1.0f - l->rate, scale = 1.0f / keep;
  for (size_t i = i0; i < i1; i++) {
    l->mask[i] = tfx_rand_uniform(j->key, i) < keep ? scale : 0.0f;
    l->out[i] = j->in[i] * l->mask[i];
  }
}

/* Elements [i0, i1): out = in * mask (with a mask), else a copy of in; then act (the job's layer's). */
static void elementwise_part(void *ctx, size_t i0, size_t i1) {
  const job *j = ctx;
  if (j->mask) {
    for (size_t i = i0; i < i1; i++) {
      j->out[i] = j->in[i] * j->mask[i];
    }
  } else if (j->out != j->in) {
    memcpy(j->out + i0, j->in + i0, sizeof(float) * (i1 - i0));
  }
  if (j->l) {
    act_forward(j->l->act, j->l->alpha, j->out + i0, i1 - i0);
  }
}

/* out = in * mask (mask NULL: a copy), then act_l (NULL: none), over n elements split over the pool. */
static void elementwise(tfx_par *par, const float *in, const float *mask, float *out, const layer *act_l, size_t n) {
  job j = {.l = act_l, .in = in, .mask = mask, .out = out};
  tfx_par_for(par, n, PAR_GRAIN_FLOATS, elementwise_part, &j);
}

static void dropout_forward(layer *l, const float *in, int batch, int training, uint64_t step) {
  size_t n = (size_t)batch * layer_in_size(l);
  if (!training || l->rate <= 0) {
    memcpy(l->out, in, sizeof(float) * n);
    for (size_t i = 0; i < n; i++) {
      l->mask[i] = 1.0f;
    }
    return;
  }
  job j = {.l = l, .in = in, .key = l->seed ^ (step * 0x9E3779B97F4A7C15ULL)};
  tfx_par_for(l->par, n, PAR_GRAIN_FLOATS, dropout_part, &j);
}

/* Gathers one table row per input position; an id outside the table gives a zero row and is counted (an input
 * error tfx_model_input_status reports), never clamped to a row. */
static void embed_forward(layer *l, const float *in, int batch) {
  int n = layer_in_size(l), d = l->oc / n;
  l->n_bad_ids = 0;
  for (int i = 0; i < batch * n; i++) {
    float f = in[i];
    int ok = f >= 0 && f < (float)l->vocab;
    l->ids[i] = ok ? (int)f : -1;
    if (!ok && !l->n_bad_ids++) {
      l->bad_id = f;
      l->bad_example = i / n;
    }
    float *row = l->out + (size_t)i * d;
    if (ok) {
      memcpy(row, l->w->value + (size_t)l->ids[i] * d, sizeof(float) * (size_t)d);
    } else {
      memset(row, 0, sizeof(float) * (size_t)d);
    }
  }
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

size_t tfx_rows_lower_bound(const int64_t *rows, size_t n, int64_t x) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (rows[mid] < x) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/* Row-sparse gradient: the touched rows, ascending, and one summed gradient row each. */
static void embed_backward(layer *l, float *din, int batch) {
  int n = layer_in_size(l), d = l->oc / n, total = batch * n;
  int32_t *sorted = l->ids + total;
  memcpy(sorted, l->ids, sizeof(int32_t) * (size_t)total);
  qsort(sorted, (size_t)total, sizeof(int32_t), cmp_i32);
  tfx_var *v = l->w;
  v->n_rows = 0;
  for (int i = 0; i < total; i++) {
    if (sorted[i] >= 0 && (!v->n_rows || v->rows[v->n_rows - 1] != sorted[i])) {
      v->rows[v->n_rows++] = sorted[i];
    }
  }
  memset(v->grad, 0, sizeof(float) * v->n_rows * (size_t)d);
  for (int i = 0; i < total; i++) {
    if (l->ids[i] < 0) {
      continue; /* an id outside the table: no row, no gradient */
    }
    float *g = v->grad + tfx_rows_lower_bound(v->rows, v->n_rows, l->ids[i]) * (size_t)d;
    const float *dy = l->dout + (size_t)i * d;
    for (int k = 0; k < d; k++) {
      g[k] += dy[k];
    }
  }
  if (din) {
    memset(din, 0, sizeof(float) * (size_t)total);
  }
}

#define BN_EPS 1e-3f

/* Batch norm forward: batch statistics (and moving averages) when training, moving statistics otherwise. */
static void bn_forward(layer *l, const float *in, int batch, int training) {
  int c = l->ic, rows = batch * l->ih * l->iw;
  float *mean = l->bn, *inv = l->bn + c, mom = l->rate > 0 ? l->rate : 0.99f;
  for (int k = 0; k < c; k++) {
    double s = 0, q = 0;
    for (int r = 0; training && r < rows; r++) {
      s += in[(size_t)r * c + k];
    }
    for (int r = 0; training && r < rows; r++) {
      q += (in[(size_t)r * c + k] - s / rows) * (in[(size_t)r * c + k] - s / rows);
    }
    float mu = training ? (float)(s / rows) : l->mmean->value[k],
          var = training ? (float)(q / rows) : l->mvar->value[k];
    mean[k] = mu;
    inv[k] = 1.0f / sqrtf(var + BN_EPS);
    if (training) {
      l->mmean->value[k] = mom * l->mmean->value[k] + (1 - mom) * mu;
      l->mvar->value[k] = mom * l->mvar->value[k] + (1 - mom) * var;
    }
  }
  for (int r = 0; r < rows; r++) {
    for (int k = 0; k < c; k++) {
      size_t i = (size_t)r * c + k;
      l->mask[i] = (in[i] - mean[k]) * inv[k];
      l->out[i] = l->w->value[k] * l->mask[i] + l->b->value[k];
    }
  }
}

static void bn_backward(layer *l, float *din, int batch) {
  int c = l->ic, rows = batch * l->ih * l->iw;
  float *dg = l->w->grad, *db = l->b->grad, *inv = l->bn + c;
  memset(dg, 0, sizeof(float) * (size_t)c);
  memset(db, 0, sizeof(float) * (size_t)c);
  for (int r = 0; r < rows; r++) {
    for (int k = 0; k < c; k++) {
      db[k] += l->dout[(size_t)r * c + k];
      dg[k] += l->dout[(size_t)r * c + k] * l->mask[(size_t)r * c + k];
    }
  }
  for (int r = 0; din && r < rows; r++) {
    for (int k = 0; k < c; k++) {
      size_t i = (size_t)r * c + k;
      din[i] = l->w->value[k] * inv[k] / (float)rows * ((float)rows * l->dout[i] - db[k] - l->mask[i] * dg[k]);
    }
  }
}

/* bias_add: y = act(x + b), the bias along the last axis. */
static void bias_forward(layer *l, const float *in, int batch) {
  size_t n = (size_t)batch * layer_out_size(l);
  memcpy(l->out, in, sizeof(float) * n);
  bias_act_forward(l, l->out, (int)(n / (size_t)l->oc), l->oc);
}

static void bias_backward(layer *l, float *din, int batch) {
  size_t n = (size_t)batch * layer_out_size(l);
  act_bias_backward(l, l->dout, l->b->grad, (int)(n / (size_t)l->oc), l->oc);
  if (din) {
    memcpy(din, l->dout, sizeof(float) * n);
  }
}

/* scale: y = x * rate, and its input gradient dx = dy * rate. */
static void scale(const float *x, float *y, size_t n, float rate) {
  for (size_t i = 0; i < n; i++) {
    y[i] = x[i] * rate;
  }
}

void nn__layer_forward(layer *l, const float *in, int batch, int training, uint64_t step) {
  size_t n = (size_t)batch * layer_out_size(l);
  switch (l->kind) {
    case L_DENSE:
    case L_MATMUL:
      dense_forward(l, in, batch);
      break;
    case L_BIAS:
      bias_forward(l, in, batch);
      break;
    case L_SCALE:
      scale(in, l->out, n, l->rate);
      break;
    case L_CONV:
      conv_forward(l, in, batch);
      break;
    case L_MAXPOOL:
    case L_AVGPOOL:
      nn__pool_forward(l, in, batch);
      break;
    case L_DROPOUT:
      dropout_forward(l, in, batch, training, step);
      break;
    case L_ACT:
      if (l->act == A_SOFTMAX) {
        memcpy(l->out, in, sizeof(float) * n);
        nn__softmax_rows(l->out, l->out, (size_t)batch, (size_t)layer_out_size(l));
      } else {
        elementwise(l->par, in, NULL, l->out, l, n);
      }
      break;
    case L_FLATTEN:
      elementwise(l->par, in, NULL, l->out, NULL, n);
      break;
    case L_EMBED:
    case L_LOOKUP:
      embed_forward(l, in, batch);
      break;
    case L_EMBAG:
      nn__embag_forward(l, batch);
      break;
    case L_BN:
      bn_forward(l, in, batch, training);
      break;
    default: /* merges are run by the graph (nn__graph_merge_forward) */
      break;
  }
}

void nn__layer_backward(layer *l, const float *in, float *din, int batch) {
  size_t n = (size_t)batch * layer_out_size(l);
  switch (l->kind) {
    case L_DENSE:
    case L_MATMUL:
      dense_backward(l, in, din, batch);
      break;
    case L_BIAS:
      bias_backward(l, din, batch);
      break;
    case L_SCALE:
      if (din) {
        scale(l->dout, din, n, l->rate);
      }
      break;
    case L_CONV:
      conv_backward(l, in, din, batch);
      break;
    case L_MAXPOOL:
    case L_AVGPOOL:
      if (din) {
        nn__pool_backward(l, din, batch);
      }
      break;
    case L_DROPOUT:
      if (din) {
        elementwise(l->par, l->dout, l->mask, din, NULL, n);
      }
      break;
    case L_ACT:
      if (l->act == A_SOFTMAX) {
        softmax_backward(l->out, l->dout, (size_t)batch, (size_t)layer_out_size(l));
      } else {
        act_backward(l->act, l->alpha, l->out, l->dout, n);
      }
      if (din) {
        memcpy(din, l->dout, sizeof(float) * n);
      }
      break;
    case L_FLATTEN:
      if (din) {
        elementwise(l->par, l->dout, NULL, din, NULL, n);
      }
      break;
    case L_EMBED:
    case L_LOOKUP:
      embed_backward(l, din, batch);
      break;
    case L_EMBAG:
      nn__embag_backward(l, batch);
      break;
    case L_BN:
      bn_backward(l, din, batch);
      break;
    default: /* merges: nn__graph_backward */
      break;
  }
}
