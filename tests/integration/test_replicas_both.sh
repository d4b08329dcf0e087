#!/bin/bash
# Beyond one failure (cluster.replicas 1, #27): kill -9 of both ps of a sync MLP run (2 ps, 2 workers) at once
# loses every instance's primary and backup together: no promotion (MASTER-NO-FAILOVER, naming why), the roll-back
# of every ps to the newest checkpoint, named (MASTER-PS-LOST "... and so did its backup"), and the run still ends
# at max_steps with exit 0. The workers' link of instance 0, moved to its backup on ps 1 when ps 0 died, follows the
# chief's routes after the roll-back (the chief's status carries "route.P" and a new plan epoch; WORKER-ROUTES):
# with cluster.register_timeout_s 20 a worker still refused "not promoted" by then gives up, `local` restarts it
# (LOCAL-RESTART worker), and the test fails (it did, at about 75 s, before the routes were followed).
# The kill lands while the workers are held (SIGSTOP): every worker's WORKER-REWIND must name the newest checkpoint
# at the kill (not step 0), and the final checkpoint (Adam's slots included) is bit-identical to the same-seed
# run's undisturbed (the roll-back rewinds the data with the weights).
. "$(dirname "$0")/lib.sh"
MAX=600
experiment "$WORK/mlp.json" training.report_every=10 eval.every_steps=0 model.layers='[{"type": "flatten"},
  {"type": "dense", "units": 64, "activation": "relu"}, {"type": "dense", "units": 10}]' placement.min_slice_bytes=65536
# start NAME: the run, in the background (LP)
start() {
  start_local "$1" --config "$WORK/mlp.json" --run-dir "$WORK/$1" --max-steps $MAX --set cluster.replicas=1 \
    --set training.seed=7 --set checkpoint.every_steps=100 --set cluster.request_timeout_s=5 \
    --set cluster.register_timeout_s=20
}
start calm
wait_and_digest calm "$LP" "$WORK/calm"
run=$WORK/run
start run
lp=$LP
wait_for 300 bash -c "s=\$(grep -o '\"step\": *[0-9]*' '$run/metrics.jsonl' 2>/dev/null | tail -1 | grep -o '[0-9]*\$');
  [ -n \"\$s\" ] && [ \"\$s\" -ge $((MAX / 3)) ] || ! kill -0 $lp" || fail "no step $((MAX / 3))"
pids=$(sed -n 's/.*LOCAL-SPAWN ps [01]: pid \([0-9]*\).*/\1/p' "$WORK/run.log")
workers=$(sed -n 's/.*LOCAL-SPAWN worker [01]: pid \([0-9]*\).*/\1/p' "$WORK/run.log")
[ "$(echo "$pids" | wc -w)" = 2 ] && [ "$(echo "$workers" | wc -w)" = 2 ] || fail "no 2 ps and 2 workers: $pids / $workers"
kill -STOP $workers || fail "could not hold the workers"
ckpt=$(newest_ckpt "$run") || fail "no checkpoint before the kill"
ckpt=$((10#${ckpt##*-}))
kill -9 $pids || fail "kill -9 of the ps $pids failed"
kill -CONT $workers || fail "could not release the workers"
echo "both ps killed with the newest checkpoint at step $ckpt"
wait_and_digest run "$lp" "$run"
grep -q 'MASTER-NO-FAILOVER' "$run/logs/master-0.log" || fail "no MASTER-NO-FAILOVER: $(grep -h 'MASTER-' "$run/logs/master-0.log" | tail -5)"
grep -q 'MASTER-PS-LOST.*and so did its backup' "$run/logs/master-0.log" ||
  fail "the roll-back was not named: $(grep -h 'MASTER-' "$run/logs/master-0.log" | tail -5)"
[ "$(metric "$run/metrics.jsonl" train step)" -ge $((MAX - 20)) ] || fail "did not train to $MAX"
! grep -q 'LOCAL-RESTART worker' "$WORK/run.log" ||
  fail "a worker gave up waiting for the ps and was restarted: $(grep -h 'LOCAL-RESTART worker' "$WORK/run.log" | head -2)"
grep -q 'WORKER-ROUTES' "$run"/logs/worker-*.log ||
  fail "no worker followed the chief's routes: $(grep -h 'WORKER-PS' "$run"/logs/worker-*.log | tail -3)"
rewinds=$(sed -n 's/.*WORKER-REWIND the cluster went back to step \([0-9]*\).*/\1/p' "$run"/logs/worker-*.log)
[ "$(echo "$rewinds" | wc -w)" -ge 2 ] || fail "not every worker rewound: $(grep -h WORKER-REWIND "$run"/logs/worker-*.log)"
for r in $rewinds; do
  [ "$r" -ge "$ckpt" ] || fail "a worker went back to step $r, before the newest checkpoint ($ckpt) at the kill"
done
cmp -s "$WORK/calm.digest" "$WORK/run.digest" ||
  fail "the state differs from the undisturbed run's: $(diff "$WORK/calm.digest" "$WORK/run.digest" | head -6)"
pass "rolled back to step $(echo $rewinds | tr ' ' ','), weights and slots bit-identical to the undisturbed run; both ps killed together (the workers followed the chief's routes, none restarted): no promotion ($(grep -ho 'MASTER-NO-FAILOVER.*' "$run/logs/master-0.log" | head -1 | cut -c1-90)), rolled back to the newest checkpoint, named, and trained to $MAX"
