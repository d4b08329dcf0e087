#!/bin/bash
# A ps or the chief lost after the workers reached max_steps and before the chief's final checkpoint: the
# workers wait at max_steps for the chief's verdict (WORKER-AT-MAX) instead of exiting, so when the cluster rolls
# back to the newest checkpoint (a ps came back empty) they train the lost steps again (WORKER-ROLLBACK), and the
# run ends at max_steps with its final checkpoint. A restarted chief adopts the ps, alive and at max_steps
# (MASTER-ADOPT), instead of rolling them back to the older checkpoint (issue 30, item 10). The window is held
# open for real: the chief is stopped (SIGSTOP) once a checkpoint exists, the workers train on to max_steps
# without it (the ps keep the sync steps), then ps 0 is killed -9 (and the chief continues, SIGCONT) or the
# stopped chief itself is killed -9; the supervisor restarts either.
. "$(dirname "$0")/lib.sh"
MAX=2000
small_mlp "$WORK/exp.json" training.max_steps=$MAX eval.every_steps=0 checkpoint.every_steps=400 \
  training.report_every=1000000 cluster.request_timeout_s=60 cluster.register_timeout_s=60 \
  cluster.replicas=0 # the roll-back path (replicas, auto on here, fail over instead: test_replicas*.sh)

# lose_at_max NAME ROLE LOGNAME: a run whose ROLE (ps 0 or the chief) is killed -9 while the workers wait at
# max_steps with the chief stopped; it must still end at max_steps with its final checkpoint.
lose_at_max() {
  RUN=$WORK/$1
  "$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$RUN" >"$WORK/$1.log" 2>&1 &
  local lp=$!
  PIDS+=($lp)
  wait_for 600 has_ckpt "$RUN" || fail "$1: no checkpoint within 600 s"
  local chief; chief=$(pid_of "$RUN" chief 0)
  [ -n "$chief" ] || fail "$1: no chief process"
  kill -STOP "$chief"
  PIDS+=("$chief") # (cleanup kills it; a stopped process takes SIGKILL)
  # Without the chief the workers still train (the ps count the sync steps) up to max_steps, and wait there.
  wait_for 600 at_max "$RUN" || fail "$1: the workers did not reach max_steps within 600 s"
  grep -q "WORKER-DONE" "$RUN"/logs/worker-*.log && fail "$1: a worker exited at max_steps before the chief's verdict"
  local victim; victim=$(pid_of "$RUN" "$2" 0)
  [ -n "$victim" ] || fail "$1: no $2 0 process"
  kill -9 "$victim"
  wait_for 120 grep -q "LOCAL-RESTART $3 0 exited with status 137" "$WORK/$1.log" || fail "$1: no restart of $3 0"
  kill -CONT "$chief" 2>/dev/null
  wait "$lp" || fail "$1: the run failed after $2 0 died at max_steps: $(tail -3 "$WORK/$1.log")"
  grep -q "MASTER-CKPT checkpoint at step $MAX:" "$RUN/logs/master-0.log" || fail "$1: no final checkpoint at $MAX"
  grep -q "done: step $MAX," "$WORK/$1.log" || fail "$1: the run did not end at step $MAX: $(grep done: "$WORK/$1.log")"
  local acc; acc=$(metric "$RUN/metrics.jsonl" eval accuracy)
  ge "$acc" 0.8 || fail "$1: accuracy $acc"
  echo "$1: $2 0 lost at max_steps: final checkpoint at $MAX, accuracy $acc"
}
lose_at_max ps-lost ps ps
grep -q "MASTER-PS-LOST" "$WORK/ps-lost/logs/master-0.log" || fail "the chief did not roll the cluster back"
grep -q "WORKER-ROLLBACK" "$WORK/ps-lost"/logs/worker-*.log || fail "no worker trained on after the rollback"
lose_at_max chief-lost chief master
grep -q "MASTER-ADOPT every ps serves the plan at step $MAX" "$WORK/chief-lost/logs/master-0.log" ||
  fail "the restarted chief did not adopt the ps at $MAX: $(grep -h 'MASTER-RESUME\|MASTER-ADOPT' "$WORK/chief-lost/logs/master-0.log")"
grep -q "WORKER-ROLLBACK" "$WORK/chief-lost"/logs/worker-*.log && fail "chief-lost: the workers rolled back past live ps"
pass "a ps lost at max_steps rolled back, a chief lost there adopted the ps: each run ended at $MAX with its final checkpoint"
