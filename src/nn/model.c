/* Models from the experiment's layer list: shape inference, variables, step buffers (the loss is loss.c's). */
#include "nn/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "nn/init.h"
#include "nn/nn_impl.h"

#define TFX_MAX_LAYER_VALUES (1 << 28) /* per example: keeps every int size computation exact */

static int parse_act(const char *s, act *out) {
  static const char *const names[] = {"none", "relu", "tanh", "sigmoid", "leaky_relu", "softmax"};
  for (int i = 0; i < 6; i++) {
    if (strcmp(s, names[i]) == 0) {
      return *out = (act)i, 1;
    }
  }
  if (strcmp(s, "linear") == 0 || strcmp(s, "") == 0) {
    return *out = A_NONE, 1;
  }
  return 0;
}

#define NN_KIND_NAME(kind, name) [kind] = name,
static const char *const kind_names[L_NKINDS] = {NN_LAYER_KINDS(NN_KIND_NAME)};

/* The type a layer is written as in model.layers. */
static const char *kind_name(const layer *l) {
  return l->kind == L_FM && !l->pool ? "bi_interaction" : kind_names[l->kind];
}

static int parse_kind(const char *type, lkind *kind, act *a) {
  for (int i = 0; i < L_NKINDS; i++) {
    if (i != L_ACT && strcmp(type, kind_names[i]) == 0) {
      *kind = (lkind)i;
      return 1;
    }
  }
  if (strcmp(type, "bi_interaction") == 0) {
    *kind = L_FM;
    return 1;
  }
  if (parse_act(type, a) && *a != A_NONE) {
    return *kind = L_ACT, 1;
  }
  return 0;
}

static tfx_var *add_var(tfx_model *m, const layer *l, const char *suffix, int rank, const int64_t *shape,
                        const char *init, int64_t fan_in, int64_t fan_out) {
  tfx_var *v = &m->vars[m->n_vars++];
  snprintf(v->name, sizeof v->name, "%s/%s", l->name, suffix);
  v->dtype = TFX_DTYPE_FLOAT32;
  v->rank = rank;
  v->count = 1;
  for (int i = 0; i < rank; i++) {
    v->count *= (size_t)(v->shape[i] = shape[i]);
  }
  v->trainable = 1;
  snprintf(v->init, sizeof v->init, "%s", init);
  v->fan_in = fan_in;
  v->fan_out = fan_out;
  return v;
}

static void fmt_shape(const layer *l, int out, char *buf, size_t n) {
  if ((out ? l->out_rank : l->in_rank) == 1) {
    snprintf(buf, n, "[%d]", out ? l->oc : l->ih * l->iw * l->ic);
  } else {
    snprintf(buf, n, "[%d, %d, %d]", out ? l->oh : l->ih, out ? l->ow : l->iw, out ? l->oc : l->ic);
  }
}

static int need_rank(const layer *l, int rank, tfx_err *err) {
  if (l->in_rank == rank) {
    return TFX_OK;
  }
  char got[48];
  fmt_shape(l, 0, got, sizeof got);
  return tfx_err_set(err, TFX_ESHAPE, "layer %s: expected rank-%d input%s, got %s", l->name, rank,
                     rank == 1 ? " (add a flatten layer)" : "", got);
}

static int shape_dense(tfx_model *m, layer *l, const tfx_layer_spec *s, tfx_err *err) {
  int rc = need_rank(l, 1, err);
  if (rc) {
    return rc;
  }
  int n_in = layer_in_size(l);
  l->out_rank = 1;
  l->oh = 1;
  l->ow = 1;
  l->oc = s->units;
  int64_t ws[2] = {n_in, s->units}, bs[1] = {s->units};
  l->w = add_var(m, l, "kernel", 2, ws, s->initializer[0] ? s->initializer : "glorot_uniform", n_in, s->units);
  l->b = add_var(m, l, "bias", 1, bs, "zeros", n_in, s->units);
  return TFX_OK;
}

/* The output size and padding of a k x k window moved by l->stride ('what' is kernel or pool): TensorFlow's
 * 'same' (ceil(in / stride) outputs, the odd padded pixel at the bottom/right) or 'valid' (windows inside). */
