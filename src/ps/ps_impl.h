/* Declarations private to src/ps (the ps__ tier: no other room may call them): shard and server state, the
 * statistics list, the push / pull / checkpoint handlers and the decisions of rules.c. One thread (the ps's) uses
 * all of it; helper.c's thread only runs the range jobs it is handed. */
#ifndef TFX_PS_IMPL_H
#define TFX_PS_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "config/config.h"
#include "net/net.h"
#include "nn/optim.h"
#include "ps/ps.h"

#define PS_MAX_WORKERS 1024
/* Pulls (and push-pull replies) parked at once, at most. */
#define PS_MAX_PARKED (4 * PS_MAX_WORKERS)
/* Floats: with training.ps_apply_threads = 2, tensors this large are scanned and updated by two threads. */
#define PS_PARALLEL_MIN (256 * 1024)
/* Bytes: async SGD updates of shards this large take the one-pass path (check and update in one sweep, written
 * over the received frame), and so does any whose buffer a reply is still sending (no copy on write). */
#define PS_FUSE_MIN ((size_t)256 << 10)

typedef struct ps_helper ps_helper;
/* A checkpoint's copy of a ps's values, slots and rows at one step (snapshot.c). */
typedef struct ps_snap ps_snap;
/* A checkpoint being written from a ps_snap by the writer thread (ckpt.c). */
typedef struct ps_ckpt_job ps_ckpt_job;
/* One part [begin, end) of an element-wise job over ctx. */
typedef void (*ps_range_fn)(void *ctx, size_t begin, size_t end);

/* A shard's values: reference-counted (a reply sends them in place), in memory of their own or in a received
 * gradient frame that became the shard's values (frame_owned; see ps__vbuf_adopt). */
typedef struct vbuf {
  atomic_int refs;
  int frame_owned;
  zmq_msg_t frame;
  float *data;
} vbuf;

typedef struct shard {
  char key[128], var[96];
  int rank, trainable;
  int64_t shape[4], row_begin, row_end;
  size_t count, row_size;
  int assigned;    /* a non-trainable shard that received values (batch-norm statistics) */
  int step_assigned; /* sync, replicas: values assigned this step (forwarded with the step, ps__forward_step) */
  int64_t changed; /* the version as of which the values last changed: init/restore's, or version + 1 for a change
                      made at version (a pull `since` v >= changed may leave the shard out) */
  int fuse;        /* the push being handled updates this shard in one pass (decided once, by validate_push) */
  vbuf *value;
  float *slots[2];
  float *acc;
  uint8_t *touched; /* sync: rows a row-sparse push added into acc this step (row_end - row_begin flags) */
  int acc_dense;    /* sync: a dense push added into acc this step (then the whole shard is updated) */
  struct tfx_rowtable *table, *acc_rows; /* a lazy table (lazy.c): its rows, and a sync step's summed rows */
  int64_t mod_n, mod_r;                  /* lazy: the ids this ps holds, id % mod_n == mod_r */
} shard;

typedef struct pending_pull {
  zmq_msg_t identity;
  uint64_t request_id;
  int64_t min_version, deadline;
  int worker;
  char **names;
  size_t n_names;
  int changed_only;
  int64_t since;      /* Envelope.since, or -1 */
  Tfx__Tensor **want; /* copies of Envelope.want: rows of lazy tables to send (name, rows) */
  size_t n_want;
} pending_pull;

/* Every statistic of the ps, once, in the order of its status reply: kind (COUNT: a counter in ps_state.stats,
 * bumped where it happens; SHOWN: worked out when shown, in ps.c), field, status key (NULL: not in the status),
 * /metrics name, help and type (NULL: not in /metrics). It makes the counters, the status and /metrics. */
