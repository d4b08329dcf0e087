#!/bin/bash
# The parameter server's update semantics against a real `tfx-node --role=ps`: no lost update under 16
# concurrent pusher processes, sync aggregation / stale drops / backup workers, bounded staleness, optimizer math
# equal to the single-process rule, rejection of bad pushes (counted), both NaN policies, exact status counters,
# named pulls and the ps's pull deadline, pulls since a version (only what changed, the psclient too),
# non-trainable values assigned exactly beside optimized gradients, nan_policy skip on the one-pass path, shard
# checkpoint round trip (Adam moments too), corrupt and other-shape restores (a slot too), the two-thread update
# (training.ps_apply_threads = 2) of a large shard, push-pulls sent in parts, sync sums in worker order
# (training.deterministic), stale plan epochs refused and counted (a backup copy), and the chief's STOP
# answering a held sync push (TFX_EINTR: its worker stops instead of failing over).
. "$(dirname "$0")/lib.sh"
for c in async-sum sync ssp optim reject nan-policy nan-skip-fused status pulls since client-since assign checkpoint restore-shape restore-slot-shape sparse split parts parts-reject lazy-async lazy-sync lazy-reject lazy-checkpoint deterministic stale-epoch stop-held; do
  out=$(timeout 120 "$TFX_PS_DRIVER" "$TFX_NODE" "$c" 2>&1) || fail "$c: $out"
  echo "$out" | tail -1
done
pass "ps semantics"
