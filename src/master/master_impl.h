/* Declarations private to src/master: the master's state, one struct per peer, and its phases. Functions carry
 * the room-private prefix master__ (the public ones, tfx_master_*, are in master.h). All of them run on the
 * master's one thread; the HTTP thread reads what `observed` and the peer structs mark as under obs.lock. */
#ifndef TFX_MASTER_IMPL_H
#define TFX_MASTER_IMPL_H

#include <pthread.h>

#include "data/dataset.h"
#include "master/master.h"
#include "master/plan.h"
#include "net/net.h"
#include "nn/model.h"
#include "observe/metrics.h"
#include "observe/progress.h"
#include "train/pmetrics.h"
#include "train/watch.h"

#define OBS_POINTS 512
#define OBS_MAX_PS 64 /* ps whose counters /metrics shows */

/* The counters of a ps's STATUS reply that /metrics shows: X(field and STATUS key, metric name, help). */
#define MASTER_PS_STATS(X)                                                                                            \
  X(stale_dropped, "tfx_stale_gradients_dropped_total", "Stale or duplicate gradients each ps dropped.")              \
  X(rejected, "tfx_rejected_requests_total", "Requests each ps rejected (bad names, shapes, NaN).")                   \
  X(bad_frames, "tfx_rejected_frames_total", "Malformed frames each ps dropped.")                                     \
  X(pulls_served, "tfx_pulls_served_total", "Pulls each ps answered.")                                                \
  X(nan_rejected, "tfx_nan_rejected_pushes_total",                                                                    \
    "Pushes with NaN/Inf each ps rejected (training.nan_policy = reject).")                                           \
  X(nan_skipped, "tfx_nan_skipped_pushes_total", "Pushes with NaN/Inf each ps skipped (training.nan_policy = skip).") \
  X(update_failures, "tfx_update_failures_total", "Updates each ps could not apply (out of memory: PS-NOMEM).")

/* The counters of one ps's last STATUS reply (master__observe_ps). */
typedef struct ps_stats {
#define X(field, metric, help) double field;
  MASTER_PS_STATS(X)
#undef X
} ps_stats;

/* What the HTTP thread may read, under `lock`: written by the master's thread as the run goes. */
typedef struct observed {
  pthread_mutex_t lock;
  int64_t step, reports, checkpoints, ckpt_retries, ckpt_failures, last_ckpt_ms, start_ms;
  double loss, accuracy, eval_loss, eval_accuracy, examples_per_sec;
  int n_train, n_eval;
  double train[OBS_POINTS][4]; /* step, loss, accuracy, seconds */
  double eval[OBS_POINTS][3];  /* step, loss, accuracy */
  int n_fields;                /* the last eval record's fields, for /metrics' tfx_eval_metric */
  char field_names[TFX_EVAL_MAX_FIELDS][24];
  double field_values[TFX_EVAL_MAX_FIELDS];
  int n_train_fields; /* the last train record's fields (a worker's report), for /metrics' tfx_train_metric */
  char train_names[32][24];
  double train_values[32];
} observed;

/* A peer's ZeroMQ routing identity, as a ROUTER sees it. */
typedef struct peer_id {
  unsigned char bytes[32];
  size_t n;
} peer_id;

/* A ps process as the master sees it. It changes only through master__ps_state, which logs each change once in the
 * line of the event that caused it:
 *   STARTING --answers a STATUS (MASTER-PS-UP)--> UP --lost (MASTER-FAILOVER, MASTER-BACKUP-LOST)--> LOST
 *   LOST --answers empty and takes its backups again (MASTER-REREPLICATED), or a roll-back (MASTER-ROUTES)--> UP */
typedef enum master_ps_state {
  MASTER_PS_STARTING, /* has not answered yet */
  MASTER_PS_UP,       /* answers; serves its instance, or a backup, or both */
  MASTER_PS_LOST,     /* replicas: lost and not rejoined (its instance served by its backup, if any) */
} master_ps_state;

