/* Unit tests of src/master/plan.c: round_robin and greedy_bytes placement of the example MLP, axis-0
 * partitioning (contiguous row ranges that cover each variable exactly), and determinism. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "master/plan.h"
#include "nn/model.h"

#define EXAMPLE TFX_SOURCE_DIR "/examples/fashion_mnist_mlp.json"

/* Sets option `key` of cfg to its text `value`, as the experiment would. */
static void set_option(tfx_config *cfg, const char *key, const char *value) {
  char assignment[96];
  snprintf(assignment, sizeof assignment, "%s=%s", key, value);
  cr_assert_eq(tfx_config_set(cfg, assignment, NULL), TFX_OK, "%s", assignment);
}

static tfx_config cfg;
static tfx_model *model;

static void setup(void) {
  tfx_err err = {0};
  tfx_config_init(&cfg);
  cr_assert_eq(tfx_config_load(&cfg, EXAMPLE, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_model_create(&cfg, 1, &model, &err), TFX_OK, "%s", err.msg);
}

static void teardown(void) {
  tfx_model_destroy(model);
}

TestSuite(plan, .init = setup, .fini = teardown);

static void build(const char *strategy, int64_t min_slice, int max_shards, int n_ps, tfx_plan *p) {
  set_option(&cfg, "placement.strategy", strategy);
  cfg.min_slice_bytes = min_slice;
  cfg.max_shards = max_shards;
  tfx_err err = {0};
  cr_assert_eq(tfx_plan_build(&cfg, model, n_ps, p, &err), TFX_OK, "%s", err.msg);
}

static int64_t row_bytes(const Tfx__Shard *s) {
  int64_t r = 4;
  for (size_t d = 1; d < s->n_shape; d++) {
    r *= s->shape[d];
  }
  return r;
}

/* Checks that each variable's shards are contiguous, in order, cover [0, rows) exactly and carry the
 * variable's metadata; returns the total number of shards. */
static int assert_covers(const tfx_plan *p, int max_shards) {
  int total = 0;
  for (int i = 0; i < tfx_model_nvars(model); i++) {
    tfx_var *v = tfx_model_var(model, i);
    int64_t next = 0;
    int parts = 0;
    for (int k = 0; k < p->n; k++) {
      const Tfx__Shard *s = &p->shards[k];
      if (strcmp(s->var, v->name)) {
        continue;
      }
      cr_assert_eq(s->row_begin, next, "%s: shard %s starts at row %lld, want %lld", v->name, s->key,
                   (long long)s->row_begin, (long long)next);
      cr_assert_gt(s->row_end, s->row_begin, "%s: empty shard %s", v->name, s->key);
      next = s->row_end;
      cr_assert_eq(s->n_shape, (size_t)v->rank, "%s", s->key);
      for (int d = 0; d < v->rank; d++) {
        cr_assert_eq(s->shape[d], v->shape[d], "%s dim %d", s->key, d);
      }
      cr_assert_str_eq(s->init, v->init);
      cr_assert_str_eq(s->dtype, "float32", "%s", s->key);
      cr_assert_eq(s->fan_in, v->fan_in);
      cr_assert_eq(s->fan_out, v->fan_out);
      cr_assert_eq(s->trainable, v->trainable);
      cr_assert(s->ps >= 0 && s->ps < p->n_ps, "%s on ps %d", s->key, s->ps);
      cr_assert_eq(p->ptrs[k], s);
      parts++;
    }
    cr_assert_eq(next, v->shape[0], "%s: rows covered up to %lld of %lld", v->name, (long long)next,
                 (long long)v->shape[0]);
    cr_assert_leq(parts, max_shards, "%s: %d parts", v->name, parts);
    /* Keys: the name alone, or name/part_K in row order. */
    int part = 0;
    for (int k = 0; k < p->n; k++) {
      const Tfx__Shard *s = &p->shards[k];
      if (strcmp(s->var, v->name)) {
        continue;
      }
      char want[200];
      if (parts == 1) {
        snprintf(want, sizeof want, "%s", v->name);
      } else {
        snprintf(want, sizeof want, "%s/part_%d", v->name, part);
      }
      cr_assert_str_eq(s->key, want);
      part++;
    }
    total += parts;
  }
  cr_assert_eq(total, p->n, "every shard belongs to a variable");
  return total;
}

static void loads(const tfx_plan *p, int64_t *load) {
  memset(load, 0, sizeof(int64_t) * (size_t)p->n_ps);
  for (int k = 0; k < p->n; k++) {
    load[p->shards[k].ps] += (p->shards[k].row_end - p->shards[k].row_begin) * row_bytes(&p->shards[k]);
  }
}

Test(plan, round_robin_places_variables_in_order) {
  tfx_plan p;
  build("round_robin", 0, 1, 2, &p);
  cr_assert_eq(p.n, 6);
  cr_assert_eq(p.n_ps, 2);
  const char *keys[] = {"dense_1/kernel", "dense_1/bias",   "dense_2/kernel",
                        "dense_2/bias",   "dense_3/kernel", "dense_3/bias"};
  for (int k = 0; k < 6; k++) {
    cr_assert_str_eq(p.shards[k].key, keys[k]);
    cr_assert_str_eq(p.shards[k].var, keys[k]);
    cr_assert_eq(p.shards[k].ps, k % 2, "%s", keys[k]);
  }
  assert_covers(&p, 1);
  tfx_plan_fini(&p);

  build("round_robin", 0, 1, 4, &p);
  for (int k = 0; k < 6; k++) {
    cr_assert_eq(p.shards[k].ps, k % 4);
  }
  tfx_plan_fini(&p);
}

Test(plan, greedy_bytes_puts_the_largest_first_on_the_least_loaded) {
  tfx_plan p;
  build("greedy_bytes", 0, 1, 2, &p);
  cr_assert_eq(p.n, 6);
  /* Largest first: dense_1/kernel (802816 B) fills ps 0; everything else is smaller than it in total. */
  const char *order[] = {"dense_1/kernel", "dense_2/kernel", "dense_3/kernel",
                         "dense_1/bias",   "dense_2/bias",   "dense_3/bias"};
  const int ps[] = {0, 1, 1, 1, 1, 1};
  for (int k = 0; k < 6; k++) {
    cr_assert_str_eq(p.shards[k].key, order[k]);
    cr_assert_eq(p.shards[k].ps, ps[k], "%s", order[k]);
  }
  assert_covers(&p, 1);
  tfx_plan_fini(&p);
}

Test(plan, partitioning_with_min_slice_bytes_and_max_shards) {
  tfx_plan p;
  /* dense_1/kernel is 802816 B: ceil(802816 / 100000) = 9 parts, capped at 4 -> rows 784 * k / 4.
   * dense_2/kernel is 131072 B: 2 parts of 128 rows. The rest stays whole. */
  build("round_robin", 100000, 4, 3, &p);
  cr_assert_eq(p.n, 4 + 1 + 2 + 1 + 1 + 1);
  cr_assert_str_eq(p.shards[0].key, "dense_1/kernel/part_0");
  const int64_t bounds[5] = {0, 196, 392, 588, 784};
  for (int k = 0; k < 4; k++) {
    cr_assert_eq(p.shards[k].row_begin, bounds[k]);
    cr_assert_eq(p.shards[k].row_end, bounds[k + 1]);
    cr_assert_eq(p.shards[k].ps, k % 3, "round robin goes over slices too");
  }
  cr_assert_str_eq(p.shards[5].key, "dense_2/kernel/part_0");
  cr_assert_eq(p.shards[5].row_end, 128);
  cr_assert_str_eq(p.shards[6].key, "dense_2/kernel/part_1");
  cr_assert_eq(assert_covers(&p, 4), p.n);
  tfx_plan_fini(&p);
}

Test(plan, partitions_cover_exactly_for_many_settings) {
  const int64_t slices[] = {0, 1, 40, 4000, 65536, 100000, 1000000};
  const int shards[] = {1, 2, 3, 7, 1024};
  const char *strategies[] = {"round_robin", "greedy_bytes"};
  for (size_t a = 0; a < sizeof slices / sizeof slices[0]; a++) {
    for (size_t b = 0; b < sizeof shards / sizeof shards[0]; b++) {
      for (int s = 0; s < 2; s++) {
        for (int n_ps = 1; n_ps <= 3; n_ps++) {
          tfx_plan p;
          build(strategies[s], slices[a], shards[b], n_ps, &p);
          assert_covers(&p, shards[b]);
          /* TensorFlow's min_max_variable_partitioner: ceil(bytes / min_slice_bytes) parts, at most
           * max_shards and at most the rows; variables at or under min_slice_bytes stay whole. */
          for (int i = 0; i < tfx_model_nvars(model); i++) {
            tfx_var *v = tfx_model_var(model, i);
            int64_t bytes = (int64_t)v->count * 4, want = 1;
            if (slices[a] > 0 && bytes > slices[a]) {
              want = (bytes + slices[a] - 1) / slices[a];
              want = want < shards[b] ? want : shards[b];
              want = want < v->shape[0] ? want : v->shape[0];
            }
            int64_t got = 0;
            for (int k = 0; k < p.n; k++) {
              got += !strcmp(p.shards[k].var, v->name);
            }
            cr_assert_eq(got, want, "%s with min_slice_bytes %lld, max_shards %d", v->name, (long long)slices[a],
                         shards[b]);
          }
          size_t total = 0;
          for (int ps = 0; ps < n_ps; ps++) {
            size_t n = 0;
            Tfx__Shard **mine = tfx_plan_for_ps(&p, ps, &n);
            cr_assert_not_null(mine);
            for (size_t i = 0; i < n; i++) {
              cr_assert_eq(mine[i]->ps, ps);
            }
            total += n;
            free(mine);
          }
          cr_assert_eq(total, (size_t)p.n, "tfx_plan_for_ps partitions the shards");
          tfx_plan_fini(&p);
        }
      }
    }
  }
}

Test(plan, slices_never_exceed_the_rows) {
  tfx_plan p;
  build("round_robin", 1, 1024, 2, &p); /* every variable wants 1024 parts: capped at its rows */
  int n = assert_covers(&p, 1024);
  cr_assert_eq(n, 784 + 256 + 256 + 128 + 128 + 10);
  for (int k = 0; k < p.n; k++) {
    cr_assert_eq(p.shards[k].row_end - p.shards[k].row_begin, 1);
  }
  tfx_plan_fini(&p);
}

Test(plan, greedy_balances_better_than_round_robin_when_partitioned) {
  tfx_plan rr, gr;
  build("round_robin", 65536, 16, 4, &rr);
  build("greedy_bytes", 65536, 16, 4, &gr);
  int64_t lr[4], lg[4], max_r = 0, max_g = 0, sum = 0;
  loads(&rr, lr);
  loads(&gr, lg);
  for (int i = 0; i < 4; i++) {
    max_r = lr[i] > max_r ? lr[i] : max_r;
    max_g = lg[i] > max_g ? lg[i] : max_g;
    sum += lg[i];
  }
  cr_assert_eq(sum, (int64_t)tfx_model_param_count(model) * 4, "every byte is placed once");
  cr_assert_leq(max_g, max_r);
  cr_assert_lt((double)max_g / ((double)sum / 4), 1.15, "greedy imbalance %.3f", (double)max_g / ((double)sum / 4));
  tfx_plan_fini(&rr);
  tfx_plan_fini(&gr);
}

Test(plan, deterministic) {
  for (int s = 0; s < 2; s++) {
    tfx_plan a, b;
    build(s ? "greedy_bytes" : "round_robin", 50000, 5, 3, &a);
    build(s ? "greedy_bytes" : "round_robin", 50000, 5, 3, &b);
    cr_assert_eq(a.n, b.n);
    for (int k = 0; k < a.n; k++) {
      cr_assert_str_eq(a.shards[k].key, b.shards[k].key);
      cr_assert_eq(a.shards[k].ps, b.shards[k].ps);
      cr_assert_eq(a.shards[k].row_begin, b.shards[k].row_begin);
      cr_assert_eq(a.shards[k].row_end, b.shards[k].row_end);
    }
    tfx_plan_fini(&a);
    tfx_plan_fini(&b);
  }
}

Test(plan, a_conv_kernel_splits_along_its_first_axis) {
  tfx_config c;
  tfx_config_init(&c);
  c.input_rank = 3, c.input_shape[0] = 8, c.input_shape[1] = 8, c.input_shape[2] = 3;
  c.n_layers = 3;
  memset(c.layers, 0, sizeof c.layers);
  snprintf(c.layers[0].type, 24, "conv2d");
  snprintf(c.layers[0].padding, 8, "same");
  c.layers[0].kernel_size = 5, c.layers[0].filters = 64, c.layers[0].strides = 1;
  snprintf(c.layers[1].type, 24, "flatten");
  snprintf(c.layers[2].type, 24, "dense");
  c.layers[2].units = 2;
  tfx_model *m = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_model_create(&c, 1, &m, &err), TFX_OK, "%s", err.msg);
  c.min_slice_bytes = 1000, c.max_shards = 16;
  tfx_plan p;
  cr_assert_eq(tfx_plan_build(&c, m, 2, &p, &err), TFX_OK, "%s", err.msg);
  int kernel_parts = 0;
  for (int k = 0; k < p.n; k++) {
    if (strcmp(p.shards[k].var, "conv2d_1/kernel")) {
      continue;
    }
    cr_assert_eq(p.shards[k].n_shape, 4);
    cr_assert_eq(p.shards[k].row_end - p.shards[k].row_begin, 1, "one kernel row per slice");
    kernel_parts++;
  }
  cr_assert_eq(kernel_parts, 5, "a [5, 5, 3, 64] kernel has 5 rows to split");
  tfx_plan_fini(&p);
  tfx_model_destroy(m);
}

