/* Unit tests of src/ps/rowtable.c: lazy tables hold only touched rows, initial values equal the dense table's,
 * ids are checked, rows survive growth and eviction (backward-shift deletion), a clear empties the table at once
 * (a sync step's sums), and a table streams out and back bit for bit. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "nn/init.h"
#include "ps/rowtable.h"

static tfx_rowtable *make(int64_t vocab, int dim, int slots) {
  tfx_rowtable_spec spec = {"emb/table", vocab, dim, slots, "normal:0.05", 7, vocab, dim, 0.1f};
  tfx_rowtable *t = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_rowtable_create(&spec, &t, &err), TFX_OK, "%s", err.msg);
  return t;
}

Test(rowtable, holds_only_touched_rows_of_a_2_to_40_table) {
  tfx_rowtable *t = make(TFX_ROWTABLE_MAX_IDS, 16, 1);
  int64_t ids[] = {0, 123456789012LL, TFX_ROWTABLE_MAX_IDS - 1};
  for (int i = 0; i < 3; i++) {
    cr_assert_not_null(tfx_rowtable_touch(t, ids[i], 1));
  }
  cr_assert_eq(tfx_rowtable_rows(t), 3);
  cr_assert_lt(tfx_rowtable_bytes(t), (size_t)8 << 20, "a 2^40-id table with 3 rows holds %zu bytes",
               tfx_rowtable_bytes(t));
  float out[16];
  tfx_rowtable_read(t, 42, out);
  cr_assert_eq(tfx_rowtable_rows(t), 3, "reading an untouched row stores nothing");
  cr_assert_null(tfx_rowtable_find(t, 42));
  tfx_rowtable_destroy(t);
}

Test(rowtable, initial_rows_equal_the_dense_table_and_slots_start_at_slot_init) {
  tfx_rowtable *t = make(1000, 8, 2);
  float dense[1000 * 8];
  tfx_init_fill("normal:0.05", "emb/table", 7, 1000, 8, 0, 1000 * 8, dense);
  const float *row = tfx_rowtable_touch(t, 517, 3);
  cr_assert_arr_eq(row, dense + 517 * 8, sizeof(float) * 8);
  for (int i = 8; i < 24; i++) {
    cr_assert_eq(row[i], 0.1f);
  }
  float out[8];
  tfx_rowtable_read(t, 999, out);
  cr_assert_arr_eq(out, dense + 999 * 8, sizeof out, "an untouched row reads as its initial values");
  tfx_rowtable_destroy(t);
}

Test(rowtable, refuses_ids_outside_duplicated_or_descending) {
  tfx_rowtable *t = make(100, 4, 0);
  tfx_err err = {0};
  int64_t out_of_range[] = {3, 100}, negative[] = {-1}, dup[] = {1, 5, 5}, desc[] = {9, 2};
  cr_assert_eq(tfx_rowtable_check_ids(t, out_of_range, 2, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "emb/table") && strstr(err.msg, "id 100 is outside [0, 100)"), "%s", err.msg);
  cr_assert_eq(tfx_rowtable_check_ids(t, negative, 1, &err), TFX_EINVAL);
  cr_assert_eq(tfx_rowtable_check_ids(t, dup, 3, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "id 5 is duplicated"), "%s", err.msg);
  cr_assert_eq(tfx_rowtable_check_ids(t, desc, 2, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "id 2 comes after a larger one"), "%s", err.msg);
  float row[4] = {1, 2, 3, 4};
  cr_assert_eq(tfx_rowtable_put(t, 100, row, &err), TFX_EINVAL);
  cr_assert_eq(tfx_rowtable_rows(t), 0, "nothing stored for a refused id");
  tfx_rowtable_destroy(t);
}

/* Marks each row with its own id, so a row found under another id shows. */
static void mark_many(tfx_rowtable *t, int n, int64_t stride) {
  for (int i = 0; i < n; i++) {
    float *row = tfx_rowtable_touch(t, i * stride, i % 2);
    cr_assert_not_null(row);
    row[0] = (float)i;
  }
}

