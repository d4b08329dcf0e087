#!/bin/bash
# One machine dying with replicas on (#47, item 2): kill -9 of worker 1 and ps 1 at once (the workers held, so that
# no step runs between the two deaths) past step 2/5 of a sync MLP run (2 ps, 2 workers, seed 7,
# training.deterministic, a checkpoint every 100 steps), inside a batch of cluster.replica_batch_steps. `local`
# restarts worker 1 and ps 1, and the run must end within 240 s at max_steps with exit 0 and weights bit-identical to
# the undisturbed run's (failed over, or rolled back if the backup cannot be brought to the step: worker 1's kept
# pushes died with it: MASTER-PS-APART). It hung in 8 of 10 tries: the restarted worker looped on WORKER-PS-WAIT
# "the ps answer steps apart (the chief is rolling them back)", exiting 1 every 60 s, and no rollback came.
. "$(dirname "$0")/lib.sh"
MAX=${TFX_MACHINE_STEPS:-600}
small_mlp "$WORK/mlp.json" training.report_every=1 eval.every_steps=0
# run LABEL [VICTIM...]: the run, with kill -9 of the VICTIMs (ps:K, worker:K) at once past step 2/5, 6 to 10 steps
# into a batch of cluster.replica_batch_steps (16): the backups stand at the batch's start and the workers keep
# their pushes since (a kill at a batch's end found nothing to lose)
run() {
  local name=$1 run=$WORK/$1 lp
  shift
  start_local "$name" --config "$WORK/mlp.json" --run-dir "$run" --ps 2 --workers 2 --max-steps $MAX \
    --set cluster.replicas=1 --set training.deterministic=true --set training.seed=7 --set checkpoint.every_steps=100 \
    --set checkpoint.every_secs=0 --set cluster.request_timeout_s=20
  lp=$LP
  [ $# = 0 ] || kill_at "$WORK/$name.log" "$run" "$lp" step $((MAX * 2 / 5))@16:6-10 "$@" >"$WORK/$name.kill"
  wait_and_digest "$name" "$lp" "$run" 240
  grep -q "^done: step $MAX," "$WORK/$name.log" ||
    fail "$name: did not end at step $MAX: $(grep -a '^done:' "$WORK/$name.log") (last train record at $(metric "$run/metrics.jsonl" train step))"
}
run a
run b worker:1 ps:1
B=$WORK/b
grep -q 'LOCAL-RESTART worker 1' "$WORK/b.log" || fail "b: worker 1 was not restarted: $(cat "$WORK/b.kill")"
grep -q 'LOCAL-RESTART ps 1' "$WORK/b.log" || fail "b: ps 1 was not restarted: $(cat "$WORK/b.kill")"
cmp -s "$WORK/a.digest" "$WORK/b.digest" ||
  fail "b: weights differ from the undisturbed run's ($(cat "$WORK/b.kill"); $(rolled_back "$B"/logs/master-0.log | head -2)): $(diff "$WORK/a.digest" "$WORK/b.digest" | head -4)"
how="failed over"
! rolled_back "$B"/logs/master-0.log >/dev/null || how="rolled back, the workers rewound $(rewind_gap "$B") later"
pass "worker 1 and ps 1 killed at once ($(cat "$WORK/b.kill")): both restarted, the run ended at step $MAX with exit 0 and weights bit-identical to the undisturbed run ($how)"
