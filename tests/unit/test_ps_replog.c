/* Unit tests of src/ps/replog.c (cluster.replicas 1, #27), the backup's side of a lazy table: a batch of forwarded
 * sync steps is held whole in the log (its steps counted, so the backup's step is the primary's), and the
 * primary's snapshot of the rows touched since the last one (values and Adagrad slots, by id) is stored into the
 * backup's table and replaces the log; a snapshot of another step, or rows that do not fit the table, change
 * nothing and are refused (TFX_ESTATE, naming why). A plain table's log is kept until the primary's checkpoint
 * holds it: the notice of a complete checkpoint drops the batches below its step (only at a batch's end, and only
 * when the shard file is in the run directory); a checkpoint that cannot be loaded makes the copy unpromotable.
 * Messages go over an inproc PAIR, as the ps receives them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "config/node.h"
#include "ps/ps_impl.h"
#include "ps/rowtable.h"
#include "store/ckpt.h"

static void *ctx, *tx, *rx;
static ps_state *p;
static tfx_node node;

/* A backup state of one lazy table "emb/part_0" (ids < 1000, 2 floats a row, 1 slot: 4 floats stored a row). */
static void setup(void) {
  ctx = zmq_ctx_new();
  tx = zmq_socket(ctx, ZMQ_PAIR);
  rx = zmq_socket(ctx, ZMQ_PAIR);
  cr_assert_eq(zmq_bind(rx, "inproc://replog"), 0);
  cr_assert_eq(zmq_connect(tx, "inproc://replog"), 0);
  p = calloc(1, sizeof *p);
  cr_assert_not_null(p);
  tfx_config_init(&p->cfg);
  snprintf(node.run_dir, sizeof node.run_dir, "/tmp/test_ps_replog.%d", (int)getpid());
  p->node = &node;
  p->backup_of = 1;
  p->state = PS_BACKUP;
  p->cfg.mode = TFX_MODE_SYNC;
  p->cfg.ps_replicas = 1;
  p->cfg.replica_batch_steps = 4;
  p->shards = calloc(1, sizeof *p->shards);
  p->n_shards = 1;
  shard *s = &p->shards[0];
  snprintf(s->key, sizeof s->key, "emb/part_0");
  snprintf(s->var, sizeof s->var, "emb");
  tfx_rowtable_spec spec = {.name = "emb", .vocab = 1000, .dim = 2, .n_slots = 1, .init = "zeros", .seed = 7};
  tfx_err err = {0};
  cr_assert_eq(tfx_rowtable_create(&spec, &s->table, &err), TFX_OK, "%s", err.msg);
}

static void teardown(void) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", node.run_dir);
  cr_assert_eq(system(cmd), 0);
  ps__log_free(p);
  tfx_rowtable_destroy(p->shards[0].table);
  free(p->shards);
  free(p);
  zmq_close(tx);
  zmq_close(rx);
  zmq_ctx_term(ctx);
}

TestSuite(ps_replog, .init = setup, .fini = teardown);

/* Sends a MSG_REPLICATE (of `kind`, step, n_stats steps) with one rows tensor of `n` ids and `floats` floats, and
 * receives it into *m as the ps would. */
static void message(tfx_inmsg *m, Tfx__ReplicateKind kind, int64_t step, int n_stats, const int64_t *ids, size_t n,
                    const float *data, size_t floats) {
  int64_t shape[2] = {1000, (int64_t)(floats / n)}; /* rows of floats / n floats each */
  Tfx__Tensor t = TFX__TENSOR__INIT, *tp = &t;
  t.name = "emb/part_0";
  t.shape = shape;
  t.n_shape = 2;
  t.rows = (int64_t *)ids;
  t.n_rows = n;
  t.nbytes = floats * sizeof(float);
  t.version = (uint64_t)step;
  Tfx__KeyValue kv[4], *kvp[4];
  for (int i = 0; i < n_stats; i++) {
    tfx__key_value__init(&kv[i]);
    kv[i].key = "n_grads";
    kv[i].value = 2;
    kvp[i] = &kv[i];
  }
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPLICATE);
  Tfx__Replicate how = TFX__REPLICATE__INIT;
  how.kind = kind;
  env.replicate = &how;
  env.step = step;
  env.target = 1;
  env.tensors = &tp;
  env.n_tensors = 1;
  env.stats = kvp;
  env.n_stats = (size_t)n_stats;
  tfx_payload pl = {data, t.nbytes, 1, NULL, NULL};
  tfx_err err = {0};
  cr_assert_eq(tfx_wire_send(tx, NULL, &env, &pl, 1, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_wire_recv(rx, 0, m, &err), TFX_OK, "%s", err.msg);
}

