#!/bin/bash
# Pushes kept by the workers and sent again after a failover (cluster.replicas 1, sync, #27): a primary answers a
# step at once and forwards its steps to the backup in batches (cluster.replica_batch_steps 64 here), so when it is
# killed its backup lacks the steps since the last batch; each worker kept its pushes of those steps (the replies'
# Envelope.acked) and sends them again to the promoted backup (PSCLIENT-RESEND), which applies the ones its log
# lacks, once, summed in worker order. A sync LR (lazy table, 2 ps, 2 workers, seed 7, training.deterministic)
# whose ps 0 is killed with kill -9 in the middle of a batch (the global step 16..40 past a multiple of 64) ends
# at max_steps with nothing rolled back, its workers having sent kept pushes again that the promoted backup lacked
# (its step at promotion below the last step resent), and weights bit-identical to the same run undisturbed.
. "$(dirname "$0")/lib.sh"
MAX=${TFX_RESEND_STEPS:-600}
python3 "$(dirname "$0")/sparse_data.py" "$WORK" --train 2000 --test 200
sparse_lr_experiment "$WORK/lr.json" training.report_every=1
# run LABEL KILL(0|1): MAX steps with replicas on; with KILL, kill -9 of ps 0 in the middle of a batch
run() {
  local run=$WORK/$1
  start_local "$1" --config "$WORK/lr.json" --run-dir "$run" --max-steps $MAX --set cluster.replicas=1 \
    --set cluster.replica_batch_steps=64 --set training.deterministic=true --set training.seed=7 \
    --set checkpoint.every_steps=0 --set cluster.request_timeout_s=20
  local lp=$LP
  if [ "$2" = 1 ]; then # polled tightly: the step must still be inside the batch when the kill lands
    kill_ps_at "$WORK/$1.log" "$run" $((MAX / 4)) $lp 0 64:16-40
  fi
  wait_and_digest "$1" "$lp" "$run"
}
# resent_applied LABEL: the promoted backup's step at promotion is below the last step a worker sent again
resent_applied() {
  local R=$WORK/$1 promoted last
  promoted=$(sed -n 's/.*PS-PROMOTED .* at step \([0-9]*\).*/\1/p' "$R"/logs/ps-1.log | head -1)
  last=$(sed -n 's/.*PSCLIENT-RESEND ps instance 0: [0-9]* kept push(es) of steps [0-9]*\.\.\([0-9]*\).*/\1/p' \
    "$R"/logs/worker-*.log | sort -n | tail -1)
  [ -n "$promoted" ] || fail "$1: ps 1 was not promoted"
  [ -n "$last" ] || fail "$1: no worker sent a kept push again (PSCLIENT-RESEND)"
  echo "$1: promoted at step $promoted, kept pushes sent again up to step $last"
  [ "$last" -ge "$promoted" ]
}
run a 0
run b 1
if ! resent_applied b; then # the kill fell just after a batch was acknowledged: once more, later in a batch
  echo "the backup held every step resent: killing again in a new run"
  run c 1
  resent_applied c || fail "c: the promoted backup held every step the workers sent again: no resend was applied"
  set -- c
else
  set -- b
fi
R=$WORK/$1
rolled_back "$WORK/$1.log" "$R"/logs/*.log && fail "$1: rolled back"
steps_never_back "$R/metrics.jsonl" || fail "$1: a worker's step went back"
[ "$(metric "$R/metrics.jsonl" train step)" -ge $((MAX - 5)) ] || fail "$1: did not train to $MAX"
cmp -s "$WORK/a.digest" "$WORK/$1.digest" ||
  fail "$1: weights differ from the undisturbed run's: $(diff "$WORK/a.digest" "$WORK/$1.digest")"
pass "kill -9 of ps 0 inside a batch of 64 steps: the workers sent their kept pushes again, the promoted backup applied the steps it lacked once; no rollback, weights bit-identical"