static int shape_window(layer *l, int k, const char *padding, const char *what, tfx_err *err) {
  if (k < 1 || l->stride < 1) {
    return tfx_err_set(err, TFX_ECONFIG, "layer %s: %s %d, strides %d (want both >= 1)", l->name, what, k, l->stride);
  }
  if (strcmp(padding, "same") == 0) {
    l->oh = (l->ih + l->stride - 1) / l->stride;
    l->ow = (l->iw + l->stride - 1) / l->stride;
    int ph = (l->oh - 1) * l->stride + k - l->ih, pw = (l->ow - 1) * l->stride + k - l->iw;
    l->pad_t = ph > 0 ? ph / 2 : 0;
    l->pad_l = pw > 0 ? pw / 2 : 0;
  } else if (strcmp(padding, "valid") == 0) {
    if (l->ih < k || l->iw < k) {
      return tfx_err_set(err, TFX_ESHAPE, "layer %s: %s %d larger than input %dx%d (padding 'valid')", l->name, what, k,
                         l->ih, l->iw);
    }
    l->oh = (l->ih - k) / l->stride + 1;
    l->ow = (l->iw - k) / l->stride + 1;
  } else {
    return tfx_err_set(err, TFX_ECONFIG, "layer %s: padding '%s' (want same or valid)", l->name, padding);
  }
  return TFX_OK;
}

static int shape_conv(tfx_model *m, layer *l, const tfx_layer_spec *s, tfx_err *err) {
  int rc = need_rank(l, 3, err);
  if (rc) {
    return rc;
  }
  l->k = s->kernel_size;
  l->stride = tfx_config_layer_strides(s);
  l->out_rank = 3;
  l->oc = s->filters;
  if ((rc = shape_window(l, l->k, s->padding, "kernel", err))) {
    return rc;
  }
  int64_t ws[4] = {l->k, l->k, l->ic, l->oc}, bs[1] = {l->oc};
  int64_t fan_in = (int64_t)l->k * l->k * l->ic, fan_out = (int64_t)l->k * l->k * l->oc;
  l->w = add_var(m, l, "kernel", 4, ws, s->initializer[0] ? s->initializer : "glorot_uniform", fan_in, fan_out);
  l->b = add_var(m, l, "bias", 1, bs, "zeros", fan_in, fan_out);
  return TFX_OK;
}

/* Max or average pooling: a pool_size window moved by strides (default pool_size), 'valid' or 'same'. */
static int shape_pool(layer *l, const tfx_layer_spec *s, tfx_err *err) {
  int rc = need_rank(l, 3, err);
  if (rc) {
    return rc;
  }
  l->pool = s->pool_size;
  l->stride = tfx_config_layer_strides(s);
  l->out_rank = 3;
  l->oc = l->ic;
  return shape_window(l, l->pool, s->padding, "pool", err);
}

/* Embedding: each of the n input values is a row id of a [input_dim, units] table; output [n * units]. */
static int shape_embed(tfx_model *m, layer *l, const tfx_layer_spec *s, tfx_err *err) {
  int rc = need_rank(l, 1, err);
  if (rc) {
    return rc;
  }
  int n = layer_in_size(l);
  l->vocab = s->input_dim;
  l->out_rank = 1;
  l->oh = 1;
  l->ow = 1;
  l->oc = n * s->units;
  int64_t ws[2] = {s->input_dim, s->units};
  l->w =
      add_var(m, l, "embeddings", 2, ws, s->initializer[0] ? s->initializer : "uniform:0.05", s->input_dim, s->units);
  l->w->sparse = 1;
  return TFX_OK;
}

/* A bag reading the table of an earlier bag (model.layers[].table): the columns of one id space (a history and its
 * target item), so the table's rows and units must be the bag's own; the table keeps its owner's name, initializer
 * and lazy-table options. Each bag keeps its own bias. */
static int share_table(tfx_model *m, layer *l, const tfx_layer_spec *s, tfx_err *err) {
  layer *o = NULL;
  for (layer *p = m->layers; p < l; p++) {
    o = strcmp(p->name, s->table) ? o : p;
  }
  if (!o || o->kind != L_EMBAG) {
    return tfx_err_set(err, TFX_ECONFIG, "layer %s: table '%s' is not an earlier embedding_bag", l->name, s->table);
  }
  o = o->owner;
  if (o->vocab != l->vocab || o->oc != s->units) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "layer %s: shares the table of %s (%d rows x %d units), its own column and units give %d rows "
                       "x %d units",
                       l->name, o->name, o->vocab, o->oc, l->vocab, s->units);
  }
  if (o->n_mates == NN_MAX_SHARE) {
    return tfx_err_set(err, TFX_ECONFIG, "layer %s: the table of %s is read by %d bags already (at most %d)", l->name,
                       o->name, NN_MAX_SHARE, NN_MAX_SHARE);
  }
  o->mates[o->n_mates++] = l;
  l->owner = o;
  l->n_mates = 0;
  l->w = o->w;
  return TFX_OK;
}

