/* Counter-based, name-seeded initializers. */
#include "nn/init.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double normal_at(uint64_t key, uint64_t i) {
  double u1 = tfx_rand_uniform(key, 2 * i) + 1e-300, u2 = tfx_rand_uniform(key, 2 * i + 1);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static double truncated_at(uint64_t key, uint64_t i) {
  for (uint64_t k = 0;; k++) {
    double v = normal_at(key ^ (k * 0x5851F42D4C957F2DULL), i);
    if (fabs(v) <= 2.0) {
      return v;
    }
  }
}

typedef enum kind { K_ZEROS, K_CONST, K_UNIFORM, K_NORMAL, K_TRUNC, K_BAD } kind;

/* Maps a spec to a distribution and its scale. */
static kind parse(const char *spec, int64_t fan_in, int64_t fan_out, double *scale) {
  double fi = fan_in > 0 ? (double)fan_in : 1, fo = fan_out > 0 ? (double)fan_out : 1;
  const char *colon = strchr(spec, ':');
  double arg = colon ? atof(colon + 1) : 0;
  size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
#define IS(s) (n == strlen(s) && strncmp(spec, s, n) == 0)
  if (IS("zeros")) {
    return *scale = 0, K_ZEROS;
  }
  if (IS("ones")) {
    return *scale = 1, K_CONST;
  }
  if (IS("constant")) {
    return *scale = arg, K_CONST;
  }
  if (IS("uniform")) {
    return *scale = colon ? arg : 0.05, K_UNIFORM;
  }
  if (IS("normal")) {
    return *scale = colon ? arg : 0.05, K_NORMAL;
  }
  if (IS("truncated_normal")) {
    return *scale = colon ? arg : 0.05, K_TRUNC;
  }
  if (IS("glorot_uniform")) {
    return *scale = sqrt(6.0 / (fi + fo)), K_UNIFORM;
  }
  if (IS("glorot_normal")) {
    return *scale = sqrt(2.0 / (fi + fo)) / 0.8796256610342398, K_TRUNC;
  }
  if (IS("he_uniform")) {
    return *scale = sqrt(6.0 / fi), K_UNIFORM;
  }
  if (IS("he_normal")) {
    return *scale = sqrt(2.0 / fi) / 0.8796256610342398, K_TRUNC;
  }
#undef IS
  return K_BAD;
}

int tfx_init_check(const char *spec, tfx_err *err) {
  double s = 0;
  const char *colon = strchr(spec, ':');
  char *end = NULL;
  if (colon && (strtod(colon + 1, &end), end == colon + 1 || *end)) {
    return tfx_err_set(err, TFX_ECONFIG, "unknown initializer '%s' (the argument is not a number)", spec);
  }
  if (parse(spec, 1, 1, &s) == K_BAD) {
    return tfx_err_set(err, TFX_ECONFIG, "unknown initializer '%s'", spec);
  }
  return TFX_OK;
}

void tfx_init_fill(const char *spec, const char *name, uint64_t seed, int64_t fan_in, int64_t fan_out, size_t offset,
                   size_t count, float *out) {
  double scale = 0;
  kind k = parse(spec, fan_in, fan_out, &scale);
  if (k == K_ZEROS || k == K_CONST) { /* a ps fills a never-touched row of a zeros table per row pulled or summed */
    float c = (float)((k == K_CONST ? 1.0 : 0.0) * scale);
    for (size_t j = 0; j < count; j++) {
      out[j] = c;
    }
    return;
  }
  uint64_t key = tfx_rand_mix(seed) ^ tfx_hash_str(name);
  for (size_t j = 0; j < count; j++) {
    uint64_t i = offset + j;
    double v = 0;
    if (k == K_UNIFORM) {
      v = 2.0 * tfx_rand_uniform(key, i) - 1.0;
    }
    if (k == K_NORMAL) {
      v = normal_at(key, i);
    }
    if (k == K_TRUNC) {
      v = truncated_at(key, i);
    }
    out[j] = (float)(v * scale);
  }
}
