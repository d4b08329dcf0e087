/* Unit tests of src/ps/rowtable.c: lazy tables hold only touched rows, initial values equal the dense table's,
 * ids are checked, rows survive growth and eviction (backward-shift deletion), a clear empties the table at once
 * (a sync step's sums), and a table streams out and back bit for bit. */
#include <criterion/criterion.h>
#include <string.h>

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
