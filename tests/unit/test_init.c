/* Unit tests of src/nn/init.c: determinism by (seed, name, index), slices, and the statistics of each
 * initializer on 100k samples. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/init.h"

#define N 100000

static float *fill(const char *spec, const char *name, uint64_t seed, int64_t fan_in, int64_t fan_out, size_t offset,
                   size_t count) {
  float *v = malloc(sizeof(float) * (count ? count : 1));
  cr_assert_not_null(v);
  for (size_t i = 0; i < count; i++) {
    v[i] = NAN;
  }
  tfx_init_fill(spec, name, seed, fan_in, fan_out, offset, count, v);
  return v;
}

typedef struct stats {
  double mean, std, min, max;
} stats;

static stats stats_of(const float *v, size_t n) {
  stats s = {0, 0, INFINITY, -INFINITY};
  double sum = 0, sq = 0;
  for (size_t i = 0; i < n; i++) {
    cr_assert(isfinite(v[i]), "element %zu is %g", i, v[i]);
    sum += v[i];
    s.min = fmin(s.min, v[i]);
    s.max = fmax(s.max, v[i]);
  }
  s.mean = sum / (double)n;
  for (size_t i = 0; i < n; i++) {
    sq += (v[i] - s.mean) * (v[i] - s.mean);
  }
  s.std = sqrt(sq / (double)(n - 1));
  return s;
}

static const char *const random_specs[] = {"uniform:0.3",   "normal:0.5", "truncated_normal:2", "glorot_uniform",
                                           "glorot_normal", "he_uniform", "he_normal"};
#define N_RANDOM (sizeof random_specs / sizeof random_specs[0])

Test(init, same_seed_and_name_give_the_same_values) {
  for (size_t k = 0; k < N_RANDOM; k++) {
    float *a = fill(random_specs[k], "dense_1/kernel", 42, 784, 256, 0, 5000);
    float *b = fill(random_specs[k], "dense_1/kernel", 42, 784, 256, 0, 5000);
    cr_assert_eq(memcmp(a, b, 5000 * sizeof(float)), 0, "%s", random_specs[k]);
    free(a), free(b);
  }
}

Test(init, seed_and_name_change_the_values) {
  for (size_t k = 0; k < N_RANDOM; k++) {
    float *a = fill(random_specs[k], "dense_1/kernel", 42, 784, 256, 0, 1000);
    float *b = fill(random_specs[k], "dense_1/kernel", 43, 784, 256, 0, 1000);
    float *c = fill(random_specs[k], "dense_2/kernel", 42, 784, 256, 0, 1000);
    int same_b = 0, same_c = 0;
    for (int i = 0; i < 1000; i++) {
      same_b += a[i] == b[i], same_c += a[i] == c[i];
    }
    cr_assert_lt(same_b, 10, "%s: %d equal elements across seeds", random_specs[k], same_b);
    cr_assert_lt(same_c, 10, "%s: %d equal elements across names", random_specs[k], same_c);
    free(a), free(b), free(c);
  }
}

Test(init, elements_are_not_correlated_with_their_neighbours) {
  float *v = fill("normal:1", "w", 7, 1, 1, 0, N);
  double c = 0;
  for (int i = 1; i < N; i++) {
    c += (double)v[i] * v[i - 1];
  }
  c /= N - 1;
  cr_assert_lt(fabs(c), 0.02, "lag-1 correlation %g", c);
  free(v);
}

Test(init, a_slice_equals_the_same_range_of_the_whole) {
  const size_t total = 3000;
  const size_t cuts[][2] = {{0, 137}, {137, 500}, {500, 3000}, {2999, 3000}, {1234, 1234}};
  for (size_t k = 0; k < N_RANDOM; k++) {
    float *whole = fill(random_specs[k], "conv2d_1/kernel", 9, 27, 96, 0, total);
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
      size_t begin = cuts[c][0], n = cuts[c][1] - cuts[c][0];
      float *part = fill(random_specs[k], "conv2d_1/kernel", 9, 27, 96, begin, n);
      cr_assert_eq(memcmp(part, whole + begin, n * sizeof(float)), 0, "%s [%zu, %zu)", random_specs[k], begin,
                   begin + n);
      free(part);
    }
    free(whole);
  }
}

Test(init, constants) {
  float *z = fill("zeros", "b", 1, 10, 10, 0, 100), *o = fill("ones", "b", 1, 10, 10, 0, 100),
        *c = fill("constant:0.25", "b", 1, 10, 10, 50, 100), *m = fill("constant:-3", "b", 1, 10, 10, 0, 3);
  for (int i = 0; i < 100; i++) {
    cr_assert_eq(z[i], 0.0f);
    cr_assert_eq(o[i], 1.0f);
    cr_assert_eq(c[i], 0.25f);
  }
  cr_assert_eq(m[2], -3.0f);
  free(z), free(o), free(c), free(m);
}

Test(init, glorot_uniform_bounds_and_moments) {
  const int64_t fan_in = 784, fan_out = 256;
  const double limit = sqrt(6.0 / (double)(fan_in + fan_out));
  float *v = fill("glorot_uniform", "dense_1/kernel", 42, fan_in, fan_out, 0, N);
  stats s = stats_of(v, N);
  cr_assert_geq(s.min, -limit * (1 + 1e-6), "min %g, limit %g", s.min, limit);
  cr_assert_leq(s.max, limit * (1 + 1e-6), "max %g, limit %g", s.max, limit);
  cr_assert_gt(s.max, 0.999 * limit, "max %g never gets near the limit %g", s.max, limit);
  cr_assert_lt(s.min, -0.999 * limit, "min %g never gets near -%g", s.min, limit);
  cr_assert_lt(fabs(s.mean), 0.01 * limit, "mean %g", s.mean);
  cr_assert_lt(fabs(s.std - limit / sqrt(3.0)), 0.01 * limit, "std %g, want %g", s.std, limit / sqrt(3.0));
  free(v);
}

Test(init, uniform_and_he_uniform_bounds) {
  float *u = fill("uniform:0.3", "x", 1, 1, 1, 0, N);
  stats s = stats_of(u, N);
  cr_assert(s.min >= -0.3f && s.max <= 0.3f, "[%g, %g]", s.min, s.max);
  cr_assert_gt(s.max, 0.299);
  free(u);
  u = fill("uniform", "x", 1, 1, 1, 0, N); /* default scale 0.05 */
  s = stats_of(u, N);
  cr_assert(s.min >= -0.05f && s.max <= 0.05f && s.max > 0.0499, "[%g, %g]", s.min, s.max);
  free(u);
  const double he = sqrt(6.0 / 100.0);
  u = fill("he_uniform", "x", 1, 100, 7, 0, N);
  s = stats_of(u, N);
  cr_assert(s.min >= -he * (1 + 1e-6) && s.max <= he * (1 + 1e-6) && s.max > 0.999 * he, "[%g, %g] vs %g", s.min, s.max,
            he);
  free(u);
}

