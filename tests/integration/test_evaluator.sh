#!/bin/bash
# TF_CONFIG with an evaluator task: the evaluator (outside the training cluster) evaluates every checkpoint the
# run writes, the chief does not evaluate, and the evaluator stops after the checkpoint at max_steps.
. "$(dirname "$0")/lib.sh"
small_mlp "$WORK/exp.json" training.max_steps=200 checkpoint.every_steps=100 eval.every_steps=100 training.report_every=50
c0=$(free_port); p0=$(free_port); w0=$(free_port); e0=$(free_port)
cluster="\"cluster\":{\"chief\":[\"127.0.0.1:$c0\"],\"ps\":[\"127.0.0.1:$p0\"],\"worker\":[\"127.0.0.1:$w0\"],\"evaluator\":[\"127.0.0.1:$e0\"]}"
start() { # start NAME TYPE ARGS...
  local name=$1 type=$2; shift 2
  TF_CONFIG="{$cluster,\"task\":{\"type\":\"$type\",\"index\":0}}" "$TFX_NODE" --run-dir "$WORK/run" "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
}
start evaluator evaluator --config "$WORK/exp.json"
start chief chief --config "$WORK/exp.json"
start ps ps
start worker worker
for _ in $(seq 1 50); do "$TFX_NODE" status --address "127.0.0.1:$e0" 2>/dev/null | grep -q "role=evaluator" && break; sleep 0.2; done
for i in 0 1 2 3; do
  wait_exit 300 "${PIDS[$i]}"; rc=$?
  [ "$rc" = 0 ] || fail "process $i exited $rc"
done
python3 - "$WORK/run/metrics.jsonl" <<'PY' || fail "eval lines are not the evaluator's"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' in l]
assert ev and all(r.get("evaluator") == 0 for r in ev), ev
assert ev[-1]["step"] == 200 and ev[-1]["accuracy"] > 0.6, ev[-1]
PY
# A chief started with --max-steps 150 (the experiment says 200): the evaluator stops after the checkpoint at 150
# instead of waiting for a step that never comes.
rm -rf "$WORK/run"; PIDS=()
start evaluator evaluator --config "$WORK/exp.json"
start chief chief --config "$WORK/exp.json" --max-steps 150
start ps ps
start worker worker
for i in 0 1 2 3; do
  wait_exit 300 "${PIDS[$i]}"; rc=$?
  [ "$rc" = 0 ] || fail "short run: process $i exited $rc (the evaluator waited for max_steps 200?)"
done
python3 - "$WORK/run/metrics.jsonl" <<'PY' || fail "short run: the evaluator did not evaluate step 150"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' in l]
assert ev and ev[-1]["step"] == 150 and ev[-1].get("evaluator") == 0, ev
PY
# TensorFlow's train_and_evaluate layout: the evaluator is a task outside the cluster (no address of its own).
rm -rf "$WORK/run"; PIDS=()
TF_CONFIG="{\"cluster\":{\"chief\":[\"127.0.0.1:$c0\"],\"ps\":[\"127.0.0.1:$p0\"],\"worker\":[\"127.0.0.1:$w0\"]},\"task\":{\"type\":\"evaluator\",\"index\":\"0\"}}" \
  "$TFX_NODE" --run-dir "$WORK/run" --config "$WORK/exp.json" >"$WORK/evaluator.log" 2>&1 &
PIDS+=($!)
cluster="\"cluster\":{\"chief\":[\"127.0.0.1:$c0\"],\"ps\":[\"127.0.0.1:$p0\"],\"worker\":[\"127.0.0.1:$w0\"]}"
start chief chief --config "$WORK/exp.json"
start ps ps
start worker worker
for i in 0 1 2 3; do
  wait_exit 300 "${PIDS[$i]}"; rc=$?
  [ "$rc" = 0 ] || fail "evaluator outside the cluster: process $i exited $rc"
done
python3 - "$WORK/run/metrics.jsonl" <<'PY' || fail "the evaluator outside the cluster did not evaluate step 200"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' in l]
assert any(r.get("evaluator") == 0 and r["step"] == 200 for r in ev), ev
PY
pass "evaluator task evaluated the checkpoints up to step 200, stopped at a chief's --max-steps, and ran outside the cluster as TensorFlow lays it out"