/* One parameter server, as the master knows it. state, version and stats are written under obs.lock. */
typedef struct ps_peer {
  tfx_client *client; /* DEALER to the ps serving this plan instance (its own, or the backup promoted) */
  tfx_client *home;   /* after a failover: the DEALER to the instance's own ps (for STOP), else NULL */
  int at;             /* the ps serving the instance: its own index, or the next on the ring once promoted */
  unsigned seen;      /* replicas: the client's disconnections as of the last look (a change: the ps died) */
  master_ps_state state; /* of ps p, the process; changed only by master__ps_state */
  int64_t version;    /* its step at the last version poll */
  int unreplicated;   /* replicas: its last status said its instance had lost its backup (no promotion then) */
  int backup;         /* replicas: the ps holding this instance's backup, or -1 (lost, or promoted) */
  int rejoin_asked;   /* replicas, LOST: a STATUS is out to ps p (through home) to see it back */
  ps_stats stats;     /* kept for the first OBS_MAX_PS ps only */
  int64_t ledger_applied; /* the run's ledger: the pushes the instance took (its last status), or -1 unknown */
  int64_t ledger_acked;   /* the run's ledger: the pushes the workers saw it answer (summed from their STOP replies) */
} ps_peer;

/* One worker, as the master knows it. registered and hb_warned are written under obs.lock. */
typedef struct worker_peer {
  tfx_client *client;       /* DEALER to the worker (heartbeats, STOP); NULL once finished stops it */
  int registered;           /* registered with this master (or reported after registering with an earlier one) */
  peer_id id;               /* the routing identity it registered with */
  int hb_pending;           /* a heartbeat is out, unanswered */
  int hb_warned;            /* MASTER-WORKER-SILENT was logged and it has not answered since */
  int64_t hb_sent, hb_seen; /* when the last heartbeat went out / was answered */
  int has_rolling;            /* reported progressive validation: rolling_auc, rolling_log_loss (under obs.lock) */
  double rolling_auc, rolling_log_loss;
  double bad_records; /* data.on_error skip: its last report's count (under obs.lock) */
  /* rolling.c: its last progressive window (main thread only): examples, mean log loss, its logit histogram
   * [2 * TFX_PROGRESSIVE_BINS] when binary, and whether it came after the last merged record */
  double win_n, win_loss;
  int64_t *win_hist;
  int win_has_hist, win_fresh;
} worker_peer;

/* The merged rolling record as last written (rolling.c), for /metrics (under obs.lock). */
typedef struct merged_window {
  int has;
  double auc, log_loss, examples;
} merged_window;