/* Checks mean 0 and standard deviation `std` within 2% (both are ~6 standard errors at N = 100k). */
static void assert_moments(const char *spec, int64_t fan_in, int64_t fan_out, double std, double bound) {
  float *v = fill(spec, "layer/kernel", 1234, fan_in, fan_out, 0, N);
  stats s = stats_of(v, N);
  cr_assert_lt(fabs(s.mean), 0.02 * std, "%s: mean %g", spec, s.mean);
  cr_assert_lt(fabs(s.std / std - 1), 0.02, "%s: std %g, want %g", spec, s.std, std);
  if (bound > 0) {
    cr_assert(s.min >= -bound * (1 + 1e-6) && s.max <= bound * (1 + 1e-6), "%s: [%g, %g] beyond %g", spec, s.min, s.max,
              bound);
    cr_assert_gt(s.max, 0.98 * bound, "%s: max %g, the truncation bound is %g", spec, s.max, bound);
  } else {
    cr_assert_gt(s.max, 3.5 * std, "%s: an untruncated normal reaches 4 std in 100k draws (max %g)", spec, s.max);
  }
  free(v);
}

/* The standard deviation of a unit normal truncated to [-2, 2] (TensorFlow's truncated_normal). */
#define TRUNC_STD 0.87962566103423978

Test(init, normal_mean_and_std) {
  assert_moments("normal:0.5", 1, 1, 0.5, 0);
}

Test(init, truncated_normal_mean_std_and_bound) {
  assert_moments("truncated_normal:2", 1, 1, 2 * TRUNC_STD, 4);
}