Test(rowtable, rows_survive_growth_and_eviction) {
  tfx_rowtable *t = make((int64_t)1 << 36, 4, 1);
  mark_many(t, 50000, 1000003);
  cr_assert_eq(tfx_rowtable_rows(t), 50000);
  cr_assert_eq(tfx_rowtable_evict(t, 1), 25000, "rows last touched at step 0 go");
  cr_assert_eq(tfx_rowtable_rows(t), 25000);
  for (int i = 0; i < 50000; i++) {
    const float *row = tfx_rowtable_find(t, (int64_t)i * 1000003);
    if (i % 2) {
      cr_assert(row && row[0] == (float)i, "row %d lost or moved after eviction", i);
    } else {
      cr_assert_null(row, "row %d was evicted", i);
    }
  }
  mark_many(t, 1000, 7); /* ids 0, 7, ..., 6993: none is stored now (id 0 was evicted), so freed rows are reused */
  cr_assert_eq(tfx_rowtable_rows(t), 26000);
  cr_assert_eq(tfx_rowtable_find(t, 1000003)[0], 1.0f, "a kept row is untouched by the reuse");
  tfx_rowtable_destroy(t);
}

/* A map of 2 MiB and more is a huge-page mapping of its own (rowtable.c): rows stay where they were through two
 * such growths (131 072 and 262 144 cells), a drop's backward shift and a clear, and the table goes back whole. */
Test(rowtable, rows_survive_the_map_growing_onto_huge_pages) {
  tfx_rowtable *t = make((int64_t)1 << 36, 2, 0);
  mark_many(t, 200000, 1000003);
  cr_assert_eq(tfx_rowtable_rows(t), 200000);
  cr_assert_geq(tfx_rowtable_bytes(t), (size_t)262144 * 16, "the map grew to 262 144 cells");
  for (int i = 0; i < 200000; i += 3) {
    tfx_rowtable_drop(t, (int64_t)i * 1000003);
  }
  for (int i = 0; i < 200000; i++) {
    const float *row = tfx_rowtable_find(t, (int64_t)i * 1000003);
    cr_assert(i % 3 ? row && row[0] == (float)i : !row, "row %d after the growths and drops", i);
  }
  tfx_rowtable_clear(t);
  cr_assert_null(tfx_rowtable_find(t, 1000003));
  tfx_rowtable_destroy(t);
}

static int count_row(int64_t id, const float *row, void *ctx) {
  (void)row;
  cr_assert_eq(id % 7, 0, "row %lld is from before the clear", (long long)id);
  (*(int *)ctx)++;
  return 0;
}

Test(rowtable, a_clear_drops_every_row_and_the_next_rows_start_fresh) {
  tfx_rowtable *t = make((int64_t)1 << 36, 4, 1);
  mark_many(t, 20000, 1000003);
  tfx_rowtable_clear(t);
  cr_assert_eq(tfx_rowtable_rows(t), 0);
  cr_assert_null(tfx_rowtable_find(t, 1000003), "a row survived the clear");
  float init[4];
  tfx_init_fill("normal:0.05", "emb/table", 7, (int64_t)1 << 36, 4, 1000003 * 4, 4, init);
  cr_assert_arr_eq(tfx_rowtable_touch(t, 1000003, 0), init, sizeof init, "a row made again holds its initial values");
  tfx_rowtable_clear(t);
  mark_many(t, 3000, 7);
  int n = 0;
  cr_assert_eq(tfx_rowtable_each(t, count_row, &n), 0);
  cr_assert_eq(n, 3000, "%d rows after the clear, want 3000", n);
  for (int i = 0; i < 3000; i++) {
    cr_assert_eq(tfx_rowtable_find(t, i * 7)[0], (float)i, "row %d", i);
  }
  tfx_rowtable_destroy(t);
}

/* A sync step's sums (ps/lazy.c): tfx_rowtable_add gives the bits that touching a zeros table and adding gave,
 * -0.0 included (0 + -0 is +0), across growth of the map and a clear. */
