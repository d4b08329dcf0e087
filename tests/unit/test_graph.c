/* Graph-shaped models (src/nn/graph.c): finite-difference gradient checks of every graph op (matmul, bias_add,
 * lookup with its row-sparse gradient, scale, concat, add) and of a layer read by two others (summed
 * gradients), a wide-and-deep model, the experiment round trip that carries a graph to the workers, and the
 * errors that name the layer, the variable and the shapes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "train/evaluate.h"

#define BATCH 3

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static double gauss(void) {
  double u[2];
  for (int i = 0; i < 2; i++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    u[i] = ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
  }
  return sqrt(-2 * log(u[0])) * cos(2 * M_PI * u[1]);
}

static int build(const char *model_json, int batch, tfx_model **m, tfx_err *err) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  char json[4096];
  snprintf(json, sizeof json, "{\"model\": %s}", model_json);
  int rc = tfx_config_parse(&cfg, json, "test", err);
  return rc ? rc : tfx_model_create(&cfg, batch, m, err);
}

static tfx_model *must_build(const char *model_json) {
  tfx_model *m = NULL;
  tfx_err err = {0};
  cr_assert_eq(build(model_json, BATCH, &m, &err), TFX_OK, "%s", err.msg);
  return m;
}

typedef struct ctx {
  tfx_model *m;
  float *x;
  int32_t y[BATCH];
} ctx;

static double loss_at(ctx *c) {
  tfx_step_stats st;
  tfx_model_forward(c->m, c->x, BATCH, 1, 0);
  tfx_model_loss(c->m, c->y, BATCH, 0, &st);
  return st.loss;
}

/* The gradient of element j of v as backward left it: dense, or the row's slot of a row-sparse gradient
 * (0 for an untouched row). */
static double grad_of(const tfx_var *v, size_t j) {
  if (!v->sparse) {
    return v->grad[j];
  }
  size_t width = v->count / (size_t)v->shape[0], row = j / width;
  size_t k = tfx_rows_lower_bound(v->rows, v->n_rows, (int64_t)row);
  return k < v->n_rows && v->rows[k] == (int64_t)row ? v->grad[k * width + j % width] : 0.0;
}

/* Central differences of the mean loss against every variable's backward gradient (up to 40 elements each). */
static void check_grads(ctx *c) {
  tfx_step_stats st;
  tfx_model_forward(c->m, c->x, BATCH, 1, 0);
  tfx_model_loss(c->m, c->y, BATCH, 1, &st);
  tfx_model_backward(c->m, c->x, BATCH);
  int checked = 0;
  for (int i = 0; i < tfx_model_nvars(c->m); i++) {
    tfx_var *v = tfx_model_var(c->m, i);
    double *g = malloc(sizeof(double) * v->count);
    for (size_t j = 0; j < v->count; j++) {
      g[j] = grad_of(v, j);
    }
    size_t stride = v->count > 40 ? v->count / 40 : 1;
    for (size_t j = 0; j < v->count; j += stride) {
      float w = v->value[j];
      v->value[j] = w + 1e-2f;
      double up = loss_at(c);
      v->value[j] = w - 1e-2f;
      double down = loss_at(c);
      v->value[j] = w;
      double fd = (up - down) / 2e-2;
      cr_assert(fabs(fd - g[j]) < 2e-3 + 2e-2 * fabs(fd), "%s[%zu]: backward %g, central difference %g", v->name, j,
                g[j], fd);
      checked++;
    }
    free(g);
  }
  cr_assert_gt(checked, 0);
}

/* A model on random weights and inputs (ids in [0, vocab) when vocab > 0), labels b % classes. */
static void setup(ctx *c, const char *model_json, int vocab) {
  c->m = must_build(model_json);
  for (int i = 0; i < tfx_model_nvars(c->m); i++) {
    tfx_var *v = tfx_model_var(c->m, i);
    for (size_t j = 0; j < v->count; j++) {
      v->value[j] = (float)(0.5 * gauss());
    }
  }
  size_t n = tfx_model_input_size(c->m) * BATCH;
  c->x = malloc(sizeof(float) * n);
  for (size_t j = 0; j < n; j++) {
    c->x[j] = vocab ? (float)(j * 7 % (size_t)vocab) : (float)gauss();
  }
  for (int b = 0; b < BATCH; b++) {
    c->y[b] = b % (int)tfx_model_output_size(c->m);
  }
}

static void teardown(ctx *c) {
  tfx_model_destroy(c->m);
  free(c->x);
}

