#!/bin/bash
# A TFJob with only ps and workers (no chief): worker 0 takes the chief's duties, as in TensorFlow. Every
# process is started by hand from its own TF_CONFIG, as Kubernetes would; the run completes and evaluates.
. "$(dirname "$0")/lib.sh"
experiment "$WORK/exp.json" training.max_steps=150 eval.every_steps=0 training.report_every=50
p0=$(free_port); w0=$(free_port); w1=$(free_port)
cluster="\"cluster\":{\"ps\":[\"127.0.0.1:$p0\"],\"worker\":[\"127.0.0.1:$w0\",\"127.0.0.1:$w1\"]}"
start() { # start NAME TYPE INDEX ARGS...
  local name=$1 type=$2 index=$3; shift 3
  TF_CONFIG="{$cluster,\"task\":{\"type\":\"$type\",\"index\":$index}}" "$TFX_NODE" --run-dir "$WORK/run" "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
}
start ps0 ps 0
start worker1 worker 1
start worker0 worker 0 --config "$WORK/exp.json"
for i in 0 1 2; do
  wait_exit 300 "${PIDS[$i]}"; rc=$?
  [ "$rc" = 0 ] || fail "process $i exited $rc"
done
grep -q "WORKER-CHIEF" "$WORK/worker0.log" || fail "worker 0 did not take the chief's duties"
acc=$(metric "$WORK/run/metrics.jsonl" eval accuracy)
ge "$acc" 0.6 || fail "accuracy $acc after 150 steps"
ls "$WORK"/run/checkpoints/ckpt-000000000150/manifest.json >/dev/null || fail "no final checkpoint"
pass "no chief: worker 0 ran the chief's duties (accuracy $acc)"
