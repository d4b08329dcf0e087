/* Unit tests of src/ps/replica.c (cluster.replicas 1, #27): which state a request is for (the own instance, the
 * mirror of the previous ps's, or none), what a state refuses (a worker's request to a backup not promoted, a
 * forwarded push of an older plan epoch, counted), and the rule that makes a resent push count once (a sync push
 * is identified by worker and step: a second arrival of the step, or an older step, is stale). No sockets. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps/ps_impl.h"

static tfx_cluster *cluster;
static tfx_node node;

static void setup(void) {
  const char *tf = "{\"cluster\": {\"chief\": [\"127.0.0.1:1\"], \"ps\": [\"127.0.0.1:2\", \"127.0.0.1:3\", "
                   "\"127.0.0.1:4\"], \"worker\": [\"127.0.0.1:5\"]}, \"task\": {\"type\": \"ps\", \"index\": 1}}";
  tfx_err err = {0};
  cr_assert_eq(tfx_cluster_parse(tf, &cluster, &err), TFX_OK, "%s", err.msg);
  memset(&node, 0, sizeof node);
  node.cluster = cluster;
  node.index = 1;
}

static void teardown(void) {
  tfx_cluster_destroy(cluster);
}

TestSuite(ps_replica, .init = setup, .fini = teardown);

/* A state of instance `index` (a mirror when backup_of), initialized, in sync mode with 2 workers. */
static ps_state *make(int index, int backup_of, uint64_t epoch) {
  ps_state *p = calloc(1, sizeof *p);
  cr_assert_not_null(p);
  p->node = &node;
  p->index = index;
  p->backup_of = backup_of;
  p->epoch = epoch;
  p->state = backup_of ? PS_BACKUP : PS_SERVING;
  p->cfg.mode = TFX_MODE_SYNC;
  p->cfg.ps_replicas = 1;
  ps__sync_start(p, 2);
  return p;
}

static tfx_envelope request(Tfx__MsgType type, Tfx__Role role, int target, uint64_t epoch, int64_t flag) {
  tfx_envelope e = TFX__ENVELOPE__INIT;
  e.type = type;
  e.sender_role = role;
  e.target = target;
  e.epoch = epoch;
  e.flag = flag;
  return e;
}

Test(ps_replica, a_request_goes_to_the_own_instance_or_the_mirror_and_an_init_makes_the_mirror) {
  ps_state *own = make(1, 0, 1), *mirror = make(0, 1, 1), *out = NULL;
  tfx_err err = {0};
  tfx_envelope e = request(TFX__MSG_TYPE__MSG_PULL, TFX__ROLE__ROLE_WORKER, 0, 0, 0);
  cr_assert_eq(ps__route(own, &e, &out, &err), TFX_OK);
  cr_assert_eq(out, own, "no target: the receiver's own instance");
  e.target = 2;
  cr_assert_eq(ps__route(own, &e, &out, &err), TFX_OK);
  cr_assert_eq(out, own);
  e.target = 1;
  cr_assert_eq(ps__route(own, &e, &out, &err), TFX_ESTATE, "no mirror yet");
  cr_assert(strstr(err.msg, "ps 1 holds no copy of ps instance 0"), "%s", err.msg);
  e.type = TFX__MSG_TYPE__MSG_INIT;
  cr_assert_eq(ps__route(own, &e, &out, &err), TFX_OK);
  cr_assert_null(out, "an INIT of another instance: the caller makes the mirror");
  e.target = 9;
  cr_assert_eq(ps__route(own, &e, &out, &err), TFX_ESTATE, "no such instance in a cluster of 3 ps");
  own->mirror = mirror;
  e.type = TFX__MSG_TYPE__MSG_PUSH;
  e.target = 1;
  cr_assert_eq(ps__route(own, &e, &out, &err), TFX_OK);
  cr_assert_eq(out, mirror);
  free(mirror);
  free(own);
}

