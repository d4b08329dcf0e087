/* Unit tests of src/store/rowfile.c and ckptchain.c: a full row file and deltas on it (rows changed, ids
 * deleted) replay base first into exactly the rows of the last step; a missing link and a corrupt delta are named;
 * pruning keeps every link a kept checkpoint needs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "store/ckpt.h"
#include "store/rowfile.h"
#include "store/rowindex.h"
#include "tmpdir.h"

static void setup(void) {
  tmpdir_create("rowfile");
}

TestSuite(rowfile, .init = setup, .fini = tmpdir_remove);

#define IDS 64
#define RF 3

/* What replaying a chain leaves: each id's row, or absent. */
typedef struct state {
  float rows[IDS][RF];
  int have[IDS];
} state;

static int apply(const char *table, int64_t ids, int row_floats, int64_t id, const float *row, void *ctx) {
  state *s = ctx;
  cr_assert_str_eq(table, "emb/embeddings");
  cr_assert_eq(ids, IDS);
  cr_assert_eq(row_floats, RF);
  s->have[id] = row != NULL;
  if (row) {
    memcpy(s->rows[id], row, sizeof s->rows[id]);
  }
  return 0;
}

/* Writes RUN/checkpoints/ckpt-STEP/ps-0.rows: a delta of parent (or full, parent < 0) holding `rows` (ids whose
 * row is id + step / 1000) and deleting `gone`. */
static void write_link(int64_t step, int64_t parent, const int64_t *rows, int n_rows, const int64_t *gone,
                       int n_gone) {
  char run[128], dir[1100], path[1200];
  snprintf(run, sizeof run, "%s/run", tmp);
  tfx_ckpt_dir(run, step, dir, sizeof dir);
  cr_assert_eq(tfx_mkdirs(dir, NULL), TFX_OK);
  tfx_ckpt_part_path(path, sizeof path, dir, 0, TFX_CKPT_ROWS);
  tfx_rowfile *w = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_rowfile_create_delta(path, step, parent, 1, &w, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_rowfile_table_delta(w, "emb/embeddings", IDS, RF, gone, (uint64_t)n_gone, (uint64_t)n_rows, &err),
               TFX_OK, "%s", err.msg);
  for (int i = 0; i < n_rows; i++) {
    float row[RF] = {(float)rows[i], (float)step / 1000.0f, 1};
    cr_assert_eq(tfx_rowfile_row(w, rows[i], row, &err), TFX_OK, "%s", err.msg);
  }
  uint32_t crc;
  uint64_t bytes;
  cr_assert_eq(tfx_rowfile_finish(w, &crc, &bytes, &err), TFX_OK, "%s", err.msg);
}

static void link_dir(int64_t step, char *dir, size_t n) {
  char run[128];
  snprintf(run, sizeof run, "%s/run", tmp);
  tfx_ckpt_dir(run, step, dir, n);
}

/* The chain both tests read: a base at 100 and deltas at 200 and 300 (rows changed, ids deleted, one deleted and
 * made again); its directory at 300 into dir and what replaying it leaves into *s. */
static void write_chain(char *dir, size_t n, state *s) {
  int64_t base[] = {1, 2, 3, 4, 5}, d1[] = {2, 9}, gone1[] = {4, 5}, d2[] = {5, 10}, gone2[] = {9, 1};
  write_link(100, -1, base, 5, NULL, 0);
  write_link(200, 100, d1, 2, gone1, 2);
  write_link(300, 200, d2, 2, gone2, 2);
  link_dir(300, dir, n);
  tfx_err err = {0};
  cr_assert_eq(tfx_rowfile_read_chain(dir, 0, apply, s, &err), TFX_OK, "%s", err.msg);
}

Test(rowfile, base_and_deltas_replay_into_the_rows_of_the_last_step) {
  char dir[1100];
  state s = {0};
  tfx_err err = {0};
  write_chain(dir, sizeof dir, &s);
  int want[IDS] = {0};
  want[2] = want[3] = want[5] = want[10] = 1; /* 1 and 9 deleted at 300, 4 at 200; 5 deleted, then made again */
  for (int id = 0; id < IDS; id++) {
    cr_assert_eq(s.have[id], want[id], "id %d", id);
  }
  cr_assert_float_eq(s.rows[2][1], 0.2f, 1e-6, "id 2 as changed at step 200");
  cr_assert_float_eq(s.rows[3][1], 0.1f, 1e-6, "id 3 as the base holds it");
  cr_assert_float_eq(s.rows[5][1], 0.3f, 1e-6, "id 5 made again at step 300");
  int64_t step, parent;
  char path[1200];
  tfx_ckpt_part_path(path, sizeof path, dir, 0, TFX_CKPT_ROWS);
  cr_assert_eq(tfx_rowfile_parent(path, &step, &parent, &err), TFX_OK);
  cr_assert_eq(step, 300);
  cr_assert_eq(parent, 200);
  cr_assert_eq(tfx_ckpt_chain_floor(dir, INT64_MAX), 100, "step 300 needs 200 and 100");
}

