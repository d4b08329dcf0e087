#!/bin/bash
# Bounded staleness at the cluster level: with training.mode=ssp and staleness 3, a worker may run at most 3
# clocks ahead of the slowest. Worker 1 of a local cluster is stopped (SIGSTOP) until ps 0's version stops
# moving: it then has moved by at most staleness + 2 (worker 0's allowed lead, plus a push in flight at the stop),
# and the run goes on once worker 1 does (50 more versions, which worker 0 alone could not push). The same pause in
# async mode lets worker 0 run on (the version moves by far more): the measurement can tell the two apart. Each
# wait ends on the cluster's progress (the version stalls, or moves past what ssp allows), never on a fixed window
# that a fast or a loaded machine would misjudge; the runs have more steps than any machine reaches meanwhile
# (a release build trains 600 in under half a second) and end with Ctrl-C, which must stop them cleanly.
. "$(dirname "$0")/lib.sh"
# paused MODE: writes to WORK/MODE.moved how far ps 0's version moved while worker 1 was stopped (in this
# shell, not a $(...) subshell, so that a failure fails the test and cleanup knows the cluster's pid).
paused() {
  local run=$WORK/run-$1
  experiment "$WORK/$1.json" training.mode="\"$1\"" training.staleness=3 training.max_steps=1000000 eval.every_steps=0 \
    checkpoint.every_steps=0 training.report_every=50
  "$TFX_NODE" local --config "$WORK/$1.json" --run-dir "$run" >"$WORK/$1.log" 2>&1 &
  local lp=$! w v0 v1 v still t0
  PIDS+=($lp)
  wait_for 120 grep -q "LOCAL-SPAWN ps 0" "$WORK/$1.log" || fail "$1: no ps 0: $(tail -2 "$WORK/$1.log")"
  local ps; ps=$(grep -o "LOCAL-SPAWN ps 0: pid [0-9]* at [^ ]*" "$WORK/$1.log" | awk '{print $NF}')
  version() { "$TFX_NODE" status --address "$ps" 2>/dev/null | grep -o "version=[0-9]*" | cut -d= -f2; }
  at_least() { v=$(version); [ -n "$v" ] && [ "$v" -ge "$1" ]; }
  # soon SECONDS CMD...: wait_for with a tight poll (a release build trains a step in a millisecond or two)
  soon() { local n=$(($1 * 50)); shift; until "$@"; do n=$((n - 1)); [ "$n" -gt 0 ] || return 1; sleep 0.02; done; }
  spawned() { w=$(pid_of "$run" worker 1); [ -n "$w" ]; }
  wait_for 120 spawned || fail "$1: no worker 1"
  soon 120 at_least 50 || fail "$1: training did not reach version 50: $(tail -2 "$WORK/$1.log")"
  kill -STOP "$w"
  sleep 0.5 # a push of worker 1 in flight lands
  v0=$(version)
  [ -n "$v0" ] || fail "$1: no version from ps 0 after stopping worker 1"
  # Until the version stands still for 12 polls in a row, about 3 s (ssp: worker 0 waits at its lead), or moves by
  # more than 20 (a lead no staleness of 3 allows); the 120 s cap only guards against a hang.
  v1=$v0 still=0 t0=$SECONDS
  while [ "$still" -lt 12 ] && [ $((v1 - v0)) -le 20 ]; do
    [ $((SECONDS - t0)) -lt 120 ] || fail "$1: the version still moved after 120 s ($v0 -> $v1)"
    sleep 0.25
    v=$(version)
    [ -n "$v" ] || fail "$1: no version from ps 0 while worker 1 was stopped ($v0, ): $(tail -2 "$WORK/$1.log")"
    if [ "$v" = "$v1" ]; then still=$((still + 1)); else still=0; fi
    v1=$v
  done
  kill -CONT "$w"
  soon 120 at_least $((v1 + 50)) || fail "$1: the run did not go on after the pause ($v1): $(tail -2 "$WORK/$1.log")"
  kill -INT "$lp" # Ctrl-C: the supervisor stops the cluster, which exits 0
  wait_exit 300 "$lp" >/dev/null || fail "$1: the run failed after the pause: $(tail -2 "$WORK/$1.log")"
  echo $((v1 - v0)) >"$WORK/$1.moved"
}
paused ssp; ssp=$(cat "$WORK/ssp.moved")
[ "$ssp" -le 5 ] || fail "ssp (staleness 3): the version moved by $ssp while worker 1 was stopped, want <= 5"
paused async; async=$(cat "$WORK/async.moved")
[ "$async" -gt 20 ] || fail "async: the version moved by only $async while worker 1 was stopped: the measurement cannot see a lead"
pass "ssp staleness 3: version moved by $ssp while worker 1 was stopped (async: $async)"
