#!/bin/bash
# A restarted chief adopts the live state of the ps when every ps serves the plan at one step (issue 30, item
# 10), instead of re-initializing them: with no checkpoint yet, a chief killed -9 mid-run used to start every ps
# afresh (MASTER-FRESH a second time, the steps taken lost). The ps and workers run on while the supervisor
# restarts the chief; the restarted chief must say MASTER-ADOPT at a step at least the one it was killed at, and
# the run end at max_steps with no step trained twice (no WORKER-ROLLBACK). (A chief lost near the end, with a
# checkpoint behind the ps, is test_final_ckpt.sh's chief-lost case.)
. "$(dirname "$0")/lib.sh"
MAX=1200
small_mlp "$WORK/exp.json" training.max_steps=$MAX eval.every_steps=100 checkpoint.every_steps=0 \
  training.report_every=1000000 cluster.request_timeout_s=20 cluster.register_timeout_s=20
RUN=$WORK/run
LOG=$WORK/run.log
evaluated() { [ "$(metric "$RUN/metrics.jsonl" eval step 2>/dev/null)" != none ] && ge "$(metric "$RUN/metrics.jsonl" eval step)" 200; }
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$RUN" >"$LOG" 2>&1 &
LP=$!
PIDS+=($LP)
wait_for 300 evaluated || fail "no evaluation at step 200 within 300 s"
killed_at=$(metric "$RUN/metrics.jsonl" eval step)
has_ckpt "$RUN" && fail "a checkpoint exists ($(ls "$RUN/checkpoints")): the case is 'none yet'"
kill -9 "$(pid_of "$RUN" chief 0)"
wait_for 60 grep -q "LOCAL-RESTART master 0 exited with status 137" "$LOG" || fail "no restart of the chief"
wait_exit 300 "$LP" || fail "the run failed after its chief was restarted: $(tail -3 "$LOG")"
grep -q "done: step $MAX," "$LOG" || fail "the run did not end at $MAX: $(grep done: "$LOG")"
[ "$(grep -c MASTER-FRESH "$RUN/logs/master-0.log")" = 1 ] && grep -q MASTER-ADOPT "$RUN/logs/master-0.log" ||
  fail "the restarted chief did not adopt the ps: $(grep -h 'MASTER-FRESH\|MASTER-RESUME\|MASTER-ADOPT' "$RUN/logs/master-0.log")"
adopted=$(grep -o "MASTER-ADOPT every ps serves the plan at step [0-9]*" "$RUN/logs/master-0.log" | grep -o "[0-9]*$")
ge "$adopted" "$killed_at" || fail "adopted at step $adopted, behind the step $killed_at evaluated before the kill"
grep -q "WORKER-ROLLBACK" "$RUN"/logs/worker-*.log && fail "a worker rolled back"
pass "a chief killed at step $killed_at with no checkpoint yet: the restarted chief adopted the ps at step $adopted"
