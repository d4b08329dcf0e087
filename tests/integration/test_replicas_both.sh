#!/bin/bash
# Beyond one failure (cluster.replicas 1, #27): kill -9 of both ps of a sync MLP run (2 ps, 2 workers) at once
# loses every instance's primary and backup together: no promotion (MASTER-NO-FAILOVER, naming why), the roll-back
# of every ps to the newest checkpoint, named (MASTER-PS-LOST "... and so did its backup"), and the run still ends
# at max_steps with exit 0. The workers' link of instance 0, moved to its backup on ps 1 when ps 0 died, follows the
# chief's routes after the roll-back (the chief's status carries "route.P" and a new plan epoch; WORKER-ROUTES):
# with cluster.register_timeout_s 20 a worker still refused "not promoted" by then gives up, `local` restarts it
# (LOCAL-RESTART worker), and the test fails (it did, at about 75 s, before the routes were followed).
. "$(dirname "$0")/lib.sh"
MAX=600
experiment "$WORK/mlp.json" training.report_every=10 eval.every_steps=0 model.layers='[{"type": "flatten"},
  {"type": "dense", "units": 64, "activation": "relu"}, {"type": "dense", "units": 10}]' placement.min_slice_bytes=65536
run=$WORK/run
"$TFX_NODE" local --config "$WORK/mlp.json" --run-dir "$run" --max-steps $MAX --set cluster.replicas=1 \
  --set training.seed=7 --set checkpoint.every_steps=100 --set cluster.request_timeout_s=5 --set cluster.register_timeout_s=20 >"$WORK/run.log" 2>&1 &
lp=$!
PIDS+=($lp)
wait_for 300 bash -c "s=\$(grep -o '\"step\": *[0-9]*' '$run/metrics.jsonl' 2>/dev/null | tail -1 | grep -o '[0-9]*\$');
  [ -n \"\$s\" ] && [ \"\$s\" -ge $((MAX / 3)) ] || ! kill -0 $lp" || fail "no step $((MAX / 3))"
pids=$(sed -n 's/.*LOCAL-SPAWN ps [01]: pid \([0-9]*\).*/\1/p' "$WORK/run.log")
[ "$(echo "$pids" | wc -w)" = 2 ] || fail "no 2 ps to kill: $pids"
kill -9 $pids
wait "$lp" || fail "local exited $?: $(tail -2 "$WORK/run.log")"
grep -q 'MASTER-NO-FAILOVER' "$run/logs/master-0.log" || fail "no MASTER-NO-FAILOVER: $(grep -h 'MASTER-' "$run/logs/master-0.log" | tail -5)"
grep -q 'MASTER-PS-LOST.*and so did its backup' "$run/logs/master-0.log" ||
  fail "the roll-back was not named: $(grep -h 'MASTER-' "$run/logs/master-0.log" | tail -5)"
[ "$(metric "$run/metrics.jsonl" train step)" -ge $((MAX - 20)) ] || fail "did not train to $MAX"
! grep -q 'LOCAL-RESTART worker' "$WORK/run.log" ||
  fail "a worker gave up waiting for the ps and was restarted: $(grep -h 'LOCAL-RESTART worker' "$WORK/run.log" | head -2)"
grep -q 'WORKER-ROUTES' "$run"/logs/worker-*.log ||
  fail "no worker followed the chief's routes: $(grep -h 'WORKER-PS' "$run"/logs/worker-*.log | tail -3)"
pass "both ps killed together (the workers followed the chief's routes, none restarted): no promotion ($(grep -ho 'MASTER-NO-FAILOVER.*' "$run/logs/master-0.log" | head -1 | cut -c1-90)), rolled back to the newest checkpoint, named, and trained to $MAX"
