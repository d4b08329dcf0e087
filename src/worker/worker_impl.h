/* Declarations private to src/worker: the worker's state (worker.c trains with it, control.c answers its control
 * socket from it), its distributed-evaluation slice, and what it shows on its HTTP port (--http-port, off by default).
 * The training thread records into a worker_obs under its lock; the libmicrohttpd thread renders /metrics
 * (Prometheus text, role="worker" and the task index as labels) and /status (JSON) from it. */
#ifndef TFX_WORKER_IMPL_H
#define TFX_WORKER_IMPL_H

#include <pthread.h>
#include <stdint.h>

#include "common/err.h"
#include "nn/model.h"
#include "observe/prom.h"
#include "psclient/psclient.h"
#include "data/dataset.h"
#include "net/net.h"
#include "net/wire.h"
#include "train/evaluate.h"
#include "train/pmetrics.h"
#include "train/progressive.h"
#include "worker/timing.h"
#include "worker/worker.h"

typedef struct worker_obs {
  pthread_mutex_t lock;
  struct tfx_http *http;
  int index, training;
  int64_t start_ms, version, steps;
  double loss, examples_per_sec;
  uint64_t bytes_sent, bytes_received, bad_frames;
  tfx_prom_hist pull, push_pull; /* seconds per tfx_psclient_pull / tfx_psclient_push_pull */
} worker_obs;

/* Prepares o for task index; starts the HTTP endpoint on host:port when port > 0. Stop with worker__obs_stop. */
int worker__obs_start(worker_obs *o, int index, const char *host, int port, tfx_err *err);
/* Stops the HTTP endpoint (if any) and releases the lock. */
void worker__obs_stop(worker_obs *o);
/* Records a pull that took seconds and received bytes. */
void worker__obs_pull(worker_obs *o, double seconds, uint64_t received);
/* Records a push round trip (gradients out, values back) of model's gradients that took seconds. */
void worker__obs_push_pull(worker_obs *o, double seconds, const tfx_model *model, uint64_t received);
/* Records the worker's view after a step: global version, local steps, last mean loss and throughput. */
void worker__obs_step(worker_obs *o, int64_t version, int64_t steps, double loss, double examples_per_sec);
/* Counts one malformed control frame that was dropped. */
void worker__obs_bad_frame(worker_obs *o);

/* evaluate.c: eval.distributed, the worker's slice of the eval set. */
typedef struct worker_eval {
  tfx_model *model;   /* batches of 1000, its variables lent from the training model; NULL: off */
  tfx_dataset *data;  /* the whole eval set (a slice is scored) */
  tfx_psclient *ps;   /* lazy tables: the eval batches' rows from the ps (NULL: none) */
  float *scores;      /* the slice's scores (data->n x the score columns), sent for the chief's exact AUC */
  int64_t *labels;    /* their labels, as int64 on the wire */
  size_t lo;          /* the first example of the last slice scored */
  const tfx_pmetrics *pm; /* the plugin's own metrics (the worker's), or NULL */
} worker_eval;

/* Loads the eval set and its model when cfg->eval_distributed (else e stays empty), with a ps client of its own
 * when the model has lazy tables (train_ps does: the plan's shards, over cluster); release with
 * worker__eval_close. */
int worker__eval_open(worker_eval *e, const tfx_config *cfg, const tfx_psclient *train_ps, const tfx_cluster *cluster,
                      Tfx__Shard *const *shards, size_t n_shards, tfx_err *err);
/* Releases what worker__eval_open loaded. */
void worker__eval_close(worker_eval *e);
/* Scores slice index of count of the eval set with train's dense variables (lazy rows from the ps) into *r.
 * TFX_ESTATE when e is off, TFX_EPROTO for a bad slice, the evaluation's TFX_EINVAL for eval data the model
 * cannot score, a row pull's error. */
int worker__eval_slice(worker_eval *e, tfx_model *train, int index, int count, tfx_eval_result *r, tfx_err *err);
/* Answers the chief's MSG_EVALUATE m (borrowed) on sock: slice stats "index" of "count", scored now with train's
 * variables (NULL: not training yet, an error reply), as sums in the reply's stats; step = version. */
