/* tfx-node serve: TensorFlow Serving's REST API over a run's newest checkpoint (or an export).
 *
 * Request parsing (serve_request.c): a predict body {"instances": [...]} becomes a dataset exactly as the run's
 * readers make one, so the scorer (scorer.h) answers what `predict` answers. An instance is a dense list of raw
 * values (scaled as training scales them), a LibSVM line (a string, its label optional), or, for a model with
 * feature columns, an object keyed by column name (a list value is a bag, joined by the column's separator); LibSVM
 * lines and objects go through the run's own LibSVM and CSV readers, from memory (memfd).
 * Batching (serve_batch.c): one thread owns the scorer; requests that arrive within a short wait of each other are
 * joined into one batch; a new scorer (a newer checkpoint) is swapped in between batches.
 *
 * Ownership: as each prototype says. Thread-safety: parsing is pure (any thread); a queue is shared by the HTTP
 * thread (submit) and its scorer thread. Errors: TFX_EINVAL naming the instance and what is wrong (a 400),
 * TFX_ENOMEM, TFX_ESYS. */
#ifndef TFX_CLI_SERVE_H
#define TFX_CLI_SERVE_H

#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/scorer.h"
#include "config/config.h"
#include "data/dataset.h"

#define TFX_SERVE_MAX_INSTANCES 10000         /* instances in one request */
#define TFX_SERVE_MAX_BODY (64u * 1024 * 1024) /* bytes of one request body (larger: 413) */
/* JSON values in a body that is not a valid dense request, before json-c parses it (more: 400); a model of feature
 * columns may take more (serve_request.c). */
#define TFX_SERVE_MAX_JSON_VALUES ((size_t)1 << 20)

/* The model's name in URLs (/v1/models/NAME) into out (n bytes): the experiment's name, else the basename of dir
 * (the run or export directory). */
void tfx_serve_model_name(const tfx_config *cfg, const char *dir, char *out, size_t n);

#define TFX_SERVE_MAX_TOP_K 1000 /* a request's "top_k": the most labels answered per instance */

/* Parses a predict body (len bytes, not NUL-terminated) for the model of cfg taking dim dense inputs into a dataset
 * of its instances, and its optional "top_k" K into *top_k (0 without one; NULL: refused): the answer is then each
 * instance's K highest-scoring labels (a retrieval model's items: examples/debian_two_tower.json scores the query
 * tower's output against every row of its item table) instead of every probability; caller owns *out; free with
 * tfx_dataset_destroy. TFX_EINVAL naming what is wrong: not JSON, truncated JSON, no "instances" list, none or more
 * than TFX_SERVE_MAX_INSTANCES, more JSON values than such a request holds (counted before json-c builds them),
 * mixed forms, a form the model does not read, a vector of the wrong width, a value that is not a finite number, an
 * unknown column, a line the reader refuses, a top_k that is not an integer in 1..TFX_SERVE_MAX_TOP_K. */
int tfx_serve_parse(const tfx_config *cfg, size_t dim, const char *body, size_t len, tfx_dataset **out, int *top_k,
                    tfx_err *err);
/* Joins n datasets parsed for one model (same width and fields) into one, in order; caller owns *out; the parts
 * are borrowed. */
int tfx_serve_join(tfx_dataset *const *parts, int n, tfx_dataset **out, tfx_err *err);

/* One request waiting for its predictions. The submitter fills data (the queue takes it) and done/ctx; the scorer
 * thread fills the rest and then calls done(job, ctx) (on its own thread), after which the submitter owns the job
 * again: free its probs with free() and the job as it allocated it. */
typedef struct tfx_serve_job {
  tfx_dataset *data;
  void (*done)(struct tfx_serve_job *job, void *ctx);
  void *ctx;
  float *probs;  /* [data->n, classes] on success */
  size_t classes;
  int64_t step;  /* the checkpoint the predictions were computed at */
  int top_k;     /* the request's top_k (0: every probability is answered) */
  int rc;        /* TFX_OK, or the error (message in error) */
  char error[256];
  struct tfx_serve_job *next;
} tfx_serve_job;

typedef struct tfx_serve_queue tfx_serve_queue;