Test(graph, grad_matmul_bias_add_with_activations) {
  ctx c;
  setup(&c,
        "{\"input_shape\": [5], \"variables\": [{\"name\": \"w\", \"shape\": [5, 4]}, {\"name\": \"b\", \"shape\": "
        "[4]}, {\"name\": \"w2\", \"shape\": \"4,3\"}],"
        " \"layers\": [{\"type\": \"matmul\", \"variable\": \"w\", \"activation\": \"tanh\"},"
        " {\"type\": \"bias_add\", \"variable\": \"b\", \"activation\": \"sigmoid\"},"
        " {\"type\": \"matmul\", \"variable\": \"w2\"}]}",
        0);
  check_grads(&c);
  teardown(&c);
}

Test(graph, grad_concat_of_two_branches_and_scale) {
  ctx c;
  setup(&c,
        "{\"input_shape\": [4], \"layers\": [{\"type\": \"scale\", \"name\": \"s\", \"rate\": 0.5},"
        " {\"type\": \"dense\", \"name\": \"a\", \"units\": 3, \"activation\": \"relu\", \"inputs\": \"s\"},"
        " {\"type\": \"dense\", \"name\": \"b\", \"units\": 2, \"activation\": \"tanh\", \"inputs\": \"input\"},"
        " {\"type\": \"concat\", \"inputs\": [\"a\", \"b\", \"input\"]}, {\"type\": \"dense\", \"units\": 3}]}",
        0);
  check_grads(&c);
  teardown(&c);
}

Test(graph, grad_add_and_a_layer_read_twice) {
  ctx c; /* h feeds both p and q, q feeds t and the add: their gradients are the sums of their readers' */
  setup(&c,
        "{\"input_shape\": [4], \"layers\": [{\"type\": \"dense\", \"name\": \"h\", \"units\": 5, \"activation\": "
        "\"tanh\"}, {\"type\": \"dense\", \"name\": \"p\", \"units\": 3, \"inputs\": \"h\"},"
        " {\"type\": \"dense\", \"name\": \"q\", \"units\": 3, \"activation\": \"sigmoid\", \"inputs\": \"h\"},"
        " {\"type\": \"tanh\", \"name\": \"t\", \"inputs\": \"q\"},"
        " {\"type\": \"add\", \"inputs\": \"p,t,q\"}]}",
        0);
  check_grads(&c);
  teardown(&c);
}

Test(graph, grad_lookup_is_row_sparse) {
  ctx c;
  setup(&c,
        "{\"input_shape\": [3], \"variables\": [{\"name\": \"table\", \"shape\": [6, 2], \"initializer\": "
        "\"uniform:0.5\"}], \"layers\": [{\"type\": \"lookup\", \"variable\": \"table\"},"
        " {\"type\": \"dense\", \"units\": 3}]}",
        6);
  tfx_var *t = tfx_model_find_var(c.m, "table");
  cr_assert(t && t->sparse, "a lookup's table has a row-sparse gradient");
  check_grads(&c);
  /* inputs j*7 % 6 for j < 9 touch rows {0, 1, 2, 3, 4, 5} minus none: check rows are ascending and unique */
  for (size_t k = 1; k < t->n_rows; k++) {
    cr_assert_lt(t->rows[k - 1], t->rows[k]);
  }
  teardown(&c);
}

/* The shape the example plugin builds: a wide linear part on scaled inputs plus a deep MLP over an embedding
 * of the raw ids, summed into the logits with a declared bias. */
static const char *wide_deep =
    "{\"input_shape\": [6], \"variables\": [{\"name\": \"wide/kernel\", \"shape\": [6, 3], \"initializer\": "
    "\"zeros\"}, {\"name\": \"deep/embeddings\", \"shape\": [4, 2]}, {\"name\": \"logits/bias\", \"shape\": [3]}],"
    " \"layers\": [{\"type\": \"scale\", \"name\": \"scaled\", \"rate\": 0.25},"
    " {\"type\": \"matmul\", \"name\": \"wide\", \"variable\": \"wide/kernel\"},"
    " {\"type\": \"lookup\", \"name\": \"embed\", \"variable\": \"deep/embeddings\", \"inputs\": \"input\"},"
    " {\"type\": \"dense\", \"name\": \"hidden\", \"units\": 5, \"activation\": \"relu\"},"
    " {\"type\": \"dense\", \"name\": \"deep\", \"units\": 3},"
    " {\"type\": \"add\", \"name\": \"sum\", \"inputs\": \"wide,deep\"},"
    " {\"type\": \"bias_add\", \"name\": \"logits\", \"variable\": \"logits/bias\"}]}";

