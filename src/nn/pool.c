/* Max and average pooling (max_pool2d, avg_pool2d): windows of pool_size moved by strides, 'valid' or 'same',
 * forward and backward, split by sample over the model's worker pool. */
#include <string.h>

#include "nn/nn_impl.h"

/* The samples one part of a pooling pass works on: the layer, its input (forward) or input gradient (backward). */
typedef struct pool_job {
  const layer *l;
  const float *in;
  float *out;
} pool_job;

/* The in-image part [y0, y1) x [x0, x1) of the pooling window of output (oy, ox); padded positions are left out. */
typedef struct window {
  int y0, y1, x0, x1;
} window;

static window pool_window(const layer *l, int oy, int ox) {
  int y = oy * l->stride - l->pad_t, x = ox * l->stride - l->pad_l;
  window w = {y < 0 ? 0 : y, y + l->pool > l->ih ? l->ih : y + l->pool, x < 0 ? 0 : x,
              x + l->pool > l->iw ? l->iw : x + l->pool};
  return w;
}

/* Max of one window over channels: y and arg (the image index of each max) start at its first position. */
static void max_window(const layer *l, const float *img, window w, float *y, int32_t *arg) {
  int C = l->oc, first = (w.y0 * l->iw + w.x0) * l->ic;
  for (int c = 0; c < C; c++) {
    y[c] = img[first + c];
    arg[c] = first + c;
  }
  for (int iy = w.y0; iy < w.y1; iy++) {
    for (int ix = w.x0; ix < w.x1; ix++) {
      int base = (iy * l->iw + ix) * l->ic;
      const float *x = img + base;
      for (int c = 0; c < C; c++) {
        int gt = x[c] > y[c];
        y[c] = gt ? x[c] : y[c];
        arg[c] = gt ? base + c : arg[c];
      }
    }
  }
}

/* Mean of one window's in-image positions (TensorFlow's 'same' average leaves the padding out of the count). */
static void avg_window(const layer *l, const float *img, window w, float *y) {
  int C = l->oc;
  float inv = 1.0f / (float)((w.y1 - w.y0) * (w.x1 - w.x0));
  for (int c = 0; c < C; c++) {
    y[c] = 0;
  }
  for (int iy = w.y0; iy < w.y1; iy++) {
    for (int ix = w.x0; ix < w.x1; ix++) {
      const float *x = img + (iy * l->iw + ix) * l->ic;
      for (int c = 0; c < C; c++) {
        y[c] += x[c];
      }
    }
  }
  for (int c = 0; c < C; c++) {
    y[c] *= inv;
  }
}

/* Max or average pooling of samples [b0, b1); channels innermost so each step is a vector op. */
static void pool_forward_part(void *ctx, size_t b0, size_t b1) {
  const pool_job *j = ctx;
  const layer *l = j->l;
  for (int b = (int)b0; b < (int)b1; b++) {
    const float *img = j->in + (size_t)b * layer_in_size(l);
    for (int oy = 0; oy < l->oh; oy++) {
      for (int ox = 0; ox < l->ow; ox++) {
        size_t o = (size_t)b * layer_out_size(l) + ((size_t)oy * l->ow + ox) * l->oc;
        if (l->kind == L_MAXPOOL) {
          max_window(l, img, pool_window(l, oy, ox), l->out + o, l->argmax + o);
        } else {
          avg_window(l, img, pool_window(l, oy, ox), l->out + o);
        }
      }
    }
  }
}

/* Adds one window's share of the output gradient g to the input gradient img: all of g[c] to the max's position
 * (max), or g[c] / (in-image positions) to each position (avg). Overlapping windows add up. */
static void pool_window_backward(const layer *l, const float *g, const int32_t *arg, float *img, int oy, int ox) {
  int C = l->oc;
  if (l->kind == L_MAXPOOL) {
    for (int c = 0; c < C; c++) {
      img[arg[c]] += g[c];
    }
    return;
  }
  window w = pool_window(l, oy, ox);
  float inv = 1.0f / (float)((w.y1 - w.y0) * (w.x1 - w.x0));
  for (int iy = w.y0; iy < w.y1; iy++) {
    for (int ix = w.x0; ix < w.x1; ix++) {
      float *d = img + (iy * l->iw + ix) * l->ic;
      for (int c = 0; c < C; c++) {
        d[c] += g[c] * inv;
      }
    }
  }
}

void nn__pool_forward(layer *l, const float *in, int batch) {
  pool_job j = {.l = l, .in = in};
  tfx_par_for(l->par, (size_t)batch, nn__grain_rows((size_t)layer_in_size(l)), pool_forward_part, &j);
}

/* Whether the windows tile the image (stride = pool, none over an edge): then each input position is in at most
 * one window, and the backward pass writes each window's gradient instead of adding it. */
static int pool_tiles(const layer *l) {
  return l->stride == l->pool && l->pad_t == 0 && l->pad_l == 0 && l->oh * l->pool <= l->ih && l->ow * l->pool <= l->iw;
}

/* Writes one tiling window's gradient, every position of it (vector selects, no scatter): g[c] at the max's
 * position and 0 elsewhere (max), or g[c] / pool^2 (avg). */
static void pool_tile_backward(const layer *l, const float *g, const int32_t *arg, float *img, int oy, int ox) {
  int p = l->pool, C = l->oc;
  float inv = 1.0f / (float)(p * p);
  for (int iy = oy * p; iy < oy * p + p; iy++) {
    for (int ix = ox * p; ix < ox * p + p; ix++) {
      int base = (iy * l->iw + ix) * l->ic;
      float *d = img + base;
      for (int c = 0; c < C; c++) {
        d[c] = l->kind == L_MAXPOOL ? (arg[c] == base + c ? g[c] : 0) : g[c] * inv;
      }
    }
  }
}

/* The input gradient (j->out) of samples [b0, b1). Tiling windows write theirs (zeroing first only the rows or
 * columns no window covers); otherwise it is zeroed and each window's share added in a fixed order, so the sum
 * is the same at any thread count. */
static void pool_backward_part(void *ctx, size_t b0, size_t b1) {
  const pool_job *j = ctx;
  const layer *l = j->l;
  float *din = j->out;
  int in_size = layer_in_size(l), out_size = layer_out_size(l), tiles = pool_tiles(l);
  if (!tiles || l->ih % l->pool || l->iw % l->pool) {
    memset(din + b0 * in_size, 0, sizeof(float) * (b1 - b0) * in_size);
  }
  for (int b = (int)b0; b < (int)b1; b++) {
    for (int oy = 0; oy < l->oh; oy++) {
      for (int ox = 0; ox < l->ow; ox++) {
        size_t o = (size_t)b * out_size + ((size_t)oy * l->ow + ox) * l->oc;
        (tiles ? pool_tile_backward : pool_window_backward)(l, l->dout + o, l->argmax + o, din + (size_t)b * in_size,
                                                            oy, ox);
      }
    }
  }
}

void nn__pool_backward(layer *l, float *din, int batch) {
  pool_job j = {.l = l, .out = din};
  tfx_par_for(l->par, (size_t)batch, nn__grain_rows((size_t)layer_in_size(l)), pool_backward_part, &j);
}
