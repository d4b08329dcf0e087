/* The loss of a model's last layer (softmax or sigmoid cross-entropy, squared error) and its gradient, the hits
 * counted against the labels, scores for AUC, and the checks that report labels and ids the model cannot score. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/labelset.h"
#include "nn/model.h"
#include "nn/nn_impl.h"

void nn__softmax_rows(const float *z, float *p, size_t rows, size_t width) {
  for (size_t b = 0; b < rows; b++) {
    const float *zr = z + b * width;
    float *pr = p + b * width, mx = zr[0], sum = 0;
    for (size_t j = 1; j < width; j++) {
      mx = zr[j] > mx ? zr[j] : mx;
    }
    for (size_t j = 0; j < width; j++) {
      sum += pr[j] = expf(zr[j] - mx);
    }
    for (size_t j = 0; j < width; j++) {
      pr[j] /= sum;
    }
  }
}

/* The number of classes a label may name: c, or 2 for a binary classifier (one sigmoid output). */
static int label_classes(const tfx_model *m, int c) {
  return m->loss == 1 && c == 1 && !m->multi_label ? 2 : c;
}

/* Whether label y is one the model scores: a class in [0, classes), or for a multi-label model a set whose classes
 * are all outputs (the empty set too). */
static int label_ok(const tfx_model *m, int classes, int32_t y) {
  if (m->multi_label && y < 0) {
    return (tfx_label_bits(y) >> classes) == 0 && (y == TFX_LABEL_SET || tfx_label_bits(y));
  }
  return y >= 0 && y < classes;
}

/* The outputs of logits z [c] above 0 as label bits (a multi-label prediction). */
static uint32_t predicted_bits(const float *z, int c) {
  uint32_t bits = 0;
  for (int j = 0; j < c; j++) {
    bits |= (uint32_t)(z[j] > 0) << j;
  }
  return bits;
}

static void count_hits(const tfx_model *m, const float *z, const int32_t *labels, int batch, int c, int k,
                       tfx_step_stats *st) {
  for (int b = 0; b < batch; b++) {
    const float *zr = z + (size_t)b * c;
    if (m->multi_label) { /* a hit when every output's side is its class's: sklearn's subset accuracy */
      int hit = label_ok(m, c, labels[b]) && predicted_bits(zr, c) == tfx_label_bits(labels[b]);
      st->correct += hit;
      st->top5 += hit;
      continue;
    }
    if (c == 1) { /* binary: a hit when the logit's side is the label's */
      int hit = (labels[b] == 1) == (zr[0] > 0);
      st->correct += hit;
      st->top5 += hit;
      continue;
    }
    if (labels[b] < 0 || labels[b] >= c) {
      continue; /* an unknown class is never a hit */
    }
    int above = 0;
    for (int j = 0; j < c; j++) {
      above += zr[j] > zr[labels[b]];
    }
    st->correct += above == 0;
    st->top5 += above < k;
  }
}

/* -log softmax(z)[label] as log-sum-exp(z) - z[label], in double: exact however small the probability. */
static double softmax_xent(const float *z, int label, int c) {
  double mx = z[0], sum = 0;
  for (int j = 1; j < c; j++) {
    mx = z[j] > mx ? z[j] : mx;
  }
  for (int j = 0; j < c; j++) {
    sum += exp((double)z[j] - mx);
  }
  return mx + log(sum) - (double)z[label];
}

/* Sigmoid cross-entropy of one logit against target t in the stable form max(z,0) - z*t + log1p(exp(-|z|)). */
static double sigmoid_xent(float z, float t) {
  double zd = z;
  return fmax(zd, 0) - zd * t + log1p(exp(-fabs(zd)));
}

/* Per-example loss and d(mean loss)/dz for one row (dz scaled by inv_b: 1 / batch times the example's weight).
 * A single sigmoid output is a binary classifier: the label (0 or 1) is its target. Label smoothing e moves the
 * targets to t (1 - e) + e / k, k the classes (softmax) or 2 (each sigmoid output), as Keras's losses do. */
