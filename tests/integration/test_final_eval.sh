#!/bin/bash
# The end of a run between its final checkpoint and its final evaluation (issue 30, items 8 and 9). The window is
# held open for real: the chief is stopped (SIGSTOP) once a checkpoint exists, the workers train on to max_steps
# and wait there, then they are stopped too, so that the chief's STOP to each takes its 500 ms timeout; the chief
# goes on, and is stopped again the moment its final manifest appears, before it evaluates. Then
#  - ps 0 is killed -9 and comes back empty (no replicas) before the chief goes on: the run must end with exit 0
#    and the "done:" line give the accuracy of the final step (an eval line at max_steps), the accuracy `evaluate`
#    gives the final checkpoint (restored into the empty ps); never an earlier step's, nor a failure;
#  - or the chief is killed -9 once the workers have exited 0: the chief the supervisor restarts finds the
#    checkpoint at max_steps and must evaluate and finish without waiting for the workers (which never come back).
. "$(dirname "$0")/lib.sh"
MAX=600
small_mlp "$WORK/exp.json" training.max_steps=$MAX eval.every_steps=200 checkpoint.every_steps=200 \
  training.report_every=1000000 cluster.request_timeout_s=20 cluster.register_timeout_s=20
workers_exited() { [ "$(grep -c "LOCAL-EXIT worker" "$LOG")" -ge 2 ]; }
stopped() { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = T ]; }

# stop_after_final_ckpt NAME: starts a run and returns with its chief ($CHIEF) stopped right after the final
# checkpoint's manifest was written, before the final evaluation; the workers are stopped ($WORKERS).
stop_after_final_ckpt() {
  RUN=$WORK/$1
  LOG=$WORK/$1.log
  "$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$RUN" "${@:2}" >"$LOG" 2>&1 &
  LP=$!
  PIDS+=($LP)
  wait_for 300 has_ckpt "$RUN" || fail "$1: no checkpoint within 300 s"
  CHIEF=$(pid_of "$RUN" chief 0)
  [ -n "$CHIEF" ] || fail "$1: no chief process"
  kill -STOP "$CHIEF"
  PIDS+=("$CHIEF")
  wait_for 300 at_max "$RUN" || fail "$1: the workers did not reach max_steps within 300 s"
  WORKERS="$(pid_of "$RUN" worker 0) $(pid_of "$RUN" worker 1)"
  kill -STOP $WORKERS
  local manifest
  manifest=$(printf "%s/checkpoints/ckpt-%012d/manifest.json" "$RUN" $MAX)
  rm -f "$WORK/watcher.ready"
  python3 - "$manifest" "$CHIEF" "$WORK/watcher.ready" <<'PY' &
import os, signal, sys, time
path, pid = sys.argv[1], int(sys.argv[2])
open(sys.argv[3], "w").close()  # watching: the chief may go on
end = time.time() + 120
while not os.path.exists(path) and time.time() < end:
    time.sleep(0.002)
os.kill(pid, signal.SIGSTOP)
PY
  local watcher=$!
  # python3's start can take longer than the window (1.3 s through a pyenv shim on a busy machine): the chief goes
  # on only once the watcher watches.
  wait_for 120 test -e "$WORK/watcher.ready" || fail "$1: the watcher did not start"
  kill -CONT "$CHIEF"
  wait "$watcher"
  [ -f "$manifest" ] || fail "$1: no final checkpoint at $MAX"
  stopped "$CHIEF" || fail "$1: the chief is not stopped"
  grep -q "MASTER-EVAL.*step $MAX:" "$RUN/logs/master-0.log" && fail "$1: missed the window: the chief evaluated"
}

# 9: ps 0 lost between the final checkpoint and the final evaluation, without replicas (with them, on by default,
# the backup would be promoted and the ps would not come back empty).
stop_after_final_ckpt ps-lost --set cluster.replicas=0
kill -9 "$(pid_of "$RUN" ps 0)"
wait_for 60 grep -q "LOCAL-RESTART ps 0 exited with status 137" "$LOG" || fail "ps-lost: no restart of ps 0"
kill -CONT "$CHIEF" $WORKERS
wait_exit 120 "$LP"
rc=$?
[ "$rc" != 124 ] || fail "ps-lost: the run did not end within 120 s"
done_line=$(grep "done:" "$LOG")
last=$(metric "$RUN/metrics.jsonl" eval step)
[ "$rc" = 0 ] || fail "ps-lost: exit $rc with '$done_line' (ps 0 came back empty and was restored from the final checkpoint: its step can be evaluated)"
[ "$last" = "$MAX" ] || fail "ps-lost: exit 0 with '$done_line', but the last eval line is of step $last"
acc=$(metric "$RUN/metrics.jsonl" eval accuracy)
echo "$done_line" | grep -q "done: step $MAX, eval accuracy $(printf %.4f "$acc")" ||
  fail "ps-lost: '$done_line' is not the accuracy $acc of step $MAX"
# the weights evaluated are the final checkpoint's (restored into the empty ps), not an empty ps's
"$TFX_NODE" evaluate --run-dir "$RUN" --checkpoint $MAX >"$WORK/evaluate.log" 2>&1 || fail "evaluate: $(tail -1 "$WORK/evaluate.log")"
want=$(sed -n 's/^step [0-9]*: eval loss [0-9.]* accuracy \([0-9.]*\) .*/\1/p' "$WORK/evaluate.log")
[ -n "$want" ] && [ "$(printf %.4f "$acc")" = "$want" ] ||
  fail "ps-lost: the final evaluation's accuracy $acc is not the final checkpoint's ($want: $(head -1 "$WORK/evaluate.log"))"
echo "ps-lost: the final step was evaluated after ps 0 came back: $done_line (the checkpoint's own: $want)"

# 8: the chief lost after the final checkpoint, the workers gone with exit 0.
stop_after_final_ckpt chief-lost
kill -CONT $WORKERS
wait_for 60 workers_exited || fail "chief-lost: the workers did not exit"
grep -q "LOCAL-RESTART worker" "$LOG" && fail "chief-lost: a worker failed"
kill -9 "$CHIEF"
wait_for 30 grep -q "LOCAL-RESTART master 0 exited with status 137" "$LOG" || fail "chief-lost: no restart of the chief"
wait_exit 60 "$LP"
rc=$?
[ "$rc" != 124 ] ||
  fail "chief-lost: the restarted chief did not finish within 60 s: $(grep -h MASTER-WAIT "$RUN/logs/master-0.log" | tail -1)"
[ "$rc" = 0 ] || fail "chief-lost: the run failed: $(tail -3 "$LOG")"
grep -q "done: step $MAX, eval accuracy 0" "$LOG" || fail "chief-lost: $(grep done: "$LOG")"
[ "$(metric "$RUN/metrics.jsonl" eval step)" = "$MAX" ] || fail "chief-lost: no eval line at step $MAX"

pass "after the final checkpoint: a lost ps is restored and the final step evaluated; a restarted chief finishes alone"
