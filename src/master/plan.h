/* The device setter: places each variable, or each axis-0 slice of a large one, on a parameter server.
 * Strategies: round_robin (TensorFlow's default, in variable order) and greedy_bytes (largest first, to the
 * least-loaded ps); variables larger than min_slice_bytes are partitioned into at most max_shards slices
 * (TensorFlow's min_max_variable_partitioner). Deterministic. A tfx_plan owns its shard records. */
#ifndef TFX_PLAN_H
#define TFX_PLAN_H

#include <stdio.h>

#include "config/config.h"
#include "net/wire.h"
#include "nn/model.h"

typedef struct tfx_plan {
  Tfx__Shard *shards;
  Tfx__Shard **ptrs; /* for envelopes */
  int64_t *shapes;   /* 4 per shard */
  int n, n_ps;
  int replicas; /* cluster.replicas 1 with at least 2 ps: each ps's shards have a backup (tfx_plan_backup) */
  int replica_batch; /* cluster.replica_batch_steps: a sync worker keeps up to 2 x this + 2 pushes per ps */
} tfx_plan;

/* Places the model's variables on n_ps servers; caller owns *plan; release with tfx_plan_fini. */
int tfx_plan_build(const tfx_config *cfg, tfx_model *m, int n_ps, tfx_plan *plan, tfx_err *err);
/* Releases the plan's memory. */
void tfx_plan_fini(tfx_plan *plan);
/* The shards of one ps, as a new pointer array (caller frees with free(); pointees borrowed). */
Tfx__Shard **tfx_plan_for_ps(const tfx_plan *plan, int ps, size_t *n);
/* The ps holding the backup of ps `ps`'s shards: the next ps on the ring (cluster.replicas 1, n_ps >= 2), or -1
 * (no replicas, or a single ps). */
int tfx_plan_backup(int ps, int n_ps, int replicas);
/* Prints per ps the variables/slices and bytes (with replicas: each shard's backup ps, and the bytes each ps
 * holds as a backup), and the imbalance (max/mean). */
void tfx_plan_print(const tfx_plan *plan, FILE *f);

#endif