static double row_loss(int kind, const float *z, const float *p, int label, int c, float *dz, float inv_b, float e) {
  double loss = kind == 0 ? softmax_xent(z, label, c) : 0;
  float k = kind == 0 ? (float)c : 2.0f;
  for (int j = 0; j < c; j++) {
    float t = (kind == 1 && c == 1 ? label == 1 : j == label) ? 1.0f : 0.0f;
    if (e > 0) {
      float smooth = t * (1.0f - e) + e / k;
      loss -= kind == 0 ? (double)(smooth - t) * z[j] : 0; /* -sum t_j z_j of the softmax loss, moved targets */
      t = smooth;
    }
    if (kind == 0) {
      if (dz) {
        dz[j] = (p[j] - t) * inv_b;
      }
    } else if (kind == 1) {
      loss += sigmoid_xent(z[j], t);
      if (dz) {
        dz[j] = (1.0f / (1.0f + expf(-z[j])) - t) * inv_b;
      }
    } else {
      loss += 0.5 * (z[j] - t) * (z[j] - t);
      if (dz) {
        dz[j] = (z[j] - t) * inv_b;
      }
    }
  }
  return loss;
}

/* A multi-label row: the mean over the c outputs of each one's sigmoid cross-entropy against its class's bit (Keras's
 * binary_crossentropy), smoothed targets t (1 - e) + e / 2; dz as row_loss's. */
static double multi_row_loss(const float *z, uint32_t bits, int c, float *dz, float inv_b, float e) {
  double loss = 0;
  for (int j = 0; j < c; j++) {
    float t = (float)((bits >> j) & 1u);
    t = e > 0 ? t * (1.0f - e) + e / 2 : t;
    loss += sigmoid_xent(z[j], t);
    if (dz) {
      dz[j] = (1.0f / (1.0f + expf(-z[j])) - t) * inv_b / (float)c;
    }
  }
  return loss / c;
}

int tfx_model_scores(const tfx_model *m, int batch, float *out) {
  const layer *last = &m->layers[m->n_layers - 1];
  int c = last->oc;
  if (m->multi_label) {
    memcpy(out, last->out, sizeof(float) * (size_t)batch * (size_t)c);
    return c;
  }
  if (!(c == 1 && m->loss == 1) && !(c == 2 && m->loss == 0)) {
    return 0;
  }
  for (int b = 0; b < batch; b++) { /* a monotone score of the positive class: its logit, or the logits' margin */
    out[b] = c == 1 ? last->out[b] : last->out[2 * b + 1] - last->out[2 * b];
  }
  return 1;
}

int tfx_model_predictions(const tfx_model *m, int batch, int32_t *out) {
  const layer *last = &m->layers[m->n_layers - 1];
  int c = last->oc;
  if (m->loss == 2) {
    return 0;
  }
  for (int b = 0; b < batch; b++) {
    const float *z = last->out + (size_t)b * c;
    int best = 0;
    for (int j = 1; j < c; j++) {
      best = z[j] > z[best] ? j : best;
    }
    out[b] = m->multi_label ? (int32_t)(predicted_bits(z, c) | 0x80000000u) : c == 1 ? z[0] > 0 : best;
  }
  return label_classes(m, c);
}

void tfx_model_set_example_weights(tfx_model *m, const float *w) {
  m->example_w = w;
}