typedef struct master {
  tfx_node *n;
  tfx_config cfg;
  void *sock;
  ps_peer *ps;
  worker_peer *workers;
  int n_ps, n_workers, running, finished;
  int64_t bad_frames; /* frames and reports the master dropped (logged at 1..10, then powers of two) */
  int64_t global_step, max_version, start_step, next_eval, next_ckpt, last_ckpt_ms;
  int64_t ckpt_retry_at; /* a failed periodic checkpoint is asked again from this time on */
  int64_t tick_step;     /* the global step at the last periodic tick (for the checkpoint lead) */
  int64_t progress_step; /* the step of the last progress line shown (one line per report step) */
  tfx_plan plan;
  tfx_model *model;
  tfx_dataset *eval;
  tfx_dataset *valsets[TFX_MAX_VALSETS];
  int64_t next_val[TFX_MAX_VALSETS];
  int64_t epoch_steps; /* training.epochs as a step budget (0: none); caps max_steps, also after training.steps */
  tfx_metrics *metrics;
  struct tfx_events *events;
  struct tfx_http *http;
  tfx_progress progress;
  char *config_json;
  double last_acc, last_loss;
  int64_t eval_step; /* the step last_acc was scored at */
  int eval_refused;  /* the last evaluation refused its data (last_acc is NaN) */
  int eval_missed;   /* the final step could not be evaluated (last_acc is NaN) */
  int over;          /* the newest checkpoint is at max_steps: the run only evaluates and finishes */
  int abort_code, hook_stop, ps_lost;
  int lost_ps;        /* the instance whose call failed or came back empty in the last ps call, or -1 */
  int64_t stop_seen_ms; /* when the master first saw a stop signal (master__stop_deadline), or 0 */
  int stop_gave_up;     /* a ps did not answer within MASTER_STOP_GRACE_MS of the stop (logged once) */
  uint64_t epoch;     /* the plan epoch: 1 at the start, + 1 per promotion and roll-back (cluster.replicas 1) */
  uint64_t rollback_epoch; /* the plan epoch of the last roll-back (0: none), told in STATUS replies */
  int64_t failovers;  /* promotions of a backup (tfx_failovers_total); under obs.lock */
  int64_t degraded_at; /* the global step at the last promotion */
  int ledger_written; /* the run's ledger was written: the chief's status shows it ("ledger.applied.P", ".acked.P") */
  int64_t apart_since, apart_lo; /* sync, replicas: since when the ps stand steps apart, and the lowest step then */
  tfx_watch best, early; /* checkpoint.keep_best, training.early_stopping (watch.c) */
  int early_stop;        /* early stopping's patience is spent: the loop finishes the run */
  observed obs;
  merged_window merged; /* the last merged rolling record (rolling.c; under obs.lock) */
  char abort_msg[256];
  tfx_pmetrics *pm; /* the plugin's own metrics (train/pmetrics.h), or NULL */
} master;

/* What a ps call does with each reply: ctx is the caller's, p the ps, e the reply (borrowed until return). */
typedef void master__on_reply(void *ctx, int p, const tfx_envelope *e);

/* observe.c: the observed state, the HTTP endpoint, the run index and the metrics record. */

/* Prepares the observed state (before anything else). */
void master__observe_init(master *m);
/* Takes (lock = 1) or releases the observed state's lock around writes the HTTP thread may read. */
void master__lock(master *m, int lock);
/* Registers the run in the experiment index (a warning on failure) and starts the HTTP endpoint when
 * observe.http_port is set (after setup). */
int master__observe_start(master *m, tfx_err *err);
/* Stops the HTTP endpoint and stores the run's series and final status in the experiment index. */
void master__observe_stop(master *m);
/* Records the counters of ps p's STATUS reply (MASTER_PS_STATS) for /metrics. */
void master__observe_ps(master *m, int p, const tfx_envelope *status);
/* Records a training report / an evaluation / a checkpoint / the global step for the HTTP endpoint. */
void master__observe(master *m, const char *kind, int64_t step, double loss, double accuracy, double eps);
/* Appends a metrics line and the same scalars to the TensorBoard event file. */
void master__record(master *m, const char *kind, int64_t step, const char *const *names, const double *values, int n,
                    const char *json);

/* serve.c: the master's own socket (workers' REGISTER and REPORT, anyone's STATUS). */

/* The value of a STATUS or REPORT statistic (NaN when absent). */
double master__stat(const tfx_envelope *e, const char *key);

/* rolling.c: keeps the progressive window of a worker's report (in borrowed until return; its rolling_examples and
 * rolling_log_loss as read by serve.c) and, once every worker with a window has sent a new one, writes the merged
 * "rolling" record over their union. */
void master__rolling_note(master *m, const tfx_inmsg *in, double examples, double log_loss);
/* rolling.c: frees the workers' kept windows. */
void master__rolling_fini(master *m);
/* master__stat for tfx_pm_state_read: ctx is the envelope. */
double master__env_stat(const void *ctx, const char *key);
/* Serves the master's socket: waits up to timeout_ms for a message, then serves every one waiting. */
void master__serve(master *m, int timeout_ms);
/* Serves every message waiting on the master's socket, without blocking. */
void master__serve_pending(master *m);

