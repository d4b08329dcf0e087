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
  int64_t *ids; /* lazy: this step's ids of this ps (pull wants, push rows), grown as needed */
  float *rows;  /* lazy: their gradient rows, gathered for a push */
  size_t ids_cap;
  Tfx__Tensor want; /* lazy: the pull's request for those ids */
} slot;

/* A range of one slot's values that travels in one part of a push-pull. */
typedef struct part_unit {
  int slot;
  size_t offset, count; /* in floats, within the slot */
} part_unit;

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
  int at;        /* the ps serving this plan instance: its own index, or the next on the ring after a failover */
  int target;    /* Envelope.target of its requests: instance + 1 with replicas, else 0 */
  unsigned seen; /* the link's disconnections when it was (re)made or last answered */
} ps_link;

struct tfx_psclient {
  ps_link *ps;
  int n_ps;
  int timeout_ms;
  uint64_t bytes;
  uint64_t row_bytes;    /* rows of lazy tables pulled since the last pull or push-pull (counted into its bytes) */
  uint64_t cached_rows;  /* rows pulled since the copies of lazy tables were last dropped */
  tfx_model *lazy_model; /* the model whose lazy tables the row pulls fill */
  const tfx_cluster *cluster; /* borrowed: where each ps is */
  int replicas;               /* cluster.replicas 1: a lost ps's requests go to its backup (failover.c) */
};

/* Selects into s->ids the ids of the variable's `rows` that this ps holds (and, with grads, gathers their
 * gradient rows into s->rows); returns how many, or -1 when memory runs out. */
long psclient__lazy_select(slot *s, int grads);
/* The i-th tensor of a reply: its slot on link l (NULL if unknown) and its bytes (*data, *size; none when it has
 * no frame), advancing *part over the data frames. */
slot *psclient__reply_tensor(ps_link *l, const tfx_inmsg *m, size_t i, int *part, const void **data, size_t *size);

/* Failover (failover.c, cluster.replicas 1). */

/* Before a request on link p: a link at its own ps whose connection dropped moves to the backup first. */
int psclient__ready(tfx_psclient *c, int p, tfx_err *err);
/* After link p's reply failed with rc: with replicas, moves a lost (or emptied) ps's link to its backup, or waits
 * a little for the master to promote it, and returns 1 when the request should be sent again (until *deadline,
 * set on the first call from 0); 0 to give up with rc. */
int psclient__failover(tfx_psclient *c, int p, int rc, int64_t *deadline);
/* Points link p at ps `at` (a new DEALER); its values are taken whole from the next reply. */
int psclient__relink(tfx_psclient *c, int p, int at, tfx_err *err);

#endif