void worker__eval_serve(worker_eval *e, void *sock, const tfx_inmsg *m, tfx_model *train, int64_t version);

/* The worker's state: worker.c trains with it; control.c answers the control socket from it. */
/* The sums of the steps since the last report, and when the window began. */
typedef struct window {
  double loss, hits, seen, n;
  int64_t t0;
} window;

typedef struct worker {
  tfx_node *n;
  tfx_config cfg;
  void *sock; /* ROUTER: status and stop */
  tfx_client *master;
  tfx_inmsg plan; /* the register reply: plan + experiment */
  tfx_model *model;
  tfx_psclient *ps;
  tfx_dataset *data;
  tfx_batcher *batcher;
  float *x, **acc;
  int32_t *y;
  int64_t version, start_ms, steps;
  tfx_timing timing;
  int stop;
  int rows_with_push; /* lazy tables: the next batch is lent before the push-pull, which brings its rows */
  int lazy;           /* the model has lazy tables: each batch's rows are gathered from the ps before it computes */
  int lent;           /* a batch is lent to the model with its rows: the next step computes on it */
  worker_obs obs;          /* what --http-port shows */
  worker_eval eval;        /* eval.distributed: the eval set's slice this worker scores when the chief asks */
  uint64_t reported_bytes; /* bytes on the wire (sent + received) as of the last report */
  window win;              /* the sums since the last report */
  int64_t seen_base;       /* examples_seen less this process's steps (the resumed or rewound position) */
  int n_workers;           /* the cluster's workers: this worker reads shard n->index of them */
  int rewind;              /* the ps went back to an earlier step: the data is opened again there (worker__rewind) */
  int64_t last_step;       /* the step of the last gradient pushed */
  uint64_t route_epoch;    /* cluster.replicas: the chief's plan epoch whose routes the ps links follow */
  int64_t rollback_asked;  /* cluster.replicas: when a long wait for a ps last asked the chief for a roll-back */
  uint64_t rollback_seen;  /* cluster.replicas: the newest roll-back epoch the chief named (kept until followed) */
  tfx_progressive *pv;     /* progressive validation (training.progressive_window), or NULL */
  int64_t *pv_hist;        /* [2 * TFX_PROGRESSIVE_BINS] the window a report carries to the chief, with pv */
  tfx_pmetrics *pm;        /* the plugin's own metrics (model.plugin_metrics), or NULL */
  tfx_pm_state pm_win;     /* their states over the steps since the last report */
} worker;

/* control.c: answers status queries, takes STOP and serves the chief's EVALUATE, without blocking. */
void worker__serve_control(worker *w);
/* control.c, with cluster.replicas: asks the chief which ps serves each plan instance ("route.P") and, when its plan
 * epoch moved past the one followed (a promotion, or a roll-back after a primary and its backup were lost together),
 * moves the ps links there, so a link that failed over to a backup never promoted comes home after a roll-back. */
void worker__follow_routes(worker *w);
/* The psclient's abort predicate (ctx: the worker; TFX_PSCLIENT_ABORT_* or WAIT): told to stop (a signal, or STOP seen), it stops waiting for
 * replies a stopped peer may hold back (sync: the other workers stopped before pushing this one's step); with
 * replicas, also when the chief rolled the ps back since the routes it follows (asked at most once a second: a
 * push kept for a backup that will never be promoted is void, WORKER-KEPT-VOID, and the caller follows the routes). */
int worker__stop_asked(void *ctx);
/* Opens the training data (w->data, w->batcher) at the batches global step `step` stands for, with `idle` called
 * while a followed stream waits; sets seen_base. */
int worker__open_train(worker *w, int64_t step, tfx_idle_fn idle, tfx_err *err);
/* Pulls every ps's values and the global step into w->version; marks a rewind when the step went back (a
 * rollback); in sync, TFX_ESTATE while the ps answer more than a step apart (the chief rolls them back one by
 * one). */
int worker__pull(worker *w, tfx_err *err);
/* Opens the training data again at w->version's position (a rollback went back there), as a restart would. */
int worker__rewind(worker *w, tfx_idle_fn idle, tfx_err *err);

#endif