/* The index predict and serve read rows through holds exactly what replaying the chain leaves. */
Test(rowfile, the_row_index_of_a_delta_reads_its_chain) {
  char dir[1100];
  state s = {0};
  tfx_err err = {0};
  write_chain(dir, sizeof dir, &s);
  tfx_rowindex *x = NULL;
  cr_assert_eq(tfx_rowindex_open(dir, 1, &x, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_rowindex_rows(x), 4, "ids 2, 3, 5 and 10");
  for (int id = 0; id < IDS; id++) {
    float row[RF] = {-1, -1, -1};
    cr_assert_eq(tfx_rowindex_get(x, "emb/embeddings", id, RF, row), s.have[id], "id %d", id);
    cr_assert(!s.have[id] || !memcmp(row, s.rows[id], sizeof row), "id %d: the row of the chain's last step", id);
  }
  tfx_rowindex_close(x);
  char gone[1100];
  link_dir(200, gone, sizeof gone);
  char path[1200];
  tfx_ckpt_part_path(path, sizeof path, gone, 0, TFX_CKPT_ROWS);
  cr_assert_eq(unlink(path), 0);
  cr_assert_eq(tfx_rowindex_open(dir, 1, &x, &err), TFX_ECORRUPT, "a missing link is named");
  cr_assert(strstr(err.msg, "ckpt-000000000200"), "%s", err.msg);
}

Test(rowfile, a_missing_link_or_a_corrupt_delta_is_named) {
  int64_t rows[] = {1}, gone[] = {2};
  write_link(200, 100, rows, 1, gone, 1);
  char dir[1100], path[1200];
  link_dir(200, dir, sizeof dir);
  state s = {0};
  tfx_err err = {0};
  cr_assert_eq(tfx_rowfile_read_chain(dir, 0, apply, &s, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "delta of step 100") && strstr(err.msg, "gone"), "%s", err.msg);
  write_link(100, -1, rows, 1, NULL, 0);
  tfx_ckpt_part_path(path, sizeof path, dir, 0, TFX_CKPT_ROWS);
  FILE *f = fopen(path, "r+b");
  cr_assert_not_null(f);
  fseek(f, 70, SEEK_SET); /* inside the deleted id */
  fputc(0x55, f);
  fclose(f);
  cr_assert_eq(tfx_rowfile_read_chain(dir, 0, apply, &s, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "ps-0.rows"), "%s", err.msg);
  tfx_rowfile *w = NULL;
  cr_assert_eq(tfx_rowfile_create_delta(path, 100, 100, 1, &w, &err), TFX_EINVAL, "a delta follows an older step");
}

/* A link whose file claims another step than its directory's (ckpt-100 holding a file of step 300, a delta of 200)
 * would lead a chain at 200 back to itself: both readers refuse it, naming the link, instead of recursing until the
 * stack overflows (fuzz_rowchain found it). */
Test(rowfile, a_link_of_another_step_is_refused_not_followed_round) {
  int64_t rows[] = {1};
  write_link(200, 100, rows, 1, NULL, 0);
  write_link(300, 200, rows, 1, NULL, 0);
  char dir[1100], from[1200], to[1200], at100[1100];
  link_dir(300, dir, sizeof dir);
  tfx_ckpt_part_path(from, sizeof from, dir, 0, TFX_CKPT_ROWS);
  link_dir(100, at100, sizeof at100);
  cr_assert_eq(tfx_mkdirs(at100, NULL), TFX_OK);
  tfx_ckpt_part_path(to, sizeof to, at100, 0, TFX_CKPT_ROWS);
  cr_assert_eq(rename(from, to), 0);
  link_dir(200, dir, sizeof dir);
  state s = {0};
  tfx_err err = {0};
  cr_assert_eq(tfx_rowfile_read_chain(dir, 0, apply, &s, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "at step 300, where its child names step 100"), "%s", err.msg);
  tfx_rowindex *x = NULL;
  cr_assert_eq(tfx_rowindex_open(dir, 1, &x, &err), TFX_ECORRUPT);
  cr_assert(strstr(err.msg, "at step 300, where its child names step 100"), "%s", err.msg);
}

/* A table of no rows is indexed (no rows, and nothing sorted from a NULL array). */
Test(rowfile, a_table_of_no_rows_is_indexed) {
  write_link(100, -1, NULL, 0, NULL, 0);
  char dir[1100];
  link_dir(100, dir, sizeof dir);
  tfx_rowindex *x = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_rowindex_open(dir, 1, &x, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_rowindex_rows(x), 0);
  float row[RF];
  cr_assert_eq(tfx_rowindex_get(x, "emb/embeddings", 1, RF, row), 0);
  tfx_rowindex_close(x);
}

Test(rowfile, a_full_file_records_no_deletion) {
  char path[128];
  snprintf(path, sizeof path, "%s/full.rows", tmp);
  tfx_rowfile *w = NULL;
  tfx_err err = {0};
  int64_t gone[] = {3};
  cr_assert_eq(tfx_rowfile_create(path, 5, 1, &w, &err), TFX_OK);
  cr_assert_eq(tfx_rowfile_table_delta(w, "t", IDS, RF, gone, 1, 0, &err), TFX_EINVAL);
  tfx_rowfile_abort(w);
}

Test(rowfile, halves_round_to_nearest_even_and_saturate) {
  const float in[] = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 1e9f, -1e9f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                      5.9604645e-8f, 6.1035156e-5f};
  const float want[] = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65504.0f, -65504.0f, 1.0f, 1.0f + 4.0f / 2048,
                        5.9604645e-8f, 6.1035156e-5f};
  size_t n = sizeof in / sizeof *in;
  uint16_t h[16];
  float back[16];
  tfx_rowfile_to_half(in, h, n);
  tfx_rowfile_from_half(h, back, n);
  for (size_t i = 0; i < n; i++) {
    cr_assert(back[i] == want[i], "%zu: %g became %g, want %g", i, in[i], back[i], want[i]);
  }
  float nan = NAN;
  tfx_rowfile_to_half(&nan, h, 1);
  tfx_rowfile_from_half(h, back, 1);
  cr_assert(isnan(back[0]), "NaN stays NaN");
  for (int k = -2000; k <= 2000; k++) { /* within half precision (relative 2^-11) over several octaves */
    float x = (float)k * 0.01237f;
    tfx_rowfile_to_half(&x, h, 1);
    tfx_rowfile_from_half(h, back, 1);
    cr_assert(fabsf(back[0] - x) <= fabsf(x) / 2048 + 3e-8f, "%g became %g", x, back[0]);
  }
}