/* Embedding bag over the sparse model input [D]: a table [input_dim (default D), units] and a bias; a bag that
 * gives the logits (last: the linear model) starts at zeros as TF's LinearModel, one feeding deeper layers
 * uniform in +-0.05 as Keras's Embedding. */
static int shape_embag(tfx_model *m, layer *l, const tfx_layer_spec *s, int last, tfx_err *err) {
  static const char *const combiners[] = {"sum", "mean", "sqrtn", "sequence"};
  int rc = need_rank(l, 1, err);
  if (rc) {
    return rc;
  }
  l->combiner = -1;
  for (int k = 0; k < 4; k++) {
    l->combiner = strcmp(s->combiner, combiners[k]) ? l->combiner : k;
  }
  if (l->combiner < 0) {
    return tfx_err_set(err, TFX_ECONFIG, "layer %s: combiner '%s' (want sum, mean, sqrtn or sequence)", l->name,
                       s->combiner);
  }
  if (l->combiner == NN_COMBINER_SEQUENCE && (l->field < 0 || m->field_len[l->field] < 1)) {
    return tfx_err_set(err, TFX_ECONFIG, "layer %s: combiner sequence reads a column with max_len (%s has none)",
                       l->name, l->field >= 0 ? m->field_name[l->field] : "input");
  }
  l->vocab = s->input_dim > 1 ? s->input_dim : layer_in_size(l);
  l->out_rank = 1;
  l->oh = 1;
  l->ow = 1;
  l->oc = s->units;
  if (l->combiner == NN_COMBINER_SEQUENCE) { /* [max_len, units]: a row per position, no bias */
    l->out_rank = 3;
    l->ow = m->field_len[l->field];
  }
  int64_t ws[2] = {l->vocab, s->units}, bs[1] = {s->units};
  const char *init = s->initializer[0] ? s->initializer : last ? "zeros" : "uniform:0.05";
  l->owner = l;
  l->mates[0] = l;
  l->n_mates = 1;
  if (s->table[0]) {
    rc = share_table(m, l, s, err);
  } else {
    l->w = add_var(m, l, "embeddings", 2, ws, init, l->vocab, s->units);
    l->w->sparse = l->w->lazy = 1;
  }
  l->b = rc ? NULL
         : s->use_bias && l->combiner != NN_COMBINER_SEQUENCE
             ? add_var(m, l, "bias", 1, bs, "zeros", l->vocab, s->units)
             : NULL;
  return rc;
}

/* Batch norm over the last axis (channels, or features of a rank-1 input): gamma, beta, moving mean/variance. */
static void shape_bn(tfx_model *m, layer *l) {
  int64_t cs[1] = {l->ic};
  l->w = add_var(m, l, "gamma", 1, cs, "ones", l->ic, l->ic);
  l->b = add_var(m, l, "beta", 1, cs, "zeros", l->ic, l->ic);
  l->mmean = add_var(m, l, "moving_mean", 1, cs, "zeros", l->ic, l->ic);
  l->mvar = add_var(m, l, "moving_variance", 1, cs, "ones", l->ic, l->ic);
  l->mmean->trainable = l->mvar->trainable = 0;
  l->mmean->assign = l->mvar->assign = 1;
}

/* Infers the output shape of layer l (input shape already set) and declares its variables. */
static int shape_layer(tfx_model *m, layer *l, const tfx_layer_spec *s, tfx_err *err) {
  l->out_rank = l->in_rank;
  l->oh = l->ih;
  l->ow = l->iw;
  l->oc = l->ic;
  switch (l->kind) {
    case L_DENSE:
      return shape_dense(m, l, s, err);
    case L_CONV:
      return shape_conv(m, l, s, err);
    case L_MAXPOOL:
    case L_AVGPOOL:
      return shape_pool(l, s, err);
    case L_FLATTEN:
      l->out_rank = 1;
      l->oh = 1;
      l->ow = 1;
      l->oc = layer_in_size(l);
      return TFX_OK;
    case L_EMBED:
      return shape_embed(m, l, s, err);
    case L_BN:
      if (l->in_rank == 1) {
        l->ic = l->ih * l->iw * l->ic;
        l->ih = l->iw = 1;
        l->oc = l->ic;
      }
      shape_bn(m, l);
      return TFX_OK;
    case L_MATMUL:
    case L_BIAS:
    case L_LOOKUP:
    case L_CONCAT:
    case L_ADD:
    case L_FM:
    case L_CROSS:
    case L_DOT:
    case L_ATTN:
      return nn__graph_shape(m, l, s, err);
    default:
      return TFX_OK;
  }
}

