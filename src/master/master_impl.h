/* Declarations private to src/master: the master's state and its phases. */
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

#define OBS_POINTS 512
#define OBS_MAX_PS 64 /* ps whose counters /metrics shows */

/* What the HTTP thread may read, under `lock`: written by the master's thread as the run goes. */
typedef struct observed {
  pthread_mutex_t lock;
  int64_t step, reports, checkpoints, ckpt_retries, ckpt_failures, last_ckpt_ms, start_ms;
  double loss, accuracy, eval_loss, eval_accuracy, examples_per_sec;
  int n_train, n_eval;
  double train[OBS_POINTS][4];    /* step, loss, accuracy, seconds */
  double eval[OBS_POINTS][3];     /* step, loss, accuracy */
  double ps_stats[OBS_MAX_PS][6]; /* from each ps's STATUS reply: stale_dropped, rejected, bad_frames, pulls_served,
                                     nan_rejected, nan_skipped (tfx_master_observe_ps) */
} observed;

/* A peer's ZeroMQ routing identity, as a ROUTER sees it. */
typedef struct peer_id {
  unsigned char bytes[32];
  size_t n;
} peer_id;

typedef struct master {
  tfx_node *n;
  tfx_config cfg;
  void *sock;
  void (*serve_pending)(struct master *m); /* answers what waits on sock (run.c), called while waiting on a ps */
  tfx_client **ps, **workers;
  int n_ps, n_workers, running, finished;
  int *ps_up, *registered, *hb_pending, *hb_warned;
  struct peer_id *worker_ids; /* the routing identity each worker registered with (run.c) */
  int64_t bad_frames;         /* frames and reports the master dropped (logged at 1..10, then powers of two) */
  int64_t *hb_sent, *hb_seen;
  int64_t *ps_version, global_step, max_version, start_step, next_eval, next_ckpt, last_ckpt_ms;
  int64_t ckpt_retry_at; /* a failed periodic checkpoint is asked again from this time on */
  int64_t tick_step;     /* the global step at the last periodic tick (ckpt_lead) */
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
  int eval_refused; /* the last evaluation refused its data (last_acc is NaN) */
  int abort_code, hook_stop, ps_lost;
  observed obs;
  char abort_msg[256];
} master;

/* Prepares the observed state (before anything else). */
void tfx_master_observe_init(master *m);
/* Takes (lock = 1) or releases the observed state's lock around writes the HTTP thread may read. */
void tfx_master_lock(master *m, int lock);
/* Registers the run in the experiment index (a warning on failure) and starts the HTTP endpoint when
 * observe.http_port is set (after setup). */
int tfx_master_observe_start(master *m, tfx_err *err);
/* Stops the HTTP endpoint and stores the run's series and final status in the experiment index. */
void tfx_master_observe_stop(master *m);
/* Records the counters of ps p's STATUS reply (stale gradients dropped, rejected requests, bad frames, pulls
 * served) for /metrics. */
void tfx_master_observe_ps(master *m, int p, const tfx_envelope *status);
/* Records a training report / an evaluation / a checkpoint / the global step for the HTTP endpoint. */
void tfx_master_observe(master *m, const char *kind, int64_t step, double loss, double accuracy, double eps);
/* Appends a metrics line and the same scalars to the TensorBoard event file. */
void tfx_master_record(master *m, const char *kind, int64_t step, const char *const *names, const double *values,
                       int n);
/* Serves every message waiting on the master's socket, without blocking. */
void tfx_master_serve_pending(master *m);
/* Sends req to every ps, collects each reply (on_reply may be NULL), serving the master's socket meanwhile. */
int tfx_master_call_ps(master *m, tfx_envelope *req, int timeout_ms,
                       void (*on_reply)(master *, int, const tfx_envelope *), tfx_err *err);
/* Refreshes every ps's version; global_step = the smallest, max_version = the largest. */
int tfx_master_poll_versions(master *m, tfx_err *err);
/* Pulls the variables and evaluates on the eval set; writes an eval line. */
void tfx_master_evaluate(master *m);
/* Pulls the variables and evaluates the named validation sets that are due (all with force); writes
 * "validation" lines. */
void tfx_master_validate(master *m, int force);
/* Waits (bounded) until every ps answers and every worker registered, naming who is missing. */
int tfx_master_wait_cluster(master *m, tfx_err *err);
/* Sends each ps its part of the plan, fresh or restored from the newest complete checkpoint. */
int tfx_master_init_ps(master *m, tfx_err *err);
/* Serves workers and drives evaluation and checkpoints until max_steps. */
int tfx_master_loop(master *m, tfx_err *err);
/* Asks every ps to write its shard at step >= at, then writes the manifest. */
int tfx_master_checkpoint(master *m, int64_t at, tfx_err *err);
/* Sends STOP to every worker and ps (best effort). */
void tfx_master_stop_all(master *m);

#endif