/* startup.c: waiting for the cluster and starting the ps. */

/* Waits (bounded) until every ps answers and every worker registered, naming who is missing. */
int master__wait_cluster(master *m, tfx_err *err);
/* Sends each ps its part of the plan, fresh or restored from the newest complete checkpoint. */
int master__init_ps(master *m, tfx_err *err);

/* failover.c: replicated shards (cluster.replicas 1): routing, backups' INIT, promotion. */

/* Whether the ps instances have backups: cluster.replicas 1 and at least 2 ps. */
int master__replicated(const master *m);
/* Addresses req to plan instance p (Envelope.target, the plan epoch) when replicated; else leaves it alone. */
void master__route(const master *m, int p, tfx_envelope *req);
/* After instance p's INIT (init, borrowed): the backup on the next ps gets the same INIT, or, for an instance
 * already served by its promoted backup, the promotion is repeated (a re-INIT demotes it). */
int master__init_backup(master *m, int p, tfx_envelope *init, tfx_err *err);
/* A roll-back of every ps (a primary and its backup lost together): a new plan epoch, so that workers asking the
 * chief's routes (its status: "route.P" = the ps serving instance P, and Envelope.epoch) follow them again. */
void master__rolled_back(master *m);
/* Moves ps x (the process) to state `to` on event `id` (a log ID), logged once at `level` in the caller's words
 * (printf format) with the change ("[up -> lost]"); the caller holds obs.lock. */