static int build_layer(tfx_model *m, int i, const tfx_layer_spec *s, const tfx_config *cfg, int *counts, tfx_err *err) {
  layer *l = &m->layers[i];
  if (!parse_kind(s->type, &l->kind, &l->act)) {
    return tfx_err_set(err, TFX_ECONFIG, "model.layers[%d]: unknown layer type '%s'", i, s->type);
  }
  l->pool = l->kind == L_FM && !strcmp(s->type, "fm"); /* fm: the summed term; bi_interaction: its vector */
  if (l->kind != L_ACT && !parse_act(s->activation, &l->act)) {
    return tfx_err_set(err, TFX_ECONFIG, "model.layers[%d]: unknown activation '%s'", i, s->activation);
  }
  if (l->kind != L_ACT && l->act == A_SOFTMAX) {
    return tfx_err_set(err, TFX_ECONFIG, "model.layers[%d]: softmax is a layer of its own ({\"type\": \"softmax\"})",
                       i);
  }
  if (s->name[0]) {
    snprintf(l->name, sizeof l->name, "%s", s->name);
  } else {
    snprintf(l->name, sizeof l->name, "%s_%d", s->type, ++counts[l->kind]);
  }
  if (s->initializer[0] && tfx_init_check(s->initializer, err)) {
    return TFX_ECONFIG;
  }
  l->alpha = l->act == A_LEAKY ? (float)(s->rate > 0 ? s->rate : 0.2) : 0;
  l->rate = (float)s->rate;
  l->seed = (uint64_t)cfg->seed ^ tfx_hash_str(l->name);
  if (s->variable[0] && l->kind != L_MATMUL && l->kind != L_BIAS && l->kind != L_LOOKUP) {
    return tfx_err_set(err, TFX_ECONFIG, "layer %s: only matmul, bias_add and lookup take a variable", l->name);
  }
  if (s->table[0] && l->kind != L_EMBAG) {
    return tfx_err_set(err, TFX_ECONFIG, "layer %s: only embedding_bag takes a table", l->name);
  }
  int rc = nn__graph_link(m, i, s, err);
  if (rc) {
    return rc;
  }
  for (int k = 0; l->kind != L_EMBAG && cfg->n_features > 0 && k < l->n_in; k++) {
    if (l->in[k] < 0 && tfx_config_numeric_features(cfg) == 0) { /* the input's one placeholder value reads as 0 */
      return tfx_err_set(err, TFX_ESHAPE,
                         "layer %s: reads a zero-width input 'input' (model.features has no numeric "
                         "column)",
                         l->name);
    }
  }
  if (l->kind != L_EMBAG && (int64_t)l->ih * l->iw * l->ic > TFX_MAX_LAYER_VALUES) {
    return tfx_err_set(err, TFX_ESHAPE, "layer %s: input of %lld values per example (at most %d)", l->name,
                       (long long)l->ih * l->iw * l->ic, TFX_MAX_LAYER_VALUES);
  }
  if ((l->kind == L_DENSE || l->kind == L_EMBED) && (int64_t)layer_in_size(l) * s->units > TFX_MAX_LAYER_VALUES) {
    return tfx_err_set(err, TFX_ESHAPE, "layer %s: %lld x %d is too large", l->name, (long long)layer_in_size(l),
                       s->units);
  }
  rc = l->kind == L_EMBAG ? shape_embag(m, l, s, i == cfg->n_layers - 1, err) : shape_layer(m, l, s, err);
  if (!rc && (int64_t)l->oh * l->ow * l->oc > TFX_MAX_LAYER_VALUES) {
    rc = tfx_err_set(err, TFX_ESHAPE, "layer %s: output of %lld values per example (at most %d)", l->name,
                     (long long)l->oh * l->ow * l->oc, TFX_MAX_LAYER_VALUES);
  }
  return rc;
}

