/* Graph-shaped models: layers that read named earlier layers (or the model input), the merges concat and add,
 * the ops matmul, bias_add and lookup on variables the model declares itself, and a backward pass that sums
 * the gradients of a layer read by several others. A plain list of layers is the special case where every
 * layer reads the one before it. */
#include <stdlib.h>
#include <string.h>

#include "nn/init.h"
#include "nn/nn_impl.h"

/* The index of the layer called name among the first n, -1 for "input", -2 if none. */
static int find_layer(const tfx_model *m, int n, const char *name, size_t len) {
  if (len == 5 && !strncmp(name, "input", 5)) {
    return -1;
  }
  for (int i = n - 1; i >= 0; i--) {
    if (strlen(m->layers[i].name) == len && !strncmp(m->layers[i].name, name, len)) {
      return i;
    }
  }
  return -2;
}

/* Copies the output shape of producer p (-1: the model input) as l's input shape. */
static void take_shape(const tfx_model *m, layer *l, int p) {
  if (p < 0) {
    l->in_rank = m->in_rank;
    l->ih = m->ih;
    l->iw = m->iw;
    l->ic = m->ic;
    return;
  }
  const layer *q = &m->layers[p];
  l->in_rank = q->out_rank;
  l->ih = q->oh;
  l->iw = q->ow;
  l->ic = q->oc;
}

static int parse_inputs(tfx_model *m, int i, const tfx_layer_spec *s, tfx_err *err) {
  layer *l = &m->layers[i];
  for (const char *p = s->inputs; *p;) {
    size_t n = strcspn(p, ",");
    int k = find_layer(m, i, p, n);
    if (k == -2) {
      return tfx_err_set(err, TFX_ECONFIG, "layer %s: input '%.*s' is not an earlier layer (nor \"input\")", l->name,
                         (int)n, p);
    }
    if (l->n_in == TFX_MAX_INPUTS) {
      return tfx_err_set(err, TFX_ECONFIG, "layer %s: more than %d inputs", l->name, TFX_MAX_INPUTS);
    }
    l->in[l->n_in++] = k;
    p += n + (p[n] == ',');
  }
  return TFX_OK;
}

/* An embedding bag reads a sparse field: the feature column named in inputs, or the LibSVM row ("input"). */
static int link_bag(tfx_model *m, layer *l, const tfx_layer_spec *s, tfx_err *err) {
  const char *want = s->inputs[0] ? s->inputs : "input";
  l->field = -1;
  for (int f = 0; f < m->n_fields; f++) {
    l->field = !strcmp(m->field_name[f], want) ? f : l->field;
  }
  if (l->field < 0) {
    return tfx_err_set(err, TFX_ECONFIG, "layer %s: input '%s' is not a categorical feature column%s", l->name, want,
                       m->n_fields && strcmp(m->field_name[0], "input") ? " (name one in inputs)" : "");
  }
  if (m->field_dim[l->field] > INT32_MAX) {
    return tfx_err_set(err, TFX_ESHAPE, "layer %s: %s has %lld ids; a table in one process holds at most 2^31 rows",
                       l->name, want, (long long)m->field_dim[l->field]);
  }
  l->in[0] = -1;
  l->n_in = 1;
  l->in_rank = 1;
  l->ih = l->iw = 1;
  l->ic = (int)m->field_dim[l->field];
  return TFX_OK;
}

int nn__graph_link(tfx_model *m, int i, const tfx_layer_spec *s, tfx_err *err) {
  layer *l = &m->layers[i];
  if (l->kind == L_EMBAG) {
    return link_bag(m, l, s, err);
  }
  int rc = parse_inputs(m, i, s, err);
  if (rc) {
    return rc;
  }
  if (l->n_in == 0) {
    l->in[l->n_in++] = i - 1;
  }
  int merge = layer_is_merge(l), lo = l->kind == L_CROSS ? 1 : merge ? 2 : 1;
  int hi = l->kind == L_CROSS || l->kind == L_ATTN ? 2 : merge ? TFX_MAX_INPUTS : 1;
  if (l->n_in < lo || l->n_in > hi) {
    return tfx_err_set(err, TFX_ECONFIG, "layer %s: %d inputs (%s)", l->name, l->n_in,
                       l->kind == L_CROSS  ? "a cross takes x0, or x0 and xl"
                       : l->kind == L_ATTN ? "a target_attention takes a sequence and a target"
                       : merge             ? "a merge takes 2 or more"
                                           : "takes exactly one");
  }
  for (int k = 0; k < l->n_in; k++) {
    if (l->in[k] >= 0) {
      m->layers[l->in[k]].consumers++;
    }
  }
  take_shape(m, l, l->in[0]);
  return TFX_OK;
}