/* The in-batch softmax's state (model.in_batch_negatives): a softmax over more than one class only. */
static int in_batch_setup(tfx_model *m, const tfx_config *cfg, int outputs, tfx_err *err) {
  if (!cfg->in_batch_negatives) {
    return TFX_OK;
  }
  if (m->loss != 0 || m->multi_label || outputs < 2) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "model.in_batch_negatives: for a softmax_cross_entropy over 2 or more classes (this model: "
                       "%d outputs%s)",
                       outputs, m->loss != 0 ? ", another loss" : m->multi_label ? ", multi_label" : "");
  }
  m->in_batch = 1;
  m->logq = cfg->logq_correction;
  m->label_count = calloc((size_t)outputs, sizeof *m->label_count);
  m->batch_labels = malloc(sizeof *m->batch_labels * (size_t)(m->max_batch > 0 ? m->max_batch : 1));
  m->label_mark = calloc((size_t)outputs, sizeof *m->label_mark);
  if (!m->label_count || !m->batch_labels || !m->label_mark) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory for the in-batch softmax's %d classes", outputs);
  }
  return TFX_OK;
}

/* The batch's distinct valid labels into m->batch_labels (marked in label_mark) and, with the log-Q correction,
 * into the label counts; returns how many. */
static int batch_columns(tfx_model *m, const int32_t *labels, int batch, int c) {
  int n = 0;
  for (int b = 0; b < batch; b++) {
    int32_t y = labels[b];
    if (y < 0 || y >= c) {
      continue;
    }
    m->label_count[y]++;
    m->label_total++;
    if (!m->label_mark[y]) {
      m->batch_labels[n++] = y;
      m->label_mark[y] = n;
    }
  }
  return n;
}

/* Example b's in-batch softmax: its logits at the batch's n label columns, less log Q(label) with the correction;
 * the loss -log softmax at its own label, and dz (zero outside those columns) scaled by inv_b. */
static double in_batch_row(const tfx_model *m, const float *z, int label, int n, float *dz, float inv_b, int c) {
  double zc[n > 0 ? n : 1], mx = -INFINITY, sum = 0;
  for (int k = 0; k < n; k++) {
    int j = m->batch_labels[k];
    zc[k] = (double)z[j] - (m->logq ? log((double)m->label_count[j] / (double)m->label_total) : 0.0);
    mx = zc[k] > mx ? zc[k] : mx;
  }
  for (int k = 0; k < n; k++) {
    sum += exp(zc[k] - mx);
  }
  memset(dz, 0, sizeof(float) * (size_t)c);
  for (int k = 0; k < n; k++) {
    int j = m->batch_labels[k];
    dz[j] = (float)(exp(zc[k] - mx) / sum - (j == label)) * inv_b;
  }
  return mx + log(sum) - zc[m->label_mark[label] - 1];
}

int nn__loss_setup(tfx_model *m, const tfx_config *cfg, tfx_err *err) {
  int c = label_classes(m, m->layers[m->n_layers - 1].oc), n;
  double w[TFX_MAX_CLASS_WEIGHTS];
  int rc = tfx_config_class_weights(cfg, w, TFX_MAX_CLASS_WEIGHTS, &n, err);
  if (!rc && n && n != c) {
    rc = tfx_err_set(err, TFX_ECONFIG, "model.class_weights: %d weights for the model's %d classes", n, c);
  }
  if (!rc && n && !(m->class_w = malloc(sizeof(float) * (size_t)n))) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  for (int i = 0; !rc && i < n; i++) {
    m->class_w[i] = (float)w[i];
  }
  m->smoothing = (float)cfg->label_smoothing;
  m->multi_label = cfg->multi_label;
  int outputs = m->layers[m->n_layers - 1].oc;
  if (!rc && m->multi_label && (outputs < 1 || outputs > TFX_LABEL_SET_MAX)) {
    rc = tfx_err_set(err, TFX_ECONFIG, "model.multi_label: the last layer has %d outputs (want 1 to %d, one per class)",
                     outputs, TFX_LABEL_SET_MAX);
  }
  return rc ? rc : in_batch_setup(m, cfg, outputs, err);
}

/* The weight of example b's training loss: its class's (model.class_weights) times its own (data.weight_key). */
static float example_weight(const tfx_model *m, const int32_t *labels, int b) {
  float w = m->class_w ? m->class_w[labels[b]] : 1.0f;
  return m->example_w ? w * m->example_w[b] : w;
}