#define PS_STATS(X)                                                                                                  \
  X(SHOWN, uptime, "uptime_s", "tfx_uptime_seconds", "Seconds since the process started.", "gauge")                  \
  X(SHOWN, shards, "shards", "tfx_ps_shards", "Variables or slices held.", "gauge")                                  \
  X(SHOWN, bytes, "bytes", "tfx_ps_bytes", "Bytes of variable values held.", "gauge")                                \
  X(COUNT, applied, "pushes_applied", "tfx_ps_pushes_applied_total", "Gradient pushes applied.", "counter")          \
  X(COUNT, ledger, "ledger_pushes", "tfx_ps_ledger_pushes_total",                                                    \
    "Worker pushes this ps instance took over the run (a promoted backup goes on from its primary's count).",        \
    "counter")                                                                                                       \
  X(COUNT, update_failures, "update_failures", "tfx_ps_update_failures_total",                                       \
    "Updates not applied for want of memory (PS-NOMEM): the run then does not end as a success.", "counter")         \
  X(COUNT, stale, "stale_dropped", "tfx_ps_stale_dropped_total", "Stale or duplicate gradients dropped.", "counter") \
  X(COUNT, rejected, "rejected", "tfx_ps_rejected_total", "Requests rejected (bad names, shapes, NaN).", "counter")  \
  X(COUNT, pulls, "pulls_served", "tfx_ps_pulls_served_total", "Pulls answered.", "counter")                         \
  X(COUNT, bad_frames, "bad_frames", "tfx_ps_bad_frames_total", "Malformed frames dropped.", "counter")              \
  X(SHOWN, version, "version", "tfx_ps_version", "Updates applied to this ps's variables (its step).", "gauge")      \
  X(SHOWN, busy_us_per_message, "busy_us_per_message", NULL, NULL, NULL)                                             \
  X(COUNT, nan_rejected, "nan_rejected", "tfx_ps_nan_rejected_total",                                                \
    "Pushes rejected for NaN/Inf (training.nan_policy = reject).", "counter")                                        \
  X(COUNT, nan_skipped, "nan_skipped", "tfx_ps_nan_skipped_total",                                                   \
    "Pushes skipped for NaN/Inf (training.nan_policy = skip).", "counter")                                           \
  X(COUNT, forwarded, "pushes_forwarded", "tfx_ps_pushes_forwarded_total",                                           \
    "Messages to the backup it acknowledged: batches of steps, snapshots (cluster.replicas 1).", "counter")                      \
  X(COUNT, replica_bytes, "replica_bytes", "tfx_ps_replica_bytes_total",                                             \
    "Bytes sent to this ps's backup: steps, snapshots, forwarded pushes (cluster.replicas 1).", "counter")           \
  X(COUNT, stale_epoch, "stale_epoch", "tfx_ps_stale_epoch_total",                                                   \
    "Forwarded pushes refused for an older plan epoch (or a promoted backup).", "counter")                           \
  X(COUNT, held, "held_in_order", "tfx_ps_held_in_order_total",                                                      \
    "Sync pushes held until a lower worker's came (training.deterministic).", "counter")                             \
  X(SHOWN, unreplicated, "unreplicated", "tfx_ps_unreplicated",                                                      \
    "1 when cluster.replicas is 1 and this ps's own shards have no backup (lost).", "gauge")                         \
  X(SHOWN, busy_seconds, NULL, "tfx_ps_busy_seconds_total", "Time spent handling messages.", "counter")              \
  X(COUNT, handled, NULL, "tfx_ps_messages_total", "Messages handled.", "counter")                                   \
  X(COUNT, cow_copies, NULL, NULL, NULL, NULL)

/* The counters of PS_STATS (uint64_t each). */
#define PS_STAT_COUNTER_COUNT(field) uint64_t field;
#define PS_STAT_COUNTER_SHOWN(field)
#define PS_STAT_COUNTER(kind, field, key, metric, help, type) PS_STAT_COUNTER_##kind(field)
/* The values of PS_STATS as shown (double each). */
#define PS_STAT_SHOWN(kind, field, key, metric, help, type) double field;
typedef struct ps_shown {
  PS_STATS(PS_STAT_SHOWN)
} ps_shown;

/* What the HTTP thread reads (under lock), copied from the ps's state after every message. */
typedef struct ps_view {
  pthread_mutex_t lock;
  int64_t start_ms;
  int initialized;
  ps_shown shown;
} ps_view;

/* A checkpoint this ps wrote (by itself at a multiple of checkpoint.every_steps, or asked): the sums its reply
 * carries, kept so the master can collect it after the ps moved on (ckpt.c). rc: 0, or why the write failed. */
typedef struct ps_ckpt_done {
  int64_t step;
  uint32_t crc, rows_crc;
  uint64_t bytes, rows_bytes;
  int rc;
  char why[256]; /* rc != 0: the error text (which names the file), answered however late the master asks */
} ps_ckpt_done;

/* What a written checkpoint reports: the shard file's and the row file's checksum and size. */
typedef struct ps_ckpt_sums {
  uint32_t crc, rows_crc;
  uint64_t bytes, rows_bytes;
} ps_ckpt_sums;

/* How many written checkpoints a ps remembers for the master: 256 x every_steps steps of master absence. */
#define PS_CKPT_DONE 256

/* The own state's summed sync steps not forwarded yet (cluster.replicas 1): one message per
 * cluster.replica_batch_steps steps (replica.c). Each tensor's bytes are a copy it owns; Tensor.version is its step. */
typedef struct ps_batch {
  Tfx__Tensor *metas;
  int64_t *shapes; /* 2 per tensor */
  void **owned;    /* per tensor: the allocation holding its bytes (and row ids) */
  const void **data;
  size_t n, cap;
  double *n_grads; /* per step: the gradients it averaged */
  int steps, cap_steps;
  int64_t first; /* the version (step) of its first step */
} ps_batch;

/* What a ps instance (the own one, or a mirror: a copy of another ps's) is doing. It changes only through
 * ps__set_state, which logs each change once, in the line of the event that caused it (PS-INIT, PS-PROMOTED,
 * PS-BACKUP-LOST, PS-REREPLICATED, PS-BEHIND, PS-BACKUP-BASE, PS-BACKUP-BROKEN):
 *
 *   WAITING --INIT--> SERVING <--backup taken again (re-replicated)-- UNREPLICATED
 *      |                 `--its backup lost---------------------------------^  ^
 *      `--INIT as a copy--> BACKUP --PROMOTE----------------------------------'
 *                             `--a forward refused, a checkpoint not loaded--> BEHIND (never promoted; a new INIT)
 */
typedef enum ps_instance_state {
  PS_WAITING,      /* no plan yet: the master has not sent INIT */
  PS_SERVING,      /* serves workers; with replicas on, its backup holds what it acknowledges */
  PS_UNREPLICATED, /* serves workers with replicas on but no backup: lost or refused, or a promoted copy alone */
  PS_BACKUP,       /* a copy of an instance served elsewhere, taking its primary's forwards; serves no worker */
  PS_BEHIND,       /* a copy that refused a forward or could not load a checkpoint: it may not be promoted */
} ps_instance_state;