static int in_size_of(const tfx_model *m, int p) {
  return p < 0 ? m->ih * m->iw * m->ic : layer_out_size(&m->layers[p]);
}

static int shape_merge(tfx_model *m, layer *l, tfx_err *err) {
  int total = 0, first = in_size_of(m, l->in[0]);
  for (int k = 0; k < l->n_in; k++) {
    int p = l->in[k], n = in_size_of(m, p), rank = p < 0 ? m->in_rank : m->layers[p].out_rank;
    const char *name = p < 0 ? "input" : m->layers[p].name;
    if (l->kind == L_CONCAT && rank != 1) {
      return tfx_err_set(err, TFX_ESHAPE, "layer %s: concat of '%s' of rank %d (flatten it first)", l->name, name,
                         rank);
    }
    if (l->kind == L_FM && p < 0) {
      return tfx_err_set(err, TFX_ECONFIG, "layer %s: an fm reads field embeddings (layers), not the input", l->name);
    }
    if ((l->kind == L_ADD || l->kind == L_FM) && (n != first || rank != 1)) {
      return tfx_err_set(err, TFX_ESHAPE, "layer %s: add of '%s' with %d values per example and '%s' with %d", l->name,
                         name, n, k ? (l->in[0] < 0 ? "input" : m->layers[l->in[0]].name) : name, first);
    }
    total += n;
  }
  if (l->kind == L_CONCAT) {
    l->out_rank = 1;
    l->oh = 1;
    l->ow = 1;
    l->oc = total;
  }
  if (l->kind == L_FM) { /* fm: the pairwise term [1]; bi_interaction (l->pool = 0): its vector [k] */
    l->out_rank = 1;
    l->oh = 1;
    l->ow = 1;
    l->oc = l->pool ? 1 : first;
  }
  return TFX_OK;
}

/* The declared variable an op names, unused by any earlier op. */
static int bind_var(tfx_model *m, layer *l, const tfx_layer_spec *s, tfx_var **out, tfx_err *err) {
  tfx_var *v = NULL;
  for (int k = 0; k < m->n_declared; k++) {
    v = strcmp(m->vars[k].name, s->variable) ? v : &m->vars[k];
  }
  if (!v) {
    return tfx_err_set(err, TFX_ECONFIG, "layer %s: variable '%s' is not in model.variables", l->name, s->variable);
  }
  for (const layer *q = m->layers; q < l; q++) {
    if (q->w == v || q->b == v) {
      return tfx_err_set(err, TFX_ECONFIG, "layer %s: variable '%s' is already used by layer %s (one op each)", l->name,
                         v->name, q->name);
    }
  }
  *out = v;
  return TFX_OK;
}

static int bad_var_shape(const layer *l, const tfx_var *v, const char *want, tfx_err *err) {
  char got[64] = "";
  for (int k = 0; k < v->rank; k++) {
    snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? ", " : "", (long long)v->shape[k]);
  }
  return tfx_err_set(err, TFX_ESHAPE, "layer %s: variable '%s' has shape [%s], want %s for a [%d] input", l->name,
                     v->name, got, want, l->in_rank == 1 ? layer_in_size(l) : l->ic);
}

static int shape_op(tfx_model *m, layer *l, const tfx_layer_spec *s, tfx_err *err) {
  tfx_var *v = NULL;
  int rc = bind_var(m, l, s, &v, err);
  if (rc) {
    return rc;
  }
  if (l->kind != L_BIAS && l->in_rank != 1) {
    return tfx_err_set(err, TFX_ESHAPE, "layer %s: expected a rank-1 input (add a flatten layer)", l->name);
  }
  if (l->kind == L_BIAS) {
    if (v->rank != 1 || v->shape[0] != l->ic) {
      return bad_var_shape(l, v, "[channels]", err);
    }
    l->b = v;
    return TFX_OK;
  }
  if (v->rank != 2 || (l->kind == L_MATMUL && v->shape[0] != layer_in_size(l))) {
    return bad_var_shape(l, v, l->kind == L_MATMUL ? "[inputs, units]" : "[vocabulary, dim]", err);
  }
  if ((int64_t)layer_in_size(l) * v->shape[1] > (1 << 28)) {
    return tfx_err_set(err, TFX_ESHAPE, "layer %s: output of %lld values per example is too large", l->name,
                       (long long)layer_in_size(l) * v->shape[1]);
  }
  l->w = v;
  l->out_rank = 1;
  l->oh = 1;
  l->ow = 1;
  l->oc = l->kind == L_MATMUL ? (int)v->shape[1] : layer_in_size(l) * (int)v->shape[1];
  if (l->kind == L_LOOKUP) {
    l->vocab = (int)v->shape[0];
    v->sparse = 1;
  }
  return TFX_OK;
}

