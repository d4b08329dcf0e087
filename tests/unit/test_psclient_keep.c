/* Unit tests of src/psclient/keep.c (cluster.replicas 1, sync, #27): a link keeps a copy of each push (its tensors'
 * descriptions, row ids and bytes) once its ps tells acknowledgements, never twice for one step, and drops the
 * pushes the reply's Envelope.acked says the backup holds (all of them when a reply tells none); the copies'
 * buffers are reused. No sockets (the resend is tests/integration/test_replicas_resend.sh). */
#include <criterion/criterion.h>
#include <string.h>

#include "psclient/psclient_impl.h"

/* A push of one row-sparse tensor (2 rows of 2 floats) and one dense tensor (3 floats), values from `base`. */
typedef struct push {
  Tfx__Tensor metas[2], *ptrs[2];
  int64_t rows[2];
  float sparse[4], dense[3];
  tfx_payload pl[2];
} push;

static void make_push(push *q, float base) {
  memset(q, 0, sizeof *q);
  for (int i = 0; i < 2; i++) {
    tfx__tensor__init(&q->metas[i]);
    q->ptrs[i] = &q->metas[i];
  }
  q->rows[0] = 7;
  q->rows[1] = 9;
  q->metas[0].name = "table";
  q->metas[0].rows = q->rows;
  q->metas[0].n_rows = 2;
  q->metas[0].nbytes = sizeof q->sparse;
  q->metas[1].name = "dense";
  q->metas[1].nbytes = sizeof q->dense;
  for (int i = 0; i < 4; i++) {
    q->sparse[i] = base + (float)i;
  }
  for (int i = 0; i < 3; i++) {
    q->dense[i] = base * 10 + (float)i;
  }
  q->pl[0] = (tfx_payload){q->sparse, sizeof q->sparse, 0, NULL, NULL};
  q->pl[1] = (tfx_payload){q->dense, sizeof q->dense, 0, NULL, NULL};
}

/* A reply telling that the backup holds every step below `acked` (or nothing, with acked < 0). */
static void reply(ps_link *l, int64_t acked) {
  tfx_envelope e = TFX__ENVELOPE__INIT;
  Tfx__Since s = TFX__SINCE__INIT;
  s.version = (uint64_t)(acked < 0 ? 0 : acked);
  e.acked = acked < 0 ? NULL : &s;
  psclient__acked(l, &e);
}

Test(psclient_keep, nothing_is_kept_until_the_ps_tells_acknowledgements) {
  ps_link l;
  memset(&l, 0, sizeof l);
  push q;
  make_push(&q, 1);
  tfx_err err = {0};
  cr_assert_eq(psclient__keep(&l, 3, q.ptrs, q.pl, 2, &err), TFX_OK);
  cr_assert_eq(l.n_kept, 0, "no reply said acked yet: the reply itself is the acknowledgement");
  reply(&l, 0);
  cr_assert_eq(l.acks, 1);
  cr_assert_eq(psclient__keep(&l, 3, q.ptrs, q.pl, 2, &err), TFX_OK);
  cr_assert_eq(l.n_kept, 1);
  reply(&l, -1);
  cr_assert_eq(l.n_kept, 0, "a reply without acked acknowledges every push");
  cr_assert_eq(l.acks, 0);
  psclient__keep_free(&l);
}

Test(psclient_keep, a_push_is_copied_once_and_dropped_when_the_backup_holds_its_step) {
  ps_link l;
  memset(&l, 0, sizeof l);
  tfx_err err = {0};
  reply(&l, 0);
  push q[3];
  for (int s = 0; s < 3; s++) {
    make_push(&q[s], (float)(s + 1));
    cr_assert_eq(psclient__keep(&l, 5 + s, q[s].ptrs, q[s].pl, 2, &err), TFX_OK, "%s", err.msg);
  }
  cr_assert_eq(psclient__keep(&l, 7, q[2].ptrs, q[2].pl, 2, &err), TFX_OK);
  cr_assert_eq(l.n_kept, 3, "sent again after a failover: kept once");
  make_push(&q[0], 99); /* the worker's buffers change: the copies do not */
  q[0].rows[0] = 1;
  kept_push *k = &l.kept[0];
  cr_assert_eq(k->step, 5);
  cr_assert_eq(k->n, 2);
  cr_assert_str_eq(k->metas[0].name, "table");
  cr_assert_eq(k->metas[0].n_rows, 2);
  cr_assert_eq(k->metas[0].rows[0], 7);
  cr_assert_eq(k->metas[0].rows[1], 9);
  cr_assert_eq(((const float *)k->pl[0].data)[3], 4.0f);
  cr_assert_eq(((const float *)k->pl[1].data)[2], 12.0f);
  cr_assert_eq(k->pl[1].size, 3 * sizeof(float));
  char *reused = l.kept[0].mem;
  reply(&l, 7); /* the backup holds steps 5 and 6 */
  cr_assert_eq(l.n_kept, 1);
  cr_assert_eq(l.kept[0].step, 7);
  cr_assert_eq(((const float *)l.kept[0].pl[0].data)[0], 3.0f);
  make_push(&q[1], 4);
  cr_assert_eq(psclient__keep(&l, 8, q[1].ptrs, q[1].pl, 2, &err), TFX_OK);
  cr_assert_eq(l.n_kept, 2);
  cr_assert(l.kept[1].mem == reused, "a dropped copy's buffers serve the next push");
  cr_assert_eq(l.kept[1].step, 8);
  cr_assert_eq(((const float *)l.kept[1].pl[1].data)[0], 40.0f);
  make_push(&q[2], 5);
  cr_assert_eq(psclient__keep(&l, 6, q[2].ptrs, q[2].pl, 2, &err), TFX_OK);
  cr_assert_eq(l.n_kept, 1, "the ps went back to step 6 (a roll-back): the kept pushes of 7 and 8 go");
  cr_assert_eq(l.kept[0].step, 6);
  cr_assert_eq(((const float *)l.kept[0].pl[0].data)[0], 5.0f);
  reply(&l, 9);
  cr_assert_eq(l.n_kept, 0);
  psclient__keep_free(&l);
  cr_assert_null(l.kept);
}