typedef struct ps_state {
  tfx_node *node;
  void *sock;
  int index;              /* the plan's ps instance this state holds (file names): the node's own, or, in a
                             mirror, the instance it backs up */
  int backup_of;          /* a copy of another ps's instance (a mirror, or the own instance restarted as a copy) */
  ps_instance_state state; /* changed only by ps__set_state */
  uint64_t epoch;         /* the plan epoch of the last INIT or PROMOTE */
  struct ps_state *mirror; /* the own state's: the instance this ps backs up, or NULL */
  tfx_client *backup;     /* the own state's: DEALER to the ps holding its backup, or NULL */
  unsigned backup_seen;   /* the backup link's disconnections when it last answered (linkwatch) */
  int fwd_pending;        /* forwards the backup has not acknowledged yet: replies and pulls wait (parked) */
  int64_t fwd_deadline;   /* when the last forward's acknowledgement is overdue (the backup is then lost) */
  tfx_inmsg *log;         /* a mirror's: forwarded sync steps acknowledged and not applied yet (replog.c) */
  int n_log, cap_log;
  int64_t fwd_steps;      /* the own state's: sync steps forwarded (a snapshot goes every ps__log_steps) */
  int64_t snap_sent;      /* the own state's, ps__snap_acks: the version of the last snapshot sent */
  uint64_t snap_ledger;   /* the own state's, async and ssp: its ledger in the last snapshot sent */
  int reply_not_applied;  /* while a push past max_steps is answered: its reply says so (PUSH_NOT_APPLIED) */
  int snap_due;           /* the own state's, ps__snap_acks: values were assigned, so a snapshot goes now */
  int64_t ckpt_told;      /* the own state's, ps__ckpt_acks: the step of the last checkpoint the backup was told */
  size_t push_bytes;      /* the own state's, with a backup: a worker's push, on average (ps__keep_measure) */
  size_t snap_push_bytes; /* the own state's, async and ssp: the bytes of the pushes applied since the last snapshot */
  size_t snap_bytes;      /* the own state's, async and ssp: the bytes of the last snapshot sent */
  int64_t idle_version, idle_since; /* the own state's, ps__ckpt_acks: the version last seen idle, and since when */
  uint64_t worker_conn[PS_MAX_WORKERS]; /* the own state's: each worker's connection (its identity's hash), 0 unseen */
  int catch_up_due;       /* the own state's, ps__ckpt_acks: a worker came back on a new connection */
  int ckpt_acks_off;      /* the own state's: the backup cannot take the checkpoints as its state (it was sent the
                             whole state instead, and the summed steps since) */
  ps_batch batch;         /* the own state's, sync: summed steps waiting to go to the backup in one message */
  int64_t acked;          /* the own state's, sync: the backup holds every step below this version (told in replies);
                             async and ssp: the version of the newest snapshot the backup acknowledged */
  int64_t snap_last[PS_MAX_WORKERS];  /* the own state's, async and ssp: each worker's last push in the snapshot
                                         awaiting its acknowledgement */
  int64_t acked_last[PS_MAX_WORKERS]; /* the own state's, async and ssp: each worker's last push its backup holds
                                         (told to that worker in replies: it keeps the pushes after it) */
  int log_steps;          /* a mirror's: the steps its log holds (a forwarded message carries one batch of them) */
  size_t log_bytes;       /* a mirror's: the bytes of the messages its log holds */
  int log_stale;          /* a mirror's: its state is the checkpoint of its version and the log, not its memory */
  int log_mode;           /* a mirror's ps__log_until_ckpt, once known: 0 not yet, 1 yes, 2 no */
  tfx_inmsg *held;        /* sync, training.deterministic: pushes that came before a lower worker's (order.c) */
  int n_held, cap_held;
  tfx_config cfg;
  tfx_optim opt;
  int stopping;
  shard *shards;
  int n_shards;
  int64_t version, start_ms;
  int n_workers, replicas, n_acc, n_grads; /* sync: arrivals this step; of them, gradients accumulated */
  uint8_t contributed[PS_MAX_WORKERS];
  int64_t clock[PS_MAX_WORKERS];
  int64_t last_push[PS_MAX_WORKERS]; /* async, ssp with replicas: the step of each worker's last applied push */
  pending_pull *pending;
  int n_pending, cap_pending;
  int ckpt_pending;
  int64_t ckpt_step;
  char ckpt_dir[1024];
  zmq_msg_t ckpt_identity;
  uint64_t ckpt_request;
  ps_ckpt_done ckpt_done[PS_CKPT_DONE]; /* a ring of the checkpoints written since the last INIT */
  int64_t n_ckpt_done;
  int64_t ckpt_auto_from; /* the version of the last INIT or own write: the next own write is past it */
  char ckpt_fail[256];    /* why the last write failed */
  ps_ckpt_job *ckpt_job;  /* checkpoint.background: the checkpoint the writer thread is writing, or NULL */
  int ckpt_full_next;     /* a written delta's parent may be missing (a write failed): the next row file is full */
  float *scratch;
  ps_helper *helper; /* with training.ps_apply_threads = 2, made on first use */
  ps_view view;
  struct tfx_http *http;
  size_t scratch_size;
  struct {
    PS_STATS(PS_STAT_COUNTER)
    double busy_us; /* time spent handling messages (decode to reply sent) */
  } stats;
} ps_state;