Test(rowtable, add_sums_as_zeros_plus_each_gradient_bit_for_bit) {
  tfx_rowtable_spec spec = {"emb/sum", (int64_t)1 << 30, 3, 0, "zeros", 0, 1, 1, 0.0f};
  tfx_rowtable *a = NULL, *b = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_rowtable_create(&spec, &a, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_rowtable_create(&spec, &b, &err), TFX_OK, "%s", err.msg);
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 5000; i++) {
      int64_t id = (int64_t)(i % 3000) * 7919;
      float g[3] = {-0.0f, 0.1f * (float)(i % 13) - 0.6f, 1e-30f * (float)i};
      cr_assert_eq(tfx_rowtable_add(a, id, g), 0);
      float *sum = tfx_rowtable_touch(b, id, 0);
      for (int k = 0; k < 3; k++) {
        sum[k] += g[k];
      }
    }
    cr_assert_eq(tfx_rowtable_rows(a), 3000);
    for (int i = 0; i < 3000; i++) {
      const float *x = tfx_rowtable_find(a, (int64_t)i * 7919), *y = tfx_rowtable_find(b, (int64_t)i * 7919);
      cr_assert(x && y && !memcmp(x, y, 3 * sizeof(float)), "row %d differs", i);
    }
    cr_assert(!signbit(tfx_rowtable_find(a, 0)[0]), "-0.0 summed as 0 + -0 is +0");
    tfx_rowtable_clear(a);
    tfx_rowtable_clear(b);
  }
  tfx_rowtable_destroy(a);
  tfx_rowtable_destroy(b);
}

static int copy_row(int64_t id, const float *row, void *ctx) {
  tfx_err err = {0};
  return tfx_rowtable_put(ctx, id, row, &err);
}

Test(rowtable, streams_out_and_back_bit_for_bit) {
  tfx_rowtable *a = make(1 << 20, 8, 2), *b = make(1 << 20, 8, 2);
  for (int64_t id = 5; id < 1 << 20; id += 977) {
    float *row = tfx_rowtable_touch(a, id, 1);
    for (int k = 0; k < 24; k++) {
      row[k] += (float)(id % 13) * 0.25f + (float)k;
    }
  }
  cr_assert_eq(tfx_rowtable_each(a, copy_row, b), 0);
  cr_assert_eq(tfx_rowtable_rows(b), tfx_rowtable_rows(a));
  for (int64_t id = 5; id < 1 << 20; id += 977) {
    cr_assert_arr_eq(tfx_rowtable_find(a, id), tfx_rowtable_find(b, id), sizeof(float) * 24, "row %lld", (long long)id);
  }
  tfx_rowtable_destroy(a);
  tfx_rowtable_destroy(b);
}

/* A table of `vocab` ids of 4 floats, no slots, with the endless keys of a layer. */
static tfx_rowtable *make_bounded(int64_t max_rows, int64_t ttl, int admit_min, double admit_p, int track) {
  tfx_rowtable_spec spec = {.name = "emb/table", .vocab = 1 << 20, .dim = 4, .init = "normal:0.05", .seed = 7,
                            .fan_in = 1 << 20, .fan_out = 4, .max_rows = max_rows, .ttl_steps = ttl,
                            .admit_min_count = admit_min, .admit_probability = admit_p, .track_gone = track};
  tfx_rowtable *t = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_rowtable_create(&spec, &t, &err), TFX_OK, "%s", err.msg);
  return t;
}

