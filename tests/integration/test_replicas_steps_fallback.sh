#!/bin/bash
# A lazy table too wide to be kept by checkpoints (cluster.replicas 1, #27): with checkpoint.every_steps 4096 a
# worker would keep up to 1.5 x 4096 + 34 pushes per ps, and 256-float rows make that more than 64 MiB, so each
# primary ends the checkpoint-kept mode at its first step (PS-REPLICA-STEPS, naming why), streams its backup the
# whole state once and forwards its summed steps from then on. A sync LR (2 ps, 2 workers, seed 7) whose ps 0 is
# killed with kill -9 at a third of the run promotes the backup, rolls nothing back, and exports weights
# bit-identical to the same run undisturbed.
. "$(dirname "$0")/lib.sh"
MAX=300
python3 "$(dirname "$0")/sparse_data.py" "$WORK" --train 2000 --test 200
sparse_lr_experiment "$WORK/lr.json" training.report_every=10 \
  model.layers='[{"type": "embedding_bag", "units": 256, "combiner": "sum"}, {"type": "dense", "units": 4}]'
# run LABEL KILL(0|1)
run() {
  local run=$WORK/$1
  start_local "$1" --config "$WORK/lr.json" --run-dir "$run" --max-steps $MAX --set cluster.replicas=1 \
    --set training.seed=7 --set checkpoint.every_steps=4096 --set cluster.request_timeout_s=20
  local lp=$LP
  [ "$2" = 1 ] && kill_ps_at "$WORK/$1.log" "$run" $((MAX / 3)) $lp
  wait_and_digest "$1" "$lp" "$run"
  grep -q "PS-REPLICA-STEPS ps instance 1: .*a worker could keep more than 64 MiB" "$run"/logs/ps-1.log ||
    fail "$1: ps 1 did not leave the checkpoint-kept mode: $(grep -h 'PS-REPLICA\|PS-STOP ' "$run"/logs/ps-1.log)"
}
run a 0
run b 1
[ "$(metric "$WORK/b/metrics.jsonl" train step)" -ge $((MAX - 20)) ] || fail "b: did not train to $MAX"
grep -q PS-PROMOTED "$WORK"/b/logs/ps-1.log || fail "b: ps 1 was not promoted"
grep -hiE 'MASTER-PS-LOST|MASTER-NO-FAILOVER' "$WORK/b.log" "$WORK"/b/logs/*.log && fail "b: rolled back"
cmp -s "$WORK/a.digest" "$WORK/b.digest" || fail "weights differ after kill -9 of ps 0: $(diff "$WORK/a.digest" "$WORK/b.digest" | head -4)"
pass "a table too wide for kept pushes: the summed steps forwarded after one whole state; kill -9 of ps 0 at a third, weights bit-identical to the undisturbed run"