void tfx_model_loss(tfx_model *m, const int32_t *labels, int batch, int grad, tfx_step_stats *st) {
  layer *last = &m->layers[m->n_layers - 1];
  int c = last->oc;
  nn__softmax_rows(last->out, m->probs, (size_t)batch, (size_t)c);
  int sigmoids = m->multi_label || (c == 1 && m->loss == 1);
  for (size_t j = 0; sigmoids && j < (size_t)batch * (size_t)c; j++) {
    m->probs[j] = 1.0f / (1.0f + expf(-last->out[j])); /* binary: the probability of class 1; each class's */
  }
  double total = 0;
  int n_cols = m->in_batch && grad ? batch_columns(m, labels, batch, c) : 0; /* training only: eval scores all */
  for (int b = 0; b < batch; b++) {
    float *dz = grad ? last->dout + (size_t)b * c : NULL;
    if (!label_ok(m, label_classes(m, c), labels[b])) {
      /* No loss and no gradient: tfx_model_check_labels is how a caller learns of it. */
      if (dz) {
        memset(dz, 0, sizeof(float) * (size_t)c);
      }
      continue;
    }
    float w = grad ? example_weight(m, labels, b) : 1.0f;
    const float *z = last->out + (size_t)b * c;
    float e = grad ? m->smoothing : 0.0f;
    double l = n_cols ? in_batch_row(m, z, labels[b], n_cols, dz, 1.0f / (float)batch * w, c)
               : m->multi_label
                   ? multi_row_loss(z, tfx_label_bits(labels[b]), c, dz, 1.0f / (float)batch * w, e)
                   : row_loss(m->loss, z, m->probs + (size_t)b * c, labels[b], c, dz, 1.0f / (float)batch * w, e);
    total += grad ? w * l : l;
  }
  for (int k = 0; k < n_cols; k++) {
    m->label_mark[m->batch_labels[k]] = 0;
  }
  memset(st, 0, sizeof *st);
  st->loss = total / batch;
  st->count = batch;
  count_hits(m, last->out, labels, batch, c, m->top_k, st);
}

int tfx_model_multi_label(const tfx_model *m) {
  return m->multi_label;
}

int tfx_model_label_classes(const tfx_model *m) {
  return label_classes(m, m->layers[m->n_layers - 1].oc);
}

int tfx_model_check_labels(const tfx_model *m, const int32_t *labels, int batch, int *example, tfx_err *err) {
  int c = label_classes(m, m->layers[m->n_layers - 1].oc);
  for (int b = 0; b < batch; b++) {
    if (label_ok(m, c, labels[b])) {
      continue;
    }
    if (example) {
      *example = b;
    }
    if (m->multi_label) {
      return tfx_err_set(err, TFX_EINVAL, "label %d names a class outside the model's %d outputs", (int)labels[b], c);
    }
    if (labels[b] < 0) { /* a set of classes (or an empty CSV label) is stored negative */
      return tfx_err_set(err, TFX_EINVAL,
                         "label %d is outside the model's %d classes [0, %d) (a set of classes or an empty label "
                         "needs model.multi_label)",
                         (int)labels[b], c, c);
    }
    return tfx_err_set(err, TFX_EINVAL, "label %d is outside the model's %d classes [0, %d)", (int)labels[b], c, c);
  }
  return TFX_OK;
}

int tfx_model_input_status(const tfx_model *m, int *example, tfx_err *err) {
  for (int i = 0; i < m->n_layers; i++) {
    const layer *l = &m->layers[i];
    if ((l->kind == L_EMBED || l->kind == L_LOOKUP || l->kind == L_EMBAG) && l->n_bad_ids) {
      if (example) {
        *example = l->bad_example;
      }
      return tfx_err_set(err, TFX_EINVAL, "%s: id %g is outside the table's %d rows [0, %d)", l->name,
                         (double)l->bad_id, l->vocab, l->vocab);
    }
  }
  return TFX_OK;
}