Test(rowtable, max_rows_is_a_hard_cap_that_evicts_the_least_recently_touched) {
  tfx_rowtable *t = make_bounded(1000, 0, 0, 1, 1);
  size_t bytes_at_cap = 0;
  uint64_t evicted_at_mark = 0;
  const int64_t *gone;
  size_t n_gone = 0;
  for (int64_t step = 0; step < 20000; step++) {
    cr_assert_not_null(tfx_rowtable_touch(t, step * 7, step));
    cr_assert_leq(tfx_rowtable_rows(t), 1000, "step %lld: %zu rows", (long long)step, tfx_rowtable_rows(t));
    if (step % 50 == 0) {
      cr_assert_not_null(tfx_rowtable_touch(t, 3, step), "a hot id is touched every 50 steps");
    }
    if (step % 400 == 399 && step < 10000) { /* a delta every 400 steps: each eviction is remembered */
      uint64_t evicted = tfx_rowtable_get_counts(t).evicted;
      cr_assert_eq(tfx_rowtable_gone(t, &gone, &n_gone), 0);
      cr_assert_eq(n_gone, evicted - evicted_at_mark, "every eviction is remembered for the next delta");
      tfx_rowtable_mark(t, step, 0);
      evicted_at_mark = evicted;
    }
    bytes_at_cap = step == 12000 ? tfx_rowtable_bytes(t) : bytes_at_cap;
  }
  cr_assert_eq(tfx_rowtable_bytes(t), bytes_at_cap, "memory stops growing at the cap");
  tfx_table_bound b;
  tfx_table_cap_bound(1000, 4, 0, 0, 1, 0, &b);
  cr_assert_leq(tfx_rowtable_bytes(t), b.total + 4096, "held %zu bytes, plan states %zu", tfx_rowtable_bytes(t),
                b.total);
  cr_assert_not_null(tfx_rowtable_find(t, 3), "the hot id is never the least recently touched");
  cr_assert_not_null(tfx_rowtable_find(t, 19999 * 7), "the newest row is kept");
  cr_assert_null(tfx_rowtable_find(t, 7), "an old cold row is gone");
  tfx_rowtable_counts c = tfx_rowtable_get_counts(t);
  cr_assert_eq(c.made - c.evicted, tfx_rowtable_rows(t));
  cr_assert_eq(tfx_rowtable_gone(t, &gone, &n_gone), -1,
               "10 000 evictions since the last delta are more than max_rows / 2 remembered: the next is full");
  tfx_rowtable_mark(t, 20000, 1);
  cr_assert_eq(tfx_rowtable_gone(t, &gone, &n_gone), 0);
  cr_assert_eq(n_gone, 0, "a checkpoint forgets them");
  float out[4], init[4];
  tfx_init_fill("normal:0.05", "emb/table", 7, 1 << 20, 4, 7 * 4, 4, init);
  tfx_rowtable_read(t, 7, out);
  cr_assert_arr_eq(out, init, sizeof out, "an evicted id comes back as a new row");
  tfx_rowtable_destroy(t);
}

Test(rowtable, ttl_steps_drops_rows_untouched_that_long) {
  tfx_rowtable *t = make_bounded(0, 100, 0, 1, 0);
  for (int64_t id = 0; id < 50; id++) {
    cr_assert_not_null(tfx_rowtable_touch(t, id, id < 25 ? 0 : 90));
  }
  cr_assert_eq(tfx_rowtable_expire(t, 99), 0, "nothing is 100 steps old at step 99");
  cr_assert_eq(tfx_rowtable_expire(t, 150), 25, "rows touched at step 0 expire at step 150");
  cr_assert_eq(tfx_rowtable_expire(t, 160), 0, "the next scan waits a quarter of ttl_steps");
  cr_assert_eq(tfx_rowtable_expire(t, 191), 25, "rows touched at step 90 expire at step 191");
  cr_assert_eq(tfx_rowtable_rows(t), 0);
  tfx_rowtable_destroy(t);
}

Test(rowtable, admission_makes_a_row_on_the_min_counth_coming_and_reads_zeros_until_then) {
  tfx_rowtable *t = make_bounded(0, 0, 3, 1, 0);
  float out[4] = {1, 1, 1, 1}, zeros[4] = {0};
  int refused = 0;
  for (int k = 0; k < 2; k++) {
    cr_assert_null(tfx_rowtable_update(t, 42, k, &refused));
    cr_assert_eq(refused, 1, "coming %d of 3 is refused", k + 1);
    tfx_rowtable_read(t, 42, out);
    cr_assert_arr_eq(out, zeros, sizeof out, "an id not admitted reads as the empty bag");
  }
  cr_assert_not_null(tfx_rowtable_update(t, 42, 2, &refused));
  cr_assert_eq(refused, 0);
  cr_assert_not_null(tfx_rowtable_update(t, 42, 3, &refused), "an admitted id stays admitted");
  tfx_rowtable_counts c = tfx_rowtable_get_counts(t);
  cr_assert_eq(c.made, 1);
  cr_assert_eq(c.refused, 2);
  tfx_rowtable_destroy(t);
}

