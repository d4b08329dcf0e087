/* DIN's target attention (Zhou et al., 2018), in a bilinear form: a sequence of item rows h_1..h_L (an
 * embedding bag with combiner sequence, [L, k]) pooled by their attention to a target t [k]:
 *   q = t W,  s_i = h_i . q / sqrt(k),  a = softmax(s) over the example's positions,  p = sum_i a_i h_i,
 * and the output [2k] is p beside p * q (whose sum is the attention-weighted score, what a sum over the history
 * dilutes). Positions past the example's ids are masked (a short history); an empty history gives zeros, never a
 * NaN. The lengths come from the sequence bag's lent batch. The step keeps q, a and dq per example in l->cols;
 * the products with W run on OpenBLAS. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "nn/nn_impl.h"

int nn__attn_shape(tfx_model *m, layer *l, tfx_err *err) {
  int ps = l->in[0], pt = l->in[1];
  const layer *seq = ps >= 0 ? &m->layers[ps] : NULL;
  if (!seq || seq->kind != L_EMBAG || seq->combiner != NN_COMBINER_SEQUENCE) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "layer %s: its first input '%s' is not an embedding_bag with combiner sequence", l->name,
                       seq ? seq->name : "input");
  }
  int k = seq->oc, tw = pt < 0 ? m->ih * m->iw * m->ic : layer_out_size(&m->layers[pt]);
  int trank = pt < 0 ? m->in_rank : m->layers[pt].out_rank;
  if (trank != 1 || tw != k) {
    return tfx_err_set(err, TFX_ESHAPE, "layer %s: target '%s' has %d values (rank %d), the sequence's rows %d",
                       l->name, pt < 0 ? "input" : m->layers[pt].name, tw, trank, k);
  }
  l->out_rank = 1;
  l->oh = l->ow = 1;
  l->oc = 2 * k;
  tfx_var *v = &m->vars[m->n_vars++];
  memset(v, 0, sizeof *v);
  snprintf(v->name, sizeof v->name, "%s/kernel", l->name);
  v->dtype = TFX_DTYPE_FLOAT32;
  v->rank = 2;
  v->shape[0] = v->shape[1] = k;
  v->count = (size_t)k * k;
  v->trainable = 1;
  snprintf(v->init, sizeof v->init, "glorot_uniform");
  v->fan_in = v->fan_out = k;
  l->w = v;
  return TFX_OK;
}

/* Per example: q [k] and a [L] (backward writes dq over dout's second half, read by then). */
size_t nn__attn_cols(const layer *l) {
  return (size_t)l->oc + (size_t)l->iw;
}

static const float *in_of(const tfx_model *m, int p, const float *x) {
  return p < 0 ? x : m->layers[p].out;
}

/* The positions of example b the attention reads: its ids, at most L. */
static int seq_len(const tfx_model *m, const layer *l, int b) {
  const layer *seq = &m->layers[l->in[0]];
  int64_t n = seq->csr ? seq->csr->off[b + 1] - seq->csr->off[b] : 0;
  return n < seq->ow ? (int)n : seq->ow;
}

/* The masked softmax of the scores of example b's first len rows into a. */
static void attend(const float *h, const float *q, int len, int k, float *a) {
  float c = 1.0f / sqrtf((float)k), top = -INFINITY, sum = 0;
  for (int i = 0; i < len; i++) {
    a[i] = c * cblas_sdot(k, h + (size_t)i * k, 1, q, 1);
    top = a[i] > top ? a[i] : top;
  }
  for (int i = 0; i < len; i++) {
    sum += a[i] = expf(a[i] - top);
  }
  for (int i = 0; i < len; i++) {
    a[i] /= sum;
  }
}

void nn__attn_forward(tfx_model *m, layer *l, const float *x, int batch) {
  const layer *seq = &m->layers[l->in[0]];
  int k = seq->oc, L = seq->ow;
  size_t cs = nn__attn_cols(l);
  const float *t = in_of(m, l->in[1], x);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, k, k, 1.0f, t, k, l->w->value, k, 0.0f, l->cols,
              (int)cs);
  for (int b = 0; b < batch; b++) {
    const float *h = seq->out + (size_t)b * L * k, *q = l->cols + b * cs;
    float *a = l->cols + b * cs + k, *y = l->out + (size_t)b * 2 * k;
    int len = seq_len(m, l, b);
    memset(y, 0, sizeof(float) * 2 * (size_t)k);
    attend(h, q, len, k, a);
    for (int i = 0; i < len; i++) {
      cblas_saxpy(k, a[i], h + (size_t)i * k, 1, y, 1);
    }
    for (int j = 0; j < k; j++) {
      y[k + j] = y[j] * q[j];
    }
  }
}

/* Example b's gradients: the rows' into dh [L, k], and dq into the step buffer (its q slot's neighbour). */
static void example_backward(const float *h, const float *q, const float *a, const float *y, const float *dy, int len,
                             int k, float *dh, float *dq, float *dp) {
  float c = 1.0f / sqrtf((float)k), sum = 0;
  for (int j = 0; j < k; j++) {
    dp[j] = dy[j] + dy[k + j] * q[j];
    dq[j] = dy[k + j] * y[j];
  }
  for (int i = 0; i < len; i++) { /* da_i = h_i . dp, kept in dh's first slot until ds is known */
    sum += a[i] * cblas_sdot(k, h + (size_t)i * k, 1, dp, 1);
  }
  for (int i = 0; i < len; i++) {
    const float *hi = h + (size_t)i * k;
    float ds = a[i] * (cblas_sdot(k, hi, 1, dp, 1) - sum);
    for (int j = 0; j < k; j++) {
      dh[(size_t)i * k + j] = a[i] * dp[j] + ds * c * q[j];
      dq[j] += ds * c * hi[j];
    }
  }
}

void nn__attn_backward(tfx_model *m, layer *l, const float *x, int batch, const nn_grad_sink *sink) {
  const layer *seq = &m->layers[l->in[0]];
  int k = seq->oc, L = seq->ow, ps = l->in[0], pt = l->in[1];
  size_t cs = nn__attn_cols(l);
  float *g = m->scratch, dp[k > 0 ? k : 1];
  memset(g, 0, sizeof(float) * (size_t)batch * L * k);
  for (int b = 0; b < batch; b++) {
    float *qa = l->cols + b * cs;
    example_backward(seq->out + (size_t)b * L * k, qa, qa + k, l->out + (size_t)b * 2 * k, l->dout + (size_t)b * 2 * k,
                     seq_len(m, l, b), k, g + (size_t)b * L * k, l->dout + (size_t)b * 2 * k + k, dp);
  }
  if (m->layers[ps].needs_grad) {
    sink->give(sink->ctx, ps, g, batch, L * k, L * k);
  }
  /* dW = t^T dq, dt = dq W^T, with dq in each example's dout second half */
  const float *t = in_of(m, pt, x);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, k, batch, 1.0f, t, k, l->dout + k, 2 * k, 0.0f, l->w->grad,
              k);
  if (pt >= 0 && m->layers[pt].needs_grad) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, k, k, 1.0f, l->dout + k, 2 * k, l->w->value, k, 0.0f, g,
                k);
    sink->give(sink->ctx, pt, g, batch, k, k);
  }
}