Test(graph, grad_wide_and_deep) {
  ctx c;
  setup(&c, wide_deep, 4);
  check_grads(&c);
  teardown(&c);
}

/* The master sends the experiment as JSON: the model rebuilt from it computes the same logits. */
Test(graph, experiment_json_round_trip_keeps_the_graph) {
  tfx_config cfg, back;
  tfx_config_init(&cfg), tfx_config_init(&back);
  char json[4096];
  snprintf(json, sizeof json, "{\"model\": %s}", wide_deep);
  cr_assert_eq(tfx_config_parse(&cfg, json, "test", NULL), TFX_OK);
  char *text = tfx_config_to_json(&cfg);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&back, text, "round trip", &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(back.n_variables, 3);
  cr_assert_str_eq(back.variables[1].shape, "4,2");
  cr_assert(strstr(text, "\"shape\": [") && !strstr(text, "\"shape\": \""), "shapes are written as lists: %s", text);
  free(text);
  cr_assert_str_eq(back.layers[5].inputs, "wide,deep");
  tfx_model *a, *b;
  cr_assert_eq(tfx_model_create(&cfg, 2, &a, NULL), TFX_OK);
  cr_assert_eq(tfx_model_create(&back, 2, &b, NULL), TFX_OK);
  tfx_model_init_vars(a, 3), tfx_model_init_vars(b, 3);
  float x[12] = {0, 1, 2, 3, 3, 2, 1, 0, 1, 1, 2, 2};
  const float *za = tfx_model_forward(a, x, 2, 0, 0), *zb = tfx_model_forward(b, x, 2, 0, 0);
  for (int i = 0; i < 6; i++) {
    cr_assert_float_eq(za[i], zb[i], 0, "logit %d", i);
  }
  cr_assert_eq(tfx_model_nvars(a), 7); /* 3 declared, then kernel and bias of hidden and deep */
  cr_assert_str_eq(tfx_model_var(a, 0)->name, "wide/kernel");
  tfx_model_destroy(a), tfx_model_destroy(b);
}

Test(graph, declared_variable_flags) {
  tfx_model *m = must_build(
      "{\"input_shape\": [2], \"variables\": [{\"name\": \"w\", \"shape\": [2, 2], \"trainable\": false,"
      " \"initializer\": \"ones\"}], \"layers\": [{\"type\": \"matmul\", \"variable\": \"w\"}]}");
  tfx_var *w = tfx_model_find_var(m, "w");
  cr_assert(w && !w->trainable && w->rank == 2 && w->count == 4);
  tfx_model_init_vars(m, 1);
  cr_assert_float_eq(w->value[3], 1.0f, 0);
  tfx_model_destroy(m);
}

static void expect_error(const char *model_json, int code, const char *fragment) {
  tfx_model *m = NULL;
  tfx_err err = {0};
  int rc = build(model_json, 2, &m, &err);
  cr_assert_eq(rc, code, "rc %d for %s: %s", rc, model_json, err.msg);
  cr_assert(strstr(err.msg, fragment), "message '%s' lacks '%s'", err.msg, fragment);
  cr_assert_null(m);
}