Test(init, glorot_normal_has_variance_2_over_fan_in_plus_fan_out) {
  /* Keras: a truncated normal whose scale is divided by TRUNC_STD so the variance is exactly 2 / (in + out). */
  const double std = sqrt(2.0 / (300 + 100));
  assert_moments("glorot_normal", 300, 100, std, 2 * std / TRUNC_STD);
}

Test(init, he_normal_has_variance_2_over_fan_in) {
  const double std = sqrt(2.0 / 50);
  assert_moments("he_normal", 50, 10, std, 2 * std / TRUNC_STD);
}

Test(init, check_accepts_and_rejects) {
  const char *good[] = {"zeros",          "ones",          "constant:0.1", "uniform:0.5",
                        "uniform",        "normal:1",      "normal",       "truncated_normal:0.02",
                        "glorot_uniform", "glorot_normal", "he_uniform",   "he_normal"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    tfx_err err = {0};
    cr_assert_eq(tfx_init_check(good[i], &err), TFX_OK, "%s: %s", good[i], err.msg);
  }
  const char *bad[] = {"", "glorot", "Zeros", "xavier_uniform", "normal2", ":1", "lecun_normal"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tfx_err err = {0};
    cr_assert_eq(tfx_init_check(bad[i], &err), TFX_ECONFIG, "'%s' accepted", bad[i]);
    char want[64];
    snprintf(want, sizeof want, "unknown initializer '%s'", bad[i]);
    cr_assert_str_eq(err.msg, want);
  }
  cr_assert_eq(tfx_init_check("bogus", NULL), TFX_ECONFIG);
}

Test(init, hash_has_the_fnv1a_structure) {
  /* h("") is the offset basis B; each byte is xored in, then multiplied by the 64-bit FNV prime. */
  const uint64_t prime = 1099511628211ULL, basis = tfx_hash_str("");
  cr_assert_eq(tfx_hash_str("a"), (basis ^ 'a') * prime);
  cr_assert_eq(tfx_hash_str("ab"), (((basis ^ 'a') * prime) ^ 'b') * prime);
  cr_assert_neq(tfx_hash_str("dense_1/kernel"), tfx_hash_str("dense_1/bias"));
}

Test(init, hash_is_fnv1a_64) {
  /* Published FNV-1a 64-bit test vectors. The offset basis once lost its last digit (1469598103934665603
   * instead of 14695981039346656037 = 0xcbf29ce484222325): harmless for determinism, wrong against any other
   * FNV-1a. */
  cr_assert_eq(tfx_hash_str(""), 0xcbf29ce484222325ULL);
  cr_assert_eq(tfx_hash_str("a"), 0xaf63dc4c8601ec8cULL);
  cr_assert_eq(tfx_hash_str("foobar"), 0x85944171f73967e8ULL);
}

Test(init, rand_uniform_is_deterministic_and_uniform) {
  int buckets[10] = {0};
  for (uint64_t i = 0; i < N; i++) {
    double u = tfx_rand_uniform(99, i);
    cr_assert(u >= 0 && u < 1, "u = %g", u);
    cr_assert_eq(u, tfx_rand_uniform(99, i));
    buckets[(int)(u * 10)]++;
  }
  for (int b = 0; b < 10; b++) {
    /* Expected 10000 per bucket, standard deviation ~95. */
    cr_assert(abs(buckets[b] - N / 10) < 600, "bucket %d holds %d", b, buckets[b]);
  }
  cr_assert_neq(tfx_rand_uniform(1, 5), tfx_rand_uniform(2, 5));
}

Test(init, check_rejects_a_non_numeric_argument) {
  tfx_err err = {0};
  int rc = tfx_init_check("uniform:abc", &err);
  if (rc == TFX_OK) {
    /* Regression guard (src/nn/init.c, parse): when the argument went through atof, "uniform:abc" silently
     * became uniform with scale 0 (all zeros) instead of a configuration error. */
    cr_assert_fail("tfx_init_check accepted 'uniform:abc' (atof gives 0)");
  }
  cr_assert_eq(rc, TFX_ECONFIG);
  cr_assert(strstr(err.msg, "uniform:abc") != NULL, "msg: %s", err.msg);
}