Test(rowtable, admission_sketch_memory_is_fixed_and_a_long_tail_of_one_offs_makes_no_row) {
  tfx_rowtable *t = make_bounded(0, 0, 2, 1, 0);
  int refused = 0;
  for (int64_t id = 0; id < 200000; id++) {
    tfx_rowtable_update(t, id * 5, 0, &refused);
  }
  cr_assert_lt(tfx_rowtable_rows(t), 2000, "%zu of 200000 one-off ids got a row (the sketch's false positives)",
               tfx_rowtable_rows(t));
  tfx_rowtable_destroy(t);
}

Test(rowtable, admit_probability_is_a_deterministic_coin) {
  tfx_rowtable *a = make_bounded(0, 0, 0, 0.25, 0), *b = make_bounded(0, 0, 0, 0.25, 0);
  int refused = 0;
  for (int64_t id = 0; id < 4000; id++) {
    int got_a = tfx_rowtable_update(a, id, 0, &refused) != NULL;
    int got_b = tfx_rowtable_update(b, id, 0, &refused) != NULL;
    cr_assert_eq(got_a, got_b, "id %lld: the same coin run after run", (long long)id);
  }
  size_t rows = tfx_rowtable_rows(a);
  cr_assert(rows > 800 && rows < 1200, "%zu of 4000 ids admitted at p = 0.25", rows);
  tfx_rowtable_destroy(a);
  tfx_rowtable_destroy(b);
}

static int count_any(int64_t id, const float *row, void *ctx) {
  (void)id, (void)row;
  ++*(size_t *)ctx;
  return 0;
}

Test(rowtable, rows_since_a_step_are_the_rows_a_delta_holds) {
  tfx_rowtable *t = make_bounded(0, 0, 0, 1, 1);
  for (int64_t id = 0; id < 100; id++) {
    cr_assert_not_null(tfx_rowtable_touch(t, id, id));
  }
  size_t n = 0;
  cr_assert_eq(tfx_rowtable_each_since(t, 60, count_any, &n), 0);
  cr_assert_eq(n, 40);
  cr_assert_eq(tfx_rowtable_rows_since(t, 60), 40);
  tfx_rowtable_drop(t, 99);
  tfx_rowtable_drop(t, 12345); /* not stored: nothing */
  cr_assert_eq(tfx_rowtable_rows_since(t, 60), 39);
  const int64_t *gone;
  size_t n_gone;
  tfx_rowtable_gone(t, &gone, &n_gone);
  cr_assert_eq(n_gone, 1);
  cr_assert_eq(gone[0], 99);
  int deltas = -1;
  cr_assert_eq(tfx_rowtable_marked(t, &deltas), -1, "no checkpoint yet");
  tfx_rowtable_mark(t, 100, 1);
  tfx_rowtable_mark(t, 120, 0);
  cr_assert_eq(tfx_rowtable_marked(t, &deltas), 120);
  cr_assert_eq(deltas, 1);
  tfx_rowtable_destroy(t);
}

/* Past 2 MiB of slabs a table's slabs go onto huge pages (advised, collapsed, written in at once) and past 128 slabs
 * a second group is mapped: rows keep their values across both, and eviction reuses rows of either. */
Test(rowtable, rows_keep_their_values_across_huge_page_slabs_and_slab_groups) {
  tfx_rowtable *t = make(1 << 22, 1, 0); /* 4-byte rows: 16 KiB a slab, 2 MiB a group of 128 */
  const int64_t n = 600000;              /* 147 slabs: two groups, the 2 MiB mark crossed in the first */
  for (int64_t id = 0; id < n; id++) {
    float *row = tfx_rowtable_touch(t, id * 3, 1);
    cr_assert_not_null(row);
    row[0] = (float)id;
  }
  cr_assert_eq(tfx_rowtable_rows(t), (size_t)n);
  for (int64_t id = 0; id < n; id += 997) {
    const float *row = tfx_rowtable_find(t, id * 3);
    cr_assert(row && row[0] == (float)id, "row of id %lld", (long long)(id * 3));
  }
  cr_assert_eq(tfx_rowtable_evict(t, 2), (size_t)n, "every row was last touched at step 1");
  cr_assert_not_null(tfx_rowtable_touch(t, 5, 3), "a freed row is taken again");
  cr_assert_eq(tfx_rowtable_rows(t), 1);
  tfx_rowtable_destroy(t);
}