Test(ps_replog, a_batch_is_held_whole_and_a_snapshot_of_rows_replaces_it) {
  const int64_t ids[2] = {3, 8};
  const float sums[4] = {0.5f, -0.5f, 1.0f, 2.0f};
  tfx_inmsg m;
  message(&m, TFX__REPLICATE_KIND__REPLICATE_STEPS, 0, 3, ids, 2, sums, 4); /* steps 0, 1, 2: the summed rows (2 floats each) */
  ps__log_hold(p, &m);
  tfx_inmsg_fini(&m);
  cr_assert_eq(ps__log_pending(p), 3, "a batch of 3 steps: the backup is at step 3");
  cr_assert_eq(p->version, 0, "held, not applied");
  const int64_t touched[2] = {3, 999};
  const float rows[8] = {1, 2, 3, 4, 5, 6, 7, 8}; /* values then the Adagrad slot, per row */
  tfx_err err = {0};
  message(&m, TFX__REPLICATE_KIND__REPLICATE_SNAPSHOT, 2, 0, touched, 2, rows, 8);
  cr_assert_eq(ps__log_snapshot(p, &m, &err), TFX_ESTATE, "a snapshot at step 2, the backup at 3");
  cr_assert(strstr(err.msg, "at step 2: the backup is at step 3"), "%s", err.msg);
  tfx_inmsg_fini(&m);
  cr_assert_eq(ps__log_pending(p), 3);
  cr_assert_null(tfx_rowtable_find(p->shards[0].table, 3), "nothing stored");
  message(&m, TFX__REPLICATE_KIND__REPLICATE_SNAPSHOT, 3, 0, touched, 2, rows, 8);
  cr_assert_eq(ps__log_snapshot(p, &m, &err), TFX_OK, "%s", err.msg);
  tfx_inmsg_fini(&m);
  cr_assert_eq(ps__log_pending(p), 0, "the snapshot holds every step of the log");
  cr_assert_eq(p->version, 3);
  const float *r = tfx_rowtable_find(p->shards[0].table, 999); /* the values, then the slot */
  cr_assert_not_null(r);
  cr_assert(r[0] == 5 && r[1] == 6 && r[2] == 7 && r[3] == 8, "row 999: %g %g %g %g", r[0], r[1], r[2], r[3]);
  r = tfx_rowtable_find(p->shards[0].table, 3);
  cr_assert(r && r[0] == 1 && r[3] == 4);
}

Test(ps_replog, snapshot_rows_that_do_not_fit_the_table_change_nothing) {
  const int64_t ids[2] = {3, 8};
  const float rows[6] = {1, 2, 3, 4, 5, 6}; /* 3 floats a row: the table stores 4 */
  tfx_inmsg m;
  tfx_err err = {0};
  message(&m, TFX__REPLICATE_KIND__REPLICATE_SNAPSHOT, 0, 0, ids, 2, rows, 6);
  cr_assert_eq(ps__log_snapshot(p, &m, &err), TFX_ESTATE);
  cr_assert(strstr(err.msg, "'emb/part_0' does not fit this backup"), "%s", err.msg);
  tfx_inmsg_fini(&m);
  cr_assert_null(tfx_rowtable_find(p->shards[0].table, 3));
  cr_assert_eq(tfx_rowtable_rows(p->shards[0].table), 0);
}

/* Writes an empty file where instance 0's shard of the checkpoint of step goes (the drop only checks it is there). */
static void shard_file(int64_t step) {
  char dir[1100], path[1200], cmd[1300];
  tfx_ckpt_dir(node.run_dir, step, dir, sizeof dir);
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
  cr_assert_eq(system(cmd), 0);
  tfx_ckpt_part_path(path, sizeof path, dir, 0, TFX_CKPT_SHARD);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s", path);
  fclose(f);
}