/* Starts the scorer thread over s (the queue takes it on success): requests are joined into batches of up to
 * max_batch instances (a larger request is a batch of its own; 1: no joining), a batch waits up to wait_us
 * microseconds for more requests once the first arrives (0: never waits). Caller owns
 * *out; stop with tfx_serve_queue_destroy. */
int tfx_serve_queue_create(tfx_scorer *s, int max_batch, int wait_us, tfx_serve_queue **out, tfx_err *err);
/* Queues job (its data taken); done is called once, on the scorer thread, or now with rc TFX_EPEER once the queue
 * is stopping. */
void tfx_serve_queue_submit(tfx_serve_queue *q, tfx_serve_job *job);
/* Hands the scorer thread a newer scorer (taken), swapped in before its next batch: a batch is computed wholly at
 * one checkpoint. */
void tfx_serve_queue_swap(tfx_serve_queue *q, tfx_scorer *next);
/* The step of the scorer that answers the next batch (the newest handed over). */
int64_t tfx_serve_queue_step(tfx_serve_queue *q);
/* Batches scored and the instances they held so far. */
void tfx_serve_queue_counts(tfx_serve_queue *q, uint64_t *batches, uint64_t *instances);
/* Stops taking jobs, fails those waiting (done with TFX_EPEER) and joins the thread; the queue stays valid for
 * late submits (failed at once) until destroyed. */
void tfx_serve_queue_stop(tfx_serve_queue *q);
/* Stops (if not yet) and frees the queue and its scorers; NULL does nothing. */
void tfx_serve_queue_destroy(tfx_serve_queue *q);


/* The header deadline (serve_deadline.c): each request's headers must be in within TFX_SERVE_HEADER_MS of its
 * connection's start (or of its previous request's end), else the connection is shut down (SERVE-HEADER-TIMEOUT):
 * MHD's own timeout is one of inactivity, which a client trickling its headers (slowloris) never meets. */
#define TFX_SERVE_HEADER_MS 10000
typedef struct tfx_serve_deadlines tfx_serve_deadlines;

/* Starts the watcher thread that shuts down connections past their headers' due time; caller owns *out; free
 * with tfx_serve_deadlines_destroy, after the MHD daemon it watches has stopped. */
int tfx_serve_deadlines_create(int64_t limit_ms, tfx_serve_deadlines **out, tfx_err *err);
/* Stops the watcher and frees d; NULL does nothing. */
void tfx_serve_deadlines_destroy(tfx_serve_deadlines *d);
/* MHD_OPTION_NOTIFY_CONNECTION's callback (cls: the tfx_serve_deadlines): a connection's record made and dropped. */
void tfx_serve_deadlines_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                                enum MHD_ConnectionNotificationCode code);
/* Marks connection c's headers in (headers_in 1: its request is answered) or due again (0: its request ended). */
void tfx_serve_deadlines_mark(tfx_serve_deadlines *d, struct MHD_Connection *c, int headers_in);
/* The connections shut down so far for their headers. */
uint64_t tfx_serve_deadlines_closed(tfx_serve_deadlines *d);

/* The HTTP side (serve_http.c, libmicrohttpd on its own thread): POST /v1/models/NAME:predict, GET /v1/models/NAME
 * (state and the step served), GET /metrics (Prometheus). A predict request is parsed on the HTTP thread, its
 * connection suspended while the queue scores it, and answered when the scorer thread calls back. */
typedef struct tfx_serve_http tfx_serve_http;

/* Serves model `name` over queue q (borrowed until tfx_serve_http_stop) on host:port, parsing requests for the model
 * of cfg with dim dense inputs (cfg copied). Caller owns *out; stop with tfx_serve_http_stop. */
int tfx_serve_http_start(const char *host, int port, const char *name, const tfx_config *cfg, size_t dim,
                         tfx_serve_queue *q, tfx_serve_http **out, tfx_err *err);
/* Records the model handed to the queue: its step and when its checkpoint was written (Unix seconds). */
void tfx_serve_http_model(tfx_serve_http *h, int64_t step, double written_at);
/* Counts a newer checkpoint that could not be loaded (the old model serves on). */
void tfx_serve_http_swap_failed(tfx_serve_http *h);
/* Stops accepting, stops the queue (waiting requests are answered 503) and the server, and frees h; NULL does
 * nothing. The queue stays the caller's. */
void tfx_serve_http_stop(tfx_serve_http *h);

#endif
