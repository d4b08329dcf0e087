/* DCN-v2's cross layer (Wang et al., 2020): x_{l+1} = x0 * (xl W + b) + xl, elementwise, on rows of d values.
 * Full rank: W [d, d] ("kernel"). Low rank (rank = r > 0): W = V U with V [d, r] ("kernel") and U [r, d]
 * ("kernel_u"), the paper's cheaper form. One input is both x0 and xl (the first layer of a stack); two inputs
 * are x0 and xl. The step keeps u = xl W + b [B, d] and, at low rank, t = xl V [B, r] in l->cols. */
#include <cblas.h>
#include <string.h>

#include "nn/nn_impl.h"

static int cross_width(const tfx_model *m, int p) {
  return p < 0 ? m->ih * m->iw * m->ic : m->layers[p].oh * m->layers[p].ow * m->layers[p].oc;
}

static const char *input_name(const tfx_model *m, int p) {
  return p < 0 ? "input" : m->layers[p].name;
}

static tfx_var *cross_var(tfx_model *m, const layer *l, const char *suffix, int64_t rows, int64_t cols,
                          const char *init) {
  tfx_var *v = &m->vars[m->n_vars++];
  memset(v, 0, sizeof *v);
  snprintf(v->name, sizeof v->name, "%s/%s", l->name, suffix);
  v->dtype = TFX_DTYPE_FLOAT32;
  v->rank = cols ? 2 : 1;
  v->shape[0] = rows;
  v->shape[1] = cols;
  v->count = (size_t)rows * (size_t)(cols ? cols : 1);
  v->trainable = 1;
  snprintf(v->init, sizeof v->init, "%s", init);
  v->fan_in = rows;
  v->fan_out = cols ? cols : rows;
  return v;
}

int nn__cross_shape(tfx_model *m, layer *l, const tfx_layer_spec *s, tfx_err *err) {
  int d = cross_width(m, l->in[0]);
  for (int k = 0; k < l->n_in; k++) {
    int p = l->in[k], rank = p < 0 ? m->in_rank : m->layers[p].out_rank;
    if (rank != 1 || cross_width(m, p) != d) {
      return tfx_err_set(err, TFX_ESHAPE, "layer %s: cross of '%s' (rank %d, %d values) with x0 '%s' of %d values",
                         l->name, input_name(m, p), rank, cross_width(m, p), input_name(m, l->in[0]), d);
    }
  }
  if (d < 1) {
    return tfx_err_set(err, TFX_ESHAPE, "layer %s: cross on a zero-width input '%s'", l->name, input_name(m, l->in[0]));
  }
  if (s->rank < 0 || s->rank >= d) {
    return tfx_err_set(err, TFX_ECONFIG, "layer %s: rank %d, want 0 (full) or 1..%d", l->name, s->rank, d - 1);
  }
  const char *init = s->initializer[0] ? s->initializer : "glorot_uniform";
  l->out_rank = 1;
  l->oh = l->ow = 1;
  l->oc = d;
  l->pool = s->rank; /* the rank, 0 for full */
  l->w = cross_var(m, l, "kernel", d, s->rank ? s->rank : d, init);
  l->u = s->rank ? cross_var(m, l, "kernel_u", s->rank, d, init) : NULL;
  l->b = cross_var(m, l, "bias", d, 0, "zeros");
  return TFX_OK;
}

size_t nn__cross_cols(const layer *l) {
  return (size_t)l->oc + (size_t)l->pool;
}

static const float *in_of(const tfx_model *m, int p, const float *x) {
  return p < 0 ? x : m->layers[p].out;
}

void nn__cross_forward(tfx_model *m, layer *l, const float *x, int batch) {
  int d = l->oc, r = l->pool;
  const float *x0 = in_of(m, l->in[0], x), *xl = in_of(m, l->in[l->n_in - 1], x);
  float *u = l->cols, *t = l->cols + (size_t)batch * d;
  if (r) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, r, d, 1.0f, xl, d, l->w->value, r, 0.0f, t, r);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, d, r, 1.0f, t, r, l->u->value, d, 0.0f, u, d);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, d, d, 1.0f, xl, d, l->w->value, d, 0.0f, u, d);
  }
  for (int b = 0; b < batch; b++) {
    for (int j = 0; j < d; j++) {
      size_t i = (size_t)b * d + j;
      u[i] += l->b->value[j];
      l->out[i] = x0[i] * u[i] + xl[i];
    }
  }
}

/* du = dy * x0 into scratch; the bias gradient; the kernels' gradients; then dxl = dy + du W^T (and, with one
 * input, + dy * u), each handed to its producer. */
void nn__cross_backward(tfx_model *m, layer *l, const float *x, int batch, const nn_grad_sink *sink) {
  int d = l->oc, r = l->pool, p0 = l->in[0], pl = l->in[l->n_in - 1];
  const float *x0 = in_of(m, p0, x), *xl = in_of(m, pl, x), *u = l->cols, *t = l->cols + (size_t)batch * d;
  float *g = m->scratch, *du = l->dout; /* du overwrites dy once dy's uses are done */
  for (size_t i = 0; i < (size_t)batch * d; i++) {
    g[i] = l->dout[i] * u[i]; /* dx0 */
  }
  if (l->n_in == 2 && p0 >= 0 && m->layers[p0].needs_grad) {
    sink->give(sink->ctx, p0, g, batch, d, d);
  }
  for (size_t i = 0; i < (size_t)batch * d; i++) { /* g: dxl's direct part (plus dx0 with one input) */
    g[i] = l->dout[i] + (l->n_in == 1 ? g[i] : 0.0f);
    du[i] = l->dout[i] * x0[i];
  }
  memset(l->b->grad, 0, sizeof(float) * (size_t)d);
  for (int b = 0; b < batch; b++) {
    for (int j = 0; j < d; j++) {
      l->b->grad[j] += du[(size_t)b * d + j];
    }
  }
  if (r) { /* u = t U, t = xl V: dU = t^T du, dt = du U^T (into the t buffer's room in l->cols), dV = xl^T dt */
    float *dt = l->cols + (size_t)batch * d;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r, d, batch, 1.0f, t, r, du, d, 0.0f, l->u->grad, d);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, r, d, 1.0f, du, d, l->u->value, d, 0.0f, dt, r);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, r, batch, 1.0f, xl, d, dt, r, 0.0f, l->w->grad, r);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, d, r, 1.0f, dt, r, l->w->value, r, 1.0f, g, d);
  } else {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, d, batch, 1.0f, xl, d, du, d, 0.0f, l->w->grad, d);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, d, d, 1.0f, du, d, l->w->value, d, 1.0f, g, d);
  }
  if (pl >= 0 && m->layers[pl].needs_grad) {
    sink->give(sink->ctx, pl, g, batch, d, d);
  }
}