Test(ps_replog, a_checkpoint_drops_the_batches_below_it_and_a_lost_one_bars_promotion) {
  const int64_t ids[2] = {3, 8};
  const float sums[4] = {0.5f, -0.5f, 1.0f, 2.0f};
  cr_assert(ps__log_until_ckpt(p), "a plain lazy table, sync, checkpoint.fp16 off: kept until a checkpoint");
  for (int b = 0; b < 3; b++) { /* steps 0..2, 3..5, 6..8 */
    tfx_inmsg m;
    message(&m, TFX__REPLICATE_KIND__REPLICATE_STEPS, 3 * b, 3, ids, 2, sums, 4);
    ps__log_hold(p, &m);
    tfx_inmsg_fini(&m);
  }
  size_t bytes = p->log_bytes;
  cr_assert_eq(ps__log_pending(p), 9);
  cr_assert_eq(p->n_log, 3, "batches held, none applied (a lazy table's log is bounded by bytes, not messages)");
  cr_assert_eq(ps__log_checkpoint(p, 3, 0), 0, "no shard file of step 3 in the run directory: the log is kept");
  shard_file(3);
  shard_file(4);
  cr_assert_eq(ps__log_checkpoint(p, 4, 0), 0, "step 4 is inside a batch (replayed whole): nothing dropped");
  cr_assert_eq(ps__log_checkpoint(p, 3, 0), 1, "the first batch (steps 0..2) dropped");
  cr_assert_eq(p->version, 3, "the state is the checkpoint of step 3 ...");
  cr_assert_eq(ps__log_pending(p), 6, "... and the 6 steps logged after it");
  cr_assert(p->log_stale);
  cr_assert(p->log_bytes < bytes && p->log_bytes > 0);
  cr_assert_eq(ps__log_checkpoint(p, 3, 0), 0, "the same notice again: nothing more");
  cr_assert_eq(tfx_rowtable_rows(p->shards[0].table), 0, "nothing applied");
  ps__log_apply(p, 0); /* a promotion: the checkpoint of step 3 holds no shard (an empty file): not loaded */
  cr_assert_eq(p->state, PS_BEHIND, "a checkpoint that cannot be loaded: the copy may not be promoted");
  cr_assert_eq(p->n_log, 0);
  cr_assert_eq(p->version, 9, "its step still counts every step acknowledged");
}

Test(ps_replog, a_checkpoint_that_holds_the_whole_log_is_loaded_on_promotion) {
  const int64_t ids[2] = {3, 8};
  const float sums[4] = {0.5f, -0.5f, 1.0f, 2.0f};
  tfx_inmsg m;
  message(&m, TFX__REPLICATE_KIND__REPLICATE_STEPS, 0, 3, ids, 2, sums, 4);
  ps__log_hold(p, &m);
  tfx_inmsg_fini(&m);
  shard_file(3);
  cr_assert_eq(ps__log_checkpoint(p, 3, 0), 1, "the only batch dropped: the state is the checkpoint alone");
  cr_assert_eq(p->n_log, 0);
  cr_assert(p->log_stale);
  ps__log_apply(p, 0); /* a promotion with an empty log still loads the checkpoint (here an empty file: fails) */
  cr_assert_eq(p->state, PS_BEHIND, "the checkpoint of step 3 was not loaded: the copy may not be promoted");
  cr_assert_not(p->log_stale);
  cr_assert_eq(p->version, 3);
}

Test(ps_replog, an_acknowledged_checkpoint_is_the_state_of_a_backup_sent_no_step) {
  cr_assert_eq(ps__log_checkpoint(p, 100, 1), 0, "no shard file of step 100: the backup stays where it is");
  cr_assert_eq(p->version, 0);
  cr_assert_not(p->log_stale);
  shard_file(100);
  cr_assert_eq(ps__log_checkpoint(p, 100, 0), 0, "not acknowledged (the primary forwards steps): not taken");
  cr_assert_eq(p->version, 0);
  cr_assert_eq(ps__log_checkpoint(p, 100, 1), 0, "acknowledged: nothing to drop ...");
  cr_assert_eq(p->version, 100, "... the state is the checkpoint of step 100 (what the backup answers)");
  cr_assert(p->log_stale, "loaded only to serve");
  cr_assert_eq(tfx_rowtable_rows(p->shards[0].table), 0, "nothing applied or loaded yet");
  ps__log_checkpoint(p, 50, 1);
  cr_assert_eq(p->version, 100, "an older checkpoint never takes the backup back");
  ps__log_apply(p, 0); /* a promotion: the shard file is empty here, so the load fails */
  cr_assert_eq(p->state, PS_BEHIND, "a checkpoint that cannot be loaded: the copy may not be promoted");
  cr_assert_eq(p->version, 100);
}

Test(ps_replog, fp16_checkpoints_keep_the_old_log) {
  p->cfg.ckpt_fp16 = 1;
  cr_assert_not(ps__log_until_ckpt(p), "fp16 checkpoints do not restore the values bit for bit");
}
