/* The merged rolling record: each worker's report carries its progressive-validation window (the
 * examples, their mean log loss and their scores as counts per logit bin, train/progressive.h); the chief keeps
 * the last of each worker and, once every worker with a window has sent a new one, writes one record of kind
 * "rolling" (metrics.jsonl and TensorBoard) over the union of the windows: rolling_auc from the summed
 * histograms, rolling_log_loss weighted by the examples, rolling_examples and workers. /metrics shows it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "master/master_impl.h"
#include "train/progressive.h"

#define HIST_BYTES (2 * TFX_PROGRESSIVE_BINS * sizeof(int64_t))

/* The report's rolling_hist histogram (borrowed from in), or NULL when it has none of the right size. */
static const int64_t *find_hist(const tfx_inmsg *in) {
  int part = 0;
  for (size_t i = 0; i < in->env->n_tensors; i++) {
    const Tfx__Tensor *t = in->env->tensors[i];
    if (t->nbytes && !strcmp(t->name, "rolling_hist") && t->dtype == TFX__DTYPE__DTYPE_INT64 &&
        t->nbytes == HIST_BYTES) {
      size_t size = 0;
      const void *data = tfx_inmsg_part(in, part, &size);
      return data && size == HIST_BYTES ? data : NULL;
    }
    part += t->nbytes > 0;
  }
  return NULL;
}

/* Keeps worker w's window from its report (n examples of mean log loss ll); returns 1 when it had one. */
static int keep_window(worker_peer *p, const tfx_inmsg *in, double n, double ll) {
  if (!(n > 0) || !isfinite(ll)) {
    return 0;
  }
  const int64_t *hist = find_hist(in);
  if (hist && !p->win_hist && !(p->win_hist = malloc(HIST_BYTES))) {
    return 0;
  }
  if (hist) {
    memcpy(p->win_hist, hist, HIST_BYTES);
  }
  p->win_has_hist = hist != NULL;
  p->win_n = n;
  p->win_loss = ll;
  p->win_fresh = 1;
  return 1;
}

/* Whether every worker with a window has sent a new one since the last merged record. */
static int round_done(const master *m) {
  for (int w = 0; w < m->n_workers; w++) {
    if (m->workers[w].win_n > 0 && !m->workers[w].win_fresh) {
      return 0;
    }
  }
  return 1;
}

/* Merges the workers' windows into m->merged (under obs.lock) and writes the record for `step`. */
static void merge(master *m, int64_t step) {
  int64_t sum[2 * TFX_PROGRESSIVE_BINS] = {0};
  double n = 0, loss = 0, workers = 0;
  int all_hist = 1;
  for (int w = 0; w < m->n_workers; w++) {
    worker_peer *p = &m->workers[w];
    if (p->win_n > 0) {
      n += p->win_n;
      loss += p->win_n * p->win_loss;
      workers++;
      all_hist &= p->win_has_hist;
      for (int b = 0; p->win_has_hist && b < 2 * TFX_PROGRESSIVE_BINS; b++) {
        sum[b] += p->win_hist[b];
      }
    }
    p->win_fresh = 0;
  }
  double auc = all_hist ? tfx_progressive_histogram_auc(sum) : NAN;
  master__lock(m, 1);
  m->merged = (merged_window){1, auc, loss / n, n};
  master__lock(m, 0);
  const char *names[4] = {"rolling_log_loss", "rolling_examples", "workers", "rolling_auc"};
  double vals[4] = {loss / n, n, workers, auc};
  master__record(m, "rolling", step, names, vals, isfinite(auc) ? 4 : 3, NULL);
}

void master__rolling_note(master *m, const tfx_inmsg *in, double examples, double log_loss) {
  int w = in->env->sender_index;
  if (w < 0 || w >= m->n_workers || !keep_window(&m->workers[w], in, examples, log_loss) || !round_done(m)) {
    return;
  }
  merge(m, in->env->step);
}

void master__rolling_fini(master *m) {
  for (int w = 0; m->workers && w < m->n_workers; w++) {
    free(m->workers[w].win_hist);
    m->workers[w].win_hist = NULL;
  }
}