/* Marks variables trainable when their name starts with one of the comma-separated prefixes (all if empty). */
static void select_trainable(tfx_model *m, const char *prefixes) {
  for (int i = 0; i < m->n_vars && *prefixes; i++) {
    tfx_var *v = &m->vars[i];
    if (v->assign || (v < m->vars + m->n_declared && !v->trainable)) {
      continue; /* a variable declared non-trainable stays so */
    }
    v->trainable = 0;
    for (const char *p = prefixes; *p;) {
      size_t n = strcspn(p, ",");
      if (n && strncmp(v->name, p, n) == 0) {
        v->trainable = 1;
      }
      p += n + (p[n] == ',');
    }
  }
}

/* The loss's probabilities and the graph's gradient scratch (as wide as the widest layer output). */
static int alloc_model_buffers(tfx_model *m) {
  size_t widest = 1, B = (size_t)m->max_batch;
  for (int i = 0; i < m->n_layers; i++) {
    widest = (size_t)layer_out_size(&m->layers[i]) > widest ? (size_t)layer_out_size(&m->layers[i]) : widest;
  }
  m->probs = malloc(sizeof(float) * B * tfx_model_output_size(m));
  m->scratch = malloc(sizeof(float) * B * widest);
  return m->probs && m->scratch ? 0 : -1;
}

/* A variable's value (mapped lazily for a lazy table) and gradient buffers; a row-sparse one's rows too. */
static int alloc_var_buffers(tfx_model *m, tfx_var *v) {
  size_t B = (size_t)m->max_batch;
  size_t grad = v->count;
  if (v->sparse) {
    size_t width = v->count / (size_t)v->shape[0], touched = B * (size_t)layer_in_size(&m->layers[0]) * 64;
    for (int k = 0; k < m->n_layers; k++) {
      if (m->layers[k].w == v) { /* a bag's rows grow with its batches' ids (tfx_model_set_csr) */
        touched = B * (m->layers[k].kind == L_EMBAG ? 64 : (size_t)layer_in_size(&m->layers[k]));
      }
    }
    if (touched > (size_t)v->shape[0]) {
      touched = (size_t)v->shape[0];
    }
    grad = touched * width;
    if (!(v->rows = calloc(touched, sizeof(int64_t)))) {
      return -1;
    }
  }
  v->mapped = v->lazy ? v->count * sizeof(float) : 0; /* a lazy table costs the rows written, not its size */
  v->storage = v->value = v->lazy ? tfx_map_zeroed(v->mapped) : tfx_calloc_large(v->count, sizeof(float));
  if (!v->storage || !(v->grad = calloc(grad, sizeof(float)))) {
    return -1;
  }
  return 0;
}

/* A layer's step buffers: its output and gradient, and what its kind needs (columns, masks, ids). */
static int alloc_layer_buffers(tfx_model *m, layer *l) {
  size_t B = (size_t)m->max_batch;
  size_t n = B * (size_t)layer_out_size(l);
  if (!(l->out = calloc(n, sizeof(float))) || !(l->dout = calloc(n, sizeof(float)))) {
    return -1;
  }
  if (l->b && !(l->dbpart = malloc(sizeof(float) * TFX_NN_CHUNKS * (size_t)l->b->count))) {
    return -1;
  }
  if (l->kind == L_CONV && !(l->cols = malloc(sizeof(float) * B * l->oh * l->ow * l->k * l->k * l->ic))) {
    return -1;
  }
  if ((l->kind == L_MAXPOOL || l->kind == L_AVGPOOL) && !(l->argmax = malloc(sizeof(int32_t) * n))) {
    return -1;
  }
  if (l->kind == L_DROPOUT && !(l->mask = malloc(sizeof(float) * n))) {
    return -1;
  }
  if (l->kind == L_BN &&
      (!(l->mask = malloc(sizeof(float) * n)) || !(l->bn = calloc(2 * (size_t)l->ic, sizeof(float))))) {
    return -1;
  }
  size_t cols = l->kind == L_CROSS  ? nn__cross_cols(l)
                : l->kind == L_DOT  ? nn__dot_cols(l)
                : l->kind == L_ATTN ? nn__attn_cols(l)
                                    : 0;
  if (cols && !(l->cols = malloc(sizeof(float) * B * cols))) {
    return -1;
  }
  if (l->kind == L_EMBAG && !(l->bag_scale = malloc(sizeof(float) * B))) {
    return -1;
  }
  if ((l->kind == L_EMBED || l->kind == L_LOOKUP) &&
      !(l->ids = malloc(2 * sizeof(int32_t) * B * (size_t)layer_in_size(l)))) {
    return -1;
  }
  return 0;
}