int nn__graph_shape(tfx_model *m, layer *l, const tfx_layer_spec *s, tfx_err *err) {
  if (l->kind == L_CROSS) {
    return nn__cross_shape(m, l, s, err);
  }
  if (l->kind == L_DOT) {
    return nn__dot_shape(m, l, err);
  }
  if (l->kind == L_ATTN) {
    return nn__attn_shape(m, l, err);
  }
  if (layer_is_merge(l)) {
    return shape_merge(m, l, err);
  }
  return shape_op(m, l, s, err);
}

/* Parses "784,10" (already checked by the config reader) into v's shape. */
static void parse_dims(tfx_var *v, const char *shape) {
  v->rank = 0;
  v->count = 1;
  for (const char *p = shape; *p && v->rank < 4;) {
    char *end;
    v->shape[v->rank] = strtoll(p, &end, 10);
    v->count *= (size_t)v->shape[v->rank++];
    p = end + (*end == ',');
  }
}

int nn__graph_declare(tfx_model *m, const tfx_config *cfg, tfx_err *err) {
  for (int i = 0; i < cfg->n_variables; i++) {
    const tfx_var_spec *s = &cfg->variables[i];
    tfx_var *v = &m->vars[m->n_vars];
    snprintf(v->name, sizeof v->name, "%s", s->name);
    v->dtype = TFX_DTYPE_FLOAT32;
    parse_dims(v, s->shape);
    if (v->rank == 0 || (int64_t)v->count > (1LL << 31)) {
      return tfx_err_set(err, TFX_ESHAPE,
                         "model.variables '%s': shape '%s' (1 to 4 positive dims, at most 2^31 values)", s->name,
                         s->shape);
    }
    if (s->initializer[0] && tfx_init_check(s->initializer, err)) {
      return TFX_ECONFIG;
    }
    snprintf(v->init, sizeof v->init, "%s",
             s->initializer[0] ? s->initializer
             : v->rank >= 2    ? "glorot_uniform"
                               : "zeros");
    v->fan_in = v->shape[0];
    v->fan_out = v->rank >= 2 ? v->shape[1] : v->shape[0];
    v->trainable = s->trainable;
    m->n_vars = m->n_declared = i + 1;
  }
  return TFX_OK;
}

int nn__graph_finish(tfx_model *m, tfx_err *err) {
  for (int k = 0; k < m->n_declared; k++) {
    int used = 0;
    for (int i = 0; i < m->n_layers; i++) {
      used |= m->layers[i].w == &m->vars[k] || m->layers[i].b == &m->vars[k];
    }
    if (!used) {
      return tfx_err_set(err, TFX_ECONFIG, "model.variables '%s': no matmul, bias_add or lookup layer uses it",
                         m->vars[k].name);
    }
  }
  for (int i = 0; i < m->n_layers; i++) {
    layer *l = &m->layers[i];
    if (i < m->n_layers - 1 && l->consumers == 0) {
      return tfx_err_set(err, TFX_ECONFIG, "layer %s: no layer reads its output (only the last layer may be unread)",
                         l->name);
    }
    l->needs_grad = l->w != NULL || l->b != NULL;
    for (int k = 0; k < l->n_in; k++) {
      l->needs_grad |= l->in[k] >= 0 && m->layers[l->in[k]].needs_grad;
    }
  }
  return TFX_OK;
}

static const float *output_of(const tfx_model *m, int p, const float *x) {
  return p < 0 ? x : m->layers[p].out;
}

static void give_grad(tfx_model *m, int p, const float *g, int batch, int n, int stride);

/* Factorization machine over the inputs v_f [k] (field embeddings): per dimension j,
 * 0.5 * ((sum_f v_fj)^2 - sum_f v_fj^2), the pairwise interactions in O(k n); summed over j for fm. */
static void fm_forward(tfx_model *m, layer *l, const float *x, int batch) {
  int k = in_size_of(m, l->in[0]);
  for (int b = 0; b < batch; b++) {
    float total = 0;
    for (int j = 0; j < k; j++) {
      float s = 0, q = 0;
      for (int f = 0; f < l->n_in; f++) {
        float v = output_of(m, l->in[f], x)[(size_t)b * k + j];
        s += v;
        q += v * v;
      }
      float t = 0.5f * (s * s - q);
      total += t;
      if (!l->pool) {
        l->out[(size_t)b * k + j] = t;
      }
    }
    if (l->pool) {
      l->out[b] = total;
    }
  }
}

