#!/bin/bash
# tfx-node local's CPU placement (cluster.local_pin_cpus, #26). With 1, each ps and worker, every thread of it
# (ZeroMQ's I/O thread too), may run only on the CPU its LOCAL-PIN line names: ps i on the i-th of local's own CPUs,
# worker j on the (ps + j)-th, modulo their count. Under `taskset` to one CPU, all share that one. With 0, nothing
# is pinned and no LOCAL-PIN line is written.
. "$(dirname "$0")/lib.sh"
small_mlp "$WORK/exp.json" training.max_steps=1000000 eval.every_steps=0 checkpoint.every_steps=0 \
  training.report_every=20
# allowed ID: the CPUs a process or thread may run on, as a sorted comma list (the kernel's Cpus_allowed_list,
# "0-1,3", with its ranges written out; fails once the thread is gone).
allowed() {
  local list part i parts out=()
  list=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null)
  [ -n "$list" ] || return 1
  IFS=, read -r -a parts <<<"$list"
  for part in "${parts[@]}"; do
    for ((i = ${part%-*}; i <= ${part#*-}; i++)); do out+=("$i"); done
  done
  (IFS=,; echo "${out[*]}")
}
# start NAME PIN [TASKSET_CPU]: runs local in the background until it trained a few steps; sets LP.
start() {
  local pre=()
  [ -z "${3:-}" ] || pre=(taskset -c "$3")
  "${pre[@]}" "$TFX_NODE" local --config "$WORK/exp.json" --run-dir "$WORK/$1" --set cluster.local_pin_cpus="$2" \
    >"$WORK/$1.log" 2>&1 &
  LP=$!
  PIDS+=($LP)
  wait_for 300 bash -c "grep -q '\"train\"' '$WORK/$1/metrics.jsonl' 2>/dev/null || ! kill -0 $LP" ||
    fail "$1: no training step within 300 s"
  kill -0 $LP 2>/dev/null || fail "$1: local ended early: $(tail -3 "$WORK/$1.log")"
}
stop() { kill -INT "$LP"; wait_exit 300 "$LP" || fail "local did not stop on SIGINT"; }
# check_pins NAME CPUS: every task's threads allowed exactly its expected CPU of CPUS (a comma list).
check_pins() {
  local name=$1 role index pid cpu want t got n=0
  IFS=, read -r -a cpus <<<"$2"
  for task in "ps 0" "ps 1" "worker 0" "worker 1"; do
    role=${task% *} index=${task#* }
    pid=$(sed -n "s/.*LOCAL-SPAWN $task: pid \([0-9]*\) .*/\1/p" "$WORK/$name.log" | tail -1)
    cpu=$(sed -n "s/.*LOCAL-PIN $task on CPU \([0-9]*\)$/\1/p" "$WORK/$name.log" | tail -1)
    [ -n "$pid" ] && [ -n "$cpu" ] || fail "$name: no LOCAL-SPAWN or LOCAL-PIN line for $task: $(grep LOCAL- "$WORK/$name.log")"
    slot=$([ "$role" = ps ] && echo "$index" || echo $((2 + index)))
    want=${cpus[$((slot % ${#cpus[@]}))]}
    [ "$cpu" = "$want" ] || fail "$name: $task pinned to CPU $cpu, want $want of $2"
    for t in /proc/"$pid"/task/*; do
      got=$(allowed "${t##*/}" 2>/dev/null) || continue # a thread that just ended
      [ "$got" = "$cpu" ] || fail "$name: $task's thread ${t##*/} ($(cat "$t/comm")) may run on CPUs $got, not only $cpu"
      n=$((n + 1))
    done
  done
  echo "$name: 4 processes, $n threads pinned as named"
}
mine=$(allowed $$)
start pinned 1
check_pins pinned "$mine"
stop
last=${mine##*,}
start one 1 "$last"
check_pins one "$last"
stop
start off 0
grep -q LOCAL-PIN "$WORK/off.log" && fail "cluster.local_pin_cpus 0 pinned: $(grep LOCAL-PIN "$WORK/off.log")"
pid=$(sed -n "s/.*LOCAL-SPAWN ps 0: pid \([0-9]*\) .*/\1/p" "$WORK/off.log")
[ "$(allowed "$pid")" = "$mine" ] || fail "off: ps 0 may run on $(allowed "$pid"), not local's $mine"
stop
pass "pinned as named on CPUs $mine (ps i and worker i on CPU i mod the count), all on CPU $last under taskset, none with 0"
