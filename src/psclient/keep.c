/* The pushes a worker keeps until its ps's backup holds them (cluster.replicas 1). A replicated primary answers at
 * once and keeps its backup by batches of steps or snapshots; each reply says what the backup holds
 * (Envelope.acked: in sync every step below it, in async and ssp this worker's pushes tagged below it). A link keeps a copy of each push (its tensors' descriptions and bytes)
 * and drops it once the acknowledgement passes its step; after a failover the pushes kept are sent again to the
 * promoted backup, oldest first, before the step's own, so it applies the steps its log lacks with the same bytes
 * (and a push of a step it holds is stale there: dropped, answered with its values). A ps holds its replies when the
 * backup lags by 2 x cluster.replica_batch_steps + 2 steps, so a link keeps at most that many pushes, or, where the
 * ps's checkpoints are its backup's state (plain lazy tables), 1.5 x checkpoint.every_steps more, at most 64 MiB by
 * the ps's measure (else it forwards its steps); its copies are reused from step to step. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "psclient/psclient_impl.h"

void psclient__keep_free(ps_link *l) {
  for (int i = 0; i < l->cap_kept; i++) {
    free(l->kept[i].metas);
    free(l->kept[i].pl);
    free(l->kept[i].mem);
  }
  free(l->kept);
  l->kept = NULL;
  l->n_kept = l->cap_kept = 0;
}

/* A free kept slot at the end of l's list (its buffers reused), or NULL when out of memory. */
static kept_push *keep_slot(ps_link *l) {
  if (l->n_kept == l->cap_kept) {
    int cap = l->cap_kept * 2 + 4;
    kept_push *k = realloc(l->kept, (size_t)cap * sizeof *k);
    if (!k) {
      return NULL;
    }
    memset(k + l->cap_kept, 0, (size_t)(cap - l->cap_kept) * sizeof *k);
    l->kept = k;
    l->cap_kept = cap;
  }
  return &l->kept[l->n_kept];
}

/* Sizes slot k for n tensors and `bytes` of rows and data; -1 when out of memory. */
static int keep_size(kept_push *k, size_t n, size_t bytes) {
  if (n > k->cap_n) {
    Tfx__Tensor *metas = realloc(k->metas, n * sizeof *metas);
    k->metas = metas ? metas : k->metas;
    tfx_payload *pl = metas ? realloc(k->pl, n * sizeof *pl) : NULL;
    k->pl = pl ? pl : k->pl;
    if (!pl) {
      return -1;
    }
    k->cap_n = n;
  }
  if (bytes > k->cap_mem) {
    char *mem = realloc(k->mem, bytes);
    if (!mem) {
      return -1;
    }
    k->mem = mem;
    k->cap_mem = bytes;
  }
  return 0;
}

int psclient__keep(ps_link *l, int64_t step, Tfx__Tensor *const *ptrs, const tfx_payload *pl, int n, tfx_err *err) {
  if (!l->acks || (l->n_kept && l->kept[l->n_kept - 1].step == step)) {
    return TFX_OK; /* the ps tells no acknowledgement (the reply is one), or sent again: kept already */
  }
  while (l->n_kept && l->kept[l->n_kept - 1].step > step) {
    l->n_kept--; /* the ps went back (a roll-back to a checkpoint): those steps are trained again */
  }
  size_t bytes = 0;
  for (int i = 0; i < n; i++) {
    bytes += ptrs[i]->n_rows * sizeof(int64_t) + pl[i].size;
  }
  kept_push *k = keep_slot(l);
  if (!k || keep_size(k, (size_t)n + 1, bytes + 1)) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory keeping the push of step %lld for %s", (long long)step,
                       tfx_client_endpoint(l->client));
  }
  char *at = k->mem;
  for (int i = 0; i < n; i++) {
    k->metas[i] = *ptrs[i]; /* name and shape borrowed from the slot, which outlives the kept push */
    if (ptrs[i]->n_rows) {
      k->metas[i].rows = memcpy(at, ptrs[i]->rows, ptrs[i]->n_rows * sizeof(int64_t));
      at += ptrs[i]->n_rows * sizeof(int64_t);
    }
    k->pl[i] = (tfx_payload){memcpy(at, pl[i].data, pl[i].size), pl[i].size, 0, NULL, NULL};
    at += pl[i].size;
  }
  k->step = step;
  k->n = (size_t)n;
  l->n_kept++;
  return TFX_OK;
}

int tfx_psclient_resend_lost(tfx_psclient *c, tfx_err *err) {
  int rc = TFX_OK;
  for (int p = 0; c && c->replicas && p < c->n_ps && !rc; p++) {
    ps_link *l = &c->ps[p];
    if (!l->client || !l->n_kept || tfx_client_disconnects(l->client) == l->seen) {
      continue;
    }
    rc = psclient__ready(c, p, err); /* moved to the backup, which the master promotes */
    rc = rc ? rc : psclient__resend(c, p, INT64_MAX, err);
  }
  return rc;
}

int tfx_psclient_drop_kept(tfx_psclient *c) {
  int n = 0;
  for (int p = 0; c && p < c->n_ps; p++) {
    n += c->ps[p].n_kept;
    c->ps[p].n_kept = 0; /* their buffers are reused */
  }
  return n;
}