Test(graph, errors_name_the_layer_variable_and_shapes) {
  expect_error(
      "{\"input_shape\": [5], \"variables\": [{\"name\": \"w\", \"shape\": [4, 3]}],"
      " \"layers\": [{\"type\": \"matmul\", \"name\": \"wide\", \"variable\": \"w\"}]}",
      TFX_ESHAPE, "layer wide: variable 'w' has shape [4, 3], want [inputs, units] for a [5] input");
  expect_error("{\"input_shape\": [5], \"layers\": [{\"type\": \"matmul\", \"name\": \"m\", \"variable\": \"nope\"}]}",
               TFX_ECONFIG, "layer m: variable 'nope' is not in model.variables");
  expect_error(
      "{\"input_shape\": [5], \"variables\": [{\"name\": \"w\", \"shape\": [5, 0]}],"
      " \"layers\": [{\"type\": \"matmul\", \"variable\": \"w\"}]}",
      TFX_ESHAPE, "shape '5,0'");
  expect_error(
      "{\"input_shape\": [5], \"variables\": [{\"name\": \"w\", \"shape\": [5, 2]}],"
      " \"layers\": [{\"type\": \"dense\", \"units\": 2}]}",
      TFX_ECONFIG, "model.variables 'w': no matmul, bias_add or lookup layer uses it");
  expect_error(
      "{\"input_shape\": [5], \"layers\": [{\"type\": \"dense\", \"units\": 2, \"inputs\": \"later\"},"
      " {\"type\": \"dense\", \"name\": \"later\", \"units\": 2}]}",
      TFX_ECONFIG, "layer dense_1: input 'later' is not an earlier layer");
  expect_error(
      "{\"input_shape\": [5], \"layers\": [{\"type\": \"dense\", \"name\": \"a\", \"units\": 2},"
      " {\"type\": \"dense\", \"units\": 3, \"inputs\": \"input\"}]}",
      TFX_ECONFIG, "layer a: no layer reads its output");
  expect_error(
      "{\"input_shape\": [5], \"layers\": [{\"type\": \"dense\", \"name\": \"a\", \"units\": 2},"
      " {\"type\": \"add\", \"inputs\": \"a,input\"}]}",
      TFX_ESHAPE, "add of 'input' with 5 values per example and 'a' with 2");
  expect_error(
      "{\"input_shape\": [2, 2, 1], \"layers\": [{\"type\": \"flatten\", \"name\": \"f\"},"
      " {\"type\": \"concat\", \"inputs\": \"f,input\"}]}",
      TFX_ESHAPE, "concat of 'input' of rank 3 (flatten it first)");
  expect_error("{\"input_shape\": [5], \"layers\": [{\"type\": \"concat\", \"inputs\": \"input\"}]}", TFX_ECONFIG,
               "1 inputs (a merge takes 2 or more)");
  expect_error(
      "{\"input_shape\": [5], \"variables\": [{\"name\": \"w\", \"shape\": [5, 2]}],"
      " \"layers\": [{\"type\": \"matmul\", \"variable\": \"w\"}, {\"type\": \"matmul\", \"name\": \"again\","
      " \"variable\": \"w\"}]}",
      TFX_ECONFIG, "layer again: variable 'w' is already used by layer matmul_1");
  expect_error("{\"input_shape\": [5], \"layers\": [{\"type\": \"dense\", \"units\": 2, \"variable\": \"w\"}]}",
               TFX_ECONFIG, "only matmul, bias_add and lookup take a variable");
}

Test(graph, config_errors) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  tfx_err err = {0};
  cr_assert_eq(tfx_config_parse(&cfg,
                                "{\"model\": {\"variables\": [{\"name\": \"a\", \"shape\": [1]},"
                                " {\"name\": \"a\", \"shape\": [2]}]}}",
                                "t", &err),
               TFX_ECONFIG);
  cr_assert(strstr(err.msg, "model.variables[1]: 'a' declared twice"), "%s", err.msg);
  cr_assert_eq(
      tfx_config_parse(&cfg, "{\"model\": {\"variables\": [{\"name\": \"a\", \"shape\": [1,2,3,4,5]}]}}", "t", &err),
      TFX_ESHAPE);
  cr_assert(strstr(err.msg, "want 1 to 4 positive dims"), "%s", err.msg);
  cr_assert_eq(tfx_config_set(&cfg, "model.layers=[{\"type\": \"dense\"}]", &err), TFX_OK);
  cr_assert_eq(tfx_config_set(&cfg, "model.metrics=\"loss,top_0\"", &err), TFX_OK);
  cr_assert_eq(tfx_config_validate(&cfg, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "model.metrics: 'top_0'"), "%s", err.msg);
}

/* top_K counts a hit when fewer than K classes score above the label. */
Test(graph, top_k_follows_model_metrics) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  cr_assert_eq(tfx_config_parse(&cfg,
                                "{\"model\": {\"input_shape\": [4], \"metrics\": \"loss,top_2\", \"layers\":"
                                " [{\"type\": \"matmul\", \"variable\": \"i\"}], \"variables\": [{\"name\": \"i\","
                                " \"shape\": [4, 4], \"initializer\": \"zeros\"}]}}",
                                "t", NULL),
               TFX_OK);
  tfx_model *m;
  cr_assert_eq(tfx_model_create(&cfg, 1, &m, NULL), TFX_OK);
  tfx_var *w = tfx_model_find_var(m, "i");
  for (int k = 0; k < 4; k++) {
    w->value[k * 4 + k] = 1; /* identity: the logits are the inputs */
  }
  float x[4] = {0.1f, 0.4f, 0.3f, 0.2f};
  int32_t second = 2, third = 3;
  tfx_step_stats st;
  tfx_model_forward(m, x, 1, 0, 0);
  tfx_model_loss(m, &second, 1, 0, &st);
  cr_assert_eq(st.top5, 1, "class 2 is second largest");
  tfx_model_loss(m, &third, 1, 0, &st);
  cr_assert_eq(st.top5, 0, "class 3 is third largest");
  tfx_model_destroy(m);
}