static int alloc_buffers(tfx_model *m) {
  for (int i = 0; i < m->n_vars; i++) {
    if (alloc_var_buffers(m, &m->vars[i])) {
      return -1;
    }
  }
  for (int i = 0; i < m->n_layers; i++) {
    if (alloc_layer_buffers(m, &m->layers[i])) {
      return -1;
    }
  }
  return alloc_model_buffers(m);
}

/* The model input: rank 1 [n], or rank 3 [h, w, c] (a rank-2 input [w, c] is [1, w, c]). */
static void set_input_shape(tfx_model *m, const tfx_config *cfg) {
  if (cfg->n_features > 0) { /* feature columns: the numeric ones are the dense input, the others sparse fields */
    int numeric = tfx_config_numeric_features(cfg);
    m->in_rank = 1;
    m->ih = m->iw = 1;
    m->ic = numeric > 0 ? numeric : 1;
    for (int i = 0; i < cfg->n_features; i++) {
      const tfx_feature_spec *f = &cfg->features[i];
      if (strcmp(f->type, "numeric")) {
        snprintf(m->field_name[m->n_fields], sizeof m->field_name[0], "%s", f->name);
        m->field_len[m->n_fields] = (int)f->max_len;
        m->field_dim[m->n_fields++] = !strcmp(f->type, "identity") ? f->num_buckets : f->hash_bucket_size;
      }
    }
    return;
  }
  snprintf(m->field_name[0], sizeof m->field_name[0], "input"); /* a LibSVM row: one field, the input's width */
  m->field_dim[0] = (int64_t)cfg->input_shape[0] * (cfg->input_rank > 1 ? cfg->input_shape[1] : 1) *
                    (cfg->input_rank > 2 ? cfg->input_shape[2] : 1);
  m->n_fields = 1;
  m->in_rank = cfg->input_rank == 1 ? 1 : 3;
  m->ih = cfg->input_rank == 3 ? cfg->input_shape[0] : 1;
  m->iw = cfg->input_rank >= 2 ? cfg->input_shape[cfg->input_rank == 3 ? 1 : 0] : 1;
  m->ic = cfg->input_shape[cfg->input_rank - 1];
}

/* The K of the first top_K in model.metrics (5 when there is none). */
static int top_k_of(const char *metrics) {
  const char *p = strstr(metrics, "top_");
  int k = p ? atoi(p + 4) : 5;
  return k >= 1 ? k : 5;
}

/* With more than one thread, starts the model's worker pool (at most TFX_PAR_MAX threads) and lends it to
 * every layer. */
static int start_pool(tfx_model *m, int threads, tfx_err *err) {
  if (threads <= 1) {
    return TFX_OK;
  }
  int rc = tfx_par_create(threads < TFX_PAR_MAX ? threads : TFX_PAR_MAX, &m->par, err);
  for (int i = 0; !rc && i < m->n_layers; i++) {
    m->layers[i].par = m->par;
  }
  return rc;
}

int tfx_model_create(const tfx_config *cfg, int max_batch, tfx_model **out, tfx_err *err) {
  tfx_model *m = calloc(1, sizeof *m);
  int counts[L_NKINDS] = {0}, rc = TFX_OK;
  if (!m) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  if (cfg->n_layers < 1) {
    rc = tfx_err_set(err, TFX_ECONFIG, "model.layers: the model has no layers");
    goto fail;
  }
  m->max_batch = max_batch;
  m->loss = cfg->loss == TFX_LOSS_SIGMOID_CROSS_ENTROPY ? 1 : cfg->loss == TFX_LOSS_MSE ? 2 : 0;
  m->top_k = top_k_of(cfg->metrics);
  set_input_shape(m, cfg);
  if ((rc = nn__graph_declare(m, cfg, err))) {
    goto fail;
  }
  for (int i = 0; i < cfg->n_layers; i++) {
    m->n_layers = i + 1; /* destroy frees what a failed layer holds: nothing yet */
    if ((rc = build_layer(m, i, &cfg->layers[i], cfg, counts, err))) {
      goto fail;
    }
  }
  if ((rc = nn__graph_finish(m, err))) {
    goto fail;
  }
  if (m->layers[m->n_layers - 1].out_rank != 1) {
    rc = tfx_err_set(err, TFX_ESHAPE, "layer %s: the last layer must output class scores (rank 1)",
                     m->layers[m->n_layers - 1].name);
    goto fail;
  }
  if ((rc = nn__loss_setup(m, cfg, err))) {
    goto fail;
  }
  select_trainable(m, cfg->trainable);
  if (alloc_buffers(m)) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory for batch %d", max_batch);
    goto fail;
  }
  if ((rc = start_pool(m, cfg->threads, err))) {
    goto fail;
  }
  *out = m;
  return TFX_OK;