void psclient__acked(ps_link *l, const tfx_envelope *reply) {
  l->acks = reply->acked != NULL;
  int drop = 0;
  while (drop < l->n_kept && (!reply->acked || l->kept[drop].step < (int64_t)reply->acked->version)) {
    drop++;
  }
  if (!drop) {
    return;
  }
  kept_push *gone = malloc((size_t)drop * sizeof *gone);
  if (!gone) {
    return; /* kept a little longer */
  }
  memcpy(gone, l->kept, (size_t)drop * sizeof *gone); /* rotated to the end: their buffers are reused */
  memmove(l->kept, l->kept + drop, (size_t)(l->n_kept - drop) * sizeof *gone);
  memcpy(l->kept + l->n_kept - drop, gone, (size_t)drop * sizeof *gone);
  l->n_kept -= drop;
  free(gone);
}

/* Sends kept push k on link l as a push-pull (no rows asked for, every value sent back), its bytes copied (the
 * link may be dropped with it queued); the link's push descriptions are borrowed (a push has at most one tensor
 * per slot), the step's own push fills them again. */
static int send_kept(ps_link *l, kept_push *k, tfx_err *err) {
  for (size_t i = 0; i < k->n; i++) {
    l->ptrs[i] = &k->metas[i];
    k->pl[i].copy = 1;
  }
  tfx_envelope env;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
  env.step = k->step;
  env.tensors = l->ptrs;
  env.n_tensors = k->n;
  env.flag = 1;
  env.target = l->target;
  return tfx_client_send(l->client, &env, k->pl, (int)k->n, err);
}

/* The first push kept on l of a step in from .. below - 1, or NULL. */
static kept_push *next_kept(ps_link *l, int64_t from, int64_t below) {
  for (int i = 0; i < l->n_kept; i++) {
    if (l->kept[i].step >= from && l->kept[i].step < below) {
      return &l->kept[i];
    }
  }
  return NULL;
}

/* Whether link o sends its kept pushes with link p's: failed over to the same ps (its shards moved with p's), and
 * no live request of its own waits there (a kept push sent on it would take that request's place). */
static int moved_with(tfx_psclient *c, int p, int o) {
  const ps_link *l = &c->ps[o];
  return o == p || (o < 64 && l->moved && l->at == c->ps[p].at && l->n_kept && l->state != LINK_WAITING);
}

/* The lowest step in from .. below - 1 kept on a link that moved with p, or INT64_MAX. */
static int64_t next_step(tfx_psclient *c, int p, int64_t from, int64_t below) {
  int64_t low = INT64_MAX;
  for (int o = 0; o < c->n_ps; o++) {
    kept_push *k = moved_with(c, p, o) ? next_kept(&c->ps[o], from, below) : NULL;
    low = k && k->step < low ? k->step : low;
  }
  return low;
}

/* Sends the kept push of `step` on every link that moved with p, then takes each reply: a promoted backup that
 * serves several instances completes a step of each only once every worker sent it, so the links go in lockstep
 * (one at a time, two workers each waiting on another instance would wait on each other). Every worker sends the
 * same steps, those below its current one, whichever link it saw drop first; the current step's requests are sent
 * again by the caller (psclient.c, send_lost), so their replies come where it waits for them. */
static int resend_step(tfx_psclient *c, int p, int64_t step, tfx_err *err) {
  int rc = TFX_OK, sent[64] = {0};
  for (int o = 0; !rc && o < c->n_ps && o < 64; o++) {
    kept_push *k = moved_with(c, p, o) ? next_kept(&c->ps[o], step, step + 1) : NULL;
    sent[o] = k && !(rc = send_kept(&c->ps[o], k, err));
  }
  for (int o = 0; o < c->n_ps && o < 64; o++) {
    if (!sent[o]) {
      continue;
    }
    tfx_inmsg m;
    int r = tfx_client_recv(c->ps[o].client, &m, c->timeout_ms, err);
    if (!r) {
      psclient__acked(&c->ps[o], m.env);
    }
    tfx_inmsg_fini(&m); /* as the recv left it, answered or not */
    rc = rc ? rc : r;
  }
  return rc;
}

int psclient__resend(tfx_psclient *c, int p, int64_t below, tfx_err *err) {
  ps_link *l = &c->ps[p];
  int64_t from = INT64_MIN, first = -1, deadline = 0;
  int sent = 0, rc = TFX_OK;
  tfx_err ignored;
  for (int o = 0; o < c->n_ps; o++) {
    if (o != p) {
      psclient__ready(c, o, &ignored); /* a link whose ps went down with p's moves now, to send with it */
    }
  }
  int64_t step;
  while (!rc && (step = next_step(c, p, from, below)) != INT64_MAX) {
    rc = resend_step(c, p, step, err);
    if (rc && psclient__failover(c, p, rc, &deadline)) {
      rc = TFX_OK; /* not promoted yet, or lost again: the same push once more */
      continue;
    }
    first = sent++ ? first : step;
    from = step + 1;
    deadline = 0;
  }
  c->resent += sent;
  if (sent) {
    tfx_log(TFX_LOG_WARN, "PSCLIENT-RESEND", "ps instance %d: %d kept push(es) of steps %lld..%lld sent again to ps %d",
            p, sent, (long long)first, (long long)(from - 1), l->at);
  }
  return rc;
}