Test(ps_replica, a_backup_not_promoted_refuses_workers_and_takes_forwards_of_its_epoch) {
  ps_state *m = make(0, 1, 3);
  tfx_err err = {0};
  tfx_envelope pull = request(TFX__MSG_TYPE__MSG_PULL, TFX__ROLE__ROLE_WORKER, 1, 0, 0);
  cr_assert_eq(ps__gate(m, &pull, &err), TFX_ESTATE);
  cr_assert(strstr(err.msg, "holds ps instance 0 as its backup: not promoted"), "%s", err.msg);
  tfx_envelope push = request(TFX__MSG_TYPE__MSG_PUSH, TFX__ROLE__ROLE_WORKER, 1, 0, 1);
  cr_assert_eq(ps__gate(m, &push, &err), TFX_ESTATE, "a worker's own push-pull");
  tfx_envelope eval = request(TFX__MSG_TYPE__MSG_PULL, TFX__ROLE__ROLE_MASTER, 1, 3, 0);
  cr_assert_eq(ps__gate(m, &eval, &err), TFX_OK, "the master may ask");
  tfx_envelope fwd = request(TFX__MSG_TYPE__MSG_REPLICATE, TFX__ROLE__ROLE_PS, 1, 3, 0);
  cr_assert_eq(ps__gate(m, &fwd, &err), TFX_OK);
  fwd.epoch = 4;
  cr_assert_eq(ps__gate(m, &fwd, &err), TFX_OK, "a newer epoch is fine");
  cr_assert_eq(m->stats.stale_epoch, 0);
  fwd.epoch = 2;
  cr_assert_eq(ps__gate(m, &fwd, &err), TFX_ESTATE);
  cr_assert(strstr(err.msg, "replication of plan epoch 2 refused: ps instance 0 here is promoted at epoch 3") ||
                strstr(err.msg, "replication of plan epoch 2 refused"),
            "%s", err.msg);
  cr_assert_eq(m->stats.stale_epoch, 1, "counted");
  free(m);
}

Test(ps_replica, a_promoted_backup_serves_workers_and_refuses_the_old_primarys_forwards) {
  ps_state *m = make(0, 1, 1);
  m->state = PS_UNREPLICATED; /* promoted: a copy that serves, with no backup of its own yet */
  m->epoch = 2;
  tfx_err err = {0};
  tfx_envelope push = request(TFX__MSG_TYPE__MSG_PUSH, TFX__ROLE__ROLE_WORKER, 1, 0, 1);
  cr_assert_eq(ps__gate(m, &push, &err), TFX_OK);
  tfx_envelope fwd = request(TFX__MSG_TYPE__MSG_REPLICATE, TFX__ROLE__ROLE_PS, 1, 1, 0);
  cr_assert_eq(ps__gate(m, &fwd, &err), TFX_ESTATE);
  cr_assert(strstr(err.msg, "epoch 1 refused: ps instance 0 here is promoted at epoch 2"), "%s", err.msg);
  fwd.epoch = 2;
  cr_assert_eq(ps__gate(m, &fwd, &err), TFX_ESTATE, "a promoted backup takes no forwards at all");
  cr_assert_eq(m->stats.stale_epoch, 2);
  ps_state *own = make(1, 0, 1);
  cr_assert_eq(ps__gate(own, &fwd, &err), TFX_ESTATE, "a primary takes no forwards");
  cr_assert(strstr(err.msg, "a primary"), "%s", err.msg);
  free(own);
  free(m);
}

Test(ps_replica, a_push_resent_after_a_failover_counts_once) {
  ps_state *p = make(0, 1, 1);
  p->version = 5;
  /* The forward of worker 0's push for step 5 arrived before the primary died. */
  cr_assert_eq(ps__sync_verdict(p, 5, 0), PS_SYNC_VERDICT_FRESH);
  cr_assert_eq(ps__sync_arrive(p, 0), 0);
  /* Worker 0 resends it to the promoted backup: the same worker and step, a duplicate. */
  cr_assert_eq(ps__sync_verdict(p, 5, 0), PS_SYNC_VERDICT_STALE);
  cr_assert_eq(ps__sync_verdict(p, 5, 1), PS_SYNC_VERDICT_FRESH, "worker 1's push is still awaited");
  cr_assert_eq(ps__sync_arrive(p, 1), 1, "the step completes with one push per worker");
  ps__sync_end_step(p);
  cr_assert_eq(p->version, 6);
  /* A resend of a step already applied (both forwards arrived) is older than the version: stale too. */
  cr_assert_eq(ps__sync_verdict(p, 5, 1), PS_SYNC_VERDICT_STALE);
  cr_assert_eq(ps__sync_verdict(p, 6, 1), PS_SYNC_VERDICT_FRESH);
  free(p);
}

