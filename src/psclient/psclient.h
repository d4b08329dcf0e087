/* The client side of the parameter-server protocol, shared by workers (pull, push) and the master (pull for
 * evaluation): maps each shard of the placement plan onto a model variable (axis-0 slices are contiguous row
 * ranges, so a slice is a byte range of the variable) and talks to every ps in parallel: requests go out to
 * all of them first, then the replies are collected. Owned by one thread. */
#ifndef TFX_PSCLIENT_H
#define TFX_PSCLIENT_H

#include <stdint.h>

#include "config/cluster.h"
#include "net/wire.h"
#include "nn/model.h"

typedef struct tfx_psclient tfx_psclient;

/* Connects to every ps of the cluster and maps the plan's shards onto the model's variables (model borrowed;
 * must outlive the client). Caller owns *out; free with tfx_psclient_destroy. TFX_ESHAPE when a shard does
 * not fit its variable. */
int tfx_psclient_create(const tfx_cluster *cluster, Tfx__Shard *const *shards, size_t n_shards, tfx_model *model,
                        int timeout_ms, tfx_psclient **out, tfx_err *err);
/* Closes every socket and frees the client; NULL does nothing. */
void tfx_psclient_destroy(tfx_psclient *c);
/* Pulls every shard at version >= min_version into the model's values; *version gets the smallest version. */
int tfx_psclient_pull(tfx_psclient *c, int64_t min_version, int64_t *version, tfx_err *err);
/* How many steps apart the ps answered the last pull: in sync 0, or 1 when a worker died between its pushes of a
 * step (only the push of its successor completes it), or more while the chief rolls them back one at a time. */
int64_t tfx_psclient_steps_apart(const tfx_psclient *c);
/* Pulls into each lazy table the rows the model's current batch touches (the variables' `rows`, set when the
 * batch is lent), from the ps holding each id: bytes on the wire grow with the ids, never with the table. */
int tfx_psclient_pull_rows(tfx_psclient *c, tfx_err *err);
/* Whether the plan placed a lazy table (then the model reads each batch's rows, TFX_ROWS_BATCH, which
 * tfx_psclient_pull_rows or a push-pull fills). */
int tfx_psclient_has_lazy(const tfx_psclient *c);
/* Pushes the grads tagged `step` and receives the updated values in the same round trip: at version >= step+1
 * in sync mode (the ps answers once the step is applied), the latest otherwise. *version as in pull. */
int tfx_psclient_push_pull(tfx_psclient *c, int64_t step, int64_t *version, tfx_err *err);
/* The first half of tfx_psclient_push_pull: sends the grads tagged `step` to every ps; with rows = 1 each
 * request also asks for the rows of the lazy tables that the batch now lent to the model touches (its
 * batch_ids: the next step's batch), which come back in the same reply, read at the version it carries (in sync
 * mode once the step is applied: the rows a row pull would get after it). Follow with tfx_psclient_push_recv
 * before any other call. */
int tfx_psclient_push_send(tfx_psclient *c, int64_t step, int rows, tfx_err *err);
/* The second half: receives every reply of tfx_psclient_push_send, the values into the model and the rows into
 * the lent batch's rows of each lazy table; *version as in pull. */
int tfx_psclient_push_recv(tfx_psclient *c, int64_t *version, tfx_err *err);
/* From now on, a push-pull to a ps whose values (all dense and trainable) hold at least 4 x part_bytes travels
 * in equal parts of about part_bytes, each answered with its updated range as soon as the ps applied it, so
 * transfer and update overlap (async and ssp only; 0: off). */
int tfx_psclient_use_parts(tfx_psclient *c, size_t part_bytes, tfx_err *err);
/* cluster.replicas 1 (on): each ps's shards have a backup on the next ps. A request whose ps is lost (its link
 * dropped, or it came back empty) is sent again to the backup, waiting (up to the client's deadline) until the
 * master promoted it; push-pulls then never travel in parts. Call right after create. */
void tfx_psclient_set_replicas(tfx_psclient *c, int on);
/* What an abort predicate answers: go on waiting (0), stop (a signal, STOP), or give up on the ps's reply because
 * the chief rolled every ps back (a kept push resent to a backup that will never be promoted). */
#define TFX_PSCLIENT_WAIT 0
#define TFX_PSCLIENT_ABORT_STOP 1
#define TFX_PSCLIENT_ABORT_ROLLBACK 2
/* From now on a wait for push-pull replies, and a failover, end once abort(ctx) is nonzero (asked every 50 ms while
 * waiting): with TFX_EINTR when it says stop (a worker told to stop does not wait out a reply that a stopped peer
 * holds back), with TFX_ESTATE when it says the chief rolled the ps back. */
void tfx_psclient_set_abort(tfx_psclient *c, int (*abort)(void *ctx), void *ctx);
/* Between requests (a worker waiting at max_steps): a link whose ps was lost moves to its backup and sends it the
 * pushes it kept, so the promoted copy holds every push the lost ps answered. TFX_OK when nothing was lost. */
int tfx_psclient_resend_lost(tfx_psclient *c, tfx_err *err);
/* Drops every push kept for a backup (the chief rolled every ps back: the steps since are trained again); returns
 * how many. */
int tfx_psclient_drop_kept(tfx_psclient *c);
/* Sends plan instance p's requests to ps `at` from now on (the master's routes after a failover). */
int tfx_psclient_route(tfx_psclient *c, int p, int at, tfx_err *err);
/* How many parts a push-pull to ps `ps` is sent in (0: one whole message). */
int tfx_psclient_parts(const tfx_psclient *c, int ps);
/* The pushes ps instance `instance` answered (each once, whichever ps served it; kept pushes sent again after a
 * failover not counted again): the worker's side of the run's ledger. */
uint64_t tfx_psclient_pushes_acked(const tfx_psclient *c, int instance);
/* Bytes moved by the last pull and push. */
uint64_t tfx_psclient_bytes(const tfx_psclient *c);

#endif
