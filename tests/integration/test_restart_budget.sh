#!/bin/bash
# The supervisor's restart budget: a child that keeps failing soon after each start (here worker 1, killed with
# kill -9 as soon as each new process appears) is restarted 5 times with a doubling backoff, then the run stops
# with exit 1 naming the child, its status and "after restarts", and no process of the cluster is left behind.
. "$(dirname "$0")/lib.sh"
experiment "$WORK/exp.json" training.max_steps=1000000 eval.every_steps=0 checkpoint.every_steps=0 training.report_every=50
RUN=$WORK/run
"$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$RUN" >"$WORK/local.log" 2>&1 &
LP=$!
PIDS+=($LP)
wait_for 120 grep -q "LOCAL-SPAWN worker 1" "$WORK/local.log" || fail "no worker 1 spawned: $(tail -3 "$WORK/local.log")"
killed=() last=""
# Backoffs 0.5 + 1 + 2 + 4 + 8 s: the budget is spent in about 16 s of kills; 90 s is generous.
t0=$SECONDS
while kill -0 "$LP" 2>/dev/null && [ $((SECONDS - t0)) -lt 90 ]; do
  p=$(pid_of "$RUN" worker 1)
  if [ -n "$p" ] && [ "$p" != "$last" ]; then
    kill -9 "$p" 2>/dev/null && killed+=("$p") && last=$p
  fi
  sleep 0.1
done
wait_exit 60 "$LP"; rc=$?
[ "$rc" = 1 ] || fail "after ${#killed[@]} kills of worker 1: exit $rc, want 1: $(tail -2 "$WORK/local.log")"
[ "${#killed[@]}" = 6 ] || fail "worker 1 was started ${#killed[@]} times, want 6 (the first and 5 restarts)"
for i in 1 2 3 4 5; do
  grep -q "LOCAL-RESTART worker 1 exited with status 137 .*restarting ($i of 5)" "$WORK/local.log" || fail "no restart $i of 5 logged"
done
grep -q "restarting (6 of 5)" "$WORK/local.log" && fail "a sixth restart"
grep -q "worker 1 exited with status 137 after restarts" "$WORK/local.log" || fail "the final error does not name worker 1: $(tail -2 "$WORK/local.log")"
left=$(pgrep -f -- "--run-dir $RUN\$" | tr '\n' ' ')
[ -z "$left" ] || wait_for 30 bash -c "! pgrep -f -- '--run-dir $RUN\$' >/dev/null" || fail "processes of the cluster left: $left"
pass "worker 1 killed ${#killed[@]} times: restarted 5 times, then the run stopped with exit 1 and nothing left"
