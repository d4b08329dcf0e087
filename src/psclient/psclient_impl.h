/* Declarations private to src/psclient: the client's links to the ps and the slots mapped onto model variables
 * (psclient.c), which the row pulls of lazy tables (rows.c) read. One thread uses a client. */
#ifndef TFX_PSCLIENT_IMPL_H
#define TFX_PSCLIENT_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "net/net.h"
#include "nn/model.h"
#include "psclient/psclient.h"

typedef struct slot {
  char key[128];
  tfx_var *var;
  size_t offset, count; /* in floats */
  int64_t row_begin, row_end;
  int fresh; /* set by the last reply */
  int64_t shape[4];
  int rank;
  int lazy; /* a lazy table: this ps holds ids % mod_n == mod_r, pulled and pushed by rows only */
  int64_t mod_n, mod_r;
  int64_t mod_mask; /* lazy: mod_n - 1 when mod_n is a power of two (the id test without a division), else -1 */
  int64_t *ids; /* lazy: this step's ids of this ps (pull wants, push rows), grown as needed */
  float *rows;  /* lazy: their gradient rows, gathered for a push */
  uint32_t *grad_at; /* lazy: where each of those ids is among the variable's gradient rows */
  size_t ids_cap;
  int64_t *want_ids; /* lazy: the lent batch's ids of this ps (a row pull's wants), grown as needed */
  uint32_t *want_at; /* lazy: the row of each among the variable's batch_ids (where its reply row goes) */
  size_t want_cap;
  Tfx__Tensor want; /* lazy: the row request for want_ids (a row pull's or a push-pull's) */
} slot;

/* A range of one slot's values that travels in one part of a push-pull. */
typedef struct part_unit {
  int slot;
  size_t offset, count; /* in floats, within the slot */
} part_unit;

/* A push kept until the ps's backup holds its step (keep.c): its tensors' descriptions and bytes, copied. */
typedef struct kept_push {
  int64_t step;
  size_t n, cap_n;
  Tfx__Tensor *metas; /* rows point into mem; names and shapes borrowed from the link's slots */
  tfx_payload *pl;    /* point into mem */
  char *mem;
  size_t cap_mem;
} kept_push;

/* A link's request, as one state changed only by psclient__link_state (each change logged once, at debug level
 * but for a request lost with its ps):
 *   IDLE --a pull, push-pull or row pull sent--> WAITING --its reply taken--> IDLE
 *   WAITING --relinked to another ps (a failover, the chief's routes)--> LOST --sent again there--> WAITING */
typedef enum link_state {
  LINK_IDLE,    /* no request of its own out */
  LINK_WAITING, /* a pull, push-pull or row pull went out and its reply was not taken yet */
  LINK_LOST,    /* relinked while waiting: its request went to the lost ps, to be sent again (send_lost) */
} link_state;

typedef struct ps_link {
  tfx_client *client;
  part_unit *units; /* push-pull in parts: message j holds units part_first[j] .. part_first[j + 1] - 1 */
  int *part_first;
  int n_units, n_parts;
  int64_t *unit_len;
  tfx_inmsg held; /* the last reply: whole-variable values are used in place from its frames */
  slot *slots;
  int n;
  Tfx__Tensor *metas;
  Tfx__Tensor **ptrs;
  tfx_payload *payloads;
  int n_push;
  int64_t since; /* the version as of which the variables hold every value of this ps (last reply), or -1 */
  int row_pull;  /* a row pull (tfx_psclient_pull_rows) was sent and awaits its reply */
  link_state state; /* its request's; changed only by psclient__link_state */
  int at;        /* the ps serving this plan instance: its own index, or the next on the ring after a failover */
  int moved;     /* failed over at least once: only a lost link moves it again (a backup refuses until promoted) */
  int target;    /* Envelope.target of its requests: instance + 1 with replicas, else 0 */
  unsigned seen; /* the link's disconnections when it was (re)made or last answered */
  kept_push *kept; /* replicas, sync: pushes whose step the backup may not hold yet, oldest first (keep.c) */
  int n_kept, cap_kept;
  int acks; /* the last reply told the backup's acknowledgement (Envelope.acked): pushes are kept */
  uint64_t pushes_acked; /* the pushes this instance answered (the ledger; resent kept pushes not again) */
  int64_t acked_step;    /* the step of the last push counted in pushes_acked (valid once acked_any) */
  int acked_any;
  int not_applied; /* the last values reply said its push was not applied (past max_steps) */
} ps_link;

