#!/bin/bash
# Failover in async and ssp mode (cluster.replicas 1, #27): an MLP run (2 ps, 2 workers) whose ps 0 is killed with
# kill -9 at a third of the run ends at max_steps with exit 0, with ps 0's backup on ps 1 promoted (MASTER-FAILOVER,
# PS-PROMOTED), nothing rolled back (no MASTER-PS-LOST), no worker's step going back. What async lets us assert of
# the updates: the promoted copy of instance 0 and instance 1 end at the same step, max_steps (every worker push
# goes to both instances once, and the run's last step is not passed), and the resent pushes dropped as already
# applied are at most one per worker (a resend is never applied twice); the run's ledger balances (each instance
# took every push the workers saw it answer, each once). Evaluation is on (every 100 steps: the master's
# evaluation pulls, which no worker's clock counts, reach the promoted copy too), and no evaluation after the kill
# is worse than the last before it by more than 0.03 accuracy: a promoted copy with lost or zeroed values would be.
. "$(dirname "$0")/lib.sh"
MAX=600
experiment "$WORK/mlp.json" training.report_every=10 eval.every_steps=100 model.layers='[{"type": "flatten"},
  {"type": "dense", "units": 64, "activation": "relu"}, {"type": "dense", "units": 10}]' placement.min_slice_bytes=65536
for mode in async ssp; do
  run=$WORK/$mode
  "$TFX_NODE" local --config "$WORK/mlp.json" --run-dir "$run" --max-steps $MAX --set cluster.replicas=1 \
    --set training.mode=$mode --set training.seed=7 --set checkpoint.every_steps=0 \
    --set cluster.request_timeout_s=20 >"$WORK/$mode.log" 2>&1 &
  lp=$!
  PIDS+=($lp)
  # at a third of the run, the workers held until an evaluation (the one to compare with) is recorded
  killed=$(KILL_PS_AFTER_EVAL=1 kill_ps_at "$WORK/$mode.log" "$run" $((MAX / 3)) $lp) && echo "$mode: $killed"
  at=$(echo "$killed" | sed -n 's/.* after \([0-9]*\) evaluations$/\1/p')
  wait "$lp" || fail "$mode: local exited $?: $(tail -2 "$WORK/$mode.log")"
  grep -q MASTER-FAILOVER "$run"/logs/master-0.log || fail "$mode: no failover"
  grep -q PS-PROMOTED "$run"/logs/ps-1.log || fail "$mode: ps 1 was not promoted"
  rolled_back "$WORK/$mode.log" "$run"/logs/*.log && fail "$mode: rolled back"
  steps_never_back "$run/metrics.jsonl" || fail "$mode: a worker's step went back"
  own=$(sed -n 's/.*PS-STOP stopping at step \([0-9]*\):.*/\1/p' "$run"/logs/ps-1.log | tail -1)
  copy=$(sed -n 's/.*PS-STOP-COPY promoted copy of ps instance 0 at step \([0-9]*\):.*/\1/p' "$run"/logs/ps-1.log | tail -1)
  dropped=$(sed -n 's/.*PS-STOP-COPY .* \([0-9]*\) stale dropped.*/\1/p' "$run"/logs/ps-1.log | tail -1)
  [ "$own" = $MAX ] && [ "$copy" = $MAX ] || fail "$mode: instances ended at steps $own (ps 1) and $copy (ps 0's copy), not $MAX"
  [ "${dropped:-9}" -le 2 ] || fail "$mode: $dropped resent pushes dropped (at most one per worker)"
  led=$(ledger_balanced "$run" "$(pushes_made "$run")" 2>&1) || fail "$mode: the ledger does not balance: $led"
  evals=$(python3 - "$run/metrics.jsonl" "$at" 2>&1 <<'PY'
import json, sys
ev = [(r["step"], r["accuracy"]) for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "eval"]
at = int(sys.argv[2])  # the evaluations recorded before the kill
before = [a for s, a in ev[:at]]
after = ev[at:]
print(" ".join("%d:%.4f" % e for e in ev), flush=True)
if not before or not after or after[-1][0] != 600:
    sys.exit("no evaluation before the kill, after it, or at the end")
worse = [(s, a) for s, a in after if a < before[-1] - 0.03]
if worse:
    sys.exit("evaluations after the kill (after %d evaluations) fell below %.4f: %s" % (at, before[-1], worse))
PY
  ) || fail "$mode: $evals"
  echo "$mode: both instances at $MAX, $dropped resend(s) dropped as applied; evaluations (step:accuracy) $evals"
done
pass "kill -9 of ps 0 in async and ssp: promoted, no rollback, both instances at max_steps, resends applied once"