fail:
  tfx_model_destroy(m);
  return rc;
}

void tfx_model_destroy(tfx_model *m) {
  if (!m) {
    return;
  }
  for (int i = 0; i < m->n_vars; i++) {
    if (m->vars[i].mapped) {
      tfx_unmap(m->vars[i].storage, m->vars[i].mapped);
    } else {
      free(m->vars[i].storage);
    }
    free(m->vars[i].grad);
    free(m->vars[i].rows);
    free(m->vars[i].batch_ids);
    free(m->vars[i].batch_vals);
  }
  free(m->class_w);
  free(m->label_count);
  free(m->batch_labels);
  free(m->label_mark);
  for (int i = 0; i < m->n_layers; i++) {
    layer *l = &m->layers[i];
    free(l->out);
    free(l->dout);
    free(l->cols);
    free(l->argmax);
    free(l->mask);
    free(l->ids);
    free(l->bn);
    free(l->dbpart);
    free(l->bag_scale);
    free(l->pairs);
    free(l->row_of);
  }
  free(m->probs);
  free(m->scratch);
  tfx_par_destroy(m->par);
  free(m);
}

void tfx_model_init_vars(tfx_model *m, uint64_t seed) {
  for (int i = 0; i < m->n_vars; i++) {
    tfx_var *v = &m->vars[i];
    if (v->mapped && !strcmp(v->init, "zeros")) {
      continue; /* a fresh mapping is zero: writing it would make every page of the table exist */
    }
    tfx_init_fill(v->init, v->name, seed, v->fan_in, v->fan_out, 0, v->count, v->value);
  }
}

int tfx_model_nvars(const tfx_model *m) {
  return m->n_vars;
}

size_t tfx_var_grad_count(const tfx_var *v) {
  return v->sparse ? v->n_rows * (v->count / (size_t)v->shape[0]) : v->count;
}

tfx_var *tfx_model_var(tfx_model *m, int i) {
  return &m->vars[i];
}

tfx_var *tfx_model_find_var(tfx_model *m, const char *name) {
  for (int i = 0; i < m->n_vars; i++) {
    if (strcmp(m->vars[i].name, name) == 0) {
      return &m->vars[i];
    }
  }
  return NULL;
}

size_t tfx_model_input_size(const tfx_model *m) {
  return (size_t)m->ih * m->iw * m->ic;
}

tfx_par *tfx_model_par(tfx_model *m) {
  return m->par;
}

size_t tfx_model_output_size(const tfx_model *m) {
  return (size_t)m->layers[m->n_layers - 1].oc;
}

const float *tfx_model_forward(tfx_model *m, const float *x, int batch, int training, uint64_t step) {
  for (int i = 0; i < m->n_layers; i++) {
    layer *l = &m->layers[i];
    if (layer_is_merge(l)) {
      nn__graph_merge_forward(m, l, x, batch);
    } else {
      nn__layer_forward(l, l->in[0] < 0 ? x : m->layers[l->in[0]].out, batch, training, step);
    }
  }
  return m->layers[m->n_layers - 1].out;
}

void tfx_model_backward(tfx_model *m, const float *x, int batch) {
  /* Below the layers with variables nothing needs a gradient: nn__graph_backward skips them. */
  nn__graph_backward(m, x, batch);
}

void tfx_model_probabilities(const tfx_model *m, int batch, float *out) {
  memcpy(out, m->probs, sizeof(float) * (size_t)batch * tfx_model_output_size(m));
}

const float *tfx_model_probs(const tfx_model *m) {
  return m->probs;
}

