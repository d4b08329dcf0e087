/* DLRM's dot interaction (Naumov et al., 2019): n inputs of one width k (the field embeddings and the bottom
 * MLP's output) give the n(n-1)/2 dot products of distinct pairs, the upper triangle of V V^T row by row:
 * (0,1), (0,2), ..., (0,n-1), (1,2), ... The model concatenates them with the dense vector itself when it wants
 * DLRM's exact top input. Per example the step keeps V [n, k], the Gram or gradient matrix [n, n] and dV [n, k]
 * in l->cols; the products run on OpenBLAS (ssyrk forward, ssymm backward). */
#include <cblas.h>
#include <string.h>

#include "nn/nn_impl.h"

static int width_of(const tfx_model *m, int p) {
  return p < 0 ? m->ih * m->iw * m->ic : m->layers[p].oh * m->layers[p].ow * m->layers[p].oc;
}

int nn__dot_shape(tfx_model *m, layer *l, tfx_err *err) {
  int k = width_of(m, l->in[0]);
  for (int i = 0; i < l->n_in; i++) {
    int p = l->in[i], rank = p < 0 ? m->in_rank : m->layers[p].out_rank;
    if (rank != 1 || width_of(m, p) != k || k < 1) {
      return tfx_err_set(err, TFX_ESHAPE, "layer %s: dot_interaction of '%s' (rank %d, %d values) with '%s' of %d",
                         l->name, p < 0 ? "input" : m->layers[p].name, rank, width_of(m, p),
                         l->in[0] < 0 ? "input" : m->layers[l->in[0]].name, k);
    }
  }
  l->out_rank = 1;
  l->oh = l->ow = 1;
  l->oc = l->n_in * (l->n_in - 1) / 2;
  return TFX_OK;
}

size_t nn__dot_cols(const layer *l) {
  size_t n = (size_t)l->n_in, k = (size_t)layer_in_size(l);
  return 2 * n * k + n * n;
}

/* Example b's V [n, k] in the step buffer. */
static float *rows_of(const layer *l, int b) {
  size_t n = (size_t)l->n_in, k = (size_t)layer_in_size(l);
  return l->cols + (size_t)b * (2 * n * k + n * n);
}

void nn__dot_forward(tfx_model *m, layer *l, const float *x, int batch) {
  int n = l->n_in, k = layer_in_size(l);
  for (int b = 0; b < batch; b++) {
    float *v = rows_of(l, b), *z = v + (size_t)n * k, *y = l->out + (size_t)b * l->oc;
    for (int i = 0; i < n; i++) {
      const float *src = l->in[i] < 0 ? x : m->layers[l->in[i]].out;
      memcpy(v + (size_t)i * k, src + (size_t)b * k, sizeof(float) * (size_t)k);
    }
    cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, n, k, 1.0f, v, k, 0.0f, z, n);
    for (int i = 0, o = 0; i < n; i++) {
      for (int j = i + 1; j < n; j++) {
        y[o++] = z[(size_t)i * n + j];
      }
    }
  }
}

/* dV = S V with S symmetric: S_ij = S_ji = dy of pair (i, j), zero diagonal; each input gets its row of dV. */
void nn__dot_backward(tfx_model *m, layer *l, const float *x, int batch, const nn_grad_sink *sink) {
  (void)x;
  int n = l->n_in, k = layer_in_size(l);
  size_t stride = 2 * (size_t)n * k + (size_t)n * n;
  for (int b = 0; b < batch; b++) {
    float *v = rows_of(l, b), *s = v + (size_t)n * k, *dv = s + (size_t)n * n;
    const float *dy = l->dout + (size_t)b * l->oc;
    for (int i = 0, o = 0; i < n; i++) {
      s[(size_t)i * n + i] = 0.0f;
      for (int j = i + 1; j < n; j++, o++) {
        s[(size_t)i * n + j] = s[(size_t)j * n + i] = dy[o];
      }
    }
    cblas_ssymm(CblasRowMajor, CblasLeft, CblasUpper, n, k, 1.0f, s, n, v, k, 0.0f, dv, k);
  }
  for (int i = 0; i < n; i++) {
    int p = l->in[i];
    if (p >= 0 && m->layers[p].needs_grad) {
      sink->give(sink->ctx, p, l->cols + (size_t)n * k + (size_t)n * n + (size_t)i * k, batch, k, (int)stride);
    }
  }
}