Test(plan, no_ps_is_an_error) {
  tfx_plan p;
  tfx_err err = {0};
  cr_assert_eq(tfx_plan_build(&cfg, model, 0, &p, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "no ps") != NULL, "msg: %s", err.msg);
  tfx_plan_fini(&p); /* a failed build leaves nothing to release */
}

Test(plan, print_shows_every_ps_and_the_imbalance) {
  tfx_plan p;
  build("greedy_bytes", 0, 1, 2, &p);
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  tfx_plan_print(&p, mem);
  fclose(mem);
  cr_assert(strstr(buf, "ps 0:") != NULL, "%s", buf);
  cr_assert(strstr(buf, "ps 1:") != NULL, "%s", buf);
  cr_assert(strstr(buf, "dense_1/kernel") != NULL, "%s", buf);
  cr_assert(strstr(buf, "total 802816 bytes") != NULL, "%s", buf);
  cr_assert(strstr(buf, "imbalance (max/mean): 1.707") != NULL, "%s", buf);
  free(buf);
  tfx_plan_fini(&p);
}

Test(plan, replicas_put_each_backup_on_the_next_ps_of_the_ring) {
  cr_assert_eq(tfx_plan_backup(0, 2, 1), 1);
  cr_assert_eq(tfx_plan_backup(1, 2, 1), 0);
  cr_assert_eq(tfx_plan_backup(2, 3, 1), 0);
  cr_assert_eq(tfx_plan_backup(0, 3, 1), 1);
  cr_assert_eq(tfx_plan_backup(0, 1, 1), -1, "a single ps has nowhere to put a backup");
  cr_assert_eq(tfx_plan_backup(0, 2, 0), -1, "replicas off");
  cr_assert_eq(tfx_plan_backup(2, 2, 1), -1, "no such ps");
  for (int n = 2; n < 9; n++) {
    for (int p = 0; p < n; p++) {
      cr_assert_neq(tfx_plan_backup(p, n, 1), p, "a backup is never on its primary");
    }
  }
}

Test(plan, print_names_each_shards_backup_and_the_bytes_each_ps_holds_with_replicas) {
  tfx_plan p;
  set_option(&cfg, "cluster.replicas", "1");
  build("greedy_bytes", 262144, 2, 2, &p);
  cr_assert_eq(p.replicas, 1);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  tfx_plan_print(&p, mem);
  fclose(mem);
  cr_assert(strstr(text, "dense_1/kernel/part_0            rows 0..392      401408 bytes  backup: ps 1"), "%s", text);
  cr_assert(strstr(text, "as the backup of ps 1: 408104 bytes; held in all: 940584 bytes"), "%s", text);
  cr_assert(strstr(text, "as the backup of ps 0: 532480 bytes; held in all: 940584 bytes"), "%s", text);
  cr_assert(strstr(text, "each worker keeps (sync) up to 34 pushes for it until its backup holds them: <= 18104320 "
                         "bytes"), /* cluster.replica_batch_steps 16: 2 x 16 + 2 pushes of ps 0's 532480 bytes */
            "%s", text);
  cr_assert_null(strstr(text, "its log of"), "no lazy table: no backup log kept until a checkpoint\n%s", text);
  free(text);
  tfx_plan_fini(&p);
}