/* Starts the helper thread; caller owns; free with ps__helper_destroy. NULL when no thread can be made. */
ps_helper *ps__helper_create(void);
/* Stops and frees the helper; NULL does nothing. */
void ps__helper_destroy(ps_helper *h);
/* Runs fn over [0, n) in chunks shared by this thread and the helper (all here when h is NULL); returns when
 * every chunk is done. ctx is borrowed until return; fn must be safe to run on two disjoint ranges at once. */
void ps__helper_run(ps_helper *h, ps_range_fn fn, void *ctx, size_t n);
/* Wraps a received frame (moved out of *frame, which is left empty) as a value buffer with one reference;
 * caller owns; release with ps__vbuf_release. NULL when out of memory (*frame is then untouched). */
vbuf *ps__vbuf_adopt(zmq_msg_t *frame);
/* A buffer of count floats with one reference; caller owns; release with ps__vbuf_release. NULL when out of
 * memory. */
vbuf *ps__vbuf_create(size_t count);
/* Drops one reference of a value buffer (also ZeroMQ's free callback of a reply sent in place). */
void ps__vbuf_release(void *data, void *hint);
/* Makes a shard's value buffer private (copy on write) before an update; -1 when out of memory. */
int ps__own_value(ps_state *p, shard *s);
/* Bytes of variable values held. */
size_t ps__bytes(const ps_state *p);
/* The shard with this key (borrowed), or NULL. */
shard *ps__find(ps_state *p, const char *key);
/* Replies to a pull of `worker` (-1: not a worker) with the values of the named shards (all if none named), sent in
 * place; with changed_only, non-trainable shards never assigned are left out; with since >= 0 (at most the version),
 * shards unchanged since that version are left out. Lazy tables are never sent whole: the rows of each want
 * (Envelope.want) are. */
int ps__send_values(ps_state *p, const zmq_msg_t *identity, uint64_t request_id, int worker, char **names,
                    size_t n_names, int changed_only, int64_t since, Tfx__Tensor *const *want, size_t n_want,
                    tfx_err *err);
/* The Envelope.since of a request as a version, or -1 when absent (or out of range). */
int64_t ps__since(const tfx_envelope *e);
/* Marks a shard changed by an update made now (see shard.changed). */
void ps__touch(ps_state *p, shard *s);
/* Replies to one part of a push-pull with the current values of the ranges it pushed (checked by the caller),
 * sent in place. */
int ps__send_ranges(ps_state *p, const tfx_inmsg *m, tfx_err *err);
/* A ps instance's state (state.c). */

/* The state's name as the logs and STATUS say it; static. */
const char *ps__state_name(ps_instance_state s);
/* Moves p to state `to` on event `id` (a log ID), logged once at `level` in the caller's words (printf format) with
 * the change ("[backup -> unreplicated]") when p was in another state. */