/* Writes a full row file of IDS rows (row id: id / 7, -id / 3, 1000 + id) with flags; returns its bytes. */
static uint64_t write_flagged(const char *path, unsigned flags) {
  tfx_rowfile *w = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_rowfile_create_as(path, 10, -1, 1, flags, &w, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_rowfile_table(w, "emb/embeddings", IDS, RF, IDS, &err), TFX_OK, "%s", err.msg);
  for (int i = 0; i < IDS; i++) {
    float row[RF] = {(float)i / 7, -(float)i / 3, 1000.0f + (float)i};
    cr_assert_eq(tfx_rowfile_row(w, i, row, &err), TFX_OK, "%s", err.msg);
  }
  uint32_t crc;
  uint64_t bytes;
  cr_assert_eq(tfx_rowfile_finish(w, &crc, &bytes, &err), TFX_OK, "%s", err.msg);
  return bytes;
}

Test(rowfile, fp16_rows_restore_within_half_precision_and_floats_stay_exact) {
  char full[256], half[256];
  snprintf(full, sizeof full, "%s/full.rows", tmp);
  snprintf(half, sizeof half, "%s/half.rows", tmp);
  uint64_t full_bytes = write_flagged(full, 0), half_bytes = write_flagged(half, TFX_ROWFILE_FP16);
  cr_assert_eq(full_bytes - half_bytes, (uint64_t)IDS * RF * 2, "%llu vs %llu bytes", (unsigned long long)full_bytes,
               (unsigned long long)half_bytes);
  cr_assert_eq(tfx_rowfile_is_fp16(full), 0);
  cr_assert_eq(tfx_rowfile_is_fp16(half), 1);
  static state a, b;
  int64_t step;
  tfx_err err = {0};
  cr_assert_eq(tfx_rowfile_read(full, apply, &a, &step, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_rowfile_read(half, apply, &b, &step, &err), TFX_OK, "%s", err.msg);
  for (int i = 0; i < IDS; i++) {
    float want[RF] = {(float)i / 7, -(float)i / 3, 1000.0f + (float)i};
    cr_assert(!memcmp(a.rows[i], want, sizeof want), "row %d: the default stores floats exactly", i);
    for (int k = 0; k < RF; k++) {
      cr_assert(b.have[i] && fabsf(b.rows[i][k] - want[k]) <= fabsf(want[k]) / 2048, "row %d[%d]: %g vs %g", i, k,
                b.rows[i][k], want[k]);
    }
  }
  cr_assert_neq(memcmp(a.rows, b.rows, sizeof a.rows), 0, "halves are not the floats");
}

/* Completes the checkpoint of link step: an empty dense shard and the manifest listing it and its row file. */
static void complete_link(int64_t step) {
  char dir[1100], shard[1200], rows[1200];
  link_dir(step, dir, sizeof dir);
  tfx_ckpt_part_path(shard, sizeof shard, dir, 0, TFX_CKPT_SHARD);
  tfx_ckpt_part_path(rows, sizeof rows, dir, 0, TFX_CKPT_ROWS);
  uint32_t crc, rows_crc;
  uint64_t bytes, rows_bytes;
  tfx_err err = {0};
  cr_assert_eq(tfx_ckpt_write(shard, step, NULL, 0, &crc, &bytes, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_file_crc32(rows, &rows_crc, &rows_bytes, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_ckpt_write_manifest_rows(dir, step, 1, &crc, &bytes, &rows_crc, &rows_bytes, &err), TFX_OK, "%s",
               err.msg);
}

/* A good full checkpoint at 50, then the chain 100 <- 200 <- 300, every link complete. */
static void complete_chain(void) {
  int64_t old[] = {7};
  char dir[1100];
  state s = {0};
  write_link(50, -1, old, 1, NULL, 0);
  complete_link(50);
  write_chain(dir, sizeof dir, &s);
  complete_link(100);
  complete_link(200);
  complete_link(300);
}

/* Flips one byte inside the values of a row of the base file at step 100 (its manifest still lists the old crc). */
static void corrupt_base(void) {
  char dir[1100], path[1200];
  link_dir(100, dir, sizeof dir);
  tfx_ckpt_part_path(path, sizeof path, dir, 0, TFX_CKPT_ROWS);
  struct stat st;
  cr_assert_eq(stat(path, &st), 0);
  FILE *f = fopen(path, "r+b");
  cr_assert_not_null(f);
  fseek(f, st.st_size - 12 - 5, SEEK_SET); /* the last row's last float, before the 12-byte trailer */
  int c = fgetc(f);
  fseek(f, st.st_size - 12 - 5, SEEK_SET);
  fputc(c ^ 0x10, f);
  fclose(f);
}

/* Every reader verifies every link of a chain of deltas: a checkpoint whose base is corrupt, or whose link is
 * gone, is not one; reading commands skip it with CKPT-SKIP and take the newest whole one. */
Test(rowfile, a_corrupt_or_missing_link_makes_every_checkpoint_on_it_unusable) {
  complete_chain();
  char run[128], dir[1100], found[1100];
  snprintf(run, sizeof run, "%s/run", tmp);
  link_dir(300, dir, sizeof dir);
  int64_t step = 0;
  int nps = 0;
  tfx_err err = {0};
  cr_assert_eq(tfx_ckpt_verify(dir, &step, &nps, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_ckpt_read_point(run, &step, found, sizeof found, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(step, 300);
  corrupt_base();
  cr_assert_eq(tfx_ckpt_verify(dir, &step, &nps, &err), TFX_ECORRUPT, "a corrupt base verifies");
  cr_assert(strstr(err.msg, "ckpt-000000000100") && strstr(err.msg, "checksum"), "%s", err.msg);
  cr_assert_eq(tfx_ckpt_read_point(run, &step, found, sizeof found, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(step, 50, "the newest whole checkpoint is 50, not %lld", (long long)step);
  char cmd[1300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s/run'", tmp);
  cr_assert_eq(system(cmd), 0);
  complete_chain();
  link_dir(200, dir, sizeof dir);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir); /* the middle link deleted */
  cr_assert_eq(system(cmd), 0);
  cr_assert_eq(tfx_ckpt_resume_point(run, &step, found, sizeof found, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(step, 100, "300 needs the deleted 200: resume from 100, not %lld", (long long)step);
  link_dir(300, dir, sizeof dir);
  cr_assert(access(dir, F_OK) != 0, "the unusable 300 is set aside");
}