Test(ps_replica, an_async_push_resent_after_a_failover_is_applied_once) {
  ps_state *p = make(0, 1, 1);
  p->cfg.mode = TFX_MODE_ASYNC;
  ps__sync_start(p, 2);
  tfx_envelope e = request(TFX__MSG_TYPE__MSG_PUSH, TFX__ROLE__ROLE_WORKER, 1, 0, 1);
  e.sender_index = 1;
  e.step = 40;
  cr_assert_eq(ps__async_duplicate(p, &e), 0, "never seen");
  ps__async_applied(p, &e);
  cr_assert_eq(ps__async_duplicate(p, &e), 1, "the same worker and step again: a resend");
  e.step = 39;
  cr_assert_eq(ps__async_duplicate(p, &e), 1, "older: already past");
  e.step = 41;
  cr_assert_eq(ps__async_duplicate(p, &e), 0, "the worker's next push");
  e.sender_index = 0;
  e.step = 40;
  cr_assert_eq(ps__async_duplicate(p, &e), 0, "another worker's push of that step");
  p->cfg.ps_replicas = 0;
  e.sender_index = 1;
  cr_assert_eq(ps__async_duplicate(p, &e), 0, "without replicas nothing changes");
  free(p);
}

Test(ps_replica, a_sync_reply_tells_the_backups_step_and_waits_only_when_it_lags_two_batches) {
  ps_state *p = make(1, 0, 1);
  Tfx__Since buf;
  p->cfg.replica_batch_steps = 4;
  p->version = 20;
  p->acked = 12;
  Tfx__Since *a = ps__acked(p, 0, &buf);
  cr_assert_not_null(a);
  cr_assert_eq(a->version, 20, "no backup (lost, or never had one): the reply is the acknowledgement");
  cr_assert_not(ps__forward_holds(p));
  p->backup = (tfx_client *)&buf; /* only tested for NULL here */
  a = ps__acked(p, 0, &buf);
  cr_assert_eq(a->version, 12, "the backup holds every step below 12");
  cr_assert_not(ps__forward_holds(p), "8 steps behind: under 2 x 4 + 2");
  p->version = 22;
  cr_assert(ps__forward_holds(p), "10 steps behind: a worker keeps 2 x 4 + 2 pushes at most: replies wait");
  cr_assert_not(ps__pull_ready(p, 0, 0));
  p->acked = 16;
  cr_assert(ps__pull_ready(p, 0, 0));
  p->cfg.mode = TFX_MODE_SYNC;
  p->cfg.ps_replicas = 0;
  cr_assert_null(ps__acked(p, 0, &buf));
  p->backup = NULL;
  free(p);
}

Test(ps_replica, an_async_reply_tells_each_worker_its_last_push_the_backup_holds) {
  ps_state *p = make(1, 0, 1);
  Tfx__Since buf;
  p->cfg.mode = TFX_MODE_ASYNC;
  p->cfg.replica_batch_steps = 4;
  ps__sync_start(p, 2);
  p->last_push[0] = 30;
  p->last_push[1] = 31;
  Tfx__Since *a = ps__acked(p, 1, &buf);
  cr_assert_eq(a->version, 32, "no backup: the reply holds every push, the worker keeps none");
  p->backup = (tfx_client *)&buf; /* only tested for NULL here */
  p->acked_last[0] = 20;
  p->acked_last[1] = -1;
  cr_assert_eq(ps__acked(p, 0, &buf)->version, 21, "worker 0 keeps its pushes after 20");
  cr_assert_eq(ps__acked(p, 1, &buf)->version, 0, "worker 1 keeps every push: no snapshot holds one yet");
  cr_assert_null(ps__acked(p, -1, &buf), "the master's pulls keep nothing");
  p->version = 40;
  p->acked = 0;
  cr_assert_not(ps__forward_holds(p), "a snapshot goes within PS_SNAP_MAX_PUSHES: no push waits for the backup");
  p->version = 2 * PS_SNAP_MAX_PUSHES + 2;
  cr_assert(ps__forward_holds(p), "two snapshots' worth of pushes past the backup's: replies wait");
  p->cfg.ps_replicas = 0;
  cr_assert_null(ps__acked(p, 0, &buf));
  p->backup = NULL;
  free(p);
}

