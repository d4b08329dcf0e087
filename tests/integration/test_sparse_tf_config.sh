#!/bin/bash
# TF_CONFIG as TensorFlow's resolver reads it, to its sparse form (#25 item 6): each worker's cluster lists only
# the tasks it talks to (the chief, every ps, itself as {"INDEX": "host:port"}); the run completes, and worker 0
# reads shard 0 of the chief's 2 (not of the 1 its own TF_CONFIG lists). A chief whose worker job has a gap is
# refused (exit 2) naming the missing task.
. "$(dirname "$0")/lib.sh"
experiment "$WORK/exp.json" training.max_steps=60 eval.every_steps=0 training.report_every=20
c=$(free_port); p0=$(free_port); w0=$(free_port); w1=$(free_port)
base="\"chief\":[\"127.0.0.1:$c\"],\"ps\":[\"127.0.0.1:$p0\"]"
full="{\"cluster\":{$base,\"worker\":[\"127.0.0.1:$w0\",\"127.0.0.1:$w1\"]}"
start() { # start NAME TF_CONFIG ARGS...
  local name=$1 tf=$2; shift 2
  TF_CONFIG="$tf" "$TFX_NODE" --run-dir "$WORK/run" "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
}
sparse() { echo "{\"cluster\":{$base,\"worker\":{\"$1\":\"127.0.0.1:$2\"}},\"task\":{\"type\":\"worker\",\"index\":$1}}"; }
start ps0 "$full,\"task\":{\"type\":\"ps\",\"index\":0}}"
start worker0 "$(sparse 0 "$w0")"
start worker1 "$(sparse 1 "$w1")"
start chief "$full,\"task\":{\"type\":\"chief\",\"index\":0}}" --config "$WORK/exp.json"
for i in 0 1 2 3; do
  wait_exit 300 "${PIDS[$i]}"; rc=$?
  [ "$rc" = 0 ] || fail "process $i exited $rc"
done
grep -q "WORKER-COUNT.*shard 0 of 2" "$WORK/worker0.log" || fail "worker 0 did not take the chief's worker count"
[ -f "$WORK/run/checkpoints/ckpt-000000000060/manifest.json" ] || fail "no final checkpoint at step 60 (last train step $(metric "$WORK/run/metrics.jsonl" train step))"
# The chief talks to every worker: a gap in its worker job is refused before anything starts.
out=$(TF_CONFIG="{\"cluster\":{$base,\"worker\":{\"1\":\"127.0.0.1:$w1\"}},\"task\":{\"type\":\"chief\",\"index\":0}}" \
  "$TFX_NODE" --run-dir "$WORK/run2" --config "$WORK/exp.json" 2>&1); rc=$?
[ "$rc" = 2 ] || fail "a chief with a sparse worker job exited $rc (want 2): $out"
echo "$out" | grep -q "cluster.worker lists no task 0" || fail "the refusal does not name the missing task: $out"
pass "sparse TF_CONFIG: workers listing only their own task trained with the chief's count; a chief's gap refused"
