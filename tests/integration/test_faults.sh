#!/bin/bash
# tfx-node local as a supervisor: kill -9 a worker, a ps, then the master in the middle of sync runs; each is
# restarted with its role and address (a log line names it), the cluster recovers (a lost ps rolls every ps back
# to the newest checkpoint; a new master resumes from it) and the run completes at max_steps with a model that
# learned.
. "$(dirname "$0")/lib.sh"
experiment "$WORK/exp.json" training.max_steps=1500 eval.every_steps=0 checkpoint.every_steps=200 \
  training.report_every=50 cluster.request_timeout_s=5 cluster.register_timeout_s=30
run_with_kill() { # NAME ROLE INDEX LOGNAME (the role as logs name it)
  local run=$WORK/$1
  "$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$run" >"$WORK/$1.log" 2>&1 &
  local lp=$!
  PIDS+=($lp)
  for _ in $(seq 1 150); do
    [ -f "$run/metrics.jsonl" ] && [ "$(metric "$run/metrics.jsonl" train step)" != none ] && [ "$(metric "$run/metrics.jsonl" train step)" -ge 450 ] && break
    sleep 0.2
  done
  local victim; victim=$(pid_of "$run" "$2" "$3")
  [ -n "$victim" ] || fail "$1: no $2 $3 process to kill"
  kill -9 "$victim"
  wait "$lp" || fail "$1: the run did not survive kill -9 of $2 $3: $(tail -3 "$WORK/$1.log")"
  grep -q "LOCAL-RESTART ${4:-$2} $3 exited with status 137" "$WORK/$1.log" || fail "$1: no restart logged for $2 $3"
  local step acc
  step=$(metric "$run/metrics.jsonl" eval step); acc=$(metric "$run/metrics.jsonl" eval accuracy)
  [ "$step" = 1500 ] || fail "$1: ended at step $step"
  ge "$acc" 0.8 || fail "$1: accuracy $acc"
  echo "$1: killed $2 $3, restarted, finished at $step with accuracy $acc"
}
run_with_kill worker worker 1
run_with_kill ps ps 0
grep -q "MASTER-PS-LOST" "$WORK"/ps/logs/master-0.log || fail "the master did not roll back after losing a ps"
run_with_kill master chief 0 master
grep -q "MASTER-RESUME" "$WORK"/master/logs/master-0.log || fail "the restarted master did not resume from a checkpoint"
pass "worker, ps and master each survived kill -9"
