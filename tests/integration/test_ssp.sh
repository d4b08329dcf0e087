#!/bin/bash
# Bounded staleness at the cluster level: with training.mode=ssp and staleness 3, a worker may run at most 3
# clocks ahead of the slowest. Worker 1 of a local cluster is stopped (SIGSTOP) for 4 s: the ps's version (one a
# push) then moves by at most staleness + 2 (worker 0's allowed lead, plus a push in flight at the stop), and
# the run finishes once worker 1 goes on. The same pause in async mode lets worker 0 run on (the version moves by
# far more): the measurement can tell the two apart.
. "$(dirname "$0")/lib.sh"
# paused MODE: writes to WORK/MODE.moved how far ps 0's version moved while worker 1 was stopped for 4 s (in this
# shell, not a $(...) subshell, so that a failure fails the test and cleanup knows the cluster's pid).
paused() {
  local run=$WORK/run-$1
  experiment "$WORK/$1.json" training.mode="\"$1\"" training.staleness=3 training.max_steps=600 eval.every_steps=0 \
    checkpoint.every_steps=0 training.report_every=50
  "$TFX_NODE" local --config "$WORK/$1.json" --run-dir "$run" >"$WORK/$1.log" 2>&1 &
  local lp=$! w v0 v1
  PIDS+=($lp)
  wait_for 120 grep -q "LOCAL-SPAWN ps 0" "$WORK/$1.log" || fail "$1: no ps 0: $(tail -2 "$WORK/$1.log")"
  local ps; ps=$(grep -o "LOCAL-SPAWN ps 0: pid [0-9]* at [^ ]*" "$WORK/$1.log" | awk '{print $NF}')
  version() { "$TFX_NODE" status --address "$ps" 2>/dev/null | grep -o "version=[0-9]*" | cut -d= -f2; }
  going() { v=$(version); [ -n "$v" ] && [ "$v" -ge 50 ]; }
  wait_for 120 going || fail "$1: training did not reach version 50: $(tail -2 "$WORK/$1.log")"
  w=$(pid_of "$run" worker 1)
  [ -n "$w" ] || fail "$1: no worker 1"
  kill -STOP "$w"
  sleep 0.5 # a push of worker 1 in flight lands
  v0=$(version)
  sleep 4
  v1=$(version)
  kill -CONT "$w"
  wait_exit 300 "$lp" >/dev/null || fail "$1: the run failed after the pause: $(tail -2 "$WORK/$1.log")"
  [ -n "$v0" ] && [ -n "$v1" ] || fail "$1: no version from ps 0 ($v0, $v1)"
  echo $((v1 - v0)) >"$WORK/$1.moved"
}
paused ssp; ssp=$(cat "$WORK/ssp.moved")
[ "$ssp" -le 5 ] || fail "ssp (staleness 3): the version moved by $ssp while worker 1 was stopped, want <= 5"
paused async; async=$(cat "$WORK/async.moved")
[ "$async" -gt 20 ] || fail "async: the version moved by only $async while worker 1 was stopped: the measurement cannot see a lead"
pass "ssp staleness 3: version moved by $ssp while worker 1 was stopped for 4 s (async: $async)"