struct tfx_psclient {
  ps_link *ps;
  int n_ps;
  int timeout_ms;
  uint64_t bytes;
  uint64_t row_bytes; /* rows of lazy tables pulled since the last pull or push-pull (counted into its bytes) */
  const tfx_cluster *cluster; /* borrowed: where each ps is */
  int replicas;               /* cluster.replicas 1: a lost ps's requests go to its backup (failover.c) */
  uint64_t resent;            /* replicas: kept pushes sent again to a promoted backup (keep.c) */
  int64_t sent_step;          /* the last push-pull's step and rows flag (to send it again after a failover) */
  int sent_rows;
  int (*abort)(void *); /* nonzero: stop waiting for replies (tfx_psclient_set_abort), with its context */
  void *abort_ctx;
  int aborted; /* what the abort predicate last answered to end a wait (TFX_PSCLIENT_ABORT_*) */
};

/* Whether this slot's ps holds id (its share of the ids and its range): the test every id of every batch takes
 * per ps, so a power-of-two ps count spares it a 64-bit division. */
static inline int psclient__holds(const slot *s, int64_t id) {
  int64_t r = s->mod_mask >= 0 ? id & s->mod_mask : id % s->mod_n;
  return (r == s->mod_r) & (id >= s->row_begin) & (id < s->row_end); /* no branch: callers count with it */
}
/* Fills the row requests of link l for the lent batch (at most cap; wants[k] and names[k] point into the slots,
 * valid until the next fill), *n_out how many; TFX_ENOMEM naming the table when memory runs out. */
int psclient__fill_wants(ps_link *l, Tfx__Tensor **wants, char **names, size_t cap, size_t *n_out, tfx_err *err);
/* Takes one reply tensor of rows (t, its slot s, its frame data/size) into the batch's rows of its table, checked
 * against what was asked (TFX_ESHAPE naming the ps and the table otherwise). */
int psclient__take_row_tensor(tfx_psclient *c, ps_link *l, const Tfx__Tensor *t, slot *s, const void *data,
                              size_t size, tfx_err *err);
/* The i-th tensor of a reply: its slot on link l (NULL if unknown) and its bytes (*data, *size; none when it has
 * no frame), advancing *part over the data frames. */
slot *psclient__reply_tensor(ps_link *l, const tfx_inmsg *m, size_t i, int *part, const void **data, size_t *size);

/* Failover (failover.c, cluster.replicas 1). */

/* Before a request on link p: a link at its own ps whose connection dropped moves to the backup first. */
int psclient__ready(tfx_psclient *c, int p, tfx_err *err);
/* After link p's reply failed with rc: with replicas, moves a lost (or emptied) ps's link to its backup, or waits
 * a little for the master to promote it, and returns 1 when the request should be sent again (until *deadline,
 * set on the first call from 0); 0 to give up with rc (at once when the client's abort predicate asks to stop). */
int psclient__failover(tfx_psclient *c, int p, int rc, int64_t *deadline);
/* The link of `left` (at most 64) whose reply came or whose connection dropped first, waiting up to the client's
 * timeout; the first of `left` when none did (its receive then fails as it would), -1 when none is left. With
 * replicas a link that failed over sends its kept pushes again, each answered only once every worker sent it: a
 * worker that waited on another link in order could hold back a step the others wait for there. -2 when the
 * client's abort predicate asked to stop waiting. */
int psclient__next_reply(tfx_psclient *c, const char *left);
/* Moves link l's request to state `to` (why: the event), logged once: a request lost with its ps at warn level,
 * every other change at debug. */
void psclient__link_state(ps_link *l, link_state to, const char *why);
/* A request sent on link l (rc: the send's outcome): WAITING when it went out, else IDLE. */
void psclient__link_sent(ps_link *l, int rc);
/* Points link p at ps `at` (a new DEALER); its values are taken whole from the next reply. */
int psclient__relink(tfx_psclient *c, int p, int at, tfx_err *err);

/* The pushes kept for a backup (keep.c, cluster.replicas 1). */

/* Keeps a copy of link l's push of `step` (its n tensors and payloads, borrowed) when its ps tells
 * acknowledgements and it is not kept already; TFX_ENOMEM naming the step and the ps when memory runs out. */
int psclient__keep(ps_link *l, int64_t step, Tfx__Tensor *const *ptrs, const tfx_payload *pl, int n, tfx_err *err);
/* Drops the pushes of l that reply (borrowed) says the backup holds: below reply->acked, or all without it. */
void psclient__acked(ps_link *l, const tfx_envelope *reply);
/* After link p failed over: sends its kept pushes of steps below `below` (INT64_MAX: all) again, oldest first,
 * with those of every link that failed over to the same ps, step by step across the links (each step's replies
 * taken before the next goes; waiting for the promotion as psclient__failover does); logs PSCLIENT-RESEND. */
int psclient__resend(tfx_psclient *c, int p, int64_t below, tfx_err *err);
/* Frees the pushes kept on l. */
void psclient__keep_free(ps_link *l);

#endif