/* The gradient of each input of an fm: dout_j * (sum_f v_fj - v_fj). */
static void fm_backward(tfx_model *m, layer *l, int batch) {
  int k = in_size_of(m, l->in[0]);
  float *g = m->scratch;
  for (int f = 0; f < l->n_in; f++) {
    int p = l->in[f];
    if (p < 0 || !m->layers[p].needs_grad) {
      continue;
    }
    for (int b = 0; b < batch; b++) {
      for (int j = 0; j < k; j++) {
        float s = 0;
        for (int h = 0; h < l->n_in; h++) {
          s += output_of(m, l->in[h], NULL)[(size_t)b * k + j];
        }
        float dy = l->pool ? l->dout[b] : l->dout[(size_t)b * k + j];
        g[(size_t)b * k + j] = dy * (s - m->layers[p].out[(size_t)b * k + j]);
      }
    }
    give_grad(m, p, g, batch, k, k);
  }
}

void nn__graph_merge_forward(tfx_model *m, layer *l, const float *x, int batch) {
  if (l->kind == L_CROSS || l->kind == L_DOT || l->kind == L_ATTN) {
    (l->kind == L_CROSS ? nn__cross_forward : l->kind == L_DOT ? nn__dot_forward : nn__attn_forward)(m, l, x, batch);
    return;
  }
  if (l->kind == L_FM) {
    fm_forward(m, l, x, batch);
    return;
  }
  int out = layer_out_size(l);
  for (int k = 0, off = 0; k < l->n_in; k++) {
    const float *in = output_of(m, l->in[k], x);
    int n = in_size_of(m, l->in[k]);
    for (int b = 0; b < batch; b++) {
      float *y = l->out + (size_t)b * out + (l->kind == L_CONCAT ? off : 0);
      const float *src = in + (size_t)b * n;
      if (l->kind == L_CONCAT || k == 0) {
        memcpy(y, src, sizeof(float) * (size_t)n);
      } else {
        for (int j = 0; j < n; j++) {
          y[j] += src[j];
        }
      }
    }
    off += n;
  }
}

/* Hands the gradient g [batch, n] (row stride `stride`) to producer p: copies it when p has one reader, adds
 * it otherwise (its dout was zeroed before backward). */
static void give_grad(tfx_model *m, int p, const float *g, int batch, int n, int stride) {
  layer *q = &m->layers[p];
  for (int b = 0; b < batch; b++) {
    float *d = q->dout + (size_t)b * n;
    const float *src = g + (size_t)b * stride;
    if (q->consumers == 1) {
      memcpy(d, src, sizeof(float) * (size_t)n);
    } else {
      for (int j = 0; j < n; j++) {
        d[j] += src[j];
      }
    }
  }
}

/* The graph's gradient sink (ctx: the model): give_grad. */
static void sink_give(void *ctx, int p, const float *g, int batch, int n, int stride) {
  give_grad(ctx, p, g, batch, n, stride);
}

static void merge_backward(tfx_model *m, layer *l, const float *x, int batch) {
  if (l->kind == L_CROSS || l->kind == L_DOT || l->kind == L_ATTN) {
    nn_grad_sink sink = {sink_give, m};
    (l->kind == L_CROSS ? nn__cross_backward : l->kind == L_DOT ? nn__dot_backward : nn__attn_backward)(m, l, x, batch,
                                                                                                        &sink);
    return;
  }
  if (l->kind == L_FM) {
    fm_backward(m, l, batch);
    return;
  }
  int out = layer_out_size(l);
  for (int k = 0, off = 0; k < l->n_in; k++) {
    int p = l->in[k], n = in_size_of(m, p);
    if (p >= 0 && m->layers[p].needs_grad) {
      give_grad(m, p, l->dout + (l->kind == L_CONCAT ? off : 0), batch, n, out);
    }
    off += n;
  }
}

/* Backward of a one-input layer; its input gradient goes straight into a single-reader producer. */
static void layer_backward(tfx_model *m, layer *l, const float *x, int batch) {
  int p = l->in[0];
  const float *in = output_of(m, p, x);
  if (p < 0 || !m->layers[p].needs_grad) {
    nn__layer_backward(l, in, NULL, batch);
    return;
  }
  layer *q = &m->layers[p];
  if (q->consumers == 1) {
    nn__layer_backward(l, in, q->dout, batch);
    return;
  }
  int n = layer_out_size(q);
  nn__layer_backward(l, in, m->scratch, batch);
  give_grad(m, p, m->scratch, batch, n, n);
}

void nn__graph_backward(tfx_model *m, const float *x, int batch) {
  for (int i = 0; i < m->n_layers - 1; i++) {
    layer *l = &m->layers[i];
    if (l->needs_grad && l->consumers > 1) {
      memset(l->dout, 0, sizeof(float) * (size_t)batch * layer_out_size(l));
    }
  }
  for (int i = m->n_layers - 1; i >= 0; i--) {
    layer *l = &m->layers[i];
    if (!l->needs_grad) {
      continue;
    }
    if (layer_is_merge(l)) {
      merge_backward(m, l, x, batch);
    } else {
      layer_backward(m, l, x, batch);
    }
  }
}