void master__ps_state(master *m, int x, master_ps_state to, int level, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* The state's name as logs and /status say it; static. */
const char *master__ps_state_name(master_ps_state s);
/* Promotes the backup of instance p (lost: why) to its primary at a new plan epoch and routes p's calls there.
 * TFX_ESTATE when it has no live backup (already promoted, or the next ps is lost too). */
int master__promote(master *m, int p, const char *why, tfx_err *err);
/* Shards whose instance has no backup now (lost or promoted; tfx_shards_unreplicated). */
int master__unreplicated_shards(const master *m);
/* Replicas: a lost ps that came back empty rejoins as the backup of its old shards and of its ring
 * predecessor's; each primary streams it its whole state (MASTER-REREPLICATED). Called at every version poll. */
void master__rejoin(master *m);
/* Notes from ps p's status reply whether its instance still has its backup (replicas). */
void master__note_replica(master *m, int p, const tfx_envelope *status);
/* Steps trained since a shard last lost its backup while some still has none (tfx_replication_lag_steps), else 0. */
int64_t master__replication_lag(const master *m);
/* "off" (no replicas), "replicated" (every shard has a live backup) or "degraded" (/status). */
const char *master__replica_status(const master *m);

/* pscalls.c: requests to every ps. */

/* Sends req to every ps, collects each reply (on_reply(ctx, ...) sees each; may be NULL), serving the master's
 * socket meanwhile. */
/* A stopping master gives up on a ps that has not answered this long after the stop (frozen, or overloaded), so one
 * Ctrl-C ends any run: the final checkpoint then names the ps it lacks. */
#define MASTER_STOP_GRACE_MS 5000
/* Past that grace, each call to a ps still gets this long (one that answers at once is not given up on). */
#define MASTER_STOP_LAST_MS 200
/* The time (tfx_now_ms) by which every wait of a stopping master ends: MASTER_STOP_GRACE_MS after it first saw the
 * stop signal; INT64_MAX while no stop was asked for. */
int64_t master__stop_deadline(master *m);
/* The run's ledger (ledger.c). */

/* How long beyond cluster.request_timeout_s the chief waits for a worker's side of the ledger: one at max_steps
 * answers between its 200 ms waits, or once its kept pushes went to a promoted backup (each resend waits at most
 * the request timeout for the promotion). */
#define MASTER_LEDGER_SLACK_MS 5000
/* Asks every worker for its side of the ledger (a STATUS: "acked.P" for each instance) into each instance's
 * ledger_acked; 0 (with a WARN naming the worker) when one does not answer. */
int master__ledger_workers(master *m);
/* Asks every instance for its ledger_applied, then appends {"kind": "ledger", "step": S, "instances": [{"instance":
 * P, "applied": N, "acked": M}, ...]} to metrics.jsonl and logs MASTER-LEDGER (a WARN where N != M). */
void master__ledger_write(master *m);
int master__call_ps(master *m, tfx_envelope *req, int timeout_ms, master__on_reply *on_reply, void *ctx, tfx_err *err);
/* Refreshes every ps's version; global_step = the smallest, max_version = the largest. A ps back empty rolls
 * every ps back to the newest checkpoint first. */
int master__poll_versions(master *m, tfx_err *err);

/* evaluate.c: evaluation on the eval set and the validation sets. */

/* Pulls the variables (with checkpoint.keep_best while the workers train: takes a checkpoint and loads it) and
 * evaluates on the eval set; writes an eval line, feeds watch.c, and sets last_acc and eval_step (the step scored). Returns TFX_OK, or why not: the pull's error (logged; last_acc unchanged) or the eval data's
 * (logged; last_acc NaN, eval_refused set). */
int master__evaluate(master *m);
/* Pulls the variables and evaluates the named validation sets that are due (all with force); writes
 * "validation" lines. */
void master__validate(master *m, int force);

/* ckpt.c: checkpoints. */

/* Asks every ps to write its shard at step >= at, then writes the manifest. */
int master__checkpoint(master *m, int64_t at, tfx_err *err);
/* A checkpoint now, at the first step every ps can still write (sync: a step ahead); *written: its step. */
int master__checkpoint_now(master *m, int64_t *written, tfx_err *err);
/* Collects the checkpoints the ps wrote at the multiples of every_steps they passed, and takes one when due by
 * seconds (or for a dry followed directory); a failure is asked again after 1 s. */
void master__checkpoint_if_due(master *m);
/* Collects the checkpoints the ps wrote by themselves at the multiples of every_steps that every ps has passed
 * (below max_steps), at most limit a call, then prunes once; now: the clock, for the retry after a ps that did
 * not answer. */
void master__collect_written(master *m, int64_t now, int limit);

/* disteval.c: eval.distributed, the eval set scored by the workers. */

/* Whether the workers score the eval set: eval.distributed, and they are still running. */
int master__disteval_on(const master *m);
/* Asks every worker to score its slice of the eval set and merges the sums into *out (no AUC); *version: the
 * smallest version a worker scored with. Fails (nothing written) when a worker does not answer in the request
 * deadline or answers an error (its eval data refused): the caller then scores the set itself. */
int master__evaluate_workers(master *m, int64_t *version, tfx_eval_result *out, tfx_err *err);

/* watch.c: checkpoint.keep_best and training.early_stopping on the chief's evaluations. */

/* Sets up the watches from the experiment; a restarted chief's best is the one best.json names. */
void master__watch_init(master *m);
/* Feeds the evaluation of step `version` to the watches: a new best is checkpointed at once (the first step every
 * ps can still write; the step itself once the workers are stopped) and named in best.json, exported with
 * export.on_best; early stopping's spent patience sets early_stop (logged once: metric, best value, its step). */
void master__watch_eval(master *m, int64_t version, const tfx_eval_result *r);

/* heartbeat.c */

/* A STATUS to every worker every 2 s; names a worker silent for longer than the request deadline. */
void master__heartbeat(master *m);

/* loop.c */

/* Serves workers and drives evaluation and checkpoints until max_steps. */
int master__loop(master *m, tfx_err *err);
/* Sends STOP to every worker and ps (best effort). */
void master__stop_all(master *m);

#endif
