#!/bin/bash
# A rollback reads the data again (nothing lost): a sync MLP run (2 ps, 2 workers, seed 7, training.deterministic,
# no replicas, a checkpoint every 100 steps) undisturbed, then with kill -9 of ps 0 past step 250. The cluster
# rolls back to the checkpoint of step 200; the workers that lived through it open their data again at step 200's
# batches (WORKER-REWIND), as restarted ones would, so the steps after the checkpoint train on the same batches
# again and the weights end bit-identical to the undisturbed run's. Before, the surviving workers went on from
# where they were: the rolled-back steps' batches were never trained on (a followed stream lost them for good).
. "$(dirname "$0")/lib.sh"
MAX=600
experiment "$WORK/mlp.json" training.report_every=10 eval.every_steps=0 model.layers='[{"type": "flatten"},
  {"type": "dense", "units": 32, "activation": "relu"}, {"type": "dense", "units": 10}]'
# run LABEL KILL: KILL is none or ps0 (kill -9 of ps 0 once step 250 is reported)
run() {
  local run=$WORK/$1 lp
  start_local "$1" --config "$WORK/mlp.json" --run-dir "$run" --ps 2 --workers 2 --max-steps $MAX \
    --set cluster.replicas=0 --set training.deterministic=true --set training.seed=7 \
    --set checkpoint.every_steps=100 --set checkpoint.every_secs=0 --set cluster.request_timeout_s=20
  lp=$LP
  [ "$2" = none ] || kill_ps_at "$WORK/$1.log" "$run" 250 $lp 0 >"$WORK/$1.kill"
  wait_and_digest "$1" "$lp" "$run"
}
run a none
run b ps0
B=$WORK/b
# the checkpoint rolled back to: 200 (100 on a machine so loaded that the one of step 200 was not collected yet)
back=$(sed -n 's/.*MASTER-RESUME resuming from .*ckpt-0*\([0-9]*\) at step .*/\1/p' "$B/logs/master-0.log" | tail -1)
[ -n "$back" ] && [ "$back" -lt 250 ] ||
  fail "b: no rollback to a checkpoint before step 250: $(grep -h 'MASTER-RESUME\|MASTER-PS-LOST' "$B/logs/master-0.log")"
for w in 0 1; do
  grep -q "WORKER-REWIND the cluster went back to step $back: reading the training data again from batch $back" \
    "$B/logs/worker-$w.log" || fail "b: worker $w did not read its data again from step $back"
done
cmp -s "$WORK/a.digest" "$WORK/b.digest" ||
  fail "b: weights differ from the undisturbed run's: $(diff "$WORK/a.digest" "$WORK/b.digest" | head -4)"
pass "kill -9 of ps 0 past step 250: rolled back to step $back, both workers read their data again from there, weights bit-identical to the undisturbed run"