void ps__set_state(ps_state *p, ps_instance_state to, int level, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Event `id` that puts a copy BEHIND (never promoted), logged as ps__set_state does; any other state stays. */
void ps__fall_behind(ps_state *p, int level, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Whether p has had its INIT (p may be NULL). */
int ps__initialized(const ps_state *p);
/* Whether p serves workers: SERVING or UNREPLICATED. */
int ps__serves(const ps_state *p);
/* Whether p is a copy of another ps's instance that the master promoted: it serves that instance's workers. */
int ps__promoted(const ps_state *p);
/* Whether p is a copy not promoted: BACKUP or BEHIND. */
int ps__is_copy(const ps_state *p);
/* The state as the protocol's InstanceState says it. */
Tfx__InstanceState ps__wire_state(ps_instance_state s);
/* What STATUS says as "unreplicated": the instance has no backup (UNREPLICATED, or the own instance restarted as a
 * copy while its promoted backup serves it alone). */
int ps__reports_unreplicated(const ps_state *p);

/* The ps's decisions that need no socket (rules.c). */

/* Whether the experiment's training.mode is sync / ssp. */
int ps__is_sync(const ps_state *p);
int ps__is_ssp(const ps_state *p);
/* Whether a push is one of several messages of one push-pull (its tensors may then be element ranges). */
int ps__is_part(const tfx_envelope *e);
/* Whether a push completes a worker's step: a whole push, or the last part of one. */
int ps__completes_step(const tfx_envelope *e);
/* The slowest worker's clock (ssp). */
int64_t ps__min_clock(const ps_state *p);
/* The worker index of a request, or -1 for anyone else (the master's evaluation pulls are not clocked). */
int ps__worker_of(const tfx_envelope *e);
/* Whether a pull may be answered now: the version reached min_version and, in ssp, the worker is within
 * `staleness` steps of the slowest; never while a forward awaits the backup's acknowledgement (replicas). */
int ps__pull_ready(const ps_state *p, int64_t min_version, int worker);
/* Whether worker w already counts in the current sync step. */
int ps__sync_contributed(const ps_state *p, int w);
/* Starts sync counting and worker clocks afresh for n_workers workers (1 when out of range): a step takes
 * training.replicas_to_aggregate arrivals, or one per worker; every clock starts at the version. */
void ps__sync_start(ps_state *p, int n_workers);
/* What a sync push tagged with `step` from worker w is: ahead of the ps (an error), stale (an older step, or the
 * worker's second push of this step: dropped and counted) or fresh (accumulated). */
typedef enum ps_sync_verdict {
  PS_SYNC_VERDICT_FRESH,
  PS_SYNC_VERDICT_STALE,
  PS_SYNC_VERDICT_AHEAD,
} ps_sync_verdict;
ps_sync_verdict ps__sync_verdict(const ps_state *p, int64_t step, int w);
/* Counts worker w's arrival in the current sync step; 1 when it completes the step (replicas arrivals). */
int ps__sync_arrive(ps_state *p, int w);
/* The factor that averages a sync step's n_grads summed gradients (0 for none: every arrival was skipped). */
float ps__sync_scale(int n_grads);
/* Ends a sync step once applied: the version and pushes_applied move, and counting starts afresh. */
void ps__sync_end_step(ps_state *p);
/* Async and ssp with cluster.replicas 1: whether worker w's push tagged e->step was applied already (a push resent
 * after a failover; a worker's steps only grow), so it is dropped, not applied twice. */
int ps__async_duplicate(const ps_state *p, const tfx_envelope *e);
/* Records that worker w's push tagged e->step was applied (async and ssp). */
void ps__async_applied(ps_state *p, const tfx_envelope *e);
/* Moves worker w's clock (async and ssp: one push done); anyone else (w out of range) has none. */
void ps__clock_tick(ps_state *p, int w);
/* The parked-pull array's next capacity after cap, or 0 when it would pass PS_MAX_PARKED. */
int ps__park_capacity(int cap);
/* The version a push-pull's reply waits for: the step it completes (sync), or none (async, ssp: the latest). */
int64_t ps__push_pull_version(const ps_state *p, const tfx_envelope *e);
/* Whether a parked checkpoint is due: the version is at its step (in async and ssp: or past it). */
int ps__ckpt_due(const ps_state *p);
/* Whether an async push arrives after the run's last step (max_steps): nothing is applied, so two workers
 * finishing together do not take the ps one step past the end; the reply still carries the values. */
int ps__past_the_end(const ps_state *p, const tfx_envelope *e);

/* Parks a pull (or a push-pull's reply, changed_only) until the version reaches min_version (and, in ssp, the
 * worker is within the bound), when ps__service answers it, or its deadline passes. Copies what it keeps of m. */
int ps__park(ps_state *p, tfx_inmsg *m, int64_t min_version, int changed_only, tfx_err *err);
/* After an update: writes a parked checkpoint that became due, then answers parked pulls that became ready. */
void ps__service(ps_state *p);
/* At a multiple of checkpoint.every_steps (a primary, past the last INIT) writes that step's checkpoint files by
 * itself, so every multiple is written however fast the steps come; then answers the parked checkpoint request
 * from what was written, or writes it if the version reached its step (in async and ssp: or passed it). */
void ps__ckpt_service(ps_state *p);
/* Forgets the checkpoints written before a (re-)INIT at version: own writes start after it. */
void ps__ckpt_reset(ps_state *p);
/* Resets the sync accumulators and worker clocks for n_workers workers. */
void ps__sync_reset(ps_state *p, int n_workers);
/* MSG_PULL: answers now, or parks the request until its version (or the staleness bound) is reached. */
int ps__pull(ps_state *p, tfx_inmsg *m, tfx_err *err);
/* Whether a sync push must wait for a lower worker's push of its step (training.deterministic, every worker
 * aggregated): it is fresh and some worker below its own has not arrived yet. */
int ps__sync_hold(const ps_state *p, const tfx_envelope *e);
/* MSG_PUSH in worker order (training.deterministic): holds a push that came before a lower worker's (m is then
 * moved out and left empty), else pushes it and then every held push whose turn came (order.c). */
int ps__push_ordered(ps_state *p, tfx_inmsg *m, tfx_err *err);
/* Drops the held pushes, answering each with code and why (NULL: not answered, at shutdown). */
void ps__order_drop(ps_state *p, int code, const char *why);
/* MSG_PUSH: validates every tensor first, then accumulates (sync) or applies (async, ssp). */
int ps__push(ps_state *p, tfx_inmsg *m, tfx_err *err);
/* MSG_CHECKPOINT: answers at once for a step this ps has written, else writes the shard once the version
 * reaches the requested step. */
int ps__checkpoint_request(ps_state *p, tfx_inmsg *m, tfx_err *err);
/* Answers parked pulls whose deadline passed with TFX_EPEER. */
void ps__expire_pulls(ps_state *p);
/* Answers every parked pull with code and the text (TFX_ESTATE: re-initialization; TFX_EINTR: the run ended). */
void ps__fail_pending(ps_state *p, int code, const char *text);
/* Drops every parked pull (shutdown). */
void ps__drop_pending(ps_state *p);
/* Drops a parked checkpoint request unanswered (shutdown). */
void ps__ckpt_drop(ps_state *p);
/* Waits for the checkpoint the writer thread is writing, if any, and takes its result (re-INIT, shutdown). */
void ps__ckpt_finish(ps_state *p);
/* Takes the result of a checkpoint the writer thread finished; 1 if it did (the caller then runs ps__service). */
int ps__ckpt_poll(ps_state *p);
/* Whether the writer thread is writing a checkpoint of p (NULL: no). */
int ps__ckpt_writing(const ps_state *p);

/* Copies what the checkpoint of step into dir needs (dense values and slots, lazy rows: all, or a delta's) into
 * *out (caller owns; free with ps__snap_free) and marks the lazy tables at step; TFX_ENOMEM leaves p as it was. */
int ps__snap_take(ps_state *p, const char *dir, int64_t step, ps_snap **out, tfx_err *err);
/* Writes the copy's files (any thread: it reads only s): the shard (its path into path) and the row file. */
int ps__snap_write(const ps_snap *s, char *path, size_t n, ps_ckpt_sums *sums, tfx_err *err);
/* Logs the copy's lazy tables (PS-TABLE) with the row file's bytes and the write's milliseconds. */
void ps__snap_log(const ps_snap *s, const ps_ckpt_sums *sums, double ms);
/* Frees a copy; NULL does nothing. */
void ps__snap_free(ps_snap *s);
/* Frees the buffer misaligned gradients are copied into (shutdown). */
void ps__push_free_scratch(ps_state *p);

/* Restores every shard of p from the checkpoint of path (DIR/ps-K.shard; restore.c): this ps's own file, then,
 * for a plan of another ps count, the others (a shard's key and slice do not depend on the ps count); lazy tables
 * from the row files; sets the version to the checkpoint's step. TFX_ESHAPE names a shard that does not fit. */
int ps__restore_shards(ps_state *p, const char *path, tfx_err *err);

/* Replicas (replica.c, cluster.replicas 1): each ps holds its own instance and a mirror of the previous one. */

/* The state a request is for (Envelope.target): the own one or the mirror (borrowed); *out NULL for an INIT of
 * another instance (the caller makes the mirror). TFX_ESTATE naming the instance when this ps holds no copy. */
int ps__route(ps_state *own, const tfx_envelope *e, ps_state **out, tfx_err *err);
/* After the own instance's INIT with cluster.replicas 1: connects to the next ps on the ring (its backup). */
int ps__backup_open(ps_state *p, tfx_err *err);
/* Closes the backup link (shutdown, or lost). */
void ps__backup_close(ps_state *p);
/* Refuses what a state may not serve: a worker's request to a mirror not promoted, a forwarded push of an older
 * plan epoch (or to a promoted mirror, or to a primary). Counts stale epochs. */
int ps__gate(ps_state *p, const tfx_envelope *e, tfx_err *err);
/* Takes the backup's acknowledgements that arrived (one per forward, in order); an overdue one or a lost link
 * leaves the instance unreplicated. The caller serves the parked replies once none is pending. */
void ps__forward_acks(ps_state *p);
/* The backup is lost (why): the instance goes on unreplicated, with one log line. */
void ps__forward_fail(ps_state *p, const char *why);
/* Sync mode: adds the step about to be applied to the batch for the backup, as the primary summed it (the dense
 * sums, the rows looked up, a lazy table's summed rows in the order the sum lists them, values assigned this step,
 * and the number of gradients averaged); every cluster.replica_batch_steps steps the batch goes in one message, which
 * the backup applies step by step with the same code (ps__push, REPLICATE_STEPS), bit for bit, and acknowledges with
 * its version (p->acked). Replies do not wait for it: they tell the workers p->acked (ps__acked), and a worker keeps
 * its pushes until then. Without a backup: clears step_assigned. */
void ps__forward_step(ps_state *p);
/* Sync with a backup: folds worker push m's bytes (row ids and floats) into p->push_bytes, a moving average of
 * what a worker keeps per step for p (ps__ckpt_acks bounds the workers' memory by it), and notes a worker on a new
 * connection (p->catch_up_due: it may have restarted without the pushes it kept). */
void ps__keep_measure(ps_state *p, const tfx_inmsg *m);
/* Rows gathered into one buffer (ids, then width floats a row), n so far; ps__gather_row adds one (a rowtable
 * callback; ctx is the ps_row_gather, sized by the caller). */
typedef struct ps_row_gather {
  int64_t *ids;
  float *data;
  size_t n, width;
} ps_row_gather;
int ps__gather_row(int64_t id, const float *row, void *ctx);
/* Sends the steps batched so far to the backup (idle, before a snapshot, or when the batch is full). */
void ps__forward_flush(ps_state *p);
/* One more message sent to p's backup awaits its acknowledgement, due within cluster.request_timeout_s. */
void ps__forward_awaits(ps_state *p);
/* The sync steps a primary batches for its backup: cluster.replica_batch_steps, at least 1. */
int ps__batch_steps(const ps_state *p);
/* Whether replies and pulls must wait for the backup (flow control): while the versions its acknowledgements lack
 * reach ps__kept_steps (the pushes a worker keeps). */
int ps__forward_holds(const ps_state *p);
/* Whether p's backup is kept by acknowledged snapshots alone (sync; dense shards only, at most 16 MiB of them,
 * ps__log_steps, since each snapshot is a copy; every worker's push in each step; a sum the workers' resent pushes
 * rebuild bit for bit: training.deterministic or at most two workers; cluster.replica_batch_steps above 1 + the
 * optimizer's slots): no summed step goes to the backup; every cluster.replica_batch_steps steps the values and
 * slots do, and after a failover the workers' kept pushes replay the steps since (repbatch.c). */
int ps__snap_acks(const ps_state *p);
/* Whether p's lazy tables are plain (no max_rows, ttl_steps or admission) and checkpoint.fp16 is off, in sync mode:
 * a checkpoint then restores the primary's state bit for bit (and p has no dense snapshots, ps__log_steps 0). */
int ps__tables_plain(const ps_state *p);
/* Whether p's backup is kept by the primary's checkpoints alone (sync; plain lazy tables, ps__tables_plain; the
 * workers' resent pushes rebuild each step as with ps__snap_acks; checkpoint.every_steps from 1 to
 * TFX_REPLICA_CKPT_STEPS_MAX; the backup reads the checkpoint's files, else it is sent the whole state once and the
 * summed steps after it): nothing goes to the backup but the news of each checkpoint, which it answers, and after a
 * failover it loads that checkpoint and the workers' kept pushes replay the steps since. */
int ps__ckpt_acks(const ps_state *p);
/* The steps a primary may run ahead of its backup's acknowledgement (the pushes a worker keeps): in sync 2 x
 * cluster.replica_batch_steps + 2, and, ps__ckpt_acks, 1.5 x checkpoint.every_steps more (the next checkpoint's
 * write and its acknowledgement may take half an interval before replies wait); in async and ssp 2 x
 * PS_SNAP_MAX_PUSHES + 2. */
int64_t ps__kept_steps(const ps_state *p);
/* The acknowledgement a reply of p to `worker` carries (sync with replicas: the version below which the backup holds
 * every step; async and ssp: 1 + the worker's last push the backup holds; all when p has no backup), written into
 * *buf, or NULL (no replicas, or not a worker). Borrows buf. */
Tfx__Since *ps__acked(const ps_state *p, int worker, Tfx__Since *buf);
/* Whether p's backup is kept by acknowledged snapshots in async and ssp mode (upstream backup): every
 * cluster.replica_batch_steps pushes (and when idle) the primary sends its values, slots, the rows touched since the
 * last snapshot and each worker's last push; each worker keeps its pushes until a reply says the backup holds them
 * (ps__acked), and resends them to a promoted backup, which drops those it holds (ps__async_duplicate). No push
 * waits for the backup. */
int ps__async_snaps(const ps_state *p);
/* Whether worker push e (answered; stale: the sync step it was for had passed) counts in the instance's ledger: a
 * worker's whole push (or the last part of one), once. A stale sync push where every worker counts in each step is
 * a resend the instance holds already (a failover): not again. */
int ps__ledger_counts(const ps_state *p, const tfx_envelope *e, int stale);
/* Async and ssp with a backup: sends the next acknowledged snapshot when none awaits its acknowledgement and, since
 * the last one, cluster.replica_batch_steps pushes went and their bytes reached PS_SNAP_COST times the last
 * snapshot's (so snapshots cost at most ~1/PS_SNAP_COST of the pushes' traffic: a table's touched rows outweigh
 * a dense shard's), or PS_SNAP_MAX_PUSHES pushes went, or (idle) any. */
void ps__async_snapshot(ps_state *p, int idle);
#define PS_SNAP_COST 8
/* The most pushes between two async snapshots: what a worker keeps for one ps is bounded by 2 x this. */
#define PS_SNAP_MAX_PUSHES 512
/* Sync with a backup: tells it that this instance's files of the checkpoint of step are complete (REPLICATE_CHECKPOINT),
 * so it may drop the steps below step from its log. A failed send loses the backup (ps__forward_fail). */
void ps__forward_ckpt(ps_state *p, int64_t step);
/* Frees the steps batched and not sent (the backup link closed). */
void ps__batch_free(ps_state *p);
/* A backup's log of forwarded steps (replog.c; the primary's side of snapshots: replica.c; ps__log_steps: rules.c). */

/* The steps between snapshots of an instance (its sums held meanwhile, at most 64 MiB of dense ones, or a batch of
 * cluster.replica_batch_steps when larger): 0 with a lazy table, or shards too large (every step is then applied once
 * the own replies went, and no snapshot is sent: on the Debian LR the rows touched since a snapshot, with their
 * slots, cost the backup more than applying the steps, measured by bench/replicas, bench/README.md). */
int ps__log_steps(const ps_state *p);
/* Steps held in p's log (p may be NULL): the state's version plus this is the step the primary forwarded. */
int ps__log_pending(const ps_state *p);
/* Keeps a forwarded step (its envelope and frames moved out of m; m keeps its identity) in the log; past the
 * log's bound the oldest is applied. */
void ps__log_hold(ps_state *p, tfx_inmsg *m);
/* Applies the oldest held steps, in order, until `keep` are left (p may be NULL); a stale state loads its checkpoint
 * first (PS-BACKUP-REPLAY names the step loaded and the steps replayed; a load that fails marks it behind). */
void ps__log_apply(ps_state *p, int keep);
/* Whether p's log is kept until a checkpoint holds it: sync, lazy tables without max_rows, ttl_steps or admission,
 * checkpoint.fp16 off (a checkpoint then restores the primary's state bit for bit); such a log is bounded by bytes
 * (64 MiB) instead of messages, and applied past that. */
int ps__log_until_ckpt(ps_state *p);
/* The primary's checkpoint of step is complete: drops the log's steps below it (if step ends a held batch, or, acked
 * (ps__ckpt_acks), the log is empty and step is past the version, and its shard file is in this ps's run
 * directory); the state is then that checkpoint and the rest of the log, loaded and replayed by ps__log_apply.
 * Returns the messages dropped. */
int ps__log_checkpoint(ps_state *p, int64_t step, int acked);
/* Applies what the log may not keep now: all of an instance without snapshots, the steps past the bound else. */
void ps__log_trim(ps_state *p);
/* Frees the log unapplied (re-initialization, shutdown). */
void ps__log_free(ps_state *p);
/* A snapshot from the primary: replaces the values and slots of the shards it names and drops the held steps it
 * holds. TFX_ESTATE (nothing changed) when it does not fit this backup or its step. */
int ps__log_snapshot(ps_state *p, const tfx_inmsg *m, tfx_err *err);
/* Rows of lazy tables for a new backup (REPLICATE_ROWS): stored whole, values and slots. TFX_ESTATE when a tensor
 * does not fit. */
int ps__log_rows(ps_state *p, const tfx_inmsg *m, tfx_err *err);
/* Sends a new backup the whole state of p (values, slots, lazy rows, version, worker clocks): *bytes gets the
 * bytes of values streamed. Later forwards follow it on the same link, in order. */
int ps__forward_full(ps_state *p, size_t *bytes, tfx_err *err);
/* Primary, after a sync step was applied: every ps__log_steps steps, sends the snapshot (copied, not answered);
 * with ps__snap_acks, every cluster.replica_batch_steps steps (or at once after values were assigned), answered. */
void ps__forward_snapshot(ps_state *p);
/* ps__snap_acks: sends the values and slots at the current version, answered with the backup's version (an
 * acknowledgement the replies pass on); a failed send loses the backup (ps__forward_fail). */
void ps__snap_ack_send(ps_state *p);
/* Sends what p's backup lacks now (idle, or before a checkpoint): the steps batched, or, ps__snap_acks, a snapshot
 * when the version moved since the last; p may be NULL. */
void ps__forward_catch_up(ps_state *p);
/* A sync step that has not completed for this long is a stall (a worker died or left), not a pause. */
#define PS_STALL_MS 300
/* The ps is idle: ps__forward_catch_up, and, ps__ckpt_acks with steps past the backup's checkpoint and no step
 * for PS_STALL_MS (a worker that died lost the pushes it kept for them), the values, slots and rows touched since
 * that checkpoint in one acknowledged snapshot, so no replay needs those pushes; p may be NULL. */
void ps__forward_idle(ps_state *p);
/* MSG_REREPLICATE: the primary of the instance (its own, or a promoted copy) takes ps Envelope.rereplicate.to_ps
 * as its backup (just INIT'd empty there) and streams it its whole state; replies with the step. */
int ps__rereplicate(ps_state *p, const tfx_inmsg *m, tfx_err *err);
/* MSG_PROMOTE: the mirror becomes its instance's primary at the message's plan epoch; replies with the step. */
int ps__promote(ps_state *p, const tfx_inmsg *m, tfx_err *err);

/* Lazy tables (lazy.c): embedding tables held row by row (ps/rowtable.h), pushed and pulled by rows only. */

/* Makes shard s a lazy table from its plan entry (count 0, an empty value buffer); TFX_EPROTO for a bad entry. */
int ps__lazy_make(ps_state *p, shard *s, const Tfx__Shard *m, tfx_err *err);
/* Frees a lazy shard's tables; a dense shard is left alone. */
void ps__lazy_free(shard *s);
/* Checks a pushed tensor (or a requested one, with nbytes 0) against a lazy shard: rows given, each an id this
 * ps holds, ascending and unique, and nbytes of that many rows. Names the table and the id. */
int ps__lazy_check(const shard *s, const Tfx__Tensor *t, tfx_err *err);
/* Applies a row-sparse gradient to the listed rows at once (async); -1 when out of memory. */
int ps__lazy_apply(ps_state *p, shard *s, const float *g, const Tfx__Tensor *t);
/* Adds a row-sparse gradient into the sync step's summed rows; -1 when out of memory. */
int ps__lazy_accumulate(shard *s, const float *g, const Tfx__Tensor *t);
/* Applies the sync step's summed rows, scaled, to the table and empties the sum; -1 when out of memory. */
int ps__lazy_apply_accumulated(ps_state *p, shard *s, float scale);
/* Empties a lazy shard's sync sum (a new step, or a reset). */
void ps__lazy_clear_sum(shard *s);
/* The values of the requested rows (t->rows), into out (n_rows x row width floats; rows never touched read as
 * their initial values and are not stored). */
void ps__lazy_gather(const shard *s, const Tfx__Tensor *t, float *out);
/* Writes the rows of the ps's lazy tables (values and slots) as dir/ps-K.rows, streamed (store/rowfile.h); *crc and
 * *bytes get the file's checksum and size, both 0 when the ps holds no lazy table (no file). */
int ps__lazy_save(ps_state *p, const char *dir, int64_t step, uint32_t *crc, uint64_t *bytes, tfx_err *err);
/* The step the row file of the checkpoint of step into dir is a delta of, or -1 for a full one. */
int64_t ps__lazy_parent(const ps_state *p, const char *dir, int64_t step);
/* Restores every lazy table of the ps from the row files of checkpoint dir (as its manifest lists them, written
 * by any number of ps): each row whose id this ps holds (id % mod_n == mod_r), bit for bit. */
int ps__lazy_restore(ps_state *p, const char *dir, tfx_err *err);
/* Rows stored and bytes held by the lazy tables of the ps. */
void ps__lazy_usage(const ps_state *p, size_t *rows, size_t *bytes);

#endif