Test(ps_replica, the_ledger_counts_each_worker_push_once) {
  ps_state *p = make(1, 0, 1);
  ps__sync_start(p, 2);
  tfx_envelope e = request(TFX__MSG_TYPE__MSG_PUSH, TFX__ROLE__ROLE_WORKER, 1, 0, 1);
  e.sender_index = 1;
  cr_assert(ps__ledger_counts(p, &e, 0), "a fresh sync push");
  cr_assert_not(ps__ledger_counts(p, &e, 1), "every worker in each step: a stale push is a resend the step holds");
  p->replicas = 1;
  cr_assert(ps__ledger_counts(p, &e, 1), "backup workers: a straggler's stale push was taken, and answered");
  p->cfg.mode = TFX_MODE_ASYNC;
  cr_assert(ps__ledger_counts(p, &e, 0));
  e.parts = 3;
  e.part = 1;
  cr_assert_not(ps__ledger_counts(p, &e, 0), "a push in parts counts at its last part");
  e.part = 2;
  cr_assert(ps__ledger_counts(p, &e, 0));
  e.sender_role = TFX__ROLE__ROLE_MASTER;
  cr_assert_not(ps__ledger_counts(p, &e, 0), "not a worker's");
  free(p);
}

Test(ps_replica, a_plain_lazy_instance_is_kept_by_checkpoints_and_its_workers_keep_an_interval_and_a_half) {
  ps_state *p = make(1, 0, 1);
  Tfx__Since buf;
  shard s;
  memset(&s, 0, sizeof s);
  s.table = (struct tfx_rowtable *)&buf; /* only tested for NULL here, as the backup */
  snprintf(s.var, sizeof s.var, "emb");
  p->shards = &s;
  p->n_shards = 1;
  p->cfg.replica_batch_steps = 4;
  p->cfg.ckpt_every_steps = 100;
  cr_assert_not(ps__ckpt_acks(p), "no backup");
  p->backup = (tfx_client *)&buf;
  cr_assert(ps__ckpt_acks(p), "sync, a plain lazy table, two workers aggregated: kept by checkpoints");
  cr_assert_not(ps__snap_acks(p), "no dense snapshots of a lazy table");
  cr_assert_eq(ps__kept_steps(p), 2 * 4 + 2 + 150);
  p->version = 170;
  p->acked = 10;
  cr_assert(ps__forward_holds(p), "160 steps past the last checkpoint the backup took: replies wait");
  p->acked = 11;
  cr_assert_not(ps__forward_holds(p));
  p->cfg.ckpt_fp16 = 1;
  cr_assert_not(ps__ckpt_acks(p), "fp16 checkpoints do not restore the values bit for bit");
  p->cfg.ckpt_fp16 = 0;
  p->cfg.ckpt_every_steps = 0;
  cr_assert_not(ps__ckpt_acks(p), "no periodic checkpoint");
  cr_assert_eq(ps__kept_steps(p), 2 * 4 + 2);
  p->cfg.ckpt_every_steps = TFX_REPLICA_CKPT_STEPS_MAX + 1;
  cr_assert_not(ps__ckpt_acks(p), "checkpoints too far apart: the workers would keep too many pushes");
  p->cfg.ckpt_every_steps = 100;
  ps__sync_start(p, 3);
  cr_assert_not(ps__ckpt_acks(p), "three workers summed in arrival order: a replay could differ");
  p->cfg.deterministic = 1;
  cr_assert(ps__ckpt_acks(p), "summed in worker order: the replay is the same");
  p->cfg.replicas_to_aggregate = 2;
  ps__sync_start(p, 3);
  cr_assert_not(ps__ckpt_acks(p), "backup workers: a replay may aggregate other pushes");
  ps__sync_start(p, 2);
  p->ckpt_acks_off = 1;
  cr_assert_not(ps__ckpt_acks(p), "the backup could not read a checkpoint: the summed steps go");
  p->backup = NULL;
  free(p);
}