int tfx_model_top_k(const tfx_model *m) {
  return m->top_k;
}

size_t tfx_model_param_count(const tfx_model *m) {
  size_t n = 0;
  for (int i = 0; i < m->n_vars; i++) {
    n += m->vars[i].count;
  }
  return n;
}

const char *tfx_dtype_name(tfx_dtype dtype) {
  return dtype == TFX_DTYPE_FLOAT32 ? "float32" : "unknown";
}

size_t tfx_dtype_size(tfx_dtype dtype) {
  return dtype == TFX_DTYPE_FLOAT32 ? sizeof(float) : 0;
}

/* The variables column of one layer: its own variables, or the declared one an op uses. */
static size_t describe_vars(const layer *l, char *buf, size_t n) {
  const tfx_var *v = l->w ? l->w : l->b;
  if (!v) {
    snprintf(buf, n, "-");
    return 0;
  }
  if (l->kind == L_MATMUL || l->kind == L_BIAS || l->kind == L_LOOKUP) {
    snprintf(buf, n, "%s%s", v->name, l->kind == L_LOOKUP ? " (row-sparse)" : "");
    return v->count;
  }
  const char *slash = strrchr(v->name, '/');
  snprintf(buf, n, "%s%s", slash ? slash + 1 : v->name,
           l->kind == L_BN ? ", beta, moving mean/var"
           : l->u          ? ", kernel_u, bias"
           : l->b          ? ", bias"
           : v->sparse     ? " (row-sparse)"
                           : "");
  return v->count + (l->b ? l->b->count : 0) + (l->mmean ? 2 * l->mmean->count : 0) + (l->u ? l->u->count : 0);
}

/* What a layer reading the model input reads: an embedding bag's feature column, or "input". */
static const char *input_name(const tfx_model *m, const layer *l) {
  return l->kind == L_EMBAG && m->n_fields > 1 && l->field >= 0 && l->field < m->n_fields ? m->field_name[l->field]
                                                                                          : "input";
}

void tfx_model_print(const tfx_model *m, FILE *f) {
  fprintf(f, "%-16s %-14s %-16s %-28s %-7s %10s %12s\n", "layer", "type", "output", "variables", "dtype", "params",
          "bytes");
  for (int i = 0; i < m->n_layers; i++) {
    const layer *l = &m->layers[i];
    char shape[48], vars[128];
    fmt_shape(l, 1, shape, sizeof shape);
    size_t params = describe_vars(l, vars, sizeof vars);
    const tfx_var *v = l->w ? l->w : l->b; /* a layer's variables share one dtype */
    fprintf(f, "%-16s %-14s %-16s %-28s %-7s %10zu %12zu", l->name, kind_name(l), shape, vars,
            v ? tfx_dtype_name(v->dtype) : "-", params, v ? params * tfx_dtype_size(v->dtype) : 0);
    int shown = l->n_in > 1 || l->in[0] != i - 1 || (l->in[0] < 0 && strcmp(input_name(m, l), "input"));
    for (int k = 0; shown && k < l->n_in; k++) {
      fprintf(f, "%s%s", k ? ", " : "  <- ", l->in[k] >= 0 ? m->layers[l->in[k]].name : input_name(m, l));
    }
    fputc('\n', f);
  }
  size_t total = tfx_model_param_count(m);
  fprintf(f, "total: %d variables, %zu parameters, %zu bytes\n", m->n_vars, total, total * sizeof(float));
}

double tfx_model_clip(tfx_model *m, double clip_value, double clip_norm) {
  double sq = 0;
  for (int i = 0; i < m->n_vars; i++) {
    tfx_var *v = &m->vars[i];
    size_t n = tfx_var_grad_count(v);
    for (size_t j = 0; j < n; j++) {
      if (clip_value > 0) {
        v->grad[j] = fmaxf(fminf(v->grad[j], (float)clip_value), (float)-clip_value);
      }
      sq += (double)v->grad[j] * v->grad[j];
    }
  }
  double norm = sqrt(sq);
  if (clip_norm > 0 && norm > clip_norm) {
    float s = (float)(clip_norm / norm);
    for (int i = 0; i < m->n_vars; i++) {
      for (size_t j = 0; j < tfx_var_grad_count(&m->vars[i]); j++) {
        m->vars[i].grad[j] *= s;
      }
    }
  }
  return norm;
}