/* This process's resident bytes (/proc/self/statm). */
static size_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  cr_assert_not_null(f);
  cr_assert_eq(fscanf(f, "%ld %ld", &pages, &resident), 2);
  fclose(f);
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* What plan and PS-TABLE-CAP state for a capped table is what it holds at most (tfx_rowtable_bytes, and the
 * process's RSS where no sanitizer's shadow memory inflates it) and no more than a tenth over what a table churned
 * at its cap holds: 150 000 rows of 8 floats and an Adagrad slot with deltas, 3 million comings of a stream of a
 * hot set twice the cap and a third one-off ids (admission's sketch: a fixed 512 KiB, the test above). */
Test(rowtable, a_capped_table_holds_what_its_cap_states_and_no_more) {
  const int64_t cap = 150000;
  size_t before = rss_bytes();
  tfx_rowtable_spec spec = {.name = "emb/t", .vocab = (int64_t)1 << 32, .dim = 8, .n_slots = 1, .init = "zeros",
                            .seed = 7, .fan_in = 1, .fan_out = 8, .max_rows = cap, .admit_min_count = 0,
                            .admit_probability = 1, .track_gone = 1};
  tfx_rowtable *t = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_rowtable_create(&spec, &t, &err), TFX_OK, "%s", err.msg);
  uint64_t x = 1;
  for (int64_t i = 0; i < 3000000; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    int64_t id = i % 3 ? (int64_t)((x >> 33) % 300000) : 1000000 + i; /* a hot set twice the cap; one-offs */
    int refused;
    float *row = tfx_rowtable_update(t, id, i / 1000, &refused);
    cr_assert(row || refused, "out of memory at coming %lld", (long long)i);
    if (i % 500000 == 499999) {
      tfx_rowtable_mark(t, i / 1000, 0);
    }
  }
  tfx_table_bound b;
  tfx_table_cap_bound(cap, 8, 1, 0, 1, 0, &b);
  size_t held = tfx_rowtable_bytes(t), grew = rss_bytes() - before;
  cr_assert_geq(tfx_rowtable_rows(t), (size_t)(cap - cap / 16), "the table is full: %zu rows", tfx_rowtable_rows(t));
  cr_log_info("held %zu bytes, the RSS grew by %zu, stated %zu", held, grew, b.total);
  cr_assert_leq(held, b.total + 4096, "held %zu bytes, stated %zu", held, b.total);
  cr_assert_geq(held, b.total - b.total / 10, "held %zu bytes, stated %zu: the statement is loose", held, b.total);
#if !defined(__SANITIZE_ADDRESS__)
  cr_assert_leq(grew, b.total + b.total / 100, "the RSS grew by %zu bytes, stated %zu", grew, b.total);
#endif
  (void)grew;
  tfx_rowtable_destroy(t);
}

/* A cap above the table's ids can never bind, so it reserves no more than a cap of every id: max_rows 10^15 on a
 * 2^20-id table makes rows (its books are not mapped for 10^15 rows) and holds what a cap of 2^20 states. */
Test(rowtable, a_cap_above_the_ids_reserves_only_the_ids) {
  tfx_rowtable *t = make_bounded(1000000000000000LL, 0, 0, 1, 1);
  for (int64_t i = 0; i < 5000; i++) {
    cr_assert_not_null(tfx_rowtable_touch(t, (i * 7919) % (1 << 20), 1), "row %lld: out of memory", (long long)i);
  }
  tfx_table_bound b;
  tfx_table_cap_bound(1 << 20, 4, 0, 0, 1, 0, &b);
  cr_assert_leq(tfx_rowtable_bytes(t), b.total + 4096, "held %zu bytes, a cap of every id states %zu",
                tfx_rowtable_bytes(t), b.total);
  tfx_rowtable_destroy(t);
}
